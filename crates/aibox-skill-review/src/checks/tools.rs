//! Point 4: the tool list is minimal.
//!
//! Tools registered in code (`@mcp.tool(...)`, `@server.tool`, `Tool(name=...)`,
//! `.add_tool(...)`) against `metadata.processkit.provides.mcp_tools` in `SKILL.md`; the
//! four annotation hints per tool; `mcp/mcp-config.json` (one server, `uv run` of a script
//! inside the skill, no fetching arguments, no literal secrets); and the allow rules of the
//! command adapters (`commands/*.md` `allowed-tools`).

use std::collections::{BTreeMap, BTreeSet};

use camino::Utf8Path;
use serde_json::Value;

use super::{Skill, is_secret_name};
use crate::files::Entry;
use crate::python::{Kind, PyFile};
use crate::report::Findings;
use crate::skill::{frontmatter, line_of_word};

const HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// A tool the server registers.
#[derive(Debug, Clone)]
pub(crate) struct Registered {
    pub name: String,
    pub file: String,
    pub line: u32,
    /// Annotation hints set to a literal `True`/`False`.
    pub hints: BTreeMap<String, bool>,
    /// The Python function that implements it, when known.
    pub function: Option<String>,
}

/// Every tool registered by the skill's Python code.
pub(crate) fn registered(skill: &Skill<'_>) -> Vec<Registered> {
    let mut out = Vec::new();
    for (entry, file) in skill.parsed() {
        let rel = entry.rel.as_str();
        for d in &file.decorated {
            let last = d.decorator.rsplit('.').next().unwrap_or("");
            if last != "tool" || !d.decorator.contains('.') {
                continue;
            }
            let name = d
                .args
                .as_ref()
                .and_then(|a| file.keyword(a.clone(), "name"))
                .and_then(|v| file.literal(&v).map(str::to_owned))
                .unwrap_or_else(|| d.function.clone());
            let hints = d
                .args
                .as_ref()
                .map(|a| hints(file, a.clone()))
                .unwrap_or_default();
            out.push(Registered {
                name,
                file: rel.to_owned(),
                line: d.line,
                hints,
                function: Some(d.function.clone()),
            });
        }
        for call in &file.calls {
            let last = call.callee.rsplit('.').next().unwrap_or("");
            let function = (last == "add_tool")
                .then(|| file.positional(call.args.clone()).into_iter().next())
                .flatten()
                .filter(|a| a.len() == 1 && file.toks[a.start].kind == Kind::Name)
                .map(|a| file.toks[a.start].text.clone());
            let name = if last == "Tool" {
                file.keyword(call.args.clone(), "name")
                    .and_then(|v| file.literal(&v).map(str::to_owned))
            } else if last == "add_tool" && call.callee.contains('.') {
                file.keyword(call.args.clone(), "name")
                    .and_then(|v| file.literal(&v).map(str::to_owned))
                    .or_else(|| {
                        let first = file.positional(call.args.clone()).into_iter().next()?;
                        (first.len() == 1 && file.toks[first.start].kind == Kind::Name)
                            .then(|| file.toks[first.start].text.clone())
                    })
            } else {
                None
            };
            if let Some(name) = name {
                out.push(Registered {
                    name,
                    file: rel.to_owned(),
                    line: call.line,
                    hints: hints(file, call.args.clone()),
                    function,
                });
            }
        }
        out.extend(descriptor_tools(rel, file));
    }
    out
}

