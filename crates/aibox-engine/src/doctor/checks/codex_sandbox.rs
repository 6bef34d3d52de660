//! The `codex-sandbox` check (Codex enabled only): the user-namespace probe in the
//! running container.

use super::{EngineAt, SKIPPED};
use crate::codex_sandbox::{SandboxReport, SandboxStatus};
use crate::doctor::report::Run;
use crate::security::Security;
use aibox_config::{AiboxToml, Project};
use aibox_policy::{Finding, SeccompPosture, Severity};
use aibox_runtime::FoundContainer;

/// Probes the project's running container; a container that is not running (or an
/// engine that cannot be used) gives "not checked" with the reason.
fn probe(
    config: &AiboxToml,
    posture: SeccompPosture,
    engine: &EngineAt,
    found: Option<&FoundContainer>,
) -> SandboxReport {
    let not_checked = |detail: String| SandboxReport {
        status: SandboxStatus::NotChecked,
        posture: posture.as_str().to_owned(),
        probe: aibox_runtime::USERNS_PROBE.join(" "),
        detail,
        fix: None,
    };
    match engine {
        Ok((runtime, target)) => {
            crate::codex_sandbox::probe(config, posture, (runtime, target), found)
                .unwrap_or_else(|| not_checked(String::new()))
        }
        Err(e) => not_checked(e.clone()),
    }
}

fn finding(report: &SandboxReport) -> Finding {
    match report.status {
        SandboxStatus::Works => Finding::new(
            "aibox::doctor::codex_sandbox",
            Severity::Info,
            "",
            report.line(),
            "",
        ),
        SandboxStatus::Blocked => Finding::new(
            "aibox::doctor::codex_sandbox_blocked",
            Severity::Warning,
            aibox_config::AIBOX_TOML,
            format!(
                "Codex sandbox: blocked ({}): `{}` failed in the container: {}",
                report.posture, report.probe, report.detail
            ),
            report.fix.clone().unwrap_or_default(),
        ),
        SandboxStatus::NotChecked => Finding::new(
            "aibox::doctor::codex_sandbox_unchecked",
            Severity::Info,
            "",
            format!("Codex sandbox: not checked ({})", report.detail),
            "start the container (`aibox up`) and run `aibox doctor` again",
        ),
    }
}

/// The `codex-sandbox` check (Codex enabled only): the probe's finding, and its report.
/// `found` is the container doctor found (the probe runs in it when it runs).
pub(crate) fn check(
    run: &mut Run,
    project: Option<&Project>,
    security: Option<&Security>,
    engine: &EngineAt,
    found: Option<&FoundContainer>,
) -> Option<SandboxReport> {
    let p = project.filter(|p| crate::codex_sandbox::codex_enabled(&p.config))?;
    if let Err(why) = engine
        && why == SKIPPED
    {
        run.skip("codex-sandbox", why);
        return None;
    }
    let posture = security.map_or(SeccompPosture::EngineDefault, Security::posture);
    let report = probe(&p.config, posture, engine, found);
    run.check("codex-sandbox", vec![finding(&report)]);
    Some(report)
}
