//! Per-harness output (snapshots + vendored schemas), merge behaviour, pruning, and
//! every bad-input path of the registration writers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use crate::common;

use aibox_config::{Harness, PermissionMode, Permissions};
use aibox_mcp_registration::{
    McpError, Origin, RegisterOptions, collect_servers, effective_servers,
};
use aibox_test_support::schema::validate_json_against;
use common::{Files, apply, fixture_servers, remote, stdio};

fn perms() -> Permissions {
    Permissions {
        default_mode: PermissionMode::Ask,
        allow_patterns: Vec::new(),
        deny_patterns: vec!["delete_page".into(), "admin_*".into()],
    }
}

fn all_files() -> Files {
    let mut files = Files::new();
    apply(&mut files, &fixture_servers(), &Harness::ALL, &perms()).unwrap();
    files
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn snapshots_per_harness() {
    let files = all_files();
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    insta::assert_debug_snapshot!("file_list", names);
    for (path, text) in &files {
        let name = path.trim_start_matches('.').replace(['/', '.'], "_");
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn claude_settings_validate_against_the_vendored_schema() {
    let schema = aibox_test_support::schemas_dir().join("claude-code/claude-code-settings.json");
    let files = all_files();
    let value = json(&files[".claude/settings.json"]);
    validate_json_against(&schema, &value).unwrap();
    assert!(value.get("permissions.allow").is_none(), "flat key written");
    // No personal server reaches Claude, so no personal settings file is written.
    assert!(!files.contains_key(".claude/settings.local.json"));
    let committed = json(&files[".claude/settings.json"]);
    assert_eq!(
        committed["enabledMcpjsonServers"],
        serde_json::json!(["processkit-gateway", "docs", "issues"])
    );
    assert_eq!(
        committed["permissions"]["allow"],
        serde_json::json!([
            "mcp__processkit-gateway__*",
            "mcp__docs__search",
            "mcp__docs__fetch_page"
        ])
    );
}

#[test]
fn gemini_settings_validate_against_the_vendored_schema() {
    let schema = aibox_test_support::schemas_dir().join("gemini-cli/settings.schema.json");
    let files = all_files();
    let value = json(&files[".gemini/settings.json"]);
    validate_json_against(&schema, &value).unwrap();
    let servers = value["mcpServers"].as_object().unwrap();
    assert!(
        servers.values().all(|s| s.get("trust").is_none()),
        "trust must never be generated"
    );
    // A schema violation is caught (the validator is live, not a no-op).
    let bad = serde_json::json!({"mcpServers": {"x": {"command": "a", "bogus": 1}}});
    assert!(validate_json_against(&schema, &bad).is_err());
}

#[test]
fn personal_servers_never_reach_committed_files() {
    let files = all_files();
    // Every project MCP file is committed: team and processkit servers only.
    for committed in [
        ".mcp.json",
        ".claude/settings.json",
        ".codex/config.toml",
        ".gemini/settings.json",
        "opencode.json",
        ".cursor/mcp.json",
        ".vscode/mcp.json",
    ] {
        assert!(
            !files[committed].contains("my-notes"),
            "{committed} leaks a personal server"
        );
        assert!(
            files[committed].contains("processkit-gateway"),
            "{committed}"
        );
    }
    // The personal server goes to the container-scoped user configs only.
    assert!(files[".aibox-home/.codex/config.toml"].contains("[mcp_servers.my-notes]"));
    assert!(files[".aibox-home/.gemini/settings.json"].contains("\"my-notes\""));
    for path in [
        ".mcp.json",
        ".codex/config.toml",
        ".gemini/settings.json",
        ".cursor/mcp.json",
    ] {
        assert!(
            !aibox_config::is_local_state(path),
            "{path} is committed, not ignored"
        );
    }
    let opts = RegisterOptions {
        harnesses: &Harness::ALL,
        permissions: &perms(),
        workspace: "/workspace",
    };
    let report = effective_servers(&fixture_servers(), &opts);
    for h in [
        Harness::Claude,
        Harness::Cursor,
        Harness::Opencode,
        Harness::Vscode,
    ] {
        let row = report
            .iter()
            .find(|r| r.harness == h && r.name == "my-notes")
            .unwrap();
        assert!(
            row.skipped
                .as_deref()
                .unwrap()
                .contains("personal servers never go"),
            "{row:?}"
        );
        assert!(row.target_file.is_none());
    }
}

#[test]
fn effective_servers_report() {
    let opts = RegisterOptions {
        harnesses: &[Harness::Claude, Harness::Codex, Harness::Cursor],
        permissions: &perms(),
        workspace: "/workspace",
    };
    let report = effective_servers(&fixture_servers(), &opts);
    insta::assert_json_snapshot!("effective_servers", report);
}

#[test]
fn codex_config_uses_absolute_paths_names_and_timeouts() {
    let files = all_files();
    let codex: toml_edit::DocumentMut = files[".codex/config.toml"].parse().unwrap();
    let gw = &codex["mcp_servers"]["processkit-gateway"];
    assert_eq!(
        gw["args"][2].as_str(),
        Some("/workspace/context/skills/processkit/processkit-gateway/mcp/server.py")
    );
    assert_eq!(gw["startup_timeout_sec"].as_integer(), Some(90));
    assert_eq!(
        codex["mcp_servers"]["docs"]["env_vars"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        codex["mcp_servers"]["issues"]["bearer_token_env_var"].as_str(),
        Some("ISSUES_TOKEN")
    );
    assert!(codex["mcp_servers"].get("my-notes").is_none());
    assert!(
        !files[".codex/config.toml"].contains("projects"),
        "trust must not be in the project file"
    );
    let home: toml_edit::DocumentMut = files[".aibox-home/.codex/config.toml"].parse().unwrap();
    assert_eq!(
        home["mcp_servers"]["my-notes"]["args"][0].as_str(),
        Some("/workspace/tools/notes.js")
    );
    assert_eq!(
        home["projects"]["/workspace"]["trust_level"].as_str(),
        Some("trusted")
    );
    for (path, text) in &files {
        assert!(
            !text.contains("ghp_") && !text.contains("Bearer x"),
            "{path}"
        );
    }
}

#[test]
fn reapply_is_byte_identical() {
    let mut files = all_files();
    let before = files.clone();
    let reg = apply(&mut files, &fixture_servers(), &Harness::ALL, &perms()).unwrap();
    assert_eq!(files, before);
    assert!(
        reg.files.iter().all(|f| !f.changed),
        "{:?}",
        reg.files
            .iter()
            .filter(|f| f.changed)
            .map(|f| &f.path)
            .collect::<Vec<_>>()
    );
}

const USER_MCP_JSON: &str = r#"{
    "zeta": 1,
    "mcpServers": {
        "hand-made": { "command": "echo" },
        "docs": { "command": "old" }
    },
    "alpha": true
}
"#;

const USER_CODEX: &str = r#"# my codex settings
model = "o3" # keep this

# hand-written server
[mcp_servers.hand-made]
command = "echo"

# trailing comment
"#;

const USER_SETTINGS: &str = r#"{
  "permissions": { "allow": ["Bash(git add:*)", "mcp__hand-made__*"], "deny": [] },
  "enabledMcpjsonServers": ["hand-made"],
  "hooks": {}
}
"#;

#[test]
fn merge_keeps_user_entries_comments_order_and_prunes_removed_servers() {
    let mut files = Files::new();
    files.insert(".mcp.json".into(), USER_MCP_JSON.into());
    files.insert(".codex/config.toml".into(), USER_CODEX.into());
    files.insert(".claude/settings.json".into(), USER_SETTINGS.into());
    files.insert(
        ".gemini/settings.json".into(),
        r#"{"ui": {"theme": "x"}, "mcpServers": {"mine": {"command": "echo"}}}"#.into(),
    );
    let harnesses = [Harness::Claude, Harness::Codex, Harness::Gemini];
    apply(&mut files, &fixture_servers(), &harnesses, &perms()).unwrap();

    let mcp = json(&files[".mcp.json"]);
    let top: Vec<&String> = mcp.as_object().unwrap().keys().collect();
    assert_eq!(top, ["zeta", "mcpServers", "alpha"]);
    let names: Vec<&String> = mcp["mcpServers"].as_object().unwrap().keys().collect();
    // `docs` is taken over in place; new entries are appended in name order.
    assert_eq!(names, ["hand-made", "docs", "issues", "processkit-gateway"]);
    assert_eq!(mcp["mcpServers"]["docs"]["command"], "npx");

    let codex = &files[".codex/config.toml"];
    for kept in [
        "# my codex settings",
        "model = \"o3\" # keep this",
        "# hand-written server",
        "[mcp_servers.hand-made]",
        "# trailing comment",
    ] {
        assert!(codex.contains(kept), "lost `{kept}`:\n{codex}");
    }
    let settings = json(&files[".claude/settings.json"]);
    assert_eq!(settings["permissions"]["allow"][0], "Bash(git add:*)");
    assert!(settings.get("hooks").is_some());
    assert_eq!(json(&files[".gemini/settings.json"])["ui"]["theme"], "x");

    // Remove `docs` (team) and `my-notes` (personal): gone everywhere, with their rules.
    let fewer: Vec<_> = fixture_servers()
        .into_iter()
        .filter(|s| s.name != "docs" && s.name != "my-notes")
        .collect();
    apply(&mut files, &fewer, &harnesses, &perms()).unwrap();
    for (path, text) in &files {
        if path == ".aibox/mcp-ledger.json" {
            continue;
        }
        assert!(
            !text.contains("\"docs\"")
                && !text.contains("mcp_servers.docs")
                && !text.contains("mcp__docs"),
            "{path} still has docs:\n{text}"
        );
        assert!(!text.contains("my-notes"), "{path} still has my-notes");
    }
    assert!(files[".mcp.json"].contains("hand-made"));
    assert!(files[".codex/config.toml"].contains("[mcp_servers.hand-made]"));
    assert!(files[".gemini/settings.json"].contains("\"mine\""));
    let settings = json(&files[".claude/settings.json"]);
    assert_eq!(
        settings["enabledMcpjsonServers"],
        serde_json::json!(["hand-made", "processkit-gateway", "issues"])
    );
    assert!(
        settings["permissions"]["allow"]
            .as_array()
            .unwrap()
            .contains(&"mcp__hand-made__*".into())
    );

    // And applying again changes nothing.
    let before = files.clone();
    apply(&mut files, &fewer, &harnesses, &perms()).unwrap();
    assert_eq!(files, before);
}

#[test]
fn disabling_a_harness_prunes_its_files_and_codex_trust() {
    let mut files = all_files();
    apply(&mut files, &fixture_servers(), &[Harness::Claude], &perms()).unwrap();
    assert!(
        !files[".codex/config.toml"].contains("mcp_servers"),
        "{}",
        files[".codex/config.toml"]
    );
    assert!(!files[".aibox-home/.codex/config.toml"].contains("trusted"));
    assert!(!files[".gemini/settings.json"].contains("docs"));
    assert!(files[".mcp.json"].contains("docs"));
}

#[test]
fn without_a_ledger_only_processkit_entries_are_pruned() {
    let mut files = Files::new();
    files.insert(
        ".mcp.json".into(),
        r#"{"mcpServers": {"processkit-old": {"command": "uv"}, "team-old": {"command": "x"}}}"#
            .into(),
    );
    let reg = apply(&mut files, &fixture_servers(), &[Harness::Claude], &perms()).unwrap();
    let mcp = json(&files[".mcp.json"]);
    assert!(mcp["mcpServers"].get("processkit-old").is_none());
    assert!(mcp["mcpServers"].get("team-old").is_some());
    assert!(
        reg.notices
            .iter()
            .any(|n| n.contains("no MCP ledger") && n.contains("`team-old`")),
        "{:?}",
        reg.notices
    );
}

/// A hand-added entry found without a ledger is named once: the ledger is written even
/// when aibox registers nothing (empty), so the next run knows the entry is not aibox's and
/// keeps it without asking again.
#[test]
fn the_no_ledger_notice_is_given_once_even_with_nothing_registered() {
    let mut files = Files::new();
    files.insert(
        ".mcp.json".into(),
        r#"{"mcpServers": {"mine": {"command": "my-server", "args": []}}}"#.into(),
    );
    let first = apply(&mut files, &[], &[Harness::Claude], &perms()).unwrap();
    assert!(
        first
            .notices
            .iter()
            .any(|n| n.contains("no MCP ledger") && n.contains("`mine`")),
        "{:?}",
        first.notices
    );
    assert!(first.write_ledger);
    let ledger =
        aibox_mcp_registration::Ledger::parse(&files[aibox_mcp_registration::LEDGER_PATH]).unwrap();
    assert_eq!(ledger, aibox_mcp_registration::Ledger::new());
    for _ in 0..2 {
        let again = apply(&mut files, &[], &[Harness::Claude], &perms()).unwrap();
        assert!(again.notices.is_empty(), "{:?}", again.notices);
        assert!(
            json(&files[".mcp.json"])["mcpServers"]
                .get("mine")
                .is_some()
        );
    }
}

/// A teammate's fresh clone has the committed files but no ledger: entries of the current
/// configuration are rewritten in place without a stale-entry notice.
#[test]
fn a_fresh_clone_without_a_ledger_gets_no_stale_entry_notice() {
    let mut files = all_files();
    files.remove(".aibox/mcp-ledger.json");
    let before = files.clone();
    let reg = apply(&mut files, &fixture_servers(), &Harness::ALL, &perms()).unwrap();
    assert!(
        !reg.notices.iter().any(|n| n.contains("no MCP ledger")),
        "{:?}",
        reg.notices
    );
    for (path, text) in &before {
        assert_eq!(&files[path], text, "{path} changed");
    }
}

#[test]
fn unparsable_files_are_errors_naming_file_and_position() {
    let cases = [
        (".mcp.json", "{\n  \"mcpServers\": {,\n}\n", 2),
        (".codex/config.toml", "model = \"o3\"\n[mcp_servers\n", 2),
        (".claude/settings.json", "[1, 2]", 0),
    ];
    for (path, text, line) in cases {
        let mut files = Files::new();
        files.insert(path.into(), text.into());
        let err = apply(&mut files, &fixture_servers(), &Harness::ALL, &perms()).unwrap_err();
        match &err {
            McpError::Parse(e) => {
                assert_eq!(e.path, path);
                assert_eq!(e.line, line, "{err}");
            }
            McpError::Shape { path: p, .. } => assert_eq!(p, path),
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains(path), "{err}");
        assert_eq!(files.len(), 1, "nothing may be written");
        assert_eq!(files[path], text);
    }
    let mut files = Files::new();
    files.insert(".mcp.json".into(), r#"{"mcpServers": []}"#.into());
    let err = apply(&mut files, &fixture_servers(), &[Harness::Claude], &perms()).unwrap_err();
    assert!(
        matches!(err, McpError::Shape { ref key, .. } if key == "mcpServers"),
        "{err:?}"
    );
}

#[test]
fn literal_secrets_are_refused() {
    let cases = [
        stdio("a", Origin::Team, "npx", &[], &[("API_KEY", "plain")]),
        stdio("b", Origin::Personal, "npx", &[], &[("MODE", "fast")]),
        stdio(
            "c",
            Origin::Processkit,
            "uv",
            &[],
            &[("GITHUB_TOKEN", "ghp_FAKEFAKEFAKEFAKE")],
        ),
        stdio(
            "d",
            Origin::Team,
            "npx",
            &["--token", "ghp_FAKEFAKEFAKEFAKE"],
            &[],
        ),
        remote(
            "e",
            Origin::Team,
            "https://x.invalid/mcp",
            &[("Authorization", "Bearer abcdef")],
        ),
        remote("f", Origin::Team, "https://user:pw@x.invalid/mcp", &[]),
        stdio("g", Origin::Team, "npx", &["--api-key=abcdef"], &[]),
        stdio("h", Origin::Team, "npx", &["--token", "abcdef"], &[]),
    ];
    for spec in cases {
        let text = literal_refused(&spec);
        assert!(
            !text.contains("FAKE") && !text.contains("abcdef"),
            "error echoes the secret: {text}"
        );
    }
    stdio(
        "ok2",
        Origin::Team,
        "npx",
        &["--token", "${TOKEN}", "--verbose", "-y", "pkg@1.0.0"],
        &[],
    )
    .validate()
    .unwrap();
    remote(
        "ok3",
        Origin::Team,
        "https://x.invalid/mcp?api_key=${KEY}&v=1",
        &[],
    )
    .validate()
    .unwrap();
    stdio(
        "ok",
        Origin::Processkit,
        "uv",
        &[],
        &[("PROCESSKIT_MCP_MODE", "gateway")],
    )
    .validate()
    .unwrap();
}

/// The refusal of `spec` as a literal value, as shown.
fn literal_refused(spec: &aibox_mcp_registration::ServerSpec) -> String {
    let err = spec.validate().unwrap_err();
    assert!(
        matches!(err, McpError::LiteralValue { .. }),
        "{}: {err:?}",
        spec.name
    );
    err.to_string()
}

/// A stdio bridge's header argument with a literal credential (QA: a hex key in
/// `--header "X-API-Key: ..."` reached `aibox.toml` and every harness file); references
/// pass.
#[test]
fn header_arguments_with_literal_credentials_are_refused() {
    let cases = [
        // A stdio bridge's header argument (QA: a hex key committed to every harness file).
        stdio(
            "j",
            Origin::Team,
            "npx",
            &[
                "mcp-remote@0.1.29",
                "https://x.invalid/mcp",
                "--header",
                "X-API-Key: abcdef",
            ],
            &[],
        ),
        stdio(
            "k",
            Origin::Team,
            "npx",
            &[
                "mcp-remote@0.1.29",
                "--header",
                "Authorization: Token abcdef",
            ],
            &[],
        ),
        remote(
            "i",
            Origin::Team,
            "https://x.invalid/mcp?api_key=abcdef",
            &[],
        ),
    ];
    for spec in cases {
        assert!(!literal_refused(&spec).contains("abcdef"));
    }
    stdio(
        "ok4",
        Origin::Team,
        "npx",
        &[
            "mcp-remote@0.1.29",
            "--header",
            "Authorization: Bearer ${TOKEN}",
            "--header",
            "X-API-Key: ${API_KEY}",
        ],
        &[],
    )
    .validate()
    .unwrap();
}

#[test]
fn invalid_servers_are_refused() {
    let bad_name = stdio("bad name", Origin::Team, "x", &[], &[]);
    assert!(matches!(
        bad_name.validate(),
        Err(McpError::InvalidServer { .. })
    ));
    let bad_url = remote("r", Origin::Team, "ftp://x", &[]);
    assert!(matches!(
        bad_url.validate(),
        Err(McpError::InvalidServer { .. })
    ));
    let mut bad_tool = stdio("t", Origin::Team, "x", &[], &[]);
    bad_tool.allowed_tools = vec!["rm -rf".into()];
    assert!(matches!(
        bad_tool.validate(),
        Err(McpError::InvalidServer { .. })
    ));
}

fn config(extra: &str) -> aibox_config::AiboxToml {
    let text = format!("[container]\nname = \"demo\"\n{extra}");
    aibox_config::parse_aibox_toml(&text, "aibox.toml").unwrap()
}

#[test]
fn collect_servers_merges_sources_and_respects_harness_only() {
    let team = "[[ai.mcp.servers]]\nname = \"docs\"\ncommand = \"npx\"\n\n[[ai.mcp.servers]]\nname = \"off\"\ncommand = \"x\"\nenabled = false\n";
    let local = aibox_config::parse_local_toml(
        "[[mcp.servers]]\nname = \"mine\"\nurl = \"https://x.invalid/mcp\"\n",
        ".aibox-local.toml",
    )
    .unwrap();
    let pk = vec![stdio(
        "processkit-gateway",
        Origin::Processkit,
        "uv",
        &[],
        &[],
    )];

    let got = collect_servers(&config(team), &local, &pk).unwrap();
    let names: Vec<(&str, Origin)> = got.iter().map(|s| (s.name.as_str(), s.origin)).collect();
    assert_eq!(
        names,
        [
            ("processkit-gateway", Origin::Processkit),
            ("docs", Origin::Team),
            ("mine", Origin::Personal)
        ]
    );

    let harness_only = config(&format!("[context]\nmode = \"harness-only\"\n{team}"));
    let got = collect_servers(&harness_only, &local, &pk).unwrap();
    assert!(
        got.iter().all(|s| s.origin != Origin::Processkit),
        "SEC-MCP-1"
    );
    // SEC-MCP-1 across every harness file.
    let mut files = Files::new();
    apply(&mut files, &got, &Harness::ALL, &Permissions::default()).unwrap();
    assert!(files.values().all(|t| !t.contains("processkit-")));

    let dup = aibox_config::parse_local_toml(
        "[[mcp.servers]]\nname = \"docs\"\ncommand = \"y\"\n",
        ".aibox-local.toml",
    )
    .unwrap();
    let err = collect_servers(&config(team), &dup, &[]).unwrap_err();
    assert!(
        matches!(err, McpError::DuplicateServer { ref name, .. } if name == "docs"),
        "{err:?}"
    );

    let both = aibox_config::McpServer {
        name: "x".into(),
        command: Some("a".into()),
        args: Vec::new(),
        env: std::collections::BTreeMap::new(),
        url: Some("https://x.invalid/mcp".into()),
        headers: std::collections::BTreeMap::new(),
        allowed_tools: Vec::new(),
        startup_timeout_sec: None,
        enabled: true,
    };
    let err = aibox_mcp_registration::ServerSpec::from_config(&both, Origin::Team).unwrap_err();
    assert!(matches!(err, McpError::InvalidServer { .. }), "{err:?}");
    let neither = aibox_config::McpServer {
        command: None,
        url: None,
        ..both.clone()
    };
    assert!(aibox_mcp_registration::ServerSpec::from_config(&neither, Origin::Team).is_err());
    let disabled = aibox_config::McpServer {
        enabled: false,
        ..both
    };
    assert_eq!(
        aibox_mcp_registration::ServerSpec::from_config(&disabled, Origin::Team).unwrap(),
        None
    );
}

#[test]
fn harness_specific_limits_are_reported_not_invented() {
    let mut under = stdio(
        "my_tool",
        Origin::Team,
        "x",
        &[],
        &[("OTHER", "${RENAMED}")],
    );
    under.allowed_tools = vec!["get_*".into()];
    let opts = RegisterOptions {
        harnesses: &Harness::ALL,
        permissions: &Permissions::default(),
        workspace: "/workspace",
    };
    let report = effective_servers(&[under], &opts);
    let row = |h: Harness| report.iter().find(|r| r.harness == h).unwrap();
    assert!(
        row(Harness::Gemini)
            .skipped
            .as_deref()
            .unwrap()
            .contains("first `_`")
    );
    assert!(
        row(Harness::Codex)
            .skipped
            .as_deref()
            .unwrap()
            .contains("env_vars")
    );
    assert!(
        row(Harness::Claude)
            .notes
            .iter()
            .any(|n| n.contains("get_*"))
    );
    assert!(
        row(Harness::Cursor)
            .notes
            .iter()
            .any(|n| n.contains("no per-tool allow-list"))
    );
    assert!(row(Harness::Claude).skipped.is_none());
}

#[test]
fn codex_trust_is_seeded_only_while_codex_has_servers() {
    let mut files = Files::new();
    apply(&mut files, &[], &[Harness::Codex], &perms()).unwrap();
    assert!(
        files.is_empty(),
        "nothing to register, nothing written: {files:?}"
    );
    apply(&mut files, &fixture_servers(), &[Harness::Codex], &perms()).unwrap();
    assert!(files[".aibox-home/.codex/config.toml"].contains("trust_level = \"trusted\""));
    apply(&mut files, &[], &[Harness::Codex], &perms()).unwrap();
    assert!(!files[".aibox-home/.codex/config.toml"].contains("trusted"));
    assert!(!files[".codex/config.toml"].contains("mcp_servers."));
}

#[test]
fn codex_trust_follows_servers_added_by_hand_too() {
    let mut files = Files::new();
    files.insert(
        ".codex/config.toml".into(),
        "[mcp_servers.mine]\ncommand = \"m\"\n".into(),
    );
    let reg = apply(&mut files, &[], &[Harness::Codex], &perms()).unwrap();
    assert!(
        files[".aibox-home/.codex/config.toml"].contains("trust_level = \"trusted\""),
        "{files:?}"
    );
    assert!(
        reg.notices
            .iter()
            .any(|n| n.contains("Codex project trust")),
        "{:?}",
        reg.notices
    );
    assert!(files[".codex/config.toml"].contains("[mcp_servers.mine]"));
    // The user's last server gone: nothing left to trust the folder for.
    files.insert(".codex/config.toml".into(), "# none left\n".into());
    apply(&mut files, &[], &[Harness::Codex], &perms()).unwrap();
    assert!(!files[".aibox-home/.codex/config.toml"].contains("trusted"));
}

#[test]
fn references_in_commands_and_urls_take_each_harness_syntax() {
    let servers = [
        stdio("tokened", Origin::Team, "tool", &["--token", "${T}"], &[]),
        remote("keyed", Origin::Team, "https://x.invalid/mcp?key=${K}", &[]),
    ];
    let mut files = Files::new();
    let reg = apply(&mut files, &servers, &Harness::ALL, &Permissions::default()).unwrap();
    let j = |path: &str| json(&files[path]);
    assert_eq!(j(".mcp.json")["mcpServers"]["tokened"]["args"][1], "${T}");
    assert_eq!(
        j(".mcp.json")["mcpServers"]["keyed"]["url"],
        "https://x.invalid/mcp?key=${K}"
    );
    assert_eq!(
        j(".gemini/settings.json")["mcpServers"]["tokened"]["args"][1],
        "${T}"
    );
    assert_eq!(
        j("opencode.json")["mcp"]["tokened"]["command"],
        serde_json::json!(["tool", "--token", "{env:T}"])
    );
    assert_eq!(
        j("opencode.json")["mcp"]["keyed"]["url"],
        "https://x.invalid/mcp?key={env:K}"
    );
    for (path, slot) in [
        (".cursor/mcp.json", "mcpServers"),
        (".vscode/mcp.json", "servers"),
    ] {
        assert_eq!(j(path)[slot]["tokened"]["args"][1], "${env:T}", "{path}");
        assert_eq!(
            j(path)[slot]["keyed"]["url"],
            "https://x.invalid/mcp?key=${env:K}",
            "{path}"
        );
    }
    // Codex expands nothing there: neither server is written, and apply says why.
    assert!(
        !files
            .get(".codex/config.toml")
            .is_some_and(|t| t.contains("tokened") || t.contains("keyed")),
        "{files:?}"
    );
    for name in ["tokened", "keyed"] {
        let row = reg
            .servers
            .iter()
            .find(|r| r.harness == Harness::Codex && r.name == name)
            .unwrap();
        assert!(
            row.skipped
                .as_deref()
                .is_some_and(|r| r.contains("does not expand variables")),
            "{row:?}"
        );
        assert!(
            reg.notices
                .iter()
                .any(|n| n.starts_with(&format!("`{name}` is not registered for codex: "))),
            "{:?}",
            reg.notices
        );
    }
    // A default has no spelling in `${env:VAR}` or `{env:VAR}`: skipped there, kept in
    // the harnesses that take it.
    let defaulted = [stdio("dflt", Origin::Team, "tool", &["${T:-x}"], &[])];
    let reg = apply(
        &mut Files::new(),
        &defaulted,
        &Harness::ALL,
        &Permissions::default(),
    )
    .unwrap();
    let skipped: Vec<Harness> = reg
        .servers
        .iter()
        .filter(|r| r.skipped.is_some())
        .map(|r| r.harness)
        .collect();
    assert_eq!(
        skipped,
        [
            Harness::Codex,
            Harness::Opencode,
            Harness::Cursor,
            Harness::Vscode
        ]
    );
}

#[test]
fn a_personal_server_without_a_personal_place_is_no_apply_notice() {
    let servers = [
        stdio("mine", Origin::Personal, "tool", &[], &[]),
        remote("far", Origin::Personal, "http://127.0.0.1:9/mcp", &[]),
    ];
    let reg = apply(
        &mut Files::new(),
        &servers,
        &Harness::ALL,
        &Permissions::default(),
    )
    .unwrap();
    // Not registered there: no trust to speak of, and the advice fits the transport.
    for r in reg.servers.iter().filter(|r| r.skipped.is_some()) {
        assert_eq!(
            r.trust_scope, "none: not registered in this harness",
            "{r:?}"
        );
    }
    let far = reg
        .servers
        .iter()
        .find(|r| r.harness == Harness::Claude && r.name == "far")
        .unwrap();
    assert!(
        far.skipped.as_deref().is_some_and(|s| s.contains(
            "`claude mcp add --transport http --scope local far http://127.0.0.1:9/mcp`"
        )),
        "{far:?}"
    );
    assert!(
        reg.servers
            .iter()
            .any(|r| r.harness == Harness::Claude && r.skipped.is_some())
    );
    assert!(
        !reg.notices.iter().any(|n| n.contains("is not registered")),
        "{:?}",
        reg.notices
    );
}

/// A hand edit inside an entry aibox registered (a teammate's `timeout`, an extra
/// variable, a tuned Codex timeout with a comment) is kept exactly and reported at every
/// apply, never overwritten silently; untouched entries still follow the configuration,
/// and deleting the edited entry hands it back to aibox.
#[test]
fn hand_edits_inside_registered_entries_are_kept_and_reported() {
    let mut files = Files::new();
    apply(&mut files, &fixture_servers(), &Harness::ALL, &perms()).unwrap();
    let mut mcp = json(&files[".mcp.json"]);
    mcp["mcpServers"]["docs"]["timeout"] = serde_json::json!(5000);
    mcp["mcpServers"]["docs"]["env"]["EXTRA"] = serde_json::json!("${EXTRA}");
    let edited_mcp = serde_json::to_string_pretty(&mcp).unwrap();
    files.insert(".mcp.json".into(), edited_mcp.clone());
    let codex = files[".codex/config.toml"].replace(
        "[mcp_servers.docs]\n",
        "[mcp_servers.docs]\n# slow on CI\nstartup_timeout_sec = 120\n",
    );
    assert_ne!(codex, files[".codex/config.toml"]);
    files.insert(".codex/config.toml".into(), codex.clone());

    // The configuration changes docs for every harness: only the unedited entries follow.
    let mut servers = fixture_servers();
    let aibox_mcp_registration::spec::Transport::Stdio { args, .. } = &mut servers[1].transport
    else {
        panic!()
    };
    args.push("--verbose".into());
    for round in 0..2 {
        let reg = apply(&mut files, &servers, &Harness::ALL, &perms()).unwrap();
        assert_eq!(files[".mcp.json"], edited_mcp, "round {round}");
        assert_eq!(files[".codex/config.toml"], codex, "round {round}");
        for file in [".mcp.json", ".codex/config.toml"] {
            assert!(
                reg.notices
                    .iter()
                    .any(|n| n.contains(&format!("`docs` entry in {file} was edited by hand"))),
                "round {round}: {:?}",
                reg.notices
            );
        }
        let gemini = json(&files[".gemini/settings.json"]);
        assert_eq!(
            gemini["mcpServers"]["docs"]["args"][2], "--verbose",
            "{gemini}"
        );
    }
    // Deleted by the user: aibox writes it again, from the configuration.
    let mut mcp = json(&files[".mcp.json"]);
    mcp["mcpServers"].as_object_mut().unwrap().remove("docs");
    files.insert(".mcp.json".into(), mcp.to_string());
    let reg = apply(&mut files, &servers, &Harness::ALL, &perms()).unwrap();
    let mcp = json(&files[".mcp.json"]);
    assert_eq!(mcp["mcpServers"]["docs"]["args"][2], "--verbose");
    assert!(mcp["mcpServers"]["docs"].get("timeout").is_none());
    assert!(
        !reg.notices.iter().any(|n| n.contains("entry in .mcp.json")),
        "{:?}",
        reg.notices
    );
}

/// A default deny the harnesses cannot enforce is an apply notice naming them, not only
/// a note in `mcp list`; with the allowed tools named, the tool filters enforce it.
#[test]
fn an_unenforced_default_deny_is_said_at_apply() {
    let servers = [stdio("s", Origin::Team, "x", &[], &[])];
    let deny = Permissions {
        default_mode: PermissionMode::Deny,
        allow_patterns: Vec::new(),
        deny_patterns: Vec::new(),
    };
    let reg = apply(&mut Files::new(), &servers, &Harness::ALL, &deny).unwrap();
    let notice = reg
        .notices
        .iter()
        .find(|n| n.contains("default_mode = \"deny\" is not enforced"))
        .unwrap_or_else(|| panic!("{:?}", reg.notices));
    assert!(
        notice.contains("for claude, codex, gemini, opencode, cursor, vscode:"),
        "{notice}"
    );
    let named = Permissions {
        allow_patterns: vec!["search".into()],
        ..deny.clone()
    };
    let reg = apply(
        &mut Files::new(),
        &servers,
        &[Harness::Codex, Harness::Gemini],
        &named,
    )
    .unwrap();
    assert!(
        !reg.notices.iter().any(|n| n.contains("is not enforced")),
        "{:?}",
        reg.notices
    );
    let reg = apply(
        &mut Files::new(),
        &servers,
        &Harness::ALL,
        &Permissions::default(),
    )
    .unwrap();
    assert!(!reg.notices.iter().any(|n| n.contains("is not enforced")));
}

#[test]
fn parse_errors_render_with_file_line_and_code() {
    let mut files = Files::new();
    files.insert(
        ".gemini/settings.json".into(),
        "{\n  \"ui\": {\n    \"theme\": \"x\",,\n}\n".into(),
    );
    let err = apply(&mut files, &fixture_servers(), &[Harness::Gemini], &perms()).unwrap_err();
    let code = miette::Diagnostic::code(&err).map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("aibox::mcp::unparsable_target"));
    let text = err.to_string();
    assert!(
        text.contains(".gemini/settings.json") && text.contains("line 3"),
        "{text}"
    );
    let help = miette::Diagnostic::help(&err)
        .map(|h| h.to_string())
        .unwrap_or_default();
    assert!(help.contains("never overwrites"), "{help}");
}

#[test]
fn unpinned_team_packages_are_reported() {
    let cases = [
        ("npx", &["-y", "@acme/docs-mcp"][..], true),
        ("npx", &["-y", "@acme/docs-mcp@latest"][..], true),
        ("npx", &["-y", "docs-mcp@^1"][..], true),
        ("npx", &["-y", "@acme/docs-mcp@1.4.2"][..], false),
        ("uvx", &["mcp-server-git==0.6.2"][..], false),
        ("uvx", &["mcp-server-git"][..], true),
        ("uvx", &["mcp-server-git@0.6.2"][..], false),
        ("uvx", &["mcp-server-git@latest"][..], true),
        ("uvx", &["mcp-server-git>=0.6"][..], true),
        ("uvx", &["mcp-server-git~=0.6.2"][..], true),
        ("uvx", &["mcp-server-git==0.6.*"][..], true),
        ("uvx", &["mcp-server-git>=0.6,<1"][..], true),
        (
            "uvx",
            &["--from=mcp-server-git==0.6.2", "git-mcp"][..],
            false,
        ),
        (
            "uvx",
            &["--from", "mcp-server-git>=0.6", "git-mcp"][..],
            true,
        ),
        (
            "uvx",
            &["--python", "3.12", "mcp-server-git==0.6.2"][..],
            false,
        ),
        ("uv", &["tool", "run", "mcp-server-git"][..], true),
        ("uv", &["tool", "run", "mcp-server-git==0.6.2"][..], false),
        ("uv", &["run", "server.py"][..], false),
        ("pnpm", &["dlx", "docs-mcp@2.0.0"][..], false),
        ("node", &["server.js"][..], false),
    ];
    for (command, args, unpinned) in cases {
        let spec = stdio("s", Origin::Team, command, args, &[]);
        assert_eq!(
            spec.unpinned_package().is_some(),
            unpinned,
            "{command} {args:?}"
        );
    }
    let mut files = Files::new();
    let team = stdio("docs", Origin::Team, "npx", &["-y", "@acme/docs-mcp"], &[]);
    let reg = apply(&mut files, &[team], &[Harness::Claude], &perms()).unwrap();
    assert!(
        reg.notices
            .iter()
            .any(|n| n.contains("`@acme/docs-mcp` without an exact version")),
        "{:?}",
        reg.notices
    );
}

/// A `.mcp.json` saved with a UTF-8 byte order mark (Windows editors) is merged like any
/// other: the user's server stays, aibox's are added, the mark is kept.
#[test]
fn a_byte_order_mark_is_accepted_and_kept() {
    let mut files = Files::new();
    files.insert(
        ".mcp.json".into(),
        "\u{feff}{\"mcpServers\": {\"hand-made\": {\"command\": \"echo\"}}}\n".into(),
    );
    apply(&mut files, &fixture_servers(), &[Harness::Claude], &perms()).unwrap();
    let text = &files[".mcp.json"];
    assert!(text.starts_with('\u{feff}'), "{text}");
    let mcp = json(text.trim_start_matches('\u{feff}'));
    assert_eq!(mcp["mcpServers"]["hand-made"]["command"], "echo");
    assert!(mcp["mcpServers"]["processkit-gateway"].is_object(), "{mcp}");
}

const VSCODE_WITH_COMMENTS: &str = r#"// Team MCP servers for VS Code
{
  /* servers we added by hand */
  "servers": {
    // my own server, keep it
    "hand-made": { "type": "stdio", "command": "echo" }, // trailing note
  },
  "inputs": [], // none yet
}
"#;

const GEMINI_WITH_COMMENTS: &str = r#"{
  // appearance
  "ui": { "theme": "x" },
  /* servers */
  "mcpServers": {
    "mine": { "command": "echo" } // hand-made
  }
}
"#;

/// VS Code and Gemini CLI read `//` and `/* */` comments and trailing commas; a merge keeps
/// every comment and touches only aibox's own entries, and removing them later keeps the
/// comments too.
#[test]
fn jsonc_files_are_merged_keeping_every_comment() {
    let mut files = Files::new();
    files.insert(".vscode/mcp.json".into(), VSCODE_WITH_COMMENTS.into());
    files.insert(".gemini/settings.json".into(), GEMINI_WITH_COMMENTS.into());
    let harnesses = [Harness::Vscode, Harness::Gemini];
    apply(&mut files, &fixture_servers(), &harnesses, &perms()).unwrap();
    insta::assert_snapshot!("jsonc_vscode_merged", files[".vscode/mcp.json"]);
    let comments = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| {
                l.find("//")
                    .or_else(|| l.find("/*"))
                    .map(|i| l[i..].to_owned())
            })
            .filter(|c| !c.starts_with("//y") && !c.contains("://"))
            .collect()
    };
    for (path, original) in [
        (".vscode/mcp.json", VSCODE_WITH_COMMENTS),
        (".gemini/settings.json", GEMINI_WITH_COMMENTS),
    ] {
        let merged = &files[path];
        for comment in comments(original) {
            assert!(
                merged.contains(&comment),
                "{path} lost `{comment}`:\n{merged}"
            );
        }
        assert!(merged.contains("processkit-gateway"), "{merged}");
        let value: serde_json::Value =
            jsonc_parser::parse_to_serde_value(merged, &jsonc_parser::ParseOptions::default())
                .unwrap();
        let slot = if path.starts_with(".vscode") {
            "servers"
        } else {
            "mcpServers"
        };
        let names: Vec<&String> = value[slot].as_object().unwrap().keys().collect();
        assert_eq!(
            names[0],
            if slot == "servers" {
                "hand-made"
            } else {
                "mine"
            }
        );
        assert!(names.iter().any(|n| *n == "docs"), "{names:?}");
    }
    let gemini: serde_json::Value = jsonc_parser::parse_to_serde_value(
        &files[".gemini/settings.json"],
        &jsonc_parser::ParseOptions::default(),
    )
    .unwrap();
    validate_json_against(
        &aibox_test_support::schemas_dir().join("gemini-cli/settings.schema.json"),
        &gemini,
    )
    .unwrap();

    // Applying again is byte-identical; removing every aibox server keeps the comments.
    let before = files.clone();
    apply(&mut files, &fixture_servers(), &harnesses, &perms()).unwrap();
    assert_eq!(files, before);
    apply(&mut files, &[], &harnesses, &perms()).unwrap();
    for (path, original) in [
        (".vscode/mcp.json", VSCODE_WITH_COMMENTS),
        (".gemini/settings.json", GEMINI_WITH_COMMENTS),
    ] {
        let text = &files[path];
        assert!(!text.contains("processkit-gateway"), "{text}");
        for comment in comments(original) {
            assert!(text.contains(&comment), "{path} lost `{comment}`:\n{text}");
        }
    }
}

