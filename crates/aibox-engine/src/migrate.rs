//! `aibox migrate`: the pending processkit migrations and their conflicts, worked through.
//!
//! An upgrade that meets a locally edited file keeps the working file, parks the new
//! release's version beside the migration document (`MIG-<id>.upstream/<path>`) and lists
//! the file as a `conflict` with three digests (base, upstream, local; see
//! `aibox_provenance::migration`). A conflict is open while its parked copy exists. Here:
//! [`list`] reads the documents in `pending/` and `in-progress/`, [`show`] finds the
//! three versions of each open conflict (ours: the working file; theirs: the parked copy;
//! base: the previous release in the download cache, checked against the recorded
//! digest), and [`resolve`] takes one version per conflict, removes its parked copy and,
//! once none is open, marks the document `applied` and moves it to `applied/` as
//! processkit's migration-management does. Every check runs before the first write, under
//! the project lock that `apply` takes, through the one writer as the `migrate` command
//! of the file table.

use std::time::Duration;

use aibox_config::layout::Writers;
use aibox_provenance::Sha256;
use aibox_provenance::migration::{self, Conflict, Document};
use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;

use crate::error::EngineError;
pub use crate::error::MigrateError;
use crate::writer::{ProjectRoot, Writer};

/// Where `migrate` looks for the previous release (the base versions).
#[derive(Debug, Clone, Default)]
pub struct MigrateOptions {
    /// The download cache; `None` = the user's default cache.
    pub cache_dir: Option<Utf8PathBuf>,
}

/// One conflicting file of a migration.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ConflictState {
    /// Project path (the working file: "ours").
    pub path: String,
    /// Root-relative path of the parked upstream copy ("theirs").
    pub upstream_copy: String,
    /// Whether it still needs a decision (its parked copy exists).
    pub open: bool,
    /// Whether the working file differs from the version the upgrade kept.
    pub changed_since: bool,
    #[serde(skip)]
    recorded: Conflict,
}

/// A pending (or started) migration.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Migration {
    /// `MIG-…`.
    pub id: String,
    /// `pending` or `in-progress` as the document says, or `stale`: it was made for
    /// another version than the one installed now (see `installed_version`).
    pub state: String,
    /// The version installed now (`none` without an install), given only for a stale
    /// migration: its `theirs` is a file of `to_version`, which is not installed.
    pub installed_version: Option<String>,
    /// Root-relative path of the document.
    pub document: String,
    /// Version upgraded from.
    pub from_version: Option<String>,
    /// Version upgraded to.
    pub to_version: Option<String>,
    /// The document's one-line summary.
    pub summary: Option<String>,
    /// Its conflicting files.
    pub conflicts: Vec<ConflictState>,
    #[serde(skip)]
    from_release: Option<Sha256>,
}

impl Migration {
    /// Made for a version that is not the installed one (a later pin, or one moved back).
    pub fn is_stale(&self) -> bool {
        self.installed_version.is_some()
    }

    /// The conflicts still open.
    pub fn open(&self) -> impl Iterator<Item = &ConflictState> {
        self.conflicts.iter().filter(|c| c.open)
    }

    fn parked_dir(&self) -> String {
        migration::parked_dir(&self.id)
    }
}

/// The pending migrations, and documents that could not be read.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Listing {
    /// Pending and in-progress migrations, by id.
    pub migrations: Vec<Migration>,
    /// Documents that did not parse: (path, reason).
    pub unreadable: Vec<(String, String)>,
}

impl Listing {
    fn find(&self, id: &str) -> Result<&Migration, MigrateError> {
        let file = format!("/{id}.md");
        if let Some((path, reason)) = self.unreadable.iter().find(|(p, _)| p.ends_with(&file)) {
            return Err(MigrateError::Unreadable {
                path: path.clone(),
                reason: reason.clone(),
            });
        }
        self.migrations.iter().find(|m| m.id == id).ok_or_else(|| {
            let known: Vec<&str> = self.migrations.iter().map(|m| m.id.as_str()).collect();
            MigrateError::UnknownId {
                id: id.to_owned(),
                known: joined(&known),
            }
        })
    }
}

