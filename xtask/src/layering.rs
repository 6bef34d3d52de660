//! The layering check: which crate may depend on which, and which module of the engine
//! may use which.
//!
//! The rules mirror `ARCHITECTURE.md`. The crate rules are checked against `cargo
//! metadata`, so a new dependency that breaks a layer fails CI with the rule it broke. The
//! engine's rule reads its sources: every `crate::x` path outside comments and unit tests
//! must point to a module on a lower floor of [`ENGINE_FLOORS`].

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

/// Internal crates each product crate may depend on (normal dependencies).
const ALLOWED_INTERNAL: &[(&str, &[&str])] = &[
    ("aibox-config", &[]),
    ("aibox-fs", &["aibox-config"]),
    ("aibox-devcontainer", &["aibox-config"]),
    ("aibox-mcp-registration", &["aibox-config"]),
    ("aibox-provenance", &["aibox-config", "aibox-fs"]),
    ("aibox-policy", &["aibox-config"]),
    ("aibox-skill-review", &["aibox-config"]),
    ("aibox-runtime", &["aibox-config", "aibox-devcontainer"]),
    (
        "aibox-engine",
        &[
            "aibox-config",
            "aibox-fs",
            "aibox-devcontainer",
            "aibox-mcp-registration",
            "aibox-provenance",
            "aibox-policy",
            "aibox-runtime",
            "aibox-skill-review",
        ],
    ),
    (
        "aibox-cli",
        &[
            "aibox-config",
            "aibox-engine",
            "aibox-runtime",
            "aibox-policy",
            "aibox-provenance",
            "aibox-mcp-registration",
        ],
    ),
    ("aibox-test-support", &["aibox-config"]),
];

