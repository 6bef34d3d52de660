//! The `aibox` binary: parse arguments, call one library function, render the result,
//! pick the exit code. It is the only crate that prints.
//!
//! Exit codes (also in the README and the docs):
//! - `0` success;
//! - `1` a check found problems (`apply --check` would change files, `doctor` found errors);
//! - `2` user error (bad arguments, invalid configuration, refused operation);
//! - `3` environment error (no container engine, engine failure, I/O outside our control);
//! - `70` internal error (a bug in aibox).

mod args;
mod commands;
mod config_get;
mod docs;
mod render;

use std::process::ExitCode;

use clap::Parser;

/// Documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// A check found problems.
    Problems = 1,
    /// User error.
    User = 2,
    /// Environment error.
    Environment = 3,
    /// Internal error.
    Internal = 70,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    render::install_miette_hook(cli.global.color);
    match commands::run(&cli) {
        Ok(exit) => exit.into(),
        Err(failure) => {
            render::error(&failure.report);
            failure.exit.into()
        }
    }
}
