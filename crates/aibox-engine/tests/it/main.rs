//! Integration tests of this crate, one module per area (`cargo test -p CRATE --test it`;
//! `-- MODULE::` runs one area, `-- --skip MODULE::` leaves one out).
//!
//! One test binary per harness (links once, not once per file); a new test file is
//! `tests/it/NAME.rs` plus a `mod NAME;` line here (see CONTRIBUTING.md).

mod apply;
mod apply_policy;
mod common;
mod crash;
mod crash_processkit;
mod doctor;
mod egress;
mod embedder_api;
mod error_kinds;
mod init;
mod lifecycle_guards;
mod mcp_registration;
mod mcp_uvx;
mod migrate;
mod pk_doctor;
mod plan_purity;
mod processkit_hooks;
mod processkit_real;
mod processkit_store;
mod processkit_wiring;
mod reach;
mod resolve;
mod retire;
mod secret_corpus;
mod secret_rules;
mod skills;
mod snapshot_move;
mod stat_cache;
