//! `aibox network list`: the effective egress allowlist with where each host comes from,
//! computed as `apply` computes it for the proxy's filter and the lock.

use aibox_config::{AiboxToml, EgressMode, LocalToml};
use aibox_devcontainer::catalog::Catalog;
use aibox_devcontainer::egress::{self, Allowlist};
use aibox_provenance::lock::NetworkLock;
use camino::Utf8Path;

use crate::error::EngineError;

/// What `aibox network list` shows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NetworkList {
    /// `open`, `allowlist` or `none`.
    pub egress: &'static str,
    /// The proxy (`tinyproxy-bin <version>`) in `allowlist` mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// The allowed hosts, sorted (empty unless `allowlist`).
    pub hosts: Vec<NetworkHost>,
    /// The personal upstream proxy the egress proxy forwards through, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_proxy: Option<String>,
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

/// The allowlist of a configuration: the hosts of the catalog tools its image installs,
/// the skills' declared hosts (none are known to the engine yet), and both files'
/// `[network] allow`.
///
/// # Errors
/// A broken built-in catalog or an unknown addon.
pub fn allowlist(config: &AiboxToml, local: &LocalToml) -> Result<Allowlist, EngineError> {
    let catalog = Catalog::builtin().map_err(|e| {
        EngineError::from(aibox_devcontainer::DevcontainerError::Catalog {
            message: e.to_string(),
        })
    })?;
    let tools = aibox_devcontainer::selected_tools(config, &catalog)?;
    Ok(egress::allowlist(config, local, &tools, &[]))
}

/// The lock's `[network]`: the team's hosts and their origins, in `allowlist` mode.
pub(crate) fn lock(config: &AiboxToml, list: &Allowlist) -> Option<NetworkLock> {
    (config.network.egress == EgressMode::Allowlist).then(|| NetworkLock {
        egress: EgressMode::Allowlist.as_str().to_owned(),
        proxy: proxy_name(),
        allow: list
            .entries
            .iter()
            .filter(|(_, origins)| origins.iter().any(|o| !o.is_personal()))
            .map(|(host, origins)| {
                let team = origins.iter().filter(|o| !o.is_personal());
                (host.clone(), team.map(egress::Origin::describe).collect())
            })
            .collect(),
    })
}

fn proxy_name() -> String {
    format!("{} {}", egress::PROXY_PACKAGE, egress::PROXY_VERSION)
}

/// The effective egress settings of the project at `root`.
///
/// # Errors
/// An invalid configuration, a broken catalog or an unknown addon.
pub fn network_list(root: &Utf8Path) -> Result<NetworkList, EngineError> {
    let project = aibox_config::load_project(root)?;
    let (config, local) = (&project.config, &project.local);
    let mode = config.network.egress;
    if mode != EgressMode::Allowlist {
        return Ok(NetworkList {
            egress: mode.as_str(),
            proxy: None,
            hosts: Vec::new(),
            upstream_proxy: None,
        });
    }
    let list = allowlist(config, local)?;
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
        upstream_proxy: local.network.upstream_proxy.clone(),
    })
}
