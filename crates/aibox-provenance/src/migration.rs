//! Migration documents (`context/migrations/pending/MIG-<YYYYMMDDTHHMMSS>.md`): what an
//! upgrade changed, kept or proposes, by group and class. Conflicting upstream versions
//! are parked beside the document in `MIG-<id>.upstream/<project path>`.
//!
//! A document is a processkit `Migration` entity, written in the shape the installed
//! release's own schema asks for ([`Shape`]): processkit loads
//! `context/schemas/_generated/migration.yaml` when the release ships one (v1.0 and
//! later: `apply_mode` is `automatic`, `manual` or `mixed`) and the flat
//! `context/schemas/migration.yaml` otherwise (v0.28: `one-shot`, `resumable` or
//! `irreversible`). Each conflict entry also records the file's three digests and its
//! release path, which [`Document::parse`] reads back for `aibox migrate`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Deserialize;

use crate::Sha256;
use crate::extract::Payload;
use crate::install::{Action, Class, FileDecision, FileWrite, InstallPlan, WriteData};

/// Directory of pending migration documents.
pub const PENDING_DIR: &str = "context/migrations/pending";
/// The pending migration document `id` (`MIG-…`).
pub fn document_path(id: &str) -> String {
    format!("{PENDING_DIR}/{id}.md")
}

/// The folder of the upstream copies parked beside the pending migration document `id`.
pub fn parked_dir(id: &str) -> String {
    format!("{PENDING_DIR}/{id}.upstream")
}

/// Where the upstream copy of the conflicting file `path` is parked for the pending
/// migration document `id`.
pub fn parked_copy(id: &str, path: &str) -> String {
    format!("{}/{path}", parked_dir(id))
}

/// The id of the pending migration document at `path`, when it is one
/// ([`document_path`]).
pub fn document_id(path: &str) -> Option<&str> {
    path.strip_prefix(PENDING_DIR)?
        .strip_prefix('/')?
        .strip_suffix(".md")
        .filter(|id| !id.contains('/'))
}

/// Directory of migrations someone started (processkit's `start_migration` moves them).
pub const IN_PROGRESS_DIR: &str = "context/migrations/in-progress";
/// Directory of finished (applied or rejected) migrations.
pub const APPLIED_DIR: &str = "context/migrations/applied";
/// The entity API version aibox writes, before and after the upgrade alike.
pub const API_VERSION: &str = "processkit.projectious.work/v2";
/// Where a release ships its generated Migration schema (v1.0 and later).
pub const GENERATED_SCHEMA: &str = "context/schemas/_generated/migration.yaml";
/// Where a release ships its flat Migration schema (v0.28; a fallback in v1.0).
pub const FLAT_SCHEMA: &str = "context/schemas/migration.yaml";

/// Which Migration schema the installed release validates documents with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The flat schema of v0.28 and earlier (`apply_mode: one-shot`).
    Flat,
    /// The generated schema of v1.0 (`apply_mode: automatic|manual|mixed`).
    Generated,
}

impl Shape {
    /// The shape of `payload`: processkit prefers the generated schema when it exists.
    pub fn of(payload: &Payload) -> Self {
        if payload.files.contains_key(GENERATED_SCHEMA) {
            Self::Generated
        } else {
            Self::Flat
        }
    }

    /// The schema file this shape is checked against, as a release path.
    pub fn schema_path(self) -> &'static str {
        match self {
            Self::Flat => FLAT_SCHEMA,
            Self::Generated => GENERATED_SCHEMA,
        }
    }

    /// `apply_mode` for an upgrade that applied `applied` changes and left `conflicts`.
    fn apply_mode(self, applied: usize, conflicts: usize) -> &'static str {
        match self {
            // The flat schema's modes say whether a migration can resume or reverse;
            // aibox's upgrade ran once, whole.
            Self::Flat => "one-shot",
            Self::Generated if conflicts == 0 => "automatic",
            Self::Generated if applied == 0 => "manual",
            Self::Generated => "mixed",
        }
    }
}

/// Where an upgrade came from: what the document records beside the plan.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The release source (URL or path).
    pub source: &'a str,
    /// The digest of the previous release's archive, when the marker recorded it (the
    /// base versions of conflicting files are in that release).
    pub from_release: Option<Sha256>,
    /// The shape the new release's schema asks for.
    pub shape: Shape,
    /// The migration documents already in the project (see [`existing_ids`]).
    pub taken: &'a Existing,
}

