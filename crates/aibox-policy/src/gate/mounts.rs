//! Rules for host paths the container sees: bind mounts (short, long and `--mount`
//! syntax, read-only only when proven), host files Compose copies in, system paths,
//! sockets, homes and credential folders, where symbolic links on a path lead, and the
//! refusal of guarded files (configurations, Compose and `.env` files) that are links.

use aibox_config::hostpath::HostPath;
use aibox_config::{AiboxToml, ExtraVolume, LocalToml};

use super::{Ctx, GateInputs, str_truthy};
use crate::compose::{ComposeSources, NoSources, join_project};
use crate::finding::{Consent, Finding, Severity};
use crate::run_args::HostFile;
use crate::text::line_of;

/// Bind sources that are refused in any mode.
const SYSTEM_PATHS: [&str; 23] = [
    "/",
    "/etc",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/root",
    "/home",
    "/Users",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/var",
    "/var/lib",
    "/var/lib/docker",
    "/var/lib/containers",
    "/run",
    "/var/run",
];

/// Trees whose descendants are refused writable and warned read-only.
const SYSTEM_TREES: [&str; 13] = [
    "/etc", "/root", "/proc", "/sys", "/dev", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib64",
    "/var", "/run",
];

/// Credential and start-up locations under a home directory (agent logins, cloud and
/// registry tokens, shell start-up files that run on the host).
const CREDENTIAL_DIRS: [&str; 24] = [
    ".ssh",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".gnupg",
    ".config",
    ".netrc",
    ".git-credentials",
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".local/share/opencode",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".vault-token",
];

const ENGINE_SOCKETS: [&str; 4] = ["docker.sock", "podman.sock", "containerd.sock", "crio.sock"];

/// Checks the bind mounts of both `aibox.toml` and `.aibox-local.toml`
/// (`[[container.extra_volumes]]`), each labelled with its file.
pub fn check_project_volumes(
    config: &AiboxToml,
    local: &LocalToml,
    consent: &Consent,
    sources: &dyn ComposeSources,
) -> Vec<Finding> {
    let inputs = GateInputs::record(sources, |rec| visit_project_volumes(config, local, rec));
    inputs.judge(|closed| project_volumes(config, local, consent, closed))
}

/// What [`check_project_volumes`] reads (where the sources' links lead), read without
/// judging (the gate's traversal).
pub(super) fn visit_project_volumes(
    config: &AiboxToml,
    local: &LocalToml,
    sources: &dyn ComposeSources,
) {
    let volumes = config
        .container
        .extra_volumes
        .iter()
        .chain(&local.container.extra_volumes);
    for v in volumes {
        visit_mount(sources, Some(""), &v.source);
    }
}

/// [`check_project_volumes`]'s judgement.
pub(super) fn project_volumes(
    config: &AiboxToml,
    local: &LocalToml,
    consent: &Consent,
    sources: &dyn ComposeSources,
) -> Vec<Finding> {
    let mut out = volume_findings(
        "aibox.toml [[container.extra_volumes]]",
        &config.container.extra_volumes,
        consent,
        sources,
    );
    out.extend(volume_findings(
        ".aibox-local.toml [[container.extra_volumes]]",
        &local.container.extra_volumes,
        consent,
        sources,
    ));
    out
}

/// Checks configured bind mounts (`[[container.extra_volumes]]` of `aibox.toml` and of
/// `.aibox-local.toml`). `file` labels the findings.
pub fn check_volumes(file: &str, volumes: &[ExtraVolume], consent: &Consent) -> Vec<Finding> {
    volume_findings(file, volumes, consent, &NoSources)
}

/// [`check_volumes`] with the project at hand: relative sources (project-relative, as
/// the generated Compose file mounts them) are judged where their symbolic links lead.
fn volume_findings(
    file: &str,
    volumes: &[ExtraVolume],
    consent: &Consent,
    sources: &dyn ComposeSources,
) -> Vec<Finding> {
    let ctx = Ctx {
        file,
        text: "",
        consent,
        sources,
        dir: Some(""),
    };
    let mut out = Vec::new();
    for v in volumes {
        ctx.mount(
            &Mount {
                source: v.source.clone(),
                read_only: v.read_only,
            },
            &mut out,
        );
    }
    out
}

