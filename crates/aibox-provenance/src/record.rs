//! Install records: the lock's `[processkit]` section and the live marker
//! `context/.processkit-provenance.toml`, which also carries the per-file manifest
//! (project path → SHA-256) of everything installed.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::digest::Sha256;
use crate::error::{ProvenanceError, Result};
use crate::source::Verification;

/// Project path of the live marker.
pub const MARKER_PATH: &str = "context/.processkit-provenance.toml";
/// Project directory of the per-version snapshots.
pub const SNAPSHOT_DIR: &str = "context/templates/processkit";
/// The marker schema this crate writes.
pub const MARKER_SCHEMA: u32 = 1;

/// `aibox.lock [processkit]`: what is installed, with a concrete version and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcesskitLock {
    /// Source as configured.
    pub source: String,
    /// Concrete version; never `latest`.
    pub version: String,
    /// Content path inside the source, when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_path: Option<String>,
    /// Digest of the release archive (or directory listing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_asset_sha256: Option<Sha256>,
    /// How the digest was established at install time.
    #[serde(default = "unverified")]
    pub verification: Verification,
    /// RFC 3339 time of the install; unchanged while nothing else changes.
    pub installed_at: String,
    /// The reference-compatible `v2:` fingerprint (spec §14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processkit_install_hash: Option<String>,
}

fn unverified() -> Verification {
    Verification::Unverified
}

impl ProcesskitLock {
    /// Reads `[processkit]` from an `aibox.lock` file; `Ok(None)` when the file or the
    /// section is absent or the version is `unset`.
    pub fn read_from_lock_file(path: &Path) -> Result<Option<Self>> {
        let text = match fs_err::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ProvenanceError::io("read", path, e)),
        };
        let bad = |reason: String| ProvenanceError::Record {
            path: path.display().to_string(),
            reason,
        };
        let mut table: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let Some(section) = table.remove("processkit") else {
            return Ok(None);
        };
        let lock: Self = section
            .try_into()
            .map_err(|e: toml::de::Error| bad(e.to_string()))?;
        Ok((lock.version != "unset").then_some(lock))
    }
}

/// `[install]` of the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerInstall {
    /// Installed version.
    pub processkit_version: String,
    /// Source as configured.
    pub processkit_source: String,
    /// RFC 3339 install time.
    pub installed_at: String,
    /// aibox version that installed it.
    pub cli_version: String,
    /// Selected skills, dependencies included.
    #[serde(default)]
    pub skills: Vec<String>,
    /// Skills installed only because selected skills `use` them: name → those skills
    /// (what `aibox skill list` shows as "dependency of").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dependencies: BTreeMap<String, Vec<String>>,
}

/// `[manifest]` of the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerManifest {
    /// Skills in `context/skills/processkit/` of the release.
    pub skill_count: usize,
    /// Files directly in `context/schemas/`.
    pub schema_count: usize,
    /// Files directly in `context/processes/`.
    pub process_count: usize,
    /// Files directly in `context/state-machines/`.
    pub state_machine_count: usize,
    /// Digest of the release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_asset_sha256: Option<Sha256>,
    /// How it was verified.
    pub verification: Verification,
    /// `v2:` fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_hash: Option<String>,
    /// Digest of the snapshot `context/templates/processkit/<version>/`: the SHA-256 of
    /// the `sha256sum`-style listing of every release file (`source::tree_digest`), so
    /// the integrity check sees an edit there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_sha256: Option<Sha256>,
}

/// The live marker with the per-file manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// Always [`MARKER_SCHEMA`].
    pub schema_version: u32,
    /// Install identity.
    pub install: MarkerInstall,
    /// Counts and digests.
    pub manifest: MarkerManifest,
    /// Installer-owned files: project path → SHA-256 as installed.
    #[serde(default)]
    pub files: BTreeMap<String, Sha256>,
    /// User-owned files (agent-mutable settings, seed `AGENTS.md`): tracked, never
    /// overwritten, never reported as modified.
    #[serde(default)]
    pub user_files: BTreeMap<String, Sha256>,
}

impl Marker {
    /// Renders the marker (deterministic: sorted tables).
    pub fn render(&self) -> String {
        let body = toml::to_string(self).unwrap_or_default();
        format!("# aibox-managed install marker; do not edit\n{body}")
    }

    /// Reads the marker of a project; `None` when missing, unparseable or of an unknown
    /// schema (it is rewritten on the next apply, never an error).
    pub fn read(project_root: &Path) -> Option<Self> {
        let text = fs_err::read_to_string(project_root.join(MARKER_PATH)).ok()?;
        Self::parse(&text)
    }

    /// Parses a marker text; `None` when unparseable or of an unknown schema.
    pub fn parse(text: &str) -> Option<Self> {
        let marker: Self = toml::from_str(text).ok()?;
        (marker.schema_version == MARKER_SCHEMA).then_some(marker)
    }
}

/// One file an interrupted plan was about to write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentWrite {
    /// Digest of the contents the plan writes.
    pub new: Sha256,
    /// Digest of the live file the plan saw (`None`: it was missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Sha256>,
}

/// What an install plan is about to do, recorded (under `.aibox/`) before its first
/// write and dropped after the lock is written. The marker is written only after every
/// content file is durable, so after a kill the marker still names the base the plan
/// started from; with this record the next run re-plans exactly the interrupted plan
/// (same classification, same migration document, same timestamps) instead of mistaking
/// the files it already wrote for local edits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// Release being installed.
    pub version: String,
    /// Its digest.
    pub release_asset_sha256: Sha256,
    /// Digest of the marker text the plan started from (`None`: no marker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_marker_sha256: Option<Sha256>,
    /// Selected skills.
    pub skills: Vec<String>,
    /// The plan's time (install time, migration id).
    pub now: String,
    /// Every content file the plan writes: project path → digests.
    #[serde(default)]
    pub writes: BTreeMap<String, IntentWrite>,
    /// Every file the plan removes: project path → digest of the removed file.
    #[serde(default)]
    pub removals: BTreeMap<String, Sha256>,
}

impl Intent {
    /// Renders the record.
    pub fn render(&self) -> String {
        let body = toml::to_string(self).unwrap_or_default();
        format!("# aibox: processkit install in progress; do not edit\n{body}")
    }

    /// Parses a record; `None` when damaged (the next run then re-plans from the marker).
    pub fn parse(text: &str) -> Option<Self> {
        toml::from_str(text).ok()
    }
}