/// What is known of a migration document already in the project.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Known {
    /// The version change it records (`from`, `to`), when its front matter reads.
    pub change: Option<(String, String)>,
    /// Whether it is pending (nobody has started settling it).
    pub pending: bool,
}

/// Migration documents by id.
pub type Existing = std::collections::BTreeMap<String, Known>;

/// The migration documents in the project at `root`: pending, in progress and applied
/// (file stems `MIG-...`).
pub fn existing_ids(root: &std::path::Path) -> Existing {
    let mut ids = Existing::new();
    for dir in [PENDING_DIR, IN_PROGRESS_DIR, APPLIED_DIR] {
        let Ok(entries) = fs_err::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".md").filter(|n| n.starts_with("MIG-")) {
                let change = fs_err::read_to_string(e.path())
                    .ok()
                    .and_then(|t| Document::parse(&t).ok())
                    .and_then(|d| d.from_version.zip(d.to_version));
                ids.insert(
                    id.to_owned(),
                    Known {
                        change,
                        pending: dir == PENDING_DIR,
                    },
                );
            }
        }
    }
    ids
}

/// Of the documents `existing`, the pending one an unfinished run that installed `to`
/// from `from` at `now` (its intent record's time) wrote, when a plan undoes that run:
/// no upgrade took place, so its migration goes with the rest of its work.
pub fn abandoned_id(existing: &Existing, (from, to): (&str, &str), now: &str) -> Option<String> {
    let base = format!("MIG-{}", crate::time::compact(now));
    existing.iter().find_map(|(id, known)| {
        let suffix = id.strip_prefix(&base)?;
        let ours = suffix.is_empty() || suffix.starts_with('-');
        let change = known.change.as_ref()?;
        (ours && known.pending && change.0 == from && change.1 == to).then(|| id.clone())
    })
}

/// The id of the document for the version change `from` → `to`: the latest pending
/// document of that change, which is brought up to date (an upgrade pinned back and
/// made again meets the same conflicts: a second document listed them twice, and
/// settling one left the other open, QA26); else `MIG-<time>`, or with `-2`, `-3`, ...
/// when a document of that id records another version change (two changes within one
/// second: the second overwrote the first's document and parked copies). A document of
/// the same change keeps its id: a resumed run completes its own.
fn free_id(now: &str, (from, to): (&str, &str), taken: &Existing) -> String {
    let same = |k: &Known| k.change.as_ref().is_some_and(|(f, t)| f == from && t == to);
    if let Some((id, _)) = taken.iter().rev().find(|(_, k)| k.pending && same(k)) {
        return id.clone();
    }
    let base = format!("MIG-{}", crate::time::compact(now));
    let free = |id: &String| taken.get(id).is_none_or(same);
    std::iter::once(base.clone())
        // One more candidate than there are documents: one of them is free.
        .chain((2..=taken.len() + 2).map(|n| format!("{base}-{n}")))
        .find(free)
        .unwrap_or(base)
}

/// Group of a project path: `AGENTS`, `lib`, `skills/<category>/<skill>`,
/// `schemas/<name>`, …, otherwise the parent directory.
pub fn group(path: &str) -> String {
    if path == "AGENTS.md" {
        return "AGENTS".to_owned();
    }
    if path.starts_with("context/skills/_lib/") {
        return "lib".to_owned();
    }
    if let Some((cat, skill)) = crate::catalog::skill_of(path) {
        return format!("skills/{cat}/{skill}");
    }
    for dir in ["schemas", "state-machines", "processes"] {
        if let Some(rest) = path.strip_prefix(&format!("context/{dir}/")) {
            let name = rest.split('/').next().unwrap_or(rest);
            let name = name.rsplit_once('.').map_or(name, |(n, _)| n);
            return format!("{dir}/{name}");
        }
    }
    path.rsplit_once('/')
        .map_or_else(|| ".".to_owned(), |(p, _)| p.to_owned())
}

fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

type Groups<'a> = BTreeMap<String, BTreeMap<Class, Vec<&'a FileDecision>>>;

const ALL_CLASSES: [Class; 6] = [
    Class::Unchanged,
    Class::ChangedLocallyOnly,
    Class::ChangedUpstreamOnly,
    Class::Conflict,
    Class::NewUpstream,
    Class::RemovedUpstream,
];

/// Everything one document shows.
struct Doc<'a> {
    id: String,
    from: &'a str,
    to: &'a str,
    origin: &'a Origin<'a>,
    created: String,
    generated_at: &'a str,
    apply_mode: &'static str,
    summary: String,
    counts: BTreeMap<Class, usize>,
    listed: Vec<&'a FileDecision>,
    groups: Groups<'a>,
    parked: bool,
}

