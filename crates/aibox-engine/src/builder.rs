//! The plan's types: the read-only context every source reads, the builder the sources
//! add files to, and the [`Plan`] it finishes into.
//!
//! They sit below both [`crate::plan`](mod@crate::plan) (which runs the sources) and
//! [`crate::sources`] (which fill the builder), so the arrows between those point one way.

use std::sync::Arc;

use aibox_config::{Ownership, PlanPath, PlannedFile, Project, Render};
use aibox_provenance::lock::{LOCK_FILE, Lock, sha256_hex};
use camino::{Utf8Path, Utf8PathBuf};

use crate::error::EngineError;
use crate::resolve::{PlanOptions, ProcesskitState};
use crate::snapshot::Snapshot;

/// Read-only view of the project handed to every plan source.
pub struct PlanContext<'a> {
    /// The loaded configuration (`aibox.toml` and `.aibox-local.toml`).
    pub project: &'a Project,
    /// The lock written by the previous apply, if any.
    pub previous_lock: Option<&'a Lock>,
    /// Version of aibox doing the planning.
    pub aibox_version: &'a str,
    /// Compose `security_opt` entries decided by the policy layer. Policy hook: this is
    /// the only place container security options come from; empty until the policy gate
    /// fills it in [`crate::plan::plan`].
    pub security_opt: Vec<String>,
    /// Planning options (cache location, download progress).
    pub options: &'a PlanOptions,
    /// The processkit release resolved for this plan.
    pub processkit: &'a ProcesskitState,
    /// The locked npm trees of the team servers started with `npx`.
    pub mcp_npm: &'a crate::mcp_npm::NpmEnvs,
    /// The locked environments of the team servers started with `uvx`.
    pub mcp_uvx: &'a crate::mcp_uvx::UvxEnvs,
    /// The project's files as resolve read them.
    pub files: &'a Snapshot,
    pub(crate) root: &'a Utf8Path,
}

impl PlanContext<'_> {
    /// The project root.
    pub fn root(&self) -> &Utf8Path {
        self.root
    }

    /// Bytes of a root-relative file when the project was resolved, `None` when it did
    /// not exist (resolve refused symlinks and invalid paths like the writer does).
    ///
    /// # Errors
    /// [`EngineError::NotCaptured`] (internal) when resolve did not read `rel`: planning
    /// never reads the disk.
    pub fn read(&self, rel: &Utf8Path) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.files.get(rel)?.map(<[u8]>::to_vec))
    }

    /// Text of a root-relative file (lossy UTF-8) when the project was resolved, `None`
    /// when it did not exist.
    ///
    /// # Errors
    /// As [`PlanContext::read`].
    pub fn read_text(&self, rel: &Utf8Path) -> Result<Option<String>, EngineError> {
        Ok(self
            .files
            .get(rel)?
            .map(|b| String::from_utf8_lossy(b).into_owned()))
    }

    /// Whether a root-relative regular file existed when the project was resolved.
    ///
    /// # Errors
    /// As [`PlanContext::read`].
    pub fn exists(&self, rel: &Utf8Path) -> Result<bool, EngineError> {
        Ok(self.files.get(rel)?.is_some())
    }
}

/// A plan path as a map key: the same order as [`Utf8Path`]'s (component by component),
/// computed on the bytes. Paths of a plan are clean ([`crate::writer::check_relative`]: no
/// empty, `.` or `..` component), so ordering `/` below every other byte gives exactly
/// the component order, and equal strings are equal paths. `Utf8Path` comparison parses
/// components on every call: with thousands of processkit files sharing long prefixes it
/// was the largest user-space cost of planning an install (`perf`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PathKey(String);

impl Ord for PathKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        path_order(&self.0, &other.0)
    }
}

/// The order of [`PathKey`] on two clean plan paths.
fn path_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let rank = |c: u8| if c == b'/' { 0 } else { u16::from(c) + 1 };
    match first_difference(a, b) {
        Some(i) => rank(a[i]).cmp(&rank(b[i])),
        None => a.len().cmp(&b.len()),
    }
}

