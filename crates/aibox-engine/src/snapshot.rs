//! The project's files as [`crate::resolve()`] found them: what [`crate::plan()`] reads instead
//! of the disk.
//!
//! `Snapshot::capture` reads, once, every project file a plan source may look at, so
//! that planning is a pure function of the [`crate::resolve::Resolved`] value. The set is derived
//! from the tables that define those files, not listed again here:
//!
//! - strict reads (a symlink or an invalid path is refused at resolve time, exactly as
//!   [`ProjectRoot::read`] refuses it): the scaffold-once user files of the file table
//!   ([`aibox_config::layout::user_owned_committed`]), `.gitignore`, every harness MCP file
//!   of [`aibox_mcp_registration::TARGETS`] (a harness switched off still needs its file
//!   read to take aibox's servers out), the MCP ownership ledger, the processkit intent
//!   record, and every generated file the previous `aibox.lock` lists (those the plan no
//!   longer contains are retired while unedited); not the processkit stat cache, a hint
//!   the scan reads and drops (a line per installed file);
//! - lenient reads for the policy gate's Compose resolver (a file that cannot be read as
//!   text is absent to it, as to Compose's own view of the project): every plain file of
//!   the file table, plus what [`aibox_policy::gate_inputs`] lists for the project as it
//!   is on disk: the files its traversal follows (`include`, `extends.file`, local
//!   features, the `dockerComposeFile` list of `devcontainer.json`), where the host paths
//!   the mount rules look at lead, and the folders it lists. The traversal judges
//!   nothing; the one judgement runs in the plan, over the planned files and this capture;
//! - the personal extra CA certificate file named in `.aibox-local.toml` (it may lie
//!   outside the project).
//!
//! A plan that asks for a path outside the snapshot gets [`EngineError::NotCaptured`]
//! (an internal error: the capture set is missing a file), never a silent disk read.
//! `cargo xtask tidy` refuses file-system calls in `plan.rs` and `sources/`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use aibox_config::Project;
use aibox_config::hostpath::HostPath;
use aibox_policy::ComposeSources as _;
use aibox_provenance::lock::{LOCK_FILE, Lock};
use camino::{Utf8Path, Utf8PathBuf};

use crate::error::EngineError;
use crate::records::PLAN_READS;
use crate::writer::{ProjectRoot, in_perimeter};

/// Largest file the policy gate's Compose resolver reads (as Compose files go, generous).
const MAX_COMPOSE_SOURCE: usize = 1 << 20;

/// The current bytes of the project files a plan reads, taken by [`crate::resolve()`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Root-relative path → bytes (`None`: absent).
    files: BTreeMap<Utf8PathBuf, Option<Vec<u8>>>,
    /// What the policy gate's Compose resolver sees: root-relative path → text (`None`:
    /// absent, unreadable, too large or refused).
    compose: BTreeMap<String, Option<String>>,
    /// Where the host paths the gate asked about lead through symbolic links.
    links: BTreeMap<String, HostPath>,
    /// The folders inside the project folders the gate listed.
    dirs: BTreeMap<String, Vec<String>>,
    /// `container.extra_ca_certificates`, when set.
    extra_ca: Option<ExtraCa>,
}

/// The personal extra CA certificate file as resolve read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExtraCa {
    /// The path as resolved (relative paths start at the project root).
    pub(crate) path: Utf8PathBuf,
    /// Its text, or why it could not be read.
    pub(crate) text: Result<String, String>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Sizes, not contents: a snapshot holds personal files.
        f.debug_struct("Snapshot")
            .field(
                "files",
                &self
                    .files
                    .iter()
                    .map(|(p, b)| (p.as_str(), b.as_ref().map(Vec::len)))
                    .collect::<Vec<_>>(),
            )
            .field("compose_sources", &self.compose.len())
            .field("links", &self.links.len())
            .field("dirs", &self.dirs.len())
            .field("extra_ca", &self.extra_ca.as_ref().map(|c| &c.path))
            .finish()
    }
}

