//! `aibox mcp list`: the effective MCP servers per harness (`aibox_engine::mcp_list`,
//! resolved offline: it never downloads); `aibox mcp check`: each stdio server started in
//! the running container and put through the MCP handshake (`aibox_engine::mcp_check`).

use std::time::Duration;

use aibox_engine::{McpCheckOptions, ServerCheck, ServerStatus};

use super::{Outcome, json_or, project_root};
use crate::args::{Global, McpCheckArgs};
use crate::exit::Exit;
use crate::render;

pub fn list(g: &Global) -> Outcome {
    let root = project_root(g)?;
    let list = aibox_engine::mcp_list(&root)?;
    if let Some(reason) = &list.not_resolved {
        // `mcp list` never downloads: say the processkit servers are missing and why.
        render::warning(&format!(
            "processkit servers not listed: not resolved: {reason}"
        ));
    }
    // JSON gets the whole list: the servers aibox registers, those added by hand and why
    // the processkit servers are missing, as the text below tells them.
    json_or(g, &list, || {
        let (servers, hand) = (&list.servers, &list.hand_added);
        if g.quiet {
            // Only what needs attention: the servers a harness does not get.
            for s in servers {
                if let Some(why) = &s.skipped {
                    render::out(&format!(
                        "{} {}: not registered: {why}",
                        s.harness.as_str(),
                        s.name
                    ));
                }
            }
            return;
        }
        if servers.is_empty() {
            render::out("no MCP servers are configured");
            print_hand_added(hand);
            return;
        }
        // One table row per server and harness; its details follow, indented.
        let cells: Vec<Vec<String>> = servers
            .iter()
            .map(|s| {
                vec![
                    s.harness.as_str().to_owned(),
                    s.name.clone(),
                    format!("{:?}", s.origin).to_lowercase(),
                    s.transport.to_string(),
                    s.target_file.clone().unwrap_or_else(|| "-".to_owned()),
                ]
            })
            .collect();
        let headers = ["harness", "server", "origin", "transport", "file"];
        let lines = render::table(&headers, &cells);
        render::out(&lines[0]);
        for (s, line) in servers.iter().zip(&lines[1..]) {
            render::out(line);
            let tools = if s.allowed_tools.is_empty() {
                "(ask)".to_owned()
            } else {
                s.allowed_tools.join(", ")
            };
            render::out(&format!(
                "    trust: {}; allowed tools: {tools}",
                s.trust_scope
            ));
            if let Some(why) = &s.skipped {
                render::out(&format!("    not registered: {why}"));
            }
            for note in &s.notes {
                render::out(&format!("    note: {note}"));
            }
        }
        print_hand_added(hand);
    })?;
    Ok(Exit::Ok)
}

/// The entries added by hand to the harness files: loaded by their harness, left alone by
/// aibox (so not in the table of what aibox registers).
fn print_hand_added(hand: &[aibox_engine::HandAdded]) {
    if hand.is_empty() {
        return;
    }
    render::out("added by hand (their harness loads them; aibox leaves them alone):");
    for h in hand {
        render::out(&format!(
            "    {} {} ({})",
            h.harness.as_str(),
            h.name,
            h.file
        ));
    }
}

pub fn check(g: &Global, args: &McpCheckArgs) -> Outcome {
    let root = project_root(g)?;
    let options = McpCheckOptions {
        names: args.names.clone(),
        timeout: args.timeout.map(Duration::from_secs),
        ..McpCheckOptions::default()
    };
    let report = aibox_engine::mcp_check(&root, &options, &mut |name| {
        render::note(g.quiet, &format!("starting {name} in the container ..."));
    })?;
    if let Some(reason) = &report.not_resolved {
        render::warning(&format!(
            "processkit servers not checked: not resolved: {reason}"
        ));
    }
    json_or(g, &report, || {
        if report.servers.is_empty() {
            render::out("no MCP servers are configured");
        }
        let width = report
            .servers
            .iter()
            .map(|s| s.name.len())
            .max()
            .unwrap_or(0);
        for server in &report.servers {
            for line in human(server, width) {
                render::out(&line);
            }
        }
    })?;
    Ok(if report.all_ok() {
        Exit::Ok
    } else {
        Exit::Problems
    })
}

