//! What the caller knows about a skill beyond its files: where it came from and what
//! it is allowed to contact.

use serde::{Deserialize, Serialize};

/// Where a skill's files came from (review point 6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SkillOrigin {
    /// A release archive.
    Release {
        /// Where releases come from (URL, archive or directory).
        source: String,
        /// The release version as configured or locked.
        version: String,
        /// SHA-256 of the archive recorded in `aibox.lock`, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
        /// Whether the archive's digest was verified on this run.
        verified: bool,
    },
    /// A git checkout.
    Git {
        /// Repository URL.
        url: String,
        /// The reference it is pinned to: a commit, branch or tag name.
        reference: String,
    },
    /// A local directory reviewed as it is (for example `aibox skill review PATH`).
    LocalPath {
        /// The directory.
        path: String,
    },
    /// Nothing is known about the origin.
    #[default]
    Unknown,
}

/// Inputs of a review besides the skill directory.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReviewContext {
    /// Where the skill came from.
    pub origin: SkillOrigin,
    /// Hosts the skill declares it contacts (exact names, or `*.example.com`).
    #[serde(default)]
    pub declared_hosts: Vec<String>,
    /// The manifest's `per_server_header` digest for `mcp/server.py`, if known.
    #[serde(default)]
    pub expected_header_sha256: Option<String>,
    /// The manifest's `per_skill` digest for `mcp/mcp-config.json`, if known.
    #[serde(default)]
    pub expected_config_sha256: Option<String>,
}

impl ReviewContext {
    /// A context for a skill from a release archive whose digest was verified.
    pub fn verified_release(
        source: impl Into<String>,
        version: impl Into<String>,
        sha256: impl Into<String>,
    ) -> Self {
        Self {
            origin: SkillOrigin::Release {
                source: source.into(),
                version: version.into(),
                sha256: Some(sha256.into()),
                verified: true,
            },
            ..Self::default()
        }
    }
}
