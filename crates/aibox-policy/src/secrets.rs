//! The secret scanner (security model SEC-DATA-7).
//!
//! Runs over every committed or generated file before it is written, and in `doctor`.
//! Three rules: a value that looks like a known credential format anywhere (comments
//! included); a suspicious key (`*TOKEN*`, `*SECRET*`, `API_KEY`, …) holding a literal
//! value, or a reference with a literal fallback (`${DB_PASSWORD:-hunter2}`); and in the
//! value fields aibox writes (environment, headers, arguments, commands, URLs) the
//! credential shapes of `secret_rules::judge_value`: random-looking tokens, secret-named
//! flags and query parameters. Variable references (`${VAR}`, `$VAR`, `{env:VAR}`,
//! `${env:VAR}`, `${input:id}`, `${localEnv:VAR}`, …) are always allowed; their literal
//! fallbacks are judged as literals. Findings name the file, line and key, never the value.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::finding::{Finding, Severity};
use crate::text::{entropy, has_reference, is_identifier, line_of, line_of_all, parse_jsonc};

/// The syntax of a scanned text, which decides how keys are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextKind {
    /// TOML (`aibox.toml`, `aibox.lock`, Codex config).
    Toml,
    /// JSON or JSONC.
    Json,
    /// YAML (Compose files).
    Yaml,
    /// `KEY=VALUE` lines.
    Env,
    /// A Dockerfile: `ENV` and `ARG` values (they end up in image layers and history).
    Dockerfile,
    /// Anything else: only credential formats are recognised.
    Plain,
}

impl TextKind {
    /// Guesses the kind from a file name.
    pub fn from_path(path: &str) -> Self {
        let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
        let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or_default();
        match ext {
            "toml" | "lock" => Self::Toml,
            "json" | "jsonc" => Self::Json,
            "yml" | "yaml" => Self::Yaml,
            "env" => Self::Env,
            _ if name.starts_with(".env") => Self::Env,
            _ if name.starts_with("dockerfile") || ext == "dockerfile" => Self::Dockerfile,
            _ => Self::Plain,
        }
    }
}

// What a secret is comes from `aibox_config::secret_rules` (shared with MCP registration
// and the skill review); this module decides what the gate does with a hit.
pub(crate) use aibox_config::secret_rules::credential_spans as token_spans;
use aibox_config::secret_rules::{self, CredentialScan, find_credential as find_token};

/// Scans `text` for secrets. `file` labels the findings (a project-relative path).
pub fn scan_secrets(file: &str, text: &str, kind: TextKind) -> Vec<Finding> {
    let mut out = Vec::new();
    let leaves = match kind {
        TextKind::Toml => toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|t| serde_json::to_value(t).ok())
            .map(|v| leaves_of(&v)),
        TextKind::Json => parse_jsonc(text).ok().map(|v| leaves_of(&v)),
        TextKind::Yaml => serde_norway::from_str::<serde_norway::Value>(text)
            .ok()
            .and_then(|y| serde_json::to_value(y).ok())
            .map(|v| leaves_of(&v)),
        TextKind::Env => Some(env_leaves(text)),
        TextKind::Dockerfile => Some(dockerfile_leaves(text)),
        TextKind::Plain => None,
    };
    for leaf in leaves.unwrap_or_default() {
        check_leaf(file, text, &leaf, kind, &mut out);
    }
    // Credential formats anywhere, comments included; one finding per line. The rules
    // are chosen once for the whole text (a line holds only needles the text holds): a
    // file costs a few passes, not every rule's search on every line.
    let scan = CredentialScan::for_text(text);
    let flagged: std::collections::BTreeSet<usize> = out.iter().filter_map(|f| f.line).collect();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if flagged.contains(&n) {
            continue;
        }
        if let Some(hit) = scan.find(line) {
            out.push(
                Finding::new(
                    "aibox::policy::secret_value",
                    Severity::Error,
                    file,
                    format!(
                        "line {n} contains what looks like a credential ({})",
                        hit.kind
                    ),
                    remedy(file, None),
                )
                .at(Some(n)),
            );
        }
    }
    // Never the same finding twice at one place.
    let mut places = std::collections::BTreeSet::new();
    out.retain(|f| places.insert((f.line, f.code.clone(), f.message.clone())));
    out.sort_by_key(|f| f.line);
    out
}

struct Leaf {
    path: Vec<String>,
    value: String,
    /// An argument list joined with spaces, judged only for `--flag value` pairs.
    joined: bool,
}