fn joined(items: &[&str]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

fn digest_of(root: &ProjectRoot, rel: &str) -> Result<Option<Sha256>, EngineError> {
    Ok(root
        .read(Utf8Path::new(rel))?
        .map(|bytes| Sha256::of(&bytes)))
}

/// Reads the pending and in-progress migration documents of the project at `root`.
///
/// # Errors
/// The project root cannot be opened or a file cannot be read.
pub fn list(root: &Utf8Path) -> Result<Listing, EngineError> {
    let root = ProjectRoot::open(root)?;
    list_in(&root)
}

fn list_in(root: &ProjectRoot) -> Result<Listing, EngineError> {
    let mut listing = Listing::default();
    // Read once, and only when there is a document to judge (every `apply` lists them).
    let mut installed: Option<Option<String>> = None;
    for dir in [migration::PENDING_DIR, migration::IN_PROGRESS_DIR] {
        for name in document_names(root, dir)? {
            let rel = format!("{dir}/{name}");
            let Some(bytes) = root.read(Utf8Path::new(&rel))? else {
                continue;
            };
            match Document::parse(&String::from_utf8_lossy(&bytes)) {
                Ok(doc) => {
                    let installed = installed.get_or_insert_with(|| {
                        aibox_provenance::Marker::installed_version(root.path().as_std_path())
                    });
                    let m = migration_of(root, rel, doc, installed.as_deref())?;
                    listing.migrations.push(m);
                }
                Err(reason) => listing.unreadable.push((rel, reason)),
            }
        }
    }
    listing.migrations.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(listing)
}

/// The `MIG-*.md` files directly in `dir` (a missing folder has none; the parked copies
/// below `MIG-*.upstream/` are not documents).
fn document_names(root: &ProjectRoot, dir: &str) -> Result<Vec<String>, EngineError> {
    let path = root.path().join(dir);
    let entries = match fs_err::read_dir(&path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(EngineError::io("list", &path, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| EngineError::io("list", &path, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.starts_with("MIG-")
            && Utf8Path::new(&name).extension() == Some("md")
            && entry.file_type().is_ok_and(|t| t.is_file())
        {
            names.push(name);
        }
    }
    Ok(names)
}

/// The migration of `doc`; `installed` is the version installed now, which makes a
/// document made for another version stale.
fn migration_of(
    root: &ProjectRoot,
    rel: String,
    doc: Document,
    installed: Option<&str>,
) -> Result<Migration, EngineError> {
    let mut conflicts = Vec::with_capacity(doc.conflicts.len());
    for c in doc.conflicts {
        let copy = migration::parked_copy(&doc.id, &c.path);
        let open = root.is_file(Utf8Path::new(&copy))?;
        let changed_since = c.local.is_some() && digest_of(root, &c.path)? != c.local;
        conflicts.push(ConflictState {
            path: c.path.clone(),
            upstream_copy: copy,
            open,
            changed_since,
            recorded: c,
        });
    }
    // Without a target version there is nothing to compare: never stale.
    let stale = doc
        .to_version
        .as_deref()
        .is_some_and(|to| Some(to) != installed);
    Ok(Migration {
        id: doc.id,
        state: if stale { "stale".to_owned() } else { doc.state },
        installed_version: stale.then(|| installed.unwrap_or("none").to_owned()),
        document: rel,
        from_version: doc.from_version,
        to_version: doc.to_version,
        summary: doc.summary,
        conflicts,
        from_release: doc.from_release,
    })
}

/// One of the three versions of a conflicting file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// The working file.
    Ours,
    /// The new release's version (the parked copy).
    Theirs,
    /// The previous release's version.
    Base,
}

/// Where one version of a conflicting file is, or why it is not available.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct VersionAt {
    /// A root-relative path, or a description of where it is read from.
    pub location: String,
    /// Whether it can be read now (and has the recorded digest).
    pub available: bool,
    /// Why not, when it is not.
    pub note: Option<String>,
}

/// The three versions of one open conflict, and the difference between ours and theirs.
#[derive(Debug, Clone, Serialize)]
pub struct ConflictVersions {
    /// Project path.
    pub path: String,
    /// The working file.
    pub ours: VersionAt,
    /// The parked copy.
    pub theirs: VersionAt,
    /// The previous release's version.
    pub base: VersionAt,
    /// Unified diff from ours to theirs (when both are text).
    pub diff: Option<String>,
}

/// `aibox migrate show`: a migration and the versions of its open conflicts.
#[derive(Debug, Clone, Serialize)]
pub struct Shown {
    /// The migration.
    pub migration: Migration,
    /// Each open conflict (only `path` when one was asked for).
    pub files: Vec<ConflictVersions>,
}

/// The bytes of one version, with the checks that make it that version.
fn version_bytes(
    root: &ProjectRoot,
    m: &Migration,
    c: &ConflictState,
    side: Side,
    options: &MigrateOptions,
) -> Result<Vec<u8>, EngineError> {
    match side {
        Side::Ours => root.read(Utf8Path::new(&c.path))?.ok_or_else(|| {
            MigrateError::MissingFile {
                path: c.path.clone(),
            }
            .into()
        }),
        Side::Theirs => {
            let bytes = root.read(Utf8Path::new(&c.upstream_copy))?.ok_or_else(|| {
                MigrateError::NoSuchVersion {
                    what: format!("the parked copy `{}` is gone", c.upstream_copy),
                }
            })?;
            if c.recorded.upstream.is_some_and(|d| d != Sha256::of(&bytes)) {
                return Err(MigrateError::UpstreamChanged {
                    copy: c.upstream_copy.clone(),
                }
                .into());
            }
            Ok(bytes)
        }
        Side::Base if m.from_release.is_some() && c.recorded.base.is_none() => {
            Err(MigrateError::NoBase {
                path: c.path.clone(),
                from: m.from_version.clone().unwrap_or_else(|| "?".to_owned()),
            }
            .into())
        }
        Side::Base => base_bytes(m, c, options).map_err(|why| {
            MigrateError::BaseUnavailable {
                path: c.path.clone(),
                why,
            }
            .into()
        }),
    }
}

/// The base version from the previous release's store in the download cache, checked
/// against the digest the document recorded.
fn base_bytes(
    m: &Migration,
    c: &ConflictState,
    options: &MigrateOptions,
) -> Result<Vec<u8>, String> {
    let (Some(release), Some(base)) = (m.from_release, c.recorded.base) else {
        return Err("the migration document does not record it".to_owned());
    };
    let cache = aibox_provenance::Cache::at_or_default(
        options.cache_dir.as_deref().map(Utf8Path::as_std_path),
    )
    .ok_or_else(|| "no download cache location on this machine".to_owned())?;
    let payload = cache
        .unpacked(&release)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "release {} ({release}) is not in the download cache",
                m.from_version.as_deref().unwrap_or("?")
            )
        })?;
    let bytes = payload
        .read(&c.recorded.release_path)
        .map_err(|e| e.to_string())?;
    if Sha256::of(&bytes) == base {
        Ok(bytes)
    } else {
        Err("the cached release holds another version of the file".to_owned())
    }
}

