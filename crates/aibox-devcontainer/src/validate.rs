//! Checks that every configuration value can be written into the generated files
//! without changing their meaning. The configuration loader validates the model; these
//! checks protect the file formats (a newline in a `FROM` line, a `:` in a short-syntax
//! volume, a user name `useradd` refuses).

use aibox_config::validate::is_env_name;

use crate::{DevcontainerError, Inputs};

fn invalid(
    field: &'static str,
    value: &str,
    reason: &'static str,
    help: &'static str,
) -> DevcontainerError {
    DevcontainerError::InvalidValue {
        field,
        value: value.to_owned(),
        reason: reason.into(),
        help: help.into(),
    }
}

/// The full key of a `[container]` value named by the loader's check.
fn container_field(key: &str) -> &'static str {
    match key {
        "name" => "container.name",
        "hostname" => "container.hostname",
        "user" => "container.user",
        "uid" => "container.uid",
        "base_image" => "container.base_image",
        "timezone" => "container.timezone",
        _ => "container",
    }
}

/// Validates the values that go into the Dockerfile, the Compose file and the labels.
pub(crate) fn inputs(inputs: &Inputs<'_>) -> Result<(), DevcontainerError> {
    // The loader's rules for `[container]`, so `config validate` and `apply` agree.
    if let Some(issue) = aibox_config::validate::container_issues(&inputs.config.container)
        .into_iter()
        .next()
    {
        return Err(DevcontainerError::InvalidValue {
            field: container_field(issue.key),
            value: issue.value,
            reason: issue.message.into(),
            help: issue.help.into(),
        });
    }
    if inputs.aibox_version.is_empty()
        || !inputs
            .aibox_version
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '+' | '_' | '-'))
    {
        return Err(invalid(
            "aibox version",
            inputs.aibox_version,
            "a version label may only contain letters, digits, `.`, `+`, `_` and `-`",
            "This is a bug in the caller; pass aibox's own version.",
        ));
    }
    let envs = inputs
        .python_envs
        .iter()
        .map(|e| (&e.id, &e.servers))
        .chain(inputs.npm_envs.iter().map(|e| (&e.id, &e.servers)));
    for (id, servers) in envs {
        env_names(id, servers)?;
    }
    if let Some(src) = inputs.image_source
        && (src.is_empty() || src.chars().any(char::is_control))
    {
        return Err(invalid(
            "image source",
            src,
            "a label value cannot be empty or contain control characters",
            "Pass a URL such as `https://example.org/project`.",
        ));
    }
    values(inputs)
}

/// An MCP environment's id (lowercase hex) and its servers' names, which the Dockerfile
/// step writes into its script.
fn env_names(id: &str, servers: &[String]) -> Result<(), DevcontainerError> {
    if id.is_empty()
        || id.len() > 64
        || !id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return Err(invalid(
            "MCP environment id",
            id,
            "an environment id is lowercase hex digits",
            "This is a bug in the caller; pass the id aibox.lock records.",
        ));
    }
    if let Some(bad) = servers.iter().find(|n| {
        n.is_empty()
            || !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    }) {
        return Err(invalid(
            "MCP server name",
            bad,
            "a server name is letters, digits, `-`, `_` and `.`",
            "This is a bug in the caller; pass the names aibox.lock records.",
        ));
    }
    Ok(())
}

/// Environment names, security options and `Dockerfile.local`.
fn values(inputs: &Inputs<'_>) -> Result<(), DevcontainerError> {
    for key in inputs.config.container.environment.keys() {
        if !is_env_name(key) {
            return Err(DevcontainerError::EnvKey {
                file: "aibox.toml",
                key: key.clone(),
            });
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for opt in inputs.security_opt {
        if opt.is_empty() || opt.chars().any(char::is_control) {
            return Err(DevcontainerError::SecurityOpt {
                value: opt.clone(),
                reason: "empty or contains control characters",
            });
        }
        if !seen.insert(opt) {
            return Err(DevcontainerError::SecurityOpt {
                value: opt.clone(),
                reason: "listed twice (Compose requires unique entries)",
            });
        }
    }
    if let Some(text) = inputs.effective_dockerfile_local() {
        dockerfile_local(text)?;
    }
    Ok(())
}

/// `Dockerfile.local` must not end inside a continued line, which would glue the
/// generated `USER` line onto the user's last instruction.
fn dockerfile_local(text: &str) -> Result<(), DevcontainerError> {
    let last = text.lines().rev().find(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#')
    });
    if last.is_some_and(|l| l.trim_end().ends_with('\\')) {
        return Err(DevcontainerError::DockerfileLocal {
            reason: "the last instruction ends with a line continuation `\\`",
        });
    }
    if open_heredoc(text) {
        return Err(DevcontainerError::DockerfileLocal {
            reason: "a heredoc (`<<WORD` in `RUN`, `COPY` or `ADD`) is never closed: every \
                     generated line after it, the `USER` line included, would become its text \
                     (BuildKit); end it with a line holding only its word",
        });
    }
    if text
        .lines()
        .any(|l| l.trim_start().to_ascii_uppercase().starts_with("FROM "))
    {
        return Err(DevcontainerError::DockerfileLocal {
            reason: "`FROM` would start a new build stage and drop the generated image; \
                     change `container.base_image` in aibox.toml instead",
        });
    }
    Ok(())
}

/// Whether a `RUN`, `COPY` or `ADD` instruction opens a heredoc that no later line closes.
/// As `BuildKit` reads them: a word `<<NAME` or `<<-NAME` (optionally quoted, `<<<` is
/// not one) opens a heredoc, the lines after the instruction are its text until a line
/// that is exactly `NAME` (with `<<-`, after leading tabs); several open in order.
fn open_heredoc(text: &str) -> bool {
    let mut pending: std::collections::VecDeque<(String, bool)> = std::collections::VecDeque::new();
    let mut opens = false;
    let mut continued = false;
    for raw in text.lines() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if let Some((word, strip_tabs)) = pending.front() {
            let candidate = if *strip_tabs {
                line.trim_start_matches('\t')
            } else {
                line
            };
            if candidate == word {
                pending.pop_front();
            }
            continue;
        }
        let t = line.trim();
        if t.starts_with('#') || t.is_empty() {
            continue;
        }
        if !continued {
            let first = t.split_whitespace().next().unwrap_or("");
            opens = ["RUN", "COPY", "ADD"]
                .iter()
                .any(|i| first.eq_ignore_ascii_case(i));
        }
        if opens {
            pending.extend(t.split_whitespace().filter_map(heredoc_word));
        }
        continued = t.ends_with('\\');
    }
    !pending.is_empty()
}

/// The name a heredoc word opens (`<<EOT`, `2<<-"EOT"`) and whether `<<-` strips tabs.
fn heredoc_word(word: &str) -> Option<(String, bool)> {
    let rest = word.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix("<<")?;
    let (rest, strip_tabs) = rest.strip_prefix('-').map_or((rest, false), |r| (r, true));
    if rest.is_empty() || rest.contains('<') {
        return None;
    }
    let name = ['"', '\'']
        .iter()
        .find_map(|q| rest.strip_prefix(*q).and_then(|r| r.strip_suffix(*q)))
        .unwrap_or(rest);
    (!name.is_empty()).then(|| (name.to_owned(), strip_tabs))
}
