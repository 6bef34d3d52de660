//! Checks that the schema cannot express, run on the typed model.
//!
//! Each check names the offending value by key path and the checker turns the path
//! back into a span of the original text, so these problems underline the file exactly
//! like the structural ones do.

use std::collections::BTreeMap;
use std::net::IpAddr;

use miette::SourceSpan;
use toml_edit::Item;

use crate::container::{DEFAULT_USER, MANAGED_HOME_ENTRIES, WORKSPACE_DIR};
use crate::diag::{Problem, ProblemKind, Source};
use crate::model::{AiboxToml, ContainerSection, ContextMode, ExtraVolume, LocalToml, McpServer};
use crate::path::{KeyPath, locate, path};

/// Collects problems for one file, locating spans by key path.
pub(crate) struct Checker<'a> {
    root: &'a Item,
    src: &'a Source,
    pub problems: Vec<Problem>,
}

impl<'a> Checker<'a> {
    pub fn new(root: &'a Item, src: &'a Source) -> Self {
        Self {
            root,
            src,
            problems: Vec::new(),
        }
    }

    fn span(&self, p: &KeyPath) -> SourceSpan {
        locate(self.root, p)
            .and_then(|l| l.best())
            .map_or(SourceSpan::from(0..0), Into::into)
    }

    fn key_span(&self, p: &KeyPath) -> SourceSpan {
        locate(self.root, p)
            .and_then(|l| l.key.or(l.value))
            .map_or(SourceSpan::from(0..0), Into::into)
    }

    fn problem(&self, kind: ProblemKind, p: &KeyPath, msg: String, label: &str) -> Problem {
        Problem::new(kind, self.src, self.span(p), msg, label)
    }

    fn invalid(&mut self, p: &KeyPath, msg: String, label: &str, help: String) {
        let pr = self
            .problem(ProblemKind::InvalidValue, p, msg, label)
            .help(help);
        self.problems.push(pr);
    }

    /// Like [`Self::invalid`] for a value that carries credentials (`user:password@`):
    /// the quoted file shows them masked, so neither the message nor the snippet of the
    /// file under it repeats them.
    fn invalid_credentials(&mut self, p: &KeyPath, value: &str, msg: String, help: String) {
        let masked = mask_userinfo(self.src.inner(), value);
        let src = crate::diag::source(self.src.name(), &masked);
        let pr = Problem::new(
            ProblemKind::InvalidValue,
            &src,
            self.span(p),
            msg,
            "credentials",
        )
        .help(help);
        self.problems.push(pr);
    }

    /// Like [`Self::invalid`], but underlines the key: the name is wrong, not the value.
    fn invalid_key(&mut self, p: &KeyPath, msg: String, label: &str, help: &str) {
        let span = self.key_span(p);
        let pr = Problem::new(ProblemKind::InvalidValue, self.src, span, msg, label).help(help);
        self.problems.push(pr);
    }
}

/// The user-information part of `value` (`user:password` in `[scheme://]user:password@host`),
/// if it has one.
pub fn userinfo(value: &str) -> Option<&str> {
    let rest = value.split_once("://").map_or(value, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    authority.rsplit_once('@').map(|(info, _)| info)
}

/// `value` with its user information (see [`userinfo`]) written as `***`, for messages.
pub fn without_userinfo(value: &str) -> String {
    match userinfo(value) {
        Some(info) if !info.is_empty() => value.replacen(info, "***", 1),
        _ => value.to_owned(),
    }
}

/// `text` with every occurrence of `value`'s user information replaced by as many `*`
/// (byte for byte, so every span into the text still holds).
fn mask_userinfo(text: &str, value: &str) -> String {
    match userinfo(value) {
        Some(info) if !info.is_empty() => text.replace(info, &"*".repeat(info.len())),
        _ => text.to_owned(),
    }
}

/// Container names, also Compose service and project names.
pub fn is_container_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Compose project names (also the pinned container name): lowercase letters, digits,
/// `-` and `_`, starting with a letter or digit (what docker-compose 1.29, Compose v2
/// and podman-compose all accept unchanged).
pub fn is_compose_project_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 63
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
}

/// Linux user names as Debian's `useradd` accepts them by default.
pub fn is_user_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 32
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
}

