//! Integration tests of this crate, one module per area (`cargo test -p CRATE --test it`;
//! `-- MODULE::` runs one area, `-- --skip MODULE::` leaves one out).
//!
//! One test binary per harness (links once, not once per file); a new test file is
//! `tests/it/NAME.rs` plus a `mod NAME;` line here (see CONTRIBUTING.md).

mod compose_corpus;
mod compose_crosscheck;
mod corpus;
mod gate;
mod gate_inputs;
mod links;
mod redact;
mod run_args;
mod seccomp;
mod secrets;
