//! The `mcp-dependencies` check: registered MCP servers whose Python dependencies are
//! not locked (they resolve floating ranges at start), and servers left unregistered
//! because their declaration has no solution.

use aibox_policy::{Finding, Severity};

use crate::resolve::{ProcesskitState, Resolved};

/// Findings from the environments resolve locked (offline: from the lock and the
/// resolution cache only).
pub(crate) fn findings(resolved: &Resolved) -> Vec<Finding> {
    let ProcesskitState::Resolved(release) = &resolved.processkit else {
        return Vec::new();
    };
    let envs = &release.mcp_envs;
    let mut out = Vec::new();
    for (name, why) in &envs.broken {
        out.push(Finding::new(
            "aibox::doctor::mcp_unresolvable",
            Severity::Warning,
            "aibox.lock",
            format!(
                "MCP server `{name}` is not registered: {}",
                why.trim_end_matches('.')
            ),
            "its skill declares dependencies that cannot be installed; fix its PEP 723 \
             `dependencies` (or ask its authors to), then run `aibox apply`",
        ));
    }
    if !envs.unlocked.is_empty() {
        let names: Vec<&str> = envs.unlocked.keys().map(String::as_str).collect();
        out.push(Finding::new(
            "aibox::doctor::mcp_unlocked",
            Severity::Warning,
            "aibox.lock",
            format!(
                "{} MCP server(s) start with unlocked dependencies (whatever their ranges \
                 resolve to at start): {}",
                names.len(),
                names.join(", ")
            ),
            "run `aibox apply` with `uv` on PATH (or `AIBOX_UV` set to it) and network access \
             to the package index: it locks them in aibox.lock and the image installs them",
        ));
    }
    out
}