/// Every harness file registration writes is a row of the file table that `apply` may
/// write, with the same scope (committed, gitignored, container-scoped).
#[test]
fn every_target_is_in_the_file_table_with_its_scope() {
    use aibox_config::layout::{self, Scope, Writers};
    use aibox_mcp_registration::{FileScope, LEDGER_PATH, TARGETS};
    for (_, path, scope) in TARGETS {
        assert!(layout::may_write(Writers::APPLY, path), "{path}");
        let entry = layout::entry(path).unwrap();
        let expected = match scope {
            FileScope::Committed => Scope::Committed,
            FileScope::Gitignored => Scope::Gitignored,
            FileScope::ContainerScoped => Scope::ContainerScoped,
        };
        assert_eq!(entry.scope, expected, "{path}");
        assert_eq!(
            aibox_config::is_local_state(path),
            expected != Scope::Committed,
            "{path}"
        );
    }
    assert!(layout::may_write(Writers::APPLY, LEDGER_PATH));
}

/// The Codex trust notice is said when the trust is written, not on every run.
#[test]
fn the_codex_trust_notice_is_said_once() {
    let trust = |reg: &aibox_mcp_registration::Registration| {
        reg.notices
            .iter()
            .any(|n| n.contains("Codex project trust for /workspace"))
    };
    let mut files = Files::new();
    let first = apply(&mut files, &fixture_servers(), &Harness::ALL, &perms()).unwrap();
    assert!(trust(&first), "{:?}", first.notices);
    let again = apply(&mut files, &fixture_servers(), &Harness::ALL, &perms()).unwrap();
    assert!(!trust(&again), "{:?}", again.notices);
}

