//! processkit's hooks and pre-authorisation (the real `skill-gate` files of v0.28.3 and
//! v1.0.0-alpha.1): each hook file in its harness's own shape (Claude's vendored schema,
//! the pinned Codex's own hook listing), rules only for registered processkit servers the
//! team's policy leaves open, user entries kept byte for byte, dropped hooks pruned, and
//! everything of processkit's removed once the wiring is empty (harness-only mode).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::process::{Command, Stdio};

use aibox_config::{Harness, PermissionMode, Permissions};
use aibox_mcp_registration::hooks::{CONTRACT_SCRIPT, GUARD_SCRIPT};
use aibox_mcp_registration::{
    McpError, Origin, Preauth, ProcesskitWiring, Registration, ServerSpec,
};
use aibox_test_support::schema::validate_json_against;
use common::{Files, apply_wired as run, stdio};

const HARNESSES: [Harness; 4] = [
    Harness::Claude,
    Harness::Codex,
    Harness::Cursor,
    Harness::Gemini,
];

fn preauth(name: &str) -> Preauth {
    let dir = aibox_test_support::processkit_skill_gate();
    let path = if name == "v0.28.3" {
        dir.join("preauth-v0.28.3.json")
    } else {
        dir.join("skill-gate/assets/preauth.json")
    };
    Preauth::parse(&fs_err::read_to_string(path).unwrap()).unwrap()
}

fn wiring(scripts: &[&str], preauth: Option<Preauth>) -> ProcesskitWiring {
    ProcesskitWiring {
        scripts: scripts.iter().map(|s| (*s).to_owned()).collect(),
        preauth,
    }
}

/// Two processkit servers the release's preauth names, one it does not, and a team server.
fn servers() -> Vec<ServerSpec> {
    let pk = |name: &str| {
        let script = format!("context/skills/processkit/{name}/mcp/server.py");
        stdio(
            &format!("processkit-{name}"),
            Origin::Processkit,
            "uv",
            &["run", &script],
            &[],
        )
    };
    vec![
        pk("skill-gate"),
        pk("workitem-management"),
        pk("not-in-preauth"),
        stdio("docs", Origin::Team, "true", &[], &[]),
    ]
}

/// Parses JSON written by aibox (or JSONC written by a user).
fn json(text: &str) -> serde_json::Value {
    let opts = aibox_config::jsonc::parse_options();
    jsonc_parser::parse_to_serde_value(text, &opts).unwrap()
}

fn full() -> ProcesskitWiring {
    wiring(
        &[CONTRACT_SCRIPT, GUARD_SCRIPT],
        Some(preauth("v1.0.0-alpha.1")),
    )
}

/// Every harness, the default permissions and the whole v1.0.0-alpha.1 wiring.
fn run_full(files: &mut Files) -> Result<Registration, McpError> {
    run(
        files,
        &servers(),
        &HARNESSES,
        &Permissions::default(),
        &full(),
    )
}

