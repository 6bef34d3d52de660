//! processkit's hooks and pre-authorisation through a real apply of a release carrying
//! the real `skill-gate` files (v0.28.3 and v1.0.0-alpha.1): the hook commands, run the
//! way each harness runs them (a shell, the harness's working folder and variables, the
//! release's own sample payloads on stdin), behave as processkit documents; a dropped
//! hook and a dropped rule are pruned, the user's own entries stay, and harness-only mode
//! removes everything of processkit's.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may fail loudly

use crate::common;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use aibox_engine::{ApplyOptions, apply};
use aibox_test_support::http::Server;
use aibox_test_support::http::release::SyntheticRelease;
use camino::{Utf8Path, Utf8PathBuf};

const GATE: &str = "context/skills/processkit/skill-gate";
const HARNESS_FILES: [&str; 4] = [
    ".claude/settings.json",
    ".codex/hooks.json",
    ".cursor/hooks.json",
    ".mcp.json",
];

/// A small release whose `skill-gate` is processkit's own (scripts, payloads, contract,
/// server), with the given pre-authorisation spec; `guard` false drops the guard script.
fn release(version: &str, preauth: &[u8], guard: bool) -> SyntheticRelease {
    let mut release = SyntheticRelease::minimal(version);
    let dir = aibox_test_support::processkit_skill_gate().join("skill-gate");
    for rel in common::walk(&dir) {
        if !guard && rel == "scripts/check_route_task_called.py" {
            continue;
        }
        let bytes = if rel == "assets/preauth.json" {
            preauth.to_vec()
        } else {
            fs_err::read(dir.join(&rel)).unwrap()
        };
        release
            .files
            .insert(format!("{GATE}/{rel}"), (bytes, 0o644));
    }
    release.remanifest();
    release.restamp();
    release
}

fn real_preauth(version: &str) -> Vec<u8> {
    let dir = aibox_test_support::processkit_skill_gate();
    fs_err::read(if version == "v0.28.3" {
        dir.join("preauth-v0.28.3.json")
    } else {
        dir.join("skill-gate/assets/preauth.json")
    })
    .unwrap()
}

fn write_config(root: &Utf8Path, server: &Server, version: &str, mode: &str) {
    let toml = format!(
        "[container]\nname = \"pk\"\n\n[context]\nmode = \"{mode}\"\npackages = [\"minimal\"]\n\n\
         [processkit]\nsource = \"{}\"\nversion = \"{version}\"\ntrusted_sources = [\"{}\"]\n\n\
         [ai]\nharnesses = [\"claude\", \"codex\", \"cursor\", \"gemini\"]\n",
        server.url("/org/processkit.git"),
        server.url("/org/processkit")
    );
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
}

fn options(cache: &Utf8Path) -> ApplyOptions {
    let mut o = ApplyOptions::default();
    o.plan.cache_dir = Some(cache.to_owned());
    o
}

fn json(root: &Utf8Path, file: &str) -> serde_json::Value {
    serde_json::from_str(&fs_err::read_to_string(root.join(file)).unwrap()).unwrap()
}

