//! `.devcontainer/docker-compose.yml`, written by hand for stable, readable output.
//!
//! Every scalar is double-quoted (see [`crate::quote::yaml`]) and every `$` doubled so
//! Compose passes values through without interpolation, except a team environment value
//! that is exactly `${NAME}`: that one Compose fills from the host environment. There is no top-level `name:`
//! (Debian's docker-compose 1.29 rejects it; the runtime passes `-p`) and no `version:`
//! (obsolete).
//!
//! The committed file names no gitignored file, so a fresh clone comes up without
//! running aibox. The personal environment file, `.devcontainer/aibox-local.env`, is
//! referenced only from the gitignored `docker-compose.local.yml`, which the runtime adds
//! with `-f` when it exists. (Compose's optional `env_file` form, `required: false`,
//! needs Compose 2.24; Debian's docker-compose 1.29 rejects it, so an optional overlay
//! file is the portable way.) Personal values go through that file rather than the
//! overlay's `environment:` because podman-compose prints every `podman` command it runs,
//! `-e NAME=value` included; only a personal value for a key the team file also sets is
//! repeated there, as Compose lets `environment:` win over `env_file`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use aibox_config::container::{
    CHECKOUT_LABEL, CONFIG_DIGEST_LABEL, CONFIG_DIGEST_VAR, PROJECT_LABEL, WORKSPACE_DIR,
};
use aibox_config::layout::AIBOX_HOME;
use aibox_config::{EgressMode, ExtraVolume};

use crate::quote::{compose_literal, compose_yaml, yaml};
use crate::{DevcontainerError, GENERATED_HEADER, Inputs, LOCAL_ENV_PATH, egress};

pub(crate) fn render(inputs: &Inputs<'_>) -> Result<String, DevcontainerError> {
    let config = inputs.config;
    let c = &config.container;
    let service = crate::service_name(config);
    let mut out = String::new();
    let _ = writeln!(out, "# {GENERATED_HEADER}");
    out.push_str(
        "# Personal additions belong in docker-compose.override.yml; the project name is\n\
         # passed on the command line (`-p`), so there is no top-level `name:`.\n",
    );
    out.push_str("services:\n");
    let _ = writeln!(out, "  {}:", yaml(service));
    out.push_str("    build:\n");
    out.push_str("      context: \".\"\n");
    out.push_str("      dockerfile: \"Dockerfile\"\n");
    let _ = writeln!(out, "    image: {}", yaml(&crate::image_name(config)));
    let _ = writeln!(out, "    hostname: {}", yaml(c.hostname()));
    out.push_str("    init: true\n");
    let _ = writeln!(out, "    working_dir: {}", yaml(WORKSPACE_DIR));
    let egress = inputs.config.network.egress;
    let command: Vec<String> = if egress == EgressMode::Allowlist {
        egress::agent_command()
            .iter()
            .map(|arg| yaml(arg))
            .collect()
    } else {
        ["sleep", "infinity"].map(yaml).to_vec()
    };
    let _ = writeln!(out, "    command: [{}]", command.join(", "));

    out.push_str("    volumes:\n");
    for volume in volumes(inputs)?.team {
        let _ = writeln!(out, "      - {}", yaml(&volume));
    }
    // The folder of these files, read-only over its place in the workspace, in every
    // egress mode: the agent must not rewrite what the next start by any tool uses (the
    // Compose files and override, the Dockerfiles, devcontainer.json, whose
    // `initializeCommand` runs on the host, and the proxy's filter and configuration in
    // `aibox-egress/`). The folder itself, not single files: a mount point cannot be
    // renamed, but its parent could be, and a new folder put in its place.
    let _ = writeln!(
        out,
        "      - {}",
        yaml(&format!(
            "{}:{}:ro",
            egress::AGENT_RO_SOURCE,
            egress::agent_ro_target()
        ))
    );
    if egress == EgressMode::Allowlist {
        // Only the proxy's socket is in it; read-only, so the agent cannot plant a file.
        let _ = writeln!(
            out,
            "      - {}",
            yaml(&format!(
                "{}:{}:ro",
                egress::SOCKET_VOLUME,
                egress::SOCKET_DIR
            ))
        );
    }

    let proxy_env = if egress == EgressMode::Allowlist {
        egress::agent_environment()
    } else {
        Vec::new()
    };
    let mut env: BTreeMap<&str, &str> = environment(inputs);
    // The proxy variables win over a team value of the same name: egress goes through it.
    for (key, value) in &proxy_env {
        env.insert(key, value);
    }
    if !env.is_empty() {
        out.push_str("    environment:\n");
        for (key, value) in &env {
            let value = if host_reference(value).is_some() {
                // Left for Compose to interpolate from the host environment.
                yaml(value)
            } else {
                compose_yaml(value)
            };
            let _ = writeln!(out, "      {}: {value}", yaml(key));
        }
    }

    if !inputs.security_opt.is_empty() {
        out.push_str("    security_opt:\n");
        for opt in inputs.security_opt {
            let _ = writeln!(out, "      - {}", compose_yaml(opt));
        }
    }

    out.push_str("    labels:\n");
    let _ = writeln!(
        out,
        "      \"{PROJECT_LABEL}\": {}",
        compose_yaml(&crate::project_name(config))
    );
    // Set by `aibox up` to the digest of the files the container is made from, so a later
    // `up` sees a stale container; `none` when another tool starts it (podman-compose 1.0
    // substitutes no empty default).
    let _ = writeln!(
        out,
        "      \"{CONFIG_DIGEST_LABEL}\": \"${{{CONFIG_DIGEST_VAR}:-none}}\""
    );
    if egress::isolated(egress) {
        render_egress(inputs, egress, &mut out);
    }
    Ok(out)
}

