//! The apply gate: review every gated skill (third-party by provenance, or every skill
//! under `[processkit] review = "all"`) and refuse the failing ones unless `aibox.toml`
//! records a consent (`[[skills.review_exceptions]]`) for them.

use std::fmt::Write as _;

use aibox_config::Project;
use camino::Utf8PathBuf;
use miette::Diagnostic;

use crate::{Review, ReviewContext, ReviewError, review_skill};

/// A skill the gate refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedSkill {
    /// Skill name.
    pub skill: String,
    /// The failed review points.
    pub failed_points: Vec<u8>,
}

/// What the gate decided.
#[derive(Debug, Clone)]
pub struct GateReport {
    /// Skills that may be registered, in input order.
    pub allowed: Vec<String>,
    /// Failing skills let through by a recorded consent: (skill, reviewer).
    pub consented: Vec<(String, String)>,
    /// Every review, in input order.
    pub reviews: Vec<Review>,
}

/// Why the gate stopped `apply`.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum GateError {
    /// Failing skills without a recorded consent.
    #[error("refusing to register {} skill(s) that fail the third-party skill review: {}", .skills.len(), list(.skills))]
    #[diagnostic(code(aibox::skill_review::refused))]
    Refused {
        /// The refused skills.
        skills: Vec<RefusedSkill>,
        /// How to proceed.
        #[help]
        help: String,
    },

    /// A consent entry is incomplete.
    #[error("[[skills.review_exceptions]] for `{skill}` has an empty `{field}`")]
    #[diagnostic(
        code(aibox::skill_review::incomplete_consent),
        help(
            "a consent names who reviewed the skill and why its failed points are acceptable; fill in `{field}` in aibox.toml"
        )
    )]
    IncompleteConsent {
        /// Skill name.
        skill: String,
        /// `reviewer` or `reason`.
        field: &'static str,
    },

    /// A skill could not be read.
    #[error("cannot review skill `{skill}`")]
    #[diagnostic(code(aibox::skill_review::unreadable))]
    Review {
        /// Skill name.
        skill: String,
        /// The cause.
        #[source]
        #[diagnostic_source]
        source: ReviewError,
    },
}

fn list(skills: &[RefusedSkill]) -> String {
    skills
        .iter()
        .map(|s| {
            let points: Vec<String> = s.failed_points.iter().map(u8::to_string).collect();
            format!("{} (point {})", s.skill, points.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Reviews `skills` (name, directory, context) and returns the names that may be
/// registered. Pass only skills that are gated: the caller decides trust by provenance
/// (a skill's own metadata never exempts it).
pub fn gate(
    project: &Project,
    skills: &[(String, Utf8PathBuf, ReviewContext)],
) -> Result<Vec<String>, GateError> {
    gate_report(project, skills).map(|r| r.allowed)
}

/// Like [`gate`], with the reviews and the consents used.
pub fn gate_report(
    project: &Project,
    skills: &[(String, Utf8PathBuf, ReviewContext)],
) -> Result<GateReport, GateError> {
    let exceptions = &project.config.skills.review_exceptions;
    for e in exceptions {
        if e.reviewer.trim().is_empty() {
            return Err(GateError::IncompleteConsent {
                skill: e.skill.clone(),
                field: "reviewer",
            });
        }
        if e.reason.trim().is_empty() {
            return Err(GateError::IncompleteConsent {
                skill: e.skill.clone(),
                field: "reason",
            });
        }
    }
    let mut report = GateReport {
        allowed: Vec::new(),
        consented: Vec::new(),
        reviews: Vec::new(),
    };
    let mut refused = Vec::new();
    for (name, dir, ctx) in skills {
        let review = review_skill(dir, ctx).map_err(|source| GateError::Review {
            skill: name.clone(),
            source,
        })?;
        if review.failed() {
            if let Some(consent) = exceptions.iter().find(|e| &e.skill == name) {
                report.allowed.push(name.clone());
                report
                    .consented
                    .push((name.clone(), consent.reviewer.clone()));
            } else {
                refused.push(RefusedSkill {
                    skill: name.clone(),
                    failed_points: review.failed_points(),
                });
            }
        } else {
            report.allowed.push(name.clone());
        }
        report.reviews.push(review);
    }
    if refused.is_empty() {
        return Ok(report);
    }
    let mut help = String::from(
        "run `aibox skill review NAME` for the evidence; remove the skill from the selection, or, \
         after reading its code, record your consent in aibox.toml:",
    );
    for r in &refused {
        let _ = write!(
            help,
            "\n\n[[skills.review_exceptions]]\nskill = \"{}\"\nreviewer = \"<your name>\"\nreason = \"<why failed point(s) {} are acceptable>\"",
            r.skill,
            r.failed_points
                .iter()
                .map(u8::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Err(GateError::Refused {
        skills: refused,
        help,
    })
}

impl GateError {
    /// Who can fix it: a refusal is the user's decision; an unreadable skill is the
    /// reader's kind.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Review { source, .. } => source.kind(),
            _ => aibox_config::ErrorKind::User,
        }
    }
}
