//! User-facing configuration problems and how they render.
//!
//! Every problem the loader finds becomes one [`Problem`]: a stable code, a message
//! saying what is wrong, labelled spans in the file, and a help text saying how to fix
//! it. Several problems travel together as [`ConfigProblems`], which renders the first
//! one as the main diagnostic and the rest as `related` ones, so the user fixes them in
//! one pass instead of one run per mistake.

use std::fmt;
use std::sync::Arc;

use miette::{Diagnostic, LabeledSpan, NamedSource, SourceCode, SourceSpan};

/// `text` as an error message may quote it: at most `max_bytes` bytes of it (cut at a
/// character boundary), then `…` and the full length in bytes. For untrusted text (file
/// contents, names from an archive, a parser's message) whose size the input decides.
pub fn bounded(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// The kind of a configuration problem; each kind has a stable diagnostic code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProblemKind {
    /// The text is not valid TOML.
    Syntax,
    /// A key the model does not know.
    UnknownKey,
    /// A value of the wrong TOML type.
    WrongType,
    /// A value of the right type that is not allowed.
    InvalidValue,
    /// Two settings that cannot both hold.
    Conflict,
    /// A harness id aibox does not support.
    UnknownHarness,
    /// A required key is absent.
    MissingKey,
}

impl ProblemKind {
    /// The stable diagnostic code, for example `aibox::config::unknown_key`.
    pub fn code(self) -> &'static str {
        match self {
            Self::Syntax => "aibox::config::syntax",
            Self::UnknownKey => "aibox::config::unknown_key",
            Self::WrongType => "aibox::config::wrong_type",
            Self::InvalidValue => "aibox::config::invalid_value",
            Self::Conflict => "aibox::config::conflict",
            Self::UnknownHarness => "aibox::config::unknown_harness",
            Self::MissingKey => "aibox::config::missing_key",
        }
    }
}

/// The text of a configuration file, shared by all problems found in it.
pub(crate) type Source = NamedSource<Arc<str>>;

/// Wraps a file's text for diagnostics; `name` is the path shown to the user.
pub(crate) fn source(name: &str, text: &str) -> Source {
    NamedSource::new(name, Arc::from(text))
}

/// One problem in one configuration file.
#[derive(Debug, Clone)]
pub struct Problem {
    kind: ProblemKind,
    message: String,
    help: Option<String>,
    /// Primary label first.
    labels: Vec<(String, SourceSpan)>,
    src: Source,
}

impl Problem {
    pub(crate) fn new(
        kind: ProblemKind,
        src: &Source,
        span: SourceSpan,
        message: impl Into<String>,
        label: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            message: message.into(),
            help: None,
            labels: vec![(label.into(), span)],
            src: src.clone(),
        }
    }

    pub(crate) fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub(crate) fn also(mut self, span: SourceSpan, label: impl Into<String>) -> Self {
        self.labels.push((label.into(), span));
        self
    }

    /// The kind of problem.
    pub fn kind(&self) -> ProblemKind {
        self.kind
    }

    /// The stable diagnostic code.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// What is wrong, in one sentence.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// How to fix it, when there is advice to give.
    pub fn help_text(&self) -> Option<&str> {
        self.help.as_deref()
    }

    /// Name of the file the problem is in.
    pub fn file(&self) -> &str {
        self.src.name()
    }

    /// Byte offset of the primary span in the file.
    pub fn offset(&self) -> usize {
        self.labels.first().map_or(0, |(_, s)| s.offset())
    }

    /// Machine-readable form: code, file, line, column, message, help and labels.
    pub fn to_json(&self) -> serde_json::Value {
        let (line, column) = self.line_col();
        let labels: Vec<serde_json::Value> = self
            .labels
            .iter()
            .map(|(label, span)| {
                serde_json::json!({ "label": label, "offset": span.offset(), "len": span.len() })
            })
            .collect();
        serde_json::json!({
            "code": self.code(),
            "file": self.file(),
            "line": line,
            "column": column,
            "message": self.message,
            "help": self.help,
            "labels": labels,
        })
    }

    /// 1-based line and column of the primary span.
    pub fn line_col(&self) -> (usize, usize) {
        let text: &str = self.src.inner();
        let offset = self.offset().min(text.len());
        let before = text.get(..offset).unwrap_or_default();
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        (line, col)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

impl Diagnostic for Problem {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.kind.code()))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.src)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().enumerate().map(
            |(i, (label, span))| {
                if i == 0 {
                    LabeledSpan::new_primary_with_span(Some(label.clone()), *span)
                } else {
                    LabeledSpan::new_with_span(Some(label.clone()), *span)
                }
            },
        )))
    }
}

