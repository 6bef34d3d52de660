//! The policy gate for dangerous container options (security model §8).
//!
//! The same rules run over every place an option can come from: Compose files (the
//! generated one and the user-owned override), `devcontainer.json` (its keys, `runArgs`
//! and `mounts`) and the configured extra volumes. Refused options block `apply`/`up`
//! unless a `[[security.exceptions]]` entry (or the dedicated seccomp key) records the
//! owner's consent; warned options never block.

use std::fmt::Write as _;

use aibox_config::hostpath::HostPath;
use aibox_config::{AiboxToml, ExtraVolume, LocalToml, Ownership, PlannedFile};
use serde_json::Value as Json;
use serde_norway::Value as Yaml;

use std::collections::BTreeMap;

use serde_norway::value::Mapping;

use crate::PolicyError;
use crate::compose::{
    ComposeSources, NoSources, dir_of, interpolate_tree, join_project, normalise_yaml,
    parse_env_file, variables_in, yaml_tags,
};
use crate::finding::{Consent, Finding, Severity};
use crate::seccomp::PROFILE_PATH;
use crate::secrets::{TextKind, scan_secrets};
use crate::text::{line_of, line_of_all, parse_jsonc};

/// Capabilities that are refused: each hands out root-equivalent powers.
const BROAD_CAPS: [&str; 8] = [
    "SYS_ADMIN",
    "ALL",
    "SYS_MODULE",
    "SYS_RAWIO",
    "DAC_READ_SEARCH",
    "BPF",
    "MAC_ADMIN",
    "MAC_OVERRIDE",
];

/// Capabilities that reach past the container (the host's network, clock, kernel log or
/// other processes): refused until consent names each one, with why it matters.
const HOST_CAPS: [(&str, &str); 14] = [
    (
        "NET_ADMIN",
        "configures interfaces, routes and firewall rules (the host's, when the network \
         namespace is shared) and opens kernel attack surface",
    ),
    (
        "SYS_PTRACE",
        "reads and changes the memory of other processes, and lets a process step around \
         its seccomp filter on older kernels",
    ),
    (
        "NET_RAW",
        "opens raw sockets: spoofed packets, ARP and DNS poisoning of the other containers \
         and the host on the same network",
    ),
    (
        "SYS_TIME",
        "sets the host's clock, which no namespace isolates",
    ),
    (
        "SYSLOG",
        "reads and clears the kernel log, which leaks kernel addresses",
    ),
    ("SYS_BOOT", "loads a new kernel with kexec"),
    ("AUDIT_CONTROL", "changes the host's audit rules"),
    ("AUDIT_READ", "reads the host's audit log"),
    (
        "PERFMON",
        "observes the kernel and other processes through performance events",
    ),
    (
        "SYS_PACCT",
        "turns process accounting of the host on and off",
    ),
    (
        "SYS_RESOURCE",
        "lifts resource limits, quotas and reserved disk space meant to protect the host",
    ),
    (
        "LINUX_IMMUTABLE",
        "changes the immutable and append-only flags of files",
    ),
    (
        "SYS_TTY_CONFIG",
        "reconfigures terminals, including the host's virtual consoles",
    ),
    (
        "CHECKPOINT_RESTORE",
        "restores processes with chosen ids and reads other processes' state",
    ),
];

/// Capabilities the engines grant by default or that only affect the container itself:
/// adding one is warned, never refused. Anything in neither list is refused as unknown.
const NARROW_CAPS: [&str; 19] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
    "MKNOD",
    "AUDIT_WRITE",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_NICE",
    "LEASE",
    "NET_BROADCAST",
    "WAKE_ALARM",
];

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

/// Path of the generated `devcontainer.json`.
pub const DEVCONTAINER_PATH: &str = aibox_config::layout::DEVCONTAINER_JSON;

/// The whole gate over a plan, as `apply` runs it before writing anything: the planned
/// Compose file and `devcontainer.json`, the existing override (`override_text`, read by
/// the caller), the configured volumes of both configuration files, and the secret scan
/// over every planned file that is committed (everything but local state).
///
/// ```
/// use aibox_config::{LocalToml, Ownership, PlannedFile, parse_aibox_toml};
/// let config = parse_aibox_toml("[container]\nname = \"demo\"\n", "aibox.toml")?;
/// let compose = PlannedFile::new(
///     aibox_config::layout::COMPOSE,
///     "services:\n  demo:\n    image: demo\n    privileged: true\n",
///     Ownership::Generated,
/// );
/// let refused = aibox_policy::check_plan(
///     &config,
///     &LocalToml::default(),
///     &[compose],
///     None,
///     &aibox_policy::NoSources,
/// );
/// assert!(matches!(refused, Err(aibox_policy::PolicyError::Gate { .. })));
/// # Ok::<(), aibox_config::ConfigError>(())
/// ```
///
/// # Errors
/// [`PolicyError::Gate`] when any finding is an error; otherwise the warnings.
pub fn check_plan(
    config: &AiboxToml,
    local: &LocalToml,
    files: &[PlannedFile],
    override_text: Option<&str>,
    disk: &dyn ComposeSources,
) -> Result<Vec<Finding>, PolicyError> {
    let consent = Consent::from_config(config);
    let mut out = Vec::new();
    // A scaffold-once override that already exists is not rewritten: its current text is
    // what Compose will use.
    let skip = |f: &PlannedFile| {
        f.path == aibox_config::layout::COMPOSE_OVERRIDE
            && f.ownership == Ownership::ScaffoldOnce
            && override_text.is_some()
    };
    let mut planned = BTreeMap::new();
    for f in files.iter().filter(|f| !skip(f)) {
        let text = String::from_utf8_lossy(&f.contents);
        planned.insert(f.path.to_string(), text.clone().into_owned());
        if f.ownership != Ownership::LocalState && !is_local_state(f.path.as_str()) {
            out.extend(scan_secrets(
                f.path.as_str(),
                &text,
                TextKind::from_path(f.path.as_str()),
            ));
        }
    }
    let planned_override = planned.contains_key(aibox_config::layout::COMPOSE_OVERRIDE);
    if let (Some(text), false) = (override_text, planned_override) {
        out.extend(scan_secrets(
            aibox_config::layout::COMPOSE_OVERRIDE,
            text,
            TextKind::Yaml,
        ));
        planned.insert(
            aibox_config::layout::COMPOSE_OVERRIDE.to_owned(),
            text.to_owned(),
        );
    }
    // Compose sees the planned files, and whatever else is on disk.
    let overlay = Overlay {
        planned: &planned,
        disk,
    };
    out.extend(check_compose_setup(&overlay, &consent));
    out.extend(crate::egress::check_egress(config, &consent, &overlay));
    out.extend(check_container_user(config, &consent));
    point_secrets_at_source(&mut out, files, disk);
    out.extend(check_project_volumes(config, local, &consent, disk));
    let errors: Vec<&Finding> = out
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    if errors.is_empty() {
        return Ok(out);
    }
    let mut files: Vec<&str> = errors.iter().map(|f| f.file.as_str()).collect();
    files.sort_unstable();
    files.dedup();
    let summary = format!(
        "refusing to write the plan: {} security rule(s) broken in {}",
        errors.len(),
        files.join(", ")
    );
    let mut details = String::new();
    for f in &errors {
        let _ = writeln!(details, "{f}");
    }
    details.push_str(
        "Nothing was written. `aibox doctor` lists the same findings; consent goes into \
         aibox.toml [security], never through --yes.",
    );
    Err(PolicyError::Gate {
        summary,
        details,
        findings: out,
    })
}

/// Label of findings about the running container.
pub const CONTAINER_LABEL: &str = "running container";

/// Checks what the engine actually runs: the `container inspect` JSON of Podman or Docker
/// (`HostConfig.Privileged`, `CapAdd`, `SecurityOpt`, `NetworkMode`, `PidMode`,
/// `IpcMode`, `UTSMode`, `Mounts`, `Config.User`) under the same rules and consents as the
/// files. Bind mounts from inside `project_root` (an absolute host path) are the
/// project's own, unless `sources` says their symbolic links lead out of it (engines
/// may report a bind source as Compose wrote it). Text that is not inspect JSON is
/// refused: the state is unknown.
pub fn check_container_state(
    inspect_json: &str,
    project_root: &str,
    consent: &Consent,
    sources: &dyn ComposeSources,
) -> Vec<Finding> {
    let ctx = Ctx {
        file: CONTAINER_LABEL,
        text: "",
        consent,
        sources,
        dir: Some(""),
    };
    let doc: Json = match serde_json::from_str(inspect_json) {
        Ok(doc) => doc,
        Err(e) => return vec![unparsable(CONTAINER_LABEL, "inspect JSON", &e.to_string())],
    };
    let Some(c) = doc.as_array().and_then(|a| a.first()).or(Some(&doc)) else {
        return Vec::new();
    };
    let host = &c["HostConfig"];
    let mut out = Vec::new();
    if host["Privileged"].as_bool() == Some(true) {
        ctx.privileged(None, &mut out);
    }
    for cap in json_strings(host.get("CapAdd")) {
        ctx.cap(&cap, &mut out);
    }
    for opt in json_strings(host.get("SecurityOpt")) {
        match opt.split_once(['=', ':']) {
            // Docker shows an applied profile by its JSON text: only the consent counts.
            Some((k, v))
                if k.eq_ignore_ascii_case("seccomp") && v.trim_start().starts_with('{') =>
            {
                if !consent.seccomp_profile {
                    ctx.seccomp_opt("custom profile", None, &mut out);
                }
            }
            _ => ctx.security_opt(&opt, &mut out),
        }
    }
    // Not the user and cgroup namespaces: engines report `host` there by default (rootful
    // engines, cgroup v1), so the state says nothing about the files.
    for (field, key) in [
        ("NetworkMode", "network_mode"),
        ("PidMode", "pid"),
        ("IpcMode", "ipc"),
        ("UTSMode", "uts"),
    ] {
        if let Some(value) = host[field].as_str() {
            ctx.namespace(key, value, &mut out);
        }
    }
    if let Some(user) = c["Config"]["User"].as_str() {
        ctx.user(user, &mut out);
    }
    let root = project_root.trim_end_matches('/');
    for m in c["Mounts"].as_array().into_iter().flatten() {
        let kind = m["Type"].as_str().unwrap_or("bind");
        let Some(source) = m["Source"].as_str() else {
            continue;
        };
        let inside = if root.is_empty() {
            None
        } else if source == root {
            Some("")
        } else {
            source.strip_prefix(&format!("{root}/"))
        };
        if kind != "bind" {
            continue;
        }
        // A project path is judged by where its links lead (a plain one is the project's).
        ctx.mount(
            &Mount {
                source: inside.map_or_else(|| source.to_owned(), |rel| format!("./{rel}")),
                read_only: m["RW"].as_bool() == Some(false),
            },
            &mut out,
        );
    }
    out
}

