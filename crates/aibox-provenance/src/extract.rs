//! Safe extraction, streaming. An archive is read entry by entry (every entry checked
//! before its bytes touch the disk) and each file's bytes are appended to one new pack
//! file while they are hashed, so the payload is never held in memory: a [`Payload`] is
//! a manifest (path → SHA-256, size, mode, offset in the pack) plus where the bytes
//! live. Local directories are validated and hashed in place. [`write_tree`] materialises files of a payload
//! through a private staging directory that is renamed into place, creating each file
//! exclusively with a normalised mode.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use crate::digest::{Counter, Sha256};
use crate::error::{ProvenanceError, QUOTE_LIMIT, Result, show_name};

/// Limits that protect against decompression bombs and absurd trees. Files are streamed
/// to disk, so the limits are about disk use, not memory.
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

/// One file of a payload: what the manifest records about it.
#[derive(Debug, Clone, Copy)]
pub struct PayloadFile {
    /// SHA-256 of the contents.
    pub sha256: Sha256,
    /// Size in bytes.
    pub size: u64,
    /// Whether the release marks it executable (written 0755, else 0644).
    pub executable: bool,
    /// Where its bytes start in the payload's pack file (an unpacked archive's files one
    /// after another, in archive order); unused by other payloads. Not part of what the
    /// file is: two payloads of the same files are equal wherever their bytes lie.
    pub offset: u64,
}

impl PartialEq for PayloadFile {
    fn eq(&self, other: &Self) -> bool {
        self.sha256 == other.sha256
            && self.size == other.size
            && self.executable == other.executable
    }
}

impl Eq for PayloadFile {}

/// Where the bytes of a payload live.
#[derive(Debug, Clone)]
enum Bytes {
    /// A directory holding the files (a local release directory).
    Dir(Arc<PathBuf>),
    /// A pack file holding every file's bytes at its [`PayloadFile::offset`] (an unpacked
    /// store): one file written per release, not one per release file and folder.
    Pack(Arc<PathBuf>),
    /// A pack in a temporary directory owned by the payload (no download cache): the
    /// pack's path, and the folder itself, held only so that it is removed when the last
    /// clone goes.
    Temp(Arc<PathBuf>, #[allow(dead_code)] Arc<tempfile::TempDir>),
    /// In memory (payloads built by tests and embedders).
    Memory(Arc<BTreeMap<String, Vec<u8>>>),
}

/// A release folder on disk, from [`Payload::folder`].
#[derive(Debug)]
pub enum Folder {
    /// The release's own folder.
    InPlace(PathBuf),
    /// A private copy, removed when this is dropped: the temporary folder and the copy
    /// in it (named as the release folder is).
    Copied(tempfile::TempDir, PathBuf),
}

impl Folder {
    /// Where the folder is.
    pub fn path(&self) -> &Path {
        match self {
            Self::InPlace(p) | Self::Copied(_, p) => p,
        }
    }
}

impl Default for Bytes {
    fn default() -> Self {
        Self::Memory(Arc::default())
    }
}

/// A validated release tree: `/`-separated relative path → file, directories implied.
/// The bytes stay on disk; [`Payload::read`] reads (and re-verifies) one file.
#[derive(Debug, Clone, Default)]
pub struct Payload {
    /// The files, sorted by path; shared by every clone (a plan keeps its payload).
    pub files: Arc<BTreeMap<Arc<str>, PayloadFile>>,
    /// The tag taken from the archive's `processkit-<tag>/` top directory, if any.
    pub top_tag: Option<String>,
    bytes: Bytes,
    /// The unpacked store this payload lives in (see [`crate::Cache::unpacked`]), where
    /// values derived from its bytes are remembered; `None` for other payloads.
    store: Option<PathBuf>,
    /// The catalog's files, parsed as the archive was unpacked (by this process).
    parsed: Option<Arc<crate::catalog::Parsed>>,
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.files == other.files && self.top_tag == other.top_tag
    }
}

impl Eq for Payload {}

impl Payload {
    /// A payload held in memory: `(path, contents, executable)` per file.
    pub fn from_memory(files: impl IntoIterator<Item = (String, Vec<u8>, bool)>) -> Self {
        let mut manifest = BTreeMap::new();
        let mut data = BTreeMap::new();
        for (path, bytes, executable) in files {
            manifest.insert(
                Arc::from(path.as_str()),
                PayloadFile {
                    sha256: Sha256::of(&bytes),
                    size: bytes.len() as u64,
                    executable,
                    offset: 0,
                },
            );
            data.insert(path, bytes);
        }
        Self {
            files: Arc::new(manifest),
            top_tag: None,
            bytes: Bytes::Memory(Arc::new(data)),
            store: None,
            parsed: None,
        }
    }

    /// A payload whose files (listed in `files`, with their offsets) lie in the pack file
    /// `pack`.
    pub(crate) fn in_pack(
        files: BTreeMap<Arc<str>, PayloadFile>,
        top_tag: Option<String>,
        pack: PathBuf,
    ) -> Self {
        Self {
            files: Arc::new(files),
            top_tag,
            bytes: Bytes::Pack(Arc::new(pack)),
            store: None,
            parsed: None,
        }
    }

    /// A payload whose files (listed in `files`) lie below `root`.
    pub(crate) fn on_disk(
        files: BTreeMap<Arc<str>, PayloadFile>,
        top_tag: Option<String>,
        root: PathBuf,
    ) -> Self {
        Self {
            files: Arc::new(files),
            top_tag,
            bytes: Bytes::Dir(Arc::new(root)),
            store: None,
            parsed: None,
        }
    }

    /// Marks the payload as living in the unpacked store `dir`.
    pub(crate) fn in_store(mut self, dir: PathBuf) -> Self {
        self.store = Some(dir);
        self
    }

    /// The unpacked store holding this payload, if it is one.
    pub(crate) fn store(&self) -> Option<&Path> {
        self.store.as_deref()
    }

    /// Keeps what the unpacking of this payload's archive parsed of the catalog's files.
    pub(crate) fn with_parsed(mut self, parsed: crate::catalog::Parsed) -> Self {
        self.parsed = Some(Arc::new(parsed));
        self
    }

    /// The catalog's files parsed while this payload was unpacked, if it was.
    pub(crate) fn parsed(&self) -> Option<&crate::catalog::Parsed> {
        self.parsed.as_deref()
    }

    /// The directory holding the files, when they are files of their own on disk (a
    /// local release folder; an unpacked archive is one pack file, see [`Self::folder`]).
    pub fn root(&self) -> Option<&Path> {
        match &self.bytes {
            Bytes::Dir(p) => Some(p),
            Bytes::Pack(_) | Bytes::Temp(..) | Bytes::Memory(_) => None,
        }
    }

    /// The files below the release folder `dir` (no trailing `/`) as a folder on disk,
    /// for a reader that walks a folder (the skill review): the release's own folder when
    /// its files are files of their own, else a private temporary copy made through
    /// [`Self::stream`], so every byte in it was checked against the manifest.
    ///
    /// # Errors
    /// A file cannot be read or no longer matches the manifest, or the copy cannot be
    /// written.
    pub fn folder(&self, dir: &str) -> Result<Folder> {
        if let Some(root) = self.root() {
            return Ok(Folder::InPlace(root.join(dir)));
        }
        let (temp, copy) = review_folder(dir)?;
        fs_err::create_dir(&copy).map_err(|e| ProvenanceError::io("create", &copy, e))?;
        let prefix = format!("{dir}/");
        for rel in self.below(&prefix) {
            self.write_new(rel, &copy.join(&rel[prefix.len()..]))?;
        }
        Ok(Folder::Copied(temp, copy))
    }

    /// The release folder `dir` as an apply will leave it in the project at `root`
    /// (`after`, see [`crate::after_apply`]), in a private temporary copy for the skill
    /// review: the live folder copied as it is (links as links, never followed; names as
    /// they are), then each file the apply writes taken from the release (every byte
    /// checked against the manifest) and each file it removes taken out.
    ///
    /// # Errors
    /// A file cannot be read or no longer matches the manifest, or the copy cannot be
    /// written.
    pub fn folder_after(
        &self,
        dir: &str,
        root: &Path,
        after: &BTreeMap<String, crate::After>,
    ) -> Result<Folder> {
        let (temp, view) = review_folder(dir)?;
        copy_as_is(&root.join(dir), &view)?;
        let prefix = format!("{dir}/");
        for (path, a) in after {
            let Some(rel) = path.strip_prefix(&prefix) else {
                continue;
            };
            let target = view.join(rel);
            if below_a_link(&view, rel) {
                // The copy keeps a link as a link, so a path below one leads out of the
                // private copy (QA26: a dry run rewrote the files of a folder outside the
                // project that a skill's `mcp` link pointed at). The apply never writes
                // through a link either (it refuses): the review sees the link.
                continue;
            }
            match a {
                crate::After::Live => {}
                crate::After::Absent => remove_entry(&target)?,
                crate::After::Release(release_path) => {
                    remove_entry(&target)?;
                    self.write_new(release_path, &target)?;
                }
            }
        }
        Ok(Folder::Copied(temp, view))
    }

    /// Creates `target` (and its missing parents) with the checked bytes of file `rel`,
    /// never replacing anything (mode 0755 when the release marks it executable).
    fn write_new(&self, rel: &str, target: &Path) -> Result<()> {
        let file = self.entry(rel)?;
        if let Some(parent) = target.parent() {
            fs_err::create_dir_all(parent).map_err(|e| ProvenanceError::io("create", parent, e))?;
        }
        let mut out = create_new_file(target, file.executable)?;
        let mut failed = None;
        self.stream(rel, &mut |chunk| {
            if failed.is_none()
                && let Err(e) = out.write_all(chunk)
            {
                failed = Some(e);
            }
        })?;
        failed.map_or(Ok(()), |e| Err(ProvenanceError::io("write", target, e)))
    }

