//! Point 2: no unexpected outbound network.
//!
//! Network modules, spawned network tools (`curl`, `git push`, ...) and every URL or host
//! literal. The declared hosts are `metadata.processkit.hosts` of `SKILL.md` (a malformed
//! entry fails) plus any the caller names. Fails on network code when the skill declares no hosts, on a host that is not
//! declared (where code could reach it: a host in a string of a skill without network
//! code only warns), and on network code whose tools never say `openWorldHint: true`.
//! Test files are judged as tests: what they do is shown as warnings.

use std::collections::BTreeSet;

use super::{Skill, is_test_file, spawns, tools};
use crate::context::ReviewContext;
use crate::python::PyFile;
use crate::report::Findings;
use crate::shell;

/// Modules (or dotted prefixes) whose import means network access.
const NETWORK_MODULES: [&str; 25] = [
    "socket",
    "_socket",
    "ssl",
    "_ssl",
    // `open_connection`, `start_server` and friends open sockets themselves.
    "asyncio",
    "http.client",
    "http.server",
    "urllib",
    "urllib3",
    "requests",
    "httpx",
    "aiohttp",
    "websockets",
    "websocket",
    "ftplib",
    "smtplib",
    "poplib",
    "imaplib",
    "telnetlib",
    "paramiko",
    "grpc",
    "socketserver",
    "xmlrpc",
    "pycurl",
    "asyncssh",
];
/// Sub-modules of the above that do no I/O.
const HARMLESS: [&str; 2] = ["urllib.parse", "urllib.error"];
/// Top-level domains accepted for bare host literals (dotted identifiers such as logger
/// names would otherwise read as hosts).
const TLDS: [&str; 34] = [
    "com", "net", "org", "io", "dev", "ai", "app", "co", "cloud", "edu", "gov", "info", "biz",
    "me", "xyz", "tech", "site", "online", "us", "uk", "de", "fr", "eu", "jp", "cn", "ru", "ch",
    "nl", "in", "ca", "au", "invalid", "example", "internal",
];

/// A host found in a literal.
struct Host {
    file: String,
    line: u32,
    name: String,
    /// Found in a test file (see [`is_test_file`]).
    in_test: bool,
}

pub(crate) fn check(skill: &Skill<'_>, ctx: &ReviewContext) -> Findings {
    let mut f = Findings::default();
    let ctx = &with_declared_hosts(skill, ctx, &mut f);
    let mut network_code = false;
    let mut hosts: Vec<Host> = Vec::new();
    for (entry, file) in skill.parsed() {
        let rel = entry.rel.as_str();
        let in_test = is_test_file(rel);
        let found = python_network(rel, file, &mut f, ctx.declared_hosts.is_empty() && !in_test);
        network_code |= found && !in_test;
        for t in string_expressions(file) {
            for host in hosts_in(&t.text) {
                hosts.push(Host {
                    file: rel.to_owned(),
                    line: t.line,
                    name: host,
                    in_test,
                });
            }
        }
    }
    for (entry, text) in skill.shell_scripts() {
        let in_test = is_test_file(&entry.rel);
        for (i, l) in text.lines().enumerate() {
            let line = u32::try_from(i + 1).unwrap_or(u32::MAX);
            if l.trim_start().starts_with('#') {
                continue;
            }
            let c = shell::classify(&shell::shell_commands(l));
            for tool in c.network {
                network_code |= !in_test;
                level(
                    &mut f,
                    ctx.declared_hosts.is_empty() && !in_test,
                    &entry.rel,
                    line,
                    format!("runs {tool}"),
                );
            }
            for host in hosts_in(l) {
                hosts.push(Host {
                    file: entry.rel.clone(),
                    line,
                    name: host,
                    in_test,
                });
            }
        }
    }
    judge_hosts(&hosts, ctx, network_code, &mut f);
    if network_code {
        if ctx.declared_hosts.is_empty() {
            f.fail(
                "",
                None,
                format!(
                    "the skill has network code but declares no hosts (list them under \
                     `{}` in SKILL.md)",
                    crate::skill::HOSTS_KEY
                ),
            );
        }
        let registered = tools::registered(skill);
        let mut attributed = false;
        for (entry, file) in skill.parsed() {
            let reaching = network_functions(file);
            for t in registered.iter().filter(|t| t.file == entry.rel) {
                let Some(function) = t.function.as_deref().filter(|f| reaching.contains(*f)) else {
                    continue;
                };
                attributed = true;
                if t.hints.get("openWorldHint") != Some(&true) {
                    f.fail(
                        &t.file,
                        Some(t.line),
                        format!("tool `{}` reaches the network (in `{function}`) but does not set `openWorldHint: true`", t.name),
                    );
                }
            }
        }
        if !attributed
            && !registered.is_empty()
            && !registered
                .iter()
                .any(|t| t.hints.get("openWorldHint") == Some(&true))
        {
            f.fail(
                "mcp/server.py",
                None,
                "the server has network code but none of its tools sets `openWorldHint: true`",
            );
        }
    }
    f
}