/// One or more problems found while loading configuration (never empty).
///
/// Renders the first problem as the diagnostic and the others as related diagnostics.
#[derive(Debug, Clone)]
pub struct ConfigProblems {
    problems: Vec<Problem>,
}

impl ConfigProblems {
    /// Wraps a non-empty list, sorted by file and position; `None` when empty.
    pub(crate) fn from_vec(mut problems: Vec<Problem>) -> Option<Self> {
        if problems.is_empty() {
            return None;
        }
        // Stable order: file, then causes before consequences (a missing key is most
        // often the typo reported beside it: the typo leads), then position, then code,
        // so output never depends on the order in which checks happened to run.
        let consequence = |p: &Problem| u8::from(p.code() == "aibox::config::missing_key");
        problems.sort_by(|a, b| {
            (a.file(), consequence(a), a.offset(), a.code()).cmp(&(
                b.file(),
                consequence(b),
                b.offset(),
                b.code(),
            ))
        });
        Some(Self { problems })
    }

    /// A list holding exactly one problem.
    pub fn single(problem: Problem) -> Self {
        Self {
            problems: vec![problem],
        }
    }

    /// Both lists together, re-sorted.
    #[must_use]
    pub fn merge(self, other: Self) -> Self {
        let mut all = self.problems;
        all.extend(other.problems);
        Self::from_vec(all).unwrap_or(Self {
            problems: Vec::new(),
        })
    }

    /// Every problem, in file and position order.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Machine-readable form: an array of [`Problem::to_json`] objects.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Array(self.problems.iter().map(Problem::to_json).collect())
    }

    /// The diagnostic codes of all problems, in order.
    pub fn codes(&self) -> Vec<&'static str> {
        self.problems.iter().map(Problem::code).collect()
    }

    fn first(&self) -> Option<&Problem> {
        self.problems.first()
    }
}

impl fmt::Display for ConfigProblems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.first() {
            Some(p) => fmt::Display::fmt(p, f),
            None => f.write_str("invalid configuration"),
        }
    }
}

impl std::error::Error for ConfigProblems {}

impl Diagnostic for ConfigProblems {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.first().and_then(Diagnostic::code)
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.first().and_then(Diagnostic::help)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.first().and_then(Diagnostic::source_code)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        self.first().and_then(Diagnostic::labels)
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        if self.problems.len() < 2 {
            return None;
        }
        Some(Box::new(
            self.problems.iter().skip(1).map(|p| p as &dyn Diagnostic),
        ))
    }
}

/// Renders any diagnostic as plain Unicode text at a fixed width, without colour.
///
/// Used by snapshot tests and by callers that need a stable textual form.
pub fn render_plain(diagnostic: &dyn Diagnostic, width: usize) -> String {
    let handler =
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
            .with_width(width)
            .with_links(false);
    let mut out = String::new();
    if handler.render_report(&mut out, diagnostic).is_err() {
        out = diagnostic.to_string();
    }
    out
}

/// A harness id given outside a configuration file (for example `--harness`) that aibox
/// does not support.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown harness \"{given}\"")]
pub struct UnknownHarness {
    /// What was given.
    pub given: String,
    /// The closest supported id, or the id an alias maps to.
    pub suggestion: Option<&'static str>,
}

impl UnknownHarness {
    /// Always the user's: an id typed on the command line or in a file.
    pub fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::User
    }
}

impl Diagnostic for UnknownHarness {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(ProblemKind::UnknownHarness.code()))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        let all: Vec<&str> = crate::model::Harness::ALL
            .iter()
            .map(|h| h.as_str())
            .collect();
        let list = all.join(", ");
        Some(Box::new(match self.suggestion {
            Some(s) => format!("did you mean \"{s}\"? supported harnesses: {list}"),
            None => format!("supported harnesses: {list}"),
        }))
    }
}

#[cfg(test)]
mod bounded_tests {
    use super::bounded;

    #[test]
    fn untrusted_text_is_cut_at_a_character_with_its_length() {
        assert_eq!(bounded("short", 10), "short");
        assert_eq!(bounded("abcdef", 3), "abc… (6 bytes)");
        // `é` is two bytes: the cut never splits it.
        assert_eq!(bounded("aé€z", 2), "a… (7 bytes)");
        let huge = "x".repeat(64 * 1024 * 1024);
        assert!(bounded(&huge, 200).len() < 230);
    }
}
