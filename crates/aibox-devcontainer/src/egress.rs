//! The egress allowlist (`[network] egress = "allowlist"`): which host names the agent
//! container may reach, where each came from, and the files of the egress proxy that
//! enforces it.
//!
//! The agent sits alone on an `internal` Compose network: no route out, no other member,
//! and (the runtime creates it so on Podman) no DNS server. The proxy (Debian's
//! `tinyproxy`, pinned) is on an outside network only and listens on its own loopback; it
//! serves that port on a Unix socket in a volume it shares with the agent, and the
//! agent's main process (Debian's `socat`, pinned) relays the agent's `127.0.0.1` port to
//! that socket. So the agent has no way out but the proxy, and no DNS to tunnel through.
//! The proxy forwards HTTP and `CONNECT` requests whose host name the filter allows. It
//! never sees inside TLS: it judges the name the client asked for, default-deny, and logs
//! every refusal ("Proxying refused on filtered domain") where `doctor` reads it.
//!
//! The list is derived, never hand-kept: the catalog's `hosts` of every tool the image
//! installs (the harness CLIs' API and sign-in hosts, pinned with the tool), the hosts
//! installed skills declare, the team's `[network] allow`, and — in gitignored files
//! only — the personal `.aibox-local.toml [network] allow` and upstream proxy.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use aibox_config::{AiboxToml, EgressMode, LocalToml, Ownership, PlannedFile};

use crate::catalog::Tool;
use crate::{GENERATED_HEADER, Inputs};

/// The egress proxy's Compose service.
pub const PROXY_SERVICE: &str = aibox_config::container::EGRESS_PROXY_SERVICE;
/// The port the proxy listens on (on its loopback), and the agent's relay on its own.
pub const PROXY_PORT: u16 = 3128;
/// The internal network: the agent alone, no route out.
pub const INTERNAL_NETWORK: &str = aibox_config::container::EGRESS_NETWORKS[0];
/// The proxy's outside network.
pub const OUTSIDE_NETWORK: &str = aibox_config::container::EGRESS_NETWORKS[1];
/// The Debian package of the proxy, installed at [`PROXY_VERSION`] (only `libc6` as a
/// dependency: no init scripts, no service user).
pub const PROXY_PACKAGE: &str = "tinyproxy-bin";
/// The exact Debian version of [`PROXY_PACKAGE`] (bookworm), from the base image's
/// signed apt repository.
pub const PROXY_VERSION: &str = "1.11.1-2.1+deb12u1";
/// The Debian package that relays between TCP and the proxy's Unix socket, in the proxy
/// image and in the agent image, installed at [`RELAY_VERSION`].
pub const RELAY_PACKAGE: &str = "socat";
/// The exact Debian version of [`RELAY_PACKAGE`] (bookworm).
pub const RELAY_VERSION: &str = "1.7.4.4-2";
/// The volume shared by the proxy and the agent, holding only the proxy's socket.
pub const SOCKET_VOLUME: &str = aibox_config::container::EGRESS_SOCKET_VOLUME;
/// Where both containers mount [`SOCKET_VOLUME`] (the agent read-only).
pub const SOCKET_DIR: &str = "/run/aibox-egress";
/// The proxy's user, in its image: it starts, writes its joined configuration and runs
/// as this user.
pub const PROXY_USER: &str = "nobody";
/// The proxy's socket (mode 0666: the agent's user is any UID).
const SOCKET: &str = "/run/aibox-egress/proxy.sock";
/// What tinyproxy logs for a refused host, followed by the host name in double quotes.
pub const BLOCKED_LOG_MARKER: &str = "Proxying refused on filtered domain \"";
/// Label on the proxy service, so `doctor` finds its container under any Compose naming.
pub const PROXY_LABEL: &str = aibox_config::container::EGRESS_PROXY_LABEL;
/// Where the proxy container sees `.devcontainer/aibox-egress/` (mounted read-only).
pub const PROXY_ETC: &str = "/etc/aibox-egress";
/// The agent's read-only view of `.devcontainer/` (the Compose files' own folder, as
/// Compose names a source relative to them), mounted over its place in the workspace in
/// every egress mode.
pub const AGENT_RO_SOURCE: &str = ".";

/// Where the agent sees `.devcontainer/` inside its workspace mount.
pub fn agent_ro_target() -> String {
    format!(
        "{}/{}",
        aibox_config::container::WORKSPACE_DIR,
        aibox_config::layout::DEVCONTAINER_DIR.trim_end_matches('/')
    )
}