pub(super) struct Mount {
    pub(super) source: String,
    pub(super) read_only: bool,
}

/// Folders of sockets (engines, D-Bus, systemd, the user's runtime folder): mounted in
/// any mode they let a process connect. `/run` and `/var/run` themselves are system paths.
const SOCKET_TREES: [&str; 2] = ["/run", "/var/run"];

/// The same under a home: Docker Desktop, Colima, Lima, Rancher Desktop and `OrbStack` keep
/// their engine sockets there.
const HOME_SOCKET_DIRS: [&str; 5] = [".docker", ".colima", ".lima", ".rd", ".orbstack"];

/// Whether a resolved host path is, or is a folder that holds, sockets whatever the mount
/// mode: anything under `/run` (`/run/podman`, `/run/user/<uid>` and its D-Bus bus,
/// `/run/containerd`, …) and the engine folders of a home (the home itself is refused
/// in any mode by its own rule).
fn holds_sockets(path: &str) -> bool {
    let under = |p: &str, d: &str| p == d || p.starts_with(&format!("{d}/"));
    if SOCKET_TREES
        .iter()
        .any(|t| path.starts_with(&format!("{t}/")))
    {
        return true;
    }
    split_home(path)
        .0
        .is_some_and(|rel| HOME_SOCKET_DIRS.iter().any(|d| under(&rel, d)))
}

/// Whether a resolved host path names a container engine socket.
fn is_engine_socket(path: &str) -> bool {
    let file_name = path.rsplit('/').next().unwrap_or(path);
    let under_run = path.starts_with("/run/") || path.starts_with("/var/run/");
    ENGINE_SOCKETS.contains(&file_name) || (under_run && is_socket_name(file_name))
}

/// What the symbolic links on a host path do to it.
enum Link {
    /// No link on the way, or links that stay where the path said (inside the project).
    None,
    /// A project path whose links lead out of the project, to this host path.
    Leaves(String),
    /// A host path (absolute or in the home) whose links lead to this other host path.
    Moves(String),
    /// Links that cannot be followed.
    Broken(String),
}

struct MountClass {
    code: &'static str,
    what: &'static str,
    refuse: bool,
    credential: bool,
    is_home: bool,
}

/// Whether a home-relative path is a host credential folder or below one.
fn in_credential_dir(rel: &str) -> bool {
    CREDENTIAL_DIRS
        .iter()
        .any(|c| rel == *c || rel.starts_with(&format!("{c}/")))
}

/// Whether a bind source as a configuration writes it (`~/.ssh`, `${HOME}/.aws/config`)
/// is a host credential folder or below one (links are not followed: the gate does that
/// when it judges the mount).
pub fn is_credential_source(source: &str) -> bool {
    resolve_source(source)
        .is_some_and(|p| split_home(&p).0.as_deref().is_some_and(in_credential_dir))
}

/// Which rule a resolved bind source falls under, if any.
fn classify_mount(path: &str, read_only: bool) -> Option<MountClass> {
    let in_tree = SYSTEM_TREES
        .iter()
        .any(|t| path.starts_with(&format!("{t}/")));
    let (home_rel, is_home) = split_home(path);
    let credential = home_rel.as_deref().is_some_and(in_credential_dir);
    let (code, what, refuse) = if SYSTEM_PATHS.contains(&path) {
        (
            "aibox::policy::sensitive_mount",
            "a sensitive host system path",
            true,
        )
    } else if in_tree {
        (
            "aibox::policy::sensitive_mount",
            "inside a sensitive host system path",
            !read_only,
        )
    } else if is_home {
        // Read-only too: it holds every credential, and Docker Desktop's socket.
        (
            "aibox::policy::home_mount",
            "the host home directory (every credential, and Docker Desktop's engine socket)",
            true,
        )
    } else if credential {
        (
            "aibox::policy::credential_mount",
            "a host credential directory",
            !read_only,
        )
    } else {
        return None;
    };
    Some(MountClass {
        code,
        what,
        refuse,
        credential,
        is_home,
    })
}

