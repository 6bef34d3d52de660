//! The third-party skill review, as the engine exposes it to the CLI and to `apply`.
//!
//! The checks live in `aibox-skill-review`; this module maps its errors into
//! [`EngineError`] and re-exports the report types so the CLI (which may depend on the
//! engine only) can render them.

use camino::Utf8Path;

use crate::error::EngineError;

pub use aibox_skill_review::{
    Evidence, GateReport, Outcome, PointResult, Review, ReviewContext, SkillOrigin,
};

/// Reviews one skill directory (`aibox skill review PATH`). Findings are in the report;
/// an error means the directory could not be read.
pub fn review(dir: &Utf8Path, ctx: &ReviewContext) -> Result<Review, EngineError> {
    aibox_skill_review::review_skill(dir, ctx).map_err(EngineError::from)
}