/// Where the proxy joins the team's and the personal files at start (a tmpfs).
const RUN_DIR: &str = "/tmp/aibox-egress";
/// The filter the running proxy enforces: `egress.filter` then `egress.local.filter`,
/// joined at its start (`doctor` compares it with the files).
pub const RUN_FILTER: &str = "/tmp/aibox-egress/filter";
/// The configuration the running proxy enforces: `egress.conf` then `egress.local.conf`.
pub const RUN_CONF: &str = "/tmp/aibox-egress/tinyproxy.conf";

/// Where an allowed host comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    /// A catalog tool the image installs (`hosts` of its entry), at its pinned version.
    Tool {
        /// The catalog name.
        name: String,
        /// Its pinned version.
        version: String,
    },
    /// An installed skill that declares the host.
    Skill {
        /// The skill's name.
        name: String,
    },
    /// `aibox.toml [network] allow`.
    Team,
    /// `.aibox-local.toml [network] allow` (personal, gitignored files only).
    Personal,
}

impl Origin {
    /// A short description for `aibox network list` and the lock, e.g. `tool claude-code
    /// 2.1.197`.
    pub fn describe(&self) -> String {
        match self {
            Self::Tool { name, version } => format!("tool {name} {version}"),
            Self::Skill { name } => format!("skill {name}"),
            Self::Team => "aibox.toml [network] allow".to_owned(),
            Self::Personal => ".aibox-local.toml [network] allow".to_owned(),
        }
    }

    /// Whether the entry may be written to a committed file.
    pub fn is_personal(&self) -> bool {
        matches!(self, Self::Personal)
    }
}

/// The hosts one installed skill declares (read by the skill review).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillHosts {
    /// The skill's name.
    pub skill: String,
    /// Host names it declares.
    pub hosts: Vec<String>,
}

/// The effective allowlist: host name → every origin that asks for it, sorted by host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    /// Each allowed host with its origins (sorted, deduplicated).
    pub entries: BTreeMap<String, Vec<Origin>>,
}

impl Allowlist {
    /// Hosts that a committed file may carry: those with at least one non-personal origin.
    pub fn team_hosts(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|(_, o)| o.iter().any(|o| !o.is_personal()))
            .map(|(h, _)| h.as_str())
    }

    /// Hosts only the personal overlay asks for.
    pub fn personal_hosts(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|(_, o)| o.iter().all(Origin::is_personal))
            .map(|(h, _)| h.as_str())
    }
}

/// Derives the allowlist from the tools the image installs, the skills' declared hosts
/// and both configuration files. Entries are already validated (the loader checks both
/// files, `Catalog::parse` the catalog); a skill's host that is no valid name (the skill
/// review reports it) is left out, never widened into a pattern.
pub fn allowlist(
    config: &AiboxToml,
    local: &LocalToml,
    tools: &[&Tool],
    skills: &[SkillHosts],
) -> Allowlist {
    let tool_hosts = tools.iter().flat_map(|tool| {
        let origin = Origin::Tool {
            name: tool.name.clone(),
            version: tool.version.clone(),
        };
        tool.hosts.iter().map(move |h| (h, origin.clone()))
    });
    let skill_hosts = skills.iter().flat_map(|skill| {
        let origin = Origin::Skill {
            name: skill.skill.clone(),
        };
        skill.hosts.iter().map(move |h| (h, origin.clone()))
    });
    let team = config.network.allow.iter().map(|h| (h, Origin::Team));
    let personal = local.network.allow.iter().map(|h| (h, Origin::Personal));
    let mut entries: BTreeMap<String, Vec<Origin>> = BTreeMap::new();
    for (host, origin) in tool_hosts.chain(skill_hosts).chain(team).chain(personal) {
        if aibox_config::validate::egress_host_problem(host).is_some() {
            continue;
        }
        let list = entries.entry(host.clone()).or_default();
        if !list.contains(&origin) {
            list.push(origin);
            list.sort();
        }
    }
    Allowlist { entries }
}