impl Doc<'_> {
    fn n(&self, c: Class) -> usize {
        self.counts.get(&c).copied().unwrap_or(0)
    }

    fn front_matter(&self, t: &mut String) {
        let (id, from, to, created) = (&self.id, self.from, self.to, &self.created);
        let _ = writeln!(t, "---\napiVersion: {API_VERSION}\nkind: Migration");
        let _ = writeln!(t, "metadata: {{id: {id}, created: {created}}}");
        let _ = writeln!(
            t,
            "spec:\n  source: processkit\n  kind: source-upgrade\n  source_url: {}",
            yaml_str(self.origin.source)
        );
        let _ = writeln!(
            t,
            "  from_version: {from}\n  to_version: {to}\n  state: pending"
        );
        let _ = writeln!(
            t,
            "  source_api_version: {API_VERSION}\n  target_api_version: {API_VERSION}"
        );
        if let Some(d) = self.origin.from_release {
            let _ = writeln!(t, "  source_release_sha256: \"{d}\"");
        }
        // Quoted: an unquoted YAML timestamp becomes a date object, which processkit's
        // validator turns into text with a space where RFC 3339 wants `T`.
        let _ = writeln!(
            t,
            "  generated_by: aibox apply\n  generated_at: {}",
            yaml_str(self.generated_at)
        );
        let _ = writeln!(t, "  summary: {}", yaml_str(&self.summary));
        let groups: Vec<String> = self.groups.keys().map(|g| yaml_str(g)).collect();
        let _ = writeln!(t, "  affected_groups: [{}]", groups.join(", "));
        let _ = writeln!(t, "  affected_files:");
        for d in &self.listed {
            let (path, class) = (yaml_str(&d.path), d.class.as_str());
            let mut extra = String::new();
            if d.class == Class::Conflict {
                if d.release_path() != &*d.path {
                    let _ = write!(extra, ", release_path: {}", yaml_str(d.release_path()));
                }
                for (key, digest) in [
                    ("base_sha256", d.digests().base),
                    ("upstream_sha256", d.digests().upstream),
                    ("local_sha256", d.digests().live),
                ] {
                    if let Some(digest) = digest {
                        let _ = write!(extra, ", {key}: \"{digest}\"");
                    }
                }
            }
            let _ = writeln!(t, "  - {{path: {path}, classification: {class}{extra}}}");
        }
        let _ = writeln!(t, "  source_processkit_version: {from}");
        let _ = writeln!(t, "  target_processkit_version: {to}");
        let _ = writeln!(t, "  apply_mode: {}\n---\n", self.apply_mode);
    }

    fn body(&self, t: &mut String) {
        let _ = writeln!(
            t,
            "# processkit upgrade from {} to {}\n",
            self.from, self.to
        );
        let _ = writeln!(t, "{}.\n\n## Counts\n", self.summary);
        for c in ALL_CLASSES {
            let _ = writeln!(t, "- {}: {}", c.as_str(), self.n(c));
        }
        let _ = writeln!(t, "- removed-upstream-stale: 0\n");
        if self.parked {
            let _ = writeln!(
                t,
                "Conflicting files kept their local version; the upstream version of each is \
                 in `{}.upstream/<path>` next to this document. `aibox migrate show {}` shows \
                 the versions of each; `aibox migrate resolve {} --take ours|theirs|base` (or \
                 `--edited` after merging by hand) settles them and marks this migration \
                 applied.\n",
                self.id, self.id, self.id
            );
        }
        let _ = writeln!(t, "## Changes by group\n");
        for (g, classes) in &self.groups {
            let _ = writeln!(t, "### {g}\n");
            for (c, ds) in classes {
                let _ = writeln!(t, "- {}:", c.as_str());
                for d in ds {
                    let what = match d.action {
                        Action::Write => "applied",
                        Action::Remove => "removed",
                        Action::Keep if d.class == Class::RemovedUpstream => "kept (edited)",
                        Action::Keep => "kept local version",
                        Action::None => "no action",
                    };
                    let _ = writeln!(t, "  - `{}` → `{}` ({what})", d.release_path(), d.path);
                }
            }
            let _ = writeln!(t);
        }
    }
}

