//! The `secrets` check: the secret scan of committed files, as the policy gate runs it.

use aibox_policy::{Finding, TextKind, scan_secrets};
use aibox_provenance::lock::{LOCK_FILE, Lock};

use super::read_text;
use crate::writer::ProjectRoot;

/// Secret-like values in committed files aibox knows about (generated, user-owned and
/// the harness files it merges into).
pub(crate) fn findings(root: &ProjectRoot, lock: Option<&Lock>) -> Vec<Finding> {
    let mut paths: Vec<String> = vec![aibox_config::AIBOX_TOML.to_owned(), LOCK_FILE.to_owned()];
    if let Some(lock) = lock {
        paths.extend(lock.generated.keys().cloned());
    }
    paths.extend(aibox_config::layout::user_owned_committed().map(str::to_owned));
    // The committed harness files aibox merges into: an entry added by hand there is
    // committed with the rest (apply's gate refuses it; doctor must not say ok).
    paths.extend(
        aibox_mcp_registration::TARGETS
            .iter()
            .filter(|(_, _, scope)| *scope == aibox_mcp_registration::FileScope::Committed)
            .map(|(_, path, _)| (*path).to_owned()),
    );
    paths.sort();
    paths.dedup();
    let mut out = Vec::new();
    for path in paths {
        if aibox_config::is_local_state(&path) {
            continue;
        }
        if let Some(text) = read_text(root, &path) {
            out.extend(scan_secrets(&path, &text, TextKind::from_path(&path)));
        }
    }
    out
}
