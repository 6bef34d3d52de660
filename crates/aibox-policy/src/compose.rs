//! What Compose itself resolves before it runs a file, done the same way here so that the
//! gate judges the configuration the engine will run, not the text as written.
//!
//! - YAML: merge keys (`<<: *anchor`, also a list of anchors, nested) are applied;
//!   aliases are already expanded by the parser. Tags and directives are not modelled:
//!   `yaml_tags` finds them in the text (the parser drops `!!` tags silently), and the
//!   gate refuses every one.
//! - Interpolation as Compose does it: `$$`, `$VAR`, `${VAR}`, `${VAR:-d}`, `${VAR-d}`,
//!   `${VAR:?e}`, `${VAR?e}`, `${VAR:+r}`, `${VAR+r}` (nested in defaults), anything else
//!   after `$` is an invalid template, as in Compose.
//! - `.env` files in Compose's syntax (`KEY=VALUE`, `export`, quotes, comments).
//!
//! Pure: the caller hands in every text. Files a Compose file refers to (`extends.file`,
//! `include`) are looked up through [`ComposeSources`], which the engine implements.

use std::collections::BTreeMap;

use aibox_config::hostpath::HostPath;
use serde_norway::Value as Yaml;
use serde_norway::value::Mapping;

/// The project as the gate may look at it: the text of the files Compose files refer to
/// (`include`, `extends.file`) by project-relative path, where host paths lead through
/// symbolic links, and which folders a folder holds. The engine implements it over the
/// project on disk (and records the answers, so planning stays pure).
pub trait ComposeSources {
    /// The text of the project-relative `path`, `None` when it does not exist or cannot be
    /// read as text.
    fn read(&self, path: &str) -> Option<String>;

    /// Where a host path leads through symbolic links: `path` is project-relative, absolute
    /// or `~/…` (see [`aibox_config::hostpath::resolve_host_path`]).
    fn host_path(&self, path: &str) -> HostPath;

    /// The names of the folders directly inside the project-relative folder `dir`, sorted
    /// (symbolic links to folders included).
    fn subdirs(&self, dir: &str) -> Vec<String>;
}

/// No files beyond the ones handed in.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSources;

impl ComposeSources for NoSources {
    fn read(&self, _path: &str) -> Option<String> {
        None
    }

    fn host_path(&self, _path: &str) -> HostPath {
        HostPath::Plain
    }

    fn subdirs(&self, _dir: &str) -> Vec<String> {
        Vec::new()
    }
}

/// Files held in memory: no symbolic links; folders are the paths' folders.
impl ComposeSources for BTreeMap<String, String> {
    fn read(&self, path: &str) -> Option<String> {
        self.get(path).cloned()
    }

    fn host_path(&self, _path: &str) -> HostPath {
        HostPath::Plain
    }

    fn subdirs(&self, dir: &str) -> Vec<String> {
        let prefix = format!("{}/", dir.trim_end_matches('/'));
        let mut out: Vec<String> = self
            .keys()
            .filter_map(|k| {
                k.strip_prefix(&prefix)?
                    .split_once('/')
                    .map(|(d, _)| d.to_owned())
            })
            .collect();
        out.dedup();
        out
    }
}

/// Every YAML tag (`!x`, `!!binary`, `!<tag:…>`) and directive (`%TAG`, `%YAML`) in a
/// text, with its 1-based line: Compose's YAML library acts on them (it decodes
/// `!!binary`, `!reset` and `!override` change merges), while the gate judges untagged
/// YAML only. The parser the gate uses drops `!!` tags silently, so they are found in the
/// text: a `!` where a node starts (line start, after `- `, `? `, `: `, `[`, `{`, `,`, an
/// anchor), outside quotes, comments and block scalars. A plain scalar continued on a
/// line that starts with `!` counts too (refused rather than missed).
pub(crate) fn yaml_tags(text: &str) -> Vec<(usize, String)> {
    let mut scan = TagScan::default();
    for (n, line) in text.lines().enumerate() {
        scan.line(n + 1, line);
    }
    scan.out
}

