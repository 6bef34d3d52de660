//! The image carries the tools the project needs, pinned and verified (real Podman).
//!
//! A three-harness processkit project with the bundled content pack
//! (`examples/processkit-pack`) and the `npm` addon is applied and brought up; inside the
//! container, `aibox exec` finds every harness CLI, `uv`, `git`, `node` and `npx` at the
//! catalog's versions, and the pack's MCP server, started exactly as the registered
//! Claude Code config says, answers `initialize` over stdio. The image build reaches the package registries through this
//! machine's TLS-inspecting proxy with the personal CA setting.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail loudly

use std::process::{Command, Stdio};

use std::io::Write as _;

use aibox_engine::catalog::Catalog;
use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Podman, local_toml_with_host_ca};
use camino::{Utf8Path, Utf8PathBuf};

fn aibox(podman: &Podman, root: &Utf8Path) -> Command {
    podman.aibox(env!("CARGO_BIN_EXE_aibox"), root)
}

use aibox_test_support::show_output as show;

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?} failed: {}", show(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The pin of the bundled pack (see `aibox-provenance/tests/example_pack.rs`).
const PACK_SHA256: &str = "85e26571936b8e418b23fb0ded82e31c63c0993fd567a1e6fa0914473d014af0";

/// Starts the server named `name` in `.mcp.json` through `aibox exec`, sends `initialize`
/// on stdin and returns the first line it answers.
fn mcp_initialize(podman: &Podman, root: &Utf8Path, name: &str) -> serde_json::Value {
    let mcp: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(root.join(".mcp.json")).unwrap()).unwrap();
    let server = &mcp["mcpServers"][name];
    let command = server["command"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: {mcp}"));
    let args: Vec<&str> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let mut exec = aibox(podman, root);
    exec.arg("exec");
    // Registered environment reaches the server as named variables of `aibox exec`.
    for (key, value) in server["env"].as_object().into_iter().flatten() {
        exec.env(key, value.as_str().unwrap()).args(["--env", key]);
    }
    exec.arg("--").arg(command).args(&args);
    let mut child = exec
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "aibox-e2e", "version": "0"}}});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{request}").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .next()
        .unwrap_or_else(|| panic!("{name} answered nothing: {}", show(&out)));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"))
}

#[test]
fn three_harness_processkit_image_runs_the_pinned_tools() {
    let podman = Podman::ready();
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("aibox-e2e-tools-{}", std::process::id());
    let root = Utf8PathBuf::from_path_buf(tmp.path().join(&name)).unwrap();
    fs_err::create_dir_all(&root).unwrap();
    let source = aibox_test_support::workspace_root().join("examples/processkit-pack");
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
        source.as_str(),
        "--processkit-version",
        "v0.1.0",
        "--base-image",
        BASE_IMAGE,
        "--yes",
    ]));
    ok(aibox(&podman, &root).args(["config", "set", "processkit.sha256", PACK_SHA256]));
    ok(aibox(&podman, &root).args(["config", "set", "context.packages", "[\"starter\"]"]));
    // A user-chosen addon on top: npm and npx.
    ok(aibox(&podman, &root).args(["addon", "add", "npm"]));
    fs_err::write(root.join(".aibox-local.toml"), local_toml_with_host_ca()).unwrap();
    ok(aibox(&podman, &root).arg("apply"));
    let status: serde_json::Value = serde_json::from_str(&ok(
        aibox(&podman, &root).args(["status", "--output", "json"])
    ))
    .unwrap();
    let cleanup = Cleanup::for_project(&podman, &name, &status);

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
        ("node", format!("v{}", version("node"))),
        ("npx", version("npm")),
    ] {
        let out = ok(aibox(&podman, &root).args(["exec", "--", cmd, "--version"]));
        assert!(
            out.trim().starts_with(&expected),
            "`{cmd} --version` printed {out:?}, expected {expected:?}"
        );
    }
    let init = mcp_initialize(&podman, &root, "processkit-skill-finder");
    assert_eq!(
        init["result"]["serverInfo"]["name"], "processkit-skill-finder",
        "{init}"
    );
    ok(aibox(&podman, &root).arg("down"));
    drop(cleanup);
}
