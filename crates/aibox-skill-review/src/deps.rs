//! Declared Python dependencies: PEP 723 inline script metadata, `pyproject.toml` and
//! `requirements*.txt`, with the supply-chain findings of review point 5.

use sha2::{Digest, Sha256};

use crate::files::Entry;
use crate::report::Findings;

/// How a requirement constrains its version or source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Constraint {
    /// `==1.2.3` (or `===`).
    Exact,
    /// Any other version specifier (`>=1`, `~=1.2`, `==1.*`).
    Range,
    /// No version constraint at all.
    Unconstrained,
    /// A URL, VCS or path source instead of the registry.
    Direct(String),
}

/// One declared requirement.
#[derive(Debug, Clone)]
pub(crate) struct Requirement {
    pub file: String,
    pub line: Option<u32>,
    /// The requirement as written.
    pub raw: String,
    /// Normalised distribution name (lower case, `-`/`.` → `_`); empty for bare URLs.
    pub name: String,
    pub constraint: Constraint,
    /// For `requirements*.txt`: whether `--hash` is given.
    pub hashed: Option<bool>,
}

/// A PEP 723 block found in a Python file.
#[derive(Debug, Clone)]
pub(crate) struct ScriptHeader {
    pub file: String,
    pub line: u32,
    /// SHA-256 of the block as the manifest's `per_server_header` computes it.
    pub sha256: String,
}

/// Everything found about dependencies.
#[derive(Debug, Default)]
pub(crate) struct DepScan {
    pub requirements: Vec<Requirement>,
    pub headers: Vec<ScriptHeader>,
    /// Findings that are not about a single requirement (indexes, parse errors).
    pub findings: Findings,
}

const UV_SOURCE_KEYS: [&str; 6] = [
    "index-url",
    "extra-index-url",
    "index",
    "find-links",
    "sources",
    "no-index",
];

/// Scans every dependency declaration in the skill.
pub(crate) fn scan(entries: &[Entry]) -> DepScan {
    let mut out = DepScan::default();
    for e in entries {
        let Some(text) = e.text() else { continue };
        let name = e.name();
        if e.extension() == "py" {
            scan_script_header(&e.rel, text, &mut out);
        } else if name == "pyproject.toml" {
            scan_pyproject(&e.rel, text, &mut out);
        } else if name.starts_with("requirements") && e.extension() == "txt" {
            scan_requirements(&e.rel, text, &mut out);
        }
    }
    out
}

/// The lines of a PEP 723 `script` block: (index of the opening line, block lines).
pub(crate) fn script_block(text: &str) -> Option<(usize, Vec<&str>)> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| l.trim_end() == "# /// script")?;
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.trim_end() == "# ///")?
        + start
        + 1;
    Some((start, lines[start..=end].to_vec()))
}

fn scan_script_header(file: &str, text: &str, out: &mut DepScan) {
    let Some((start, block)) = script_block(text) else {
        if text.lines().any(|l| l.trim_end() == "# /// script") {
            out.findings.fail(
                file,
                None,
                "PEP 723 `# /// script` block is never closed by `# ///`",
            );
        }
        return;
    };
    let mut joined = block.join("\n");
    joined.push('\n');
    out.headers.push(ScriptHeader {
        file: file.to_owned(),
        line: line_no(start),
        sha256: hex::encode(Sha256::digest(joined.as_bytes())),
    });
    let mut body = String::new();
    for (i, l) in block[1..block.len() - 1].iter().enumerate() {
        let content = l.strip_prefix("# ").or_else(|| l.strip_prefix('#'));
        let Some(content) = content else {
            out.findings.fail(
                file,
                Some(line_no(start + 1 + i)),
                "line inside the PEP 723 block does not start with `#`",
            );
            return;
        };
        body.push_str(content);
        body.push('\n');
    }
    let doc: toml::Table = match toml::from_str(&body) {
        Ok(d) => d,
        Err(err) => {
            out.findings.fail(
                file,
                Some(line_no(start)),
                format!(
                    "PEP 723 block is not valid TOML: {}",
                    one_line(&err.to_string())
                ),
            );
            return;
        }
    };
    let offset = start;
    let locate = |needle: &str| find_line(&block, needle).map(|i| line_no(offset + i));
    if let Some(deps) = doc.get("dependencies") {
        push_array(file, deps, "dependencies", &locate, out);
    }
    if let Some(uv) = doc
        .get("tool")
        .and_then(|t| t.get("uv"))
        .and_then(toml::Value::as_table)
    {
        check_uv(file, uv, &locate, &mut out.findings);
    }
}

