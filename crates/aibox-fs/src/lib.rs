//! The single guarded writer: the only code in aibox that writes project files
//! (`apply`, `init`, `config set` and the processkit installer all write through it).
//!
//! A crate of its own, one floor above the file table it enforces
//! ([`aibox_config::layout`]): every crate that writes project files (the engine,
//! `aibox-provenance`) uses the same primitives, and an edit here rebuilds only those
//! crates, not every reader of the configuration.
//!
//! Guarantees:
//! - only clean relative paths (no `..`, `.`, empty components, absolute paths or
//!   backslashes) that the file table lets the writer's command write
//!   ([`aibox_config::layout::may_write`]; for `apply`, the [`PERIMETER`]);
//! - never through a symlink: every parent directory and the target itself are checked
//!   with `symlink_metadata` below the canonicalised project root (each directory once
//!   per [`ProjectRoot`]: aibox never removes or replaces a directory, and an apply
//!   holds the project lock);
//! - write-if-changed: identical bytes (and mode) leave the file untouched, so a no-op
//!   apply keeps mtimes and inodes;
//! - atomic: a temp file in the same directory is written, given its mode and renamed
//!   over the target, so a crash leaves the old or the new file, never a mix. Stray temp
//!   files of a killed run are removed by [`Writer::clean_stray_temps`]. The one
//!   exception replaces nothing: [`Writer::create_verified`] creates absent files at
//!   their final paths (`O_CREAT | O_EXCL`), for callers that recorded those paths as
//!   theirs to create before writing, so that a killed run's partly written file (a
//!   prefix of the verified bytes) is known and completed by the next run;
//! - few lookups: each folder is checked once per [`ProjectRoot`], created without
//!   looking first (only an existing one is inspected), and a folder found missing
//!   answers for every path below it until the writer makes it;
//! - durable: each write is fsynced (file and directory), except between
//!   [`Writer::defer_sync`] and [`Writer::commit`], where one `syncfs` of the project's
//!   file system makes the whole batch durable at once (an apply's content, before the
//!   records that name it), and caches ([`Writer::write_cache_streamed`]), whose loss
//!   after a crash only costs their reader work.

use std::io::Write as _;

use camino::{Utf8Path, Utf8PathBuf};

use aibox_config::KeptPack;
use aibox_config::layout::Writers;

/// The closed set of root-relative paths `apply` may write.
pub use aibox_config::layout::PERIMETER;

/// Why the writer refused or failed. The codes are `aibox::apply::*` because `apply` is
/// where users meet them; `init` and `config set` report the same ones.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum WriteError {
    /// A path is not a clean relative path.
    #[error("refusing path `{path}`: {reason}")]
    #[diagnostic(
        code(aibox::apply::invalid_path),
        help(
            "aibox only writes clean relative paths below the project root (no `..`, no absolute paths)"
        )
    )]
    InvalidPath {
        /// The offending path as given.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The file table does not let this command write the path.
    #[error("refusing to write `{path}`: it is outside aibox's write perimeter")]
    #[diagnostic(
        code(aibox::apply::outside_perimeter),
        help(
            "aibox writes only the paths of its file table (`aibox_config::layout::FILES`); this is a bug in the code that produced it"
        )
    )]
    OutsidePerimeter {
        /// The offending path.
        path: Utf8PathBuf,
    },
    /// A path, or one of its parents, is a symbolic link.
    #[error("refusing to write through symbolic link `{link}` (while writing `{path}`)")]
    #[diagnostic(
        code(aibox::apply::symlink),
        help(
            "replace the symlink `{link}` with a real directory or file; aibox never writes through symlinks so it cannot be steered outside the project"
        )
    )]
    Symlink {
        /// The file aibox wanted to write.
        path: Utf8PathBuf,
        /// The symlinked component.
        link: Utf8PathBuf,
    },
    /// A path exists with the wrong kind.
    #[error("`{path}` is in the way: expected a {expected}")]
    #[diagnostic(
        code(aibox::apply::wrong_kind),
        help("move `{path}` aside and run aibox again")
    )]
    WrongKind {
        /// The offending path.
        path: Utf8PathBuf,
        /// "directory" or "regular file".
        expected: &'static str,
    },
    /// [`Writer::create_new`] found the file already there.
    #[error("`{path}` already exists")]
    #[diagnostic(code(aibox::apply::exists), help("aibox never replaces this file"))]
    Exists {
        /// The file.
        path: Utf8PathBuf,
    },
    /// A file [`Writer::create_verified`] was to create appeared after the apply found
    /// it absent (another program made it meanwhile): it is left as it is.
    #[error("`{path}` appeared while aibox was writing it")]
    #[diagnostic(
        code(aibox::apply::appeared),
        help(
            "another program created `{path}` after aibox looked; it was left untouched: run aibox again, which plans with the file as it is now"
        )
    )]
    Appeared {
        /// The file.
        path: Utf8PathBuf,
    },
    /// The project root cannot be used.
    #[error("cannot use project root `{path}`: {reason}")]
    #[diagnostic(
        code(aibox::apply::root),
        help("run aibox in an existing project directory")
    )]
    Root {
        /// The root as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// A verified source file no longer has the bytes it was verified with (a damaged
    /// unpacked release in the download cache): nothing was written for `path`.
    #[error("cannot write `{path}`: its verified source, {from}, {reason}")]
    #[diagnostic(
        code(aibox::apply::source_changed),
        help(
            "the unpacked release in aibox's download cache is damaged; delete its folder \
             (the `unpacked/sha256-<digest>` named above) and run aibox again: it is \
             unpacked anew from the verified archive"
        )
    )]
    SourceChanged {
        /// The project file that was to be written.
        path: Utf8PathBuf,
        /// The source, quoted: a file of its own, or a release path in the unpacked
        /// release's pack file (which is one file, not a folder to look into).
        from: String,
        /// What differs.
        reason: String,
    },
    /// A file operation failed.
    #[error("cannot {op} `{path}`")]
    #[diagnostic(
        code(aibox::apply::io),
        help(
            "check the permissions of the project directory and the free disk space, then run \
             the command again: an `aibox apply` stopped part-way is finished by the next one \
             (`aibox doctor` says what is left)"
        )
    )]
    Io {
        /// What was attempted ("read", "write", "rename", ...).
        op: &'static str,
        /// The path.
        path: Utf8PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl WriteError {
    /// An I/O failure of `op` on `path`.
    pub fn io(op: &'static str, path: impl Into<Utf8PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Who can fix it: a symlink, an existing file or a bad root is the user's; a disk
    /// failure or something in the way is the environment; a path outside the table is
    /// a bug in aibox.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::InvalidPath { .. }
            | Self::Symlink { .. }
            | Self::Exists { .. }
            | Self::Root { .. } => aibox_config::ErrorKind::User,
            Self::WrongKind { .. }
            | Self::Appeared { .. }
            | Self::Io { .. }
            | Self::SourceChanged { .. } => aibox_config::ErrorKind::Environment,
            Self::OutsidePerimeter { .. } => aibox_config::ErrorKind::Internal,
        }
    }
}

/// `dir/rel` allocated at its length. `format!` and path joins leave room to grow (half
/// again or more); a plan or apply holds such a path for each of thousands of files.
#[must_use]
pub fn join_exact(dir: &str, rel: &str) -> String {
    let mut path = String::with_capacity(dir.len() + 1 + rel.len());
    path.push_str(dir);
    path.push('/');
    path.push_str(rel);
    path
}

/// Marker in the name of the writer's temp files: `.<name>.aibox-tmp.<pid>`.
const TEMP_MARKER: &str = ".aibox-tmp.";

/// Whether the file name `name` is one of the writer's temp files (a replacement being
/// written, or a writability probe): content of no one, left only by a killed run, which
/// [`Writer::clean_stray_temps`] removes. Readers that compare a folder with what was
/// installed leave such files out: an interrupted apply must not make the next one see a
/// file "added" by hand.
#[must_use]
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(TEMP_MARKER)
}

/// Whether a clean relative path lies inside [`PERIMETER`].
pub fn in_perimeter(rel: &Utf8Path) -> bool {
    aibox_config::layout::may_write(Writers::APPLY, rel.as_str())
}

