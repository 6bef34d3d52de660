//! The image carries the tools the project needs, pinned and verified (real Podman).
//!
//! A four-harness processkit project (Claude Code, Codex, Gemini CLI and `OpenCode`) on
//! the MCP fixture pack (servers declaring `mcp[cli]>=1.0` and importing
//! `mcp.server.fastmcp`, as the published releases do; see
//! `aibox-test-support/fixtures/mcp-pack`) and the `npm` addon is applied, its servers'
//! dependencies locked with the real uv against the real `PyPI`, and brought up; inside the
//! container, `aibox exec` finds every harness CLI, `uv`, `git`, `node` and `npx` at the
//! catalog's versions, every registered MCP server, started exactly as the registered
//! Claude Code config says with `UV_OFFLINE=1`, answers `initialize` over stdio, and the
//! real `claude mcp list`, `gemini mcp list` and `opencode mcp list` report every server
//! connected and `codex mcp list` every server enabled; `aibox mcp
//! check` proves the same for every harness (exit 0), after which no server has left
//! bytecode in an installed skill (`doctor --integrity` passes); the check then fails
//! (exit 1, with the server's stderr) on a team server that dies at start, which
//! `doctor` reports as an error. A team server started with `npx -y <package>@<version>` is locked with the real
//! npm, installed by the image build with `npm ci`, registered as its installed bin and
//! started with `npm_config_offline=true` like the others. A team server started with
//! `uvx <package>==<version>` is locked with the real uv as of that version's upload on
//! `PyPI`, installed like the release's servers and started as its environment's
//! executable: on mcp 1.x, where the same command unlocked dies at import. The image build reaches the
//! package registries through this machine's TLS-inspecting proxy with the personal CA
//! setting.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail loudly

use std::process::Command;

use aibox_engine::catalog::Catalog;
use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Podman, local_toml_with_host_ca};
use camino::{Utf8Path, Utf8PathBuf};

fn aibox(podman: &Podman, root: &Utf8Path) -> Command {
    let mut cmd = podman.aibox(env!("CARGO_BIN_EXE_aibox"), root);
    // `apply` locks the servers' dependencies with this uv (the suite's default is none).
    cmd.env("AIBOX_UV", aibox_test_support::uv().as_str());
    // ... and the npx team server's tree with this npm.
    cmd.env("AIBOX_NPM", aibox_test_support::npm().as_str());
    cmd
}

/// The team servers: small real MCP servers, pinned exactly, one started with `npx` and
/// one with `uvx` (whose `mcp>=1.0` resolves to 2.x today, where it dies at import).
const TEAM_SERVERS: &str = "\n[[ai.mcp.servers]]\nname = \"memory\"\ncommand = \"npx\"\n\
                            args = [\"-y\", \"@modelcontextprotocol/server-memory@2026.8.31\"]\n\
                            \n[[ai.mcp.servers]]\nname = \"time\"\ncommand = \"uvx\"\n\
                            args = [\"mcp-server-time==2025.9.25\", \"--local-timezone=UTC\"]\n";

use aibox_test_support::show_output as show;

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?} failed: {}", show(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Starts the server named `name` in `.mcp.json` through `aibox exec`, sends `initialize`
/// on stdin and returns the first line it answers.
fn mcp_initialize(podman: &Podman, root: &Utf8Path, name: &str) -> serde_json::Value {
    let mcp: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(root.join(".mcp.json")).unwrap()).unwrap();
    let server = &mcp["mcpServers"][name];
    let command = server["command"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: {mcp}"));
    // An empty `args` is left out of the file.
    let args: Vec<&str> = server["args"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a.as_str().unwrap())
        .collect();
    let mut exec = aibox(podman, root);
    exec.arg("exec");
    // Locked servers start with no resolver and no index.
    exec.env("UV_OFFLINE", "1").args(["--env", "UV_OFFLINE"]);
    exec.env("npm_config_offline", "true")
        .args(["--env", "npm_config_offline"]);
    // Registered environment reaches the server as named variables of `aibox exec`.
    for (key, value) in server["env"].as_object().into_iter().flatten() {
        exec.env(key, value.as_str().unwrap()).args(["--env", key]);
    }
    exec.arg("--").arg(command).args(&args);
    aibox_test_support::mcp_initialize(exec)
}