fn conflict<'m>(m: &'m Migration, path: &str) -> Result<&'m ConflictState, MigrateError> {
    m.open().find(|c| c.path == path).ok_or_else(|| {
        let open: Vec<&str> = m.open().map(|c| c.path.as_str()).collect();
        MigrateError::NotAConflict {
            id: m.id.clone(),
            path: path.to_owned(),
            open: joined(&open),
        }
    })
}

/// `aibox migrate show ID [PATH]`: the migration `id` and the three versions of each
/// open conflict (or of `path` alone), with the diff from ours to theirs.
///
/// # Errors
/// An unknown id, a path that is not an open conflict, an unreadable file.
pub fn show(
    root: &Utf8Path,
    id: &str,
    path: Option<&str>,
    options: &MigrateOptions,
) -> Result<Shown, EngineError> {
    let root = ProjectRoot::open(root)?;
    let listing = list_in(&root)?;
    let m = listing.find(id)?;
    let chosen: Vec<&ConflictState> = match path {
        Some(p) => vec![conflict(m, p)?],
        None => m.open().collect(),
    };
    let mut files = Vec::with_capacity(chosen.len());
    for c in chosen {
        let at = |side: Side, location: String| {
            let got = version_bytes(&root, m, c, side, options);
            let note = got.as_ref().err().map(ToString::to_string);
            (
                got.ok(),
                VersionAt {
                    location,
                    available: note.is_none(),
                    note,
                },
            )
        };
        let (ours_bytes, ours) = at(Side::Ours, c.path.clone());
        let (theirs_bytes, theirs) = at(Side::Theirs, c.upstream_copy.clone());
        let (_, base) = at(
            Side::Base,
            format!(
                "release {} in the download cache",
                m.from_version.as_deref().unwrap_or("?")
            ),
        );
        let diff = match (&ours_bytes, &theirs_bytes) {
            (Some(o), Some(t)) => text_diff(&c.path, o, t),
            _ => None,
        };
        files.push(ConflictVersions {
            path: c.path.clone(),
            ours,
            theirs,
            base,
            diff,
        });
    }
    Ok(Shown {
        migration: m.clone(),
        files,
    })
}