/// Checks that `rel` is a clean relative path with `/` separators.
pub fn check_relative(rel: &Utf8Path) -> Result<(), WriteError> {
    let s = rel.as_str();
    let bad = |reason| {
        Err(WriteError::InvalidPath {
            path: s.to_owned(),
            reason,
        })
    };
    if s.is_empty() {
        return bad("the path is empty");
    }
    if s.starts_with('/') || rel.is_absolute() {
        return bad("absolute paths are not allowed");
    }
    // One pass over the bytes (every planned and every written file comes through here:
    // 70,000 calls in a 10x first install), reporting what the separate searches did: a
    // backslash or NUL anywhere first, else the first bad component.
    let mut forbidden_byte = false;
    let mut component: Option<&'static str> = None;
    let mut start = 0;
    for (i, &c) in s
        .as_bytes()
        .iter()
        .chain(std::iter::once(&b'/'))
        .enumerate()
    {
        match c {
            b'\\' | 0 => forbidden_byte = true,
            b'/' => {
                if component.is_none() {
                    component = match &s.as_bytes()[start..i] {
                        b"" => Some("empty path component"),
                        b"." => Some("`.` components are not allowed"),
                        b".." => Some("`..` components are not allowed"),
                        _ => None,
                    };
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if forbidden_byte {
        return bad("backslashes and NUL bytes are not allowed");
    }
    component.map_or(Ok(()), bad)
}

/// Outcome of one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The file did not exist.
    Created,
    /// The file existed with other contents or mode.
    Updated,
    /// Same bytes and mode: nothing was touched.
    Unchanged,
}

/// A canonicalised project root with symlink-refusing path resolution.
#[derive(Debug, Clone)]
pub struct ProjectRoot {
    root: Utf8PathBuf,
    /// The owner (UID, GID) of the project folder when it is not root: what aibox makes
    /// while running as root (`sudo aibox up` for a rootful engine) is handed to them, so
    /// the project stays theirs and the container user, who takes their IDs, can write it.
    owner: Option<(u32, u32)>,
    /// Directories already found to be real directories (not symlinks) below the root,
    /// by [`ProjectRoot::dir_key`] (16 bytes each, not a path), in a cache of
    /// [`CHECKED_DIRS`] slots: each key in the slot its low bits pick, `0` for none. A
    /// folder that lost its slot is only looked at again. A first install of a large
    /// release makes tens of thousands of folders (a set of every one was 1.7 MB at 30x
    /// processkit), in path order, so the few on the paths at hand are the ones asked
    /// for again.
    /// Read far more often than written, by the writer's helper threads at once: a
    /// read-write lock, so lookups never wait for each other.
    checked_dirs: std::sync::Arc<std::sync::RwLock<Box<[u128]>>>,
    /// The two randomly keyed hashers of [`ProjectRoot::dir_key`], shared by the clones
    /// that share `checked_dirs`.
    dir_hashers: [std::hash::RandomState; 2],
    /// Directories found missing by a lookup (the first missing one of a path; its
    /// parents exist): a path below one is absent without asking the file system again.
    /// A directory this writer makes or moves into place leaves the set.
    missing_dirs: std::sync::Arc<std::sync::RwLock<std::collections::HashSet<String>>>,
    /// Whether this process runs as root: only then can what it makes belong to root
    /// and need handing over ([`ProjectRoot::hand_over`]).
    as_root: bool,
}

impl ProjectRoot {
    /// Canonicalises `root`, which must be an existing directory.
    pub fn open(root: &Utf8Path) -> Result<Self, WriteError> {
        let canonical = fs_err::canonicalize(root).map_err(|e| WriteError::Root {
            path: root.to_string(),
            // The plain words for the common case; fs-err's "failed to canonicalize"
            // names an operation the user never asked for.
            reason: if e.kind() == std::io::ErrorKind::NotFound {
                "the folder does not exist".to_owned()
            } else {
                e.to_string()
            },
        })?;
        let root = Utf8PathBuf::from_path_buf(canonical).map_err(|p| WriteError::Root {
            path: p.display().to_string(),
            reason: "not valid UTF-8".to_owned(),
        })?;
        if !root.is_dir() {
            return Err(WriteError::Root {
                path: root.to_string(),
                reason: "not a directory".to_owned(),
            });
        }
        let owner = fs_err::metadata(&root).ok().and_then(|m| {
            use std::os::unix::fs::MetadataExt as _;
            (m.uid() != 0).then(|| (m.uid(), m.gid()))
        });
        Ok(Self {
            root,
            owner,
            checked_dirs: std::sync::Arc::new(std::sync::RwLock::new(
                vec![0; CHECKED_DIRS].into_boxed_slice(),
            )),
            dir_hashers: [std::hash::RandomState::new(), std::hash::RandomState::new()],
            missing_dirs: std::sync::Arc::default(),
            as_root: running_as_root(),
        })
    }

    /// Hands `path`, which aibox just made, to the project's owner when root made it (see
    /// [`ProjectRoot::owner`]); anything else keeps its owner.
    fn hand_over(&self, path: &Utf8Path) -> Result<(), WriteError> {
        use std::os::unix::fs::MetadataExt as _;
        let Some((uid, gid)) = self.owner else {
            return Ok(());
        };
        // Only root's files can belong to root: anyone else skips the lookup.
        if !self.as_root {
            return Ok(());
        }
        let made_by_root = fs_err::symlink_metadata(path).is_ok_and(|m| m.uid() == 0);
        if made_by_root {
            std::os::unix::fs::lchown(path, Some(uid), Some(gid))
                .map_err(|e| WriteError::io("hand to the project's owner", path, e))?;
        }
        Ok(())
    }

    /// A 128-bit hash of an absolute directory path under keys drawn at random for this
    /// root: two paths share one only by chance (about one in 2^128 a pair), and no one
    /// can make them collide without the keys.
    fn dir_key(&self, dir: &Utf8Path) -> u128 {
        use std::hash::BuildHasher as _;
        let [high, low] = &self.dir_hashers;
        (u128::from(high.hash_one(dir.as_str())) << 64) | u128::from(low.hash_one(dir.as_str()))
    }

    fn is_checked_dir(&self, dir: &Utf8Path) -> bool {
        let key = self.dir_key(dir);
        self.checked_dirs
            .read()
            .is_ok_and(|dirs| key != 0 && dirs[slot(key)] == key)
    }

    fn remember_dir(&self, dir: &Utf8Path) {
        let key = self.dir_key(dir);
        if let Ok(mut dirs) = self.checked_dirs.write() {
            dirs[slot(key)] = key;
        }
        // Anything below it that was found missing had it as an existing parent then, so
        // only `dir` itself can be listed (a moved folder is forgotten by the move).
        if self.is_missing_dir(dir)
            && let Ok(mut missing) = self.missing_dirs.write()
        {
            missing.remove(dir.as_str());
        }
    }

    /// The folder `dir` (removed) is checked again before it is used.
    fn forget_dir(&self, dir: &Utf8Path) {
        let key = self.dir_key(dir);
        if let Ok(mut dirs) = self.checked_dirs.write()
            && dirs[slot(key)] == key
        {
            dirs[slot(key)] = 0;
        }
    }

    /// Every folder is checked again before it is used.
    fn forget_checked_dirs(&self) {
        if let Ok(mut checked) = self.checked_dirs.write() {
            checked.fill(0);
        }
    }

    fn is_missing_dir(&self, dir: &Utf8Path) -> bool {
        self.missing_dirs
            .read()
            .is_ok_and(|dirs| dirs.contains(dir.as_str()))
    }

    fn remember_missing(&self, dir: &Utf8Path) {
        if let Ok(mut dirs) = self.missing_dirs.write() {
            dirs.insert(dir.as_str().to_owned());
        }
    }

    /// `dir` and anything below it may exist now: they are looked up again.
    fn forget_missing(&self, dir: &Utf8Path) {
        if let Ok(mut dirs) = self.missing_dirs.write() {
            dirs.retain(|d| !Utf8Path::new(d).starts_with(dir));
        }
    }

    /// The canonical root.
    pub fn path(&self) -> &Utf8Path {
        &self.root
    }

    /// Resolves the parent directory of `rel`, refusing symlinks and non-directories.
    /// With `create`, missing directories are created one by one; without it, a missing
    /// directory yields `None`.
    fn parent_dir(&self, rel: &Utf8Path, create: bool) -> Result<Option<Utf8PathBuf>, WriteError> {
        check_relative(rel)?;
        let parent = match rel.parent() {
            Some(parent) if !parent.as_str().is_empty() => parent,
            _ => return Ok(Some(self.root.clone())),
        };
        // A directory is remembered only after all its ancestors were checked. Built at
        // its length: a join grows its buffer with `realloc`, which takes the allocator's
        // lock that the writer's helper threads share, for every file.
        let full = Utf8PathBuf::from(join_exact(self.root.as_str(), parent.as_str()));
        if self.is_checked_dir(&full) {
            return Ok(Some(full));
        }
        // Grown a component at a time within room for the whole path (no `realloc`).
        let mut dir = Utf8PathBuf::with_capacity(full.as_str().len());
        dir.push(&self.root);
        for part in parent.components() {
            dir.push(part);
            if self.is_checked_dir(&dir) {
                continue;
            }
            if create {
                self.make_dir(rel, &dir)?;
            } else {
                if self.is_missing_dir(&dir) {
                    return Ok(None);
                }
                match fs_err::symlink_metadata(&dir) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        self.remember_missing(&dir);
                        return Ok(None);
                    }
                    found => self.check_dir(rel, &dir, found)?,
                }
            }
            self.remember_dir(&dir);
        }
        Ok(Some(dir))
    }

    /// Creates the folder `dir` (whose parents are checked) without looking first: a
    /// folder this call makes is a real one, and only when something is already there
    /// (or the creation fails) is it looked at.
    fn make_dir(&self, rel: &Utf8Path, dir: &Utf8Path) -> Result<(), WriteError> {
        match fs_err::create_dir(dir) {
            Ok(()) => self.hand_over(dir),
            // Something is there (an existing folder, a concurrent creator's, or what is
            // in the way), or the folder cannot be made: fine when a real folder is there.
            Err(e) => match fs_err::symlink_metadata(dir) {
                Err(_) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    Err(WriteError::io("create directory", dir, e))
                }
                found => self.check_dir(rel, dir, found),
            },
        }
    }

    /// Checks what a lookup of the folder `dir` found: a real folder passes; a symlink or
    /// anything else is refused.
    fn check_dir(
        &self,
        rel: &Utf8Path,
        dir: &Utf8Path,
        found: std::io::Result<std::fs::Metadata>,
    ) -> Result<(), WriteError> {
        match found {
            Ok(meta) if meta.file_type().is_symlink() => Err(WriteError::Symlink {
                path: rel.to_owned(),
                link: self.rel(dir),
            }),
            Ok(meta) if meta.is_dir() => Ok(()),
            Ok(_) => Err(WriteError::WrongKind {
                path: self.rel(dir),
                expected: "directory",
            }),
            Err(e) => Err(WriteError::io("inspect", dir, e)),
        }
    }

    fn rel(&self, abs: &Utf8Path) -> Utf8PathBuf {
        abs.strip_prefix(&self.root)
            .map_or_else(|_| abs.to_owned(), ToOwned::to_owned)
    }

    /// Metadata of the target, refusing symlinks and directories; `None` when absent.
    fn target_meta(
        rel: &Utf8Path,
        abs: &Utf8Path,
    ) -> Result<Option<std::fs::Metadata>, WriteError> {
        match fs_err::symlink_metadata(abs) {
            Ok(meta) if meta.file_type().is_symlink() => Err(WriteError::Symlink {
                path: rel.to_owned(),
                link: rel.to_owned(),
            }),
            Ok(meta) if !meta.is_file() => Err(WriteError::WrongKind {
                path: rel.to_owned(),
                expected: "regular file",
            }),
            Ok(meta) => Ok(Some(meta)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(WriteError::io("inspect", abs, e)),
        }
    }

    /// The checked parent folder and the absolute path of `rel`, when every parent
    /// exists (nothing is created); `None` when one is missing. A symlinked or
    /// non-folder parent is an error.
    fn locate(&self, rel: &Utf8Path) -> Result<Option<(Utf8PathBuf, Utf8PathBuf)>, WriteError> {
        Ok(self.parent_dir(rel, false)?.map(|parent| {
            let abs = parent.join(rel.file_name().unwrap_or_default());
            (parent, abs)
        }))
    }

    /// The parent and the absolute path of `rel` when it is a real folder (not a
    /// symlink); `None` when it or a parent is missing, or it is something else. A
    /// symlinked or non-folder parent is an error.
    fn real_dir(&self, rel: &Utf8Path) -> Result<Option<(Utf8PathBuf, Utf8PathBuf)>, WriteError> {
        Ok(self
            .locate(rel)?
            .filter(|(_, abs)| fs_err::symlink_metadata(abs).is_ok_and(|m| m.is_dir())))
    }

    /// Whether nothing (no file, folder or symlink) exists at `rel`. A symlinked or
    /// non-folder parent is an error, as for writes.
    pub fn is_absent(&self, rel: &Utf8Path) -> Result<bool, WriteError> {
        let Some((_, abs)) = self.locate(rel)? else {
            return Ok(true);
        };
        match fs_err::symlink_metadata(abs) {
            Ok(_) => Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(WriteError::io("inspect", rel, e)),
        }
    }

    /// The regular files below the folder `rel`, relative to it (`/`-separated), when
    /// `rel` is a real folder holding only folders and regular files; `None` when it is
    /// missing, a symlink, not a folder, or holds anything else (a symlink, a socket, a
    /// name that is not UTF-8).
    pub fn plain_tree(&self, rel: &Utf8Path) -> Result<Option<Vec<String>>, WriteError> {
        self.walk_tree(rel, true)
    }

    /// The regular files below the folder `rel`, relative to it (`/`-separated, sorted);
    /// none when `rel` is missing, a symlink or not a folder. Symlinks are not followed:
    /// they, special files and names that are not UTF-8 are left out.
    pub fn regular_files_below(&self, rel: &Utf8Path) -> Result<Vec<String>, WriteError> {
        Ok(self.walk_tree(rel, false)?.unwrap_or_default())
    }

    /// Lists the regular files below `rel` (sorted); with `plain`, anything else found
    /// makes the answer `None`, otherwise it is left out.
    fn walk_tree(&self, rel: &Utf8Path, plain: bool) -> Result<Option<Vec<String>>, WriteError> {
        let Some((_, top)) = self.real_dir(rel)? else {
            return Ok(None);
        };
        let mut files = Vec::new();
        let mut stack = vec![String::new()];
        while let Some(sub) = stack.pop() {
            let dir = if sub.is_empty() {
                top.clone()
            } else {
                top.join(&sub)
            };
            let entries = fs_err::read_dir(&dir).map_err(|e| WriteError::io("list", &dir, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| WriteError::io("list", &dir, e))?;
                let Ok(name) = entry.file_name().into_string() else {
                    if plain {
                        return Ok(None);
                    }
                    continue;
                };
                let child = if sub.is_empty() {
                    name
                } else {
                    join_exact(&sub, &name)
                };
                match entry.file_type() {
                    Ok(t) if t.is_dir() => stack.push(child),
                    Ok(t) if t.is_file() => files.push(child),
                    _ if plain => return Ok(None),
                    _ => {}
                }
            }
        }
        files.sort();
        Ok(Some(files))
    }

    /// Current bytes of a root-relative file; `None` when it (or a parent) is missing.
    /// Symlinked parents or targets are errors.
    pub fn read(&self, rel: &Utf8Path) -> Result<Option<Vec<u8>>, WriteError> {
        Ok(self.read_with_meta(rel)?.map(|(bytes, _)| bytes))
    }

    fn read_with_meta(
        &self,
        rel: &Utf8Path,
    ) -> Result<Option<(Vec<u8>, std::fs::Metadata)>, WriteError> {
        use std::io::Read as _;
        let Some((mut file, meta)) = self.open_file(rel)? else {
            return Ok(None);
        };
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or_default());
        file.read_to_end(&mut bytes)
            .map_err(|e| WriteError::io("read", self.root.join(rel), e))?;
        Ok(Some((bytes, meta)))
    }

    /// A root-relative regular file (through no symlink) opened for reading, with its
    /// metadata, for a reader that streams it; `None` when it (or a parent) is missing,
    /// or was replaced between the look and the opening.
    pub fn open_file(
        &self,
        rel: &Utf8Path,
    ) -> Result<Option<(fs_err::File, std::fs::Metadata)>, WriteError> {
        let Some((_, abs)) = self.locate(rel)? else {
            return Ok(None);
        };
        let Some(meta) = Self::target_meta(rel, &abs)? else {
            return Ok(None);
        };
        let file = match fs_err::File::open(&abs) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(WriteError::io("read", &abs, e)),
        };
        // The file opened must be the one looked at (not a link put there since).
        let opened = file
            .metadata()
            .map_err(|e| WriteError::io("inspect", &abs, e))?;
        Ok(same_file(&meta, &opened).then_some((file, meta)))
    }

    /// Metadata of a root-relative regular file (through no symlink) without reading it;
    /// `None` when it (or a parent) is missing.
    pub fn file_meta(&self, rel: &Utf8Path) -> Result<Option<std::fs::Metadata>, WriteError> {
        match self.locate(rel)? {
            Some((_, abs)) => Self::target_meta(rel, &abs),
            None => Ok(None),
        }
    }

    /// Whether a root-relative regular file exists (through no symlink).
    pub fn is_file(&self, rel: &Utf8Path) -> Result<bool, WriteError> {
        Ok(self.file_meta(rel)?.is_some())
    }

    /// Unix permission bits of an existing file (`None` when absent or not on Unix).
    pub fn mode(&self, rel: &Utf8Path) -> Result<Option<u32>, WriteError> {
        Ok(self
            .read_with_meta(rel)?
            .and_then(|(_, meta)| mode_of(&meta)))
    }
}