fn scan_pyproject(file: &str, text: &str, out: &mut DepScan) {
    let doc: toml::Table = match toml::from_str(text) {
        Ok(d) => d,
        Err(err) => {
            out.findings.fail(
                file,
                None,
                format!("not valid TOML: {}", one_line(&err.to_string())),
            );
            return;
        }
    };
    let lines: Vec<&str> = text.lines().collect();
    let locate = |needle: &str| find_line(&lines, needle).map(line_no);
    if let Some(project) = doc.get("project") {
        if let Some(deps) = project.get("dependencies") {
            push_array(file, deps, "project.dependencies", &locate, out);
        }
        if let Some(opt) = project
            .get("optional-dependencies")
            .and_then(toml::Value::as_table)
        {
            for (group, deps) in opt {
                push_array(
                    file,
                    deps,
                    &format!("project.optional-dependencies.{group}"),
                    &locate,
                    out,
                );
            }
        }
    }
    if let Some(groups) = doc.get("dependency-groups").and_then(toml::Value::as_table) {
        for (group, deps) in groups {
            push_array(
                file,
                deps,
                &format!("dependency-groups.{group}"),
                &locate,
                out,
            );
        }
    }
    if let Some(uv) = doc
        .get("tool")
        .and_then(|t| t.get("uv"))
        .and_then(toml::Value::as_table)
    {
        check_uv(file, uv, &locate, &mut out.findings);
    }
}

fn check_uv(
    file: &str,
    uv: &toml::Table,
    locate: &dyn Fn(&str) -> Option<u32>,
    findings: &mut Findings,
) {
    let pip = uv.get("pip").and_then(toml::Value::as_table);
    for (table, prefix) in [(Some(uv), "tool.uv"), (pip, "tool.uv.pip")] {
        let Some(table) = table else { continue };
        for key in UV_SOURCE_KEYS {
            if table.contains_key(key) {
                findings.fail(
                    file,
                    locate(key),
                    format!("`{prefix}.{key}` redirects where packages come from; only the default registry is allowed"),
                );
            }
        }
    }
}

fn push_array(
    file: &str,
    deps: &toml::Value,
    what: &str,
    locate: &dyn Fn(&str) -> Option<u32>,
    out: &mut DepScan,
) {
    let Some(items) = deps.as_array() else {
        out.findings.fail(
            file,
            locate(what.rsplit('.').next().unwrap_or(what)),
            format!("`{what}` is not an array of strings"),
        );
        return;
    };
    for item in items {
        let Some(raw) = item.as_str() else {
            out.findings.fail(
                file,
                None,
                format!("`{what}` holds a value that is not a string"),
            );
            continue;
        };
        let (name, constraint) = parse_requirement(raw);
        out.requirements.push(Requirement {
            file: file.to_owned(),
            line: locate(raw),
            raw: raw.to_owned(),
            name,
            constraint,
            hashed: None,
        });
    }
}

