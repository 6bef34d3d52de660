//! The `container-state` check: what the engine actually runs, under the policy gate,
//! whether it still matches the generated files, and whether the agent can write where it
//! works.

use aibox_config::{AiboxToml, Project};
use aibox_policy::{Finding, Severity};
use aibox_runtime::{ContainerState, FoundContainer, Runtime, RuntimeError, Target};

use super::EngineAt;
use crate::doctor::report::Run;

/// The `container-state` check: the engine state of the project's container (what the
/// engine actually runs) under the policy gate's rules, as `up` checks it. `container` is
/// doctor's one lookup of it ([`super::container`]).
pub(crate) fn check(
    run: &mut Run,
    project: Option<&Project>,
    engine: &EngineAt,
    container: Option<&super::Container>,
) {
    let (Some(p), Ok((runtime, target)), Some(container)) = (project, engine, container) else {
        let why = engine
            .as_ref()
            .err()
            .map_or("no valid configuration", String::as_str);
        run.skip("container-state", why);
        return;
    };
    let found = match container {
        Ok(found) => found.as_ref(),
        // Another checkout's (or project's) container under this checkout's name: what
        // `up`, `exec` and `down` refuse is a finding, not a skipped check.
        Err(e @ RuntimeError::ForeignContainer { .. }) => {
            return run.check(
                "container-state",
                vec![Finding::new(
                    "aibox::doctor::foreign_container",
                    Severity::Error,
                    aibox_config::layout::COMPOSE_LOCAL,
                    e.to_string(),
                    "each checkout gets its own container (the project name and a hash of its \
                     path); remove `[container] container_name` from .aibox-local.toml or pin \
                     another name, or remove the other container if it is not needed",
                )],
            );
        }
        Err(e) => return run.skip("container-state", &e.to_string()),
    };
    match findings(runtime, target, &p.config, found) {
        Ok(Some(findings)) => run.check("container-state", findings),
        Ok(None) => run.skip("container-state", "no container"),
        Err(e) => run.skip("container-state", &e.to_string()),
    }
}

/// The policy findings over the engine state (as `up` checks it), then what only doctor
/// reports (`up` rebuilds or recreates instead): a stale image or container, and folders
/// the container user cannot write. Without a container: one of this checkout under a
/// former name, if any (`None` when there is none either).
fn findings(
    runtime: &Runtime,
    target: &Target,
    config: &AiboxToml,
    found: Option<&FoundContainer>,
) -> Result<Option<Vec<Finding>>, RuntimeError> {
    let Some(found) = found else {
        // A container of this checkout under a former name is found by its checkout label.
        let former: Vec<Finding> = runtime
            .former_containers(target)?
            .iter()
            .map(|name| {
                Finding::new(
                    "aibox::doctor::former_container",
                    Severity::Warning,
                    aibox_config::layout::COMPOSE_LOCAL,
                    format!(
                        "container `{name}` was made for this checkout under a former name \
                         (before `container.name` or `container_name` changed) and still exists"
                    ),
                    "run `aibox up` or `aibox down`: both remove it",
                )
            })
            .collect();
        return Ok((!former.is_empty()).then_some(former));
    };
    let mut findings = crate::lifecycle::container_state_of(runtime, found.json(), target, config);
    let status = runtime.status_of(target, Some(found))?;
    // The Dev Containers CLI's container carries no digest: say whose it is, not stale.
    let cli = status.devcontainer_cli;
    if cli {
        findings.push(Finding::new(
            "aibox::doctor::devcontainer_container",
            Severity::Info,
            aibox_config::layout::DEVCONTAINER_JSON,
            format!(
                "container `{}` was made for this checkout by the Dev Containers CLI or VS Code \
                 from the committed files; aibox uses it until `aibox up` makes its own",
                status.container
            ),
            "rebuild it from VS Code (\"Rebuild Container\") after a change, or run `aibox \
             up` for aibox's own container (with your personal settings)",
        ));
    }
    let stale = [
        (
            status.image_stale,
            "aibox::doctor::stale_image",
            aibox_config::layout::DOCKERFILE,
            format!(
                "image `{}` was built from other files than .devcontainer/ holds now (or not by \
                 aibox)",
                status.image
            ),
            "run `aibox up`: it rebuilds the image and recreates the container",
        ),
        (
            status.container_stale && !cli,
            "aibox::doctor::stale_container",
            aibox_config::layout::COMPOSE,
            format!(
                "container `{}` was created from other Compose files, settings or image than \
                 now (or not by aibox)",
                status.container
            ),
            "run `aibox up`: it recreates the container",
        ),
    ];
    for (is_stale, code, file, message, fix) in stale {
        if is_stale {
            findings.push(Finding::new(code, Severity::Warning, file, message, fix));
        }
    }
    if status.state == ContainerState::Running {
        for folder in crate::lifecycle::unwritable_folders(runtime, target, found, config)? {
            findings.push(Finding::new(
                "aibox::doctor::not_writable",
                Severity::Error,
                aibox_config::layout::DOCKERFILE,
                crate::lifecycle::unwritable_message(&target.user, &folder),
                crate::lifecycle::UNWRITABLE_FIX,
            ));
        }
    }
    Ok(Some(findings))
}