/// Builds the migration document for a version change, or `None` when nothing moved
/// upstream (or the version did not change).
pub(crate) fn document(
    plan: &InstallPlan,
    origin: &Origin<'_>,
    now: &str,
    parked: Vec<FileWrite>,
) -> Option<Vec<FileWrite>> {
    let from = plan.from_version.as_deref()?;
    let moved = plan.decisions.iter().any(|d| {
        matches!(
            d.class,
            Class::ChangedUpstreamOnly
                | Class::Conflict
                | Class::NewUpstream
                | Class::RemovedUpstream
        )
    });
    if from == plan.to_version || !moved {
        return None;
    }
    let listed: Vec<&FileDecision> = plan
        .decisions
        .iter()
        .filter(|d| d.class != Class::Unchanged)
        .collect();
    let mut groups: Groups<'_> = BTreeMap::new();
    for d in &listed {
        groups
            .entry(group(&d.path))
            .or_default()
            .entry(d.class)
            .or_default()
            .push(d);
    }
    let counts = plan.counts();
    let n = |c: Class| counts.get(&c).copied().unwrap_or(0);
    // Gone upstream counts as removed only where it was (as `apply`'s summary counts
    // it); a local edit kept, gone upstream or not, is counted as `apply` counts it (QA:
    // "0 kept (edited)" beside "1 local edit(s) kept").
    let removed = plan
        .decisions
        .iter()
        .filter(|d| d.class == Class::RemovedUpstream && d.action == Action::Remove)
        .count();
    let kept = plan
        .decisions
        .iter()
        .filter(|d| d.is_kept_local_edit())
        .count();
    let summary = format!(
        "{} changed upstream, {} conflicts, {} new, {} removed, {} kept (edited), 0 \
         stale-removed ({} groups affected)",
        n(Class::ChangedUpstreamOnly),
        n(Class::Conflict),
        n(Class::NewUpstream),
        removed,
        kept,
        groups.len()
    );
    let applied = plan
        .decisions
        .iter()
        .filter(|d| matches!(d.action, Action::Write | Action::Remove))
        .count();
    let doc = Doc {
        id: free_id(now, (from, &plan.to_version), origin.taken),
        from,
        to: &plan.to_version,
        origin,
        created: now.replace('T', " ").replace('Z', "+00:00"),
        generated_at: now,
        apply_mode: origin.shape.apply_mode(applied, n(Class::Conflict)),
        summary,
        counts,
        listed,
        groups,
        parked: !parked.is_empty(),
    };
    let mut t = String::new();
    doc.front_matter(&mut t);
    doc.body(&mut t);
    let mut text = t.trim_end().to_owned();
    text.push('\n');
    let mut out = vec![FileWrite {
        path: document_path(&doc.id).into(),
        data: WriteData::Bytes(text.into_bytes()),
        executable: false,
    }];
    // Parked upstream copies are for reading and merging by hand: never executable.
    for p in parked {
        out.push(FileWrite {
            path: parked_copy(&doc.id, p.path.as_str()).into(),
            executable: false,
            ..p
        });
    }
    Some(out)
}

/// One conflicting file as a migration document records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Project path.
    pub path: String,
    /// Path inside the release (differs for `INDEX.md`).
    pub release_path: String,
    /// Digest as last installed before the upgrade (unknown in older documents).
    pub base: Option<Sha256>,
    /// Digest in the new release.
    pub upstream: Option<Sha256>,
    /// Digest of the working file when the upgrade kept it.
    pub local: Option<Sha256>,
}

/// What `aibox migrate` reads from a migration document's front matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// `metadata.id`, `MIG-…`.
    pub id: String,
    /// `spec.state`.
    pub state: String,
    /// `spec.from_version`, when present.
    pub from_version: Option<String>,
    /// `spec.to_version`, when present.
    pub to_version: Option<String>,
    /// `spec.summary`, when present.
    pub summary: Option<String>,
    /// `spec.source_release_sha256`: the archive holding the base versions.
    pub from_release: Option<Sha256>,
    /// `affected_files` classified `conflict`.
    pub conflicts: Vec<Conflict>,
}

#[derive(Deserialize)]
struct RawDoc {
    metadata: RawMeta,
    spec: RawSpec,
}

#[derive(Deserialize)]
struct RawMeta {
    id: String,
}

#[derive(Deserialize)]
struct RawSpec {
    state: String,
    from_version: Option<String>,
    to_version: Option<String>,
    summary: Option<String>,
    source_release_sha256: Option<String>,
    #[serde(default)]
    affected_files: Vec<RawAffected>,
}

