//! The `sync` check: the generated files as `aibox apply --check` sees them, planned
//! from the offline resolve (a release missing from the download cache is reported as
//! not resolved, never downloaded), and more reach for the container than was approved
//! for the checkout, which the next `apply` will ask for.

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
    let pending = match &planned {
        Some(Ok(plan)) => more_reach(resolved, plan),
        _ => Vec::new(),
    };
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
            .chain(pending)
            .collect(),
        Err(e) => vec![plan_failed(&e)],
    }
}

/// What the configuration lets the container reach beyond the reach approved for this
/// checkout ([`crate::reach`]): the next `apply` will ask for it. A record that cannot
/// be read is the apply's error already.
fn more_reach(resolved: &Resolved, plan: &Plan) -> Vec<Finding> {
    let root = resolved.project_root().path();
    let approved =
        crate::reach::Approvals::default_location().and_then(|a| a.approved(root).ok().flatten());
    let (Some(reach), Some(approved)) = (&plan.reach, approved) else {
        return Vec::new();
    };
    let more = reach.beyond(&approved);
    if more.is_empty() {
        return Vec::new();
    }
    vec![Finding::new(
        "aibox::doctor::reach_not_approved",
        Severity::Warning,
        // Each addition names its own file.
        "",
        format!(
            "the configuration lets the container reach more than you approved for this \
             checkout: {}",
            more.join("; ")
        ),
        "if you made these changes, approve them with `aibox apply --approve-reach`; if you \
         did not, the agent in the container may have: undo them",
    )]
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