/// Environment variable names (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// MCP server names (`[A-Za-z0-9_-]+`): they become keys in every harness file.
pub fn is_mcp_server_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

fn is_hostname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn is_http_token(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// Why an image reference is not pinned, or `None` when it carries a concrete tag or digest.
pub fn image_pin_problem(image: &str) -> Option<&'static str> {
    if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("is empty or contains whitespace");
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        return match d.strip_prefix("sha256:") {
            Some(hex) if is_sha256(hex) => None,
            _ => Some("has a malformed digest (expected `@sha256:` and 64 lowercase hex digits)"),
        };
    }
    // The tag is after the last `:` of the last path component (a registry port
    // such as `host:5000/` is not a tag).
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        None => Some("has no tag, so it floats like `latest`"),
        Some((_, "")) => Some("has an empty tag"),
        Some((_, "latest")) => Some("uses the mutable `latest` tag"),
        Some(_) => None,
    }
}

/// Runs every semantic check of `aibox.toml`.
pub(crate) fn check_team(cfg: &AiboxToml, ch: &mut Checker<'_>) {
    check_container(cfg, ch);
    if cfg.context.mode == ContextMode::Processkit && cfg.context.packages.is_empty() {
        ch.invalid(
            &path(&["context", "packages"]),
            "`context.packages` is empty in processkit mode".into(),
            "no package tier selected",
            "name at least one tier such as \"product\", or set `context.mode = \"harness-only\"`"
                .into(),
        );
    }
    if let Some(sha) = &cfg.processkit.sha256
        && !is_sha256(sha)
    {
        ch.invalid(
            &path(&["processkit", "sha256"]),
            "`processkit.sha256` is not a SHA-256 digest".into(),
            "expected 64 lowercase hex digits",
            "copy the digest from the release's `.sha256` file (64 characters, 0-9 and a-f)".into(),
        );
    }
    check_skills(cfg, ch);
    check_harnesses(cfg, ch);
    let servers = path(&["ai", "mcp", "servers"]);
    check_servers(&cfg.ai.mcp.servers, &servers, ch);
    check_duplicate_servers(&cfg.ai.mcp.servers, &servers, None, ch);
    check_gateway(cfg, ch);
    check_repository(cfg, ch);
    check_hosts(&cfg.network.allow, &path(&["network", "allow"]), ch);
    for (i, e) in cfg.security.exceptions.iter().enumerate() {
        let p = path(&["security", "exceptions"]).index(i);
        for (field, value) in [("option", &e.option), ("reason", &e.reason)] {
            if value.trim().is_empty() {
                ch.invalid(
                    &p.key(field),
                    format!("security exception `{field}` is empty"),
                    "empty",
                    "a recorded exception names the option and explains why it is needed".into(),
                );
            }
        }
    }
}

/// One refused `[container]` value: the single rule set behind both the loader (and so
/// `aibox config validate`) and the dev container generator (`aibox apply`), so the two
/// can never disagree about what a valid container is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerIssue {
    /// The key below `[container]`, for example `uid`.
    pub key: &'static str,
    /// The refused value, as written.
    pub value: String,
    /// What is wrong, naming the value.
    pub message: String,
    /// Short label for the underlined span.
    pub label: &'static str,
    /// How to fix it.
    pub help: String,
}

