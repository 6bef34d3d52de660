//! A failed command: a diagnostic plus the [`ErrorKind`] that picks the exit code.
//!
//! Every library error converts into [`Failure`] with its own `kind()`, so commands use
//! `?` and never decide an exit code themselves. Errors the CLI raises itself are
//! [`CliError`], typed like every other crate's.

use aibox_config::ErrorKind;
use miette::Diagnostic;

/// A failed command.
pub struct Failure {
    /// What to show.
    pub report: miette::Report,
    /// Who can fix it (decides the exit code).
    pub kind: ErrorKind,
}

macro_rules! failure_from {
    ($($ty:ty),* $(,)?) => {$(
        impl From<$ty> for Failure {
            fn from(e: $ty) -> Self {
                let kind = e.kind();
                Self { report: miette::Report::new(e), kind }
            }
        }
    )*};
}

failure_from!(
    CliError,
    aibox_config::ConfigError,
    aibox_config::UnknownHarness,
    aibox_config::get::GetError,
    aibox_engine::EngineError,
    aibox_engine::init::InitError,
    aibox_engine::addons::AddonError,
    aibox_engine::base_image_pin::PinError,
    aibox_engine::config_edit::ConfigEditError,
    aibox_engine::lifecycle::LifecycleError,
    aibox_engine::McpCheckError,
    aibox_engine::doctor::DoctorError,
    aibox_engine::updates::UpdateError,
    aibox_provenance::error::ProvenanceError,
);

/// Errors of the command-line layer itself.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum CliError {
    /// The working directory cannot be read.
    #[error("cannot read the current directory")]
    #[diagnostic(code(aibox::cli::cwd), help("pass `--project DIR`"))]
    Cwd(#[source] std::io::Error),

    /// The working directory is not valid UTF-8.
    #[error("the current directory is not valid UTF-8: {0}")]
    #[diagnostic(
        code(aibox::cli::non_utf8_path),
        help("aibox needs UTF-8 paths; move the project or pass `--project DIR`")
    )]
    NonUtf8Cwd(String),

    /// The answer to a question cannot be read.
    #[error("cannot read the answer")]
    #[diagnostic(code(aibox::cli::stdin))]
    Stdin(#[source] std::io::Error),

    /// `--project DIR` names a folder that does not exist.
    #[error("the project folder {path} does not exist")]
    #[diagnostic(
        code(aibox::cli::project_missing),
        help(
            "check the path given to `--project` (or `AIBOX_PROJECT`); `aibox init` makes a project in an existing folder"
        )
    )]
    ProjectMissing {
        /// The folder given.
        path: camino::Utf8PathBuf,
    },

    /// `--project PATH` names a file (typically `aibox.toml` itself), not a folder.
    #[error("`--project` must be the project folder, not a file: {path} is a file")]
    #[diagnostic(
        code(aibox::cli::project_not_folder),
        help("did you mean `--project {folder}`? (the folder that holds aibox.toml)")
    )]
    ProjectNotFolder {
        /// The path given.
        path: camino::Utf8PathBuf,
        /// Its folder.
        folder: String,
    },

    /// End of input (Ctrl-D) at a question: the command is cancelled.
    #[error("cancelled: no answer (end of input); nothing was written")]
    #[diagnostic(
        code(aibox::cli::cancelled),
        help("run the command again and answer, or give the answers as flags with `--yes`")
    )]
    Cancelled,

    /// `init` without a name in a folder whose name is not a valid project name.
    #[error("the folder name `{folder}` is not a valid project name")]
    #[diagnostic(
        code(aibox::init::folder_name),
        help(
            "name the project yourself: `aibox init {suggestion}` (letters, digits, `.`, `_` \
             and `-`, starting with a letter or digit)"
        )
    )]
    FolderName {
        /// The folder name.
        folder: String,
        /// A valid name close to it.
        suggestion: String,
    },

    /// The person at the terminal declined the seccomp consent.
    #[error("consent not given")]
    #[diagnostic(
        code(aibox::policy::seccomp_consent),
        help("nothing was written; see the explanation above for the narrower options")
    )]
    ConsentRefused,

    /// The person at the terminal did not approve more reach for the container.
    #[error("more reach for the container not approved")]
    #[diagnostic(
        code(aibox::apply::reach_not_approved),
        help(
            "nothing was written. If you made the changes listed, run the command again with \
             `--approve-reach` (or answer yes at the terminal); if you did not, the agent in the \
             container may have: undo them"
        )
    )]
    ReachRefused,

    /// `aibox help NAME` for a command that does not exist.
    #[error("aibox has no command `{name}`")]
    #[diagnostic(
        code(aibox::cli::unknown_command),
        help("`aibox --help` lists the commands")
    )]
    UnknownCommand {
        /// The command path asked for.
        name: String,
    },

    /// `--env`/`--header` without `=`.
    #[error("`{flag} {item}` is not KEY=VALUE")]
    #[diagnostic(
        code(aibox::cli::bad_pair),
        help(
            "write `{flag} KEY=VALUE`; for a secret in aibox.toml, a reference: `{flag} KEY='${{KEY}}'`"
        )
    )]
    BadPair {
        /// The flag.
        flag: String,
        /// What was given.
        item: String,
    },

    /// `aibox init --context-mode harness-only` with a processkit flag: the two say
    /// opposite things, and harness-only mode pins no processkit release.
    #[error("`--context-mode harness-only` installs no processkit, but {flags} was given too")]
    #[diagnostic(
        code(aibox::cli::init_flags_conflict),
        help(
            "drop {flags} for a harness-only project, or use `--context-mode processkit` to \
             install that release"
        )
    )]
    InitFlagsConflict {
        /// The processkit flags given, in backticks.
        flags: String,
    },

    /// `aibox mcp add` with neither a command nor a URL.
    #[error("MCP server `{name}` needs a command (after `--`) or `--url`")]
    #[diagnostic(
        code(aibox::cli::mcp_add),
        help("for example `aibox mcp add {name} -- npx -y @acme/server@1.2.3`")
    )]
    McpAddWhat {
        /// The server's name.
        name: String,
    },

    /// `mcp remove NAME` of a server that is in the other configuration file.
    #[error("{file} has no MCP server `{name}`: it is in {other}; nothing was changed")]
    #[diagnostic(
        code(aibox::cli::mcp_remove),
        help("`{command}` removes it from {other}")
    )]
    McpRemoveOtherFile {
        /// The server's name.
        name: String,
        /// The file asked for.
        file: &'static str,
        /// The file that has it.
        other: &'static str,
        /// The command that removes it.
        command: String,
    },

    /// A value could not be rendered as JSON (a bug).
    #[error("cannot render JSON: {0}")]
    #[diagnostic(code(aibox::cli::json))]
    Json(String),
}

impl CliError {
    /// Who can fix it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Cwd(_) | Self::Stdin(_) => ErrorKind::Environment,
            Self::Json(_) => ErrorKind::Internal,
            Self::NonUtf8Cwd(_)
            | Self::FolderName { .. }
            | Self::ConsentRefused
            | Self::ReachRefused
            | Self::Cancelled
            | Self::ProjectMissing { .. }
            | Self::ProjectNotFolder { .. }
            | Self::UnknownCommand { .. }
            | Self::BadPair { .. }
            | Self::McpAddWhat { .. }
            | Self::InitFlagsConflict { .. }
            | Self::McpRemoveOtherFile { .. } => ErrorKind::User,
        }
    }
}