    /// The verified source of file `rel` for the writer, when its bytes are on disk
    /// (`None` for an in-memory payload or an unknown path).
    ///
    /// Every copy holds the manifest's own path and the payload's folder, so a plan's
    /// sources cost no allocation of their own (a 10x release: 0.8 MB of paths).
    pub fn copy_from(&self, rel: &str) -> Option<aibox_config::CopyFrom> {
        let (rel, file) = self.files.get_key_value(rel)?;
        match &self.bytes {
            Bytes::Dir(dir) => Some(aibox_config::CopyFrom::new(
                Arc::clone(dir),
                Arc::clone(rel),
                *file.sha256.as_bytes(),
                file.size,
            )),
            Bytes::Pack(pack) | Bytes::Temp(pack, _) => Some(aibox_config::CopyFrom::in_pack(
                Arc::clone(pack),
                Arc::clone(rel),
                *file.sha256.as_bytes(),
                file.size,
                file.offset,
            )),
            Bytes::Memory(_) => None,
        }
    }

    /// Whether the payload has a file below the folder `dir` (`/`-terminated): one range
    /// lookup, not a scan of every path.
    pub fn holds_below(&self, dir: &str) -> bool {
        self.below(dir).next().is_some()
    }

    /// The files below the folder `dir` (`/`-terminated), in path order: one range lookup.
    fn below<'a>(&'a self, dir: &'a str) -> impl Iterator<Item = &'a Arc<str>> {
        self.files
            .range::<str, _>((std::ops::Bound::Included(dir), std::ops::Bound::Unbounded))
            .map(|(p, _)| p)
            .take_while(move |p| p.starts_with(dir))
    }

    /// Reads file `rel` whole, checking its size and digest against the manifest. Meant
    /// for the few small files that are parsed (catalog, tiers, MCP configs).
    pub fn read(&self, rel: &str) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.stream(rel, &mut |chunk| out.extend_from_slice(chunk))?;
        Ok(out)
    }

    /// Reads file `rel` as UTF-8 text (see [`Self::read`]); `None` when it is absent.
    pub fn read_text(&self, rel: &str) -> Result<Option<String>> {
        if !self.files.contains_key(rel) {
            return Ok(None);
        }
        let bytes = self.read(rel)?;
        Ok(Some(String::from_utf8(bytes).map_err(|_| {
            ProvenanceError::Catalog {
                path: rel.to_owned(),
                reason: "not UTF-8".to_owned(),
            }
        })?))
    }

    /// The manifest entry of release file `rel`.
    ///
    /// # Errors
    /// [`ProvenanceError::Layout`] when the release has no such file.
    pub fn entry(&self, rel: &str) -> Result<&PayloadFile> {
        self.files.get(rel).ok_or_else(|| ProvenanceError::Layout {
            what: rel.to_owned(),
            reason: "not a file of the release".to_owned(),
        })
    }

    /// Feeds the bytes of file `rel` to `sink` chunk by chunk, then checks size and
    /// digest against the manifest (a mismatch is an error after the last chunk).
    pub fn stream(&self, rel: &str, sink: &mut dyn FnMut(&[u8])) -> Result<()> {
        self.stream_kept(rel, &mut aibox_config::KeptPack::default(), sink)
    }

    /// [`Self::stream`] for a reader of many files: a pack is read through the one `kept`
    /// holds open, not opened again for each file.
    pub fn stream_kept(
        &self,
        rel: &str,
        kept: &mut aibox_config::KeptPack,
        sink: &mut dyn FnMut(&[u8]),
    ) -> Result<()> {
        let file = self.entry(rel)?;
        if let Bytes::Memory(m) = &self.bytes {
            sink(m.get(rel).map_or(&[][..], Vec::as_slice));
            return Ok(());
        }
        let Some(from) = self.copy_from(rel) else {
            return Ok(());
        };
        let f = open_source(&from, kept)?;
        let counter = read_counted(f, &from.path(), file.size, sink)?;
        check_counted(&from, counter)
    }

    /// Streams the files `rels` in order to `sink` (a [`Streamed::Begin`], the bytes,
    /// a [`Streamed::End`] for each), checked against the manifest as [`Self::stream`]
    /// checks them; the first mismatch is the error (after the mismatched file's bytes
    /// were streamed). Files on disk are checked on a helper thread from the very
    /// batches this thread reads and streams, so that the caller's own work on the bytes
    /// (the install fingerprint, a second SHA-256) runs beside the check: a 10x
    /// fingerprint took 23 ms with both on one thread.
    pub(crate) fn stream_checked(
        &self,
        rels: &[&str],
        sink: &mut dyn FnMut(Streamed<'_>),
    ) -> Result<()> {
        if matches!(self.bytes, Bytes::Memory(_)) {
            return self.stream_each(rels, sink);
        }
        std::thread::scope(|scope| {
            // One batch queued, two handed back: at most four in memory.
            let (to_checker, from_reader) = std::sync::mpsc::sync_channel::<Batch>(1);
            let (to_reader, from_checker) = std::sync::mpsc::sync_channel::<Batch>(2);
            let spawned = std::thread::Builder::new()
                .name("aibox-check".to_owned())
                .spawn_scoped(scope, move || {
                    self.check_batches(rels, &from_reader, &to_reader)
                });
            let Ok(checker) = spawned else {
                // No thread could be started: one thread does both.
                return self.stream_each(rels, sink);
            };
            let read = self.read_batches(rels, sink, &to_checker, &from_checker);
            drop(to_checker);
            // The checker's error is the cause when both failed: the reader then only
            // saw the checker stop.
            let verdict = checker
                .join()
                .unwrap_or_else(|_| Err(checking_failed("the checking thread panicked")));
            verdict.and(read)
        })
    }

    /// [`Self::stream_checked`] on this thread alone.
    fn stream_each(&self, rels: &[&str], sink: &mut dyn FnMut(Streamed<'_>)) -> Result<()> {
        let mut kept = aibox_config::KeptPack::default();
        for (i, rel) in rels.iter().enumerate() {
            sink(Streamed::Begin(i));
            self.stream_kept(rel, &mut kept, &mut |chunk| sink(Streamed::Bytes(chunk)))?;
            sink(Streamed::End);
        }
        Ok(())
    }

    /// The reading half of [`Self::stream_checked`]: each file's bytes into batches
    /// (marking where each file ends), streamed to `sink` and handed to the checker.
    fn read_batches(
        &self,
        rels: &[&str],
        sink: &mut dyn FnMut(Streamed<'_>),
        to_checker: &std::sync::mpsc::SyncSender<Batch>,
        from_checker: &std::sync::mpsc::Receiver<Batch>,
    ) -> Result<()> {
        let stopped = || checking_failed("the checking thread stopped");
        let fresh = || Batch::reused_or_new(Some(from_checker), CHECK_BATCH, 0);
        let mut kept = aibox_config::KeptPack::default();
        let mut batch = fresh();
        for (i, rel) in rels.iter().enumerate() {
            let from = self.source_of(rel)?;
            // At most one byte more than verified: a longer file is a mismatch anyway.
            let mut f = open_source(&from, &mut kept)?.take(from.size.saturating_add(1));
            sink(Streamed::Begin(i));
            loop {
                if batch.filled == batch.bytes.len() {
                    let full = std::mem::replace(&mut batch, fresh());
                    to_checker.send(full).map_err(|_| stopped())?;
                }
                let start = batch.filled;
                let n = f
                    .read(&mut batch.bytes[start..])
                    .map_err(|e| ProvenanceError::io("read", from.path(), e))?;
                if n == 0 {
                    break;
                }
                batch.filled += n;
                sink(Streamed::Bytes(&batch.bytes[start..batch.filled]));
            }
            sink(Streamed::End);
            batch.ends.push(batch.filled);
        }
        if !batch.ends.is_empty() {
            to_checker.send(batch).map_err(|_| stopped())?;
        }
        Ok(())
    }

    /// The source of `rel`, a file of a payload on disk (every one has a source).
    fn source_of(&self, rel: &str) -> Result<aibox_config::CopyFrom> {
        self.copy_from(rel).ok_or_else(|| ProvenanceError::Layout {
            what: rel.to_owned(),
            reason: "not a file of the release on disk".to_owned(),
        })
    }

    /// The checking half of [`Self::stream_checked`]: hashes each file from the batches
    /// and checks it against the manifest, handing the batches back for reuse.
    fn check_batches(
        &self,
        rels: &[&str],
        from_reader: &std::sync::mpsc::Receiver<Batch>,
        to_reader: &std::sync::mpsc::SyncSender<Batch>,
    ) -> Result<()> {
        let mut files = rels.iter();
        let mut counter = Counter::default();
        for mut batch in from_reader {
            batch.hash_files(&mut counter, |file_read| {
                let rel = files
                    .next()
                    .ok_or_else(|| checking_failed("more files were read than asked for"))?;
                check_counted(&self.source_of(rel)?, file_read)
            })?;
            batch.clear();
            // A full queue means the reader has enough: this one is dropped.
            let _ = to_reader.try_send(batch);
        }
        Ok(())
    }
}

/// The size of [`Payload::stream_checked`]'s batches (up to four are in memory): at the
/// allocator's mapping threshold (`aibox-cli`'s `tune_allocator`), so each is a mapping of
/// its own, returned whole when freed, never a hole left in the heap under the plan's
/// memory peak, which comes next.
const CHECK_BATCH: usize = 128 * 1024;

/// What [`Payload::stream_checked`] hands its sink: the `n`th file begins, some of its
/// bytes, it ended.
pub(crate) enum Streamed<'b> {
    Begin(usize),
    Bytes(&'b [u8]),
    End,
}

/// [`Payload::stream_checked`]'s two threads fell out of step (`why`), not a release file.
fn checking_failed(why: &'static str) -> ProvenanceError {
    ProvenanceError::io("read", "the release", std::io::Error::other(why))
}

/// Opens the copy source `from` (a file of its own or a pack range) for reading, its
/// errors named as the writer names a source's.
fn open_source<'k>(
    from: &aibox_config::CopyFrom,
    kept: &'k mut aibox_config::KeptPack,
) -> Result<aibox_config::SourceReader<'k>> {
    from.open_kept(kept).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            changed(from, "it is missing".to_owned())
        } else {
            ProvenanceError::io("read", from.path(), e)
        }
    })
}

