//! The bypass corpus on disk, shared by `compose_corpus.rs` (the gate) and
//! `compose_crosscheck.rs` (the real Compose implementations).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The fixture projects of one kind (`compose-bypass`, `compose-benign`), sorted.
pub fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(kind);
    let mut out: Vec<PathBuf> = fs_err::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    out.sort();
    out
}

/// Every file of a fixture project by project-relative path.
pub fn project_files(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, fs_err::read_to_string(&path).unwrap());
            }
        }
    }
    out
}
