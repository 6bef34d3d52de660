//! `aibox network list`: the egress mode and the effective allowlist with each host's
//! origin (`aibox_engine::network_list::network_list`).

use super::{Outcome, json_or, project_root};
use crate::args::Global;
use crate::exit::Exit;
use crate::render;

pub fn list(g: &Global) -> Outcome {
    let root = project_root(g)?;
    let list = aibox_engine::network_list::network_list(&root)?;
    json_or(g, &list, || {
        render::out(&format!("egress: {}", list.egress));
        match list.egress {
            "open" => render::out(
                "the container reaches whatever its host reaches; set `[network] egress = \
                 \"allowlist\"` to allow only named hosts",
            ),
            "none" => render::out("the container has no route out"),
            _ => {
                if let Some(proxy) = &list.proxy {
                    render::out(&format!("proxy: {proxy}"));
                }
                if let Some(up) = &list.upstream_proxy {
                    render::out(&format!("upstream proxy (personal): {up}"));
                }
                host_table(["host", "from"], &list.hosts);
                if !list.build.is_empty() {
                    render::out(
                        "build time only (the image builds use the host's network; not on the \
                         agent's allowlist):",
                    );
                    host_table(["registry", "needed by"], &list.build);
                }
                if let Some(why) = &list.not_resolved {
                    render::out(&format!(
                        "the processkit release is not resolved ({why}): its skills' declared \
                         hosts are not listed; `aibox apply` downloads it"
                    ));
                }
            }
        }
    })?;
    for warning in &list.warnings {
        render::warning(warning);
    }
    Ok(Exit::Ok)
}

/// One row per host with its origins.
fn host_table(headers: [&str; 2], hosts: &[aibox_engine::network_list::NetworkHost]) {
    let cells: Vec<Vec<String>> = hosts
        .iter()
        .map(|h| vec![h.host.clone(), h.origins.join("; ")])
        .collect();
    for line in render::table(&headers, &cells) {
        render::out(&line);
    }
}