impl Leaf {
    fn key(&self) -> &str {
        self.path
            .iter()
            .rev()
            .find(|p| !p.starts_with('['))
            .map_or("", String::as_str)
    }
    fn display(&self) -> String {
        let mut s = String::new();
        for p in &self.path {
            if !s.is_empty() && !p.starts_with('[') {
                s.push('.');
            }
            s.push_str(p);
        }
        s
    }
}

fn leaves_of(v: &Value) -> Vec<Leaf> {
    let mut out = Vec::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

fn walk(v: &Value, path: &mut Vec<String>, out: &mut Vec<Leaf>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                path.push(k.clone());
                walk(child, path, out);
                path.pop();
            }
        }
        Value::Array(items)
            if path
                .last()
                .is_some_and(|k| k.eq_ignore_ascii_case("runArgs")) =>
        {
            // Engine arguments: the environment they set (`-e K=V`, `-eK=V`, `--env=K=V`,
            // read as the engine reads them), judged like Compose's `environment`.
            // Credential formats elsewhere in them are found by the line scan.
            let args: Vec<String> = items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            for opt in crate::run_args::parse(&args) {
                if opt.name == "env"
                    && let Some((k, val)) = opt.value().split_once('=')
                    && is_identifier(k)
                {
                    let mut p = path.clone();
                    p.extend(["env".to_owned(), k.to_owned()]);
                    out.push(Leaf {
                        path: p,
                        value: val.to_owned(),
                        joined: false,
                    });
                }
            }
        }
        Value::Array(items) => {
            // `["--api-key", "VALUE"]`: a flag and its value are two items.
            let words: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            if words.len() == items.len() && words.len() > 1 && value_field(path) {
                out.push(Leaf {
                    path: path.clone(),
                    value: words.join(" "),
                    joined: true,
                });
            }
            for (i, child) in items.iter().enumerate() {
                // `KEY=VALUE` list items (Compose `environment`, `-e` run arguments).
                if let Some((k, val)) = child.as_str().and_then(|s| s.split_once('='))
                    && is_identifier(k)
                {
                    let mut p = path.clone();
                    p.push(k.to_owned());
                    out.push(Leaf {
                        path: p,
                        value: val.to_owned(),
                        joined: false,
                    });
                    continue;
                }
                path.push(format!("[{i}]"));
                walk(child, path, out);
                path.pop();
            }
        }
        Value::String(s) => out.push(Leaf {
            path: path.clone(),
            value: s.clone(),
            joined: false,
        }),
        _ => {}
    }
}

fn env_leaves(text: &str) -> Vec<Leaf> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                return None;
            }
            let line = line.strip_prefix("export ").unwrap_or(line);
            let (k, v) = line.split_once('=')?;
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            Some(Leaf {
                path: vec!["env".to_owned(), k.trim().to_owned()],
                value: v.to_owned(),
                joined: false,
            })
        })
        .collect()
}

/// `ENV KEY=VALUE ...`, `ENV KEY VALUE` and `ARG KEY=VALUE` instructions.
fn dockerfile_leaves(text: &str) -> Vec<Leaf> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some((instr, rest)) = line.split_once(char::is_whitespace) else {
            continue;
        };
        if !instr.eq_ignore_ascii_case("ENV") && !instr.eq_ignore_ascii_case("ARG") {
            continue;
        }
        let rest = rest.trim();
        let unquote = |v: &str| v.trim_matches(['"', '\'']).to_owned();
        if let Some((first, _)) = rest.split_once(char::is_whitespace)
            && !first.contains('=')
        {
            // Legacy form: `ENV KEY value with spaces`.
            let value = rest[first.len()..].trim();
            out.push(Leaf {
                path: vec!["env".to_owned(), first.to_owned()],
                value: unquote(value),
                joined: false,
            });
            continue;
        }
        for pair in rest.split_whitespace() {
            if let Some((k, v)) = pair.split_once('=') {
                out.push(Leaf {
                    path: vec!["env".to_owned(), k.to_owned()],
                    value: unquote(v),
                    joined: false,
                });
            }
        }
    }
    out
}