/// The agent's networks and, for `allowlist`, the proxy service: the agent alone on the
/// internal network (no route out), the proxy only on an outside one, reached through
/// its socket in the shared volume. The proxy runs as `nobody` with every capability
/// dropped, no new privileges and a read-only root file system: it needs nothing else.
fn render_egress(inputs: &Inputs<'_>, mode: EgressMode, out: &mut String) {
    use egress::{
        INTERNAL_NETWORK, OUTSIDE_NETWORK, PROXY_LABEL, PROXY_SERVICE, SOCKET_DIR, SOCKET_VOLUME,
    };
    out.push_str("    networks:\n");
    let _ = writeln!(out, "      - {}", yaml(INTERNAL_NETWORK));
    if mode == EgressMode::Allowlist {
        out.push_str("    depends_on:\n");
        let _ = writeln!(out, "      - {}", yaml(PROXY_SERVICE));
        let _ = writeln!(out, "  {}:", yaml(PROXY_SERVICE));
        out.push_str("    build:\n");
        out.push_str("      context: \".\"\n");
        out.push_str("      dockerfile: \"aibox-egress/Dockerfile\"\n");
        let _ = writeln!(
            out,
            "    image: {}",
            yaml(&crate::egress_image_name(inputs.config))
        );
        out.push_str("    init: true\n");
        out.push_str("    read_only: true\n");
        // Its configuration, read-only; a change recreates the container, no rebuild.
        out.push_str("    volumes:\n");
        let _ = writeln!(
            out,
            "      - {}",
            yaml(&format!("./aibox-egress:{}:ro", egress::PROXY_ETC))
        );
        let _ = writeln!(
            out,
            "      - {}",
            yaml(&format!("{SOCKET_VOLUME}:{SOCKET_DIR}"))
        );
        out.push_str("    tmpfs:\n      - \"/tmp\"\n");
        out.push_str("    cap_drop:\n      - \"ALL\"\n");
        out.push_str("    security_opt:\n      - \"no-new-privileges:true\"\n");
        out.push_str("    networks:\n");
        let _ = writeln!(out, "      - {}", yaml(OUTSIDE_NETWORK));
        out.push_str("    labels:\n");
        let _ = writeln!(
            out,
            "      \"aibox.project\": {}",
            compose_yaml(&crate::project_name(inputs.config))
        );
        let _ = writeln!(out, "      {}: \"proxy\"", yaml(PROXY_LABEL));
    }
    out.push_str("networks:\n");
    let _ = writeln!(out, "  {}:", yaml(INTERNAL_NETWORK));
    out.push_str("    internal: true\n");
    // One name for every Compose front end (not `<compose project>_aibox-internal`), so
    // the network made without a DNS server before Compose runs is the one it uses. The
    // project name has only `[a-z0-9_-]`, so the interpolation is the only `$`.
    let project = crate::project_name(inputs.config);
    let _ = writeln!(
        out,
        "    name: {}",
        yaml(&aibox_config::container::internal_network_name(&project))
    );
    if mode == EgressMode::Allowlist {
        let _ = writeln!(out, "  {}: {{}}", yaml(OUTSIDE_NETWORK));
        out.push_str("volumes:\n");
        let _ = writeln!(out, "  {}: {{}}", yaml(SOCKET_VOLUME));
    }
}

