//! Installing and upgrading processkit content without losing a local byte.
//!
//! [`plan_install`] compares three ways BEFORE anything is written: base R (the per-file
//! manifest of the previous install), the new release C and the live file L. Only files
//! that are safe to change are written: new upstream files that do not exist locally,
//! and files changed upstream whose live copy still equals the base. Files removed
//! upstream (or deselected) are deleted only when the live copy still equals the base.
//! Every local edit is kept; conflicts keep the live file and park the upstream copy in
//! the migration document's folder. [`apply_plan`] then writes the plan atomically.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use aibox_config::PlanPath;
use camino::Utf8Path;
use serde::Serialize;

use crate::catalog::{Catalog, skill_of};
use crate::digest::Sha256;
use crate::error::{ProvenanceError, Result};

use crate::extract::{Payload, PayloadFile, Streamed};
use crate::record::{
    Intent, IntentWrite, IntentWrites, MARKER_PATH, MARKER_SCHEMA, Marker, MarkerInstall,
    MarkerManifest, ProcesskitLock, SNAPSHOT_DIR,
};
use crate::servers::{ProcesskitServer, servers};
use crate::source::VerifiedRelease;
use crate::statcache::StatCache;
use crate::table::{PathTable, SharedPathTable};

/// Three-way class of one file (processkit's migration vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Same everywhere (or already at the new upstream).
    Unchanged,
    /// Edited or deleted locally, unchanged upstream: kept.
    ChangedLocallyOnly,
    /// Changed upstream, untouched locally: updated.
    ChangedUpstreamOnly,
    /// Changed on both sides: live file kept, upstream proposed.
    Conflict,
    /// New upstream: added.
    NewUpstream,
    /// Gone upstream (or deselected): removed if untouched, else kept.
    RemovedUpstream,
}

impl Class {
    /// The name used in migration documents.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unchanged => "unchanged",
            Self::ChangedLocallyOnly => "changed-locally-only",
            Self::ChangedUpstreamOnly => "changed-upstream-only",
            Self::Conflict => "conflict",
            Self::NewUpstream => "new-upstream",
            Self::RemovedUpstream => "removed-upstream",
        }
    }
}

/// What the plan does with one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Nothing to do.
    None,
    /// Write the upstream version.
    Write,
    /// Delete the (untouched) live file.
    Remove,
    /// Keep the live file although upstream differs.
    Keep,
}

/// One classified file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDecision {
    /// Project path: the release's own path text, shared with its manifest, for every
    /// file whose project path is its release path (all but `INDEX.md`): a copy per
    /// decision was 0.64 MB at 10x the real release, held at planning's peak.
    pub path: Arc<str>,
    /// Release path, when it differs from the project path (`INDEX.md` only): most
    /// decisions carry one path, not two copies of it (see [`Self::release_path`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release_path: Option<Box<str>>,
    /// Class.
    pub class: Class,
    /// Action.
    pub action: Action,
    /// User-owned (agent-mutable settings, `AGENTS.md`).
    pub user_owned: bool,
    /// The file's three versions by digest (see [`Self::digests`]).
    #[serde(skip)]
    digests: Sides,
}

/// [`Digests`] as a decision holds them: the upstream digest, and the base and the live
/// one as what they nearly always are (none, or the upstream one), the rare others
/// behind one pointer. 48 bytes, not 99: a plan holds a decision per classified file
/// (25,000 at 30x processkit) through its memory peak.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sides {
    upstream: Option<Sha256>,
    base: Side,
    live: Side,
    /// The base and the live digest when either is [`Side::Other`].
    others: Option<Box<[Option<Sha256>; 2]>>,
}

/// What the base or the live digest of a [`Sides`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// None: no file on that side.
    Absent,
    /// The upstream digest.
    Upstream,
    /// Another digest, in [`Sides::others`].
    Other,
}

impl Sides {
    fn new(d: Digests) -> Self {
        let side = |digest: Option<Sha256>| match digest {
            None => Side::Absent,
            Some(h) if Some(h) == d.upstream => Side::Upstream,
            Some(_) => Side::Other,
        };
        let (base, live) = (side(d.base), side(d.live));
        Self {
            upstream: d.upstream,
            base,
            live,
            others: (base == Side::Other || live == Side::Other)
                .then(|| Box::new([d.base, d.live])),
        }
    }

    fn get(&self) -> Digests {
        let side = |s: Side, i: usize| match s {
            Side::Absent => None,
            Side::Upstream => self.upstream,
            Side::Other => self.others.as_ref().and_then(|o| o[i]),
        };
        Digests {
            base: side(self.base, 0),
            upstream: self.upstream,
            live: side(self.live, 1),
        }
    }
}

/// A file's three versions by digest (see [`FileDecision::digests`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Digests {
    /// As recorded in the marker of the previous install.
    pub base: Option<Sha256>,
    /// In the release being installed.
    pub upstream: Option<Sha256>,
    /// On disk when the plan was made.
    pub live: Option<Sha256>,
}

/// Where the bytes of a file to write come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteData {
    /// Bytes made by aibox (migration documents) or of an in-memory payload.
    Bytes(Vec<u8>),
    /// A verified file of the release on disk, streamed by the writer.
    Copy(aibox_config::CopyFrom),
}

/// A file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWrite {
    /// Project path: the release's own name for the file when it installs at that path.
    pub path: PlanPath,
    /// Contents.
    pub data: WriteData,
    /// Written 0755 when true, else 0644.
    pub executable: bool,
}

impl FileWrite {
    /// The write of release file `release_path` to project path `path`: a copy of the
    /// verified file when the payload is on disk (never read into memory here).
    pub fn from_payload(payload: &Payload, release_path: &str, path: PlanPath) -> Result<Self> {
        let executable = payload.entry(release_path)?.executable;
        let data = match payload.copy_from(release_path) {
            Some(c) => WriteData::Copy(c),
            None => WriteData::Bytes(payload.read(release_path)?),
        };
        Ok(Self {
            path,
            data,
            executable,
        })
    }
}

/// The snapshot of the installed version, `context/templates/processkit/<version>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotPlan {
    /// Project directory of the snapshot.
    pub dir: String,
    /// Files below `dir` today that are not in the release (root-relative, sorted), to
    /// remove: left by an interrupted upgrade, or added by hand.
    pub extras: Vec<String>,
    /// The previous version's snapshot folder (root-relative), when `dir` does not exist
    /// yet: an apply may move it into place first, so that only the files that differ
    /// between the two releases are copied (an upgrade changes a few dozen of several
    /// hundred). Without the move the result is the same, only slower.
    pub move_from: Option<String>,
}

impl SnapshotPlan {
    /// The snapshot's writes, one per file of `payload` (the plan's release), at its
    /// project path below [`Self::dir`]. Made as they are iterated: a list of them (a
    /// path and a source per release file) was held beside the plan's other per-file
    /// structures.
    pub fn writes<'a>(
        &'a self,
        payload: &'a Payload,
    ) -> impl Iterator<Item = Result<FileWrite>> + 'a {
        // Paths at their length: `format!` gave one of 80 bytes 145 (1.2 MB at 10x).
        payload.files.keys().map(|rel| {
            let path = aibox_fs::join_exact(&self.dir, rel);
            FileWrite::from_payload(payload, rel, path.into())
        })
    }
}

/// Settings of a plan that do not come from the release.
#[derive(Debug, Clone)]
pub struct PlanOptions<'a> {
    /// `[context] packages`.
    pub packages: &'a [String],
    /// `[skills] include`.
    pub include: &'a [String],
    /// `[skills] exclude`.
    pub exclude: &'a [String],
    /// Use the gateway when its skill is installed.
    pub prefer_gateway: bool,
    /// `[processkit] src_path`, recorded in the lock.
    pub src_path: Option<&'a str>,
    /// RFC 3339 time of this run (recorded only when something changed).
    pub now: &'a str,
    /// aibox version.
    pub cli_version: &'a str,
}

/// Everything an install or upgrade will do, computed before writing anything.
#[derive(Debug, Clone)]
pub struct InstallPlan {
    /// Version installed before this run (from the marker), if any.
    pub from_version: Option<String>,
    /// Version being installed.
    pub to_version: String,
    /// Every classified file, sorted by path.
    pub decisions: Vec<FileDecision>,
    /// Files to write.
    pub writes: Vec<FileWrite>,
    /// Files to delete.
    pub removals: Vec<String>,
    /// The snapshot to (re)write, when missing or outdated.
    pub snapshot: Option<SnapshotPlan>,
    /// Snapshot directories of other versions to delete (regenerable).
    pub stale_snapshots: Vec<String>,
    /// The pending migration document (id) of an unfinished run this plan undoes, to
    /// delete with its parked copies (`<id>.upstream/`).
    pub undone_migration: Option<String>,
    /// Migration document and parked upstream copies of conflicting files.
    pub migration: Option<Vec<FileWrite>>,
    /// New marker, written from its parts (shared: the stat cache's digests after the
    /// apply are read from it, see [`Self::take_live_after`]).
    pub marker: Arc<crate::record::MarkerText>,
    /// Whether the marker differs from the live one.
    pub marker_changed: bool,
    /// New `aibox.lock [processkit]` section.
    pub lock: ProcesskitLock,
    /// MCP servers to register.
    pub servers: Vec<ProcesskitServer>,
    /// Recomputed `aggregate_sha256` of the release's MCP manifest: re-merge the harness
    /// configs whenever it differs from the value at the last merge.
    pub mcp_aggregate_sha256: Option<String>,
    /// Selected skills.
    pub skills: BTreeSet<String>,
    /// Warnings (unknown names, version stamps, kept removals).
    pub warnings: Vec<String>,
    /// The record of this plan's writes and removals, to be stored before the first
    /// write ([`Intent::write_to`]); `None` for a no-op.
    pub intent: Option<Intent>,
    /// Whether the stat cache should be rewritten after applying: something changed,
    /// or files had to be re-hashed.
    pub stat_cache_stale: bool,
    /// The release payload the writes copy from (keeps a temporary unpack alive as long
    /// as the plan).
    pub payload: Payload,
}

