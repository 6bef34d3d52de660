//! Errors of the plan/apply engine.
//!
//! Every variant carries a stable `aibox::apply::*` code; errors of the layers below
//! (configuration, generators, lock, policy, MCP, provenance, skill review) pass through
//! as typed, boxed variants, so their own codes, source spans and [`ErrorKind`] reach the
//! caller unchanged.
//!
//! The errors of the features `EngineError` carries ([`ConfigCheckError`],
//! [`MigrateError`], [`SkillError`]) are defined here too (their modules re-export them),
//! so this module is at the bottom of the engine and every module can return its errors.

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
    Migrate(Box<MigrateError>),

    /// A named skill could not be found.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Skill(Box<SkillError>),

    /// The configuration failed a check beyond its schema (a literal secret, a bad
    /// `[processkit]` pin).
    #[error(transparent)]
    #[diagnostic(transparent)]
    ConfigCheck(Box<ConfigCheckError>),

    /// The writer refused a path or could not use the project root (`aibox_fs`;
    /// its `aibox::apply::*` codes are the ones users see).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Write(Box<aibox_fs::WriteError>),

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

    /// Another `aibox up`, `aibox down` or `aibox apply --build` holds the container lock
    /// for too long.
    #[error(
        "another `aibox up`, `aibox down` or `aibox apply --build` is running in this project \
         (waited {waited_secs} s for {lock})"
    )]
    #[diagnostic(
        code(aibox::lifecycle::busy),
        help(
            "wait for it to finish and try again; the lock is released automatically when its \
             process exits"
        )
    )]
    ContainerBusy {
        /// The lock file.
        lock: Utf8PathBuf,
        /// How long we waited.
        waited_secs: u64,
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

    /// The plan gives the container more than the owner last approved for this checkout
    /// ([`crate::reach`]): the agent in the container can write the files it comes from.
    #[error(
        "this apply would let the container reach more than you have approved for this \
         checkout:{list}"
    )]
    #[diagnostic(
        code(aibox::apply::reach_not_approved),
        help(
            "the agent in the container can write aibox.toml, .aibox-local.toml and skill \
             folders, so aibox asks before the container gets more from outside itself. If you \
             made these changes, run the command again with `--approve-reach` (at a terminal \
             aibox asks). If you did not, undo them in the files named above, in an editor: the \
             agent can write `.git/` too, so check `.git/config` (`core.fsmonitor`, \
             `core.pager`, aliases) and `.git/hooks/` before you run git in this project. The \
             approved reach is kept in {record}"
        )
    )]
    ReachNotApproved {
        /// One `\n  + what, from where` line per addition.
        list: String,
        /// The record of the approved reach.
        record: String,
    },

    /// A merge left git's conflict markers in files aibox generates or merges.
    #[error("unresolved merge conflicts in files aibox writes:{files}")]
    #[diagnostic(
        code(aibox::apply::merge_conflict),
        help(
            "resolve aibox.toml (and .aibox-local.toml) by hand; for these files take either \
             side, for example `git checkout --theirs -- FILE...`, then run `aibox apply`: it \
             writes them again from the merged aibox.toml (a hand-added entry of a harness \
             file on the side you dropped is yours to add back). Files under .devcontainer/, \
             which aibox writes whole, `aibox apply --force` backs up and writes again"
        )
    )]
    MergeConflicts {
        /// One `\n  FILE (line N)` line per file.
        files: String,
    },

    /// The record of the approved reach cannot be read or written.
    #[error(
        "the record of this checkout's approved container reach, {path}, cannot be used: {reason}"
    )]
    #[diagnostic(
        code(aibox::apply::reach_record),
        help(
            "check the file and its folder (they are yours, outside the project); a record that \
             is not JSON can be removed: the next apply records the reach it applies, so check \
             aibox.toml and .aibox-local.toml first"
        )
    )]
    ReachRecord {
        /// The record file.
        path: String,
        /// What went wrong.
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
            "move `{path}` out of the way (aibox never replaces it), then run `aibox apply`: it \
             installs what was never installed there, but a skill folder an earlier install \
             wrote stays deleted, like any folder deleted by hand; copy such a skill back from \
             {snapshot}"
        )
    )]
    NotAFolder {
        /// Root-relative path.
        path: Utf8PathBuf,
        /// What is there instead: `file`, `symlink` or `special file`.
        found: &'static str,
        /// Where its copy is: the installed release's snapshot of `path`, quoted, or why
        /// there is none.
        snapshot: String,
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
    Skill(SkillError),
    ConfigCheck(ConfigCheckError),
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
            | Self::ExtraCa { .. }
            | Self::ReachNotApproved { .. }
            | Self::MergeConflicts { .. } => ErrorKind::User,
            Self::ConfigCheck(e) => e.kind(),
            // Something in the way on disk is a disk problem like a refused write.
            // Not resolved offline: only a download (`aibox apply`) fixes it.
            Self::Busy { .. }
            | Self::ContainerBusy { .. }
            | Self::NotResolved { .. }
            | Self::NotAFolder { .. }
            | Self::ReachRecord { .. } => ErrorKind::Environment,
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

    /// The consent setting a seccomp refusal asks for, as `aibox.toml` names it
    /// (`security.acknowledge_seccomp_unconfined`): what the consent prompt records.
    pub fn missing_consent(&self) -> Option<String> {
        self.consent_key().map(|key| format!("security.{key}"))
    }

    /// An I/O failure of `op` on `path`: the writer's own [`aibox_fs::WriteError::Io`]
    /// (one error, one code, wherever the engine touches the disk).
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<Utf8PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Write(Box::new(aibox_fs::WriteError::io(op, path, source)))
    }
}