#[test]
fn hooks_and_preauth_reach_each_harness_in_its_own_shape() {
    let mut files = Files::new();
    let reg = run_full(&mut files).unwrap();

    // Claude: the vendored settings schema accepts the file; hooks as processkit's README
    // wires them, anchored at the project root.
    let schema = aibox_test_support::schemas_dir().join("claude-code/claude-code-settings.json");
    let settings = json(&files[".claude/settings.json"]);
    validate_json_against(&schema, &settings).unwrap();
    let hooks = &settings["hooks"];
    let cmd = |event: &str| hooks[event][0]["hooks"][0]["command"].as_str().unwrap();
    assert_eq!(
        cmd("SessionStart"),
        format!("python3 \"$CLAUDE_PROJECT_DIR\"/{CONTRACT_SCRIPT}")
    );
    assert_eq!(cmd("UserPromptSubmit"), cmd("SessionStart"));
    assert_eq!(
        cmd("PreToolUse"),
        format!("python3 \"$CLAUDE_PROJECT_DIR\"/{GUARD_SCRIPT}")
    );
    assert!(
        hooks["PreToolUse"][0]["matcher"]
            .as_str()
            .unwrap()
            .starts_with("Write|Edit|MultiEdit|")
    );
    // Pre-authorisation: only servers that are registered; nothing for the team server.
    let allow: Vec<&str> = settings["permissions"]["allow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        allow,
        [
            "mcp__processkit-skill-gate__*",
            "mcp__processkit-workitem-management__*"
        ]
    );
    // A schema violation is caught (the validator is live): a marker key in a matcher.
    let mut bad = settings.clone();
    bad["hooks"]["PreToolUse"][0]["_processkit_managed"] = serde_json::json!(true);
    assert!(validate_json_against(&schema, &bad).is_err());

    // Codex: only `hooks` at the top (its parser refuses other keys), its event names,
    // no guard (Codex edits through `apply_patch`).
    let codex = json(&files[".codex/hooks.json"]);
    assert_eq!(
        codex.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["hooks"]
    );
    let events: Vec<&String> = codex["hooks"].as_object().unwrap().keys().collect();
    assert_eq!(events, ["SessionStart", "UserPromptSubmit"]);
    assert_eq!(
        codex["hooks"]["SessionStart"][0]["hooks"][0],
        serde_json::json!({"type": "command", "command": format!(
            "python3 \"$(git rev-parse --show-toplevel 2>/dev/null || pwd)\"/{CONTRACT_SCRIPT}"
        )})
    );

    // Cursor: format version 1, camelCase events, flat entries.
    let cursor = json(&files[".cursor/hooks.json"]);
    assert_eq!(cursor["version"], 1);
    assert_eq!(
        cursor["hooks"]["preToolUse"][0],
        serde_json::json!({
            "command": format!("python3 \"${{CURSOR_PROJECT_DIR:-.}}\"/{GUARD_SCRIPT}"),
            "matcher": "Write"
        })
    );
    assert!(cursor["hooks"]["sessionStart"][0]["command"].is_string());

    // Gemini CLI has no hooks aibox writes; its settings hold servers only.
    assert!(json(&files[".gemini/settings.json"]).get("hooks").is_none());
    assert!(reg.notices.iter().all(|n| !n.contains("pre-authorisation")));

    // A second run changes nothing.
    let again = run_full(&mut files).unwrap();
    assert!(again.files.iter().all(|f| !f.changed), "{:?}", again.files);
}

#[test]
fn the_team_policy_wins_and_only_mcp_rules_of_processkit_servers_are_merged() {
    let mut files = Files::new();
    let permissions = Permissions {
        default_mode: PermissionMode::Ask,
        allow_patterns: Vec::new(),
        deny_patterns: vec!["delete_*".into()],
    };
    let mut spec = preauth("v0.28.3");
    spec.allow.push("Bash(rm -rf:*)".into());
    spec.allow.push("mcp__docs__*".into());
    let reg = run(
        &mut files,
        &servers(),
        &[Harness::Claude],
        &permissions,
        &wiring(&[], Some(spec)),
    )
    .unwrap();
    let settings = json(&files[".claude/settings.json"]);
    let text = settings["permissions"]["allow"].to_string();
    assert!(!text.contains("processkit-skill-gate__*"), "{text}");
    assert!(!text.contains("Bash"), "{text}");
    assert!(!text.contains("mcp__docs__*"), "{text}");
    assert!(
        reg.notices
            .iter()
            .any(|n| n.contains("`processkit-skill-gate`") && n.contains("[ai.mcp.permissions]")),
        "{:?}",
        reg.notices
    );
    assert!(
        reg.notices.iter().any(|n| n.contains("`Bash(rm -rf:*)`")),
        "{:?}",
        reg.notices
    );
    // No script shipped: no hook anywhere.
    assert!(settings.get("hooks").is_none());
}

const USER_CLAUDE: &str = r#"{
  // my own hooks
  "hooks": {
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [ { "type": "command", "command": "./scripts/lint-bash.sh" } ] }
    ]
  },
  "permissions": { "allow": [ "Bash(cargo test:*)" ] }
}
"#;

const USER_CODEX: &str = r#"{
  "hooks": {
    "SessionStart": [
      {
        "matcher": "startup",
        "hooks": [{ "type": "command", "command": "echo hello", "timeout": 5 }]
      }
    ]
  }
}
"#;

const USER_CURSOR: &str = "{\n  \"version\": 1,\n  \"hooks\": {\n    \"afterFileEdit\": [{ \"command\": \"./fmt.sh\" }],\n    \"preToolUse\": [{ \"command\": \"./audit.sh\", \"matcher\": \"Shell\" }]\n  }\n}\n";