/// A secret in a generated file usually comes from `aibox.toml`: the finding that names
/// the same key there (file and line to fix) replaces the generated file's.
fn point_secrets_at_source(
    out: &mut Vec<Finding>,
    files: &[PlannedFile],
    disk: &dyn ComposeSources,
) {
    let Some(text) = disk.read(aibox_config::AIBOX_TOML) else {
        return;
    };
    let sources = scan_secrets(aibox_config::AIBOX_TOML, &text, TextKind::Toml);
    if sources.is_empty() {
        return;
    }
    let generated = |file: &str| {
        files
            .iter()
            .any(|f| f.path == file && f.ownership == Ownership::Generated)
    };
    let source_keys: Vec<&str> = sources.iter().filter_map(secret_key_of).collect();
    out.retain(|f| {
        !(f.code.starts_with("aibox::policy::secret")
            && generated(&f.file)
            && secret_key_of(f).is_some_and(|k| source_keys.contains(&k)))
    });
    out.extend(sources);
}

/// The key a secret finding names (the last part of its `` `path` ``).
fn secret_key_of(f: &Finding) -> Option<&str> {
    let rest = f.message.strip_prefix('`')?;
    let path = &rest[..rest.find('`')?];
    path.rsplit(['.', ':']).next()
}

/// Planned files first, then the project on disk.
struct Overlay<'a> {
    planned: &'a BTreeMap<String, String>,
    disk: &'a dyn ComposeSources,
}

impl ComposeSources for Overlay<'_> {
    fn read(&self, path: &str) -> Option<String> {
        self.planned
            .get(path)
            .cloned()
            .or_else(|| self.disk.read(path))
    }

    // A planned file is written as a regular file: the writer refuses a link on its way
    // (with its own error, before anything is written), and the user's override is read
    // strictly, so a link there fails earlier. Other paths are the disk's answer.
    fn host_path(&self, path: &str) -> HostPath {
        if self.planned.contains_key(path) {
            return HostPath::Plain;
        }
        self.disk.host_path(path)
    }

    // aibox never plans a dev container configuration in a folder of its own, so the
    // folders that matter are the ones on disk.
    fn subdirs(&self, dir: &str) -> Vec<String> {
        self.disk.subdirs(dir)
    }
}

/// How to keep root, named in every root finding.
const ROOT_REMEDY: &str = "run as the unprivileged user aibox creates (the default `aibox`, uid \
     1000); to keep root, record the consent in aibox.toml as `[[security.exceptions]] option = \
     \"user:root\"` with a reason";

/// Whether a Compose/`docker run` user (`name[:group]`) is root: `root`, or uid 0 however
/// it is written (`0`, `00`, `0:0`).
fn is_root_user(user: &str) -> bool {
    let name = user.split(':').next().unwrap_or("").trim();
    name == "root" || (!name.is_empty() && name.parse::<u64>() == Ok(0))
}

/// `[container] user = "root"` or `uid = 0`: the container's user is root; refused until
/// consent names `user:root`.
pub fn check_container_user(config: &AiboxToml, consent: &Consent) -> Vec<Finding> {
    let c = &config.container;
    if c.user != "root" && c.uid != 0 {
        return Vec::new();
    }
    let f = Finding::new(
        "aibox::policy::root_user",
        Severity::Error,
        aibox_config::AIBOX_TOML,
        format!(
            "the container runs as root (`[container] user = \"{}\"`, uid {}): a break-out \
             starts with root rights",
            c.user, c.uid
        ),
        ROOT_REMEDY,
    );
    consent.judge(true, "user:root", f).into_iter().collect()
}

/// Whether `path` is gitignored local state, which may hold personal values and is
/// never committed.
fn is_local_state(path: &str) -> bool {
    aibox_config::is_local_state(path)
}

/// Checks a Compose file (generated or the user-owned override) for dangerous options, as
/// Compose resolves it (merge keys, interpolation, `extends` within the file). Files it
/// refers to are not available here, so `include:` and `extends.file` are refused; the
/// engine uses [`check_compose_project`], which follows them.
pub fn check_compose(file: &str, yaml_text: &str, consent: &Consent) -> Vec<Finding> {
    check_compose_project(&[(file, yaml_text)], None, &NoSources, consent)
}

/// Service keys whose values the gate judges: a variable in any of them could turn a
/// harmless file into a dangerous one at run time (the shell overrides `.env` and defaults).
const GUARDED_KEYS: [&str; 25] = [
    "networks",
    "privileged",
    "cap_add",
    "security_opt",
    "network_mode",
    "pid",
    "ipc",
    "uts",
    "userns_mode",
    "cgroup",
    "cgroup_parent",
    "devices",
    "device_cgroup_rules",
    "volumes",
    "volumes_from",
    "user",
    "use_api_socket",
    "build",
    "env_file",
    "extends",
    "runtime",
    "sysctls",
    "group_add",
    "configs",
    "secrets",
];

/// Variables whose value the gate knows: the user's home stays the home.
const KNOWN_VARIABLES: [&str; 1] = ["HOME"];

