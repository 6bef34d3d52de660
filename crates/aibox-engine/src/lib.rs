//! `aibox-engine`: the plan/apply engine shared by the CLI and embedders.
//!
//! Resolve, then plan, then apply: [`resolve()`] does every network and temporary-file
//! step (configuration, lock, seccomp decision, verified processkit release, skill
//! review, and a snapshot of the project files the plan needs); [`plan()`] computes every
//! file aibox would write (with its owner) from the resolved value alone, doing no I/O;
//! [`apply`] writes it through the single guarded writer ([`writer`]): atomic,
//! write-if-changed, inside a closed perimeter, lock file last, under a project lock.
//!
//! An embedder needs this crate and `aibox-config` only: the types of the other aibox
//! crates that the entry points take or return (a finding's [`Severity`], the
//! [`TargetEngine`] of [`PlanOptions::engine`], [`HttpOptions`], the container's
//! [`Status`], the errors [`EngineError`] carries, ...) are re-exported here.

mod apply;
pub mod builder;
mod error;
pub mod plan;
mod process;
pub mod reach;
pub mod records;
pub mod render;
pub mod resolve;
mod security;
pub mod skill_review;
pub mod snapshot;
pub mod sources;
pub mod writer;

pub use apply::{ApplyOptions, ApplyReport, FileAction, FileReport, apply, apply_resolved};
pub use builder::{Plan, PlanBuilder, PlanContext};
pub use error::EngineError;
pub use mcp_resolver::Notice;
pub use plan::{plan, plans_made};
pub use records::{APPLY_LOCK, BACKUP_DIR, CONTAINER_LOCK, PENDING_LOCK};
pub use resolve::{
    DownloadProgress, PlanOptions, ProcesskitState, Resolved, ResolvedRelease, Security, resolve,
    resolve_project,
};
pub use snapshot::Snapshot;

// Modules owned by other features (one line each):
pub mod addons;
pub mod base_image_pin;
pub mod codex_sandbox;
pub mod config_check;
pub mod config_edit;
pub mod consent;
pub mod doctor;
pub mod init;
pub mod lifecycle;
pub mod mcp_check;
pub mod mcp_envs;
mod mcp_list;
pub mod mcp_npm;
pub mod mcp_resolver;
pub mod mcp_uvx;
pub mod migrate;
pub mod network;
pub mod network_list;
pub mod pk_doctor;
pub mod skills;
pub mod updates;
pub mod versions;

/// The tool catalog (`aibox addon list`), re-exported for the CLI.
pub use aibox_devcontainer::catalog;
pub use aibox_mcp_registration::HandAdded;
/// `aibox doctor --integrity`: per-file verification of the installed processkit content.
pub use aibox_provenance::{IntegrityReport, IntegrityStatus, integrity};
pub use mcp_check::{
    McpCheckError, McpCheckOptions, McpCheckReport, ServerCheck, ServerStatus, mcp_check,
    mcp_check_resolved,
};
pub use mcp_list::{McpList, mcp_list, mcp_list_resolved};

// The types of the crates below that the entry points take or return, so that an embedder
// needs `aibox-engine` and `aibox-config` (the model every entry point reads) and no other
// aibox crate. A chosen list, one group per crate: a public entry point that starts taking
// or returning another of their types adds it here, and `tests/it/embedder_api.rs`
// reaches each through these paths alone. The plan's building blocks (`PlanBuilder`,
// `PlanContext`, `sources`, what `ResolvedRelease` carries) are the engine's own and keep
// their crates' types.

// The generator's error, which `EngineError` carries.
pub use aibox_devcontainer::DevcontainerError;
// What `mcp_list()` and `mcp_check()` report of each server, and registration's errors.
pub use aibox_mcp_registration::{EffectiveServer, McpError, Origin};
// Findings and their severity (`doctor::DoctorReport::findings`,
// `doctor::DoctorReport::by_severity`, the policy gate's refusal in `PolicyError`) and
// the Codex seccomp gate: the engine it judges (`PlanOptions::engine`) and its decision
// (`Security`, `codex_sandbox`).
pub use aibox_policy::{
    Finding, PolicyError, SeccompPosture, SecurityDecision, Severity, TargetEngine,
};
// Limits of a network question (`base_image_pin::pin` with
// `base_image_pin::default_options`), `aibox.lock` as planned (`Plan::lock`) and as
// found (`Resolved::previous_lock`), the published processkit releases
// (`versions::list`, `versions::newest`) and the errors `EngineError` and
// `base_image_pin::PinError` carry.
pub use aibox_provenance::{
    HttpOptions, ProvenanceError,
    lock::{Lock, LockError},
    registry::RegistryError,
    releases::{PublishedRelease, ReleaseList},
};
// The container engine and the container (`lifecycle`): how the engine is found
// (`doctor::DoctorOptions::detect`, `lifecycle::LifecycleOptions`), the progress of
// `up`, `down` and `build`, the state `status` returns, and `mcp_check()`'s probe.
pub use aibox_runtime::{
    ComposeKind, ContainerState, DetectEnv, Engine, Event, FoundContainer, McpProbe, Progress,
    Runtime, RuntimeError, Status, Target, Timeouts,
};
// The skill review's errors, which `EngineError` carries.
pub use aibox_skill_review::{GateError, ReviewError};
