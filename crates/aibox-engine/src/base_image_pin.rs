//! `aibox base-image pin`: re-pins `container.base_image` to the digest its registry
//! serves for the tag now. The registry question is `aibox_provenance::registry`; the
//! write is `config set`'s validated, comment-preserving edit, so `aibox.toml` changes
//! only after an answer and only to a value `apply` accepts.

use aibox_config::edit::ConfigFile;
use aibox_provenance::registry::{self, Target};
use camino::Utf8Path;

// The limits `pin` takes (also at the crate root) and the error of its registry question.
pub use aibox_provenance::{HttpOptions, registry::RegistryError};

use crate::config_edit::{ConfigEditError, config_set};

/// The key this command edits.
pub const KEY: &str = "container.base_image";

/// What a pin found and did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PinReport {
    /// `container.base_image` before (the effective value, default included).
    pub old: String,
    /// `name:tag@digest` as the registry serves it now.
    pub new: String,
    /// The digest.
    pub digest: String,
    /// The manifest URL asked.
    pub url: String,
    /// Whether `aibox.toml` differs (or would, with `dry_run`).
    pub changed: bool,
    /// Nothing was written.
    pub dry_run: bool,
}

/// The limits `aibox base-image pin` asks the registry with: short timeouts and a small
/// body, since the answer is a manifest. [`HttpOptions::default`] is a download's limits.
pub fn default_options() -> HttpOptions {
    registry::default_options()
}

/// Asks the registry for the digest of `reference` (default: the configured
/// `container.base_image`) and, unless `dry_run`, writes `name:tag@digest` into
/// `aibox.toml`. Every error leaves the file untouched. `opts` is usually
/// [`default_options`]; the personal CA file is added to it.
pub fn pin(
    root: &Utf8Path,
    reference: Option<&str>,
    dry_run: bool,
    opts: &HttpOptions,
) -> Result<PinReport, PinError> {
    let project = aibox_config::load_project(root)?;
    let old = project.config.container.base_image.clone();
    let target = Target::parse(reference.unwrap_or(&old))?;
    let opts = HttpOptions {
        extra_ca_pem: crate::config_check::http_extra_ca_checked(root, &project.local)
            .map_err(|e| PinError::Settings(Box::new(e)))?,
        ..opts.clone()
    };
    let digest = registry::resolve_digest(&target, &opts)?;
    let new = target.pinned(&digest);
    let changed = new != old;
    if changed && !dry_run {
        // A TOML string literal, so the value is never read as another TOML type.
        let value = toml_edit::Value::from(new.as_str()).to_string();
        config_set(root, ConfigFile::Team, KEY, &value)?;
    }
    Ok(PinReport {
        old,
        new,
        digest,
        url: target.manifest_url(),
        changed,
        dry_run,
    })
}

/// Errors of [`pin`].
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum PinError {
    /// `aibox.toml` does not load.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] aibox_config::ConfigError),
    /// The reference or the registry's answer.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Registry(#[from] RegistryError),
    /// Saving the new value.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Edit(#[from] ConfigEditError),
    /// A personal setting the request needs cannot be used (the extra CA file).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Settings(Box<crate::error::EngineError>),
}

impl PinError {
    /// Who can fix it.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Config(e) => e.kind(),
            Self::Registry(e) => e.kind(),
            Self::Edit(e) => e.kind(),
            Self::Settings(e) => e.kind(),
        }
    }
}
