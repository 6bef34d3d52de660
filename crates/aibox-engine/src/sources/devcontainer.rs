//! Plan source: the dev container files from `aibox-devcontainer`.
//!
//! The generator is pure; this source looks up the facts it needs (the text of
//! `Dockerfile.local`, whether the Compose override exists, the extra CA certificates)
//! in the files resolve captured, through the context.

use std::collections::BTreeMap;

use aibox_devcontainer::catalog::Tool;
use aibox_devcontainer::{DOCKERFILE_LOCAL_PATH, Inputs, egress, tools};
use aibox_provenance::lock::{BaseImageLock, ToolDownload, ToolLock};
use camino::Utf8Path;

use crate::builder::{PlanBuilder, PlanContext};
use crate::error::EngineError;

/// Adds the generated `.devcontainer/` files (the personal environment file among them),
/// the `.aibox-home/` skeleton and the scaffold-once user files to the plan, and removes
/// the environment file where earlier versions wrote it.
pub fn contribute(ctx: &PlanContext, plan: &mut PlanBuilder) -> Result<(), EngineError> {
    let dockerfile_local = ctx.read_text(Utf8Path::new(DOCKERFILE_LOCAL_PATH))?;
    let override_exists = ctx.exists(Utf8Path::new(aibox_config::layout::COMPOSE_OVERRIDE))?;
    let config = &ctx.project.config;
    // One parse and one selection for the Dockerfile, the tool locks and the egress lists.
    let catalog = crate::network::builtin_catalog()?;
    let tools = aibox_devcontainer::selected_tools(config, &catalog)?;
    let mut inputs = Inputs::new(config, &ctx.project.local, ctx.aibox_version);
    inputs.catalog = Some(&catalog);
    inputs.dockerfile_local = dockerfile_local.as_deref();
    inputs.override_exists = override_exists;
    inputs.security_opt = &ctx.security_opt;
    let extra_ca = read_extra_ca(ctx)?;
    inputs.extra_ca = extra_ca.as_deref();
    let python_envs = python_envs(ctx.processkit, ctx.mcp_uvx);
    inputs.python_envs = &python_envs;
    let npm_envs = npm_envs(ctx.mcp_npm);
    inputs.npm_envs = &npm_envs;
    // The root resolve opened is canonical already: the checkout's path as the lifecycle
    // names its container, without a file-system call here.
    let checkout = ctx.root().to_string();
    inputs.checkout = Some(&checkout);
    let skill_hosts = skill_hosts(ctx);
    inputs.skill_hosts = skill_hosts.map_or(&[], |h| &h.skills);
    // A retired npm tree's files go with the generated-file retirement; its folder
    // goes here, once empty.
    let previous = ctx.previous_lock.and_then(|l| l.mcp.as_ref());
    for id in previous.iter().flat_map(|m| m.npm.keys()) {
        if !ctx.mcp_npm.lock.contains_key(id) {
            plan.prune_dir(format!("{}npm-{id}", aibox_devcontainer::MCP_ENVS_DIR))?;
        }
    }
    plan.extend(aibox_devcontainer::render(&inputs)?)?;
    // In the workspace, which the agent may write (see `layout::LOCAL_ENV`); removed
    // when it is there, nothing otherwise.
    plan.remove(aibox_config::layout::LEGACY_LOCAL_ENV)?;
    plan.lock_mut().tools = tool_locks(&tools);
    plan.lock_mut().base_image = Some(BaseImageLock::new(&config.container.base_image));
    let list = egress::allowlist(config, &ctx.project.local, &tools, inputs.skill_hosts);
    let root_config = ctx
        .files
        .text_of(aibox_config::layout::DEVCONTAINER_ROOT_JSON);
    plan.set_reach(crate::reach::Reach::of(
        config,
        &ctx.project.local,
        list.entries.iter().map(|(host, origins)| {
            let from: Vec<String> = origins.iter().map(egress::Origin::describe).collect();
            (host.clone(), from.join("; "))
        }),
        root_config
            .as_deref()
            .map(|text| (aibox_config::layout::DEVCONTAINER_ROOT_JSON, text)),
    ));
    if config.network.egress == aibox_config::EgressMode::Allowlist {
        let build = egress::build_registries(&tools, &python_envs, &npm_envs, true);
        plan.lock_mut().network = crate::network::lock(config, &list, build);
        for warning in skill_hosts.iter().flat_map(|h| &h.warnings) {
            plan.warn(warning.clone());
        }
        for warning in remote_servers_outside(config, &ctx.project.local, &list) {
            plan.warn(warning);
        }
    }
    Ok(())
}