/// What planning may reuse from earlier runs.
#[derive(Debug, Default, Clone, Copy)]
pub struct Hints<'a> {
    /// The intent record of an interrupted run (see [`plan_resume`]).
    pub interrupted: Option<&'a Intent>,
    /// The release that run was installing, when at hand (the one planned now when only
    /// the selection changed since, else from the download cache): a file that run was
    /// creating when it was killed is then known by its bytes, and undone with the rest
    /// of its work when the plan does not resume that run.
    pub abandoned_release: Option<&'a Payload>,
    /// The stat cache of the last apply: unchanged files are not re-hashed.
    pub stat_cache: Option<&'a StatCache>,
}

impl InstallPlan {
    /// True when applying would change nothing on disk.
    pub fn is_noop(&self) -> bool {
        self.writes.is_empty()
            && self.removals.is_empty()
            && self.snapshot.is_none()
            && self.stale_snapshots.is_empty()
            && self.undone_migration.is_none()
            && self.migration.is_none()
            && !self.marker_changed
    }

    /// Count of decisions per class.
    pub fn counts(&self) -> BTreeMap<Class, usize> {
        let mut m = BTreeMap::new();
        for d in &self.decisions {
            *m.entry(d.class).or_insert(0) += 1;
        }
        m
    }

    /// The digest `path` has once the plan is applied, `None` when it will not be a
    /// file this plan tracks (removed, missing, or never classified). Read from the
    /// decisions (sorted by path), not from a second per-file map.
    pub fn live_after(&self, path: &str) -> Option<Sha256> {
        self.decision(path)?.live_after()
    }

    /// Whether the plan classifies `path` (it has a decision for it).
    pub fn classifies(&self, path: &str) -> bool {
        self.decision(path).is_some()
    }

    fn decision(&self, path: &str) -> Option<&FileDecision> {
        let at = self
            .decisions
            .binary_search_by(|d| (*d.path).cmp(path))
            .ok()?;
        Some(&self.decisions[at])
    }

    /// Every tracked file's digest once the plan is applied (for the [`StatCache`]), as
    /// the planned marker ([`Self::marker`], shared) and the few files it does not tell:
    /// the marker records nearly every file with the digest it holds after the apply, so
    /// a list of its own (48 bytes a file, 0.4 MB at 10x processkit, held from planning
    /// to the end of the apply) repeated it. Leaves `decisions` empty.
    pub fn take_live_after(&mut self) -> LiveAfter {
        let marker = &self.marker;
        let decisions = std::mem::take(&mut self.decisions);
        let tables = marker.tables().is_some();
        let mut exceptions = SharedPathTable::new();
        for d in decisions {
            let after = d.live_after();
            let recorded = d.recorded().filter(|_| tables).map(|(_, digest)| digest);
            if after != recorded {
                // The decisions are sorted by path.
                exceptions.push(d.path, after);
            }
        }
        exceptions.shrink_to_fit();
        LiveAfter {
            marker: tables.then(|| Arc::clone(marker)),
            exceptions,
        }
    }
}

/// The digest each tracked file of an install holds once its plan is applied, in path
/// order (see [`InstallPlan::take_live_after`]): the planned marker's tables, but for
/// the exceptions.
#[derive(Debug, Clone, Default)]
pub struct LiveAfter {
    /// The planned marker, when it is written from its tables.
    marker: Option<Arc<crate::record::MarkerText>>,
    /// The files whose digest after the apply is not the one the marker records, sorted
    /// by path: a kept local edit, a file removed or not there (`None`); every file when
    /// the marker has no tables.
    exceptions: SharedPathTable<Option<Sha256>>,
}

impl LiveAfter {
    /// Every tracked file and the digest it holds after the apply, in path order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Sha256)> + '_ {
        let [files, user_files] = self
            .marker
            .as_ref()
            .and_then(|m| m.tables())
            .unwrap_or([&[], &[]]);
        // The marker's two tables are disjoint (a file is the user's or not).
        let recorded = merge_sorted(recorded_entries(files), recorded_entries(user_files));
        let exceptions = self.exceptions.iter().map(|(p, d)| (p, *d));
        merge_sorted(recorded, exceptions).filter_map(|(path, digest)| Some((path, digest?)))
    }
}

/// A marker table's entries as [`LiveAfter::iter`] merges them.
fn recorded_entries(
    table: &[crate::record::Recorded],
) -> impl Iterator<Item = (&str, Option<Sha256>)> {
    table.iter().map(|(p, d)| (&**p, Some(*d)))
}

/// The entries of `a` and `b` (each sorted by path) in path order; of a path in both,
/// `b`'s entry.
fn merge_sorted<'a, T>(
    a: impl Iterator<Item = (&'a str, T)>,
    b: impl Iterator<Item = (&'a str, T)>,
) -> impl Iterator<Item = (&'a str, T)> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if x.0 < y.0 => a.next(),
        (Some(x), Some(y)) if x.0 == y.0 => {
            a.next();
            b.next()
        }
        (_, Some(_)) => b.next(),
        (Some(_), None) => a.next(),
        (None, None) => None,
    })
}

impl FileDecision {
    /// The file's three versions by digest: as last installed (base), in the new
    /// release (upstream) and on disk when planned (live); `None` where a side has none.
    /// A migration document records them for each conflict, so `aibox migrate` can find
    /// the versions and tell when a file changed since the upgrade.
    pub fn digests(&self) -> Digests {
        self.digests.get()
    }

    /// Whether this is a local edit the apply keeps where upstream did not change the
    /// file (or dropped it): what `apply`'s summary and a migration document's count as
    /// "kept".
    pub fn is_kept_local_edit(&self) -> bool {
        let d = self.digests();
        matches!(
            (self.class, self.action),
            (
                Class::ChangedLocallyOnly | Class::RemovedUpstream,
                Action::Keep | Action::None
            )
        ) && d.live.is_some()
            && d.live != d.base
    }

    /// The release path of the file (its project path but for `INDEX.md`).
    pub fn release_path(&self) -> &str {
        self.release_path.as_deref().unwrap_or(&self.path)
    }

    /// The digest the live file has once its plan is applied: the upstream version when
    /// written, nothing when removed, else the live file as it is.
    fn live_after(&self) -> Option<Sha256> {
        match (self.action, self.digests.upstream) {
            (Action::Write, Some(upstream)) => Some(upstream),
            (Action::Remove, _) => None,
            _ => self.digests().live,
        }
    }

    /// Whether the marker records this file, and in which table (`Some(true)`: user
    /// files): every file of the new install set, recorded as the release ships it.
    fn recorded(&self) -> Option<(bool, Sha256)> {
        Some((self.user_owned, self.digests.upstream?))
    }
}

/// The marker's `[files]` (`user = false`) or `[user_files]` table of `decisions`.
fn recorded(
    decisions: &[FileDecision],
    user: bool,
) -> impl Iterator<Item = (&Arc<str>, Sha256)> + Clone {
    decisions.iter().filter_map(move |d| match d.recorded() {
        Some((u, digest)) if u == user => Some((&d.path, digest)),
        _ => None,
    })
}

/// The release's `INDEX.md` and the project path it is installed at: the one file whose
/// project path is not its release path.
pub(crate) const RELEASE_INDEX: (&str, &str) = ("INDEX.md", "context/INDEX.md");

/// The project path of release file `rel` (see [`RELEASE_INDEX`]).
pub(crate) fn installed_path(rel: &str) -> &str {
    if rel == RELEASE_INDEX.0 {
        RELEASE_INDEX.1
    } else {
        rel
    }
}

/// The release path of installed file `path` (see [`RELEASE_INDEX`]).
pub(crate) fn release_path(path: &str) -> &str {
    if path == RELEASE_INDEX.1 {
        RELEASE_INDEX.0
    } else {
        path
    }
}

/// Maps a release path to its project path and ownership, or `None` when the file is
/// catalog data or not selected.
/// The project path is the release path itself (borrowed) except for `INDEX.md`.
fn target<'a>(path: &'a str, selected: &BTreeSet<String>) -> Option<(Cow<'a, str>, bool)> {
    match path {
        "AGENTS.md" => return Some((Cow::Borrowed(path), true)),
        p if p == RELEASE_INDEX.0 => return Some((Cow::Borrowed(RELEASE_INDEX.1), false)),
        _ => {}
    }
    if !path.starts_with("context/")
        || path.starts_with("context/templates/")
        || path.starts_with("context/migrations/")
        || path == MARKER_PATH
        || path.rsplit('/').next() == Some("FORMAT.md")
    {
        return None;
    }
    if let Some((category, skill)) = skill_of(path) {
        if !selected.contains(skill) {
            return None;
        }
        let user = path.starts_with(&format!("context/skills/{category}/{skill}/config/"));
        return Some((Cow::Borrowed(path), user));
    }
    Some((Cow::Borrowed(path), false))
}

/// The live state of one project path, as the scan found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Live {
    /// Absent.
    Missing,
    /// A regular file with this digest.
    File(Sha256),
    /// A symlink, directory or other non-file: never touched.
    Odd,
}

/// A classified path's `lstat`: absent (or below a folder found absent), its metadata,
/// or why it could not be looked at.
enum Looked {
    Missing,
    Found(std::fs::Metadata),
    Failed(std::io::Error),
}

/// Looks `rel` up below `root`, or not at all below a folder `missing` knows is absent.
fn look(root: &Path, rel: &str, missing: &mut MissingDirs) -> Looked {
    if missing.holds(rel) {
        return Looked::Missing;
    }
    match std::fs::symlink_metadata(root.join(rel)) {
        Ok(m) => Looked::Found(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            missing.note(root, rel);
            Looked::Missing
        }
        Err(e) => Looked::Failed(e),
    }
}