/// The bytes of one version of an open conflict (`aibox migrate show ID PATH --version`).
///
/// # Errors
/// An unknown id or path, or the version is not available.
pub fn version(
    root: &Utf8Path,
    id: &str,
    path: &str,
    side: Side,
    options: &MigrateOptions,
) -> Result<Vec<u8>, EngineError> {
    let root = ProjectRoot::open(root)?;
    let listing = list_in(&root)?;
    let m = listing.find(id)?;
    version_bytes(&root, m, conflict(m, path)?, side, options)
}

fn text_diff(path: &str, ours: &[u8], theirs: &[u8]) -> Option<String> {
    let (Ok(a), Ok(b)) = (std::str::from_utf8(ours), std::str::from_utf8(theirs)) else {
        return None;
    };
    Some(
        similar::TextDiff::from_lines(a, b)
            .unified_diff()
            .header(&format!("ours/{path}"), &format!("theirs/{path}"))
            .to_string(),
    )
}

/// How to settle a conflict (serialised as `ours`, `theirs`, `base` or `edited`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Install one of the three versions.
    Take(Side),
    /// The user merged the versions into the working file by hand.
    Edited,
}

impl Serialize for Resolution {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl Resolution {
    /// `ours`, `theirs`, `base` or `edited`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Take(Side::Ours) => "ours",
            Self::Take(Side::Theirs) => "theirs",
            Self::Take(Side::Base) => "base",
            Self::Edited => "edited",
        }
    }
}

/// What `aibox migrate resolve` is asked to do.
#[derive(Debug, Clone, Default)]
pub struct ResolveRequest {
    /// The migration.
    pub id: String,
    /// Conflicts to settle; empty = every open one.
    pub paths: Vec<String>,
    /// How; `None` only marks a migration without open conflicts done.
    pub resolution: Option<Resolution>,
    /// Replace a working file that changed since the upgrade.
    pub force: bool,
}

/// One settled conflict.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Settled {
    /// Project path.
    pub path: String,
    /// The version kept.
    pub resolution: Resolution,
}

/// What `aibox migrate resolve` did.
#[derive(Debug, Clone, Serialize)]
pub struct ResolveReport {
    /// The migration.
    pub id: String,
    /// Each settled conflict with how.
    pub resolved: Vec<Settled>,
    /// Conflicts still open.
    pub remaining: Vec<String>,
    /// Where the document went once the migration was done.
    pub applied: Option<String>,
}