/// The egress proxy's files, in `allowlist` mode only: its Dockerfile, configuration and
/// the team's filter (committed), and the personal filter and upstream line (gitignored,
/// empty when unset, so the build's `COPY` finds the same files in every checkout).
pub(crate) fn planned_files(inputs: &Inputs<'_>, tools: &[&Tool]) -> Vec<PlannedFile> {
    use crate::{
        EGRESS_CONF_PATH, EGRESS_DOCKERFILE_PATH, EGRESS_FILTER_PATH, EGRESS_LOCAL_CONF_PATH,
        EGRESS_LOCAL_FILTER_PATH,
    };
    if inputs.config.network.egress != EgressMode::Allowlist {
        return Vec::new();
    }
    let list = allowlist(inputs.config, inputs.local, tools, inputs.skill_hosts);
    vec![
        PlannedFile::generated(
            EGRESS_DOCKERFILE_PATH,
            render_dockerfile(&inputs.config.container.base_image),
        ),
        PlannedFile::generated(EGRESS_CONF_PATH, render_conf()),
        PlannedFile::generated(EGRESS_FILTER_PATH, render_filter(&list)),
        PlannedFile::new(
            EGRESS_LOCAL_CONF_PATH,
            render_local_conf(inputs.local),
            Ownership::LocalState,
        ),
        PlannedFile::new(
            EGRESS_LOCAL_FILTER_PATH,
            render_local_filter(&list),
            Ownership::LocalState,
        ),
    ]
}

/// The filter line (a POSIX extended regular expression, matched case-insensitively
/// against the requested host name) of one allowed entry: the exact name, or for
/// `*.name` one or more labels in front of it.
pub fn filter_pattern(host: &str) -> String {
    let (wild, name) = match host.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, host),
    };
    let escaped = name.replace('.', "\\.");
    if wild {
        format!("^([a-z0-9-]+\\.)+{escaped}$")
    } else {
        format!("^{escaped}$")
    }
}

/// `egress.filter` (committed): one pattern per team host. The proxy reads the
/// concatenation of this file and the personal one; a line that is a comment is ignored.
pub(crate) fn render_filter(list: &Allowlist) -> String {
    let mut out = format!(
        "# {GENERATED_HEADER}\n# Allowed host names (`aibox network list` shows where each comes from).\n"
    );
    for host in list.team_hosts() {
        let _ = writeln!(out, "{}", filter_pattern(host));
    }
    out
}

/// `egress.local.filter` (gitignored): the personal hosts only.
pub(crate) fn render_local_filter(list: &Allowlist) -> String {
    let mut out = String::new();
    let mut hosts = list.personal_hosts().peekable();
    if hosts.peek().is_some() {
        out.push_str("# generated by aibox from .aibox-local.toml [network] allow; personal\n");
    }
    for host in hosts {
        let _ = writeln!(out, "{}", filter_pattern(host));
    }
    out
}

/// `egress.conf` (committed): tinyproxy, default-deny by host name, `CONNECT` to 443 only,
/// logging refusals to its standard output.
pub(crate) fn render_conf() -> String {
    format!(
        "# {GENERATED_HEADER}\n\
         # The egress proxy (tinyproxy): forwards HTTP and CONNECT requests whose host name\n\
         # the filter allows, refuses everything else and logs the refusal. No TLS is\n\
         # terminated here. It listens on its container's loopback only: the agent reaches\n\
         # it through the Unix socket the container serves in a shared volume. The personal\n\
         # upstream proxy, if any, is appended when the proxy starts.\n\
         Port {PROXY_PORT}\n\
         Listen 127.0.0.1\n\
         Timeout 600\n\
         MaxClients 100\n\
         LogLevel Notice\n\
         Filter \"{RUN_DIR}/filter\"\n\
         FilterType ere\n\
         FilterDefaultDeny Yes\n\
         FilterURLs Off\n\
         ConnectPort 443\n\
         DisableViaHeader Yes\n\
         XTinyproxy No\n"
    )
}

/// `egress.local.conf` (gitignored): the personal upstream proxy line, or nothing.
pub(crate) fn render_local_conf(local: &LocalToml) -> String {
    local
        .network
        .upstream_proxy
        .as_deref()
        .map(|up| {
            format!(
                "# generated by aibox from .aibox-local.toml [network] upstream_proxy; personal\n\
                 Upstream http {up}\n"
            )
        })
        .unwrap_or_default()
}

