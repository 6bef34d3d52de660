//! Errors of the plan/apply engine.
//!
//! Every variant carries a stable `aibox::apply::*` code; errors of the layers below
//! (configuration, generators, lock, policy, MCP, provenance, skill review) pass through
//! as typed, boxed variants, so their own codes, source spans and [`ErrorKind`] reach the
//! caller unchanged.

use aibox_config::ErrorKind;
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

    /// The security policy refused the configuration (for example a missing seccomp
    /// consent, whose key the error carries).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Policy(Box<aibox_policy::PolicyError>),

    /// MCP registration refused a server or a harness file.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Mcp(Box<aibox_mcp_registration::McpError>),

    /// Downloading, verifying or installing the processkit release failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Provenance(Box<aibox_provenance::error::ProvenanceError>),

    /// A skill could not be reviewed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Review(Box<aibox_skill_review::ReviewError>),

    /// The skill review gate refused skills.
    #[error(transparent)]
    #[diagnostic(transparent)]
    SkillGate(Box<aibox_skill_review::GateError>),

    /// `aibox migrate` refused or could not find a migration, a conflict or a version.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Migrate(Box<crate::migrate::MigrateError>),

    /// A named skill could not be found.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Skill(Box<crate::skills::SkillError>),

    /// The configuration failed a check beyond its schema (a literal secret, a bad
    /// `[processkit]` pin).
    #[error(transparent)]
    #[diagnostic(transparent)]
    ConfigCheck(Box<crate::config_check::ConfigCheckError>),

    /// The writer refused a path or could not use the project root (`aibox_config::write`;
    /// its `aibox::apply::*` codes are the ones users see).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Write(Box<aibox_config::write::WriteError>),

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

    /// `.aibox-local.toml` `container.extra_ca_certificates` cannot be used.
    #[error("cannot use the extra CA certificates `{path}`: {reason}")]
    #[diagnostic(
        code(aibox::apply::extra_ca),
        help(
            "`container.extra_ca_certificates` in .aibox-local.toml must name a readable PEM \
             file (absolute, or relative to the project folder), for example \
             /etc/ssl/certs/ca-certificates.crt; remove the key if you need no extra CA"
        )
    )]
    ExtraCa {
        /// The path as resolved.
        path: Utf8PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// A plan source asked for a project file that resolve did not capture: the capture
    /// set in `snapshot.rs` misses a file the plan reads (a bug in aibox, never a disk
    /// read behind the resolve's back).
    #[error("the plan asked for `{path}`, which the resolve step did not read")]
    #[diagnostic(
        code(aibox::apply::not_captured),
        help("this is a bug in aibox; please report it with the command you ran")
    )]
    NotCaptured {
        /// The root-relative path asked for.
        path: Utf8PathBuf,
    },

    /// Something that is not a folder is where processkit's skills must be a folder
    /// (`context/skills`, a category or a skill folder).
    #[error(
        "`{path}` is a {found}, but processkit's skills need a folder there; the release's \
         skills cannot be installed or run, so their MCP servers would point at missing scripts"
    )]
    #[diagnostic(
        code(aibox::apply::not_a_folder),
        help(
            "move `{path}` out of the way (aibox never replaces it), then run `aibox apply` to \
             install the skills again"
        )
    )]
    NotAFolder {
        /// Root-relative path.
        path: Utf8PathBuf,
        /// What is there instead: `file`, `symlink` or `special file`.
        found: &'static str,
    },

    /// A plan was asked of a project resolved offline whose processkit release is not in
    /// the download cache (see `PlanOptions::offline`).
    #[error("the processkit release is not resolved: {reason}")]
    #[diagnostic(
        code(aibox::processkit::not_resolved),
        help("run `aibox apply`, which downloads and verifies it")
    )]
    NotResolved {
        /// Why, in one sentence.
        reason: String,
    },
}

// Boxed so every `Result<_, EngineError>` stays small (the diagnostics below carry
// whole source files).
macro_rules! boxed_from {
    ($($variant:ident($ty:ty)),* $(,)?) => {$(
        impl From<$ty> for EngineError {
            fn from(e: $ty) -> Self {
                Self::$variant(Box::new(e))
            }
        }
    )*};
}

boxed_from!(
    Config(aibox_config::ConfigError),
    Devcontainer(aibox_devcontainer::DevcontainerError),
    Lock(aibox_provenance::lock::LockError),
    Policy(aibox_policy::PolicyError),
    Mcp(aibox_mcp_registration::McpError),
    Provenance(aibox_provenance::error::ProvenanceError),
    Review(aibox_skill_review::ReviewError),
    SkillGate(aibox_skill_review::GateError),
    Skill(crate::skills::SkillError),
    ConfigCheck(crate::config_check::ConfigCheckError),
);

impl EngineError {
    /// Who can fix it; the CLI maps this to its exit code. A file system failure (a
    /// refused write, a file where a folder must be) is the environment; a symlink, a
    /// foreign or edited file is the user's; a plan source's error keeps its own kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Config(e) => e.kind(),
            Self::Devcontainer(e) => e.kind(),
            Self::Lock(e) => e.kind(),
            Self::Policy(e) => e.kind(),
            Self::Mcp(e) => e.kind(),
            Self::Provenance(e) => e.kind(),
            Self::Review(e) => e.kind(),
            Self::SkillGate(e) => e.kind(),
            Self::Write(e) => e.kind(),
            Self::Migrate(e) => e.kind(),
            Self::Skill(_)
            | Self::ForeignFile { .. }
            | Self::EditedFile { .. }
            | Self::ExtraCa { .. } => ErrorKind::User,
            Self::ConfigCheck(e) => e.kind(),
            // Something in the way on disk is a disk problem like a refused write.
            // Not resolved offline: only a download (`aibox apply`) fixes it.
            Self::Busy { .. }
            | Self::Io { .. }
            | Self::NotResolved { .. }
            | Self::NotAFolder { .. } => ErrorKind::Environment,
            Self::DuplicatePath { .. } | Self::NotCaptured { .. } => ErrorKind::Internal,
        }
    }

    /// The `[security]` consent key a seccomp refusal asks for (for example
    /// `acknowledge_seccomp_unconfined`), carried by the policy error itself.
    pub fn consent_key(&self) -> Option<&'static str> {
        match self {
            Self::Policy(e) => e.consent_key(),
            _ => None,
        }
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