/// Where `a` and `b` first differ within their common length, eight bytes compared at a
/// time: sorting a 10x install's 34,000 plan paths, which share prefixes of 60 bytes and
/// more, compared bytes one by one for 5 ms.
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    let common = a.len().min(b.len());
    let word = |chunk: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        u64::from_le_bytes(w)
    };
    let mut at = 0;
    for (x, y) in a[..common].chunks_exact(8).zip(b[..common].chunks_exact(8)) {
        let diff = word(x) ^ word(y);
        if diff != 0 {
            // Little-endian: the lowest set bit is in the first differing byte.
            return Some(at + diff.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    (at..common).find(|&i| a[i] != b[i])
}

/// Whether `files`, sorted by [`path_order`], hold one at `path`.
fn holds(files: &[PlannedFile], path: &str) -> bool {
    files
        .binary_search_by(|f| path_order(f.path.as_str(), path))
        .is_ok()
}

impl PartialOrd for PathKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Files the sources other than processkit add at most (generated container files,
/// harness configurations, `.gitignore`): see [`PlanBuilder::reserve`].
const ROOM_FOR_SMALL_SOURCES: usize = 256;

/// The hasher of [`PlanBuilder`]'s path hashes, which are random already: each is only
/// spread over all 64 bits (the table takes its control bits from the top).
#[derive(Debug, Default)]
struct HashIsKey(u64);

impl std::hash::Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not reached (the keys are `u32`s); any bytes still hash.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(SPREAD);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(SPREAD);
    }
}

/// Odd and with its bits spread (2^64 over the golden ratio): multiplying by it carries a
/// key's bits into the top of the word.
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

/// Collects planned files from the sources; refuses two sources writing one path.
#[derive(Debug, Default)]
pub struct PlanBuilder {
    /// The planned files in the order they were added, sorted by path in
    /// [`Self::finish`]. Not a map keyed by path: at 17,000 release files its nodes were
    /// 5.3 MB beside the files, and its conversion into the plan's list held both (the
    /// peak of a first install's planning).
    files: Vec<PlannedFile>,
    /// Where in [`Self::files`] the files that are not verified content are (see
    /// [`Self::add_verified`]): a few generated files, which the policy gate scans.
    unverified: Vec<usize>,
    /// A hash of each planned path, to refuse a second file at one path: only a hash
    /// match looks through the files. 32 bits (a chance match costs one look through
    /// the files) in a table that does not hash them again: 160 KB at a 10x release's
    /// 34,000 paths, against 290 KB, at the planning's memory peak.
    path_hashes: std::collections::HashSet<u32, std::hash::BuildHasherDefault<HashIsKey>>,
    hasher: std::collections::hash_map::RandomState,
    removals: std::collections::BTreeSet<PathKey>,
    processkit_servers: Vec<aibox_mcp_registration::ServerSpec>,
    processkit_wiring: aibox_mcp_registration::ProcesskitWiring,
    warnings: Vec<String>,
    lock: Lock,
    commit_last: std::collections::BTreeSet<Utf8PathBuf>,
    processkit_intent: Option<aibox_provenance::Intent>,
    prune_dirs: std::collections::BTreeSet<Utf8PathBuf>,
    removed_trees: std::collections::BTreeSet<Utf8PathBuf>,
    processkit_stat_cache: Option<aibox_provenance::LiveAfter>,
    dir_moves: Vec<DirMove>,
    processkit_upgrade: Option<crate::migrate::UpgradeSummary>,
    rendered: Vec<(PlanPath, Arc<dyn Render>)>,
    reach: Option<crate::reach::Reach>,
}

/// A folder an apply may move into place before writing (see [`PlanBuilder::move_first`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirMove {
    /// The folder that moves (root-relative).
    pub from: Utf8PathBuf,
    /// Where it goes; must not exist for the move to happen.
    pub to: Utf8PathBuf,
}

impl PlanBuilder {
    /// Plans the removal of a directory tree whose files are all planned for removal (a
    /// stale processkit snapshot): after the removals, its directories are removed
    /// where empty, deepest first. Anything else left inside keeps its directory.
    pub fn prune_dir(&mut self, path: impl Into<Utf8PathBuf>) -> Result<(), EngineError> {
        let path = path.into();
        crate::writer::check_relative(&path)?;
        self.prune_dirs.insert(path);
        Ok(())
    }

