//! The egress gate (`[network] egress = "allowlist"` or `"none"`): the Compose files
//! `aibox up` merges (generated, override, personal), and those every other dev
//! container configuration names (`dockerComposeFile`), must keep the agent where the
//! generator put it — alone on the internal network, which must stay an internal network
//! of the project's own (no other name, driver or options) — and the proxy must get no
//! capability. The agent reaches the proxy through a socket, never over a network.
//!
//! Why a gate of its own: each of these is harmless to the general rules (a second
//! network is not a host namespace), but any one of them gives the agent a route around
//! the proxy, so the allowlist would only look enforced. An owner who means it records a
//! `[[security.exceptions]]` entry for the named option (`egress:<what>`).

use aibox_config::{AiboxToml, EgressMode};
use serde_norway::Value as Yaml;

use crate::compose::ComposeSources;
use crate::finding::{Consent, Finding, Severity};

/// The internal network and the proxy service, as the generator names them.
const INTERNAL: &str = aibox_config::container::EGRESS_NETWORKS[0];
const PROXY: &str = aibox_config::container::EGRESS_PROXY_SERVICE;

/// Judges every Compose file the tools may run (aibox's, as `up` merges them, and each
/// dev container configuration's) for the configured egress mode; nothing in `open`
/// mode.
pub fn check_egress(
    config: &AiboxToml,
    consent: &Consent,
    sources: &dyn ComposeSources,
) -> Vec<Finding> {
    let mode = config.network.egress;
    if mode == EgressMode::Open {
        return Vec::new();
    }
    let agent = config.container.name.as_str();
    let generated_name = aibox_config::container::internal_network_name(
        &aibox_config::container::project_name(config),
    );
    let mut out = Vec::new();
    let (paths, envs) = judged_files(sources);
    for env in &envs {
        env_names_the_network(consent, sources, env, &mut out);
    }
    for path in &paths {
        let path = path.as_str();
        let Some(text) = sources.read(path) else {
            continue;
        };
        let Ok(doc) = serde_norway::from_str::<Yaml>(&text) else {
            // The general gate reports a file Compose cannot read.
            continue;
        };
        // `needle`: text of the line to point at (the first that holds it); see [`Hit`].
        let mut hit = |needle: &str, what: String, message: String, remedy: &str| {
            let line = text.lines().position(|l| l.contains(needle)).map(|i| i + 1);
            let f = Finding::new(
                "aibox::policy::egress_bypass",
                Severity::Error,
                path,
                message,
                remedy,
            )
            .at(line);
            out.extend(consent.judge(true, &format!("egress:{what}"), f));
        };
        if let Some(def) = doc.get("networks").and_then(|n| n.get(INTERNAL)) {
            check_internal_network(def, &generated_name, mode, &mut hit);
        }
        let Some(services) = doc.get("services").and_then(Yaml::as_mapping) else {
            continue;
        };
        for (name, svc) in services {
            let name = name.as_str().unwrap_or("?");
            if name == agent {
                if let Some(mode_value) = svc.get("network_mode") {
                    let shown = mode_value.as_str().unwrap_or("?");
                    hit(
                        "network_mode",
                        format!("network_mode:{shown}"),
                        format!(
                            "service `{agent}` sets `network_mode: {shown}`, which takes it off \
                             the internal network and around the egress proxy"
                        ),
                        "remove `network_mode`; allow hosts with `[network] allow` instead",
                    );
                }
                for net in network_names(svc).into_iter().filter(|n| n != INTERNAL) {
                    hit(
                        &net,
                        format!("network:{net}"),
                        format!(
                            "service `{agent}` joins network `{net}` besides `{INTERNAL}`: a \
                             route out around the egress proxy"
                        ),
                        "keep the agent on the internal network only; allow hosts with \
                         `[network] allow` instead",
                    );
                }
            } else {
                if name == PROXY
                    && let Some(caps) = svc.get("cap_add").and_then(Yaml::as_sequence)
                    && !caps.is_empty()
                {
                    hit(
                        "cap_add",
                        format!("{PROXY}:cap_add"),
                        format!(
                            "the egress proxy `{PROXY}` is given capabilities; it needs none \
                             (it runs as `nobody` and listens on an unprivileged port)"
                        ),
                        "remove `cap_add` from the proxy service",
                    );
                }
                if network_names(svc).iter().any(|n| n == INTERNAL) {
                    hit(
                        name,
                        format!("network:{INTERNAL}:{name}"),
                        format!(
                            "service `{name}` joins the internal network `{INTERNAL}`: the \
                             agent could reach the outside (or a resolver) through it, around \
                             the egress proxy"
                        ),
                        "only the agent belongs on the internal network; it reaches the egress \
                         proxy through its socket",
                    );
                }
            }
        }
    }
    out
}

