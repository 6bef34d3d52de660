//! The checks of `aibox doctor`, one module per concern, and the reads they share.

pub mod base_image;
pub(super) mod codex_sandbox;
pub(super) mod config;
pub(super) mod container_policy;
pub(super) mod container_state;
pub(super) mod egress;
pub(super) mod engine;
pub(super) mod exceptions;
pub(super) mod integrity;
pub(super) mod local_state;
pub(super) mod mcp_deps;
pub(super) mod mcp_servers;
pub(super) mod migrations;
pub(super) mod secrets;
pub(super) mod skills;
pub(super) mod sync;
pub(super) mod updates;
pub(super) mod version;

use aibox_provenance::lock::{LOCK_FILE, Lock};
use camino::Utf8Path;

use crate::writer::ProjectRoot;

/// The engine and the project's container target, found once per doctor run; `Err` says
/// why the container checks are skipped (the caller skipped the engine, no valid
/// configuration, no engine found).
pub(super) type EngineAt = Result<(aibox_runtime::Runtime, aibox_runtime::Target), String>;

/// The project's container, asked of the engine once per doctor run: `container-state`
/// and `base-image` both read it (each engine call costs tens of milliseconds, more on a
/// busy machine, and each lookup took up to three).
pub(super) type Container =
    Result<Option<aibox_runtime::FoundContainer>, aibox_runtime::RuntimeError>;

/// Looks the project's container up; `None` when the container checks are skipped (see
/// [`EngineAt`]).
pub(super) fn container(engine: &EngineAt) -> Option<Container> {
    engine
        .as_ref()
        .ok()
        .map(|(runtime, target)| runtime.container(target))
}

/// Why the container checks did not run when the caller turned the engine off.
pub(super) const SKIPPED: &str = "skipped by the caller";

/// Detects the engine for `project` (see [`EngineAt`]).
pub(super) fn engine_at(
    root: &Utf8Path,
    project: Option<&aibox_config::Project>,
    options: &super::DoctorOptions,
) -> EngineAt {
    if options.skip_engine {
        return Err(SKIPPED.to_owned());
    }
    let p = project.ok_or("no valid configuration")?;
    let lifecycle = crate::lifecycle::LifecycleOptions {
        env: options.detect.clone(),
        timeouts: aibox_runtime::Timeouts::default(),
        lock_timeout: crate::lifecycle::CONTAINER_LOCK_TIMEOUT,
    };
    crate::lifecycle::runtime_for_config(root, p, &lifecycle).map_err(|e| e.to_string())
}

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
