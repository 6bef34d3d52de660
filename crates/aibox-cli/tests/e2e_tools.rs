//! The image carries the tools the project needs, pinned and verified (real Podman).
//!
//! A three-harness processkit project (release served over loopback) is applied and
//! brought up; inside the container, `aibox exec` finds every harness CLI, `uv` and
//! `git` at the catalog's versions. The image build reaches the package registries
//! through this machine's TLS-inspecting proxy with the personal CA setting.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail loudly

use std::process::{Command, Output, Stdio};

use aibox_engine::catalog::Catalog;
use aibox_test_support::http::release::SyntheticRelease;
use aibox_test_support::http::{Route, Server};
use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Podman, local_toml_with_host_ca};
use camino::{Utf8Path, Utf8PathBuf};

fn aibox(podman: &Podman, root: &Utf8Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aibox"));
    podman.configure(&mut cmd);
    cmd.env("AIBOX_ENGINE", "podman")
        .env("NO_COLOR", "1")
        .env_remove("AIBOX_COMPOSE")
        .env_remove("AIBOX_PROJECT")
        .arg("--project")
        .arg(root.as_str())
        .stdin(Stdio::null());
    cmd
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?} failed: {}", show(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// A processkit-like release published on a loopback server.
fn serve_release(version: &str) -> Server {
    let release = SyntheticRelease::processkit_like(version, false);
    let server = Server::start().unwrap();
    let archive = release.tar_gz();
    let path = format!("/org/processkit/releases/download/{version}/processkit-{version}.tar.gz");
    server.route(&path, Route::ok(archive.clone()));
    server.route(
        &format!("{path}.sha256"),
        Route::ok(release.sidecar(&archive)),
    );
    server
}

#[test]
fn three_harness_processkit_image_runs_the_pinned_tools() {
    let podman = Podman::ready();
    let server = serve_release("v0.28.3");
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("aibox-e2e-tools-{}", std::process::id());
    let root = Utf8PathBuf::from_path_buf(tmp.path().join(&name)).unwrap();
    fs_err::create_dir_all(&root).unwrap();
    let source = server.url("/org/processkit.git");
    ok(aibox(&podman, &root).args([
        "init",
        &name,
        "--harness",
        "claude",
        "--harness",
        "codex",
        "--harness",
        "gemini",
        "--context-mode",
        "processkit",
        "--processkit-source",
        &source,
        "--processkit-version",
        "v0.28.3",
        "--base-image",
        BASE_IMAGE,
        "--yes",
    ]));
    fs_err::write(root.join(".aibox-local.toml"), local_toml_with_host_ca()).unwrap();
    ok(aibox(&podman, &root).arg("apply"));
    let status: serde_json::Value = serde_json::from_str(&ok(
        aibox(&podman, &root).args(["status", "--output", "json"])
    ))
    .unwrap();
    let project = status["project"].as_str().unwrap().to_owned();
    let image = status["image"].as_str().unwrap().to_owned();
    let mut cleanup = Cleanup::new(&podman);
    cleanup
        .container(&name)
        .image(&image)
        .network(&format!("{project}_default"));

    ok(aibox(&podman, &root).arg("up"));
    let catalog = Catalog::builtin().unwrap();
    let version = |tool: &str| catalog.get(tool).unwrap().version.clone();
    for (cmd, expected) in [
        (
            "claude",
            format!("{} (Claude Code)", version("claude-code")),
        ),
        ("codex", format!("codex-cli {}", version("codex"))),
        ("gemini", version("gemini-cli")),
        ("uv", format!("uv {}", version("uv"))),
        ("git", "git version ".to_owned()),
    ] {
        let out = ok(aibox(&podman, &root).args(["exec", "--", cmd, "--version"]));
        assert!(
            out.trim().starts_with(&expected),
            "`{cmd} --version` printed {out:?}, expected {expected:?}"
        );
    }
    ok(aibox(&podman, &root).arg("down"));
    drop(cleanup);
    drop(server);
}