/// The state of [`yaml_tags`] between lines.
#[derive(Default)]
struct TagScan {
    /// An open quoted scalar: `Some('"')` or `Some('\'')`.
    quote: Option<char>,
    /// Indentation of the line that opened a block scalar.
    block: Option<usize>,
    /// Depth of flow collections (`[`, `{`).
    flow: usize,
    out: Vec<(usize, String)>,
}

impl TagScan {
    fn line(&mut self, n: usize, line: &str) {
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        if let Some(parent) = self.block {
            if line.trim().is_empty() || indent > parent {
                return;
            }
            self.block = None;
        }
        if self.quote.is_none() && self.flow == 0 && line.starts_with('%') {
            let directive = line.split_whitespace().next().unwrap_or("%");
            self.out.push((n, directive.to_owned()));
            return;
        }
        let chars: Vec<char> = line.chars().collect();
        let ends = |c: Option<char>| c.is_none_or(char::is_whitespace);
        let mut i = 0;
        // Whether the next non-blank character starts a node.
        let mut start = self.quote.is_none();
        while i < chars.len() {
            let (c, next) = (chars[i], chars.get(i + 1).copied());
            i += 1;
            if let Some(q) = self.quote {
                if (q == '"' && c == '\\') || (q == '\'' && c == q && next == Some(q)) {
                    i += 1;
                } else if c == q {
                    self.quote = None;
                }
                continue;
            }
            if c.is_whitespace() {
                continue;
            }
            if c == '#' && (i == 1 || chars[i - 2].is_whitespace()) {
                return;
            }
            if !start {
                // Inside a plain scalar or after a closed quote: what starts the next node.
                match c {
                    ':' if ends(next)
                        || (self.flow > 0 && matches!(next, Some(',' | ']' | '}'))) =>
                    {
                        start = true;
                    }
                    ',' if self.flow > 0 => start = true,
                    '[' | '{' if self.flow > 0 => {
                        self.flow += 1;
                        start = true;
                    }
                    ']' | '}' if self.flow > 0 => self.flow -= 1,
                    _ => {}
                }
                continue;
            }
            match c {
                '!' => {
                    let flow = self.flow;
                    let tag: String = chars[i - 1..]
                        .iter()
                        .take_while(|c| {
                            !c.is_whitespace() && (flow == 0 || !matches!(c, ',' | ']' | '}'))
                        })
                        .collect();
                    self.out.push((n, tag));
                    start = false;
                }
                '"' | '\'' => {
                    self.quote = Some(c);
                    start = false;
                }
                '-' if i - 1 == indent && line[indent..].starts_with("---") => i += 2,
                '-' | '?' if ends(next) => {}
                '[' | '{' => self.flow += 1,
                ']' | '}' => {
                    self.flow = self.flow.saturating_sub(1);
                    start = false;
                }
                ',' if self.flow > 0 => {}
                '&' | '*' => {
                    while i < chars.len() && !chars[i].is_whitespace() {
                        i += 1;
                    }
                    // An anchor is a property: the node follows; an alias is the node.
                    start = c == '&';
                }
                '|' | '>' if self.flow == 0 => {
                    self.block = Some(indent);
                    return;
                }
                _ => start = false,
            }
        }
    }
}