/// An `affected_files` item: the generated schema also allows a bare path.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawAffected {
    Path(#[allow(dead_code)] String),
    Entry {
        path: String,
        classification: String,
        release_path: Option<String>,
        base_sha256: Option<String>,
        upstream_sha256: Option<String>,
        local_sha256: Option<String>,
    },
}

/// The YAML front matter of a Markdown entity file (between the first two `---` lines).
pub fn front_matter(text: &str) -> Option<&str> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let end = rest
        .match_indices("\n---")
        .map(|(i, _)| i)
        .find(|&i| matches!(rest[i + 4..].chars().next(), None | Some('\n' | '\r')))?;
    Some(&rest[..=end])
}

impl Document {
    /// Reads a migration document's front matter. The error is a readable reason; the
    /// caller names the file.
    ///
    /// # Errors
    /// No front matter, YAML that does not parse, a missing `metadata.id` or
    /// `spec.state`, or a recorded digest that is not 64 hex digits.
    pub fn parse(text: &str) -> Result<Self, String> {
        let yaml = front_matter(text)
            .ok_or_else(|| "no YAML front matter between `---` lines".to_owned())?;
        let raw: RawDoc = serde_norway::from_str(yaml).map_err(|e| e.to_string())?;
        // The id and paths name files aibox reads and writes: only plain ones.
        let id = &raw.metadata.id;
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_');
        if !id.starts_with("MIG-") || !id.chars().all(plain) {
            return Err(format!(
                "metadata.id {} is not a migration id (`MIG-` and letters, digits, `-`, `_`)",
                aibox_config::bounded(id, 80)
            ));
        }
        let digest = |v: Option<String>| {
            v.map(|h| Sha256::parse(&h, "migration document").map_err(|e| e.to_string()))
                .transpose()
        };
        let mut conflicts = Vec::new();
        for item in raw.spec.affected_files {
            let RawAffected::Entry {
                path,
                classification,
                release_path,
                base_sha256,
                upstream_sha256,
                local_sha256,
            } = item
            else {
                continue;
            };
            if classification != Class::Conflict.as_str() {
                continue;
            }
            for p in std::iter::once(&path).chain(release_path.as_ref()) {
                aibox_fs::check_relative(camino::Utf8Path::new(p))
                    .map_err(|e| format!("conflict path: {e}"))?;
            }
            conflicts.push(Conflict {
                release_path: release_path.unwrap_or_else(|| path.clone()),
                path,
                base: digest(base_sha256)?,
                upstream: digest(upstream_sha256)?,
                local: digest(local_sha256)?,
            });
        }
        Ok(Self {
            id: raw.metadata.id,
            state: raw.spec.state,
            from_version: raw.spec.from_version,
            to_version: raw.spec.to_version,
            summary: raw.spec.summary,
            from_release: digest(raw.spec.source_release_sha256)?,
            conflicts,
        })
    }
}

/// `text` with `spec.state` set to `applied` and `spec.applied_at` stamped, the rest of
/// the document byte for byte; `None` when the front matter has no `  state:` line.
pub fn mark_applied(text: &str, now: &str) -> Option<String> {
    let fm = front_matter(text)?;
    let offset = text.find(fm)?;
    let mut out = String::with_capacity(text.len() + 40);
    let mut found = false;
    for line in fm.split_inclusive('\n') {
        let trimmed = line.trim_end();
        if !found && trimmed.starts_with("  state:") {
            found = true;
            let _ = writeln!(out, "  state: applied\n  applied_at: {}", yaml_str(now));
        } else if !trimmed.starts_with("  applied_at:") {
            out.push_str(line);
        }
    }
    found.then(|| format!("{}{out}{}", &text[..offset], &text[offset + fm.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_path_gives_back_its_id_and_nothing_else_does() {
        let id = "MIG-20261207T120037";
        assert_eq!(document_id(&document_path(id)), Some(id));
        assert_eq!(
            parked_dir(id),
            "context/migrations/pending/MIG-20261207T120037.upstream"
        );
        assert_eq!(
            parked_copy(id, "context/a.md"),
            "context/migrations/pending/MIG-20261207T120037.upstream/context/a.md"
        );
        for other in [
            "context/migrations/pending/MIG-1.upstream/AGENTS.md",
            "context/migrations/pending/MIG-1.upstream/x.md",
            "context/migrations/applied/MIG-1.md",
            "context/migrations/pendingMIG-1.md",
        ] {
            assert_eq!(document_id(other), None, "{other}");
        }
    }
}
