//! Recording a security consent the owner gave at an interactive prompt.
//!
//! aibox never sets a consent key on its own (not `init`, not `apply`, not `--yes`); the
//! CLI may ask a person at a terminal and, on an explicit "yes", record the answer here.

use aibox_config::edit::ConfigFile;
use camino::{Utf8Path, Utf8PathBuf};

use crate::config_edit::{ConfigEditError, config_set};

/// The consent key the project's configuration is missing for its chosen seccomp
/// relaxation, if any (for example `security.acknowledge_seccomp_unconfined`), or the
/// preferred key when the engine's default blocks Codex's sandbox (Docker). The policy
/// layer decided during [`crate::resolve`]; this only reads its answer.
pub fn missing_seccomp_consent(resolved: &crate::Resolved) -> Option<String> {
    resolved.security.missing_consent()
}

/// Writes `key = true` into `aibox.toml`, keeping comments and order. Call only after a
/// person answered "yes" to a prompt that explained the trade-off.
pub fn record_consent(root: &Utf8Path, key: &str) -> Result<Utf8PathBuf, ConfigEditError> {
    config_set(root, ConfigFile::Team, key, "true")
}