/// `aibox migrate resolve`: settles conflicts of migration `request.id` and, once none
/// is open, marks it applied (`applied/<id>.md`, `state: applied`, `applied_at`). Every
/// check runs before anything is written.
///
/// # Errors
/// An unknown id or path ([`MigrateError`]), open conflicts without a resolution, a
/// working file changed since the upgrade (without `force`), an altered parked copy, a
/// base version not in the cache, the project lock busy, a refused write.
pub fn resolve(
    root: &Utf8Path,
    request: &ResolveRequest,
    options: &MigrateOptions,
) -> Result<ResolveReport, EngineError> {
    let root = ProjectRoot::open(root)?;
    let _lock = crate::records::ProjectLock::acquire(&root, Duration::from_secs(30))?;
    let listing = list_in(&root)?;
    let m = listing.find(&request.id)?;
    let targets: Vec<&ConflictState> = if request.paths.is_empty() {
        m.open().collect()
    } else {
        request
            .paths
            .iter()
            .map(|p| conflict(m, p))
            .collect::<Result<_, _>>()?
    };
    let Some(resolution) = request
        .resolution
        .or(targets.is_empty().then_some(Resolution::Edited))
    else {
        let paths: Vec<&str> = targets.iter().map(|c| c.path.as_str()).collect();
        return Err(MigrateError::ConflictsOpen {
            id: m.id.clone(),
            count: paths.len(),
            paths: paths.join(", "),
        }
        .into());
    };
    if !targets.is_empty() {
        refuse_stale(m, resolution)?;
    }
    // Decide every file before writing any.
    let mut decided: Vec<(&ConflictState, Option<Vec<u8>>)> = Vec::with_capacity(targets.len());
    for c in &targets {
        let live = digest_of(&root, &c.path)?;
        let bytes = match resolution {
            Resolution::Take(Side::Ours) => None,
            Resolution::Edited => {
                if live.is_none() {
                    return Err(MigrateError::MissingFile {
                        path: c.path.clone(),
                    }
                    .into());
                }
                if c.recorded.local.is_some() && live == c.recorded.local {
                    return Err(MigrateError::NotEdited {
                        path: c.path.clone(),
                    }
                    .into());
                }
                None
            }
            Resolution::Take(side) => {
                let bytes = version_bytes(&root, m, c, side, options)?;
                // A file that already holds the version asked for (a resolve that was
                // interrupted after writing it) is not a change to protect.
                let done = live == Some(Sha256::of(&bytes));
                if c.changed_since && !done && !request.force {
                    return Err(MigrateError::ChangedSince {
                        id: m.id.clone(),
                        path: c.path.clone(),
                        take: resolution.name(),
                    }
                    .into());
                }
                Some(bytes)
            }
        };
        decided.push((c, bytes));
    }
    let mut writer = Writer::for_command(&root, Writers::MIGRATE);
    for (c, bytes) in &decided {
        if let Some(bytes) = bytes {
            writer.write(Utf8Path::new(&c.path), bytes, None)?;
        }
        writer.remove(Utf8Path::new(&c.upstream_copy))?;
    }
    let remaining: Vec<String> = m
        .open()
        .filter(|c| !targets.iter().any(|t| t.path == c.path))
        .map(|c| c.path.clone())
        .collect();
    let applied = if remaining.is_empty() {
        Some(mark_applied(&root, &mut writer, m)?)
    } else {
        None
    };
    writer.prune_empty_dirs(Utf8Path::new(&m.parked_dir()))?;
    writer.commit()?;
    let resolved = if request.resolution.is_some() {
        targets
            .iter()
            .map(|c| Settled {
                path: c.path.clone(),
                resolution,
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(ResolveReport {
        id: m.id.clone(),
        resolved,
        remaining,
        applied,
    })
}

/// A stale migration's `theirs` is a file of a release that is no longer installed, and
/// its `base` one of the release before it: installing either would mix releases.
/// Keeping the working file (ours, edited) is still a decision the user can record.
fn refuse_stale(m: &Migration, resolution: Resolution) -> Result<(), MigrateError> {
    let (Some(installed), Resolution::Take(side @ (Side::Theirs | Side::Base))) =
        (&m.installed_version, resolution)
    else {
        return Ok(());
    };
    Err(MigrateError::Stale {
        id: m.id.clone(),
        made_for: m.to_version.clone().unwrap_or_default(),
        installed: installed.clone(),
        take: if side == Side::Theirs {
            "theirs"
        } else {
            "base"
        },
        parked: m.parked_dir(),
    })
}

/// Writes the document to `applied/` with `state: applied`, then removes it from where it
/// was (write, then unlink, as processkit moves its entities).
fn mark_applied(
    root: &ProjectRoot,
    writer: &mut Writer<'_>,
    m: &Migration,
) -> Result<String, EngineError> {
    let unreadable = |reason: &str| MigrateError::Unreadable {
        path: m.document.clone(),
        reason: reason.to_owned(),
    };
    let text = root
        .read(Utf8Path::new(&m.document))?
        .ok_or_else(|| unreadable("it disappeared"))?;
    let now = aibox_provenance::time::now_rfc3339();
    let done = migration::mark_applied(&String::from_utf8_lossy(&text), &now)
        .ok_or_else(|| unreadable("its front matter has no `  state:` line under `spec:`"))?;
    let to = format!("{}/{}.md", migration::APPLIED_DIR, m.id);
    writer.write(Utf8Path::new(&to), done.as_bytes(), Some(0o644))?;
    writer.remove(Utf8Path::new(&m.document))?;
    Ok(to)
}

/// What a processkit upgrade did (or, for `--dry-run`/`--check`, would do), for the end
/// of `aibox apply`'s report.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct UpgradeSummary {
    /// Version installed before.
    pub from_version: String,
    /// Version installed now.
    pub to_version: String,
    /// `upgrade`, `downgrade`, or `change` when the versions have no order.
    pub direction: Direction,
    /// Files changed upstream and updated.
    pub changed: usize,
    /// Files new upstream and added.
    pub new: usize,
    /// Files gone upstream (or deselected) and removed.
    pub removed: usize,
    /// Local edits kept where upstream did not change the file (or dropped it).
    pub kept_local_edits: usize,
    /// Files changed on both sides: the working file kept, the new version parked.
    pub conflicts: Vec<UpgradeConflict>,
    /// The migration document (root-relative), when one is written.
    pub migration_document: Option<String>,
}

/// Which way an install moved between two versions.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// To a later version.
    #[default]
    Upgrade,
    /// To an earlier version (a pin moved back).
    Downgrade,
    /// Between versions that have no order (not both `vMAJOR.MINOR.PATCH`-like).
    Change,
}

impl Direction {
    /// From `from` to `to`, compared as versions.
    pub fn of(from: &str, to: &str) -> Self {
        match aibox_provenance::releases::version_order(to, from) {
            Some(std::cmp::Ordering::Greater) => Self::Upgrade,
            Some(std::cmp::Ordering::Less) => Self::Downgrade,
            _ => Self::Change,
        }
    }

    /// `upgraded`, `downgraded` or `changed`.
    pub fn past(self) -> &'static str {
        match self {
            Self::Upgrade => "upgraded",
            Self::Downgrade => "downgraded",
            Self::Change => "changed",
        }
    }

    /// `upgrade`, `downgrade` or `change`.
    pub fn verb(self) -> &'static str {
        match self {
            Self::Upgrade => "upgrade",
            Self::Downgrade => "downgrade",
            Self::Change => "change",
        }
    }
}