    /// Plans the removal of every regular file below the folder `path` (a processkit
    /// snapshot of another version), then of its folders where empty ([`Self::prune_dir`]).
    /// The apply lists the files: a plan holds the folder, not the thousands of paths below
    /// it. Symlinks and special files inside are left, and so are their folders.
    pub fn remove_tree(&mut self, path: impl Into<Utf8PathBuf>) -> Result<(), EngineError> {
        let path = path.into();
        crate::writer::check_relative(&path)?;
        self.prune_dirs.insert(path.clone());
        self.removed_trees.insert(path);
        Ok(())
    }

    /// Asks the apply to rewrite the processkit stat cache for these files (project path
    /// → digest once applied) after the lock is written.
    pub fn set_processkit_stat_cache(&mut self, digests: aibox_provenance::LiveAfter) {
        self.processkit_stat_cache = Some(digests);
    }

    /// Adds a verified record of aibox's own (ownership [`Ownership::Merged`]: replaced
    /// whenever it differs) whose bytes `render` makes when it is written (see
    /// [`Render`]); the planned file holds no bytes. Errors as [`Self::add`] does.
    pub fn add_rendered(
        &mut self,
        path: impl Into<PlanPath>,
        render: Arc<dyn Render>,
    ) -> Result<(), EngineError> {
        let file = PlannedFile::new(path, Vec::new(), Ownership::Merged);
        let path = file.path.clone();
        self.insert(file, true)?;
        self.rendered.push((path, render));
        Ok(())
    }

    /// Marks a planned file as a record of the others (the processkit marker): the apply
    /// writes it after every other file is durable, just before `aibox.lock`, so a
    /// killed run never leaves a record naming content that was not written.
    pub fn write_last(&mut self, path: impl Into<Utf8PathBuf>) {
        self.commit_last.insert(path.into());
    }

    /// Lets the apply move the folder `from` to `to` before writing, as a head start for
    /// the files planned below `to` (a new processkit snapshot made from the previous
    /// one): files the moved folder already holds with the planned bytes and mode are not
    /// written again, and files it holds that the plan does not write below `to` are
    /// removed. The move happens only when `to` does not exist and `from` is a real folder
    /// of folders and regular files; either way the result is the plan's.
    pub fn move_first(
        &mut self,
        from: impl Into<Utf8PathBuf>,
        to: impl Into<Utf8PathBuf>,
    ) -> Result<(), EngineError> {
        let (from, to) = (from.into(), to.into());
        crate::writer::check_relative(&from)?;
        crate::writer::check_relative(&to)?;
        self.dir_moves.push(DirMove { from, to });
        Ok(())
    }

    /// Records the processkit install intent (see [`aibox_provenance::Intent`]): the
    /// apply stores it in [`crate::records::PENDING_PROCESSKIT`] before its first write.
    pub fn set_processkit_intent(&mut self, intent: aibox_provenance::Intent) {
        self.processkit_intent = Some(intent);
    }

    /// Adds a file. Errors when another source already planned the same path.
    pub fn add(&mut self, file: PlannedFile) -> Result<(), EngineError> {
        self.insert(file, false)
    }

    /// Adds a file that is verified release content (or aibox's own record of it): the
    /// secret scan, which is for what users write, skips it. The release's digest covers
    /// it; credential-looking text in it is a skill review finding instead. Errors when
    /// another source already planned the same path.
    pub fn add_verified(&mut self, file: PlannedFile) -> Result<(), EngineError> {
        self.insert(file, true)
    }

    /// The planned files that are not verified content, which the policy gate scans.
    pub(crate) fn unverified(&self) -> impl Iterator<Item = &PlannedFile> {
        self.unverified.iter().map(|&i| &self.files[i])
    }

    /// Makes room for `additional` more files at once (a source that adds thousands):
    /// growing by doubling would hold up to twice the list, and both while it moves.
    pub fn reserve(&mut self, additional: usize) {
        // Room beyond `additional` for the sources that add a few files after it: one
        // more file past the capacity would double the list.
        self.files
            .reserve_exact(additional + ROOM_FOR_SMALL_SOURCES);
        self.path_hashes.reserve(additional);
    }

    fn path_hash(&self, path: &Utf8Path) -> u32 {
        // The high half: the table spreads it again (`HashIsKey`).
        let hash = std::hash::BuildHasher::hash_one(&self.hasher, path.as_str());
        u32::try_from(hash >> 32).unwrap_or_default()
    }

