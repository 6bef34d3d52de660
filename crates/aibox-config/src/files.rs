//! The vocabulary of a plan: files that aibox intends to write.
//!
//! Generators in the crates above return [`PlannedFile`]s; only the engine's writer
//! turns them into bytes on disk. The type lives here, at the bottom layer, so every
//! generator speaks it without depending on the engine.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};

/// A planned file's project-relative path, held once and shared by reference count: a
/// processkit release file installed at its own path shares the name the release's file
/// map keeps, and the file's report takes the same allocation (a 10x first install
/// plans 8,700 such paths, 0.8 MB when each was a copy). Reads as a [`Utf8Path`].
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PlanPath(Arc<str>);

impl PlanPath {
    /// The path as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path as a [`Utf8Path`].
    #[must_use]
    pub fn as_path(&self) -> &Utf8Path {
        Utf8Path::new(&*self.0)
    }
}

impl std::ops::Deref for PlanPath {
    type Target = Utf8Path;
    fn deref(&self) -> &Utf8Path {
        self.as_path()
    }
}

impl AsRef<Utf8Path> for PlanPath {
    fn as_ref(&self) -> &Utf8Path {
        self.as_path()
    }
}

impl AsRef<Path> for PlanPath {
    fn as_ref(&self) -> &Path {
        self.as_path().as_std_path()
    }
}

impl fmt::Debug for PlanPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for PlanPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Arc<str>> for PlanPath {
    fn from(path: Arc<str>) -> Self {
        Self(path)
    }
}

impl From<&Arc<str>> for PlanPath {
    fn from(path: &Arc<str>) -> Self {
        Self(Arc::clone(path))
    }
}

impl From<&str> for PlanPath {
    fn from(path: &str) -> Self {
        Self(Arc::from(path))
    }
}

impl From<String> for PlanPath {
    fn from(path: String) -> Self {
        Self(Arc::from(path))
    }
}

impl From<Utf8PathBuf> for PlanPath {
    fn from(path: Utf8PathBuf) -> Self {
        Self::from(path.into_string())
    }
}

impl From<PlanPath> for Utf8PathBuf {
    fn from(path: PlanPath) -> Self {
        Utf8PathBuf::from(&*path.0)
    }
}

impl PartialEq<str> for PlanPath {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<String> for PlanPath {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<&str> for PlanPath {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Utf8Path> for PlanPath {
    fn eq(&self, other: &Utf8Path) -> bool {
        self.as_path() == other
    }
}

impl PartialEq<&Utf8Path> for PlanPath {
    fn eq(&self, other: &&Utf8Path) -> bool {
        self.as_path() == *other
    }
}

impl serde::Serialize for PlanPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// A verified file whose bytes a planned file takes, instead of holding them in memory
/// (the processkit release's unpacked files). The writer copies it into place and checks
/// the digest while copying; a mismatch writes nothing.
///
/// The source is a folder and a path below it, both shared: a release of 17,000 files
/// planned into the project and into its snapshot names each source twice, and one
/// absolute path per copy was the largest part of a plan's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyFrom {
    /// Absolute path of the folder holding the source (one allocation per release,
    /// behind a thin pointer: 8 bytes in each of a plan's thousands of copies).
    pub dir: Arc<PathBuf>,
    /// The source's `/`-separated path below `dir` (shared by every copy of one file).
    pub rel: Arc<str>,
    /// Its expected SHA-256.
    pub sha256: [u8; 32],
    /// Its expected size in bytes.
    pub size: u64,
    /// Where its bytes start when `dir` is a pack file (an unpacked release's files one
    /// after another); [`NOT_PACKED`] for a file of its own below a folder.
    pack_offset: u64,
}

/// [`CopyFrom::pack_offset`] of a source that is a file of its own.
const NOT_PACKED: u64 = u64::MAX;

impl CopyFrom {
    /// A source file: `rel` below `dir`.
    pub fn new(dir: Arc<PathBuf>, rel: Arc<str>, sha256: [u8; 32], size: u64) -> Self {
        Self {
            dir,
            rel,
            sha256,
            size,
            pack_offset: NOT_PACKED,
        }
    }

    /// A source held in the pack file `pack` at `offset` (`size` bytes from there), known
    /// by its path `rel` in the release.
    pub fn in_pack(
        pack: Arc<PathBuf>,
        rel: Arc<str>,
        sha256: [u8; 32],
        size: u64,
        offset: u64,
    ) -> Self {
        Self {
            dir: pack,
            rel,
            sha256,
            size,
            pack_offset: offset.min(NOT_PACKED - 1),
        }
    }