#[test]
fn user_entries_survive_dropped_hooks_are_pruned_and_an_empty_wiring_removes_all() {
    let mut files = Files::new();
    files.insert(".claude/settings.json".into(), USER_CLAUDE.into());
    files.insert(".codex/hooks.json".into(), USER_CODEX.into());
    files.insert(".cursor/hooks.json".into(), USER_CURSOR.into());
    let perms = Permissions::default();
    run(&mut files, &servers(), &HARNESSES, &perms, &full()).unwrap();
    let claude = &files[".claude/settings.json"];
    assert!(claude.contains("// my own hooks"), "{claude}");
    assert!(
        claude.contains(
            r#"{ "matcher": "Bash", "hooks": [ { "type": "command", "command": "./scripts/lint-bash.sh" } ] }"#
        ),
        "{claude}"
    );
    assert!(claude.contains(GUARD_SCRIPT));
    assert!(
        files[".codex/hooks.json"]
            .contains(r#"[{ "type": "command", "command": "echo hello", "timeout": 5 }]"#)
    );
    assert!(files[".cursor/hooks.json"].contains(r#"[{ "command": "./fmt.sh" }]"#));

    // The next release drops the guard and the skill-gate rule: both are pruned, the
    // user's entries stay.
    let mut spec = preauth("v1.0.0-alpha.1");
    spec.allow.retain(|r| r != "mcp__processkit-skill-gate__*");
    run(
        &mut files,
        &servers(),
        &HARNESSES,
        &perms,
        &wiring(&[CONTRACT_SCRIPT], Some(spec)),
    )
    .unwrap();
    let claude = json(&files[".claude/settings.json"]);
    assert_eq!(claude["hooks"]["PreToolUse"].as_array().unwrap().len(), 1);
    assert_eq!(claude["hooks"]["PreToolUse"][0]["matcher"], "Bash");
    let allow = claude["permissions"]["allow"].to_string();
    assert!(!allow.contains("skill-gate"), "{allow}");
    assert!(allow.contains("Bash(cargo test:*)") && allow.contains("workitem-management"));
    let cursor = json(&files[".cursor/hooks.json"]);
    assert_eq!(cursor["hooks"]["preToolUse"][0]["command"], "./audit.sh");
    assert_eq!(cursor["hooks"]["preToolUse"].as_array().unwrap().len(), 1);

    // harness-only (no processkit servers, empty wiring): the hook files are the user's
    // again, byte for byte, and nothing of processkit's is left anywhere.
    let team: Vec<ServerSpec> = servers()
        .into_iter()
        .filter(|s| s.origin == Origin::Team)
        .collect();
    run(
        &mut files,
        &team,
        &HARNESSES,
        &perms,
        &ProcesskitWiring::default(),
    )
    .unwrap();
    assert_eq!(files[".codex/hooks.json"], USER_CODEX);
    // The user's entries are byte for byte what they wrote; only the line break the
    // appended entry brought before the one-line array's `]` stays.
    let cursor = &files[".cursor/hooks.json"];
    assert_eq!(json(cursor), json(USER_CURSOR));
    for entry in [
        r#"[{ "command": "./fmt.sh" }]"#,
        r#"[{ "command": "./audit.sh", "matcher": "Shell" }"#,
    ] {
        assert!(cursor.contains(entry), "{cursor}");
    }
    for (path, text) in &files {
        if !path.starts_with(".aibox/") {
            assert!(!text.contains("processkit"), "{path}: {text}");
        }
    }
    assert!(files[".claude/settings.json"].contains("./scripts/lint-bash.sh"));
}

#[test]
fn disabling_a_harness_prunes_its_hooks() {
    let mut files = Files::new();
    files.insert(".cursor/hooks.json".into(), USER_CURSOR.into());
    run_full(&mut files).unwrap();
    assert!(files[".cursor/hooks.json"].contains(GUARD_SCRIPT));
    let without_cursor = [Harness::Claude, Harness::Codex, Harness::Gemini];
    run(
        &mut files,
        &servers(),
        &without_cursor,
        &Permissions::default(),
        &full(),
    )
    .unwrap();
    let cursor = &files[".cursor/hooks.json"];
    assert!(!cursor.contains("skill-gate"), "{cursor}");
    assert_eq!(json(cursor), json(USER_CURSOR));
    assert!(files[".claude/settings.json"].contains(GUARD_SCRIPT));
}

#[test]
fn without_a_ledger_only_processkit_hooks_count_as_owned() {
    // A fresh clone: the committed files hold processkit's hooks, the ledger is gone.
    let mut files = Files::new();
    files.insert(".codex/hooks.json".into(), USER_CODEX.into());
    run_full(&mut files).unwrap();
    files.remove(aibox_mcp_registration::LEDGER_PATH);
    run(
        &mut files,
        &servers(),
        &HARNESSES,
        &Permissions::default(),
        &ProcesskitWiring::default(),
    )
    .unwrap();
    assert_eq!(files[".codex/hooks.json"], USER_CODEX);
    assert!(!files[".claude/settings.json"].contains("skill-gate/scripts"));
}

/// The error a registration stops with when `path` holds `text`.
fn error_for(path: &str, text: &str) -> McpError {
    let mut files = Files::new();
    files.insert(path.into(), text.into());
    run_full(&mut files).unwrap_err()
}

#[test]
fn hook_files_of_the_wrong_shape_or_not_json_are_errors_naming_the_file() {
    let shape = |path: &str, text: &str, at: &str| {
        let err = error_for(path, text);
        assert!(
            matches!(&err, McpError::Shape { path: p, key, .. } if p == path && key == at),
            "{err:?}"
        );
    };
    shape(
        ".codex/hooks.json",
        r#"{"hooks": {"SessionStart": {"command": "x"}}}"#,
        "hooks.SessionStart",
    );
    shape(".claude/settings.json", r#"{"hooks": []}"#, "hooks");
    let err = error_for(
        ".cursor/hooks.json",
        "{\n  \"version\": 1,\n  \"hooks\": {\n",
    );
    assert!(
        matches!(&err, McpError::Parse(p) if p.to_string().contains(".cursor/hooks.json")),
        "{err:?}"
    );
}

/// The pinned Codex itself lists the hooks of `.codex/hooks.json`, asked from a
/// subfolder of the project through its app server (`hooks/list`), with no warning; it
/// runs them only once the user trusts them (`trustStatus` "untrusted").
#[test]
fn the_pinned_codex_lists_the_processkit_hooks_from_a_subfolder() {
    let mut files = Files::new();
    run(
        &mut files,
        &servers(),
        &[Harness::Codex],
        &Permissions::default(),
        &full(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for (path, text) in &files {
        let path = root.join(path);
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(path, text).unwrap();
    }
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(git.success());
    let sub = root.join("src/deep");
    fs_err::create_dir_all(&sub).unwrap();
    // Codex reads a project's `.codex/` only once the project is trusted; aibox seeds
    // that trust for `/workspace` in the container-scoped config, here for `root`.
    let home = root.join(".aibox-home/.codex");
    fs_err::create_dir_all(&home).unwrap();
    fs_err::write(
        home.join("config.toml"),
        format!(
            "[projects.{:?}]\ntrust_level = \"trusted\"\n",
            root.to_str().unwrap()
        ),
    )
    .unwrap();
    let requests = [
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"clientInfo": {"name": "aibox-test", "version": "1"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "initialized"}),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "hooks/list",
            "params": {"cwds": [sub.to_str().unwrap()]}}),
    ];
    let mut child = Command::new(aibox_test_support::harness_cli("codex"))
        .arg("app-server")
        .current_dir(&sub)
        .env("HOME", root.join(".aibox-home"))
        .env("CODEX_HOME", &home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for r in &requests {
        use std::io::Write as _;
        writeln!(stdin, "{r}").unwrap();
    }
    let answer = read_answer(child.stdout.take().unwrap(), 2);
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let entry = &answer["result"]["data"][0];
    assert_eq!(entry["warnings"], serde_json::json!([]), "{answer}");
    assert_eq!(entry["errors"], serde_json::json!([]), "{answer}");
    let hooks = entry["hooks"].as_array().unwrap();
    let listed: Vec<(&str, &str)> = hooks
        .iter()
        .map(|h| {
            (
                h["eventName"].as_str().unwrap(),
                h["command"].as_str().unwrap(),
            )
        })
        .collect();
    let command = format!(
        "python3 \"$(git rev-parse --show-toplevel 2>/dev/null || pwd)\"/{CONTRACT_SCRIPT}"
    );
    assert_eq!(
        listed,
        [
            ("sessionStart", command.as_str()),
            ("userPromptSubmit", command.as_str())
        ],
        "{answer}"
    );
    assert!(
        hooks
            .iter()
            .all(|h| h["source"] == "project" && h["trustStatus"] == "untrusted"),
        "{answer}"
    );
}

/// Reads JSON-RPC lines until the answer with `id` (a deadline guards a silent server).
fn read_answer(stdout: impl std::io::Read + Send + 'static, id: u64) -> serde_json::Value {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                && v["id"] == id
            {
                let _ = tx.send(v);
                break;
            }
        }
    });
    rx.recv_timeout(std::time::Duration::from_mins(1))
        .expect("codex app-server did not answer hooks/list within a minute")
}
