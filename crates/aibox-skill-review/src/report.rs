//! The review report: six points, each pass / warn / fail with file-and-line evidence.
//!
//! The types serialise to the JSON of `aibox skill review --output json`; field order and
//! evidence order are fixed so the same skill always yields the same bytes.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// Outcome of one point, or the level of one piece of evidence.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Nothing to object to (evidence at this level is informational).
    #[default]
    Pass,
    /// Something a reviewer should look at; does not block.
    Warn,
    /// Fails the point; blocks registration without a recorded consent.
    Fail,
}

impl Outcome {
    /// Lower-case name as used in the JSON report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Warn => "warn",
            Self::Fail => "fail",
        }
    }
}

/// One finding: where it is and what it means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// How serious the finding is; `pass` marks an informational note.
    pub level: Outcome,
    /// File relative to the skill directory, with `/` separators (empty for findings about
    /// the skill's origin rather than a file).
    pub file: String,
    /// 1-based line, when the finding has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// What was found and why it matters.
    pub message: String,
}

/// The result of one of the six review points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointResult {
    /// Point number, 1 to 6.
    pub point: u8,
    /// Short title of the point.
    pub title: String,
    /// The worst level among the evidence (pass when there is none).
    pub outcome: Outcome,
    /// Findings, ordered by file, line and message.
    pub evidence: Vec<Evidence>,
}

/// The full review of one skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    /// Skill name (from `SKILL.md`, else the directory name).
    pub skill: String,
    /// The worst outcome over all points.
    pub outcome: Outcome,
    /// The six points, in order.
    pub points: Vec<PointResult>,
}

/// Titles of the six points, index 0 is point 1.
pub const POINT_TITLES: [&str; 6] = [
    "Source is auditable",
    "No unexpected outbound network",
    "No credential access beyond purpose",
    "Tool list is minimal",
    "Dependency supply chain",
    "Immutable, pinned source",
];

impl Review {
    /// True when at least one point failed.
    pub fn failed(&self) -> bool {
        self.points.iter().any(|p| p.outcome == Outcome::Fail)
    }

    /// Numbers of the failed points, ascending.
    pub fn failed_points(&self) -> Vec<u8> {
        self.points
            .iter()
            .filter(|p| p.outcome == Outcome::Fail)
            .map(|p| p.point)
            .collect()
    }

    /// The result of point `n` (1 to 6).
    pub fn point(&self, n: u8) -> Option<&PointResult> {
        self.points.iter().find(|p| p.point == n)
    }

    /// Plain-text report for terminals and logs (no colours, stable layout).
    pub fn render_human(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Skill review: {} ({})",
            self.skill,
            self.outcome.as_str().to_uppercase()
        );
        for p in &self.points {
            let _ = writeln!(out, "  [{}] {}. {}", p.outcome.as_str(), p.point, p.title);
            for e in &p.evidence {
                let place = match (e.file.is_empty(), e.line) {
                    (true, _) => String::new(),
                    (false, Some(line)) => format!("{}:{line}: ", e.file),
                    (false, None) => format!("{}: ", e.file),
                };
                let _ = writeln!(out, "         {}: {place}{}", e.level.as_str(), e.message);
            }
        }
        let failed = self.failed_points();
        if failed.is_empty() {
            out.push_str("No point failed.");
            if self.outcome == Outcome::Warn {
                out.push_str(" Read the warnings before installing the skill.");
            }
            out.push('\n');
        } else {
            let list: Vec<String> = failed.iter().map(u8::to_string).collect();
            // Whether that blocks `apply` depends on the skill's trust and the project's
            // `[processkit] review`, which the caller knows: it gives the one verdict.
            let _ = writeln!(out, "Failed point(s): {}.", list.join(", "));
        }
        out
    }
}

/// Collects evidence for one point and turns it into a [`PointResult`].
#[derive(Debug, Default, Clone)]
pub(crate) struct Findings {
    items: Vec<Evidence>,
}

impl Findings {
    pub(crate) fn add(
        &mut self,
        level: Outcome,
        file: &str,
        line: Option<u32>,
        message: impl Into<String>,
    ) {
        let message = redact_url_credentials(&message.into());
        self.items.push(Evidence {
            level,
            file: file.to_owned(),
            line,
            message,
        });
    }

    pub(crate) fn fail(&mut self, file: &str, line: Option<u32>, message: impl Into<String>) {
        self.add(Outcome::Fail, file, line, message);
    }