/// Third-party crates a product crate must never depend on directly.
const FORBIDDEN_EXTERNAL: &[(&str, &[&str])] = &[
    (
        "aibox-config",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    ("aibox-fs", &["ureq", "tar", "flate2", "clap", "reqwest"]),
    (
        "aibox-policy",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    (
        "aibox-skill-review",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    (
        "aibox-devcontainer",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    (
        "aibox-mcp-registration",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    (
        "aibox-runtime",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    ("aibox-provenance", &["clap", "reqwest"]),
    ("aibox-engine", &["clap", "reqwest"]),
];

/// Runs the check.
pub fn check() -> Result<(), String> {
    let meta = crate::cargo_metadata(&["--no-deps"])?;
    let mut problems = violations(&meta);
    problems.extend(engine_violations(ENGINE_FLOORS, &engine_sources()?));
    if problems.is_empty() {
        crate::say("layering: ok (crates, engine modules)");
        Ok(())
    } else {
        for p in &problems {
            crate::say(&format!("layering: {p}"));
        }
        Err(format!("{} layering violation(s)", problems.len()))
    }
}

fn violations(meta: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let packages = meta["packages"].as_array().cloned().unwrap_or_default();
    for pkg in &packages {
        let Some(name) = pkg["name"].as_str() else {
            continue;
        };
        if name == "xtask" {
            continue;
        }
        let Some((_, allowed)) = ALLOWED_INTERNAL.iter().find(|(n, _)| *n == name) else {
            problems.push(format!(
                "{name} is not listed in the layering rules (xtask/src/layering.rs)"
            ));
            continue;
        };
        let forbidden = FORBIDDEN_EXTERNAL
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(&[][..], |(_, f)| *f);
        for dep in pkg["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            let is_dev = dep["kind"].as_str() == Some("dev");
            if dep_name.starts_with("aibox-") {
                if dep_name == "aibox-test-support" {
                    if !is_dev {
                        problems.push(format!(
                            "{name} uses aibox-test-support outside dev-dependencies"
                        ));
                    }
                } else if !is_dev && !allowed.contains(&dep_name) {
                    problems.push(format!("{name} must not depend on {dep_name}"));
                }
            } else if !is_dev && forbidden.contains(&dep_name) {
                problems.push(format!("{name} must not depend on {dep_name}"));
            }
        }
    }
    problems
}

/// The engine's source folder, relative to the workspace.
const ENGINE_SRC: &str = "crates/aibox-engine/src";

/// The engine's modules by floor, top first. A module may use only modules on a floor
/// below its own (not its own floor: peers on one floor do not know each other), so no
/// arrow inside the engine points up and there is no circle. A module's submodules
/// (`doctor/`, `sources/`) count as the module.
const ENGINE_FLOORS: &[&[&str]] = &[
    // Commands built on apply and the lifecycle.
    &["doctor"],
    &["mcp_check"],
    &["lifecycle", "mcp_list", "network_list", "render"],
    // The composition core: apply, plan, the sources, the plan's types, resolve.
    &["apply"],
    &["plan"],
    &["sources"],
    &["builder"],
    &["resolve"],
    // What resolve composes.
    &["pk_doctor", "network", "mcp_uvx"],
    &["mcp_envs", "skills", "consent", "base_image_pin"],
    &["snapshot", "migrate", "config_edit", "addons", "mcp_npm"],
    &["records", "init", "versions"],
    &["writer", "config_check", "skill_review", "mcp_resolver"],
    &["security", "reach"],
    // The bottom: no arrow into the engine.
    &["error", "process", "codex_sandbox", "updates"],
];

/// Every `.rs` file under the engine's `src/`, as (path relative to `src/`, text).
fn engine_sources() -> Result<Vec<(String, String)>, String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, String)>) -> Result<(), String> {
        let mut entries: Vec<_> = fs_err::read_dir(dir)
            .map_err(|e| e.to_string())?
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        entries.sort_by_key(fs_err::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if entry.path().is_dir() {
                walk(&entry.path(), &path, out)?;
            } else if Path::new(&name).extension().is_some_and(|e| e == "rs") {
                out.push((
                    path,
                    fs_err::read_to_string(entry.path()).map_err(|e| e.to_string())?,
                ));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(Path::new(ENGINE_SRC), "", &mut out)?;
    Ok(out)
}

/// The top-level module a source file belongs to (`doctor/checks/sync.rs` → `doctor`);
/// `None` for the crate root.
fn top_module(path: &str) -> Option<&str> {
    let first = path.split('/').next().unwrap_or(path);
    match first.strip_suffix(".rs") {
        Some("lib") => None,
        Some(stem) => Some(stem),
        None => Some(first),
    }
}

/// Each `crate::x` path in the code (comments, strings and unit tests left out): the
/// 1-based line and `x`, once per name of a `use crate::{a, b::c}` group.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let lines = crate::tidy::strip_comments_and_tests(text);
    let code: String = lines
        .iter()
        .map(|(l, _)| l.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let line_at = |pos: usize| code[..pos].matches('\n').count() + 1;
        let from = at + "crate::".len();
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            // The names at the group's top level (split on commas outside inner braces),
            // each with its own line.
            let name = |start: usize, end: usize| {
                let item = &group[start..end];
                let lead = item.len() - item.trim_start().len();
                (line_at(from + 1 + start + lead), ident(item))
            };
            let (mut depth, mut start) = (0usize, 0usize);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push(name(start, i));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(name(start, i));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push((line_at(at), ident(rest)));
        }
    }
    out.retain(|(_, name)| !name.is_empty() && name != "self");
    out
}

/// The engine rule over `files` (path relative to `src/`, text) with `floors` top first.
fn engine_violations(floors: &[&[&str]], files: &[(String, String)]) -> Vec<String> {
    let floor_of = |m: &str| floors.iter().position(|f| f.contains(&m));
    let modules: BTreeSet<&str> = files.iter().filter_map(|(p, _)| top_module(p)).collect();
    let mut problems = Vec::new();
    for module in &modules {
        if floor_of(module).is_none() {
            problems.push(format!(
                "engine module `{module}` is on no floor; add it to ENGINE_FLOORS \
                 (xtask/src/layering.rs)"
            ));
        }
    }
    for listed in floors.iter().flat_map(|f| f.iter()) {
        if !modules.contains(listed) {
            problems.push(format!(
                "ENGINE_FLOORS lists `{listed}`, which is not a module of the engine"
            ));
        }
    }
    for (path, text) in files {
        let Some(module) = top_module(path) else {
            continue;
        };
        let Some(floor) = floor_of(module) else {
            continue;
        };
        for (line, target) in crate_paths(text) {
            if target == module {
                continue;
            }
            let at = format!("{ENGINE_SRC}/{path}:{line}");
            match floor_of(&target) {
                Some(to) if to <= floor => problems.push(format!(
                    "{at}: `{module}` (floor {}) uses `crate::{target}` (floor {}), which is \
                     not below it",
                    floor + 1,
                    to + 1
                )),
                Some(_) => {}
                None if modules.contains(target.as_str()) => {}
                None => problems.push(format!(
                    "{at}: `crate::{target}` is not a module (a `lib.rs` re-export?); \
                     import it from the module that defines it"
                )),
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn meta(deps: &[(&str, &str, Option<&str>)]) -> serde_json::Value {
        let mut packages: Vec<serde_json::Value> = Vec::new();
        for (pkg, dep, kind) in deps {
            packages.push(json!({
                "name": pkg,
                "dependencies": [{ "name": dep, "kind": kind }],
            }));
        }
        json!({ "packages": packages })
    }

    #[test]
    fn allowed_arrows_pass() {
        let m = meta(&[
            ("aibox-engine", "aibox-config", None),
            ("aibox-config", "insta", Some("dev")),
            ("aibox-provenance", "ureq", None),
            ("aibox-cli", "clap", None),
        ]);
        assert!(super::violations(&m).is_empty());
    }

    #[test]
    fn forbidden_arrows_are_named() {
        let m = meta(&[
            ("aibox-config", "ureq", None),
            ("aibox-policy", "clap", None),
            ("aibox-config", "aibox-engine", None),
            ("aibox-engine", "aibox-test-support", None),
            ("aibox-newcrate", "serde", None),
        ]);
        let problems = super::violations(&m);
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(
            problems
                .iter()
                .any(|p| p == "aibox-config must not depend on ureq")
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("aibox-newcrate is not listed"))
        );
    }

    /// A sample engine: `apply` over `plan` over `builder` over `error`/`writer` (peers).
    const FLOORS: &[&[&str]] = &[&["apply"], &["plan"], &["builder"], &["error", "writer"]];

    fn tree(files: &[(&str, &str)]) -> Vec<(String, String)> {
        files
            .iter()
            .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
            .collect()
    }

    #[test]
    fn engine_arrows_down_pass() {
        let files = tree(&[
            (
                "lib.rs",
                "mod apply;\npub use apply::Options;\npub use error::Error;\n",
            ),
            (
                "apply.rs",
                "//! Runs [`crate::plan`], never `crate::lib`.\n\
                 use crate::{\n    plan::{plan, Plan},\n    error::Error,\n};\n\
                 use crate::apply::Options;\n\
                 macro_rules! m { () => { $crate::Error }; }\n\
                 pub(crate) fn f() -> crate::writer::W { todo() }\n",
            ),
            (
                "plan/mod.rs",
                "use crate::builder::Builder;\n\
                 /// Written by [`crate::apply`] later.\n\
                 fn g() { let s = \"crate::apply::x\"; }\n",
            ),
            (
                "plan/inner.rs",
                "use crate::plan::Plan;\nuse super::Plan;\n",
            ),
            (
                "builder.rs",
                "use crate::error::Error;\nuse crate::writer::W;\n",
            ),
            ("error.rs", "pub enum Error {}\n"),
            (
                "writer.rs",
                "pub struct W;\n#[cfg(test)]\nmod tests {\n    use crate::apply::f;\n}\n",
            ),
        ]);
        let problems = super::engine_violations(FLOORS, &files);
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn engine_arrows_up_or_sideways_are_named() {
        let files = tree(&[
            ("lib.rs", "pub use plan::Plan;\n"),
            ("apply.rs", "use crate::Plan;\n"),
            (
                "plan.rs",
                "use crate::builder::B;\n\nuse crate::{\n    error::E,\n    apply::run,\n};\n",
            ),
            ("builder.rs", "fn f() { crate::plan::plan(); }\n"),
            ("error.rs", "use crate::writer::W;\n"),
            ("stray/mod.rs", "use crate::error::E;\n"),
        ]);
        let mut problems = super::engine_violations(FLOORS, &files);
        problems.sort();
        let expected = [
            "ENGINE_FLOORS lists `writer`, which is not a module of the engine",
            "crates/aibox-engine/src/apply.rs:1: `crate::Plan` is not a module (a `lib.rs` \
             re-export?); import it from the module that defines it",
            "crates/aibox-engine/src/builder.rs:1: `builder` (floor 3) uses `crate::plan` \
             (floor 2), which is not below it",
            "crates/aibox-engine/src/error.rs:1: `error` (floor 4) uses `crate::writer` (floor \
             4), which is not below it",
            "crates/aibox-engine/src/plan.rs:5: `plan` (floor 2) uses `crate::apply` (floor 1), \
             which is not below it",
            "engine module `stray` is on no floor; add it to ENGINE_FLOORS \
             (xtask/src/layering.rs)",
        ];
        assert_eq!(problems, expected, "{problems:#?}");
    }
}
