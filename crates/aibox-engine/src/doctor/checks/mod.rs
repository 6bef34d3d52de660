//! The checks of `aibox doctor`, one module per concern, and the reads they share.

pub mod base_image;
pub(super) mod codex_sandbox;
pub(super) mod config;
pub(super) mod container_policy;
pub(super) mod container_state;
pub(super) mod engine;
pub(super) mod exceptions;
pub(super) mod integrity;
pub(super) mod local_state;
pub(super) mod mcp_deps;
pub(super) mod mcp_servers;
pub(super) mod secrets;
pub(super) mod skills;
pub(super) mod sync;
pub(super) mod version;

use aibox_provenance::lock::{LOCK_FILE, Lock};
use camino::Utf8Path;

use crate::writer::ProjectRoot;

/// `aibox.lock`, or why it cannot be read (rendered as plain text).
pub(super) fn read_lock(root: &ProjectRoot) -> Result<Option<Lock>, String> {
    match root.read(Utf8Path::new(LOCK_FILE)) {
        Ok(Some(bytes)) => Lock::parse(
            &String::from_utf8_lossy(&bytes),
            &root.path().join(LOCK_FILE),
        )
        .map(Some)
        .map_err(|e| super::report::plain_diagnostic(&e)),
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Current text of a root-relative file, `None` when absent or unreadable.
pub(crate) fn read_text(root: &ProjectRoot, rel: &str) -> Option<String> {
    root.read(Utf8Path::new(rel))
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}