/// Slots of [`ProjectRoot`]'s cache of checked folders (64 KiB of keys).
const CHECKED_DIRS: usize = 4096;

/// The slot of a checked folder's key.
fn slot(key: u128) -> usize {
    // The low bits of a random hash; the mask keeps it below the slot count.
    usize::try_from(key & (CHECKED_DIRS as u128 - 1)).unwrap_or_default()
}

/// Whether two metadata are of one file (device and inode; on other platforms, size and
/// modification time).
#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// Whether two metadata are of one file (device and inode; on other platforms, size and
/// modification time).
#[cfg(not(unix))]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.len() == b.len() && a.modified().ok() == b.modified().ok()
}

/// The permission bits of `meta` (`None` where there are none: not on Unix).
#[cfg(unix)]
#[allow(clippy::unnecessary_wraps)] // `None` on other platforms
pub fn mode_of(meta: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt as _;
    Some(meta.permissions().mode() & 0o7777)
}

/// The permission bits of `meta` (`None` where there are none: not on Unix).
#[cfg(not(unix))]
pub fn mode_of(_meta: &std::fs::Metadata) -> Option<u32> {
    None
}

/// Gives the open file exactly `mode`. It was created asking for `mode`, so only a
/// umask or a default ACL of its folder can have changed it: an `fstat` says whether the
/// `fchmod` (which dirties the inode) is needed.
#[cfg(unix)]
fn set_file_mode(file: &fs_err::File, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if file.metadata().is_ok_and(|m| mode_of(&m) == Some(mode)) {
        return Ok(());
    }
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_file_mode(_file: &fs_err::File, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// Writes files below a [`ProjectRoot`], inside the perimeter only.
#[derive(Debug)]
pub struct Writer<'a> {
    root: &'a ProjectRoot,
    /// The command writing: decides which rows of the file table it may write.
    role: Writers,
    crash: crash::Hook,
    /// Between `defer_sync` and `commit`: no per-file fsync.
    deferred: bool,
    /// Something was written or removed since `defer_sync`.
    dirty: bool,
    /// The copy buffer of [`Self::copy_verified`], allocated once per writer.
    buf: Vec<u8>,
    /// The pack file the last packed source came from, kept open (see [`open_source`]).
    pack: KeptPack,
    /// Early writeback of deferred writes (see [`Writeback`]).
    writeback: Writeback,
}

/// Bytes a deferred writer writes between two early writeback starts.
const WRITEBACK_EVERY: u64 = 2 * 1024 * 1024;

/// Starts the disk writes of a deferred writer's files while it is still writing: every
/// [`WRITEBACK_EVERY`] bytes a helper thread runs `syncfs` (one at a time), so the commit
/// point's own `syncfs` only waits for the tail instead of for every byte at once. The
/// helper's result is ignored: the commit's `syncfs` is the durable point and reports
/// errors; an extra sync never weakens it.
#[derive(Debug, Default)]
struct Writeback {
    since: u64,
    kick: Option<std::sync::mpsc::SyncSender<()>>,
    helper: Option<std::thread::JoinHandle<()>>,
}

impl Writeback {
    /// Counts `bytes` written and starts a writeback when enough accumulated.
    fn wrote(&mut self, root: &Utf8Path, bytes: u64) {
        self.since = self.since.saturating_add(bytes);
        if self.since < WRITEBACK_EVERY || !cfg!(target_os = "linux") {
            return;
        }
        self.since = 0;
        if self.kick.is_none() {
            let Ok(dir) = fs_err::File::open(root) else {
                return;
            };
            let (tx, rx) = std::sync::mpsc::sync_channel::<()>(1);
            let spawned = std::thread::Builder::new()
                .name("aibox-writeback".to_owned())
                .spawn(move || {
                    for () in rx {
                        let _ = sync_file_system(&dir);
                    }
                });
            let Ok(helper) = spawned else {
                return;
            };
            self.kick = Some(tx);
            self.helper = Some(helper);
        }
        if let Some(kick) = &self.kick {
            // Full means a writeback is already waiting to start: nothing to add.
            let _ = kick.try_send(());
        }
    }

    /// Stops the helper, waiting for a writeback in progress.
    fn stop(&mut self) {
        self.since = 0;
        self.kick = None;
        if let Some(helper) = self.helper.take() {
            let _ = helper.join();
        }
    }
}

/// Whether a write is made durable before it returns (or at the commit point).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// Fsynced (file and folder), or covered by the commit point's `syncfs`.
    Synced,
    /// A cache: atomic, never fsynced ([`Writer::write_cache_streamed`]).
    Cache,
}

