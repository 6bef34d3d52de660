//! The `egress` check (`[network] egress = "allowlist"`): the hosts the egress proxy
//! refused, read from its log, each with how to allow it.

use std::collections::BTreeMap;

use aibox_config::{EgressMode, PlannedFile, Project};
use aibox_devcontainer::egress::{BLOCKED_LOG_MARKER, PROXY_USER};
use aibox_policy::{Finding, Severity};
use aibox_runtime::{ContainerState, ProxyStatus};
use camino::Utf8Path;

use super::EngineAt;
use crate::doctor::report::Run;

/// How much of the proxy's log is read: recent refusals, bounded.
const LOG_TAIL: u32 = 5000;

/// The `egress` check: skipped unless `allowlist` mode and a reachable engine. While the
/// agent's container (`agent`) runs, a proxy that does not is an error: the agent
/// then has no way out, and nothing else says why.
pub(crate) fn check(
    run: &mut Run,
    project: Option<&Project>,
    engine: &EngineAt,
    agent: Option<&aibox_runtime::FoundContainer>,
) {
    let Some(p) = project.filter(|p| p.config.network.egress == EgressMode::Allowlist) else {
        run.skip("egress", "not in allowlist mode");
        return;
    };
    let Ok((runtime, target)) = engine else {
        run.skip("egress", "no engine");
        return;
    };
    // Found once, for its state, what it enforces and its log.
    let proxy = match runtime.egress_proxy(target, agent) {
        Ok(proxy) => proxy,
        Err(e) => {
            run.skip("egress", &e.to_string());
            return;
        }
    };
    let status = ProxyStatus::of(proxy.as_ref());
    if status.state != ContainerState::Running
        && agent.is_some_and(aibox_runtime::FoundContainer::running)
    {
        let engine = runtime.detected().engine.engine.to_string();
        run.check("egress", vec![proxy_down(&status, p, &engine)]);
        return;
    }
    let Some(proxy) = proxy else {
        run.skip("egress", "no egress proxy container (run `aibox up`)");
        return;
    };
    // What the running proxy enforces, against the files it was made from, then what its
    // log says it refused.
    let checked = enforced_findings(runtime, target, &proxy).and_then(|mut all| {
        all.extend(findings(&runtime.logs(&proxy, LOG_TAIL)?, p));
        Ok(all)
    });
    match checked {
        Ok(all) => run.check("egress", all),
        Err(e) => run.skip("egress", &e.to_string()),
    }
}

/// The running proxy's filter and configuration (joined from the team's and the personal
/// files when it started) against those files now: a proxy started while they said
/// something else (edited, then put back) still enforces that, whatever the files and the
/// `egress-files` check say.
fn enforced_findings(
    runtime: &aibox_runtime::Runtime,
    target: &aibox_runtime::Target,
    proxy: &aibox_runtime::FoundContainer,
) -> Result<Vec<Finding>, aibox_runtime::RuntimeError> {
    use aibox_config::layout::{
        EGRESS_CONF, EGRESS_FILTER, EGRESS_LOCAL_CONF, EGRESS_LOCAL_FILTER,
    };
    use aibox_devcontainer::egress::{RUN_CONF, RUN_FILTER};
    if !proxy.running() {
        return Ok(Vec::new());
    }
    let disk = |rel: &str| fs_err::read_to_string(target.root.join(rel)).unwrap_or_default();
    let mut out = Vec::new();
    for (running, team, personal) in [
        (RUN_FILTER, EGRESS_FILTER, EGRESS_LOCAL_FILTER),
        (RUN_CONF, EGRESS_CONF, EGRESS_LOCAL_CONF),
    ] {
        // As the proxy's own user, who wrote the files at its start.
        let (true, enforced) = runtime.exec_output_in(proxy, PROXY_USER, &["cat", running])? else {
            continue;
        };
        let expected = format!("{}{}", disk(team), disk(personal));
        if enforced.lines().eq(expected.lines()) {
            continue;
        }
        out.push(Finding::new(
            "aibox::doctor::egress_enforced",
            Severity::Error,
            team,
            format!(
                "the running egress proxy enforces another {} than `{team}` and `{personal}` \
                 hold: it was started while they said something else, and may let through \
                 hosts no configuration names",
                if running == RUN_FILTER {
                    "filter"
                } else {
                    "configuration"
                }
            ),
            "run `aibox apply`, then `aibox down` and `aibox up` (the proxy reads the files \
             again when it starts)",
        ));
    }
    Ok(out)
}

/// The error for a proxy that does not run beside a running agent.
fn proxy_down(status: &ProxyStatus, project: &Project, engine: &str) -> Finding {
    let state = status
        .engine_status
        .clone()
        .unwrap_or_else(|| status.state.to_string());
    Finding::new(
        "aibox::doctor::egress_proxy",
        Severity::Error,
        aibox_config::layout::COMPOSE,
        format!(
            "the egress proxy `{}` of the agent container `{}` is {state}: the agent has no \
             way out, not even to the allowed hosts",
            status.container, project.config.container.name
        ),
        format!(
            "run `aibox up` (it starts the proxy, or makes it when it is missing); if it stops \
             again, see why with `{engine} logs {}`",
            status.container
        ),
    )
}