/// The entries added by hand to the enabled harnesses' files are listed (their harness
/// loads them): with a ledger, what it does not list; without, what is not configured.
#[test]
fn hand_added_entries_are_listed() {
    let mut files = Files::new();
    apply(&mut files, &fixture_servers(), &Harness::ALL, &perms()).unwrap();
    let mut mcp = json(&files[".mcp.json"]);
    mcp["mcpServers"]["mine"] = serde_json::json!({"command": "m"});
    files.insert(".mcp.json".into(), mcp.to_string());
    let codex = format!(
        "{}\n[mcp_servers.mine2]\ncommand = \"m\"\n",
        files[".codex/config.toml"]
    );
    files.insert(".codex/config.toml".into(), codex);
    let ledger =
        aibox_mcp_registration::Ledger::parse(&files[aibox_mcp_registration::LEDGER_PATH]).unwrap();
    let mut read = |p: &str| Ok(files.get(p).cloned());
    let listed = |ledger| {
        aibox_mcp_registration::hand_added(&fixture_servers(), &Harness::ALL, ledger, &mut |p| {
            Ok(files.get(p).cloned())
        })
        .unwrap()
        .into_iter()
        .map(|h| (h.harness, h.name, h.file))
        .collect::<Vec<_>>()
    };
    let expected = vec![
        (Harness::Claude, "mine".to_owned(), ".mcp.json".to_owned()),
        (
            Harness::Codex,
            "mine2".to_owned(),
            ".codex/config.toml".to_owned(),
        ),
    ];
    assert_eq!(listed(Some(&ledger)), expected);
    assert_eq!(listed(None), expected);
    // A harness that is not enabled is not read.
    let only = aibox_mcp_registration::hand_added(
        &fixture_servers(),
        &[Harness::Gemini],
        Some(&ledger),
        &mut read,
    )
    .unwrap();
    assert!(only.is_empty(), "{only:?}");
}