fn live_state(
    root: &Path,
    rel: &str,
    looked: Looked,
    cache: Option<&StatCache>,
    misses: &mut usize,
) -> Result<Live> {
    match looked {
        Looked::Missing => Ok(Live::Missing),
        Looked::Failed(e) if e.kind() == std::io::ErrorKind::NotADirectory => Ok(Live::Odd),
        Looked::Failed(e) => Err(ProvenanceError::io("inspect", root.join(rel), e)),
        Looked::Found(m) if m.file_type().is_file() => {
            if let Some(h) = cache.and_then(|c| c.lookup(rel, &m)) {
                return Ok(Live::File(h));
            }
            *misses += 1;
            Ok(Live::File(Sha256::of_file(root.join(rel))?))
        }
        Looked::Found(_) => Ok(Live::Odd),
    }
}

/// Classified paths whose `lstat`s one thread takes in a row: a large scan hands every
/// other batch to a helper thread, which looks them up while this one classifies.
const STAT_BATCH: usize = 64;

/// Whether the `i`-th classified path is in a batch the helper thread looks up.
fn helpers_batch(i: usize) -> bool {
    (i / STAT_BATCH) % 2 == 1
}

/// The lookups of a scan's classified paths, taken in their order: on the scanning
/// thread, and for a large scan every other batch on a helper thread, ahead of it.
struct Lookups {
    helper: Option<std::sync::mpsc::Receiver<Vec<Looked>>>,
    theirs: std::vec::IntoIter<Looked>,
    missing: MissingDirs,
}

impl Lookups {
    /// Starts the helper thread in `scope` when the plan classifies enough paths (those
    /// of `new_set`, `old` and `own`, as [`classified_paths`] yields them).
    fn start<'scope, 'env: 'scope, 's: 'env>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        root: &'env Path,
        (new_set, old, own): (
            &'env InstallSet<'s>,
            Option<&'env Marker>,
            Option<&'env Intent>,
        ),
    ) -> Self {
        let many =
            new_set.len() + old.map_or(0, |m| m.files.len()) >= crate::statcache::PARALLEL_STATS;
        let helper = many.then(|| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Looked>>(2);
            std::thread::Builder::new()
                .name("aibox-scan".to_owned())
                .spawn_scoped(scope, move || {
                    let mut missing = MissingDirs::default();
                    let mut batch = Vec::with_capacity(STAT_BATCH);
                    let theirs = classified_paths(new_set, old, own)
                        .enumerate()
                        .filter(|(i, _)| helpers_batch(*i));
                    for (_, (path, _)) in theirs {
                        batch.push(look(root, path, &mut missing));
                        if batch.len() == STAT_BATCH && tx.send(std::mem::take(&mut batch)).is_err()
                        {
                            return;
                        }
                    }
                    let _ = tx.send(batch);
                })
                .ok()
                .map(|_| rx)
        });
        Self {
            helper: helper.flatten(),
            theirs: Vec::new().into_iter(),
            missing: MissingDirs::default(),
        }
    }

    /// The lookup of the `i`-th classified path, `rel`.
    fn look(&mut self, root: &Path, i: usize, rel: &str) -> Looked {
        let theirs = match &self.helper {
            Some(rx) if helpers_batch(i) => {
                if i.is_multiple_of(STAT_BATCH) {
                    // A helper that died leaves its batches to this thread.
                    self.theirs = rx.recv().unwrap_or_default().into_iter();
                }
                self.theirs.next()
            }
            _ => None,
        };
        theirs.unwrap_or_else(|| look(root, rel, &mut self.missing))
    }
}

/// Whether the file at `path` holds a proper prefix of the bytes of release file
/// `release_path`: what a run killed while creating it in place leaves (see
/// `aibox_fs::Writer::create_verified`). Completing such a file loses no byte that is not
/// in the release, whoever wrote it.
fn holds_prefix(path: &Path, payload: &Payload, release_path: &str) -> Result<bool> {
    use std::io::Read as _;
    let size = payload.entry(release_path)?.size;
    let mut live = fs_err::File::open(path).map_err(|e| ProvenanceError::io("read", path, e))?;
    let len = live
        .metadata()
        .map_err(|e| ProvenanceError::io("inspect", path, e))?
        .len();
    if len >= size {
        return Ok(false);
    }
    let mut remaining = len;
    let mut same = true;
    let mut failed = None;
    let mut buf = Vec::new();
    payload.stream(release_path, &mut |chunk| {
        let take = usize::try_from(remaining).map_or(chunk.len(), |r| r.min(chunk.len()));
        if !same || take == 0 {
            return;
        }
        buf.resize(take, 0);
        match live.read_exact(&mut buf) {
            Ok(()) => same = buf[..] == chunk[..take],
            Err(e) => {
                same = false;
                failed = Some(e);
            }
        }
        remaining -= take as u64;
    })?;
    if let Some(e) = failed {
        return Err(ProvenanceError::io("read", path, e));
    }
    Ok(same)
}

/// How the plan sees the file `path` (whose digest is `now`) when an unfinished run was
/// creating it in place and was killed while writing it (it holds a prefix of that run's
/// bytes): for the run resumed (its intent record and the release planned now), as the
/// file that run found absent, so it is completed; for a run this plan undoes (its record
/// and, when at hand, its release), as that run's complete file, so it goes with the
/// rest of its work ([`restore_own`]). `None` for any other file.
fn killed_mid_creation(
    (root, path, now): (&Path, &str, Sha256),
    (payload, entry, resumed): (&Payload, Option<&InstallEntry<'_>>, Option<&Intent>),
    (abandoned_release, abandoned): (Option<&Payload>, Option<&Intent>),
) -> Result<Option<Live>> {
    let creating = |i: &Intent| {
        i.writes
            .get(path)
            .filter(|w| w.before.is_none() && now != w.new)
    };
    if let Some((release_path, _, _)) = entry
        && resumed.and_then(creating).is_some()
        && holds_prefix(&root.join(path), payload, release_path)?
    {
        return Ok(Some(Live::Missing));
    }
    if let Some(planned) = abandoned.and_then(creating)
        && let Some(theirs) = abandoned_release.filter(|p| p.files.contains_key(path))
        && holds_prefix(&root.join(path), theirs, path)?
    {
        return Ok(Some(Live::File(planned.new)));
    }
    Ok(None)
}

/// Folders of the project found missing while scanning: every path below one is absent
/// without a lookup of its own (a first install looks up `context/` once, not each of its
/// thousands of files).
#[derive(Default)]
struct MissingDirs(std::collections::HashSet<String>);

impl MissingDirs {
    /// Whether a folder above `rel` is known to be missing.
    fn holds(&self, rel: &str) -> bool {
        let mut at = rel;
        while let Some((parent, _)) = at.rsplit_once('/') {
            if self.0.contains(parent) {
                return true;
            }
            at = parent;
        }
        false
    }

    /// After `rel` was found absent: remembers the highest of its folders that is
    /// missing too, looking up one folder after another from the nearest.
    fn note(&mut self, root: &Path, rel: &str) {
        let mut highest = None;
        let mut at = rel;
        while let Some((parent, _)) = at.rsplit_once('/') {
            let absent = matches!(
                fs_err::symlink_metadata(root.join(parent)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound
            );
            if !absent {
                break;
            }
            highest = Some(parent);
            at = parent;
        }
        if let Some(dir) = highest {
            self.0.insert(dir.to_owned());
        }
    }
}

/// Classifies one file from its three hashes (`None` = absent).
fn classify(r: Option<Sha256>, c: Option<Sha256>, l: &Live) -> (Class, Action) {
    let l_hash = match l {
        Live::File(h) => Some(*h),
        Live::Missing => None,
        Live::Odd => {
            return (
                if c.is_some() && r.is_none() {
                    Class::Conflict
                } else {
                    Class::ChangedLocallyOnly
                },
                Action::Keep,
            );
        }
    };
    match (r, c) {
        (Some(r), Some(c)) if r == c => {
            if l_hash == Some(r) {
                (Class::Unchanged, Action::None)
            } else {
                (Class::ChangedLocallyOnly, Action::Keep)
            }
        }
        (Some(r), Some(c)) => match l_hash {
            Some(l) if l == r => (Class::ChangedUpstreamOnly, Action::Write),
            Some(l) if l == c => (Class::Unchanged, Action::None),
            _ => (Class::Conflict, Action::Keep),
        },
        (None, Some(c)) => match l_hash {
            None => (Class::NewUpstream, Action::Write),
            Some(l) if l == c => (Class::NewUpstream, Action::None),
            Some(_) => (Class::Conflict, Action::Keep),
        },
        (Some(r), None) => match l_hash {
            Some(l) if l == r => (Class::RemovedUpstream, Action::Remove),
            None => (Class::RemovedUpstream, Action::None),
            Some(_) => (Class::RemovedUpstream, Action::Keep),
        },
        (None, None) => (Class::Unchanged, Action::None),
    }
}

fn count_direct(files: &BTreeMap<Arc<str>, PayloadFile>, dir: &str) -> usize {
    files
        .keys()
        .filter(|k| {
            k.strip_prefix(dir)
                .is_some_and(|r| !r.contains('/') && !r.starts_with('.'))
        })
        .count()
}

/// Whether a project path counts for the `v2:` fingerprint.
fn in_fingerprint(p: &str) -> bool {
    const ROOTS: [&str; 5] = [
        "context/skills/processkit/",
        "context/skills/_lib/",
        "context/schemas/",
        "context/state-machines/",
        "context/processes/",
    ];
    ROOTS.iter().any(|r| p.starts_with(r))
        && !p.split('/').any(|c| c.starts_with('.'))
        && skill_of(p).is_none_or(|(cat, skill)| {
            !p.starts_with(&format!("context/skills/{cat}/{skill}/config/"))
        })
}

/// The reference-compatible `v2:` fingerprint (spec §14) of an install set: SHA-256
/// over `path NUL contents NUL` of each fingerprinted file in path order, each file
/// streamed from the payload. A payload in the unpacked store remembers the value per
/// install set (the store's bytes never change under its digest), so installing the
/// same release and selection again, in this or another project, does not read every
/// file a second time.
fn install_hash_streamed(payload: &Payload, set: &InstallSet<'_>) -> Result<String> {
    use sha2::Digest as _;
    // The fingerprinted files, project path and release path, in project path order (the
    // install set's): named once for the memo's key and the hash both.
    let (paths, rels): (Vec<&str>, Vec<&str>) = set
        .iter()
        .filter(|(p, _)| in_fingerprint(p))
        .map(|(p, (release_path, _, _))| (&**p, &***release_path))
        .unzip();
    // Only a payload in the store has somewhere to remember the value.
    let memo = payload.store().map(|store| {
        let mut key = sha2::Sha256::new();
        for (p, rel) in paths.iter().zip(&rels) {
            key.update(p.as_bytes());
            key.update([0]);
            key.update(rel.as_bytes());
            key.update([0]);
        }
        (
            store,
            format!("install-hash-v2-{}", hex::encode(key.finalize())),
        )
    });
    if let Some((store, key)) = &memo
        && let Some(known) = crate::cache::memo_read(store, key)
        && known
            .strip_prefix("v2:")
            .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Ok(known);
    }
    let mut h = sha2::Sha256::new();
    payload.stream_checked(&rels, &mut |event| match event {
        Streamed::Begin(i) => {
            h.update(paths[i].as_bytes());
            h.update([0]);
        }
        Streamed::Bytes(chunk) => h.update(chunk),
        Streamed::End => h.update([0]),
    })?;
    let value = format!("v2:{}", hex::encode(h.finalize()));
    if let Some((store, key)) = &memo {
        crate::cache::memo_write(store, key, &value);
    }
    Ok(value)
}

/// Resuming an interrupted plan: a file it already wrote (or removed) is seen as that
/// plan saw it, so the classification is the interrupted plan's own.
/// Through a record's chain ([`Intent::chain`]): what an undo left as the run it undid
/// wrote is seen as before that run too.
fn as_planned(live: Live, path: &str, resume: Option<&Intent>) -> Live {
    resume
        .into_iter()
        .flat_map(Intent::chain)
        .fold(live, |live, intent| {
            match (&live, intent.writes.get(path), intent.removals.get(path)) {
                (Live::File(now), Some(planned), _) if *now == planned.new => {
                    planned.before.map_or(Live::Missing, Live::File)
                }
                (Live::Missing, None, Some(before)) => Live::File(*before),
                _ => live,
            }
        })
}

/// The action for a path an unfinished run of aibox changed (`actual` is not `planned`,
/// the state before that run, see [`as_planned`]), when the plan would do nothing: the
/// plan leaves the path as it was before that run, so that run's work is undone. Such
/// a run writes and removes only untouched files, so the state before it is the
/// release's file (written again) or none (the file it created is removed).
fn restore_own(action: Action, actual: Live, planned: Live, upstream: Option<Sha256>) -> Action {
    if action != Action::None || actual == planned {
        return action;
    }
    match (planned, actual) {
        (Live::File(before), _) if Some(before) == upstream => Action::Write,
        (Live::Missing, Live::File(_)) => Action::Remove,
        _ => action,
    }
}

/// The unfinished run being undone: the abandoned one, or the one a resumed undo was
/// undoing (kept in its record, [`Intent::undoes`]).
fn undone_of<'a>(
    interrupted: Option<&'a Intent>,
    abandoned: Option<&'a Intent>,
) -> Option<&'a Intent> {
    abandoned.or_else(|| interrupted.and_then(|i| i.undoes.as_deref()))
}