/// A file [`Writer::create_verified`] created: its folder, its path and the open file.
struct Created {
    dir: Utf8PathBuf,
    path: Utf8PathBuf,
    file: fs_err::File,
}

/// Where a write of one file goes: its folder, the file, and this process's temp file
/// beside it (renamed over the file when complete).
struct Slot {
    dir: Utf8PathBuf,
    target: Utf8PathBuf,
    temp: Utf8PathBuf,
}

impl<'a> Writer<'a> {
    /// Moves a fully written temp file over its target (removing the temp file when the
    /// rename fails) and records the folder for syncing, with a crash point either side.
    fn finish(&mut self, slot: &Slot) -> Result<(), WriteError> {
        self.finish_as(slot, Durability::Synced)
    }

    /// [`Self::finish`], syncing the folder only for a [`Durability::Synced`] write.
    fn finish_as(&mut self, slot: &Slot, durability: Durability) -> Result<(), WriteError> {
        self.crash.point();
        if let Err(e) = fs_err::rename(&slot.temp, &slot.target) {
            let _ = fs_err::remove_file(&slot.temp);
            return Err(WriteError::io("replace", &slot.target, e));
        }
        if durability == Durability::Synced {
            self.synced(&slot.dir);
        }
        self.crash.point();
        Ok(())
    }

    /// The [`Slot`] of `rel`, creating its folder when missing.
    fn slot(&self, rel: &Utf8Path) -> Result<Slot, WriteError> {
        let dir = self
            .root
            .parent_dir(rel, true)?
            .unwrap_or_else(|| self.root.path().to_owned());
        let name = rel.file_name().unwrap_or_default();
        Ok(Slot {
            target: Utf8PathBuf::from(join_exact(dir.as_str(), name)),
            temp: Utf8PathBuf::from(join_exact(
                dir.as_str(),
                &format!(".{name}{TEMP_MARKER}{}", std::process::id()),
            )),
            dir,
        })
    }

    /// A writer for `apply`: inside the [`PERIMETER`].
    pub fn new(root: &'a ProjectRoot) -> Self {
        Self::for_command(root, Writers::APPLY)
    }

    /// A writer for `command` (`init`, `config set`, ...): only the rows of the file
    /// table that command may write.
    pub fn for_command(root: &'a ProjectRoot, command: Writers) -> Self {
        Self {
            root,
            role: command,
            crash: crash::Hook::from_env(),
            deferred: false,
            dirty: false,
            buf: Vec::new(),
            pack: KeptPack::default(),
            writeback: Writeback::default(),
        }
    }

    /// The project root.
    pub fn root(&self) -> &Utf8Path {
        self.root.path()
    }

    /// Stops fsyncing each write; [`Self::commit`] makes them all durable at once.
    pub fn defer_sync(&mut self) {
        // Only where one call can sync the file system; elsewhere every write syncs.
        self.deferred = cfg!(target_os = "linux");
    }

