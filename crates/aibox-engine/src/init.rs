//! `aibox init`: create a project's `aibox.toml` and keep local state out of git.
//!
//! Interactive questions are the CLI's job; [`init`] takes every answer in
//! [`InitOptions`]. It refuses to touch a project that already has an `aibox.toml`,
//! writes both files atomically (temporary file in the same directory, then rename),
//! never overwrites an `aibox.toml` that appears meanwhile, never edits or reorders a
//! user's `.gitignore` lines, and never sets a `[security]` consent.

use std::io::Write as _;

use aibox_config::{AIBOX_TOML, ConfigError, merge_gitignore, parse_aibox_toml};
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
    /// The target is not a directory.
    #[error("{path} is not a directory")]
    #[diagnostic(
        code(aibox::init::not_a_directory),
        help("create the directory first, or pass the project directory")
    )]
    NotADirectory {
        /// The path given.
        path: Utf8PathBuf,
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
    /// The answers produce an invalid configuration (for example an unsafe name).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Invalid(#[from] ConfigError),
    /// The answers produce a configuration that `apply` would refuse.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Check(#[from] crate::config_check::ConfigCheckError),
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
            Self::Invalid(e) => e.kind(),
            Self::Check(e) => e.kind(),
            Self::Exists { .. } | Self::NotADirectory { .. } | Self::Symlink { .. } => {
                aibox_config::ErrorKind::User
            }
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
    if !dir.is_dir() {
        return Err(InitError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    let toml_path = dir.join(AIBOX_TOML);
    // `symlink_metadata` so that even a dangling link counts as "exists".
    if toml_path.symlink_metadata().is_ok() {
        return Err(InitError::Exists { path: toml_path });
    }
    let text = aibox_config::render_aibox_toml(opts);
    // Validate before touching anything: bad answers must not leave half a project. The
    // checks `apply` runs come too (a floating `--processkit-version latest` is refused
    // now, not at the next apply).
    let config = parse_aibox_toml(&text, AIBOX_TOML)?;
    crate::config_check::check_team_config(&text, &config)?;

    let gi_path = dir.join(".gitignore");
    let existing = match gi_path.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(InitError::Symlink { path: gi_path });
        }
        Ok(_) => Some(
            fs_err::read_to_string(&gi_path).map_err(|source| InitError::Io {
                path: gi_path.clone(),
                source,
            })?,
        ),
        Err(_) => None,
    };
    let added: Vec<String> =
        aibox_config::gitignore::missing_entries(existing.as_deref().unwrap_or(""))
            .into_iter()
            .map(str::to_owned)
            .collect();
    let change = match (merge_gitignore(existing.as_deref()), existing.is_some()) {
        (None, _) => GitignoreChange::Unchanged,
        (Some(new), had) => {
            write_atomic(&gi_path, new.as_bytes(), false)?;
            if had {
                GitignoreChange::Extended
            } else {
                GitignoreChange::Created
            }
        }
    };
    write_atomic(&toml_path, text.as_bytes(), true)?;
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

/// Writes `bytes` to `path` through a temporary file in the same directory.
///
/// With `no_clobber`, the final step is a hard link, which fails instead of replacing a
/// file that appeared since the existence check. A replaced file keeps its permissions.
pub(crate) fn write_atomic(
    path: &Utf8Path,
    bytes: &[u8],
    no_clobber: bool,
) -> Result<(), InitError> {
    let io = |source| InitError::Io {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Utf8Path::new("."));
    let name = path.file_name().unwrap_or("file");
    let tmp = dir.join(format!(".{name}.aibox-tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = fs_err::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        // Keep the mode of a file being replaced (for example 0600 on a personal file).
        if let Ok(meta) = fs_err::metadata(path) {
            f.set_permissions(meta.permissions())?;
        }
        f.sync_all()?;
        drop(f);
        if no_clobber {
            fs_err::hard_link(&tmp, path)
        } else {
            fs_err::rename(&tmp, path)
        }
    })();
    let _ = fs_err::remove_file(&tmp);
    match result {
        Ok(()) => Ok(()),
        Err(e) if no_clobber && e.kind() == std::io::ErrorKind::AlreadyExists => {
            Err(InitError::Exists {
                path: path.to_owned(),
            })
        }
        Err(e) => Err(io(e)),
    }
}