/// `ctx` with the hosts the skill declares in its `SKILL.md` added to the caller's; a
/// malformed declaration fails.
fn with_declared_hosts(skill: &Skill<'_>, ctx: &ReviewContext, f: &mut Findings) -> ReviewContext {
    let declared = &skill.meta.hosts;
    for (line, message) in &declared.problems {
        f.fail("SKILL.md", *line, message.clone());
    }
    let mut ctx = ctx.clone();
    for host in &declared.hosts {
        if !ctx.declared_hosts.contains(host) {
            ctx.declared_hosts.push(host.clone());
        }
    }
    ctx
}

/// Judges the hosts found in literals: declared ones are noted; an undeclared one fails
/// only where code could reach it (network code outside the tests), and warns otherwise.
fn judge_hosts(hosts: &[Host], ctx: &ReviewContext, network_code: bool, f: &mut Findings) {
    for h in hosts {
        if is_loopback(&h.name) {
            continue;
        }
        if ctx.declared_hosts.iter().any(|d| host_matches(d, &h.name)) {
            f.note(
                &h.file,
                Some(h.line),
                format!("host `{}` is declared", h.name),
            );
        } else if h.in_test {
            f.warn(
                &h.file,
                Some(h.line),
                format!(
                    "host `{}` in a test file (tests do not run with the skill)",
                    h.name
                ),
            );
        } else if !network_code {
            // A host in a string is a call only where code could reach it.
            f.warn(
                &h.file,
                Some(h.line),
                format!(
                    "host `{}` in a string, but the skill has no network code that could reach it",
                    h.name
                ),
            );
        } else {
            f.fail(
                &h.file,
                Some(h.line),
                format!(
                    "host `{}` is not on the skill's declared host list (`{}` in SKILL.md)",
                    h.name,
                    crate::skill::HOSTS_KEY
                ),
            );
        }
    }
}

/// String literals except docstrings and other string-only statements, which cannot
/// reach the network.
fn string_expressions(file: &PyFile) -> impl Iterator<Item = &crate::python::Tok> {
    let statements: Vec<usize> = file
        .logical_lines()
        .into_iter()
        .filter(|r| r.len() == 1)
        .map(|r| r.start)
        .collect();
    file.toks
        .iter()
        .enumerate()
        .filter(move |(i, t)| t.is_str() && statements.binary_search(i).is_err())
        .map(|(_, t)| t)
}

fn level(f: &mut Findings, undeclared: bool, file: &str, line: u32, message: String) {
    if undeclared {
        f.fail(file, Some(line), message);
    } else {
        f.warn(file, Some(line), message);
    }
}

/// Records network imports and spawned network tools; returns whether there were any.
fn python_network(rel: &str, file: &PyFile, f: &mut Findings, undeclared: bool) -> bool {
    let mut found = false;
    for imp in &file.imports {
        if imp.level > 0 {
            continue;
        }
        let modules: Vec<String> = if imp.names.is_empty() {
            vec![imp.module.clone()]
        } else {
            // `from urllib import request` imports `urllib.request`.
            imp.names
                .iter()
                .map(|n| format!("{}.{n}", imp.module))
                .collect()
        };
        for m in modules {
            if is_network_module(&m) {
                found = true;
                let shown = if imp.names.is_empty() {
                    m
                } else {
                    imp.module.clone()
                };
                level(
                    f,
                    undeclared,
                    rel,
                    imp.line,
                    format!("imports network module `{shown}`"),
                );
                break;
            }
        }
    }
    for spawn in spawns(file) {
        match &spawn.commands {
            Some(cmds) => {
                for tool in shell::classify(cmds).network {
                    found = true;
                    level(
                        f,
                        undeclared,
                        rel,
                        spawn.line,
                        format!("`{}` runs {tool}", spawn.callee),
                    );
                }
            }
            None => f.warn(
                rel,
                Some(spawn.line),
                format!(
                    "`{}` runs a command built at run time; check what it can reach",
                    spawn.callee
                ),
            ),
        }
    }
    found
}