/// A conflict of an upgrade: the kept working file and where the new version is.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct UpgradeConflict {
    /// Project path (kept as it is).
    pub path: String,
    /// Root-relative path of the new release's version, parked for merging.
    pub upstream_copy: String,
}

impl UpgradeSummary {
    /// The summary of `install`, when it changes the installed version.
    pub fn of(install: &aibox_provenance::InstallPlan) -> Option<Self> {
        use aibox_provenance::install::{Action, Class};
        let from = install.from_version.as_deref()?;
        if from == install.to_version {
            return None;
        }
        // The migration's writes are its document and the upstream copies parked below.
        let id = install
            .migration
            .iter()
            .flatten()
            .find_map(|w| migration::document_id(w.path.as_str()));
        let mut s = Self {
            from_version: from.to_owned(),
            to_version: install.to_version.clone(),
            direction: Direction::of(from, &install.to_version),
            migration_document: id.map(migration::document_path),
            ..Self::default()
        };
        for d in &install.decisions {
            match (d.class, d.action) {
                (Class::ChangedUpstreamOnly, Action::Write) => s.changed += 1,
                (Class::NewUpstream, Action::Write) => s.new += 1,
                (Class::RemovedUpstream, Action::Remove) => s.removed += 1,
                _ if d.is_kept_local_edit() => s.kept_local_edits += 1,
                (Class::Conflict, _) => s.conflicts.push(UpgradeConflict {
                    path: d.path.to_string(),
                    upstream_copy: id
                        .map(|id| migration::parked_copy(id, &d.path))
                        .unwrap_or_default(),
                }),
                _ => {}
            }
        }
        Some(s)
    }
}

/// A pending migration as `aibox apply` and `doctor` mention it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PendingMigration {
    /// `MIG-…`.
    pub id: String,
    /// Root-relative path of the document.
    pub document: String,
    /// Its open conflicts.
    pub open_conflicts: Vec<String>,
    /// The version installed now, when the migration was made for another (stale).
    pub installed_version: Option<String>,
    /// The version it was made for.
    #[serde(skip)]
    pub to_version: Option<String>,
}

/// The pending migrations of the project at `root`, briefly. Never fails: it is read
/// after an apply has written its files, and a folder or document that cannot be read is
/// reported by `doctor` and `aibox migrate list` instead.
pub(crate) fn pending_brief(root: &ProjectRoot) -> Vec<PendingMigration> {
    list_in(root)
        .unwrap_or_default()
        .migrations
        .into_iter()
        .map(|m| PendingMigration {
            open_conflicts: m.open().map(|c| c.path.clone()).collect(),
            id: m.id,
            document: m.document,
            installed_version: m.installed_version,
            to_version: m.to_version,
        })
        .collect()
}
