//! `aibox migrate list|show|resolve`: the pending processkit migrations and their
//! conflicts (`aibox_engine::migrate`).

use aibox_engine::migrate::{MigrateOptions, Resolution, ResolveRequest, VersionAt};
use camino::Utf8Path;

use super::{Outcome, json_or, project_root};
use crate::args::{Global, MigrateCommand, Output, SideArg};
use crate::exit::Exit;
use crate::render;

pub fn run(g: &Global, cmd: &MigrateCommand) -> Outcome {
    let root = project_root(g)?;
    let options = MigrateOptions::default();
    match cmd {
        MigrateCommand::List => list(g, &root),
        MigrateCommand::Show {
            id,
            path: Some(path),
            print: Some(side),
        } => print_version(g, &root, id, path, *side, &options),
        MigrateCommand::Show { id, path, .. } => show(g, &root, id, path.as_deref(), &options),
        MigrateCommand::Resolve {
            id,
            paths,
            take,
            edited,
            force,
        } => {
            let resolution = match (take, edited) {
                (Some(side), _) => Some(Resolution::Take((*side).into())),
                (None, true) => Some(Resolution::Edited),
                (None, false) => None,
            };
            let request = ResolveRequest {
                id: id.clone(),
                paths: paths.clone(),
                resolution,
                force: *force,
            };
            resolve(g, &root, &request, &options)
        }
    }
}

fn list(g: &Global, root: &Utf8Path) -> Outcome {
    let listing = aibox_engine::migrate::list(root)?;
    json_or(g, &listing, || {
        if listing.migrations.is_empty() {
            render::out("no pending migrations");
        }
        for m in &listing.migrations {
            let open: Vec<&str> = m.open().map(|c| c.path.as_str()).collect();
            render::out(&format!("{}  {} open conflict(s)", heading(m), open.len()));
            for path in open {
                render::out(&format!("    conflict: {path}"));
            }
        }
        for (path, reason) in &listing.unreadable {
            render::warning(&format!("cannot read {path}: {reason}"));
        }
    })?;
    Ok(Exit::Ok)
}

/// `show ID PATH --print VERSION`: that version's bytes alone (for a merge tool).
fn print_version(
    g: &Global,
    root: &Utf8Path,
    id: &str,
    path: &str,
    side: SideArg,
    options: &MigrateOptions,
) -> Outcome {
    let bytes = aibox_engine::migrate::version(root, id, path, side.into(), options)?;
    if g.output == Output::Json {
        render::json(&serde_json::json!({
            "path": path,
            "contents": String::from_utf8_lossy(&bytes),
        }))?;
    } else {
        render::raw(&bytes);
    }
    Ok(Exit::Ok)
}

fn show(
    g: &Global,
    root: &Utf8Path,
    id: &str,
    path: Option<&str>,
    options: &MigrateOptions,
) -> Outcome {
    let shown = aibox_engine::migrate::show(root, id, path, options)?;
    json_or(g, &shown, || {
        let m = &shown.migration;
        render::out(&heading(m));
        if let Some(s) = &m.summary {
            render::out(&format!("  {s}"));
        }
        if shown.files.is_empty() {
            render::out(&format!(
                "  no open conflict: mark it done with `aibox migrate resolve {}`",
                m.id
            ));
        }
        for f in &shown.files {
            render::out(&format!("\nconflict: {}", f.path));
            for (name, v) in [("ours", &f.ours), ("theirs", &f.theirs), ("base", &f.base)] {
                render::out(&format!("  {name:<7}{}", where_is(v)));
            }
            if let Some(d) = &f.diff {
                render::out(d.trim_end());
            }
        }
    })?;
    Ok(Exit::Ok)
}

fn resolve(
    g: &Global,
    root: &Utf8Path,
    request: &ResolveRequest,
    options: &MigrateOptions,
) -> Outcome {
    let report = aibox_engine::migrate::resolve(root, request, options)?;
    json_or(g, &report, || {
        for s in &report.resolved {
            render::out(&format!("settled {} ({})", s.path, s.resolution.name()));
        }
        match &report.applied {
            Some(to) => render::out(&format!("{} is done: {to}", report.id)),
            None => render::out(&format!(
                "{} still has {} open conflict(s): {}",
                report.id,
                report.remaining.len(),
                report.remaining.join(", ")
            )),
        }
    })?;
    Ok(Exit::Ok)
}

/// `MIG-… (state): processkit FROM → TO; DOCUMENT`.
fn heading(m: &aibox_engine::migrate::Migration) -> String {
    format!(
        "{} ({}): processkit {} → {}; {}",
        m.id,
        m.state,
        m.from_version.as_deref().unwrap_or("?"),
        m.to_version.as_deref().unwrap_or("?"),
        m.document
    )
}

/// Where a version is, or why it is not available.
fn where_is(v: &VersionAt) -> String {
    match &v.note {
        None => v.location.clone(),
        Some(why) => format!("{} (not available: {why})", v.location),
    }
}
