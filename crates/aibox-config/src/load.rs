//! Finding and loading a project's configuration files.

use camino::{Utf8Path, Utf8PathBuf};
use miette::{Diagnostic, NamedSource, SourceSpan};

use crate::model::{AiboxToml, LocalToml};

/// File name of the committed configuration.
pub const AIBOX_TOML: &str = "aibox.toml";
/// File name of the personal, gitignored overlay.
pub const LOCAL_TOML: &str = ".aibox-local.toml";

/// A loaded project: its root and both configuration files.
#[derive(Debug, Clone)]
pub struct Project {
    /// Directory that holds `aibox.toml`.
    pub root: Utf8PathBuf,
    /// The committed configuration.
    pub config: AiboxToml,
    /// The personal overlay (empty when the file does not exist).
    pub local: LocalToml,
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum ConfigError {
    /// No `aibox.toml` above the start directory.
    #[error("no aibox.toml found in {start} or any parent directory")]
    #[diagnostic(
        code(aibox::config::not_found),
        help("run `aibox init` to create one, or pass `--project DIR`")
    )]
    NotFound {
        /// Where the search started.
        start: Utf8PathBuf,
    },
    /// A file could not be read.
    #[error("cannot read {path}")]
    #[diagnostic(code(aibox::config::io))]
    Io {
        /// The file.
        path: Utf8PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The TOML is malformed or does not match the model.
    #[error("{message}")]
    #[diagnostic(code(aibox::config::invalid))]
    Invalid {
        /// What is wrong.
        message: String,
        /// The file text.
        #[source_code]
        src: NamedSource<String>,
        /// Where.
        #[label("here")]
        span: Option<SourceSpan>,
    },
}

/// Walks up from `start` to the nearest directory holding `aibox.toml`.
pub fn find_project_root(start: &Utf8Path) -> Result<Utf8PathBuf, ConfigError> {
    let mut dir = Some(start);
    while let Some(d) = dir {
        if d.join(AIBOX_TOML).is_file() {
            return Ok(d.to_owned());
        }
        dir = d.parent();
    }
    Err(ConfigError::NotFound { start: start.to_owned() })
}

/// Loads `aibox.toml` and, when present, `.aibox-local.toml` from `root`.
pub fn load_project(root: &Utf8Path) -> Result<Project, ConfigError> {
    let path = root.join(AIBOX_TOML);
    let text = read(&path)?;
    let config = parse_aibox_toml(&text, path.as_str())?;
    let local_path = root.join(LOCAL_TOML);
    let local = if local_path.is_file() {
        parse_local_toml(&read(&local_path)?, local_path.as_str())?
    } else {
        LocalToml::default()
    };
    Ok(Project { root: root.to_owned(), config, local })
}

fn read(path: &Utf8Path) -> Result<String, ConfigError> {
    fs_err::read_to_string(path)
        .map_err(|source| ConfigError::Io { path: path.to_owned(), source })
}

/// Parses the text of an `aibox.toml`; `name` labels diagnostics.
pub fn parse_aibox_toml(text: &str, name: &str) -> Result<AiboxToml, ConfigError> {
    parse(text, name)
}

/// Parses the text of a `.aibox-local.toml`; `name` labels diagnostics.
pub fn parse_local_toml(text: &str, name: &str) -> Result<LocalToml, ConfigError> {
    parse(text, name)
}

fn parse<T: serde::de::DeserializeOwned>(text: &str, name: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Invalid {
        message: e.message().to_owned(),
        src: NamedSource::new(name, text.to_owned()),
        span: e.span().map(Into::into),
    })
}
