//! The policy gate for dangerous container options (security model §8).
//!
//! The same rules run over every place an option can come from: Compose files (the
//! generated one and the user-owned override), `devcontainer.json` (its keys, `runArgs`
//! and `mounts`) and the configured extra volumes. Refused options block `apply`/`up`
//! unless a `[[security.exceptions]]` entry (or the dedicated seccomp key) records the
//! owner's consent; warned options never block.

use std::fmt::Write as _;

use aibox_config::{AiboxToml, ExtraVolume, LocalToml, Ownership, PlannedFile};
use serde_json::Value as Json;
use serde_norway::Value as Yaml;

use std::collections::BTreeMap;

use serde_norway::value::Mapping;

use crate::PolicyError;
use crate::compose::{
    ComposeSources, NoSources, dir_of, interpolate_tree, join_project, normalise_yaml,
    parse_env_file, variables_in,
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

/// Path of the generated Compose file.
pub const COMPOSE_PATH: &str = aibox_config::layout::COMPOSE;
/// Path of the user-owned Compose override.
pub const OVERRIDE_PATH: &str = aibox_config::layout::COMPOSE_OVERRIDE;
/// Path of the generated personal Compose file (local state, still gated).
pub const COMPOSE_LOCAL_PATH: &str = aibox_config::layout::COMPOSE_LOCAL;
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
///     aibox_policy::COMPOSE_PATH,
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
        f.path == OVERRIDE_PATH && f.ownership == Ownership::ScaffoldOnce && override_text.is_some()
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
    let planned_override = planned.contains_key(OVERRIDE_PATH);
    if let (Some(text), false) = (override_text, planned_override) {
        out.extend(scan_secrets(OVERRIDE_PATH, text, TextKind::Yaml));
        planned.insert(OVERRIDE_PATH.to_owned(), text.to_owned());
    }
    // Compose sees the planned files, and whatever else is on disk.
    let overlay = Overlay {
        planned: &planned,
        disk,
    };
    out.extend(check_compose_setup(&overlay, &consent));
    out.extend(check_container_user(config, &consent));
    point_secrets_at_source(&mut out, files, disk);
    out.extend(check_project_volumes(config, local, &consent));
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
/// project's own. Text that is not inspect JSON is refused: the state is unknown.
pub fn check_container_state(
    inspect_json: &str,
    project_root: &str,
    consent: &Consent,
) -> Vec<Finding> {
    let ctx = Ctx {
        file: CONTAINER_LABEL,
        text: "",
        consent,
        dir: None,
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
        let inside =
            !root.is_empty() && (source == root || source.starts_with(&format!("{root}/")));
        if kind != "bind" || inside {
            continue;
        }
        ctx.mount(
            &Mount {
                source: source.to_owned(),
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
}

/// `[container] user = "root"` or `uid = 0`: the container's user is root.
pub fn check_container_user(config: &AiboxToml, consent: &Consent) -> Vec<Finding> {
    let c = &config.container;
    if c.user != "root" && c.uid != 0 {
        return Vec::new();
    }
    let f = Finding::new(
        "aibox::policy::root_user",
        Severity::Warning,
        aibox_config::AIBOX_TOML,
        format!(
            "the container runs as root (`[container] user = \"{}\"`, uid {}): a break-out \
             starts with root rights",
            c.user, c.uid
        ),
        "use an unprivileged user (the default `dev`, uid 1000); to keep root, record the \
         consent with a `[[security.exceptions]]` entry `option = \"user:root\"`",
    );
    consent.judge(false, "user:root", f).into_iter().collect()
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
const GUARDED_KEYS: [&str; 24] = [
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
/// Compose: the generated, override and personal files plus every other file the
/// `dockerComposeFile` list of `devcontainer.json` names, each read through `sources`,
/// with `.devcontainer/.env`.
/// Listed files outside the project are refused; listed files that do not exist are not
/// run, so they are skipped. `devcontainer.json` itself is judged too.
pub fn check_compose_setup(sources: &dyn ComposeSources, consent: &Consent) -> Vec<Finding> {
    let mut out = Vec::new();
    let devcontainer = sources.read(DEVCONTAINER_PATH);
    if let Some(text) = &devcontainer {
        out.extend(check_devcontainer_json(DEVCONTAINER_PATH, text, consent));
        out.extend(check_local_features(text, sources, consent));
    }
    // `aibox up` runs its Compose files itself; the editor runs the listed ones. Both count.
    let mut names: Vec<String> = aibox_config::layout::COMPOSE_FILES
        .map(str::to_owned)
        .to_vec();
    for name in devcontainer
        .as_deref()
        .and_then(devcontainer_compose_files)
        .unwrap_or_default()
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let mut texts: Vec<(String, String)> = Vec::new();
    for name in names {
        if name.starts_with("../") || name.starts_with(['/', '~', '\\']) || name.contains('$') {
            let f = Finding::new(
                "aibox::policy::unchecked_include",
                Severity::Error,
                DEVCONTAINER_PATH,
                format!(
                    "`dockerComposeFile` names `{name}`, outside the project, which the gate \
                     cannot judge"
                ),
                "list only Compose files inside the project's `.devcontainer/` folder",
            )
            .at(devcontainer
                .as_deref()
                .and_then(|t| line_of(t, "dockerComposeFile")));
            out.extend(consent.judge(true, &format!("include:{name}"), f));
            continue;
        }
        if let Some(text) = sources.read(&name) {
            texts.push((name, text));
        }
    }
    let env = sources.read(aibox_config::layout::COMPOSE_ENV);
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
    out
}

/// Local devcontainer features (`"./name"`) bring their own container options in
/// `devcontainer-feature.json` (`privileged`, `capAdd`, `securityOpt`, `mounts`): judged
/// like the same keys in `devcontainer.json`. A local feature whose metadata cannot be
/// read is refused.
fn check_local_features(
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
        let path = join_project(".devcontainer", id.trim_end_matches('/'))
            .map(|dir| format!("{dir}/devcontainer-feature.json"));
        let Some((path, text)) = path.and_then(|p| sources.read(&p).map(|t| (p, t))) else {
            let f = Finding::new(
                "aibox::policy::unchecked_include",
                Severity::Error,
                DEVCONTAINER_PATH,
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
        out.extend(check_devcontainer_json(&path, &text, consent));
    }
    out
}

/// The files of a `devcontainer.json` `dockerComposeFile` (project-relative, in order;
/// entries outside the project or named through a variable as written); `None` when the
/// text does not parse or names none.
pub fn devcontainer_compose_files(jsonc_text: &str) -> Option<Vec<String>> {
    let doc: Json = parse_jsonc(jsonc_text).ok()?;
    let list = json_strings(doc.get("dockerComposeFile"));
    if list.is_empty() {
        return None;
    }
    Some(
        list.iter()
            .map(|f| {
                literal_path(f)
                    .and_then(|f| join_project(".devcontainer", &f))
                    .unwrap_or_else(|| f.clone())
            })
            .collect(),
    )
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
    out: Vec<Finding>,
    visited: Vec<(String, String)>,
}

impl Resolver<'_> {
    fn load_text(&mut self, path: &str, text: &str) {
        let doc = match serde_norway::from_str::<Yaml>(text) {
            Ok(doc) => match normalise_yaml(doc, 0) {
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
        let mut raw = Vec::new();
        let entries = match include {
            Yaml::Sequence(items) => items,
            other => vec![other],
        };
        for entry in entries {
            match entry {
                Yaml::String(s) => raw.push(s),
                Yaml::Mapping(_) => match entry.get("path") {
                    Some(Yaml::String(s)) => raw.push(s.clone()),
                    Some(Yaml::Sequence(items)) => {
                        raw.extend(items.iter().filter_map(Yaml::as_str).map(str::to_owned));
                    }
                    _ => raw.push("?".to_owned()),
                },
                _ => raw.push("?".to_owned()),
            }
        }
        let mut found = Vec::new();
        for target in raw {
            let line = line_of(&text, &target);
            let resolved = literal_path(&target).and_then(|t| join_project(dir_of(path), &t));
            match resolved {
                Some(p) if self.load_ref(&p) => found.push(p),
                _ => self.unseen(path, "`include:` pulls in", &target, line),
            }
        }
        found
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
        let dir = dir_of(path).to_owned();
        // Top-level named volumes that bind a host path, and files handed in as configs
        // or secrets.
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
                    dir: Some(&dir),
                };
                let mut out = Vec::new();
                if is_volume {
                    let device = def
                        .get("driver_opts")
                        .and_then(|o| o.get("device"))
                        .and_then(Yaml::as_str);
                    if let Some(device) = device.filter(|d| !d.starts_with(':')) {
                        let read_only = def
                            .get("driver_opts")
                            .and_then(|o| o.get("o"))
                            .and_then(Yaml::as_str)
                            .is_some_and(|o| o.split(',').any(|x| x == "ro"));
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
        let dir = dir_of(path).to_owned();
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
    for key in ["devices", "device_cgroup_rules"] {
        if svc.get(key).is_some_and(|v| !yaml_strings(v).is_empty()) {
            ctx.devices(key, out);
        }
    }
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

fn check_build(ctx: &Ctx<'_>, build: &Yaml, out: &mut Vec<Finding>) {
    let context = build.get("context").and_then(Yaml::as_str).unwrap_or(".");
    ctx.host_read("build.context", context, out);
    // Relative to the context (judged above); an absolute one is a host file of its own.
    if let Some(file) = build
        .get("dockerfile")
        .and_then(Yaml::as_str)
        .filter(|f| f.starts_with(['/', '~']))
    {
        ctx.host_read("build.dockerfile", file, out);
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
    let ctx = Ctx {
        file,
        text: jsonc_text,
        consent,
        dir: None,
    };
    let doc: Json = match parse_jsonc(jsonc_text) {
        Ok(doc) => doc,
        Err(e) => return vec![unparsable(file, "JSON", &e.message).at(Some(e.line))],
    };
    let mut out = Vec::new();
    if doc.get("privileged").is_some_and(json_truthy) {
        ctx.privileged(line_of(jsonc_text, "\"privileged\""), &mut out);
    }
    for cap in json_strings(doc.get("capAdd")) {
        ctx.cap(&cap, &mut out);
    }
    for opt in json_strings(doc.get("securityOpt")) {
        ctx.security_opt(&opt, &mut out);
    }
    let run_args = json_strings(doc.get("runArgs"));
    out.extend(check_run_args(file, jsonc_text, &run_args, consent));
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
    if let Some(cmd) = doc.get("initializeCommand") {
        let shown = match cmd {
            Json::String(s) => s.clone(),
            other => other.to_string(),
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
        dir: None,
    };
    let mut out = Vec::new();
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
                ctx.privileged(line_of(text, "--privileged"), &mut out);
            }
            "--cap-add" => ctx.cap(&value, &mut out),
            "--security-opt" => ctx.security_opt(&value, &mut out),
            "--network" | "--net" => ctx.namespace("network_mode", &value, &mut out),
            "--pid" => ctx.namespace("pid", &value, &mut out),
            "--ipc" => ctx.namespace("ipc", &value, &mut out),
            "--uts" => ctx.namespace("uts", &value, &mut out),
            "--userns" => ctx.namespace("userns_mode", &value, &mut out),
            "--cgroupns" => ctx.namespace("cgroup", &value, &mut out),
            "-v" | "--volume" => {
                if let Some(m) = parse_short_volume(&value) {
                    ctx.mount(&m, &mut out);
                }
            }
            "--mount" => {
                if let Some(m) = parse_mount_spec(&value) {
                    ctx.mount(&m, &mut out);
                }
            }
            "--device" => ctx.devices("--device", &mut out),
            _ => {}
        }
    }
    out
}

/// Checks the bind mounts of both `aibox.toml` and `.aibox-local.toml`
/// (`[[container.extra_volumes]]`), each labelled with its file.
pub fn check_project_volumes(
    config: &AiboxToml,
    local: &LocalToml,
    consent: &Consent,
) -> Vec<Finding> {
    let mut out = check_volumes(
        "aibox.toml [[container.extra_volumes]]",
        &config.container.extra_volumes,
        consent,
    );
    out.extend(check_volumes(
        ".aibox-local.toml [[container.extra_volumes]]",
        &local.container.extra_volumes,
        consent,
    ));
    out
}

/// Checks configured bind mounts (`[[container.extra_volumes]]` of `aibox.toml` and of
/// `.aibox-local.toml`). `file` labels the findings.
pub fn check_volumes(file: &str, volumes: &[ExtraVolume], consent: &Consent) -> Vec<Finding> {
    let ctx = Ctx {
        file,
        text: "",
        consent,
        dir: None,
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
        if BROAD_CAPS.contains(&cap) {
            let f = Finding::new(
                "aibox::policy::cap_add",
                Severity::Error,
                self.file,
                format!("adding capability {cap} gives the container root-equivalent powers over the host kernel"),
                "remove it; aibox never needs it (Codex's sandbox has `[security] codex_sandbox` instead). \
                 If a narrower capability does the job, add that one",
            )
            .at(line);
            self.push(true, &option, f, out);
        } else {
            let f = Finding::new(
                "aibox::policy::cap_add_narrow",
                Severity::Warning,
                self.file,
                format!("the container adds capability {cap}"),
                format!(
                    "keep it only if needed and record why with a `[[security.exceptions]]` entry \
                     `option = \"{option}\"`"
                ),
            )
            .at(line);
            self.push(false, &option, f, out);
        }
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
        // Only the generated file counts: as the generated Compose file names it, relative
        // to `.devcontainer/` as earlier versions named it, or by an absolute path into a
        // project's `.devcontainer/`; its contents are checked against the lock.
        let ours = matches!(value, "aibox-seccomp.json" | "./aibox-seccomp.json")
            || value == aibox_config::layout::SECCOMP_PROFILE
            || value
                .strip_suffix(aibox_config::layout::SECCOMP_PROFILE)
                .is_some_and(|head| head.ends_with('/'));
        if ours && self.consent.seccomp_profile {
            return;
        }
        let (message, remedy) = if ours {
            (
                "the generated seccomp profile enables user namespaces, and the owner \
                     has not consented"
                    .to_owned(),
                "set `[security] acknowledge_seccomp_profile = true` in aibox.toml, or \
                     use `codex_sandbox = \"engine-default\"`"
                    .to_owned(),
            )
        } else {
            (
                format!(
                    "seccomp profile `{value}` is not the one aibox generates, so its \
                         rules are unknown"
                ),
                "use `[security] codex_sandbox = \"seccomp-profile\"` (aibox's generated \
                     profile, pinned by hash) or remove the option"
                    .to_owned(),
            )
        };
        let f = Finding::new(
            "aibox::policy::seccomp_profile",
            Severity::Error,
            self.file,
            message,
            remedy,
        )
        .at(line);
        if ours {
            out.push(f);
        } else {
            self.push(true, &format!("seccomp={value}"), f, out);
        }
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
        if !host && !container {
            return;
        }
        let what = key.trim_end_matches("_mode").trim_start_matches("build.");
        let option = if container {
            "network_mode:container".to_owned()
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

    /// `user:` of a service: root inside the container is warned until consent names it.
    fn user(&self, user: &str, out: &mut Vec<Finding>) {
        let name = user.split(':').next().unwrap_or("").trim();
        if name != "root" && name != "0" {
            return;
        }
        let f = Finding::new(
            "aibox::policy::root_user",
            Severity::Warning,
            self.file,
            format!("the container runs as `{user}` (root): a break-out starts with root rights"),
            "run as the unprivileged user aibox creates; to keep root, record the consent with a \
             `[[security.exceptions]]` entry `option = \"user:root\"`",
        )
        .at(line_of(self.text, "user"));
        self.push(false, "user:root", f, out);
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

    fn devices(&self, key: &str, out: &mut Vec<Finding>) {
        let f = Finding::new(
            "aibox::policy::devices",
            Severity::Warning,
            self.file,
            format!("`{key}` passes host devices into the container"),
            "keep only the devices you need and record why with a `[[security.exceptions]]` \
             entry `option = \"devices\"`",
        )
        .at(line_of(self.text, key));
        self.push(false, "devices", f, out);
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
        let file_name = path.rsplit('/').next().unwrap_or(&path);
        let under_run = path.starts_with("/run/") || path.starts_with("/var/run/");
        if ENGINE_SOCKETS.contains(&file_name) || (under_run && is_socket_name(file_name)) {
            let f = Finding::new(
                "aibox::policy::engine_socket",
                Severity::Error,
                self.file,
                format!(
                    "`{path}` looks like a container engine socket: whoever can use it controls \
                     the host"
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
        (
            "aibox::policy::home_mount",
            "the host home directory",
            !read_only,
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
    let read_only = parts
        .get(2)
        .is_some_and(|m| m.split(',').any(|o| o == "ro"));
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