/// A configuration (or an edit of it) that the strict loader accepts but `apply` would
/// refuse or not honour.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum ConfigCheckError {
    /// A literal secret-looking value in the committed `aibox.toml`.
    #[error("aibox.toml:{line}: {message} [{code}]")]
    #[diagnostic(code(aibox::config::literal_secret), help("{remedy}"))]
    Secret {
        /// 1-based line (0 when unknown).
        line: usize,
        /// What was found.
        message: String,
        /// The scanner's rule code.
        code: String,
        /// How to fix it.
        remedy: String,
    },
    /// The processkit pin or source is refused.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Processkit(#[from] aibox_provenance::error::ProvenanceError),
    /// An MCP server registration would refuse (checked with both files). Boxed: the
    /// registration's errors are large, and this error rides in every config edit's.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Servers(Box<aibox_mcp_registration::McpError>),
}

impl From<aibox_mcp_registration::McpError> for ConfigCheckError {
    fn from(e: aibox_mcp_registration::McpError) -> Self {
        Self::Servers(Box::new(e))
    }
}

impl ConfigCheckError {
    /// Who can fix it: a literal secret is the user's; a processkit pin error keeps its
    /// own kind.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Secret { .. } => aibox_config::ErrorKind::User,
            Self::Processkit(e) => e.kind(),
            Self::Servers(e) => e.kind(),
        }
    }
}

