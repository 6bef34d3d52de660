//! `aibox mcp list`: the effective MCP servers per harness, with origin, target file,
//! trust scope and allowed tools, computed exactly as `apply` would register them.
//!
//! It never downloads: the project is resolved offline, so a processkit release that is
//! not in the download cache is reported as not resolved (and its servers are missing
//! from the list) instead of being fetched.

use aibox_mcp_registration::{
    EffectiveServer, HandAdded, LEDGER_PATH, Ledger, McpError, RegisterOptions, ServerSpec,
    collect_servers, effective_servers, effective_servers_wired, hand_added,
};
use camino::Utf8Path;

use crate::error::EngineError;
use crate::resolve::{ProcesskitState, Resolved};

/// The servers `aibox mcp list` shows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct McpList {
    /// Every server of every enabled harness.
    pub servers: Vec<EffectiveServer>,
    /// The entries the user added by hand to the enabled harnesses' files (their
    /// harnesses load them; aibox leaves them alone).
    pub hand_added: Vec<HandAdded>,
    /// Set when the processkit release is not resolved (not in the download cache): its
    /// servers are missing from `servers`. Says why and what to run.
    pub not_resolved: Option<String>,
}

/// The effective servers of the project at `root`, resolved offline.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let root = camino::Utf8Path::from_path(dir.path()).unwrap();
/// # fs_err::write(root.join("aibox.toml"), "[container]\nname = \"demo\"\n").unwrap();
/// let list = aibox_engine::mcp_list(root)?;
/// assert!(list.not_resolved.is_none());
/// # Ok::<(), aibox_engine::EngineError>(())
/// ```
///
/// # Errors
/// An invalid configuration, or a gate refusing the processkit skills.
pub fn mcp_list(root: &Utf8Path) -> Result<McpList, EngineError> {
    let options = crate::resolve::PlanOptions {
        offline: true,
        ..crate::resolve::PlanOptions::default()
    };
    mcp_list_resolved(&crate::resolve::resolve(root, &options)?)
}

/// The effective servers of a resolved project.
///
/// # Errors
/// A gate refusing the processkit skills, an invalid server definition.
pub fn mcp_list_resolved(resolved: &Resolved) -> Result<McpList, EngineError> {
    Ok(servers_resolved(resolved)?.1)
}

/// The configured servers (what the harness entries are made from) and the list
/// `aibox mcp list` shows; `aibox mcp check` starts the former as the latter registers them.
pub(crate) fn servers_resolved(
    resolved: &Resolved,
) -> Result<(Vec<ServerSpec>, McpList), EngineError> {
    // The processkit servers are what the plan registers: verified, selected, reviewed.
    let processkit = match &resolved.processkit {
        ProcesskitState::NotResolved { .. } => Vec::new(),
        _ => crate::plan::plan(resolved)?.processkit_servers,
    };
    servers_planned(resolved, &processkit)
}

/// [`servers_resolved`] with the processkit servers a plan of `resolved` registers
/// (`doctor` plans once for all its checks); none when the release is not resolved.
pub(crate) fn servers_planned(
    resolved: &Resolved,
    processkit: &[ServerSpec],
) -> Result<(Vec<ServerSpec>, McpList), EngineError> {
    let project = &resolved.project;
    let not_resolved = resolved.not_resolved().map(ToOwned::to_owned);
    let mut servers =
        collect_servers(&project.config, &project.local, processkit).map_err(EngineError::from)?;
    // Team servers as the harness files register them: a locked one as its installed
    // program, which is what `mcp check` must start.
    crate::sources::mcp::with_locked_commands(&mut servers, &resolved.mcp_npm, &resolved.mcp_uvx);
    let opts = RegisterOptions {
        harnesses: &project.config.ai.harnesses,
        permissions: &project.config.ai.mcp.permissions,
        workspace: aibox_config::container::WORKSPACE_DIR,
    };
    // The files as resolve captured them (the same bytes the plan merged into).
    let text = |path: &str| -> Result<Option<String>, EngineError> {
        Ok(resolved
            .files
            .get(Utf8Path::new(path))?
            .map(|b| String::from_utf8_lossy(b).into_owned()))
    };
    let ledger = text(LEDGER_PATH)?
        .map(|t| Ledger::parse(&t))
        .transpose()
        .map_err(EngineError::from)?;
    let mut failed = None;
    let mut read = |path: &str| -> Result<Option<String>, McpError> {
        text(path).or_else(|e| {
            failed = Some(e);
            Ok(None)
        })
    };
    let hand = hand_added(
        &servers,
        &project.config.ai.harnesses,
        ledger.as_ref(),
        &mut read,
    )
    .map_err(EngineError::from)?;
    if let Some(e) = failed {
        return Err(e);
    }
    // With the release's pre-authorisation, as the plan merges it into Claude's rules.
    let mut effective = match &resolved.processkit {
        ProcesskitState::Resolved(release) => {
            effective_servers_wired(&servers, &opts, &release.wiring)
        }
        _ => effective_servers(&servers, &opts),
    };
    // A server of a skill added by hand is registered as processkit's are, after the
    // skill review judged it as third-party: said, since its origin reads `processkit`.
    if let ProcesskitState::Resolved(release) = &resolved.processkit {
        let processkit = aibox_mcp_registration::Origin::Processkit;
        for s in effective.iter_mut().filter(|s| s.origin == processkit) {
            if let Some((skill, _)) = release
                .hand_added
                .iter()
                .find(|(_, servers)| servers.iter().any(|x| x.name == s.name))
            {
                s.notes.push(format!(
                    "from `{}`, a skill added by hand (the release does not ship it): \
                     reviewed as third-party",
                    skill.dir
                ));
            }
        }
    }
    // A team server the last `apply` left out is in no harness file, whatever the
    // configuration says: shown with apply's reason.
    if let Some(ledger) = &ledger {
        for s in &mut effective {
            if s.origin == aibox_mcp_registration::Origin::Team
                && s.skipped.is_none()
                && let Some(why) = ledger.not_registered.get(&s.name)
            {
                s.skipped = Some(format!(
                    "{} (at the last `aibox apply`; fix it in aibox.toml and run `aibox apply`)",
                    why.trim_end_matches('.')
                ));
                s.target_file = None;
                s.file_scope = None;
            }
        }
    }
    let list = McpList {
        servers: effective,
        hand_added: hand,
        not_resolved,
    };
    Ok((servers, list))
}