impl Snapshot {
    /// Reads every file a plan of `project` may need (see the module docs).
    ///
    /// # Errors
    /// A planned-for file that is a symlink or a folder, an invalid path in the previous
    /// lock, a disk failure.
    pub(crate) fn capture(
        root: &ProjectRoot,
        project: &Project,
        previous_lock: Option<&Lock>,
    ) -> Result<Self, EngineError> {
        let mut files = BTreeMap::new();
        for rel in strict_paths(previous_lock) {
            if let std::collections::btree_map::Entry::Vacant(slot) = files.entry(rel) {
                let bytes = root.read(slot.key())?;
                slot.insert(bytes);
            }
        }
        let (compose, links, dirs) = compose_sources(root, project, &files);
        Ok(Self {
            files,
            compose,
            links,
            dirs,
            extra_ca: read_extra_ca(root.path(), project),
        })
    }

    /// Current bytes of a captured root-relative file, `None` when it did not exist.
    ///
    /// # Errors
    /// [`EngineError::NotCaptured`] when resolve did not capture `rel`.
    pub fn get(&self, rel: &Utf8Path) -> Result<Option<&[u8]>, EngineError> {
        match self.files.get(rel) {
            Some(bytes) => Ok(bytes.as_deref()),
            None => Err(EngineError::NotCaptured {
                path: rel.to_owned(),
            }),
        }
    }

    /// The captured paths (strict reads), sorted.
    pub fn paths(&self) -> impl Iterator<Item = &Utf8Path> {
        self.files.keys().map(Utf8PathBuf::as_path)
    }

    /// The text of a captured project file, as the policy gate's Compose resolver sees
    /// it (`None`: absent, unreadable, too large, or not captured).
    pub(crate) fn text_of(&self, path: &str) -> Option<String> {
        match self.compose.get(path) {
            Some(text) => text.clone(),
            None => compose_text(self.files.get(Utf8Path::new(path))?.as_deref()),
        }
    }

    pub(crate) fn extra_ca(&self) -> Option<&ExtraCa> {
        self.extra_ca.as_ref()
    }

    /// The policy gate's view of the project's files, served from the snapshot.
    pub(crate) fn compose_sources(&self) -> SnapshotSources<'_> {
        SnapshotSources {
            snapshot: self,
            missed: RefCell::new(Vec::new()),
        }
    }

    /// Whether every captured file still has the captured contents (read again now).
    /// A file that can no longer be read counts as changed.
    pub(crate) fn is_current(&self, root: &ProjectRoot, project: &Project) -> bool {
        self.files
            .iter()
            .all(|(rel, bytes)| root.read(rel).is_ok_and(|now| now == *bytes))
            && self
                .compose
                .iter()
                .all(|(rel, text)| disk_text(root, rel) == *text)
            && self
                .links
                .iter()
                .all(|(path, to)| disk_host_path(root, path) == *to)
            && self
                .dirs
                .iter()
                .all(|(dir, names)| disk_subdirs(root, dir) == *names)
            && read_extra_ca(root.path(), project) == self.extra_ca
    }
}

/// The strict-read set (see the module docs).
fn strict_paths(previous_lock: Option<&Lock>) -> Vec<Utf8PathBuf> {
    let table = aibox_config::layout::user_owned_committed()
        .chain([aibox_config::layout::GITIGNORE])
        .chain(
            aibox_mcp_registration::TARGETS
                .iter()
                .map(|(_, path, _)| *path),
        )
        .chain(PLAN_READS)
        .map(Utf8PathBuf::from);
    let generated = previous_lock
        .into_iter()
        .flat_map(|l| l.generated.keys())
        .map(Utf8PathBuf::from)
        .filter(|rel| in_perimeter(rel));
    table.chain(generated).collect()
}

/// The lenient set: every plain file of the file table, and what the policy gate's
/// traversal reads of the project as it is on disk. A file already in the strict set is
/// served from it (and not recorded again), so no file is read twice.
/// The texts, link answers and folder listings recorded.
type Recorded = (
    BTreeMap<String, Option<String>>,
    BTreeMap<String, HostPath>,
    BTreeMap<String, Vec<String>>,
);

