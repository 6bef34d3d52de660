//! Errors of the generators: input that cannot be written into a correct file.
//!
//! Messages never repeat a personal environment value, because those are often secrets.

use miette::Diagnostic;
use thiserror::Error;

/// Why the dev container files could not be generated.
#[derive(Debug, Error, Diagnostic, PartialEq, Eq)]
pub enum DevcontainerError {
    /// A personal environment value cannot be written to `.devcontainer/aibox-local.env`
    /// so that every Compose provider reads it back unchanged.
    #[error("`.aibox-local.toml` [container.environment]: the value of `{key}` {reason}")]
    #[diagnostic(
        code(aibox::devcontainer::local_env_value),
        help(
            "`.devcontainer/aibox-local.env` is read by docker-compose, Compose v2 and \
             Podman's --env-file, which disagree on quotes, `$` and trailing comments; only \
             values they all read literally are accepted. Change the value in \
             `.aibox-local.toml`, then run `aibox apply`."
        )
    )]
    LocalEnvValue {
        /// The variable name (never the value).
        key: String,
        /// What is wrong with the value.
        reason: &'static str,
    },

    /// An environment variable name is not a portable identifier.
    #[error("{file} [container.environment]: `{key}` is not a valid environment variable name")]
    #[diagnostic(
        code(aibox::devcontainer::env_key),
        help(
            "Use letters, digits and `_` only, not starting with a digit (for example `MY_VAR`)."
        )
    )]
    EnvKey {
        /// `aibox.toml` or `.aibox-local.toml`.
        file: &'static str,
        /// The offending name.
        key: String,
    },

    /// A configuration value would break the generated file it goes into.
    #[error("{field} = {value:?} cannot be used: {reason}")]
    #[diagnostic(code(aibox::devcontainer::invalid_value), help("{help}"))]
    InvalidValue {
        /// The configuration key, for example `container.base_image`.
        field: &'static str,
        /// The offending value (never a personal environment value).
        value: String,
        /// What is wrong.
        reason: std::borrow::Cow<'static, str>,
        /// How to fix it.
        help: std::borrow::Cow<'static, str>,
    },

    /// A bind mount cannot be written in Compose short syntax.
    #[error("{file} [[container.extra_volumes]] #{index}: {reason}")]
    #[diagnostic(
        code(aibox::devcontainer::volume),
        help(
            "`source` is a host path (absolute, `~/...`, or relative to the project root); \
             `target` is an absolute path in the container without `..`; neither may contain \
             `:` or control characters."
        )
    )]
    Volume {
        /// `aibox.toml` or `.aibox-local.toml`.
        file: &'static str,
        /// 1-based position in that file's list.
        index: usize,
        /// What is wrong.
        reason: String,
    },

    /// Two mounts share one container path.
    #[error("two bind mounts target `{target}` in the container")]
    #[diagnostic(
        code(aibox::devcontainer::duplicate_mount),
        help(
            "`/workspace` and the harness state directories under the user's home are mounted \
             by aibox; give each extra volume its own target."
        )
    )]
    DuplicateMount {
        /// The shared container path.
        target: String,
    },

    /// `Dockerfile.local` would swallow the generated lines that follow it.
    #[error("{}: {reason}", aibox_config::layout::DOCKERFILE_LOCAL)]
    #[diagnostic(
        code(aibox::devcontainer::dockerfile_local),
        help("Fix `.devcontainer/Dockerfile.local`, then run `aibox apply` again.")
    )]
    DockerfileLocal {
        /// What is wrong.
        reason: &'static str,
    },

    /// The security options handed in by the policy layer are malformed.
    #[error("security option {value:?}: {reason}")]
    #[diagnostic(
        code(aibox::devcontainer::security_opt),
        help("This is a bug in the policy layer; please report it.")
    )]
    SecurityOpt {
        /// The offending option.
        value: String,
        /// What is wrong.
        reason: &'static str,
    },

    /// `[addons] tools` names a tool the catalog does not have.
    #[error("aibox.toml [addons] tools: `{name}` is not in aibox's tool catalog")]
    #[diagnostic(
        code(aibox::devcontainer::unknown_addon),
        help("Known tools: {known}. Run `aibox addon list` to see them with their versions.")
    )]
    UnknownAddon {
        /// The unknown name.
        name: String,
        /// The catalog's tool names.
        known: String,
    },

    /// The tool catalog breaks its own rules (a bug in aibox, or a tampered test catalog).
    #[error("{message}")]
    #[diagnostic(
        code(aibox::devcontainer::catalog),
        help("The catalog is reviewed data shipped with aibox; report this as a bug.")
    )]
    Catalog {
        /// What is wrong.
        message: String,
    },
}

impl DevcontainerError {
    /// Who can fix it: the configuration, except a broken built-in catalog (a bug).
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Catalog { .. } => aibox_config::ErrorKind::Internal,
            _ => aibox_config::ErrorKind::User,
        }
    }
}
