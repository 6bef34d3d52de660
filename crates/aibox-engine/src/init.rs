//! `aibox init`: create a project's `aibox.toml` and keep local state out of git.
//!
//! Interactive questions are the CLI's job; [`init`] takes every answer in
//! [`InitOptions`]. It refuses to touch a project that already has an `aibox.toml`,
//! writes both files atomically (temporary file in the same directory, then rename),
//! never overwrites an `aibox.toml` that appears meanwhile, never edits or reorders a
//! user's `.gitignore` lines, and never sets a `[security]` consent. Both files go
//! through the one writer (`aibox_fs`) as the `init` command of the file
//! table.

use aibox_config::layout::Writers;
use aibox_config::{AIBOX_TOML, ConfigError, merge_gitignore, parse_aibox_toml};
use aibox_fs::{ProjectRoot, WriteError, Writer};
use camino::{Utf8Path, Utf8PathBuf};

/// Every answer `init` needs (defined next to the renderer in `aibox-config`).
pub use aibox_config::InitOptions;

/// What [`init`] did to `.gitignore`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitignoreChange {
    /// There was none; it was created.
    Created,
    /// Missing local-state entries were appended.
    Extended,
    /// Every entry was already present.
    Unchanged,
}

/// The outcome of [`init`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitReport {
    /// The `aibox.toml` written.
    pub aibox_toml: Utf8PathBuf,
    /// The `.gitignore` considered.
    pub gitignore: Utf8PathBuf,
    /// What happened to it.
    pub gitignore_change: GitignoreChange,
    /// Entries added to `.gitignore` (empty when unchanged).
    pub gitignore_added: Vec<String>,
}

/// Errors of [`init`].
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum InitError {
    /// The project already has an `aibox.toml`.
    #[error("{path} already exists; aibox init never overwrites it")]
    #[diagnostic(
        code(aibox::init::exists),
        help(
            "edit it with `aibox config set KEY VALUE` or by hand, then run `aibox apply`; \
             delete it first if you really want to start over"
        )
    )]
    Exists {
        /// The existing file.
        path: Utf8PathBuf,
    },
    /// A folder named `aibox.toml` is where the file would go.
    #[error("{path} is a folder, where aibox's configuration file should be")]
    #[diagnostic(
        code(aibox::init::not_a_file),
        help(
            "aibox.toml must be a file: move or remove that folder (`mv {path} {path}.old`), \
             then run `aibox init` again"
        )
    )]
    FolderInTheWay {
        /// The folder.
        path: Utf8PathBuf,
    },
    /// The target is not a directory, or does not exist.
    #[error("{} {}", .path, if *.exists { "is not a directory" } else { "does not exist" })]
    #[diagnostic(
        code(aibox::init::not_a_directory),
        help("create the directory first, or pass the project directory")
    )]
    NotADirectory {
        /// The path given.
        path: Utf8PathBuf,
        /// Whether something else (a file) is there.
        exists: bool,
    },
    /// A file aibox would write is a symbolic link.
    #[error("{path} is a symbolic link; aibox does not write through links")]
    #[diagnostic(
        code(aibox::init::symlink),
        help("replace the link with a regular file, then run `aibox init` again")
    )]
    Symlink {
        /// The link.
        path: Utf8PathBuf,
    },
    /// A processkit release is named for a project whose context mode installs none: it
    /// would be left out of `aibox.toml` without a word.
    #[error(
        "context mode `harness-only` installs no processkit content: the processkit {what} \
         given would be left out of aibox.toml"
    )]
    #[diagnostic(
        code(aibox::init::processkit_unused),
        help(
            "set the context mode to `processkit` to install that release, or leave the \
             processkit source and version out for a harness-only project"
        )
    )]
    ProcesskitUnused {
        /// What was given: `source`, `version`, or `source and version`.
        what: &'static str,
    },
    /// The answers produce an invalid configuration (for example an unsafe name).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Invalid(#[from] ConfigError),
    /// The answers produce a configuration that `apply` would refuse.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Check(#[from] crate::config_check::ConfigCheckError),
    /// The writer refused a path (outside what `init` may write, or in the way).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Write(WriteError),
    /// Reading or writing a file failed.
    #[error("cannot write {path}")]
    #[diagnostic(code(aibox::init::io), help("check that the directory is writable"))]
    Io {
        /// The file.
        path: Utf8PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl InitError {
    /// Who can fix it: a disk error is the environment, everything else the user.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Io { .. } => aibox_config::ErrorKind::Environment,
            Self::Write(e) => e.kind(),
            Self::Invalid(e) => e.kind(),
            Self::Check(e) => e.kind(),
            Self::Exists { .. }
            | Self::FolderInTheWay { .. }
            | Self::NotADirectory { .. }
            | Self::ProcesskitUnused { .. }
            | Self::Symlink { .. } => aibox_config::ErrorKind::User,
        }
    }
}

