//! The download cache: verified release archives keyed by their SHA-256
//! (`archives/sha256-<hex>.tar.gz`, re-hashed on every use; a cached file that no longer
//! matches its name is deleted and ignored), and each one unpacked once
//! (`unpacked/sha256-<hex>/`: a `pack` of every file's bytes one after another plus a
//! `manifest` of every file's path, SHA-256, size, mode and offset in the pack). One pack
//! file, not a tree: a release of 860 files in 750 folders cost a cold first install
//! as many creations again as the project's own files (measured: a cold install 1.33 to
//! 1.67x `cp -r` of the installed tree, against 0.9x with the release already
//! unpacked). Readers that walk a folder (the skill review) get a checked temporary copy
//! of the one folder they read ([`crate::Payload::folder`]).
//!
//! Trust rule of the unpacked store: it is the user's own cache, like the archive cache.
//! A store is built only from an archive whose digest was verified (or from a local
//! directory release whose tree digest was verified, [`Cache::keep_payload`], so its
//! files are still there for `migrate`'s base after the directory moved on), in a
//! private staging folder renamed into place after its manifest is complete, so a
//! half-made store is never seen; a store whose manifest is missing, truncated or names another archive is
//! removed and unpacked anew. The manifest is then trusted for which files the release
//! has; every byte taken from the store is re-hashed against it while it is copied or
//! parsed (a mismatch refuses with `aibox::apply::source_changed` or
//! `aibox::provenance::changed_release_file`, it is never installed). `doctor
//! --integrity` trusts no cache: it re-hashes every installed byte. Values derived from
//! a store's bytes (the `v2:` install fingerprint of a selection) are remembered in its
//! `memo/` folder under a digest of their inputs, with the same trust as the manifest.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::digest::Sha256;
use crate::error::{ProvenanceError, Result};
use crate::extract::{ExtractLimits, Payload, PayloadFile, unpack_archive};

/// First line of an unpacked store's manifest. A store of another version (version 1
/// kept a tree of files) is not read: it is removed and unpacked again.
const MANIFEST_HEADER: &str = "aibox-unpacked-release 2";
/// The pack file in an unpacked store.
const PACK: &str = "pack";
/// Prefix of staging folders (followed by the pid of the process that owns them).
const STAGING_PREFIX: &str = ".staging-";
/// Prefix of downloads in progress (followed by the pid of the process that owns them).
const DOWNLOAD_PREFIX: &str = ".download-";