/// Every problem with the scalar `[container]` values (name, host name, user, UID, base
/// image, time zone), in that order. Environment names and volumes are checked with the
/// rest of the file.
pub fn container_issues(c: &ContainerSection) -> Vec<ContainerIssue> {
    let mut out = Vec::new();
    let mut push = |key, value: &str, message: String, label, help: String| {
        out.push(ContainerIssue {
            key,
            value: value.to_owned(),
            message,
            label,
            help,
        });
    };
    if !is_container_name(&c.name) {
        push(
            "name",
            &c.name,
            format!("container name \"{}\" is not a safe identifier", c.name),
            "invalid name",
            "use letters, digits, `.`, `_` and `-`, starting with a letter or digit".into(),
        );
    }
    match &c.hostname {
        Some(h) if !is_hostname(h) => push(
            "hostname",
            h,
            format!("host name \"{h}\" is not a valid DNS name"),
            "invalid host name",
            "use letters, digits and `-` in dot-separated labels of at most 63 characters".into(),
        ),
        // Without `hostname`, the container name is the host name.
        None if c.name.len() > 63 => push(
            "hostname",
            &c.name,
            format!(
                "the container name is also the host name, and \"{}\" is longer than 63 characters",
                c.name
            ),
            "too long for a host name",
            "set `container.hostname` to a short name such as \"dev\", or shorten the name".into(),
        ),
        _ => {}
    }
    if !is_user_name(&c.user) {
        push(
            "user",
            &c.user,
            format!("user name \"{}\" is not a valid Linux user name", c.user),
            "invalid user name",
            "use lowercase letters, digits, `_` and `-`, starting with a letter or `_` \
             (at most 32 characters)"
                .into(),
        );
    }
    if (c.user == "root") != (c.uid == 0) {
        push(
            "uid",
            &c.uid.to_string(),
            format!(
                "UID {} does not fit user \"{}\": UID 0 is root, so `user = \"root\"` needs \
                 `uid = 0` and any other user a non-zero UID",
                c.uid, c.user
            ),
            "UID and user disagree",
            "use an unprivileged user with your host UID (often 1000)".into(),
        );
    }
    if let Some(why) = image_pin_problem(&c.base_image) {
        push(
            "base_image",
            &c.base_image,
            format!("base image \"{}\" {why}", c.base_image),
            "not a pinned image",
            format!(
                "pin a concrete tag or digest, for example \"{}\"",
                crate::model::default_base_image()
            ),
        );
    }
    if let Some(tz) = &c.timezone
        && (tz.is_empty()
            || !tz
                .chars()
                .all(|x| x.is_ascii_alphanumeric() || "_+-/".contains(x)))
    {
        push(
            "timezone",
            tz,
            format!("time zone \"{tz}\" is not a time zone name"),
            "invalid time zone",
            "use an IANA name such as \"Europe/Berlin\" or \"UTC\"".into(),
        );
    }
    out
}

fn check_container(cfg: &AiboxToml, ch: &mut Checker<'_>) {
    let c = &cfg.container;
    for issue in container_issues(c) {
        // A derived host name has no key of its own: underline the name.
        // A UID left at its default has no span: underline the user instead.
        let key = match issue.key {
            "hostname" if c.hostname.is_none() => "name",
            "uid" if locate(ch.root, &path(&["container", "uid"])).is_none() => "user",
            key => key,
        };
        ch.invalid(
            &path(&["container", key]),
            issue.message,
            issue.label,
            issue.help,
        );
    }
    check_env(&c.environment, &path(&["container", "environment"]), ch);
    let mut targets = Vec::new();
    let base = path(&["container", "extra_volumes"]);
    check_volumes(&c.extra_volumes, &base, &c.home(), &mut targets, ch);
}

fn check_repository(cfg: &AiboxToml, ch: &mut Checker<'_>) {
    let Some(url) = &cfg.aibox.repository else {
        return;
    };
    let scheme_ok = url.starts_with("https://") || url.starts_with("http://");
    let clean = !url
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '"');
    if !scheme_ok || !clean || url.contains('@') {
        ch.invalid(
            &path(&["aibox", "repository"]),
            format!("repository \"{url}\" is not a plain http(s) URL"),
            "invalid repository URL",
            "use the repository's web address, such as \"https://example.org/team/project\" \
             (no credentials, spaces or quotes)"
                .into(),
        );
    }
}

fn check_gateway(cfg: &AiboxToml, ch: &mut Checker<'_>) {
    let gw = &cfg.ai.mcp.gateway;
    let loopback =
        gw.host == "localhost" || gw.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        ch.invalid(
            &path(&["ai", "mcp", "gateway", "host"]),
            format!("gateway host \"{}\" is not a loopback address", gw.host),
            "must be loopback",
            "the gateway must not be reachable from the network; use \"127.0.0.1\"".into(),
        );
    }
    if gw.port == 0 {
        ch.invalid(
            &path(&["ai", "mcp", "gateway", "port"]),
            "gateway port 0 is not a fixed port".into(),
            "invalid port",
            "use a port between 1 and 65535, for example 8765".into(),
        );
    }
}