/// Functions whose body calls a network module or spawns a network tool, directly or
/// through other functions of the same file.
fn network_functions(file: &PyFile) -> BTreeSet<String> {
    let spawn_lines: Vec<u32> = spawns(file)
        .into_iter()
        .filter(|s| {
            s.commands
                .as_ref()
                .is_some_and(|c| !shell::classify(c).network.is_empty())
        })
        .map(|s| s.line)
        .collect();
    let mut out = BTreeSet::new();
    for def in &file.defs {
        let direct = file.calls.iter().any(|c| {
            def.body.contains(&c.args.start.saturating_sub(1)) && is_network_module(&c.callee)
        });
        let lines = file.toks.get(def.body.start).map(|t| t.line)
            ..=file
                .toks
                .get(def.body.end.saturating_sub(1))
                .map(|t| t.line);
        let spawned = spawn_lines.iter().any(|l| lines.contains(&Some(*l)));
        if direct || spawned {
            out.insert(def.name.clone());
        }
    }
    // Callers of network functions reach the network too.
    loop {
        let before = out.len();
        for def in &file.defs {
            if out.contains(&def.name) {
                continue;
            }
            let calls_one = file.calls.iter().any(|c| {
                let local = c
                    .callee
                    .strip_prefix("self.")
                    .or_else(|| c.callee.strip_prefix("cls."))
                    .unwrap_or(&c.callee);
                def.body.contains(&c.args.start.saturating_sub(1)) && out.contains(local)
            });
            if calls_one {
                out.insert(def.name.clone());
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

pub(crate) fn is_network_module(m: &str) -> bool {
    let hit = |list: &[&str]| {
        list.iter()
            .any(|n| m == *n || m.starts_with(&format!("{n}.")))
    };
    hit(&NETWORK_MODULES) && !hit(&HARMLESS)
}

/// Hosts named by URLs in `s`, or `s` itself when it is a bare host name or IPv4 address.
pub(crate) fn hosts_in(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let scheme: String = rest[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let after = &rest[i + 3..];
        let authority: String = after
            .chars()
            .take_while(|c| {
                !matches!(
                    c,
                    '/' | '?' | '#' | '"' | '\'' | ' ' | '\n' | '`' | '<' | '>' | ')'
                )
            })
            .collect();
        let host_port = authority.rsplit('@').next().unwrap_or(&authority);
        let host = if host_port.starts_with('[') {
            host_port
                .split(']')
                .next()
                .unwrap_or("")
                .trim_start_matches('[')
                .to_owned()
        } else {
            host_port.split(':').next().unwrap_or("").to_owned()
        };
        // Templates such as `http://%s/` or `https://{host}/` name no host.
        let plain = host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
        if !scheme.is_empty() && !scheme.eq_ignore_ascii_case("file") && !host.is_empty() && plain {
            out.push(host.to_ascii_lowercase());
        }
        rest = after;
    }
    if out.is_empty() {
        let t = s.trim();
        let host = t
            .rsplit_once(':')
            .filter(|(_, p)| p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty())
            .map_or(t, |(h, _)| h);
        if is_bare_host(host) {
            out.push(host.to_ascii_lowercase());
        }
    }
    out
}

fn is_bare_host(s: &str) -> bool {
    let labels: Vec<&str> = s.split('.').collect();
    if labels.len() < 2 || labels.iter().any(|l| l.is_empty() || l.len() > 63) {
        return false;
    }
    if labels.len() == 4 && labels.iter().all(|l| l.parse::<u8>().is_ok()) {
        return true;
    }
    let label_ok = |l: &&str| l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    let tld = labels[labels.len() - 1].to_ascii_lowercase();
    labels.iter().all(label_ok) && TLDS.contains(&tld.as_str())
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host == "::1"
        || host == "0.0.0.0"
        || host.starts_with("127.")
        || host.ends_with(".localhost")
}

/// `declared` is an exact host or `*.suffix`.
fn host_matches(declared: &str, host: &str) -> bool {
    let declared = declared.to_ascii_lowercase();
    match declared.strip_prefix("*.") {
        Some(suffix) => host.ends_with(&format!(".{suffix}")),
        None => declared == host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_hosts() {
        assert_eq!(
            hosts_in("see https://user:pw@API.example.com:8443/x?q"),
            vec!["api.example.com"]
        );
        assert_eq!(
            hosts_in("ws://[::1]:9/x and http://127.0.0.1/"),
            vec!["::1", "127.0.0.1"]
        );
        assert_eq!(hosts_in("api.github.com"), vec!["api.github.com"]);
        assert_eq!(hosts_in("10.0.0.1:22"), vec!["10.0.0.1"]);
        assert!(hosts_in("processkit.server").is_empty());
        assert!(hosts_in("server.py").is_empty());
        assert!(hosts_in("file:///etc/passwd").is_empty());
        assert!(hosts_in("https://{host}/x").is_empty());
        assert!(hosts_in("http://%s:%d/").is_empty());
    }

    #[test]
    fn matches_declared_hosts() {
        assert!(host_matches("*.example.com", "api.example.com"));
        assert!(!host_matches("*.example.com", "example.com"));
        assert!(host_matches("Example.com", "example.com"));
        assert!(is_network_module("urllib.request") && !is_network_module("urllib.parse"));
        assert!(is_network_module("http.client") && !is_network_module("http"));
    }
}