fn scan_requirements(file: &str, text: &str, out: &mut DepScan) {
    // Join continuation lines, remembering where each logical line started.
    let mut logical: Vec<(u32, String)> = Vec::new();
    let mut pending: Option<(u32, String)> = None;
    for (i, l) in text.lines().enumerate() {
        let (start, mut acc) = pending.take().unwrap_or((line_no(i), String::new()));
        let l = strip_comment(l);
        if let Some(head) = l.strip_suffix('\\') {
            acc.push_str(head);
            acc.push(' ');
            pending = Some((start, acc));
        } else {
            acc.push_str(l);
            logical.push((start, acc));
        }
    }
    if let Some(p) = pending {
        logical.push(p);
    }
    for (line, l) in logical {
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        let first = l.split_whitespace().next().unwrap_or("");
        let opt = first.split('=').next().unwrap_or(first);
        match opt {
            "-i" | "--index-url" | "--extra-index-url" | "-f" | "--find-links"
            | "--trusted-host" => {
                out.findings.fail(
                    file,
                    Some(line),
                    format!("`{opt}` points pip at another package index or location"),
                );
                continue;
            }
            "-e" | "--editable" => {
                out.requirements.push(Requirement {
                    file: file.to_owned(),
                    line: Some(line),
                    raw: l.to_owned(),
                    name: String::new(),
                    constraint: Constraint::Direct(
                        l.split_whitespace().nth(1).unwrap_or("").to_owned(),
                    ),
                    hashed: Some(false),
                });
                continue;
            }
            "-r" | "--requirement" | "-c" | "--constraint" | "--no-index" | "--require-hashes"
            | "--only-binary" | "--no-binary" | "--prefer-binary" | "--pre" => continue,
            _ if first.starts_with('-') && !first.starts_with("--hash") => {
                out.findings
                    .warn(file, Some(line), format!("unrecognised pip option `{opt}`"));
                continue;
            }
            _ => {}
        }
        let hashed = l.contains("--hash=") || l.contains("--hash ");
        let req = l.split(" --").next().unwrap_or(l).trim();
        let (name, constraint) = parse_requirement(req);
        out.requirements.push(Requirement {
            file: file.to_owned(),
            line: Some(line),
            raw: req.to_owned(),
            name,
            constraint,
            hashed: Some(hashed),
        });
    }
}

fn strip_comment(l: &str) -> &str {
    if l.trim_start().starts_with('#') {
        return "";
    }
    match l.find(" #") {
        Some(i) => &l[..i],
        None => l,
    }
}

/// Parses a PEP 508 requirement into its normalised name and constraint.
pub(crate) fn parse_requirement(raw: &str) -> (String, Constraint) {
    let spec = raw.split(';').next().unwrap_or(raw).trim();
    let lower = spec.to_ascii_lowercase();
    let looks_direct = [
        "git+", "hg+", "svn+", "bzr+", "http://", "https://", "file:", "./", "../", "/", "~",
    ]
    .iter()
    .any(|p| lower.starts_with(p));
    if looks_direct {
        return (String::new(), Constraint::Direct(spec.to_owned()));
    }
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(spec.len());
    let name = normalise(&spec[..end]);
    let mut rest = spec[end..].trim_start();
    if rest.starts_with('[') {
        rest = rest.find(']').map_or("", |i| &rest[i + 1..]).trim_start();
    }
    if let Some(url) = rest.strip_prefix('@') {
        return (name, Constraint::Direct(url.trim().to_owned()));
    }
    let rest = rest.trim_start_matches('(').trim_end_matches(')').trim();
    let constraint = if rest.is_empty() {
        Constraint::Unconstrained
    } else if (rest.starts_with("==") || rest.starts_with("==="))
        && !rest.contains(',')
        && !rest.contains('*')
    {
        Constraint::Exact
    } else {
        Constraint::Range
    };
    (name, constraint)
}

/// Normalised distribution or module name: lower case, `-` and `.` become `_`.
pub(crate) fn normalise(name: &str) -> String {
    name.to_ascii_lowercase().replace(['-', '.'], "_")
}

fn find_line(lines: &[&str], needle: &str) -> Option<usize> {
    lines.iter().position(|l| l.contains(needle))
}

fn line_no(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_requirements() {
        assert_eq!(
            parse_requirement("mcp[cli]==1.2.0"),
            ("mcp".into(), Constraint::Exact)
        );
        assert_eq!(
            parse_requirement("mcp[cli]>=1.0"),
            ("mcp".into(), Constraint::Range)
        );
        assert_eq!(
            parse_requirement("PyYAML"),
            ("pyyaml".into(), Constraint::Unconstrained)
        );
        assert_eq!(
            parse_requirement("a.b-c ==1.* ; python_version>'3'").1,
            Constraint::Range
        );
        assert!(matches!(
            parse_requirement("pkg @ https://x.invalid/p.whl").1,
            Constraint::Direct(_)
        ));
        assert!(matches!(
            parse_requirement("git+https://x.invalid/r.git").1,
            Constraint::Direct(_)
        ));
    }

    #[test]
    fn header_hash_covers_the_block_lines() {
        let text = "#!/usr/bin/env python\n# /// script\n# dependencies = []\n# ///\nprint(1)\n";
        let (start, block) = script_block(text).unwrap();
        assert_eq!(start, 1);
        assert_eq!(block, vec!["# /// script", "# dependencies = []", "# ///"]);
    }
}