/// A warning per remote MCP server whose host the allowlist does not let through: it is
/// registered, but in the container it only ever gets the proxy's refusal.
fn remote_servers_outside(
    config: &aibox_config::AiboxToml,
    local: &aibox_config::LocalToml,
    list: &egress::Allowlist,
) -> Vec<String> {
    let team = config.ai.mcp.servers.iter().map(|s| (s, "aibox.toml"));
    let personal = local.mcp.servers.iter().map(|s| (s, ".aibox-local.toml"));
    team.chain(personal)
        .filter(|(s, _)| s.enabled)
        .filter_map(|(s, file)| {
            let host = super::url_host(s.url.as_deref()?)?;
            (!crate::reach::covered(&host, &list.entries)).then(|| {
                format!(
                    "mcp: the remote server `{}` connects to `{host}`, which the egress \
                     allowlist does not let through: in the container it gets only the proxy's \
                     refusal; add `{host}` to `[network] allow` in {file}",
                    s.name
                )
            })
        })
        .collect()
}

/// The hosts the installed skills declare, as resolve read them (none without a
/// resolved processkit release).
fn skill_hosts<'c>(ctx: &PlanContext<'c>) -> Option<&'c crate::network::SkillsHosts> {
    match ctx.processkit {
        crate::resolve::ProcesskitState::Resolved(resolved) => Some(&resolved.skill_hosts),
        _ => None,
    }
}

/// The locked MCP server environments the image installs, rendered from the lock
/// entries resolve made: the resolved processkit release's and the team `uvx` servers'.
pub(crate) fn python_envs(
    processkit: &crate::resolve::ProcesskitState,
    uvx: &crate::mcp_uvx::UvxEnvs,
) -> Vec<aibox_devcontainer::PythonEnv> {
    // Merged as the lock records them, so each file lists what the lock lists.
    let mut lock = aibox_provenance::pydeps::McpLock::default();
    if let crate::resolve::ProcesskitState::Resolved(resolved) = processkit {
        lock.add_environments(&resolved.mcp_envs.lock);
    }
    lock.add_environments(&uvx.envs.lock);
    lock.environments
        .iter()
        .filter(|(_, env)| env.unresolvable.is_none())
        .map(|(id, env)| aibox_devcontainer::PythonEnv {
            id: id.clone(),
            servers: env.servers.clone(),
            requirements: aibox_provenance::pydeps::render_requirements(env, &lock.hashes),
        })
        .collect()
}

/// The locked npm trees of team MCP servers the image installs, rendered from the lock
/// entries resolve made.
pub(crate) fn npm_envs(mcp_npm: &crate::mcp_npm::NpmEnvs) -> Vec<aibox_devcontainer::NpmEnv> {
    use aibox_provenance::npmdeps;
    mcp_npm
        .lock
        .iter()
        .filter(|(_, tree)| tree.unresolvable.is_none())
        .map(|(id, tree)| aibox_devcontainer::NpmEnv {
            id: id.clone(),
            servers: tree.servers.clone(),
            package_json: npmdeps::render_package_json(id, tree),
            package_lock: npmdeps::render_package_lock(id, tree),
        })
        .collect()
}

/// The lock entries of the tools the Dockerfile installs.
fn tool_locks(tools: &[&Tool]) -> BTreeMap<String, ToolLock> {
    tools
        .iter()
        .map(|t| {
            let download = t
                .artifact
                .iter()
                .map(|a| ToolDownload {
                    arch: a.arch.clone(),
                    url: tools::download_url(a),
                    digest: tools::expected_digest(a)
                        .map(|(cmd, hex)| format!("{}:{hex}", cmd.trim_end_matches("sum")))
                        .unwrap_or_default(),
                })
                .collect();
            let lock = ToolLock {
                version: t.version.clone(),
                verification: t.verification.as_str().to_owned(),
                apt: t.apt.clone(),
                download,
            };
            (t.name.clone(), lock)
        })
        .collect()
}

/// Text of `.aibox-local.toml` `container.extra_ca_certificates` (a personal path, so it
/// may lie outside the project; relative paths start at the project root), as resolve
/// read it, checked as `config validate` checks it.
fn read_extra_ca(ctx: &PlanContext) -> Result<Option<String>, EngineError> {
    let Some(ca) = ctx.files.extra_ca() else {
        return Ok(None);
    };
    crate::config_check::extra_ca_text(ca.path.clone(), ca.text.clone()).map(Some)
}
