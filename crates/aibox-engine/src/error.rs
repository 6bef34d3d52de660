//! Errors of the plan/apply engine.
//!
//! Every variant carries a stable `aibox::apply::*` code; errors of the layers below
//! (configuration, generators, lock) pass through unchanged so their own codes and
//! source spans reach the user.

use camino::Utf8PathBuf;
use miette::Diagnostic;

/// Errors of `plan` and `apply`.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum EngineError {
    /// Loading or validating the configuration failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(Box<aibox_config::ConfigError>),

    /// The dev container generator refused the configuration.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Devcontainer(Box<aibox_devcontainer::DevcontainerError>),

    /// `aibox.lock` could not be read or rendered.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Lock(Box<aibox_provenance::lock::LockError>),

    /// A plan source (devcontainer, MCP, processkit, ...) failed; its diagnostic is shown as is.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Source(Box<dyn Diagnostic + Send + Sync + 'static>),

    /// A path is not a clean relative path.
    #[error("refusing path `{path}`: {reason}")]
    #[diagnostic(
        code(aibox::apply::invalid_path),
        help(
            "aibox only writes clean relative paths below the project root (no `..`, no absolute paths)"
        )
    )]
    InvalidPath {
        /// The offending path as given.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },

    /// A path is outside the closed set aibox may write.
    #[error("refusing to write `{path}`: it is outside aibox's write perimeter")]
    #[diagnostic(
        code(aibox::apply::outside_perimeter),
        help(
            "aibox writes only the paths listed in `aibox_engine::writer::PERIMETER`; this is a bug in the plan source that produced it"
        )
    )]
    OutsidePerimeter {
        /// The offending path.
        path: Utf8PathBuf,
    },

    /// A path, or one of its parents, is a symbolic link.
    #[error("refusing to write through symbolic link `{link}` (while writing `{path}`)")]
    #[diagnostic(
        code(aibox::apply::symlink),
        help(
            "replace the symlink `{link}` with a real directory or file; aibox never writes through symlinks so it cannot be steered outside the project"
        )
    )]
    Symlink {
        /// The file aibox wanted to write.
        path: Utf8PathBuf,
        /// The symlinked component.
        link: Utf8PathBuf,
    },

    /// Something that must be a directory (or a file) is not.
    #[error("`{path}` is in the way: expected a {expected}")]
    #[diagnostic(
        code(aibox::apply::wrong_kind),
        help("move `{path}` aside and run `aibox apply` again")
    )]
    WrongKind {
        /// The offending path.
        path: Utf8PathBuf,
        /// "directory" or "regular file".
        expected: &'static str,
    },

    /// A generated file exists but aibox did not write it.
    #[error("`{path}` was not written by aibox (no aibox header, digest not in aibox.lock)")]
    #[diagnostic(
        code(aibox::apply::foreign_file),
        help(
            "move your changes into aibox.toml (or the user-owned Dockerfile.local / \
             docker-compose.override.yml), or run `aibox apply --force` to back the file up \
             under .aibox/backups/ and replace it"
        )
    )]
    ForeignFile {
        /// The file.
        path: Utf8PathBuf,
    },

    /// A generated file was edited by hand since the last apply.
    #[error(
        "`{path}` was edited by hand since the last apply (its digest differs from the one \
         recorded in aibox.lock); applying would undo this:\n{diff}"
    )]
    #[diagnostic(
        code(aibox::apply::edited_file),
        help(
            "move your change into aibox.toml (or the user-owned Dockerfile.local / \
             docker-compose.override.yml), or run `aibox apply --force` to back the edited \
             file up under .aibox/backups/ and replace it"
        )
    )]
    EditedFile {
        /// The file.
        path: Utf8PathBuf,
        /// Unified diff from the edited file to what aibox would write.
        diff: String,
    },

    /// Two plan sources want to write the same path.
    #[error("two plan sources want to write `{path}`")]
    #[diagnostic(
        code(aibox::apply::duplicate_path),
        help("this is a bug in aibox; please report it with your aibox.toml")
    )]
    DuplicatePath {
        /// The path.
        path: Utf8PathBuf,
    },

    /// Another apply holds the project lock.
    #[error("another `aibox apply` is running in this project (waited {waited_secs} s for {lock})")]
    #[diagnostic(
        code(aibox::apply::busy),
        help(
            "wait for the other apply to finish and try again; the lock is released automatically when its process exits"
        )
    )]
    Busy {
        /// The lock file.
        lock: Utf8PathBuf,
        /// How long we waited.
        waited_secs: u64,
    },

    /// A file operation failed.
    #[error("cannot {op} `{path}`")]
    #[diagnostic(
        code(aibox::apply::io),
        help("check the permissions of the project directory and the free disk space")
    )]
    Io {
        /// What was attempted ("read", "write", "rename", ...).
        op: &'static str,
        /// The path.
        path: Utf8PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },

    /// The project root does not exist or is not valid UTF-8.
    #[error("project root `{path}` is not usable: {reason}")]
    #[diagnostic(code(aibox::apply::root), help("pass an existing project directory"))]
    Root {
        /// The root as given.
        path: String,
        /// Why.
        reason: String,
    },
}

// Boxed so every `Result<_, EngineError>` stays small (the diagnostics below carry
// whole source files).
impl From<aibox_config::ConfigError> for EngineError {
    fn from(e: aibox_config::ConfigError) -> Self {
        Self::Config(Box::new(e))
    }
}

impl From<aibox_provenance::lock::LockError> for EngineError {
    fn from(e: aibox_provenance::lock::LockError) -> Self {
        Self::Lock(Box::new(e))
    }
}

impl From<aibox_devcontainer::DevcontainerError> for EngineError {
    fn from(e: aibox_devcontainer::DevcontainerError) -> Self {
        Self::Devcontainer(Box::new(e))
    }
}

impl EngineError {
    /// Wraps the diagnostic of a plan source.
    pub fn source(err: impl Diagnostic + Send + Sync + 'static) -> Self {
        Self::Source(Box::new(err))
    }

    pub(crate) fn io(
        op: &'static str,
        path: impl Into<Utf8PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
