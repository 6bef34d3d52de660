//! Recording a security consent the owner gave at an interactive prompt.
//!
//! aibox never sets a consent key on its own (not `init`, not `apply`, not `--yes`); the
//! CLI may ask a person at a terminal and, on an explicit "yes", record the answer here.

use aibox_config::edit::ConfigFile;
use camino::{Utf8Path, Utf8PathBuf};

use crate::config_edit::{ConfigEditError, config_set};
use crate::error::EngineError;

/// The dotted consent key (for example `security.acknowledge_seccomp_unconfined`) that
/// `err` refused the configuration for, when it is a missing seccomp consent. The policy
/// layer decided and put the key into its error; this only reads it, so the project is
/// not loaded again.
pub fn missing_seccomp_consent(err: &EngineError) -> Option<String> {
    err.missing_consent()
}

/// Writes `key = true` into `aibox.toml`, keeping comments and order. Call only after a
/// person answered "yes" to a prompt that explained the trade-off.
pub fn record_consent(root: &Utf8Path, key: &str) -> Result<Utf8PathBuf, ConfigEditError> {
    config_set(root, ConfigFile::Team, key, "true")
}