/// The record of an interrupted run as the plan takes it: resumed when it still applies
/// ([`applicable`]), else undone when that run started from the marker in place (it
/// never finished); ignored otherwise.
fn unfinished(
    interrupted: Option<&Intent>,
    release: &VerifiedRelease,
    b: &Basis<'_>,
) -> (Option<Intent>, Option<Intent>) {
    let resumed = applicable(interrupted, release, b.base_marker_sha256, &b.skills).cloned();
    let abandoned = interrupted
        .filter(|i| resumed.is_none() && i.base_marker_sha256 == b.base_marker_sha256)
        .cloned();
    (resumed, abandoned)
}

/// The intent record of an interrupted run, when it still applies: same release, same
/// selection, and the marker it started from still in place.
fn applicable<'a>(
    interrupted: Option<&'a Intent>,
    release: &VerifiedRelease,
    base_marker_sha256: Option<Sha256>,
    skills: &[String],
) -> Option<&'a Intent> {
    interrupted.filter(|i| {
        i.version == release.version
            && i.release_asset_sha256 == release.digest
            && i.base_marker_sha256 == base_marker_sha256
            && i.skills == skills
    })
}

/// The outcome of the three-way comparison.
#[derive(Default)]
struct ThreeWay {
    intent_writes: IntentWrites,
    intent_removals: PathTable<Sha256>,
    /// Every classified path, sorted; they also give the marker's tables
    /// ([`recorded`]) and the digests after the apply ([`FileDecision::live_after`]).
    decisions: Vec<FileDecision>,
    writes: Vec<FileWrite>,
    removals: Vec<String>,
    parked: Vec<FileWrite>,
}

/// An install set's entry: release path, file, user-owned.
type InstallEntry<'a> = (&'a Arc<str>, &'a PayloadFile, bool);

/// Project path (borrowed from the release's manifest) → its [`InstallEntry`].
type InstallSet<'a> = BTreeMap<Cow<'a, str>, InstallEntry<'a>>;

