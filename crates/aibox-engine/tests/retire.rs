//! Generated files that the configuration no longer calls for are removed by the next
//! apply, unless somebody edited them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may fail loudly

use aibox_engine::{ApplyOptions, FileAction, apply};
use camino::{Utf8Path, Utf8PathBuf};

const PROFILE: &str = ".devcontainer/aibox-seccomp.json";

fn write(root: &Utf8Path, sandbox: &str) {
    let toml = format!(
        "[container]\nname = \"r\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"codex\"]\n\n\
         [security]\ncodex_sandbox = \"{sandbox}\"\nacknowledge_seccomp_profile = true\n"
    );
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
}

fn project() -> (tempfile::TempDir, Utf8PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    (dir, root)
}

#[test]
fn an_unneeded_generated_file_is_removed() {
    let (_t, root) = project();
    write(&root, "seccomp-profile");
    apply(&root, &ApplyOptions::default()).unwrap();
    assert!(root.join(PROFILE).is_file());
    write(&root, "landlock");
    let report = apply(&root, &ApplyOptions::default()).unwrap();
    let removed: Vec<&str> = report
        .files
        .iter()
        .filter(|f| f.action == FileAction::Removed)
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(removed, [PROFILE]);
    assert!(!root.join(PROFILE).exists());
    let lock = fs_err::read_to_string(root.join("aibox.lock")).unwrap();
    assert!(!lock.contains("aibox-seccomp.json"), "{lock}");
    assert!(!apply(&root, &ApplyOptions::default()).unwrap().changed());
}

#[test]
fn an_edited_generated_file_is_kept() {
    let (_t, root) = project();
    write(&root, "seccomp-profile");
    apply(&root, &ApplyOptions::default()).unwrap();
    fs_err::write(root.join(PROFILE), "{\"edited\": true}\n").unwrap();
    write(&root, "landlock");
    let report = apply(&root, &ApplyOptions::default()).unwrap();
    assert!(report.files.iter().all(|f| f.action != FileAction::Removed));
    assert_eq!(
        fs_err::read_to_string(root.join(PROFILE)).unwrap(),
        "{\"edited\": true}\n"
    );
}