/// Resolves `${VAR:-default}` interpolation and normalises the path: `~` (and `$HOME`)
/// stays a `~` prefix, absolute paths are resolved lexically. `None` when a variable
/// without a default is involved.
fn resolve_source(raw: &str) -> Option<String> {
    let mut s = raw.trim().to_owned();
    for home in [
        "${HOME}",
        "$HOME",
        "${localEnv:HOME}",
        "${localEnv:USERPROFILE}",
    ] {
        if let Some(rest) = s.strip_prefix(home) {
            s = format!("~{rest}");
        }
    }
    // The Dev Containers CLI's name for the project folder (relative paths there start at
    // the project root).
    if let Some(rest) = s.strip_prefix("${localWorkspaceFolder}") {
        s = format!(".{rest}");
    }
    let mut resolved = String::new();
    let mut rest = s.as_str();
    while let Some(pos) = rest.find('$') {
        resolved.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(inner) = after.strip_prefix('{') {
            let end = inner.find('}')?;
            let body = &inner[..end];
            let default = body
                .split_once(":-")
                .or_else(|| body.split_once('-'))
                .map(|(_, d)| d);
            resolved.push_str(default?);
            rest = &inner[end + 1..];
        } else {
            return None;
        }
    }
    resolved.push_str(rest);
    if let Some(rest) = resolved.strip_prefix('~') {
        return Some(normalise("~", rest));
    }
    if resolved.starts_with('/') {
        return Some(normalise("", &resolved));
    }
    // Relative sources are inside the project (Compose resolves them against its folder).
    Some(resolved)
}

fn is_socket_name(name: &str) -> bool {
    std::path::Path::new(name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("sock"))
}

fn normalise(prefix: &str, path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    if prefix == "~" {
        if parts.is_empty() {
            "~".to_owned()
        } else {
            format!("~/{}", parts.join("/"))
        }
    } else {
        format!("/{}", parts.join("/"))
    }
}

/// Splits a path into the part relative to a home directory (`~/x`, `/home/u/x`,
/// `/Users/u/x`, `/root/x`) and whether it is the home itself.
fn split_home(path: &str) -> (Option<String>, bool) {
    if path == "~" {
        return (None, true);
    }
    if let Some(rest) = path.strip_prefix("~/") {
        return (Some(rest.to_owned()), false);
    }
    if let Some(rest) = path.strip_prefix("/root/") {
        return (Some(rest.to_owned()), false);
    }
    for base in ["/home/", "/Users/"] {
        if let Some(rest) = path.strip_prefix(base) {
            return match rest.split_once('/') {
                Some((_, inner)) => (Some(inner.to_owned()), false),
                None => (None, true),
            };
        }
    }
    (None, false)
}

/// Whether comma-separated mount options make a mount read-only for certain: `ro` and
/// no `rw` (the kernel takes the last of them, so `bind,ro,rw` is writable).
pub(super) fn proven_read_only(options: &str) -> bool {
    let options: Vec<&str> = options.split(',').map(str::trim).collect();
    options.contains(&"ro") && !options.contains(&"rw")
}

/// `src:dst[:mode]`; `None` for anonymous and named volumes.
pub(super) fn parse_short_volume(spec: &str) -> Option<Mount> {
    let parts: Vec<&str> = spec.trim().split(':').collect();
    if parts.len() < 2 {
        return None;
    }
    let source = parts[0];
    if !(source.starts_with(['/', '.', '~', '$'])) {
        return None;
    }
    let read_only = parts.get(2).is_some_and(|m| proven_read_only(m));
    Some(Mount {
        source: source.to_owned(),
        read_only,
    })
}