/// Runs a hook command as the harnesses do: `sh -c` (Codex: a login shell) in `cwd`,
/// with the harness's variables and `payload` on stdin.
fn run_hook(
    command: &str,
    login: bool,
    cwd: &Utf8Path,
    env: &[(&str, &str)],
    payload: &str,
) -> Output {
    let mut child = Command::new("sh")
        .arg(if login { "-lc" } else { "-c" })
        .arg(command)
        .current_dir(cwd)
        // Only the variables this harness sets (the test runner may run inside one).
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("CURSOR_PROJECT_DIR")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// One of the release's sample payloads, as installed, with `cwd` (and a relative
/// `file_path` made absolute when `absolute`) as the harness would send it.
fn payload(root: &Utf8Path, name: &str, cwd: &Utf8Path, absolute: bool) -> String {
    let text = fs_err::read_to_string(root.join(GATE).join("scripts/fixtures").join(name)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["cwd"] = cwd.as_str().into();
    if absolute && let Some(p) = v["tool_input"]["file_path"].as_str() {
        v["tool_input"]["file_path"] = root.join(p).as_str().into();
    }
    v.to_string()
}

fn claude_command(root: &Utf8Path, event: &str) -> String {
    json(root, ".claude/settings.json")["hooks"][event][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_release_hooks_run_from_any_folder_and_the_guard_waits_for_the_acknowledgement() {
    let server = Server::start().unwrap();
    common::publish(&server, &release("v0.28.3", &real_preauth("v0.28.3"), true));
    let (_t, root) = common::empty_project();
    let (_c, cache) = common::empty_project();
    write_config(&root, &server, "v0.28.3", "processkit");
    apply(&root, &options(&cache)).unwrap();

    // The vendored Claude settings schema accepts the written file; the only rule merged
    // is the one for the server this project registers (the spec names 26).
    let schema = aibox_test_support::schemas_dir().join("claude-code/claude-code-settings.json");
    let settings = json(&root, ".claude/settings.json");
    aibox_test_support::schema::validate_json_against(&schema, &settings).unwrap();
    assert_eq!(
        settings["permissions"]["allow"],
        serde_json::json!(["mcp__processkit-skill-gate__*"])
    );
    assert!(!apply(&root, &options(&cache)).unwrap().changed(), "no-op");
    // `mcp list` shows what that rule allows, and where it comes from (QA: it said
    // "(ask)" for a server whose every tool Claude calls without asking).
    let mut plan = options(&cache).plan;
    plan.offline = true;
    let list =
        aibox_engine::mcp_list_resolved(&aibox_engine::resolve(&root, &plan).unwrap()).unwrap();
    let gate = |harness: aibox_config::Harness| {
        list.servers
            .iter()
            .find(|s| s.name == "processkit-skill-gate" && s.harness == harness)
            .unwrap()
    };
    let claude = gate(aibox_config::Harness::Claude);
    assert_eq!(claude.allowed_tools, ["*"], "{claude:?}");
    assert!(
        claude
            .notes
            .iter()
            .any(|n| n.contains("pre-authorisation (`mcp__processkit-skill-gate__*`)")),
        "{claude:?}"
    );
    // Only Claude's rules carry it.
    let codex = gate(aibox_config::Harness::Codex);
    assert!(codex.allowed_tools.is_empty(), "{codex:?}");

    let sub = root.join("src/deep");
    fs_err::create_dir_all(&sub).unwrap();
    let root_s = root.as_str();
    let guard = claude_command(&root, "PreToolUse");
    let claude = [("CLAUDE_PROJECT_DIR", root_s)];
    let cursor_guard = json(&root, ".cursor/hooks.json")["hooks"]["preToolUse"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    let cursor = [("CURSOR_PROJECT_DIR", root_s)];
    // Claude from a subfolder (absolute path, as Claude sends it) and from the root (the
    // payload's relative path); Cursor from the root.
    let writes = || {
        [
            run_hook(
                &guard,
                false,
                &sub,
                &claude,
                &payload(&root, "claude-code-pretooluse-sample.json", &sub, true),
            ),
            run_hook(
                &guard,
                false,
                &root,
                &claude,
                &payload(&root, "claude-code-pre-tool-use.json", &root, false),
            ),
            run_hook(
                &cursor_guard,
                false,
                &root,
                &cursor,
                &payload(&root, "claude-code-pretooluse-sample.json", &root, false),
            ),
        ]
    };
    for out in writes() {
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("acknowledge_contract"),
            "{out:?}"
        );
    }
    // A write outside `context/` is never held.
    let mut outside: serde_json::Value = serde_json::from_str(&payload(
        &root,
        "claude-code-pretooluse-sample.json",
        &sub,
        true,
    ))
    .unwrap();
    outside["tool_input"]["file_path"] = sub.join("notes.md").as_str().into();
    let out = run_hook(&guard, false, &sub, &claude, &outside.to_string());
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    let contract = session_start_injects_the_contract(&root, &sub);

    // The acknowledgement, as the skill-gate server writes it (its SERVER.md): the
    // contract's digest and the time. Afterwards every write passes.
    let marker = root.join("context/.state/skill-gate/session-4242.ack");
    fs_err::create_dir_all(marker.parent().unwrap()).unwrap();
    let now = aibox_provenance::time::now_rfc3339().replace('Z', "+00:00");
    let ack = serde_json::json!({
        "contract_hash": aibox_test_support::http::release::sha256_hex(contract.as_bytes()),
        "acknowledged_at": now,
    });
    fs_err::write(&marker, format!("{ack:#}\n")).unwrap();
    for out in writes() {
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
}

/// Session start: Claude (from a subfolder) gets the contract as JSON context, Codex (a
/// login shell in a subfolder of a git checkout) and Cursor as plain text. Returns the
/// contract.
fn session_start_injects_the_contract(root: &Utf8Path, sub: &Utf8Path) -> String {
    let contract =
        fs_err::read_to_string(root.join(GATE).join("assets/compliance-contract.md")).unwrap();
    let first = contract.lines().next().unwrap();
    let start = payload(root, "claude-code-session-start.json", sub, false);
    let out = run_hook(
        &claude_command(root, "SessionStart"),
        false,
        sub,
        &[
            ("CLAUDE_PROJECT_DIR", root.as_str()),
            ("CLAUDE_CODE_ENTRYPOINT", "cli"),
        ],
        &start,
    );
    assert!(out.status.success(), "{out:?}");
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        answer["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .starts_with(first)
    );
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(root)
            .status()
            .unwrap()
            .success()
    );
    let codex = json(root, ".codex/hooks.json");
    let codex_start = codex["hooks"]["SessionStart"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    let out = run_hook(codex_start, true, sub, &[], &start);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(first),
        "{out:?}"
    );
    // Cursor runs project hooks from the project root and names it in a variable; either
    // is enough.
    let cursor = json(root, ".cursor/hooks.json");
    let cursor_start = cursor["hooks"]["sessionStart"][0]["command"]
        .as_str()
        .unwrap();
    for env in [&[("CURSOR_PROJECT_DIR", root.as_str())][..], &[]] {
        let out = run_hook(cursor_start, false, root, env, &start);
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).starts_with(first));
    }
    contract
}

const USER_SETTINGS: &str = "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      { \"matcher\": \"Bash\", \"hooks\": [ { \"type\": \"command\", \"command\": \"./lint.sh\" } ] }\n    ]\n  },\n  \"permissions\": { \"allow\": [ \"Bash(cargo test:*)\" ] }\n}\n";
const USER_CODEX: &str = "{\n  \"hooks\": {\n    \"Stop\": [\n      { \"hooks\": [ { \"type\": \"command\", \"command\": \"./notify.sh\" } ] }\n    ]\n  }\n}\n";

#[test]
fn upgrades_prune_what_the_release_drops_and_harness_only_removes_the_rest() {
    let server = Server::start().unwrap();
    common::publish(&server, &release("v0.28.3", &real_preauth("v0.28.3"), true));
    common::publish(
        &server,
        &release("v1.0.0-alpha.1", &real_preauth("v1.0.0-alpha.1"), true),
    );
    // A next release without the guard, whose spec no longer names skill-gate.
    let mut spec: serde_json::Value =
        serde_json::from_slice(&real_preauth("v1.0.0-alpha.1")).unwrap();
    spec["permissions"]["allow"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r != "mcp__processkit-skill-gate__*");
    common::publish(
        &server,
        &release("v1.0.1", spec.to_string().as_bytes(), false),
    );

    let (_t, root) = common::empty_project();
    let (_c, cache) = common::empty_project();
    fs_err::create_dir_all(root.join(".claude")).unwrap();
    fs_err::create_dir_all(root.join(".codex")).unwrap();
    fs_err::write(root.join(".claude/settings.json"), USER_SETTINGS).unwrap();
    fs_err::write(root.join(".codex/hooks.json"), USER_CODEX).unwrap();
    let user_hook = "{ \"matcher\": \"Bash\", \"hooks\": [ { \"type\": \"command\", \"command\": \"./lint.sh\" } ] }";
    let user_stop = "{ \"hooks\": [ { \"type\": \"command\", \"command\": \"./notify.sh\" } ] }";
    let read = |f: &str| fs_err::read_to_string(root.join(f)).unwrap();

    for version in ["v0.28.3", "v1.0.0-alpha.1"] {
        write_config(&root, &server, version, "processkit");
        apply(&root, &options(&cache)).unwrap();
        assert!(read(".claude/settings.json").contains(user_hook));
        assert!(read(".codex/hooks.json").contains(user_stop));
        let settings = json(&root, ".claude/settings.json");
        assert_eq!(settings["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        assert!(
            settings["permissions"]["allow"]
                .to_string()
                .contains("skill-gate")
        );
    }

    write_config(&root, &server, "v1.0.1", "processkit");
    apply(&root, &options(&cache)).unwrap();
    let settings = json(&root, ".claude/settings.json");
    assert_eq!(settings["hooks"]["PreToolUse"].as_array().unwrap().len(), 1);
    assert!(read(".claude/settings.json").contains(user_hook));
    assert!(
        settings["hooks"]["SessionStart"].is_array(),
        "the contract stays"
    );
    let allow = settings["permissions"]["allow"].to_string();
    assert!(
        !allow.contains("skill-gate") && allow.contains("Bash(cargo test:*)"),
        "{allow}"
    );
    assert!(read(".cursor/hooks.json").contains("sessionStart"));
    assert!(!read(".cursor/hooks.json").contains("preToolUse"));

    write_config(&root, &server, "v1.0.1", "harness-only");
    apply(&root, &options(&cache)).unwrap();
    assert_eq!(read(".codex/hooks.json"), USER_CODEX);
    assert!(read(".claude/settings.json").contains(user_hook));
    // The Cursor file held only processkit's hooks: aibox removes it.
    assert!(!root.join(".cursor/hooks.json").exists());
    for file in HARNESS_FILES.iter().chain(&[".gemini/settings.json"]) {
        let path: Utf8PathBuf = root.join(file);
        if path.is_file() {
            let text = fs_err::read_to_string(&path).unwrap();
            assert!(!text.contains("processkit"), "{file}: {text}");
        }
    }
}

/// A release whose spec aibox cannot read is refused before anything is written, naming
/// the file; the project is left as it was.
#[test]
fn an_unusable_preauth_spec_stops_the_apply_and_names_the_file() {
    let server = Server::start().unwrap();
    common::publish(
        &server,
        &release(
            "v0.28.3",
            br#"{"version": 2, "permissions": {"allow": []}}"#,
            true,
        ),
    );
    let (_t, root) = common::empty_project();
    let (_c, cache) = common::empty_project();
    write_config(&root, &server, "v0.28.3", "processkit");
    let err = apply(&root, &options(&cache)).unwrap_err();
    let code = miette::Diagnostic::code(&err).map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("aibox::mcp::preauth"), "{err:?}");
    assert!(
        err.to_string().contains("skill-gate/assets/preauth.json"),
        "{err}"
    );
    assert!(!root.join(".claude").exists() && !root.join("context").exists());
}
