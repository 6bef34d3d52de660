//! Generated files that the configuration no longer calls for are removed by the next
//! apply, unless somebody edited them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may fail loudly

use crate::common;

use aibox_engine::{ApplyOptions, FileAction, apply};
use camino::Utf8Path;
use common::{empty_project, removed};

const PROFILE: &str = ".devcontainer/aibox-seccomp.json";
const PROFILE_NESTED: &str = ".devcontainer/.devcontainer/aibox-seccomp.json";

/// `seccomp-profile` with its consent, or the engine's default without any consent (on
/// Podman, whose default lets Codex's sandbox work, so the gate needs no engine probe).
fn write(root: &Utf8Path, sandbox: &str) {
    let consent = if sandbox == "seccomp-profile" {
        "acknowledge_seccomp_profile = true\n"
    } else {
        ""
    };
    let toml = format!(
        "[container]\nname = \"r\"\nengine = \"podman\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"codex\"]\n\n\
         [security]\ncodex_sandbox = \"{sandbox}\"\n{consent}"
    );
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
}

#[test]
fn an_unneeded_generated_file_is_removed() {
    let (_t, root) = empty_project();
    write(&root, "seccomp-profile");
    apply(&root, &ApplyOptions::default()).unwrap();
    assert!(root.join(PROFILE).is_file());
    assert!(root.join(PROFILE_NESTED).is_file());
    write(&root, "engine-default");
    let report = apply(&root, &ApplyOptions::default()).unwrap();
    let removed = removed(&report);
    assert_eq!(removed, [PROFILE_NESTED, PROFILE]);
    assert!(!root.join(PROFILE).exists());
    assert!(!root.join(PROFILE_NESTED).exists());
    let lock = fs_err::read_to_string(root.join("aibox.lock")).unwrap();
    assert!(!lock.contains("aibox-seccomp.json"), "{lock}");
    assert!(!apply(&root, &ApplyOptions::default()).unwrap().changed());
}

#[test]
fn an_edited_generated_file_is_kept() {
    let (_t, root) = empty_project();
    write(&root, "seccomp-profile");
    apply(&root, &ApplyOptions::default()).unwrap();
    fs_err::write(root.join(PROFILE), "{\"edited\": true}\n").unwrap();
    write(&root, "engine-default");
    let report = apply(&root, &ApplyOptions::default()).unwrap();
    let removed: Vec<&str> = report
        .files
        .iter()
        .filter(|f| f.action == FileAction::Removed)
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(removed, [PROFILE_NESTED], "only the unedited copy goes");
    assert_eq!(
        fs_err::read_to_string(root.join(PROFILE)).unwrap(),
        "{\"edited\": true}\n"
    );
}
