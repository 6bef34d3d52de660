//! `aibox apply`: calls `aibox_engine::apply`; on a missing seccomp consent or more reach
//! for the container than the owner approved, and only with a person at the terminal and
//! no `--yes`, explains, asks, records the answer and applies again.

use camino::Utf8Path;

use super::{Outcome, approve_reach_asked, ask, interactive, json_or, progress, project_root};
use crate::args::{ApplyArgs, Global};
use crate::error::{CliError, Failure};
use crate::exit::Exit;
use crate::render;

pub fn run(g: &Global, args: &ApplyArgs) -> Outcome {
    let root = project_root(g)?;
    let mut opts = aibox_engine::ApplyOptions {
        dry_run: args.dry_run,
        check: args.check,
        force: args.force,
        approve_reach: args.approve_reach,
        ..aibox_engine::ApplyOptions::default()
    };
    opts.plan.download_progress = render::download_progress(g.quiet);
    opts.plan.notice = render::notice(g.quiet);
    let report = apply_asking(g, &root, &mut opts)?;
    json_or(g, &report, || {
        // The engine's plain-text report (shared with embedders, `examples/embed.rs`).
        let options = aibox_engine::render::HumanOptions {
            check: args.check,
            verbose: g.verbose > 0,
        };
        for (channel, line) in report.render_human(options) {
            match channel {
                aibox_engine::render::Channel::Note => render::note(g.quiet, &line),
                aibox_engine::render::Channel::Warning => render::warning(&line),
                aibox_engine::render::Channel::Output => render::out(&line),
            }
        }
    })?;
    if args.check && report.changed() {
        return Ok(Exit::Problems);
    }
    if args.build {
        let opts = aibox_engine::lifecycle::LifecycleOptions::default();
        aibox_engine::lifecycle::build(&root, &opts, &mut |e| progress(g, e))?;
    }
    Ok(Exit::Ok)
}

/// Applies; with a person at the terminal, a refusal that needs the owner's seccomp
/// consent or approval of more reach is explained and asked, and the apply made again
/// (each question at most once).
fn apply_asking(
    g: &Global,
    root: &Utf8Path,
    opts: &mut aibox_engine::ApplyOptions,
) -> Result<aibox_engine::ApplyReport, Failure> {
    let mut consent_asked = false;
    loop {
        match aibox_engine::apply(root, opts) {
            Ok(report) => return Ok(report),
            Err(e @ aibox_engine::EngineError::ReachNotApproved { .. }) if !opts.approve_reach => {
                approve_reach_asked(g, e)?;
                opts.approve_reach = true;
            }
            Err(e) => {
                let question = (!consent_asked).then(|| consent_question(g, &e)).flatten();
                let Some(key) = question else {
                    return Err(e.into());
                };
                // Show the full explanation first, then ask.
                render::error(&miette::Report::new(e));
                ask_seccomp_consent(g, root, &key)?;
                consent_asked = true;
            }
        }
    }
}

/// The consent key to ask for: the one the refusal carries, when a person is at the
/// terminal without `--yes` (which never counts as consent).
fn consent_question(g: &Global, err: &aibox_engine::EngineError) -> Option<String> {
    if g.yes || !interactive() {
        return None;
    }
    aibox_engine::consent::missing_seccomp_consent(err)
}

/// Asks (default No) and, on "yes", records `key = true` in `aibox.toml`.
fn ask_seccomp_consent(g: &Global, root: &Utf8Path, key: &str) -> Result<(), Failure> {
    let answer = ask(
        &format!("Record your consent (`{key} = true` in aibox.toml)? y/N"),
        "N",
    )?;
    if !matches!(answer.to_ascii_lowercase().as_str(), "y" | "yes") {
        return Err(CliError::ConsentRefused.into());
    }
    let path = aibox_engine::consent::record_consent(root, key)?;
    render::note(g.quiet, &format!("recorded `{key} = true` in {path}"));
    Ok(())
}
