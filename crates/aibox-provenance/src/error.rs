//! Typed errors of the provenance layer, each with a stable `aibox::provenance::*` code.

use miette::Diagnostic;
use thiserror::Error;

/// Everything that can go wrong while fetching, verifying, extracting, installing or
/// checking processkit content.
#[derive(Debug, Error, Diagnostic)]
#[non_exhaustive]
pub enum ProvenanceError {
    /// The project writer refused or failed (`aibox_fs`).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Write(#[from] aibox_fs::WriteError),
    /// A file-system operation failed.
    #[error("{action} `{path}` failed")]
    #[diagnostic(
        code(aibox::provenance::io),
        help("check that the path exists and that you may read and write it")
    )]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A digest value is not 64 lowercase hex digits.
    #[error("invalid SHA-256 digest in {origin}: `{value}`")]
    #[diagnostic(
        code(aibox::provenance::invalid_digest),
        help("a SHA-256 digest is exactly 64 lowercase hexadecimal digits")
    )]
    InvalidDigest {
        /// Where the value came from.
        origin: String,
        /// The offending value (never a secret: digests are public).
        value: String,
    },

    /// The content does not hash to the expected digest.
    #[error("digest mismatch for {what}: expected {expected}, got {actual}")]
    #[diagnostic(
        code(aibox::provenance::digest_mismatch),
        help(
            "nothing was installed or cached. The download may be corrupt or the release \
             was replaced; check the source, and only change the pin if you trust the new content"
        )
    )]
    DigestMismatch {
        /// What was verified (URL or path).
        what: String,
        /// The expected digest.
        expected: String,
        /// The digest actually computed.
        actual: String,
    },

    /// No digest is available to verify the source against.
    #[error("no SHA-256 digest to verify {what}")]
    #[diagnostic(
        code(aibox::provenance::unverified),
        help(
            "pin the digest with `[processkit] sha256 = \"{computed}\"` after checking the \
             content, publish a `.sha256` sidecar, or (not recommended) set \
             `[processkit] allow_unverified = true`, which is reported as a provenance exception"
        )
    )]
    NoDigest {
        /// The source.
        what: String,
        /// The digest computed from the content, offered for an explicit pin.
        computed: String,
    },

    /// The `.sha256` sidecar is malformed.
    #[error("invalid checksum sidecar {what}: {reason}")]
    #[diagnostic(
        code(aibox::provenance::sidecar),
        help(
            "the sidecar must hold 64 lowercase hex digits, optionally followed by two spaces and the archive file name"
        )
    )]
    Sidecar {
        /// Sidecar URL or path.
        what: String,
        /// What is wrong.
        reason: String,
    },

    /// An HTTP transfer failed.
    #[error("download of {url} failed: {reason}")]
    #[diagnostic(
        code(aibox::provenance::http),
        help("check the URL and your network; nothing was installed or cached")
    )]
    Http {
        /// The URL.
        url: String,
        /// What went wrong.
        reason: String,
    },

    /// The server answered with an error status.
    #[error("{url} answered HTTP {status}")]
    #[diagnostic(code(aibox::provenance::http_status), help("{hint}"))]
    HttpStatus {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
        /// What the status means here ([`ProvenanceError::http_status`] fills it in).
        hint: String,
    },

    /// A download exceeded the size limit.
    #[error("{url} is larger than the limit of {limit} bytes")]
    #[diagnostic(
        code(aibox::provenance::too_large),
        help("real processkit releases are about 1.3 MB; the source is probably wrong")
    )]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit in bytes.
        limit: u64,
    },

    /// Too many redirects (or a redirect loop).
    #[error("too many redirects (limit {limit}) fetching {url}")]
    #[diagnostic(
        code(aibox::provenance::redirects),
        help("the server redirects in a loop or too often; check the URL template")
    )]
    Redirects {
        /// The URL first requested.
        url: String,
        /// The redirect limit.
        limit: u32,
    },

    /// The forge's releases API refused for its rate limit.
    #[error("{url} refused the request: rate limit reached ({wait})")]
    #[diagnostic(
        code(aibox::provenance::rate_limited),
        help(
            "{}",
            if *token {
                "the token's hourly limit is used up; wait, or use another token"
            } else {
                "anonymous requests share a small hourly limit per address; wait, or set \
                 GITHUB_TOKEN (or GH_TOKEN) to a token (no scopes needed for public \
                 repositories)"
            }
        )
    )]
    RateLimited {
        /// The URL asked.
        url: String,
        /// How long to wait, as the server said.
        wait: String,
        /// Whether a token was sent.
        token: bool,
    },

    /// The releases API answered something aibox cannot use.
    #[error("the releases API at {url} gave an unusable answer: {reason}")]
    #[diagnostic(
        code(aibox::provenance::releases_api),
        help(
            "check `[processkit] source` (a repository URL) and, when set, \
             AIBOX_GITHUB_API (the API base, such as https://api.github.com)"
        )
    )]
    ReleasesApi {
        /// The URL asked.
        url: String,
        /// What was wrong.
        reason: String,
    },

    /// A URL that is neither HTTPS nor plain HTTP to a loopback address.
    #[error("refusing insecure URL {url}")]
    #[diagnostic(
        code(aibox::provenance::insecure_url),
        help(
            "release downloads (and every redirect) must use https://; plain http:// is only accepted for loopback addresses"
        )
    )]
    InsecureUrl {
        /// The URL.
        url: String,
    },

    /// An archive entry was rejected by safe extraction.
    #[error("unsafe archive entry `{entry}`: {reason}")]
    #[diagnostic(
        code(aibox::provenance::unsafe_entry),
        help(
            "the archive is malformed or hostile; nothing was extracted outside the staging directory and nothing was installed"
        )
    )]
    UnsafeEntry {
        /// The entry name as found in the archive (lossy UTF-8, control characters escaped).
        entry: String,
        /// Why it was rejected.
        reason: String,
    },

    /// The archive exceeds an extraction limit (decompression bomb protection).
    #[error("archive exceeds a limit: {reason}")]
    #[diagnostic(
        code(aibox::provenance::archive_limit),
        help(
            "real processkit releases hold about 1 300 entries and 5 MB; the archive is not a processkit release"
        )
    )]
    ArchiveLimit {
        /// Which limit and where.
        reason: String,
    },

    /// The archive could not be decoded.
    #[error("corrupt archive {what}: {reason}")]
    #[diagnostic(
        code(aibox::provenance::corrupt_archive),
        help("the file is not a valid gzip-compressed tar archive")
    )]
    CorruptArchive {
        /// Archive path or URL.
        what: String,
        /// Decoder message.
        reason: String,
    },

    /// The release does not have the processkit layout (`reason` says when the version
    /// is one before the layout existed: older than v0.8.0).
    #[error("not a processkit release ({what}): {reason}")]
    #[diagnostic(
        code(aibox::provenance::layout),
        help(
            "a release holds one top directory `processkit-<tag>/` with `PROVENANCE.toml` and `context/` inside"
        )
    )]
    Layout {
        /// The source.
        what: String,
        /// What is missing or wrong.
        reason: String,
    },

    /// The configured version is not a concrete release tag.
    #[error("invalid processkit version `{value}`: {reason}")]
    #[diagnostic(
        code(aibox::provenance::version),
        help(
            "pin an exact tag such as `v0.28.3` in `[processkit] version`; `latest` and branch names are never recorded as pins"
        )
    )]
    Version {
        /// The configured value.
        value: String,
        /// Why it is rejected.
        reason: String,
    },

    /// The `[processkit]` configuration is incomplete or inconsistent.
    #[error("invalid `[processkit] {key}`: {reason}")]
    #[diagnostic(code(aibox::provenance::config), help("{help}"))]
    Config {
        /// The key.
        key: &'static str,
        /// What is wrong.
        reason: String,
        /// How to fix it.
        help: String,
    },

    /// A catalog file of the release (tier, `SKILL.md`, MCP config) is malformed.
    #[error("malformed release file `{path}`: {reason}")]
    #[diagnostic(
        code(aibox::provenance::catalog),
        help("the release content is broken; report it upstream or pin another version")
    )]
    Catalog {
        /// Release path.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// The release's MCP manifest disagrees with the server configs it ships.
    #[error("MCP manifest `context/.processkit-mcp-manifest.json` disagrees with the release: {}", .problems.join("; "))]
    #[diagnostic(
        code(aibox::provenance::mcp_manifest),
        help(
            "the manifest hashes the canonical JSON of each shipped `mcp-config.json`; a \
             mismatch means the configs were changed after the release was built. Nothing \
             was written; report it upstream or pin another version"
        )
    )]
    McpManifest {
        /// One entry per disagreement, each naming its file.
        problems: Vec<String>,
    },

    /// Package tiers extend each other in a cycle.
    #[error("package tiers extend each other in a cycle: {chain}")]
    #[diagnostic(
        code(aibox::provenance::tier_cycle),
        help("the release's `.processkit/packages/*.yaml` is broken; pin another version")
    )]
    TierCycle {
        /// The cycle, joined by ` -> `.
        chain: String,
    },

    /// `[context] packages` names a package tier the release does not have. Ignoring it
    /// (as earlier versions did, with a warning) removed every skill only that tier
    /// selected: a typo uninstalled content.
    #[error(
        "`[context] packages` names `{name}`, which is not a package tier of this processkit release{suggestion}"
    )]
    #[diagnostic(
        code(aibox::provenance::unknown_package),
        help(
            "fix the name in aibox.toml (`aibox config set context.packages '[\"…\"]'`), then run `aibox apply`; nothing was written. The release's tiers: {known}"
        )
    )]
    UnknownPackage {
        /// The name as written.
        name: String,
        /// `; did you mean `x`?`, or empty.
        suggestion: String,
        /// The release's tiers, comma-separated.
        known: String,
    },

    /// MCP configurations reference scripts that do not exist or are not allowed.
    #[error("{} MCP server script(s) missing or invalid: {}", scripts.len(), scripts.join(", "))]
    #[diagnostic(
        code(aibox::provenance::missing_scripts),
        help(
            "every registered server script must exist, stay inside `context/skills/` and end in `server.py`; nothing was written"
        )
    )]
    MissingScripts {
        /// Every offending script path, sorted.
        scripts: Vec<String>,
    },

    /// A project path is unsafe to write (symlinked parent, outside the root).
    #[error("refusing to write `{path}`: {reason}")]
    #[diagnostic(
        code(aibox::provenance::unsafe_destination),
        help("remove the symlink or move the file; aibox never writes through links")
    )]
    UnsafeDestination {
        /// Project-relative path.
        path: String,
        /// Why.
        reason: String,
    },

    /// A file of a verified release no longer has the bytes it was verified with (the
    /// unpacked store in the download cache was damaged, or a local release directory
    /// changed while aibox ran). Nothing is installed from it.
    #[error("release file `{path}` changed since it was verified: {reason}")]
    #[diagnostic(
        code(aibox::provenance::changed_release_file),
        help(
            "when the file lies in aibox's download cache (`unpacked/`), delete that \
             release's folder there and run aibox again: it is unpacked anew from the \
             verified archive; when it is your local release directory, do not change it \
             while aibox runs"
        )
    )]
    ChangedReleaseFile {
        /// Where the file is.
        path: String,
        /// What differs.
        reason: String,
    },

    /// The installed marker, manifest or lock section could not be parsed.
    #[error("cannot read install record `{path}`: {reason}")]
    #[diagnostic(
        code(aibox::provenance::record),
        help("the file was edited by hand or is corrupt; run `aibox apply` to rewrite it")
    )]
    Record {
        /// Path.
        path: String,
        /// Parser message.
        reason: String,
    },
}

