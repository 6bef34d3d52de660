//! The `aibox` binary: parse arguments, call one library function, render the result,
//! pick the exit code. It is the only crate that prints.
//!
//! Exit codes are listed in [`exit::EXIT_CODES`] (also in the README and the CLI
//! reference); an error's exit code follows from its kind in [`exit`] alone.

mod args;
mod commands;
mod docs;
mod error;
mod exit;
mod render;

use std::process::ExitCode;

use clap::Parser;

use crate::exit::Exit;

fn main() -> ExitCode {
    tune_allocator();
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    render::install_miette_hook(cli.global.color);
    // Ctrl-C during an image build is handled (the build's leftovers removed, exit 130);
    // anywhere else it ends aibox as before. Registered only once a build starts.
    aibox_runtime::interrupt::install();
    let exit = match commands::run(&cli) {
        Ok(exit) => exit.into(),
        Err(failure) => {
            if cli.global.output == args::Output::Json {
                render::error_json(&failure.report, failure.kind);
            } else {
                render::error(&failure.report);
            }
            Exit::from(failure.kind).into()
        }
    };
    report_peak_rss();
    exit
}

/// Sets glibc's allocator for a short command that starts a few helper threads: at most
/// two arenas (not one per thread, each keeping what its thread freed), memory freed at
/// the top of the heap returned from 128 KiB on, and blocks from 128 KiB on mapped on
/// their own (glibc otherwise raises both thresholds after the first large block is freed,
/// and later large blocks stay in the heap). A 10x processkit install peaks about 2 MiB
/// lower (`cargo xtask bench`); time is unchanged.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // the one `unsafe` of the workspace: glibc's `mallopt`
fn tune_allocator() {
    // SAFETY: `mallopt` only changes the allocator's policy parameters, and runs first
    // in `main`, before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Other platforms keep their allocator's defaults.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}

/// With `AIBOX_PEAK_RSS` set, the last line on stderr names this process's own peak
/// resident memory (`VmHWM` of `/proc/self/status`), for `cargo xtask bench`: GNU
/// `time`'s figure is the largest of the process and its children, and `doctor`'s
/// children (`podman`, `docker`, `git`) are not aibox's memory.
fn report_peak_rss() {
    if std::env::var_os("AIBOX_PEAK_RSS").is_none() {
        return;
    }
    let Ok(status) = fs_err::read_to_string("/proc/self/status") else {
        return;
    };
    if let Some(kib) = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
    {
        // Printed even with `--quiet`: the variable asked for it.
        render::note(false, &format!("aibox: peak RSS {} KiB", kib.trim()));
    }
}

/// Help and version print as clap does, or as JSON (`{"help"}`, `{"version"}`) when the
/// (unparsed) command line asked for JSON output, like every other result; a usage error
/// is a user error, shown as JSON in that case too.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        if args::wants_json(std::env::args()) {
            let value = if e.kind() == ErrorKind::DisplayVersion {
                serde_json::json!({ "version": env!("CARGO_PKG_VERSION") })
            } else {
                serde_json::json!({ "help": e.render().to_string() })
            };
            let _ = render::json(&value);
        } else {
            let _ = e.print();
        }
        return Exit::Ok.into();
    }
    if args::wants_json(std::env::args()) {
        let text = e.render().to_string();
        if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            render::usage_error_json(&format!("error: a subcommand is required\n{text}"));
        } else {
            render::usage_error_json(&text);
        }
    } else {
        let _ = e.print();
    }
    Exit::User.into()
}