fn check_leaf(file: &str, text: &str, leaf: &Leaf, kind: TextKind, out: &mut Vec<Finding>) {
    let key = leaf.key();
    let shown = leaf.display();
    let value = leaf.value.trim();
    let value_leaf =
        matches!(kind, TextKind::Env | TextKind::Dockerfile) || value_field(&leaf.path);
    let first_line = || -> String {
        value
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(24)
            .collect()
    };
    if leaf.joined {
        let words: Vec<&str> = value.split(' ').collect();
        if let Some(i) = secret_rules::secret_flag_value(&words) {
            let flag = words[i - usize::from(!words[i].contains('='))];
            let flag = flag.split('=').next().unwrap_or(flag);
            out.push(
                Finding::new(
                    "aibox::policy::secret_value",
                    Severity::Error,
                    file,
                    format!("`{shown}` passes a literal value to `{flag}`, probably a credential"),
                    remedy(file, Some(flag.trim_start_matches('-'))),
                )
                .at(line_of_all(text, &[flag, words[i]]).or_else(|| line_of(text, flag))),
            );
        }
        return;
    }
    // A leaf is decoded text (escapes resolved), not a piece of `text`: every rule runs.
    if let Some(hit) = find_token(value) {
        let needle: String = value[hit.start..hit.end].chars().take(24).collect();
        out.push(
            Finding::new(
                "aibox::policy::secret_value",
                Severity::Error,
                file,
                format!(
                    "`{shown}` holds what looks like a credential ({})",
                    hit.kind
                ),
                remedy(file, Some(key)),
            )
            .at(leaf_line(text, out, key, &needle).or_else(|| line_of(text, key))),
        );
        return;
    }
    if var_name_field(leaf) || host_keyed(leaf) {
        return;
    }
    let locate = || leaf_line(text, out, key, &first_line()).or_else(|| line_of(text, key));
    let fallback = !secret_rules::fallback_literals(value).is_empty();
    if suspicious_key(key) && (is_literal(value) || fallback) {
        let what = if fallback && !is_literal(value) {
            "a reference with a literal fallback (the fallback is written as it is)"
        } else {
            "a literal value"
        };
        out.push(
            Finding::new(
                "aibox::policy::secret_key",
                Severity::Error,
                file,
                format!("`{shown}` has a secret-like name and {what}"),
                remedy(file, Some(key)),
            )
            .at(locate()),
        );
    } else if value_leaf && let Some(kind) = secret_rules::judge_value(value) {
        let (code, message) = if kind == secret_rules::RANDOM_TOKEN {
            (
                "aibox::policy::secret_entropy",
                format!("`{shown}` holds a random-looking literal value, probably a credential"),
            )
        } else {
            (
                "aibox::policy::secret_value",
                format!("`{shown}` holds what looks like a credential ({kind})"),
            )
        };
        out.push(
            Finding::new(
                code,
                Severity::Error,
                file,
                message,
                remedy(file, Some(key)),
            )
            .at(locate()),
        );
    }
}

/// The line of a leaf's finding: the first line holding `key` and `value` that no
/// finding in `out` claims yet, so a value written at several places is found at each of
/// them; the first such line when all are claimed (two keys on one line). Without a line
/// holding both (a value on a line of its own), the lines holding `value` alone.
fn leaf_line(text: &str, out: &[Finding], key: &str, value: &str) -> Option<usize> {
    if value.is_empty() {
        return None;
    }
    let claimed = |n: usize| out.iter().any(|f| f.line == Some(n));
    let pick = |keyed: bool| -> Option<usize> {
        let lines: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.contains(value) && (!keyed || l.contains(key)))
            .map(|(i, _)| i + 1)
            .collect();
        lines
            .iter()
            .copied()
            .find(|n| !claimed(*n))
            .or_else(|| lines.first().copied())
    };
    pick(true).or_else(|| pick(false))
}