/// Runs every semantic check of `.aibox-local.toml`, plus the checks against the team
/// file when it is known (duplicate server names and volume targets).
pub(crate) fn check_local(local: &LocalToml, team: Option<&AiboxToml>, ch: &mut Checker<'_>) {
    check_env(
        &local.container.environment,
        &path(&["container", "environment"]),
        ch,
    );
    if let Some(name) = &local.container.container_name
        && !is_compose_project_name(name)
    {
        ch.invalid(
            &path(&["container", "container_name"]),
            format!("container name {name:?} is not a valid Compose project name"),
            "invalid name",
            "use up to 63 lowercase letters, digits, `-` and `_`, starting with a letter or \
             digit; or remove the key to get a name per checkout"
                .into(),
        );
    }
    let home = team.map_or_else(
        || crate::container::home(DEFAULT_USER),
        |t| t.container.home(),
    );
    let mut targets: Vec<String> = Vec::new();
    if let Some(t) = team {
        targets.extend(
            t.container
                .extra_volumes
                .iter()
                .filter_map(|v| normalise(&v.target)),
        );
    }
    check_volumes(
        &local.container.extra_volumes,
        &path(&["container", "extra_volumes"]),
        &home,
        &mut targets,
        ch,
    );
    let servers = path(&["mcp", "servers"]);
    check_servers(&local.mcp.servers, &servers, ch);
    check_duplicate_servers(
        &local.mcp.servers,
        &servers,
        team.map(|t| &t.ai.mcp.servers[..]),
        ch,
    );
    check_hosts(&local.network.allow, &path(&["network", "allow"]), ch);
    if let Some(upstream) = &local.network.upstream_proxy
        && userinfo(upstream).is_some()
    {
        ch.invalid_credentials(
            &path(&["network", "upstream_proxy"]),
            upstream,
            format!("`[network] upstream_proxy` {CREDENTIALS_PROBLEM}"),
            "write your network's HTTP proxy as `host:port`, e.g. `proxy.corp.example:3128`; \
             the egress proxy cannot pass a user name or password on to it"
                .into(),
        );
    } else if let Some(upstream) = &local.network.upstream_proxy
        && let Some(why) = upstream_proxy_problem(upstream)
    {
        ch.invalid(
            &path(&["network", "upstream_proxy"]),
            // Not echoed: a proxy address written with credentials would show them.
            format!("`[network] upstream_proxy` {why}"),
            "not host:port",
            "write your network's HTTP proxy as `host:port`, e.g. `proxy.corp.example:3128` \
             (no scheme, no user name or password)"
                .into(),
        );
    }
}

/// The allowed host names of one list: each must be a valid [`egress_host_problem`]-free
/// name, listed once.
fn check_hosts(hosts: &[String], base: &KeyPath, ch: &mut Checker<'_>) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, host) in hosts.iter().enumerate() {
        let p = base.index(i);
        if userinfo(host).is_some() {
            ch.invalid_credentials(
                &p,
                host,
                format!(
                    "allowed host {:?} {CREDENTIALS_PROBLEM}",
                    crate::diag::bounded(&without_userinfo(host), 120)
                ),
                "write the host name alone, such as `api.example.com`; the egress proxy judges \
                 names and passes no credentials"
                    .into(),
            );
        } else if let Some(why) = egress_host_problem(host) {
            ch.invalid(
                &p,
                format!("allowed host {:?} {why}", crate::diag::bounded(host, 120)),
                "not a host name",
                "write a DNS name such as `api.example.com`, or `*.example.com` for every name \
                 below it; the egress proxy judges names, so addresses, ports, schemes and \
                 paths have no place here"
                    .into(),
            );
        } else if !seen.insert(host.as_str()) {
            ch.invalid(
                &p,
                format!("allowed host {host:?} is listed twice"),
                "duplicate",
                "remove one of the two entries".into(),
            );
        }
    }
}

