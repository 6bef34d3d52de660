//! The provider-neutral server specification every writer consumes.
//!
//! Servers come from three places: processkit (the content release, supplied by the
//! provenance layer as a list of [`ServerSpec`]s), the team (`aibox.toml
//! [[ai.mcp.servers]]`) and the person (`.aibox-local.toml [[mcp.servers]]`).
//! [`collect_servers`] merges them, drops processkit servers in `harness-only` mode,
//! and validates names and secret handling before any harness file is touched.

use std::collections::BTreeMap;

use aibox_config::{AiboxToml, ContextMode, LocalToml, McpServer};
use serde::{Deserialize, Serialize};

use crate::McpError;
use aibox_config::secret_rules::{self, judge_value};

use crate::refs::{Template, is_secret_key};

/// Where a server was defined; decides which files it may be written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// The pinned processkit release (context mode `processkit` only).
    Processkit,
    /// `aibox.toml [[ai.mcp.servers]]`: committed, reviewed by the team.
    Team,
    /// `.aibox-local.toml [[mcp.servers]]`: personal, only in gitignored or
    /// container-scoped files.
    Personal,
}

impl Origin {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Processkit => "processkit",
            Self::Team => "team",
            Self::Personal => "personal",
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the harness reaches the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Transport {
    /// A local process speaking MCP over stdin/stdout.
    Stdio {
        /// Program to start.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment; values are `${VAR}` references (literals only for processkit).
        env: BTreeMap<String, String>,
    },
    /// A streamable-HTTP server.
    Remote {
        /// Endpoint URL.
        url: String,
        /// HTTP headers; values contain `${VAR}` references for anything secret.
        headers: BTreeMap<String, String>,
    },
}

/// One MCP server to register.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSpec {
    /// Name (letters, digits, `-`, `_`); the key in every harness file.
    pub name: String,
    /// Where it was defined.
    pub origin: Origin,
    /// stdio or remote.
    pub transport: Transport,
    /// Tools the harness may call without asking (`*` = all); empty means the
    /// `[ai.mcp.permissions]` defaults apply.
    pub allowed_tools: Vec<String>,
    /// Start-up timeout for slow servers, in seconds.
    pub startup_timeout_sec: Option<u32>,
}

/// Start-up timeout aibox sets for `uv`-launched servers when none is configured: a
/// cold `uv run` resolving a script's dependencies outlasts the harnesses' defaults.
pub const UV_STARTUP_TIMEOUT_SEC: u32 = 90;