/// A digest-keyed archive cache rooted at a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// A cache at an explicit directory (tests and embedders inject their own).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The default location: `$XDG_CACHE_HOME/aibox`, else `$HOME/.cache/aibox`.
    pub fn default_location() -> Option<Self> {
        aibox_config::hostpath::user_dir("XDG_CACHE_HOME", ".cache").map(Self::new)
    }

    /// The cache at `dir` when one is given (an option or a test's), else the default
    /// location ([`Cache::default_location`]).
    pub fn at_or_default(dir: Option<&Path>) -> Option<Self> {
        dir.map_or_else(Self::default_location, |d| Some(Self::new(d)))
    }

    /// The cache directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the archive with `digest` is cached.
    pub fn archive_path(&self, digest: &Sha256) -> PathBuf {
        self.root
            .join("archives")
            .join(format!("sha256-{digest}.tar.gz"))
    }

    /// Where the archive with `digest` is unpacked.
    pub fn unpacked_path(&self, digest: &Sha256) -> PathBuf {
        self.root.join("unpacked").join(format!("sha256-{digest}"))
    }

    /// Whether the release with `digest` can be had from the cache without the network:
    /// a sound unpacked store, or an archive that still matches its digest.
    pub fn contains(&self, digest: &Sha256) -> Result<bool> {
        if self.unpacked(digest)?.is_some() {
            return Ok(true);
        }
        self.archive_sound(digest)
    }

    /// Whether the cached archive with `digest` is there and still hashes to it; a
    /// damaged one is removed.
    pub(crate) fn archive_sound(&self, digest: &Sha256) -> Result<bool> {
        let path = self.archive_path(digest);
        match fs_err::File::open(&path) {
            Ok(f) => {
                let ok = Sha256::of_reader(f).is_ok_and(|d| d == *digest);
                if !ok {
                    let _ = fs_err::remove_file(&path);
                }
                Ok(ok)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(ProvenanceError::io("read", &path, e)),
        }
    }

    /// A temporary file in the archive folder, for a download streamed to disk (renamed
    /// into the cache by [`Self::keep_archive`] once verified, removed when dropped).
    /// Named after this process, so the next download removes one a killed run left
    /// (QA26: each interrupted download kept a release-sized file for good).
    pub(crate) fn temp_archive(&self) -> Result<tempfile::NamedTempFile> {
        let dir = self.root.join("archives");
        fs_err::create_dir_all(&dir).map_err(|e| ProvenanceError::io("create", &dir, e))?;
        clean_stale(&dir, DOWNLOAD_PREFIX);
        tempfile::Builder::new()
            .prefix(&format!("{DOWNLOAD_PREFIX}{}-", std::process::id()))
            .tempfile_in(&dir)
            .map_err(|e| ProvenanceError::io("create temporary file in", &dir, e))
    }

    /// Moves a verified downloaded archive into the cache.
    pub(crate) fn keep_archive(
        &self,
        digest: &Sha256,
        file: tempfile::NamedTempFile,
    ) -> Result<()> {
        let path = self.archive_path(digest);
        file.persist(&path)
            .map_err(|e| ProvenanceError::io("rename into", &path, e.error))?;
        Ok(())
    }

    /// The unpacked release with `digest`, when its store is complete. A store with a
    /// missing or damaged manifest is removed (and reported as a miss).
    pub fn unpacked(&self, digest: &Sha256) -> Result<Option<Payload>> {
        let dir = self.unpacked_path(digest);
        let manifest = dir.join("manifest");
        // No store, or one without a readable manifest (a missing folder is fine to remove).
        let Ok(text) = fs_err::read_to_string(&manifest) else {
            remove_store(&dir)?;
            return Ok(None);
        };
        let pack = dir.join(PACK);
        // A pack of another length than the manifest's files is damaged (every byte read
        // from it is still checked against the manifest): unpacked again.
        let packed = |files: &BTreeMap<Arc<str>, PayloadFile>| {
            let len: u64 = files.values().map(|f| f.size).sum();
            fs_err::metadata(&pack).is_ok_and(|m| m.is_file() && m.len() == len)
        };
        if let Some((files, top_tag)) = parse_manifest(&text, digest).filter(|(f, _)| packed(f)) {
            Ok(Some(
                Payload::in_pack(files, Some(top_tag), pack).in_store(dir),
            ))
        } else {
            remove_store(&dir)?;
            Ok(None)
        }
    }

    /// The file listing (path → digest, size, mode) of the unpacked store of `digest`,
    /// read from its manifest alone and never repaired or removed: for naming files a
    /// caller has already found to differ (`doctor --integrity`), which checks it against
    /// a digest of its own before trusting a name in it.
    pub(crate) fn listing(&self, digest: &Sha256) -> Option<BTreeMap<Arc<str>, PayloadFile>> {
        let text = fs_err::read_to_string(self.unpacked_path(digest).join("manifest")).ok()?;
        parse_manifest(&text, digest).map(|(files, _)| files)
    }

    /// Where the unpacked store of `digest` keeps the bytes of release file `rel`: the
    /// pack's path, the offset and the size; `None` when there is no such store or file.
    /// For tools that inspect a store (and tests that damage one).
    ///
    /// # Errors
    /// A damaged store cannot be removed.
    pub fn stored_range(&self, digest: &Sha256, rel: &str) -> Result<Option<(PathBuf, u64, u64)>> {
        Ok(self.unpacked(digest)?.and_then(|p| {
            let f = p.files.get(rel)?;
            Some((self.unpacked_path(digest).join(PACK), f.offset, f.size))
        }))
    }

    /// Unpacks the archive read from `input` (whose digest must be `digest`) into the
    /// store and returns it. The tree is built in a private staging folder; on any error,
    /// or when the bytes read do not hash to `digest` (reported as
    /// [`ProvenanceError::DigestMismatch`] for `what`), the staging folder is removed
    /// and no store is left behind. Leftover staging folders of dead processes are
    /// removed first.
    pub(crate) fn unpack(
        &self,
        digest: &Sha256,
        input: impl Read,
        what: &str,
        expected_tag: Option<&str>,
        limits: &ExtractLimits,
    ) -> Result<Payload> {
        let staging = self.new_staging()?;
        let pack = staging.path().join(PACK);
        let unpacked = unpack_archive(input, what, expected_tag, limits, &pack)?;
        if unpacked.archive_sha256 != *digest {
            return Err(ProvenanceError::DigestMismatch {
                what: what.to_owned(),
                expected: digest.to_hex(),
                actual: unpacked.archive_sha256.to_hex(),
            });
        }
        // Another process finished the same store first: use theirs.
        if let Some(theirs) = self.settle(digest, staging, &unpacked.top_tag, &unpacked.files)? {
            return Ok(theirs);
        }
        let dest = self.unpacked_path(digest);
        Ok(
            Payload::in_pack(unpacked.files, Some(unpacked.top_tag), dest.join(PACK))
                .in_store(dest)
                .with_parsed(unpacked.parsed),
        )
    }
}

