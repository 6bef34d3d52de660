//! Per-harness rendering of one server: the entry in the harness's own shape, its
//! allow/deny projection, and the reason when the harness cannot take it faithfully.
//!
//! Each function is pure: a [`ServerSpec`] and its [`ToolPolicy`] in, an entry out.
//! A harness that cannot express something (a renamed variable in Codex, an alias with
//! `_` in Gemini, a default value in `{env:VAR}`) gets a skip reason, never an
//! approximation that would load the wrong thing.

use serde_json::{Map, Value, json};
use toml_edit::{Array, InlineTable, Table};

use crate::refs::{Part, RefSyntax, Template};
use crate::spec::{ServerSpec, Transport};
use crate::tools::{ToolPattern, ToolPolicy};

/// A rendered entry plus notes for `aibox mcp list`.
#[derive(Debug, Clone)]
pub(crate) struct Rendered<V> {
    pub value: V,
    pub notes: Vec<String>,
}

type Skip = String;

fn render_map(
    map: &std::collections::BTreeMap<String, String>,
    syntax: RefSyntax,
    what: &str,
) -> Result<Map<String, Value>, Skip> {
    map.iter()
        .map(|(k, v)| {
            Template::parse(v).render(syntax).map(|r| (k.clone(), Value::String(r))).ok_or_else(
                || format!("{what} `{k}` uses a `${{VAR:-default}}` default, which this harness cannot express"),
            )
        })
        .collect()
}

/// `value` (a command, an argument or a URL) in a harness's reference syntax: a harness
/// that expands references there gets them in its own spelling, never aibox's `${VAR}`
/// where it would reach the server as that text.
fn render_text(value: &str, syntax: RefSyntax, what: &str) -> Result<String, Skip> {
    Template::parse(value).render(syntax).ok_or_else(|| {
        format!(
            "{what} `{value}` uses a `${{VAR:-default}}` default, which this harness cannot express"
        )
    })
}

/// How a harness spells the common JSON entry: `command`/`args`/`env` for stdio,
/// a URL plus `headers` for remote servers.
struct JsonShape {
    /// Reference syntax for `${VAR}` in env and header values.
    syntax: RefSyntax,
    /// `type` written for a stdio server, when the harness wants one.
    stdio_type: Option<&'static str>,
    /// `type` written for a remote server, when the harness wants one.
    remote_type: Option<&'static str>,
    /// Key that holds a remote server's URL.
    url_key: &'static str,
}

/// The transport part of an entry in the common JSON shape.
fn json_entry(spec: &ServerSpec, shape: &JsonShape) -> Result<Map<String, Value>, Skip> {
    let mut entry = Map::new();
    match &spec.transport {
        Transport::Stdio { command, args, env } => {
            if let Some(kind) = shape.stdio_type {
                entry.insert("type".into(), json!(kind));
            }
            entry.insert(
                "command".into(),
                json!(render_text(command, shape.syntax, "the command")?),
            );
            if !args.is_empty() {
                let args = args
                    .iter()
                    .map(|a| render_text(a, shape.syntax, "the argument"))
                    .collect::<Result<Vec<_>, _>>()?;
                entry.insert("args".into(), json!(args));
            }
            if !env.is_empty() {
                entry.insert(
                    "env".into(),
                    Value::Object(render_map(env, shape.syntax, "env")?),
                );
            }
        }
        Transport::Remote { url, headers } => {
            if let Some(kind) = shape.remote_type {
                entry.insert("type".into(), json!(kind));
            }
            entry.insert(
                shape.url_key.into(),
                json!(render_text(url, shape.syntax, "the URL")?),
            );
            if !headers.is_empty() {
                let h = render_map(headers, shape.syntax, "header")?;
                entry.insert("headers".into(), Value::Object(h));
            }
        }
    }
    Ok(entry)
}

/// An entry in the common JSON shape that needs no notes.
fn plain_entry(spec: &ServerSpec, shape: &JsonShape) -> Result<Rendered<Value>, Skip> {
    Ok(Rendered {
        value: Value::Object(json_entry(spec, shape)?),
        notes: Vec::new(),
    })
}

