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
