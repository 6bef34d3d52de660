//! The harnesses' own CLIs (Claude Code, Codex, Gemini CLI and `OpenCode`), pinned in
//! `test-tools/harnesses/package-lock.json`, load exactly the servers aibox wrote (plus
//! the user's own), and forget a server once it is removed from the configuration and
//! registration runs again. Team and processkit servers come from the committed project
//! files; the personal server comes only from the container-scoped user configs under
//! `.aibox-home/` (Codex, Gemini) and is absent where the harness has none.
//!
//! Needs `npm ci --prefix test-tools/harnesses`; without it the test fails (it never
//! skips). `HOME` is the project's scratch `.aibox-home/`, as inside the container, so
//! the real home is never touched. The clients are run in parallel; one round takes
//! about 5 s (Gemini CLI dominates).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use aibox_config::{Harness, Permissions};
use aibox_mcp_registration::{LEDGER_PATH, Ledger, Origin, RegisterOptions, ServerSpec, register};
use common::{remote, stdio};

fn bin(name: &str) -> PathBuf {
    aibox_test_support::harness_cli(name).into()
}

fn servers(with_issues: bool) -> Vec<ServerSpec> {
    let gateway = stdio(
        "processkit-gateway",
        Origin::Processkit,
        "uv",
        &[
            "run",
            "--script",
            "context/skills/processkit/processkit-gateway/mcp/server.py",
        ],
        &[("PROCESSKIT_MCP_MODE", "gateway")],
    );
    let mut docs = stdio(
        "docs",
        Origin::Team,
        "true",
        &[],
        &[("ACME_TOKEN", "${ACME_TOKEN}")],
    );
    docs.allowed_tools = vec!["search".into()];
    let issues = remote(
        "issues",
        Origin::Team,
        "http://127.0.0.1:9/mcp",
        &[("Authorization", "Bearer ${ISSUES_TOKEN}")],
    );
    let notes = stdio("my-notes", Origin::Personal, "true", &[], &[]);
    let mut all = vec![gateway, docs, notes];
    if with_issues {
        all.push(issues);
    }
    all
}

/// Registers `servers` into the project at `root`, as `aibox apply` would.
fn apply(root: &Path, servers: &[ServerSpec]) {
    let workspace = root.to_str().unwrap();
    let ledger = fs_err::read_to_string(root.join(LEDGER_PATH))
        .ok()
        .map(|t| Ledger::parse(&t).unwrap());
    let opts = RegisterOptions {
        harnesses: &[
            Harness::Claude,
            Harness::Codex,
            Harness::Gemini,
            Harness::Opencode,
        ],
        permissions: &Permissions::default(),
        workspace,
    };
    let reg = register(servers, &opts, ledger.as_ref(), &mut |p| {
        Ok(fs_err::read_to_string(root.join(p)).ok())
    })
    .unwrap();
    let mut files: Vec<(String, String)> = reg
        .files
        .into_iter()
        .map(|f| (f.path, f.contents))
        .collect();
    files.push((LEDGER_PATH.to_owned(), reg.ledger.render()));
    for (path, text) in files {
        let path = root.join(path);
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(path, text).unwrap();
    }
}

fn run(root: &Path, home: &Path, program: &str, args: &[&str]) -> String {
    let (ok, text) = run_status(root, home, program, args);
    assert!(ok, "{program} {args:?} failed:\n{text}");
    text
}

/// Runs a client; returns whether it exited 0, and stdout + stderr.
fn run_status(root: &Path, home: &Path, program: &str, args: &[&str]) -> (bool, String) {
    run_with(root, home, program, args, &[])
}

/// [`run_status`] with variables `vars` set in the client's environment.
fn run_with(
    root: &Path,
    home: &Path,
    program: &str,
    args: &[&str],
    vars: &[(&str, &str)],
) -> (bool, String) {
    let started = Instant::now();
    let out = Command::new(bin(program))
        .args(args)
        .envs(vars.iter().copied())
        .current_dir(root)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("NO_COLOR", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("CODEX_HOME", root.join(".aibox-home/.codex"))
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env_remove("GEMINI_CLI_TRUST_WORKSPACE")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "{program} {args:?}: {:?}, exit {:?}",
        started.elapsed(),
        out.status.code()
    );
    (out.status.success(), text)
}

