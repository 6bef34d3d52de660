//! `apply`: executes a plan through the writer.
//!
//! Order of a real apply: take the project lock → read the configuration (`aibox.toml`,
//! `.aibox-local.toml`) and `aibox.lock` → resolve (or check that an earlier resolve's
//! configuration and snapshot are still current) → remove stray temp files → plan →
//! decide every file's action (refusing foreign and hand-edited generated files before
//! anything is written) → check that every target folder takes a new file (all or
//! nothing) → record the planned digests in `.aibox/pending.lock` and the processkit
//! install intent in `.aibox/pending-processkit.toml` → back up foreign files when forced
//! → write the files and removals → one durable commit point (`syncfs`) → write the
//! records of the content (the processkit marker) → write `aibox.lock` last → drop the
//! pending records.
//!
//! The pending records make a killed apply recoverable: files it already wrote carry a
//! digest the next apply recognises as aibox's own even though `aibox.lock` was not
//! updated yet, and the processkit intent lets the next run re-plan exactly the
//! interrupted install (the marker still names the base it started from, because it is
//! written only after the content is durable). Dry runs and checks only read (they
//! take no lock).

use std::time::Duration;

use aibox_config::{Ownership, PlanPath, PlannedFile, Render};
use aibox_provenance::lock::{LOCK_FILE, Lock, sha256_hex};
use camino::{Utf8Path, Utf8PathBuf};

use crate::error::EngineError;
use crate::records::{
    PENDING_LOCK, PENDING_PROCESSKIT, ProjectLock, STAT_CACHE, backup_path, read_pending,
};
use crate::resolve::PlanOptions;
use crate::writer::{ProjectRoot, WriteError, Writer, check_relative, in_perimeter, mode_of};

/// Options of [`apply`].
#[derive(Debug, Clone)]
#[allow(clippy::struct_excessive_bools)] // independent switches of one apply
pub struct ApplyOptions {
    /// Compute diffs of what would change; write nothing.
    pub dry_run: bool,
    /// Report whether any committed output would change; write nothing. Local state
    /// (gitignored files, see [`aibox_config::is_local_state`]) is left out of the
    /// report: a fresh clone has none of it and the next apply creates it silently.
    pub check: bool,
    /// Back up and replace generated files that aibox did not write.
    pub force: bool,
    /// How long to wait for another apply's project lock before failing with
    /// `aibox::apply::busy`.
    pub lock_timeout: Duration,
    /// Give the container more than the owner last approved for this checkout (see
    /// [`crate::reach`]); without it such an apply is refused.
    pub approve_reach: bool,
    /// Where the approved reach of each checkout is recorded (default:
    /// `$XDG_STATE_HOME/aibox/reach`, else `~/.local/state/aibox/reach`).
    pub reach_dir: Option<Utf8PathBuf>,
    /// Planning options.
    pub plan: PlanOptions,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self {
            dry_run: false,
            check: false,
            force: false,
            lock_timeout: Duration::from_secs(30),
            approve_reach: false,
            reach_dir: None,
            plan: PlanOptions::default(),
        }
    }
}

/// What happened (or, in dry-run/check mode, would happen) to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileAction {
    /// The file did not exist and was created.
    Created,
    /// The file was rewritten with new contents or mode.
    Updated,
    /// The file already had the planned contents; it was not touched.
    Unchanged,
    /// A user-owned (scaffold-once) file exists; aibox left it alone.
    SkippedUserOwned,
    /// A file aibox did not write was backed up (see `backup`) and replaced.
    BackedUp,
    /// A file aibox owned and no longer plans was removed.
    Removed,
}

impl FileAction {
    /// Whether the action changes the file on disk.
    pub fn changes(self) -> bool {
        matches!(
            self,
            Self::Created | Self::Updated | Self::BackedUp | Self::Removed
        )
    }

    /// The kebab-case name shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::SkippedUserOwned => "skipped-user-owned",
            Self::BackedUp => "backed-up",
            Self::Removed => "removed",
        }
    }
}

/// One file of an [`ApplyReport`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileReport {
    /// Root-relative path (shared with the planned file's).
    pub path: PlanPath,
    /// Ownership class of the planned file.
    #[serde(skip)]
    pub ownership: Ownership,
    /// The action.
    pub action: FileAction,
    /// The backup and the diff, which few files have: behind one pointer, a report is 32
    /// bytes, not 72 (a first install reports every release file and its snapshot copy,
    /// 17,000 at 10x the real release).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    details: Option<Box<ReportDetails>>,
}

/// The rare parts of a [`FileReport`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
struct ReportDetails {
    #[serde(skip_serializing_if = "Option::is_none")]
    backup: Option<Utf8PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    diff: Option<String>,
}

impl FileReport {
    /// The report of `action` on `path`, with the backup made first and the diff shown.
    #[must_use]
    pub fn new(
        path: impl Into<PlanPath>,
        ownership: Ownership,
        action: FileAction,
        backup: Option<Utf8PathBuf>,
        diff: Option<String>,
    ) -> Self {
        let details =
            (backup.is_some() || diff.is_some()).then(|| Box::new(ReportDetails { backup, diff }));
        Self {
            path: path.into(),
            ownership,
            action,
            details,
        }
    }

    /// Where the previous contents were saved (action `backed-up`).
    #[must_use]
    pub fn backup(&self) -> Option<&Utf8Path> {
        self.details.as_ref()?.backup.as_deref()
    }

    /// Unified diff (`--- a/path` / `+++ b/path`) of a changed file, in dry-run mode.
    #[must_use]
    pub fn diff(&self) -> Option<&str> {
        self.details.as_ref()?.diff.as_deref()
    }
}

/// Result of [`apply`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ApplyReport {
    /// Every planned file in write order; `aibox.lock` is last.
    pub files: Vec<FileReport>,
    /// Whether this was a dry run or check: the files list says what would change.
    pub read_only: bool,
    /// Whether no file was written: a dry run, a check, or an apply with nothing to change.
    pub wrote_nothing: bool,
    /// Temp files of a previously killed apply that were removed.
    pub removed_temp_files: Vec<Utf8PathBuf>,
    /// Warnings for the user (see [`crate::PlanBuilder::warn`]).
    pub warnings: Vec<String>,
    /// The processkit upgrade of this run: counts, conflicts and the migration document.
    pub upgrade: Option<crate::migrate::UpgradeSummary>,
    /// Migrations waiting for the user after this run (`aibox migrate list`).
    pub pending_migrations: Vec<crate::migrate::PendingMigration>,
}

impl ApplyReport {
    /// Whether any file changed (or, for dry-run/check, would change).
    pub fn changed(&self) -> bool {
        self.files.iter().any(|f| f.action.changes())
    }
}

