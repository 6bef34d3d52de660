//! Per-file integrity of an installed processkit release (read-only). The outcome ladder
//! is checked in order and the first failing rung wins; drift lists name every file.

use std::borrow::Cow;
use std::path::Path;

use serde::Serialize;

use crate::catalog::skill_of;
use crate::digest::Sha256;
use crate::error::Result;
use crate::install::Live;
use crate::record::{MARKER_PATH, Marker, ProcesskitLock, SNAPSHOT_DIR};
use crate::source::Verification;

/// Bytes read at a time while hashing (one buffer for the whole check).
const HASH_BUFFER: usize = 64 * 1024;

/// Snapshot files named in a report; more are counted.
pub const SNAPSHOT_NAMED: usize = 20;

/// Directories whose every file must be in the manifest.
const MANAGED_DIRS: [&str; 4] = [
    "context/skills",
    "context/schemas",
    "context/state-machines",
    "context/processes",
];

/// The overall outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntegrityStatus {
    /// An apply was interrupted (or is running): its intent record
    /// ([`crate::record::INTENT_PATH`]) is there, so the files are half of one install and
    /// half of another until `aibox apply` finishes it. Checked first: the other rungs
    /// would call aibox's own unfinished work the user's drift.
    #[serde(rename = "interrupted-apply")]
    Interrupted,
    /// No `[processkit]` in the lock: nothing to check.
    NotInstalled,
    /// The live marker (with the manifest) is missing or unreadable.
    MissingMarker,
    /// Lock, marker and snapshot disagree about the version.
    VersionMismatch,
    /// The snapshot of the installed version is missing (regenerable by `aibox apply`).
    MissingSnapshot,
    /// Files were modified, deleted or added.
    Drifted,
    /// Everything matches, but the release was installed without verification.
    Unverified,
    /// Everything matches.
    Healthy,
}

impl IntegrityStatus {
    /// What to do about this outcome, when one command does it.
    #[must_use]
    pub fn fix(self) -> Option<&'static str> {
        match self {
            Self::Interrupted => Some("run `aibox apply` to finish the interrupted apply"),
            Self::MissingSnapshot => Some("run `aibox apply`: it writes the snapshot again"),
            _ => None,
        }
    }
}

/// The integrity report; serialisable for `--output json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntegrityReport {
    /// Outcome.
    pub status: IntegrityStatus,
    /// Version in `aibox.lock`.
    pub lock_version: Option<String>,
    /// Version in the live marker.
    pub marker_version: Option<String>,
    /// Whether `context/templates/processkit/<lock version>/PROVENANCE.toml` exists.
    pub snapshot_present: bool,
    /// How the installed release was verified.
    pub verification: Option<Verification>,
    /// Installer-owned files whose content differs from the manifest.
    pub modified: Vec<String>,
    /// Installer-owned files that are gone.
    pub missing: Vec<String>,
    /// Files in managed directories that the manifest does not know.
    pub unexpected: Vec<String>,
    /// User-owned files that differ from what was installed (informational).
    pub user_modified: Vec<String>,
    /// Files of the snapshot `context/templates/processkit/<version>/` that differ from
    /// the release, each with what is wrong: `<path> (changed)`, `<path> (missing)` or
    /// `<path> (not in the release)`, the first [`SNAPSHOT_NAMED`] in path order, then
    /// `… and N more`. Installed files are named from the marker; the others from the
    /// release's listing in the download cache once it matches the marker's
    /// `snapshot_sha256`. Without it only the snapshot folder is named (`<folder>/`).
    pub snapshot_modified: Vec<String>,
    /// How many snapshot files differ (`snapshot_modified` names at most
    /// [`SNAPSHOT_NAMED`]; the folder alone counts one).
    pub snapshot_differing: usize,
    /// Number of files verified.
    pub checked: usize,
}