/// Checks what was read of the source `from` (`counter`) against its verified size and
/// digest ([`aibox_config::CopyFrom::mismatch`], as the writer checks a copy).
fn check_counted(from: &aibox_config::CopyFrom, counter: Counter) -> Result<()> {
    let bytes = counter.bytes;
    match from.mismatch(bytes, counter.finish().as_bytes()) {
        Some(reason) => Err(changed(from, reason)),
        None => Ok(()),
    }
}

/// The release file behind `from` is not what was verified, for `reason`.
fn changed(from: &aibox_config::CopyFrom, reason: String) -> ProvenanceError {
    ProvenanceError::ChangedReleaseFile {
        path: from.path().display().to_string(),
        reason,
    }
}

/// Reads `reader` to its end in chunks, counting and hashing the bytes and handing each
/// chunk to `sink`. The chunk buffer fits a file of the `expected` size (one more byte
/// reads the end), up to 64 KiB: most release files are a few KiB, and a fresh 64 KiB
/// buffer for each would be zeroed for nothing.
fn read_counted(
    mut reader: impl Read,
    path: &Path,
    expected: u64,
    sink: &mut dyn FnMut(&[u8]),
) -> Result<Counter> {
    const CHUNK: usize = 64 * 1024;
    let mut counter = Counter::default();
    let len = usize::try_from(expected.saturating_add(1)).map_or(CHUNK, |n| n.min(CHUNK));
    let mut buf = vec![0u8; len];
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| ProvenanceError::io("read", path, e))?;
        if n == 0 {
            return Ok(counter);
        }
        counter.update(&buf[..n]);
        sink(&buf[..n]);
    }
}

struct Checker<'a> {
    limits: &'a ExtractLimits,
    entries: usize,
    total: u64,
    /// Every entry, as named: a file's name is the `Arc` the release's file map keeps,
    /// not a copy of it (1 MB for a 10x release, freed once the release is read, and the
    /// holes it left stayed resident through the apply).
    seen: HashSet<Arc<str>>,
    /// The lowercase form of every entry with an uppercase letter (an all-lowercase
    /// entry is its own lowercase form, found in `seen`).
    folded: HashSet<Box<str>>,
    /// Folders: named by an entry or implied by a deeper one.
    dirs: HashSet<Box<str>>,
}

impl<'a> Checker<'a> {
    fn new(limits: &'a ExtractLimits) -> Self {
        Self {
            limits,
            entries: 0,
            total: 0,
            seen: HashSet::new(),
            folded: HashSet::new(),
            dirs: HashSet::new(),
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
    fn record(&mut self, rel: Arc<str>, is_dir: bool) -> Result<()> {
        self.check(&rel, is_dir)?;
        self.seen.insert(rel);
        Ok(())
    }

    /// Every check of [`Self::record`]; records the folders `rel` names or implies.
    fn check(&mut self, rel: &str, is_dir: bool) -> Result<()> {
        let reject = |reason: &str| ProvenanceError::UnsafeEntry {
            entry: rel.to_owned(),
            reason: reason.to_owned(),
        };
        if self.seen.contains(rel) {
            return Err(reject("duplicate entry"));
        }
        let lower = rel.to_ascii_lowercase();
        let collides = if lower == rel {
            self.folded.contains(rel)
        } else {
            self.seen.contains(lower.as_str()) || self.folded.contains(lower.as_str())
        };
        if collides {
            // Only on this error path: which entry it collides with, the first by name.
            let other = self
                .seen
                .iter()
                .filter(|s| s.to_ascii_lowercase() == lower)
                .min()
                .map_or_else(String::new, ToString::to_string);
            return Err(ProvenanceError::UnsafeEntry {
                entry: rel.to_owned(),
                reason: format!("collides with `{other}` on case-insensitive file systems"),
            });
        }
        // A parent must not be a file; a file must not be a known directory. Parents are
        // checked from the nearest up: a known folder's own parents are known folders, so
        // the first known one ends the check (most entries stop at their own folder).
        for (at, _) in rel.rmatch_indices('/') {
            let parent = &rel[..at];
            if self.dirs.contains(parent) {
                break;
            }
            if self.seen.contains(parent) {
                return Err(reject("a parent of this entry is a file"));
            }
            self.dirs.insert(parent.into());
        }
        if is_dir {
            if !self.dirs.contains(rel) {
                self.dirs.insert(rel.into());
            }
        } else if self.dirs.contains(rel) {
            return Err(reject("a file has the same path as a directory"));
        }
        if lower != rel {
            self.folded.insert(lower.into());
        }
        Ok(())
    }
}

/// A release's file map built at once from its entries (distinct paths, any order): a
/// bulk-built map has full nodes, where inserting the paths one by one in order left
/// every leaf about half full (1.05 MB for a 10x release's 8,600 files, against about
/// 0.6 MB), and the map lives until the plan is made.
pub(crate) fn packed_files(files: Vec<(Arc<str>, PayloadFile)>) -> BTreeMap<Arc<str>, PayloadFile> {
    files.into_iter().collect()
}

/// Validates a raw entry name and returns its components. Rejects NUL and control
/// characters, non-ASCII (Unicode look-alikes), backslashes, absolute paths, drive
/// prefixes, `.`/`..`/empty components, and paths beyond the limits.
pub fn check_name(raw: &[u8], limits: &ExtractLimits) -> Result<Vec<String>> {
    Ok(components(raw, limits)?
        .into_iter()
        .map(str::to_owned)
        .collect())
}

/// [`check_name`] without copying: the components borrow `raw`.
fn components<'a>(raw: &'a [u8], limits: &ExtractLimits) -> Result<Vec<&'a str>> {
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
    Ok(comps)
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

/// A reader that keeps a copy of everything read through it in `raw`, for
/// [`PackSink`]'s writer to hash: the archive digest covers exactly the bytes inflated,
/// and is computed beside the inflating (16 MB at a 10x release, 10 ms of the reader's
/// time), not by it.
struct TapReader<R> {
    inner: R,
    raw: Rc<std::cell::RefCell<Vec<u8>>>,
}

impl<R: Read> Read for TapReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.raw.borrow_mut().extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

/// Most bytes of one extension header's data (a GNU long name or link, a PAX record
/// set) held in memory, whatever the header declares. Real ones are a few hundred bytes;
/// names longer than [`ExtractLimits::max_path_len`] are refused anyway.
pub const MAX_EXTENSION_BYTES: u64 = 1024 * 1024;

/// The extension headers read so far that describe the next entry, with the same
/// meaning `tar` gives them (a long name wins over a PAX `path`, which wins over the
/// header's own name), each read only after its declared size was checked.
#[derive(Default)]
struct PendingMeta {
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    pax: Option<Vec<u8>>,
}

enum MetaError {
    Io(std::io::Error),
    Other(ProvenanceError),
}

impl PendingMeta {
    fn is_pending(&self) -> bool {
        self.long_name.is_some() || self.long_link.is_some() || self.pax.is_some()
    }

    /// Takes `entry` when it is an extension header (GNU `L`/`K`, PAX `x`): its data,
    /// bounded, is kept for the next entry. `false` for every other entry.
    fn take_extension<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
    ) -> std::result::Result<bool, MetaError> {
        let header = entry.header();
        let kind = header.entry_type();
        let recognised = header.as_gnu().is_some() || header.as_ustar().is_some();
        let (slot, what) = match kind {
            _ if !recognised => return Ok(false),
            tar::EntryType::GNULongName => (&mut self.long_name, "GNU long name"),
            tar::EntryType::GNULongLink => (&mut self.long_link, "GNU long link name"),
            tar::EntryType::XHeader => (&mut self.pax, "PAX extended header"),
            _ => return Ok(false),
        };
        let size = header.entry_size().map_err(MetaError::Io)?;
        if size > MAX_EXTENSION_BYTES {
            return Err(MetaError::Other(ProvenanceError::ArchiveLimit {
                reason: format!(
                    "a {what} of {size} bytes (at most {MAX_EXTENSION_BYTES} are read)"
                ),
            }));
        }
        if slot.is_some() {
            return Err(MetaError::Io(std::io::Error::other(format!(
                "two {what} entries describing the same member"
            ))));
        }
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        entry
            .take(MAX_EXTENSION_BYTES)
            .read_to_end(&mut data)
            .map_err(MetaError::Io)?;
        *slot = Some(data);
        Ok(true)
    }

    /// The name of `entry` (whose header declares `size` bytes), consuming the pending
    /// extensions. A PAX `size` other than the header's is refused: `tar` would read
    /// the entry with the PAX size while the raw stream moved on by the header's.
    fn path_of<R: Read>(&mut self, entry: &tar::Entry<'_, R>, size: u64) -> Result<Vec<u8>> {
        let long_name = self.long_name.take();
        self.long_link = None;
        let pax = self.pax.take();
        let mut pax_path = None;
        for record in tar::PaxExtensions::new(pax.as_deref().unwrap_or_default()) {
            let record = record.map_err(|e| ProvenanceError::CorruptArchive {
                what: "PAX extended header".to_owned(),
                reason: aibox_config::bounded(&e.to_string(), QUOTE_LIMIT),
            })?;
            match record.key_bytes() {
                b"path" => pax_path = Some(record.value_bytes().to_vec()),
                b"size" if record.value_bytes() != size.to_string().as_bytes() => {
                    return Err(ProvenanceError::UnsafeEntry {
                        entry: show_name(&entry.path_bytes()),
                        reason: "a PAX size that differs from the header's size".to_owned(),
                    });
                }
                _ => {}
            }
        }
        Ok(match (long_name, pax_path) {
            // As `tar` reads it: one trailing NUL of a long name dropped.
            (Some(mut name), _) => {
                if name.last() == Some(&0) {
                    name.pop();
                }
                name
            }
            (None, Some(path)) => path,
            (None, None) => entry.path_bytes().into_owned(),
        })
    }
}