/// A `RUN` step installing Debian `packages` at their exact versions from the base
/// image's signed apt repository, failing with what `who` needs when one is missing. The
/// egress proxy's image and the agent's (in `allowlist` mode) share it.
pub(crate) fn apt_pinned_step(out: &mut String, who: &str, packages: &[(&str, &str)]) {
    let pins: Vec<String> = packages.iter().map(|(p, v)| format!("{p}={v}")).collect();
    let named: Vec<String> = packages.iter().map(|(p, v)| format!("{p} {v}")).collect();
    let _ = writeln!(
        out,
        "RUN set -eu; \\\n    apt-get update; \\\n    DEBIAN_FRONTEND=noninteractive apt-get \
         install -y --no-install-recommends {} || {{ \\\n        \
         echo \"aibox: {who} needs Debian's {} (bookworm); \
         is container.base_image a Debian bookworm image?\" >&2; exit 1; }}; \\\n    \
         rm -rf /var/lib/apt/lists/*",
        pins.join(" "),
        named.join(" and ")
    );
}

/// The proxy image's Dockerfile: the project's base image plus the pinned Debian
/// packages, running as `nobody`, so the service needs no capability at all. The socket
/// folder belongs to `nobody` in the image, so the volume mounted there does too (the
/// engines give a new volume the owner of the folder it is first mounted on).
pub(crate) fn render_dockerfile(base_image: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {GENERATED_HEADER}");
    out.push_str(
        "# The egress proxy of `[network] egress = \"allowlist\"`: Debian's tinyproxy, and socat\n\
         # serving it on a Unix socket, at pinned versions from the base image's signed apt\n\
         # repository.\n",
    );
    let _ = writeln!(out, "FROM {base_image}");
    out.push_str("USER root\n");
    apt_pinned_step(
        &mut out,
        "the egress proxy",
        &[
            (PROXY_PACKAGE, PROXY_VERSION),
            (RELAY_PACKAGE, RELAY_VERSION),
        ],
    );
    let _ = writeln!(
        out,
        "RUN install -d -o nobody -g nogroup -m 0755 {SOCKET_DIR}"
    );
    // The configuration is mounted, not copied: a changed list recreates the container
    // (the Compose files' digest) without rebuilding an image. tinyproxy reads one file
    // of each kind, so the team's and the personal ones (gitignored; absent in a fresh
    // clone) are joined at start, in the writable /tmp.
    out.push_str(
        "# The configuration is mounted at start (see docker-compose.yml); the team's and the\n\
         # personal files are joined in /tmp.\n",
    );
    let _ = writeln!(out, "USER {PROXY_USER}");
    let _ = writeln!(
        out,
        "CMD [\"sh\", \"-c\", \"set -eu; d={RUN_DIR}; mkdir -p $d; \
         cat {PROXY_ETC}/egress.filter > $d/filter; \
         if [ -f {PROXY_ETC}/egress.local.filter ]; then cat {PROXY_ETC}/egress.local.filter >> $d/filter; fi; \
         cat {PROXY_ETC}/egress.conf > $d/tinyproxy.conf; \
         if [ -f {PROXY_ETC}/egress.local.conf ]; then cat {PROXY_ETC}/egress.local.conf >> $d/tinyproxy.conf; fi; \
         socat UNIX-LISTEN:{SOCKET},fork,unlink-early,mode=0666 TCP:127.0.0.1:{PROXY_PORT} & \
         exec tinyproxy -d -c $d/tinyproxy.conf\"]"
    );
    out
}

/// The Debian mirror `apt-get` reaches in the build: Debian's default sources, which the
/// default base image (`debian:bookworm`) names. Another base image may name others.
pub const DEBIAN_MIRROR: &str = "deb.debian.org";
/// The registry `uv pip install` reads the locked MCP environments from (hash-pinned
/// requirements, no index named): the Python Package Index and its file host.
pub const PYPI_HOSTS: [&str; 2] = ["pypi.org", "files.pythonhosted.org"];