impl Cache {
    /// Keeps a copy of a release read in place (a local directory source, `digest` its
    /// verified tree digest) in the unpacked store, as an archive's is kept: the same
    /// `pack` and `manifest`, so [`Cache::unpacked`] serves it to a later command after
    /// the directory changed (the base version of a `migrate` conflict). Every byte is
    /// taken through the payload's checking reader; nothing is done when the store is
    /// there already.
    ///
    /// # Errors
    /// A file of the directory that changed since it was read (nothing is kept), or the
    /// store cannot be written.
    pub fn keep_payload(&self, digest: &Sha256, payload: &Payload) -> Result<()> {
        use std::io::Write as _;
        if self.unpacked(digest)?.is_some() {
            return Ok(());
        }
        let staging = self.new_staging()?;
        let pack = staging.path().join(PACK);
        let file =
            fs_err::File::create(&pack).map_err(|e| ProvenanceError::io("create", &pack, e))?;
        let mut out = std::io::BufWriter::new(file);
        let mut files = BTreeMap::new();
        let mut offset = 0;
        for (path, f) in payload.files.iter() {
            let mut failed = None;
            payload.stream(path, &mut |chunk| {
                if failed.is_none() {
                    failed = out.write_all(chunk).err();
                }
            })?;
            if let Some(e) = failed {
                return Err(ProvenanceError::io("write", &pack, e));
            }
            files.insert(Arc::clone(path), PayloadFile { offset, ..*f });
            offset += f.size;
        }
        out.flush()
            .map_err(|e| ProvenanceError::io("write", &pack, e))?;
        drop(out);
        // Another process may have kept the same release first: either is the same bytes.
        self.settle(
            digest,
            staging,
            payload.top_tag.as_deref().unwrap_or(""),
            &files,
        )?;
        Ok(())
    }

    /// A new staging folder in the unpacked store (stale ones of dead processes removed
    /// first), renamed into place by [`Cache::settle`].
    fn new_staging(&self) -> Result<tempfile::TempDir> {
        let base = self.root.join("unpacked");
        fs_err::create_dir_all(&base).map_err(|e| ProvenanceError::io("create", &base, e))?;
        clean_stale(&base, STAGING_PREFIX);
        tempfile::Builder::new()
            .prefix(&format!("{STAGING_PREFIX}{}-", std::process::id()))
            .tempdir_in(&base)
            .map_err(|e| ProvenanceError::io("create staging folder in", &base, e))
    }

    /// Writes the manifest of `files` into `staging` (whose pack is complete) and moves it
    /// into place as the store of `digest`. `Some`: another process put the same release
    /// there first; its store is returned and this one is removed.
    fn settle(
        &self,
        digest: &Sha256,
        staging: tempfile::TempDir,
        top_tag: &str,
        files: &BTreeMap<Arc<str>, PayloadFile>,
    ) -> Result<Option<Payload>> {
        let text = render_manifest(digest, top_tag, files);
        let manifest = staging.path().join("manifest");
        fs_err::write(&manifest, text).map_err(|e| ProvenanceError::io("write", &manifest, e))?;
        let dest = self.unpacked_path(digest);
        let staged = staging.keep();
        if let Err(e) = fs_err::rename(&staged, &dest) {
            let _ = fs_err::remove_dir_all(&staged);
            return match self.unpacked(digest)? {
                Some(theirs) => Ok(Some(theirs)),
                None => Err(ProvenanceError::io("move into place", &dest, e)),
            };
        }
        Ok(None)
    }
}

/// A value remembered in the unpacked store `store` under `key` (a hex digest of
/// what it was derived from), if one was recorded and is well formed.
pub(crate) fn memo_read(store: &Path, key: &str) -> Option<String> {
    let text = fs_err::read_to_string(store.join("memo").join(key)).ok()?;
    let value = text.trim_end();
    (!value.is_empty() && !value.contains('\n')).then(|| value.to_owned())
}

/// Remembers `value` in the unpacked store `store` under `key`. Best effort: the store
/// stays valid without it, and the value is only derived data (it is computed again
/// when missing), so a failed write is not an error.
pub(crate) fn memo_write(store: &Path, key: &str, value: &str) {
    write_best_effort(&store.join("memo").join(key), &format!("{value}\n"));
}