/// Result alias of this crate.
pub type Result<T, E = ProvenanceError> = std::result::Result<T, E>;

impl ProvenanceError {
    /// Who can fix it. The user's configuration (a bad pin, digest, URL or version, a
    /// missing digest) and the user's project files are the user's; a failed download,
    /// a wrong digest, broken release content and disk errors are the environment (the
    /// README promises exit 3 for those).
    pub fn kind(&self) -> aibox_config::ErrorKind {
        use aibox_config::ErrorKind;
        match self {
            Self::Write(e) => e.kind(),
            Self::InvalidDigest { .. }
            | Self::NoDigest { .. }
            | Self::InsecureUrl { .. }
            | Self::Version { .. }
            | Self::Config { .. }
            | Self::UnknownPackage { .. }
            | Self::UnsafeDestination { .. }
            | Self::Record { .. } => ErrorKind::User,
            Self::Io { .. }
            | Self::DigestMismatch { .. }
            | Self::Sidecar { .. }
            | Self::Http { .. }
            | Self::HttpStatus { .. }
            | Self::RateLimited { .. }
            | Self::ReleasesApi { .. }
            | Self::TooLarge { .. }
            | Self::Redirects { .. }
            | Self::UnsafeEntry { .. }
            | Self::ArchiveLimit { .. }
            | Self::CorruptArchive { .. }
            | Self::Layout { .. }
            | Self::Catalog { .. }
            | Self::McpManifest { .. }
            | Self::TierCycle { .. }
            | Self::ChangedReleaseFile { .. }
            | Self::MissingScripts { .. } => ErrorKind::Environment,
        }
    }

