//! `aibox apply` registers MCP servers through the `mcp` plan source: merged harness
//! files and the ledger are written, a second apply changes nothing, a removed server
//! is pruned, and an unparsable harness file stops the apply untouched.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use aibox_engine::{ApplyOptions, apply};
use common::Fixture;

const TOML: &str = r#"[container]
name = "demo"

[context]
mode = "harness-only"

[ai]
harnesses = ["claude", "codex", "gemini", "vscode"]

[[ai.mcp.servers]]
name = "docs"
command = "npx"
args = ["-y", "@acme/docs-mcp@1.4.2"]
env = { ACME_TOKEN = "${ACME_TOKEN}" }
allowed_tools = ["search"]

[[ai.mcp.servers]]
name = "issues"
url = "https://mcp.example.invalid/mcp"
headers = { Authorization = "Bearer ${ISSUES_TOKEN}" }
"#;

const LOCAL: &str = r#"[[mcp.servers]]
name = "my-notes"
command = "node"
args = ["./tools/notes.js"]
"#;

fn fixture() -> Fixture {
    let f = Fixture::with(TOML);
    f.write(".aibox-local.toml", LOCAL);
    f
}

#[test]
fn apply_registers_prunes_and_is_idempotent() {
    let f = fixture();
    f.write(".gemini/settings.json", "{\"ui\": {\"theme\": \"x\"}}\n");
    apply(&f.root, &ApplyOptions::default()).unwrap();

    let mcp: serde_json::Value = serde_json::from_str(&f.read(".mcp.json")).unwrap();
    let names: Vec<&String> = mcp["mcpServers"].as_object().unwrap().keys().collect();
    // `.mcp.json` is committed: team servers only; the personal one goes to the
    // container-scoped Codex and Gemini user configs.
    assert_eq!(names, ["docs", "issues"]);
    let settings = f.read(".claude/settings.json");
    assert!(settings.contains("mcp__docs__search") && !settings.contains("my-notes"));
    for committed in [".codex/config.toml", ".gemini/settings.json"] {
        assert!(!f.read(committed).contains("my-notes"), "{committed}");
    }
    assert!(
        f.read(".aibox-home/.codex/config.toml")
            .contains("[mcp_servers.my-notes]")
    );
    assert!(
        f.read(".aibox-home/.gemini/settings.json")
            .contains("my-notes")
    );
    assert!(
        f.read(".codex/config.toml")
            .contains("[mcp_servers.issues]")
    );
    assert!(
        f.read(".aibox-home/.codex/config.toml")
            .contains("[projects.\"/workspace\"]")
    );
    assert!(f.read(".gemini/settings.json").contains("\"theme\": \"x\""));
    assert!(
        !f.read(".vscode/mcp.json").contains("my-notes"),
        "personal server in a committed file"
    );
    assert!(f.read(".aibox/mcp-ledger.json").contains("my-notes"));

    let again = apply(&f.root, &ApplyOptions::default()).unwrap();
    let changed: Vec<_> = again
        .files
        .iter()
        .filter(|r| r.action.changes())
        .map(|r| r.path.clone())
        .collect();
    assert!(changed.is_empty(), "second apply changed {changed:?}");

    // Remove `issues` from aibox.toml: gone from every harness file on the next apply.
    let cut = TOML
        .split("[[ai.mcp.servers]]\nname = \"issues\"")
        .next()
        .unwrap();
    f.write("aibox.toml", cut);
    apply(&f.root, &ApplyOptions::default()).unwrap();
    for path in [
        ".mcp.json",
        ".codex/config.toml",
        ".gemini/settings.json",
        ".vscode/mcp.json",
    ] {
        assert!(
            !f.read(path).contains("issues"),
            "{path} still lists `issues`"
        );
    }
    assert!(f.read(".gemini/settings.json").contains("\"theme\": \"x\""));

    // Claude alone: the other harnesses' committed files aibox emptied are removed, a
    // file that holds the user's own settings stays with them.
    f.write(
        "aibox.toml",
        &cut.replace(
            "harnesses = [\"claude\", \"codex\", \"gemini\", \"vscode\"]",
            "harnesses = [\"claude\"]",
        ),
    );
    apply(&f.root, &ApplyOptions::default()).unwrap();
    for gone in [".codex/config.toml", ".vscode/mcp.json"] {
        assert!(!f.root.join(gone).exists(), "{gone} was left behind");
    }
    let gemini = f.read(".gemini/settings.json");
    assert!(
        gemini.contains("\"theme\": \"x\"") && !gemini.contains("docs"),
        "{gemini}"
    );
    assert!(f.read(".mcp.json").contains("docs"));
    assert!(
        !apply(&f.root, &ApplyOptions::default()).unwrap().changed(),
        "no-op"
    );
}