/// What [`unpack_archive`] found: the manifest, the top directory's tag and the
/// SHA-256 of every archive byte read.
#[derive(Debug)]
pub struct Unpacked {
    /// Release path → file.
    pub files: BTreeMap<Arc<str>, PayloadFile>,
    /// The tag of `processkit-<tag>/`.
    pub top_tag: String,
    /// SHA-256 of the whole (compressed) input.
    pub archive_sha256: Sha256,
    /// The catalog's files, parsed as they went by.
    pub(crate) parsed: crate::catalog::Parsed,
}

/// Streams a gzip-compressed tar archive from `input` into the new pack file `pack`
/// (every file's bytes one after another, in archive order, at the offsets the returned
/// manifest records), validating every entry before anything of it is written. The
/// archive must hold exactly one top directory `processkit-<tag>/` (stripped); with
/// `expected_tag` the tag must match. On an error, `pack` may hold part of the bytes; the
/// caller removes it (it is always in a private staging directory).
pub fn unpack_archive(
    input: impl Read,
    what: &str,
    expected_tag: Option<&str>,
    limits: &ExtractLimits,
    pack: &Path,
) -> Result<Unpacked> {
    let out = create_new_file(pack, false)?;
    unpack_into(input, what, expected_tag, limits, (pack, out))
}

/// [`unpack_archive`] into the opened pack file `out` at `pack`.
fn unpack_into(
    input: impl Read,
    what: &str,
    expected_tag: Option<&str>,
    limits: &ExtractLimits,
    (pack, out): (&Path, fs_err::File),
) -> Result<Unpacked> {
    std::thread::scope(|scope| {
        let mut sink = PackSink::start(scope, pack, out)?;
        let read = unpack_entries(input, what, expected_tag, limits, &mut sink);
        // After a refusal the files not handed over yet are dropped. The writer's error
        // is the cause when both failed: the reader then only saw the writer stop.
        let Hashed {
            digests,
            archive: archive_sha256,
            parsed,
        } = sink.finish(read.is_ok())?;
        let read = read?;
        if digests.len() != read.files.len() {
            return Err(ProvenanceError::io(
                "write",
                "the unpacked release",
                std::io::Error::other(
                    "the writer hashed another number of files than it was given",
                ),
            ));
        }
        let files = read
            .files
            .into_iter()
            .zip(digests)
            .map(|((rel, size, executable, offset), sha256)| {
                (
                    rel,
                    PayloadFile {
                        sha256,
                        size,
                        executable,
                        offset,
                    },
                )
            })
            .collect();
        Ok(Unpacked {
            files: packed_files(files),
            top_tag: read.top_tag,
            archive_sha256,
            parsed,
        })
    })
}

/// What the reading half of [`unpack_archive`] found: every file (release path, size,
/// executable, offset in the pack) in archive order, their digests (and the archive's)
/// computed by the pack's writer.
struct Entries {
    files: Vec<(Arc<str>, u64, bool, u64)>,
    top_tag: String,
}

/// The reading half of [`unpack_archive`]: every entry checked and handed to `sink` in
/// archive order (the sink's writer hashes each file's bytes, beside this thread's
/// inflating).
#[allow(clippy::too_many_lines)] // one pass over every entry, each check in order
fn unpack_entries(
    input: impl Read,
    what: &str,
    expected_tag: Option<&str>,
    limits: &ExtractLimits,
    sink: &mut PackSink<'_>,
) -> Result<Entries> {
    let corrupt = |e: &dyn std::fmt::Display| ProvenanceError::CorruptArchive {
        what: what.to_owned(),
        // The decoder's message may quote header bytes.
        reason: aibox_config::bounded(&e.to_string(), QUOTE_LIMIT),
    };
    let tapped = std::io::BufReader::with_capacity(
        INPUT_BUFFER,
        TapReader {
            inner: input,
            raw: sink.raw(),
        },
    );
    let member = crate::gzip::Member::new(tapped).map_err(|e| corrupt(&e))?;
    // The inflater fills a large buffer per call (its output window is then rarely
    // copied), while `tar` reads a header or a chunk at a time.
    let inflated = std::io::BufReader::with_capacity(INFLATE_BUFFER, member);
    // Header data (PAX extensions, GNU long names) is read by `tar` before an entry is
    // seen, so the whole decompressed stream is capped: contents plus a header allowance.
    let (capped, hit, cap) = CappedReader::new(inflated, limits);
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
    let mut files = Vec::new();
    let mut top: Option<String> = None;
    // Raw entries: `tar` would read a GNU long name or PAX header of any declared size
    // into memory before handing out the entry it describes; here each is bounded first.
    let mut meta = PendingMeta::default();
    // The pack's length so far: where the next file's bytes start.
    let mut packed = 0u64;
    for entry in archive.entries().map_err(|e| corrupt(&e))?.raw(true) {
        let mut entry = entry.map_err(|e| corrupt(&e))?;
        if meta.take_extension(&mut entry).map_err(|e| match e {
            MetaError::Io(e) => corrupt(&e),
            MetaError::Other(e) => e,
        })? {
            continue;
        }
        checker.count()?;
        let raw = meta.path_of(
            &entry,
            entry.header().entry_size().map_err(|e| corrupt(&e))?,
        )?;
        let reject = |reason: &str| ProvenanceError::UnsafeEntry {
            entry: show_name(&raw),
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
        let comps = components(&raw, limits)?;
        match &top {
            None => top = Some(comps[0].to_owned()),
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
        let rel: Arc<str> = Arc::from(comps[1..].join("/"));
        checker.record(Arc::clone(&rel), is_dir)?;
        // Headers alone (folders, empty files) fill no batch but still read archive bytes.
        sink.data_read()?;
        if is_dir {
            continue;
        }
        let size = entry.header().size().map_err(|e| corrupt(&e))?;
        checker.add_bytes(&rel, size)?;
        let executable = entry.header().mode().unwrap_or(0o644) & 0o111 != 0;
        if crate::catalog::Parsed::wants(&rel) {
            sink.watch(files.len(), Arc::clone(&rel));
        }
        let mut body = (&mut entry).take(size.saturating_add(1));
        let mut read = 0u64;
        loop {
            let n = sink.read_from(&mut body).map_err(|e| corrupt(&e))?;
            if n == 0 {
                break;
            }
            read += n as u64;
            sink.data_read()?;
        }
        if read != size {
            return Err(reject("content length differs from the header"));
        }
        sink.end_file();
        files.push((rel, size, executable, packed));
        packed += size;
    }
    if meta.is_pending() {
        return Err(corrupt(
            &"an extension header (GNU long name or PAX) describes no entry after it",
        ));
    }
    let top_tag = top_tag(top, what, expected_tag)?;
    // The rest of the member (the tar padding) is inflated, so that its trailer is
    // checked, still under the cap; the rest of the input counts for the archive digest.
    let mut capped = archive.into_inner();
    std::io::copy(&mut capped, &mut std::io::sink()).map_err(|e| corrupt(&e))?;
    let mut tapped = capped.inner.into_inner().into_inner();
    std::io::copy(&mut tapped, &mut std::io::sink()).map_err(|e| corrupt(&e))?;
    Ok(Entries { files, top_tag })
}

/// Streams an archive into a temporary directory owned by the returned payload (used
/// when there is no download cache).
pub fn unpack_to_temp(
    input: impl Read,
    what: &str,
    expected_tag: Option<&str>,
    limits: &ExtractLimits,
) -> Result<(Payload, Sha256)> {
    let dir = tempfile::Builder::new()
        .prefix("aibox-release-")
        .tempdir()
        .map_err(|e| ProvenanceError::io("create a temporary folder in", "$TMPDIR", e))?;
    let pack = dir.path().join("pack");
    let u = unpack_archive(input, what, expected_tag, limits, &pack)?;
    let path = Arc::new(pack);
    let payload = Payload {
        files: Arc::new(u.files),
        top_tag: Some(u.top_tag),
        bytes: Bytes::Temp(path, Arc::new(dir)),
        store: None,
        parsed: Some(Arc::new(u.parsed)),
    };
    Ok((payload, u.archive_sha256))
}

/// Reads and validates a gzip-compressed tar archive held in memory, streaming its files
/// into a temporary directory the payload owns (see [`unpack_archive`]).
pub fn read_archive(
    gz: &[u8],
    what: &str,
    expected_tag: Option<&str>,
    limits: &ExtractLimits,
) -> Result<Payload> {
    unpack_to_temp(gz, what, expected_tag, limits).map(|(p, _)| p)
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
            reason: format!(
                "top directory `{top}/` is not `processkit-<tag>/`{}",
                crate::error::old_layout(expected_tag)
            ),
        })?;
    check_tag(tag, what, expected_tag)?;
    Ok(tag.to_owned())
}

/// A release's top directory tag against the requested version.
pub(crate) fn check_tag(tag: &str, what: &str, expected_tag: Option<&str>) -> Result<()> {
    if let Some(expected) = expected_tag
        && expected != tag
    {
        return Err(ProvenanceError::Layout {
            what: what.to_owned(),
            reason: format!("top directory names {tag}, but version {expected} was requested"),
        });
    }
    Ok(())
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
    let (file, _) = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("is larger than {cap} bytes"),
        ));
    }
    Ok(bytes)
}

/// Opens a local file for reading, with its size, refusing anything but a regular file
/// (a directory, device, FIFO or socket) and files inside a kernel pseudo-file system.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<(fs_err::File, u64)> {
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
    Ok((fs_err::File::open(path)?, meta.len()))
}

