//! The gate's inputs, known before anything is judged: [`gate_inputs`] follows the
//! references of the project's dev container configurations and Compose files (the
//! configurations the Dev Containers CLI offers and their folders, `dockerComposeFile`,
//! `.env`, `include:` and its `project_directory`, `extends.file`, local features'
//! metadata, `seccomp=<file>`) and asks where every host path the mount rules look at
//! leads, and returns what it read as a [`GateInputs`]. No rule runs.
//!
//! The judgement then reads that value only: the walk (`setup` and `project`) is one
//! piece of code run twice, once as the traversal (each rule replaced by the reads it
//! makes, `visit_*`) and once as the judgement over [`GateInputs`] as a closed world. A
//! read the traversal did not make is no silent disk read but an internal error
//! ([`PolicyError::Untraversed`], or an error finding of the same code), so the two
//! cannot drift apart unnoticed.

use std::cell::RefCell;
use std::collections::BTreeMap;

use aibox_config::hostpath::HostPath;
use aibox_config::{AiboxToml, LocalToml, Ownership, PlannedFile};

use super::Pass;
use super::mounts::visit_project_volumes;
use super::setup::compose_setup;
use crate::compose::ComposeSources;
use crate::finding::{Consent, Finding, Severity};

/// Everything the policy gate reads of a project, as [`gate_inputs`] found it: the texts
/// of the files it follows, where the host paths it asks about lead, and the folders it
/// lists. The planned files the gate judges in place of the disk's are part of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateInputs {
    /// Planned texts by path (they shadow the disk).
    pub(super) planned: BTreeMap<String, String>,
    /// Project-relative path → text (`None`: absent or unreadable).
    texts: BTreeMap<String, Option<String>>,
    /// Host path → where its links lead.
    links: BTreeMap<String, HostPath>,
    /// Project folder → the folders in it.
    folders: BTreeMap<String, Vec<String>>,
}

/// What the gate reads for [`super::check_plan`] over `files` (planned, shadowing the
/// disk; `override_text` the existing scaffold-once override) and the project as
/// `disk` shows it: every Compose file and dev container configuration the tools run
/// and what they refer to, aibox's own Compose files (the egress rules), `aibox.toml`
/// (where a secret really comes from) and the configured extra volumes' host paths.
/// Judges nothing.
///
/// ```
/// use aibox_config::{LocalToml, parse_aibox_toml};
/// use std::collections::BTreeMap;
/// let config = parse_aibox_toml("[container]\nname = \"demo\"\n", "aibox.toml")?;
/// let project = BTreeMap::from([(
///     ".devcontainer/docker-compose.override.yml".to_owned(),
///     "include:\n  - extra.yml\n".to_owned(),
/// )]);
/// let inputs = aibox_policy::gate_inputs(&config, &LocalToml::default(), &[], None, &project);
/// assert!(inputs.texts().any(|(path, _)| path == ".devcontainer/extra.yml"));
/// # Ok::<(), aibox_config::ConfigError>(())
/// ```
pub fn gate_inputs(
    config: &AiboxToml,
    local: &LocalToml,
    files: &[PlannedFile],
    override_text: Option<&str>,
    disk: &dyn ComposeSources,
) -> GateInputs {
    let planned = planned_texts(files, override_text);
    let consent = Consent::from_config(config);
    let mut inputs = GateInputs::record(disk, |rec| {
        let overlay = Overlay {
            planned: &planned,
            disk: rec,
        };
        compose_setup(&overlay, &consent, Pass::Traverse);
        // The egress rules read aibox's own Compose files, links or not, and every file a
        // dev container configuration names.
        for path in aibox_config::layout::COMPOSE_FILES {
            overlay.read(path);
        }
        for (files, env) in super::compose_projects(&overlay) {
            for path in files.iter().chain([&env]) {
                overlay.read(path);
            }
        }
        rec.read(aibox_config::AIBOX_TOML);
        visit_project_volumes(config, local, rec);
    });
    inputs.planned = planned;
    inputs
}

/// The texts the gate judges in place of the disk's: the planned files, except a
/// scaffold-once override that already exists (`override_text`, which Compose will use).
pub(super) fn planned_texts(
    files: &[PlannedFile],
    override_text: Option<&str>,
) -> BTreeMap<String, String> {
    let mut planned: BTreeMap<String, String> = files
        .iter()
        .filter(|f| !skipped(f, override_text))
        .map(|f| {
            (
                f.path.to_string(),
                String::from_utf8_lossy(&f.contents).into_owned(),
            )
        })
        .collect();
    if let Some(text) = override_text {
        planned
            .entry(aibox_config::layout::COMPOSE_OVERRIDE.to_owned())
            .or_insert_with(|| text.to_owned());
    }
    planned
}

/// A scaffold-once override that already exists is not rewritten.
pub(super) fn skipped(f: &PlannedFile, override_text: Option<&str>) -> bool {
    f.path == aibox_config::layout::COMPOSE_OVERRIDE
        && f.ownership == Ownership::ScaffoldOnce
        && override_text.is_some()
}

impl GateInputs {
    /// Runs `walk` over `sources` and keeps every answer it got.
    pub(super) fn record(
        sources: &dyn ComposeSources,
        walk: impl FnOnce(&dyn ComposeSources),
    ) -> Self {
        let rec = Recorder {
            sources,
            inputs: RefCell::new(Self::default()),
        };
        walk(&rec);
        rec.inputs.into_inner()
    }

