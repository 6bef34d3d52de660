//! Embedders get typed errors with a kind: a failed download and a file in the way are
//! the environment's, a missing seccomp consent is the user's and carries its key.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may fail loudly

use aibox_config::ErrorKind;
use aibox_engine::{ApplyOptions, EngineError, apply};
use aibox_test_support::http::{Route, Server};
use camino::Utf8PathBuf;

fn project(toml: &str) -> (tempfile::TempDir, Utf8PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
    (dir, root)
}

fn options(cache: &tempfile::TempDir) -> ApplyOptions {
    let mut options = ApplyOptions::default();
    options.plan.cache_dir = Some(Utf8PathBuf::from_path_buf(cache.path().to_owned()).unwrap());
    options
}

#[test]
fn a_failed_download_is_a_typed_environment_error() {
    let server = Server::start().unwrap();
    let archive = "/org/processkit/releases/download/v0.0.1/processkit-v0.0.1.tar.gz";
    server.route(archive, Route::status(500));
    server.route(&format!("{archive}.sha256"), Route::status(500));
    let (_t, root) = project(&format!(
        "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\n\n\
         [processkit]\nsource = \"{}\"\nversion = \"v0.0.1\"\n",
        server.url("/org/processkit.git")
    ));
    let cache = tempfile::tempdir().unwrap();
    let err = apply(&root, &options(&cache)).unwrap_err();
    assert!(matches!(err, EngineError::Provenance(_)), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Environment);
    assert_eq!(err.consent_key(), None);
}

#[test]
fn a_missing_seccomp_consent_carries_its_key() {
    let (_t, root) = project(
        "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\n\
         harnesses = [\"codex\"]\n\n[security]\ncodex_sandbox = \"unconfined\"\n",
    );
    let cache = tempfile::tempdir().unwrap();
    let err = apply(&root, &options(&cache)).unwrap_err();
    assert!(matches!(err, EngineError::Policy(_)), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::User);
    assert_eq!(
        aibox_engine::consent::missing_seccomp_consent(&err).as_deref(),
        Some("security.acknowledge_seccomp_unconfined")
    );
}

#[test]
fn a_file_in_the_way_is_an_environment_error() {
    let (_t, root) = project(
        "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\n\
         harnesses = [\"claude\"]\n",
    );
    fs_err::write(root.join(".devcontainer"), "not a folder\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let err = apply(&root, &options(&cache)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Environment, "{err:?}");
}