    /// The source's name: its own path, or for a packed source the pack's path followed
    /// by the release path (`.../pack/context/...`), which names it in messages and tells
    /// sources apart but is not a file to open (see [`Self::open`]).
    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.dir.join(&*self.rel)
    }

    /// Where the source's bytes start in the pack file [`Self::dir`] names, for a source
    /// in a pack; `None` for a file of its own.
    #[must_use]
    pub fn pack_offset(&self) -> Option<u64> {
        (self.pack_offset != NOT_PACKED).then_some(self.pack_offset)
    }

    /// Opens the source for reading: at most one byte more than the verified size of a
    /// file of its own (enough to see that it grew), exactly its range of a pack.
    ///
    /// # Errors
    /// The file (or pack) cannot be opened or positioned.
    pub fn open(&self) -> std::io::Result<std::io::Take<fs_err::File>> {
        use std::io::{Read as _, Seek as _};
        if self.pack_offset == NOT_PACKED {
            return Ok(fs_err::File::open(self.path())?.take(self.size.saturating_add(1)));
        }
        let mut pack = fs_err::File::open(&*self.dir)?;
        pack.seek(std::io::SeekFrom::Start(self.pack_offset))?;
        Ok(pack.take(self.size))
    }

    /// [`Self::open`], but a source in a pack is read by position through the pack `kept`
    /// holds open, opened here when it holds another or none: a reader of many sources
    /// (the writer, the install fingerprint) opens each pack once, where opening it by its
    /// path again for every source cost 8,704 opens in a 10x first install.
    ///
    /// # Errors
    /// The file (or pack) cannot be opened.
    pub fn open_kept<'k>(&self, kept: &'k mut KeptPack) -> std::io::Result<SourceReader<'k>> {
        let Some(at) = self.pack_offset().filter(|_| cfg!(unix)) else {
            return self.open().map(SourceReader::Own);
        };
        let file = match kept.0.take() {
            Some(open) if Arc::ptr_eq(&open.0, &self.dir) || open.0 == self.dir => {
                &kept.0.insert(open).1
            }
            _ => {
                &kept
                    .0
                    .insert((Arc::clone(&self.dir), fs_err::File::open(&*self.dir)?))
                    .1
            }
        };
        Ok(SourceReader::Packed {
            file,
            at,
            end: at.saturating_add(self.size),
        })
    }

    /// Reads the whole source and checks its size and SHA-256 (for the few readers that
    /// need the bytes in memory, such as the secret scan of an unverified release).
    ///
    /// # Errors
    /// What failed, in one phrase: the read, or which check the bytes no longer pass.
    pub fn read_verified(&self) -> Result<Vec<u8>, String> {
        use sha2::Digest as _;
        use std::io::Read as _;
        // Sized from the verified size: the bytes arrive in one read and an end-of-file
        // check, where an empty buffer grows from 32 bytes read by read.
        let mut bytes = Vec::with_capacity(
            usize::try_from(self.size.saturating_add(1)).map_or(0, |n| n.min(1 << 26)),
        );
        self.open()
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| format!("cannot be read: {e}"))?;
        match self.mismatch(bytes.len() as u64, &sha2::Sha256::digest(&bytes).into()) {
            Some(reason) => Err(reason),
            None => Ok(bytes),
        }
    }

    /// Why `size` bytes hashing to `sha256`, read from the source, are not the verified
    /// ones (one phrase, completing "the source …"); `None` when they are.
    pub fn mismatch(&self, size: u64, sha256: &[u8; 32]) -> Option<String> {
        if size != self.size {
            Some(format!("has {size} bytes, {} were verified", self.size))
        } else if *sha256 != self.sha256 {
            Some("no longer has the verified SHA-256".to_owned())
        } else {
            None
        }
    }
}

/// The pack file a reader of packed sources keeps open (see [`CopyFrom::open_kept`]):
/// the path it was opened by, and the file. Kept for as long as the reader lives (one
/// apply), so a store rebuilt under the same path later is opened anew.
#[derive(Debug, Default)]
pub struct KeptPack(Option<(Arc<PathBuf>, fs_err::File)>);