/// Every project path the plan classifies, in path order, each once: the new install
/// set's (with its entry) and the previous manifest's. Merged as they are read: a set
/// of them was one more structure of every installed path (0.8 MB at 30x processkit),
/// and looking each up in the install set again was a search per path.
fn classified_paths<'a, 's: 'a>(
    new_set: &'a InstallSet<'s>,
    old: Option<&'a Marker>,
    own: Option<&'a Intent>,
) -> impl Iterator<Item = (&'a str, Option<&'a InstallEntry<'s>>)> + 'a {
    let recorded = old.into_iter().flat_map(|m| {
        let listed = |t: &'a PathTable<Sha256>| t.keys().map(|p| (p, None));
        merge_sorted(listed(&m.files), listed(&m.user_files))
    });
    // And what an unfinished run of aibox wrote: a file it created that neither install
    // has is still its work. So is one of a run an undo in the chain had not undone yet
    // (a chain is rare: its paths are gathered; one record is merged as it is read).
    let written: Box<dyn Iterator<Item = (&'a str, Option<&'a InstallEntry<'s>>)> + 'a> = match own
    {
        Some(i) if i.undoes.is_some() => {
            let all: BTreeSet<&str> = i.chain().flat_map(|i| i.writes.keys()).collect();
            Box::new(all.into_iter().map(|p| (p, None)))
        }
        _ => Box::new(
            own.into_iter()
                .flat_map(|i| i.writes.iter().map(|(p, _)| (p, None))),
        ),
    };
    merge_sorted(
        merge_sorted(recorded, written),
        new_set.iter().map(|(p, entry)| (&**p, Some(entry))),
    )
}

/// The project path `path` as a shared allocation: the release's own name for the file
/// when it installs under it (every file but `INDEX.md`), else a copy.
fn shared_path(path: &str, entry: Option<&InstallEntry<'_>>) -> Arc<str> {
    match entry {
        Some((release_path, _, _)) if ***release_path == *path => Arc::clone(release_path),
        _ => Arc::from(path),
    }
}

/// Classifies every file of the new install set and of the previous manifest, from the
/// live states of the scan. Pure.
#[allow(clippy::too_many_lines)] // one pass over every path reads better whole
fn three_way(
    (payload, version): (&Payload, &str),
    new_set: &InstallSet<'_>,
    old: Option<&Marker>,
    live_states: &SharedPathTable<Live>,
    own: Option<&Intent>,
    warnings: &mut Vec<String>,
) -> Result<ThreeWay> {
    // The previous install's digest of a path, looked up in the marker's own tables (a
    // merged copy of them was one more map of every installed path).
    // Sized once: growing by doubling held the old and the new buffer together.
    let mut t = ThreeWay {
        decisions: Vec::with_capacity(classified_paths(new_set, old, own).count()),
        ..ThreeWay::default()
    };
    // Skill folders the previous install put there and the user deleted whole: a new
    // file of theirs is not written either (a deleted folder stays deleted; writing only
    // the new files left half a skill). Decided once per folder; paths come in order, so
    // a folder's files are consecutive. Folder → the new files left out.
    let mut deleted = DeletedFolders::default();
    let mut kept_deleted: BTreeMap<String, usize> = BTreeMap::new();
    for (path, entry) in classified_paths(new_set, old, own) {
        let r = base_digest(old, path);
        let c = entry.map(|(_, f, _)| f.sha256);
        let actual = live_states.get(path).copied().unwrap_or(Live::Missing);
        let live_now = match actual {
            Live::File(h) => Some(h),
            _ => None,
        };
        let live = as_planned(actual, path, own);
        let PathDecision {
            class,
            mut action,
            user_owned,
            in_deleted_folder,
        } = decide_path((path, r, entry), old, &live, live_states, &mut deleted);
        action = restore_own(action, actual, live, c);
        if let Some(dir) = in_deleted_folder {
            *kept_deleted.entry(dir).or_default() += 1;
        }
        if let (Some(&(release_path, _, _)), Some(c)) = (entry, c) {
            // Every file, a kept user file too, is recorded as the release ships it,
            // written or not (its decision's upstream digest, see [`recorded`]): that is
            // the base the next plan compares with. A conflict is reported once, by this
            // upgrade's migration document (which keeps the old base) and its parked
            // copy, and stays open there until settled; recording the old base instead
            // made every later plan find the same conflict again (and park it again at
            // the next release), however it was settled.
            // Installed at its own name (nearly every file): the path is the release's,
            // one allocation for the decision and the write alike.
            let project_path = shared_path(path, entry);
            let shared = Arc::ptr_eq(&project_path, release_path);
            let to = || PlanPath::from(&project_path);
            match action {
                Action::Write => {
                    let before = match live {
                        Live::File(h) => Some(h),
                        _ => None,
                    };
                    // In path order: every path comes once, sorted.
                    t.intent_writes
                        .push(Arc::clone(&project_path), IntentWrite { new: c, before });
                    t.writes
                        .push(FileWrite::from_payload(payload, release_path, to())?);
                }
                Action::Keep if class == Class::Conflict => {
                    t.parked
                        .push(FileWrite::from_payload(payload, release_path, to())?);
                }
                // A file an unfinished run created where this plan leaves none
                // ([`restore_own`]).
                Action::Remove => t.removals.push(path.to_owned()),
                _ => {}
            }
            t.decisions.push(FileDecision {
                path: project_path,
                release_path: (!shared).then(|| Box::from(&**release_path)),
                class,
                action,
                user_owned,
                digests: Sides::new(Digests {
                    base: r,
                    upstream: Some(c),
                    live: live_now,
                }),
            });
        } else {
            if action == Action::Remove {
                if let Some(r) = r {
                    t.intent_removals.insert(path, r);
                }
                t.removals.push(path.to_owned());
            } else if action == Action::Keep {
                // Deselected (the release still ships it) is not removed upstream, and a
                // settings file the skill writes is kept unchanged or not (QA26).
                let gone = if payload.files.contains_key(path) {
                    "belongs to a skill that is no longer selected"
                } else {
                    "was removed upstream"
                };
                let edited = !matches!(actual, Live::File(h) if Some(h) == r);
                let why = if edited {
                    "has local changes"
                } else {
                    "is a settings file the skill may write, which aibox never removes"
                };
                warnings.push(format!("`{path}` {gone} but {why}; kept"));
            }
            t.decisions.push(FileDecision {
                path: Arc::from(path),
                release_path: None,
                class,
                action,
                user_owned,
                digests: Sides::new(Digests {
                    base: r,
                    upstream: c,
                    live: live_now,
                }),
            });
        }
    }
    for (dir, n) in kept_deleted {
        warnings.push(format!(
            "`{dir}/` was deleted by hand, so the {n} file(s) this release adds to it were not \
             written (aibox keeps a deletion); to get the skill back, copy \
             `{SNAPSHOT_DIR}/{version}/{dir}/` to `{dir}/` after this apply"
        ));
    }
    // Grown as found (how many writes is known only now): the spare room is given back
    // before the next of the plan's per-file structures is made.
    t.intent_writes.shrink_to_fit();
    t.intent_removals.shrink_to_fit();
    t.writes.shrink_to_fit();
    t.parked.shrink_to_fit();
    t.removals.shrink_to_fit();
    Ok(t)
}

/// Whether the previous install (`old`) put files in the skill folder `dir` and every
/// one of them is gone now: the folder was deleted by hand (a few range lookups).
/// The digest the previous install `old` recorded for `path` (release or user file).
fn base_digest(old: Option<&Marker>, path: &str) -> Option<Sha256> {
    let m = old?;
    m.files
        .get(path)
        .or_else(|| m.user_files.get(path))
        .copied()
}

/// What the plan does with one path, and why (see [`decide_path`]).
struct PathDecision {
    class: Class,
    action: Action,
    user_owned: bool,
    /// The skill folder, deleted whole by the user, that keeps this new file out.
    in_deleted_folder: Option<String>,
}

/// Which skill folders the user deleted whole, decided once per folder: paths come in
/// order, so a folder's files are consecutive and the last answer is kept.
#[derive(Default)]
struct DeletedFolders(Option<(String, bool)>);

/// The class and action of `path` (`r`: the digest `old`, the previous install, recorded
/// for it; its install-set `entry`, if any) given the live state `live` (as the plan sees it): the three-way
/// comparison, then the rules for files the user owns and for skill folders the user
/// deleted whole (a new file of theirs is not written either: writing only the new
/// files left half a skill). The one rule [`three_way`] and [`after_apply`] share.
fn decide_path(
    (path, r, entry): (&str, Option<Sha256>, Option<&InstallEntry<'_>>),
    old: Option<&Marker>,
    live: &Live,
    live_states: &SharedPathTable<Live>,
    deleted: &mut DeletedFolders,
) -> PathDecision {
    let c = entry.map(|(_, f, _)| f.sha256);
    let user_owned =
        entry.is_some_and(|e| e.2) || old.is_some_and(|m| m.user_files.contains_key(path));
    let (mut class, mut action) = classify(r, c, live);
    let mut in_deleted_folder = None;
    if r.is_none()
        && action == Action::Write
        && let Some(m) = old
        && let Some((category, skill)) = skill_of(path)
    {
        let dir = format!("context/skills/{category}/{skill}");
        if deleted.0.as_ref().is_none_or(|(d, _)| *d != dir) {
            let gone = skill_folder_deleted(m, &dir, live_states);
            deleted.0 = Some((dir, gone));
        }
        if let Some((dir, true)) = &deleted.0 {
            action = Action::None;
            in_deleted_folder = Some(dir.clone());
        }
    }
    if user_owned && !matches!(live, Live::Missing) && action == Action::Write {
        class = Class::Conflict;
        action = Action::Keep;
    }
    if user_owned && action == Action::Remove {
        action = Action::Keep;
    }
    if user_owned && matches!(live, Live::Missing) && r.is_some() && c.is_some() {
        // The user deleted their own file: respect that.
        action = Action::None;
        class = Class::ChangedLocallyOnly;
    }
    PathDecision {
        class,
        action,
        user_owned,
        in_deleted_folder,
    }
}

/// Where a file of a skill folder gets its bytes once the apply is done (see
/// [`after_apply`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum After {
    /// The release's file at this release path (written, or already there).
    Release(Arc<str>),
    /// The live file, which the apply keeps (a local edit, a conflict, a file the
    /// release does not have).
    Live,
    /// No file: removed by the apply, or deleted by hand and kept deleted.
    Absent,
}

/// The release skill folders `dirs` as the apply that [`plan_scanned`] plans from the
/// same scan leaves them: every release or previously installed path below each folder,
/// and where its bytes come from afterwards (or that it is gone). Files below a folder that
/// neither release knows (added by hand) are not listed: the apply leaves them, so they
/// are there afterwards as they are now. So the skill review judges what the apply will
/// register, not what was there before it (an upgrade's new server script, a file the
/// install keeps because one was there already). Pure.
///
/// # Errors
/// The selection fails (a tier cycle).
pub fn after_apply(
    release: &VerifiedRelease,
    catalog: &Catalog,
    opts: &PlanOptions<'_>,
    live: &LiveScan,
    dirs: &BTreeSet<&str>,
) -> Result<BTreeMap<String, BTreeMap<String, After>>> {
    if dirs.is_empty() {
        return Ok(BTreeMap::new());
    }
    // This release and selection installed, nothing interrupted (every `apply` that
    // changes nothing): each path stays as it is, so the marker and the scan say it all,
    // without the install set of every release file (5 ms of a 10x no-op apply).
    if let Some(m) = live.parsed_marker.as_ref()
        && live.interrupted.is_none()
        && live.abandoned.is_none()
        && m.install.processkit_version == release.version
        && m.manifest.release_asset_sha256 == Some(release.digest)
        && m.install.skills.iter().eq(catalog
            .select(opts.packages, opts.include, opts.exclude)?
            .skills
            .iter())
        && let Some(out) = after_as_installed(release, m, live, dirs)
    {
        return Ok(out);
    }
    let b = scanned_basis(release, catalog, opts, live)?;
    let own = live.interrupted.as_ref().or(live.abandoned.as_ref());
    let mut out: BTreeMap<String, BTreeMap<String, After>> = BTreeMap::new();
    let mut deleted = DeletedFolders::default();
    for (path, entry) in classified_paths(&b.new_set, b.old, own) {
        let Some((category, skill)) = skill_of(path) else {
            continue;
        };
        let dir = format!("context/skills/{category}/{skill}");
        if !dirs.contains(dir.as_str()) {
            continue;
        }
        let actual = live.files.get(path).copied().unwrap_or(Live::Missing);
        let planned = as_planned(actual, path, own);
        let base = base_digest(b.old, path);
        let decided = decide_path(
            (path, base, entry),
            b.old,
            &planned,
            &live.files,
            &mut deleted,
        );
        let action = restore_own(decided.action, actual, planned, entry.map(|e| e.1.sha256));
        let after = match (action, entry) {
            (Action::Write, Some((release_path, _, _))) => After::Release(Arc::clone(release_path)),
            (Action::Remove, _) => After::Absent,
            // Kept, or nothing to do: what is there now stays (a file already equal to
            // the release's is the release's).
            _ => match (actual, entry) {
                (Live::File(h), Some((release_path, f, _))) if h == f.sha256 => {
                    After::Release(Arc::clone(release_path))
                }
                (Live::File(_) | Live::Odd, _) => After::Live,
                (Live::Missing, _) => After::Absent,
            },
        };
        out.entry(dir).or_default().insert(path.to_owned(), after);
    }
    Ok(out)
}

/// [`after_apply`] when the marker `m` records this very release and selection: every
/// path the marker lists below `dirs` stays as the scan found it (the release's file
/// where its digest is the recorded one, else the live file, or nothing). `None` when a
/// recorded path is not in the release (then the full comparison decides).
fn after_as_installed(
    release: &VerifiedRelease,
    m: &Marker,
    live: &LiveScan,
    dirs: &BTreeSet<&str>,
) -> Option<BTreeMap<String, BTreeMap<String, After>>> {
    let mut out: BTreeMap<String, BTreeMap<String, After>> = BTreeMap::new();
    for dir in dirs {
        let prefix = format!("{dir}/");
        let files = out.entry((*dir).to_owned()).or_default();
        for table in [&m.files, &m.user_files] {
            for (path, recorded) in table
                .range_from(&prefix)
                .take_while(|(p, _)| p.starts_with(&prefix))
            {
                let after = match live.files.get(path) {
                    Some(Live::File(h)) if h == recorded => {
                        let (release_path, _) = release.payload.files.get_key_value(path)?;
                        After::Release(Arc::clone(release_path))
                    }
                    Some(Live::File(_) | Live::Odd) => After::Live,
                    Some(Live::Missing) | None => After::Absent,
                };
                files.insert(path.to_owned(), after);
            }
        }
    }
    Some(out)
}

fn skill_folder_deleted(old: &Marker, dir: &str, live: &SharedPathTable<Live>) -> bool {
    let prefix = format!("{dir}/");
    let mut recorded = false;
    for table in [&old.files, &old.user_files] {
        for (path, _) in table.range_from(&prefix) {
            if !path.starts_with(&prefix) {
                break;
            }
            recorded = true;
            if !matches!(
                live.get(path).copied().unwrap_or(Live::Missing),
                Live::Missing
            ) {
                return false;
            }
        }
    }
    recorded
}

/// The marker's `[manifest]` counts and digests.
fn manifest(catalog: &Catalog, release: &VerifiedRelease, fingerprint: String) -> MarkerManifest {
    MarkerManifest {
        skill_count: catalog
            .skills
            .values()
            .filter(|s| s.category == "processkit")
            .count(),
        schema_count: count_direct(&release.payload.files, "context/schemas/"),
        process_count: count_direct(&release.payload.files, "context/processes/"),
        state_machine_count: count_direct(&release.payload.files, "context/state-machines/"),
        release_asset_sha256: Some(release.digest),
        verification: release.verification,
        install_hash: Some(fingerprint),
        snapshot_sha256: Some(crate::source::tree_digest(&release.payload)),
    }
}

/// The lock's `[processkit]` section, keeping its timestamp when nothing changed.
fn lock_section(
    release: &VerifiedRelease,
    previous_lock: Option<&ProcesskitLock>,
    unchanged_record: bool,
    installed_at: String,
    opts: &PlanOptions<'_>,
    fingerprint: String,
) -> ProcesskitLock {
    let lock_installed_at = match previous_lock {
        Some(l)
            if unchanged_record && l.version == release.version && l.source == release.source =>
        {
            l.installed_at.clone()
        }
        _ => installed_at,
    };
    ProcesskitLock {
        source: release.source.clone(),
        version: release.version.clone(),
        src_path: opts.src_path.map(str::to_owned),
        release_asset_sha256: Some(release.digest),
        verification: release.verification,
        installed_at: lock_installed_at,
        processkit_install_hash: Some(fingerprint),
    }
}

/// C: project path → (release path, file, user-owned) of everything to install.
/// Built at once (bulk-built, its nodes are full; inserted in order, every leaf stayed
/// half full: 0.9 MB at 10x, held through planning). Of two release paths with one
/// destination the later wins, as inserting them in turn did.
fn install_set<'a>(release: &'a VerifiedRelease, selected: &BTreeSet<String>) -> InstallSet<'a> {
    release
        .payload
        .files
        .iter()
        .filter_map(|(path, file)| {
            let (dest, user) = target(path, selected)?;
            Some((dest, (path, file, user)))
        })
        .collect()
}