    /// A second writer for the same project and command, for writing on another thread:
    /// deferred when this one is, and without the test crash hook (whose kill points
    /// count one writer's steps in order). Hand it back with [`Self::absorb`] before the
    /// commit point.
    #[must_use]
    pub fn helper(&self) -> Writer<'a> {
        Writer {
            root: self.root,
            role: self.role,
            crash: crash::Hook::default(),
            deferred: self.deferred,
            dirty: false,
            buf: Vec::new(),
            pack: KeptPack::default(),
            writeback: Writeback::default(),
        }
    }

    /// Takes back a [`Self::helper`]: waits for its early writeback, and makes this
    /// writer's commit cover what it wrote.
    pub fn absorb(&mut self, mut helper: Writer<'_>) {
        helper.writeback.stop();
        self.dirty |= helper.dirty;
    }

    /// Whether the test crash hook counts this writer's steps (debug builds, with
    /// `AIBOX_TEST_CRASH_AFTER_WRITES` set): work that must keep its kill points in one
    /// order stays on this thread then.
    pub fn counts_crash_points(&self) -> bool {
        self.crash.armed()
    }

    /// The durable commit point: syncs the project's file system when anything was
    /// written since [`Self::defer_sync`], then goes back to per-file fsync.
    pub fn commit(&mut self) -> Result<(), WriteError> {
        self.writeback.stop();
        if self.deferred && self.dirty {
            sync_fs(self.root.path())?;
        }
        self.deferred = false;
        self.dirty = false;
        self.crash.point();
        Ok(())
    }

    /// A clean relative path this writer's command may write.
    fn check_allowed(&self, rel: &Utf8Path) -> Result<(), WriteError> {
        check_relative(rel)?;
        if aibox_config::layout::may_write(self.role, rel.as_str()) {
            Ok(())
        } else {
            Err(WriteError::OutsidePerimeter {
                path: rel.to_owned(),
            })
        }
    }

    /// Creates `rel` with `contents`, failing with [`WriteError::Exists`] instead of
    /// replacing a file that is already there (also one that appeared a moment ago: the
    /// last step is a hard link, which never replaces). Durable like [`Self::write`].
    pub fn create_new(&mut self, rel: &Utf8Path, contents: &[u8]) -> Result<(), WriteError> {
        self.check_allowed(rel)?;
        let Slot { dir, target, temp } = self.slot(rel)?;
        if fs_err::symlink_metadata(&target).is_ok() {
            return Err(WriteError::Exists {
                path: rel.to_owned(),
            });
        }
        write_temp(&temp, contents, None, !self.deferred)?;
        self.root.hand_over(&temp)?;
        let linked = fs_err::hard_link(&temp, &target);
        let _ = fs_err::remove_file(&temp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(WriteError::Exists {
                    path: rel.to_owned(),
                });
            }
            Err(e) => return Err(WriteError::io("create", &target, e)),
        }
        self.synced(&dir);
        Ok(())
    }

    /// Opens (creating when missing, never truncating) the file `rel` for an OS lock,
    /// refusing a symlinked file or parent.
    pub fn open_lock_file(&self, rel: &Utf8Path) -> Result<fs_err::File, WriteError> {
        let dir = self.ensure_parent(rel)?;
        let path = dir.join(rel.file_name().unwrap_or_default());
        if fs_err::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(WriteError::Symlink {
                path: rel.to_owned(),
                link: rel.to_owned(),
            });
        }
        fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| WriteError::io("open", &path, e))
    }

    /// Writes `contents` to `rel` when they (or the requested mode) differ from the file
    /// on disk. `mode` of `None` keeps an existing file's mode.
    pub fn write(
        &mut self,
        rel: &Utf8Path,
        contents: &[u8],
        mode: Option<u32>,
    ) -> Result<WriteOutcome, WriteError> {
        self.check_allowed(rel)?;
        let existing = self.root.read_with_meta(rel)?;
        let old_mode = existing.as_ref().and_then(|(_, meta)| mode_of(meta));
        let outcome = match &existing {
            None => WriteOutcome::Created,
            Some((bytes, _)) if bytes == contents && (mode.is_none() || mode == old_mode) => {
                return Ok(WriteOutcome::Unchanged);
            }
            Some(_) => WriteOutcome::Updated,
        };
        let slot = self.slot(rel)?;
        write_temp(&slot.temp, contents, mode.or(old_mode), !self.deferred)?;
        self.root.hand_over(&slot.temp)?;
        self.finish(&slot)?;
        Ok(outcome)
    }

    /// Writes `rel` with what `fill` writes, through a buffer into the temp file, so the
    /// contents are never held whole: for a large record (the processkit intent and stat
    /// cache, a line per installed file), whose old contents are neither read nor
    /// compared (the file is always replaced). A failing `fill` removes the temp file and
    /// leaves the old file as it was.
    pub fn write_streamed(
        &mut self,
        rel: &Utf8Path,
        mode: Option<u32>,
        fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<WriteOutcome, WriteError> {
        self.write_streamed_as(rel, mode, fill, Durability::Synced)
    }

    /// [`Self::write_streamed`] for a cache whose loss or damage costs only work, never
    /// a wrong answer (its reader re-checks what it finds): replaced atomically like
    /// every file, but neither it nor its folder is fsynced, so a large cache written
    /// after the commit point does not wait for the disk (on ext4, two of the apply's
    /// few remaining syncs).
    pub fn write_cache_streamed(
        &mut self,
        rel: &Utf8Path,
        fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<WriteOutcome, WriteError> {
        self.write_streamed_as(rel, None, fill, Durability::Cache)
    }

    fn write_streamed_as(
        &mut self,
        rel: &Utf8Path,
        mode: Option<u32>,
        fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
        durability: Durability,
    ) -> Result<WriteOutcome, WriteError> {
        self.check_allowed(rel)?;
        let slot = self.slot(rel)?;
        let existing = ProjectRoot::target_meta(rel, &slot.target)?;
        let old_mode = existing.as_ref().and_then(mode_of);
        let sync = !self.deferred && durability == Durability::Synced;
        fill_temp(&slot.temp, mode.or(old_mode), sync, |file| {
            let mut out = std::io::BufWriter::with_capacity(64 * 1024, file);
            fill(&mut out)?;
            out.flush()
        })?;
        self.root.hand_over(&slot.temp)?;
        self.finish_as(&slot, durability)?;
        Ok(if existing.is_some() {
            WriteOutcome::Updated
        } else {
            WriteOutcome::Created
        })
    }

    /// Writes `rel` with the bytes of the verified file `from` (streamed, never held in
    /// memory), checking its size and SHA-256 while copying: on a mismatch the temp file
    /// is removed and nothing is renamed ([`WriteError::SourceChanged`]). The caller has
    /// decided that the file changes, so the existing contents are not compared first.
    pub fn copy_verified(
        &mut self,
        rel: &Utf8Path,
        from: &aibox_config::CopyFrom,
        mode: Option<u32>,
    ) -> Result<(), WriteError> {
        self.check_allowed(rel)?;
        let slot = self.slot(rel)?;
        let old_mode = match ProjectRoot::target_meta(rel, &slot.target)? {
            Some(meta) => mode_of(&meta),
            None => None,
        };
        if self.buf.is_empty() {
            self.buf = vec![0u8; 64 * 1024];
        }
        let target = CopyTarget {
            temp: &slot.temp,
            rel,
            mode: mode.or(old_mode),
            sync: !self.deferred,
        };
        copy_temp(&target, from, &mut self.pack, &mut self.buf)?;
        self.root.hand_over(&slot.temp)?;
        if self.deferred {
            self.writeback.wrote(self.root.path(), from.size);
        }
        self.finish(&slot)
    }

    /// Creates each of `rels`, none of which exists, with the bytes of the verified file
    /// `from` (mode `mode`, else the default), reading and hashing the source once for
    /// all of them; on a size or SHA-256 mismatch every file made here is removed
    /// ([`WriteError::SourceChanged`]). Each file is created at its final path
    /// (`O_CREAT | O_EXCL`, which never follows a symlink) instead of a temp file renamed
    /// into place: a run killed meanwhile leaves a file holding a prefix of the verified
    /// bytes, so only a caller that recorded the path as its own to create before
    /// writing (the processkit intent record, a regenerable snapshot) may use this, and
    /// it completes such a file as a replacement. A file that exists is left alone
    /// ([`WriteError::Appeared`]): a replacement goes through [`Self::copy_verified`].
    pub fn create_verified(
        &mut self,
        rels: &[&Utf8Path],
        from: &aibox_config::CopyFrom,
        mode: Option<u32>,
    ) -> Result<(), WriteError> {
        let mut created: Vec<Created> = Vec::with_capacity(rels.len());
        let result = self.create_all(rels, from, mode, &mut created);
        if result.is_err() {
            for m in created {
                drop(m.file);
                let _ = fs_err::remove_file(&m.path);
            }
            return result;
        }
        for m in &created {
            self.synced(&m.dir);
            self.crash.point();
        }
        if self.deferred {
            self.writeback.wrote(
                self.root.path(),
                from.size.saturating_mul(created.len() as u64),
            );
        }
        Ok(())
    }

    /// The work of [`Self::create_verified`]; what it created is in `created` (removed by
    /// the caller on failure).
    fn create_all(
        &mut self,
        rels: &[&Utf8Path],
        from: &aibox_config::CopyFrom,
        mode: Option<u32>,
        created: &mut Vec<Created>,
    ) -> Result<(), WriteError> {
        let Some(first) = rels.first() else {
            return Ok(());
        };
        let mut targets = Vec::with_capacity(rels.len());
        for rel in rels {
            self.check_allowed(rel)?;
            let dir = self
                .root
                .parent_dir(rel, true)?
                .unwrap_or_else(|| self.root.path().to_owned());
            targets.push((*rel, dir));
        }
        let source = open_source(&mut self.pack, from, first)?;
        for (rel, dir) in targets {
            let path = Utf8PathBuf::from(join_exact(
                dir.as_str(),
                rel.file_name().unwrap_or_default(),
            ));
            let mut options = fs_err::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            if let Some(mode) = mode {
                use fs_err::os::unix::fs::OpenOptionsExt as _;
                options.mode(mode);
            }
            let file = match options.open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(WriteError::Appeared {
                        path: rel.to_owned(),
                    });
                }
                Err(e) => return Err(WriteError::io("create", &path, e)),
            };
            created.push(Created { dir, path, file });
        }
        if self.buf.is_empty() {
            self.buf = vec![0u8; 64 * 1024];
        }
        // The test crash hook stops once in the middle of each new file (its first half
        // written), so the kill points cover partly written files.
        let mut halfway = self.crash.armed();
        let crash = &mut self.crash;
        stream_verified(source, from, first, &mut self.buf, |chunk| {
            let (head, tail) = chunk.split_at(if halfway {
                chunk.len() / 2
            } else {
                chunk.len()
            });
            for m in created.iter_mut() {
                m.file
                    .write_all(head)
                    .map_err(|e| WriteError::io("write", &m.path, e))?;
                if halfway {
                    crash.point();
                    m.file
                        .write_all(tail)
                        .map_err(|e| WriteError::io("write", &m.path, e))?;
                }
            }
            halfway = false;
            Ok(())
        })?;
        if halfway {
            // An empty source: each file is complete once created.
            for _ in created.iter() {
                self.crash.point();
            }
        }
        for m in created.iter() {
            if let Some(mode) = mode {
                set_file_mode(&m.file, mode)
                    .map_err(|e| WriteError::io("set permissions of", &m.path, e))?;
            }
            if !self.deferred {
                m.file
                    .sync_all()
                    .map_err(|e| WriteError::io("write", &m.path, e))?;
            }
            self.root.hand_over(&m.path)?;
        }
        Ok(())
    }

    /// Checks that a new file can be created in the folder of each of `targets` (the
    /// nearest existing folder for ones still to be created) by creating and removing a
    /// probe file there. Nothing else is touched.
    pub fn probe_writable(&self, targets: &[&Utf8Path]) -> Result<(), WriteError> {
        // Folders by their root-relative path, as slices of the targets (nothing is
        // copied: an upgrade of a large release has thousands). Targets come in path
        // order, so a target's folders are mostly the previous one's: those are
        // remembered from the root down (`seen`, whether each is a folder on disk), not
        // every folder of the run in a map (1.3 MB of tables at 10x processkit).
        let mut seen: Vec<(&str, bool)> = Vec::new();
        let mut last_parent = None;
        let mut probed: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for &rel in targets {
            check_relative(rel)?;
            let parent = rel.parent().map_or("", Utf8Path::as_str);
            if last_parent.replace(parent) == Some(parent) {
                continue;
            }
            // The deepest folder of `parent` that exists ("" for the root).
            let mut existing = "";
            let ends = parent
                .match_indices('/')
                .map(|(at, _)| at)
                .chain((!parent.is_empty()).then_some(parent.len()));
            for (depth, end) in ends.enumerate() {
                let prefix = &parent[..end];
                let found = match seen.get(depth) {
                    Some(&(known, found)) if known == prefix => found,
                    _ => {
                        seen.truncate(depth);
                        let found = self.root.path().join(prefix).is_dir();
                        seen.push((prefix, found));
                        found
                    }
                };
                if !found {
                    break;
                }
                existing = prefix;
            }
            if !probed.insert(existing) {
                continue;
            }
            let probe = self
                .root
                .path()
                .join(existing)
                .join(format!(".aibox-probe{TEMP_MARKER}{}", std::process::id()));
            fs_err::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&probe)
                .map_err(|e| WriteError::io("write", self.root.path().join(rel), e))?;
            let _ = fs_err::remove_file(&probe);
        }
        Ok(())
    }

    /// Removes a file inside the perimeter (missing is fine). Returns whether it existed.
    pub fn remove(&mut self, rel: &Utf8Path) -> Result<bool, WriteError> {
        self.check_allowed(rel)?;
        let Some((dir, abs)) = self.root.locate(rel)? else {
            return Ok(false);
        };
        if ProjectRoot::target_meta(rel, &abs)?.is_none() {
            return Ok(false);
        }
        fs_err::remove_file(&abs).map_err(|e| WriteError::io("remove", &abs, e))?;
        self.synced(&dir);
        Ok(true)
    }

    /// After a rename or removal in `dir`: fsync it now, or at the commit point.
    fn synced(&mut self, dir: &Utf8Path) {
        if self.deferred {
            self.dirty = true;
        } else {
            sync_dir(dir);
        }
    }

    /// Removes the empty directories of the tree at `rel` (inside the perimeter), deepest
    /// first, and `rel` itself when it ends up empty. Files, symlinks and non-empty
    /// directories stay; a symlinked or missing `rel` is left alone.
    pub fn prune_empty_dirs(&mut self, rel: &Utf8Path) -> Result<(), WriteError> {
        self.check_allowed(rel)?;
        let Some((_, top)) = self.root.locate(rel)? else {
            return Ok(());
        };
        // What was checked below `top` goes with it; keys cannot tell what is below a
        // folder, so every folder is looked at again.
        self.root.forget_checked_dirs();
        // Directories in discovery order; reversed, children come before parents.
        let mut dirs = Vec::new();
        let mut stack = vec![top];
        while let Some(dir) = stack.pop() {
            let Ok(meta) = fs_err::symlink_metadata(&dir) else {
                continue;
            };
            if !meta.is_dir() {
                continue;
            }
            let entries = fs_err::read_dir(&dir).map_err(|e| WriteError::io("list", &dir, e))?;
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir())
                    && let Ok(name) = entry.file_name().into_string()
                {
                    stack.push(dir.join(name));
                }
            }
            dirs.push(dir);
        }
        for dir in dirs.iter().rev() {
            // Not empty (or already gone) is fine: only empty directories go.
            if fs_err::remove_dir(dir).is_ok() {
                self.synced(dir.parent().unwrap_or(dir));
            }
        }
        Ok(())
    }

    /// Moves the folder `from` to `to` (both inside what this writer may write) in one
    /// rename, creating `to`'s parent folders. Only a real folder moves (never a symlink),
    /// and never onto anything that exists: returns `false` and changes nothing when
    /// `from` is missing or not a folder, or `to` exists.
    pub fn move_dir(&mut self, from: &Utf8Path, to: &Utf8Path) -> Result<bool, WriteError> {
        self.check_allowed(from)?;
        self.check_allowed(to)?;
        let Some((from_parent, abs_from)) = self.root.real_dir(from)? else {
            return Ok(false);
        };
        let to_parent = self
            .root
            .parent_dir(to, true)?
            .unwrap_or_else(|| self.root.path().to_owned());
        let abs_to = to_parent.join(to.file_name().unwrap_or_default());
        if fs_err::symlink_metadata(&abs_to).is_ok() {
            return Ok(false);
        }
        if let Err(e) = rename_no_replace(&abs_from, &abs_to) {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                return Ok(false);
            }
            return Err(WriteError::io("move", &abs_from, e));
        }
        // The folders below `from` moved (see `prune_empty_dirs`).
        self.root.forget_checked_dirs();
        self.root.forget_missing(&abs_to);
        self.synced(&from_parent);
        self.synced(&to_parent);
        self.crash.point();
        Ok(true)
    }

    /// Removes the directory `rel` (inside what this writer may write) when it is empty;
    /// returns whether it was removed. A missing, non-empty or symlinked `rel` stays.
    pub fn remove_empty_dir(&mut self, rel: &Utf8Path) -> Result<bool, WriteError> {
        self.check_allowed(rel)?;
        let Some((parent, abs)) = self.root.real_dir(rel)? else {
            return Ok(false);
        };
        if fs_err::remove_dir(&abs).is_err() {
            return Ok(false);
        }
        self.root.forget_dir(&abs);
        self.synced(&parent);
        Ok(true)
    }

    /// Creates (if needed) the directory holding `rel` and returns its absolute path.
    pub fn ensure_parent(&self, rel: &Utf8Path) -> Result<Utf8PathBuf, WriteError> {
        self.check_allowed(rel)?;
        Ok(self
            .root
            .parent_dir(rel, true)?
            .unwrap_or_else(|| self.root.path().to_owned()))
    }

    /// Removes temp files left by a killed run from the directories holding `files`.
    /// Returns the root-relative paths removed.
    pub fn clean_stray_temps<'p>(
        &mut self,
        files: impl IntoIterator<Item = &'p Utf8Path>,
    ) -> Result<Vec<Utf8PathBuf>, WriteError> {
        let mut dirs = std::collections::BTreeSet::new();
        for rel in files {
            if let Some(dir) = self.root.parent_dir(rel, false)? {
                dirs.insert(dir);
            }
        }
        let mut removed = Vec::new();
        for dir in dirs {
            let entries = fs_err::read_dir(&dir).map_err(|e| WriteError::io("list", &dir, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| WriteError::io("list", &dir, e))?;
                let Ok(name) = entry.file_name().into_string() else {
                    continue;
                };
                let is_file = entry.file_type().is_ok_and(|t| t.is_file());
                if is_file && is_temp_name(&name) {
                    let abs = dir.join(&name);
                    fs_err::remove_file(&abs).map_err(|e| WriteError::io("remove", &abs, e))?;
                    removed.push(self.root.rel(&abs));
                }
            }
        }
        Ok(removed)
    }
}

