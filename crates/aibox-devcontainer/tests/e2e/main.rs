//! End-to-end tests against a real container engine or real third-party tools (Podman,
//! npm, the harness CLIs): run them as a group with `cargo test -p CRATE --test e2e`, or
//! skip them all by testing only `--lib --test it`.
//!
//! One test binary per harness (links once, not once per file); a new test file is
//! `tests/e2e/NAME.rs` plus a `mod NAME;` line here (see CONTRIBUTING.md).

mod catalog_downloads;
mod podman_build;