/// Resolves, plans and applies the project at `root` (the processkit release may be
/// downloaded, see [`crate::resolve()`]).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let root = camino::Utf8Path::from_path(dir.path()).unwrap();
/// # fs_err::write(root.join("aibox.toml"), "[container]\nname = \"demo\"\n").unwrap();
/// let report = aibox_engine::apply(root, &aibox_engine::ApplyOptions::default())?;
/// assert!(report.changed());
/// assert!(root.join(".devcontainer/Dockerfile").is_file());
/// # Ok::<(), aibox_engine::EngineError>(())
/// ```
///
/// # Errors
/// Those of [`crate::resolve()`] and [`crate::plan()`], a refused file, a failed write.
pub fn apply(root: &Utf8Path, options: &ApplyOptions) -> Result<ApplyReport, EngineError> {
    let root = ProjectRoot::open(root)?;
    // An invalid configuration is reported before anything (even the lock) is created.
    let project = crate::config_check::check_project(root.path())?;
    // So is an unusable CA file, before resolve asks the network through it.
    if let Some((path, text)) = crate::config_check::read_extra_ca(root.path(), &project.local) {
        crate::config_check::extra_ca_text(path, text)?;
    }
    let guard = lock_unless_read_only(&root, options)?;
    // Read again under the project lock only when this run had to wait for it: another
    // apply (or a command it ran for) may have changed `aibox.toml` or
    // `.aibox-local.toml` meanwhile, and applying what was read before waiting would
    // revert it. Taken at once, nothing held the lock since the read just above, so the
    // configuration is loaded once.
    let project = match &guard {
        Some(lock) if lock.waited() => crate::config_check::check_project(root.path())?,
        _ => project,
    };
    // Resolved under the project lock: the previous `aibox.lock` is the one this run
    // builds on.
    let adjusted;
    let check_only = options.plan.check_only || options.check;
    let replace_conflicted = options.plan.replace_conflicted || options.force;
    let plan_options = if check_only != options.plan.check_only
        || replace_conflicted != options.plan.replace_conflicted
    {
        adjusted = PlanOptions {
            check_only,
            replace_conflicted,
            ..options.plan.clone()
        };
        &adjusted
    } else {
        &options.plan
    };
    let resolved = crate::resolve::resolve_in(root, project, plan_options)?;
    apply_fresh(resolved, options, guard, InCheck::List)
}

/// Applies a project resolved earlier ([`crate::resolve()`]); `options.plan` is not used
/// (the resolved value carries its own). When `aibox.lock` or any project file the
/// resolve captured changed since (another apply, a hand edit), the project is resolved
/// again under the project lock first: a stale snapshot is never merged into or written
/// over newer files. Each target is read again under the lock before it is written
/// either way (a hand-edited generated file is refused, not overwritten).
///
/// # Errors
/// As [`apply`].
pub fn apply_resolved(
    resolved: &crate::resolve::Resolved,
    options: &ApplyOptions,
) -> Result<ApplyReport, EngineError> {
    let root = resolved.project_root();
    let guard = lock_unless_read_only(root, options)?;
    let project = match changed_since(resolved)? {
        Changed::No(project) => project,
        Changed::Yes(project) => {
            return resolve_again(resolved, project, options, guard, InCheck::List);
        }
    };
    let plan = crate::plan::plan(resolved)?;
    // The processkit plan was computed from the live tree `resolve` scanned. Should a file
    // it writes have changed since (an edit while the caller held the resolved value), the
    // project is resolved again under the project lock, so no edit is overwritten.
    if !(options.dry_run || options.check) && processkit_scan_is_stale(root, &plan)? {
        return resolve_again(resolved, project, options, guard, InCheck::List);
    }
    apply_plan_locked(resolved, plan, options, guard, InCheck::List)
}

/// `apply --check` of `resolved` with the plan the caller already made of it (`doctor`,
/// which hands the same plan to its MCP-servers check). As in [`apply_resolved`], a
/// project changed since the resolve is resolved and planned again.
pub(crate) fn check_planned(
    resolved: &crate::resolve::Resolved,
    plan: crate::builder::Plan,
) -> Result<ApplyReport, EngineError> {
    let options = ApplyOptions {
        check: true,
        ..ApplyOptions::default()
    };
    match changed_since(resolved)? {
        Changed::No(_) => apply_plan_locked(resolved, plan, &options, None, InCheck::Refuse),
        Changed::Yes(project) => resolve_again(resolved, project, &options, None, InCheck::Refuse),
    }
}

/// The configuration as it is now (read under the project lock when the caller holds
/// it, see [`apply`]), and whether it, the lock or a file the snapshot read changed
/// since `resolved` was taken.
enum Changed {
    No(aibox_config::Project),
    Yes(aibox_config::Project),
}

fn changed_since(resolved: &crate::resolve::Resolved) -> Result<Changed, EngineError> {
    let root = resolved.project_root();
    let project = crate::config_check::check_project(root.path())?;
    let changed = project.config != resolved.project.config
        || project.local != resolved.project.local
        || crate::snapshot::read_lock(root)? != resolved.previous_lock
        || !resolved.files.is_current(root, &resolved.project);
    Ok(if changed {
        Changed::Yes(project)
    } else {
        Changed::No(project)
    })
}

/// Resolves the project again (under the project lock), with the configuration read
/// under it, and applies that.
fn resolve_again(
    resolved: &crate::resolve::Resolved,
    project: aibox_config::Project,
    options: &ApplyOptions,
    guard: Option<ProjectLock>,
    unowned_in_check: InCheck,
) -> Result<ApplyReport, EngineError> {
    let root = resolved.project_root().clone();
    let again = crate::resolve::resolve_in(root, project, resolved.options())?;
    apply_fresh(again, options, guard, unowned_in_check)
}

fn lock_unless_read_only(
    root: &ProjectRoot,
    options: &ApplyOptions,
) -> Result<Option<ProjectLock>, EngineError> {
    if options.dry_run || options.check {
        Ok(None)
    } else {
        Ok(Some(ProjectLock::acquire(root, options.lock_timeout)?))
    }
}

/// Plans and applies a project resolved under the project lock: its snapshot and
/// processkit scan are current, so nothing is checked or read again before planning.
/// What only planning reads is freed before the apply (see
/// [`crate::resolve::Resolved::free_planning_state`]).
fn apply_fresh(
    mut resolved: crate::resolve::Resolved,
    options: &ApplyOptions,
    guard: Option<ProjectLock>,
    unowned_in_check: InCheck,
) -> Result<ApplyReport, EngineError> {
    let plan = crate::plan::plan(&resolved)?;
    resolved.free_planning_state();
    apply_plan_locked(&resolved, plan, options, guard, unowned_in_check)
}