/// Applies merge keys, recursively (merge sources first, so a merged anchor that itself
/// merges another is complete). Errors are what Compose refuses too. Tags the parser kept
/// (`!reset`, `!custom`) are dropped and pushed to `tags`, so the caller refuses them
/// even if [`yaml_tags`] missed one.
pub(crate) fn normalise_yaml(
    value: Yaml,
    depth: usize,
    tags: &mut Vec<String>,
) -> Result<Yaml, String> {
    if depth > 64 {
        return Err("the YAML nests more than 64 levels".to_owned());
    }
    Ok(match value {
        Yaml::Tagged(t) => {
            tags.push(t.tag.to_string());
            normalise_yaml(t.value, depth + 1, tags)?
        }
        Yaml::Sequence(items) => Yaml::Sequence(
            items
                .into_iter()
                .map(|v| normalise_yaml(v, depth + 1, tags))
                .collect::<Result<_, _>>()?,
        ),
        Yaml::Mapping(map) => {
            let mut out = Mapping::new();
            let mut merges = Vec::new();
            for (k, v) in map {
                if k.as_str() == Some("<<") {
                    merges.push(v);
                } else {
                    out.insert(k, normalise_yaml(v, depth + 1, tags)?);
                }
            }
            for merge in merges {
                let sources = match normalise_yaml(merge, depth + 1, tags)? {
                    Yaml::Sequence(items) => items,
                    other => vec![other],
                };
                for source in sources {
                    let Yaml::Mapping(source) = source else {
                        return Err("a merge key (`<<`) must name mappings".to_owned());
                    };
                    for (k, v) in source {
                        if !out.contains_key(&k) {
                            out.insert(k, v);
                        }
                    }
                }
            }
            Yaml::Mapping(out)
        }
        other => other,
    })
}

/// Parses a Compose `.env` file: `KEY=VALUE` lines, optional `export `, `#` comments,
/// single quotes literal, double quotes with `\n`-style escapes.
pub fn parse_env_file(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.trim_start_matches('\u{feff}').lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        let value = if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\''))
        {
            inner.to_owned()
        } else if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            inner
                .replace("\\n", "\n")
                .replace("\\\"", "\"")
                .replace("\\\\", "\\")
        } else {
            // Unquoted: an inline comment starts at ` #`.
            value.split(" #").next().unwrap_or("").trim().to_owned()
        };
        out.insert(key.trim().to_owned(), value);
    }
    out
}

/// The result of interpolating one string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interpolated {
    /// The value Compose computes with the given environment.
    pub value: String,
    /// Every variable the string refers to (also in defaults that were not used).
    pub variables: Vec<String>,
}

/// Interpolates `s` as Compose does. `Err` for an invalid template or a required variable
/// (`:?`, `?`) that is not set: Compose refuses to run the file then.
pub(crate) fn interpolate(s: &str, env: &BTreeMap<String, String>) -> Result<Interpolated, String> {
    let mut vars = Vec::new();
    let value = interpolate_into(s, env, &mut vars, 0)?;
    vars.sort();
    vars.dedup();
    Ok(Interpolated {
        value,
        variables: vars,
    })
}

fn is_name_start(c: char) -> bool {
    c == '_' || c.is_ascii_alphabetic()
}

fn is_name_char(c: char) -> bool {
    c == '_' || c.is_ascii_alphanumeric()
}

