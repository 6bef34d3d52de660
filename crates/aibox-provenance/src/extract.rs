//! Safe extraction. Archives and local directories are read into a validated in-memory
//! [`Payload`] (every entry checked before anything touches the disk); [`write_tree`]
//! then materialises a payload through a private staging directory that is renamed into
//! place, creating each file exclusively with a normalised mode.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::Path;
use std::rc::Rc;

use crate::error::{ProvenanceError, Result, show_name};

/// Limits that protect against decompression bombs and absurd trees.
#[derive(Debug, Clone)]
pub struct ExtractLimits {
    /// Most entries (files and directories).
    pub max_entries: usize,
    /// Most bytes of file content in total.
    pub max_total_bytes: u64,
    /// Longest path below the top directory, in bytes.
    pub max_path_len: usize,
    /// Deepest path below the top directory, in components.
    pub max_depth: usize,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        Self {
            max_entries: 200_000,
            max_total_bytes: 1024 * 1024 * 1024,
            max_path_len: 240,
            max_depth: 16,
        }
    }
}

/// One file of a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadFile {
    /// Contents.
    pub data: Vec<u8>,
    /// Whether the release marks it executable (written 0755, else 0644).
    pub executable: bool,
}

/// A validated release tree: `/`-separated relative path → file. Directories are implied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    /// The files, sorted by path.
    pub files: BTreeMap<String, PayloadFile>,
    /// The tag taken from the archive's `processkit-<tag>/` top directory, if any.
    pub top_tag: Option<String>,
}

struct Checker<'a> {
    limits: &'a ExtractLimits,
    entries: usize,
    total: u64,
    seen: BTreeSet<String>,
    folded: HashMap<String, String>,
    dirs: BTreeSet<String>,
}

impl<'a> Checker<'a> {
    fn new(limits: &'a ExtractLimits) -> Self {
        Self {
            limits,
            entries: 0,
            total: 0,
            seen: BTreeSet::new(),
            folded: HashMap::new(),
            dirs: BTreeSet::new(),
        }
    }

    fn count(&mut self) -> Result<()> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(ProvenanceError::ArchiveLimit {
                reason: format!("more than {} entries", self.limits.max_entries),
            });
        }
        Ok(())
    }

    fn add_bytes(&mut self, entry: &str, n: u64) -> Result<()> {
        self.total += n;
        if self.total > self.limits.max_total_bytes {
            return Err(ProvenanceError::ArchiveLimit {
                reason: format!(
                    "more than {} bytes unpacked (reached at `{entry}`)",
                    self.limits.max_total_bytes
                ),
            });
        }
        Ok(())
    }

    /// Records a validated relative path, rejecting duplicates, case/fold collisions and
    /// file/directory clashes.
    fn record(&mut self, rel: &str, is_dir: bool) -> Result<()> {
        let reject = |reason: &str| ProvenanceError::UnsafeEntry {
            entry: rel.to_owned(),
            reason: reason.to_owned(),
        };
        if !self.seen.insert(rel.to_owned()) {
            return Err(reject("duplicate entry"));
        }
        let folded = rel.to_ascii_lowercase();
        if let Some(other) = self.folded.insert(folded, rel.to_owned()) {
            return Err(ProvenanceError::UnsafeEntry {
                entry: rel.to_owned(),
                reason: format!("collides with `{other}` on case-insensitive file systems"),
            });
        }
        // A parent must not be a file; a file must not be a known directory.
        let mut prefix = String::new();
        for comp in rel.split('/') {
            if !prefix.is_empty() {
                if self.seen.contains(&prefix) && !self.dirs.contains(&prefix) {
                    return Err(reject("a parent of this entry is a file"));
                }
                self.dirs.insert(prefix.clone());
                prefix.push('/');
            }
            prefix.push_str(comp);
        }
        if is_dir {
            self.dirs.insert(rel.to_owned());
        } else if self.dirs.contains(rel) {
            return Err(reject("a file has the same path as a directory"));
        }
        Ok(())
    }
}