/// Whether a file the processkit plan writes is no longer as the resolve-time scan saw
/// it (neither the state it planned from nor the contents it writes).
fn processkit_scan_is_stale(
    root: &ProjectRoot,
    plan: &crate::builder::Plan,
) -> Result<bool, EngineError> {
    let Some(intent) = &plan.processkit_intent else {
        return Ok(false);
    };
    for (path, write) in intent.writes.iter() {
        let rel = Utf8Path::new(path);
        let live = match root.file_meta(rel)? {
            None => None,
            Some(_) => Some(aibox_provenance::Sha256::of_file(root.path().join(rel))?),
        };
        if live != write.before && live != Some(write.new) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Besides the planned files, where a killed run may have left temp files: the pending
/// lock, and where an unfinished run this apply undoes was writing (see
/// `aibox_provenance::LiveScan::abandoned`, or the one a resumed undo undoes, and every
/// run an undo in their chain undid; a file it was replacing may need no write now).
fn undone_writes(resolved: &crate::resolve::Resolved) -> impl Iterator<Item = &Utf8Path> {
    let undone = match &resolved.processkit {
        crate::resolve::ProcesskitState::Resolved(r) => r.scan.undone(),
        _ => None,
    };
    std::iter::once(Utf8Path::new(PENDING_LOCK)).chain(
        undone
            .into_iter()
            .flat_map(aibox_provenance::Intent::chain)
            .flat_map(|i| i.writes.keys().map(Utf8Path::new)),
    )
}

fn apply_plan_locked(
    resolved: &crate::resolve::Resolved,
    mut plan: crate::builder::Plan,
    options: &ApplyOptions,
    _guard: Option<ProjectLock>,
    unowned_in_check: InCheck,
) -> Result<ApplyReport, EngineError> {
    let root = resolved.project_root();
    let read_only = options.dry_run || options.check;
    let mut writer = Writer::new(root);
    let lock_file = plan.lock_file();
    // Written as the pending record, then freed (a line per file a first install writes).
    let intent = plan.processkit_intent.take();
    let all: Vec<&PlannedFile> = plan
        .files
        .iter()
        .chain(std::iter::once(&lock_file))
        .collect();

    let removed_temp_files = if read_only {
        Vec::new()
    } else {
        let written = all.iter().map(|f| f.path.as_path());
        writer.clean_stray_temps(written.chain(undone_writes(resolved)))?
    };

    let pending = read_pending(root)?;
    let known = KnownDigests {
        previous: resolved.previous_lock.as_ref(),
        pending: pending.as_ref(),
    };

    // Decide everything before writing anything: a refusal leaves the project untouched.
    let moves = moves_that_apply(root, &plan)?;
    let mut decisions = Vec::with_capacity(all.len());
    for file in &all {
        let render = plan.render_of(&file.path);
        decisions.push(decide(root, file, &known, options, &moves, render)?);
    }
    // A dry run or check moves nothing: it lists every removal.
    let removals = planned_removals(root, &plan, options, &moves, read_only)?;
    // A check answers "is every committed output current?": a hand-edited one is not, so
    // it is listed as stale (exit 1), with what `apply` will do about it.
    let unowned = if options.check && unowned_in_check == InCheck::List {
        unowned_notes(&decisions, &all)
    } else {
        refuse_unowned(&decisions, &all, options)?;
        Vec::new()
    };
    let mut reach = judge_reach(&plan, root, options)?;

    if read_only {
        let mut files: Vec<FileReport> = decisions
            .into_iter()
            .zip(&all)
            .map(|(d, f)| d.into_report(f))
            .collect();
        mask_personal_values(&mut files);
        drop(all);
        plan.warnings.extend(unowned);
        plan.warnings.append(&mut reach.notes);
        return Ok(read_only_report(
            root,
            plan,
            files,
            removals,
            removed_temp_files,
            options.check,
        ));
    }

    let (mut reports, removals_end) = write_plan(
        &mut writer,
        &plan,
        intent,
        decisions,
        &all,
        removals,
        &moves,
    )?;
    let moved_away: Vec<_> = moves
        .into_iter()
        .filter(|m| m.removes_from)
        .map(|m| (m.from.to_owned(), m.files))
        .collect();
    // Recorded once the files that give the reach are written.
    plan.warnings.append(&mut reach.notes);
    plan.warnings
        .extend(reach.record(root.path(), plan.reach.as_ref()));
    drop(all);
    fill_copy_paths(&mut reports, &mut plan.files);
    // The stat cache last, as before, once the planned files are freed: its text has a
    // line per installed file, streamed into the file (held whole, with the old file read
    // back to compare, it was the end of a large apply's memory peak). Not fsynced: after
    // a crash, a lost or torn cache only costs re-hashing (a line is trusted only when
    // the file's size, times and inode all still match).
    plan.files = Vec::new();
    if let Some(digests) = &plan.processkit_stat_cache {
        let root = writer.root().as_std_path().to_owned();
        writer.write_cache_streamed(Utf8Path::new(STAT_CACHE), |out| {
            aibox_provenance::StatCache::write_to(&root, digests.iter(), out)
        })?;
    }
    // The removed files of the trees a move took away, among the other removals.
    let away = moved_away.iter().flat_map(|(from, files)| {
        files.keys().map(|rest| {
            let path = aibox_fs::join_exact(from.as_str(), rest);
            FileReport::new(path, Ownership::Merged, FileAction::Removed, None, None)
        })
    });
    reports.splice(removals_end..removals_end, away);
    let wrote_nothing = !reports.iter().any(|f| f.action.changes());
    Ok(ApplyReport {
        files: reports,
        read_only: false,
        wrote_nothing,
        removed_temp_files,
        warnings: plan.warnings,
        upgrade: plan.processkit_upgrade,
        pending_migrations: crate::migrate::pending_brief(root),
    })
}

/// The container's reach of `plan` judged against the owner's approval
/// ([`crate::reach::judge`]); `--check` judges files, not who may reach what.
fn judge_reach(
    plan: &crate::builder::Plan,
    root: &ProjectRoot,
    options: &ApplyOptions,
) -> Result<crate::reach::Judgement, EngineError> {
    crate::reach::judge(
        plan.reach.as_ref().filter(|_| !options.check),
        root.path(),
        options.reach_dir.as_deref().map(Utf8Path::as_std_path),
        options.approve_reach,
        options.dry_run,
    )
}

/// The report of a dry run or check: the files' reports (with the paths of verified
/// copies), the removals, then the lock's.
fn read_only_report(
    root: &ProjectRoot,
    mut plan: crate::builder::Plan,
    mut files: Vec<FileReport>,
    mut removals: Vec<FileReport>,
    removed_temp_files: Vec<Utf8PathBuf>,
    check: bool,
) -> ApplyReport {
    fill_copy_paths(&mut files, &mut plan.files);
    if check {
        checked_only(&mut files, &mut removals);
    }
    let lock_report = files.pop();
    files.extend(removals);
    files.extend(lock_report);
    ApplyReport {
        files,
        read_only: true,
        wrote_nothing: true,
        removed_temp_files,
        warnings: plan.warnings,
        upgrade: plan.processkit_upgrade,
        pending_migrations: crate::migrate::pending_brief(root),
    }
}

/// Gives the reports of verified copies, made without their paths ([`decide_copy`]),
/// the paths of their planned files, which are not needed any more: copies keep their
/// order among the reports (none is a removal or written after the commit point).
fn fill_copy_paths(reports: &mut [FileReport], files: &mut [PlannedFile]) {
    let mut copies = files.iter_mut().filter(|f| f.copy_from.is_some());
    for report in reports.iter_mut().filter(|r| r.path.as_str().is_empty()) {
        if let Some(file) = copies.next() {
            report.path = std::mem::take(&mut file.path);
        }
    }
}

/// A folder move of the plan ([`crate::builder::DirMove`]) that this apply makes: `to` is
/// absent and `from` is a real folder of folders and regular files (`files`, relative to
/// it), as found under the project lock.
struct Move<'p> {
    from: &'p Utf8Path,
    to: &'p Utf8Path,
    /// Compact: a line per file of the previous snapshot (8,600 at 10x).
    files: aibox_provenance::PathTable<()>,
    /// `from` is also a tree the plan removes, and no planned file lies below it: its
    /// files are reported removed from `files`, after the writes, not listed one report
    /// per file before them (a path each, 1.4 MB at 10x, at the apply's memory peak).
    removes_from: bool,
}

impl Move<'_> {
    /// Where the moved folder brings a file planned at `path`, if it holds one.
    fn source_of(&self, path: &Utf8Path) -> Option<Utf8PathBuf> {
        let rest = path.strip_prefix(self.to).ok()?;
        self.files
            .contains_key(rest.as_str())
            .then(|| self.from.join(rest))
    }
}