/// The proxy's personal files (`egress.local.filter`, `egress.local.conf`): gitignored, so
/// `apply --check` (the `sync` check) leaves them out, but the proxy joins them to the
/// team's files at every start, whoever starts it. One that differs from what `apply`
/// writes from `.aibox-local.toml` changes what the proxy lets through.
const LOCAL_FILES: [&str; 2] = [
    aibox_config::layout::EGRESS_LOCAL_FILTER,
    aibox_config::layout::EGRESS_LOCAL_CONF,
];

/// The proxy's personal files that differ from `planned` (the plan's files; nothing is
/// judged without a plan or outside `allowlist` mode): each an error, since the next
/// start of the proxy by any tool enforces what is on disk.
pub(crate) fn local_file_findings(root: &Utf8Path, planned: &[PlannedFile]) -> Vec<Finding> {
    let mut out = Vec::new();
    for rel in LOCAL_FILES {
        let Some(file) = planned.iter().find(|f| f.path == rel) else {
            continue;
        };
        let on_disk = fs_err::read(root.join(rel)).ok();
        if on_disk.as_deref() == Some(&*file.contents) {
            continue;
        }
        let what = if on_disk.is_some() {
            "differs from what `aibox apply` writes from .aibox-local.toml"
        } else {
            "is missing"
        };
        out.push(Finding::new(
            "aibox::doctor::egress_files",
            Severity::Error,
            rel,
            format!(
                "`{rel}` {what}: the egress proxy reads it at every start (also one by VS Code, \
                 the Dev Containers CLI or the engine), so it may allow hosts no configuration \
                 names"
            ),
            "run `aibox apply` (it rewrites the file from .aibox-local.toml), then `aibox up` \
             to restart the proxy with it",
        ));
    }
    out
}

/// The refused hosts in `log`, with how many times each was refused.
pub(crate) fn blocked_hosts(log: &str) -> BTreeMap<String, usize> {
    let mut hosts = BTreeMap::new();
    for line in log.lines() {
        let Some(at) = line.find(BLOCKED_LOG_MARKER) else {
            continue;
        };
        let rest = &line[at + BLOCKED_LOG_MARKER.len()..];
        if let Some(host) = rest.split('"').next().filter(|h| !h.is_empty()) {
            *hosts.entry(aibox_config::bounded(host, 253)).or_insert(0) += 1;
        }
    }
    hosts
}

fn findings(log: &str, project: &Project) -> Vec<Finding> {
    blocked_hosts(log)
        .into_iter()
        .map(|(host, count)| {
            let remedy = if aibox_config::validate::egress_host_problem(&host).is_none() {
                let with = |list: &[String]| {
                    let mut list = list.to_vec();
                    list.push(host.clone());
                    // Validated host names need no escaping in TOML or in single quotes.
                    format!("{list:?}")
                };
                format!(
                    "if the agent needs it, allow it for the team with `aibox config set \
                     network.allow '{}'` or for you alone with `aibox config set --local \
                     network.allow '{}'`, then run `aibox apply --approve-reach` (you approve the new \
                     host) and `aibox up`",
                    with(&project.config.network.allow),
                    with(&project.local.network.allow)
                )
            } else {
                "an address or malformed name is never allowed: the proxy judges host names; \
                 allow the name the agent should use instead"
                    .to_owned()
            };
            Finding::new(
                "aibox::doctor::egress_blocked",
                Severity::Info,
                aibox_config::layout::EGRESS_FILTER,
                format!(
                    "blocked: {host} ({count} request(s) from the agent container `{}` refused \
                     by the egress proxy)",
                    project.config.container.name
                ),
                remedy,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_refusals_from_a_real_log() {
        let log = "NOTICE    Dec 02 08:10:16.337 [6]: Initializing tinyproxy ...\n\
                   CONNECT   Dec 02 08:10:26.947 [6]: Connect (file descriptor 7): 10.89.30.2\n\
                   NOTICE    Dec 02 08:10:26.948 [6]: Proxying refused on filtered domain \"denied.test\"\n\
                   NOTICE    Dec 02 08:10:27.338 [6]: Proxying refused on filtered domain \"10.89.31.3\"\n\
                   NOTICE    Dec 02 08:10:27.958 [6]: Proxying refused on filtered domain \"denied.test\"\n\
                   NOTICE    Dec 02 08:10:28.000 [6]: Proxying refused on filtered domain \"\"\n\
                   INFO      Dec 02 08:10:29.000 [6]: Established connection to host \"allowed.test\"\n";
        let hosts = blocked_hosts(log);
        assert_eq!(
            hosts.into_iter().collect::<Vec<_>>(),
            [("10.89.31.3".to_owned(), 1), ("denied.test".to_owned(), 2)]
        );
        assert!(blocked_hosts("").is_empty());
    }
}
