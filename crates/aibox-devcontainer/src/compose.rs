//! `.devcontainer/docker-compose.yml`, written by hand for stable, readable output.
//!
//! Every scalar is double-quoted (see [`crate::quote::yaml`]) and every `$` doubled so
//! Compose passes values through without interpolation. There is no top-level `name:`
//! (Debian's docker-compose 1.29 rejects it; the runtime passes `-p`) and no `version:`
//! (obsolete).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use aibox_config::ExtraVolume;

use crate::quote::{compose_literal, compose_yaml, yaml};
use crate::{
    AIBOX_HOME_DIR, DevcontainerError, GENERATED_HEADER, Inputs, LOCAL_ENV_PATH, WORKSPACE_DIR,
};

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
    let _ = writeln!(out, "    container_name: {}", yaml(service));
    let _ = writeln!(out, "    hostname: {}", yaml(c.hostname()));
    out.push_str("    init: true\n");
    let _ = writeln!(out, "    working_dir: {}", yaml(WORKSPACE_DIR));
    out.push_str("    command: [\"sleep\", \"infinity\"]\n");

    out.push_str("    volumes:\n");
    for volume in volumes(inputs)? {
        let _ = writeln!(out, "      - {}", yaml(&volume));
    }

    out.push_str("    env_file:\n");
    let _ = writeln!(out, "      - {}", yaml(&format!("../{LOCAL_ENV_PATH}")));

    let env = environment(inputs);
    if !env.is_empty() {
        out.push_str("    environment:\n");
        for (key, value) in &env {
            let _ = writeln!(out, "      {}: {}", yaml(key), compose_yaml(value));
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
        "      \"aibox.project\": {}",
        compose_yaml(&crate::project_name(config))
    );
    Ok(out)
}

/// The `environment:` map: the team's variables minus those the personal overlay sets
/// (those reach the container only through `.aibox-local.env`), plus `TZ` from
/// `container.timezone`, which wins over a team `TZ`.
fn environment<'a>(inputs: &Inputs<'a>) -> BTreeMap<&'a str, &'a str> {
    let c = &inputs.config.container;
    let personal = &inputs.local.container.environment;
    let mut env: BTreeMap<&str, &str> = c
        .environment
        .iter()
        .filter(|(k, _)| !personal.contains_key(*k))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    if let Some(tz) = &c.timezone
        && !personal.contains_key("TZ")
    {
        env.insert("TZ", tz);
    }
    env
}

/// Every bind mount in short syntax (`source:target[:ro]`), sources relative to
/// `.devcontainer/`: the workspace, the harness state directories, then the team's and
/// the personal extra volumes.
fn volumes(inputs: &Inputs<'_>) -> Result<Vec<String>, DevcontainerError> {
    let home = inputs.config.container.home();
    let mut mounts = vec![(String::from(".."), WORKSPACE_DIR.to_owned(), false)];
    for dir in inputs.harness_home_dirs() {
        mounts.push((
            format!("../{AIBOX_HOME_DIR}/{dir}"),
            format!("{home}/{dir}"),
            false,
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
    let mut targets = std::collections::BTreeSet::new();
    for (_, target, _) in &mounts {
        let normal = target.trim_end_matches('/');
        if !targets.insert(normal.to_owned()) {
            return Err(DevcontainerError::DuplicateMount {
                target: normal.to_owned(),
            });
        }
    }
    Ok(mounts
        .into_iter()
        .map(|(s, t, ro)| format!("{s}:{}{}", compose_literal(&t), if ro { ":ro" } else { "" }))
        .collect())
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
