//! Embedding aibox: resolve, plan and apply a project through `aibox-engine` alone, then
//! print the report `aibox apply` prints (status lines on stderr, diffs on stdout).
//!
//! ```text
//! cargo run -p aibox-engine --example embed -- <project-dir>
//! ```
//!
//! `cargo xtask ci` runs it on a copy of the bundled example project (`examples/demo`).

// An example program's job is printing.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use aibox_engine::render::{Channel, HumanOptions};
use aibox_engine::{ApplyOptions, EngineError, apply_resolved, plan, resolve};
use camino::{Utf8Path, Utf8PathBuf};

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: embed <project-dir>");
        return ExitCode::from(2);
    };
    match run(&Utf8PathBuf::from(dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{:?}", miette::Report::new(e));
            ExitCode::FAILURE
        }
    }
}

fn run(root: &Utf8Path) -> Result<(), EngineError> {
    let options = ApplyOptions::default();
    // 1. Resolve: the configuration, the lock, the seccomp decision, the verified
    //    processkit release, the skill review (all network and temporary files) and the
    //    current text of every project file the plan reads.
    let resolved = resolve(root, &options.plan)?;
    // 2. Plan: every file aibox would write, computed from the resolved value (no I/O).
    let planned = plan(&resolved)?;
    eprintln!(
        "planned {} file(s) for `{}`",
        planned.files.len(),
        resolved.project.config.container.name
    );
    // 3. Apply: the single writer writes the plan (lock file last).
    let report = apply_resolved(&resolved, &options)?;
    for (channel, line) in report.render_human(HumanOptions::default()) {
        match channel {
            Channel::Note => eprintln!("{line}"),
            Channel::Warning => eprintln!("warning: {line}"),
            Channel::Output => println!("{line}"),
        }
    }
    Ok(())
}