/// Checks the Compose files of a project as Compose loads them: `files` in load order
/// (project-relative path, text), `env_text` the `.env` file next to the first one,
/// `sources` for files they refer to (`include`, `extends.file`).
///
/// Judged: every service of every file and of every included file, every service reached
/// through `extends`, named volumes that bind host paths, and host files read by
/// `env_file`, `configs`, `secrets`, `build.context` and `build.additional_contexts`. A
/// variable in a guarded field, a file that cannot be read, or a reference outside the
/// project is refused until a `[[security.exceptions]]` entry names it.
pub fn check_compose_project(
    files: &[(&str, &str)],
    env_text: Option<&str>,
    sources: &dyn ComposeSources,
    consent: &Consent,
) -> Vec<Finding> {
    let mut env = env_text.map(parse_env_file).unwrap_or_default();
    env.insert("HOME".to_owned(), "~".to_owned());
    let mut r = Resolver {
        env,
        sources,
        consent,
        loaded: BTreeMap::new(),
        base_dirs: BTreeMap::new(),
        out: Vec::new(),
        visited: Vec::new(),
    };
    let mut queue: Vec<String> = Vec::new();
    for (path, text) in files {
        r.load_text(path, text);
        queue.push((*path).to_owned());
    }
    // In load order; included files after the ones handed in.
    let mut judged: Vec<String> = Vec::new();
    let mut next = 0;
    while let Some(path) = queue.get(next).cloned() {
        next += 1;
        if judged.contains(&path) {
            continue;
        }
        judged.push(path.clone());
        if judged.len() > 64 {
            break;
        }
        r.judge_file(&path);
        queue.extend(r.includes(&path));
    }
    let mut out = r.out;
    let mut seen = Vec::new();
    out.retain(|f| {
        let key = (f.code.clone(), f.file.clone(), f.line, f.message.clone());
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    out
}

/// The Compose files of a project as `aibox up` and the devcontainer CLI hand them to
/// Compose, and every dev container configuration the Dev Containers CLI would use
/// (`.devcontainer/devcontainer.json`, `.devcontainer.json`,
/// `.devcontainer/<name>/devcontainer.json`), each read through `sources`.
///
/// `aibox up`'s files (generated, override, personal) and the `dockerComposeFile` list of
/// `.devcontainer/devcontainer.json` are one Compose project, with `.devcontainer/.env`;
/// every other configuration's list is a project of its own, with the `.env` next to its
/// first file. Listed files outside the project are refused; listed files that do not
/// exist are not run, so they are skipped. A guarded file that is a symbolic link is
/// refused (Compose and the editor follow it; the gate reads regular files only).
pub fn check_compose_setup(sources: &dyn ComposeSources, consent: &Consent) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut configs = devcontainer_files(sources);
    if !configs.iter().any(|c| c == DEVCONTAINER_PATH) {
        // `aibox up` runs its own files whether or not the editor's configuration exists.
        configs.insert(0, DEVCONTAINER_PATH.to_owned());
    }
    for config in configs {
        let devcontainer = if linked_file(sources, consent, &config, &config, &mut out) {
            None
        } else {
            sources.read(&config)
        };
        let dir = dir_of(&config).to_owned();
        if let Some(text) = &devcontainer {
            out.extend(devcontainer_findings(&config, text, consent, sources));
            out.extend(check_local_features(&config, text, sources, consent));
        }
        // `aibox up` runs its Compose files itself; the editor runs the listed ones. Both count.
        let mut names: Vec<Result<String, String>> = if config == DEVCONTAINER_PATH {
            aibox_config::layout::COMPOSE_FILES
                .map(|n| Ok(n.to_owned()))
                .to_vec()
        } else {
            Vec::new()
        };
        for name in devcontainer
            .as_deref()
            .map(|t| compose_files_in(&dir, t))
            .unwrap_or_default()
        {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let mut texts: Vec<(String, String)> = Vec::new();
        for name in names {
            let name = match name {
                Ok(name) => name,
                Err(written) => {
                    let f = Finding::new(
                        "aibox::policy::unchecked_include",
                        Severity::Error,
                        &config,
                        format!(
                            "`dockerComposeFile` names `{written}`, outside the project, which \
                             the gate cannot judge"
                        ),
                        "list only Compose files inside the project",
                    )
                    .at(devcontainer
                        .as_deref()
                        .and_then(|t| line_of(t, "dockerComposeFile")));
                    out.extend(consent.judge(true, &format!("include:{written}"), f));
                    continue;
                }
            };
            if linked_file(sources, consent, &config, &name, &mut out) {
                continue;
            }
            if let Some(text) = sources.read(&name) {
                texts.push((name, text));
            }
        }
        // Compose reads `.env` from the folder of the first file.
        let env_path = match texts.first() {
            _ if config == DEVCONTAINER_PATH => aibox_config::layout::COMPOSE_ENV.to_owned(),
            Some((first, _)) => join_project(dir_of(first), ".env").unwrap_or_default(),
            None => continue,
        };
        let env = if linked_file(sources, consent, &config, &env_path, &mut out) {
            None
        } else {
            sources.read(&env_path)
        };
        if texts.is_empty() {
            continue;
        }
        let files: Vec<(&str, &str)> = texts
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        out.extend(check_compose_project(
            &files,
            env.as_deref(),
            sources,
            consent,
        ));
    }
    let mut seen = Vec::new();
    out.retain(|f| {
        let key = (f.code.clone(), f.file.clone(), f.line, f.message.clone());
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    out
}

/// Every dev container configuration the Dev Containers CLI would offer, sorted:
/// `.devcontainer/devcontainer.json`, `.devcontainer.json`, and
/// `.devcontainer/<name>/devcontainer.json` (one level down).
fn devcontainer_files(sources: &dyn ComposeSources) -> Vec<String> {
    // A link counts when it leads out of the project (what is there is unknown) or to a
    // file of the project.
    let exists = |path: &str| match sources.host_path(path) {
        HostPath::Plain => sources.read(path).is_some(),
        HostPath::Project(p) => sources.read(&p).is_some(),
        HostPath::Outside(_) | HostPath::Unresolvable(_) => true,
    };
    let mut out = Vec::new();
    for path in [
        DEVCONTAINER_PATH,
        aibox_config::layout::DEVCONTAINER_ROOT_JSON,
    ] {
        if exists(path) {
            out.push(path.to_owned());
        }
    }
    let dir = aibox_config::layout::DEVCONTAINER_DIR;
    for name in sources.subdirs(dir.trim_end_matches('/')) {
        let path = format!(
            "{dir}{name}/{}",
            aibox_config::layout::DEVCONTAINER_NAMED_JSON
        );
        if exists(&path) {
            out.push(path);
        }
    }
    out
}

/// Refuses a guarded file (a dev container configuration, a Compose or `.env` file, a
/// feature's metadata) that is, or lies under, a symbolic link: the tools follow it, and
/// the gate judges regular files of the project only. True when refused.
fn linked_file(
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

/// Local devcontainer features (`"./name"`, relative to the configuration's folder) bring
/// their own container options in `devcontainer-feature.json` (`privileged`, `capAdd`,
/// `securityOpt`, `mounts`): judged like the same keys in `devcontainer.json`. A local
/// feature whose metadata cannot be read is refused.
fn check_local_features(
    config: &str,
    jsonc_text: &str,
    sources: &dyn ComposeSources,
    consent: &Consent,
) -> Vec<Finding> {
    let Ok(doc) = parse_jsonc(jsonc_text) else {
        return Vec::new();
    };
    let Some(features) = doc.get("features").and_then(Json::as_object) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for id in features
        .keys()
        .filter(|id| id.starts_with("./") || id.starts_with("../"))
    {
        let path = join_project(dir_of(config), id.trim_end_matches('/'))
            .map(|dir| format!("{dir}/devcontainer-feature.json"))
            .filter(|p| !linked_file(sources, consent, config, p, &mut out));
        let Some((path, text)) = path.and_then(|p| sources.read(&p).map(|t| (p, t))) else {
            let f = Finding::new(
                "aibox::policy::unchecked_include",
                Severity::Error,
                config,
                format!(
                    "the local feature `{id}` has no readable `devcontainer-feature.json` inside \
                     the project, so the gate cannot tell which container options it sets"
                ),
                "keep local features inside the project with their metadata file",
            )
            .at(line_of(jsonc_text, id));
            out.extend(consent.judge(true, &format!("include:{id}"), f));
            continue;
        };
        // The metadata uses the `devcontainer.json` key names.
        out.extend(devcontainer_findings(&path, &text, consent, sources));
    }
    out
}

/// The files of a `.devcontainer/devcontainer.json` `dockerComposeFile` (project-relative,
/// in order; entries outside the project or named through a variable as written); `None`
/// when the text does not parse or names none.
pub fn devcontainer_compose_files(jsonc_text: &str) -> Option<Vec<String>> {
    let list: Vec<String> = compose_files_in(".devcontainer", jsonc_text)
        .into_iter()
        .map(|r| r.unwrap_or_else(|written| written))
        .collect();
    (!list.is_empty()).then_some(list)
}

/// The `dockerComposeFile` entries of a configuration in `dir`: `Ok` the project-relative
/// path, `Err` the entry as written when it leaves the project or uses a variable.
fn compose_files_in(dir: &str, jsonc_text: &str) -> Vec<Result<String, String>> {
    let Ok(doc) = parse_jsonc(jsonc_text) else {
        return Vec::new();
    };
    json_strings(doc.get("dockerComposeFile"))
        .into_iter()
        .map(|f| {
            literal_path(&f)
                .and_then(|p| join_project(dir, &p))
                .ok_or(f)
        })
        .collect()
}

struct LoadedFile {
    text: String,
    doc: Option<Yaml>,
}

struct Resolver<'a> {
    env: BTreeMap<String, String>,
    sources: &'a dyn ComposeSources,
    consent: &'a Consent,
    loaded: BTreeMap<String, LoadedFile>,
    /// The folder relative paths of an included file resolve against, when `include`
    /// set a `project_directory` (else the file's own folder).
    base_dirs: BTreeMap<String, String>,
    out: Vec<Finding>,
    visited: Vec<(String, String)>,
}

impl Resolver<'_> {
    fn load_text(&mut self, path: &str, text: &str) {
        let mut kept = Vec::new();
        let doc = match serde_norway::from_str::<Yaml>(text) {
            Ok(doc) => match normalise_yaml(doc, 0, &mut kept) {
                Ok(doc) => Some(doc),
                Err(e) => {
                    self.out.push(unparsable(path, "YAML", &e));
                    None
                }
            },
            Err(e) => {
                let line = e.location().map(|l| l.line());
                self.out
                    .push(unparsable(path, "YAML", &e.to_string()).at(line));
                None
            }
        };
        let mut tags: Vec<(Option<usize>, String)> = yaml_tags(text)
            .into_iter()
            .map(|(line, tag)| (Some(line), tag))
            .collect();
        if tags.is_empty() {
            // A tag the parser saw and the text scan did not: still refused.
            tags.extend(kept.into_iter().map(|tag| (None, tag)));
        }
        for (line, tag) in tags {
            self.out.push(
                Finding::new(
                    "aibox::policy::yaml_tag",
                    Severity::Error,
                    path,
                    format!(
                        "`{tag}`: a YAML tag or directive changes what Compose reads (it decodes \
                         `!!binary`, `!reset` and `!override` change merges), and the gate \
                         judges untagged YAML only"
                    ),
                    "write the value itself without a tag; instead of `!reset`/`!override`, \
                     write the resulting list or mapping in full",
                )
                .at(line),
            );
        }
        self.loaded.insert(
            path.to_owned(),
            LoadedFile {
                text: text.to_owned(),
                doc,
            },
        );
    }

    /// Loads a referenced file through the sources; false when it cannot be read.
    fn load_ref(&mut self, path: &str) -> bool {
        if self.loaded.contains_key(path) {
            return true;
        }
        let mut refused = Vec::new();
        if linked_file(self.sources, self.consent, path, path, &mut refused) {
            // Refused as a link; nothing of it is judged (or run, once fixed).
            self.out.extend(refused);
            self.loaded.insert(
                path.to_owned(),
                LoadedFile {
                    text: String::new(),
                    doc: None,
                },
            );
            return true;
        }
        match self.sources.read(path) {
            Some(text) => {
                self.load_text(path, &text);
                true
            }
            None => false,
        }
    }

    fn unseen(&mut self, file: &str, what: &str, target: &str, line: Option<usize>) {
        let f = Finding::new(
            "aibox::policy::unchecked_include",
            Severity::Error,
            file,
            format!(
                "{what} `{target}`, which the gate cannot read (missing, outside the project, or \
                 named through a variable), so it cannot tell what runs"
            ),
            format!(
                "use a file inside the project under a literal path, or record the consent with a \
                 `[[security.exceptions]]` entry `option = \"include:{target}\"`"
            ),
        )
        .at(line);
        self.out
            .extend(self.consent.judge(true, &format!("include:{target}"), f));
    }

    /// The files `path` includes (`include:`), loaded; the unreadable ones are refused.
    fn includes(&mut self, path: &str) -> Vec<String> {
        let Some(include) = self
            .loaded
            .get(path)
            .and_then(|l| l.doc.as_ref())
            .and_then(|d| d.get("include"))
            .cloned()
        else {
            return Vec::new();
        };
        let text = self.text_of(path);
        // (file as written, `project_directory` as written)
        let mut raw: Vec<(String, Option<String>)> = Vec::new();
        let entries = match include {
            Yaml::Sequence(items) => items,
            other => vec![other],
        };
        for entry in entries {
            let project_dir = entry
                .get("project_directory")
                .map(|d| d.as_str().unwrap_or("?").to_owned());
            match &entry {
                Yaml::String(s) => raw.push((s.clone(), None)),
                Yaml::Mapping(_) => match entry.get("path") {
                    Some(Yaml::String(s)) => raw.push((s.clone(), project_dir)),
                    Some(Yaml::Sequence(items)) => raw.extend(
                        items
                            .iter()
                            .filter_map(Yaml::as_str)
                            .map(|s| (s.to_owned(), project_dir.clone())),
                    ),
                    _ => raw.push(("?".to_owned(), None)),
                },
                _ => raw.push(("?".to_owned(), None)),
            }
        }
        let mut found = Vec::new();
        for (target, project_dir) in raw {
            let line = line_of(&text, &target);
            let resolved = literal_path(&target).and_then(|t| join_project(dir_of(path), &t));
            let Some(p) = resolved.filter(|p| self.load_ref(p)) else {
                self.unseen(path, "`include:` pulls in", &target, line);
                continue;
            };
            if let Some(raw_dir) = project_dir {
                // When refused, the file is still judged against its own folder.
                if let Some(dir) = self.project_directory(path, &raw_dir) {
                    self.base_dirs.entry(p.clone()).or_insert(dir);
                }
            }
            found.push(p);
        }
        found
    }

    /// An `include` entry's `project_directory`, project-relative, or `None` (refused)
    /// when it leaves the project, uses a variable, or is a link out of the project: the
    /// included file's relative paths (`./etc/cron.d`) would then name host folders.
    fn project_directory(&mut self, path: &str, raw: &str) -> Option<String> {
        let dir = literal_path(raw)
            .and_then(|d| join_project(dir_of(path), &d))
            .and_then(|d| match self.sources.host_path(&d) {
                HostPath::Plain => Some(d),
                HostPath::Project(real) => Some(real),
                HostPath::Outside(_) | HostPath::Unresolvable(_) => None,
            });
        if dir.is_none() {
            let text = self.text_of(path);
            let f = Finding::new(
                "aibox::policy::unchecked_include",
                Severity::Error,
                path,
                format!(
                    "`include:` sets `project_directory: {raw}`, outside the project: the \
                     included file's relative paths then name host folders"
                ),
                format!(
                    "drop `project_directory` or name a folder inside the project; to keep it, \
                     record the consent with a `[[security.exceptions]]` entry \
                     `option = \"include:{raw}\"`"
                ),
            )
            .at(line_of(&text, "project_directory"));
            self.out
                .extend(self.consent.judge(true, &format!("include:{raw}"), f));
        }
        dir
    }

    /// The folder relative paths in `path` resolve against.
    fn dir_for(&self, path: &str) -> String {
        self.base_dirs
            .get(path)
            .cloned()
            .unwrap_or_else(|| dir_of(path).to_owned())
    }

    /// The text of a loaded file (empty when it was not loaded), for line lookups.
    fn text_of(&self, path: &str) -> String {
        self.loaded
            .get(path)
            .map(|l| l.text.clone())
            .unwrap_or_default()
    }

    fn judge_file(&mut self, path: &str) {
        let Some(doc) = self.loaded.get(path).and_then(|l| l.doc.clone()) else {
            return;
        };
        let text = self.text_of(path);
        let dir = self.dir_for(path);
        // Top-level named volumes that bind a host path, and files handed in as configs
        // or secrets.
        self.judge_networks(path, &text, &doc, &dir);
        for (key, is_volume) in [("volumes", true), ("configs", false), ("secrets", false)] {
            let Some(map) = doc.get(key).and_then(Yaml::as_mapping) else {
                continue;
            };
            for (name, def) in map {
                let name = name.as_str().unwrap_or("?");
                let mut errors = Vec::new();
                let def = self.guard_variables(path, &text, key, def, &mut errors);
                let ctx = Ctx {
                    file: path,
                    text: &text,
                    consent: self.consent,
                    sources: self.sources,
                    dir: Some(&dir),
                };
                let mut out = Vec::new();
                if is_volume {
                    let device = def
                        .get("driver_opts")
                        .and_then(|o| o.get("device"))
                        .and_then(Yaml::as_str);
                    if let Some(device) = device.filter(|d| !d.starts_with(':')) {
                        // A block device (`type: ext4`, `device: /dev/sda1`) hands over a
                        // whole file system, read-only or not.
                        let read_only = !device.trim().starts_with("/dev/")
                            && def
                                .get("driver_opts")
                                .and_then(|o| o.get("o"))
                                .and_then(Yaml::as_str)
                                .is_some_and(proven_read_only);
                        ctx.mount(
                            &Mount {
                                source: device.to_owned(),
                                read_only,
                            },
                            &mut out,
                        );
                    }
                } else if let Some(file) = def.get("file").and_then(Yaml::as_str) {
                    ctx.host_read(&format!("{key}.{name}.file"), file, &mut out);
                }
                self.out.extend(out);
            }
        }
        if let Some(services) = doc.get("services").and_then(Yaml::as_mapping) {
            for (name, _) in services {
                let name = name.as_str().unwrap_or("?").to_owned();
                self.visited.clear();
                self.judge_service(path, &name, 0);
            }
        }
    }

    /// Top-level networks that are the host's network (`host` by key or by `name`, or the
    /// `host` driver): a service on them shares the host's network namespace.
    fn judge_networks(&mut self, path: &str, text: &str, doc: &Yaml, dir: &str) {
        let Some(map) = doc.get("networks").and_then(Yaml::as_mapping) else {
            return;
        };
        for (name, def) in map {
            let name = name.as_str().unwrap_or("?");
            let mut errors = Vec::new();
            let def = self.guard_variables(path, text, "networks", def, &mut errors);
            let field = |k: &str| def.get(k).and_then(Yaml::as_str).map(str::trim);
            let host = name == "host"
                || field("name").is_some_and(|n| n.eq_ignore_ascii_case("host"))
                || field("driver").is_some_and(|d| d.eq_ignore_ascii_case("host"));
            if host {
                let ctx = Ctx {
                    file: path,
                    text,
                    consent: self.consent,
                    sources: self.sources,
                    dir: Some(dir),
                };
                let mut out = Vec::new();
                ctx.namespace("network_mode", "host", &mut out);
                self.out.extend(out);
            }
        }
    }

    /// Refuses variables (and invalid templates) in a guarded value and returns the value
    /// as Compose interpolates it.
    fn guard_variables(
        &mut self,
        file: &str,
        text: &str,
        key: &str,
        value: &Yaml,
        errors: &mut Vec<String>,
    ) -> Yaml {
        let mut vars = Vec::new();
        let invalid = variables_in(value, &mut vars);
        vars.sort();
        vars.dedup();
        for var in vars
            .iter()
            .filter(|v| !KNOWN_VARIABLES.contains(&v.as_str()))
        {
            let f = Finding::new(
                "aibox::policy::unresolved_variable",
                Severity::Error,
                file,
                format!(
                    "`{key}` depends on the variable `{var}`: its value comes from the shell or \
                     `.env` when the container starts, so the gate cannot judge it"
                ),
                format!(
                    "write the value literally, or record the consent with a \
                     `[[security.exceptions]]` entry `option = \"env:{var}\"`"
                ),
            )
            .at(line_of(text, var));
            self.out
                .extend(self.consent.judge(true, &format!("env:{var}"), f));
        }
        if invalid {
            let f = Finding::new(
                "aibox::policy::unresolved_variable",
                Severity::Error,
                file,
                format!("`{key}` holds an invalid `$` interpolation, which Compose refuses"),
                "write `$$` for a literal dollar sign",
            )
            .at(line_of(text, key));
            self.out.push(f);
        }
        interpolate_tree(value, &self.env, errors)
    }

    fn judge_service(&mut self, path: &str, name: &str, depth: usize) {
        let key = (path.to_owned(), name.to_owned());
        if self.visited.contains(&key) {
            return;
        }
        self.visited.push(key);
        let Some(raw) = self
            .loaded
            .get(path)
            .and_then(|l| l.doc.as_ref())
            .and_then(|d| d.get("services"))
            .and_then(|s| s.get(name))
            .cloned()
        else {
            return;
        };
        let text = self.text_of(path);
        let dir = self.dir_for(path);
        let mut svc = Mapping::new();
        if let Some(map) = raw.as_mapping() {
            for (k, v) in map {
                let key_name = k.as_str().unwrap_or("");
                let value = if GUARDED_KEYS.contains(&key_name) {
                    let mut errors = Vec::new();
                    self.guard_variables(path, &text, key_name, v, &mut errors)
                } else {
                    v.clone()
                };
                svc.insert(k.clone(), value);
            }
        }
        let svc = Yaml::Mapping(svc);
        let ctx = Ctx {
            file: path,
            text: &text,
            consent: self.consent,
            sources: self.sources,
            dir: Some(&dir),
        };
        let mut out = Vec::new();
        check_service(&ctx, name, &svc, &mut out);
        self.out.extend(out);
        // `extends`: the base service is part of this one; judge it where it is defined.
        let Some(extends) = svc.get("extends") else {
            return;
        };
        let (base_file, base_name) = match extends {
            Yaml::String(s) => (None, s.clone()),
            other => (
                other.get("file").and_then(Yaml::as_str).map(str::to_owned),
                other
                    .get("service")
                    .and_then(Yaml::as_str)
                    .unwrap_or("?")
                    .to_owned(),
            ),
        };
        let line = line_of(&text, "extends");
        let target = match base_file {
            None => Some(path.to_owned()),
            Some(f) => join_project(&dir, &f)
                .filter(|p| self.load_ref(p))
                .or_else(|| {
                    self.unseen(
                        path,
                        &format!("service `{name}` extends a service from"),
                        &f,
                        line,
                    );
                    None
                }),
        };
        if let Some(target) = target {
            if depth >= 16 {
                self.unseen(path, "`extends` nests deeper than 16 levels at", name, line);
                return;
            }
            self.judge_service(&target, &base_name, depth + 1);
        }
    }
}

/// The path when it has no interpolation; `None` otherwise.
fn literal_path(raw: &str) -> Option<String> {
    (!raw.contains('$')).then(|| raw.trim().to_owned())
}

fn check_service(ctx: &Ctx<'_>, name: &str, svc: &Yaml, out: &mut Vec<Finding>) {
    if svc.get("privileged").is_some_and(yaml_truthy) {
        ctx.privileged(line_of_all(ctx.text, &["privileged"]), out);
    }
    if let Some(caps) = svc.get("cap_add") {
        for cap in yaml_strings(caps) {
            ctx.cap(&cap, out);
        }
    }
    if let Some(opts) = svc.get("security_opt") {
        for opt in yaml_strings(opts) {
            ctx.security_opt(&opt, out);
        }
    }
    for key in ["network_mode", "pid", "ipc", "uts", "userns_mode", "cgroup"] {
        if let Some(value) = svc.get(key).and_then(Yaml::as_str) {
            ctx.namespace(key, value, out);
        }
    }
    // A service on a network called `host` (defined or not): Docker's host network.
    if let Some(networks) = svc.get("networks") {
        for net in yaml_strings(networks) {
            if net.trim().eq_ignore_ascii_case("host") {
                ctx.namespace("network_mode", "host", out);
            }
        }
    }
    check_kernel_access(ctx, svc, out);
    if let Some(from) = svc.get("volumes_from") {
        for source in yaml_strings(from) {
            if let Some(container) = source.strip_prefix("container:") {
                let f = Finding::new(
                    "aibox::policy::volumes_from_container",
                    Severity::Error,
                    ctx.file,
                    format!(
                        "service `{name}` takes every volume of the container `{container}`, \
                         which is not part of this project: the gate cannot tell what it mounts"
                    ),
                    "mount what you need explicitly, or record the consent with a \
                     `[[security.exceptions]]` entry `option = \"volumes_from:container\"`",
                )
                .at(line_of(ctx.text, "volumes_from"));
                ctx.push(true, "volumes_from:container", f, out);
            }
        }
    }
    if let Some(user) = svc.get("user") {
        let user = match user {
            Yaml::Number(n) => n.to_string(),
            other => other.as_str().unwrap_or("").to_owned(),
        };
        ctx.user(&user, out);
    }
    if svc.get("use_api_socket").is_some_and(yaml_truthy) {
        let f = Finding::new(
            "aibox::policy::engine_socket",
            Severity::Error,
            ctx.file,
            format!(
                "service `{name}` sets `use_api_socket: true`, which hands the container the \
                 container engine's API: full control of the host"
            ),
            "remove `use_api_socket`; build or run containers from the host instead",
        )
        .at(line_of(ctx.text, "use_api_socket"));
        ctx.push(true, "use_api_socket", f, out);
    }
    match svc.get("build") {
        Some(Yaml::String(context)) => ctx.host_read("build.context", context, out),
        Some(build) if build.is_mapping() => check_build(ctx, build, out),
        _ => {}
    }
    if let Some(env_files) = svc.get("env_file") {
        for file in yaml_strings(env_files) {
            ctx.host_read("env_file", &file, out);
        }
    }
    check_service_volumes(ctx, svc, out);
}

/// The bind mounts of a service (short and long syntax).
fn check_service_volumes(ctx: &Ctx<'_>, svc: &Yaml, out: &mut Vec<Finding>) {
    if let Some(volumes) = svc.get("volumes").and_then(Yaml::as_sequence) {
        for vol in volumes {
            if let Some(short) = vol.as_str() {
                if let Some(m) = parse_short_volume(short) {
                    ctx.mount(&m, out);
                }
            } else if vol.is_mapping() {
                let kind = vol.get("type").and_then(Yaml::as_str).unwrap_or("bind");
                let source = vol.get("source").and_then(Yaml::as_str);
                if let (Some(source), "bind") = (source, kind) {
                    let read_only = vol.get("read_only").is_some_and(yaml_truthy);
                    ctx.mount(
                        &Mount {
                            source: source.to_owned(),
                            read_only,
                        },
                        out,
                    );
                }
            }
        }
    }
}

/// Host devices, device cgroup rules and kernel parameters of a service.
fn check_kernel_access(ctx: &Ctx<'_>, svc: &Yaml, out: &mut Vec<Finding>) {
    if let Some(devices) = svc.get("devices") {
        for device in yaml_strings(devices) {
            ctx.device("devices", &device, out);
        }
    }
    if let Some(rules) = svc.get("device_cgroup_rules") {
        for rule in yaml_strings(rules) {
            ctx.device_rule(&rule, out);
        }
    }
    if let Some(sysctls) = svc.get("sysctls") {
        // A mapping (`name: value`) or a list (`name=value`).
        for item in yaml_strings(sysctls) {
            ctx.sysctl(item.split('=').next().unwrap_or(&item), out);
        }
    }
}

fn check_build(ctx: &Ctx<'_>, build: &Yaml, out: &mut Vec<Finding>) {
    let context = build.get("context").and_then(Yaml::as_str).unwrap_or(".");
    ctx.host_read("build.context", context, out);
    // Relative to the context (judged above, but the client reads the file itself, so a
    // link there counts); an absolute one is a host file of its own.
    if let Some(file) = build.get("dockerfile").and_then(Yaml::as_str) {
        if file.starts_with(['/', '~']) {
            ctx.host_read("build.dockerfile", file, out);
        } else if !context.contains(':') && !context.starts_with(['/', '~']) {
            ctx.host_read("build.dockerfile", &format!("{context}/{file}"), out);
        }
    }
    if let Some(extra) = build.get("additional_contexts") {
        let paths: Vec<String> = match extra {
            Yaml::Mapping(m) => m
                .values()
                .filter_map(Yaml::as_str)
                .map(str::to_owned)
                .collect(),
            other => yaml_strings(other)
                .into_iter()
                .map(|s| s.split_once('=').map_or(s.clone(), |(_, p)| p.to_owned()))
                .collect(),
        };
        for path in paths {
            ctx.host_read("build.additional_contexts", &path, out);
        }
    }
    if build.get("privileged").is_some_and(yaml_truthy) {
        ctx.privileged(line_of_all(ctx.text, &["privileged"]), out);
    }
    if let Some(net) = build.get("network").and_then(Yaml::as_str) {
        ctx.namespace("build.network", net, out);
    }
    if let Some(ents) = build.get("entitlements") {
        for ent in yaml_strings(ents) {
            let f = Finding::new(
                "aibox::policy::build_entitlement",
                Severity::Error,
                ctx.file,
                format!(
                    "the image build asks for the `{ent}` entitlement, which lifts the build \
                     sandbox"
                ),
                "remove `build.entitlements`; do privileged build steps outside the image build",
            )
            .at(line_of(ctx.text, &ent));
            ctx.push(true, &format!("build.entitlements:{ent}"), f, out);
        }
    }
    if build.get("ssh").is_some() {
        let f = Finding::new(
            "aibox::policy::build_ssh",
            Severity::Warning,
            ctx.file,
            "the image build forwards the host's SSH agent (`build.ssh`); any build step can use \
             your keys",
            "fetch private dependencies with a narrowly scoped token instead, or accept with a \
             `[[security.exceptions]]` entry `build.ssh`",
        )
        .at(line_of(ctx.text, "ssh"));
        ctx.push(false, "build.ssh", f, out);
    }
}

/// Checks `devcontainer.json` (JSONC) for dangerous options, including `runArgs`,
/// `mounts`, `workspaceMount`, `initializeCommand` and unpinned features.
pub fn check_devcontainer_json(file: &str, jsonc_text: &str, consent: &Consent) -> Vec<Finding> {
    devcontainer_findings(file, jsonc_text, consent, &NoSources)
}

/// A dev container configuration's own container options: `privileged`, `capAdd`,
/// `securityOpt`, and the users the container starts as and the tools run as.
fn devcontainer_options(ctx: &Ctx<'_>, doc: &Json, out: &mut Vec<Finding>) {
    if doc.get("privileged").is_some_and(json_truthy) {
        ctx.privileged(line_of(ctx.text, "\"privileged\""), out);
    }
    for cap in json_strings(doc.get("capAdd")) {
        ctx.cap(&cap, out);
    }
    for opt in json_strings(doc.get("securityOpt")) {
        ctx.security_opt(&opt, out);
    }
    for key in ["containerUser", "remoteUser"] {
        if let Some(user) = doc.get(key).and_then(Json::as_str) {
            ctx.user(user, out);
        }
    }
}

/// [`check_devcontainer_json`] with the project at hand: mount sources under
/// `${localWorkspaceFolder}` are judged where their symbolic links lead.
fn devcontainer_findings(
    file: &str,
    jsonc_text: &str,
    consent: &Consent,
    sources: &dyn ComposeSources,
) -> Vec<Finding> {
    let ctx = Ctx {
        file,
        text: jsonc_text,
        consent,
        sources,
        // `${localWorkspaceFolder}` is the project root.
        dir: Some(""),
    };
    let doc: Json = match parse_jsonc(jsonc_text) {
        Ok(doc) => doc,
        Err(e) => return vec![unparsable(file, "JSON", &e.message).at(Some(e.line))],
    };
    let mut out = Vec::new();
    devcontainer_options(&ctx, &doc, &mut out);
    let run_args = json_strings(doc.get("runArgs"));
    run_args_findings(&ctx, &run_args, &mut out);
    if let Some(mounts) = doc.get("mounts").and_then(Json::as_array) {
        for m in mounts {
            let mount = match m {
                Json::String(s) => parse_mount_spec(s),
                Json::Object(o) => {
                    let kind = o.get("type").and_then(Json::as_str).unwrap_or("bind");
                    o.get("source")
                        .and_then(Json::as_str)
                        .filter(|_| kind == "bind")
                        .map(|s| Mount {
                            source: s.to_owned(),
                            read_only: o.get("readonly").is_some_and(json_truthy)
                                || o.get("readOnly").is_some_and(json_truthy),
                        })
                }
                _ => None,
            };
            if let Some(mount) = mount {
                ctx.mount(&mount, &mut out);
            }
        }
    }
    if let Some(mount) = doc
        .get("workspaceMount")
        .and_then(Json::as_str)
        .and_then(parse_mount_spec)
    {
        ctx.mount(&mount, &mut out);
    }
    // The image build of a configuration: its context and Dockerfile are read from the
    // host relative to the configuration's folder.
    if let Some(build) = doc.get("build") {
        let build_ctx = Ctx {
            dir: Some(dir_of(file)),
            ..ctx
        };
        let context = build.get("context").and_then(Json::as_str).unwrap_or(".");
        build_ctx.host_read("build.context", context, &mut out);
        if let Some(dockerfile) = build.get("dockerfile").and_then(Json::as_str) {
            build_ctx.host_read("build.dockerfile", dockerfile, &mut out);
        }
    }
    if let Some(cmd) = doc.get("initializeCommand") {
        let shown = match cmd {
            Json::String(s) => aibox_config::bounded(s, 512),
            other => aibox_config::bounded(&other.to_string(), 512),
        };
        let f = Finding::new(
            "aibox::policy::initialize_command",
            Severity::Error,
            file,
            format!(
                "`initializeCommand` runs on the host, outside the container, before it exists: \
                 {shown}"
            ),
            "move the command to `postCreateCommand` (runs inside the container), or accept it \
             with a `[[security.exceptions]]` entry `initializeCommand` after reading it",
        )
        .at(line_of(jsonc_text, "\"initializeCommand\""));
        ctx.push(true, "initializeCommand", f, &mut out);
    }
    if let Some(features) = doc.get("features").and_then(Json::as_object) {
        for id in features.keys() {
            check_feature(&ctx, id, &mut out);
            if feature_unpinned(id) {
                out.push(
                    Finding::new(
                        "aibox::policy::unpinned_feature",
                        Severity::Warning,
                        file,
                        format!("devcontainer feature `{id}` has no version or digest"),
                        "pin it, for example `<id>:1.2.3` or `<id>@sha256:<digest>`",
                    )
                    .at(line_of(jsonc_text, id)),
                );
            }
        }
    }
    out
}

/// Features whose metadata asks the engine for privileged mode or the engine socket
/// (their `devcontainer-feature.json` sets `privileged` or mounts the socket).
fn check_feature(ctx: &Ctx<'_>, id: &str, out: &mut Vec<Finding>) {
    let last = id.rsplit('/').next().unwrap_or(id);
    let name = last.split([':', '@']).next().unwrap_or(last);
    let line = line_of(ctx.text, id);
    match name {
        "docker-in-docker" | "docker-in-docker-plus" => {
            let f = Finding::new(
                "aibox::policy::privileged",
                Severity::Error,
                ctx.file,
                format!(
                    "devcontainer feature `{id}` runs the container privileged (its metadata \
                     sets `privileged: true`): it is no longer a boundary"
                ),
                "remove the feature; build images on the host, or record the consent with a                  `[[security.exceptions]]` entry `option = \"privileged\"`",
            )
            .at(line);
            ctx.push(true, "privileged", f, out);
        }
        "docker-outside-of-docker" | "docker-from-docker" => {
            let f = Finding::new(
                "aibox::policy::engine_socket",
                Severity::Error,
                ctx.file,
                format!(
                    "devcontainer feature `{id}` mounts the host's container engine socket: \
                     whoever can use it controls the host"
                ),
                "remove the feature; run container commands on the host",
            )
            .at(line);
            ctx.push(true, "mount:/var/run/docker.sock", f, out);
        }
        _ => {}
    }
    // A remote feature's metadata (`devcontainer-feature.json`: `privileged`, `capAdd`,
    // `mounts`, …) is fetched when the container is built; the gate cannot read it.
    if !id.starts_with("./") && !id.starts_with("../") {
        let base = id.split('@').next().unwrap_or(id);
        let base = match base.rsplit_once(':') {
            Some((b, tag)) if !tag.contains('/') => b,
            _ => base,
        };
        let f = Finding::new(
            "aibox::policy::remote_feature",
            Severity::Error,
            ctx.file,
            format!(
                "devcontainer feature `{id}` brings container options from a registry (its \
                 `devcontainer-feature.json` may ask for privileged mode, capabilities or \
                 mounts), which the gate cannot read"
            ),
            format!(
                "install the tool in `.devcontainer/Dockerfile.local` instead, or read the \
                 feature's metadata and record the consent with a `[[security.exceptions]]` \
                 entry `option = \"feature:{base}\"`"
            ),
        )
        .at(line);
        ctx.push(true, &format!("feature:{base}"), f, out);
    }
}

fn feature_unpinned(id: &str) -> bool {
    if id.starts_with("./") || id.starts_with("../") || id.contains('@') {
        return false;
    }
    let last = id.rsplit('/').next().unwrap_or(id);
    !last.contains(':')
}

/// Checks `docker run`-style arguments (`devcontainer.json` `runArgs`). `text` is the file
/// they came from, for line numbers.
pub fn check_run_args(file: &str, text: &str, args: &[String], consent: &Consent) -> Vec<Finding> {
    let ctx = Ctx {
        file,
        text,
        consent,
        sources: &NoSources,
        dir: None,
    };
    let mut out = Vec::new();
    run_args_findings(&ctx, args, &mut out);
    out
}

fn run_args_findings(ctx: &Ctx<'_>, args: &[String], out: &mut Vec<Finding>) {
    let text = ctx.text;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].trim();
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg, None),
        };
        let takes_value = matches!(
            flag,
            "--cap-add"
                | "--security-opt"
                | "--network"
                | "--net"
                | "--pid"
                | "--ipc"
                | "--uts"
                | "--userns"
                | "--cgroupns"
                | "-v"
                | "--volume"
                | "--mount"
                | "--device"
                | "--device-cgroup-rule"
                | "--sysctl"
                | "-u"
                | "--user"
        );
        let value = if takes_value && inline.is_none() {
            i += 1;
            args.get(i).map(|s| s.trim().to_owned())
        } else {
            inline
        };
        i += 1;
        let value = value.unwrap_or_default();
        match flag {
            "--privileged" if value.is_empty() || str_truthy(&value) => {
                ctx.privileged(line_of(text, "--privileged"), out);
            }
            "--cap-add" => ctx.cap(&value, out),
            "--security-opt" => ctx.security_opt(&value, out),
            "--network" | "--net" => ctx.namespace("network_mode", &value, out),
            "--pid" => ctx.namespace("pid", &value, out),
            "--ipc" => ctx.namespace("ipc", &value, out),
            "--uts" => ctx.namespace("uts", &value, out),
            "--userns" => ctx.namespace("userns_mode", &value, out),
            "--cgroupns" => ctx.namespace("cgroup", &value, out),
            "-v" | "--volume" => {
                if let Some(m) = parse_short_volume(&value) {
                    ctx.mount(&m, out);
                }
            }
            "--mount" => {
                if let Some(m) = parse_mount_spec(&value) {
                    ctx.mount(&m, out);
                }
            }
            "--device" => ctx.device("--device", &value, out),
            "--device-cgroup-rule" => ctx.device_rule(&value, out),
            "--sysctl" => ctx.sysctl(value.split('=').next().unwrap_or(&value), out),
            "-u" | "--user" => ctx.user(&value, out),
            _ => {}
        }
    }
}