/// `type=bind,source=…,target=…,readonly` (also `src`, `ro`, `readonly=true`).
pub(super) fn parse_mount_spec(spec: &str) -> Option<Mount> {
    let mut source = None;
    let mut kind = "bind";
    let mut read_only = false;
    for part in spec.split(',') {
        let (k, v) = part
            .split_once('=')
            .map_or((part.trim(), ""), |(k, v)| (k.trim(), v.trim()));
        match k {
            "source" | "src" => source = Some(v.to_owned()),
            "type" => {
                kind = match v {
                    "bind" => "bind",
                    "glob" => "glob",
                    _ => "other",
                }
            }
            "readonly" | "ro" => read_only = v.is_empty() || str_truthy(v),
            _ => {}
        }
    }
    let source = match kind {
        "bind" => source?,
        // Podman binds every host path the pattern matches: judged as a bind of the
        // folder they all lie in, the pattern's part before its first wildcard.
        "glob" => glob_root(&source?),
        _ => return None,
    };
    Some(Mount { source, read_only })
}

/// The folder every match of the glob `pattern` lies in: the pattern up to the `/`
/// before its first wildcard (`/home/*/.ssh` → `/home`), `/` or `.` when the wildcard is
/// in the first component.
fn glob_root(pattern: &str) -> String {
    // Go's `filepath.Glob` (Podman's) knows no braces; a `${...}` is a variable.
    let Some(wild) = pattern.find(['*', '?', '[']) else {
        return pattern.to_owned();
    };
    match pattern[..wild].rfind('/') {
        Some(0) => "/".to_owned(),
        Some(slash) => pattern[..slash].to_owned(),
        None => ".".to_owned(),
    }
}

/// Refuses a guarded file (a dev container configuration, a Compose or `.env` file, a
/// feature's metadata) that is, or lies under, a symbolic link: the tools follow it, and
/// the gate judges regular files of the project only. True when refused.
pub(super) fn linked_file(
    sources: &dyn ComposeSources,
    consent: &Consent,
    file: &str,
    path: &str,
    out: &mut Vec<Finding>,
) -> bool {
    let target = match sources.host_path(path) {
        HostPath::Plain => return false,
        HostPath::Project(p) => format!("`{p}`"),
        HostPath::Outside(p) => format!("`{p}`, outside the project"),
        HostPath::Unresolvable(reason) => format!("nowhere it can follow ({reason})"),
    };
    let f = Finding::new(
        "aibox::policy::symlink",
        Severity::Error,
        file,
        format!(
            "`{path}` is a symbolic link to {target}: Compose and the editor follow it, the \
             gate judges regular files only"
        ),
        "replace the link with the file itself",
    );
    out.extend(consent.judge(true, &format!("include:{path}"), f));
    true
}

/// The host path a file-reading key names (`env_file`, `configs`, build contexts):
/// `None` for URLs, `service:`/`docker-image:` contexts and unresolvable variables.
fn host_read_path(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if raw.is_empty() || raw.contains("://") || raw.starts_with("git@") {
        return None;
    }
    // `${localEnv:HOME}` and `${VAR:-/path}` hold a `:` until they are resolved.
    resolve_source(raw).filter(|p| !p.contains(':'))
}

/// Whether a resolved relative path leaves the project from the folder `dir` (absolute
/// and `~/…` paths are judged by their own rules).
fn escapes(dir: Option<&str>, path: &str) -> bool {
    dir.is_some_and(|dir| !path.starts_with(['/', '~']) && join_project(dir, path).is_none())
}

/// Where the symbolic links on `path` lead (see [`Ctx::link`]), asked of `sources`.
/// One function for the judge and the traversal, so both ask the same questions.
fn link_of(sources: &dyn ComposeSources, dir: Option<&str>, path: &str) -> Link {
    let mut queries = Vec::new();
    if path.starts_with(['/', '~']) {
        queries.push(path.to_owned());
    } else if let Some(dir) = dir {
        queries.extend(join_project(dir, path));
        // The kernel's `..` differs from Compose's only after a link: ask for the
        // path as written when what comes before the first `..` is not plain.
        let written = if dir.is_empty() {
            path.to_owned()
        } else {
            format!("{dir}/{path}")
        };
        if let Some((before, _)) = format!("{written}/").split_once("/../") {
            let before = join_project("", before).unwrap_or_default();
            if sources.host_path(&before) != HostPath::Plain {
                queries.push(written);
            }
        }
    }
    for query in queries {
        match sources.host_path(&query) {
            HostPath::Plain | HostPath::Project(_) => {}
            HostPath::Outside(target) if query.starts_with(['/', '~']) => {
                if target != query {
                    return Link::Moves(target);
                }
            }
            HostPath::Outside(target) => return Link::Leaves(target),
            HostPath::Unresolvable(reason) => return Link::Broken(reason),
        }
    }
    Link::None
}