/// The variable name when `value` is exactly a host reference `${NAME}` (Compose fills
/// it from the host's environment when the container is created).
pub fn host_reference(value: &str) -> Option<&str> {
    value
        .strip_prefix("${")
        .and_then(|v| v.strip_suffix('}'))
        .filter(|name| aibox_config::validate::is_env_name(name))
}

/// The committed `environment:` map: the team's variables plus `TZ` from
/// `container.timezone`, which wins over a team `TZ`. It never depends on the personal
/// overlay, so every developer's apply writes the same committed file.
fn environment<'a>(inputs: &Inputs<'a>) -> BTreeMap<&'a str, &'a str> {
    let c = &inputs.config.container;
    let mut env: BTreeMap<&str, &str> = c
        .environment
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    if let Some(tz) = &c.timezone {
        env.insert("TZ", tz);
    }
    env
}

/// `.devcontainer/docker-compose.local.yml`: the personal overlay's environment file
/// and bind mounts. It is local state (gitignored) so that one developer's paths never
/// reach the committed Compose file and never make another developer's `apply` change
/// it. The runtime adds it with `-f` when it exists; the committed files work without it.
pub(crate) fn render_local(inputs: &Inputs<'_>) -> Result<String, DevcontainerError> {
    let service = crate::service_name(inputs.config);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# generated by aibox from .aibox-local.toml; personal, keep out of git"
    );
    out.push_str("services:\n");
    let personal = volumes(inputs)?.personal;
    let _ = writeln!(out, "  {}:", yaml(service));
    // The container is this checkout's: its name and path are personal, never committed
    // (a teammate's clone, or the Dev Containers CLI, gets Compose's own name).
    if let Some(checkout) = inputs.checkout {
        let name = crate::container_name(inputs.config, inputs.local, checkout);
        let _ = writeln!(out, "    container_name: {}", yaml(&name));
        out.push_str("    labels:\n");
        let _ = writeln!(
            out,
            "      {}: {}",
            yaml(CHECKOUT_LABEL),
            compose_yaml(checkout)
        );
    }
    // Beside this file, below `.devcontainer/`, which the committed Compose file mounts
    // read-only: no agent, in this container or one the Dev Containers tools started,
    // can add a line (a bare `NAME` takes the host's value) for the next container.
    out.push_str("    env_file:\n");
    let _ = writeln!(out, "      - {}", yaml(local_env_name()));
    // Compose lets `environment:` win over `env_file`, so a personal value for a key the
    // team file sets must be repeated here to override it (this file is mode 0600).
    let team = environment(inputs);
    let overrides: Vec<(&String, &String)> = inputs
        .local
        .container
        .environment
        .iter()
        .filter(|(k, _)| team.contains_key(k.as_str()))
        .collect();
    if !overrides.is_empty() {
        out.push_str("    environment:\n");
        for (key, value) in overrides {
            let _ = writeln!(out, "      {}: {}", yaml(key), compose_yaml(value));
        }
    }
    if !personal.is_empty() {
        out.push_str("    volumes:\n");
        for volume in personal {
            let _ = writeln!(out, "      - {}", yaml(&volume));
        }
    }
    Ok(out)
}

