//! Keeping personal and local state out of git.
//!
//! [`merge_gitignore`] adds every path of [`LOCAL_STATE_PATHS`] that a `.gitignore` does
//! not already cover. It never edits, removes or reorders the user's lines: missing
//! entries go into a block marked as aibox's, appended at the end (or into that block
//! when it already exists).

/// Paths that can hold personal data, secrets or machine state: the gitignored and
/// container-scoped rows of the file table ([`crate::layout::FILES`]).
pub use crate::layout::LOCAL_STATE_PATHS;

/// Whether a clean root-relative file path (with `/` separators) is local state: covered
/// ([`crate::layout::covers`]) by one of [`LOCAL_STATE_PATHS`], so it never reaches git.
/// `apply --check` judges only the other (committed) files, because a fresh clone has
/// none of these.
pub fn is_local_state(path: &str) -> bool {
    LOCAL_STATE_PATHS
        .iter()
        .any(|entry| crate::layout::covers(entry, path))
}

/// First line of aibox's block.
pub const BLOCK_START: &str =
    "# >>> aibox: local state, may hold personal data (keep out of git) >>>";
/// Last line of aibox's block.
pub const BLOCK_END: &str = "# <<< aibox <<<";

/// Normalises a pattern for comparison: no leading `/` (gitignore anchors any pattern
/// with an inner slash anyway, and a root-anchored pattern still covers our root path).
fn norm(p: &str) -> &str {
    p.strip_prefix('/').unwrap_or(p)
}

/// Whether an existing pattern line already covers `entry`, or the user explicitly
/// un-ignored it (`!entry`), which we respect.
fn covered(line: &str, entry: &str) -> bool {
    let line = line.trim();
    let line = line.strip_prefix('!').unwrap_or(line);
    let (line, entry) = (norm(line), norm(entry));
    if line == entry {
        return true;
    }
    // `x` ignores the file or directory `x`, so it covers `x/`; `x/` does not cover
    // a file `x`.
    entry.strip_suffix('/').is_some_and(|dir| line == dir)
}

/// The lines of `existing` that un-ignore local state (`!.aibox-local.toml`, or a path
/// inside a local-state folder): 1-based line number, the line, and the entry it
/// re-includes. `merge_gitignore` respects them, so `apply` can only say so. (Patterns
/// under a `**/` entry are left to doctor, which asks git.)
pub fn reincluded(existing: &str) -> Vec<(usize, String, &'static str)> {
    let mut out = Vec::new();
    for (i, raw) in existing.lines().enumerate() {
        let Some(pattern) = raw.trim().strip_prefix('!') else {
            continue;
        };
        let p = norm(pattern.trim());
        let hit = LOCAL_STATE_PATHS.iter().copied().find(|entry| {
            let e = norm(entry);
            p == e
                || e.strip_suffix('/') == Some(p.trim_end_matches('/'))
                || (e.ends_with('/') && p.starts_with(e))
        });
        if let Some(entry) = hit {
            out.push((i + 1, raw.trim().to_owned(), entry));
        }
    }
    out
}

/// The entries of [`LOCAL_STATE_PATHS`] that `existing` does not cover.
pub fn missing_entries(existing: &str) -> Vec<&'static str> {
    let lines: Vec<&str> = existing
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    LOCAL_STATE_PATHS
        .iter()
        .copied()
        .filter(|entry| !lines.iter().any(|l| covered(l, entry)))
        .collect()
}

/// Entries older versions put into aibox's block that must now be committed: the
/// project MCP files, which hold only team and processkit servers.
pub const OBSOLETE_ENTRIES: &[&str] = &[
    crate::layout::CLAUDE_MCP_JSON,
    crate::layout::CODEX_CONFIG,
    crate::layout::CURSOR_MCP,
    crate::layout::GEMINI_SETTINGS,
];

/// `text` without [`OBSOLETE_ENTRIES`] lines inside aibox's own block (the user's lines
/// elsewhere are never touched).
fn without_obsolete(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_block = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_end();
        if trimmed == BLOCK_START {
            in_block = true;
        } else if trimmed == BLOCK_END {
            in_block = false;
        } else if in_block && OBSOLETE_ENTRIES.contains(&trimmed) {
            continue;
        }
        out.push_str(line);
    }
    out
}

/// New `.gitignore` text covering every local-state path (and no longer ignoring the
/// project MCP files in aibox's block), or `None` when nothing changes. `existing` is the
/// current file (`None` when there is none).
pub fn merge_gitignore(existing: Option<&str>) -> Option<String> {
    let original = existing.unwrap_or("");
    let cleaned = without_obsolete(original);
    let text = cleaned.as_str();
    let missing = missing_entries(text);
    if missing.is_empty() {
        return (cleaned != original).then_some(cleaned);
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let end = lines.iter().position(|l| l.trim_end() == BLOCK_END);
    let start = lines.iter().position(|l| l.trim_end() == BLOCK_START);
    let mut out = String::with_capacity(text.len() + 512);
    if let (Some(s), Some(e)) = (start, end)
        && s < e
    {
        // Extend our own block in place; everything else stays byte-identical.
        for l in &lines[..e] {
            out.push_str(l);
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
        for m in &missing {
            out.push_str(m);
            out.push('\n');
        }
        for l in &lines[e..] {
            out.push_str(l);
        }
        return Some(out);
    }
    out.push_str(text);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(BLOCK_START);
    out.push('\n');
    for m in &missing {
        out.push_str(m);
        out.push('\n');
    }
    out.push_str(BLOCK_END);
    out.push('\n');
    Some(out)
}
