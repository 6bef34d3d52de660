//! `aibox up`, `aibox down`, `aibox status`: the container lifecycle of
//! `aibox_engine::lifecycle`, with progress on stderr.

use super::{Outcome, approve_reach_asked, json_or, progress, project_root};
use crate::args::{Global, UpArgs};
use crate::exit::Exit;
use crate::render;

pub fn up(g: &Global, args: &UpArgs) -> Outcome {
    let root = project_root(g)?;
    let mut opts = aibox_engine::lifecycle::UpOptions {
        build: args.build,
        ..Default::default()
    };
    opts.apply.approve_reach = args.approve_reach;
    opts.apply.plan.download_progress = render::download_progress(g.quiet);
    opts.apply.plan.notice = render::notice(g.quiet);
    let report = match aibox_engine::lifecycle::up(&root, &opts, &mut |e| progress(g, e)) {
        Err(aibox_engine::lifecycle::LifecycleError::Engine(e))
            if matches!(*e, aibox_engine::EngineError::ReachNotApproved { .. }) =>
        {
            approve_reach_asked(g, *e)?;
            opts.apply.approve_reach = true;
            aibox_engine::lifecycle::up(&root, &opts, &mut |e| progress(g, e))?
        }
        other => other?,
    };
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
        for line in status_notes(&status) {
            render::out(&line);
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

/// What `status` adds for a human under the table: a missing or stale image, a stale or
/// paused container and one under a former name, each with what `aibox up` does about it
/// (the same facts as the JSON fields `image_present`, `image_stale`, `container_stale`,
/// `former_containers`).
fn status_notes(status: &aibox_runtime::Status) -> Vec<String> {
    let mut notes = Vec::new();
    if !status.image_present {
        notes.push("note:      the image is not built: `aibox up` builds it".to_owned());
    } else if status.image_stale {
        notes.push(
            "note:      the image is stale (built from other files than .devcontainer/ holds \
             now): `aibox up` rebuilds it"
                .to_owned(),
        );
    }
    if status.container_stale {
        notes.push(
            "note:      the container is stale (created from other files or another image): \
             `aibox up` recreates it"
                .to_owned(),
        );
    }
    if status.state == aibox_runtime::ContainerState::Paused {
        notes.push("note:      the container is paused: `aibox up` unpauses it".to_owned());
    }
    for name in &status.former_containers {
        notes.push(format!(
            "note:      container `{name}` is this checkout's under a former name: `aibox up` \
             or `aibox down` removes it"
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use aibox_runtime::{ComposeKind, ContainerState, Engine, Status};

    fn status(state: ContainerState, image: (bool, bool), container_stale: bool) -> Status {
        Status {
            project: "demo".to_owned(),
            container: "demo".to_owned(),
            devcontainer_cli: false,
            state,
            engine_status: None,
            container_id: None,
            image: "localhost/demo-aibox:local".to_owned(),
            image_present: image.0,
            image_stale: image.1,
            container_stale,
            former_containers: Vec::new(),
            engine: Engine::Podman,
            compose: ComposeKind::PodmanCompose,
            proxy: None,
        }
    }

    #[test]
    fn human_status_says_what_is_missing_stale_or_paused() {
        let fresh = status(ContainerState::Running, (true, false), false);
        assert!(super::status_notes(&fresh).is_empty());
        let notes = super::status_notes(&status(ContainerState::Running, (true, true), true));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("image is stale") && notes[0].contains("rebuilds"));
        assert!(notes[1].contains("container is stale") && notes[1].contains("recreates"));
        let notes = super::status_notes(&status(ContainerState::Missing, (false, false), false));
        assert_eq!(
            notes,
            ["note:      the image is not built: `aibox up` builds it"]
        );
        let notes = super::status_notes(&status(ContainerState::Paused, (true, false), false));
        assert_eq!(
            notes,
            ["note:      the container is paused: `aibox up` unpauses it"]
        );
        let mut renamed = status(ContainerState::Missing, (true, false), false);
        renamed.former_containers = vec!["demo-0c708bfa".to_owned()];
        let notes = super::status_notes(&renamed);
        assert!(
            notes[0].contains("`demo-0c708bfa` is this checkout's"),
            "{notes:?}"
        );
    }
}
