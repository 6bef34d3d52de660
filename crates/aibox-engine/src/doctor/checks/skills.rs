//! The `skills` check: where the installed skills come from and their review verdicts.

use aibox_config::Project;
use aibox_policy::{Finding, Severity};

/// The trusted sources and the review verdicts of the installed skills: one note naming
/// the trusted sources and the skills that are third-party and why, first-party failures
/// summarised in one note (reported, never blocking unless `[processkit] review =
/// "all"`), each gated skill with a server that fails without a current consent as a
/// warning (`apply` refuses it), a stale consent naming what changed.
pub(crate) fn findings(project: &Project, skills: &[crate::skills::SkillInfo]) -> Vec<Finding> {
    use crate::skills::{SkillGate, Trust};
    let config = &project.config;
    let points = |p: &[u8]| p.iter().map(u8::to_string).collect::<Vec<_>>().join(", ");
    let mut out = Vec::new();
    let third: Vec<String> = skills
        .iter()
        .filter(|s| s.origin == Trust::ThirdParty && s.mcp_server)
        .map(|s| format!("{} ({})", s.name, s.origin_reason))
        .collect();
    out.push(Finding::new(
        "aibox::doctor::trusted_sources",
        Severity::Info,
        "aibox.toml",
        format!(
            "skills are first-party only from a verified release of a trusted source ({}) and \
             while unchanged; third-party skills with an MCP server: {}",
            aibox_provenance::trust::trusted_sources(&config.processkit).join(", "),
            if third.is_empty() {
                "none".to_owned()
            } else {
                third.join("; ")
            }
        ),
        "add a source you trust to `[processkit] trusted_sources`; `aibox skill review NAME` \
         shows a skill's trust and evidence",
    ));
    let mut first_party = Vec::new();
    for s in skills {
        let origin = if s.origin == Trust::ThirdParty {
            "third-party"
        } else {
            "first-party"
        };
        match &s.gate {
            SkillGate::Passes | SkillGate::Consented { .. } => {}
            SkillGate::Reported => {
                if s.origin == Trust::FirstParty {
                    first_party.push(format!("{} (point {})", s.name, points(&s.failed_points)));
                }
            }
            SkillGate::Blocking => out.push(Finding::new(
                "aibox::doctor::skill_review_failed",
                if held(project, s).is_empty() {
                    Severity::Warning
                } else {
                    Severity::Error
                },
                &s.dir,
                format!(
                    "{origin} skill `{}` fails review point(s) {}; `aibox apply` refuses to \
                     register it{}",
                    s.name,
                    points(&s.failed_points),
                    held(project, s)
                ),
                format!(
                    "read `aibox skill review {}`; remove it, or record the \
                     [[skills.review_exceptions]] consent it prints",
                    s.name
                ),
            )),
            SkillGate::Stale { why } => out.push(Finding::new(
                "aibox::doctor::stale_consent",
                Severity::Error,
                &s.dir,
                format!(
                    "the review consent for {origin} skill `{}` is stale: {why}; `aibox apply` \
                     refuses to register it{}",
                    s.name,
                    held(project, s)
                ),
                format!(
                    "read `aibox skill review {}` again, then replace its \
                     [[skills.review_exceptions]] entry with the one it prints",
                    s.name
                ),
            )),
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

/// `; an earlier apply registered …` when the gated skill `s` is still registered: the
/// harnesses start it, so it is an error, not the warning of a skill `apply` only keeps
/// out.
fn held(project: &Project, s: &crate::skills::SkillInfo) -> String {
    let note = crate::skills::still_registered_note(&project.root, &[s.name.as_str()]);
    if note.is_empty() {
        note
    } else {
        format!("; {note}")
    }
}
