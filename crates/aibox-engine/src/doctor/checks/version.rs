//! The `version` check: this aibox against the version that wrote `aibox.lock`.

use aibox_policy::{Finding, Severity};
use aibox_provenance::lock::{LOCK_FILE, Lock};

/// Findings about the lock's readability and the CLI version it records.
pub(crate) fn findings(lock: &Result<Option<Lock>, String>, cli: &str) -> Vec<Finding> {
    match lock {
        Err(message) => vec![Finding::new(
            "aibox::doctor::lock_invalid",
            Severity::Error,
            LOCK_FILE,
            format!("aibox.lock cannot be read:\n{message}"),
            "fix it by hand, or remove it and run `aibox apply`",
        )],
        Ok(None) => vec![Finding::new(
            "aibox::doctor::no_lock",
            Severity::Info,
            LOCK_FILE,
            "no aibox.lock yet",
            "run `aibox apply`",
        )],
        Ok(Some(lock)) => {
            let recorded = lock.aibox.cli_version.as_str();
            let minor = |v: &str| -> Option<(u64, u64)> {
                let mut parts = v.trim_start_matches('v').split('.');
                Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
            };
            match (minor(recorded), minor(cli)) {
                (Some(a), Some(b)) if a == b => Vec::new(),
                (Some(a), Some(b)) => vec![Finding::new(
                    "aibox::doctor::version_skew",
                    Severity::Warning,
                    LOCK_FILE,
                    format!(
                        "aibox.lock was written by aibox {recorded}, this is aibox {cli}{}",
                        if a > b { " (older than the lock)" } else { "" }
                    ),
                    if a > b {
                        "update aibox to at least the lock's version; an older CLI is the most \
                         common cause of still seeing a fixed bug"
                    } else {
                        "run `aibox apply` to regenerate the files with this version"
                    },
                )],
                _ => vec![Finding::new(
                    "aibox::doctor::version_skew",
                    Severity::Warning,
                    LOCK_FILE,
                    format!("aibox.lock records an unreadable cli_version `{recorded}`"),
                    "run `aibox apply` to record the current version",
                )],
            }
        }
    }
}