impl IntegrityReport {
    /// Exit status for scripts: 0 for healthy, not installed or unverified-but-intact.
    pub fn exit_code(&self) -> i32 {
        match self.status {
            IntegrityStatus::Healthy
            | IntegrityStatus::NotInstalled
            | IntegrityStatus::Unverified => 0,
            _ => 1,
        }
    }
}

/// Hashes the regular file at `path` through `buf`; `None` when it is missing,
/// unreadable or not a regular file (a final symbolic link is not followed, a FIFO is
/// not waited on). One `open` and one `fstat` per file and one buffer for all of them:
/// the check hashes the same files as fast as `sha256sum` does (`cargo xtask bench`).
fn hash_live(path: &Path, buf: &mut [u8]) -> Option<Sha256> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty()).ok()?;
    // fs_err has no constructor from a descriptor; the file is wrapped at once.
    #[allow(clippy::disallowed_types)]
    let file = fs_err::File::from_parts(std::fs::File::from(fd), path);
    if !file.metadata().ok()?.file_type().is_file() {
        return None;
    }
    Sha256::of_reader_with(file, buf).ok()
}

/// Calls `visit` with every non-folder entry below `rel` (root-relative) in the byte
/// order of their paths, holding only the entries of the folders on the way down: a list
/// of every path, sorted afterwards, was the peak of `doctor` (5.1 MB of a 30x
/// processkit snapshot's paths). Siblings are sorted by name with a `/` after a
/// folder's, which is the order of their paths: everything in a folder starts with its
/// name and a `/`, so it sorts where that name with a `/` does. The writer's temp files
/// a killed apply left ([`aibox_fs::is_temp_name`]) are not visited.
pub fn walk_sorted(root: &Path, rel: &str, visit: &mut dyn FnMut(&str)) {
    let Ok(rd) = fs_err::read_dir(root.join(rel)) else {
        return;
    };
    let mut entries: Vec<(String, bool)> = rd
        .flatten()
        .filter_map(|e| {
            let folder = e.file_type().ok()?.is_dir();
            let mut name = e.file_name().to_string_lossy().into_owned();
            // A killed apply's temp file is nobody's content (the next apply removes it).
            if !folder && aibox_fs::is_temp_name(&name) {
                return None;
            }
            if folder {
                name.push('/');
            }
            Some((name, folder))
        })
        .collect();
    entries.sort_unstable();
    for (name, folder) in entries {
        let child = format!("{rel}/{name}");
        if folder {
            walk_sorted(root, child.strip_suffix('/').unwrap_or(&child), visit);
        } else {
            visit(&child);
        }
    }
}

/// Checks the install under `root` against `aibox.lock`, the marker's per-file
/// manifest and the snapshot, re-hashing every byte (`doctor --integrity`). A snapshot
/// that differs is named file by file with the help of the default download cache.
pub fn integrity(root: &Path) -> Result<IntegrityReport> {
    integrity_with(root, crate::Cache::default_location().as_ref())
}

/// [`integrity`], naming the snapshot files that differ from the release's listing in
/// `cache` (when it holds the release).
pub fn integrity_with(root: &Path, cache: Option<&crate::Cache>) -> Result<IntegrityReport> {
    integrity_of(
        root,
        &crate::table::SharedPathTable::new(),
        || Marker::read(root).map(Cow::Owned),
        cache,
    )
}

/// [`integrity_known`] from the scan of the same run ([`crate::scan`]): the live states
/// it found and the marker it parsed (read once per run, not once per reader: at ten
/// times processkit's size each parse held every installed path again).
pub fn integrity_scanned(root: &Path, scan: &crate::LiveScan) -> Result<IntegrityReport> {
    integrity_of(
        root,
        &scan.files,
        || scan.parsed_marker.as_ref().map(Cow::Borrowed),
        None,
    )
}

