//! Migration documents (`context/migrations/pending/MIG-<YYYYMMDDTHHMMSS>.md`): what an
//! upgrade changed, kept or proposes, by group and class. Conflicting upstream versions
//! are parked beside the document in `MIG-<id>.upstream/<project path>`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::install::{Action, Class, FileDecision, FileWrite, InstallPlan, WriteData};

/// Directory of pending migration documents.
pub const PENDING_DIR: &str = "context/migrations/pending";

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
    source: &'a str,
    created: String,
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
        let _ = writeln!(
            t,
            "---\napiVersion: processkit.projectious.work/v2\nkind: Migration"
        );
        let _ = writeln!(t, "metadata: {{id: {id}, created: {created}}}");
        let _ = writeln!(
            t,
            "spec:\n  source: processkit\n  source_url: {}",
            yaml_str(self.source)
        );
        let _ = writeln!(
            t,
            "  from_version: {from}\n  to_version: {to}\n  state: pending"
        );
        let _ = writeln!(t, "  generated_by: aibox apply\n  generated_at: {created}");
        let _ = writeln!(t, "  summary: {}", yaml_str(&self.summary));
        let groups: Vec<String> = self.groups.keys().map(|g| yaml_str(g)).collect();
        let _ = writeln!(t, "  affected_groups: [{}]", groups.join(", "));
        let _ = writeln!(t, "  affected_files:");
        for d in &self.listed {
            let (path, class) = (yaml_str(&d.path), d.class.as_str());
            let _ = writeln!(t, "  - {{path: {path}, classification: {class}}}");
        }
        let _ = writeln!(t, "  source_processkit_version: {from}");
        let _ = writeln!(t, "  target_processkit_version: {to}");
        let _ = writeln!(t, "  apply_mode: one-shot\n---\n");
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
                 in `{}.upstream/<path>` next to this document.\n",
                self.id
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
                        Action::Keep => "kept local version",
                        Action::None => "no action",
                    };
                    let _ = writeln!(t, "  - `{}` → `{}` ({what})", d.release_path, d.path);
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
    source: &str,
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
    let summary = format!(
        "{} changed upstream, {} conflicts, {} new, {} removed, 0 stale-removed ({} groups affected)",
        n(Class::ChangedUpstreamOnly),
        n(Class::Conflict),
        n(Class::NewUpstream),
        n(Class::RemovedUpstream),
        groups.len()
    );
    let doc = Doc {
        id: format!("MIG-{}", crate::time::compact(now)),
        from,
        to: &plan.to_version,
        source,
        created: now.replace('T', " ").replace('Z', "+00:00"),
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
        path: format!("{PENDING_DIR}/{}.md", doc.id),
        data: WriteData::Bytes(text.into_bytes()),
        executable: false,
    }];
    // Parked upstream copies are for reading and merging by hand: never executable.
    for p in parked {
        out.push(FileWrite {
            path: format!("{PENDING_DIR}/{}.upstream/{}", doc.id, p.path),
            executable: false,
            ..p
        });
    }
    Some(out)
}