fn compose_sources(
    root: &ProjectRoot,
    project: &Project,
    strict: &BTreeMap<Utf8PathBuf, Option<Vec<u8>>>,
) -> Recorded {
    let disk = CaptureSources { root, strict };
    let inputs = aibox_policy::gate_inputs(&project.config, &project.local, &[], None, &disk);
    let mut texts: BTreeMap<String, Option<String>> = inputs
        .texts()
        .map(|(path, text)| (path.to_owned(), text.map(str::to_owned)))
        .collect();
    for entry in aibox_config::layout::FILES {
        if !entry.path.ends_with('/') && !entry.path.contains("**/") {
            texts
                .entry(entry.path.to_owned())
                .or_insert_with(|| disk.read(entry.path));
        }
    }
    texts.retain(|path, _| !strict.contains_key(Utf8Path::new(path)));
    let links = inputs
        .host_paths()
        .map(|(path, to)| (path.to_owned(), to.clone()))
        .collect();
    let dirs = inputs
        .folders()
        .map(|(dir, names)| (dir.to_owned(), names.to_vec()))
        .collect();
    (texts, links, dirs)
}

/// Where a host path leads through symbolic links, from the project on disk (`~` is the
/// `HOME` of this process).
fn disk_host_path(root: &ProjectRoot, path: &str) -> HostPath {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    aibox_config::hostpath::resolve_host_path(root.path().as_std_path(), home.as_deref(), path)
}

/// The folders (links to folders included) directly inside a project folder, sorted.
fn disk_subdirs(root: &ProjectRoot, dir: &str) -> Vec<String> {
    aibox_config::hostpath::subfolders(root.path().as_std_path(), dir)
}

/// Text of a project file as the Compose resolver may see it.
fn disk_text(root: &ProjectRoot, rel: &str) -> Option<String> {
    compose_text(root.read(Utf8Path::new(rel)).ok().flatten().as_deref())
}

/// A file's bytes as the Compose resolver sees them: text, at most 1 MiB.
fn compose_text(bytes: Option<&[u8]>) -> Option<String> {
    bytes
        .filter(|b| b.len() <= MAX_COMPOSE_SOURCE)
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// The project on disk for the policy gate's traversal, the strict reads served from
/// what resolve took already.
struct CaptureSources<'a> {
    root: &'a ProjectRoot,
    /// The strict reads, taken already.
    strict: &'a BTreeMap<Utf8PathBuf, Option<Vec<u8>>>,
}

impl aibox_policy::ComposeSources for CaptureSources<'_> {
    fn read(&self, path: &str) -> Option<String> {
        match self.strict.get(Utf8Path::new(path)) {
            Some(bytes) => compose_text(bytes.as_deref()),
            None => disk_text(self.root, path),
        }
    }

    fn host_path(&self, path: &str) -> HostPath {
        disk_host_path(self.root, path)
    }

    fn subdirs(&self, dir: &str) -> Vec<String> {
        disk_subdirs(self.root, dir)
    }
}

/// The policy gate's Compose sources during planning: the snapshot, never the disk. A
/// path resolve did not capture is remembered and turned into an internal error by
/// [`SnapshotSources::finish`].
pub(crate) struct SnapshotSources<'a> {
    snapshot: &'a Snapshot,
    missed: RefCell<Vec<String>>,
}

impl SnapshotSources<'_> {
    /// The first path asked for that resolve did not capture, as an error.
    pub(crate) fn finish(self) -> Result<(), EngineError> {
        match self.missed.into_inner().into_iter().next() {
            Some(path) => Err(EngineError::NotCaptured { path: path.into() }),
            None => Ok(()),
        }
    }
}