/// Validates a local directory (the payload root, with `PROVENANCE.toml` directly
/// inside) and hashes its files in place: the payload's bytes are the directory's.
/// Symlinks and special files are rejected like archive entries, and so is a root
/// inside `/proc`, `/sys` or `/dev`.
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
    let mut files = Vec::new();
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
                checker.record(Arc::from(rel.as_str()), true)?;
                stack.push((path, rel));
            } else if ft.is_file() {
                let rel: Arc<str> = Arc::from(rel);
                checker.record(Arc::clone(&rel), false)?;
                checker.add_bytes(&rel, meta.len())?;
                // No more than the size checked above, whatever the file streams.
                let reader = fs_err::File::open(&path)
                    .map_err(|e| ProvenanceError::io("read", &path, e))?
                    .take(meta.len().saturating_add(1));
                let counter = read_counted(reader, &path, meta.len(), &mut |_| {})?;
                if counter.bytes != meta.len() {
                    return Err(ProvenanceError::UnsafeEntry {
                        entry: rel.to_string(),
                        reason: "the file changed size while it was read".to_owned(),
                    });
                }
                files.push((
                    rel,
                    PayloadFile {
                        sha256: counter.finish(),
                        size: meta.len(),
                        executable: is_executable(&meta),
                        offset: 0,
                    },
                ));
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
    Ok(Payload::on_disk(
        packed_files(files),
        None,
        root.to_path_buf(),
    ))
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

/// Writes files of `payload` below `dest` through a staging directory created beside
/// it, then renames the staging directory into place (replacing an older `dest`). Each
/// item of `files` is `(path below dest, release path)`. Files are created exclusively
/// with mode 0644, or 0755 when executable, and their bytes re-verified while copied.
pub fn write_tree<'a>(
    payload: &Payload,
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
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
    for (rel, release_path) in files {
        payload.write_new(release_path, &staging.path().join(rel))?;
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

/// How many bytes of file contents [`PackSink`] gathers before handing them over: a
/// few wake-ups of the writer per megabyte, and little memory in flight.
const BATCH_BYTES: usize = 128 * 1024;

/// Room for the archive bytes a batch carries ([`TapReader`]): a hand-over comes once
/// [`BATCH_BYTES`] are there, and the decoder reads 32 KiB at a time. Made at once at
/// the allocator's mapping threshold, not grown by doubling through the heap, where the
/// smaller steps left holes under the later peak of planning.
const RAW_ROOM: usize = 2 * BATCH_BYTES;

/// Most bytes read from the archive at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Compressed bytes read from the archive at a time.
const INPUT_BUFFER: usize = 64 * 1024;
/// Bytes inflated at a time (see [`unpack_entries`]).
const INFLATE_BUFFER: usize = 256 * 1024;

/// Where [`unpack_archive`] puts the files' bytes: a thread of its own hashes each file
/// (and the archive's bytes, see [`TapReader`]) and appends the bytes to the pack, so
/// hashing and the writes overlap inflating and checking the next entries (the reader
/// had inflated and hashed alike, 200 ms of CPU for a 10x release, while the writer
/// waited). Batches go back to the reader once written, so their memory is not mapped,
/// zeroed and unmapped again for every batch. Without a thread (none could be started)
/// the same writer runs on the caller's.
struct PackSink<'scope> {
    batch: Batch,
    /// The archive bytes read since the last hand-over ([`TapReader`] fills it).
    raw: Rc<std::cell::RefCell<Vec<u8>>>,
    to_writer: Option<std::sync::mpsc::SyncSender<Batch>>,
    from_writer: Option<std::sync::mpsc::Receiver<Batch>>,
    thread: Option<std::thread::ScopedJoinHandle<'scope, Result<Hashed>>>,
    inline: Option<PackWriter<'scope>>,
}

/// File contents on their way to the pack: `bytes[..filled]`, with the offsets in it
/// where a file ends (the next one starts there; a file may span batches), and the
/// archive bytes read meanwhile (`raw`, for the archive digest).
#[derive(Default)]
struct Batch {
    /// Always initialised to its full length, so reads go straight into it.
    bytes: Vec<u8>,
    filled: usize,
    ends: Vec<usize>,
    raw: Vec<u8>,
    /// The files (by number, in archive order) whose bytes the writer keeps and hands to
    /// the catalog's parsing, announced before their first byte.
    watch: Vec<(usize, Arc<str>)>,
}

impl Batch {
    /// A batch handed back through `from` when one is waiting there with room for `len`
    /// bytes of contents, else a new one (`raw_room` bytes reserved for archive bytes).
    /// Whoever hands batches back may send any: one that went out with archive bytes
    /// only has no room, and reading into it would index past its end.
    fn reused_or_new(
        from: Option<&std::sync::mpsc::Receiver<Batch>>,
        len: usize,
        raw_room: usize,
    ) -> Self {
        from.and_then(|from| from.try_recv().ok())
            .filter(|b| b.bytes.len() >= len)
            .unwrap_or_else(|| Batch {
                bytes: vec![0; len],
                raw: Vec::with_capacity(raw_room),
                ..Batch::default()
            })
    }

    /// Empties the batch for reuse, keeping its buffers.
    fn clear(&mut self) {
        self.filled = 0;
        self.ends.clear();
        self.raw.clear();
        self.watch.clear();
    }

    /// The contents as consecutive pieces, each with whether a file ends with it: one
    /// per file ending in this batch, then the start of the next file (maybe empty).
    fn segments(&self) -> impl Iterator<Item = (&[u8], bool)> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let ends = self.ends.iter().map(|&e| (e, true));
        starts
            .zip(ends.chain(std::iter::once((self.filled, false))))
            .map(|(start, (end, ends))| (&self.bytes[start..end], ends))
    }

    /// Feeds the contents to `current`, the counter of the file whose bytes came last,
    /// and hands each file that ends in this batch to `ended` with its counter.
    fn hash_files(
        &self,
        current: &mut Counter,
        mut ended: impl FnMut(Counter) -> Result<()>,
    ) -> Result<()> {
        for (piece, ends) in self.segments() {
            current.update(piece);
            if ends {
                ended(std::mem::take(current))?;
            }
        }
        Ok(())
    }
}

impl<'scope> PackSink<'scope> {
    /// Starts the writer of the new, empty pack file `file` at `path`.
    fn start<'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        path: &'scope Path,
        file: fs_err::File,
    ) -> Result<Self> {
        // Two batches queued at most: the reader runs ahead by little, memory stays flat.
        let (to_writer, from_reader) = std::sync::mpsc::sync_channel::<Batch>(2);
        let (to_reader, from_writer) = std::sync::mpsc::sync_channel::<Batch>(4);
        let spawned = std::thread::Builder::new()
            .name("aibox-unpack".to_owned())
            .spawn_scoped(scope, move || {
                let mut writer = PackWriter::new(path, file);
                for mut batch in from_reader {
                    writer.append(&batch)?;
                    batch.clear();
                    // A full queue means the reader has enough: this one is dropped.
                    let _ = to_reader.try_send(batch);
                }
                Ok(writer.finish())
            });
        let (to_writer, from_writer, thread, inline) = if let Ok(thread) = spawned {
            (Some(to_writer), Some(from_writer), Some(thread), None)
        } else {
            // The file went with the thread that never started; it is still empty.
            let file = fs_err::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| ProvenanceError::io("open", path, e))?;
            (None, None, None, Some(PackWriter::new(path, file)))
        };
        Ok(Self {
            batch: Batch::default(),
            raw: Rc::new(std::cell::RefCell::new(Vec::with_capacity(RAW_ROOM))),
            to_writer,
            from_writer,
            thread,
            inline,
        })
    }

    /// Reads at most one chunk of the current file from `body` straight into the batch:
    /// the number of bytes read (0 at the end).
    fn read_from(&mut self, body: &mut impl Read) -> std::io::Result<usize> {
        if self.batch.bytes.is_empty() {
            let watch = std::mem::take(&mut self.batch.watch);
            self.batch = Batch::reused_or_new(
                self.from_writer.as_ref(),
                BATCH_BYTES + READ_CHUNK,
                RAW_ROOM,
            );
            self.batch.watch = watch;
        }
        let start = self.batch.filled;
        let n = body.read(&mut self.batch.bytes[start..start + READ_CHUNK])?;
        self.batch.filled += n;
        Ok(n)
    }

    /// Has the writer keep the bytes of file number `file` (`rel`, not begun yet) for
    /// the catalog's parsing.
    fn watch(&mut self, file: usize, rel: Arc<str>) {
        self.batch.watch.push((file, rel));
    }

    /// Marks the end of the current file's bytes.
    fn end_file(&mut self) {
        self.batch.ends.push(self.batch.filled);
    }

    /// Where the [`TapReader`] of the archive puts the bytes it read.
    fn raw(&self) -> Rc<std::cell::RefCell<Vec<u8>>> {
        Rc::clone(&self.raw)
    }

    /// Hands the batch over once it is full (of contents, or of archive bytes: headers
    /// alone fill no contents).
    fn data_read(&mut self) -> Result<()> {
        if self.batch.filled >= BATCH_BYTES || self.raw.borrow().len() >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.batch.filled == 0 && self.batch.ends.is_empty() && self.raw.borrow().is_empty() {
            return Ok(());
        }
        let mut batch = std::mem::take(&mut self.batch);
        // The tap goes on into the (emptied) buffer this batch brought back.
        std::mem::swap(&mut batch.raw, &mut *self.raw.borrow_mut());
        if let Some(writer) = &mut self.inline {
            writer.append(&batch)?;
            batch.clear();
            self.batch = batch;
            return Ok(());
        }
        match &self.to_writer {
            Some(to) if to.send(batch).is_ok() => Ok(()),
            // The writer stopped on an error; [`Self::finish`] returns it.
            _ => Err(ProvenanceError::io(
                "write",
                "the unpacked release",
                std::io::Error::other("the writer stopped"),
            )),
        }
    }

    /// Hands over the last batch (unless `flush` is false) and waits for the writer: the
    /// digests of the files in the order they were read and the archive's, or its first
    /// error.
    fn finish(mut self, flush: bool) -> Result<Hashed> {
        let flushed = if flush { self.flush() } else { Ok(()) };
        drop(self.to_writer.take());
        let written = match self.thread.take().map(std::thread::ScopedJoinHandle::join) {
            None => Ok(self
                .inline
                .take()
                .map_or_else(Hashed::default, PackWriter::finish)),
            Some(Ok(done)) => done,
            Some(Err(_)) => Err(ProvenanceError::io(
                "write",
                "the unpacked release",
                std::io::Error::other("the writer thread panicked"),
            )),
        };
        flushed.and(written)
    }
}

