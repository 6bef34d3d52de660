//! The download cache: verified release archives keyed by their SHA-256, re-hashed on
//! every use (a cached file that no longer matches its name is deleted and ignored).

use std::path::{Path, PathBuf};

use crate::digest::Sha256;
use crate::error::{ProvenanceError, Result};

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
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
        Some(Self::new(base.join("aibox")))
    }

    /// The cache directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_for(&self, digest: &Sha256) -> PathBuf {
        self.root
            .join("archives")
            .join(format!("sha256-{digest}.tar.gz"))
    }

    /// Returns the cached archive for `digest` after re-hashing it. A corrupt entry is
    /// removed and reported as a miss.
    pub fn load(&self, digest: &Sha256) -> Result<Option<Vec<u8>>> {
        let path = self.path_for(digest);
        let bytes = match fs_err::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ProvenanceError::io("read", &path, e)),
        };
        if Sha256::of(&bytes) == *digest {
            Ok(Some(bytes))
        } else {
            fs_err::remove_file(&path)
                .map_err(|e| ProvenanceError::io("remove corrupt cache entry", &path, e))?;
            Ok(None)
        }
    }

    /// Stores an archive whose digest the caller has verified (temp file + rename).
    pub fn store(&self, digest: &Sha256, bytes: &[u8]) -> Result<()> {
        debug_assert_eq!(Sha256::of(bytes), *digest);
        let path = self.path_for(digest);
        let dir = path.parent().unwrap_or(&self.root);
        fs_err::create_dir_all(dir).map_err(|e| ProvenanceError::io("create", dir, e))?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| ProvenanceError::io("create temporary file in", dir, e))?;
        std::io::Write::write_all(&mut tmp, bytes)
            .map_err(|e| ProvenanceError::io("write", tmp.path(), e))?;
        tmp.persist(&path)
            .map_err(|e| ProvenanceError::io("rename into", &path, e.error))?;
        Ok(())
    }
}