/// A hand-written entry in several files clashing with one configured server is one error
/// naming every file (it named the first; deleting that entry revealed the next).
#[test]
fn a_clash_in_several_files_names_them_all() {
    let harnesses = [Harness::Claude, Harness::Gemini, Harness::Cursor];
    let without: Vec<_> = fixture_servers()
        .into_iter()
        .filter(|s| s.name != "docs")
        .collect();
    let mut files = Files::new();
    apply(&mut files, &without, &harnesses, &perms()).unwrap();
    for path in [".mcp.json", ".gemini/settings.json", ".cursor/mcp.json"] {
        let mut doc = json(&files[path]);
        doc["mcpServers"]["docs"] = serde_json::json!({"command": "mine"});
        files.insert(path.to_owned(), doc.to_string());
    }
    let before = files.clone();
    let err = apply(&mut files, &fixture_servers(), &harnesses, &perms()).unwrap_err();
    let McpError::HandEntryClash { path, server, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(server, "docs");
    assert_eq!(
        path,
        ".mcp.json`, `.gemini/settings.json`, `.cursor/mcp.json"
    );
    assert!(
        err.to_string()
            .contains("is in `.mcp.json`, `.gemini/settings.json`, `.cursor/mcp.json`"),
        "{err}"
    );
    assert_eq!(files, before, "nothing is written");
}

/// With a ledger, a hand-written `[mcp_servers.<name>]` in either Codex file (the committed
/// one and the container-scoped one) is not replaced by a configured server of that name:
/// the same `aibox::mcp::hand_entry_clash` as the JSON files, both files left untouched.
#[test]
fn codex_hand_entries_clash_like_the_json_ones() {
    let harnesses = [Harness::Codex];
    for (path, name, origin) in [
        (
            ".codex/config.toml",
            "docs",
            "aibox.toml [[ai.mcp.servers]]",
        ),
        (
            ".aibox-home/.codex/config.toml",
            "my-notes",
            ".aibox-local.toml [[mcp.servers]]",
        ),
    ] {
        let without: Vec<_> = fixture_servers()
            .into_iter()
            .filter(|s| s.name != name)
            .collect();
        let mut files = Files::new();
        apply(&mut files, &without, &harnesses, &perms()).unwrap();
        let hand = format!(
            "{}\n[mcp_servers.{name}] # mine\ncommand = \"node\"\n\n[mcp_servers.{name}.env]\nHOME_DIR = \"/srv\"\n",
            files.get(path).map_or("", String::as_str)
        );
        files.insert(path.to_owned(), hand.clone());
        let before = files.clone();
        let err = apply(&mut files, &fixture_servers(), &harnesses, &perms()).unwrap_err();
        match &err {
            McpError::HandEntryClash {
                path: p,
                server,
                origin: o,
            } => {
                assert_eq!(
                    (p.as_str(), server.as_str(), o.as_str()),
                    (path, name, origin)
                );
            }
            other => panic!("{path}: {other:?}"),
        }
        assert_eq!(files, before, "{path}: a file changed");
        // An entry that only differs in layout and comments is aibox's own: no clash.
        let mut files = Files::new();
        apply(&mut files, &fixture_servers(), &harnesses, &perms()).unwrap();
        let ours = files[path].clone();
        let reformatted = ours.replace(" = ", "=") + "\n# a note\n";
        files.insert(path.to_owned(), reformatted.clone());
        apply(&mut files, &fixture_servers(), &harnesses, &perms()).unwrap();
        assert_eq!(files[path], reformatted, "{path}");
    }
}