#[test]
fn unparsable_harness_file_stops_apply_and_stays_untouched() {
    let f = fixture();
    let broken = "{\n  \"mcpServers\": {\n    \"mine\": { \"command\": \"x\" },,\n  }\n}\n";
    f.write(".mcp.json", broken);
    let err = apply(&f.root, &ApplyOptions::default()).unwrap_err();
    let text = format!("{err:?}");
    assert!(
        text.contains(".mcp.json") && text.contains("line 3"),
        "{text}"
    );
    let code = miette::Diagnostic::code(&err).map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("aibox::mcp::unparsable_target"));
    assert_eq!(f.read(".mcp.json"), broken);
    assert!(
        !f.path(".codex/config.toml").exists(),
        "nothing may be written"
    );
}

/// A project where aibox registers no MCP server, with one added to `.mcp.json` by hand:
/// the first apply says once that, without a ledger, the entry is kept as not aibox's,
/// and records that in an empty ledger (through the plan, like every write), so later
/// applies keep the entry without saying it again. A dry run writes no ledger.
#[test]
fn the_no_ledger_warning_is_given_once_when_aibox_registers_nothing() {
    let f = Fixture::with(
        "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n\
         [ai]\nharnesses = [\"claude\"]\n",
    );
    let hand = "{\"mcpServers\":{\"mine\":{\"command\":\"my-server\",\"args\":[]}}}\n";
    f.write(".mcp.json", hand);
    let said = |report: &aibox_engine::ApplyReport| {
        report
            .warnings
            .iter()
            .filter(|w| w.contains("no MCP ledger") && w.contains("`mine`"))
            .count()
    };
    let dry = ApplyOptions {
        dry_run: true,
        ..ApplyOptions::default()
    };
    assert_eq!(said(&apply(&f.root, &dry).unwrap()), 1);
    assert!(!f.path(".aibox/mcp-ledger.json").exists());
    assert_eq!(said(&apply(&f.root, &ApplyOptions::default()).unwrap()), 1);
    let ledger = aibox_mcp_registration::Ledger::parse(&f.read(".aibox/mcp-ledger.json"));
    assert_eq!(ledger.unwrap(), aibox_mcp_registration::Ledger::new());
    for _ in 0..2 {
        let report = apply(&f.root, &ApplyOptions::default()).unwrap();
        assert_eq!(said(&report), 0, "{:?}", report.warnings);
        assert_eq!(f.read(".mcp.json"), hand);
    }
}

#[test]
fn literal_secret_in_team_server_is_refused() {
    let f = Fixture::with(&TOML.replace("${ACME_TOKEN}", "plain-value"));
    let err = apply(&f.root, &ApplyOptions::default()).unwrap_err();
    let code = miette::Diagnostic::code(&err).map(|c| c.to_string());
    // Caught by the configuration check that `config set` and `config validate` share.
    assert_eq!(
        code.as_deref(),
        Some("aibox::config::literal_secret"),
        "{err:?}"
    );
    assert!(!f.path(".mcp.json").exists());
}

#[test]
fn effective_servers_for_mcp_list() {
    let f = fixture();
    let list = aibox_engine::mcp_list(&f.root).unwrap();
    assert!(list.not_resolved.is_none());
    let rows = list.servers;
    assert_eq!(rows.len(), 4 * 3, "4 harnesses x 3 servers");
    let personal_vscode = rows
        .iter()
        .find(|r| r.harness == aibox_config::Harness::Vscode && r.name == "my-notes")
        .unwrap();
    assert!(personal_vscode.skipped.is_some());
    let json = serde_json::to_value(&rows).unwrap();
    assert_eq!(json[0]["origin"], "team");
}