fn interpolate_into(
    s: &str,
    env: &BTreeMap<String, String>,
    vars: &mut Vec<String>,
    depth: usize,
) -> Result<String, String> {
    if depth > 16 {
        return Err("interpolation nests too deeply".to_owned());
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let mut chars = after.chars();
        match chars.next() {
            Some('$') => {
                out.push('$');
                rest = &after[1..];
            }
            Some('{') => {
                let inner = &after[1..];
                let end = matching_brace(inner)
                    .ok_or_else(|| format!("invalid interpolation in `{s}`: no closing `}}`"))?;
                let body = &inner[..end];
                out.push_str(&substitute(body, env, vars, depth)?);
                rest = &inner[end + 1..];
            }
            Some(c) if is_name_start(c) => {
                let len = after
                    .find(|c: char| !is_name_char(c))
                    .unwrap_or(after.len());
                let name = &after[..len];
                vars.push(name.to_owned());
                out.push_str(env.get(name).map_or("", String::as_str));
                rest = &after[len..];
            }
            _ => return Err(format!("invalid interpolation format in `{s}`")),
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Index of the `}` closing a `${` whose body starts `inner`, counting nested `${`.
fn matching_brace(inner: &str) -> Option<usize> {
    let bytes = inner.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                depth += 1;
                i += 1;
            }
            b'}' if depth == 0 => return Some(i),
            b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    None
}

fn substitute(
    body: &str,
    env: &BTreeMap<String, String>,
    vars: &mut Vec<String>,
    depth: usize,
) -> Result<String, String> {
    let len = body.find(|c: char| !is_name_char(c)).unwrap_or(body.len());
    let name = &body[..len];
    if name.is_empty() || !name.starts_with(is_name_start) {
        return Err(format!("invalid interpolation `${{{body}}}`"));
    }
    vars.push(name.to_owned());
    let op_and_arg = &body[len..];
    let value = env.get(name);
    let (op, arg) = [":-", ":?", ":+", "-", "?", "+"]
        .iter()
        .find_map(|op| op_and_arg.strip_prefix(op).map(|arg| (*op, arg)))
        .unwrap_or(("", op_and_arg));
    if op.is_empty() && !arg.is_empty() {
        return Err(format!("invalid interpolation `${{{body}}}`"));
    }
    // The argument is interpolated whether or not it is used, so its variables count.
    let arg_value = interpolate_into(arg, env, vars, depth + 1)?;
    let set = value.is_some();
    let non_empty = value.is_some_and(|v| !v.is_empty());
    let current = value.cloned().unwrap_or_default();
    Ok(match op {
        "" => current,
        ":-" => {
            if non_empty {
                current
            } else {
                arg_value
            }
        }
        "-" => {
            if set {
                current
            } else {
                arg_value
            }
        }
        ":?" | "?" => {
            let ok = if op == ":?" { non_empty } else { set };
            if !ok {
                return Err(format!(
                    "required variable `{name}` is not set: {arg_value}"
                ));
            }
            current
        }
        ":+" => {
            if non_empty {
                arg_value
            } else {
                String::new()
            }
        }
        "+" => {
            if set {
                arg_value
            } else {
                String::new()
            }
        }
        _ => return Err(format!("invalid interpolation `${{{body}}}`")),
    })
}

/// Interpolates every string value (not keys) of `value`. Strings that fail keep their
/// text and are reported through `errors`.
pub(crate) fn interpolate_tree(
    value: &Yaml,
    env: &BTreeMap<String, String>,
    errors: &mut Vec<String>,
) -> Yaml {
    match value {
        Yaml::String(s) => match interpolate(s, env) {
            Ok(i) => Yaml::String(i.value),
            Err(e) => {
                errors.push(e);
                Yaml::String(s.clone())
            }
        },
        Yaml::Sequence(items) => Yaml::Sequence(
            items
                .iter()
                .map(|v| interpolate_tree(v, env, errors))
                .collect(),
        ),
        Yaml::Mapping(map) => Yaml::Mapping(
            map.iter()
                .map(|(k, v)| (k.clone(), interpolate_tree(v, env, errors)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Every variable referenced anywhere in the string values of `value`, and whether some
/// string is not a valid template.
pub(crate) fn variables_in(value: &Yaml, out: &mut Vec<String>) -> bool {
    let empty = BTreeMap::new();
    match value {
        Yaml::String(s) => match interpolate(s, &empty) {
            Ok(i) => {
                out.extend(i.variables);
                false
            }
            Err(_) => true,
        },
        // Every item is visited (no short cut): all variables are collected.
        Yaml::Sequence(items) => items
            .iter()
            .map(|v| variables_in(v, out))
            .collect::<Vec<_>>()
            .contains(&true),
        Yaml::Mapping(map) => map
            .values()
            .map(|v| variables_in(v, out))
            .collect::<Vec<_>>()
            .contains(&true),
        _ => false,
    }
}

/// Joins a project-relative directory and a path as Compose resolves relative paths,
/// lexically. `None` when the result leaves the project.
pub(crate) fn join_project(dir: &str, rel: &str) -> Option<String> {
    if rel.starts_with(['/', '~', '\\']) {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in dir.split('/').chain(rel.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// The directory part of a project-relative path (`""` for the project root).
pub(crate) fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn interpolation_follows_compose() {
        let e = env(&[("SET", "v"), ("EMPTY", "")]);
        let i = |s: &str| interpolate(s, &e).map(|i| i.value);
        assert_eq!(i("${PRIV:-true}").unwrap(), "true");
        assert_eq!(i("${EMPTY:-d}").unwrap(), "d");
        assert_eq!(i("${EMPTY-d}").unwrap(), "");
        assert_eq!(i("${UNSET-d}").unwrap(), "d");
        assert_eq!(i("${SET:+alt}").unwrap(), "alt");
        assert_eq!(i("${UNSET:+alt}").unwrap(), "");
        assert_eq!(i("$SET/x").unwrap(), "v/x");
        assert_eq!(i("$$SET").unwrap(), "$SET");
        assert_eq!(i("${UNSET:-${SET}}").unwrap(), "v");
        assert_eq!(i("${UNSET}").unwrap(), "");
        assert!(i("${UNSET:?need it}").is_err());
        assert!(i("${SET:?need it}").is_ok());
        assert!(i("$ {x}").is_err());
        assert!(i("${open").is_err());
        let vars = interpolate("${A:-${B}}$C", &e).unwrap().variables;
        assert_eq!(vars, vec!["A", "B", "C"]);
    }

    #[test]
    fn merge_keys_apply_nested() {
        let doc: Yaml = serde_norway::from_str(
            "a: &a {privileged: true}\nb: &b {<<: *a, pid: host}\nc: {<<: [*b], pid: private}\n",
        )
        .unwrap();
        let doc = normalise_yaml(doc, 0, &mut Vec::new()).unwrap();
        let c = doc.get("c").unwrap();
        assert_eq!(c.get("privileged"), Some(&Yaml::Bool(true)));
        assert_eq!(c.get("pid").and_then(Yaml::as_str), Some("private"));
    }

    #[test]
    fn tags_are_found_where_nodes_start_and_nowhere_else() {
        let tags = |t: &str| {
            yaml_tags(t)
                .into_iter()
                .map(|(l, t)| format!("{l}:{t}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(tags("a: !!binary dHJ1ZQ==\n"), ["1:!!binary"]);
        assert_eq!(tags("s:\n  dev:\n    cap_add: !reset []\n"), ["3:!reset"]);
        assert_eq!(
            tags("- !override x\n- [a, !t b]\n- {k: !u v}\n"),
            ["1:!override", "2:!t", "3:!u"]
        );
        assert_eq!(tags("? !k key\n: v\n&a !x y: z\n"), ["1:!k", "3:!x"]);
        assert_eq!(
            tags("%TAG ! tag:example.com,2000:\n---\na: 1\n"),
            ["1:%TAG"]
        );
        assert_eq!(
            tags("--- !<tag:yaml.org,2002:map>\na: 1\n"),
            ["1:!<tag:yaml.org,2002:map>"]
        );
        assert_eq!(tags("\"q\": !t v\n"), ["1:!t"]);
        // Not tags: inside plain scalars, quotes, comments and block scalars.
        let clean = "command: echo hi! there\n\
                     b: \"!not\"\n\
                     c: '!not either'\n\
                     d: x # a comment !x\n\
                     e: |\n  !literal line\n  more\n\
                     f: >-\n    !folded\n\
                     g: \"multi\n  !line\"\n\
                     h: a!b\n\
                     i: [\"!q\", x!y]\n";
        assert_eq!(tags(clean), Vec::<String>::new());
    }

    #[test]
    fn env_files_parse() {
        let e = parse_env_file("# c\nexport A=1\nB='x y'\nC=\"q\\nr\"\nD=v # note\n");
        assert_eq!(e["A"], "1");
        assert_eq!(e["B"], "x y");
        assert_eq!(e["C"], "q\nr");
        assert_eq!(e["D"], "v");
    }

    #[test]
    fn project_paths_join() {
        assert_eq!(join_project(".devcontainer", "..").as_deref(), Some(""));
        assert_eq!(join_project(".devcontainer", "../..").as_deref(), None);
        assert_eq!(
            join_project(".devcontainer", "./x.yml").as_deref(),
            Some(".devcontainer/x.yml")
        );
        assert_eq!(join_project(".devcontainer", "/etc/x.yml"), None);
    }
}