/// Creates the writer's temp file exclusively, with exactly `mode` when given (asked for
/// at creation, corrected through the open file only when the umask or an ACL changed
/// it); a leftover temp of this very pid can only be stale, so it is replaced.
fn create_temp(temp: &Utf8Path, mode: Option<u32>) -> Result<fs_err::File, WriteError> {
    let open = || {
        let mut options = fs_err::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if let Some(mode) = mode {
            use fs_err::os::unix::fs::OpenOptionsExt as _;
            options.mode(mode);
        }
        options.open(temp)
    };
    let file = match open() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = fs_err::remove_file(temp);
            open()
        }
        other => other,
    }
    .map_err(|e| WriteError::io("create", temp, e))?;
    if let Some(mode) = mode
        && let Err(e) = set_file_mode(&file, mode)
    {
        drop(file);
        let _ = fs_err::remove_file(temp);
        return Err(WriteError::io("set permissions of", temp, e));
    }
    Ok(file)
}

fn write_temp(
    temp: &Utf8Path,
    contents: &[u8],
    mode: Option<u32>,
    sync: bool,
) -> Result<(), WriteError> {
    fill_temp(temp, mode, sync, |file| file.write_all(contents))
}

/// Creates the temp file `temp` and has `write` fill it, then fsyncs it when `sync`; on
/// any failure the temp file is removed.
fn fill_temp(
    temp: &Utf8Path,
    mode: Option<u32>,
    sync: bool,
    write: impl FnOnce(&mut fs_err::File) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    let mut file = create_temp(temp, mode)?;
    let result = write(&mut file).and_then(|()| if sync { file.sync_all() } else { Ok(()) });
    if let Err(e) = result {
        drop(file);
        let _ = fs_err::remove_file(temp);
        return Err(WriteError::io("write", temp, e));
    }
    Ok(())
}