/// The real `claude mcp list`, `gemini mcp list` and `opencode mcp list`, run in the
/// container as the agent would (folder trusted), report every server connected, and the
/// real `codex mcp list` lists every server enabled (Codex lists its configuration without
/// starting servers; it reads the project's `.codex/config.toml` only in the folder aibox
/// seeds as trusted).
fn harnesses_connect(podman: &Podman, root: &Utf8Path, servers: &[&str]) {
    // The trust a user gives the folder on first start, given up front.
    let claude_state = serde_json::json!({
        "hasCompletedOnboarding": true,
        "projects": {"/workspace": {"hasTrustDialogAccepted": true}}
    });
    ok(aibox(podman, root).args([
        "exec",
        "--",
        "sh",
        "-c",
        // Where the image tells Claude to keep it: inside the mounted `~/.claude`.
        &format!("printf '%s' '{claude_state}' > \"$CLAUDE_CONFIG_DIR/.claude.json\""),
    ]));
    let quiet = [
        ("NO_COLOR", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
        ("UV_OFFLINE", "1"),
        ("npm_config_offline", "true"),
    ];
    for cli in ["claude", "gemini", "opencode", "codex"] {
        let mut cmd = aibox(podman, root);
        cmd.arg("exec");
        for (k, v) in quiet {
            cmd.env(k, v).args(["--env", k]);
        }
        cmd.args(["--", cli, "mcp", "list"]);
        if cli == "codex" {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        // OpenCode colours its list whatever NO_COLOR says.
        let text = strip_ansi_escapes::strip_str(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
        for server in servers {
            let up = match cli {
                // `memory: <command> - ✓ Connected`
                "claude" | "gemini" => text
                    .lines()
                    .find(|l| l.contains(&format!("{server}:")))
                    .is_some_and(|l| l.contains("Connected") && !l.contains("Disconnected")),
                // `●  ✓ memory connected`
                "opencode" => text.lines().any(|l| {
                    let words: Vec<&str> = l.split_whitespace().collect();
                    words.windows(3).any(|w| w == ["✓", server, "connected"])
                }),
                // Codex lists its configuration without starting servers.
                _ => codex_entries(&text)
                    .iter()
                    .any(|s| s["name"] == *server && s["enabled"] == true),
            };
            assert!(up, "{cli} mcp list: {server} is not connected:\n{text}");
        }
    }
}

/// The entries of `codex mcp list --json` (after any warning it prints first); none when
/// it printed no list.
fn codex_entries(text: &str) -> Vec<serde_json::Value> {
    text.find('[')
        .zip(text.rfind(']'))
        .and_then(|(start, end)| serde_json::from_str(text.get(start..=end)?).ok())
        .unwrap_or_default()
}

/// Every server the lock covers (and the one without dependencies) is registered and
/// answers `initialize` offline, on the locked mcp 1.x, the npx server as the bin of its
/// locked tree; the harnesses connect to them; the same server started as it ships fails
/// as the published ones did.
fn registered_servers_start(podman: &Podman, root: &Utf8Path) {
    let registered = [
        "memory",
        "processkit-event-log",
        "processkit-note-keeper",
        "processkit-plain-server",
        "time",
    ];
    let mcp: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(root.join(".mcp.json")).unwrap()).unwrap();
    let mut names: Vec<&str> = mcp["mcpServers"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    assert_eq!(names, registered, "{mcp:#}");
    for name in &registered[1..4] {
        let init = mcp_initialize(podman, root, name);
        assert_eq!(init["result"]["serverInfo"]["name"], *name, "{init}");
    }
    let command = mcp["mcpServers"]["memory"]["command"].as_str().unwrap();
    assert!(
        command.starts_with("/opt/aibox/mcp-npm/")
            && command.ends_with("/node_modules/.bin/mcp-server-memory"),
        "{mcp:#}"
    );
    let init = mcp_initialize(podman, root, "memory");
    assert_eq!(
        init["result"]["serverInfo"]["name"], "memory-server",
        "{init}"
    );
    // The uvx server runs its locked environment's executable, on the mcp 1.x of the day
    // its version was uploaded.
    let command = mcp["mcpServers"]["time"]["command"].as_str().unwrap();
    assert!(
        command.starts_with("/opt/aibox/mcp/") && command.ends_with("/bin/mcp-server-time"),
        "{mcp:#}"
    );
    let init = mcp_initialize(podman, root, "time");
    assert_eq!(init["result"]["serverInfo"]["name"], "mcp-time", "{init}");
    let version = init["result"]["serverInfo"]["version"].as_str().unwrap();
    assert!(version.starts_with("1."), "{init}");
    // The FastMCP servers run the locked mcp 1.x, as of the release's date.
    let init = mcp_initialize(podman, root, "processkit-note-keeper");
    let version = init["result"]["serverInfo"]["version"].as_str().unwrap();
    assert!(version.starts_with("1."), "{init}");
    harnesses_connect(podman, root, &registered);
    // What the lock prevents: the same server started as it ships (`uv run`, ranges
    // resolved now) gets mcp 2.x and dies at import, as every published server did.
    let shipped = aibox(podman, root)
        .args(["exec", "--", "uv", "run", "--quiet", "--script"])
        .arg("context/skills/processkit/note-keeper/mcp/server.py")
        .output()
        .unwrap();
    assert!(
        !shipped.status.success()
            && String::from_utf8_lossy(&shipped.stderr)
                .contains("No module named 'mcp.server.fastmcp'"),
        "the unlocked server should fail as the published ones do: {}",
        show(&shipped)
    );
    // And the uvx server as configured, resolved now.
    let configured = aibox(podman, root)
        .args(["exec", "--", "uvx", "--quiet", "mcp-server-time==2025.9.25"])
        .output()
        .unwrap();
    assert!(
        !configured.status.success()
            && String::from_utf8_lossy(&configured.stderr).contains("McpError"),
        "the uvx server unlocked should die at import: {}",
        show(&configured)
    );
}

/// A lock whose hash does not match what the index serves installs nothing: the build
/// fails at once, naming the servers and the package.
/// Claude's main file (`.claude.json`: personal servers, project trust, the account)
/// is kept in the mounted state folder, so a server added with `--scope local`, as aibox
/// advises for personal servers, survives `down` and `up`.
fn claude_state_survives_recreation(podman: &Podman, root: &Utf8Path) {
    ok(aibox(podman, root).args([
        "exec", "--", "claude", "mcp", "add", "--scope", "local", "keep-me", "--", "echo", "hi",
    ]));
    ok(aibox(podman, root).arg("down"));
    ok(aibox(podman, root).arg("up"));
    let out = ok(aibox(podman, root).args(["exec", "--", "claude", "mcp", "get", "keep-me"]));
    assert!(out.contains("keep-me"), "{out}");
    assert!(root.join(".aibox-home/.claude/.claude.json").is_file());
}

fn a_tampered_lock_fails_the_build(podman: &Podman, root: &Utf8Path) {
    let lock = fs_err::read_to_string(root.join("aibox.lock")).unwrap();
    let line = lock
        .lines()
        .find(|l| l.starts_with("\"pyyaml=="))
        .unwrap_or_else(|| panic!("no pyyaml pin in the lock:\n{lock}"));
    // Every listed file of that version (one per platform) gets a wrong hash.
    let (key, _) = line.split_once(" = ").unwrap();
    let tampered = format!("{key} = [\"sha256:{}\"]", "0".repeat(64));
    fs_err::write(root.join("aibox.lock"), lock.replace(line, &tampered)).unwrap();
    ok(aibox(podman, root).arg("apply"));
    let up = aibox(podman, root).arg("up").output().unwrap();
    let text = show(&up);
    assert_eq!(up.status.code(), Some(3), "{text}");
    for needle in [
        "Hash mismatch",
        "pyyaml==",
        "processkit-note-keeper",
        "Restore `aibox.lock` from git",
    ] {
        assert!(text.contains(needle), "{needle} missing: {text}");
    }
}

#[test]
fn four_harness_processkit_image_runs_the_pinned_tools() {
    let podman = Podman::ready();
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("aibox-e2e-tools-{}", std::process::id());
    let root = Utf8PathBuf::from_path_buf(tmp.path().join(&name)).unwrap();
    fs_err::create_dir_all(&root).unwrap();
    let source = aibox_test_support::mcp_pack();
    ok(aibox(&podman, &root).args([
        "init",
        &name,
        "--harness",
        "claude",
        "--harness",
        "codex",
        "--harness",
        "gemini",
        "--harness",
        "opencode",
        "--context-mode",
        "processkit",
        "--processkit-source",
        source.as_str(),
        "--processkit-version",
        "v0.9.0",
        "--base-image",
        BASE_IMAGE,
        "--yes",
    ]));
    let sha = aibox_test_support::tree_sha256(&source);
    ok(aibox(&podman, &root).args(["config", "set", "processkit.sha256", &sha]));
    ok(aibox(&podman, &root).args(["config", "set", "context.packages", "[\"minimal\"]"]));
    // A local release folder is first-party only when the owner trusts it.
    let trusted = serde_json::to_string(&[source.as_str()]).unwrap();
    ok(aibox(&podman, &root).args(["config", "set", "processkit.trusted_sources", &trusted]));
    // A user-chosen addon on top: npm and npx.
    ok(aibox(&podman, &root).args(["addon", "add", "npm"]));
    let toml = fs_err::read_to_string(root.join("aibox.toml")).unwrap();
    fs_err::write(root.join("aibox.toml"), toml + TEAM_SERVERS).unwrap();
    fs_err::write(root.join(".aibox-local.toml"), local_toml_with_host_ca()).unwrap();
    let out = aibox(&podman, &root).arg("apply").output().unwrap();
    assert!(out.status.success(), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`processkit-broken-deps` is not registered"),
        "{}",
        show(&out)
    );
    let status: serde_json::Value = serde_json::from_str(&ok(
        aibox(&podman, &root).args(["status", "--output", "json"])
    ))
    .unwrap();
    let cleanup = Cleanup::for_project(&podman, &status);
    // A user's project belongs to the user, not to root (these tests run as root): the
    // container user gets its IDs and can write the harness folders under `.aibox-home/`,
    // where Claude keeps its state.
    ok(Command::new("chown").args(["-R", "4242:4242", root.as_str()]));

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
        ("opencode", version("opencode")),
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
    registered_servers_start(&podman, &root);
    mcp_check(&podman, &root);
    servers_leave_the_skills_as_installed(&podman, &root);
    claude_state_survives_recreation(&podman, &root);
    a_tampered_lock_fails_the_build(&podman, &root);
    ok(aibox(&podman, &root).arg("down"));
    drop(cleanup);
}

/// Every server ran by now (started by hand, by the harness CLIs and by `mcp check`),
/// importing the release's `_lib/processkit`: Python kept its bytecode outside the
/// workspace, so no `__pycache__` appeared in an installed skill and `doctor
/// --integrity` still vouches for every file.
fn servers_leave_the_skills_as_installed(podman: &Podman, root: &Utf8Path) {
    fn pycache(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in fs_err::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                if entry.file_name() == "__pycache__" {
                    out.push(entry.path());
                } else {
                    pycache(&entry.path(), out);
                }
            }
        }
    }
    let mut found = Vec::new();
    pycache(root.join("context").as_std_path(), &mut found);
    assert!(found.is_empty(), "bytecode in the workspace: {found:?}");
    ok(aibox(podman, root).args(["doctor", "--integrity"]));
}

/// `aibox mcp check` on the running container: the pack's server starts for all four
/// harnesses; a team server that dies at start fails the check (exit 1) with its stderr,
/// and `doctor` reports it as an error.
fn mcp_check(podman: &Podman, root: &Utf8Path) {
    let text = ok(aibox(podman, root).args(["mcp", "check", "-o", "json"]));
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let servers = report["servers"].as_array().unwrap();
    let mut names: Vec<&str> = servers
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "memory",
            "processkit-event-log",
            "processkit-note-keeper",
            "processkit-plain-server",
            "time"
        ],
        "{report}"
    );
    for server in servers {
        assert_eq!(server["status"], "ok", "{report}");
        assert_eq!(
            server["harnesses"],
            serde_json::json!(["claude", "codex", "gemini", "opencode"]),
            "one start for every harness that registers it: {report}"
        );
        let probe = &server["probe"];
        let own_name = match server["name"].as_str() {
            Some("memory") => serde_json::json!("memory-server"),
            Some("time") => serde_json::json!("mcp-time"),
            _ => server["name"].clone(),
        };
        assert_eq!(probe["server_name"], own_name, "{report}");
        assert_eq!(probe["protocol_version"], "2025-06-18", "{report}");
        let init_ms = probe["initialize_ms"].as_u64().unwrap_or(u64::MAX);
        assert!(init_ms < 60_000, "within the default deadline: {report}");
    }
    let note = &servers
        .iter()
        .find(|s| s["name"] == "processkit-note-keeper")
        .unwrap()["probe"];
    assert_eq!(
        note["tools"],
        serde_json::json!(["list_notes", "note_front_matter"])
    );
    assert!(
        note["server_version"].as_str().unwrap().starts_with("1."),
        "the locked mcp 1.x: {report}"
    );
    let human = ok(aibox(podman, root).args(["mcp", "check"]));
    assert!(human.contains("ok   processkit-note-keeper"), "{human}");
    assert!(human.contains("(2 tools, initialize "), "{human}");

    a_dying_server_is_reported(podman, root);
}