/// [`integrity`], taking the live state of the installed files in `known` (root-relative
/// paths, as the scan of the same run found them through the stat cache) instead of
/// hashing them again: plain `doctor` summarises from the scan its resolve just made.
/// Files `known` does not name (the snapshot, anything new) are hashed.
pub fn integrity_known(
    root: &Path,
    known: &crate::table::SharedPathTable<Live>,
) -> Result<IntegrityReport> {
    integrity_of(root, known, || Marker::read(root).map(Cow::Owned), None)
}

/// [`integrity_known`] with the marker from `marker` (called once the lock says there is
/// an install), naming snapshot drift with the release listing of `cache`.
fn integrity_of<'m>(
    root: &Path,
    known: &crate::table::SharedPathTable<Live>,
    marker: impl FnOnce() -> Option<Cow<'m, Marker>>,
    cache: Option<&crate::Cache>,
) -> Result<IntegrityReport> {
    let lock = ProcesskitLock::read_from_lock_file(&root.join("aibox.lock"))?;
    let mut report = IntegrityReport {
        status: IntegrityStatus::Healthy,
        lock_version: lock.as_ref().map(|l| l.version.clone()),
        marker_version: None,
        snapshot_present: false,
        verification: lock.as_ref().map(|l| l.verification),
        modified: Vec::new(),
        missing: Vec::new(),
        unexpected: Vec::new(),
        user_modified: Vec::new(),
        snapshot_modified: Vec::new(),
        snapshot_differing: 0,
        checked: 0,
    };
    if fs_err::symlink_metadata(root.join(crate::record::INTENT_PATH)).is_ok() {
        report.status = IntegrityStatus::Interrupted;
        return Ok(report);
    }
    let Some(lock) = lock else {
        report.status = IntegrityStatus::NotInstalled;
        return Ok(report);
    };
    report.snapshot_present = root
        .join(SNAPSHOT_DIR)
        .join(&lock.version)
        .join("PROVENANCE.toml")
        .is_file();
    let Some(marker) = marker() else {
        report.status = IntegrityStatus::MissingMarker;
        return Ok(report);
    };
    report.marker_version = Some(marker.install.processkit_version.clone());
    if marker.install.processkit_version != lock.version
        || marker.manifest.release_asset_sha256 != lock.release_asset_sha256
    {
        report.status = IntegrityStatus::VersionMismatch;
        return Ok(report);
    }
    let mut buf = vec![0u8; HASH_BUFFER];
    let live = |path: &str, buf: &mut [u8]| match known.get(path) {
        Some(Live::File(h)) => Some(*h),
        Some(Live::Missing | Live::Odd) => None,
        None => hash_live(&root.join(path), buf),
    };
    for (path, expected) in &marker.files {
        report.checked += 1;
        match live(path, &mut buf) {
            None => report.missing.push(path.to_owned()),
            Some(h) if h != *expected => report.modified.push(path.to_owned()),
            Some(_) => {}
        }
    }
    for (path, expected) in &marker.user_files {
        report.checked += 1;
        if live(path, &mut buf) != Some(*expected) {
            report.user_modified.push(path.to_owned());
        }
    }
    let unexpected = |p: &str| {
        !marker.files.contains_key(p)
            && !marker.user_files.contains_key(p)
            && skill_of(p)
                .is_none_or(|(c, s)| !p.starts_with(&format!("context/skills/{c}/{s}/config/")))
            && p != MARKER_PATH
    };
    for dir in MANAGED_DIRS {
        walk_sorted(root, dir, &mut |p| {
            if unexpected(p) {
                report.unexpected.push(p.to_owned());
            }
        });
    }
    report.unexpected.sort();
    if report.snapshot_present {
        let drift = snapshot_drift(
            root,
            &lock.version,
            &marker,
            &mut report.checked,
            &mut buf,
            cache,
        );
        (report.snapshot_modified, report.snapshot_differing) = bounded(drift);
    }
    report.status = if !report.snapshot_present {
        IntegrityStatus::MissingSnapshot
    } else if !(report.modified.is_empty()
        && report.missing.is_empty()
        && report.unexpected.is_empty()
        && report.snapshot_modified.is_empty())
    {
        IntegrityStatus::Drifted
    } else if lock.verification == Verification::Unverified {
        IntegrityStatus::Unverified
    } else {
        IntegrityStatus::Healthy
    };
    Ok(report)
}