    fn insert(&mut self, file: PlannedFile, verified: bool) -> Result<(), EngineError> {
        crate::writer::check_relative(&file.path)?;
        if !self.path_hashes.insert(self.path_hash(&file.path))
            && self.files.iter().any(|f| f.path == file.path)
        {
            return Err(EngineError::DuplicatePath {
                path: file.path.into(),
            });
        }
        if !verified {
            self.unverified.push(self.files.len());
        }
        self.files.push(file);
        Ok(())
    }

    /// Adds several files.
    pub fn extend(
        &mut self,
        files: impl IntoIterator<Item = PlannedFile>,
    ) -> Result<(), EngineError> {
        files.into_iter().try_for_each(|f| self.add(f))
    }

    /// Plans the removal of a file that a source owned and no longer wants (for example
    /// an unchanged processkit file dropped upstream). The writer removes it only if it
    /// still exists; a path that is also planned for writing is kept.
    pub fn remove(&mut self, path: impl Into<Utf8PathBuf>) -> Result<(), EngineError> {
        let path = path.into();
        crate::writer::check_relative(&path)?;
        self.removals.insert(PathKey(path.into_string()));
        Ok(())
    }

    /// Records the processkit upgrade the plan makes (see [`crate::migrate::UpgradeSummary`]).
    pub fn set_processkit_upgrade(&mut self, summary: Option<crate::migrate::UpgradeSummary>) {
        self.processkit_upgrade = summary;
    }

    /// Records the MCP servers of the installed processkit release, for the MCP source.
    pub fn set_processkit_servers(&mut self, servers: Vec<aibox_mcp_registration::ServerSpec>) {
        self.processkit_servers = servers;
    }

    /// Records the hooks and pre-authorisation of the installed processkit release.
    pub fn set_processkit_wiring(&mut self, wiring: aibox_mcp_registration::ProcesskitWiring) {
        self.processkit_wiring = wiring;
    }

    /// The processkit hooks and pre-authorisation recorded so far.
    pub fn processkit_wiring(&self) -> &aibox_mcp_registration::ProcesskitWiring {
        &self.processkit_wiring
    }

    /// Records a warning for the user (shown by the CLI, listed in the JSON report):
    /// something aibox did on purpose but the user should know about.
    pub fn warn(&mut self, message: impl Into<String>) {
        let message = message.into();
        if !self.warnings.contains(&message) {
            self.warnings.push(message);
        }
    }

    /// The processkit MCP servers recorded so far.
    pub fn processkit_servers(&self) -> &[aibox_mcp_registration::ServerSpec] {
        &self.processkit_servers
    }

    /// Whether a file is planned at `path` so far (for sources that build on another's
    /// output).
    pub fn contains(&self, path: &Utf8Path) -> bool {
        self.path_hashes.contains(&self.path_hash(path))
            && self.files.iter().any(|f| f.path == path)
    }

    /// Records what the planned container reaches beyond itself (the dev container
    /// source), which the apply judges against the owner's approval.
    pub fn set_reach(&mut self, reach: crate::reach::Reach) {
        self.reach = Some(reach);
    }

    /// The lock being built: sources record their own sections here (the engine fills
    /// `[aibox]` and `[generated]`).
    pub fn lock_mut(&mut self) -> &mut Lock {
        &mut self.lock
    }