/// The host paths [`Ctx::mount`] asks `sources` about for a bind source, asked without
/// judging (the gate's traversal, `super::inputs`).
pub(super) fn visit_mount(sources: &dyn ComposeSources, dir: Option<&str>, source: &str) {
    let Some(path) = resolve_source(source) else {
        return;
    };
    if escapes(dir, &path) {
        return;
    }
    if let Link::Moves(target) = link_of(sources, dir, &path) {
        visit_mount(sources, dir, &target);
    }
}

/// What a configuration has done with a host file (the wording of its finding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostUse {
    /// Compose or the engine copies it into the container or the image.
    Copy,
    /// The engine reads it with its own rights.
    EngineRead,
    /// The engine writes it with its own rights.
    EngineWrite,
}

impl HostUse {
    /// The words before and after the path in a finding.
    fn verb(self) -> (&'static str, &'static str) {
        match self {
            Self::Copy => ("copies", "from the host into the container"),
            Self::EngineRead => ("makes the engine read", "on the host, with its rights"),
            Self::EngineWrite => ("makes the engine write", "on the host, with its rights"),
        }
    }
}

/// The host paths [`Ctx::host_read`] asks `sources` about, asked without judging.
pub(super) fn visit_host_read(sources: &dyn ComposeSources, dir: Option<&str>, raw: &str) {
    let Some(path) = host_read_path(raw) else {
        return;
    };
    if escapes(dir, &path) {
        return;
    }
    if let Link::Moves(target) = link_of(sources, dir, &path) {
        visit_host_read(sources, dir, &target);
    }
}