/// VS Code and Gemini CLI files with `//` comments are merged (not refused), keeping
/// every comment, and the next apply changes nothing.
#[test]
fn commented_harness_files_are_merged_keeping_comments() {
    let f = fixture();
    let vscode = "// team servers\n{\n  \"servers\": {\n    // mine\n    \"mine\": { \"type\": \"stdio\", \"command\": \"echo\" },\n  },\n}\n";
    let gemini = "{\n  // look\n  \"ui\": { \"theme\": \"x\" } /* dark */\n}\n";
    f.write(".vscode/mcp.json", vscode);
    f.write(".gemini/settings.json", gemini);
    apply(&f.root, &ApplyOptions::default()).unwrap();
    let v = f.read(".vscode/mcp.json");
    for kept in ["// team servers", "// mine", "\"mine\""] {
        assert!(v.contains(kept), "lost {kept}:\n{v}");
    }
    assert!(v.contains("\"docs\""), "{v}");
    let g = f.read(".gemini/settings.json");
    for kept in ["// look", "/* dark */", "\"theme\": \"x\""] {
        assert!(g.contains(kept), "lost {kept}:\n{g}");
    }
    assert!(g.contains("\"docs\""), "{g}");
    let again = apply(&f.root, &ApplyOptions::default()).unwrap();
    assert!(!again.changed(), "{:?}", again.files);
}

/// `default_mode = "allow"` with a glob deny: Claude rules cannot express the glob, so
/// registering would allow every tool. `apply` refuses it and names the fix; exact tool
/// names are enforced and pass.
#[test]
fn a_deny_that_cannot_be_enforced_is_an_apply_error() {
    let toml = "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n\
                [ai]\nharnesses = [\"claude\"]\n\n[ai.mcp.permissions]\ndefault_mode = \"allow\"\n\
                deny_patterns = [\"delete_*\"]\n\n[[ai.mcp.servers]]\nname = \"docs\"\ncommand = \"true\"\n";
    let f = Fixture::with(toml);
    let err = apply(&f.root, &ApplyOptions::default()).unwrap_err();
    let code = miette::Diagnostic::code(&err).map(|c| c.to_string());
    assert_eq!(
        code.as_deref(),
        Some("aibox::mcp::unenforceable_deny"),
        "{err:?}"
    );
    let text = format!("{err}");
    assert!(
        text.contains("delete_*") && text.contains("claude"),
        "{text}"
    );
    assert!(!f.path(".mcp.json").exists(), "nothing may be written");

    f.write("aibox.toml", &toml.replace("delete_*", "delete_page"));
    apply(&f.root, &ApplyOptions::default()).unwrap();
    let settings = f.read(".claude/settings.json");
    assert!(settings.contains("mcp__docs__delete_page"), "{settings}");
}

/// A server added to `.mcp.json` by hand is not replaced when `aibox.toml` gains a team
/// server of the same name: `apply` refuses, names both origins, and keeps the file.
#[test]
fn a_hand_added_server_is_not_replaced_by_a_same_named_team_server() {
    let toml = "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"claude\"]\n\n[[ai.mcp.servers]]\nname = \"first\"\ncommand = \"npx\"\nargs = [\"-y\", \"first-mcp@1.0.0\"]\n";
    let f = Fixture::with(toml);
    apply(&f.root, &ApplyOptions::default()).unwrap();
    // A teammate's hand edit: a server with its own environment.
    let mut mcp: serde_json::Value = serde_json::from_str(&f.read(".mcp.json")).unwrap();
    mcp["mcpServers"]["docs"] = serde_json::json!({
        "command": "node",
        "args": ["./my-docs.js"],
        "env": {"DOCS_HOME": "/srv/docs"}
    });
    let hand = serde_json::to_string_pretty(&mcp).unwrap();
    f.write(".mcp.json", &hand);
    f.write(
        "aibox.toml",
        &format!("{toml}\n[[ai.mcp.servers]]\nname = \"docs\"\ncommand = \"npx\"\nargs = [\"-y\", \"docs-mcp@1.0.0\"]\n"),
    );
    let err = apply(&f.root, &ApplyOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("added by hand") && text.contains("`docs`"),
        "{text}"
    );
    assert!(text.contains("aibox.toml [[ai.mcp.servers]]"), "{text}");
    assert_eq!(
        f.read(".mcp.json"),
        hand,
        "the hand-written entry was changed"
    );
}