/// Writes `text` to `path` atomically (a temporary file beside it renamed into place),
/// for derived data that is computed again when missing: a failed write is not an error.
fn write_best_effort(path: &Path, text: &str) {
    let write = || -> std::io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        fs_err::create_dir_all(dir)?;
        let mut temp = tempfile::NamedTempFile::new_in(dir)?;
        std::io::Write::write_all(&mut temp, text.as_bytes())?;
        temp.persist(path).map_err(|e| e.error)?;
        Ok(())
    };
    let _ = write();
}

impl Cache {
    /// A resolution of the MCP environment `id` (its spec's digest, see
    /// [`crate::pydeps::EnvSpec::id`]) stored by [`Cache::store_resolution`], if any.
    pub fn resolution(&self, id: &str) -> Option<String> {
        fs_err::read_to_string(self.resolution_path(RESOLUTIONS, id)?).ok()
    }

    /// Keeps the resolver's answer for the environment `id`, so another project on the
    /// same spec needs no resolver. Best effort: a resolution not kept is asked again.
    pub fn store_resolution(&self, id: &str, text: &str) {
        self.store_in(RESOLUTIONS, id, text);
    }

    /// A resolution of the npm tree `id` (see [`crate::npmdeps::NpmSpec::id`]) stored by
    /// [`Cache::store_npm_resolution`], if any.
    pub fn npm_resolution(&self, id: &str) -> Option<String> {
        fs_err::read_to_string(self.resolution_path(NPM_RESOLUTIONS, id)?).ok()
    }

    /// Keeps npm's answer for the tree `id` (best effort, as [`Cache::store_resolution`]).
    pub fn store_npm_resolution(&self, id: &str, text: &str) {
        self.store_in(NPM_RESOLUTIONS, id, text);
    }

    fn store_in(&self, folder: &str, id: &str, text: &str) {
        let Some(file) = self.resolution_path(folder, id) else {
            return;
        };
        let dir = self.root.join(folder);
        let write = || -> std::io::Result<()> {
            fs_err::create_dir_all(&dir)?;
            let mut temp = tempfile::NamedTempFile::new_in(&dir)?;
            std::io::Write::write_all(&mut temp, text.as_bytes())?;
            temp.persist(&file).map_err(|e| e.error)?;
            Ok(())
        };
        let _ = write();
    }

    /// `mcp-envs/<id>.txt` (`mcp-npm/<id>.json`); `None` for an id that is not a plain
    /// hex name.
    fn resolution_path(&self, folder: &str, id: &str) -> Option<PathBuf> {
        let plain = !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit());
        let ext = if folder == NPM_RESOLUTIONS {
            "json"
        } else {
            "txt"
        };
        plain.then(|| self.root.join(folder).join(format!("{id}.{ext}")))
    }
}

/// The digests of local release archives, each remembered with the archive's stat in a
/// file of its own under `local-archives/` (named by the digest of the archive's path), so
/// an unchanged archive is not hashed on every `apply` (16 MB at 10x processkit, 11 ms of
/// a 70 ms no-op). The stat cache's rule decides whether the stat is unchanged.
impl Cache {
    /// The memo file of the archive at `path`.
    fn local_archive_memo(&self, path: &Path) -> PathBuf {
        let name = Sha256::of(path.as_os_str().as_encoded_bytes()).to_hex();
        self.root.join(LOCAL_ARCHIVES).join(name)
    }

    /// The remembered digest of the archive at `path` whose metadata is `meta`, if its
    /// stat is the remembered one (and not racily clean).
    pub(crate) fn local_archive_digest(
        &self,
        path: &Path,
        meta: &std::fs::Metadata,
    ) -> Option<Sha256> {
        let memo = self.local_archive_memo(path);
        crate::statcache::StatCache::recall(&memo, &path.to_string_lossy(), meta)
    }

    /// Remembers that the archive at `path`, whose metadata was `meta` when its reading
    /// began, hashes to `digest`. Best effort.
    pub(crate) fn remember_local_archive(
        &self,
        path: &Path,
        meta: &std::fs::Metadata,
        digest: &Sha256,
    ) {
        if let Some(text) =
            crate::statcache::StatCache::memo_text(&path.to_string_lossy(), meta, digest)
        {
            write_best_effort(&self.local_archive_memo(path), &text);
        }
    }
}

/// Folder of the remembered digests of local release archives.
const LOCAL_ARCHIVES: &str = "local-archives";
/// Folder of the cache's MCP environment resolutions.
const RESOLUTIONS: &str = "mcp-envs";
/// Folder of the cache's resolutions of npm trees of MCP servers.
const NPM_RESOLUTIONS: &str = "mcp-npm";

