//! `aibox.lock`: the committed record of what the last `aibox apply` produced.
//!
//! The lock is TOML. `[aibox]` records the CLI version that wrote it and `[generated]` maps
//! the root-relative path of every generated file to the SHA-256 of its contents, which is
//! how the engine tells its own files from hand-written ones. Rendering is deterministic
//! (sorted maps, no timestamps), so an apply that changes nothing leaves the lock
//! byte-identical and git clean.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use miette::{Diagnostic, NamedSource, SourceSpan};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// File name of the lock, at the project root.
pub const LOCK_FILE: &str = aibox_config::layout::LOCK;

/// The whole of `aibox.lock`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// Which aibox wrote the lock.
    #[serde(default)]
    pub aibox: AiboxLock,
    /// `[processkit]`: the installed content release (absent in harness-only mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processkit: Option<crate::record::ProcesskitLock>,
    /// Root-relative path (with `/`) → lowercase hex SHA-256 of every generated file.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub generated: BTreeMap<String, String>,
    /// `[tools.<name>]`: the catalog tools the generated Dockerfile installs, with the
    /// exact downloads and digests it checks, so a rebuild is reproducible and reviewable.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolLock>,
    /// `[base_image]`: what the generated Dockerfile starts `FROM`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_image: Option<BaseImageLock>,
    /// `[mcp]`: the locked Python environments of MCP servers that declare their
    /// dependencies (see [`crate::pydeps`]) and the locked npm trees of team servers
    /// started with `npx` (see [`crate::npmdeps`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<crate::pydeps::McpLock>,
    /// `[network]`: the egress allowlist the proxy enforces (`[network] egress =
    /// "allowlist"`): the team's hosts and where each came from. Personal hosts are never
    /// recorded here (the lock is committed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkLock>,
}

/// The egress allowlist in the lock.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkLock {
    /// `allowlist` (the only mode that records a list).
    pub egress: String,
    /// The proxy: Debian package and exact version.
    pub proxy: String,
    /// Allowed host name → where it comes from (`tool claude-code 2.1.197`, `skill x`,
    /// `aibox.toml [network] allow`).
    #[serde(default)]
    pub allow: BTreeMap<String, Vec<String>>,
    /// Registries only the image builds reach (Compose builds with the host's network;
    /// never on the allowlist) → what needs them (`apt: tool git bookworm`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub build: BTreeMap<String, Vec<String>>,
}

/// The base image in the lock: the configured reference, split, and whether it is aibox's
/// default image (from aibox-config's committed data file).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseImageLock {
    /// The whole reference, as the Dockerfile's `FROM` names it.
    pub reference: String,
    /// Registry and repository.
    pub name: String,
    /// The tag, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// `sha256:<hex>` when the reference pins a digest; absent means the tag alone decides
    /// what a rebuild starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Whether this is aibox's default base image.
    #[serde(default)]
    pub default: bool,
}

impl BaseImageLock {
    /// The lock entry for `reference`.
    pub fn new(reference: &str) -> Self {
        let r = aibox_config::ImageRef::parse(reference);
        Self {
            reference: reference.to_owned(),
            name: r.name,
            tag: r.tag,
            digest: r.digest,
            default: reference == aibox_config::default_base_image(),
        }
    }
}

/// One installed tool in the lock.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolLock {
    /// The pinned version (for Debian packages: the Debian release).
    pub version: String,
    /// How the build checks it: `npm-integrity`, `sha256`, `apt-signed` or `exception`.
    pub verification: String,
    /// Debian packages installed from the signed apt repository.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apt: Vec<String>,
    /// The files downloaded and checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub download: Vec<ToolDownload>,
}

/// One checked download of a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDownload {
    /// Debian architecture, absent when the file serves every architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// Where it comes from.
    pub url: String,
    /// `sha512:<hex>` or `sha256:<hex>`.
    pub digest: String,
}

/// `[aibox]` of the lock.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AiboxLock {
    /// Version of the aibox CLI (or embedding library) that wrote the lock.
    #[serde(default)]
    pub cli_version: String,
}