/// Server names from the human-readable lists of `claude mcp list` / `gemini mcp list`:
/// lines such as `alpha: true - ⏸ Pending approval` or `○ alpha: true (stdio) - Disabled`.
fn listed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.contains(" - "))
        .filter_map(|l| {
            let l = l.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
            let (name, _) = l.split_once(": ")?;
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                .then(|| name.to_owned())
        })
        .collect()
}

/// Server names from `opencode mcp list`: lines such as `●  ✗ docs failed`.
fn opencode_listed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.trim_start().starts_with('●'))
        .filter_map(|l| l.split_whitespace().nth(2).map(ToOwned::to_owned))
        .collect()
}

fn codex_names(text: &str) -> (BTreeSet<String>, serde_json::Value) {
    let start = text.find('[').expect("codex printed no JSON array");
    let end = text.rfind(']').unwrap();
    let value: serde_json::Value = serde_json::from_str(&text[start..=end]).unwrap();
    let names = value
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    (names, value)
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// What the clients printed in one round.
struct Outputs {
    claude: String,
    claude_get: (bool, String),
    codex: String,
    gemini: String,
    opencode: String,
}

fn run_clients(root: &Path, home: &Path) -> Outputs {
    std::thread::scope(|s| {
        // Two Claude processes would race on the scratch `~/.claude.json`: run them in turn.
        let claude = s.spawn(|| {
            let list = run(root, home, "claude", &["mcp", "list"]);
            (
                list,
                run_status(root, home, "claude", &["mcp", "get", "issues"]),
            )
        });
        let codex = s.spawn(|| run(root, home, "codex", &["mcp", "list", "--json"]));
        let gemini = s.spawn(|| run(root, home, "gemini", &["mcp", "list"]));
        let opencode = s.spawn(|| run(root, home, "opencode", &["mcp", "list"]));
        let (claude, claude_get) = claude.join().unwrap();
        Outputs {
            claude,
            claude_get,
            codex: codex.join().unwrap(),
            gemini: gemini.join().unwrap(),
            opencode: opencode.join().unwrap(),
        }
    })
}

fn find<'a>(servers: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    servers
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap()
}

fn check_round(root: &Path, out: &Outputs, with_issues: bool) {
    let mut expected = set(&["hand-made", "processkit-gateway", "docs", "my-notes"]);
    if with_issues {
        expected.insert("issues".to_owned());
    }
    let Outputs {
        claude,
        claude_get,
        codex,
        gemini,
        opencode,
    } = out;
    // The personal server reaches Codex and Gemini through their container-scoped user
    // configs only; Claude and OpenCode have no such place aibox writes.
    let mut without_personal = expected.clone();
    without_personal.remove("my-notes");
    assert_eq!(
        listed(claude),
        without_personal,
        "claude mcp list:\n{claude}"
    );
    assert_eq!(
        opencode_listed(opencode),
        without_personal,
        "opencode mcp list:\n{opencode}"
    );
    assert_eq!(listed(gemini), expected, "gemini mcp list:\n{gemini}");
    let (names, json) = codex_names(codex);
    assert_eq!(names, expected, "codex mcp list --json:\n{codex}");
    for committed in [
        ".mcp.json",
        ".codex/config.toml",
        ".gemini/settings.json",
        "opencode.json",
    ] {
        let text = fs_err::read_to_string(root.join(committed)).unwrap();
        assert!(
            !text.contains("my-notes"),
            "{committed} holds a personal server:\n{text}"
        );
    }

    // Team approvals wait for folder trust, which aibox never grants.
    let line = |name: &str| {
        claude
            .lines()
            .find(|l| l.starts_with(&format!("{name}: ")))
            .unwrap_or("")
            .to_owned()
    };
    assert!(line("docs").contains("Pending approval"), "{claude}");
    assert!(!claude.to_lowercase().contains("invalid"), "{claude}");

    let gw = find(&json, "processkit-gateway");
    let script = format!(
        "{}/context/skills/processkit/processkit-gateway/mcp/server.py",
        root.display()
    );
    assert_eq!(gw["transport"]["args"][2], script.as_str(), "{codex}");
    assert_eq!(gw["startup_timeout_sec"].as_f64(), Some(90.0), "{codex}");
    assert_eq!(
        find(&json, "docs")["transport"]["env_vars"][0],
        "ACME_TOKEN",
        "{codex}"
    );

    let (get_ok, get) = claude_get;
    assert_eq!(*get_ok, with_issues, "claude mcp get issues:\n{get}");
    if with_issues {
        assert!(get.contains("Project config"), "{get}");
        assert!(
            get.contains("Authorization: Bearer ${ISSUES_TOKEN}"),
            "{get}"
        );
        let issues = find(&json, "issues");
        assert_eq!(
            issues["transport"]["bearer_token_env_var"], "ISSUES_TOKEN",
            "{codex}"
        );
    } else {
        assert!(get.contains("No MCP server named \"issues\""), "{get}");
    }
}

