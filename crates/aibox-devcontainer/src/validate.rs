//! Checks that every configuration value can be written into the generated files
//! without changing their meaning. The configuration loader validates the model; these
//! checks protect the file formats (a newline in a `FROM` line, a `:` in a short-syntax
//! volume, a user name `useradd` refuses).

// The loader's own name rules, so both layers accept exactly the same names.
use aibox_config::validate::{is_container_name, is_env_name, is_user_name};

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
        reason,
        help,
    }
}

/// Validates the values that go into the Dockerfile, the Compose file and the labels.
pub(crate) fn inputs(inputs: &Inputs<'_>) -> Result<(), DevcontainerError> {
    let c = &inputs.config.container;
    if !is_container_name(&c.name) {
        return Err(invalid(
            "container.name",
            &c.name,
            "it must start with a letter or digit and use only letters, digits, `.`, `_`, `-`",
            "Pick a name such as `my-project`.",
        ));
    }
    let host = c.hostname();
    if !is_container_name(host) || host.len() > 63 {
        return Err(invalid(
            "container.hostname",
            host,
            "a host name starts with a letter or digit, uses letters, digits, `.`, `_`, `-` \
             and has at most 63 characters",
            "Set `container.hostname` to a short name such as `dev`.",
        ));
    }
    if !is_user_name(&c.user) {
        return Err(invalid(
            "container.user",
            &c.user,
            "`useradd` accepts lowercase letters, digits, `_` and `-`, starting with a letter \
             or `_`, at most 32 characters",
            "Pick a user name such as `aibox` or `dev`.",
        ));
    }
    if (c.user == "root") != (c.uid == 0) {
        return Err(invalid(
            "container.uid",
            &c.uid.to_string(),
            "UID 0 is root: `user = \"root\"` needs `uid = 0` and any other user needs a \
             non-zero UID",
            "Use an unprivileged user with your host UID (often 1000).",
        ));
    }
    if c.base_image.is_empty()
        || c.base_image
            .chars()
            .any(|ch| ch.is_whitespace() || ch.is_control())
    {
        return Err(invalid(
            "container.base_image",
            &c.base_image,
            "an image reference cannot be empty or contain spaces or control characters",
            "Use a reference such as `docker.io/library/debian:bookworm-slim`.",
        ));
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
    if let Some(tz) = &c.timezone
        && (tz.is_empty() || tz.chars().any(|ch| ch.is_whitespace() || ch.is_control()))
    {
        return Err(invalid(
            "container.timezone",
            tz,
            "a time zone is a name such as `Europe/Berlin` without spaces",
            "Use an IANA time zone name, or remove the key.",
        ));
    }
    values(inputs)
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
