//! The `skills` check: review verdicts of the installed skills.

use aibox_config::Project;
use aibox_policy::{Finding, Severity};

/// The review verdicts of the installed skills: first-party failures summarised in one
/// note (reported, never blocking unless `[processkit] review = "all"`), each gated skill
/// that fails without a recorded consent as a warning (`apply` refuses it).
pub(crate) fn findings(project: &Project, skills: &[crate::skills::SkillInfo]) -> Vec<Finding> {
    use crate::skills::Trust;
    let strict = project.config.processkit.review == aibox_config::ReviewScope::All;
    let consented = |name: &str| {
        project
            .config
            .skills
            .review_exceptions
            .iter()
            .any(|e| e.skill == name)
    };
    let points = |s: &crate::skills::SkillInfo| {
        s.failed_points
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    let mut first_party = Vec::new();
    for s in skills.iter().filter(|s| !s.failed_points.is_empty()) {
        let gated = s.origin == Trust::ThirdParty || strict;
        if gated && s.mcp_server && !consented(&s.name) {
            out.push(Finding::new(
                "aibox::doctor::skill_review_failed",
                Severity::Warning,
                &s.dir,
                format!(
                    "{} skill `{}` fails review point(s) {}; `aibox apply` refuses to register it",
                    if s.origin == Trust::ThirdParty { "third-party" } else { "first-party" },
                    s.name,
                    points(s)
                ),
                format!(
                    "read `aibox skill review {}`; remove it, or record a [[skills.review_exceptions]] consent",
                    s.name
                ),
            ));
        } else if s.origin == Trust::FirstParty {
            first_party.push(format!("{} (point {})", s.name, points(s)));
        }
    }
    if !first_party.is_empty() {
        out.push(Finding::new(
            "aibox::doctor::first_party_review",
            Severity::Info,
            "context/skills",
            format!(
                "{} skill(s) of the verified processkit release fail review points (reported, not blocking): {}",
                first_party.len(),
                first_party.join("; ")
            ),
            "`aibox skill review NAME` shows the evidence; `[processkit] review = \"all\"` gates them",
        ));
    }
    out
}