/// Why `host` is not an allowed-host entry, or `None` when it is one: a lowercase DNS
/// name of at least two labels (letters, digits, `-`; no label starts or ends with `-`;
/// 63 bytes per label, 253 in all), optionally `*.` in front for every name below it.
/// An IP address is refused: the proxy judges names, and an address would let anything
/// served there through.
pub fn egress_host_problem(host: &str) -> Option<&'static str> {
    let name = host.strip_prefix("*.").unwrap_or(host);
    if name.is_empty() {
        return Some("is empty");
    }
    // Before the character rules: a password's letters are not the problem.
    if userinfo(name).is_some() {
        return Some(CREDENTIALS_PROBLEM);
    }
    if name.contains("://") {
        return Some("has a scheme (write the host name alone, without `http://`)");
    }
    if name.parse::<IpAddr>().is_ok() || host.trim_matches(['[', ']']).parse::<IpAddr>().is_ok() {
        return Some("is an IP address, not a host name");
    }
    if name.len() > 253 {
        return Some("is longer than 253 characters");
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return Some("has uppercase letters (write host names in lowercase)");
    }
    let labels: Vec<&str> = name.split('.').collect();
    if labels.len() < 2 {
        return Some("has a single label (a top-level domain or a bare name)");
    }
    for label in &labels {
        if label.is_empty() || label.len() > 63 {
            return Some("has an empty label or one longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Some("has characters other than letters, digits, `-` and `.`");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some("has a label that starts or ends with `-`");
        }
    }
    if labels
        .last()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()))
    {
        return Some("ends in a numeric label");
    }
    if host.starts_with("*.") && is_public_suffix(name) {
        return Some(
            "is a wildcard directly under a public suffix (like `*.co.uk` or `*.github.io`): it \
             would allow every site registered there; name the sites instead",
        );
    }
    None
}

/// Whether `name` is itself a rule of the Public Suffix List (ICANN or private section):
/// names are registered directly below it by unrelated owners (`co.uk`, `github.io`).
/// An unknown top-level domain's implicit rule does not count (`corp.internal` is not).
fn is_public_suffix(name: &str) -> bool {
    use psl::Psl as _;
    psl::List
        .suffix(name.as_bytes())
        .is_some_and(|s| s.is_known() && s.as_bytes() == name.as_bytes())
}

/// Why a value with `user:password@` in it is refused (the value is never quoted).
pub const CREDENTIALS_PROBLEM: &str =
    "holds a user name or password (`user:password@`): credentials are refused here";

/// Why `value` is not an upstream proxy `host:port`, or `None` when it is one.
pub fn upstream_proxy_problem(value: &str) -> Option<&'static str> {
    if userinfo(value).is_some() {
        return Some(CREDENTIALS_PROBLEM);
    }
    let Some((host, port)) = value.rsplit_once(':') else {
        return Some("has no `:port`");
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || port.len() > 5 {
        return Some("has no valid port");
    }
    if !matches!(port.parse::<u32>(), Ok(1..=65535)) {
        return Some("has a port outside 1-65535");
    }
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return None;
    }
    let simple = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if simple {
        None
    } else {
        Some("is not `host:port` (a host name or IPv4 address, then a port)")
    }
}

fn check_env(env: &BTreeMap<String, String>, base: &KeyPath, ch: &mut Checker<'_>) {
    for (name, value) in env {
        let p = base.key(name);
        if !is_env_name(name) {
            ch.invalid_key(
                &p,
                format!("\"{name}\" is not a valid environment variable name"),
                "invalid name",
                "use letters, digits and `_`, not starting with a digit",
            );
        }
        if value.contains(['\n', '\r', '\0']) {
            ch.invalid(
                &p,
                format!("environment value of `{name}` contains a line break or NUL"),
                "multi-line value",
                "environment values are written one per line; put the value on one line".into(),
            );
        }
    }
}