/// The registries the image builds reach, host → what needs it: the Debian mirror for
/// the catalog's apt packages (and the egress proxy's and relay's when `proxy_image`),
/// the host of every tool download, the Python Package Index for the locked MCP
/// environments and the registries the locked npm trees resolve from. Compose builds
/// with the host's network, so these are never on the agent's allowlist; `aibox network
/// list` and the lock show them.
pub fn build_registries(
    tools: &[&Tool],
    python_envs: &[crate::PythonEnv],
    npm_envs: &[crate::NpmEnv],
    proxy_image: bool,
) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |host: &str, origin: String| {
        let list = out.entry(host.to_owned()).or_default();
        if !list.contains(&origin) {
            list.push(origin);
        }
    };
    for tool in tools {
        if !tool.apt.is_empty() {
            add(
                DEBIAN_MIRROR,
                format!("apt: tool {} {}", tool.name, tool.version),
            );
        }
        for artifact in &tool.artifact {
            if let Some(host) = url_host(&crate::tools::download_url(artifact)) {
                add(
                    host,
                    format!("download: tool {} {}", tool.name, tool.version),
                );
            }
        }
    }
    if proxy_image {
        add(
            DEBIAN_MIRROR,
            format!("apt: egress proxy {PROXY_PACKAGE} {PROXY_VERSION}"),
        );
        add(
            DEBIAN_MIRROR,
            format!("apt: egress relay {RELAY_PACKAGE} {RELAY_VERSION}"),
        );
    }
    if !python_envs.is_empty() {
        for host in PYPI_HOSTS {
            add(
                host,
                "uv: locked MCP environments (aibox.lock [mcp])".to_owned(),
            );
        }
    }
    for env in npm_envs {
        for url in env
            .package_lock
            .split("\"resolved\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').nth(1))
        {
            if let Some(host) = url_host(url) {
                add(
                    host,
                    "npm: locked MCP npm packages (aibox.lock [mcp.npm])".to_owned(),
                );
            }
        }
    }
    out
}

/// The host of an `http(s)://` URL (no port, no credentials).
fn url_host(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?.split(':').next()?;
    (!host.is_empty()).then_some(host)
}

/// The proxy URL the agent's `HTTP_PROXY`/`HTTPS_PROXY` name: its own loopback, where
/// its main process relays to the proxy's socket.
pub fn proxy_url() -> String {
    format!("http://127.0.0.1:{PROXY_PORT}")
}

/// The agent's main process in `allowlist` mode (instead of `sleep infinity`): the relay
/// from its loopback port to the proxy's socket, one connection per child. If it stops,
/// the container stops: without it the agent has no way out at all.
pub(crate) fn agent_command() -> [String; 3] {
    [
        RELAY_PACKAGE.to_owned(),
        format!("TCP-LISTEN:{PROXY_PORT},bind=127.0.0.1,reuseaddr,fork"),
        format!("UNIX-CONNECT:{SOCKET}"),
    ]
}

/// Environment of the agent in `allowlist` mode: both spellings of the proxy variables
/// (tools read either), loopback exempt.
pub(crate) fn agent_environment() -> Vec<(&'static str, String)> {
    let url = proxy_url();
    let no_proxy = "localhost,127.0.0.1,::1".to_owned();
    vec![
        ("HTTPS_PROXY", url.clone()),
        ("HTTP_PROXY", url.clone()),
        ("NO_PROXY", no_proxy.clone()),
        ("https_proxy", url.clone()),
        ("http_proxy", url),
        ("no_proxy", no_proxy),
    ]
}

