//! The vocabulary of a plan: files that aibox intends to write.
//!
//! Generators in the crates above return [`PlannedFile`]s; only the engine's writer
//! turns them into bytes on disk. The type lives here, at the bottom layer, so every
//! generator speaks it without depending on the engine.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use camino::Utf8PathBuf;

/// A verified file whose bytes a planned file takes, instead of holding them in memory
/// (the processkit release's unpacked files). The writer copies it into place and checks
/// the digest while copying; a mismatch writes nothing.
///
/// The source is a folder and a path below it, both shared: a release of 17,000 files
/// planned into the project and into its snapshot names each source twice, and one
/// absolute path per copy was the largest part of a plan's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyFrom {
    /// Absolute path of the folder holding the source (one allocation per release).
    pub dir: Arc<Path>,
    /// The source's `/`-separated path below `dir` (shared by every copy of one file).
    pub rel: Arc<str>,
    /// Its expected SHA-256.
    pub sha256: [u8; 32],
    /// Its expected size in bytes.
    pub size: u64,
}

impl CopyFrom {
    /// A source file: `rel` below `dir`.
    pub fn new(dir: Arc<Path>, rel: Arc<str>, sha256: [u8; 32], size: u64) -> Self {
        Self {
            dir,
            rel,
            sha256,
            size,
        }
    }

    /// Absolute path of the source file.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        self.dir.join(&*self.rel)
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
        fs_err::File::open(self.path())
            .and_then(|f| f.take(self.size.saturating_add(1)).read_to_end(&mut bytes))
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
    /// Generated local state that must stay out of git (for example `.aibox-local.env`).
    LocalState,
}

/// One file of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// Path relative to the project root, with `/` separators.
    pub path: Utf8PathBuf,
    /// Full new contents (empty when [`Self::copy_from`] is set).
    pub contents: Vec<u8>,
    /// When set, the contents are this verified file's bytes, streamed by the writer.
    pub copy_from: Option<CopyFrom>,
    /// Ownership class.
    pub ownership: Ownership,
    /// Unix permission bits to set (for example `0o600` for files holding personal data).
    pub mode: Option<u32>,
}

impl PlannedFile {
    /// A generated file with default permissions.
    pub fn generated(path: impl Into<Utf8PathBuf>, contents: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.into(),
            contents: contents.into(),
            ownership: Ownership::Generated,
            mode: None,
            copy_from: None,
        }
    }

    /// A file with the given ownership and default permissions.
    pub fn new(
        path: impl Into<Utf8PathBuf>,
        contents: impl Into<Vec<u8>>,
        ownership: Ownership,
    ) -> Self {
        Self {
            path: path.into(),
            contents: contents.into(),
            ownership,
            mode: None,
            copy_from: None,
        }
    }

    /// A file whose contents are the bytes of the verified file `from`.
    pub fn copy(path: impl Into<Utf8PathBuf>, from: CopyFrom, ownership: Ownership) -> Self {
        Self {
            path: path.into(),
            contents: Vec::new(),
            ownership,
            mode: None,
            copy_from: Some(from),
        }
    }
}