fn moves_that_apply<'p>(
    root: &ProjectRoot,
    plan: &'p crate::builder::Plan,
) -> Result<Vec<Move<'p>>, EngineError> {
    let mut moves = Vec::new();
    for m in &plan.dir_moves {
        for path in [&m.from, &m.to] {
            check_relative(path)?;
            if !in_perimeter(path) {
                return Err(WriteError::OutsidePerimeter { path: path.clone() }.into());
            }
        }
        if !root.is_absent(&m.to)? {
            continue;
        }
        if let Some(files) = root.plain_tree(&m.from)? {
            let from = m.from.as_str();
            let removes_from = plan.removed_trees.contains(&m.from)
                && !plan.files.iter().any(|f| {
                    f.path
                        .as_str()
                        .strip_prefix(from)
                        .is_some_and(|rest| rest.starts_with('/'))
                });
            moves.push(Move {
                from: &m.from,
                to: &m.to,
                files: files.iter().map(|f| (f.as_str(), ())).collect(),
                removes_from,
            });
        }
    }
    Ok(moves)
}

/// Makes the plan's folder moves, then removes what each moved folder holds that the
/// plan does not write below its new place (and the folders that leaves empty). A move
/// that can no longer be made (something appeared at `to`) clears `moved_in`, so those
/// files are written in full.
fn make_moves(
    writer: &mut Writer<'_>,
    moves: &[Move<'_>],
    decisions: &mut [Decision],
    all: &[&PlannedFile],
) -> Result<(), EngineError> {
    for m in moves {
        if !writer.move_dir(m.from, m.to)? {
            for (d, f) in decisions.iter_mut().zip(all) {
                if f.path.starts_with(m.to) {
                    d.moved_in = false;
                }
            }
            // The plan removes the folder that stayed: file by file, as a tree that
            // no move takes ([`planned_removals`] left its files out).
            if m.removes_from {
                for rest in m.files.keys() {
                    writer.remove(&m.from.join(rest))?;
                }
            }
            continue;
        }
        let planned: std::collections::HashSet<&str> = all
            .iter()
            .filter_map(|f| f.path.strip_prefix(m.to).ok().map(Utf8Path::as_str))
            .collect();
        for rest in m.files.keys().filter(|f| !planned.contains(f)) {
            let extra = m.to.join(rest);
            writer.remove(&extra)?;
            let mut dir = extra.parent();
            while let Some(d) = dir {
                if d == m.to || !writer.remove_empty_dir(d)? {
                    break;
                }
                dir = d.parent();
            }
        }
    }
    Ok(())
}

/// The removals of a plan that exist on disk, as reports (diffed in dry-run mode): its
/// files to remove, then the regular files below its removed trees, listed now (none
/// that the plan writes), but for a tree that one of `moves` takes away whole (see
/// [`Move::removes_from`] and [`moved_away`]) unless `list_moved` (a dry run or check,
/// which moves nothing, lists those files too, without a diff).
fn planned_removals(
    root: &ProjectRoot,
    plan: &crate::builder::Plan,
    options: &ApplyOptions,
    moves: &[Move<'_>],
    list_moved: bool,
) -> Result<Vec<FileReport>, EngineError> {
    // A tree a move takes away: its files live on where it moves to.
    let moved_away = |path: &Utf8Path| {
        moves
            .iter()
            .any(|m| m.removes_from && path.starts_with(m.from))
    };
    let mut in_trees = Vec::new();
    for tree in &plan.removed_trees {
        check_relative(tree)?;
        if !list_moved && moved_away(tree) {
            continue;
        }
        in_trees.extend(
            root.regular_files_below(tree)?
                .into_iter()
                .map(|rest| Utf8PathBuf::from(aibox_fs::join_exact(tree.as_str(), &rest)))
                .filter(|path| !plan.plans(path.as_str())),
        );
    }
    // A report per file of a removed snapshot (8,600 at 10x), kept until the apply ends.
    let mut removals = Vec::with_capacity(plan.removals.len() + in_trees.len());
    for path in plan.removals.iter().cloned().chain(in_trees) {
        check_relative(&path)?;
        if !in_perimeter(&path) {
            return Err(WriteError::OutsidePerimeter { path }.into());
        }
        // Only a dry run needs the old text (for the diff); otherwise existence is enough.
        // A file a folder move takes away is listed without a diff (QA: an upgrade's dry
        // run printed every file of the previous reference copy in full): the files it
        // moves to are diffed against it instead.
        let exists = if options.dry_run && !moved_away(&path) {
            root.read(&path)?.map(Some)
        } else {
            root.is_file(&path)?.then_some(None)
        };
        if let Some(old) = exists {
            let diff = old.map(|old| {
                unified_diff(&path, Some(&old), b"").replacen(
                    &format!("+++ b/{path}"),
                    "+++ /dev/null",
                    1,
                )
            });
            removals.push(FileReport::new(
                path,
                Ownership::Merged,
                FileAction::Removed,
                None,
                diff,
            ));
        }
    }
    Ok(removals)
}

/// Masks the values of the personal files' diffs in a dry run (the diff of the personal
/// environment file showed each token, old and new): its output is the kind that is
/// pasted into an issue or kept in a CI log. A variable's value is masked by its shape,
/// in the environment file (`NAME=value`) and in the personal Compose file (`"NAME":
/// "value"`); the committed files never hold a personal value.
fn mask_personal_values(files: &mut [FileReport]) {
    for f in files.iter_mut() {
        let env_file = match f.path.as_str() {
            aibox_config::layout::LOCAL_ENV => true,
            aibox_config::layout::COMPOSE_LOCAL => false,
            _ => continue,
        };
        if let Some(diff) = f.details.as_mut().and_then(|d| d.diff.as_mut()) {
            *diff = diff
                .split_inclusive('\n')
                .map(|line| mask_assignment(line, env_file))
                .collect::<String>();
        }
    }
}

/// A diff line of a personal file with a variable's value masked (see
/// [`mask_personal_values`]): `NAME=value` in the environment file, `"NAME": value` in the
/// Compose file; any other line as it is.
fn mask_assignment(line: &str, env_file: bool) -> std::borrow::Cow<'_, str> {
    use aibox_config::validate::is_env_name;
    let body = match line.strip_prefix(['+', '-', ' ']) {
        Some(body) if !line.starts_with("+++") && !line.starts_with("---") => body,
        _ => return line.into(),
    };
    let end = if line.ends_with('\n') { "\n" } else { "" };
    let sign = &line[..1];
    if env_file {
        return match body.split_once('=') {
            Some((name, _)) if is_env_name(name) => {
                format!("{sign}{name}={}{end}", aibox_policy::redact::MASK).into()
            }
            _ => line.into(),
        };
    }
    let trimmed = body.trim_start();
    let indent = &body[..body.len() - trimmed.len()];
    if let Some((name, _)) = trimmed
        .strip_prefix('"')
        .and_then(|rest| rest.split_once("\": "))
        && is_env_name(name)
    {
        return format!(
            "{sign}{indent}\"{name}\": \"{}\"{end}",
            aibox_policy::redact::MASK
        )
        .into();
    }
    line.into()
}

/// What `apply --check` reports of a read-only run's files and removals: committed files
/// only (local state is not judged), and a hand-edited file as one to update (a check
/// saves no backup).
fn checked_only(files: &mut Vec<FileReport>, removals: &mut Vec<FileReport>) {
    files.retain(|r| !aibox_config::is_local_state(r.path.as_str()));
    removals.retain(|r| !aibox_config::is_local_state(r.path.as_str()));
    for r in files {
        if r.action == FileAction::BackedUp {
            r.action = FileAction::Updated;
            if let Some(details) = &mut r.details {
                details.backup = None;
            }
        }
    }
}

/// For `apply --check`: a note per committed generated file aibox did not write or that
/// was edited by hand since the last apply (its report lists it as one to update).
fn unowned_notes(decisions: &[Decision], planned: &[&PlannedFile]) -> Vec<String> {
    decisions
        .iter()
        .zip(planned)
        .filter(|(_, f)| !aibox_config::is_local_state(f.path.as_str()))
        .filter_map(|(d, f)| {
            let why = match d.unowned? {
                Unowned::Foreign => "was not written by aibox",
                Unowned::Edited => "was edited by hand since the last apply",
            };
            Some(format!(
                "`{}` {why}: `aibox apply` refuses to overwrite it (move your change into \
                 aibox.toml, or `aibox apply --force` keeps a backup and rewrites it)",
                f.path
            ))
        })
        .collect()
}

/// Refuses (without `--force`) the first generated file aibox did not write or that was
/// edited by hand since the last apply. A check leaves local state out (see
/// [`ApplyOptions::check`]).
fn refuse_unowned(
    decisions: &[Decision],
    planned: &[&PlannedFile],
    options: &ApplyOptions,
) -> Result<(), EngineError> {
    if options.force {
        return Ok(());
    }
    for (d, file) in decisions.iter().zip(planned) {
        let Some(unowned) = d.unowned else {
            continue;
        };
        if options.check && aibox_config::is_local_state(file.path.as_str()) {
            continue;
        }
        return Err(match unowned {
            Unowned::Foreign => EngineError::ForeignFile {
                path: file.path.clone().into(),
            },
            Unowned::Edited => EngineError::EditedFile {
                path: file.path.clone().into(),
                diff: unified_diff(&file.path, d.old(), &file.contents),
            },
        });
    }
    Ok(())
}

/// The write phase of an apply: pending records, content and removals, the commit
/// point, the records of the content, the lock, then dropping the pending records.
/// Returns the reports and where its removals end among them.
#[allow(clippy::too_many_arguments)] // the parts of one apply, taken apart to free early
fn write_plan(
    writer: &mut Writer<'_>,
    plan: &crate::builder::Plan,
    intent: Option<aibox_provenance::Intent>,
    mut decisions: Vec<Decision>,
    all: &[&PlannedFile],
    removals: Vec<FileReport>,
    moves: &[Move<'_>],
) -> Result<(Vec<FileReport>, usize), EngineError> {
    let anything = !removals.is_empty()
        || moves.iter().any(|m| m.removes_from)
        || decisions.iter().any(|d| d.action.changes());
    // All or nothing: every folder that will be written to must take a new file before
    // the first real write, so a permission problem stops the run with nothing changed.
    if anything {
        // Counted first, so the list is sized once (17,000 paths at 10x processkit).
        let count = decisions
            .iter()
            .map(|d| usize::from(d.action.changes()) + usize::from(d.backup().is_some()))
            .sum::<usize>();
        let mut targets: Vec<&Utf8Path> = Vec::with_capacity(2 + count + removals.len());
        targets.extend([
            Utf8Path::new(PENDING_LOCK),
            Utf8Path::new(PENDING_PROCESSKIT),
        ]);
        for (decision, file) in decisions.iter().zip(all) {
            if decision.action.changes() {
                targets.push(&file.path);
            }
            if let Some(backup) = decision.backup() {
                targets.push(backup);
            }
        }
        targets.extend(removals.iter().map(|r| r.path.as_path()));
        writer.probe_writable(&targets)?;
    }
    if anything {
        writer.write(Utf8Path::new(PENDING_LOCK), plan.lock_text.as_bytes(), None)?;
        if let Some(intent) = intent {
            writer.write_streamed(Utf8Path::new(PENDING_PROCESSKIT), None, |out| {
                intent.write_to(out)
            })?;
        }
        // Content is made durable once, at the commit point below, not file by file.
        writer.defer_sync();
        make_moves(writer, moves, &mut decisions, all)?;
    }
    let mut reports = Vec::with_capacity(decisions.len() + removals.len());
    // The decisions are walked in place, never copied (at 34,000 files a copy was the
    // apply's largest allocation): the lock (the last item) and the records written after
    // the commit point are set aside as they come.
    let lock_at = decisions.len().checked_sub(1);
    let after_commit =
        |i: usize| Some(i) == lock_at || plan.commit_last.contains(all[i].path.as_path());
    let copied_ahead = copy_ahead(writer, &decisions, all, &after_commit)?;
    let write = |writer: &mut Writer<'_>, decision, file: &PlannedFile| {
        write_decided(writer, decision, file, plan.render_of(&file.path))
    };
    let mut last = Vec::new();
    let mut lock_item = None;
    for (i, (decision, file)) in decisions.into_iter().zip(all.iter().copied()).enumerate() {
        if Some(i) == lock_at {
            lock_item = Some((decision, file));
        } else if after_commit(i) {
            last.push((decision, file));
        } else if copied_ahead && copies_ahead(&decision, file) {
            reports.push(decision.into_report(file));
        } else {
            reports.push(write(writer, decision, file)?);
        }
    }
    for removal in removals {
        writer.remove(&removal.path)?;
        reports.push(removal);
    }
    let removals_end = reports.len();
    for dir in &plan.prune_dirs {
        writer.prune_empty_dirs(dir)?;
    }
    // The commit point: everything above is durable before any record of it is written.
    writer.commit()?;
    for (decision, file) in last.into_iter().chain(lock_item) {
        reports.push(write(writer, decision, file)?);
    }
    // Unconditional: a run killed between the lock and these removals left the records.
    writer.remove(Utf8Path::new(PENDING_PROCESSKIT))?;
    writer.remove(Utf8Path::new(PENDING_LOCK))?;
    Ok((reports, removals_end))
}

/// Below this many verified copies, one thread writes them.
const PARALLEL_COPIES_FROM: usize = 64;
/// Copies a worker takes at a time: neighbours in path order, mostly one folder.
const COPY_CHUNK: usize = 8;
/// Threads that write copies side by side at most.
const MAX_WORKERS: usize = 4;

/// Whether [`copy_ahead`] writes this item: a verified copy to write, not arriving by a
/// folder move, with no backup to make first.
fn copies_ahead(d: &Decision, f: &PlannedFile) -> bool {
    f.copy_from.is_some() && d.action.changes() && !d.moved_in && d.backup().is_none()
}

/// The work of [`copy_ahead`] as ranges of one list of item positions (8 bytes a job, 4
/// an item: a first install has thousands; a plan of 2^32 files would not fit in memory
/// anyway): a job makes the new files that take the bytes of one source (a release file
/// and its snapshot copy) from one read of it, or replaces one existing file.
struct CopyJobs {
    /// Positions of the items to copy, those of one source side by side.
    order: Vec<u32>,
    /// Each job's range of `order`, in plan order of its first item: neighbours in path
    /// order, mostly one folder.
    jobs: Vec<(u32, u32)>,
}

/// A position in a plan's list as [`CopyJobs`] keeps it.
fn position(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// A source of new files created in place (its digest, path and folder) and their mode:
/// `None` for a file to replace, which is a job of its own.
type SourceKey<'p> = Option<(&'p [u8; 32], &'p str, &'p std::path::Path, Option<u16>)>;

impl CopyJobs {
    /// The jobs of the items at the positions `eligible` keeps (all verified copies).
    fn new(
        decisions: &[Decision],
        files: &[&PlannedFile],
        eligible: impl Fn(usize) -> bool,
    ) -> Self {
        let source = |i: usize| -> SourceKey<'_> {
            let f = files[i];
            let from = f.copy_from.as_ref()?;
            decisions[i]
                .in_place
                .then(|| (&from.sha256, &*from.rel, from.dir.as_path(), f.mode))
        };
        // Counted first, so the list is sized once.
        let mut order = Vec::with_capacity((0..files.len()).filter(|&i| eligible(i)).count());
        order.extend((0..files.len()).filter(|&i| eligible(i)).map(position));
        // By source, then position: a source's files come together, first one first.
        order.sort_unstable_by(|&a, &b| match (source(a as usize), source(b as usize)) {
            (Some(x), Some(y)) => x.cmp(&y).then(a.cmp(&b)),
            (None, None) => a.cmp(&b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
        });
        let mut jobs: Vec<(u32, u32)> = Vec::new();
        for (at, &i) in order.iter().enumerate() {
            let same_source = |start: u32| {
                let key = source(i as usize);
                key.is_some() && key == source(order[start as usize] as usize)
            };
            match jobs.last_mut() {
                Some((start, end)) if same_source(*start) => *end = position(at + 1),
                _ => jobs.push((position(at), position(at + 1))),
            }
        }
        jobs.sort_unstable_by_key(|&(start, _)| order[start as usize]);
        Self { order, jobs }
    }

    /// Makes the files of the job `job`.
    fn run(
        &self,
        job: (u32, u32),
        decisions: &[Decision],
        files: &[&PlannedFile],
        writer: &mut Writer<'_>,
    ) -> Result<(), crate::writer::WriteError> {
        let items = &self.order[job.0 as usize..job.1 as usize];
        let Some(&first) = items.first() else {
            return Ok(());
        };
        let first = first as usize;
        let file = files[first];
        let Some(from) = &file.copy_from else {
            return Ok(());
        };
        if decisions[first].in_place {
            let paths: Vec<&Utf8Path> = items
                .iter()
                .map(|&i| files[i as usize].path.as_path())
                .collect();
            writer.create_verified(&paths, from, file.mode_bits())
        } else {
            writer.copy_verified(&file.path, from, file.mode_bits())
        }
    }
}

/// Writes the decided verified copies (processkit release files, see [`copies_ahead`])
/// before the in-order pass; returns whether it did. Each is its own write that nothing
/// records before the commit point, so their order does not matter: a new file and its
/// snapshot copy are made from one read of their source, and with many copies and
/// several cores, creating thousands of files (mostly file system work) runs on two
/// threads side by side. Nothing is written here when the test crash hook counts kill
/// points: the in-order pass writes them all. Items `after_commit` sets aside are never
/// copied here.
fn copy_ahead(
    writer: &mut Writer<'_>,
    decisions: &[Decision],
    files: &[&PlannedFile],
    after_commit: &dyn Fn(usize) -> bool,
) -> Result<bool, EngineError> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    if writer.counts_crash_points() {
        return Ok(false);
    }
    let copies = CopyJobs::new(decisions, files, |i| {
        !after_commit(i) && copies_ahead(&decisions[i], files[i])
    });
    let jobs = &copies.jobs;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_WORKERS));
    if workers < 2 || copies.order.len() < PARALLEL_COPIES_FROM {
        for &job in jobs {
            copies.run(job, decisions, files, writer)?;
        }
        return Ok(true);
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    // One worker: take the next chunk until none is left or another worker failed.
    let work = |helper: &mut Writer<'_>| -> Result<(), crate::writer::WriteError> {
        while !failed.load(Ordering::Relaxed) {
            let start = next.fetch_add(COPY_CHUNK, Ordering::Relaxed);
            let Some(chunk) = jobs.get(start..(start + COPY_CHUNK).min(jobs.len())) else {
                break;
            };
            for &job in chunk {
                copies
                    .run(job, decisions, files, helper)
                    .inspect_err(|_| failed.store(true, Ordering::Relaxed))?;
            }
        }
        Ok(())
    };
    let helpers: Vec<Writer<'_>> = (0..workers).map(|_| writer.helper()).collect();
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = helpers
            .into_iter()
            .map(|mut helper| {
                let work = &work;
                scope.spawn(move || {
                    let result = work(&mut helper);
                    (helper, result)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(std::thread::ScopedJoinHandle::join)
            .collect::<Vec<_>>()
    });
    let mut first_error = None;
    for joined in results {
        let (helper, result) = joined.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        writer.absorb(helper);
        if let Err(e) = result {
            first_error.get_or_insert(EngineError::from(e));
        }
    }
    first_error.map_or(Ok(true), Err)
}

/// Writes one decided file (and its backup when forced); returns its report.
fn write_decided(
    writer: &mut Writer<'_>,
    decision: Decision,
    file: &PlannedFile,
    render: Option<&dyn Render>,
) -> Result<FileReport, EngineError> {
    if let (Some(old), Some(backup)) = (decision.old(), decision.backup()) {
        writer.write(backup, old, None)?;
    }
    if decision.action.changes() && !decision.moved_in {
        if let Some(render) = render {
            writer.write_streamed(&file.path, file.mode_bits(), |out| render.write_to(out))?;
            return Ok(decision.into_report(file));
        }
        match &file.copy_from {
            Some(from) if decision.in_place => {
                writer.create_verified(&[&file.path], from, file.mode_bits())?;
            }
            Some(from) => writer.copy_verified(&file.path, from, file.mode_bits())?,
            None => {
                writer.write(&file.path, &file.contents, file.mode_bits())?;
            }
        }
    }
    Ok(decision.into_report(file))
}

struct KnownDigests<'a> {
    previous: Option<&'a Lock>,
    pending: Option<&'a Lock>,
}

