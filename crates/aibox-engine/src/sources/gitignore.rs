//! Plan source: the local-state entries of `.gitignore`.
//!
//! Missing entries are appended by `aibox_config::gitignore::merge_gitignore`; user lines
//! are never edited, removed or reordered.

use aibox_config::{Ownership, PlannedFile, merge_gitignore};
use camino::Utf8Path;

use crate::builder::{PlanBuilder, PlanContext};
use crate::error::EngineError;

/// Path of the file, at the project root.
pub const GITIGNORE: &str = aibox_config::layout::GITIGNORE;

/// Adds `.gitignore` with aibox's missing local-state entries appended (or unchanged
/// when nothing is missing).
pub fn contribute(ctx: &PlanContext, plan: &mut PlanBuilder) -> Result<(), EngineError> {
    let path = Utf8Path::new(GITIGNORE);
    let existing = ctx.read(path)?;
    let text = existing.as_deref().map(String::from_utf8_lossy);
    // A user's `!pattern` is respected, so it is said, not fixed.
    for (line, pattern, entry) in text
        .as_deref()
        .map(aibox_config::gitignore::reincluded)
        .unwrap_or_default()
    {
        plan.warn(format!(
            ".gitignore line {line} `{pattern}` re-includes `{entry}`, personal local state \
             that must stay out of git; remove that line"
        ));
    }
    let contents = match (merge_gitignore(text.as_deref()), existing) {
        (Some(merged), _) => merged.into_bytes(),
        // Already complete: planned as is, so the report lists it as unchanged.
        (None, Some(bytes)) => bytes,
        (None, None) => return Ok(()),
    };
    plan.add(PlannedFile::new(GITIGNORE, contents, Ownership::Merged))
}
