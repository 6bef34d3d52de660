//! `aibox-engine`: the plan/apply engine shared by the CLI and embedders.
//!
//! [`plan`] computes every file aibox would write (with its owner) from the project's
//! configuration; [`apply`] writes it through the single guarded writer
//! ([`writer`]): atomic, write-if-changed, inside a closed perimeter, lock file last,
//! under a project lock.

mod apply;
mod error;
pub mod plan;
pub mod sources;
pub mod writer;

pub use apply::{
    APPLY_LOCK, ApplyOptions, ApplyReport, BACKUP_DIR, FileAction, FileReport, PENDING_LOCK, apply,
};
pub use error::EngineError;
pub use plan::{DownloadProgress, Plan, PlanBuilder, PlanContext, PlanOptions, plan};

// Modules owned by other features (one line each):
pub mod addons;
pub mod codex_sandbox;
pub mod config_check;
pub mod config_edit;
pub mod consent;
pub mod doctor;
pub mod doctor_base_image;
pub mod init;
pub mod lifecycle;
mod mcp_list;
pub mod skills;

/// The tool catalog (`aibox addon list`), re-exported for the CLI.
pub use aibox_devcontainer::catalog;
/// `aibox doctor --integrity`: per-file verification of the installed processkit content.
pub use aibox_provenance::{IntegrityReport, IntegrityStatus, integrity};
pub use mcp_list::mcp_list;
