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
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                let summary = match &r.exception {
                    Some(e) => format!("{} (UNVERIFIED: {e})", r.summary),
                    None => r.summary.clone(),
                };
                vec![
                    r.name.clone(),
                    r.version.clone(),
                    r.verification.clone(),
                    r.installed.clone().unwrap_or_else(|| "-".to_owned()),
                    summary,
                ]
            })
            .collect();
        let headers = ["name", "version", "verification", "installed", "summary"];
        for line in render::table(&headers, &cells) {
            render::out(&line);
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