/// Where [`copy_temp`] writes: the temp file of `rel`, its mode, and whether to fsync it.
struct CopyTarget<'p> {
    temp: &'p Utf8Path,
    rel: &'p Utf8Path,
    mode: Option<u32>,
    sync: bool,
}

/// Streams `from` into a new temp file, hashing as it goes; removes the temp file and
/// fails when the size or digest differs from what `from` promises.
fn copy_temp(
    target: &CopyTarget<'_>,
    from: &aibox_config::CopyFrom,
    pack: &mut KeptPack,
    buf: &mut [u8],
) -> Result<(), WriteError> {
    let CopyTarget {
        temp,
        rel,
        mode,
        sync,
    } = *target;
    let source = open_source(pack, from, rel)?;
    let mut file = create_temp(temp, mode)?;
    let result = stream_verified(source, from, rel, buf, |chunk| {
        file.write_all(chunk)
            .map_err(|e| WriteError::io("write", temp, e))
    })
    .and_then(|()| {
        if sync {
            file.sync_all()
                .map_err(|e| WriteError::io("write", temp, e))
        } else {
            Ok(())
        }
    });
    if let Err(e) = result {
        drop(file);
        let _ = fs_err::remove_file(temp);
        return Err(e);
    }
    Ok(())
}

/// Opens the verified source `from` of the write of `rel` ([`aibox_config::CopyFrom::open_kept`]:
/// a source in a pack is read through the pack the writer keeps open); a missing source
/// is a changed one ([`WriteError::SourceChanged`]).
fn open_source<'p>(
    pack: &'p mut KeptPack,
    from: &aibox_config::CopyFrom,
    rel: &Utf8Path,
) -> Result<aibox_config::SourceReader<'p>, WriteError> {
    from.open_kept(pack).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            source_changed(from, rel, "is missing".to_owned())
        } else {
            WriteError::io("read", from.path().display().to_string(), e)
        }
    })
}

/// Reads `source` (the opened `from`, see [`aibox_config::CopyFrom::open`]) to its end
/// through `buf`, handing each chunk to `sink`, and checks its size and SHA-256 against
/// `from`'s ([`WriteError::SourceChanged`] naming `rel` on a mismatch).
fn stream_verified(
    mut reader: impl std::io::Read,
    from: &aibox_config::CopyFrom,
    rel: &Utf8Path,
    buf: &mut [u8],
    mut sink: impl FnMut(&[u8]) -> Result<(), WriteError>,
) -> Result<(), WriteError> {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    let mut copied = 0u64;
    loop {
        let n = match reader.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(WriteError::io("read", from.path().display().to_string(), e)),
        };
        hasher.update(&buf[..n]);
        copied += n as u64;
        sink(&buf[..n])?;
    }
    match from.mismatch(copied, &hasher.finalize().into()) {
        Some(reason) => Err(source_changed(from, rel, reason)),
        None => Ok(()),
    }
}

fn source_changed(from: &aibox_config::CopyFrom, rel: &Utf8Path, reason: String) -> WriteError {
    WriteError::SourceChanged {
        path: rel.to_owned(),
        from: match from.pack_offset() {
            Some(_) => format!(
                "`{}` in the unpacked release `{}`",
                from.rel,
                from.dir.display()
            ),
            None => format!("`{}`", from.path().display()),
        },
        reason,
    }
}

/// Renames `from` to `to`, failing with `AlreadyExists` instead of replacing anything at
/// `to` (a plain rename would replace an empty folder).
#[cfg(target_os = "linux")]
fn rename_no_replace(from: &Utf8Path, to: &Utf8Path) -> std::io::Result<()> {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        from.as_std_path(),
        rustix::fs::CWD,
        to.as_std_path(),
        rustix::fs::RenameFlags::NOREPLACE,
    )
    .map_err(Into::into)
}

#[cfg(not(target_os = "linux"))]
fn rename_no_replace(from: &Utf8Path, to: &Utf8Path) -> std::io::Result<()> {
    if fs_err::symlink_metadata(to).is_ok() {
        return Err(std::io::ErrorKind::AlreadyExists.into());
    }
    fs_err::rename(from, to)
}

/// Whether this process runs as root (its effective user).
#[cfg(target_os = "linux")]
fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Not known without a system call this build does not make: assume root, so what is
/// made is always looked at ([`ProjectRoot::hand_over`]).
#[cfg(not(target_os = "linux"))]
fn running_as_root() -> bool {
    true
}

/// Makes everything written on the file system holding `root` durable (`syncfs`).
#[cfg(target_os = "linux")]
fn sync_fs(root: &Utf8Path) -> Result<(), WriteError> {
    let dir = fs_err::File::open(root).map_err(|e| WriteError::io("open", root, e))?;
    sync_file_system(&dir).map_err(|e| WriteError::io("sync", root, e))
}

/// `syncfs` of the file system holding the open folder `dir`.
#[cfg(target_os = "linux")]
fn sync_file_system(dir: &fs_err::File) -> std::io::Result<()> {
    rustix::fs::syncfs(dir.file()).map_err(Into::into)
}

#[cfg(not(target_os = "linux"))]
#[allow(clippy::unnecessary_wraps)]
fn sync_file_system(_dir: &fs_err::File) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(target_os = "linux"))]
#[allow(clippy::unnecessary_wraps)]
fn sync_fs(_root: &Utf8Path) -> Result<(), WriteError> {
    Ok(())
}