    pub(crate) fn warn(&mut self, file: &str, line: Option<u32>, message: impl Into<String>) {
        self.add(Outcome::Warn, file, line, message);
    }

    pub(crate) fn note(&mut self, file: &str, line: Option<u32>, message: impl Into<String>) {
        self.add(Outcome::Pass, file, line, message);
    }

    pub(crate) fn extend(&mut self, other: &Findings) {
        self.items.extend(other.items.iter().cloned());
    }

    pub(crate) fn into_point(mut self, point: u8) -> PointResult {
        self.items.sort_by(|a, b| {
            (&a.file, a.line, &a.message, a.level).cmp(&(&b.file, b.line, &b.message, b.level))
        });
        self.items.dedup();
        let outcome = self.items.iter().map(|e| e.level).max().unwrap_or_default();
        let title = POINT_TITLES
            .get(usize::from(point).saturating_sub(1))
            .copied()
            .unwrap_or("");
        PointResult {
            point,
            title: title.to_owned(),
            outcome,
            evidence: self.items,
        }
    }
}

/// Replaces the user-info of every URL (`scheme://user:secret@host`) with `***`, so a
/// report never repeats a credential found in the reviewed files.
pub(crate) fn redact_url_credentials(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        out.push_str(&rest[..i + 3]);
        rest = &rest[i + 3..];
        let end = rest
            .find(['/', '?', '#', ' ', '`', '"', '\'', '\n'])
            .unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            out.push_str("***");
            rest = &rest[at..];
        }
    }
    out.push_str(rest);
    out
}

/// What changed between two reviews of a skill (for example across a version change).
/// Evidence is compared without line numbers, which move with unrelated edits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewDiff {
    /// Findings present now but not in the previous review: (point, evidence).
    pub added: Vec<(u8, Evidence)>,
    /// Findings of the previous review that are gone: (point, evidence).
    pub resolved: Vec<(u8, Evidence)>,
}

impl ReviewDiff {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.resolved.is_empty()
    }
}

/// A finding without its line: (point, level, file, message).
type Key<'a> = (u8, Outcome, &'a str, &'a str);

fn keyed(r: &Review) -> Vec<(Key<'_>, &Evidence)> {
    r.points
        .iter()
        .flat_map(|p| {
            p.evidence
                .iter()
                .map(move |e| ((p.point, e.level, e.file.as_str(), e.message.as_str()), e))
        })
        .collect()
}

fn missing(from: &[(Key<'_>, &Evidence)], other: &[(Key<'_>, &Evidence)]) -> Vec<(u8, Evidence)> {
    from.iter()
        .filter(|(k, _)| !other.iter().any(|(o, _)| o == k))
        .map(|(k, e)| (k.0, (*e).clone()))
        .collect()
}

impl Review {
    /// Findings added and resolved since `previous`.
    pub fn diff(&self, previous: &Review) -> ReviewDiff {
        let now = keyed(self);
        let before = keyed(previous);
        ReviewDiff {
            added: missing(&now, &before),
            resolved: missing(&before, &now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_credentials_are_redacted() {
        assert_eq!(
            redact_url_credentials(
                "`pkg @ git+https://__token__:ghp_FAKEFAKE@git.example.com/r.git` and https://h.example.com/x@y"
            ),
            "`pkg @ git+https://***@git.example.com/r.git` and https://h.example.com/x@y"
        );
        let mut f = Findings::default();
        f.fail("a", None, "see https://u:p@h.invalid/");
        assert_eq!(
            f.into_point(1).evidence[0].message,
            "see https://***@h.invalid/"
        );
    }

    #[test]
    fn diff_ignores_moved_lines() {
        let mk = |items: Vec<(Outcome, Option<u32>, &str)>| {
            let mut f = Findings::default();
            for (level, line, m) in items {
                f.add(level, "mcp/server.py", line, m);
            }
            let p = f.into_point(2);
            Review {
                skill: "s".into(),
                outcome: p.outcome,
                points: vec![p],
            }
        };
        let old = mk(vec![
            (Outcome::Fail, Some(3), "a"),
            (Outcome::Warn, Some(9), "b"),
        ]);
        let new = mk(vec![
            (Outcome::Fail, Some(30), "a"),
            (Outcome::Fail, Some(4), "c"),
        ]);
        let d = new.diff(&old);
        assert_eq!(d.added.len(), 1);
        assert_eq!(d.added[0].1.message, "c");
        assert_eq!(d.resolved.len(), 1);
        assert_eq!(d.resolved[0].1.message, "b");
        assert!(old.diff(&old).is_empty());
    }
}