/// Everything planning needs from the live project and from reading the release's
/// files, gathered by [`scan`] so that [`plan_scanned`] does no I/O.
#[derive(Debug, Clone, Default)]
pub struct LiveScan {
    /// The SHA-256 of the live processkit marker's text, if any: all a plan needs of the
    /// text once it is parsed (whether the new marker differs, and the intent record's
    /// base), so the 1.3 MB of a 10x install's marker are not held by every command.
    pub marker_sha256: Option<Sha256>,
    /// That marker parsed (`None` when missing, unparseable or of another schema).
    pub parsed_marker: Option<Marker>,
    /// Live state of the paths the plan classifies that are there: a path it does not
    /// hold is [`Live::Missing`] (so a first install's scan holds nothing, where an entry
    /// per release file was 0.9 MB at 10x processkit, held through planning).
    pub files: SharedPathTable<Live>,
    /// The interrupted run's intent record, when it still applies.
    pub interrupted: Option<Intent>,
    /// The interrupted run's intent record when it does not apply (another release or
    /// selection) but that run started from the marker in place, so it never finished:
    /// the files it wrote or removed are aibox's own work, put where this plan leaves
    /// them rather than kept as local edits (QA26: pinning the old version back after a
    /// killed upgrade kept half the new release as "your edits").
    pub abandoned: Option<Intent>,
    /// The pending migration document that run wrote, if any (its id).
    pub abandoned_migration: Option<String>,
    /// Digest of the live snapshot's `PROVENANCE.toml` of the release's version.
    pub snapshot_provenance: Option<Sha256>,
    /// Snapshot directories of other versions (root-relative). Their files are listed
    /// by whoever removes them, when it does: an upgrade's old snapshot holds as many
    /// files as the release, and the plan needs only the folder.
    pub stale_snapshots: BTreeSet<String>,
    /// The migration documents already in the project (pending, in progress or applied):
    /// id → the version change it records, when its front matter reads. A new document
    /// never takes the id of another version change. Read only when the installed
    /// version differs from the release's (empty otherwise: no document is written).
    pub migration_ids: crate::migration::Existing,
    /// Whether the release's own snapshot directory exists.
    pub snapshot_present: bool,
    /// The regular files below the release's own snapshot directory (root-relative,
    /// sorted), listed only when the plan rewrites that snapshot.
    pub snapshot_files: Vec<String>,
    /// Files the stat cache did not vouch for (re-hashed).
    pub cache_misses: usize,
    /// `aggregate_sha256` of the release's MCP manifest and the check's warnings.
    pub mcp_manifest: (Option<String>, Vec<String>),
    /// The MCP servers of the install set.
    pub servers: Vec<ProcesskitServer>,
    /// The `v2:` fingerprint of the install set: the marker's when it still describes
    /// this release and selection, else computed from the release's files.
    pub fingerprint: String,
}

impl LiveScan {
    /// The unfinished run whose record the plan classifies with: resumed, else undone.
    pub fn own(&self) -> Option<&Intent> {
        self.interrupted.as_ref().or(self.abandoned.as_ref())
    }

    /// The unfinished run being undone: [`Self::abandoned`], or the one the resumed run
    /// was undoing ([`Intent::undoes`]).
    pub fn undone(&self) -> Option<&Intent> {
        undone_of(self.interrupted.as_ref(), self.abandoned.as_ref())
    }
}

/// The selection and the marker as the plan sees them.
struct Basis<'a> {
    selection: crate::catalog::Selection,
    new_set: InstallSet<'a>,
    /// The live marker, borrowed from the scan (a copy of its per-file tables was the
    /// largest allocation of a no-op plan).
    old: Option<&'a Marker>,
    same_release: bool,
    skills: Vec<String>,
    base_marker_sha256: Option<Sha256>,
}

fn basis<'a>(
    release: &'a VerifiedRelease,
    catalog: &Catalog,
    opts: &PlanOptions<'_>,
    base_marker_sha256: Option<Sha256>,
    old: Option<&'a Marker>,
) -> Result<Basis<'a>> {
    let selection = catalog.select(opts.packages, opts.include, opts.exclude)?;
    let new_set = install_set(release, &selection.skills);
    let same_release = old.is_some_and(|m| {
        m.install.processkit_version == release.version
            && m.manifest.release_asset_sha256 == Some(release.digest)
    });
    let skills: Vec<String> = selection.skills.iter().cloned().collect();
    Ok(Basis {
        selection,
        new_set,
        old,
        same_release,
        skills,
        base_marker_sha256,
    })
}

/// The [`basis`] of a plan from the scan `live` (its marker and the marker's digest).
fn scanned_basis<'a>(
    release: &'a VerifiedRelease,
    catalog: &Catalog,
    opts: &PlanOptions<'_>,
    live: &'a LiveScan,
) -> Result<Basis<'a>> {
    basis(
        release,
        catalog,
        opts,
        live.marker_sha256,
        live.parsed_marker.as_ref(),
    )
}

impl Basis<'_> {
    /// The marker's fingerprint, when it still describes this release and selection.
    fn reusable_fingerprint(&self) -> Option<String> {
        self.old
            .filter(|m| self.same_release && m.install.skills == self.skills)
            .and_then(|m| m.manifest.install_hash.clone())
    }
}

