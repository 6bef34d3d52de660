//! Synthetic processkit releases in the real release layout (about 150 skills and 860
//! files in several categories, package tiers, core skills, a gateway skill, per-skill
//! MCP servers; the real-like one also at the real size, about 5 MB, and scaled for
//! benchmarks), a second version with upstream changes, and hostile archives — all
//! deterministic, packed by a small ustar writer that can also express what well-behaved
//! tar libraries refuse to write (`..`, NUL bytes, devices, duplicates).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;

use sha2::Digest as _;

/// Categories and how many skills each holds (146 in total, as in processkit v0.28.3).
const CATEGORIES: [(&str, usize); 7] = [
    ("processkit", 48),
    ("engineering", 47),
    ("devops", 16),
    ("data-ai", 11),
    ("documents", 8),
    ("product", 11),
    ("design", 5),
];

/// Core skills (always installed).
pub const CORE_SKILLS: [&str; 3] = ["skill-finder", "skill-gate", "task-router"];

/// Real skill names of processkit's own category (v0.28.3 and its neighbours), used by
/// [`SyntheticRelease::processkit_like`]. The first 26 after the gateway ship a server.
const PROCESSKIT_NAMES: [&str; 44] = [
    "event-log",
    "workitem-management",
    "index-management",
    "id-management",
    "binding-management",
    "decision-record",
    "gate-management",
    "role-management",
    "context-archiving",
    "actor-profile",
    "artifact-management",
    "discussion-management",
    "migration-management",
    "model-recommender",
    "note-management",
    "schedule-management",
    "scope-management",
    "state-machine-management",
    "team-manager",
    "agent-management",
    "owner-profiling",
    "release-audit",
    "aggregate-mcp",
    "morning-briefing",
    "standup-context",
    "retrospective",
    "pk-doctor",
    "context-grooming",
    "session-handover",
    "skill-builder",
    "skill-reviewer",
    "processkit-onboarding",
    "status-briefing",
    "backlog-grooming",
    "sprint-planning",
    "risk-register",
    "stakeholder-map",
    "meeting-notes",
    "daily-log",
    "project-charter",
    "roadmap-planning",
    "okr-tracking",
    "knowledge-capture",
    "glossary-management",
];

/// Real-like names of the other categories; `auth-patterns`, `secret-management` and
/// `database-patterns` carry documentation examples that look like credentials.
const OTHER_NAMES: [(&str, &[&str]); 6] = [
    (
        "engineering",
        &[
            "code-review",
            "auth-patterns",
            "secret-management",
            "database-patterns",
            "api-design",
            "testing-strategy",
            "refactoring",
            "error-handling",
            "logging-patterns",
            "performance-profiling",
            "dependency-management",
            "git-workflow",
            "rust-patterns",
            "python-patterns",
            "typescript-patterns",
            "go-patterns",
            "java-patterns",
            "sql-optimization",
            "caching-strategies",
            "concurrency-patterns",
            "event-driven-design",
            "domain-driven-design",
            "clean-architecture",
            "microservices",
            "graphql-design",
            "rest-conventions",
            "openapi-specs",
            "unit-testing",
            "integration-testing",
            "property-testing",
            "fuzzing",
            "code-documentation",
            "changelog-writing",
            "release-notes",
            "semantic-versioning",
            "feature-flags",
            "migration-scripts",
            "data-modeling",
            "schema-evolution",
            "security-review",
            "threat-modeling",
            "input-validation",
            "accessibility-review",
            "i18n-patterns",
            "cli-design",
            "debugging",
            "pair-programming",
        ],
    ),
    (
        "devops",
        &[
            "repo-management",
            "ci-pipelines",
            "container-builds",
            "kubernetes-deploy",
            "terraform-modules",
            "monitoring-setup",
            "incident-response",
            "backup-restore",
            "log-aggregation",
            "secrets-rotation",
            "release-automation",
            "infrastructure-review",
            "cost-optimization",
            "dns-management",
            "tls-certificates",
            "on-call-handbook",
        ],
    ),
    (
        "data-ai",
        &[
            "prompt-engineering",
            "eval-design",
            "dataset-curation",
            "model-selection",
            "rag-patterns",
            "embedding-search",
            "fine-tuning",
            "data-cleaning",
            "notebook-hygiene",
            "ml-experiment-tracking",
            "agent-design",
        ],
    ),
    (
        "documents",
        &[
            "technical-writing",
            "adr-writing",
            "readme-authoring",
            "runbook-writing",
            "proposal-writing",
            "meeting-minutes",
            "report-generation",
            "style-guide",
        ],
    ),
    (
        "product",
        &[
            "user-research",
            "requirements-writing",
            "user-stories",
            "product-discovery",
            "competitive-analysis",
            "pricing-strategy",
            "launch-planning",
            "feedback-triage",
            "metrics-definition",
            "persona-design",
            "journey-mapping",
        ],
    ),
    (
        "design",
        &[
            "ui-review",
            "design-system",
            "wireframing",
            "usability-testing",
            "visual-identity",
        ],
    ),
];

/// A release tree: payload path → (contents, mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticRelease {
    /// The tag, for example `v1.0.0`.
    pub version: String,
    /// Files below the top directory.
    pub files: BTreeMap<String, (Vec<u8>, u32)>,
}