#[test]
fn real_clients_load_exactly_the_registered_servers() {
    for client in ["claude", "codex", "gemini", "opencode"] {
        bin(client);
    }
    let project = tempfile::tempdir().unwrap();
    let root = project.path();
    let home = root.join(".aibox-home");
    fs_err::create_dir_all(&home).unwrap();
    // Claude honours `.claude/settings.local.json` approvals only inside a git work tree,
    // which an aibox project is.
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status();
    assert!(
        git.is_ok_and(|s| s.success()),
        "`git init` failed: install git"
    );
    // The user's own servers, added by hand, must survive every apply.
    let hand = "{\"mcpServers\": {\"hand-made\": {\"command\": \"true\"}}}\n";
    fs_err::write(root.join(".mcp.json"), hand).unwrap();
    fs_err::create_dir_all(root.join(".gemini")).unwrap();
    fs_err::write(root.join(".gemini/settings.json"), hand).unwrap();
    fs_err::create_dir_all(root.join(".codex")).unwrap();
    let codex_text = "# mine\n[mcp_servers.hand-made]\ncommand = \"true\"\n";
    fs_err::write(root.join(".codex/config.toml"), codex_text).unwrap();
    let opencode_text =
        "{\"mcp\": {\"hand-made\": {\"type\": \"local\", \"command\": [\"true\"]}}}\n";
    fs_err::write(root.join("opencode.json"), opencode_text).unwrap();

    // Round 1 registers four servers; round 2 removes `issues` from the configuration.
    for with_issues in [true, false] {
        apply(root, &servers(with_issues));
        let out = run_clients(root, &home);
        check_round(root, &out, with_issues);
    }
    let codex = fs_err::read_to_string(root.join(".codex/config.toml")).unwrap();
    assert!(codex.starts_with("# mine\n"), "{codex}");
}

/// A reference in a command's arguments or in a URL reaches each client in the syntax
/// it expands: the real `OpenCode` resolves its `{env:VAR}` there (`opencode debug
/// config`), where aibox's `${VAR}` stayed that text; Codex, which expands nothing
/// there, does not get the servers (the skip is reported), and the others load them.
#[test]
fn references_in_arguments_and_urls_reach_each_client_expanded() {
    let project = tempfile::tempdir().unwrap();
    let root = project.path();
    let home = root.join(".aibox-home");
    fs_err::create_dir_all(&home).unwrap();
    let servers = [
        stdio(
            "tokened",
            Origin::Team,
            "true",
            &["--token", "${QA_ARG_TOKEN}"],
            &[],
        ),
        remote(
            "keyed",
            Origin::Team,
            "http://127.0.0.1:9/mcp?key=${QA_URL_KEY}",
            &[],
        ),
    ];
    apply(root, &servers);
    let vars = [
        ("QA_ARG_TOKEN", "arg-value-from-env"),
        ("QA_URL_KEY", "url-value-from-env"),
    ];
    let (ok, config) = run_with(root, &home, "opencode", &["debug", "config"], &vars);
    assert!(ok, "opencode debug config:\n{config}");
    assert!(
        config.contains("\"arg-value-from-env\"")
            && config.contains("http://127.0.0.1:9/mcp?key=url-value-from-env"),
        "OpenCode did not expand the references:\n{config}"
    );
    assert!(!config.contains("QA_"), "{config}");
    // No server for Codex, so no container-scoped config either: the folder alone.
    fs_err::create_dir_all(home.join(".codex")).unwrap();
    let codex = run(root, &home, "codex", &["mcp", "list", "--json"]);
    assert_eq!(codex_names(&codex).0, set(&[]), "{codex}");
    let claude = run(root, &home, "claude", &["mcp", "list"]);
    assert_eq!(listed(&claude), set(&["tokened", "keyed"]), "{claude}");
    let gemini = run(root, &home, "gemini", &["mcp", "list"]);
    assert_eq!(listed(&gemini), set(&["tokened", "keyed"]), "{gemini}");
}