/// Makes a rename durable. Best effort: some file systems refuse to fsync directories.
fn sync_dir(dir: &Utf8Path) {
    if let Ok(d) = fs_err::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Test-only crash injection, compiled into debug builds only.
mod crash {
    /// Environment variable: abort the process at the N-th crash point (1-based). Crash
    /// points are after a temp file is complete (before its rename) and after the rename.
    #[cfg(debug_assertions)]
    pub const ENV: &str = "AIBOX_TEST_CRASH_AFTER_WRITES";

    #[derive(Debug, Default)]
    pub struct Hook {
        #[cfg(debug_assertions)]
        remaining: Option<u64>,
    }

    impl Hook {
        #[cfg(debug_assertions)]
        pub fn from_env() -> Self {
            Self {
                remaining: std::env::var(ENV).ok().and_then(|v| v.parse().ok()),
            }
        }

        #[cfg(not(debug_assertions))]
        pub fn from_env() -> Self {
            Self {}
        }

        #[cfg(debug_assertions)]
        pub fn point(&mut self) {
            if let Some(n) = self.remaining.as_mut() {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    // A real SIGKILL, as from the OOM killer or `kill -9`; abort if that fails.
                    let _ = std::process::Command::new("kill")
                        .args(["-KILL", &std::process::id().to_string()])
                        .status();
                    std::process::abort();
                }
            }
        }

        #[cfg(not(debug_assertions))]
        #[allow(clippy::unused_self)]
        pub fn point(&mut self) {}

        #[cfg(debug_assertions)]
        pub fn armed(&self) -> bool {
            self.remaining.is_some()
        }

        #[cfg(not(debug_assertions))]
        #[allow(clippy::unused_self)]
        pub fn armed(&self) -> bool {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache of checked folders holds at most its slots: after far more folders than
    /// it has slots, the latest are still known, none that was never checked is taken
    /// for checked, a forgotten one is not known, and each lookup is one slot.
    #[test]
    fn checked_folders_are_a_bounded_cache() {
        let dir = tempfile::tempdir().unwrap();
        let root = ProjectRoot::open(Utf8Path::from_path(dir.path()).unwrap()).unwrap();
        let path = |i: usize| Utf8PathBuf::from(format!("/p/d{i}"));
        let many = CHECKED_DIRS * 3;
        for i in 0..many {
            root.remember_dir(&path(i));
        }
        assert!(root.is_checked_dir(&path(many - 1)));
        let known = (0..many).filter(|&i| root.is_checked_dir(&path(i))).count();
        assert!(known <= CHECKED_DIRS, "{known}");
        assert!(known > CHECKED_DIRS / 2, "{known}");
        assert!((many..many * 2).all(|i| !root.is_checked_dir(&path(i))));
        root.forget_dir(&path(many - 1));
        assert!(!root.is_checked_dir(&path(many - 1)));
        root.forget_checked_dirs();
        assert!((0..many).all(|i| !root.is_checked_dir(&path(i))));
    }

    /// The joined path has exactly its length as capacity (thousands are held at once).
    #[test]
    fn join_exact_allocates_the_path_alone() {
        let path = join_exact("context/templates/processkit/v1.0.0", "skills/a/SKILL.md");
        assert_eq!(
            path,
            "context/templates/processkit/v1.0.0/skills/a/SKILL.md"
        );
        assert_eq!(path.capacity(), path.len());
    }

    #[test]
    fn perimeter_matching() {
        for ok in [
            ".devcontainer/Dockerfile",
            ".aibox-home/.claude/.keep",
            ".aibox/backups/x.1",
            "aibox.lock",
            ".codex/config.toml",
            "context/skills/a/SKILL.md",
        ] {
            assert!(in_perimeter(Utf8Path::new(ok)), "{ok}");
        }
        for bad in [
            ".devcontainer/other",
            ".aibox-home",
            "context",
            "README.md",
            "src/main.rs",
            ".git/config",
            ".aibox-homeX/a",
            "aibox.toml",
        ] {
            assert!(!in_perimeter(Utf8Path::new(bad)), "{bad}");
        }
    }

    #[test]
    fn relative_path_checks() {
        let bytes = "backslashes and NUL bytes are not allowed";
        for (bad, expected) in [
            ("", "the path is empty"),
            ("/etc/passwd", "absolute paths are not allowed"),
            ("a/../b", "`..` components are not allowed"),
            ("./a", "`.` components are not allowed"),
            ("a/.", "`.` components are not allowed"),
            ("a//b", "empty path component"),
            ("a/", "empty path component"),
            ("a\\b", bytes),
            ("a\0b", bytes),
            // A forbidden byte outranks a bad component before it.
            ("a/../b\\c", bytes),
            ("..", "`..` components are not allowed"),
            ("a/b/..", "`..` components are not allowed"),
        ] {
            let err = check_relative(Utf8Path::new(bad)).unwrap_err();
            assert!(
                matches!(&err, WriteError::InvalidPath { reason, .. } if *reason == expected),
                "{bad:?}: {err:?}"
            );
        }
        for good in [
            ".devcontainer/Dockerfile",
            ".a",
            "a..b",
            "...",
            "a/.b/..c",
            "x",
            "context/skills/a b/c-d.md",
        ] {
            check_relative(Utf8Path::new(good)).unwrap();
        }
    }

    #[test]
    fn each_command_writes_only_its_rows_of_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let root = ProjectRoot::open(Utf8Path::from_path(dir.path()).unwrap()).unwrap();
        let mut init = Writer::for_command(&root, Writers::INIT);
        for refused in [".mcp.json", ".aibox-local.toml", "context/x.md"] {
            let err = init.write(Utf8Path::new(refused), b"x", None).unwrap_err();
            assert!(
                matches!(err, WriteError::OutsidePerimeter { .. }),
                "{refused}"
            );
        }
        init.create_new(Utf8Path::new("aibox.toml"), b"a = 1\n")
            .unwrap();
        // Created once, never replaced.
        let err = init
            .create_new(Utf8Path::new("aibox.toml"), b"b = 2\n")
            .unwrap_err();
        assert!(matches!(err, WriteError::Exists { .. }), "{err:?}");
        assert_eq!(
            root.read(Utf8Path::new("aibox.toml")).unwrap().unwrap(),
            b"a = 1\n"
        );
        let mut set = Writer::for_command(&root, Writers::CONFIG_SET);
        set.write(Utf8Path::new(".aibox-local.toml"), b"", None)
            .unwrap();
        assert!(set.write(Utf8Path::new(".gitignore"), b"x", None).is_err());
        // `apply` never writes the configuration files.
        let mut apply = Writer::new(&root);
        assert!(
            apply
                .write(Utf8Path::new("aibox.toml"), b"x", None)
                .is_err()
        );
        // No temp file is left behind.
        let mut names: Vec<String> = fs_err::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, [".aibox-local.toml", "aibox.toml"]);
    }

    /// Deferred copies start writing back on a helper once enough bytes were written;
    /// the commit stops it, and every copy is in place with its bytes and mode.
    #[test]
    fn deferred_copies_write_back_early_and_commit_stops_the_helper() {
        use sha2::Digest as _;
        let dir = tempfile::tempdir().expect("temp dir");
        let root_path = Utf8Path::from_path(dir.path()).expect("utf-8 temp dir");
        let source = root_path.join("source.bin");
        let bytes = vec![7u8; 768 * 1024];
        fs_err::write(&source, &bytes).expect("write source");
        let from = aibox_config::CopyFrom::new(
            std::sync::Arc::new(root_path.as_std_path().to_path_buf()),
            std::sync::Arc::from("source.bin"),
            sha2::Sha256::digest(&bytes).into(),
            bytes.len() as u64,
        );
        let root = ProjectRoot::open(root_path).expect("root");
        let mut writer = Writer::new(&root);
        writer.defer_sync();
        for i in 0..4 {
            writer
                .copy_verified(
                    Utf8Path::new(&format!("context/f{i}.bin")),
                    &from,
                    Some(0o640),
                )
                .expect("copy");
        }
        assert!(
            writer.writeback.helper.is_some(),
            "3 MiB written: the early writeback started"
        );
        writer.commit().expect("commit");
        assert!(writer.writeback.helper.is_none() && writer.writeback.kick.is_none());
        for i in 0..4 {
            let path = root_path.join(format!("context/f{i}.bin"));
            assert_eq!(fs_err::read(&path).expect("copied"), bytes);
            assert_eq!(
                root.mode(Utf8Path::new(&format!("context/f{i}.bin")))
                    .expect("mode"),
                Some(0o640)
            );
        }
    }
}