/// Every Compose file a tool may run the agent with, and every `.env` read with them:
/// `aibox up`'s and those each dev container configuration names (one judged, all
/// judged), each once.
fn judged_files(sources: &dyn ComposeSources) -> (Vec<String>, Vec<String>) {
    let mut paths: Vec<String> = Vec::new();
    let mut envs: Vec<String> = Vec::new();
    for (files, env) in crate::gate::compose_projects(sources) {
        for file in files {
            if !paths.contains(&file) {
                paths.push(file);
            }
        }
        if !envs.contains(&env) {
            envs.push(env);
        }
    }
    (paths, envs)
}

/// `.devcontainer/.env` must not set the variable the internal network's name comes
/// from: VS Code's and the Dev Containers CLI's Compose would read it and put the agent
/// on that network instead of the one `initializeCommand` made (`aibox up` sets the
/// variable itself, which wins over the file).
fn env_names_the_network(
    consent: &Consent,
    sources: &dyn ComposeSources,
    path: &str,
    out: &mut Vec<Finding>,
) {
    use aibox_config::container::EGRESS_NETWORK_VAR;
    let Some(text) = sources.read(path) else {
        return;
    };
    let Some(line) = text.lines().position(|l| {
        let l = l.trim_start();
        let l = l.strip_prefix("export ").unwrap_or(l).trim_start();
        l.strip_prefix(EGRESS_NETWORK_VAR)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    }) else {
        return;
    };
    let f = Finding::new(
        "aibox::policy::egress_bypass",
        Severity::Error,
        path,
        format!(
            "`{EGRESS_NETWORK_VAR}` is set: VS Code and the Dev Containers CLI would put the \
             agent on that network instead of the internal one made for it"
        ),
        "remove the line; the generated Compose file names the network",
    )
    .at(Some(line + 1));
    out.extend(consent.judge(true, &format!("egress:{EGRESS_NETWORK_VAR}"), f));
}

/// A finding: the text of the line to point at (the first that holds it), the option an
/// exception names (after `egress:`), the message and the remedy.
type Hit<'a> = dyn FnMut(&str, String, String, &str) + 'a;

/// The internal network's definition in one file: it must stay internal, and be the
/// project's own network (`name` only as the generator writes it: `generated_name`).
fn check_internal_network(def: &Yaml, generated_name: &str, mode: EgressMode, hit: &mut Hit<'_>) {
    if def
        .get("internal")
        .is_some_and(|v| v.as_bool() != Some(true))
    {
        hit(
            "internal:",
            format!("{INTERNAL}:internal"),
            format!(
                "network `{INTERNAL}` is made non-internal, so the agent gets a route out \
                 around the egress proxy (`[network] egress = \"{}\"`)",
                mode.as_str()
            ),
            "remove the override of `internal`; allow hosts with `[network] allow` instead",
        );
    }
    // `name`/`external` would put the agent on an existing network (with a route or a
    // resolver); a driver or its options could make it one. The generated `name` is the
    // network `up` or `initializeCommand` makes without a resolver before Compose runs.
    for key in def
        .as_mapping()
        .into_iter()
        .flat_map(|m| m.iter())
        .filter(|(k, v)| k.as_str() != Some("name") || v.as_str() != Some(generated_name))
        .map(|(k, _)| k.as_str().unwrap_or("?"))
        .filter(|k| !matches!(*k, "internal" | "labels"))
    {
        hit(
            &format!("{key}:"),
            format!("{INTERNAL}:{key}"),
            format!(
                "network `{INTERNAL}` sets `{key}`: the agent's network must be the \
                 project's own internal network, or it may get a route or a resolver around \
                 the egress proxy (`[network] egress = \"{}\"`)",
                mode.as_str()
            ),
            "remove the override of the network; allow hosts with `[network] allow` instead",
        );
    }
}

/// The networks a service joins (list or map form); a name that is not text is `?`.
fn network_names(svc: &Yaml) -> Vec<String> {
    match svc.get("networks") {
        Some(Yaml::Sequence(list)) => list
            .iter()
            .map(|n| n.as_str().unwrap_or("?").to_owned())
            .collect(),
        Some(Yaml::Mapping(map)) => map
            .keys()
            .map(|n| n.as_str().unwrap_or("?").to_owned())
            .collect(),
        _ => Vec::new(),
    }
}