/// `drift` sorted, its first [`SNAPSHOT_NAMED`] entries and `… and N more`, with the
/// full count.
fn bounded(mut drift: Vec<String>) -> (Vec<String>, usize) {
    drift.sort_unstable();
    let count = drift.len();
    if count > SNAPSHOT_NAMED {
        drift.truncate(SNAPSHOT_NAMED);
        drift.push(format!("… and {} more", count - SNAPSHOT_NAMED));
    }
    (drift, count)
}

/// Re-hashes the snapshot of `version` and compares it with the release: file by file
/// where the marker's manifest records the release's digest (the installed files: changed
/// or missing), and as a whole against the marker's `snapshot_sha256` (every release
/// file). When the whole differs, the release's listing in `cache` (trusted only when it
/// hashes to that same digest) names every changed, missing and added file; without it
/// the folder is named when no installed file explains the difference.
fn snapshot_drift(
    root: &Path,
    version: &str,
    marker: &Marker,
    checked: &mut usize,
    buf: &mut [u8],
    cache: Option<&crate::Cache>,
) -> Vec<String> {
    use sha2::Digest as _;
    let dir = format!("{SNAPSHOT_DIR}/{version}");
    let prefix = format!("{dir}/");
    let mut drift = Vec::new();
    // The `tree_digest` listing, hashed line by line as it is made (never held whole),
    // in path order as the files are found.
    let mut listing = sha2::Sha256::new();
    let mut found = 0_usize;
    let mut on_file = |path: &str, live: Option<Sha256>| {
        *checked += 1;
        let rel = path.strip_prefix(&prefix).unwrap_or(path);
        if let Some(h) = live {
            let mut hex = [0_u8; 64];
            // 64 hex digits always fit.
            let _ = hex::encode_to_slice(h.as_bytes(), &mut hex);
            listing.update(hex);
        }
        listing.update(b"  ");
        listing.update(rel.as_bytes());
        listing.update(b"\n");
        let installed = crate::install::installed_path(rel);
        if let Some(expected) = marker.files.get(installed) {
            found += 1;
            if live != Some(*expected) {
                drift.push(format!("{path} (changed)"));
            }
        }
    };
    let mut batches = Batches::new(root);
    walk_sorted(root, &dir, &mut |path| batches.push(path, &mut on_file));
    batches.flush(&mut on_file);
    // An installed file's copy the walk did not meet is gone (looked for only then).
    if found < marker.files.len() {
        for (installed, _) in &marker.files {
            let path = format!("{prefix}{}", crate::install::release_path(installed));
            if fs_err::symlink_metadata(root.join(&path)).is_err() {
                drift.push(format!("{path} (missing)"));
            }
        }
    }
    let Some(expected) = marker.manifest.snapshot_sha256 else {
        return drift;
    };
    if Sha256::from_bytes(listing.finalize().into()) == expected {
        return drift;
    }
    let release = marker
        .manifest
        .release_asset_sha256
        .zip(cache)
        .and_then(|(digest, cache)| cache.listing(&digest))
        .filter(|files| {
            crate::source::tree_digest_of(files.iter().map(|(p, f)| (&**p, f.sha256))) == expected
        });
    match release {
        Some(files) => named_drift(root, &dir, &files, buf),
        None if drift.is_empty() => vec![format!("{dir}/")],
        None => drift,
    }
}

/// Files hashed a batch at a time, in the order they were pushed, from
/// [`PARALLEL_HASHES`] files in a batch on with its second half on a helper thread
/// ([`crate::halves::in_halves`]). The snapshot's files are most of what plain `doctor`
/// hashes (every one of them, on each run), and of `doctor --integrity`'s bytes.
struct Batches<'a> {
    root: &'a Path,
    paths: Vec<String>,
}

