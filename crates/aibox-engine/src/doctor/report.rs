//! The doctor report: checks, findings grouped by severity, the counts, and the
//! plain-text rendering the CLI (and embedders) print. Redaction is applied once, when
//! the run is finished into a [`DoctorReport`].

use std::fmt::Write as _;

use aibox_config::SecurityException;
use aibox_policy::{Finding, Redactor, Severity, redact};
use serde::Serialize;

use super::DoctorOptions;
use crate::codex_sandbox::SandboxReport;

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Nothing found.
    Ok,
    /// Only warnings (or notes).
    Warning,
    /// At least one error.
    Error,
    /// Could not run (for example no configuration, not a git repository).
    Skipped,
}

/// One check of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// Stable check name (`config`, `engine`, `sync`, `local-state`, `container-policy`,
    /// `secrets`, `version`, `exceptions`).
    pub name: String,
    /// Outcome.
    pub status: CheckStatus,
    /// Why it was skipped, when it was.
    pub skipped_because: Option<String>,
}

/// Counts per severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Errors.
    pub errors: usize,
    /// Warnings.
    pub warnings: usize,
    /// Notes.
    pub notes: usize,
}

/// The result of [`super::doctor()`]: redacted, serialisable, grouped by severity.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    /// Always true: every string was redacted.
    pub redacted: bool,
    /// Version of aibox that ran the checks.
    pub cli_version: String,
    /// Counts.
    pub summary: Summary,
    /// Every check in run order.
    pub checks: Vec<CheckResult>,
    /// Findings, errors first, then warnings, then notes.
    pub findings: Vec<Finding>,
    /// The Codex seccomp posture (`default`, `engine-default`, `seccomp-profile`, `unconfined`)
    /// when the configuration could be evaluated.
    pub seccomp_posture: Option<String>,
    /// Active `[[security.exceptions]]` and consent keys, listed on every run.
    pub exceptions: Vec<SecurityException>,
    /// Whether Codex's sandbox can start in the running container (Codex enabled only).
    pub codex_sandbox: Option<SandboxReport>,
    #[serde(skip)]
    pub(super) redactor: Redactor,
    #[serde(skip)]
    pub(super) environment: Vec<(String, String)>,
}

impl DoctorReport {
    /// The redactor every string of the report passed through.
    pub(super) fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// True when at least one finding is an error.
    pub fn has_errors(&self) -> bool {
        self.summary.errors > 0
    }

    /// Process exit status: 0 without errors, 1 with errors.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.has_errors())
    }

    /// Findings of one severity.
    pub fn by_severity(&self, severity: Severity) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.severity == severity)
    }

    /// Human output: a summary line, the checks, then findings grouped by severity.
    pub fn render_human(&self) -> String {
        let mut out = String::new();
        let s = self.summary;
        let _ = writeln!(
            out,
            "aibox doctor: {} error(s), {} warning(s), {} note(s) (any secret in this report is masked)",
            s.errors, s.warnings, s.notes
        );
        for c in &self.checks {
            let status = match c.status {
                CheckStatus::Ok => "ok",
                CheckStatus::Warning => "warn",
                CheckStatus::Error => "ERROR",
                CheckStatus::Skipped => "skipped",
            };
            let _ = write!(out, "  {status:<7} {}", c.name);
            if let Some(why) = &c.skipped_because {
                let _ = write!(out, " ({why})");
            }
            out.push('\n');
        }
        for (severity, title) in [
            (Severity::Error, "Errors"),
            (Severity::Warning, "Warnings"),
            (Severity::Info, "Notes"),
        ] {
            let mut group = self.by_severity(severity).peekable();
            if group.peek().is_none() {
                continue;
            }
            let _ = writeln!(out, "\n{title}:");
            for f in group {
                for (i, line) in f.to_string().lines().enumerate() {
                    let _ = writeln!(out, "{}{line}", if i == 0 { "  " } else { "    " });
                }
            }
        }
        if !self.exceptions.is_empty() {
            let _ = writeln!(out, "\nActive security exceptions:");
            for e in &self.exceptions {
                let _ = writeln!(out, "  {}: {}", e.option, e.reason);
            }
        }
        out
    }
}