/// A temporary file for a download when there is no cache (removed when dropped).
pub(crate) fn temp_download() -> Result<tempfile::NamedTempFile> {
    tempfile::NamedTempFile::new()
        .map_err(|e| ProvenanceError::io("create a temporary file in", "$TMPDIR", e))
}

fn remove_store(dir: &Path) -> Result<()> {
    match fs_err::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ProvenanceError::io(
            "remove damaged unpacked release",
            dir,
            e,
        )),
    }
}

/// Removes the entries named `prefix` + pid whose process is gone: staging folders of a
/// killed unpack, downloads of a killed fetch.
pub(crate) fn clean_stale(base: &Path, prefix: &str) {
    let Ok(entries) = fs_err::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or_default();
        if pid == std::process::id().to_string() || process_alive(pid) {
            continue;
        }
        let path = entry.path();
        let _ = if entry.file_type().is_ok_and(|t| t.is_dir()) {
            fs_err::remove_dir_all(path)
        } else {
            fs_err::remove_file(path)
        };
    }
}

/// Whether a process with this pid exists (Linux: `/proc/<pid>`; elsewhere assumed).
fn process_alive(pid: &str) -> bool {
    if cfg!(target_os = "linux") {
        !pid.is_empty() && Path::new("/proc").join(pid).exists()
    } else {
        true
    }
}

/// The manifest of an unpacked store: a header naming the archive digest and top tag,
/// one `<sha256> <size> <x|-> <offset> <path>` line per file, and an `end <count>`
/// trailer (a truncated manifest has none).
fn render_manifest(
    digest: &Sha256,
    top_tag: &str,
    files: &BTreeMap<Arc<str>, PayloadFile>,
) -> String {
    let mut out = format!("{MANIFEST_HEADER}\narchive {digest}\ntag {top_tag}\n");
    for (path, f) in files {
        let mode = if f.executable { 'x' } else { '-' };
        let _ = writeln!(out, "{} {} {mode} {} {path}", f.sha256, f.size, f.offset);
    }
    let _ = writeln!(out, "end {}", files.len());
    out
}

fn parse_manifest(
    text: &str,
    digest: &Sha256,
) -> Option<(BTreeMap<Arc<str>, PayloadFile>, String)> {
    let mut lines = text.lines();
    if lines.next()? != MANIFEST_HEADER {
        return None;
    }
    if lines.next()?.strip_prefix("archive ")? != digest.to_hex() {
        return None;
    }
    let tag = lines.next()?.strip_prefix("tag ")?.to_owned();
    let mut files = Vec::new();
    for line in lines {
        if let Some(count) = line.strip_prefix("end ") {
            let files = crate::extract::packed_files(files);
            return (count.parse::<usize>().ok()? == files.len()).then_some((files, tag));
        }
        let mut parts = line.splitn(5, ' ');
        let sha256 = Sha256::parse(parts.next()?, "manifest").ok()?;
        let size = parts.next()?.parse().ok()?;
        let executable = match parts.next()? {
            "x" => true,
            "-" => false,
            _ => return None,
        };
        let offset = parts.next()?.parse().ok()?;
        let path = parts.next()?;
        if path.is_empty() || path.starts_with('/') || path.split('/').any(|c| c == "..") {
            return None;
        }
        files.push((
            Arc::from(path),
            PayloadFile {
                sha256,
                size,
                executable,
                offset,
            },
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trips_and_a_truncated_one_is_refused() {
        let digest = Sha256::of(b"archive");
        let mut files = BTreeMap::new();
        files.insert(
            Arc::from("context/a b.md"),
            PayloadFile {
                sha256: Sha256::of(b"a"),
                size: 1,
                executable: true,
                offset: 7,
            },
        );
        let text = render_manifest(&digest, "v1.0.0", &files);
        let (parsed, tag) = parse_manifest(&text, &digest).unwrap();
        assert_eq!(parsed["context/a b.md"].offset, 7);
        assert_eq!((parsed, tag.as_str()), (files, "v1.0.0"));
        // A store of the tree layout (version 1) is not read.
        let old = text.replace(MANIFEST_HEADER, "aibox-unpacked-release 1");
        assert!(parse_manifest(&old, &digest).is_none());
        let cut = &text[..text.len() - 6];
        assert!(parse_manifest(cut, &digest).is_none());
        assert!(parse_manifest(&text, &Sha256::of(b"other")).is_none());
    }
}