/// Tools described as JSON-RPC descriptors in a dict literal (`{"name": "find_skill",
/// "inputSchema": {...}, "annotations": ...}`): servers written against the plain MCP
/// protocol (no SDK) answer `tools/list` with such a list. `annotations` may name a
/// module-level dict (`"annotations": ANNOTATIONS`), whose literal hints count.
fn descriptor_tools(rel: &str, file: &PyFile) -> Vec<Registered> {
    let toks = &file.toks;
    let mut out = Vec::new();
    for (open, t) in toks.iter().enumerate() {
        if !t.is_op("{") {
            continue;
        }
        let close = file.closing(open);
        // Keys directly in this dict: `"key": value` at depth 1.
        let mut depth = 0usize;
        let mut name = None;
        let mut schema = false;
        let mut annotations = None;
        for i in open..close.min(toks.len()) {
            let k = &toks[i];
            if k.kind == Kind::Op {
                match k.text.as_str() {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                continue;
            }
            if depth != 1 || !k.is_plain_str() || !toks.get(i + 1).is_some_and(|c| c.is_op(":")) {
                continue;
            }
            let value = toks.get(i + 2);
            match k.text.as_str() {
                "name" => {
                    name = value
                        .filter(|v| v.is_plain_str())
                        .map(|v| (v.text.clone(), v.line));
                }
                "inputSchema" => schema = true,
                "annotations" => annotations = value.map(|v| (i + 2, v)),
                _ => {}
            }
        }
        let (Some((name, line)), true) = (name, schema) else {
            continue;
        };
        let hints = match annotations {
            Some((at, v)) if v.is_op("{") => hints(file, at..file.closing(at)),
            Some((_, v)) if v.kind == Kind::Name => toks
                .windows(3)
                .position(|w| w[0].is_name(&v.text) && w[1].is_op("=") && w[2].is_op("{"))
                .map(|p| hints(file, p + 2..file.closing(p + 2)))
                .unwrap_or_default(),
            _ => BTreeMap::new(),
        };
        out.push(Registered {
            name,
            file: rel.to_owned(),
            line,
            hints,
            function: None,
        });
    }
    out
}

/// Hints written as `readOnlyHint=True` or `"readOnlyHint": True` inside `args`.
fn hints(file: &PyFile, args: std::ops::Range<usize>) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    let toks = &file.toks[args];
    for w in toks.windows(3) {
        let key = &w[0];
        if !(key.kind == Kind::Name || key.is_plain_str()) || !HINTS.contains(&key.text.as_str()) {
            continue;
        }
        if !(w[1].is_op("=") || w[1].is_op(":")) {
            continue;
        }
        match w[2].text.as_str() {
            "True" => out.insert(key.text.clone(), true),
            "False" => out.insert(key.text.clone(), false),
            _ => None,
        };
    }
    out
}

pub(crate) fn check(skill: &Skill<'_>) -> Findings {
    let mut f = Findings::default();
    for (line, message) in &skill.meta.problems {
        f.fail("SKILL.md", *line, message.clone());
    }
    if let Some(name) = &skill.meta.name
        && *name != skill.dir_name
    {
        let line = skill
            .entry("SKILL.md")
            .and_then(Entry::text)
            .and_then(|t| line_of_word(t, "name"));
        f.warn(
            "SKILL.md",
            line,
            format!(
                "`name: {name}` differs from the directory name `{}`",
                skill.dir_name
            ),
        );
    }
    let tools = registered(skill);
    let has_server = skill.entry("mcp/server.py").is_some();
    match (&skill.meta.mcp_tools, skill.meta.present) {
        (_, false) if has_server || !tools.is_empty() => {
            f.fail(
                "SKILL.md",
                None,
                "SKILL.md is missing, so the server's tools are not declared anywhere",
            );
        }
        (None, true) if !tools.is_empty() => {
            f.fail("SKILL.md", None, "the server registers tools but `metadata.processkit.provides.mcp_tools` is missing");
        }
        _ => {}
    }
    let declared: BTreeSet<&str> = skill
        .meta
        .mcp_tools
        .iter()
        .flatten()
        .map(|(n, _)| n.as_str())
        .collect();
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for t in &tools {
        if skill.meta.mcp_tools.is_some() && !declared.contains(t.name.as_str()) {
            f.fail(
                &t.file,
                Some(t.line),
                format!("registers tool `{}` that SKILL.md does not declare", t.name),
            );
        }
        let missing: Vec<&str> = HINTS
            .iter()
            .copied()
            .filter(|h| !t.hints.contains_key(*h))
            .collect();
        if !missing.is_empty() {
            f.warn(
                &t.file,
                Some(t.line),
                format!(
                    "tool `{}` lacks annotation hint(s): {}",
                    t.name,
                    missing.join(", ")
                ),
            );
        }
        if t.hints.get("destructiveHint") == Some(&true) {
            f.warn(
                &t.file,
                Some(t.line),
                format!("tool `{}` is destructive (`destructiveHint: true`)", t.name),
            );
        }
    }
    if let Some(list) = &skill.meta.mcp_tools {
        for (name, line) in list {
            if !names.contains(name.as_str()) {
                f.warn(
                    "SKILL.md",
                    *line,
                    format!("declares tool `{name}` that the server does not register"),
                );
            }
        }
    }
    let server = check_config(skill, &mut f);
    check_commands(skill, server.as_deref(), &mut f);
    f
}