impl KnownDigests<'_> {
    /// Who wrote the existing `bytes` of a generated file: `None` when aibox did. A
    /// digest recorded at the last apply (or by a killed one) decides; only a file with no
    /// recorded digest falls back to aibox's header, since an edit keeps the header.
    fn owner(&self, path: &Utf8Path, bytes: &[u8]) -> Option<Unowned> {
        let recorded: Vec<&str> = [self.previous, self.pending]
            .into_iter()
            .flatten()
            .filter_map(|lock| lock.generated_digest(path.as_str()))
            .collect();
        if recorded.is_empty() {
            let header = String::from_utf8_lossy(bytes)
                .contains(aibox_devcontainer::GENERATED_HEADER_MARKER);
            return (!header).then_some(Unowned::Foreign);
        }
        let digest = sha256_hex(bytes);
        if recorded.contains(&digest.as_str()) {
            None
        } else {
            Some(Unowned::Edited)
        }
    }
}

/// Why an existing generated file is not aibox's to overwrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unowned {
    /// aibox never wrote it (no header, no recorded digest).
    Foreign,
    /// aibox wrote it, and it was edited by hand since.
    Edited,
}

/// What a check does with an [`Unowned`] file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InCheck {
    /// Lists it as stale, with a note (`apply --check`).
    List,
    /// Refuses it as `apply` does (doctor's `sync` check, whose finding names `--force`
    /// and never advises a plain `apply`).
    Refuse,
}

