//! The `sync` check: the generated files as `aibox apply --check` sees them, planned
//! from the offline resolve (a release missing from the download cache is reported as
//! not resolved, never downloaded).

use aibox_policy::{Finding, Severity};

use crate::builder::Plan;
use crate::resolve::Resolved;

/// The findings of the `sync` check for the project's resolve outcome and doctor's one
/// plan of it (`None` when there was nothing to plan: the resolve failed or the release
/// is not resolved).
pub(crate) fn findings(
    resolved: &Result<Resolved, crate::error::EngineError>,
    planned: Option<Result<Plan, crate::error::EngineError>>,
) -> Vec<Finding> {
    let resolved = match resolved {
        Ok(r) => r,
        Err(e) => return vec![plan_failed(e)],
    };
    if let Some(reason) = resolved.not_resolved() {
        return vec![Finding::new(
            "aibox::doctor::not_resolved",
            Severity::Warning,
            aibox_config::AIBOX_TOML,
            format!(
                "not resolved: {reason}; the generated files were not compared (doctor never \
                 downloads)"
            ),
            "run `aibox apply` (it downloads and verifies the release), then `aibox doctor`",
        )];
    }
    let checked = match planned {
        Some(Ok(plan)) => crate::apply::check_planned(resolved, plan),
        Some(Err(e)) => Err(e),
        None => return Vec::new(),
    };
    match checked {
        Ok(report) => report
            .files
            .iter()
            .filter(|f| f.action.changes())
            .map(|f| {
                Finding::new(
                    "aibox::doctor::out_of_sync",
                    Severity::Warning,
                    f.path.as_str(),
                    format!(
                        "differs from what `aibox apply` would write ({})",
                        f.action.as_str()
                    ),
                    "run `aibox apply` (`aibox apply --dry-run` shows the diff)",
                )
            })
            // What `apply` warns about settings with no effect and skipped or kept
            // processkit content is a finding here too, so `doctor` never says ok
            // about it. The `mcp:` notices are guidance (approval commands, seeded trust)
            // and stay with `apply` and `aibox mcp list`.
            .chain(
                report
                    .warnings
                    .iter()
                    .filter(|w| w.starts_with("processkit:") || w.starts_with("config:"))
                    .map(|w| {
                        Finding::new(
                            "aibox::doctor::apply_warning",
                            Severity::Warning,
                            "aibox.toml",
                            w.clone(),
                            "follow the advice in the message; `aibox apply` shows the same \
                             warning",
                        )
                    }),
            )
            .collect(),
        Err(e) => vec![plan_failed(&e)],
    }
}

/// `aibox apply` would fail: the error, as plain text.
fn plan_failed(e: &crate::error::EngineError) -> Finding {
    use miette::Diagnostic as _;
    let code = e.code().map(|c| c.to_string()).unwrap_or_default();
    Finding::new(
        "aibox::doctor::plan_failed",
        Severity::Error,
        "",
        format!("`aibox apply` would fail [{code}]: {e}"),
        e.help().map_or_else(
            || "run `aibox apply` for details".to_owned(),
            |h| h.to_string(),
        ),
    )
}
