//! `aibox addon list|add|remove`: the pinned tool catalog (`aibox_engine::addons`).

use super::{Outcome, json_or, optional_project_root, project_root};
use crate::args::{AddonCommand, Global};
use crate::exit::Exit;
use crate::render;

pub fn run(g: &Global, cmd: &AddonCommand) -> Outcome {
    match cmd {
        AddonCommand::List => list(g),
        AddonCommand::Add { names } => change(g, names, true),
        AddonCommand::Remove { names } => change(g, names, false),
    }
}

fn list(g: &Global) -> Outcome {
    let project = match optional_project_root(g)? {
        Some(r) => Some(aibox_config::load_project(&r)?),
        None => None,
    };
    let rows = aibox_engine::addons::list(project.as_ref().map(|p| &p.config))?;
    json_or(g, &rows, || {
        for r in &rows {
            render::out(&format!(
                "{:<16} {:<10} {:<14} {:<16} {}",
                r.name,
                r.version,
                r.verification,
                r.installed.as_deref().unwrap_or("-"),
                r.summary
            ));
            if let Some(e) = &r.exception {
                render::out(&format!("{:<16} UNVERIFIED: {e}", ""));
            }
        }
    })?;
    Ok(Exit::Ok)
}

fn change(g: &Global, names: &[String], add: bool) -> Outcome {
    let root = project_root(g)?;
    let changed = if add {
        aibox_engine::addons::add(&root, names)
    } else {
        aibox_engine::addons::remove(&root, names)
    }?;
    json_or(g, &serde_json::json!({ "changed": changed }), || {
        let msg = if changed {
            "aibox.toml updated; run `aibox apply` to change the image"
        } else {
            "nothing to change"
        };
        render::note(g.quiet, msg);
    })?;
    Ok(Exit::Ok)
}
