//! The image carries the tools the project needs, pinned and verified (real Podman).
//!
//! A three-harness processkit project with the bundled content pack
//! (`examples/processkit-pack`) and the `npm` addon is applied and brought up; inside the
//! container, `aibox exec` finds every harness CLI, `uv`, `git`, `node` and `npx` at the
//! catalog's versions, and the pack's MCP server, started exactly as the registered
//! Claude Code config says, answers `initialize` over stdio. `aibox mcp check` proves the
//! same for every harness (exit 0), then fails (exit 1, with the server's stderr) on a team
//! server that dies at start, which `doctor` reports as an error. The image build reaches the package registries through this
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
    mcp_check(&podman, &root);
    ok(aibox(&podman, &root).arg("down"));
    drop(cleanup);
}

/// `aibox mcp check` on the running container: the pack's server starts for all three
/// harnesses; a team server that dies at start fails the check (exit 1) with its stderr,
/// and `doctor` reports it as an error.
fn mcp_check(podman: &Podman, root: &Utf8Path) {
    let text = ok(aibox(podman, root).args(["mcp", "check", "-o", "json"]));
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let server = &report["servers"][0];
    assert_eq!(server["name"], "processkit-skill-finder", "{report}");
    assert_eq!(server["status"], "ok", "{report}");
    assert_eq!(
        server["harnesses"],
        serde_json::json!(["claude", "codex", "gemini"]),
        "one start for every harness that registers it: {report}"
    );
    let probe = &server["probe"];
    assert_eq!(probe["server_name"], "processkit-skill-finder", "{report}");
    assert_eq!(probe["protocol_version"], "2025-06-18", "{report}");
    assert_eq!(
        probe["tools"],
        serde_json::json!(["list_skills", "find_skill"])
    );
    let init_ms = probe["initialize_ms"].as_u64().unwrap_or(u64::MAX);
    assert!(init_ms < 60_000, "within the default deadline: {report}");
    let human = ok(aibox(podman, root).args(["mcp", "check"]));
    assert!(
        human.contains("ok   processkit-skill-finder  (2 tools, initialize "),
        "{human}"
    );

    // A team server that dies at start, as servers with missing dependencies do.
    let mut toml = fs_err::read_to_string(root.join("aibox.toml")).unwrap();
    toml.push_str(
        "\n[[ai.mcp.servers]]\nname = \"broken\"\ncommand = \"python3\"\n\
         args = [\"-c\", \"import sys; sys.stderr.write('boom\\\\n'); sys.exit(1)\"]\n",
    );
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
    ok(aibox(podman, root).arg("apply"));
    let out = aibox(podman, root).args(["mcp", "check"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stdout.contains("ok   processkit-skill-finder"),
        "{}",
        show(&out)
    );
    assert!(
        stdout.contains("FAIL broken                   exited with code 1 before answering initialize [claude, codex, gemini]"),
        "{}",
        show(&out)
    );
    assert!(stdout.contains("     | boom\n"), "{}", show(&out));
    assert!(
        stdout.contains("[[ai.mcp.servers]]"),
        "the fix names where: {}",
        show(&out)
    );
    // Only the named server.
    let only = aibox(podman, root)
        .args(["mcp", "check", "broken", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(only.status.code(), Some(1), "{}", show(&only));
    let report: serde_json::Value = serde_json::from_slice(&only.stdout).unwrap();
    assert_eq!(
        report["servers"].as_array().map(Vec::len),
        Some(1),
        "{report}"
    );
    assert_eq!(
        report["servers"][0]["probe"]["failure"], "exited",
        "{report}"
    );
    assert_eq!(
        report["servers"][0]["probe"]["stderr_tail"],
        serde_json::json!(["boom"])
    );

    let doctor = aibox(podman, root)
        .args(["doctor", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(doctor.status.code(), Some(1), "{}", show(&doctor));
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let findings = report["findings"].as_array().unwrap();
    let failed = findings
        .iter()
        .find(|f| f["code"] == "aibox::doctor::mcp_server_failed")
        .unwrap_or_else(|| panic!("no mcp_server_failed finding: {report}"));
    assert_eq!(failed["severity"], "error", "{failed}");
    let message = failed["message"].as_str().unwrap();
    assert!(message.contains("`broken`"), "{failed}");
    assert!(message.contains("exited with code 1"), "{failed}");
    assert!(message.contains("boom"), "{failed}");
    assert!(
        failed["remedy"]
            .as_str()
            .unwrap()
            .contains("aibox mcp check broken"),
        "{failed}"
    );
}
