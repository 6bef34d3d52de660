//! `SKILL.md` and command-adapter frontmatter, parsed leniently (unknown keys ignored).

use serde_norway::Value;

/// What `SKILL.md` declares.
#[derive(Debug, Default)]
pub(crate) struct SkillMeta {
    /// Whether `SKILL.md` exists.
    pub present: bool,
    /// `name`.
    pub name: Option<String>,
    /// `metadata.processkit.provides.mcp_tools`, with the line of each entry when found.
    pub mcp_tools: Option<Vec<(String, Option<u32>)>>,
    /// Problems reading the frontmatter: (line, message).
    pub problems: Vec<(Option<u32>, String)>,
    /// The hosts it declares it contacts (see [`HOSTS_KEY`]).
    pub hosts: DeclaredHosts,
}

/// Where a skill declares the hosts its code contacts: a list of host names (or
/// `*.example.com`) under this key of the `SKILL.md` front matter.
pub const HOSTS_KEY: &str = "metadata.processkit.hosts";

/// The hosts a skill's `SKILL.md` declares: the valid names, and what is wrong with the
/// rest (an entry that is no host name is left out, never widened).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeclaredHosts {
    /// Host names (or `*.name`), in declaration order, without duplicates.
    pub hosts: Vec<String>,
    /// Problems with the declaration: (line of `SKILL.md`, message).
    pub problems: Vec<(Option<u32>, String)>,
}

/// Reads [`HOSTS_KEY`] from the parsed front matter; `text` is the whole `SKILL.md`,
/// for line numbers. Absent or empty means no hosts.
fn read_hosts(doc: &Value, text: &str) -> DeclaredHosts {
    let mut out = DeclaredHosts::default();
    let value = doc
        .get("metadata")
        .and_then(|m| m.get("processkit"))
        .and_then(|p| p.get("hosts"));
    let line = || line_of_word(text, "hosts");
    let items = match value {
        None | Some(Value::Null) => return out,
        Some(Value::Sequence(items)) => items,
        Some(_) => {
            out.problems.push((
                line(),
                format!(
                    "`{HOSTS_KEY}` is not a list of host names (write `hosts: [api.example.com]`)"
                ),
            ));
            return out;
        }
    };
    for item in items {
        let Some(host) = item.as_str() else {
            out.problems.push((
                line(),
                format!("`{HOSTS_KEY}` holds an entry that is not a string"),
            ));
            continue;
        };
        if let Some(problem) = aibox_config::validate::egress_host_problem(host) {
            out.problems.push((
                line_of_word(text, host).or_else(line),
                format!(
                    "declared host `{}` {problem}; write a host name such as `api.example.com` or `*.example.com`",
                    aibox_config::diag::bounded(host, 80)
                ),
            ));
        } else if !out.hosts.iter().any(|h| h == host) {
            out.hosts.push(host.to_owned());
        }
    }
    out
}

/// The hosts the `SKILL.md` text `text` declares (nothing, with a problem, when its front
/// matter cannot be read).
pub fn declared_hosts(text: &str) -> DeclaredHosts {
    match frontmatter(text) {
        Ok(Some(doc)) => read_hosts(&doc, text),
        Ok(None) => DeclaredHosts::default(),
        Err(problem) => DeclaredHosts {
            hosts: Vec::new(),
            problems: vec![problem],
        },
    }
}

/// Splits `---`-delimited YAML frontmatter off a Markdown file and parses it.
/// Returns `Ok(None)` when the file has no frontmatter.
pub(crate) fn frontmatter(text: &str) -> Result<Option<Value>, (Option<u32>, String)> {
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Ok(None);
    }
    let mut yaml = String::new();
    for l in lines {
        if l.trim_end() == "---" {
            return serde_norway::from_str::<Value>(&yaml)
                .map(Some)
                .map_err(|e| {
                    let line = e.location().and_then(|l| u32::try_from(l.line() + 1).ok());
                    (line, format!("frontmatter is not valid YAML: {e}"))
                });
        }
        yaml.push_str(l);
        yaml.push('\n');
    }
    Err((
        Some(1),
        "frontmatter opened with `---` is never closed".to_owned(),
    ))
}

