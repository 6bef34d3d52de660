//! `aibox config set`: a comment-preserving, validated edit of `aibox.toml` or
//! `.aibox-local.toml`, saved atomically. The edit itself lives in `aibox-config`; this
//! module only reads and writes the file.

use aibox_config::edit::ConfigFile;
use camino::Utf8Path;

use crate::init::{InitError, write_atomic};

/// Sets `key` to `value` in the project's `file` and saves it. The edited text is
/// validated with the strict loader first; an invalid edit leaves the file untouched.
/// Returns the file's path.
pub fn config_set(
    root: &Utf8Path,
    file: ConfigFile,
    key: &str,
    value: &str,
) -> Result<camino::Utf8PathBuf, ConfigEditError> {
    let path = root.join(file.file_name());
    let text = if path.is_file() {
        fs_err::read_to_string(&path).map_err(|source| ConfigEditError::Io {
            path: path.clone(),
            source,
        })?
    } else {
        String::new()
    };
    let new = aibox_config::edit::set_in(file, &text, key, value)?;
    if file == ConfigFile::Team {
        // The checks `apply` runs: an edit apply would refuse is refused here.
        let config = aibox_config::parse_aibox_toml(&new, aibox_config::AIBOX_TOML)?;
        crate::config_check::check_team_config(&new, &config)?;
    }
    if new != text {
        write_atomic(&path, new.as_bytes(), false)?;
    }
    Ok(path)
}

/// Errors of [`config_set`].
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ConfigEditError {
    /// The edit is invalid.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] aibox_config::ConfigError),
    /// The edit passes the loader but `apply` would refuse it.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Check(#[from] crate::config_check::ConfigCheckError),
    /// Writing failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Write(#[from] InitError),
    /// Reading failed.
    #[error("cannot read {path}")]
    #[diagnostic(code(aibox::config::io))]
    Io {
        /// The file.
        path: camino::Utf8PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl ConfigEditError {
    /// Who can fix it: a disk error is the environment; the rest keeps its own kind.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Config(e) => e.kind(),
            Self::Check(e) => e.kind(),
            Self::Write(e) => e.kind(),
            Self::Io { .. } => aibox_config::ErrorKind::Environment,
        }
    }
}