/// A team server that dies at start, as servers with missing dependencies do: `mcp check`
/// exits 1 with its stderr and where it is defined; `doctor` reports it as an error.
fn a_dying_server_is_reported(podman: &Podman, root: &Utf8Path) {
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
        stdout.contains("ok   processkit-note-keeper"),
        "{}",
        show(&out)
    );
    assert!(
        stdout.contains("FAIL broken")
            && stdout.contains(
                "exited with code 1 before answering initialize [claude, codex, gemini, opencode]"
            ),
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
    let report = failed_check(podman, root, "broken");
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

    a_silent_death_is_probed_again(podman, root);
}

/// `mcp check NAME -o json` of a failing server: exit 1, and its report.
fn failed_check(podman: &Podman, root: &Utf8Path, name: &str) -> serde_json::Value {
    let out = aibox(podman, root)
        .args(["mcp", "check", name, "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A server that dies without a word is probed a second time (the engine's exec client
/// may drop the last stderr of a process that exits at once): this one is silent on its
/// first start and says why on its second, and `mcp check` shows the second answer.
fn a_silent_death_is_probed_again(podman: &Podman, root: &Utf8Path) {
    let mut toml = fs_err::read_to_string(root.join("aibox.toml")).unwrap();
    toml.push_str(
        r#"
[[ai.mcp.servers]]
name = "silent-once"
command = "python3"
args = ["-c", "import os, sys; p = '/tmp/aibox-e2e-silent-once'; again = os.path.exists(p); open(p, 'w').close(); again and sys.stderr.write('second try\\n'); sys.exit(1)"]
"#,
    );
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
    ok(aibox(podman, root).arg("apply"));
    let report = failed_check(podman, root, "silent-once");
    let probe = &report["servers"][0]["probe"];
    assert_eq!(probe["failure"], "exited", "{report}");
    assert_eq!(
        probe["stderr_tail"],
        serde_json::json!(["second try"]),
        "{report}"
    );
}