/// The I/O half of planning: reads the marker, the live state of every path the plan
/// classifies (trusting the stat cache for unchanged files), the snapshot directories,
/// and the release files planning parses (MCP manifest and configs), and computes the
/// fingerprint when needed. Writes nothing.
pub fn scan(
    root: &Path,
    release: &VerifiedRelease,
    catalog: &Catalog,
    opts: &PlanOptions<'_>,
    hints: Hints<'_>,
) -> Result<LiveScan> {
    let (marker_sha256, parsed_marker) = match Marker::read_digested(&root.join(MARKER_PATH)) {
        // Hashed and parsed as it is read.
        Ok((digest, marker)) => (Some(digest), marker),
        Err(_) => (None, None),
    };
    let b = basis(
        release,
        catalog,
        opts,
        marker_sha256,
        parsed_marker.as_ref(),
    )?;
    // Outside the threads' scope: the helpers borrow them, the scan keeps them.
    let (interrupted, abandoned) = unfinished(hints.interrupted, release, &b);
    let mut scan = std::thread::scope(|scope| -> Result<LiveScan> {
        // The fingerprint reads every fingerprinted release file: a thread of its own
        // does that while the project is scanned.
        let reused = b.reusable_fingerprint();
        let helper = match reused {
            Some(_) => None,
            None => std::thread::Builder::new()
                .name("aibox-fingerprint".to_owned())
                .spawn_scoped(scope, || {
                    install_hash_streamed(&release.payload, &b.new_set)
                })
                .ok(),
        };
        let own = interrupted.as_ref().or(abandoned.as_ref());
        let mut cache_misses = 0;
        let mut files = SharedPathTable::default();
        // The lookups are most of a large scan (a path walk each): every other batch of
        // them is taken by a helper, ahead of this thread, which classifies in order.
        let mut lookups = Lookups::start(scope, root, (&b.new_set, b.old, own));
        // In order: the paths come sorted (the stat cache is read in that order too).
        for (i, (path, entry)) in classified_paths(&b.new_set, b.old, own).enumerate() {
            let looked = lookups.look(root, i, path);
            let mut live = live_state(root, path, looked, hints.stat_cache, &mut cache_misses)?;
            if let Live::File(now) = live
                && let Some(seen) = killed_mid_creation(
                    (root, path, now),
                    (&release.payload, entry, interrupted.as_ref()),
                    (hints.abandoned_release, abandoned.as_ref()),
                )?
            {
                live = seen;
            }
            if live != Live::Missing {
                // Sorted and each once: appended, under the release's allocation of the
                // path (a copy of each in one text was 2 MB at 30x processkit).
                files.push(shared_path(path, entry), live);
            }
        }
        files.shrink_to_fit();
        // After an unfinished run, a snapshot's `PROVENANCE.toml` says nothing of the
        // rest of it (that run may have moved or half-written the folder): listed.
        let (snapshot_provenance, snapshot_present, snapshot_files) =
            scan_snapshot(root, release, b.same_release && own.is_none());
        let stale_snapshots = stale_snapshots(root, &release.version);
        let mcp_manifest = crate::servers::check_mcp_manifest(&release.payload, &release.version)?;
        // Only the MCP configs are read; every other path counts for script checks.
        let mut configs: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        for (p, (release_path, _, _)) in &b.new_set {
            if p.ends_with("/mcp/mcp-config.json") {
                configs.insert(p.as_ref(), release.payload.read(release_path)?);
            }
        }
        let servers = servers(
            b.new_set.keys().map(|p| {
                let p: &str = p;
                (p, configs.get(p).map_or(&[][..], Vec::as_slice))
            }),
            opts.prefer_gateway,
        )?;
        let fingerprint = match (reused, helper.map(std::thread::ScopedJoinHandle::join)) {
            (Some(reused), _) => reused,
            (None, Some(Ok(hashed))) => hashed?,
            // No thread could be started, or it died: hashed here.
            (None, _) => install_hash_streamed(&release.payload, &b.new_set)?,
        };
        let (migration_ids, abandoned_migration) = migration_ids(
            root,
            b.old,
            &release.version,
            undone_of(interrupted.as_ref(), abandoned.as_ref()),
        );
        Ok(LiveScan {
            marker_sha256,
            parsed_marker: None,
            files,
            interrupted: None,
            abandoned: None,
            abandoned_migration,
            snapshot_provenance,
            stale_snapshots,
            migration_ids,
            snapshot_present,
            snapshot_files,
            cache_misses,
            mcp_manifest,
            servers,
            fingerprint,
        })
    })?;
    scan.parsed_marker = parsed_marker;
    (scan.interrupted, scan.abandoned) = (interrupted, abandoned);
    Ok(scan)
}

/// The project's migration documents ([`crate::migration::existing_ids`]), and the one
/// the unfinished run `abandoned` wrote ([`crate::migration::abandoned_id`]). Read only
/// for a version change from `old` to `version` (the one plan that writes a document) or
/// with such a run to undo: every other apply (no-op ones included) leaves them unread.
fn migration_ids(
    root: &Path,
    old: Option<&Marker>,
    version: &str,
    abandoned: Option<&Intent>,
) -> (crate::migration::Existing, Option<String>) {
    let changes = old.is_some_and(|m| m.install.processkit_version != version);
    if !changes && abandoned.is_none() {
        return (crate::migration::Existing::new(), None);
    }
    let ids = crate::migration::existing_ids(root);
    let undone = abandoned.zip(old).and_then(|(i, m)| {
        crate::migration::abandoned_id(&ids, (&m.install.processkit_version, &i.version), &i.now)
    });
    (ids, undone)
}

/// The release's own snapshot folder: the digest of its `PROVENANCE.toml`, whether it is
/// there, and its regular files (sorted) when the plan rewrites it.
fn scan_snapshot(
    root: &Path,
    release: &VerifiedRelease,
    same_release: bool,
) -> (Option<Sha256>, bool, Vec<String>) {
    let snap_dir = format!("{SNAPSHOT_DIR}/{}", release.version);
    let provenance = fs_err::read(root.join(&snap_dir).join("PROVENANCE.toml"))
        .ok()
        .map(|bytes| Sha256::of(&bytes));
    let present = fs_err::symlink_metadata(root.join(&snap_dir)).is_ok_and(|m| m.is_dir());
    let mut files = Vec::new();
    if present && !snapshot_current(release, provenance, same_release) {
        list_files(root, &snap_dir, &mut files);
        files.sort();
    }
    (provenance, present, files)
}

/// The snapshot folders of other versions: real directories named like versions, never a
/// user's file or link.
fn stale_snapshots(root: &Path, version: &str) -> BTreeSet<String> {
    let mut stale = BTreeSet::new();
    if let Ok(rd) = fs_err::read_dir(root.join(SNAPSHOT_DIR)) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && name != version && crate::source::check_version(&name).is_ok() {
                stale.insert(format!("{SNAPSHOT_DIR}/{name}"));
            }
        }
    }
    stale
}

/// Computes the install or upgrade of `release` into `root`. Reads live files; writes
/// nothing. `previous_lock` is the lock section as it was before this run.
pub fn plan_install(
    root: &Path,
    release: &VerifiedRelease,
    previous_lock: Option<&ProcesskitLock>,
    opts: &PlanOptions<'_>,
) -> Result<InstallPlan> {
    plan_resume(root, release, previous_lock, opts, Hints::default())
}

/// [`plan_install`], resuming the plan of an interrupted run when `interrupted` (its
/// [`Intent`] record) still applies: same release, same selection and the marker it
/// started from still in place. The result is then that run's plan, so applying it
/// completes exactly what was intended. A record that does not apply is ignored.
/// Equivalent to [`scan`] followed by [`plan_scanned`].
pub fn plan_resume(
    root: &Path,
    release: &VerifiedRelease,
    previous_lock: Option<&ProcesskitLock>,
    opts: &PlanOptions<'_>,
    hints: Hints<'_>,
) -> Result<InstallPlan> {
    let catalog = Catalog::from_payload(&release.payload)?;
    let live = scan(root, release, &catalog, opts, hints)?;
    plan_scanned(release, &catalog, previous_lock, opts, &live)
}

/// Whether a marker table holds exactly these sorted entries.
fn same_table<'a>(
    table: &PathTable<Sha256>,
    mut entries: impl Iterator<Item = (&'a Arc<str>, Sha256)>,
) -> bool {
    table
        .iter()
        .all(|(k, v)| entries.next().is_some_and(|(p, d)| **p == *k && d == *v))
        && entries.next().is_none()
}