impl aibox_policy::ComposeSources for SnapshotSources<'_> {
    fn read(&self, path: &str) -> Option<String> {
        if let Some(text) = self.snapshot.compose.get(path) {
            return text.clone();
        }
        if let Some(bytes) = self.snapshot.files.get(Utf8Path::new(path)) {
            return compose_text(bytes.as_deref());
        }
        self.missed.borrow_mut().push(path.to_owned());
        None
    }

    fn host_path(&self, path: &str) -> HostPath {
        if let Some(to) = self.snapshot.links.get(path) {
            return to.clone();
        }
        // Paths only the files aibox is about to generate name (the project root, the
        // dev container folder, the harness state folder, the egress proxy's folder, what
        // the plan writes): the
        // writer refuses a link on the way to everything it writes, and the next resolve
        // judges the written files on disk. Anything else is a gap in the capture.
        let own = path.is_empty()
            || path == aibox_config::layout::DEVCONTAINER_DIR.trim_end_matches('/')
            || path == aibox_config::layout::AIBOX_HOME.trim_end_matches('/')
            || path == aibox_config::layout::EGRESS_DIR
            || in_perimeter(Utf8Path::new(path));
        if own {
            return HostPath::Plain;
        }
        self.missed.borrow_mut().push(path.to_owned());
        // Unknown here: refused, and the plan fails with `NotCaptured` anyway.
        HostPath::Unresolvable("not captured".to_owned())
    }

    fn subdirs(&self, dir: &str) -> Vec<String> {
        if let Some(names) = self.snapshot.dirs.get(dir) {
            return names.clone();
        }
        self.missed.borrow_mut().push(dir.to_owned());
        Vec::new()
    }
}

/// The project's files as they are now, for `doctor`'s live Compose check: regular files
/// inside the project (no symlink out), read as text, at most 1 MiB each.
pub(crate) struct DiskSources<'a>(pub(crate) &'a ProjectRoot);

impl aibox_policy::ComposeSources for DiskSources<'_> {
    fn read(&self, path: &str) -> Option<String> {
        disk_text(self.0, path)
    }

    fn host_path(&self, path: &str) -> HostPath {
        disk_host_path(self.0, path)
    }

    fn subdirs(&self, dir: &str) -> Vec<String> {
        disk_subdirs(self.0, dir)
    }
}

/// `container.extra_ca_certificates` read as text (the PEM check is the plan's).
fn read_extra_ca(root: &Utf8Path, project: &Project) -> Option<ExtraCa> {
    crate::config_check::read_extra_ca(root, &project.local)
        .map(|(path, text)| ExtraCa { path, text })
}

/// Refuses a project whose committed files aibox writes (`aibox.lock`, the generated and
/// the merged ones) still hold git's conflict markers, naming every one at once: one at a
/// time, a six-harness merge took eight runs, each stopping on the next file.
/// With `replace_generated` (`apply --force`), files aibox writes whole are left to the
/// apply, which backs them up and writes them again.
pub(crate) fn check_merge_conflicts(
    root: &ProjectRoot,
    replace_generated: bool,
) -> Result<(), EngineError> {
    use aibox_config::layout::{FILES, Owner, Scope};
    let mut files = String::new();
    for e in FILES.iter().filter(|e| {
        let whole = matches!(e.owner, Owner::Devcontainer | Owner::Policy);
        // Scaffolded files are the user's, as aibox.toml is, and most of `.gitignore`:
        // resolved by hand.
        e.scope == Scope::Committed
            && !e.scaffold_once
            && e.path != aibox_config::layout::GITIGNORE
            && e.writers.contains(aibox_config::layout::Writers::APPLY)
            && !e.path.ends_with('/')
            && !e.path.contains('*')
            && e.path != aibox_config::AIBOX_TOML
            && !(replace_generated && whole)
    }) {
        let Some(bytes) = root.read(Utf8Path::new(e.path))? else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        if let Some(at) = aibox_config::conflict_marker(&text) {
            let line = text[..at.start].matches('\n').count() + 1;
            let _ = write!(files, "\n  {} (line {line})", e.path);
        }
    }
    if files.is_empty() {
        Ok(())
    } else {
        Err(EngineError::MergeConflicts { files })
    }
}

/// Reads and parses `aibox.lock`; `None` when absent. A corrupt lock is an error, never
/// silently replaced.
pub(crate) fn read_lock(root: &ProjectRoot) -> Result<Option<Lock>, EngineError> {
    let rel = Utf8Path::new(LOCK_FILE);
    let Some(bytes) = root.read(rel)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&bytes);
    Ok(Some(Lock::parse(&text, &root.path().join(rel))?))
}