/// Creates `aibox.toml` in `dir` and creates or extends `.gitignore`.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let root = camino::Utf8Path::from_path(dir.path()).unwrap();
/// let options = aibox_config::init::InitOptions::new("demo");
/// let report = aibox_engine::init::init(root, &options)?;
/// assert!(report.aibox_toml.ends_with("aibox.toml"));
/// // The new project resolves and plans as it is.
/// let resolved = aibox_engine::resolve(root, &aibox_engine::PlanOptions::default())?;
/// aibox_engine::plan(&resolved)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn init(dir: &Utf8Path, opts: &InitOptions) -> Result<InitReport, InitError> {
    check_target(dir)?;
    if opts.context_mode == aibox_config::ContextMode::HarnessOnly {
        let what = match (&opts.processkit_source, &opts.processkit_version) {
            (Some(_), Some(_)) => Some("source and version"),
            (Some(_), None) => Some("source"),
            (None, Some(_)) => Some("version"),
            (None, None) => None,
        };
        if let Some(what) = what {
            return Err(InitError::ProcesskitUnused { what });
        }
    }
    let toml_path = dir.join(AIBOX_TOML);
    let text = aibox_config::render_aibox_toml(opts);
    // Validate before touching anything: bad answers must not leave half a project. The
    // checks `apply` runs come too (a floating `--processkit-version latest` is refused
    // now, not at the next apply).
    let config = parse_aibox_toml(&text, AIBOX_TOML)?;
    crate::config_check::check_team_config(&text, &config)?;

    let gi_path = dir.join(aibox_config::layout::GITIGNORE);
    let root = ProjectRoot::open(dir).map_err(|e| write_error(dir, e))?;
    let mut writer = Writer::for_command(&root, Writers::INIT);
    let gi_rel = Utf8Path::new(aibox_config::layout::GITIGNORE);
    let existing = root
        .read(gi_rel)
        .map_err(|e| write_error(dir, e))?
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let added: Vec<String> =
        aibox_config::gitignore::missing_entries(existing.as_deref().unwrap_or(""))
            .into_iter()
            .map(str::to_owned)
            .collect();
    let change = match (merge_gitignore(existing.as_deref()), existing.is_some()) {
        (None, _) => GitignoreChange::Unchanged,
        (Some(new), had) => {
            writer
                .write(gi_rel, new.as_bytes(), None)
                .map_err(|e| write_error(dir, e))?;
            if had {
                GitignoreChange::Extended
            } else {
                GitignoreChange::Created
            }
        }
    };
    writer
        .create_new(Utf8Path::new(AIBOX_TOML), text.as_bytes())
        .map_err(|e| write_error(dir, e))?;
    Ok(InitReport {
        aibox_toml: toml_path,
        gitignore: gi_path,
        gitignore_added: if change == GitignoreChange::Unchanged {
            Vec::new()
        } else {
            added
        },
        gitignore_change: change,
    })
}

/// Whether `init` can create `aibox.toml` in `dir`: the folder exists and holds no
/// `aibox.toml` (file, link or folder). The CLI asks this before its questions.
///
/// # Errors
/// [`InitError::NotADirectory`], [`InitError::FolderInTheWay`] or
/// [`InitError::Exists`].
pub fn check_target(dir: &Utf8Path) -> Result<(), InitError> {
    if !dir.is_dir() {
        return Err(InitError::NotADirectory {
            path: dir.to_owned(),
            exists: dir.symlink_metadata().is_ok(),
        });
    }
    let path = dir.join(AIBOX_TOML);
    // `symlink_metadata` so that even a dangling link counts as "exists".
    match path.symlink_metadata() {
        Ok(meta) if meta.is_dir() => Err(InitError::FolderInTheWay { path }),
        Ok(_) => Err(InitError::Exists { path }),
        Err(_) => Ok(()),
    }
}

/// The writer's refusals in `init`'s terms: a symlink, an existing file, an I/O error.
pub(crate) fn write_error(dir: &Utf8Path, e: WriteError) -> InitError {
    match e {
        WriteError::Symlink { path, .. } => InitError::Symlink {
            path: dir.join(path),
        },
        WriteError::Exists { path } => InitError::Exists {
            path: dir.join(path),
        },
        WriteError::Io { path, source, .. } => InitError::Io { path, source },
        other => InitError::Write(other),
    }
}