/// What [`PackWriter`] found: each file's digest, in the order the files were read, the
/// archive's, and the catalog's files parsed.
struct Hashed {
    digests: Vec<Sha256>,
    archive: Sha256,
    parsed: crate::catalog::Parsed,
}

impl Default for Hashed {
    fn default() -> Self {
        Self {
            digests: Vec::new(),
            archive: Counter::default().finish(),
            parsed: crate::catalog::Parsed::default(),
        }
    }
}

/// Hashes file contents and appends them to the pack file; hashes the archive bytes.
struct PackWriter<'p> {
    path: &'p Path,
    file: fs_err::File,
    /// The file whose bytes came last, not ended yet.
    current: Counter,
    /// The digests of the files ended so far, in order.
    digests: Vec<Sha256>,
    /// The archive's bytes so far.
    archive: Counter,
    /// Whether the current file (number `digests.len()`) was looked up in `watches`.
    started: bool,
    /// Files announced to be kept for the catalog, not begun yet, in order.
    watches: std::collections::VecDeque<(usize, Arc<str>)>,
    /// The current file's path and bytes so far, when it is kept.
    kept: Option<(Arc<str>, Vec<u8>)>,
    parsed: crate::catalog::Parsed,
}

impl<'p> PackWriter<'p> {
    fn new(path: &'p Path, file: fs_err::File) -> Self {
        Self {
            path,
            file,
            current: Counter::default(),
            digests: Vec::new(),
            archive: Counter::default(),
            started: false,
            watches: std::collections::VecDeque::new(),
            kept: None,
            parsed: crate::catalog::Parsed::default(),
        }
    }

    /// The files' digests, the archive's, and the catalog's files parsed.
    fn finish(self) -> Hashed {
        Hashed {
            digests: self.digests,
            archive: self.archive.finish(),
            parsed: self.parsed,
        }
    }

    fn append(&mut self, batch: &Batch) -> Result<()> {
        self.archive.update(&batch.raw);
        // Announced before their first byte: in this batch at the latest.
        self.watches.extend(batch.watch.iter().cloned());
        for (piece, ends) in batch.segments() {
            self.take(piece);
            if ends {
                self.end_file();
            }
        }
        self.file
            .write_all(&batch.bytes[..batch.filled])
            .map_err(|e| ProvenanceError::io("write", self.path, e))
    }

    /// Looks up, once per file, whether the current file is kept.
    fn start_file(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        let number = self.digests.len();
        if self.watches.front().is_some_and(|(n, _)| *n == number) {
            self.kept = self.watches.pop_front().map(|(_, rel)| (rel, Vec::new()));
        }
    }

    /// Bytes of the current file.
    fn take(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.start_file();
        self.current.update(bytes);
        if let Some((_, kept)) = &mut self.kept {
            if kept.len() + bytes.len() > crate::catalog::Parsed::MAX_FILE {
                // Too large to hold: the catalog reads it from the payload instead.
                self.kept = None;
            } else {
                kept.extend_from_slice(bytes);
            }
        }
    }

    /// The end of the current file: its digest, and its parsing when it is kept.
    fn end_file(&mut self) {
        self.start_file();
        self.digests
            .push(std::mem::take(&mut self.current).finish());
        if let Some((rel, bytes)) = self.kept.take() {
            self.parsed.add(rel, &bytes);
        }
        self.started = false;
    }
}

/// Prefix of the review's temporary folders (followed by the owning process's pid).
const REVIEW_PREFIX: &str = "aibox-review-";

/// A new private temporary folder for a copy of the release folder `dir`, and the path
/// of the copy in it (named as `dir` is, not created yet).
fn review_folder(dir: &str) -> Result<(tempfile::TempDir, PathBuf)> {
    // Named after this process: one an interrupted run left (Ctrl-C during the review)
    // is removed by the next run, once (not at every skill it reviews).
    static CLEANED: std::sync::Once = std::sync::Once::new();
    CLEANED.call_once(|| crate::cache::clean_stale(&std::env::temp_dir(), REVIEW_PREFIX));
    let temp = tempfile::Builder::new()
        .prefix(&format!("{REVIEW_PREFIX}{}-", std::process::id()))
        .tempdir()
        .map_err(|e| ProvenanceError::io("create a temporary folder in", "$TMPDIR", e))?;
    let name = dir.rsplit('/').next().unwrap_or(dir);
    let copy = temp.path().join(name);
    Ok((temp, copy))
}

/// Copies the folder `from` to the new folder `to` as it is: files by content, symbolic
/// links as links (never followed), folders recursively, every name as it is (UTF-8 or
/// not: the review sees what is there); anything else is left out. A missing `from`
/// makes an empty `to`.
fn copy_as_is(from: &Path, to: &Path) -> Result<()> {
    fs_err::create_dir_all(to).map_err(|e| ProvenanceError::io("create", to, e))?;
    let entries = match fs_err::read_dir(from) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ProvenanceError::io("read", from, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| ProvenanceError::io("read", from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = fs_err::symlink_metadata(&src)
            .map_err(|e| ProvenanceError::io("inspect", &src, e))?
            .file_type();
        if kind.is_file()
            && entry
                .file_name()
                .to_str()
                .is_some_and(aibox_fs::is_temp_name)
        {
            // A killed apply's temp file: not the skill's (the next apply removes it).
            continue;
        }
        if kind.is_dir() {
            copy_as_is(&src, &dst)?;
        } else if kind.is_symlink() {
            let target =
                fs_err::read_link(&src).map_err(|e| ProvenanceError::io("read", &src, e))?;
            std::os::unix::fs::symlink(&target, &dst)
                .map_err(|e| ProvenanceError::io("create", &dst, e))?;
        } else if kind.is_file() {
            fs_err::copy(&src, &dst).map_err(|e| ProvenanceError::io("copy", &src, e))?;
        }
    }
    Ok(())
}

/// Whether a folder on the way from `view` to its relative path `rel` is a symbolic link
/// (or not a folder at all), so that `view.join(rel)` does not stay below `view`.
fn below_a_link(view: &Path, rel: &str) -> bool {
    let mut at = view.to_path_buf();
    let mut parts: Vec<&str> = rel.split('/').collect();
    parts.pop();
    parts.into_iter().any(|part| {
        at.push(part);
        fs_err::symlink_metadata(&at).is_ok_and(|m| !m.is_dir())
    })
}

/// Removes whatever is at `path` (a file, a link, a folder), if anything.
fn remove_entry(path: &Path) -> Result<()> {
    let removed = match fs_err::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => fs_err::remove_dir_all(path),
        Ok(_) => fs_err::remove_file(path),
    };
    removed.map_err(|e| ProvenanceError::io("remove", path, e))
}

