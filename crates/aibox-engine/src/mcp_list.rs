//! `aibox mcp list`: the effective MCP servers per harness, with origin, target file,
//! trust scope and allowed tools, computed exactly as `apply` would register them (it
//! builds the plan, so a processkit release is fetched and verified as `apply` would).

use aibox_mcp_registration::{
    CONTAINER_WORKSPACE, EffectiveServer, RegisterOptions, collect_servers, effective_servers,
};
use camino::Utf8Path;

use crate::EngineError;

/// The effective servers of the project at `root`.
pub fn mcp_list(root: &Utf8Path) -> Result<Vec<EffectiveServer>, EngineError> {
    let project = aibox_config::load_project(root)?;
    // The processkit servers are what the plan registers: verified, selected, reviewed.
    let processkit = crate::plan(root, &crate::PlanOptions::default())?.processkit_servers;
    let servers =
        collect_servers(&project.config, &project.local, &processkit).map_err(EngineError::from)?;
    let opts = RegisterOptions {
        harnesses: &project.config.ai.harnesses,
        permissions: &project.config.ai.mcp.permissions,
        workspace: CONTAINER_WORKSPACE,
    };
    Ok(effective_servers(&servers, &opts))
}
