//! The third-party skill review, as the engine exposes it to the CLI and to `apply`.
//!
//! The checks live in `aibox-skill-review`; this module maps its errors into
//! [`EngineError`] and re-exports the report types so the CLI (which may depend on the
//! engine only) can render them.

use aibox_config::Project;
use camino::{Utf8Path, Utf8PathBuf};

use crate::EngineError;

pub use aibox_skill_review::{
    Evidence, GateReport, Outcome, PointResult, Review, ReviewContext, SkillOrigin,
};

/// Reviews one skill directory (`aibox skill review PATH`). Findings are in the report;
/// an error means the directory could not be read.
pub fn review(dir: &Utf8Path, ctx: &ReviewContext) -> Result<Review, EngineError> {
    aibox_skill_review::review_skill(dir, ctx).map_err(EngineError::from)
}

/// The `apply` gate: reviews `skills` (name, directory, context; the gated skills, chosen
/// by provenance in `sources::processkit`) and returns the names that may be registered. A failing skill without a `[[skills.review_exceptions]]` consent in
/// `aibox.toml` stops `apply` with `aibox::skill_review::refused`.
pub fn gate(
    project: &Project,
    skills: &[(String, Utf8PathBuf, ReviewContext)],
) -> Result<Vec<String>, EngineError> {
    aibox_skill_review::gate(project, skills).map_err(EngineError::from)
}

/// Like [`gate`], with every review and the consents that were used (for `doctor`).
pub fn gate_report(
    project: &Project,
    skills: &[(String, Utf8PathBuf, ReviewContext)],
) -> Result<GateReport, EngineError> {
    aibox_skill_review::gate_report(project, skills).map_err(EngineError::from)
}
