//! `aibox network list`: the effective egress allowlist with where each host comes from,
//! computed as `apply` computes it for the proxy's filter and the lock, with the processkit
//! release resolved offline for its skills' declared hosts. A command on top of resolve;
//! the allowlist itself is built in [`crate::network`].

use aibox_config::EgressMode;
use aibox_devcontainer::egress;
use camino::Utf8Path;

use crate::error::EngineError;
use crate::network::{builtin_catalog, proxy_name};
use crate::resolve::{PlanOptions, ProcesskitState};

/// What `aibox network list` shows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NetworkList {
    /// `open`, `allowlist` or `none`.
    pub egress: &'static str,
    /// The proxy (`tinyproxy-bin <version>`) in `allowlist` mode.
    pub proxy: Option<String>,
    /// The allowed hosts, sorted (empty unless `allowlist`).
    pub hosts: Vec<NetworkHost>,
    /// The registries only the image builds reach (not on the allowlist), sorted.
    pub build: Vec<NetworkHost>,
    /// The personal upstream proxy the egress proxy forwards through, if set.
    pub upstream_proxy: Option<String>,
    /// Why the processkit release could not be resolved offline (its skills' hosts are
    /// then missing from `hosts`; `aibox apply` downloads it).
    pub not_resolved: Option<String>,
    /// Settings the mode ignores (`[network] allow` and `upstream_proxy` outside
    /// `allowlist` mode), as `apply` warns of them.
    pub warnings: Vec<String>,
}

/// One allowed host.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NetworkHost {
    /// The host name (or `*.name`).
    pub host: String,
    /// Where it comes from, e.g. `tool claude-code 2.1.197`.
    pub origins: Vec<String>,
    /// Whether only the personal overlay asks for it (so only your proxy allows it).
    pub personal: bool,
}

/// The effective egress settings of the project at `root`, with the processkit release
/// resolved offline for its skills' declared hosts (a release not in the download cache
/// contributes none, and `not_resolved` says so).
///
/// # Errors
/// An invalid configuration, a broken catalog or an unknown addon.
pub fn network_list(root: &Utf8Path) -> Result<NetworkList, EngineError> {
    let (project, text) = aibox_config::load_project_with_text(root)?;
    let mode = project.config.network.egress;
    if mode != EgressMode::Allowlist {
        return Ok(NetworkList {
            egress: mode.as_str(),
            proxy: None,
            hosts: Vec::new(),
            build: Vec::new(),
            upstream_proxy: None,
            not_resolved: None,
            warnings: crate::config_check::ignored_egress_settings(&project.config, &project.local),
        });
    }
    let options = PlanOptions {
        offline: true,
        ..PlanOptions::default()
    };
    // The checks resolve makes, on the text already read.
    crate::config_check::check_team_config(&text, &project.config).map_err(EngineError::from)?;
    let resolved = crate::resolve::resolve_project(root, project, &options)?;
    let (config, local) = (&resolved.project.config, &resolved.project.local);
    let (skills, not_resolved) = match &resolved.processkit {
        ProcesskitState::Resolved(r) => (r.skill_hosts.skills.as_slice(), None),
        ProcesskitState::NotResolved { reason } => (&[][..], Some(reason.clone())),
        ProcesskitState::NotConfigured => (&[][..], None),
    };
    let catalog = builtin_catalog()?;
    let tools = aibox_devcontainer::selected_tools(config, &catalog)?;
    let list = egress::allowlist(config, local, &tools, skills);
    let build = egress::build_registries(
        &tools,
        &crate::sources::devcontainer::python_envs(&resolved.processkit, &resolved.mcp_uvx),
        &crate::sources::devcontainer::npm_envs(&resolved.mcp_npm),
        true,
    )
    .into_iter()
    .map(|(host, origins)| NetworkHost {
        host,
        origins,
        personal: false,
    })
    .collect();
    let hosts = list
        .entries
        .iter()
        .map(|(host, origins)| NetworkHost {
            host: host.clone(),
            origins: origins.iter().map(egress::Origin::describe).collect(),
            personal: origins.iter().all(egress::Origin::is_personal),
        })
        .collect();
    Ok(NetworkList {
        egress: mode.as_str(),
        proxy: Some(proxy_name()),
        hosts,
        build,
        upstream_proxy: local.network.upstream_proxy.clone(),
        not_resolved,
        warnings: Vec::new(),
    })
}
