//! `aibox-engine`: the plan/apply engine shared by the CLI and embedders.
//!
//! Resolve, then plan, then apply: [`resolve()`] does every network and temporary-file
//! step (configuration, lock, seccomp decision, verified processkit release, skill
//! review, and a snapshot of the project files the plan needs); [`plan()`] computes every
//! file aibox would write (with its owner) from the resolved value alone, doing no I/O;
//! [`apply`] writes it through the single guarded writer ([`writer`]): atomic,
//! write-if-changed, inside a closed perimeter, lock file last, under a project lock.

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
