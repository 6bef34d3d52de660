//! The apply gate: review every gated skill (third-party by provenance, or every skill
//! under `[processkit] review = "all"`) and refuse the failing ones unless `aibox.toml`
//! records a consent (`[[skills.review_exceptions]]`) for them.
//!
//! A consent is bound to what was reviewed: the skill's content digest
//! ([`crate::content_sha256`]) and the failed points it accepts. Changed content, or a
//! point failing that the consent does not accept, makes it stale, and a stale consent
//! refuses like none, naming the difference.

use std::fmt::Write as _;

use aibox_config::{Project, SkillReviewException};
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
    /// The content digest of the reviewed files.
    pub sha256: String,
    /// The recorded consent that no longer covers it, if any.
    pub stale: Option<StaleConsent>,
}

/// A recorded consent that does not cover the skill as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleConsent {
    /// The content digest the consent was given for (`None`: it records none).
    pub recorded_sha256: Option<String>,
    /// The points the consent accepts.
    pub accepted: Vec<u8>,
}

impl StaleConsent {
    /// Why it is stale, for a skill with content `sha256` failing `failing`: the content
    /// change and the difference of points.
    pub fn describe(&self, sha256: &str, failing: &[u8]) -> String {
        let mut why = Vec::new();
        match &self.recorded_sha256 {
            None => why.push("the consent records no content digest".to_owned()),
            Some(r) if r != sha256 => why.push(format!(
                "its content changed since the consent (sha256 {} recorded, {} now)",
                short(r),
                short(sha256)
            )),
            Some(_) => {}
        }
        let new: Vec<u8> = failing
            .iter()
            .copied()
            .filter(|p| !self.accepted.contains(p))
            .collect();
        if !new.is_empty() {
            why.push(format!(
                "point(s) {} fail but the consent accepts {}",
                points(&new),
                if self.accepted.is_empty() {
                    "none".to_owned()
                } else {
                    format!("only {}", points(&self.accepted))
                }
            ));
        }
        let fixed: Vec<u8> = self
            .accepted
            .iter()
            .copied()
            .filter(|p| !failing.contains(p))
            .collect();
        if !fixed.is_empty() && !why.is_empty() {
            why.push(format!("point(s) {} no longer fail", points(&fixed)));
        }
        why.join("; ")
    }
}

/// What `aibox.toml` says about a failing skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Consent<'a> {
    /// No `[[skills.review_exceptions]]` entry names it.
    Missing,
    /// An entry names it and covers this content and these points.
    Valid(&'a SkillReviewException),
    /// An entry names it but was given for other content or other points.
    Stale(StaleConsent),
}

/// The consent `exceptions` record for `skill` with content `sha256` failing `failing`.
pub fn consent<'a>(
    exceptions: &'a [SkillReviewException],
    skill: &str,
    sha256: &str,
    failing: &[u8],
) -> Consent<'a> {
    let Some(e) = exceptions.iter().find(|e| e.skill == skill) else {
        return Consent::Missing;
    };
    let same_content = e
        .sha256
        .as_deref()
        .is_some_and(|r| r.trim().eq_ignore_ascii_case(sha256));
    if same_content && failing.iter().all(|p| e.points.contains(p)) {
        Consent::Valid(e)
    } else {
        Consent::Stale(StaleConsent {
            recorded_sha256: e.sha256.clone(),
            accepted: e.points.clone(),
        })
    }
}

/// The `[[skills.review_exceptions]]` entry that records consent for `skill` as it is
/// (content `sha256`, failing `failing`), to paste into `aibox.toml`.
pub fn consent_snippet(skill: &str, sha256: &str, failing: &[u8]) -> String {
    format!(
        "[[skills.review_exceptions]]\nskill = \"{skill}\"\nsha256 = \"{sha256}\"\npoints = [{}]\n\
         reviewer = \"<your name>\"\nreason = \"<why failed point(s) {} are acceptable>\"",
        failing
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        points(failing)
    )
}

fn points(p: &[u8]) -> String {
    p.iter().map(u8::to_string).collect::<Vec<_>>().join(", ")
}

fn short(sha256: &str) -> &str {
    sha256.get(..12).unwrap_or(sha256)
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
    #[error("refusing to register {} skill(s) that fail the skill review: {}", .skills.len(), list(.skills))]
    #[diagnostic(code(aibox::skill_review::refused))]
    Refused {
        /// The refused skills.
        skills: Vec<RefusedSkill>,
        /// How to proceed.
        #[help]
        help: String,
    },

    /// Failing skills whose recorded consent no longer covers them (and any refused
    /// without one).
    #[error("refusing to register {} skill(s): the review consent is stale for {}", .skills.len(), list(.skills))]
    #[diagnostic(code(aibox::skill_review::stale_consent))]
    StaleConsent {
        /// The refused skills; those with a stale consent say why.
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
        .map(|s| match &s.stale {
            None => format!("{} (point {})", s.skill, points(&s.failed_points)),
            Some(stale) => format!(
                "{} (point {}: {})",
                s.skill,
                points(&s.failed_points),
                stale.describe(&s.sha256, &s.failed_points)
            ),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The gate's error for `skills` refused with `help`: [`GateError::StaleConsent`] when a
/// consent for one of them exists but is stale, else [`GateError::Refused`].
pub fn refusal(skills: Vec<RefusedSkill>, help: String) -> GateError {
    if skills.iter().any(|s| s.stale.is_some()) {
        // Stale ones first: they are why this is not a plain refusal.
        let mut skills = skills;
        skills.sort_by_key(|s| s.stale.is_none());
        GateError::StaleConsent { skills, help }
    } else {
        GateError::Refused { skills, help }
    }
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
            let failed = review.failed_points();
            let sha256 = crate::content_sha256(dir).map_err(|source| GateError::Review {
                skill: name.clone(),
                source,
            })?;
            match consent(exceptions, name, &sha256, &failed) {
                Consent::Valid(e) => {
                    report.allowed.push(name.clone());
                    report.consented.push((name.clone(), e.reviewer.clone()));
                }
                Consent::Missing => refused.push(RefusedSkill {
                    skill: name.clone(),
                    failed_points: failed,
                    sha256,
                    stale: None,
                }),
                Consent::Stale(stale) => refused.push(RefusedSkill {
                    skill: name.clone(),
                    failed_points: failed,
                    sha256,
                    stale: Some(stale),
                }),
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
         after reading its code, record your consent in aibox.toml (a consent holds for this \
         content and these points only; replace a stale entry):",
    );
    for r in &refused {
        let _ = write!(
            help,
            "\n\n{}",
            consent_snippet(&r.skill, &r.sha256, &r.failed_points)
        );
    }
    Err(refusal(refused, help))
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