/// One server: `ok   name  (3 tools, initialize 1.2 s) [claude, codex]`, or `FAIL` with
/// the reason, the stderr tail and the fix.
fn human(s: &ServerCheck, width: usize) -> Vec<String> {
    let harnesses: Vec<&str> = s.harnesses.iter().map(|h| h.as_str()).collect();
    let used_by = if harnesses.is_empty() {
        String::new()
    } else {
        format!(" [{}]", harnesses.join(", "))
    };
    let reason = s.reason.as_deref().unwrap_or_default();
    let mut lines = vec![match s.status {
        ServerStatus::Ok => format!("ok   {:<width$}  ({}){used_by}", s.name, s.summary()),
        ServerStatus::Failed => format!("FAIL {:<width$}  {reason}{used_by}", s.name),
        ServerStatus::NotChecked => format!("skip {:<width$}  {reason}{used_by}", s.name),
    }];
    if s.status == ServerStatus::Failed {
        let tail = s.probe.as_ref().map_or(&[][..], |p| &p.stderr_tail[..]);
        if !tail.is_empty() {
            lines.push("     stderr:".to_owned());
            lines.extend(tail.iter().map(|l| format!("     | {l}")));
        }
        if let Some(fix) = &s.fix {
            lines.push(format!("     fix: {fix}"));
        }
    }
    lines.extend(s.notes.iter().map(|n| format!("     note: {n}")));
    lines
}

/// `KEY=VALUE` pairs of `--env`/`--header`.
fn pairs(
    items: &[String],
    flag: &str,
) -> Result<std::collections::BTreeMap<String, String>, crate::error::CliError> {
    items
        .iter()
        .map(|item| {
            item.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| crate::error::CliError::BadPair {
                    flag: flag.to_owned(),
                    item: item.clone(),
                })
        })
        .collect()
}

fn file_of(local: bool) -> aibox_config::edit::ConfigFile {
    if local {
        aibox_config::edit::ConfigFile::Local
    } else {
        aibox_config::edit::ConfigFile::Team
    }
}

/// `aibox mcp add NAME [--env K=V]... [--url URL] [--local] -- COMMAND ARGS...`.
pub fn add(g: &Global, args: &crate::args::McpAddArgs) -> Outcome {
    let root = project_root(g)?;
    let (command, rest) = match args.command.split_first() {
        Some((c, rest)) => (Some(c.clone()), rest.to_vec()),
        None => (None, Vec::new()),
    };
    if command.is_none() && args.url.is_none() {
        return Err(crate::error::CliError::McpAddWhat {
            name: args.name.clone(),
        }
        .into());
    }
    let server = aibox_config::McpServer {
        name: args.name.clone(),
        command,
        args: rest,
        env: pairs(&args.env, "--env")?,
        url: args.url.clone(),
        headers: pairs(&args.headers, "--header")?,
        allowed_tools: Vec::new(),
        startup_timeout_sec: None,
        enabled: true,
    };
    let file = file_of(args.local);
    let path = match aibox_engine::config_edit::mcp_add(&root, file, &server) {
        Ok(path) => path,
        Err(e) => {
            render::note(
                g.quiet || g.output == crate::args::Output::Json,
                &format!("{} was not changed", file.file_name()),
            );
            return Err(e.into());
        }
    };
    json_or(
        g,
        &serde_json::json!({ "added": args.name, "file": path }),
        || {
            render::note(
                g.quiet,
                &format!(
                    "added MCP server `{}` to {path}; run `aibox apply` to register it",
                    args.name
                ),
            );
        },
    )?;
    Ok(Exit::Ok)
}

/// `aibox mcp remove NAME [--local]`.
pub fn remove(g: &Global, name: &str, local: bool) -> Outcome {
    let root = project_root(g)?;
    let file = file_of(local);
    let (path, removed) = aibox_engine::config_edit::mcp_remove(&root, file, name)?;
    if !removed {
        // The server may be in the other file: say which, and how to remove it there.
        let other = file_of(!local);
        let there =
            aibox_config::read_config_file(&root.join(other.file_name()), other.file_name())
                .ok()
                .and_then(|text| aibox_config::edit::remove_mcp_server(other, &text, name).ok())
                .flatten()
                .is_some();
        if there {
            return Err(crate::error::CliError::McpRemoveOtherFile {
                name: name.to_owned(),
                file: file.file_name(),
                other: other.file_name(),
                command: if local {
                    format!("aibox mcp remove {name}")
                } else {
                    format!("aibox mcp remove --local {name}")
                },
            }
            .into());
        }
    }
    json_or(
        g,
        &serde_json::json!({ "removed": removed, "file": path }),
        || {
            let msg = if removed {
                format!(
                    "removed MCP server `{name}` from {path}; run `aibox apply` to deregister it"
                )
            } else {
                format!("{path} has no MCP server `{name}`; nothing to change")
            };
            render::note(g.quiet, &msg);
        },
    )?;
    Ok(Exit::Ok)
}
