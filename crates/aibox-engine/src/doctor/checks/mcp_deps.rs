//! The `mcp-dependencies` check: registered MCP servers whose dependencies are not locked
//! (Python servers that resolve floating ranges at start, team `npx` servers whose tree
//! npx fetches unverified, team `uvx` servers uvx resolves at start), and servers left unregistered because their dependencies
//! cannot be installed.

use std::collections::BTreeMap;

use aibox_policy::{Finding, Severity};

use crate::resolve::{ProcesskitState, Resolved};

/// Findings from the environments and trees resolve locked (offline: from the lock and
/// the resolution cache only).
pub(crate) fn findings(resolved: &Resolved) -> Vec<Finding> {
    let mut out = Vec::new();
    if let ProcesskitState::Resolved(release) = &resolved.processkit {
        python(&release.mcp_envs, &mut out);
    }
    npm(&resolved.mcp_npm, &mut out);
    uvx(&resolved.mcp_uvx, &mut out);
    out
}

fn uvx(envs: &crate::mcp_uvx::UvxEnvs, out: &mut Vec<Finding>) {
    team(
        (&envs.envs.broken, &envs.envs.unlocked),
        [
            "its `uvx` package, version or dependencies cannot be installed; fix it in \
             aibox.toml [[ai.mcp.servers]], then run `aibox apply`",
            "uvx MCP server(s) resolve their dependencies at start, to whatever is newest \
             then",
            "run `aibox apply` with `uv` on PATH (or `AIBOX_UV` set to it) and network access \
             to the package index: it locks them in aibox.lock and the image installs them",
        ],
        out,
    );
}

/// The findings of a team server locker: the servers not registered (`broken`, name →
/// why) and those registered unlocked (`unlocked`); `[broken fix, what the unlocked ones
/// do, unlocked fix]`.
fn team(
    (broken, unlocked): (&BTreeMap<String, String>, &BTreeMap<String, String>),
    [broken_fix, unlocked_do, unlocked_fix]: [&str; 3],
    out: &mut Vec<Finding>,
) {
    for (name, why) in broken {
        out.push(Finding::new(
            "aibox::doctor::mcp_unresolvable",
            Severity::Warning,
            "aibox.toml",
            format!(
                "MCP server `{name}` is not registered: {}",
                why.trim_end_matches('.')
            ),
            broken_fix,
        ));
    }
    if !unlocked.is_empty() {
        let list: Vec<String> = unlocked
            .iter()
            .map(|(name, why)| format!("{name} ({})", why.trim_end_matches('.')))
            .collect();
        out.push(Finding::new(
            "aibox::doctor::mcp_unlocked",
            Severity::Warning,
            "aibox.lock",
            format!("{} {unlocked_do}: {}", list.len(), list.join("; ")),
            unlocked_fix,
        ));
    }
}

fn python(envs: &crate::mcp_envs::McpEnvs, out: &mut Vec<Finding>) {
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
}

fn npm(envs: &crate::mcp_npm::NpmEnvs, out: &mut Vec<Finding>) {
    team(
        (&envs.broken, &envs.unlocked),
        [
            "its `npx` package or version does not exist; fix it in aibox.toml \
             [[ai.mcp.servers]], then run `aibox apply`",
            "npx MCP server(s) fetch their dependency tree unverified at start",
            "start them as `npx -y <package>@<exact version>` and run `aibox apply` with `npm` \
             on PATH (or `AIBOX_NPM` set to it) and access to the npm registry: it locks \
             the tree in aibox.lock and the image installs it",
        ],
        out,
    );
    if !envs.unpinned.is_empty() {
        let list: Vec<String> = envs
            .unpinned
            .iter()
            .map(|(name, package)| format!("{name} (`{package}`)"))
            .collect();
        out.push(Finding::new(
            "aibox::doctor::mcp_unlocked",
            Severity::Warning,
            "aibox.toml",
            format!(
                "{} npx MCP server(s) name no exact version, so nothing below them is \
                 locked: {}",
                list.len(),
                list.join(", ")
            ),
            "pin each package to one version (`name@1.2.3`) in aibox.toml \
             [[ai.mcp.servers]], then run `aibox apply`: aibox locks its whole tree",
        ));
    }
}
