//! `.devcontainer/devcontainer.json` (JSONC with a `//` header) for Compose mode.
//!
//! Only keys valid with `dockerComposeFile` are written (never `runArgs`;
//! `initializeCommand` only with `[network] egress`, to make the agent's internal network
//! on a Podman host before Compose does); aibox's own metadata lives under `customizations.aibox`, the
//! only place the schema allows tool-specific keys.

use aibox_config::container::WORKSPACE_DIR;
use aibox_config::layout;
use serde_json::{Map, Value, json};

use crate::{GENERATED_HEADER, Inputs};

pub(crate) fn render(inputs: &Inputs<'_>) -> String {
    let config = inputs.config;
    let c = &config.container;
    // The Compose files of the file table, relative to this folder. Only committed
    // files: a fresh clone must come up without running aibox. The personal
    // `docker-compose.local.yml` is added by `aibox up` (`-f`) when it exists.
    let compose_files: Vec<&str> = layout::COMPOSE_FILES
        .iter()
        .filter(|p| layout::entry(p).is_some_and(|e| e.scope == layout::Scope::Committed))
        .filter(|p| **p != layout::COMPOSE_OVERRIDE || inputs.override_present())
        .filter_map(|p| p.strip_prefix(layout::DEVCONTAINER_DIR))
        .collect();
    let mut doc = Map::new();
    doc.insert("name".into(), json!(crate::project_name(config)));
    doc.insert("dockerComposeFile".into(), json!(compose_files));
    doc.insert("service".into(), json!(crate::service_name(config)));
    doc.insert("workspaceFolder".into(), json!(WORKSPACE_DIR));
    doc.insert("remoteUser".into(), json!(c.user));
    // The Compose file already runs its main process under `init` (`sleep infinity`, or the
    // egress relay in `allowlist` mode, without which the agent has no way out); keep it.
    doc.insert("overrideCommand".into(), json!(false));
    // VS Code gives the container user the local user's UID, as `aibox up` does with the
    // project owner's: either way the agent can write /workspace.
    doc.insert("updateRemoteUserUID".into(), json!(true));
    if crate::egress::isolated(config.network.egress) {
        doc.insert(
            "initializeCommand".into(),
            json!(aibox_config::container::egress_initialize_command(
                &crate::project_name(config)
            )),
        );
    }
    if let Some(cmd) = &c.lifecycle.post_create_command {
        doc.insert("postCreateCommand".into(), json!(cmd));
    }
    if let Some(cmd) = &c.lifecycle.post_start_command {
        doc.insert("postStartCommand".into(), json!(cmd));
    }
    let harnesses: Vec<&str> = inputs
        .harnesses()
        .into_iter()
        .map(aibox_config::Harness::as_str)
        .collect();
    doc.insert(
        "customizations".into(),
        json!({
            "aibox": {
                "project": crate::project_name(config),
                "profile": config.aibox.profile.as_str(),
                "contextMode": config.context.mode.as_str(),
                "harnesses": harnesses,
            }
        }),
    );
    // Serialising a `Value` cannot fail; fall back to compact output just in case.
    let value = Value::Object(doc);
    let body = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
    format!("// {GENERATED_HEADER}\n{body}\n")
}