/// Validates a raw entry name and returns its components. Rejects NUL and control
/// characters, non-ASCII (Unicode look-alikes), backslashes, absolute paths, drive
/// prefixes, `.`/`..`/empty components, and paths beyond the limits.
pub fn check_name(raw: &[u8], limits: &ExtractLimits) -> Result<Vec<String>> {
    let reject = |reason: &str| ProvenanceError::UnsafeEntry {
        entry: show_name(raw),
        reason: reason.to_owned(),
    };
    if raw.is_empty() {
        return Err(reject("empty name"));
    }
    if raw.contains(&0) {
        return Err(reject("NUL byte in the name"));
    }
    if let Some(b) = raw.iter().find(|b| b.is_ascii_control()) {
        return Err(reject(&format!("control character 0x{b:02x} in the name")));
    }
    if !raw.is_ascii() {
        return Err(reject(
            "non-ASCII name (Unicode names can collide after normalisation)",
        ));
    }
    if raw.contains(&b'\\') {
        return Err(reject("backslash in the name"));
    }
    if raw[0] == b'/' {
        return Err(reject("absolute path"));
    }
    let text = std::str::from_utf8(raw).map_err(|_| reject("not UTF-8"))?;
    let trimmed = text.strip_suffix('/').unwrap_or(text);
    let comps: Vec<&str> = trimmed.split('/').collect();
    if comps[0].len() >= 2 && comps[0].as_bytes()[1] == b':' {
        return Err(reject("drive prefix"));
    }
    for c in &comps {
        match *c {
            "" => return Err(reject("empty path component")),
            "." => return Err(reject("`.` path component")),
            ".." => return Err(reject("`..` path component escapes the directory")),
            _ => {}
        }
    }
    if comps.len() > limits.max_depth + 1 {
        return Err(reject(&format!("deeper than {} levels", limits.max_depth)));
    }
    if trimmed.len() > limits.max_path_len + 64 {
        return Err(reject(&format!(
            "path longer than {} bytes",
            limits.max_path_len
        )));
    }
    Ok(comps.into_iter().map(str::to_owned).collect())
}

/// Header bytes allowed per entry beyond its contents (header block, padding, modest
/// PAX records), and for the archive as a whole (long names, global headers).
const HEADER_ALLOWANCE_PER_ENTRY: u64 = 2 * 1024;
const HEADER_ALLOWANCE: u64 = 1024 * 1024;

/// Most decompressed bytes an archive within `limits` can need.
fn stream_cap(limits: &ExtractLimits) -> u64 {
    limits
        .max_total_bytes
        .saturating_add((limits.max_entries as u64).saturating_mul(HEADER_ALLOWANCE_PER_ENTRY))
        .saturating_add(HEADER_ALLOWANCE)
}

/// A reader that fails once more than `left` bytes came through (and says so in `hit`).
struct CappedReader<R> {
    inner: R,
    left: u64,
    hit: Rc<Cell<bool>>,
}

impl<R> CappedReader<R> {
    /// The reader capped for `limits`, the flag it raises, and the cap.
    fn new(inner: R, limits: &ExtractLimits) -> (Self, Rc<Cell<bool>>, u64) {
        let hit = Rc::new(Cell::new(false));
        let cap = stream_cap(limits);
        let reader = Self {
            inner,
            left: cap,
            hit: Rc::clone(&hit),
        };
        (reader, hit, cap)
    }
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let Some(left) = self.left.checked_sub(n as u64) else {
            self.hit.set(true);
            return Err(std::io::Error::other("archive size limit reached"));
        };
        self.left = left;
        Ok(n)
    }
}

