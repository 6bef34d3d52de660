//! The `mcp-servers` check: on a running container, every stdio MCP server the harnesses
//! would start must answer the MCP handshake (`aibox mcp check`, run the same way).
//! Without a running container the check is skipped, not failed.

use std::fmt::Write as _;

use aibox_mcp_registration::{Origin, ServerSpec};
use aibox_policy::{Finding, Severity};
use aibox_runtime::FoundContainer;

use crate::doctor::report::Run;
use crate::error::EngineError;
use crate::mcp_check::{McpCheckReport, ServerCheck, ServerStatus};
use crate::resolve::Resolved;

/// The check's name in the report.
const NAME: &str = "mcp-servers";

/// Runs the check when the project's container runs; records it as skipped otherwise.
/// `processkit` is the processkit servers of doctor's one plan (none when the release is
/// not resolved), or why that plan failed; `container` the container doctor found (the
/// probes run in it without another lookup).
pub(crate) fn check(
    run: &mut Run,
    resolved: Option<&Result<Resolved, EngineError>>,
    processkit: &Result<Vec<ServerSpec>, String>,
    engine: &super::EngineAt,
    container: Option<&FoundContainer>,
) {
    let Some(Ok(resolved)) = resolved else {
        run.skip(NAME, "the project could not be resolved");
        return;
    };
    let (runtime, target) = match engine {
        Ok(found) => found,
        Err(why) => return run.skip(NAME, why),
    };
    let processkit = match processkit {
        Ok(servers) => servers,
        Err(why) => return run.skip(NAME, why),
    };
    let checked = crate::mcp_check::mcp_check_planned(
        resolved,
        processkit,
        (runtime, target),
        container,
        &mut |_| {},
    );
    match checked {
        Ok(report) if !report.servers.iter().any(|s| s.transport == "stdio") => {
            run.skip(NAME, "no stdio MCP servers are configured");
        }
        Ok(report) => run.check(NAME, findings(&report)),
        Err(e) if e.is_not_running() => run.skip(
            NAME,
            &format!(
                "no running container ({e}): start it with `aibox up` to check that the MCP \
                 servers start"
            ),
        ),
        Err(e) => run.skip(NAME, &e.to_string()),
    }
}

/// An error per failed server, and one note summing up the rest.
fn findings(report: &McpCheckReport) -> Vec<Finding> {
    let mut findings: Vec<Finding> = report.failed().map(failed).collect();
    let started: Vec<&ServerCheck> = report
        .servers
        .iter()
        .filter(|s| s.status == ServerStatus::Ok)
        .collect();
    let stdio = report
        .servers
        .iter()
        .filter(|s| s.transport == "stdio" && !s.harnesses.is_empty())
        .count();
    let mut summary = format!(
        "MCP servers: {} of {stdio} start in `{}`",
        started.len(),
        report.container
    );
    if !started.is_empty() {
        let each: Vec<String> = started
            .iter()
            .map(|s| format!("{} ({})", s.name, s.summary()))
            .collect();
        let _ = write!(summary, ": {}", each.join(", "));
    }
    let unchecked: Vec<String> = report
        .servers
        .iter()
        .filter(|s| s.status == ServerStatus::NotChecked)
        .map(|s| {
            let reason = s.reason.as_deref().unwrap_or_default();
            let reason = reason.strip_suffix(": not checked").unwrap_or(reason);
            let reason = reason.strip_prefix("not checked: ").unwrap_or(reason);
            format!("{} ({reason})", s.name)
        })
        .collect();
    if !unchecked.is_empty() {
        let _ = write!(summary, "; not checked: {}", unchecked.join(", "));
    }
    if let Some(why) = &report.not_resolved {
        let _ = write!(
            summary,
            "; processkit servers not checked: not resolved: {why}"
        );
    }
    findings.push(Finding::new(
        "aibox::doctor::mcp_servers",
        Severity::Info,
        "",
        summary,
        "",
    ));
    findings
}

/// The error for a server that did not start: which one, why, its last stderr lines.
fn failed(server: &ServerCheck) -> Finding {
    let harnesses: Vec<&str> = server.harnesses.iter().map(|h| h.as_str()).collect();
    let mut message = format!(
        "MCP server `{}` ({}; {}) does not start: {}",
        server.name,
        server.origin,
        harnesses.join(", "),
        server.reason.as_deref().unwrap_or("failed")
    );
    let tail = server
        .probe
        .as_ref()
        .map_or(&[][..], |p| &p.stderr_tail[..]);
    if !tail.is_empty() {
        message.push_str("\nits stderr ended with:");
        for line in tail {
            message.push_str("\n  | ");
            message.push_str(line);
        }
    }
    let file = match server.origin {
        Origin::Processkit => "",
        Origin::Team => aibox_config::AIBOX_TOML,
        Origin::Personal => aibox_config::LOCAL_TOML,
    };
    Finding::new(
        "aibox::doctor::mcp_server_failed",
        Severity::Error,
        file,
        message,
        format!(
            "{}; `aibox mcp check {}` checks it again",
            server.fix.as_deref().unwrap_or("see `aibox mcp check`"),
            server.name
        ),
    )
}