    /// An error status, with the help that fits it: a 404 is a missing release asset,
    /// 401/403 a refusal, 5xx a server fault worth retrying.
    pub fn http_status(url: String, status: u16) -> Self {
        let hint = match status {
            404 | 410 => {
                "the release asset does not exist: check that `[processkit] version` \
                          names a published release and that the URL template is right"
            }
            401 | 403 => {
                "the server refused access; private releases need credentials aibox \
                          does not send: download the archive and use it as a local source"
            }
            500..=599 => {
                "the server failed (not a problem of the configuration); try again \
                          later"
            }
            _ => "an unexpected status; check the source URL",
        };
        Self::HttpStatus {
            url,
            status,
            hint: hint.to_owned(),
        }
    }

    /// Wraps an IO error with the action and path.
    pub fn io(
        action: &'static str,
        path: impl AsRef<std::path::Path>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}

/// Most bytes of untrusted text (an archive's names, a decoder's message) an error
/// message quotes.
pub(crate) const QUOTE_LIMIT: usize = 256;

/// Shows a possibly hostile name safely: lossy UTF-8, control characters escaped, at
/// most [`QUOTE_LIMIT`] bytes of it (then an ellipsis and its length), so a name of any
/// size gives a short message.
pub(crate) fn show_name(raw: &[u8]) -> String {
    let head = &raw[..raw.len().min(QUOTE_LIMIT)];
    let shown: String = String::from_utf8_lossy(head)
        .chars()
        .flat_map(char::escape_default)
        .collect();
    if head.len() < raw.len() {
        format!("{shown}… ({} bytes)", raw.len())
    } else {
        shown
    }
}

/// What a layout error adds to its reason when `version` is older than v0.8.0, the first
/// release with the layout aibox installs, and the error is one such a release causes (no
/// `PROVENANCE.toml` or `[files]`, no `context/`, another top directory); empty otherwise,
/// so a newer release's missing file is not blamed on its age.
pub(crate) fn old_layout(version: Option<&str>) -> &'static str {
    let old = version.is_some_and(|v| {
        crate::releases::version_order(v, "v0.8.0") == Some(std::cmp::Ordering::Less)
    });
    if old {
        "; releases before v0.8.0 do not have this layout and are not supported: pin v0.8.0 \
         or later"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_help_is_present() {
        let cases = [
            (
                ProvenanceError::NoDigest {
                    what: "x".into(),
                    computed: "y".into(),
                },
                "aibox::provenance::unverified",
            ),
            (
                ProvenanceError::UnsafeEntry {
                    entry: "e".into(),
                    reason: "r".into(),
                },
                "aibox::provenance::unsafe_entry",
            ),
            (
                ProvenanceError::MissingScripts {
                    scripts: vec!["a".into()],
                },
                "aibox::provenance::missing_scripts",
            ),
            (
                ProvenanceError::http_status("u".into(), 404),
                "aibox::provenance::http_status",
            ),
        ];
        for (err, code) in cases {
            assert_eq!(err.code().map(|c| c.to_string()).as_deref(), Some(code));
            assert!(err.help().is_some(), "{code} has no help");
        }
        assert_eq!(show_name(b"a\0b\xff"), "a\\u{0}b\\u{fffd}");
    }
}