/// What an apply does with one planned file. Compact (16 bytes): a first install holds one
/// per release file while it writes, so what only a few files need (a backup, a diff,
/// the old bytes) lives behind one pointer, and the path stays with the planned file.
struct Decision {
    action: FileAction,
    /// Set when the existing generated file is not aibox's to overwrite.
    unowned: Option<Unowned>,
    /// The file arrives with the planned bytes and mode by a folder move ([`Move`]):
    /// reported as created, not written.
    moved_in: bool,
    /// A verified copy with nothing at its path, and no folder move bringing a file
    /// there: created in place ([`Writer::create_verified`]), not replaced.
    in_place: bool,
    /// Only for a file with a backup or a diff to show, or old bytes to back up.
    extra: Option<Box<Extra>>,
}

/// The rare parts of a [`Decision`].
#[derive(Default)]
struct Extra {
    /// Existing bytes, kept for backups.
    old: Option<Vec<u8>>,
    /// Where the existing file is saved first.
    backup: Option<Utf8PathBuf>,
    /// Unified diff, in dry-run mode.
    diff: Option<String>,
}

impl Decision {
    fn backup(&self) -> Option<&Utf8PathBuf> {
        self.extra.as_ref().and_then(|e| e.backup.as_ref())
    }

    fn old(&self) -> Option<&[u8]> {
        self.extra.as_ref().and_then(|e| e.old.as_deref())
    }

