//! `aibox-config`: the bottom layer of aibox.
//!
//! It owns the model of `aibox.toml` and `.aibox-local.toml`, finds them from the
//! project root, validates them and reports every user error as a `miette` diagnostic
//! pointing at the file, line and span. It performs no network, process or container
//! work and writes no files: the file table in `layout` says which command may write
//! which project file, and the one writer that enforces it is `aibox-fs`, a floor above.

pub mod container;
pub mod diag;
pub mod edit;
pub mod files;
pub mod get;
pub mod gitignore;
pub mod hostpath;
pub mod init;
pub mod jsonc;
pub mod kind;
pub mod layout;
pub mod model;
pub mod schema;
pub mod secret_rules;
pub mod validate;

mod load;
mod path;
mod shape;

pub use diag::{ConfigProblems, Problem, ProblemKind, UnknownHarness, bounded, render_plain};
pub use files::{CopyFrom, KeptPack, Ownership, PlanPath, PlannedFile, Render, SourceReader};
pub use gitignore::{LOCAL_STATE_PATHS, is_local_state, merge_gitignore};
pub use init::{InitOptions, render_aibox_toml};
pub use kind::ErrorKind;
pub use load::{
    AIBOX_TOML, ConfigError, LOCAL_TOML, Project, config_text, conflict_marker, find_project_root,
    load_project, load_project_with_text, parse_aibox_toml, parse_local_toml,
    parse_local_toml_with_team, read_config_file, team_config_reads,
};
pub use model::*;
pub use shape::closest;