/// Reads and validates a gzip-compressed tar archive entirely in memory. The archive must
/// hold exactly one top directory `processkit-<tag>/` (stripped; the tag is returned in
/// [`Payload::top_tag`]); with `expected_tag` the tag must match.
pub fn read_archive(
    gz: &[u8],
    what: &str,
    expected_tag: Option<&str>,
    limits: &ExtractLimits,
) -> Result<Payload> {
    let corrupt = |e: &dyn std::fmt::Display| ProvenanceError::CorruptArchive {
        what: what.to_owned(),
        reason: e.to_string(),
    };
    // Header data (PAX extensions, GNU long names) is read by `tar` before an entry is
    // seen, so the whole decompressed stream is capped: contents plus a header allowance.
    let (capped, hit, cap) = CappedReader::new(flate2::read::GzDecoder::new(gz), limits);
    let corrupt = |e: &dyn std::fmt::Display| {
        if hit.get() {
            ProvenanceError::ArchiveLimit {
                reason: format!(
                    "more than {cap} bytes of decompressed archive (file contents plus \
                     headers, including PAX and GNU long-name data)"
                ),
            }
        } else {
            corrupt(e)
        }
    };
    let mut archive = tar::Archive::new(capped);
    let mut checker = Checker::new(limits);
    let mut payload = Payload::default();
    let mut top: Option<String> = None;
    for entry in archive.entries().map_err(|e| corrupt(&e))? {
        let mut entry = entry.map_err(|e| corrupt(&e))?;
        checker.count()?;
        let raw = entry.path_bytes().into_owned();
        let shown = show_name(&raw);
        let reject = |reason: &str| ProvenanceError::UnsafeEntry {
            entry: shown.clone(),
            reason: reason.to_owned(),
        };
        let kind = entry.header().entry_type();
        let is_dir = match kind {
            tar::EntryType::Regular => false,
            tar::EntryType::Directory => true,
            tar::EntryType::XGlobalHeader => continue,
            tar::EntryType::Symlink => return Err(reject("symbolic link")),
            tar::EntryType::Link => return Err(reject("hard link")),
            tar::EntryType::Char => return Err(reject("character device")),
            tar::EntryType::Block => return Err(reject("block device")),
            tar::EntryType::Fifo => return Err(reject("FIFO")),
            other => {
                return Err(reject(&format!(
                    "unsupported entry type {:?}",
                    other.as_byte() as char
                )));
            }
        };
        let comps = check_name(&raw, limits)?;
        match &top {
            None => top = Some(comps[0].clone()),
            Some(t) if *t != comps[0] => {
                return Err(reject(&format!("outside the single top directory `{t}/`")));
            }
            Some(_) => {}
        }
        if comps.len() == 1 {
            if !is_dir {
                return Err(reject(
                    "a file at the top level (expected one top directory)",
                ));
            }
            continue;
        }
        let rel = comps[1..].join("/");
        checker.record(&rel, is_dir)?;
        if is_dir {
            continue;
        }
        let size = entry.header().size().map_err(|e| corrupt(&e))?;
        checker.add_bytes(&rel, size)?;
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        (&mut entry)
            .take(size.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| corrupt(&e))?;
        if data.len() as u64 != size {
            return Err(reject("content length differs from the header"));
        }
        let mode = entry.header().mode().unwrap_or(0o644);
        payload.files.insert(
            rel,
            PayloadFile {
                data,
                executable: mode & 0o111 != 0,
            },
        );
    }
    payload.top_tag = Some(top_tag(top, what, expected_tag)?);
    Ok(payload)
}

/// The tag of the archive's single top directory `processkit-<tag>/`, checked against
/// the requested version.
fn top_tag(top: Option<String>, what: &str, expected_tag: Option<&str>) -> Result<String> {
    let top = top.ok_or_else(|| ProvenanceError::Layout {
        what: what.to_owned(),
        reason: "the archive is empty".to_owned(),
    })?;
    let tag = top
        .strip_prefix("processkit-")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ProvenanceError::Layout {
            what: what.to_owned(),
            reason: format!("top directory `{top}/` is not `processkit-<tag>/`"),
        })?;
    if let Some(expected) = expected_tag
        && expected != tag
    {
        return Err(ProvenanceError::Layout {
            what: what.to_owned(),
            reason: format!("top directory names {tag}, but version {expected} was requested"),
        });
    }
    Ok(tag.to_owned())
}

/// The kernel pseudo-file system (`/proc`, `/sys`, `/dev`) a canonical path lies in.
pub(crate) fn pseudo_filesystem(canonical: &Path) -> Option<&'static str> {
    ["/proc", "/sys", "/dev"]
        .into_iter()
        .find(|fs| canonical.starts_with(fs))
}

/// Reads a local regular file of at most `cap` bytes. Special files (devices, FIFOs,
/// sockets) and files in kernel pseudo-file systems are refused before they are opened:
/// they may block or never end. A larger file fails with `FileTooLarge`.
pub(crate) fn read_regular(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind};
    let meta = fs_err::metadata(path)?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (a directory, device, FIFO or socket)",
        ));
    }
    if let Some(fs) = pseudo_filesystem(&fs_err::canonicalize(path)?) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("inside {fs}, a kernel pseudo-file system"),
        ));
    }
    let mut bytes = Vec::new();
    fs_err::File::open(path)?
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(Error::new(
            ErrorKind::FileTooLarge,
            format!("is larger than {cap} bytes"),
        ));
    }
    Ok(bytes)
}

