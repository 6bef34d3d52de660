//! Migration documents (`context/migrations/pending/MIG-<YYYYMMDDTHHMMSS>.md`): what an
//! upgrade changed, kept or proposes, by group and class. Conflicting upstream versions
//! are parked beside the document in `MIG-<id>.upstream/<project path>`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::extract::PayloadFile;
use crate::install::{Action, Class, FileWrite, InstallPlan};

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

/// Builds the migration document for a version change, or `None` when nothing moved
/// upstream (or the version did not change).
pub(crate) fn document(
    plan: &InstallPlan,
    source: &str,
    now: &str,
    parked: Vec<FileWrite>,
) -> Option<Vec<FileWrite>> {
    let from = plan.from_version.as_deref()?;
    if from == plan.to_version {
        return None;
    }
    let moved = plan.decisions.iter().any(|d| {
        matches!(
            d.class,
            Class::ChangedUpstreamOnly
                | Class::Conflict
                | Class::NewUpstream
                | Class::RemovedUpstream
        )
    });
    if !moved {
        return None;
    }
    let id = format!("MIG-{}", crate::time::compact(now));
    let counts = plan.counts();
    let n = |c: Class| counts.get(&c).copied().unwrap_or(0);
    let listed: Vec<_> = plan
        .decisions
        .iter()
        .filter(|d| d.class != Class::Unchanged)
        .collect();
    let mut groups: BTreeMap<String, BTreeMap<Class, Vec<&crate::install::FileDecision>>> =
        BTreeMap::new();
    for d in &listed {
        groups
            .entry(group(&d.path))
            .or_default()
            .entry(d.class)
            .or_default()
            .push(d);
    }
    let summary = format!(
        "{} changed upstream, {} conflicts, {} new, {} removed, 0 stale-removed ({} groups affected)",
        n(Class::ChangedUpstreamOnly),
        n(Class::Conflict),
        n(Class::NewUpstream),
        n(Class::RemovedUpstream),
        groups.len()
    );
    let mut t = String::new();
    let created = now.replace('T', " ").replace('Z', "+00:00");
    let _ = writeln!(
        t,
        "---\napiVersion: processkit.projectious.work/v2\nkind: Migration"
    );
    let _ = writeln!(t, "metadata: {{id: {id}, created: {created}}}");
    let _ = writeln!(
        t,
        "spec:\n  source: processkit\n  source_url: {}",
        yaml_str(source)
    );
    let _ = writeln!(
        t,
        "  from_version: {from}\n  to_version: {}\n  state: pending",
        plan.to_version
    );
    let _ = writeln!(t, "  generated_by: aibox apply\n  generated_at: {created}");
    let _ = writeln!(t, "  summary: {}", yaml_str(&summary));
    let _ = writeln!(
        t,
        "  affected_groups: [{}]",
        groups
            .keys()
            .map(|g| yaml_str(g))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(t, "  affected_files:");
    for d in &listed {
        let _ = writeln!(
            t,
            "  - {{path: {}, classification: {}}}",
            yaml_str(&d.path),
            d.class.as_str()
        );
    }
    let _ = writeln!(
        t,
        "  source_processkit_version: {from}\n  target_processkit_version: {}",
        plan.to_version
    );
    let _ = writeln!(t, "  apply_mode: one-shot\n---\n");
    let _ = writeln!(
        t,
        "# processkit upgrade from {from} to {}\n",
        plan.to_version
    );
    let _ = writeln!(t, "{summary}.\n\n## Counts\n");
    for c in [
        Class::Unchanged,
        Class::ChangedLocallyOnly,
        Class::ChangedUpstreamOnly,
        Class::Conflict,
        Class::NewUpstream,
        Class::RemovedUpstream,
    ] {
        let _ = writeln!(t, "- {}: {}", c.as_str(), n(c));
    }
    let _ = writeln!(t, "- removed-upstream-stale: 0\n");
    if !parked.is_empty() {
        let _ = writeln!(
            t,
            "Conflicting files kept their local version; the upstream version of each is in `{id}.upstream/<path>` next to this document.\n"
        );
    }
    let _ = writeln!(t, "## Changes by group\n");
    for (g, classes) in &groups {
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
    let mut out = vec![FileWrite {
        path: format!("{PENDING_DIR}/{id}.md"),
        file: PayloadFile {
            data: t
                .trim_end()
                .as_bytes()
                .iter()
                .copied()
                .chain([b'\n'])
                .collect(),
            executable: false,
        },
    }];
    for p in parked {
        out.push(FileWrite {
            path: format!("{PENDING_DIR}/{id}.upstream/{}", p.path),
            file: p.file,
        });
    }
    Some(out)
}