/// Creates a new file (never following or replacing an existing one) with a normalised mode.
fn create_new_file(path: &Path, executable: bool) -> Result<fs_err::File> {
    let mut opts = fs_err::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use fs_err::os::unix::fs::OpenOptionsExt;
        opts.mode(if executable { 0o755 } else { 0o644 });
    }
    #[cfg(not(unix))]
    let _ = executable;
    opts.open(path)
        .map_err(|e| ProvenanceError::io("create", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aibox_test_support::http::release::{TarEntry, gzip, tar};

    /// Records `entries` in order and returns the refusal of the last one.
    fn refusal(entries: &[(&str, bool)]) -> String {
        let limits = ExtractLimits::default();
        let mut checker = Checker::new(&limits);
        let (last, before) = entries.split_last().expect("at least one entry");
        for (rel, dir) in before {
            checker.record((*rel).into(), *dir).expect("accepted");
        }
        checker
            .record(last.0.into(), last.1)
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn the_checker_refuses_every_clash_and_names_the_entry_it_clashes_with() {
        for (entries, says) in [
            (&[("a/b", false), ("a/b", false)][..], "duplicate entry"),
            (&[("a", true), ("a", true)][..], "duplicate entry"),
            (
                &[("docs/Readme.md", false), ("docs/README.md", false)][..],
                "collides with `docs/Readme.md`",
            ),
            (&[("A/x", false), ("a/x", false)][..], "collides with `A/x`"),
            (&[("a/x", false), ("A/X", false)][..], "collides with `a/x`"),
            (
                &[("a", false), ("a/b/c", false)][..],
                "a parent of this entry is a file",
            ),
            (
                &[("a/b/c", false), ("a/b", false)][..],
                "same path as a directory",
            ),
        ] {
            let text = refusal(entries);
            assert!(text.contains(says), "{entries:?}: `{text}` lacks `{says}`");
        }
    }

    #[test]
    fn the_checker_accepts_folders_named_before_or_after_their_files() {
        let limits = ExtractLimits::default();
        let mut checker = Checker::new(&limits);
        for (rel, dir) in [
            ("a", true),
            ("a/b", false),
            ("x/y/z", false),
            ("x/y", true),
            ("x", true),
            ("a/SKILL.md", false),
            ("c/SKILL.md", false),
        ] {
            checker.record(rel.into(), dir).expect(rel);
        }
    }

    /// A pack the writer thread cannot write fails the unpack with the pack's own error,
    /// also when the reader had more batches to hand over; a pack that exists is never
    /// overwritten.
    #[test]
    fn a_pack_the_writer_cannot_write_is_the_error_reported() {
        let mut entries = vec![TarEntry::dir("processkit-v1.0.0/")];
        // Enough bytes for many batches after the first file.
        let body = "x".repeat(8 * 1024);
        for i in 0..200 {
            entries.push(TarEntry::file(
                &format!("processkit-v1.0.0/f{i:03}"),
                body.as_str(),
            ));
        }
        let gz = gzip(&tar(&entries));
        let dir = tempfile::tempdir().unwrap();
        let pack = dir.path().join("pack");
        fs_err::write(&pack, "in the way").unwrap();
        let limits = ExtractLimits::default();
        let err = unpack_archive(&gz[..], "t", None, &limits, &pack)
            .unwrap_err()
            .to_string();
        assert!(err.contains("create") && err.contains("pack"), "{err}");
        assert_eq!(fs_err::read_to_string(&pack).unwrap(), "in the way");
        // Opened for reading only: every write fails.
        let read_only = fs_err::File::open(&pack).unwrap();
        let err = unpack_into(&gz[..], "t", None, &limits, (&pack, read_only))
            .unwrap_err()
            .to_string();
        assert!(err.contains("write") && err.contains("pack"), "{err}");
        assert!(!err.contains("writer stopped"), "{err}");
    }

    /// A release's top folder and `files` (name below it, contents) in it.
    fn release_entries(files: &[(&str, &str)]) -> Vec<TarEntry> {
        let mut entries = vec![TarEntry::dir("processkit-v1.0.0/")];
        entries.extend(
            files
                .iter()
                .map(|(name, body)| TarEntry::file(&format!("processkit-v1.0.0/{name}"), *body)),
        );
        entries
    }

    /// `n` bytes of the alphabet over and over: contents that span batches.
    fn letters(n: usize) -> String {
        (0..n)
            .map(|i| char::from(b'a' + u8::try_from(i % 26).unwrap()))
            .collect()
    }

    /// The writer hashes each file from the batches it is handed: a file that spans
    /// several batches, empty files (one ending where the last ended, one at a batch's
    /// start) and files that share a batch each get the digest of their own bytes, at
    /// the offsets where the pack holds them.
    #[test]
    fn every_file_gets_its_own_digest_across_batches() {
        let big = letters(3 * BATCH_BYTES + 17);
        let exact = "y".repeat(BATCH_BYTES);
        let files = [
            ("a.md", "first\n"),
            ("empty-1", ""),
            ("big.txt", big.as_str()),
            ("empty-2", ""),
            ("exact", exact.as_str()),
            ("empty-3", ""),
            ("z.md", "last\n"),
        ];
        let entries = release_entries(&files);
        let dir = tempfile::tempdir().unwrap();
        let pack = dir.path().join("pack");
        let unpacked = unpack_archive(
            &gzip(&tar(&entries))[..],
            "t",
            None,
            &ExtractLimits::default(),
            &pack,
        )
        .unwrap();
        let bytes = fs_err::read(&pack).unwrap();
        assert_eq!(unpacked.files.len(), files.len());
        for (rel, body) in files {
            let f = unpacked.files[rel];
            assert_eq!(f.sha256, Sha256::of(body.as_bytes()), "{rel}");
            assert_eq!(f.size, body.len() as u64, "{rel}");
            let at = usize::try_from(f.offset).unwrap();
            assert_eq!(&bytes[at..at + body.len()], body.as_bytes(), "{rel}");
        }
    }

    /// What [`Payload::stream_checked`] hands its sink, as one text per file.
    fn streamed(p: &Payload, rels: &[&str]) -> (Result<()>, Vec<(usize, Vec<u8>)>) {
        let mut got: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut open = None;
        let result = p.stream_checked(rels, &mut |event| match event {
            Streamed::Begin(i) => {
                assert!(open.is_none(), "file {i} begins inside another");
                open = Some(i);
                got.push((i, Vec::new()));
            }
            Streamed::Bytes(chunk) => got.last_mut().unwrap().1.extend_from_slice(chunk),
            Streamed::End => assert!(open.take().is_some(), "an end without a begin"),
        });
        assert!(
            open.is_none() || result.is_err(),
            "the last file never ended"
        );
        (result, got)
    }

    /// Files streamed on two threads arrive whole and in order (empty ones, ones spanning
    /// batches, one ending exactly at a batch's end), from a pack and from a folder; a
    /// file whose bytes changed after they were verified is the error, named, however
    /// many batches later the checker finds it.
    #[test]
    fn checked_streams_arrive_in_order_and_a_changed_file_is_the_error() {
        let big = letters(5 * CHECK_BATCH + 5);
        let exact = "x".repeat(CHECK_BATCH - "first\n".len());
        let files = [
            ("a.md", "first\n"),
            ("b-exact", exact.as_str()),
            ("c-empty", ""),
            ("d-big", big.as_str()),
            ("e-empty", ""),
            ("f.md", "last\n"),
        ];
        let entries = release_entries(&files);
        let (packed, _) = unpack_to_temp(
            &gzip(&tar(&entries))[..],
            "t",
            None,
            &ExtractLimits::default(),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in files {
            fs_err::write(dir.path().join(name), body).unwrap();
        }
        let folder = read_dir(dir.path(), &ExtractLimits::default()).unwrap();
        let in_memory = Payload::from_memory(
            files
                .iter()
                .map(|(n, b)| ((*n).to_owned(), b.as_bytes().to_vec(), false)),
        );
        // `a.md` and `b-exact` fill the first batch exactly; then another order than
        // the manifest's, and one file twice.
        let rels = [
            "a.md", "b-exact", "c-empty", "f.md", "d-big", "e-empty", "a.md",
        ];
        let expected: Vec<(usize, Vec<u8>)> = rels
            .iter()
            .enumerate()
            .map(|(i, rel)| {
                let body = files.iter().find(|(n, _)| n == rel).unwrap().1;
                (i, body.as_bytes().to_vec())
            })
            .collect();
        for p in [&packed, &folder, &in_memory] {
            let (result, got) = streamed(p, &rels);
            result.unwrap();
            assert_eq!(got, expected);
        }

        // One byte of the big file changed on disk, same size: found by the checker.
        let big_path = dir.path().join("d-big");
        let mut damaged = big.clone().into_bytes();
        damaged[3 * CHECK_BATCH + 1] = b'!';
        fs_err::write(&big_path, &damaged).unwrap();
        let (result, _) = streamed(&folder, &rels);
        let err = result.unwrap_err();
        assert!(
            matches!(&err, ProvenanceError::ChangedReleaseFile { path, reason }
                if path.ends_with("d-big") && reason.contains("SHA-256")),
            "{err:?}"
        );
        // Longer than verified: the size is the error.
        fs_err::write(&big_path, format!("{big}more")).unwrap();
        let err = streamed(&folder, &rels).0.unwrap_err().to_string();
        assert!(err.contains("d-big") && err.contains("bytes"), "{err}");
        // Missing.
        fs_err::remove_file(&big_path).unwrap();
        let err = streamed(&folder, &rels).0.unwrap_err().to_string();
        assert!(err.contains("d-big") && err.contains("missing"), "{err}");
    }

    /// The archive's digest, hashed by the pack's writer from the bytes the reader
    /// inflated, covers every byte read: contents, headers and what follows the stream.
    #[test]
    fn the_archive_digest_covers_every_byte_read_trailer_included() {
        // Barely compressible contents (their archive bytes fill batches of their own)
        // and many headers-only entries (archive bytes with no contents), then bytes
        // after the gzip stream.
        let mut state = 0x2545_f491_u32;
        let noise: String = (0..400_000)
            .map(|_| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                char::from(b'!' + u8::try_from((state >> 16) % 90).unwrap())
            })
            .collect();
        let mut entries = vec![TarEntry::dir("processkit-v1.0.0/")];
        entries.push(TarEntry::file("processkit-v1.0.0/noise-a", noise.as_str()));
        // Folders with barely compressible names: archive bytes, and no contents at all,
        // right after a batch was handed over.
        for i in 0..3000 {
            let name: String = noise[i * 80..i * 80 + 80]
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { 'x' })
                .collect();
            entries.push(TarEntry::dir(&format!("processkit-v1.0.0/d/{name}{i}/")));
        }
        // Then enough contents for the batches handed back to come round again.
        let twice = noise.repeat(2);
        entries.push(TarEntry::file("processkit-v1.0.0/noise-c", twice.as_str()));
        for i in 0..3000 {
            entries.push(TarEntry::file(&format!("processkit-v1.0.0/e/{i:04}"), ""));
        }
        entries.push(TarEntry::file(
            "processkit-v1.0.0/noise-b",
            &noise[..150_000],
        ));
        let mut input = gzip(&tar(&entries));
        input.resize(input.len() + 100_000, 0);
        let dir = tempfile::tempdir().unwrap();
        let unpacked = unpack_archive(
            &input[..],
            "t",
            None,
            &ExtractLimits::default(),
            &dir.path().join("pack"),
        )
        .unwrap();
        assert_eq!(unpacked.archive_sha256, Sha256::of(&input));
        assert_eq!(unpacked.files.len(), 3003);
        assert_eq!(
            unpacked.files["noise-b"].sha256,
            Sha256::of(&noise.as_bytes()[..150_000])
        );
    }

    /// Memory does not grow with the release's bytes: a payload entry is a fixed-size
    /// manifest record (digest, size, mode), never the contents.
    #[test]
    fn a_payload_entry_holds_no_contents() {
        assert!(std::mem::size_of::<PayloadFile>() <= 56);
        let big = vec![7u8; 1024 * 1024];
        let p = Payload::from_memory([("context/big.bin".to_owned(), big.clone(), false)]);
        let entry = p.files["context/big.bin"];
        assert_eq!(entry.size, big.len() as u64);
        assert_eq!(entry.sha256, Sha256::of(&big));
    }

    #[test]
    fn a_file_changed_on_disk_is_refused_when_read() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::write(dir.path().join("a.md"), "one\n").unwrap();
        let p = read_dir(dir.path(), &ExtractLimits::default()).unwrap();
        assert_eq!(p.read("a.md").unwrap(), b"one\n");
        fs_err::write(dir.path().join("a.md"), "two\n").unwrap();
        let err = p.read("a.md").unwrap_err();
        assert!(
            matches!(err, ProvenanceError::ChangedReleaseFile { .. }),
            "{err:?}"
        );
        fs_err::write(dir.path().join("a.md"), "longer\n").unwrap();
        assert!(p.read("a.md").unwrap_err().to_string().contains("bytes"));
    }

    /// An unpacked archive is one pack: every file reads back from its range, a folder
    /// is handed to a folder reader as a checked private copy of exactly its files (modes
    /// kept), and a damaged byte in the pack fails both.
    #[test]
    fn a_pack_reads_back_by_range_and_a_folder_is_a_checked_copy() {
        use std::os::unix::fs::PermissionsExt as _;
        let entries = vec![
            TarEntry::dir("processkit-v1.0.0/"),
            TarEntry::file("processkit-v1.0.0/AGENTS.md", "agents\n"),
            TarEntry {
                mode: 0o755,
                ..TarEntry::file("processkit-v1.0.0/skills/a/run.sh", "#!/bin/sh\n")
            },
            TarEntry::file("processkit-v1.0.0/skills/a/SKILL.md", "---\nname: a\n---\n"),
            TarEntry::file("processkit-v1.0.0/skills/ab/SKILL.md", "not a's\n"),
        ];
        let gz = gzip(&tar(&entries));
        let (p, _) =
            unpack_to_temp(&gz[..], "t", None, &ExtractLimits::default()).expect("unpacks");
        assert!(p.root().is_none(), "no tree of files");
        assert_eq!(p.read("skills/a/SKILL.md").unwrap(), b"---\nname: a\n---\n");
        assert_eq!(p.read("AGENTS.md").unwrap(), b"agents\n");
        let from = p.copy_from("skills/a/run.sh").unwrap();
        assert_eq!(from.read_verified().unwrap(), b"#!/bin/sh\n");

        let folder = p.folder("skills/a").unwrap();
        let copy = folder.path().to_owned();
        assert_eq!(
            copy.file_name().unwrap(),
            "a",
            "named as the release folder"
        );
        let mut names: Vec<String> = fs_err::read_dir(&copy)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["SKILL.md", "run.sh"], "not `skills/ab`");
        let mode = fs_err::metadata(copy.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        drop(folder);
        assert!(!copy.exists(), "removed with the folder");

        // One byte of `run.sh` damaged in the pack.
        let pack = from.dir.as_path();
        let mut bytes = fs_err::read(pack).unwrap();
        let at = bytes.windows(9).position(|w| w == b"#!/bin/sh").unwrap();
        bytes[at] = b'X';
        fs_err::write(pack, &bytes).unwrap();
        let err = p.folder("skills/a").unwrap_err().to_string();
        assert!(
            err.contains("skills/a/run.sh") && err.contains("SHA-256"),
            "{err}"
        );
        assert!(from.read_verified().unwrap_err().contains("SHA-256"));
        // The other files still read.
        assert_eq!(p.read("AGENTS.md").unwrap(), b"agents\n");
    }

    /// The review's view of a skill as an apply leaves it: the live folder as it is (a
    /// link stays a link, a hand-added file stays), the release's bytes where the apply
    /// writes, nothing where it removes.
    #[test]
    fn folder_after_is_the_live_folder_with_the_apply_done() {
        use crate::After;
        let dir = "context/skills/c/s";
        let payload = read_archive(
            &gzip(&tar(&[
                TarEntry::dir("processkit-v1.0.0/"),
                TarEntry::file(
                    "processkit-v1.0.0/context/skills/c/s/SKILL.md",
                    "release md",
                ),
                TarEntry::file(
                    "processkit-v1.0.0/context/skills/c/s/mcp/server.py",
                    "release py",
                ),
            ])),
            "t",
            None,
            &ExtractLimits::default(),
        )
        .unwrap();
        let root = tempfile::tempdir().unwrap();
        let live = root.path().join(dir);
        fs_err::create_dir_all(live.join("mcp")).unwrap();
        fs_err::write(live.join("SKILL.md"), "my md").unwrap();
        fs_err::write(live.join("mcp/server.py"), "old py").unwrap();
        fs_err::write(live.join("gone.md"), "removed upstream").unwrap();
        fs_err::write(live.join("mine.md"), "added by hand").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", live.join("link")).unwrap();
        let after: BTreeMap<String, After> = [
            (format!("{dir}/SKILL.md"), After::Live),
            (
                format!("{dir}/mcp/server.py"),
                After::Release(Arc::from("context/skills/c/s/mcp/server.py")),
            ),
            (format!("{dir}/gone.md"), After::Absent),
        ]
        .into_iter()
        .collect();
        let view = payload.folder_after(dir, root.path(), &after).unwrap();
        let v = view.path();
        assert!(v.ends_with("s"));
        let read = |p: &str| fs_err::read_to_string(v.join(p)).unwrap();
        assert_eq!(read("SKILL.md"), "my md");
        assert_eq!(read("mcp/server.py"), "release py");
        assert_eq!(read("mine.md"), "added by hand");
        assert!(!v.join("gone.md").exists());
        let link = fs_err::symlink_metadata(v.join("link")).unwrap();
        assert!(link.file_type().is_symlink());
        assert_eq!(
            fs_err::read_link(v.join("link")).unwrap(),
            Path::new("/etc/passwd")
        );
        // The live folder is untouched.
        assert_eq!(
            fs_err::read_to_string(live.join("mcp/server.py")).unwrap(),
            "old py"
        );
        assert!(live.join("gone.md").exists());
    }

    /// A release compressed as several gzip members (`cat a.gz b.gz`, `bgzip`, `pigz
    /// --independent`) is read whole, as GNU gzip reads it (QA26: it was cut at its first
    /// member and refused as "not a processkit release").
    #[test]
    fn a_multi_member_gzip_release_is_read_whole() {
        use aibox_test_support::http::release::SyntheticRelease;
        let release = SyntheticRelease::processkit_like("v0.28.3", false);
        let whole = read_archive(&release.tar_gz(), "t", None, &ExtractLimits::default()).unwrap();
        let plain = tar(&release.entries());
        // Cut mid-entry, at an odd offset: members need not end at a tar block.
        let cut = plain.len() / 2 + 7;
        let mut members = gzip(&plain[..cut]);
        members.extend(gzip(&plain[cut..]));
        let split = read_archive(&members, "t", None, &ExtractLimits::default()).unwrap();
        assert_eq!(split.files.len(), whole.files.len());
        assert!(split.files.len() > 800, "{}", split.files.len());
        assert!(*split.files == *whole.files);
    }

    /// A review folder an interrupted run left (its process is gone) is removed by the
    /// cleaning the first review of a run does; one of a live process stays; the new one
    /// is named after this process.
    #[test]
    fn a_review_folder_of_a_dead_process_is_removed() {
        let stale = std::env::temp_dir().join("aibox-review-999999999-qa26");
        fs_err::create_dir_all(stale.join("s")).unwrap();
        fs_err::write(stale.join("s/server.py"), "left").unwrap();
        let live = std::env::temp_dir().join("aibox-review-1-qa26");
        fs_err::create_dir_all(&live).unwrap();
        // What `review_folder` runs once per process (another test may have run it).
        crate::cache::clean_stale(&std::env::temp_dir(), REVIEW_PREFIX);
        assert!(!stale.exists());
        assert!(live.exists());
        fs_err::remove_dir(&live).unwrap();
        let (temp, copy) = review_folder("context/skills/c/s").unwrap();
        let name = temp
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            name.starts_with(&format!("aibox-review-{}-", std::process::id())),
            "{name}"
        );
        assert!(copy.ends_with("s"));
    }

    /// A folder of the live skill that is a link (here to a folder outside the project)
    /// stays a link in the view, and nothing is written or removed through it (QA26: a
    /// dry run rewrote the outside folder's files with the release's).
    #[test]
    fn folder_after_never_writes_through_a_linked_folder() {
        use crate::After;
        let dir = "context/skills/c/s";
        let payload = read_archive(
            &gzip(&tar(&[
                TarEntry::dir("processkit-v1.0.0/"),
                TarEntry::file(
                    "processkit-v1.0.0/context/skills/c/s/mcp/server.py",
                    "release py",
                ),
                TarEntry::file("processkit-v1.0.0/context/skills/c/s/mcp/gone.md", "x"),
            ])),
            "t",
            None,
            &ExtractLimits::default(),
        )
        .unwrap();
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs_err::write(outside.path().join("server.py"), "outside py").unwrap();
        fs_err::write(outside.path().join("gone.md"), "outside md").unwrap();
        let live = root.path().join(dir);
        fs_err::create_dir_all(&live).unwrap();
        std::os::unix::fs::symlink(outside.path(), live.join("mcp")).unwrap();
        let after: BTreeMap<String, After> = [
            (
                format!("{dir}/mcp/server.py"),
                After::Release(Arc::from("context/skills/c/s/mcp/server.py")),
            ),
            (format!("{dir}/mcp/gone.md"), After::Absent),
        ]
        .into_iter()
        .collect();
        let view = payload.folder_after(dir, root.path(), &after).unwrap();
        let link = fs_err::symlink_metadata(view.path().join("mcp")).unwrap();
        assert!(link.file_type().is_symlink());
        let read = |p: &str| fs_err::read_to_string(outside.path().join(p)).unwrap();
        assert_eq!(read("server.py"), "outside py");
        assert_eq!(read("gone.md"), "outside md");
    }
}
