//! The bypass corpus on disk, shared by `compose_corpus.rs` (the gate) and
//! `compose_crosscheck.rs` (the real Compose implementations), and the project view
//! `links.rs` builds in temporary folders.

#![allow(clippy::unwrap_used)] // test helpers fail loudly

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aibox_config::hostpath::{HostPath, resolve_host_path, subfolders};
use aibox_policy::ComposeSources;

/// The corpus: `fixtures/compose-corpus/` at the workspace root, outside this crate's
/// folder, since Cargo follows symbolic links when it lists a package's files and the
/// corpus holds links to `/` (`cargo doc` of this crate failed inside `/proc`).
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compose-corpus")
}

/// The fixture projects of one kind (`compose-bypass`, `compose-benign`), sorted.
pub fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = corpus_dir().join(kind);
    let mut out: Vec<PathBuf> = fs_err::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    out.sort();
    out
}

/// A fixture project as the gate sees it: its regular files' texts, and its symbolic
/// links followed on the real file system (as the engine's sources do).
pub struct Project {
    pub root: PathBuf,
    pub files: BTreeMap<String, String>,
    /// The home `~` stands for, when a test has one.
    pub home: Option<PathBuf>,
}

impl ComposeSources for Project {
    fn read(&self, path: &str) -> Option<String> {
        self.files.read(path)
    }

    fn host_path(&self, path: &str) -> HostPath {
        resolve_host_path(&self.root, self.home.as_deref(), path)
    }

    fn subdirs(&self, dir: &str) -> Vec<String> {
        subfolders(&self.root, dir)
    }
}

/// Every regular file of a fixture project by project-relative path (symbolic links are
/// not followed: the gate never reads through them).
pub fn project_files(root: &Path) -> Project {
    let mut files = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let kind = fs_err::symlink_metadata(&path).unwrap().file_type();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.insert(rel, fs_err::read_to_string(&path).unwrap());
            }
        }
    }
    Project {
        root: root.to_path_buf(),
        files,
        home: None,
    }
}