/// The checks run so far and their findings.
#[derive(Default)]
pub(super) struct Run {
    checks: Vec<CheckResult>,
    findings: Vec<Finding>,
}

impl Run {
    pub(super) fn check(&mut self, name: &str, findings: Vec<Finding>) {
        let status = if findings.iter().any(|f| f.severity == Severity::Error) {
            CheckStatus::Error
        } else if findings.iter().any(|f| f.severity == Severity::Warning) {
            CheckStatus::Warning
        } else {
            CheckStatus::Ok
        };
        self.checks.push(CheckResult {
            name: name.to_owned(),
            status,
            skipped_because: None,
        });
        self.findings.extend(findings);
    }

    /// Adds the checks of `part` (run on another thread) after those so far.
    pub(super) fn append(&mut self, part: Run) {
        self.checks.extend(part.checks);
        self.findings.extend(part.findings);
    }

    pub(super) fn skip(&mut self, name: &str, why: &str) {
        self.checks.push(CheckResult {
            name: name.to_owned(),
            status: CheckStatus::Skipped,
            skipped_because: Some(why.to_owned()),
        });
    }

    pub(super) fn finish(
        self,
        options: &DoctorOptions,
        posture: Option<String>,
        exceptions: Vec<SecurityException>,
        redactor: Redactor,
    ) -> DoctorReport {
        let r = &redactor;
        let mut findings: Vec<Finding> = self
            .findings
            .into_iter()
            .map(|mut f| {
                f.file = redact(&f.file, r);
                f.message = redact(&f.message, r);
                f.remedy = redact(&f.remedy, r);
                f.option = f.option.map(|o| redact(&o, r));
                f.accepted_reason = f.accepted_reason.map(|o| redact(&o, r));
                f
            })
            .collect();
        // Stable order: severity, then check order (the sort is stable).
        findings.sort_by_key(|f| f.severity);
        let count = |s| findings.iter().filter(|f| f.severity == s).count();
        let summary = Summary {
            errors: count(Severity::Error),
            warnings: count(Severity::Warning),
            notes: count(Severity::Info),
        };
        let exceptions = exceptions
            .into_iter()
            .map(|e| SecurityException {
                option: redact(&e.option, r),
                reason: redact(&e.reason, r),
            })
            .collect();
        DoctorReport {
            redacted: true,
            cli_version: options.cli_version.clone(),
            summary,
            checks: self.checks,
            findings,
            seccomp_posture: posture,
            exceptions,
            codex_sandbox: None,
            redactor,
            environment: options.environment.clone(),
        }
    }
}

/// A diagnostic as plain text for a finding's message: the message, its causes, and each
/// labelled location as `file:line:column: label`. Unlike the terminal rendering it holds
/// no box drawing and no colour, so the JSON report stays readable by programs.
pub(crate) fn plain_diagnostic(diagnostic: &dyn miette::Diagnostic) -> String {
    let mut out = diagnostic.to_string();
    let mut cause = std::error::Error::source(diagnostic);
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            let _ = write!(out, ": {text}");
        }
        cause = c.source();
    }
    if let (Some(source), Some(labels)) = (diagnostic.source_code(), diagnostic.labels()) {
        for label in labels {
            let Ok(span) = source.read_span(label.inner(), 0, 0) else {
                continue;
            };
            let _ = write!(
                out,
                "\n  at {}:{}:{}",
                span.name().unwrap_or("?"),
                span.line() + 1,
                span.column() + 1
            );
            if let Some(text) = label.label() {
                let _ = write!(out, ": {text}");
            }
        }
    }
    if let Some(help) = diagnostic.help() {
        let _ = write!(out, "\n  help: {help}");
    }
    if let Some(related) = diagnostic.related() {
        for r in related {
            let _ = write!(out, "\n{}", plain_diagnostic(r));
        }
    }
    out
}