/// Reads and validates a local directory (the payload root, with `PROVENANCE.toml`
/// directly inside). Symlinks and special files are rejected like archive entries, and
/// so is a root inside `/proc`, `/sys` or `/dev`.
pub fn read_dir(root: &Path, limits: &ExtractLimits) -> Result<Payload> {
    let canonical =
        fs_err::canonicalize(root).map_err(|e| ProvenanceError::io("inspect", root, e))?;
    if let Some(fs) = pseudo_filesystem(&canonical) {
        return Err(ProvenanceError::UnsafeEntry {
            entry: root.display().to_string(),
            reason: format!("inside {fs}, a kernel pseudo-file system"),
        });
    }
    let mut checker = Checker::new(limits);
    let mut payload = Payload::default();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel_dir)) = stack.pop() {
        let mut names = Vec::new();
        for item in fs_err::read_dir(&dir).map_err(|e| ProvenanceError::io("list", &dir, e))? {
            let item = item.map_err(|e| ProvenanceError::io("list", &dir, e))?;
            names.push(item.file_name());
        }
        names.sort();
        for name in names {
            checker.count()?;
            let path = dir.join(&name);
            let rel = if rel_dir.is_empty() {
                name.to_string_lossy().into_owned()
            } else {
                format!("{rel_dir}/{}", name.to_string_lossy())
            };
            check_name(rel.as_bytes(), limits)?;
            if name.to_str().is_none() {
                return Err(ProvenanceError::UnsafeEntry {
                    entry: rel,
                    reason: "name is not UTF-8".to_owned(),
                });
            }
            let meta = fs_err::symlink_metadata(&path)
                .map_err(|e| ProvenanceError::io("inspect", &path, e))?;
            let ft = meta.file_type();
            if ft.is_dir() {
                checker.record(&rel, true)?;
                stack.push((path, rel));
            } else if ft.is_file() {
                checker.record(&rel, false)?;
                checker.add_bytes(&rel, meta.len())?;
                // No more than the size checked above, whatever the file streams.
                let mut data = Vec::new();
                fs_err::File::open(&path)
                    .and_then(|f| f.take(meta.len().saturating_add(1)).read_to_end(&mut data))
                    .map_err(|e| ProvenanceError::io("read", &path, e))?;
                if data.len() as u64 != meta.len() {
                    return Err(ProvenanceError::UnsafeEntry {
                        entry: rel,
                        reason: "the file changed size while it was read".to_owned(),
                    });
                }
                payload.files.insert(
                    rel,
                    PayloadFile {
                        data,
                        executable: is_executable(&meta),
                    },
                );
            } else {
                let reason = if ft.is_symlink() {
                    "symbolic link"
                } else {
                    "special file"
                };
                return Err(ProvenanceError::UnsafeEntry {
                    entry: rel,
                    reason: reason.to_owned(),
                });
            }
        }
    }
    Ok(payload)
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &std::fs::Metadata) -> bool {
    false
}

/// Writes `files` (relative path → file) below `dest` through a staging directory created
/// beside it, then renames the staging directory into place (replacing an older `dest`).
/// Files are created exclusively with mode 0644, or 0755 when executable.
pub fn write_tree<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a PayloadFile)>,
    dest: &Path,
) -> Result<()> {
    let parent = dest
        .parent()
        .ok_or_else(|| ProvenanceError::UnsafeDestination {
            path: dest.display().to_string(),
            reason: "no parent directory".to_owned(),
        })?;
    fs_err::create_dir_all(parent).map_err(|e| ProvenanceError::io("create", parent, e))?;
    let staging = tempfile::Builder::new()
        .prefix(".aibox-staging-")
        .tempdir_in(parent)
        .map_err(|e| ProvenanceError::io("create staging directory in", parent, e))?;
    for (rel, file) in files {
        let target = staging.path().join(rel);
        if let Some(dir) = target.parent() {
            fs_err::create_dir_all(dir).map_err(|e| ProvenanceError::io("create", dir, e))?;
        }
        write_new_file(&target, &file.data, file.executable)?;
    }
    if fs_err::symlink_metadata(dest).is_ok() {
        let old = parent.join(format!(
            ".aibox-old-{}",
            dest.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ));
        let _ = fs_err::remove_dir_all(&old);
        fs_err::rename(dest, &old).map_err(|e| ProvenanceError::io("move aside", dest, e))?;
        fs_err::rename(staging.path(), dest)
            .map_err(|e| ProvenanceError::io("move into place", dest, e))?;
        fs_err::remove_dir_all(&old).map_err(|e| ProvenanceError::io("remove", &old, e))?;
    } else {
        fs_err::rename(staging.path(), dest)
            .map_err(|e| ProvenanceError::io("move into place", dest, e))?;
    }
    Ok(())
}

/// Creates a new file (never following or replacing an existing one) with a normalised mode.
pub(crate) fn write_new_file(path: &Path, data: &[u8], executable: bool) -> Result<()> {
    use std::io::Write;
    let mut opts = fs_err::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use fs_err::os::unix::fs::OpenOptionsExt;
        opts.mode(if executable { 0o755 } else { 0o644 });
    }
    let mut f = opts
        .open(path)
        .map_err(|e| ProvenanceError::io("create", path, e))?;
    f.write_all(data)
        .map_err(|e| ProvenanceError::io("write", path, e))?;
    Ok(())
}