/// Checks `mcp/mcp-config.json`; returns the server name it declares.
fn check_config(skill: &Skill<'_>, f: &mut Findings) -> Option<String> {
    const FILE: &str = "mcp/mcp-config.json";
    let entry = skill.entry(FILE)?;
    let Some(text) = entry.text() else {
        // A link (or another non-file) already fails point 1 for what it is.
        if matches!(entry.kind, crate::files::EntryKind::File { .. }) {
            f.fail(FILE, None, "not UTF-8 text");
        }
        return None;
    };
    let doc: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            f.fail(
                FILE,
                u32::try_from(e.line()).ok(),
                format!("not valid JSON: {e}"),
            );
            return None;
        }
    };
    let Some(servers) = doc.get("mcpServers").and_then(Value::as_object) else {
        f.fail(FILE, None, "has no `mcpServers` object");
        return None;
    };
    if servers.len() != 1 {
        f.fail(
            FILE,
            None,
            format!(
                "declares {} servers; a skill declares exactly one",
                servers.len()
            ),
        );
    }
    let (name, server) = servers.iter().next()?;
    let locate = |needle: &str| line_of_word(text, needle);
    // The gateway skill's directory already carries the prefix: its server is
    // `processkit-gateway` (format spec §10), not `processkit-processkit-gateway`.
    let expected = if skill.dir_name.starts_with("processkit-") {
        skill.dir_name.clone()
    } else {
        format!("processkit-{}", skill.dir_name)
    };
    if *name != expected && *name != format!("processkit-{}", skill.dir_name) {
        f.warn(
            FILE,
            locate(name),
            format!("server `{name}` is not named `{expected}`"),
        );
    }
    if server.get("command").and_then(Value::as_str) != Some("uv") {
        f.fail(
            FILE,
            locate("command"),
            "command is not `uv`; a skill server is started with `uv run`",
        );
    }
    let args: Vec<&str> = server
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    check_args(skill, &args, &locate, f);
    if let Some(env) = server.get("env").and_then(Value::as_object) {
        for (key, value) in env {
            if redirects_packages(key) {
                f.fail(
                    FILE,
                    locate(key),
                    format!(
                        "env `{key}` changes where the server's packages or modules come \
                         from (or whether they are verified); the reviewed pins and code \
                         would not be what runs"
                    ),
                );
            }
            let v = value.as_str().unwrap_or("");
            let reference = v.is_empty() || v.starts_with('$') || v.starts_with("{env:");
            if !reference && (is_secret_name(key) || looks_like_token(v)) {
                f.fail(FILE, locate(key), format!("env `{key}` holds a literal value where a secret belongs; use a variable reference such as `${{{key}}}`"));
            }
        }
    }
    Some(name.clone())
}

/// Options of `uv run` that change neither what runs nor where packages come from; any
/// other one before the script fails (it could run other code: `python -c`, `bash`,
/// `--with`, an index). `--python` takes a version only (a path could be any program).
const SAFE_RUN_OPTIONS: [&str; 9] = [
    "--script",
    "-q",
    "--quiet",
    "--no-project",
    "--frozen",
    "--locked",
    "--offline",
    "--isolated",
    "--no-sync",
];

/// Whether `a` is `--python X.Y[.Z]` written as one argument, or the version of one.
fn python_version(a: &str) -> bool {
    !a.is_empty() && a.chars().all(|c| c.is_ascii_digit() || c == '.')
}

fn check_args(
    skill: &Skill<'_>,
    args: &[&str],
    locate: &dyn Fn(&str) -> Option<u32>,
    f: &mut Findings,
) {
    const FILE: &str = "mcp/mcp-config.json";
    if args.first() != Some(&"run") {
        f.fail(
            FILE,
            locate("args"),
            "args do not start with `run` (`uv run <script>`)",
        );
    }
    // `run`, safe options, the script, then the server's own arguments: what the harness
    // starts is exactly the reviewed script (QA29 r3: `run python -c CODE script.py`).
    let mut rest = args.iter().skip(1).peekable();
    let mut script = None;
    while let Some(a) = rest.next() {
        if SAFE_RUN_OPTIONS.contains(a) {
            continue;
        }
        if let Some(version) = a.strip_prefix("--python=") {
            if python_version(version) {
                continue;
            }
        } else if (*a == "--python" || *a == "-p") && rest.peek().is_some_and(|v| python_version(v))
        {
            rest.next();
            continue;
        }
        let lower = a.to_ascii_lowercase();
        let fetching = [
            "--with",
            "--index",
            "--default-index",
            "--index-url",
            "--extra-index-url",
            "--find-links",
            "--from",
            "-i",
            "-f",
        ]
        .iter()
        .any(|o| lower.starts_with(o));
        if is_py(a) {
            script = Some(*a);
        } else if fetching {
            f.fail(
                FILE,
                locate(a),
                format!("argument `{a}` fetches code or packages outside the reviewed script"),
            );
        } else {
            f.fail(
                FILE,
                locate(a),
                format!(
                    "argument `{a}` before the script may run something other than the \
                     reviewed script; write `uv run [--script] <script> [arguments]`"
                ),
            );
        }
        break;
    }
    for a in args.iter().skip(1) {
        let lower = a.to_ascii_lowercase();
        if lower.contains("://") || lower.starts_with("git+") {
            f.fail(
                FILE,
                locate(a),
                format!("argument `{a}` fetches code or packages outside the reviewed script"),
            );
        }
    }
    let scripts = args.iter().skip(1).filter(|a| is_py(a)).count();
    if scripts != 1 {
        f.fail(
            FILE,
            locate("args"),
            format!("`uv run` should start exactly one script of the skill, found {scripts}"),
        );
    }
    if let Some(script) = script {
        check_script(skill, script, locate, f);
    }
}