/// Files per batch of [`Batches`].
const HASH_BATCH: usize = 128;

/// From this many files a batch is split between two threads (below, the thread costs
/// more than it saves).
const PARALLEL_HASHES: usize = 32;

impl<'a> Batches<'a> {
    fn new(root: &'a Path) -> Self {
        Self {
            root,
            paths: Vec::with_capacity(HASH_BATCH),
        }
    }

    /// Adds the root-relative `path`; `done` gets each path of a full batch with its
    /// digest ([`hash_live`]), in order.
    fn push(&mut self, path: &str, done: &mut dyn FnMut(&str, Option<Sha256>)) {
        self.paths.push(path.to_owned());
        if self.paths.len() == HASH_BATCH {
            self.flush(done);
        }
    }

    /// Hashes what is left and hands it to `done`.
    fn flush(&mut self, done: &mut dyn FnMut(&str, Option<Sha256>)) {
        let root = self.root;
        let digests =
            crate::halves::in_halves(&self.paths, PARALLEL_HASHES, "aibox-hash", |part| {
                let mut buf = vec![0; HASH_BUFFER];
                part.iter()
                    .map(|p| hash_live(&root.join(p), &mut buf))
                    .collect()
            });
        for (path, digest) in self.paths.drain(..).zip(digests) {
            done(&path, digest);
        }
    }
}

/// Every file of the snapshot in `dir` that differs from the release's listing `files`:
/// changed, missing or not in the release (the drift case only: it hashes the snapshot
/// a second time).
fn named_drift(
    root: &Path,
    dir: &str,
    files: &std::collections::BTreeMap<std::sync::Arc<str>, crate::extract::PayloadFile>,
    buf: &mut [u8],
) -> Vec<String> {
    let prefix = format!("{dir}/");
    let mut drift = Vec::new();
    let mut found = 0_usize;
    walk_sorted(root, dir, &mut |path| {
        let rel = path.strip_prefix(&prefix).unwrap_or(path);
        match files.get(rel) {
            None => drift.push(format!("{path} (not in the release)")),
            Some(f) => {
                found += 1;
                if hash_live(&root.join(path), buf) != Some(f.sha256) {
                    drift.push(format!("{path} (changed)"));
                }
            }
        }
    });
    if found < files.len() {
        for rel in files.keys() {
            let path = format!("{prefix}{rel}");
            if fs_err::symlink_metadata(root.join(&path)).is_err() {
                drift.push(format!("{path} (missing)"));
            }
        }
    }
    drift
}

#[cfg(test)]
mod tests {
    /// The sorted walk finds every file (not the folders) in the order of their paths as
    /// strings, where a folder's name and a sibling's that extends it (`a` and `a-b`,
    /// `a.c`) sort differently with and without the `/` that follows a folder's name.
    #[test]
    fn the_sorted_walk_visits_files_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let files = [
            "t/a/x",
            "t/a/y z",
            "t/a-b",
            "t/a.c",
            "t/a0/q",
            "t/A",
            "t/b/c/d/e",
            "t/b/c-d",
            "t/b/c/e",
            "t/ü",
            "t/a/-",
            "t/a/.hidden",
        ];
        for f in files {
            let path = root.join(f);
            fs_err::create_dir_all(path.parent().unwrap()).unwrap();
            fs_err::write(&path, f).unwrap();
        }
        fs_err::create_dir_all(root.join("t/empty/deeper")).unwrap();
        let mut visited = Vec::new();
        super::walk_sorted(root, "t", &mut |p| visited.push(p.to_owned()));
        let mut expected: Vec<String> = files.iter().map(|f| (*f).to_owned()).collect();
        expected.sort();
        assert_eq!(visited, expected);
        let mut none = Vec::new();
        super::walk_sorted(root, "missing", &mut |p| none.push(p.to_owned()));
        assert!(none.is_empty());
    }
}
