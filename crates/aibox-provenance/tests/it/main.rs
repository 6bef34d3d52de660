//! Integration tests of this crate, one module per area (`cargo test -p CRATE --test it`;
//! `-- MODULE::` runs one area, `-- --skip MODULE::` leaves one out).
//!
//! One test binary per harness (links once, not once per file); a new test file is
//! `tests/it/NAME.rs` plus a `mod NAME;` line here (see CONTRIBUTING.md).

mod common;
mod dependencies;
mod example_pack;
mod extract;
mod fetch;
mod install;
mod local_sources;
mod migration_schema;
mod real_shape;
mod releases;
mod resume;
mod upgrade_prop;
mod uvx_index;