/// Checks the bind mounts of both `aibox.toml` and `.aibox-local.toml`
/// (`[[container.extra_volumes]]`), each labelled with its file.
pub fn check_project_volumes(
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

/// The generated profile at [`PROFILE_PATH`] must be byte-identical to what aibox
/// generates (and what the lock recorded); anything else is an edited profile.
pub fn check_seccomp_profile(file_text: &[u8], recorded_sha256: Option<&str>) -> Vec<Finding> {
    let actual = crate::seccomp::sha256_hex(file_text);
    let expected = crate::seccomp::generated_profile_sha256().ok();
    let mut out = Vec::new();
    let matches_generated = expected.as_deref() == Some(actual.as_str());
    let matches_lock = recorded_sha256.is_none_or(|r| r == actual);
    if !matches_generated || !matches_lock {
        out.push(Finding::new(
            "aibox::policy::seccomp_profile_edited",
            Severity::Error,
            PROFILE_PATH,
            format!(
                "the seccomp profile differs from the one aibox generates (SHA-256 {actual}); \
                 an edited profile may allow more than bubblewrap needs"
            ),
            "run `aibox apply` to regenerate it; put other relaxations in \
             `[[security.exceptions]]` instead of editing the profile",
        ));
    }
    out
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
    consent: &'a Consent,
    /// The project's files: where host paths lead through symbolic links, and the
    /// seccomp profile a `seccomp=<file>` option names.
    sources: &'a dyn ComposeSources,
    /// Project-relative folder relative paths resolve against (Compose files); `None`
    /// where relative paths are not resolved by Compose.
    dir: Option<&'a str>,
}

struct Mount {
    source: String,
    read_only: bool,
}

impl Ctx<'_> {
    fn push(&self, refuse: bool, option: &str, finding: Finding, out: &mut Vec<Finding>) {
        out.extend(self.consent.judge(refuse, option, finding));
    }

    fn privileged(&self, line: Option<usize>, out: &mut Vec<Finding>) {
        let f = Finding::new(
            "aibox::policy::privileged",
            Severity::Error,
            self.file,
            "privileged mode gives the container every capability and every host device: it is \
             no longer a boundary",
            "remove it; for Codex's sandbox use `[security] codex_sandbox` (the engine's \
             default or the generated seccomp profile), for devices add only the one device you need",
        )
        .at(line);
        self.push(true, "privileged", f, out);
    }

    fn cap(&self, raw: &str, out: &mut Vec<Finding>) {
        let upper = raw.trim().to_ascii_uppercase();
        let cap = upper.strip_prefix("CAP_").unwrap_or(&upper);
        if cap.is_empty() {
            return;
        }
        let line = line_of(self.text, raw.trim());
        let option = format!("cap_add:{cap}");
        let consent_hint = format!(
            "record the consent in aibox.toml as `[[security.exceptions]] option = \"{option}\"` \
             with a reason"
        );
        let refused = if BROAD_CAPS.contains(&cap) {
            Some((
                format!(
                    "adding capability {cap} gives the container root-equivalent powers over \
                     the host kernel"
                ),
                format!(
                    "remove it; aibox never needs it (Codex's sandbox has `[security] \
                     codex_sandbox` instead). If a narrower capability does the job, add that \
                     one; to keep it, {consent_hint}"
                ),
            ))
        } else if let Some((_, why)) = HOST_CAPS.iter().find(|(c, _)| *c == cap) {
            Some((
                format!("adding capability {cap} {why}"),
                format!("remove it; if a tool really needs it, {consent_hint}"),
            ))
        } else if !NARROW_CAPS.contains(&cap) {
            Some((
                format!(
                    "capability {cap} is not one the gate knows to be harmless, so what it hands \
                     out is unknown"
                ),
                format!("check the name; to keep it, {consent_hint}"),
            ))
        } else {
            None
        };
        let f = match refused {
            Some((message, remedy)) => Finding::new(
                "aibox::policy::cap_add",
                Severity::Error,
                self.file,
                message,
                remedy,
            ),
            None => Finding::new(
                "aibox::policy::cap_add_narrow",
                Severity::Warning,
                self.file,
                format!("the container adds capability {cap}"),
                format!(
                    "keep it only if needed and record why with a `[[security.exceptions]]` entry \
                     `option = \"{option}\"`"
                ),
            ),
        }
        .at(line);
        let refuse = f.severity == Severity::Error;
        self.push(refuse, &option, f, out);
    }

    fn security_opt(&self, raw: &str, out: &mut Vec<Finding>) {
        let raw = raw.trim();
        let Some(pos) = raw.find(['=', ':']) else {
            return;
        };
        let (key, value) = (
            raw[..pos].trim().to_ascii_lowercase(),
            raw[pos + 1..].trim(),
        );
        let line = line_of(self.text, raw);
        match key.as_str() {
            "seccomp" => self.seccomp_opt(value, line, out),
            "apparmor" if value.eq_ignore_ascii_case("unconfined") => self.relaxation(
                "aibox::policy::apparmor_unconfined",
                "apparmor=unconfined",
                "`apparmor=unconfined` removes the AppArmor confinement of the container",
                line,
                out,
            ),
            "label" if value.eq_ignore_ascii_case("disable") => self.relaxation(
                "aibox::policy::selinux_disabled",
                "label=disable",
                "`label=disable` turns off SELinux separation for the container",
                line,
                out,
            ),
            // Any other label (a type such as `spc_t` or `unconfined_t`, a user, a role, an
            // MCS level shared with other containers) replaces the engine's separation.
            "label" => self.relaxation(
                "aibox::policy::security_label",
                &format!("label={value}"),
                &format!(
                    "`label={value}` replaces the SELinux label the engine gives the container \
                     (`type:spc_t` runs it unconfined, a shared level reaches other containers' \
                     files)"
                ),
                line,
                out,
            ),
            "apparmor" if !value.eq_ignore_ascii_case("docker-default") => self.relaxation(
                "aibox::policy::security_label",
                &format!("apparmor={value}"),
                &format!(
                    "`apparmor={value}` replaces the AppArmor profile the engine gives the \
                     container with one the gate cannot read"
                ),
                line,
                out,
            ),
            "systempaths" if value.eq_ignore_ascii_case("unconfined") => self.relaxation(
                "aibox::policy::systempaths_unconfined",
                "systempaths=unconfined",
                "`systempaths=unconfined` unmasks /proc/kcore, /proc/keys, /proc/sysrq-trigger and \
                 other host paths",
                line,
                out,
            ),
            "unmask" => self.relaxation(
                "aibox::policy::systempaths_unconfined",
                "unmask",
                "`unmask` exposes masked /proc and /sys paths of the host",
                line,
                out,
            ),
            "no-new-privileges" if value.eq_ignore_ascii_case("false") => {
                let f = Finding::new(
                    "aibox::policy::no_new_privileges",
                    Severity::Warning,
                    self.file,
                    "`no-new-privileges=false` lets processes regain privileges through setuid \
                     binaries",
                    "remove the option",
                )
                .at(line);
                self.push(false, "no-new-privileges=false", f, out);
            }
            _ => {}
        }
    }

    fn seccomp_opt(&self, value: &str, line: Option<usize>, out: &mut Vec<Finding>) {
        if value.eq_ignore_ascii_case("unconfined") {
            if self.consent.seccomp_unconfined {
                return;
            }
            out.push(
                Finding::new(
                    "aibox::policy::seccomp_unconfined",
                    Severity::Error,
                    self.file,
                    "`seccomp=unconfined` removes the container's syscall filter, and the \
                         owner has not consented",
                    "prefer `[security] codex_sandbox = \"engine-default\"` (no relaxation) or \
                         \"seccomp-profile\" (narrower); to keep it, set `[security] \
                         acknowledge_seccomp_unconfined = true` in aibox.toml",
                )
                .at(line),
            );
            return;
        }
        // The generated profile is judged where every Compose tool will read it, by its
        // bytes: consent covers the profile aibox generates, not a file of that name. A
        // relative path is read from the Compose file's folder by Compose v2 and
        // podman-compose and from the working directory (the project root, under the Dev
        // Containers CLI) by docker-compose 1.29, so both readings must be one of the
        // generated copies (`SECCOMP_PROFILES`) with the generated bytes. A running
        // container shows the option as Compose passed it.
        let dir = if self.file == CONTAINER_LABEL {
            dir_of(PROFILE_PATH)
        } else {
            self.dir.unwrap_or_else(|| dir_of(PROFILE_PATH))
        };
        let readings: Vec<Option<String>> = if value.starts_with(['/', '~', '$']) {
            vec![None]
        } else {
            let mut r = vec![join_project(dir, value), join_project("", value)];
            r.dedup();
            r
        };
        let names_ours = readings.iter().all(|r| {
            r.as_deref()
                .is_some_and(|p| aibox_config::layout::SECCOMP_PROFILES.contains(&p))
        });
        if !names_ours {
            let f = Finding::new(
                "aibox::policy::seccomp_profile",
                Severity::Error,
                self.file,
                format!(
                    "seccomp profile `{value}` is not the one aibox generates, so its rules are \
                     unknown"
                ),
                format!(
                    "use `[security] codex_sandbox = \"seccomp-profile\"` (aibox's generated \
                     profile, judged by its SHA-256) or remove the option; to keep it, record \
                     the consent in aibox.toml as `[[security.exceptions]] option = \
                     \"seccomp={value}\"` with a reason"
                ),
            )
            .at(line);
            self.push(true, &format!("seccomp={value}"), f, out);
            return;
        }
        let expected = crate::seccomp::generated_profile_sha256().unwrap_or_default();
        for path in readings.iter().flatten() {
            let actual = self
                .sources
                .read(path)
                .map(|text| crate::seccomp::sha256_hex(text.as_bytes()));
            if actual.as_deref() == Some(expected.as_str()) {
                continue;
            }
            let found = actual.map_or_else(
                || "it is missing".to_owned(),
                |sha| format!("its SHA-256 is {sha}"),
            );
            let f = Finding::new(
                "aibox::policy::seccomp_profile_edited",
                Severity::Error,
                self.file,
                format!(
                    "`seccomp={value}` names `{path}`, but that file is not the profile aibox \
                     generates ({found}, expected {expected}); the consent \
                     `acknowledge_seccomp_profile` covers only the generated profile"
                ),
                "run `aibox apply` to regenerate it; put other relaxations in \
                 `[[security.exceptions]]` instead of editing the profile",
            )
            .at(line);
            out.push(f);
            return;
        }
        if self.consent.seccomp_profile {
            return;
        }
        out.push(
            Finding::new(
                "aibox::policy::seccomp_profile",
                Severity::Error,
                self.file,
                "the generated seccomp profile enables user namespaces, and the owner has not \
                 consented",
                "set `[security] acknowledge_seccomp_profile = true` in aibox.toml, or use \
                 `codex_sandbox = \"engine-default\"`",
            )
            .at(line),
        );
    }

    fn relaxation(
        &self,
        code: &str,
        option: &str,
        message: &str,
        line: Option<usize>,
        out: &mut Vec<Finding>,
    ) {
        let f = Finding::new(
            code,
            Severity::Error,
            self.file,
            message,
            format!(
                "remove it; if a tool really needs it, record the consent in aibox.toml as \
                 `[[security.exceptions]] option = \"{option}\"` with a reason"
            ),
        )
        .at(line);
        self.push(true, option, f, out);
    }

    fn namespace(&self, key: &str, value: &str, out: &mut Vec<Finding>) {
        let value = value.trim();
        let host = value.eq_ignore_ascii_case("host");
        let container = key == "network_mode" && value.starts_with("container:");
        // Podman joins any namespace by path (`ns:/proc/1/ns/net`): on a rootful engine,
        // the host's.
        let by_path = value
            .get(..3)
            .is_some_and(|p| p.eq_ignore_ascii_case("ns:"));
        if !host && !container && !by_path {
            return;
        }
        let what = key.trim_end_matches("_mode").trim_start_matches("build.");
        let option = if container {
            "network_mode:container".to_owned()
        } else if by_path {
            format!("{key}:ns")
        } else {
            format!("{key}:host")
        };
        let f = Finding::new(
            "aibox::policy::host_namespace",
            Severity::Error,
            self.file,
            format!(
                "`{key}: {value}` shares the {} {what} namespace with the container",
                if container {
                    "other container's"
                } else if by_path {
                    "named (on a rootful engine, the host's)"
                } else {
                    "host's"
                }
            ),
            if what == "network" {
                "remove it; for egress control route traffic through a proxy service \
                 (`network_mode: service:<proxy>` is allowed)"
            } else {
                "remove it; the container keeps its own namespace by default"
            },
        )
        .at(line_of_all(
            self.text,
            &[value, key.rsplit('.').next().unwrap_or(key)],
        ));
        self.push(true, &option, f, out);
    }

    /// `user:` of a service: root inside the container is refused until consent names it.
    fn user(&self, user: &str, out: &mut Vec<Finding>) {
        if !is_root_user(user) {
            return;
        }
        let f = Finding::new(
            "aibox::policy::root_user",
            Severity::Error,
            self.file,
            format!(
                "the container runs as `{user}` (root): a break-out starts with root rights, and \
                 with a device or a rootful engine root in the container is root on the host"
            ),
            ROOT_REMEDY,
        )
        .at(line_of(self.text, "user"));
        self.push(true, "user:root", f, out);
    }

    /// A host path whose content Compose copies into the container or the image
    /// (`env_file`, `configs`, `secrets`, build contexts): refused when it is a sensitive
    /// system path, a home or credential location, or outside the project.
    fn host_read(&self, what: &str, raw: &str, out: &mut Vec<Finding>) {
        let raw = raw.trim();
        if raw.is_empty() || raw.contains("://") || raw.starts_with("git@") || raw.contains(':') {
            // URLs, `service:`/`docker-image:` contexts: no host path.
            return;
        }
        let Some(path) = resolve_source(raw) else {
            return;
        };
        let outside = match (self.dir, path.starts_with(['/', '~'])) {
            (Some(dir), false) => join_project(dir, &path).is_none(),
            _ => false,
        };
        if !outside {
            match self.link(&path) {
                Link::None => {}
                Link::Leaves(target) => {
                    let detail =
                        classify_mount(&target, false).map_or("outside the project", |c| c.what);
                    let message = format!(
                        "`{what}` copies `{path}`, a symbolic link to `{target}` ({detail}), from \
                         the host into the container"
                    );
                    self.link_leaves(message, &target, line_of(self.text, raw), out);
                    return;
                }
                Link::Moves(target) => self.host_read(what, &target, out),
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
        let detail = class.map_or("a folder outside the project", |c| c.what);
        let option = format!("mount:{path}");
        let f = Finding::new(
            "aibox::policy::host_read",
            Severity::Error,
            self.file,
            format!("`{what}` copies `{path}` ({detail}) from the host into the container"),
            format!(
                "use a file inside the project; to keep it, record the consent with a \
                 `[[security.exceptions]]` entry `option = \"{option}\"`"
            ),
        )
        .at(line_of(self.text, raw));
        self.push(true, &option, f, out);
    }

    /// Where `path` (as [`resolve_source`] gives it: relative to this file's folder,
    /// absolute, or `~/…`) leads through symbolic links. A relative path is asked for both
    /// as Compose cleans it (lexically) and as written (the kernel's `..` after a link).
    fn link(&self, path: &str) -> Link {
        let mut queries = Vec::new();
        if path.starts_with(['/', '~']) {
            queries.push(path.to_owned());
        } else if let Some(dir) = self.dir {
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
                if self.sources.host_path(&before) != HostPath::Plain {
                    queries.push(written);
                }
            }
        }
        for query in queries {
            match self.sources.host_path(&query) {
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

    /// One host device (`devices:`, `--device`): refused until consent names it.
    fn device(&self, key: &str, spec: &str, out: &mut Vec<Finding>) {
        let spec = spec.trim();
        // `/dev/sda:/dev/xvda:rwm` → the host side; a CDI name (`vendor.com/gpu=all`) whole.
        let source = if spec.starts_with('/') {
            spec.split(':').next().unwrap_or(spec)
        } else {
            spec
        };
        self.relaxation(
            "aibox::policy::devices",
            &format!("devices:{source}"),
            &format!(
                "`{key}` passes the host device `{source}` into the container (a disk is the \
                 host's data, as root in the container it is the host)"
            ),
            line_of(self.text, source).or_else(|| line_of(self.text, key)),
            out,
        );
    }

    /// One `device_cgroup_rules` entry: lets the container use host devices it creates.
    fn device_rule(&self, rule: &str, out: &mut Vec<Finding>) {
        let rule = rule.trim();
        self.relaxation(
            "aibox::policy::device_cgroup_rule",
            &format!("device_cgroup_rules:{rule}"),
            &format!(
                "device cgroup rule `{rule}` lets the container read and write host devices it \
                 creates with mknod (`a *:* rwm` is every device, disks included)"
            ),
            line_of(self.text, rule).or_else(|| line_of(self.text, "device_cgroup_rule")),
            out,
        );
    }

    /// One kernel parameter set for the container (`sysctls:`, `--sysctl`).
    fn sysctl(&self, name: &str, out: &mut Vec<Finding>) {
        let name = name.trim();
        if name.is_empty() {
            return;
        }
        self.relaxation(
            "aibox::policy::sysctl",
            &format!("sysctls:{name}"),
            &format!(
                "the container sets the kernel parameter `{name}`; kernel parameters change \
                 what the kernel allows (and with a shared namespace they are the host's)"
            ),
            line_of(self.text, name),
            out,
        );
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

    fn mount(&self, m: &Mount, out: &mut Vec<Finding>) {
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
        let escapes = self
            .dir
            .is_some_and(|dir| !path.starts_with(['/', '~']) && join_project(dir, &path).is_none());
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

/// Which rule a resolved bind source falls under, if any.
fn classify_mount(path: &str, read_only: bool) -> Option<MountClass> {
    let in_tree = SYSTEM_TREES
        .iter()
        .any(|t| path.starts_with(&format!("{t}/")));
    let (home_rel, is_home) = split_home(path);
    let credential = home_rel.as_deref().is_some_and(|rel| {
        CREDENTIAL_DIRS
            .iter()
            .any(|c| rel == *c || rel.starts_with(&format!("{c}/")))
    });
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
fn proven_read_only(options: &str) -> bool {
    let options: Vec<&str> = options.split(',').map(str::trim).collect();
    options.contains(&"ro") && !options.contains(&"rw")
}

/// `src:dst[:mode]`; `None` for anonymous and named volumes.
fn parse_short_volume(spec: &str) -> Option<Mount> {
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
fn parse_mount_spec(spec: &str) -> Option<Mount> {
    let mut source = None;
    let mut kind = "bind";
    let mut read_only = false;
    for part in spec.split(',') {
        let (k, v) = part
            .split_once('=')
            .map_or((part.trim(), ""), |(k, v)| (k.trim(), v.trim()));
        match k {
            "source" | "src" => source = Some(v.to_owned()),
            "type" => kind = if v == "bind" { "bind" } else { "other" },
            "readonly" | "ro" => read_only = v.is_empty() || str_truthy(v),
            _ => {}
        }
    }
    source
        .filter(|_| kind == "bind")
        .map(|source| Mount { source, read_only })
}

fn unparsable(file: &str, what: &str, err: &str) -> Finding {
    Finding::new(
        "aibox::policy::unparsable",
        Severity::Error,
        file,
        format!("cannot check this file: it is not valid {what} ({err})"),
        "fix the syntax; the policy gate refuses what it cannot read",
    )
}

fn str_truthy(s: &str) -> bool {
    matches!(
        s.trim().to_ascii_lowercase().as_str(),
        "true" | "yes" | "on" | "1" | "y"
    )
}

fn yaml_truthy(v: &Yaml) -> bool {
    match v {
        Yaml::Bool(b) => *b,
        Yaml::String(s) => str_truthy(s),
        Yaml::Number(n) => n.as_i64().is_some_and(|n| n != 0),
        _ => false,
    }
}

fn json_truthy(v: &Json) -> bool {
    match v {
        Json::Bool(b) => *b,
        Json::String(s) => str_truthy(s),
        _ => false,
    }
}

/// String items of a sequence (or the single string), keys of a mapping.
fn yaml_strings(v: &Yaml) -> Vec<String> {
    match v {
        Yaml::String(s) => vec![s.clone()],
        Yaml::Sequence(items) => items
            .iter()
            .filter_map(|i| match i {
                Yaml::String(s) => Some(s.clone()),
                Yaml::Mapping(m) => m
                    .get("path")
                    .and_then(Yaml::as_str)
                    .or_else(|| m.get("source").and_then(Yaml::as_str))
                    .map(str::to_owned),
                _ => None,
            })
            .collect(),
        Yaml::Mapping(m) => m
            .keys()
            .filter_map(Yaml::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

fn json_strings(v: Option<&Json>) -> Vec<String> {
    match v {
        Some(Json::String(s)) => vec![s.clone()],
        Some(Json::Array(items)) => items
            .iter()
            .filter_map(Json::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
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

    #[test]
    fn features_pinning() {
        assert!(feature_unpinned("ghcr.io/devcontainers/features/node"));
        assert!(!feature_unpinned("ghcr.io/devcontainers/features/node:1"));
        assert!(!feature_unpinned("ghcr.io/x/y@sha256:abcd"));
        assert!(!feature_unpinned("./local-feature"));
    }
}