impl Ctx<'_> {
    /// `volumes_from` / `--volumes-from` naming a container: every volume of something
    /// outside the project, which the gate cannot see. `who` names the asker.
    pub(super) fn volumes_from(&self, who: &str, container: &str, out: &mut Vec<Finding>) {
        let container = container.trim();
        if container.is_empty() {
            return;
        }
        let f = Finding::new(
            "aibox::policy::volumes_from_container",
            Severity::Error,
            self.file,
            format!(
                "{who} takes every volume of the container `{container}`, which is not part of \
                 this project: the gate cannot tell what it mounts"
            ),
            "mount what you need explicitly, or record the consent with a \
             `[[security.exceptions]]` entry `option = \"volumes_from:container\"`",
        )
        .at(line_of(self.text, "volumes_from").or_else(|| line_of(self.text, container)));
        self.push(true, "volumes_from:container", f, out);
    }

    /// One logging option (`logging.options`, `--log-opt`). A `path` (the `k8s-file` and
    /// Podman `json-file` drivers) or any option naming a host file or socket makes the
    /// engine write the container's output on the host, with the engine's rights, where
    /// the configuration chose; what runs in the container decides what is written.
    pub(super) fn log_option(&self, what: &str, key: &str, value: &str, out: &mut Vec<Finding>) {
        let key = key.trim();
        let value = value.trim();
        let lower = value.to_ascii_lowercase();
        let host_target = key.eq_ignore_ascii_case("path")
            || ["unix://", "unixgram://", "file://"]
                .iter()
                .any(|s| lower.starts_with(s))
            || resolve_source(value).is_some_and(|p| p.starts_with(['/', '~']));
        if !host_target {
            return;
        }
        let option = format!("logging:{}", key.to_ascii_lowercase());
        let f = Finding::new(
            "aibox::policy::log_path",
            Severity::Error,
            self.file,
            format!(
                "`{what}` `{key}={value}` makes the engine write the container's output to a \
                 host path, outside the container and the project, with the engine's rights; \
                 whatever runs in the container chooses what is written there"
            ),
            format!(
                "remove the option: the engine keeps the log in its own storage (`podman logs`, \
                 `docker logs`); to keep it, record the consent with a `[[security.exceptions]]` \
                 entry `option = \"{option}\"`"
            ),
        )
        .at(line_of(self.text, value).or_else(|| line_of(self.text, key)));
        self.push(true, &option, f, out);
    }

    /// A host path whose content Compose copies into the container or the image
    /// (`env_file`, `configs`, `secrets`, build contexts): refused when it is a sensitive
    /// system path, a home or credential location, or outside the project.
    pub(super) fn host_read(&self, what: &str, raw: &str, out: &mut Vec<Finding>) {
        self.host_file(what, raw, HostUse::Copy, out);
    }

    /// A host path the engine reads (`--authfile`, `--decryption-key`, …) or writes
    /// (`--cidfile`, `--pidfile`, …) for a `runArgs` option. A read is judged as
    /// [`Ctx::host_read`] judges one; a write is refused anywhere but inside the project:
    /// the engine writes with its own rights, where the configuration chose.
    pub(super) fn engine_file(
        &self,
        what: &str,
        kind: HostFile,
        raw: &str,
        out: &mut Vec<Finding>,
    ) {
        let how = match kind {
            HostFile::Read => HostUse::EngineRead,
            HostFile::Write => HostUse::EngineWrite,
        };
        self.host_file(what, raw, how, out);
    }

    fn host_file(&self, what: &str, raw: &str, how: HostUse, out: &mut Vec<Finding>) {
        let raw = raw.trim();
        let Some(path) = host_read_path(raw) else {
            return;
        };
        let write = how == HostUse::EngineWrite;
        let outside = escapes(self.dir, &path) || (write && path.starts_with(['/', '~']));
        if !outside {
            match self.link(&path) {
                Link::None => {}
                Link::Leaves(target) => {
                    let detail =
                        classify_mount(&target, false).map_or("outside the project", |c| c.what);
                    let (verb, place) = how.verb();
                    let message = format!(
                        "`{what}` {verb} `{path}`, a symbolic link to `{target}` ({detail}), \
                         {place}"
                    );
                    self.link_leaves(message, &target, line_of(self.text, raw), out);
                    return;
                }
                Link::Moves(target) => self.host_file(what, &target, how, out),
                Link::Broken(reason) => {
                    self.broken_link(what, &path, &reason, line_of(self.text, raw), out);
                    return;
                }
            }
        }
        let class = classify_mount(&path, false);
        if !outside && class.is_none() {
            return;
        }
        let detail = class.map_or(
            if path.starts_with(['/', '~']) {
                "a host path outside the project"
            } else {
                "a folder outside the project"
            },
            |c| c.what,
        );
        let option = format!("mount:{path}");
        let (code, fix) = if write {
            (
                "aibox::policy::host_write",
                "remove the option, or name a file inside the project",
            )
        } else {
            ("aibox::policy::host_read", "use a file inside the project")
        };
        let f = Finding::new(
            code,
            Severity::Error,
            self.file,
            {
                let (verb, place) = how.verb();
                format!("`{what}` {verb} `{path}` ({detail}) {place}")
            },
            format!(
                "{fix}; to keep it, record the consent with a `[[security.exceptions]]` entry \
                 `option = \"{option}\"`"
            ),
        )
        .at(line_of(self.text, raw));
        self.push(true, &option, f, out);
    }

    /// Where `path` (as [`resolve_source`] gives it: relative to this file's folder,
    /// absolute, or `~/…`) leads through symbolic links. A relative path is asked for both
    /// as Compose cleans it (lexically) and as written (the kernel's `..` after a link).
    fn link(&self, path: &str) -> Link {
        link_of(self.sources, self.dir, path)
    }

    /// Refuses a project path whose links lead out of the project, to `target`; the
    /// consent names the target.
    fn link_leaves(
        &self,
        message: String,
        target: &str,
        line: Option<usize>,
        out: &mut Vec<Finding>,
    ) {
        let option = format!("mount:{target}");
        let f = Finding::new(
            "aibox::policy::symlink",
            Severity::Error,
            self.file,
            message,
            format!(
                "replace the link with a real folder or file inside the project; if the target \
                 is what you mean to share, record the consent for that target with a \
                 `[[security.exceptions]]` entry `option = \"{option}\"`"
            ),
        )
        .at(line);
        self.push(true, &option, f, out);
    }

    fn broken_link(
        &self,
        what: &str,
        path: &str,
        reason: &str,
        line: Option<usize>,
        out: &mut Vec<Finding>,
    ) {
        let option = format!("mount:{path}");
        let f = Finding::new(
            "aibox::policy::symlink",
            Severity::Error,
            self.file,
            format!(
                "{what} uses `{path}`, whose symbolic links cannot be followed ({reason}), so \
                 the gate cannot tell what it reaches"
            ),
            "replace the links with real folders or files inside the project",
        )
        .at(line);
        self.push(true, &option, f, out);
    }

    /// The symbolic links on a bind source (see [`Ctx::link`]): a project path that leads
    /// out of the project is refused; a host path is judged where it leads too. True when
    /// the mount is refused here.
    fn mount_link(
        &self,
        m: &Mount,
        path: &str,
        line: Option<usize>,
        out: &mut Vec<Finding>,
    ) -> bool {
        let mode = if m.read_only { "read-only" } else { "writable" };
        match self.link(path) {
            Link::None => false,
            Link::Leaves(target) => {
                let detail = if is_engine_socket(&target) {
                    "a container engine socket"
                } else {
                    classify_mount(&target, m.read_only).map_or("outside the project", |c| c.what)
                };
                let message = format!(
                    "bind mount of `{path}` ({mode}) is a symbolic link to `{target}` ({detail}): \
                     the engine mounts the link's target"
                );
                self.link_leaves(message, &target, line, out);
                true
            }
            Link::Moves(target) => {
                self.mount(
                    &Mount {
                        source: target,
                        read_only: m.read_only,
                    },
                    out,
                );
                false
            }
            Link::Broken(reason) => {
                self.broken_link("a bind mount", path, &reason, line, out);
                true
            }
        }
    }

    /// Whether the project path a relative bind source leads to (through symbolic links
    /// that stay in the project) is the project root, `.devcontainer/` or a folder inside
    /// it. aibox's own Compose file mounts the project, with `.devcontainer/` read-only
    /// over it: that mount is not judged here, nor where the running container shows it
    /// (the files are judged before it starts).
    fn writes_devcontainer(&self, path: &str) -> bool {
        // aibox's Compose file, and the running container it makes, mount the project.
        if self.file == aibox_config::layout::COMPOSE
            || self.file == super::CONTAINER_LABEL
            || path.starts_with(['/', '~'])
        {
            return false;
        }
        let Some(written) = self.dir.and_then(|dir| join_project(dir, path)) else {
            return false;
        };
        let rel = match self.sources.host_path(&written) {
            HostPath::Plain => written,
            HostPath::Project(to) => to,
            HostPath::Outside(_) | HostPath::Unresolvable(_) => return false,
        };
        let dev = aibox_config::layout::DEVCONTAINER_DIR.trim_end_matches('/');
        rel.is_empty()
            || rel == "."
            || rel == dev
            || rel.strip_prefix(dev).is_some_and(|r| r.starts_with('/'))
    }

    /// Refuses a writable mount of `path`, which leads to the project root or into
    /// `.devcontainer/` ([`Self::writes_devcontainer`]).
    fn devcontainer_writable(
        &self,
        path: &str,
        option: &str,
        line: Option<usize>,
        out: &mut Vec<Finding>,
    ) {
        let f = Finding::new(
            "aibox::policy::devcontainer_writable",
            Severity::Error,
            self.file,
            format!(
                "bind mount of `{path}` (writable) gives the container write access to \
                 `.devcontainer/`, which the agent sees read-only: the next start by any \
                 tool reads its files (VS Code runs devcontainer.json's `initializeCommand` \
                 on the host)"
            ),
            format!(
                "mount a folder that does not hold `.devcontainer/`, or mount it read-only; \
                 to keep it, record the consent with a `[[security.exceptions]]` entry \
                 `option = \"{option}\"`"
            ),
        )
        .at(line);
        self.push(true, option, f, out);
    }

    pub(super) fn mount(&self, m: &Mount, out: &mut Vec<Finding>) {
        // After interpolation the source may not appear verbatim; its last part does.
        let line = line_of(self.text, m.source.trim()).or_else(|| {
            let tail = m.source.trim().trim_end_matches('/');
            line_of(self.text, tail.rsplit('/').next().unwrap_or(tail))
        });
        let Some(path) = resolve_source(&m.source) else {
            let f = Finding::new(
                "aibox::policy::unresolved_source",
                Severity::Warning,
                self.file,
                format!(
                    "bind source `{}` depends on a variable without a default, so the gate \
                     cannot tell what it mounts",
                    m.source.trim()
                ),
                "use a literal path or give the variable a default (`${VAR:-/path}`)",
            )
            .at(line);
            self.push(false, &format!("mount:{}", m.source.trim()), f, out);
            return;
        };
        let option = format!("mount:{path}");
        let mode = if m.read_only { "read-only" } else { "writable" };
        let escapes = escapes(self.dir, &path);
        if !escapes && self.mount_link(m, &path, line, out) {
            return;
        }
        if escapes {
            let f = Finding::new(
                "aibox::policy::sensitive_mount",
                Severity::Error,
                self.file,
                format!(
                    "bind mount of `{path}` ({mode}) reaches outside the project, into \
                     folders the gate cannot judge (a home directory, other projects)"
                ),
                format!(
                    "mount a folder inside the project; to keep it, record the consent with \
                     a `[[security.exceptions]]` entry `option = \"{option}\"`"
                ),
            )
            .at(line);
            self.push(true, &option, f, out);
            return;
        }
        if !m.read_only && self.writes_devcontainer(&path) {
            self.devcontainer_writable(&path, &option, line, out);
            return;
        }
        if is_engine_socket(&path) || holds_sockets(&path) {
            let f = Finding::new(
                "aibox::policy::engine_socket",
                Severity::Error,
                self.file,
                format!(
                    "`{path}` ({mode}) is or holds a container engine or system socket: a \
                     read-only mount still lets a process connect, and whoever can use it \
                     controls the host"
                ),
                "remove the mount; run container commands on the host",
            )
            .at(line);
            self.push(true, &option, f, out);
            return;
        }
        let Some(MountClass {
            code,
            what,
            refuse,
            credential,
            is_home,
        }) = classify_mount(&path, m.read_only)
        else {
            return;
        };
        let f = Finding::new(
            code,
            if refuse {
                Severity::Error
            } else {
                Severity::Warning
            },
            self.file,
            format!(
                "bind mount of `{path}` ({mode}) exposes {what} to everything in the container"
            ),
            if credential && !refuse {
                format!(
                    "prefer a narrowly scoped token; to keep the mount, record it with a \
                     `[[security.exceptions]]` entry `option = \"{option}\"`"
                )
            } else if credential || is_home {
                "mount only the project (or a dedicated subdirectory), read-only where possible; \
                 for credentials prefer a narrowly scoped token"
                    .to_owned()
            } else {
                "remove the mount; mount a dedicated directory instead".to_owned()
            },
        )
        .at(line);
        self.push(refuse, &option, f, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_resolve() {
        assert_eq!(resolve_source("~/.ssh/").as_deref(), Some("~/.ssh"));
        assert_eq!(resolve_source("$HOME/.aws").as_deref(), Some("~/.aws"));
        assert_eq!(
            resolve_source("${SOCK:-/var/run/docker.sock}").as_deref(),
            Some("/var/run/docker.sock")
        );
        assert_eq!(
            resolve_source("/etc/../home/x/../").as_deref(),
            Some("/home")
        );
        assert_eq!(resolve_source("${UNKNOWN}/x"), None);
        assert_eq!(resolve_source("$UNKNOWN"), None);
        assert_eq!(resolve_source("..").as_deref(), Some(".."));
    }

    #[test]
    fn homes_split() {
        assert_eq!(split_home("/home/alice"), (None, true));
        assert_eq!(
            split_home("/home/alice/.ssh"),
            (Some(".ssh".to_owned()), false)
        );
        assert_eq!(
            split_home("/Users/bob/.config/gh"),
            (Some(".config/gh".to_owned()), false)
        );
        assert_eq!(split_home("/srv/data"), (None, false));
    }
}