/// The pure half of planning: classifies three ways from the release manifest, the
/// previous marker and lock, and the live scan ([`scan`]). Reads no file.
#[allow(clippy::too_many_lines)] // one linear recipe reads better than fragments
pub fn plan_scanned(
    release: &VerifiedRelease,
    catalog: &Catalog,
    previous_lock: Option<&ProcesskitLock>,
    opts: &PlanOptions<'_>,
    live: &LiveScan,
) -> Result<InstallPlan> {
    let b = scanned_basis(release, catalog, opts, live)?;
    let mut warnings = release.warnings.clone();
    warnings.extend(b.selection.warnings.iter().cloned());
    let (mcp_aggregate_sha256, mcp_warnings) = live.mcp_manifest.clone();
    warnings.extend(mcp_warnings);
    let resume = live.interrupted.as_ref();
    // A resumed plan keeps the interrupted run's time (install time, migration id).
    let resumed_opts = resume.map(|i| PlanOptions {
        now: i.now.as_str(),
        ..opts.clone()
    });
    let opts = resumed_opts.as_ref().unwrap_or(opts);

    let t = three_way(
        (&release.payload, &release.version),
        &b.new_set,
        b.old,
        &live.files,
        live.own(),
        &mut warnings,
    )?;
    // The record stays as its two tables until it is written, line by line, into its
    // file: rendered here, the tables and the text together were the peak of a large
    // first install, and the text was parsed back before the writes.
    let intent = Intent {
        version: release.version.clone(),
        release_asset_sha256: release.digest,
        base_marker_sha256: b.base_marker_sha256,
        skills: b.selection.skills.iter().cloned().collect(),
        now: opts.now.to_owned(),
        writes: t.intent_writes,
        removals: t.intent_removals,
        // The run this plan undoes, kept with its own record; a resumed plan keeps what
        // the interrupted one undid.
        undoes: live.undone().cloned().map(Box::new),
    };
    // The snapshot of this version, when missing or from another release.
    let snap_dir = format!("{SNAPSHOT_DIR}/{}", release.version);
    let snapshot = if snapshot_current(
        release,
        live.snapshot_provenance,
        b.same_release && live.own().is_none(),
    ) {
        None
    } else {
        let prefix = format!("{snap_dir}/");
        let extras = live
            .snapshot_files
            .iter()
            .filter(|p| {
                p.strip_prefix(&prefix)
                    .is_none_or(|rel| !release.payload.files.contains_key(rel))
            })
            .cloned()
            .collect();
        // Only the snapshot of the version installed until now, and only into a folder
        // that does not exist: anything else is rewritten file by file.
        let move_from = b
            .old
            .map(|m| format!("{SNAPSHOT_DIR}/{}", m.install.processkit_version))
            .filter(|dir| !live.snapshot_present && live.stale_snapshots.contains(dir));
        Some(SnapshotPlan {
            dir: snap_dir,
            extras,
            move_from,
        })
    };
    let stale_snapshots: Vec<String> = live.stale_snapshots.iter().cloned().collect();

    // Marker and lock, keeping the old timestamp when nothing changed.
    let content_changed = !t.writes.is_empty() || !t.removals.is_empty();
    // The fingerprint only depends on the release and the selection.
    let fingerprint = live.fingerprint.clone();
    let old = b.old;
    let skills = b.skills.clone();
    let dependencies: BTreeMap<String, Vec<String>> = b
        .selection
        .dependencies
        .iter()
        .map(|(k, by)| (k.clone(), by.iter().cloned().collect()))
        .collect();
    let manifest = manifest(catalog, release, fingerprint.clone());
    let unchanged_record = old.is_some_and(|m| {
        !content_changed
            && m.install.processkit_version == release.version
            && m.install.processkit_source == release.source
            && m.install.skills == skills
            && m.install.dependencies == dependencies
            && m.manifest == manifest
            && same_table(&m.files, recorded(&t.decisions, false))
            && same_table(&m.user_files, recorded(&t.decisions, true))
    });
    let installed_at = match old {
        Some(m) if unchanged_record => m.install.installed_at.clone(),
        _ => opts.now.to_owned(),
    };
    let cli_version = match old {
        Some(m) if unchanged_record => m.install.cli_version.clone(),
        _ => opts.cli_version.to_owned(),
    };
    let install = MarkerInstall {
        processkit_version: release.version.clone(),
        processkit_source: release.source.clone(),
        installed_at: installed_at.clone(),
        cli_version,
        skills,
        dependencies,
    };
    // Counted first: grown by doubling, a 10x install's list held room for twice its
    // 8,700 entries.
    let shared = |user| {
        let mut entries = Vec::with_capacity(recorded(&t.decisions, user).count());
        entries.extend(recorded(&t.decisions, user).map(|(path, d)| (Arc::clone(path), d)));
        entries
    };
    let marker = Arc::new(crate::record::MarkerText::new(
        MARKER_SCHEMA,
        &install,
        &manifest,
        shared(false),
        shared(true),
    ));
    let marker_changed = live.marker_sha256 != Some(marker.sha256());
    let lock = lock_section(
        release,
        previous_lock,
        unchanged_record,
        installed_at,
        opts,
        fingerprint,
    );

    let from_version = old.map(|m| m.install.processkit_version.clone());
    let mut plan = InstallPlan {
        from_version,
        to_version: release.version.clone(),
        decisions: t.decisions,
        writes: t.writes,
        removals: t.removals,
        snapshot,
        stale_snapshots,
        undone_migration: live.abandoned_migration.clone(),
        migration: None,
        marker,
        marker_changed,
        lock,
        servers: live.servers.clone(),
        mcp_aggregate_sha256,
        skills: b.selection.skills,
        warnings,
        intent: None,
        stat_cache_stale: false,
        payload: release.payload.clone(),
    };
    let from_release = old.and_then(|m| m.manifest.release_asset_sha256);
    plan.migration = crate::migration::document(
        &plan,
        &crate::migration::Origin {
            source: &release.source,
            from_release,
            shape: crate::migration::Shape::of(&release.payload),
            taken: &live.migration_ids,
        },
        opts.now,
        t.parked,
    );
    plan.intent = (!plan.is_noop()).then_some(intent);
    plan.stat_cache_stale = live.cache_misses > 0 || !plan.is_noop();
    Ok(plan)
}

/// Whether the release's snapshot directory holds this release (its `PROVENANCE.toml`
/// has the release's digest) and the marker is of this release: then it is not
/// rewritten.
fn snapshot_current(
    release: &VerifiedRelease,
    snapshot_provenance: Option<Sha256>,
    same_release: bool,
) -> bool {
    same_release
        && snapshot_provenance.is_some()
        && release
            .payload
            .files
            .get("PROVENANCE.toml")
            .map(|f| f.sha256)
            == snapshot_provenance
}

/// Checks that no existing ancestor of `rel` below `root` is a symlink or non-directory.
fn check_parents(root: &Path, rel: &str) -> Result<()> {
    let mut cur = root.to_path_buf();
    let comps: Vec<&str> = rel.split('/').collect();
    if comps
        .iter()
        .any(|c| c.is_empty() || *c == "." || *c == "..")
    {
        return Err(ProvenanceError::UnsafeDestination {
            path: rel.to_owned(),
            reason: "not a plain relative path".to_owned(),
        });
    }
    for c in &comps[..comps.len() - 1] {
        cur.push(c);
        match fs_err::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(ProvenanceError::UnsafeDestination {
                    path: rel.to_owned(),
                    reason: format!(
                        "parent `{}` is a symbolic link",
                        cur.strip_prefix(root).unwrap_or(&cur).display()
                    ),
                });
            }
            Ok(m) if !m.is_dir() => {
                return Err(ProvenanceError::UnsafeDestination {
                    path: rel.to_owned(),
                    reason: format!(
                        "parent `{}` is not a directory",
                        cur.strip_prefix(root).unwrap_or(&cur).display()
                    ),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Applies a plan: content writes and removals, snapshot, migration document, and the
/// marker last. The caller writes `plan.lock` into `aibox.lock` afterwards.
pub fn apply_plan(root: &Path, plan: &InstallPlan) -> Result<()> {
    use aibox_fs::{ProjectRoot, Writer};
    // Refuse before writing anything if any destination is unsafe.
    for w in plan.writes.iter().chain(plan.migration.iter().flatten()) {
        check_parents(root, w.path.as_str())?;
    }
    for r in &plan.removals {
        check_parents(root, r)?;
    }
    let utf8 = Utf8Path::from_path(root).ok_or_else(|| ProvenanceError::UnsafeDestination {
        path: root.display().to_string(),
        reason: "the project path is not valid UTF-8".to_owned(),
    })?;
    // Every byte goes through the one project writer (`aibox_fs`): perimeter,
    // symlink checks, atomic replace, fsync.
    let project = ProjectRoot::open(utf8)?;
    let mut writer = Writer::new(&project);
    // One `syncfs` makes all content durable before the marker that names it.
    writer.defer_sync();
    for w in &plan.writes {
        write_one(&mut writer, w.path.as_str(), w)?;
    }
    for r in &plan.removals {
        writer.remove(Utf8Path::new(r))?;
        // Drop directories the removal left empty, up to `context/`.
        let mut dir = Utf8Path::new(r).parent();
        while let Some(d) = dir {
            if d.as_str() == "context" || d.as_str().is_empty() || !writer.remove_empty_dir(d)? {
                break;
            }
            dir = d.parent();
        }
    }
    if let Some(s) = &plan.snapshot {
        check_parents(root, &format!("{}/x", s.dir))?;
        for w in s.writes(&plan.payload) {
            let w = w?;
            write_one(&mut writer, w.path.as_str(), &w)?;
        }
        for extra in &s.extras {
            writer.remove(Utf8Path::new(extra))?;
        }
        if !s.extras.is_empty() {
            writer.prune_empty_dirs(Utf8Path::new(&s.dir))?;
        }
    }
    if let Some(id) = &plan.undone_migration {
        writer.remove(Utf8Path::new(&crate::migration::document_path(id)))?;
        let parked = crate::migration::parked_dir(id);
        check_parents(root, &parked)?;
        let mut files = Vec::new();
        list_files(root, &parked, &mut files);
        for f in &files {
            writer.remove(Utf8Path::new(f))?;
        }
        writer.prune_empty_dirs(Utf8Path::new(&parked))?;
    }
    for s in &plan.stale_snapshots {
        check_parents(root, s)?;
        let mut files = Vec::new();
        list_files(root, s, &mut files);
        for f in &files {
            writer.remove(Utf8Path::new(f))?;
        }
        writer.prune_empty_dirs(Utf8Path::new(s))?;
    }
    for w in plan.migration.iter().flatten() {
        write_one(&mut writer, w.path.as_str(), w)?;
    }
    if plan.marker_changed {
        writer.write_streamed(Utf8Path::new(MARKER_PATH), Some(0o644), |out| {
            aibox_config::Render::write_to(&*plan.marker, out)
        })?;
    }
    Ok(())
}

/// Writes one planned file at `path`: its bytes, or a verified copy streamed from the
/// release.
fn write_one(writer: &mut aibox_fs::Writer<'_>, path: &str, w: &FileWrite) -> Result<()> {
    let mode = Some(if w.executable { 0o755 } else { 0o644 });
    match &w.data {
        WriteData::Bytes(bytes) => {
            writer.write(Utf8Path::new(path), bytes, mode)?;
        }
        WriteData::Copy(from) => writer.copy_verified(Utf8Path::new(path), from, mode)?,
    }
    Ok(())
}

/// Root-relative paths of the regular files below `rel` (symlinks are not followed).
fn list_files(root: &Path, rel: &str, out: &mut Vec<String>) {
    let Ok(entries) = fs_err::read_dir(root.join(rel)) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let child = format!("{rel}/{name}");
        match entry.file_type() {
            Ok(t) if t.is_dir() => list_files(root, &child, out),
            Ok(t) if t.is_file() => out.push(child),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Digests, Sha256, Sides};

    /// A decision gives back every combination of its three digests as it was given
    /// them: none, the upstream one, or another on each side.
    #[test]
    fn a_decision_keeps_its_three_digests() {
        let (a, b, c) = (Sha256::of(b"a"), Sha256::of(b"b"), Sha256::of(b"c"));
        let choices = [None, Some(a), Some(b), Some(c)];
        for upstream in choices {
            for base in choices {
                for live in choices {
                    let d = Digests {
                        base,
                        upstream,
                        live,
                    };
                    assert_eq!(Sides::new(d).get(), d, "{d:?}");
                }
            }
        }
    }
}
