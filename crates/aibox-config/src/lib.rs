//! `aibox-config`: the bottom layer of aibox.
//!
//! It owns the model of `aibox.toml` and `.aibox-local.toml`, finds them from the
//! project root, validates them and reports every user error as a `miette` diagnostic
//! pointing at the file, line and span. It performs no network, process or container
//! work and writes no file except through the explicit edit API.

pub mod files;
pub mod model;

mod load;

pub use load::{
    AIBOX_TOML, ConfigError, LOCAL_TOML, Project, find_project_root, load_project, parse_aibox_toml,
    parse_local_toml,
};
pub use files::{Ownership, PlannedFile};
pub use model::*;