/// Claude Code `.mcp.json` entry (also read by GitHub Copilot: only shared keys).
pub(crate) fn claude_entry(spec: &ServerSpec) -> Result<Rendered<Value>, Skip> {
    let shape = JsonShape {
        syntax: RefSyntax::Dollar,
        stdio_type: None,
        remote_type: Some("http"),
        url_key: "url",
    };
    plain_entry(spec, &shape)
}

/// Claude permission rules (`mcp__<server>__<tool>`), allow and deny.
pub(crate) fn claude_rules(
    spec: &ServerSpec,
    policy: &ToolPolicy,
) -> Rendered<(Vec<String>, Vec<String>)> {
    let mut notes = Vec::new();
    let rule = |p: &ToolPattern, list: &str, notes: &mut Vec<String>| match p {
        ToolPattern::All => Some(format!("mcp__{}__*", spec.name)),
        ToolPattern::Exact(t) => Some(format!("mcp__{}__{t}", spec.name)),
        ToolPattern::Glob(g) => {
            notes.push(format!(
                "Claude rules cannot express the {list} pattern `{g}` (only exact tools or `*`); not projected"
            ));
            None
        }
    };
    let allow = policy
        .allow_patterns()
        .iter()
        .filter_map(|p| rule(p, "allow", &mut notes))
        .collect();
    let deny = policy
        .deny_patterns()
        .iter()
        .filter_map(|p| rule(p, "deny", &mut notes))
        .collect();
    if policy.default_mode == aibox_config::PermissionMode::Deny {
        notes.push(
            "default_mode `deny` is not projected for Claude: unlisted tools ask instead".into(),
        );
    }
    Rendered {
        value: (allow, deny),
        notes,
    }
}