/// Errors of `aibox migrate` (codes `aibox::migrate::*`).
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum MigrateError {
    /// No pending migration has this id.
    #[error("no pending migration `{id}`")]
    #[diagnostic(
        code(aibox::migrate::unknown_id),
        help("pending migrations: {known}; `aibox migrate list` shows them")
    )]
    UnknownId {
        /// The id asked for.
        id: String,
        /// The ids that exist, comma-separated (or "none").
        known: String,
    },

    /// A path that is not an open conflict of the migration.
    #[error("`{path}` is not an open conflict of {id}")]
    #[diagnostic(
        code(aibox::migrate::not_a_conflict),
        help("open conflicts of {id}: {open}")
    )]
    NotAConflict {
        /// Migration id.
        id: String,
        /// The path given.
        path: String,
        /// Its open conflicts, comma-separated (or "none").
        open: String,
    },

    /// Marking a migration done while conflicts are open, without saying how.
    #[error("{id} still has {count} open conflict(s): {paths}")]
    #[diagnostic(
        code(aibox::migrate::conflicts_open),
        help(
            "settle each with `--take ours` (keep your file), `--take theirs` (the new \
             release's), `--take base` (the previous release's) or `--edited` (you merged it \
             by hand); `aibox migrate show {id}` shows the versions"
        )
    )]
    ConflictsOpen {
        /// Migration id.
        id: String,
        /// How many.
        count: usize,
        /// Which, comma-separated.
        paths: String,
    },

    /// The working file changed after the upgrade kept it: taking another version would
    /// lose that change.
    #[error(
        "`{path}` changed since the upgrade kept it; taking {take} would overwrite that change"
    )]
    #[diagnostic(
        code(aibox::migrate::changed_since),
        help(
            "look at it with `aibox migrate show {id} {path}`; if you merged by hand, use \
             `--edited`; to replace it anyway, add `--force`"
        )
    )]
    ChangedSince {
        /// Migration id.
        id: String,
        /// Project path.
        path: String,
        /// The version asked for.
        take: &'static str,
    },

    /// `--edited` for a file that is exactly what the upgrade kept.
    #[error("`{path}` is unchanged since the upgrade kept it, so it was not edited")]
    #[diagnostic(
        code(aibox::migrate::not_edited),
        help("merge the versions into the file first, or use `--take ours` to keep it as it is")
    )]
    NotEdited {
        /// Project path.
        path: String,
    },

    /// `--edited` or a file to compare that is missing.
    #[error("`{path}` does not exist")]
    #[diagnostic(
        code(aibox::migrate::missing_file),
        help(
            "restore your merged file, or use `--take ours` to keep the deletion or `--take \
             theirs` for the new release's version"
        )
    )]
    MissingFile {
        /// Project path.
        path: String,
    },

    /// The parked copy no longer has the digest the document recorded.
    #[error("the parked upstream copy `{copy}` changed after the upgrade")]
    #[diagnostic(
        code(aibox::migrate::upstream_changed),
        help(
            "aibox will not install an altered copy as the release's version; restore it, or \
             settle the file with `--take ours` or `--edited`"
        )
    )]
    UpstreamChanged {
        /// Root-relative path of the parked copy.
        copy: String,
    },

    /// The base version is not on this machine.
    #[error("the base version of `{path}` is not available: {why}")]
    #[diagnostic(
        code(aibox::migrate::base_unavailable),
        help(
            "aibox keeps every release it installs in the download cache (an archive, a \
             download or a local directory), so this one was installed by an older aibox or \
             the cache was cleared since; settle the file without the base: `aibox migrate \
             resolve ID PATH --take ours` or `--take theirs`, or merge it by hand and \
             `--edited` (`aibox migrate show ID PATH` prints both). Pinning the previous \
             version to fetch it again would install that version and add a migration of \
             its own"
        )
    )]
    BaseUnavailable {
        /// Project path.
        path: String,
        /// Why.
        why: String,
    },

    /// A conflict whose file the previous release did not have: there is no base
    /// version to take (QA: this was reported as a missing cache entry, exit 3).
    #[error(
        "`{path}` has no base version: release {from} did not have this file (it is new in \
         this upgrade)"
    )]
    #[diagnostic(
        code(aibox::migrate::no_base),
        help(
            "settle it with `aibox migrate resolve ID PATH --take ours` or `--take theirs`, \
             or merge it by hand and `--edited` (`aibox migrate show ID PATH` prints both)"
        )
    )]
    NoBase {
        /// Project path.
        path: String,
        /// The version upgraded from.
        from: String,
    },

    /// A migration document that cannot be read.
    #[error("cannot read the migration document `{path}`: {reason}")]
    #[diagnostic(
        code(aibox::migrate::unreadable),
        help(
            "fix or remove the document; aibox writes them with YAML front matter between `---` lines"
        )
    )]
    Unreadable {
        /// Root-relative path.
        path: String,
        /// Why.
        reason: String,
    },

    /// `--take theirs|base` on a migration made for a version that is no longer
    /// installed: it would write another release's file into this one.
    #[error(
        "{id} was made for processkit {made_for}, but {installed} is installed now (the pin \
         moved since); taking {take} would write a file of another release into this one"
    )]
    #[diagnostic(
        code(aibox::migrate::stale),
        help(
            "keep your files and close it with `aibox migrate resolve {id} --take ours`, or \
             delete the document and its parked copies (`{parked}/`); to install \
             {made_for}'s files, pin {made_for} again and run `aibox apply`"
        )
    )]
    Stale {
        /// Migration id.
        id: String,
        /// The version the migration was made for.
        made_for: String,
        /// The version installed now (`none` without an install).
        installed: String,
        /// The version asked for.
        take: &'static str,
        /// Root-relative folder of the parked copies.
        parked: String,
    },

    /// `--version`/`PATH` asked for a version that does not exist.
    #[error("{what}")]
    #[diagnostic(code(aibox::migrate::no_such_version))]
    NoSuchVersion {
        /// What is missing.
        what: String,
    },
}

impl MigrateError {
    /// The kind: every refusal is the user's to settle, except a base version that only
    /// a download brings back.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::BaseUnavailable { .. } => ErrorKind::Environment,
            _ => ErrorKind::User,
        }
    }
}

impl From<MigrateError> for EngineError {
    fn from(e: MigrateError) -> Self {
        Self::Migrate(Box::new(e))
    }
}

/// Errors of looking up a skill to review.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum SkillError {
    /// Not a directory, and no project to look the name up in.
    #[error("`{target}` is not a directory and no project was found to look it up in")]
    #[diagnostic(
        code(aibox::skill::not_found),
        help("pass a skill directory, or run inside a project (or with --project DIR)")
    )]
    NoProject {
        /// What was asked for.
        target: String,
    },
    /// No installed skill of that name.
    #[error("no installed skill named `{name}` under {skills}")]
    #[diagnostic(
        code(aibox::skill::not_found),
        help("pass the skill's directory instead, or check the name in `context/skills/`")
    )]
    NotInstalled {
        /// The name.
        name: String,
        /// Where it was looked for.
        skills: Utf8PathBuf,
    },
}

impl SkillError {
    /// Always the user's: the named skill or directory does not exist.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        aibox_config::ErrorKind::User
    }
}
