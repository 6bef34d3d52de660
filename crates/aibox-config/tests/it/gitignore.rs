//! `.gitignore` merging: user lines untouched, missing entries appended once.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aibox_config::gitignore::{BLOCK_END, BLOCK_START, missing_entries};
use aibox_config::{LOCAL_STATE_PATHS, merge_gitignore};

#[test]
fn fresh_file_gets_every_entry() {
    let out = merge_gitignore(None).unwrap();
    for entry in LOCAL_STATE_PATHS {
        assert!(out.lines().any(|l| l == *entry), "{entry} missing");
    }
    assert!(out.starts_with(BLOCK_START));
    assert!(out.ends_with(&format!("{BLOCK_END}\n")));
    assert_eq!(
        merge_gitignore(Some(&out)),
        None,
        "second run must be a no-op"
    );
    insta::assert_snapshot!(out);
}

#[test]
fn user_lines_survive_byte_for_byte() {
    let user = "# build output\n/target\n\n*.log   \n!keep.log\n.env"; // no final newline
    let out = merge_gitignore(Some(user)).unwrap();
    assert!(out.starts_with(user), "user text must be a prefix:\n{out}");
    assert_eq!(&out[user.len()..user.len() + 2], "\n\n");
    assert_eq!(merge_gitignore(Some(&out)), None);
}

#[test]
fn equivalent_forms_count_as_present() {
    let user = "/.aibox-local.toml\n.aibox-home\n/.aibox/\ncontext/.cache/\n/.claude/settings.local.json\n";
    let missing = missing_entries(user);
    for present in [
        ".aibox-local.toml",
        ".aibox-home/",
        ".aibox/",
        "context/.cache/",
        ".claude/settings.local.json",
    ] {
        assert!(
            !missing.contains(&present),
            "{present} should count as present"
        );
    }
    // A directory pattern does not cover a file of the same name.
    assert!(missing_entries(".aibox-local.env/\n").contains(&".aibox-local.env"));
    // Comments are not patterns.
    assert!(missing_entries("# .aibox-local.env\n").contains(&".aibox-local.env"));
}

#[test]
fn explicit_unignore_is_respected() {
    let user = "!.claude/settings.local.json\n";
    let out = merge_gitignore(Some(user)).unwrap();
    assert!(
        !out.lines().any(|l| l == ".claude/settings.local.json"),
        "{out}"
    );
}

#[test]
fn project_mcp_files_are_committed_so_a_fresh_clone_sees_team_servers() {
    let out = merge_gitignore(None).unwrap();
    for committed in [
        ".mcp.json",
        ".codex/config.toml",
        ".gemini/settings.json",
        ".cursor/mcp.json",
        "opencode.json",
        ".vscode/mcp.json",
        ".devcontainer/docker-compose.yml",
    ] {
        assert!(!out.lines().any(|l| l == committed), "{committed}:\n{out}");
    }
    assert!(out.lines().any(|l| l == ".claude/settings.local.json"));
}

#[test]
fn existing_block_is_extended_in_place() {
    let old =
        format!("node_modules/\n\n{BLOCK_START}\n.aibox-local.toml\n{BLOCK_END}\n# mine\nfoo\n");
    let out = merge_gitignore(Some(&old)).unwrap();
    assert!(out.starts_with(&format!(
        "node_modules/\n\n{BLOCK_START}\n.aibox-local.toml\n.aibox-local.env\n"
    )));
    assert!(
        out.ends_with(&format!("{BLOCK_END}\n# mine\nfoo\n")),
        "{out}"
    );
    assert_eq!(out.matches(BLOCK_START).count(), 1);
    assert_eq!(merge_gitignore(Some(&out)), None);
}

#[test]
fn complete_file_is_left_alone() {
    let all = LOCAL_STATE_PATHS.join("\n") + "\n";
    assert_eq!(merge_gitignore(Some(&all)), None);
}

#[test]
fn local_state_paths_are_recognised() {
    use aibox_config::is_local_state;
    for local in [
        ".aibox-local.env",
        ".devcontainer/docker-compose.local.yml",
        ".aibox/mcp-ledger.json",
        ".aibox-home/.codex/config.toml",
        ".claude/settings.local.json",
        "context/private/notes.md",
        "context/team/private/x.md",
    ] {
        assert!(is_local_state(local), "{local}");
    }
    for committed in [
        ".mcp.json",
        ".devcontainer/docker-compose.yml",
        "aibox.lock",
        ".aibox-local.toml.example",
        "context/skills/x/SKILL.md",
    ] {
        assert!(!is_local_state(committed), "{committed}");
    }
}

/// Projects made by older versions ignored the project MCP files in aibox's block; the
/// next merge drops those lines (only inside the block), so the team files get committed.
#[test]
fn obsolete_entries_leave_aibox_block_only() {
    let fresh = merge_gitignore(None).unwrap();
    let old = format!(
        "/.mcp.json-user-line\n.gemini/settings.json\n\n{}",
        fresh.replace(
            ".claude/settings.local.json\n",
            ".mcp.json\n.claude/settings.local.json\n.codex/config.toml\n.cursor/mcp.json\n.gemini/settings.json\n"
        )
    );
    let new = merge_gitignore(Some(&old)).unwrap();
    let block = &new[new.find(BLOCK_START).unwrap()..];
    for gone in [
        ".mcp.json",
        ".codex/config.toml",
        ".cursor/mcp.json",
        ".gemini/settings.json",
    ] {
        assert!(
            !block.lines().any(|l| l == gone),
            "{gone} still ignored:\n{new}"
        );
    }
    // The user's own line outside the block stays.
    assert!(
        new.starts_with("/.mcp.json-user-line\n.gemini/settings.json\n"),
        "{new}"
    );
    assert_eq!(merge_gitignore(Some(&new)), None);
}

/// A user's `!pattern` that re-includes local state is kept, and named.
#[test]
fn reincluded_local_state_is_named_with_its_line() {
    let text = "target/\n!.aibox-local.toml\n# !.aibox/ is a comment\n!/.aibox/mcp-ledger.json\n!src/keep.rs\n";
    let hits = aibox_config::gitignore::reincluded(text);
    assert_eq!(
        hits,
        [
            (2, "!.aibox-local.toml".to_owned(), ".aibox-local.toml"),
            (4, "!/.aibox/mcp-ledger.json".to_owned(), ".aibox/"),
        ]
    );
    // The merge respects it: the line stays.
    let merged = aibox_config::merge_gitignore(Some(text)).unwrap();
    assert!(merged.contains("!.aibox-local.toml\n"), "{merged}");
}