/// The remedy, naming the reference syntax that fits the file.
fn remedy(file: &str, key: Option<&str>) -> String {
    let header = key.is_some_and(|k| k.eq_ignore_ascii_case("authorization"));
    // A URL stays a URL (a whole-value reference is no longer one): only its secret
    // part becomes a reference. Arguments and commands are named by what they hold.
    let url = key.is_some_and(|k| {
        ["url", "httpurl", "serverurl"].contains(&k.to_ascii_lowercase().as_str())
    });
    let program = key.is_some_and(|k| ["args", "command"].contains(&k));
    let name = key
        .filter(|k| is_identifier(k) && !header && !url && !program)
        .map_or_else(
            || {
                if header || program {
                    "TOKEN"
                } else if url {
                    "KEY"
                } else {
                    "NAME"
                }
                .to_owned()
            },
            str::to_ascii_uppercase,
        );
    let spelled = if file.ends_with("opencode.json") {
        format!("{{env:{name}}}")
    } else if file.contains(".cursor/") || file.contains(".vscode/") {
        format!("${{env:{name}}}")
    } else {
        format!("${{{name}}}")
    };
    if url && !file.contains(".codex/") {
        return format!(
            "remove the secret from this committed URL: put it in `.aibox-local.toml` under \
             `[container.environment]` (gitignored) as `{name}` and write only that part as a \
             reference, for example `https://host/mcp?key={spelled}`, or send it in a header \
             (`Authorization = \"Bearer {spelled}\"`)"
        );
    }
    let reference = if header {
        format!("`Bearer ${{{name}}}`")
    } else if file.ends_with("opencode.json") {
        format!("`{{env:{name}}}`")
    } else if file.contains(".cursor/") || file.contains(".vscode/") {
        format!("`${{env:{name}}}` (or `${{input:id}}` in VS Code)")
    } else if file.ends_with("devcontainer.json") {
        format!("`${{localEnv:{name}}}` in `remoteEnv`")
    } else if file.contains(".codex/") {
        format!("`env_vars = [\"{name}\"]` or `bearer_token_env_var = \"{name}\"`")
    } else {
        format!("`${{{name}}}`")
    };
    format!(
        "remove the value from this committed file: put it in `.aibox-local.toml` under \
         `[container.environment]` (gitignored) and write the reference {reference} instead"
    )
}

fn is_literal(value: &str) -> bool {
    !value.is_empty()
        && !has_reference(value)
        && !matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "none"
        )
        && value.parse::<f64>().is_err()
}

/// Fields whose value is the *name* of a variable (Codex `env_vars`, `*_env_var`, …).
fn var_name_field(leaf: &Leaf) -> bool {
    if !is_identifier(&leaf.value) {
        return false;
    }
    let key = leaf.key().to_ascii_lowercase();
    key.ends_with("env_var")
        || key.ends_with("_env")
        || key.ends_with("_var")
        || key.ends_with("_variable")
        || leaf
            .path
            .iter()
            .any(|p| p == "env_vars" || p == "env_http_headers")
}

/// A value keyed by a host name, not a variable (`aibox.lock`'s `[network.allow]` and
/// `[network.build]`: `"auth.openai.com" = ["tool codex …"]`, where the word `auth` made
/// Codex's own host a secret-like name).
fn host_keyed(leaf: &Leaf) -> bool {
    let named: Vec<&str> = leaf
        .path
        .iter()
        .filter(|p| !p.starts_with('['))
        .map(String::as_str)
        .collect();
    matches!(named.as_slice(), ["network", "allow" | "build", _])
}

/// Fields whose values aibox writes for a program to use: environment, headers,
/// arguments, commands and URLs (Compose, `devcontainer.json`, the harness files and
/// `aibox.toml`). Their values are judged by shape as well as by format.
fn value_field(path: &[String]) -> bool {
    let segs: Vec<String> = path.iter().map(|p| p.to_ascii_lowercase()).collect();
    segs.iter().any(|s| {
        matches!(
            s.as_str(),
            "env"
                | "environment"
                | "headers"
                | "http_headers"
                | "containerenv"
                | "remoteenv"
                | "command"
                | "entrypoint"
                | "url"
                | "post_create_command"
                | "post_start_command"
                | "postcreatecommand"
                | "poststartcommand"
                | "postattachcommand"
                | "oncreatecommand"
                | "updatecontentcommand"
                | "args"
        )
    })
}

/// Key names that suggest a secret: [`aibox_config::secret_rules::is_secret_key`].
pub fn suspicious_key(key: &str) -> bool {
    aibox_config::secret_rules::is_secret_key(key)
}

pub(crate) fn high_entropy(value: &str) -> bool {
    value.len() >= 20
        && !value.starts_with('/')
        && !value.contains("://")
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+/=_-.".contains(c))
        && value.chars().any(|c| c.is_ascii_alphabetic())
        && value.chars().any(|c| c.is_ascii_digit())
        && entropy(value) >= 3.5
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names_are_the_shared_rules() {
        for k in [
            "GITHUB_TOKEN",
            "apiKey",
            "DB_PASSWORD",
            "dbPassword",
            "X_AUTH",
        ] {
            assert!(suspicious_key(k), "{k}");
        }
        for k in ["AUTHOR", "LANG", "authorization_url", "path"] {
            assert!(!suspicious_key(k), "{k}");
        }
        assert!(find_token("https://user:hunter2@host/x").is_some());
    }
}