/// Whether the mode puts the agent alone on the internal network.
pub(crate) fn isolated(mode: EgressMode) -> bool {
    mode != EgressMode::Open
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, hosts: &[&str]) -> Tool {
        let text = format!(
            "[tool.{name}]\nversion = \"1.2.3\"\nsummary = \"s\"\nverification = \"apt-signed\"\n\
             apt = [\"x\"]\nhosts = {hosts:?}\n"
        );
        let catalog = crate::catalog::Catalog::parse(&text).unwrap();
        catalog.get(name).unwrap().clone()
    }

    #[test]
    fn every_origin_is_kept_and_personal_hosts_stay_personal() {
        let config: AiboxToml = toml::from_str(
            "[container]\nname = \"d\"\n[network]\negress = \"allowlist\"\n\
             allow = [\"api.example.com\", \"*.cdn.example.com\"]\n",
        )
        .unwrap();
        let local: LocalToml =
            toml::from_str("[network]\nallow = [\"api.example.com\", \"me.example.net\"]\n")
                .unwrap();
        let cli = tool("cli", &["api.example.com", "auth.example.com"]);
        let skills = [SkillHosts {
            skill: "search".into(),
            hosts: vec!["search.example.org".into(), "10.0.0.1".into(), "x".into()],
        }];
        let list = allowlist(&config, &local, &[&cli], &skills);
        let api = &list.entries["api.example.com"];
        assert_eq!(
            api,
            &[
                Origin::Tool {
                    name: "cli".into(),
                    version: "1.2.3".into()
                },
                Origin::Team,
                Origin::Personal
            ]
        );
        assert_eq!(
            list.entries["search.example.org"],
            [Origin::Skill {
                name: "search".into()
            }]
        );
        // A skill's address or bare name is never widened into an entry.
        assert!(!list.entries.contains_key("10.0.0.1") && !list.entries.contains_key("x"));
        assert_eq!(
            list.personal_hosts().collect::<Vec<_>>(),
            ["me.example.net"]
        );
        assert!(!list.team_hosts().any(|h| h == "me.example.net"));
        assert_eq!(
            Origin::Tool {
                name: "cli".into(),
                version: "1.2.3".into()
            }
            .describe(),
            "tool cli 1.2.3"
        );
    }

    #[test]
    fn build_registries_come_from_what_the_build_fetches() {
        let apt = tool("git", &[]);
        let text = "[tool.uv]\nversion = \"0.1\"\nsummary = \"s\"\nverification = \"sha256\"\n\
                    [[tool.uv.artifact]]\nurl = \"https://files.example.org:8443/uv.tar.gz\"\n\
                    sha256 = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\n\
                    bin = { uv = \"uv\" }\n";
        let catalog = crate::catalog::Catalog::parse(text).unwrap();
        let uv = catalog.get("uv").unwrap();
        let npm = crate::NpmEnv {
            id: "1".into(),
            servers: vec!["memory".into()],
            package_json: "{}".into(),
            package_lock: "{\"packages\": {\"node_modules/a\": {\"resolved\": \"https://npm.corp.example/a/-/a-1.tgz\"}, \
                           \"node_modules/b\": {\"resolved\": \"https://registry.npmjs.org/b/-/b-2.tgz\"}}}"
                .into(),
        };
        let python = crate::PythonEnv {
            id: "2".into(),
            servers: vec!["processkit-x".into()],
            requirements: "x==1 --hash=sha256:00\n".into(),
        };
        let hosts = build_registries(&[&apt, uv], &[python], &[npm], true);
        assert_eq!(
            hosts.keys().map(String::as_str).collect::<Vec<_>>(),
            [
                "deb.debian.org",
                "files.example.org",
                "files.pythonhosted.org",
                "npm.corp.example",
                "pypi.org",
                "registry.npmjs.org"
            ]
        );
        assert_eq!(
            hosts["deb.debian.org"],
            [
                "apt: tool git 1.2.3",
                "apt: egress proxy tinyproxy-bin 1.11.1-2.1+deb12u1",
                "apt: egress relay socat 1.7.4.4-2"
            ]
        );
        assert_eq!(hosts["files.example.org"], ["download: tool uv 0.1"]);
        assert!(
            build_registries(&[uv], &[], &[], false)
                .keys()
                .eq(["files.example.org"])
        );
    }

    /// `doctor` reads what the running proxy enforces at these paths: they are the ones
    /// the proxy's start writes (`$d` is [`RUN_DIR`]) and its configuration names.
    #[test]
    fn the_run_files_are_where_the_proxy_writes_them() {
        let cmd = render_dockerfile("debian:bookworm");
        assert_eq!(RUN_FILTER, format!("{RUN_DIR}/filter"));
        assert_eq!(RUN_CONF, format!("{RUN_DIR}/tinyproxy.conf"));
        assert!(cmd.contains(&format!("d={RUN_DIR};")), "{cmd}");
        assert!(cmd.contains("> $d/filter;") && cmd.contains("> $d/tinyproxy.conf;"));
        assert!(render_conf().contains(&format!("Filter \"{RUN_FILTER}\"")));
    }

    #[test]
    fn filter_patterns_match_only_the_name_or_names_below_it() {
        assert_eq!(filter_pattern("api.example.com"), "^api\\.example\\.com$");
        assert_eq!(
            filter_pattern("*.example.com"),
            "^([a-z0-9-]+\\.)+example\\.com$"
        );
    }

    #[test]
    fn the_catalog_refuses_a_bad_host() {
        let text = "[tool.t]\nversion = \"1\"\nsummary = \"s\"\nverification = \"apt-signed\"\n\
                    apt = [\"x\"]\nhosts = [\"1.2.3.4\"]\n";
        let err = crate::catalog::Catalog::parse(text).unwrap_err();
        assert!(err.to_string().contains("IP address"), "{err}");
    }
}