/// Errors reading or rendering the lock.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum LockError {
    /// The lock exists but is not valid lock TOML.
    #[error("{path} is not a valid aibox lock: {message}")]
    #[diagnostic(
        code(aibox::lock::invalid),
        help(
            "fix the file by hand, or remove it and run `aibox apply` to regenerate it \
             (hand-written .devcontainer files are then only recognised by their header)"
        )
    )]
    Invalid {
        /// The lock file.
        path: Utf8PathBuf,
        /// What the parser said.
        message: String,
        /// The file text.
        #[source_code]
        src: NamedSource<String>,
        /// Where.
        #[label("here")]
        span: Option<SourceSpan>,
    },
    /// The lock could not be serialised (a bug: the model only holds strings and maps).
    #[error("cannot render aibox.lock: {0}")]
    #[diagnostic(code(aibox::lock::render))]
    Render(#[from] toml::ser::Error),
}

const HEADER: &str =
    "# aibox.lock: generated by `aibox apply`; commit it and do not edit by hand.\n";

impl Lock {
    // The error carries the whole file for its diagnostic; it only occurs once per run.
    #[allow(clippy::result_large_err)]
    /// Parses the text of a lock file; `path` labels diagnostics.
    ///
    /// ```
    /// use aibox_provenance::lock::Lock;
    /// let text = "[aibox]\ncli_version = \"0.1.0\"\n";
    /// let lock = Lock::parse(text, camino::Utf8Path::new("aibox.lock"))?;
    /// assert_eq!(lock.aibox.cli_version, "0.1.0");
    /// assert_eq!(Lock::parse(&lock.render()?, camino::Utf8Path::new("aibox.lock"))?, lock);
    /// # Ok::<(), aibox_provenance::lock::LockError>(())
    /// ```
    pub fn parse(text: &str, path: &Utf8Path) -> Result<Self, LockError> {
        toml::from_str(text).map_err(|e| LockError::Invalid {
            path: path.to_owned(),
            message: e.message().to_owned(),
            src: NamedSource::new(path.as_str(), text.to_owned()),
            span: e.span().map(Into::into),
        })
    }

    /// Renders the lock deterministically: same lock, same bytes.
    #[allow(clippy::result_large_err)] // see `parse`
    pub fn render(&self) -> Result<String, LockError> {
        let body = toml::to_string(self)?;
        Ok(format!("{HEADER}\n{body}"))
    }

    /// The recorded digest of a generated file, if any.
    pub fn generated_digest(&self, path: &str) -> Option<&str> {
        self.generated.get(path).map(String::as_str)
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl LockError {
    /// Who can fix it: a hand-broken `aibox.lock` is the user's; a render failure a bug.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Invalid { .. } => aibox_config::ErrorKind::User,
            Self::Render(_) => aibox_config::ErrorKind::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_renders_stably() {
        let mut lock = Lock::default();
        lock.aibox.cli_version = "0.1.0".into();
        lock.generated
            .insert(".devcontainer/Dockerfile".into(), sha256_hex(b"b"));
        lock.generated
            .insert(".aibox-local.env".into(), sha256_hex(b"a"));
        let text = lock.render().unwrap();
        assert_eq!(text, lock.render().unwrap());
        let back = Lock::parse(&text, Utf8Path::new("aibox.lock")).unwrap();
        assert_eq!(back, lock);
        // Sorted keys, no timestamps.
        let a = text.find(".aibox-local.env").unwrap();
        let d = text.find(".devcontainer/Dockerfile").unwrap();
        assert!(a < d);
        assert!(!text.contains("_at"));
    }

    #[test]
    fn corrupt_lock_is_a_located_error() {
        let err = Lock::parse("[aibox\ncli_version = 1", Utf8Path::new("aibox.lock")).unwrap_err();
        let LockError::Invalid { span, path, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(path, "aibox.lock");
        assert!(span.is_some());
        assert_eq!(
            miette::Diagnostic::code(&err).unwrap().to_string(),
            "aibox::lock::invalid"
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = Lock::parse(
            "[aibox]\ncli_version = \"1\"\nfoo = 1\n",
            Utf8Path::new("x"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn digest_is_hex_sha256() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