    pub(crate) fn finish(mut self, aibox_version: &str) -> Result<Plan, EngineError> {
        aibox_version.clone_into(&mut self.lock.aibox.cli_version);
        // In place: paths are unique (`insert`), so no order between equals is needed.
        self.files
            .sort_unstable_by(|a, b| path_order(a.path.as_str(), b.path.as_str()));
        self.lock.generated = self
            .files
            .iter()
            .filter(|f| f.ownership == Ownership::Generated)
            .map(|f| (f.path.to_string(), sha256_hex(&f.contents)))
            .collect();
        let lock_text = self.lock.render()?;
        let planned = |p: &PathKey| holds(&self.files, &p.0);
        // Moved, not copied: an upgrade of a large release removes thousands of files.
        let removals = std::mem::take(&mut self.removals)
            .into_iter()
            .filter(|p| !planned(p))
            .map(|p| Utf8PathBuf::from(p.0))
            .collect();
        Ok(Plan {
            files: self.files,
            removals,
            processkit_servers: self.processkit_servers,
            warnings: self.warnings,
            lock: self.lock,
            lock_text,
            commit_last: self.commit_last,
            processkit_intent: self.processkit_intent,
            prune_dirs: self.prune_dirs.into_iter().collect(),
            removed_trees: self.removed_trees.into_iter().collect(),
            processkit_stat_cache: self.processkit_stat_cache,
            dir_moves: self.dir_moves,
            processkit_upgrade: self.processkit_upgrade,
            rendered: self.rendered,
            reach: self.reach,
        })
    }
}
/// Everything one apply would write.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The files, sorted by path; `aibox.lock` is not among them.
    pub files: Vec<PlannedFile>,
    /// Files to remove if they exist (sorted; none of them is also in `files`).
    pub removals: Vec<Utf8PathBuf>,
    /// The MCP servers of the installed processkit release (empty in harness-only mode).
    pub processkit_servers: Vec<aibox_mcp_registration::ServerSpec>,
    /// Warnings from the sources (unknown skill names, unpinned team packages, ...).
    pub warnings: Vec<String>,
    /// The lock the apply records.
    pub lock: Lock,
    /// Rendered lock text, written last.
    pub lock_text: String,
    /// Files written after every other file is durable, just before the lock.
    pub commit_last: std::collections::BTreeSet<Utf8PathBuf>,
    /// The processkit install intent record, stored before the first write.
    pub processkit_intent: Option<aibox_provenance::Intent>,
    /// Directory trees to remove where empty after the removals.
    pub prune_dirs: Vec<Utf8PathBuf>,
    /// Folders whose regular files are all removed (see [`PlanBuilder::remove_tree`]);
    /// the apply lists them, and reports each as a removal.
    pub removed_trees: Vec<Utf8PathBuf>,
    /// Folders to move into place before the writes, when they can (see
    /// [`PlanBuilder::move_first`]).
    pub dir_moves: Vec<DirMove>,
    /// Processkit files to record in the stat cache after applying (when it is stale).
    pub processkit_stat_cache: Option<aibox_provenance::LiveAfter>,
    /// The processkit upgrade this plan makes, when it changes the version.
    pub processkit_upgrade: Option<crate::migrate::UpgradeSummary>,
    /// The planned files whose bytes are made when written (the processkit marker):
    /// their [`PlannedFile::contents`] are empty; [`Self::contents`] has the bytes.
    pub rendered: Vec<(PlanPath, Arc<dyn Render>)>,
    /// What the planned container reaches beyond itself; `None` when no source planned
    /// a container.
    pub reach: Option<crate::reach::Reach>,
}

impl Plan {
    /// What makes the bytes of the planned file at `path`, when they are made when
    /// written ([`PlanBuilder::add_rendered`]).
    #[must_use]
    pub fn render_of(&self, path: &Utf8Path) -> Option<&dyn Render> {
        self.rendered
            .iter()
            .find(|(p, _)| p.as_path() == path)
            .map(|(_, r)| &**r)
    }

