//! Recording a security consent the owner gave at an interactive prompt.
//!
//! aibox never sets a consent key on its own (not `init`, not `apply`, not `--yes`); the
//! CLI may ask a person at a terminal and, on an explicit "yes", record the answer here.

use aibox_config::edit::ConfigFile;
use aibox_config::{CodexSandbox, Harness};
use camino::{Utf8Path, Utf8PathBuf};

use crate::config_edit::{ConfigEditError, config_set};

/// The consent key the project's configuration is missing for its chosen seccomp
/// relaxation, if any: `security.acknowledge_seccomp_unconfined` or
/// `security.acknowledge_seccomp_profile`.
pub fn missing_seccomp_consent(root: &Utf8Path) -> Option<&'static str> {
    let project = aibox_config::load_project(root).ok()?;
    let security = &project.config.security;
    if !project.config.ai.harnesses.contains(&Harness::Codex) {
        return None;
    }
    match security.codex_sandbox {
        CodexSandbox::Unconfined if !security.acknowledge_seccomp_unconfined => {
            Some("security.acknowledge_seccomp_unconfined")
        }
        CodexSandbox::SeccompProfile if !security.acknowledge_seccomp_profile => {
            Some("security.acknowledge_seccomp_profile")
        }
        _ => None,
    }
}

/// Writes `key = true` into `aibox.toml`, keeping comments and order. Call only after a
/// person answered "yes" to a prompt that explained the trade-off.
pub fn record_consent(root: &Utf8Path, key: &str) -> Result<Utf8PathBuf, ConfigEditError> {
    config_set(root, ConfigFile::Team, key, "true")
}
