//! The CLI as users run it: the real `aibox` binary on fixture trees.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may fail loudly

use std::process::{Command, Output};

use camino::Utf8Path;

fn aibox(dir: &Utf8Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aibox"))
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("AIBOX_PROJECT")
        .args(args)
        .output()
        .expect("run aibox")
}

fn text(out: &Output) -> String {
    format!(
        "status: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn tempdir() -> (tempfile::TempDir, camino::Utf8PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = camino::Utf8PathBuf::from_path_buf(dir.path().to_owned()).expect("utf8");
    (dir, path)
}

#[test]
fn version_is_the_workspace_version() {
    let (_t, dir) = tempdir();
    let out = aibox(&dir, &["--version"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("aibox {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn completion_scripts_for_common_shells() {
    let (_t, dir) = tempdir();
    for shell in ["bash", "zsh", "fish"] {
        let out = aibox(&dir, &["completion", shell]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("aibox"));
    }
}

#[test]
fn usage_errors_exit_2() {
    let (_t, dir) = tempdir();
    let out = aibox(&dir, &["apply", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn no_project_is_a_user_error_with_a_hint() {
    let (_t, dir) = tempdir();
    let out = aibox(&dir, &["config", "validate"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("aibox init"), "{err}");
}

#[test]
fn init_then_validate_get_set_apply_check() {
    let (_t, dir) = tempdir();
    let out = aibox(
        &dir,
        &[
            "init",
            "demo",
            "--harness",
            "claude",
            "--context-mode",
            "harness-only",
            "--yes",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(dir.join("aibox.toml").is_file());
    assert!(
        fs_err::read_to_string(dir.join(".gitignore"))
            .unwrap()
            .contains(".aibox-local.toml")
    );

    // A second init refuses and changes nothing.
    let before = fs_err::read_to_string(dir.join("aibox.toml")).unwrap();
    let out = aibox(&dir, &["init", "demo", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        fs_err::read_to_string(dir.join("aibox.toml")).unwrap(),
        before
    );

    let out = aibox(&dir, &["config", "validate"]);
    assert!(out.status.success(), "{}", text(&out));

    let out = aibox(&dir, &["config", "get", "container.name"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("demo"));

    let out = aibox(&dir, &["config", "set", "container.user", "dev"]);
    assert!(out.status.success(), "{}", text(&out));
    let after = fs_err::read_to_string(dir.join("aibox.toml")).unwrap();
    assert!(after.contains("user = \"dev\""), "{after}");
    // Comments written by init survive the edit.
    let comments = |s: &str| {
        s.lines()
            .filter(|l| l.trim_start().starts_with('#'))
            .count()
    };
    assert_eq!(comments(&after), comments(&before));

    // An invalid edit is refused and the file is untouched.
    let out = aibox(
        &dir,
        &["config", "set", "container.uid", "\"not a number\""],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        fs_err::read_to_string(dir.join("aibox.toml")).unwrap(),
        after
    );

    // Out of date before apply, up to date after.
    let out = aibox(&dir, &["apply", "--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let out = aibox(&dir, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(dir.join(".devcontainer/docker-compose.yml").is_file());
    let out = aibox(&dir, &["apply", "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = aibox(&dir, &["--output", "json", "apply"]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        report["files"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["action"] != "created" && f["action"] != "updated")
    );
}

#[test]
fn invalid_config_exits_2_and_names_the_file() {
    let (_t, dir) = tempdir();
    fs_err::write(
        dir.join("aibox.toml"),
        "[container]\nname = \"x\"\nnmae = \"y\"\n",
    )
    .unwrap();
    let out = aibox(&dir, &["config", "validate"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("aibox.toml"), "{err}");
    assert!(err.contains("nmae"), "{err}");
}

#[test]
fn schema_is_printed_as_json() {
    let (_t, dir) = tempdir();
    let out = aibox(&dir, &["config", "schema"]);
    assert!(out.status.success(), "{}", text(&out));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json schema");
    assert!(schema["properties"]["container"].is_object());
}

/// The documentation site's reference pages are generated; the committed copies must match.
/// Regenerate with `AIBOX_UPDATE_DOCS=1 cargo test -p aibox-cli --test cli reference_docs`.
#[test]
fn reference_docs_are_in_sync() {
    let (_t, dir) = tempdir();
    let root = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs-site/src/reference");
    for (page, file) in [("cli", "cli.md"), ("config", "configuration.md")] {
        let out = aibox(&dir, &["docs", page]);
        assert!(out.status.success(), "{}", text(&out));
        let generated = String::from_utf8(out.stdout).expect("utf8");
        let path = root.join(file);
        if std::env::var_os("AIBOX_UPDATE_DOCS").is_some() {
            fs_err::create_dir_all(&root).unwrap();
            fs_err::write(&path, &generated).unwrap();
        }
        let committed = fs_err::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{path} is out of date: run `AIBOX_UPDATE_DOCS=1 cargo test -p aibox-cli --test cli reference_docs` and commit it"
        );
    }
}
