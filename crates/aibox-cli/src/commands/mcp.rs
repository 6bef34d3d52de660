//! `aibox mcp list`: the effective MCP servers per harness (`aibox_engine::mcp_list`,
//! resolved offline: it never downloads).

use super::{Outcome, json_or, project_root};
use crate::args::Global;
use crate::exit::Exit;
use crate::render;

pub fn list(g: &Global) -> Outcome {
    let root = project_root(g)?;
    let list = aibox_engine::mcp_list(&root)?;
    if let Some(reason) = &list.not_resolved {
        // `mcp list` never downloads: say the processkit servers are missing and why.
        render::note(
            false,
            &format!("warning: processkit servers not listed: not resolved: {reason}"),
        );
    }
    let servers = list.servers;
    json_or(g, &servers, || {
        if servers.is_empty() {
            render::out("no MCP servers are configured");
        }
        for s in &servers {
            let target = s.target_file.as_deref().unwrap_or("-");
            let tools = if s.allowed_tools.is_empty() {
                "(ask)".to_owned()
            } else {
                s.allowed_tools.join(", ")
            };
            render::out(&format!(
                "{:<9} {:<24} {:<10} {:<6} -> {target}",
                s.harness.as_str(),
                s.name,
                format!("{:?}", s.origin).to_lowercase(),
                s.transport
            ));
            render::out(&format!(
                "{:<9} trust: {}; allowed tools: {tools}",
                "", s.trust_scope
            ));
            if let Some(why) = &s.skipped {
                render::out(&format!("{:<9} not registered: {why}", ""));
            }
            for note in &s.notes {
                render::out(&format!("{:<9} note: {note}", ""));
            }
        }
    })?;
    Ok(Exit::Ok)
}
