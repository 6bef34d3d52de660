//! `aibox up`, `aibox down`, `aibox status`: the container lifecycle of
//! `aibox_engine::lifecycle`, with progress on stderr.

use super::{Outcome, json_or, progress, project_root};
use crate::args::{Global, UpArgs};
use crate::exit::Exit;
use crate::render;

pub fn up(g: &Global, args: &UpArgs) -> Outcome {
    let root = project_root(g)?;
    let mut opts = aibox_engine::lifecycle::UpOptions {
        build: args.build,
        ..Default::default()
    };
    opts.apply.plan.download_progress = render::download_progress(g.quiet);
    opts.apply.plan.notice = render::notice(g.quiet);
    let report = aibox_engine::lifecycle::up(&root, &opts, &mut |e| progress(g, e))?;
    // Relaxation notices are shown even with --quiet: they concern security.
    for notice in &report.notices {
        render::note(false, notice);
    }
    for warning in &report.apply.warnings {
        render::warning(warning);
    }
    for problem in &report.unwritable {
        render::warning(problem);
    }
    if !report.unwritable.is_empty() {
        render::note(
            false,
            &format!("  fix: {}", aibox_engine::lifecycle::UNWRITABLE_FIX),
        );
    }
    if let Some(sandbox) = &report.codex_sandbox {
        render::note(false, &sandbox.line());
    }
    json_or(g, &report, || {})?;
    Ok(Exit::Ok)
}

pub fn down(g: &Global) -> Outcome {
    let root = project_root(g)?;
    let opts = aibox_engine::lifecycle::LifecycleOptions::default();
    let status = aibox_engine::lifecycle::down(&root, &opts, &mut |e| progress(g, e))?;
    json_or(g, &status, || {
        // After `down` a missing container is the success, not a problem.
        let line = match status.state {
            aibox_runtime::ContainerState::Missing => format!("{} is removed", status.container),
            state => format!("{} is {state}", status.container),
        };
        render::note(g.quiet, &line);
    })?;
    Ok(Exit::Ok)
}

pub fn status(g: &Global) -> Outcome {
    let root = project_root(g)?;
    let opts = aibox_engine::lifecycle::LifecycleOptions::default();
    let status = aibox_engine::lifecycle::status(&root, &opts)?;
    json_or(g, &status, || {
        render::out(&format!("container: {}", status.container));
        render::out(&format!("state:     {}", status.state));
        render::out(&format!("image:     {}", status.image));
        if let Some(id) = &status.container_id {
            render::out(&format!("id:        {id}"));
        }
        if let Some(proxy) = &status.proxy {
            let word = proxy.engine_status.as_deref().unwrap_or("missing");
            render::out(&format!(
                "proxy:     {} ({}, {word})",
                proxy.container, proxy.state
            ));
        }
    })?;
    // Fails closed, but silently: say why the agent has no network.
    if let Some(proxy) = status.proxy.as_ref().filter(|p| {
        status.state == aibox_runtime::ContainerState::Running
            && p.state != aibox_runtime::ContainerState::Running
    }) {
        render::warning(&format!(
            "the egress proxy `{}` is {}: the agent has no way out; run `aibox up` to start it",
            proxy.container, proxy.state
        ));
    }
    Ok(Exit::Ok)
}