/// Reads `SKILL.md` (`None` when the skill has none).
pub(crate) fn parse_skill_md(text: Option<&str>) -> SkillMeta {
    let Some(text) = text else {
        return SkillMeta::default();
    };
    let mut meta = SkillMeta {
        present: true,
        ..SkillMeta::default()
    };
    let doc = match frontmatter(text) {
        Ok(Some(doc)) => doc,
        Ok(None) => {
            meta.problems
                .push((Some(1), "SKILL.md has no YAML frontmatter".to_owned()));
            return meta;
        }
        Err(problem) => {
            meta.problems.push(problem);
            return meta;
        }
    };
    meta.name = doc.get("name").and_then(Value::as_str).map(str::to_owned);
    meta.hosts = read_hosts(&doc, text);
    let tools = doc
        .get("metadata")
        .and_then(|m| m.get("processkit"))
        .and_then(|p| p.get("provides"))
        .and_then(|p| p.get("mcp_tools"));
    match tools {
        None | Some(Value::Null) => {}
        Some(Value::Sequence(items)) => {
            let mut list = Vec::new();
            for item in items {
                if let Some(name) = item.as_str() {
                    list.push((name.to_owned(), line_of_word(text, name)));
                } else {
                    meta.problems.push((
                        line_of_word(text, "mcp_tools"),
                        "`metadata.processkit.provides.mcp_tools` holds an entry that is not a tool name".to_owned(),
                    ));
                }
            }
            meta.mcp_tools = Some(list);
        }
        Some(_) => meta.problems.push((
            line_of_word(text, "mcp_tools"),
            "`metadata.processkit.provides.mcp_tools` is not a list of tool names".to_owned(),
        )),
    }
    meta
}

/// Line of the first whole-word occurrence of `word` (1-based).
pub(crate) fn line_of_word(text: &str, word: &str) -> Option<u32> {
    text.lines()
        .position(|l| {
            l.match_indices(word).any(|(i, _)| {
                let before = l[..i].chars().next_back();
                let after = l[i + word.len()..].chars().next();
                let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !ident(before) && !ident(after)
            })
        })
        .and_then(|i| u32::try_from(i + 1).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_declared_tools() {
        let text = "---\nname: demo\nmetadata:\n  processkit:\n    provides:\n      mcp_tools: [get_a, get_ab]\n---\nbody\n";
        let meta = parse_skill_md(Some(text));
        assert_eq!(meta.name.as_deref(), Some("demo"));
        assert_eq!(
            meta.mcp_tools.unwrap(),
            vec![
                ("get_a".to_owned(), Some(6)),
                ("get_ab".to_owned(), Some(6))
            ]
        );
    }

    #[test]
    fn reads_declared_hosts_and_says_what_is_wrong_with_the_rest() {
        let text = "---\nname: probe\nmetadata:\n  processkit:\n    hosts:\n      - api.example.com\n      - \"*.cdn.example.org\"\n      - 10.0.0.1\n      - localhost\n      - 7\n      - api.example.com\n---\n";
        let declared = declared_hosts(text);
        assert_eq!(declared.hosts, ["api.example.com", "*.cdn.example.org"]);
        let messages: Vec<&str> = declared.problems.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(declared.problems.len(), 3, "{messages:?}");
        assert!(
            messages[0].contains("`10.0.0.1` is an IP address"),
            "{messages:?}"
        );
        assert_eq!(declared.problems[0].0, Some(8));
        assert!(
            messages[1].contains("`localhost` has a single label"),
            "{messages:?}"
        );
        assert!(messages[2].contains("not a string"), "{messages:?}");
        assert_eq!(parse_skill_md(Some(text)).hosts, declared);
    }

    #[test]
    fn absent_or_malformed_host_declarations() {
        assert_eq!(
            declared_hosts("---\nname: x\n---\n"),
            DeclaredHosts::default()
        );
        assert_eq!(
            declared_hosts("no front matter\n"),
            DeclaredHosts::default()
        );
        let null = "---\nmetadata:\n  processkit:\n    hosts:\n---\n";
        assert_eq!(declared_hosts(null), DeclaredHosts::default());
        let scalar = "---\nmetadata:\n  processkit:\n    hosts: api.example.com\n---\n";
        let declared = declared_hosts(scalar);
        assert!(declared.hosts.is_empty());
        assert_eq!(declared.problems[0].0, Some(4));
        assert!(
            declared.problems[0].1.contains("is not a list"),
            "{declared:?}"
        );
        let broken = declared_hosts("---\nmetadata: [\n---\n");
        assert!(
            broken.problems[0].1.contains("not valid YAML"),
            "{broken:?}"
        );
    }

    #[test]
    fn reports_broken_frontmatter() {
        let meta = parse_skill_md(Some("---\nname: [unclosed\n---\n"));
        assert_eq!(meta.problems.len(), 1);
        assert!(meta.problems[0].1.contains("not valid YAML"));
        let meta = parse_skill_md(Some("---\nname: x\n"));
        assert!(meta.problems[0].1.contains("never closed"));
        let meta = parse_skill_md(Some("# no frontmatter\n"));
        assert!(meta.problems[0].1.contains("no YAML frontmatter"));
    }
}