/// Whether `arg` is a relative script path that Codex needs absolute.
fn relative_script(arg: &str) -> Option<&str> {
    const EXT: [&str; 8] = [".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".rb", ".pl"];
    if let Some(rest) = arg.strip_prefix("./") {
        return Some(rest);
    }
    let plain = !arg.starts_with(['-', '/', '@', '$', '~', '.'])
        && !arg.contains("://")
        && !arg.contains('=')
        && arg.contains('/');
    (plain && EXT.iter().any(|e| arg.ends_with(e))).then_some(arg)
}

fn absolute(arg: &str, workspace: &str) -> String {
    match relative_script(arg) {
        Some(rel) => format!("{}/{rel}", workspace.trim_end_matches('/')),
        None => arg.to_owned(),
    }
}

fn str_array(items: impl IntoIterator<Item = String>) -> Array {
    let mut a = Array::new();
    for i in items {
        a.push(i);
    }
    a
}

/// Codex starts a server's command as written and connects to its URL as written: a
/// reference there would reach the server as the text `${VAR}`.
fn codex_unexpanded(what: &str, value: &str) -> Result<(), Skip> {
    if Template::parse(value).has_var() {
        return Err(format!(
            "Codex does not expand variables in the {what} (`{value}`); pass the value through \
             the server's `env` as `NAME = \"${{NAME}}\"` (Codex forwards it by name) or, for a \
             remote server, an `Authorization = \"Bearer ${{NAME}}\"` header"
        ));
    }
    Ok(())
}

/// Codex `[mcp_servers.<name>]` table. Secrets are passed by variable name only.
pub(crate) fn codex_entry(
    spec: &ServerSpec,
    policy: &ToolPolicy,
    workspace: &str,
) -> Result<Rendered<Table>, Skip> {
    let mut t = Table::new();
    let mut notes = Vec::new();
    match &spec.transport {
        Transport::Stdio { command, args, env } => {
            for (what, value) in
                std::iter::once(("command", command)).chain(args.iter().map(|a| ("arguments", a)))
            {
                codex_unexpanded(what, value)?;
            }
            t.insert("command", toml_edit::value(absolute(command, workspace)));
            if !args.is_empty() {
                let args = args.iter().map(|a| absolute(a, workspace));
                t.insert("args", toml_edit::value(str_array(args)));
            }
            let mut literal = InlineTable::new();
            let mut by_name = Vec::new();
            for (key, value) in env {
                let tpl = Template::parse(value);
                match (tpl.single_var(), tpl.has_var()) {
                    (Some((name, default)), _) if name == key => {
                        if default.is_some() {
                            notes.push(format!(
                                "Codex passes `{key}` by name; its default value is not applied"
                            ));
                        }
                        by_name.push(key.clone());
                    }
                    (Some((name, _)), _) => {
                        return Err(format!(
                            "Codex passes variables only under their own name (`env_vars`); `{key} = \"${{{name}}}\"` would need renaming: use `{key} = \"${{{key}}}\"`"
                        ));
                    }
                    (None, false) => {
                        literal.insert(key, value.as_str().into());
                    }
                    (None, true) => {
                        return Err(format!(
                            "Codex cannot expand a variable inside `{key}`'s value; use a value that is exactly `${{VAR}}`"
                        ));
                    }
                }
            }
            if !literal.is_empty() {
                t.insert("env", toml_edit::value(literal));
            }
            if !by_name.is_empty() {
                t.insert("env_vars", toml_edit::value(str_array(by_name)));
            }
        }
        Transport::Remote { url, headers } => {
            codex_unexpanded("URL", url)?;
            t.insert("url", toml_edit::value(url.as_str()));
            let mut literal = InlineTable::new();
            let mut by_var = InlineTable::new();
            for (key, value) in headers {
                let tpl = Template::parse(value);
                let bearer = match tpl.0.as_slice() {
                    [
                        Part::Lit(l),
                        Part::Var {
                            name,
                            default: None,
                        },
                    ] if l == "Bearer " && key.eq_ignore_ascii_case("authorization") => {
                        Some(name.clone())
                    }
                    _ => None,
                };
                if let Some(var) = bearer {
                    t.insert("bearer_token_env_var", toml_edit::value(var));
                } else if let Some((name, None)) = tpl.single_var() {
                    by_var.insert(key, name.into());
                } else if !tpl.has_var() {
                    literal.insert(key, value.as_str().into());
                } else {
                    return Err(format!(
                        "Codex takes header `{key}` only as `Bearer ${{VAR}}` (Authorization) or exactly `${{VAR}}`"
                    ));
                }
            }
            if !literal.is_empty() {
                t.insert("http_headers", toml_edit::value(literal));
            }
            if !by_var.is_empty() {
                t.insert("env_http_headers", toml_edit::value(by_var));
            }
        }
    }
    if let Some(secs) = spec.effective_startup_timeout() {
        t.insert("startup_timeout_sec", toml_edit::value(i64::from(secs)));
    }
    let (enabled, disabled) = filter_lists(policy, "Codex", &mut notes);
    if let Some(list) = enabled {
        t.insert("enabled_tools", toml_edit::value(str_array(list)));
    }
    if let Some(list) = disabled {
        t.insert("disabled_tools", toml_edit::value(str_array(list)));
    }
    Ok(Rendered { value: t, notes })
}

/// Exact-name include/exclude lists for harnesses whose allow-list is a tool filter
/// (Codex `enabled_tools`/`disabled_tools`, Gemini `includeTools`/`excludeTools`).
fn filter_lists(
    policy: &ToolPolicy,
    harness: &str,
    notes: &mut Vec<String>,
) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let allow = policy.allow_patterns();
    let include = if allow.contains(&ToolPattern::All) {
        None
    } else if let Some(ToolPattern::Glob(g)) =
        allow.iter().find(|p| matches!(p, ToolPattern::Glob(_)))
    {
        notes.push(format!(
            "{harness} tool lists take exact names; the allow pattern `{g}` is not projected (all tools stay available)"
        ));
        None
    } else if allow.is_empty() {
        if policy.default_mode == aibox_config::PermissionMode::Deny {
            notes.push(format!(
                "default_mode `deny` with no allowed tools is not projected for {harness}"
            ));
        }
        None
    } else {
        Some(allow.iter().map(|p| p.as_str().to_owned()).collect())
    };
    let mut exclude = Vec::new();
    for p in policy.deny_patterns() {
        match p {
            ToolPattern::Exact(t) => exclude.push(t),
            other => notes.push(format!(
                "{harness} tool lists take exact names; the deny pattern `{}` is not projected",
                other.as_str()
            )),
        }
    }
    if include.is_some() {
        notes.push(format!(
            "{harness}'s tool list is a filter: tools outside the allowed list are hidden, not asked for"
        ));
    }
    if policy.default_mode == aibox_config::PermissionMode::Allow || include.is_some() {
        notes.push(format!(
            "{harness} has no per-server auto-approval key aibox writes; allowed tools still follow {harness}'s own approval prompts"
        ));
    }
    (include, (!exclude.is_empty()).then_some(exclude))
}

