//! `aibox base-image pin`: re-pins `container.base_image` through
//! `aibox_engine::base_image_pin`.

use super::{Outcome, json_or, project_root};
use crate::args::{BaseImageCommand, Global};
use crate::exit::Exit;
use crate::render;

pub fn run(g: &Global, cmd: &BaseImageCommand) -> Outcome {
    match cmd {
        BaseImageCommand::Pin { reference, dry_run } => pin(g, reference.as_deref(), *dry_run),
    }
}

fn pin(g: &Global, reference: Option<&str>, dry_run: bool) -> Outcome {
    let root = project_root(g)?;
    let opts = aibox_engine::base_image_pin::default_options();
    let report = aibox_engine::base_image_pin::pin(&root, reference, dry_run, &opts)?;
    json_or(g, &report, || {
        if !report.changed {
            render::note(
                g.quiet,
                &format!("{} is already pinned to the current digest", report.new),
            );
            return;
        }
        render::out(&format!("{} -> {}", report.old, report.new));
        let msg = if report.dry_run {
            "dry run: aibox.toml not changed"
        } else {
            "aibox.toml updated; run `aibox apply` to use it"
        };
        render::note(g.quiet, msg);
    })?;
    Ok(Exit::Ok)
}