/// The same for Codex's TOML: a hand-added `[mcp_servers.docs]` with its `env` table is
/// kept byte for byte when `aibox.toml` gains a team server `docs`, and the clash is
/// reported as for the JSON files; once renamed, both servers live side by side.
#[test]
fn a_hand_added_codex_server_is_not_replaced_by_a_same_named_team_server() {
    let toml = "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"codex\"]\n\n[[ai.mcp.servers]]\nname = \"first\"\ncommand = \"npx\"\nargs = [\"-y\", \"first-mcp@1.0.0\"]\n";
    let f = Fixture::with(toml);
    apply(&f.root, &ApplyOptions::default()).unwrap();
    let generated = f.read(".codex/config.toml");
    assert!(generated.contains("[mcp_servers.first]"), "{generated}");
    // A teammate's hand edit, comments and all.
    let hand = format!(
        "{generated}\n# our docs server, do not touch\n[mcp_servers.docs]\ncommand = \"node\"\nargs = [\"./my-docs.js\"]\n\n[mcp_servers.docs.env]\nDOCS_HOME = \"/srv/docs\"\n"
    );
    f.write(".codex/config.toml", &hand);
    let team_docs = "\n[[ai.mcp.servers]]\nname = \"docs\"\ncommand = \"npx\"\nargs = [\"-y\", \"docs-mcp@1.0.0\"]\n";
    f.write("aibox.toml", &format!("{toml}{team_docs}"));
    let err = apply(&f.root, &ApplyOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("`.codex/config.toml`")
            && text.contains("added by hand")
            && text.contains("`docs`")
            && text.contains("aibox.toml [[ai.mcp.servers]]"),
        "{text}"
    );
    let code = miette::Diagnostic::code(&err).map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("aibox::mcp::hand_entry_clash"));
    assert_eq!(
        f.read(".codex/config.toml"),
        hand,
        "the hand-written entry was changed"
    );

    // The team renames its server: the hand-written one stays exactly as it was.
    f.write(
        "aibox.toml",
        &format!("{toml}{}", team_docs.replace("\"docs\"", "\"team-docs\"")),
    );
    apply(&f.root, &ApplyOptions::default()).unwrap();
    let after = f.read(".codex/config.toml");
    assert!(
        after.contains("# our docs server, do not touch\n[mcp_servers.docs]\ncommand = \"node\"\nargs = [\"./my-docs.js\"]\n\n[mcp_servers.docs.env]\nDOCS_HOME = \"/srv/docs\"\n"),
        "{after}"
    );
    assert!(after.contains("[mcp_servers.team-docs]"), "{after}");
    // The next apply leaves both as they are.
    apply(&f.root, &ApplyOptions::default()).unwrap();
    assert_eq!(f.read(".codex/config.toml"), after);
}