impl ServerSpec {
    /// Converts a configured server; `None` when it is disabled (`enabled = false`).
    pub fn from_config(server: &McpServer, origin: Origin) -> Result<Option<Self>, McpError> {
        if !server.enabled {
            return Ok(None);
        }
        let invalid = |message: &str, help: &str| McpError::InvalidServer {
            server: server.name.clone(),
            origin: origin.to_string(),
            message: message.to_owned(),
            help: help.to_owned(),
        };
        let transport = match (&server.command, &server.url) {
            (Some(command), None) => {
                if !server.headers.is_empty() {
                    return Err(invalid(
                        "`headers` only apply to remote servers",
                        "remove `headers`, or replace `command` with `url`",
                    ));
                }
                Transport::Stdio {
                    command: command.clone(),
                    args: server.args.clone(),
                    env: server.env.clone(),
                }
            }
            (None, Some(url)) => {
                if !server.args.is_empty() || !server.env.is_empty() {
                    return Err(invalid(
                        "`args` and `env` only apply to stdio servers",
                        "remove them, or replace `url` with `command`",
                    ));
                }
                Transport::Remote {
                    url: url.clone(),
                    headers: server.headers.clone(),
                }
            }
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "both `command` and `url` are set",
                    "set `command` for a local (stdio) server or `url` for a remote one, not both",
                ));
            }
            (None, None) => {
                return Err(invalid(
                    "neither `command` nor `url` is set",
                    "set `command` for a local (stdio) server or `url` for a remote one",
                ));
            }
        };
        let spec = Self {
            name: server.name.clone(),
            origin,
            transport,
            allowed_tools: server.allowed_tools.clone(),
            startup_timeout_sec: server.startup_timeout_sec,
        };
        spec.validate()?;
        Ok(Some(spec))
    }

    /// The configured start-up timeout, or [`UV_STARTUP_TIMEOUT_SEC`] for `uv` servers.
    pub fn effective_startup_timeout(&self) -> Option<u32> {
        self.startup_timeout_sec.or_else(|| match &self.transport {
            Transport::Stdio { command, .. } if command == "uv" || command.ends_with("/uv") => {
                Some(UV_STARTUP_TIMEOUT_SEC)
            }
            _ => None,
        })
    }

    /// The package a `npx`/`uvx`/`bunx`/`pnpm dlx` server runs when it is not pinned to an
    /// exact version (SEC-MCP-5): `pkg`, `@scope/pkg` or `pkg@latest`.
    pub fn unpinned_package(&self) -> Option<String> {
        let Transport::Stdio { command, args, .. } = &self.transport else {
            return None;
        };
        let program = command.rsplit('/').next().unwrap_or(command);
        let uv_tool_run =
            program == "uv" && args.len() >= 2 && args[0] == "tool" && args[1] == "run";
        let rest: &[String] = match (program, args.first().map(String::as_str)) {
            ("npx" | "uvx" | "bunx", _) => args,
            ("pnpm" | "yarn", Some("dlx")) => &args[1..],
            ("uv", _) if uv_tool_run => &args[2..],
            _ => return None,
        };
        if program == "uvx" || uv_tool_run {
            return uvx_unpinned(rest);
        }
        let package = rest.iter().find(|a| !a.starts_with('-'))?;
        let version = package
            .strip_prefix('@')
            .unwrap_or(package)
            .split_once(['@', '=']);
        match version {
            Some((_, v))
                if !v.is_empty() && v != "latest" && !v.starts_with(['^', '~', '>', '<', '*']) =>
            {
                None
            }
            _ => Some(package.clone()),
        }
    }

    /// Checks the name and that no literal secret would be written anywhere.
    ///
    /// Team and personal `env` values must be exactly one `${VAR}` reference; header
    /// values must contain one (`Bearer ${TOKEN}`). processkit servers come from a
    /// verified release and may carry literal, non-secret settings.
    pub fn validate(&self) -> Result<(), McpError> {
        let invalid = |message: String, help: &str| McpError::InvalidServer {
            server: self.name.clone(),
            origin: self.origin.to_string(),
            message,
            help: help.to_owned(),
        };
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(invalid(
                "the name may contain only letters, digits, `-` and `_`".to_owned(),
                "rename the server, for example `my-server` (hyphens work in every harness)",
            ));
        }
        if let Some(tool) = self.allowed_tools.iter().find(|t| !is_tool_pattern(t)) {
            return Err(invalid(
                format!("allowed tool `{tool}` is not a tool name or pattern"),
                "list tool names (letters, digits, `-`, `_`, `.`), optionally with `*` wildcards",
            ));
        }
        let literal =
            |field: &'static str, key: &str, reason: &'static str| McpError::LiteralValue {
                server: self.name.clone(),
                origin: self.origin.as_str(),
                field,
                key: key.to_owned(),
                reason,
                suggest: suggest_var(&self.name, key),
            };
        let strict = self.origin != Origin::Processkit;
        match &self.transport {
            Transport::Stdio { command, args, env } => {
                if command.trim().is_empty() {
                    return Err(invalid(
                        "`command` is empty".to_owned(),
                        "set the program to start, for example `npx`",
                    ));
                }
                if let Some(kind) = judge_value(command) {
                    return Err(literal("command", "command", kind));
                }
                if let Some((i, kind)) = secret_arg(args) {
                    return Err(literal("args", &format!("args[{i}]"), kind));
                }
                for (key, value) in env {
                    if let Some(reason) = env_refusal(key, value, strict) {
                        return Err(literal("env", key, reason));
                    }
                }
            }
            Transport::Remote { url, headers } => {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(invalid(
                        format!("`url` must start with https:// or http://, found `{url}`"),
                        "write the full endpoint URL, for example `https://mcp.example.com/mcp`",
                    ));
                }
                if let Some(key) = secret_query_key(url) {
                    return Err(literal("url", &key, "a credential in the query string"));
                }
                if let Some(kind) = judge_value(url) {
                    return Err(literal("url", "url", kind));
                }
                for (key, value) in headers {
                    let t = Template::parse(value);
                    if strict && !t.has_var() {
                        return Err(literal(
                            "headers",
                            key,
                            "team and personal header values must contain a `${VAR}` reference",
                        ));
                    }
                    if is_secret_key(key)
                        && (!t.has_var() || !secret_rules::fallback_literals(value).is_empty())
                    {
                        return Err(literal("headers", key, LITERAL_FALLBACK));
                    }
                    if let Some(kind) = judge_value(value) {
                        return Err(literal("headers", key, kind));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The package of a `uvx` (or `uv tool run`) command line when it names no one exact
/// version: the value of `--from` (`--from=`) when given, else the first argument that
/// is not an option or an option's value.
fn uvx_unpinned(args: &[String]) -> Option<String> {
    // uvx options that take a value: their value is not the package.
    const VALUED: [&str; 9] = [
        "--python",
        "-p",
        "--with",
        "-w",
        "--with-requirements",
        "--with-editable",
        "--index",
        "--default-index",
        "--index-url",
    ];
    let mut it = args.iter();
    let package: &str = loop {
        let arg = it.next()?;
        if arg == "--from" {
            break it.next()?;
        }
        if let Some(value) = arg.strip_prefix("--from=") {
            break value;
        }
        if VALUED.contains(&arg.as_str()) {
            it.next();
        } else if !arg.starts_with('-') {
            break arg;
        }
    };
    // A Python requirement: one exact version is `==1.2.3` or `@1.2.3`; anything else
    // (`>=1`, `~=1.2`, `==1.*`, `>=1,<2`) is a range.
    let exact = package
        .split_once("==")
        .or_else(|| package.split_once('@'))
        .is_some_and(|(name, v)| {
            !name.contains(['<', '>', '~', '!', '=', ','])
                && v.starts_with(|c: char| c.is_ascii_digit())
                && v.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'!' | b'-' | b'_')
                })
        });
    (!exact).then(|| package.to_owned())
}

