//! Plan sources: each adds its files to the plan.
//!
//! Every source is a module with
//! `fn contribute(ctx: &PlanContext, plan: &mut PlanBuilder) -> Result<(), EngineError>`.
//! Later features add a module and one line in [`contribute_all`]; the writer and the
//! apply logic never change for a new kind of file.

use crate::builder::{PlanBuilder, PlanContext};
use crate::error::EngineError;

pub mod devcontainer;
pub mod gitignore;
pub mod mcp;
pub mod processkit;

/// Runs every source in order. Order matters only for sources that read what an
/// earlier one recorded in the [`PlanBuilder`].
pub fn contribute_all(ctx: &PlanContext, plan: &mut PlanBuilder) -> Result<(), EngineError> {
    devcontainer::contribute(ctx, plan)?;
    processkit::contribute(ctx, plan)?;
    let processkit_servers = plan.processkit_servers().to_vec();
    let wiring = plan.processkit_wiring().clone();
    mcp::contribute_with(ctx, plan, &processkit_servers, &wiring)?;
    gitignore::contribute(ctx, plan)?;
    Ok(())
}

/// The host name of an `http(s)://` URL, lowercase; `None` when it holds a variable.
pub(crate) fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => host.split(':').next()?,
    };
    (!host.is_empty() && !host.contains(['$', '{'])).then(|| host.to_ascii_lowercase())
}