/// The backticked spans of `text`.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Every harness command aibox advises (trust scopes, notices, skip reasons, for every
/// harness and origin) exists in the pinned CLI: each subcommand is listed by its
/// parent's `--help`, each `--flag` by the command's own. The pinned `OpenCode` has no
/// approval command (it starts project servers unasked), and Claude's own help says
/// unapproved project servers wait for approval, as aibox's trust text says.
#[test]
fn every_command_aibox_advises_exists_in_the_pinned_clis() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let home = root.join(".aibox-home");
    fs_err::create_dir_all(&home).unwrap();
    let harnesses = Harness::ALL;
    let opts = RegisterOptions {
        harnesses: &harnesses,
        permissions: &Permissions::default(),
        workspace: "/workspace",
    };
    // A personal remote server too: its advice is another form of `claude mcp add`.
    let mut all = servers(true);
    all.push(remote(
        "my-remote",
        Origin::Personal,
        "http://127.0.0.1:9/mcp",
        &[],
    ));
    let reg = register(&all, &opts, None, &mut |_| Ok(None)).unwrap();
    let mut texts = reg.notices.clone();
    for s in &reg.servers {
        texts.push(s.trust_scope.clone());
        texts.extend(s.notes.iter().cloned());
        texts.extend(s.skipped.iter().cloned());
    }
    let word_in = |help: &str, word: &str| {
        help.lines()
            .any(|l| l.split([' ', ',', '[', ']']).any(|w| w == word))
    };
    let mut checked = BTreeSet::new();
    for text in &texts {
        for cmd in backticked(text) {
            let words: Vec<&str> = cmd.split_whitespace().collect();
            if !["claude", "codex", "gemini", "opencode"].contains(&words[0]) {
                continue;
            }
            let path: Vec<&str> = words[1..]
                .iter()
                .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
                .take_while(|w| !w.starts_with('-'))
                .copied()
                .collect();
            for i in 0..path.len() {
                let mut args = path[..i].to_vec();
                args.push("--help");
                let help = run(root, &home, words[0], &args);
                assert!(
                    word_in(&help, path[i]),
                    "aibox advises `{cmd}`, but `{} {}` has no `{}`:\n{help}",
                    words[0],
                    args.join(" "),
                    path[i]
                );
            }
            let mut args = path.clone();
            args.push("--help");
            let help = run(root, &home, words[0], &args);
            for flag in words.iter().filter(|w| w.starts_with("--") && w.len() > 2) {
                assert!(
                    help.contains(flag),
                    "aibox advises `{cmd}`: no {flag}:\n{help}"
                );
            }
            checked.insert(cmd.to_owned());
        }
    }
    assert!(
        !checked.is_empty(),
        "no harness command found in {texts:#?}"
    );
    assert!(
        checked.iter().all(|c| !c.contains("approve")),
        "an approval command is advised: {checked:?}"
    );
    let opencode = run(root, &home, "opencode", &["mcp", "--help"]);
    assert!(!word_in(&opencode, "approve"), "{opencode}");
    let claude = run(root, &home, "claude", &["mcp", "--help"]);
    assert!(claude.contains("Pending approval"), "{claude}");
    for cli in ["codex", "gemini"] {
        let help = run(root, &home, cli, &["mcp", "--help"]);
        assert!(!word_in(&help, "approve"), "{cli}: {help}");
    }
}