/// The script `uv run` starts: one of the files the review read, and not a test.
fn check_script(
    skill: &Skill<'_>,
    script: &str,
    locate: &dyn Fn(&str) -> Option<u32>,
    f: &mut Findings,
) {
    const FILE: &str = "mcp/mcp-config.json";

    // One of the files the review read: not outside the folder, not under a `.git`
    // folder the review skips (QA29 r10).
    let reviewed = script
        .split('/')
        .all(|c| c != "..")
        .then(|| {
            skill.entries.iter().find(|e| {
                let suffix = format!("{}/{}", skill.dir_name, e.rel);
                script.ends_with(&format!("/{suffix}")) || script == suffix || script == e.rel
            })
        })
        .flatten();
    match reviewed {
        None => f.fail(
            FILE,
            locate(script),
            format!("script `{script}` is not a file inside this skill"),
        ),
        // A test is judged as one (its findings only warn): what the server runs is not.
        Some(e) if super::is_test_file(&e.rel) => f.fail(
            FILE,
            locate(script),
            format!(
                "script `{script}` is in a tests folder (or named as a test), where findings \
                 only warn because tests do not run with the skill; the server runs it: \
                 move it under mcp/"
            ),
        ),
        Some(_) => {}
    }
}

fn is_py(a: &str) -> bool {
    Utf8Path::new(a)
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("py"))
}

/// Environment variables that change where Python packages come from, or whether they
/// are checked, or which code `import` finds: in a server's `env` they would make the
/// harness fetch the pinned dependencies elsewhere, unverified (QA29 r8).
fn redirects_packages(key: &str) -> bool {
    let key = key.to_ascii_uppercase();
    key.starts_with("UV_")
        || key.starts_with("PIP_")
        || matches!(
            key.as_str(),
            "PYTHONPATH" | "PYTHONHOME" | "PYTHONUSERBASE" | "PYTHONSTARTUP" | "PYTHONINSPECT"
        )
}

fn looks_like_token(v: &str) -> bool {
    [
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "glpat-",
        "sk-",
        "xoxb-",
        "xoxp-",
        "AKIA",
        "AIza",
    ]
    .iter()
    .any(|p| v.starts_with(p))
}

/// Command adapters may pre-authorise only this skill's own server.
fn check_commands(skill: &Skill<'_>, server: Option<&str>, f: &mut Findings) {
    let own = server.map_or_else(|| format!("processkit-{}", skill.dir_name), str::to_owned);
    let prefix = format!("mcp__{own}__");
    for e in skill
        .entries
        .iter()
        .filter(|e| e.rel.starts_with("commands/") && e.extension() == "md")
    {
        let Some(text) = e.text() else { continue };
        let doc = match frontmatter(text) {
            Ok(Some(doc)) => doc,
            Ok(None) => continue,
            Err((line, message)) => {
                f.fail(&e.rel, line, message);
                continue;
            }
        };
        let rules: Vec<String> = match doc.get("allowed-tools") {
            Some(serde_norway::Value::Sequence(items)) => items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect(),
            Some(serde_norway::Value::String(s)) => s
                .split(',')
                .map(|r| r.trim().to_owned())
                .filter(|r| !r.is_empty())
                .collect(),
            _ => Vec::new(),
        };
        for rule in rules {
            let line = line_of_word(text, "allowed-tools");
            if rule == "*" || rule == "mcp__*" || rule.starts_with("mcp__*") {
                f.fail(
                    &e.rel,
                    line,
                    format!("allow rule `{rule}` covers every server"),
                );
            } else if rule.starts_with("mcp__") && !rule.starts_with(&prefix) {
                f.fail(
                    &e.rel,
                    line,
                    format!("allow rule `{rule}` is for another server than `{own}`"),
                );
            } else if !rule.starts_with("mcp__") {
                f.warn(
                    &e.rel,
                    line,
                    format!("pre-authorises harness tool `{rule}`"),
                );
            }
        }
    }
}