/// Why an environment value of a server may not be written, if it may not: team and
/// personal values must be one `${VAR}` reference; a fallback is written as it is, so it
/// is judged as a literal; a processkit value must not look like a credential.
fn env_refusal(key: &str, value: &str, strict: bool) -> Option<&'static str> {
    let t = Template::parse(value);
    if let Some((_, fallback)) = t.single_var() {
        let d = fallback.filter(|d| !d.is_empty())?;
        return if is_secret_key(key) {
            Some(LITERAL_FALLBACK)
        } else {
            judge_value(d)
        };
    }
    if value.is_empty() {
        None
    } else if strict {
        Some("team and personal server environment values must be a single `${VAR}` reference")
    } else if is_secret_key(key) {
        Some("it has a secret-like name")
    } else {
        judge_value(value)
    }
}

/// Why a secret-named value with a literal (or a literal fallback) is refused.
const LITERAL_FALLBACK: &str = "it has a secret-like name and a literal value (a `${NAME:-fallback}` fallback is a literal too)";

/// Index of an argument that holds a literal credential and what it looks like: the
/// value of a secret-named flag (`--api-key=VALUE`, `--api-key VALUE`), a header with a
/// literal credential (`X-API-Key: VALUE`, `Authorization: Token VALUE`), or any argument
/// the shared rules judge a credential (a known format or a random-looking token, also
/// after an ordinary flag).
fn secret_arg(args: &[String]) -> Option<(usize, &'static str)> {
    if let Some(i) = secret_rules::secret_flag_value(args) {
        return Some((i, "the value of a secret-named flag"));
    }
    if let Some(i) = secret_rules::secret_header_value(args) {
        return Some((i, "a header with a literal credential (`Name: value`)"));
    }
    args.iter()
        .enumerate()
        .find_map(|(i, arg)| judge_value(arg).map(|kind| (i, kind)))
}

/// A secret-named query parameter with a literal value (`?api_key=...`).
fn secret_query_key(url: &str) -> Option<String> {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .filter_map(|p| p.split_once('='))
        .find(|(k, v)| is_secret_key(k) && !secret_rules::strip_references(v).is_empty())
        .map(|(k, _)| k.to_owned())
}

/// A tool name or a `*` pattern (`*`, `prefix*`, `*suffix`, `*mid*`).
pub(crate) fn is_tool_pattern(t: &str) -> bool {
    !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '*'))
}

/// A variable name to suggest for a literal value (`MYSERVER_API_KEY` style).
fn suggest_var(server: &str, key: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    if aibox_config::validate::is_env_name(key) && key.chars().all(|c| !c.is_ascii_lowercase()) {
        key.to_owned()
    } else {
        format!("{}_TOKEN", clean(server))
    }
}

/// The servers to register, in a stable order (processkit, team, personal; each by
/// name): processkit servers are dropped in `harness-only` mode; disabled servers are
/// skipped; names must be unique.
pub fn collect_servers(
    config: &AiboxToml,
    local: &LocalToml,
    processkit: &[ServerSpec],
) -> Result<Vec<ServerSpec>, McpError> {
    let mut out: Vec<ServerSpec> = Vec::new();
    if config.context.mode == ContextMode::Processkit {
        for spec in processkit {
            let mut spec = spec.clone();
            spec.origin = Origin::Processkit;
            spec.validate()?;
            out.push(spec);
        }
    }
    for server in &config.ai.mcp.servers {
        out.extend(ServerSpec::from_config(server, Origin::Team)?);
    }
    for server in &local.mcp.servers {
        out.extend(ServerSpec::from_config(server, Origin::Personal)?);
    }
    let mut seen: BTreeMap<&str, Origin> = BTreeMap::new();
    for spec in &out {
        if let Some(first) = seen.insert(&spec.name, spec.origin) {
            return Err(McpError::DuplicateServer {
                name: spec.name.clone(),
                first: first.to_string(),
                second: spec.origin.to_string(),
            });
        }
    }
    out.sort_by(|a, b| (a.origin, &a.name).cmp(&(b.origin, &b.name)));
    Ok(out)
}