/// Lexically normalised absolute path, or `None` when it is relative or has `..`.
fn normalise(target: &str) -> Option<String> {
    if !target.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            p => parts.push(p),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

fn overlaps(a: &str, b: &str) -> bool {
    let under = |x: &str, y: &str| y == "/" || x == y || x.starts_with(&format!("{y}/"));
    under(a, b) || under(b, a)
}

fn check_volumes(
    volumes: &[ExtraVolume],
    base: &KeyPath,
    home: &str,
    seen: &mut Vec<String>,
    ch: &mut Checker<'_>,
) {
    let mut managed = vec![WORKSPACE_DIR.to_owned()];
    managed.extend(MANAGED_HOME_ENTRIES.iter().map(|e| format!("{home}/{e}")));
    for (i, v) in volumes.iter().enumerate() {
        let p = base.index(i);
        if v.source.trim().is_empty() {
            ch.invalid(
                &p.key("source"),
                "volume source is empty".into(),
                "empty",
                "name a host path, for example \"~/datasets\"".into(),
            );
        } else if v.source.split('/').any(|c| c == "..") {
            ch.invalid(
                &p.key("source"),
                format!("volume source \"{}\" contains `..`", v.source),
                "`..` not allowed",
                "use an absolute path or a path starting with `~/` instead".into(),
            );
        }
        for (field, value) in [("source", &v.source), ("target", &v.target)] {
            if value.contains([':', ',', '\n', '\r']) {
                ch.invalid(
                    &p.key(field),
                    format!("volume {field} \"{value}\" contains `:`, `,` or a line break"),
                    "unsafe character",
                    "these characters separate mount options in Compose; rename the path".into(),
                );
            }
        }
        let t = &v.target;
        if !t.starts_with('/') {
            ch.invalid(
                &p.key("target"),
                format!("volume target \"{t}\" is not an absolute path"),
                "must start with `/`",
                format!("use an absolute container path, for example \"{home}/data\""),
            );
            continue;
        }
        let Some(norm) = normalise(t) else {
            ch.invalid(
                &p.key("target"),
                format!("volume target \"{t}\" contains `..`"),
                "`..` not allowed",
                "write the target without `..` components".into(),
            );
            continue;
        };
        if let Some(m) = managed.iter().find(|m| overlaps(&norm, m)) {
            let pr = ch
                .problem(
                    ProblemKind::Conflict,
                    &p.key("target"),
                    format!("volume target \"{t}\" overlaps `{m}`, which aibox manages"),
                    "overlaps a managed path",
                )
                .help(format!(
                    "mount somewhere that is neither inside nor above `{m}`, for example \
                     \"/mnt/data\""
                ));
            ch.problems.push(pr);
            continue;
        }
        if let Some(other) = seen.iter().find(|s| overlaps(&norm, s)) {
            let pr = ch
                .problem(
                    ProblemKind::Conflict,
                    &p.key("target"),
                    format!("volume target \"{t}\" overlaps another extra volume at `{other}`"),
                    "overlapping mount",
                )
                .help("give each extra volume its own, non-nested target");
            ch.problems.push(pr);
        }
        seen.push(norm);
    }
}

fn check_skills(cfg: &AiboxToml, ch: &mut Checker<'_>) {
    let include = &cfg.skills.include;
    for (j, skill) in cfg.skills.exclude.iter().enumerate() {
        if let Some(i) = include.iter().position(|s| s == skill) {
            let inc = path(&["skills", "include"]).index(i);
            let exc = path(&["skills", "exclude"]).index(j);
            let pr = ch
                .problem(
                    ProblemKind::Conflict,
                    &exc,
                    format!("skill \"{skill}\" is both included and excluded"),
                    "excluded here",
                )
                .also(ch.span(&inc), "included here")
                .help(format!("remove \"{skill}\" from one of the two lists"));
            ch.problems.push(pr);
        }
    }
}

fn check_harnesses(cfg: &AiboxToml, ch: &mut Checker<'_>) {
    let list = &cfg.ai.harnesses;
    for (i, h) in list.iter().enumerate() {
        if let Some(first) = list[..i].iter().position(|x| x == h) {
            let base = path(&["ai", "harnesses"]);
            let pr = ch
                .problem(
                    ProblemKind::InvalidValue,
                    &base.index(i),
                    format!("harness \"{h}\" is listed twice"),
                    "duplicate",
                )
                .also(ch.span(&base.index(first)), "first listed here")
                .help("list each harness once");
            ch.problems.push(pr);
        }
    }
}

fn check_servers(servers: &[McpServer], base: &KeyPath, ch: &mut Checker<'_>) {
    for (i, s) in servers.iter().enumerate() {
        let p = base.index(i);
        if !is_mcp_server_name(&s.name) {
            ch.invalid(
                &p.key("name"),
                format!("MCP server name \"{}\" is not a safe identifier", s.name),
                "invalid name",
                "use letters, digits, `_` and `-` only".into(),
            );
        }
        match (&s.command, &s.url) {
            (Some(_), Some(_)) => {
                let pr = ch
                    .problem(
                        ProblemKind::Conflict,
                        &p.key("url"),
                        format!("MCP server \"{}\" sets both `command` and `url`", s.name),
                        "remote server",
                    )
                    .also(ch.span(&p.key("command")), "stdio server")
                    .help("a server is either started locally (`command`) or remote (`url`); keep one");
                ch.problems.push(pr);
            }
            (None, None) => {
                let pr = Problem::new(
                    ProblemKind::MissingKey,
                    ch.src,
                    ch.span(&p),
                    format!("MCP server \"{}\" has neither `command` nor `url`", s.name),
                    "needs `command` or `url`",
                )
                .help("add `command = \"...\"` for a stdio server or `url = \"https://...\"` for a remote one");
                ch.problems.push(pr);
            }
            (None, Some(url)) => {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    ch.invalid(
                        &p.key("url"),
                        format!("MCP server URL \"{url}\" is not an http(s) URL"),
                        "expected http:// or https://",
                        "write the full URL, for example \"https://mcp.example.com/mcp\"".into(),
                    );
                }
                for field in ["args", "env"] {
                    let present = if field == "args" {
                        !s.args.is_empty()
                    } else {
                        !s.env.is_empty()
                    };
                    if present {
                        let pr = ch
                            .problem(
                                ProblemKind::Conflict,
                                &p.key(field),
                                format!("`{field}` only applies to stdio servers, but \"{}\" has a `url`", s.name),
                                "ignored for remote servers",
                            )
                            .help(format!("remove `{field}`, or use `headers` to pass values to a remote server"));
                        ch.problems.push(pr);
                    }
                }
            }
            (Some(cmd), None) => {
                if cmd.trim().is_empty() {
                    ch.invalid(
                        &p.key("command"),
                        "MCP server command is empty".into(),
                        "empty",
                        "name the program to start, for example \"npx\"".into(),
                    );
                }
                if !s.headers.is_empty() {
                    let pr = ch
                        .problem(
                            ProblemKind::Conflict,
                            &p.key("headers"),
                            format!("`headers` only apply to remote servers, but \"{}\" has a `command`", s.name),
                            "ignored for stdio servers",
                        )
                        .help("remove `headers`, or use `env` for a stdio server");
                    ch.problems.push(pr);
                }
            }
        }
        check_env(&s.env, &p.key("env"), ch);
        for name in s.headers.keys() {
            if !is_http_token(name) {
                ch.invalid_key(
                    &p.key("headers").key(name),
                    format!("\"{name}\" is not a valid HTTP header name"),
                    "invalid header name",
                    "use letters, digits and `-`, for example \"Authorization\"",
                );
            }
        }
    }
}

fn check_duplicate_servers(
    servers: &[McpServer],
    base: &KeyPath,
    team: Option<&[McpServer]>,
    ch: &mut Checker<'_>,
) {
    for (i, s) in servers.iter().enumerate() {
        let name_path = base.index(i).key("name");
        if let Some(first) = servers[..i].iter().position(|x| x.name == s.name) {
            let pr = ch
                .problem(
                    ProblemKind::Conflict,
                    &name_path,
                    format!("MCP server \"{}\" is defined twice", s.name),
                    "second definition",
                )
                .also(ch.span(&base.index(first).key("name")), "first definition")
                .help("give each server a unique name, or remove one of them");
            ch.problems.push(pr);
        } else if team.is_some_and(|t| t.iter().any(|x| x.name == s.name)) {
            let pr = ch
                .problem(
                    ProblemKind::Conflict,
                    &name_path,
                    format!(
                        "personal MCP server \"{}\" has the same name as a team server in {}",
                        s.name,
                        crate::load::AIBOX_TOML
                    ),
                    "already defined by the team",
                )
                .help("rename your personal server; team and personal servers share one namespace");
            ch.problems.push(pr);
        }
    }
}
