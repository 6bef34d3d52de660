//! The result vocabulary shared by every gate: [`Finding`], [`Severity`] and [`Consent`].

use std::fmt;

use aibox_config::{AiboxToml, SecurityException};
use serde::{Deserialize, Serialize};

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Blocks `apply` and `up`; `doctor` exits non-zero.
    Error,
    /// Reported, never blocks.
    Warning,
    /// Informational (for example an active, recorded exception).
    Info,
}

impl Severity {
    /// Lower-case name as used in JSON and human output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Info => "info",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found by a gate. Never contains a secret value: messages name keys and
/// lines, not the offending text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable code, for example `aibox::policy::privileged`.
    pub code: String,
    /// How serious it is.
    pub severity: Severity,
    /// The file (or configuration location) it was found in, relative to the project;
    /// empty when it concerns no file (`null` in JSON).
    #[serde(serialize_with = "empty_as_null", deserialize_with = "null_as_empty")]
    pub file: String,
    /// 1-based line, where it could be located.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// What is wrong and why it matters.
    pub message: String,
    /// How to fix it, naming the narrower alternative where there is one; empty when
    /// there is nothing to do (`null` in JSON).
    #[serde(serialize_with = "empty_as_null", deserialize_with = "null_as_empty")]
    pub remedy: String,
    /// The `[[security.exceptions]]` `option` that records consent for it, if the rule
    /// can be accepted at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option: Option<String>,
    /// Set when a recorded exception accepted it: the recorded reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_reason: Option<String>,
}

/// An empty string as JSON `null`: a consumer tests for absence, not for `""`.
fn empty_as_null<S: serde::Serializer>(value: &str, serializer: S) -> Result<S::Ok, S::Error> {
    if value.is_empty() {
        serializer.serialize_none()
    } else {
        serializer.serialize_str(value)
    }
}

/// The reverse of [`empty_as_null`].
fn null_as_empty<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

/// Longest message or remedy a finding carries: both quote project files (values,
/// commands, paths), whose size the file decides.
pub const MAX_FINDING_TEXT: usize = 4096;

impl Finding {
    /// A finding without line, option or exception. The message and the remedy are cut
    /// to [`MAX_FINDING_TEXT`] bytes (see [`aibox_config::bounded`]).
    pub fn new(
        code: &str,
        severity: Severity,
        file: &str,
        message: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Self {
        let bound = |text: String| {
            if text.len() > MAX_FINDING_TEXT {
                aibox_config::bounded(&text, MAX_FINDING_TEXT)
            } else {
                text
            }
        };
        Self {
            code: code.to_owned(),
            severity,
            file: file.to_owned(),
            line: None,
            message: bound(message.into()),
            remedy: bound(remedy.into()),
            option: None,
            accepted_reason: None,
        }
    }

    /// Sets the line.
    #[must_use]
    pub fn at(mut self, line: Option<usize>) -> Self {
        self.line = line;
        self
    }
}

impl Finding {
    /// The finding as [`Display`](fmt::Display) shows it, without the leading severity
    /// (for lists that already say "warning:").
    pub fn without_severity(&self) -> String {
        let mut out = String::new();
        let _ = self.write_body(&mut out);
        out
    }

    fn write_body(&self, f: &mut impl fmt::Write) -> fmt::Result {
        write!(f, "[{}]", self.code)?;
        if !self.file.is_empty() {
            write!(f, " {}", self.file)?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
        }
        write!(f, ": {}", self.message)?;
        if let Some(reason) = &self.accepted_reason {
            write!(f, "\n  accepted by [[security.exceptions]]: {reason}")?;
        }
        if !self.remedy.is_empty() {
            write!(f, "\n  fix: {}", self.remedy)?;
        }
        Ok(())
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.severity)?;
        self.write_body(f)
    }
}

/// True when any finding is an error (the operation must stop).
pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity == Severity::Error)
}

/// The consents the project owner recorded in `aibox.toml [security]`.
///
/// Consent comes only from these keys; command-line flags such as `--yes` never count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Consent {
    /// `acknowledge_seccomp_unconfined`.
    pub seccomp_unconfined: bool,
    /// `acknowledge_seccomp_profile`.
    pub seccomp_profile: bool,
    /// `[[security.exceptions]]` entries.
    pub exceptions: Vec<SecurityException>,
}

impl Consent {
    /// The consents recorded in a configuration.
    pub fn from_config(config: &AiboxToml) -> Self {
        Self {
            seccomp_unconfined: config.security.acknowledge_seccomp_unconfined,
            seccomp_profile: config.security.acknowledge_seccomp_profile,
            exceptions: config.security.exceptions.clone(),
        }
    }

    /// The exception recorded for `option` (compared case-insensitively, ignoring
    /// surrounding spaces and treating `=` and `:` alike).
    pub fn exception(&self, option: &str) -> Option<&SecurityException> {
        let want = normalise_option(option);
        self.exceptions
            .iter()
            .find(|e| normalise_option(&e.option) == want)
    }

    /// Turns a rule hit into a finding, honouring a recorded exception: a refused option
    /// with an exception becomes a warning that names the reason; a warned option with an
    /// exception disappears.
    pub(crate) fn judge(&self, refuse: bool, option: &str, finding: Finding) -> Option<Finding> {
        let mut finding = finding;
        finding.option = Some(option.to_owned());
        match (refuse, self.exception(option)) {
            (true, None) => {
                finding.severity = Severity::Error;
                Some(finding)
            }
            (true, Some(exc)) => {
                finding.severity = Severity::Warning;
                finding.accepted_reason = Some(exc.reason.clone());
                Some(finding)
            }
            (false, None) => {
                finding.severity = Severity::Warning;
                Some(finding)
            }
            (false, Some(_)) => None,
        }
    }
}

fn normalise_option(option: &str) -> String {
    option.trim().to_ascii_lowercase().replace('=', ":")
}