/// Gemini CLI `mcpServers.<alias>` entry. Never sets `trust`.
pub(crate) fn gemini_entry(
    spec: &ServerSpec,
    policy: &ToolPolicy,
) -> Result<Rendered<Value>, Skip> {
    if spec.name.contains('_') {
        return Err(format!(
            "Gemini's policy engine splits `mcp_<alias>_<tool>` at the first `_`, so the alias `{}` would break its policies; rename the server with `-` instead of `_`",
            spec.name
        ));
    }
    let shape = JsonShape {
        syntax: RefSyntax::Dollar,
        stdio_type: None,
        remote_type: None,
        url_key: "httpUrl",
    };
    let mut entry = json_entry(spec, &shape)?;
    let mut notes = Vec::new();
    let (include, exclude) = filter_lists(policy, "Gemini", &mut notes);
    if let Some(list) = include {
        entry.insert("includeTools".into(), json!(list));
    }
    if let Some(list) = exclude {
        entry.insert("excludeTools".into(), json!(list));
    }
    Ok(Rendered {
        value: Value::Object(entry),
        notes,
    })
}

/// `OpenCode` `mcp.<name>` entry: `type` plus a command array that includes the program.
pub(crate) fn opencode_entry(spec: &ServerSpec) -> Result<Rendered<Value>, Skip> {
    let mut entry = Map::new();
    match &spec.transport {
        Transport::Stdio { command, args, env } => {
            entry.insert("type".into(), json!("local"));
            let mut cmd = vec![render_text(command, RefSyntax::BraceEnv, "the command")?];
            for a in args {
                cmd.push(render_text(a, RefSyntax::BraceEnv, "the argument")?);
            }
            entry.insert("command".into(), json!(cmd));
            if !env.is_empty() {
                let e = render_map(env, RefSyntax::BraceEnv, "env")?;
                entry.insert("environment".into(), Value::Object(e));
            }
        }
        Transport::Remote { url, headers } => {
            entry.insert("type".into(), json!("remote"));
            entry.insert(
                "url".into(),
                json!(render_text(url, RefSyntax::BraceEnv, "the URL")?),
            );
            if !headers.is_empty() {
                let h = render_map(headers, RefSyntax::BraceEnv, "header")?;
                entry.insert("headers".into(), Value::Object(h));
            }
        }
    }
    if let Some(secs) = spec.effective_startup_timeout() {
        entry.insert("timeout".into(), json!(u64::from(secs) * 1000));
    }
    Ok(Rendered {
        value: Value::Object(entry),
        notes: Vec::new(),
    })
}

/// Cursor `.cursor/mcp.json` entry (`${env:VAR}` references).
pub(crate) fn cursor_entry(spec: &ServerSpec) -> Result<Rendered<Value>, Skip> {
    let shape = JsonShape {
        syntax: RefSyntax::DollarEnv,
        stdio_type: None,
        remote_type: None,
        url_key: "url",
    };
    plain_entry(spec, &shape)
}

/// VS Code `.vscode/mcp.json` `servers.<name>` entry (`type` is required).
pub(crate) fn vscode_entry(spec: &ServerSpec) -> Result<Rendered<Value>, Skip> {
    let shape = JsonShape {
        syntax: RefSyntax::DollarEnv,
        stdio_type: Some("stdio"),
        remote_type: Some("http"),
        url_key: "url",
    };
    plain_entry(spec, &shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_paths_become_absolute_only_for_scripts() {
        assert_eq!(
            absolute("context/skills/x/mcp/server.py", "/workspace"),
            "/workspace/context/skills/x/mcp/server.py"
        );
        assert_eq!(absolute("./run.sh", "/workspace/"), "/workspace/run.sh");
        for keep in [
            "-y",
            "@acme/docs-mcp@1.4.2",
            "/abs/x.py",
            "https://x.invalid/a.js",
            "run",
            "--script",
            "a=b/c.py",
        ] {
            assert_eq!(absolute(keep, "/workspace"), keep);
        }
    }
}