    /// The bytes of the planned file `file`, made when rendered.
    #[must_use]
    pub fn contents<'f>(&self, file: &'f PlannedFile) -> std::borrow::Cow<'f, [u8]> {
        match self.render_of(&file.path) {
            Some(r) => std::borrow::Cow::Owned(r.to_bytes()),
            None => std::borrow::Cow::Borrowed(&file.contents),
        }
    }

    /// Whether a file is planned at `path`.
    pub(crate) fn plans(&self, path: &str) -> bool {
        holds(&self.files, path)
    }

    /// The lock as a planned file (written after every other file).
    pub fn lock_file(&self) -> PlannedFile {
        PlannedFile::new(
            LOCK_FILE,
            self.lock_text.clone().into_bytes(),
            Ownership::Generated,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verified content reaches the plan but not the policy gate; a path is planned once
    /// whichever way it was added.
    #[test]
    fn verified_files_are_planned_but_not_gated() {
        let mut b = PlanBuilder::default();
        let file = |p: &str| PlannedFile::new(p, b"x".to_vec(), Ownership::Merged);
        b.add(file("context/notes.md")).expect("add");
        b.add_verified(file("context/skills/a/SKILL.md"))
            .expect("add verified");
        b.add_verified(file(".devcontainer/Dockerfile"))
            .expect("add verified");
        let gated: Vec<&str> = b.unverified().map(|f| f.path.as_str()).collect();
        assert_eq!(gated, ["context/notes.md"]);
        assert!(b.contains(Utf8Path::new("context/skills/a/SKILL.md")));
        for (path, verified) in [
            ("context/notes.md", true),
            ("context/skills/a/SKILL.md", false),
        ] {
            let again = if verified {
                b.add_verified(file(path))
            } else {
                b.add(file(path))
            };
            assert!(
                matches!(again, Err(EngineError::DuplicatePath { .. })),
                "{path}: {again:?}"
            );
        }
        let plan = b.finish("0.0.0").expect("finish");
        let planned: Vec<&str> = plan.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            planned,
            [
                ".devcontainer/Dockerfile",
                "context/notes.md",
                "context/skills/a/SKILL.md"
            ]
        );
    }

    /// The context serves the snapshot only: a path resolve did not capture is an
    /// internal error naming it (never a read of the disk, which here does not exist).
    #[test]
    fn context_reads_are_served_from_the_snapshot() {
        let config = aibox_config::parse_aibox_toml("[container]\nname = \"demo\"\n", "aibox.toml")
            .expect("a minimal aibox.toml parses");
        let project = Project {
            root: Utf8PathBuf::from("/nonexistent/project"),
            config,
            local: aibox_config::LocalToml::default(),
        };
        let options = PlanOptions::default();
        let files = Snapshot::default();
        let ctx = PlanContext {
            project: &project,
            previous_lock: None,
            aibox_version: "0.0.0",
            security_opt: Vec::new(),
            options: &options,
            processkit: &crate::resolve::ProcesskitState::NotConfigured,
            mcp_npm: &crate::mcp_npm::NpmEnvs::default(),
            mcp_uvx: &crate::mcp_uvx::UvxEnvs::default(),
            files: &files,
            root: &project.root,
        };
        for err in [
            ctx.read(Utf8Path::new(".gitignore")).map(|_| ()),
            ctx.read_text(Utf8Path::new(".gitignore")).map(|_| ()),
            ctx.exists(Utf8Path::new(".gitignore")).map(|_| ()),
        ] {
            let err = err.expect_err("nothing was captured");
            assert_eq!(err.kind(), aibox_config::ErrorKind::Internal);
            assert!(err.to_string().contains("`.gitignore`"), "{err}");
        }
    }

    #[test]
    fn plan_path_keys_sort_like_paths() {
        // Separators against every byte that sorts below `/` (`.`, `-`, space, `!`) and
        // above it, prefixes, and long shared prefixes: the order of the plan's maps is
        // the order of `Utf8Path`, which reports and the lock follow.
        let paths = [
            "a",
            "a.b",
            "a/b",
            "a-b/c",
            "a b",
            "a!",
            "a/b.c",
            "a/b/c",
            "a/bc",
            "ab",
            "abcdefgh/x",
            "abcdefgh-x",
            "abcdefg/x",
            "abcdefghijklmnop/q",
            "abcdefghijklmnop.q",
            "abcdefghijklmnopq",
            "context/skills/x/SKILL.md",
            "context/skills/x.md",
            "context/skills/x/a/b",
            "context/skills-old/x",
            "context/templates/processkit/v0.28.3/context/skills/x/SKILL.md",
            "context/templates/processkit/v0.28.3/context/skills/x-y/SKILL.md",
            "context/templates/processkit/v0.28.3/context/skills/x/y",
            "z",
            "\u{e9}t\u{e9}/a",
        ];
        let mut by_path: Vec<Utf8PathBuf> = paths.iter().map(Utf8PathBuf::from).collect();
        by_path.sort();
        let mut by_key: Vec<PathKey> = paths.iter().map(|p| PathKey((*p).to_owned())).collect();
        by_key.sort();
        let by_key: Vec<Utf8PathBuf> = by_key.into_iter().map(|k| Utf8PathBuf::from(k.0)).collect();
        assert_eq!(by_key, by_path);
        for a in &paths {
            for b in &paths {
                assert_eq!(
                    PathKey((*a).to_owned()).cmp(&PathKey((*b).to_owned())),
                    Utf8Path::new(a).cmp(Utf8Path::new(b)),
                    "{a} <> {b}"
                );
            }
        }
    }
}
