//! Plan source: MCP server registration in each enabled harness's config files.
//!
//! Collects processkit, team and personal servers, reads the current harness files and
//! the ownership ledger (`.aibox/mcp-ledger.json`), and plans the merged files
//! (`Ownership::Merged`) plus the ledger (`Ownership::LocalState`). All merge logic
//! lives in `aibox-mcp-registration`; this module only does the reading.

use std::collections::BTreeMap;

use aibox_config::{Ownership, PlannedFile, Project};
use aibox_mcp_registration::{
    CONTAINER_WORKSPACE, EffectiveServer, LEDGER_PATH, Ledger, McpError, RegisterOptions,
    ServerSpec, TARGETS, collect_servers, register,
};
use camino::Utf8Path;

use crate::EngineError;
use crate::plan::{PlanBuilder, PlanContext};

/// Adds the merged harness MCP files to the plan, with no processkit servers.
///
/// Until the processkit source supplies its list, `contribute_all` calls this; once it
/// does, call [`contribute_with`] with that list instead.
pub fn contribute(ctx: &PlanContext, plan: &mut PlanBuilder) -> Result<(), EngineError> {
    contribute_with(ctx, plan, &[])
}

/// Adds the merged harness MCP files to the plan. `processkit` holds the servers of the
/// installed processkit release; they are ignored in context mode `harness-only`.
pub fn contribute_with(
    ctx: &PlanContext,
    plan: &mut PlanBuilder,
    processkit: &[ServerSpec],
) -> Result<(), EngineError> {
    let config = &ctx.project.config;
    let servers =
        collect_servers(config, &ctx.project.local, processkit).map_err(EngineError::from)?;
    let ledger = ctx
        .read_text(Utf8Path::new(LEDGER_PATH))?
        .map(|text| Ledger::parse(&text))
        .transpose()
        .map_err(EngineError::from)?;
    let mut current: BTreeMap<&str, Option<String>> = BTreeMap::new();
    for (_, path, _) in TARGETS {
        current.insert(path, ctx.read_text(Utf8Path::new(path))?);
    }
    let opts = RegisterOptions {
        harnesses: &config.ai.harnesses,
        permissions: &config.ai.mcp.permissions,
        workspace: CONTAINER_WORKSPACE,
    };
    let mut read = |path: &str| -> Result<Option<String>, McpError> {
        Ok(current.get(path).cloned().flatten())
    };
    let registration =
        register(&servers, &opts, ledger.as_ref(), &mut read).map_err(EngineError::from)?;
    // A deny the harness cannot enforce would be a silent allow: refuse it.
    aibox_mcp_registration::check_denies_enforceable(&registration.servers)
        .map_err(EngineError::from)?;
    for notice in &registration.notices {
        plan.warn(format!("mcp: {notice}"));
    }
    for file in registration.files {
        plan.add(PlannedFile::new(
            file.path,
            file.contents,
            Ownership::Merged,
        ))?;
    }
    if registration.write_ledger {
        plan.add(PlannedFile::new(
            LEDGER_PATH,
            registration.ledger.render(),
            Ownership::LocalState,
        ))?;
    }
    Ok(())
}

/// The servers each enabled harness loads, with origin, target file, trust scope and
/// allowed tools: the data behind `aibox mcp list [--output json]`. Reads no file.
pub fn effective_servers(
    project: &Project,
    processkit: &[ServerSpec],
) -> Result<Vec<EffectiveServer>, EngineError> {
    let config = &project.config;
    let servers = collect_servers(config, &project.local, processkit).map_err(EngineError::from)?;
    let opts = RegisterOptions {
        harnesses: &config.ai.harnesses,
        permissions: &config.ai.mcp.permissions,
        workspace: CONTAINER_WORKSPACE,
    };
    Ok(aibox_mcp_registration::effective_servers(&servers, &opts))
}
