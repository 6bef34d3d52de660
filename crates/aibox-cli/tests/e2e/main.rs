//! End-to-end tests against a real container engine or real third-party tools (Podman,
//! npm, the harness CLIs): run them as a group with `cargo test -p CRATE --test e2e`, or
//! skip them all by testing only `--lib --test it`.
//!
//! One test binary per harness (links once, not once per file); a new test file is
//! `tests/e2e/NAME.rs` plus a `mod NAME;` line here (see CONTRIBUTING.md).
//!
//! libtest starts the tests in the order of their names on as many threads as there are
//! cores: the long ones (`e2e_codex_sandbox`, `e2e_devcontainer_cli`,
//! `e2e_harness_tools`, once `e2e_tools` and last) sort early, so no long test runs alone
//! at the end.

mod e2e_codex_sandbox;
mod e2e_devcontainer_cli;
mod e2e_egress;
mod e2e_harness_tools;
mod e2e_pk_doctor;
mod e2e_podman;
