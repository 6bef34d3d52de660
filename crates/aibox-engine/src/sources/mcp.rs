//! Plan source: MCP server registration in each enabled harness's config files.
//!
//! Collects processkit, team and personal servers, reads the current harness files and
//! the ownership ledger (`.aibox/mcp-ledger.json`), and plans the merged files
//! (`Ownership::Merged`) plus the ledger (`Ownership::LocalState`). All merge logic
//! lives in `aibox-mcp-registration`; this module only does the reading, and swaps in
//! the locked command of each team server whose `npx` package or `uvx` release resolve
//! locked ([`crate::mcp_npm`], [`crate::mcp_uvx`]; the lock's `[mcp.npm]` and their
//! `[mcp.environments]` are written here).

use std::collections::BTreeMap;

use aibox_config::{Ownership, PlannedFile};
use aibox_mcp_registration::{
    FileScope, LEDGER_PATH, Ledger, McpError, Origin, ProcesskitWiring, RegisterOptions,
    ServerSpec, TARGETS, Transport, collect_servers, register_wired,
};
use camino::Utf8Path;

use crate::builder::{PlanBuilder, PlanContext};
use crate::error::EngineError;

/// Adds the merged harness MCP files to the plan. `processkit` holds the servers of the
/// installed processkit release and `wiring` its hooks and pre-authorisation; both are
/// ignored in context mode `harness-only` (which prunes what aibox wrote of them).
pub fn contribute_with(
    ctx: &PlanContext,
    plan: &mut PlanBuilder,
    processkit: &[ServerSpec],
    wiring: &ProcesskitWiring,
) -> Result<(), EngineError> {
    let config = &ctx.project.config;
    let mut servers =
        collect_servers(config, &ctx.project.local, processkit).map_err(EngineError::from)?;
    lock_team_servers(ctx, plan, &mut servers);
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
        workspace: aibox_config::container::WORKSPACE_DIR,
    };
    let mut read = |path: &str| -> Result<Option<String>, McpError> {
        Ok(current.get(path).cloned().flatten())
    };
    let none = ProcesskitWiring::default();
    let wiring = if config.context.mode == aibox_config::ContextMode::Processkit {
        wiring
    } else {
        &none
    };
    let mut registration = register_wired(&servers, &opts, wiring, ledger.as_ref(), &mut read)
        .map_err(EngineError::from)?;
    // `apply --check` judges the committed files as a fresh clone (CI, a teammate) does:
    // it has no ledger, so an entry edited by hand is one to write again there. Kept here
    // on the strength of this checkout's ledger, the same commit passed on the author's
    // checkout and failed on every clone.
    if ctx.options.check_only
        && registration
            .notices
            .iter()
            .any(|n| aibox_mcp_registration::is_kept_notice(n))
    {
        let fresh =
            register_wired(&servers, &opts, wiring, None, &mut read).map_err(EngineError::from)?;
        for notice in registration
            .notices
            .iter()
            .filter(|n| aibox_mcp_registration::is_kept_notice(n))
        {
            plan.warn(format!(
                "mcp: {notice}. This checkout's `apply` keeps it, but the `apply` of a fresh \
                 clone (CI, a teammate) writes the entry again, so the check counts the file \
                 as stale"
            ));
        }
        registration.files = fresh.files;
        registration
            .notices
            .retain(|n| !aibox_mcp_registration::is_kept_notice(n));
    }
    // What was left out, and why, for `mcp list`: the ledger is what is registered.
    registration
        .ledger
        .not_registered
        .clone_from(&ctx.mcp_npm.broken);
    registration
        .ledger
        .not_registered
        .extend(ctx.mcp_uvx.envs.broken.clone());
    registration.write_ledger |= !registration.ledger.not_registered.is_empty();
    // A deny the harness cannot enforce would be a silent allow: refuse it.
    aibox_mcp_registration::check_denies_enforceable(&registration.servers)
        .map_err(EngineError::from)?;
    for notice in &registration.notices {
        plan.warn(format!("mcp: {notice}"));
    }
    for s in servers.iter().filter(|s| sends_headers_in_clear(s)) {
        plan.warn(format!(
            "mcp: the remote server `{}` sends its headers over plain `http://` to another \
             machine: a token in them can be read on the way; use `https://`",
            s.name
        ));
    }
    for file in registration.files {
        // A hooks file aibox emptied (harness-only, or the release dropped every hook)
        // is removed rather than left as `{}`; so is a committed file of a disabled
        // harness that the pruning left with nothing in it.
        let disabled = TARGETS.iter().any(|(h, path, scope)| {
            *path == file.path && *scope == FileScope::Committed && !config.ai.harnesses.contains(h)
        });
        if file.changed
            && (aibox_mcp_registration::hooks::is_empty_hook_file(&file.path, &file.contents)
                || (disabled && aibox_mcp_registration::holds_nothing(&file.path, &file.contents)))
        {
            plan.remove(file.path.as_str())?;
            continue;
        }
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

/// The team servers both lockers decided on: the ones that could not start are left
/// out, the locked ones start as their installed programs, once both have had their say.
fn lock_team_servers(ctx: &PlanContext, plan: &mut PlanBuilder, servers: &mut Vec<ServerSpec>) {
    lock_npx_servers(ctx, plan, servers);
    lock_uvx_servers(ctx, plan, servers);
    with_locked_commands(servers, ctx.mcp_npm, ctx.mcp_uvx);
}

/// Team servers started with `npx`: a locked one is started as its installed bin (its
/// arguments and environment kept), one whose package does not exist is not registered
/// (it could not start); the warnings say which and why, and the lock records the trees.
fn lock_npx_servers(ctx: &PlanContext, plan: &mut PlanBuilder, servers: &mut Vec<ServerSpec>) {
    let npm = ctx.mcp_npm;
    servers.retain(|s| s.origin != Origin::Team || !npm.broken.contains_key(&s.name));
    for warning in npm.warnings() {
        plan.warn(warning);
    }
    if !npm.lock.is_empty() {
        plan.lock_mut().mcp.get_or_insert_default().npm = npm.lock.clone();
    }
}

/// Swaps in the locked command of each team server resolve locked (an `npx` tree's bin,
/// a `uvx` environment's executable; arguments after the package, `env` kept): what the
/// harness files register, and so what `mcp check` starts.
pub(crate) fn with_locked_commands(
    servers: &mut [ServerSpec],
    npm: &crate::mcp_npm::NpmEnvs,
    uvx: &crate::mcp_uvx::UvxEnvs,
) {
    for spec in servers.iter_mut().filter(|s| s.origin == Origin::Team) {
        let locked = npm
            .commands
            .get(&spec.name)
            .or_else(|| uvx.commands.get(&spec.name));
        if let (Some((bin, bin_args)), Transport::Stdio { command, args, .. }) =
            (locked, &mut spec.transport)
        {
            command.clone_from(bin);
            args.clone_from(bin_args);
        }
    }
}

/// Team servers started with `uvx`: a locked one is started as its environment's
/// executable (its arguments and environment kept), one whose release does not exist or
/// cannot be resolved is not registered (it could not start); the warnings say which and
/// why, and the lock records the environments beside the release's.
fn lock_uvx_servers(ctx: &PlanContext, plan: &mut PlanBuilder, servers: &mut Vec<ServerSpec>) {
    let uvx = ctx.mcp_uvx;
    servers.retain(|s| s.origin != Origin::Team || !uvx.envs.broken.contains_key(&s.name));
    for warning in uvx.warnings() {
        plan.warn(warning);
    }
    if !uvx.envs.lock.environments.is_empty() {
        plan.lock_mut()
            .mcp
            .get_or_insert_default()
            .add_environments(&uvx.envs.lock);
    }
}

/// A remote server with headers at an `http://` URL whose host is not this machine.
fn sends_headers_in_clear(spec: &ServerSpec) -> bool {
    let aibox_mcp_registration::Transport::Remote { url, headers } = &spec.transport else {
        return false;
    };
    if !url.starts_with("http://") {
        return false;
    }
    let Some(host) = super::url_host(url) else {
        return false;
    };
    let host = host.as_str();
    let local = matches!(
        host,
        "localhost" | "::1" | "host.docker.internal" | "host.containers.internal"
    ) || host.starts_with("127.");
    !headers.is_empty() && !local
}