    /// The report of `file`'s decision. A verified copy's path is left empty, to be moved
    /// from its planned file once that is no longer needed ([`fill_copy_paths`]): the
    /// paths of thousands of release files are not held twice meanwhile.
    fn into_report(self, file: &PlannedFile) -> FileReport {
        let (backup, diff) = self.extra.map_or((None, None), |e| (e.backup, e.diff));
        let path = if file.copy_from.is_some() {
            PlanPath::default()
        } else {
            file.path.clone()
        };
        FileReport::new(path, file.ownership, self.action, backup, diff)
    }
}

fn decide(
    root: &ProjectRoot,
    file: &PlannedFile,
    known: &KnownDigests,
    options: &ApplyOptions,
    moves: &[Move<'_>],
    render: Option<&dyn Render>,
) -> Result<Decision, EngineError> {
    check_relative(&file.path)?;
    if !in_perimeter(&file.path) {
        return Err(WriteError::OutsidePerimeter {
            path: file.path.clone().into(),
        }
        .into());
    }
    if let Some(render) = render {
        return decide_rendered(root, file, render, options);
    }
    if let Some(from) = &file.copy_from {
        let arrives_from = moves.iter().find_map(|m| m.source_of(&file.path));
        return decide_copy(root, file, from, options, arrives_from.as_deref());
    }
    let old = root.read(&file.path)?;
    let old_mode = if old.is_some() && file.mode.is_some() {
        root.mode(&file.path)?
    } else {
        None
    };
    let mut unowned = None;
    let action = match (&old, file.ownership) {
        (None, _) => FileAction::Created,
        (Some(_), Ownership::ScaffoldOnce) => FileAction::SkippedUserOwned,
        (Some(bytes), _) if **bytes == *file.contents => {
            if file.mode.is_some() && old_mode.is_some() && file.mode_bits() != old_mode {
                FileAction::Updated
            } else {
                FileAction::Unchanged
            }
        }
        (Some(bytes), Ownership::Generated)
            if file.path != LOCK_FILE && known.owner(&file.path, bytes).is_some() =>
        {
            unowned = known.owner(&file.path, bytes);
            FileAction::BackedUp
        }
        (Some(_), _) => FileAction::Updated,
    };
    let diff = (options.dry_run && action.changes())
        .then(|| unified_diff(&file.path, old.as_deref(), &file.contents));
    // Predicted in dry-run/check too, so the report says where the copy would go.
    let backup = if unowned.is_some() {
        Some(backup_path(root, &file.path)?)
    } else {
        None
    };
    // The old bytes are kept only to back them up.
    let old = old.filter(|_| backup.is_some());
    let extra = (old.is_some() || backup.is_some() || diff.is_some())
        .then(|| Box::new(Extra { old, backup, diff }));
    Ok(Decision {
        action,
        unowned,
        moved_in: false,
        in_place: false,
        extra,
    })
}

/// The decision for a verified copy (processkit release files): compared by size and
/// digest, streaming the existing file, so no planned file is held in memory. Only a
/// dry run reads both sides, for the diff. `moved` is where a folder move brings the
/// file from (the file is created either way; it is not written when that one matches).
fn decide_copy(
    root: &ProjectRoot,
    file: &PlannedFile,
    from: &aibox_config::CopyFrom,
    options: &ApplyOptions,
    moved: Option<&Utf8Path>,
) -> Result<Decision, EngineError> {
    let existing = moved.unwrap_or(&file.path);
    let same = same_on_disk(root, existing, from.size, &from.sha256, file.mode)?;
    let in_place = moved.is_none() && same.is_none();
    let (action, moved_in) = match (moved, same) {
        (Some(_), same) => (FileAction::Created, same == Some(true)),
        (None, None) => (FileAction::Created, false),
        (None, Some(true)) => (FileAction::Unchanged, false),
        (None, Some(false)) => (FileAction::Updated, false),
    };
    // A file that a folder move brings in is diffed against the copy it moves from, and
    // not at all when that copy is already the new bytes (QA: a dry run of an upgrade
    // printed every file of the reference copy as new, 296,000 lines for 25 changes).
    let diff = if options.dry_run && action.changes() && !moved_in {
        let old = root.read(existing)?;
        let new = from.read_verified().map_err(|reason| {
            EngineError::io(
                "read",
                from.path().display().to_string(),
                std::io::Error::other(reason),
            )
        })?;
        Some(unified_diff(&file.path, old.as_deref(), &new))
    } else {
        None
    };
    Ok(Decision {
        action,
        unowned: None,
        moved_in,
        in_place,
        extra: diff_only(diff),
    })
}

/// Whether the file at `path` has `size` bytes with SHA-256 `sha256` and mode `mode`
/// (when one is planned), streaming it; `None` when nothing is there.
fn same_on_disk(
    root: &ProjectRoot,
    path: &Utf8Path,
    size: u64,
    sha256: &[u8; 32],
    mode: Option<u16>,
) -> Result<Option<bool>, EngineError> {
    let Some(meta) = root.file_meta(path)? else {
        return Ok(None);
    };
    Ok(Some(
        meta.len() == size
            && aibox_provenance::Sha256::of_file(root.path().join(path))?.as_bytes() == sha256
            && mode.is_none_or(|m| mode_of(&meta).is_none_or(|have| have == u32::from(m))),
    ))
}

/// A decision's rare parts when only a dry run's diff is among them.
fn diff_only(diff: Option<String>) -> Option<Box<Extra>> {
    diff.map(|diff| {
        Box::new(Extra {
            diff: Some(diff),
            ..Extra::default()
        })
    })
}

/// The decision for a file made when written ([`Render`], the processkit marker, always
/// [`Ownership::Merged`]): compared by size and digest, streaming the existing file, as
/// a verified copy is; only a dry run renders it, for the diff.
fn decide_rendered(
    root: &ProjectRoot,
    file: &PlannedFile,
    render: &dyn Render,
    options: &ApplyOptions,
) -> Result<Decision, EngineError> {
    let same = same_on_disk(root, &file.path, render.size(), &render.sha256(), file.mode)?;
    let action = match same {
        None => FileAction::Created,
        Some(true) => FileAction::Unchanged,
        Some(false) => FileAction::Updated,
    };
    let diff = if options.dry_run && action.changes() {
        let old = root.read(&file.path)?;
        Some(unified_diff(&file.path, old.as_deref(), &render.to_bytes()))
    } else {
        None
    };
    Ok(Decision {
        action,
        unowned: None,
        moved_in: false,
        in_place: false,
        extra: diff_only(diff),
    })
}

/// Unified diff of one file; a created file is diffed against `/dev/null`.
fn unified_diff(path: &Utf8Path, old: Option<&[u8]>, new: &[u8]) -> String {
    let old_text = old.map(String::from_utf8_lossy).unwrap_or_default();
    let new_text = String::from_utf8_lossy(new);
    let from = if old.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_owned()
    };
    similar::TextDiff::from_lines(old_text.as_ref(), new_text.as_ref())
        .unified_diff()
        .context_radius(3)
        .header(&from, &format!("b/{path}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A report's JSON names its backup and diff as fields of its own, and only when set;
    /// the report itself stays at 32 bytes.
    #[test]
    fn a_reports_json_keeps_backup_and_diff_as_its_own_fields() {
        let plain = FileReport::new(
            "a.txt",
            Ownership::Generated,
            FileAction::Created,
            None,
            None,
        );
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"path":"a.txt","action":"created"}"#
        );
        assert_eq!((plain.backup(), plain.diff()), (None, None));
        let backed_up = FileReport::new(
            "b.txt",
            Ownership::Generated,
            FileAction::BackedUp,
            Some(".aibox/backups/b.txt.1".into()),
            Some("-old\n+new\n".to_owned()),
        );
        assert_eq!(
            serde_json::to_string(&backed_up).unwrap(),
            r#"{"path":"b.txt","action":"backed-up","backup":".aibox/backups/b.txt.1","diff":"-old\n+new\n"}"#
        );
        assert_eq!(
            backed_up.backup(),
            Some(Utf8Path::new(".aibox/backups/b.txt.1"))
        );
        assert_eq!(std::mem::size_of::<FileReport>(), 32);
        // A first install plans a file for each release file and its snapshot copy
        // (its source's offset in the store's pack is 8 of these bytes, won back by
        // boxed contents).
        assert_eq!(std::mem::size_of::<PlannedFile>(), 112);
    }

    fn copy(path: &str, rel: &str, digest: u8, mode: Option<u16>) -> PlannedFile {
        let dir = Arc::new(std::path::PathBuf::from("/release"));
        let from = aibox_config::CopyFrom::new(dir, Arc::from(rel), [digest; 32], 1);
        let mut file = PlannedFile::copy(path, from, Ownership::Generated);
        file.mode = mode;
        file
    }

    fn decided(in_place: bool) -> Decision {
        Decision {
            action: FileAction::Created,
            unowned: None,
            moved_in: false,
            in_place,
            extra: None,
        }
    }

    /// A release file and its snapshot copy are one job (one read of the source), a
    /// file to replace or with another mode is a job of its own, jobs come in plan order
    /// of their first file, and what the filter leaves out is in none.
    #[test]
    fn copy_jobs_group_the_new_files_of_one_source_in_plan_order() {
        let files = [
            copy(".aibox/snapshot/a.md", "a.md", 1, None),
            copy(".aibox/snapshot/b.md", "b.md", 2, None),
            copy("context/a.md", "a.md", 1, None),
            copy("context/b.md", "b.md", 2, None),
            copy("context/c.md", "c.md", 3, None),
            copy("context/d/b.md", "b.md", 2, None),
            copy("context/e.md", "e.md", 4, None),
            copy("context/x.sh", "a.md", 1, Some(0o755)),
        ];
        let all: Vec<&PlannedFile> = files.iter().collect();
        let decisions: Vec<Decision> = (0..files.len()).map(|i| decided(i != 4)).collect();
        let copies = CopyJobs::new(&decisions, &all, |i| i != 6);
        let jobs: Vec<Vec<usize>> = copies
            .jobs
            .iter()
            .map(|&(start, end)| {
                copies.order[start as usize..end as usize]
                    .iter()
                    .map(|&i| i as usize)
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(jobs, [vec![0, 2], vec![1, 3, 5], vec![4], vec![7]]);
    }

    /// A move that can no longer be made (its target appeared after planning) still
    /// removes the files of a tree the plan removes, whose reports it carries (see
    /// [`Move::removes_from`]); a folder the plan keeps is left as it is.
    #[test]
    fn a_move_that_cannot_be_made_still_removes_the_tree_it_reports_removed() {
        let dir = tempfile::tempdir().unwrap();
        let root_path = Utf8Path::from_path(dir.path()).unwrap();
        let snapshots = "context/templates/processkit";
        for version in ["v1", "v2", "v3"] {
            fs_err::create_dir_all(root_path.join(snapshots).join(version).join("d")).unwrap();
            fs_err::write(root_path.join(snapshots).join(version).join("d/a.md"), "a").unwrap();
            fs_err::write(root_path.join(snapshots).join(version).join("b.md"), "b").unwrap();
        }
        let root = ProjectRoot::open(root_path).unwrap();
        let mut writer = Writer::new(&root);
        let (v1, v2, v3) = (
            Utf8PathBuf::from(format!("{snapshots}/v1")),
            Utf8PathBuf::from(format!("{snapshots}/v2")),
            Utf8PathBuf::from(format!("{snapshots}/v3")),
        );
        let table = || ["b.md", "d/a.md"].into_iter().map(|f| (f, ())).collect();
        let moves = [
            Move {
                from: &v1,
                to: &v3,
                files: table(),
                removes_from: true,
            },
            Move {
                from: &v2,
                to: &v3,
                files: table(),
                removes_from: false,
            },
        ];
        make_moves(&mut writer, &moves, &mut [], &[]).unwrap();
        assert!(!root_path.join(&v1).join("b.md").exists());
        assert!(!root_path.join(&v1).join("d/a.md").exists());
        assert!(root_path.join(&v2).join("b.md").is_file());
        assert!(root_path.join(&v2).join("d/a.md").is_file());
        assert!(root_path.join(&v3).join("b.md").is_file());
    }
}