    /// Runs a judgement over these inputs alone; a read they do not hold adds an
    /// internal error finding (`aibox::policy::untraversed`).
    pub(super) fn judge(
        &self,
        judgement: impl FnOnce(&dyn ComposeSources) -> Vec<Finding>,
    ) -> Vec<Finding> {
        let closed = Closed::new(self);
        let mut out = judgement(&closed);
        if let Some(path) = closed.first_miss() {
            out.push(untraversed_finding(&path));
        }
        out
    }

    /// The project files read, by project-relative path (`None`: absent, unreadable).
    pub fn texts(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.texts.iter().map(|(p, t)| (p.as_str(), t.as_deref()))
    }

    /// The host paths asked about and where their symbolic links lead.
    pub fn host_paths(&self) -> impl Iterator<Item = (&str, &HostPath)> {
        self.links.iter().map(|(p, to)| (p.as_str(), to))
    }

    /// The project folders listed and the folders in each.
    pub fn folders(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.folders
            .iter()
            .map(|(d, names)| (d.as_str(), names.as_slice()))
    }

    /// The same inputs without the answer for `path` (text, link or listing): what a
    /// traversal that missed it would hold. For tests of the judgement's closed world.
    #[doc(hidden)]
    #[must_use]
    pub fn without(&self, path: &str) -> Self {
        let mut out = self.clone();
        out.texts.remove(path);
        out.links.remove(path);
        out.folders.remove(path);
        out
    }
}

/// The internal error finding of a judgement that read past its inputs.
fn untraversed_finding(path: &str) -> Finding {
    Finding::new(
        "aibox::policy::untraversed",
        Severity::Error,
        path,
        format!("the policy gate's judgement read `{path}`, which its traversal did not"),
        "this is a bug in aibox; please report it with `aibox doctor --report FILE`",
    )
}

/// Reads through to the real sources and keeps every answer.
struct Recorder<'a> {
    sources: &'a dyn ComposeSources,
    inputs: RefCell<GateInputs>,
}

impl Recorder<'_> {
    /// The answer kept in `slot` for `key`, or `ask`'s, kept.
    fn remember<T: Clone>(
        &self,
        slot: fn(&mut GateInputs) -> &mut BTreeMap<String, T>,
        key: &str,
        ask: impl FnOnce() -> T,
    ) -> T {
        if let Some(answer) = slot(&mut self.inputs.borrow_mut()).get(key) {
            return answer.clone();
        }
        let answer = ask();
        slot(&mut self.inputs.borrow_mut()).insert(key.to_owned(), answer.clone());
        answer
    }
}

impl ComposeSources for Recorder<'_> {
    fn read(&self, path: &str) -> Option<String> {
        self.remember(|i| &mut i.texts, path, || self.sources.read(path))
    }

    fn host_path(&self, path: &str) -> HostPath {
        self.remember(|i| &mut i.links, path, || self.sources.host_path(path))
    }

    fn subdirs(&self, dir: &str) -> Vec<String> {
        self.remember(|i| &mut i.folders, dir, || self.sources.subdirs(dir))
    }
}

/// [`GateInputs`] as the judgement's only view of the project: what the traversal did
/// not read is remembered as a miss, never looked up elsewhere.
pub(super) struct Closed<'a> {
    inputs: &'a GateInputs,
    missed: RefCell<Vec<String>>,
}

impl<'a> Closed<'a> {
    pub(super) fn new(inputs: &'a GateInputs) -> Self {
        Self {
            inputs,
            missed: RefCell::new(Vec::new()),
        }
    }

    /// The first read the traversal did not make.
    pub(super) fn first_miss(&self) -> Option<String> {
        self.missed.borrow().first().cloned()
    }

    fn miss(&self, path: &str) {
        self.missed.borrow_mut().push(path.to_owned());
    }
}

impl ComposeSources for Closed<'_> {
    fn read(&self, path: &str) -> Option<String> {
        let text = self.inputs.texts.get(path);
        if text.is_none() {
            self.miss(path);
        }
        text.cloned().flatten()
    }

    fn host_path(&self, path: &str) -> HostPath {
        self.inputs.links.get(path).cloned().unwrap_or_else(|| {
            self.miss(path);
            // Refused by the rules, and the judgement fails anyway.
            HostPath::Unresolvable("not traversed".to_owned())
        })
    }

    fn subdirs(&self, dir: &str) -> Vec<String> {
        self.inputs.folders.get(dir).cloned().unwrap_or_else(|| {
            self.miss(dir);
            Vec::new()
        })
    }
}

/// Planned files first, then the project on disk.
pub(super) struct Overlay<'a> {
    pub(super) planned: &'a BTreeMap<String, String>,
    pub(super) disk: &'a dyn ComposeSources,
}

impl ComposeSources for Overlay<'_> {
    fn read(&self, path: &str) -> Option<String> {
        self.planned
            .get(path)
            .cloned()
            .or_else(|| self.disk.read(path))
    }

    // A planned file is written as a regular file: the writer refuses a link on its way
    // (with its own error, before anything is written), and the user's override is read
    // strictly, so a link there fails earlier. Other paths are the disk's answer.
    fn host_path(&self, path: &str) -> HostPath {
        if self.planned.contains_key(path) {
            return HostPath::Plain;
        }
        self.disk.host_path(path)
    }

    // aibox never plans a dev container configuration in a folder of its own, so the
    // folders that matter are the ones on disk.
    fn subdirs(&self, dir: &str) -> Vec<String> {
        self.disk.subdirs(dir)
    }
}