/// The 64-bit FNV-1a hash of `seed`: the deterministic start of every generated size and
/// text.
fn fnv(seed: &str) -> u64 {
    seed.bytes().fold(0xcbf2_9ce4_8422_2325, |a, b| {
        (a ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn filler(seed: &str, len: usize) -> String {
    // Deterministic prose-like text so gzip behaves realistically.
    const WORDS: [&str; 16] = [
        "context", "skill", "agent", "review", "record", "decision", "workflow", "state",
        "artifact", "gate", "process", "team", "model", "schema", "event", "log",
    ];
    let mut h = fnv(seed);
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        h ^= h << 13;
        h ^= h >> 7;
        h ^= h << 17;
        out.push_str(WORDS[usize::try_from(h % 16).unwrap_or(0)]);
        out.push(if h.is_multiple_of(11) { '\n' } else { ' ' });
    }
    out.push('\n');
    out
}

/// A deterministic length in `lo..lo + spread` for `seed`, so file sizes vary like a real
/// tree's instead of all being equal.
fn size_of(seed: &str, lo: usize, spread: usize) -> usize {
    let h = fnv(seed);
    let spread = u64::try_from(spread.max(1)).unwrap_or(1);
    lo + usize::try_from(h % spread).unwrap_or(0)
}

/// Larger text assets a few real skills ship (templates, icon sheets, sample data):
/// `(skill, file under the skill, size)`.
const ASSETS: [(&str, &str, usize); 5] = [
    ("design-system", "assets/icons.svg", 240_000),
    ("wireframing", "assets/wireframe-kit.svg", 160_000),
    ("report-generation", "assets/report-template.html", 120_000),
    ("dataset-curation", "assets/sample-dataset.csv", 200_000),
    ("eval-design", "assets/eval-cases.jsonl", 90_000),
];

/// The name of the `i`-th skill of `cat`: synthetic (`<cat>-skill-NN`, stable for tests
/// that name skills by index) or real-like.
fn skill_name(cat: &str, i: usize, real: bool) -> String {
    match (cat, i) {
        ("processkit", 0) => return "skill-finder".to_owned(),
        ("processkit", 1) => return "skill-gate".to_owned(),
        ("processkit", 2) => return "task-router".to_owned(),
        ("processkit", 3) => return "processkit-gateway".to_owned(),
        _ => {}
    }
    if real {
        let table: &[&str] = if cat == "processkit" {
            &PROCESSKIT_NAMES
        } else {
            OTHER_NAMES
                .iter()
                .find(|(c, _)| *c == cat)
                .map_or(&[], |(_, n)| *n)
        };
        let idx = if cat == "processkit" { i - 4 } else { i };
        if let Some(n) = table.get(idx) {
            return (*n).to_owned();
        }
    }
    format!("{cat}-skill-{i:02}")
}

fn skill_names(real: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (cat, n) in CATEGORIES {
        for i in 0..n {
            out.push((cat.to_owned(), skill_name(cat, i, real)));
        }
    }
    out
}

fn has_server(cat: &str, i: usize) -> bool {
    (cat == "processkit" && (4..30).contains(&i)) || (cat == "devops" && i == 0)
}

/// A server without a config (never registered), like `aggregate-mcp` in real releases.
fn has_unregistered_server(cat: &str, i: usize) -> bool {
    cat == "processkit" && (30..33).contains(&i)
}

/// The extra tool of `repo-management`'s server.
const REPO_PUSH: &str = r#"
import subprocess  # noqa: E402


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True))
def push_branch(branch: str) -> str:
    """Push a branch to the configured remote."""
    done = subprocess.run(["git", "push", "origin", branch], check=True, capture_output=True, text=True)
    return done.stdout
"#;

/// `list_<skill>` and `get_<skill>` with underscores.
fn tools_of(name: &str) -> [String; 2] {
    let snake = name.replace('-', "_");
    [format!("list_{snake}"), format!("get_{snake}")]
}

/// A per-skill MCP server shaped like processkit's: a PEP 723 script (launched with
/// `uv run`) that finds `_lib/processkit` by walking up, registers its tools with all four
/// annotation hints, and reads only files under the project.
fn server_py(name: &str, extra: &str) -> String {
    let [list, get] = tools_of(name);
    format!(
        r#"#!/usr/bin/env python3
# /// script
# requires-python = ">=3.10"
# dependencies = [
#   "mcp[cli]>=1.0",
#   "pyyaml>=6.0",
# ]
# ///
"""MCP server of the {name} skill: read-only access to its entities."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _find_lib() -> Path:
    override = os.environ.get("PROCESSKIT_LIB_PATH")
    if override:
        return Path(override)
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "_lib"
        if (candidate / "processkit").is_dir():
            return candidate
    raise SystemExit("processkit _lib not found; set PROCESSKIT_LIB_PATH")


sys.path.insert(0, str(_find_lib()))

from mcp.server.fastmcp import FastMCP  # noqa: E402
from mcp.types import ToolAnnotations  # noqa: E402
from processkit import entity, paths  # noqa: E402

server = FastMCP("processkit-{name}")

READ_ONLY = ToolAnnotations(
    readOnlyHint=True,
    destructiveHint=False,
    idempotentHint=True,
    openWorldHint=False,
)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False))
def {list}(kind: str = "") -> list[dict]:
    """List the entities this skill manages."""
    root = paths.context_root()
    return [entity.summary(p) for p in sorted(root.glob("**/*.md")) if kind in p.name]


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False))
def {get}(entity_id: str) -> dict:
    """Read one entity by id."""
    return entity.load(paths.context_root(), entity_id)

{extra}
if __name__ == "__main__":
    server.run()
"#
    )
}

fn manifest_json(
    files: &BTreeMap<String, (Vec<u8>, u32)>,
    version: &str,
    stale: Option<&str>,
) -> String {
    let canonical = |data: &[u8]| -> String {
        let v: serde_json::Value = serde_json::from_slice(data).unwrap_or_default();
        sha256_hex(canonical(&v).as_bytes())
    };
    let header = |data: &[u8]| -> Option<String> {
        let text = String::from_utf8_lossy(data);
        let mut block: Vec<&str> = Vec::new();
        for line in text.lines() {
            if block.is_empty() {
                if line == "# /// script" {
                    block.push(line);
                }
            } else {
                block.push(line);
                if line == "# ///" {
                    return Some(sha256_hex(format!("{}\n", block.join("\n")).as_bytes()));
                }
            }
        }
        None
    };
    let mut per_skill = Vec::new();
    let mut per_gateway = Vec::new();
    let mut per_header = Vec::new();
    for (path, (data, _)) in files {
        if path.ends_with("/mcp/mcp-config.json") {
            let entry = serde_json::json!({"path": path, "sha256": canonical(data)});
            if path.contains("/processkit-gateway/") {
                per_gateway.push(entry);
            } else {
                per_skill.push(entry);
            }
        } else if path.ends_with("/mcp/server.py")
            && let Some(mut h) = header(data)
        {
            if stale == Some(path.as_str()) {
                h = "0".repeat(64);
            }
            per_header.push(serde_json::json!({"path": path, "sha256": h}));
        }
    }
    let digests: Vec<&str> = per_skill
        .iter()
        .filter_map(|e| e["sha256"].as_str())
        .collect();
    let aggregate = sha256_hex(digests.join("\n").as_bytes());
    let manifest = serde_json::json!({
        "aggregate_sha256": aggregate,
        "generated_at": "2026-07-23T15:41:41Z",
        "per_gateway": per_gateway,
        "per_server_header": per_header,
        "per_skill": per_skill,
        "processkit_version": version,
        "version": 1,
    });
    // Sorted keys, 2-space indent, final newline, like processkit's writer.
    let mut out = serde_json::to_string_pretty(&sort_keys(&manifest)).unwrap_or_default();
    out.push('\n');
    out
}

fn sort_keys(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let sorted: BTreeMap<&String, serde_json::Value> =
                m.iter().map(|(k, v)| (k, sort_keys(v))).collect();
            serde_json::Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

/// Canonical JSON as processkit hashes it: sorted keys, no whitespace, raw UTF-8.
pub fn canonical(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(m) => {
            let sorted: BTreeMap<&String, &serde_json::Value> = m.iter().collect();
            let items: Vec<String> = sorted
                .into_iter()
                .map(|(k, v)| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(k).unwrap_or_default(),
                        canonical(v)
                    )
                })
                .collect();
            format!("{{{}}}", items.join(","))
        }
        serde_json::Value::Array(a) => {
            format!(
                "[{}]",
                a.iter().map(canonical).collect::<Vec<_>>().join(",")
            )
        }
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Documentation examples that look like credentials (as real skills ship them).
fn credential_examples(name: &str, add: &mut dyn FnMut(String, String), dir: &str) {
    match name {
        "database-patterns" => add(
            format!("{dir}/examples/connection-strings.md"),
            "# Connection strings\n\nUse a URL such as `postgres://user:pass@db.example.com:5432/app`\n\
             and keep the real one in a secret store.\n"
                .to_owned(),
        ),
        "auth-patterns" => {
            add(
                format!("{dir}/examples/bearer.md"),
                "# Calling an API\n\n```http\nGET /v1/items HTTP/1.1\nAuthorization: Bearer abc123exampletoken\n```\n"
                    .to_owned(),
            );
            add(
                format!("{dir}/scripts/make-test-cert.sh"),
                "#!/bin/sh\n# Writes a throw-away key for local TLS tests.\nset -eu\ncat > test-key.pem <<'EOF'\n-----BEGIN PRIVATE KEY-----\nMIIEexampleexampleexample\n-----END PRIVATE KEY-----\nEOF\n"
                    .to_owned(),
            );
        }
        "secret-management" => add(
            format!("{dir}/references/env-files.md"),
            "# .env files\n\nNever commit `API_TOKEN=changeme-example`; reference a secret store.\n"
                .to_owned(),
        ),
        _ => {}
    }
}

/// The `k`-th copy of a payload file for [`SyntheticRelease::processkit_like_scaled`]:
/// its path and contents (see there).
fn scaled_copy(path: &str, data: &[u8], k: usize) -> (String, Vec<u8>) {
    let skill = path
        .strip_prefix("context/skills/")
        .and_then(|rest| {
            let mut it = rest.splitn(3, '/');
            Some((it.next()?, it.next()?, it.next()?))
        })
        .filter(|(cat, _, _)| !cat.starts_with('_'));
    let parsed = |rest: &str| {
        rest == "SKILL.md"
            || rest.starts_with("mcp/")
            || rest.starts_with("config/")
            || path.starts_with(".processkit/packages/")
            || matches!(
                path,
                "context/.processkit-mcp-manifest.json" | "AGENTS.md" | "INDEX.md"
            )
    };
    let (dest, note) = if let Some((cat, name, rest)) = skill {
        let note = parsed(rest);
        let rest = if note {
            format!("{}.md", rest.replace('/', "-"))
        } else {
            rest.to_owned()
        };
        (
            format!("context/skills/{cat}/{name}/references/copy-{k}/{rest}"),
            note,
        )
    } else {
        let note = parsed(path);
        let rest = if note {
            format!("{}.md", path.replace('/', "-"))
        } else {
            path.strip_prefix("context/").unwrap_or(path).to_owned()
        };
        let installed = path.starts_with("context/") || matches!(path, "AGENTS.md" | "INDEX.md");
        if installed {
            (format!("context/bench-copies/copy-{k}/{rest}"), note)
        } else {
            (format!("copies/copy-{k}/{rest}"), note)
        }
    };
    let copy = if note {
        filler(&dest, data.len().saturating_sub(1)).into_bytes()
    } else {
        let mut copy = data.to_vec();
        copy.extend_from_slice(format!("\n# copy {k}\n").as_bytes());
        copy
    };
    (dest, copy)
}

impl SyntheticRelease {
    /// The base release (`upstream_changes = false`) or its successor with upstream
    /// changes: edited skills, a new and a removed skill, a new library file, a dropped
    /// schema, a changed tier file. Skill names are synthetic (`<category>-skill-NN`) so
    /// tests can name them by index; the shape is otherwise the real one
    /// (see [`Self::processkit_like`]).
    pub fn generate(version: &str, upstream_changes: bool) -> Self {
        Self::build(version, upstream_changes, false)
    }

    /// A release shaped and sized like processkit's own (v0.28.3): about 860 files and
    /// 5 MB (`SKILL.md` files of 4-12 KB, references of 8-22 KB, five text assets of
    /// 90-240 KB; so about 1,720 files and 10 MB installed with every skill and the
    /// snapshot), 146 skills with real-like names in 7 categories, three `core: true` skills, the gateway, 27 PEP 723 servers launched
    /// with `uv run` (26 per-skill configs plus the gateway's) and three servers without a
    /// config, tier files framed by `---` with comments and block scalars, the MCP
    /// manifest with canonical-JSON digests (one stale `per_server_header`, as real
    /// releases shipped), `PROVENANCE.toml`, and documentation examples that look like
    /// credentials. With `upstream_changes`, the next version: changed `SKILL.md` files, a
    /// new and a removed skill, a removed file, a changed tier file.
    pub fn processkit_like(version: &str, upstream_changes: bool) -> Self {
        Self::build(version, upstream_changes, true)
    }

    #[allow(clippy::too_many_lines)] // one linear recipe reads better than fragments
    fn build(version: &str, upstream_changes: bool, real: bool) -> Self {
        let mut files: BTreeMap<String, (Vec<u8>, u32)> = BTreeMap::new();
        // Real-like releases vary their file sizes; the synthetic ones keep fixed sizes.
        let len = |seed: &str, lo, spread, fixed| {
            if real {
                size_of(seed, lo, spread)
            } else {
                fixed
            }
        };
        let mut add = |path: String, text: String| {
            files.insert(path, (text.into_bytes(), 0o644));
        };
        add(
            "AGENTS.md".into(),
            format!(
                "# Agents\n\nprocesskit {version}\n\n{}",
                filler("agents", 3000)
            ),
        );
        add("INDEX.md".into(), "# processkit\n".into());
        add(".gitignore.example".into(), "context/.cache/\n".into());
        add(".processkit/FORMAT.md".into(), "# Format\n".into());
        add(
            ".processkit/INDEX.md".into(),
            "# processkit catalog\n".into(),
        );
        add(
            ".processkit/packages/INDEX.md".into(),
            "# Packages\n".into(),
        );
        add("context/skills/INDEX.md".into(), "# Skills\n".into());
        add("context/skills/FORMAT.md".into(), "# Skill format\n".into());
        add("context/team/roster.md".into(), "# Roster\n".into());
        for i in 0..24 {
            add(
                format!("context/skills/_lib/processkit/mod_{i:02}.py"),
                filler(
                    &format!("lib{i}"),
                    len(&format!("lib{i}"), 6000, 12_000, 5000),
                ),
            );
        }
        if upstream_changes {
            add(
                "context/skills/_lib/processkit/new_helper.py".into(),
                filler("newlib", 2000),
            );
        }
        for i in 0..18 {
            if upstream_changes && i == 17 {
                continue;
            }
            add(
                format!("context/schemas/schema-{i:02}.yaml"),
                filler(
                    &format!("schema{i}"),
                    len(&format!("schema{i}"), 1500, 4000, 1500),
                ),
            );
        }
        for i in 0..7 {
            add(
                format!("context/state-machines/sm-{i}.yaml"),
                filler(&format!("sm{i}"), 800),
            );
        }
        // Real releases ship a few example entities; the synthetic one more, for tests.
        let entities = if real { 3 } else { 12 };
        for dir in ["artifacts", "bindings", "roles", "team-members"] {
            for i in 0..entities {
                add(
                    format!("context/{dir}/{dir}-{i:02}.md"),
                    filler(&format!("{dir}{i}"), 1200),
                );
            }
        }
        let removed = skill_name("engineering", 29, real);
        let added = if real {
            "observability-patterns".to_owned()
        } else {
            "engineering-skill-new".to_owned()
        };
        let mut names = skill_names(real);
        if upstream_changes {
            names.retain(|(_, n)| *n != removed);
            names.push(("engineering".into(), added.clone()));
        }
        let mut counters: BTreeMap<String, usize> = BTreeMap::new();
        for (cat, name) in &names {
            let i = counters.entry(cat.clone()).or_insert(0);
            let idx = *i;
            *i += 1;
            let dir = format!("context/skills/{cat}/{name}");
            let core = CORE_SKILLS.contains(&name.as_str());
            let changed = upstream_changes && idx % 10 == 5;
            let server = has_server(cat, idx)
                || has_unregistered_server(cat, idx)
                || name == "processkit-gateway";
            let mut skill_md = format!(
                "---\nname: {name}\ndescription: \"Synthetic skill {name} for tests\"\nmetadata:\n  processkit:\n    apiVersion: processkit.projectious.work/v2\n    id: SKILL-{name}\n    version: \"1.0.0\"\n    created: 2026-04-06T00:00:00Z\n    category: {cat}\n    layer: 2\n"
            );
            if core {
                skill_md.push_str("    core: true\n");
            }
            if server {
                let [list, get] = tools_of(name);
                let push = if name == "repo-management" {
                    ", push_branch"
                } else {
                    ""
                };
                let _ = writeln!(
                    skill_md,
                    "    uses: [{{skill: event-log, purpose: \"record changes\"}}]\n    provides:\n      primitives: [Entity]\n      mcp_tools: [{list}, {get}{push}]\n      templates: [{name}]"
                );
            }
            let _ = writeln!(
                skill_md,
                "    commands: [{{name: pk-{name}, args: \"[query]\", description: \"Use {name}\"}}]"
            );
            skill_md.push_str("---\n\n");
            let _ = writeln!(skill_md, "# {name}\n");
            // Real `SKILL.md` files run to several KB; references are the bulk of a skill.
            let skill_len = len(&format!("len-skill-{name}"), 4000, 8000, 2500);
            let guide_len = len(&format!("len-guide-{name}"), 8000, 14_000, 2000);
            skill_md.push_str(&filler(&format!("skill-{name}"), skill_len));
            if changed {
                skill_md.push_str("\nUpstream revision: clarified the procedure.\n");
            }
            add(format!("{dir}/SKILL.md"), skill_md);
            add(
                format!("{dir}/commands/pk-{name}.md"),
                format!(
                    "---\nargument-hint: \"[args]\"\nallowed-tools: []\n---\nUse the {name} skill with $ARGUMENTS\n"
                ),
            );
            add(
                format!("{dir}/references/guide.md"),
                filler(
                    &format!("guide-{name}"),
                    if changed { guide_len + 100 } else { guide_len },
                ),
            );
            add(format!("{dir}/scripts/.gitkeep"), String::new());
            if idx.is_multiple_of(3) {
                add(
                    format!("{dir}/config/settings.toml"),
                    format!("# settings of {name}\nverbose = false\n"),
                );
                // A file the next version drops (a removed file inside a kept skill).
                if !(upstream_changes && idx.is_multiple_of(9)) {
                    add(
                        format!("{dir}/examples/example.md"),
                        format!(
                            "# Example of {name}\n\n{}",
                            filler(
                                &format!("ex-{name}"),
                                len(&format!("len-ex-{name}"), 2500, 3000, 600)
                            )
                        ),
                    );
                }
            }
            if real {
                credential_examples(name, &mut add, &dir);
                for (skill, file, len) in ASSETS {
                    if skill == name {
                        add(
                            format!("{dir}/{file}"),
                            filler(&format!("asset-{name}"), len),
                        );
                    }
                }
            }
            if name == "processkit-gateway" {
                add(
                    format!("{dir}/mcp/server.py"),
                    server_py(
                        name,
                        &filler("gateway", 400).lines().fold(
                            String::from("# gateway catalog notes\n"),
                            |mut acc, l| {
                                let _ = writeln!(acc, "# {l}");
                                acc
                            },
                        ),
                    ),
                );
                add(
                    format!("{dir}/mcp/mcp-config.json"),
                    format!(
                        "{{\n  \"mcpServers\": {{\n    \"processkit-gateway\": {{\n      \"command\": \"uv\",\n      \"args\": [\"run\", \"--script\", \"{dir}/mcp/server.py\"],\n      \"env\": {{\"PROCESSKIT_MCP_MODE\": \"gateway\"}}\n    }}\n  }}\n}}\n"
                    ),
                );
                // Generated data, pretty-printed like processkit's JSON writers.
                let tools: Vec<serde_json::Value> = (0..171)
                    .map(|i| {
                        serde_json::json!({
                            "description": filler(&format!("tool{i}"), 80).trim(),
                            "name": format!("tool_{i:03}"),
                            "source_server": format!("processkit-{}", skill_name("processkit", 4 + i % 26, real)),
                        })
                    })
                    .collect();
                let catalog = serde_json::json!({"catalog_version": 1, "tools": tools});
                add(
                    format!("{dir}/mcp/tool-catalog.json"),
                    format!(
                        "{}\n",
                        serde_json::to_string_pretty(&catalog).unwrap_or_default()
                    ),
                );
            } else if server {
                // Like the real repo-management server, one tool talks to a git remote:
                // a true review finding (point 2) on a first-party skill.
                let extra = if name == "repo-management" {
                    REPO_PUSH
                } else {
                    ""
                };
                add(format!("{dir}/mcp/server.py"), server_py(name, extra));
                add(format!("{dir}/mcp/SERVER.md"), format!("# {name} server\n"));
                if has_server(cat, idx) {
                    add(
                        format!("{dir}/mcp/mcp-config.json"),
                        format!(
                            "{{\n  \"mcpServers\": {{\n    \"processkit-{name}\": {{\n      \"command\": \"uv\",\n      \"args\": [\"run\", \"{dir}/mcp/server.py\"],\n      \"env\": {{}}\n    }}\n  }}\n}}\n"
                        ),
                    );
                }
            }
        }
        // Tiers: real framing (`---` first and last), comments inside lists, a folded
        // block scalar, unknown keys, and a stale skill name.
        let pick = |cat: &str, from: usize, to: usize| -> Vec<String> {
            (from..to).map(|i| skill_name(cat, i, real)).collect()
        };
        let mut minimal = pick("processkit", 4, 13);
        minimal.push("processkit-gateway".into());
        let mut managed = pick("processkit", 13, 40);
        managed.push("backlog-context".into());
        let mut software = [pick("engineering", 0, 30), pick("devops", 0, 5)].concat();
        if upstream_changes && real {
            software.push(added.clone());
        }
        let research = [pick("data-ai", 0, 11), pick("documents", 0, 8)].concat();
        let product = [
            pick("product", 0, 11),
            pick("design", 0, 5),
            pick("engineering", 30, 35),
        ]
        .concat();
        for (tier, extends, skills) in [
            ("minimal", vec![], minimal),
            ("managed", vec!["minimal"], managed),
            ("software", vec!["managed"], software),
            ("research", vec!["managed"], research),
            ("product", vec!["software"], product),
        ] {
            let mut y = format!(
                "---\napiVersion: processkit.projectious.work/v1\nkind: Package\nmetadata: {{id: PKG-{tier}, name: {tier}, version: \"1.0.0\", created: 2026-04-06T00:00:00Z}}\nspec:\n  description: >\n    The {tier} tier\n    of processkit.\n"
            );
            if upstream_changes && tier == "product" {
                y.push_str(
                    "  # revised in the next version\n  audience: product teams   # unknown key\n",
                );
            }
            let _ = writeln!(y, "  extends: [{}]", extends.join(", "));
            y.push_str("  includes:\n    skills:\n");
            for (k, skill) in skills.iter().enumerate() {
                if k == 0 {
                    y.push_str("      # own skills of this tier\n");
                }
                let _ = writeln!(y, "      - {skill}");
            }
            y.push_str("---\n");
            add(format!(".processkit/packages/{tier}.yaml"), y);
        }
        if let Some(f) = files.get_mut(&format!(
            "context/skills/processkit/{}/scripts/.gitkeep",
            skill_name("processkit", 5, real)
        )) {
            f.1 = 0o755;
        }
        // The manifest covers every shipped config; in the real-like release one header
        // digest is stale, as processkit has shipped.
        let stale = real.then(|| {
            format!(
                "context/skills/processkit/{}/mcp/server.py",
                skill_name("processkit", 6, real)
            )
        });
        let manifest = manifest_json(&files, version, stale.as_deref());
        files.insert(
            "context/.processkit-mcp-manifest.json".into(),
            (manifest.into_bytes(), 0o644),
        );
        files.insert("LICENSE".into(), (b"MIT\n".to_vec(), 0o644));
        files.insert(
            "CHANGELOG.md".into(),
            (format!("# Changelog\n\n## {version}\n").into_bytes(), 0o644),
        );
        let mut prov = format!(
            "[source]\nproject = \"processkit\"\nupstream = \"https://example.invalid/processkit.git\"\ngenerated_at = \"2026-01-01T00:00:00Z\"\ngenerated_for_tag = \"{version}\"\n\n[files]\n"
        );
        for path in files
            .keys()
            .filter(|p| *p != "LICENSE" && *p != "CHANGELOG.md")
        {
            let _ = writeln!(prov, "\"{path}\" = \"{version}\"");
        }
        files.insert("PROVENANCE.toml".into(), (prov.into_bytes(), 0o644));
        Self {
            version: version.to_owned(),
            files,
        }
    }

    /// [`Self::processkit_like`] with `factor` times the files and the bytes: besides the
    /// base release, `factor - 1` copies of every file (but `LICENSE`, `CHANGELOG.md` and
    /// `PROVENANCE.toml`, which is restamped and so grows with the file list), so the
    /// release, the installed tree and the snapshot all grow linearly. A copy stays in
    /// its skill (under `references/copy-K/`) or, outside skills, moves below
    /// `context/bench-copies/copy-K/` when the original is installed and `copies/copy-K/`
    /// when it is not; a file the product parses (`SKILL.md`, `mcp/`, `config/`, tier
    /// files, the MCP manifest, `AGENTS.md`) is copied as a plain note of the same size,
    /// so the catalog, the servers and the manifest stay those of the real shape. For
    /// benchmarks at 10x.
    pub fn processkit_like_scaled(version: &str, upstream_changes: bool, factor: usize) -> Self {
        let mut release = Self::processkit_like(version, upstream_changes);
        if factor <= 1 {
            return release;
        }
        let mut extra = BTreeMap::new();
        for (path, (data, mode)) in &release.files {
            if matches!(
                path.as_str(),
                "LICENSE" | "CHANGELOG.md" | "PROVENANCE.toml"
            ) {
                continue;
            }
            for k in 1..factor {
                let (copy_path, copy) = scaled_copy(path, data, k);
                extra.insert(copy_path, (copy, *mode));
            }
        }
        release.files.extend(extra);
        release.restamp();
        release
    }

    /// Recomputes the MCP manifest after a test edited the file map (no stale entries).
    pub fn remanifest(&mut self) {
        let manifest = manifest_json(&self.files, &self.version, None);
        self.files.insert(
            "context/.processkit-mcp-manifest.json".into(),
            (manifest.into_bytes(), 0o644),
        );
    }

    /// `processkit-<version>.tar.gz`.
    pub fn archive_name(&self) -> String {
        format!("processkit-{}.tar.gz", self.version)
    }

    /// The tar entries, top directory first, sorted by name (like the real releases).
    pub fn entries(&self) -> Vec<TarEntry> {
        let top = format!("processkit-{}", self.version);
        let mut dirs = std::collections::BTreeSet::new();
        for path in self.files.keys() {
            let mut acc = top.clone();
            for comp in path
                .split('/')
                .rev()
                .skip(1)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                acc = format!("{acc}/{comp}");
                dirs.insert(acc.clone());
            }
        }
        let mut all: BTreeMap<String, TarEntry> = BTreeMap::new();
        all.insert(format!("{top}/"), TarEntry::dir(&format!("{top}/")));
        for d in dirs {
            all.insert(format!("{d}/"), TarEntry::dir(&format!("{d}/")));
        }
        for (path, (data, mode)) in &self.files {
            let name = format!("{top}/{path}");
            all.insert(
                name.clone(),
                TarEntry {
                    mode: *mode,
                    ..TarEntry::file(&name, data.clone())
                },
            );
        }
        all.into_values().collect()
    }

    /// The gzip-compressed tar archive.
    pub fn tar_gz(&self) -> Vec<u8> {
        gzip(&tar(&self.entries()))
    }

    /// The `sha256sum`-style sidecar for an archive produced by [`Self::tar_gz`].
    pub fn sidecar(&self, archive: &[u8]) -> String {
        format!("{}  {}\n", sha256_hex(archive), self.archive_name())
    }

    /// Writes the payload as a directory (for local directory sources).
    pub fn write_dir(&self, dir: &std::path::Path) -> std::io::Result<()> {
        for (path, (data, mode)) in &self.files {
            let p = dir.join(path);
            if let Some(parent) = p.parent() {
                fs_err::create_dir_all(parent)?;
            }
            fs_err::write(&p, data)?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                fs_err::set_permissions(&p, std::fs::Permissions::from_mode(*mode))?;
            }
        }
        Ok(())
    }

    /// Writes the archive into `dir` and returns an `aibox.toml` installing it (pinned by
    /// digest, the `product` package), with `dir` listed as a trusted source.
    ///
    /// # Errors
    /// The archive cannot be written.
    pub fn local_project_config(&self, dir: &camino::Utf8Path) -> std::io::Result<String> {
        let data = self.tar_gz();
        let archive = dir.join(self.archive_name());
        fs_err::write(&archive, &data)?;
        Ok(format!(
            "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\npackages = [\"product\"]\n\n\
             [processkit]\nsource = \"{archive}\"\nversion = \"{}\"\nsha256 = \"{}\"\n\
             trusted_sources = [\"{dir}\"]\n",
            self.version,
            sha256_hex(&data)
        ))
    }

    /// A `SKILL.md` of the `processkit` category that this release changes from
    /// `previous` and that is installed under `root`, of a skill that ships no MCP server
    /// (a skill edited by hand is reviewed as third-party; one without a server passes,
    /// so an upgrade over the edit is not refused): the file for a conflict.
    pub fn changed_plain_skill(&self, previous: &Self, root: &camino::Utf8Path) -> Option<String> {
        self.files
            .iter()
            .find(|(path, (bytes, _))| {
                let dir = path.trim_end_matches("SKILL.md");
                path.starts_with("context/skills/processkit/")
                    && path.ends_with("/SKILL.md")
                    && root.join(path.as_str()).is_file()
                    && previous
                        .files
                        .get(*path)
                        .is_some_and(|(old, _)| old != bytes)
                    && !self
                        .files
                        .keys()
                        .any(|p| p.starts_with(dir) && p.contains("/mcp/"))
            })
            .map(|(path, _)| path.clone())
    }
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(data))
}

/// One raw tar entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TarEntry {
    /// Name bytes, written verbatim (PAX `path` record when it does not fit ustar).
    pub name: Vec<u8>,
    /// Type flag: `b'0'` file, `b'5'` dir, `b'1'` hard link, `b'2'` symlink, `b'3'`/`b'4'`
    /// devices, `b'6'` FIFO.
    pub kind: u8,
    /// Mode bits.
    pub mode: u32,
    /// Content.
    pub data: Vec<u8>,
    /// Link target.
    pub link: Vec<u8>,
}

impl TarEntry {
    /// A regular file (0644).
    pub fn file(name: &str, data: impl Into<Vec<u8>>) -> Self {
        Self {
            name: name.as_bytes().to_vec(),
            kind: b'0',
            mode: 0o644,
            data: data.into(),
            link: Vec::new(),
        }
    }
    /// A directory (0755).
    pub fn dir(name: &str) -> Self {
        Self {
            name: name.as_bytes().to_vec(),
            kind: b'5',
            mode: 0o755,
            data: Vec::new(),
            link: Vec::new(),
        }
    }
    /// Any entry kind with a link target.
    pub fn special(name: &[u8], kind: u8, link: &str) -> Self {
        Self {
            name: name.to_vec(),
            kind,
            mode: 0o644,
            data: Vec::new(),
            link: link.as_bytes().to_vec(),
        }
    }
}

fn octal(field: &mut [u8], value: u64) {
    let width = field.len() - 1;
    let s = format!("{value:0width$o}");
    let bytes = s.as_bytes();
    let start = bytes.len().saturating_sub(width);
    field[..width].copy_from_slice(&bytes[start..]);
    field[width] = 0;
}

fn header(name: &[u8], prefix: &[u8], kind: u8, mode: u32, size: u64, link: &[u8]) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name);
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], 1_767_225_600);
    h[156] = kind;
    let l = link.len().min(100);
    h[157..157 + l].copy_from_slice(&link[..l]);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[345..345 + prefix.len()].copy_from_slice(prefix);
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    let s = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(s.as_bytes());
    h
}

fn push_data(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(data);
    let pad = (512 - data.len() % 512) % 512;
    out.extend(std::iter::repeat_n(0u8, pad));
}

/// Splits a name into ustar `(prefix, name)` when possible.
fn ustar_split(name: &[u8]) -> Option<(&[u8], &[u8])> {
    if name.contains(&0) {
        return None;
    }
    if name.len() <= 100 {
        return Some((&[], name));
    }
    (0..name.len())
        .rev()
        .filter(|&i| name[i] == b'/')
        .find_map(|i| {
            let (p, n) = (&name[..i], &name[i + 1..]);
            (p.len() <= 155 && n.len() <= 100 && !n.is_empty()).then_some((p, n))
        })
}

/// Packs entries into an uncompressed tar stream (ustar, PAX for long or odd names).
pub fn tar(entries: &[TarEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let (prefix, name) = if let Some(split) = ustar_split(&e.name) {
            split
        } else {
            let mut record = b" path=".to_vec();
            record.extend_from_slice(&e.name);
            record.push(b'\n');
            // The length prefix counts itself.
            let mut len = record.len() + 1;
            while format!("{len}").len() + record.len() != len {
                len = format!("{len}").len() + record.len();
            }
            let mut pax = format!("{len}").into_bytes();
            pax.extend_from_slice(&record);
            out.extend_from_slice(&header(
                b"PaxHeader",
                &[],
                b'x',
                0o644,
                pax.len() as u64,
                &[],
            ));
            push_data(&mut out, &pax);
            (&[][..], &b"pax-long-name"[..])
        };
        out.extend_from_slice(&header(
            name,
            prefix,
            e.kind,
            e.mode,
            e.data.len() as u64,
            &e.link,
        ));
        push_data(&mut out, &e.data);
    }
    out.extend(std::iter::repeat_n(0u8, 1024));
    out
}

/// Gzip-compresses bytes.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

/// Kinds of hostile archive entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// `/etc/passwd`-style absolute path.
    AbsolutePath,
    /// A `..` component.
    DotDot,
    /// A NUL byte in a PAX path.
    NulByte,
    /// A symbolic link.
    Symlink,
    /// A hard link.
    Hardlink,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A FIFO.
    Fifo,
    /// The same path twice.
    Duplicate,
    /// Two names that differ only in case.
    CaseCollision,
    /// A name with a Unicode look-alike.
    UnicodeName,
    /// A backslash in a name.
    Backslash,
    /// A second top-level directory.
    SecondTopDir,
    /// A file whose parent path is a file.
    FileAsParent,
    /// A file declaring 1 GiB + 1 byte of zeros, more than the default unpacked limit
    /// (the stream ends after 64 KiB: the limit must refuse it at its header, before a
    /// byte of it is written).
    SizeBomb,
}

impl Hostile {
    /// Every kind.
    pub const ALL: [Self; 15] = [
        Self::AbsolutePath,
        Self::DotDot,
        Self::NulByte,
        Self::Symlink,
        Self::Hardlink,
        Self::CharDevice,
        Self::BlockDevice,
        Self::Fifo,
        Self::Duplicate,
        Self::CaseCollision,
        Self::UnicodeName,
        Self::Backslash,
        Self::SecondTopDir,
        Self::FileAsParent,
        Self::SizeBomb,
    ];

    /// The entry name the rejection must mention.
    pub fn entry_name(self, top: &str) -> String {
        match self {
            Self::AbsolutePath => "/etc/evil".into(),
            Self::DotDot => format!("{top}/context/../../evil"),
            Self::NulByte => format!("{top}/context/a\\u{{0}}b"),
            Self::Symlink => format!("{top}/context/link"),
            Self::Hardlink => format!("{top}/context/hard"),
            Self::CharDevice => format!("{top}/context/chr"),
            Self::BlockDevice => format!("{top}/context/blk"),
            Self::Fifo => format!("{top}/context/fifo"),
            Self::Duplicate => "context/team/roster.md".into(),
            Self::CaseCollision => "context/team/ROSTER.md".into(),
            Self::UnicodeName => format!("{top}/context/r\\u{{43e}}ster.md"),
            Self::Backslash => format!("{top}/context\\\\evil"),
            Self::SecondTopDir => "other-top/file".into(),
            Self::FileAsParent => "context/team/roster.md/x".into(),
            Self::SizeBomb => "context/bomb.bin".into(),
        }
    }

    fn entries(self, top: &str) -> Vec<TarEntry> {
        let at = |s: &str| format!("{top}/{s}");
        match self {
            Self::AbsolutePath => vec![TarEntry::file("/etc/evil", "x")],
            Self::DotDot => vec![TarEntry::file(&at("context/../../evil"), "x")],
            Self::NulByte => vec![TarEntry {
                name: at("context/a\0b").into_bytes(),
                ..TarEntry::file("x", "x")
            }],
            Self::Symlink => vec![TarEntry::special(
                at("context/link").as_bytes(),
                b'2',
                "/etc/passwd",
            )],
            Self::Hardlink => vec![TarEntry::special(
                at("context/hard").as_bytes(),
                b'1',
                "/etc/passwd",
            )],
            Self::CharDevice => vec![TarEntry::special(at("context/chr").as_bytes(), b'3', "")],
            Self::BlockDevice => vec![TarEntry::special(at("context/blk").as_bytes(), b'4', "")],
            Self::Fifo => vec![TarEntry::special(at("context/fifo").as_bytes(), b'6', "")],
            Self::Duplicate => vec![TarEntry::file(&at("context/team/roster.md"), "again")],
            Self::CaseCollision => vec![TarEntry::file(&at("context/team/ROSTER.md"), "x")],
            Self::UnicodeName => vec![TarEntry::file(&at("context/r\u{43e}ster.md"), "x")],
            Self::Backslash => vec![TarEntry::file(&at("context\\evil"), "x")],
            Self::SecondTopDir => vec![TarEntry::file("other-top/file", "x")],
            Self::FileAsParent => vec![TarEntry::file(&at("context/team/roster.md/x"), "x")],
            Self::SizeBomb => Vec::new(),
        }
    }
}

/// A small valid release (`v0.0.1`) with one hostile entry appended; gzip-compressed.
pub fn hostile_archive(kind: Hostile) -> Vec<u8> {
    let release = SyntheticRelease::minimal("v0.0.1");
    let mut entries = release.entries();
    entries.extend(kind.entries("processkit-v0.0.1"));
    let mut out = tar(&entries);
    if kind == Hostile::SizeBomb {
        // Replace the end-of-archive blocks by the bomb's header and a short run of zeros.
        out.truncate(out.len() - 1024);
        out.extend_from_slice(&header(
            b"processkit-v0.0.1/context/bomb.bin",
            &[],
            b'0',
            0o644,
            (1 << 30) + 1,
            &[],
        ));
        out.extend(std::iter::repeat_n(0u8, 64 * 1024));
    }
    gzip(&out)
}

impl SyntheticRelease {
    /// Rewrites `PROVENANCE.toml` after the file map was edited by a test.
    pub fn restamp(&mut self) {
        let mut prov = format!(
            "[source]\ngenerated_for_tag = \"{}\"\n\n[files]\n",
            self.version
        );
        for p in self
            .files
            .keys()
            .filter(|p| !matches!(p.as_str(), "LICENSE" | "CHANGELOG.md" | "PROVENANCE.toml"))
        {
            let _ = writeln!(prov, "\"{p}\" = \"{}\"", self.version);
        }
        self.files
            .insert("PROVENANCE.toml".into(), (prov.into_bytes(), 0o644));
    }

    /// A tiny valid release: one core skill, a tier, `PROVENANCE.toml`.
    pub fn minimal(version: &str) -> Self {
        let mut files = BTreeMap::new();
        let mut add = |p: &str, t: String| {
            files.insert(p.to_owned(), (t.into_bytes(), 0o644));
        };
        add("AGENTS.md", "# Agents\n".into());
        add("context/team/roster.md", "# Roster\n".into());
        add(
            "context/skills/processkit/skill-gate/SKILL.md",
            "---\nname: skill-gate\ndescription: gate\nmetadata:\n  processkit:\n    category: processkit\n    core: true\n---\n# gate\n".into(),
        );
        add(
            ".processkit/packages/minimal.yaml",
            "metadata: {name: minimal}\nspec:\n  includes: {skills: []}\n".into(),
        );
        let mut prov = format!("[source]\ngenerated_for_tag = \"{version}\"\n\n[files]\n");
        for p in files.keys() {
            let _ = writeln!(prov, "\"{p}\" = \"{version}\"");
        }
        files.insert("PROVENANCE.toml".into(), (prov.into_bytes(), 0o644));
        Self {
            version: version.to_owned(),
            files,
        }
    }
}