/// The personal environment file's name, relative to the Compose files' folder.
fn local_env_name() -> &'static str {
    LOCAL_ENV_PATH
        .strip_prefix(aibox_config::layout::DEVCONTAINER_DIR)
        .unwrap_or(LOCAL_ENV_PATH)
}

/// Bind mounts in short syntax (`source:target[:ro]`), sources relative to
/// `.devcontainer/`.
struct Mounts {
    /// The workspace, the harness state directories, then the team's extra volumes.
    team: Vec<String>,
    /// The personal extra volumes.
    personal: Vec<String>,
}

/// Computes both mount lists; targets must be unique across them.
fn volumes(inputs: &Inputs<'_>) -> Result<Mounts, DevcontainerError> {
    let home = inputs.config.container.home();
    let mut mounts = vec![(String::from(".."), WORKSPACE_DIR.to_owned(), false)];
    let dirs = inputs.harness_home_dirs();
    for dir in &dirs {
        mounts.push((
            format!("../{AIBOX_HOME}{dir}"),
            format!("{home}/{dir}"),
            false,
        ));
    }
    // Their folder read-only over its place in the workspace: the agent writes the state
    // through the mounts above, but cannot put a link to a host folder where one of them
    // was, which the engine would follow at the next start.
    if !dirs.is_empty() {
        let folder = AIBOX_HOME.trim_end_matches('/');
        mounts.push((
            format!("../{folder}"),
            format!("{WORKSPACE_DIR}/{folder}"),
            true,
        ));
    }
    let lists = [
        ("aibox.toml", &inputs.config.container.extra_volumes),
        (".aibox-local.toml", &inputs.local.container.extra_volumes),
    ];
    for (file, list) in lists {
        for (i, v) in list.iter().enumerate() {
            let err = |reason: String| DevcontainerError::Volume {
                file,
                index: i + 1,
                reason,
            };
            let (source, target) = extra_volume(v).map_err(err)?;
            mounts.push((source, target, v.read_only));
        }
    }
    let team_count = mounts.len() - inputs.local.container.extra_volumes.len();
    let mut targets = std::collections::BTreeSet::new();
    for (_, target, _) in &mounts {
        let normal = target.trim_end_matches('/');
        if !targets.insert(normal.to_owned()) {
            return Err(DevcontainerError::DuplicateMount {
                target: normal.to_owned(),
            });
        }
    }
    let mut all: Vec<String> = mounts
        .into_iter()
        .map(|(s, t, ro)| format!("{s}:{}{}", compose_literal(&t), if ro { ":ro" } else { "" }))
        .collect();
    let personal = all.split_off(team_count);
    Ok(Mounts {
        team: all,
        personal,
    })
}

/// Maps one extra volume to its Compose source (already `$`-escaped, relative to
/// `.devcontainer/`) and its target.
fn extra_volume(v: &ExtraVolume) -> Result<(String, String), String> {
    let bad = |s: &str| s.contains(':') || s.chars().any(char::is_control);
    if v.source.is_empty() || bad(&v.source) {
        return Err(format!(
            "source {:?} is empty or contains `:` or control characters",
            v.source
        ));
    }
    if !v.target.starts_with('/')
        || v.target.trim_end_matches('/').is_empty()
        || bad(&v.target)
        || v.target.split('/').any(|part| part == "..")
    {
        return Err(format!(
            "target {:?} must be an absolute path other than `/`, without `..`, `:` or control \
             characters",
            v.target
        ));
    }
    let source = if v.source == "~" {
        "${HOME}".to_owned()
    } else if let Some(rest) = v.source.strip_prefix("~/") {
        format!("${{HOME}}/{}", compose_literal(rest))
    } else if v.source.starts_with('~') {
        return Err(format!(
            "source {:?}: only `~` and `~/...` are expanded",
            v.source
        ));
    } else if v.source.starts_with('/') {
        compose_literal(&v.source)
    } else {
        let rel = v.source.trim_start_matches("./");
        if rel.is_empty() || rel == "." {
            "..".to_owned()
        } else {
            format!("../{}", compose_literal(rel))
        }
    };
    Ok((source, v.target.clone()))
}