/// A team server `apply` did not register (npm says its package does not exist) is
/// `not registered` in `mcp list`, with apply's reason, for every harness: the list
/// follows what apply wrote (the ledger), not the configuration. Once it resolves, it is
/// registered and listed with its file again. (npm is a stand-in script answering as npm
/// does for a package its registry does not have: no network.)
#[test]
fn mcp_list_shows_a_team_server_apply_did_not_register() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = fixture();
    let npm = f.path("bin/npm");
    f.write(
        "bin/npm",
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 10.9.2; exit 0; fi\n\
         echo 'npm error code E404' >&2\n\
         echo 'npm error 404 Not Found - GET http://127.0.0.1:9/@acme%2fdocs-mcp - Not found' >&2\n\
         exit 1\n",
    );
    fs_err::set_permissions(&npm, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut options = ApplyOptions::default();
    options.plan.npm_resolver =
        aibox_engine::mcp_resolver::Resolver::Path(npm.clone().into_std_path_buf());
    let report = apply(&f.root, &options).unwrap();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("`docs` is not registered")),
        "{:?}",
        report.warnings
    );
    assert!(!f.read(".mcp.json").contains("docs"));

    let list = aibox_engine::mcp_list(&f.root).unwrap();
    let docs: Vec<_> = list.servers.iter().filter(|s| s.name == "docs").collect();
    assert_eq!(docs.len(), 4, "{docs:?}");
    for s in docs {
        let why = s.skipped.as_deref().unwrap_or_default();
        assert!(
            why.contains("npm cannot find @acme/docs-mcp@1.4.2 (E404)"),
            "{s:?}"
        );
        assert_eq!(s.target_file, None, "{s:?}");
    }
    let issues = list.servers.iter().find(|s| s.name == "issues").unwrap();
    assert!(issues.skipped.is_none(), "{issues:?}");

    // Without npm it is registered unlocked, and listed as registered again.
    options.plan.npm_resolver = aibox_engine::mcp_resolver::Resolver::Off;
    fs_err::remove_file(f.path("aibox.lock")).unwrap();
    apply(&f.root, &options).unwrap();
    assert!(f.read(".mcp.json").contains("docs"));
    let list = aibox_engine::mcp_list(&f.root).unwrap();
    let docs = list.servers.iter().find(|s| s.name == "docs").unwrap();
    assert!(docs.skipped.is_none(), "{docs:?}");
    assert_eq!(docs.target_file.as_deref(), Some(".mcp.json"));
}

/// A registered entry edited by hand: this checkout's `apply` keeps it (its ledger tells
/// the edit apart), but `apply --check` judges the file as a fresh clone does, which has
/// no ledger and writes the entry again: stale, on the author's checkout and on the
/// clone alike (the QA saw 0 here and 1 there), with a warning that says why.
#[test]
fn a_hand_edited_entry_gets_the_same_check_verdict_as_on_a_fresh_clone() {
    let f = fixture();
    apply(&f.root, &ApplyOptions::default()).unwrap();
    let edited = f.read(".mcp.json").replacen(
        "\"command\": \"npx\"",
        "\"command\": \"npx\",\n      \"timeout\": 30000",
        1,
    );
    assert!(edited.contains("30000"));
    f.write(".mcp.json", &edited);
    let check = ApplyOptions {
        check: true,
        ..ApplyOptions::default()
    };
    let report = apply(&f.root, &check).unwrap();
    assert!(
        report
            .files
            .iter()
            .any(|r| r.path == ".mcp.json" && r.action.changes()),
        "{report:?}"
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("of a fresh clone (CI, a teammate) writes the entry again")),
        "{:?}",
        report.warnings
    );
    // This checkout's apply keeps the edit, as before.
    apply(&f.root, &ApplyOptions::default()).unwrap();
    assert!(f.read(".mcp.json").contains("30000"));
    // The same commit without the ledger, as a clone has it: the same verdict.
    fs_err::remove_file(f.root.join(".aibox/mcp-ledger.json")).unwrap();
    let clone = apply(&f.root, &check).unwrap();
    assert!(
        clone
            .files
            .iter()
            .any(|r| r.path == ".mcp.json" && r.action.changes())
    );
}

/// A remote server whose headers would cross the network in clear is named at apply; one
/// on this machine, or over `https://`, is not.
#[test]
fn headers_sent_over_plain_http_are_named() {
    let toml = TOML.to_owned()
        + "\n[[ai.mcp.servers]]\nname = \"plain\"\nurl = \"http://insecure.example.invalid/mcp\"\n\
           headers = { Authorization = \"Bearer ${TOK}\" }\n\n\
           [[ai.mcp.servers]]\nname = \"local\"\nurl = \"http://127.0.0.1:8808/mcp\"\n\
           headers = { Authorization = \"Bearer ${TOK}\" }\n";
    let f = Fixture::with(&toml);
    let report = apply(&f.root, &ApplyOptions::default()).unwrap();
    let clear: Vec<&String> = report
        .warnings
        .iter()
        .filter(|w| w.contains("over plain `http://`"))
        .collect();
    assert_eq!(clear.len(), 1, "{:?}", report.warnings);
    assert!(clear[0].contains("`plain`"), "{clear:?}");
}