/// A verified source opened for reading ([`CopyFrom::open_kept`]): a file of its own, or
/// a range of a kept pack file, read by position.
#[derive(Debug)]
pub enum SourceReader<'k> {
    /// A file of its own, or a pack opened for this source alone.
    Own(std::io::Take<fs_err::File>),
    /// The range `at..end` of a kept pack.
    Packed {
        /// The kept pack.
        file: &'k fs_err::File,
        /// Where the next read starts.
        at: u64,
        /// Where the source's bytes end.
        end: u64,
    },
}

impl std::io::Read for SourceReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Own(file) => file.read(buf),
            Self::Packed { file, at, end } => {
                let left = end.saturating_sub(*at);
                let want = usize::try_from(left).map_or(buf.len(), |left| left.min(buf.len()));
                let n = read_at(file, &mut buf[..want], *at)?;
                *at += n as u64;
                Ok(n)
            }
        }
    }
}

/// Reads from `file` at `offset`, leaving its position alone.
#[cfg(unix)]
fn read_at(file: &fs_err::File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file.file(), buf, offset)
}

/// Without positional reads no source is read from a kept pack (see
/// [`CopyFrom::open_kept`]).
#[cfg(not(unix))]
fn read_at(_file: &fs_err::File, _buf: &mut [u8], _offset: u64) -> std::io::Result<usize> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Who owns a planned file, which decides how the writer treats an existing copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ownership {
    /// Fully generated from the configuration; rewritten whenever it differs. A copy
    /// without aibox's header is hand-written and needs `--force` (which backs it up).
    Generated,
    /// Created once for the user, never overwritten afterwards.
    ScaffoldOnce,
    /// aibox merges its entries into a file that others also edit; the contents are the
    /// merge result computed from the file's current text.
    Merged,
    /// Generated local state that must stay out of git (for example `.devcontainer/aibox-local.env`).
    LocalState,
}

/// Contents a planned file gets from a function when it is written, not from bytes
/// the plan holds: for a file too large to keep whole through an apply (the processkit
/// install marker has a line per installed file). Its digest and size are known up
/// front, so the file is compared without the text.
pub trait Render: fmt::Debug + Send + Sync {
    /// Writes the contents into `out`.
    fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()>;
    /// SHA-256 of the contents.
    fn sha256(&self) -> [u8; 32];
    /// Size of the contents in bytes.
    fn size(&self) -> u64;
    /// The whole contents (a dry run's diff).
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(usize::try_from(self.size()).unwrap_or_default());
        // Writing into a `Vec` cannot fail.
        let _ = self.write_to(&mut out);
        out
    }
}

/// One file of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// Path relative to the project root, with `/` separators.
    pub path: PlanPath,
    /// Full new contents (empty when [`Self::copy_from`] is set). Boxed, not a `Vec`:
    /// never grown once planned, and 8 bytes less in each of a plan's thousands of copies.
    pub contents: Box<[u8]>,
    /// When set, the contents are this verified file's bytes, streamed by the writer.
    pub copy_from: Option<CopyFrom>,
    /// Ownership class.
    pub ownership: Ownership,
    /// Unix permission bits to set (for example `0o600` for files holding personal data;
    /// 16 bits hold all twelve, and keep a planned file at 112 bytes).
    pub mode: Option<u16>,
}

impl PlannedFile {
    /// A generated file with default permissions.
    pub fn generated(path: impl Into<PlanPath>, contents: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.into(),
            contents: contents.into().into_boxed_slice(),
            ownership: Ownership::Generated,
            mode: None,
            copy_from: None,
        }
    }

    /// A file with the given ownership and default permissions.
    pub fn new(
        path: impl Into<PlanPath>,
        contents: impl Into<Vec<u8>>,
        ownership: Ownership,
    ) -> Self {
        Self {
            path: path.into(),
            contents: contents.into().into_boxed_slice(),
            ownership,
            mode: None,
            copy_from: None,
        }
    }

    /// [`Self::mode`] as the writer takes it.
    #[must_use]
    pub fn mode_bits(&self) -> Option<u32> {
        self.mode.map(u32::from)
    }

    /// A file whose contents are the bytes of the verified file `from`.
    pub fn copy(path: impl Into<PlanPath>, from: CopyFrom, ownership: Ownership) -> Self {
        Self {
            path: path.into(),
            contents: Box::default(),
            ownership,
            mode: None,
            copy_from: Some(from),
        }
    }
}
