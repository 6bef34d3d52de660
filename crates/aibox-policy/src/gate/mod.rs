//! The policy gate for dangerous container options (security model §8).
//!
//! The same rules run over every place an option can come from: Compose files (the
//! generated one and the user-owned override), `devcontainer.json` (its keys, `runArgs`
//! and `mounts`) and the configured extra volumes. Refused options block `apply`/`up`
//! unless a `[[security.exceptions]]` entry (or the dedicated seccomp key) records the
//! owner's consent; warned options never block.
//!
//! This module is the entry point (`check_plan` over a plan, `check_container_state`
//! over what the engine runs) and holds `Ctx`, the place every rule reports a finding
//! through the owner's exceptions. Over a plan the gate is two steps: `gate_inputs`
//! reads what the rules need and judges nothing, `judge_plan` judges those inputs and
//! reads nothing else (`inputs`). The concerns live in their own files:
//! - `inputs`: the traversal, its result and the judgement's closed view of it;
//! - `setup`: which dev container configurations and Compose files the tools run;
//! - `project`: Compose resolution (`include:`, `extends`, interpolation, networks,
//!   volumes) and what cannot be resolved;
//! - `service`: one Compose service's keys and build;
//! - `devcontainer`: `devcontainer.json`, `runArgs` and features;
//! - `privilege`: privileged mode, capabilities, namespaces, devices, sysctls, users;
//! - `mounts`: bind mounts, host files, symbolic links, sockets and homes;
//! - `consent`: security options that relax confinement, and the seccomp profile.

mod consent;
mod devcontainer;
mod inputs;
mod mounts;
mod privilege;
mod project;
mod service;
mod setup;

pub use consent::check_seccomp_profile;
pub use devcontainer::{check_devcontainer_json, check_run_args};
pub use inputs::{GateInputs, gate_inputs};
pub use mounts::{check_project_volumes, check_volumes, is_credential_source};
pub use privilege::check_container_user;
pub use project::{check_compose, check_compose_project};
pub(crate) use setup::compose_projects;
pub use setup::{check_compose_setup, devcontainer_compose_files};

use std::fmt::Write as _;

use aibox_config::container::COMPOSE_PROJECT_LABELS;
use aibox_config::{AiboxToml, LocalToml, Ownership, PlannedFile};
use serde_json::Value as Json;
use serde_norway::Value as Yaml;

use crate::PolicyError;
use crate::compose::ComposeSources;
use crate::finding::{Consent, Finding, Severity};
use crate::secrets::{TextKind, scan_secrets};
use inputs::{Closed, Overlay};

use mounts::Mount;

/// Path of the generated `devcontainer.json`.
pub const DEVCONTAINER_PATH: &str = aibox_config::layout::DEVCONTAINER_JSON;

/// The whole gate over a plan, as `apply` runs it before writing anything: the planned
/// Compose file and `devcontainer.json`, the existing override (`override_text`, read by
/// the caller), the configured volumes of both configuration files, and the secret scan
/// over every planned file that is committed (everything but local state). It is
/// [`gate_inputs`] (what the rules read) followed by [`judge_plan`] (the rules over
/// exactly that).
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
    let inputs = gate_inputs(config, local, files, override_text, disk);
    judge_plan(config, local, files, override_text, &inputs)
}

thread_local! {
    /// How many plans this thread has judged.
    static JUDGEMENTS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Test hook: how many times the calling thread ran [`judge_plan`] (per thread, so tests
/// running in parallel do not see each other's); the engine's tests hold `apply` to one.
#[doc(hidden)]
pub fn plan_judgements() -> usize {
    JUDGEMENTS.with(std::cell::Cell::get)
}

/// The judgement of [`check_plan`] over `inputs`, which [`gate_inputs`] made for the same
/// `files` and `override_text`: every rule, reading the project through `inputs` only.
///
/// # Errors
/// [`PolicyError::Gate`] when any finding is an error; [`PolicyError::Untraversed`] when
/// a rule needed a file, host path or folder that `inputs` does not hold.
pub fn judge_plan(
    config: &AiboxToml,
    local: &LocalToml,
    files: &[PlannedFile],
    override_text: Option<&str>,
    inputs: &GateInputs,
) -> Result<Vec<Finding>, PolicyError> {
    JUDGEMENTS.with(|n| n.set(n.get() + 1));
    let consent = Consent::from_config(config);
    let mut out = Vec::new();
    let mut planned_override = false;
    for f in files.iter().filter(|f| !inputs::skipped(f, override_text)) {
        planned_override |= f.path == aibox_config::layout::COMPOSE_OVERRIDE;
        if f.ownership != Ownership::LocalState && !is_local_state(f.path.as_str()) {
            let text = String::from_utf8_lossy(&f.contents);
            out.extend(scan_secrets(
                f.path.as_str(),
                &text,
                TextKind::from_path(f.path.as_str()),
            ));
        }
    }
    if let (Some(text), false) = (override_text, planned_override) {
        out.extend(scan_secrets(
            aibox_config::layout::COMPOSE_OVERRIDE,
            text,
            TextKind::Yaml,
        ));
    }
    let disk = Closed::new(inputs);
    // Compose sees the planned files, and whatever else is on disk.
    let overlay = Overlay {
        planned: &inputs.planned,
        disk: &disk,
    };
    out.extend(setup::compose_setup(&overlay, &consent, Pass::Judge));
    out.extend(crate::egress::check_egress(config, &consent, &overlay));
    out.extend(check_container_user(config, &consent));
    point_secrets_at_source(&mut out, files, &disk);
    out.extend(mounts::project_volumes(config, local, &consent, &disk));
    if let Some(path) = disk.first_miss() {
        return Err(PolicyError::Untraversed { path });
    }
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

/// Which of the walk's two runs this is: the traversal reads what each rule would read
/// (and judges nothing), the judgement runs the rules over the traversal's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Traverse,
    Judge,
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
///
/// Engines report Compose's `service:<name>` (network, PID, IPC), which the files allow,
/// as `container:<id>`. `peers` holds the `container inspect` JSON of the containers
/// [`namespace_containers`] names; a namespace of one that belongs to the same Compose
/// project is the service's, so it is allowed as in the files. Any other container's is
/// refused.
pub fn check_container_state(
    inspect_json: &str,
    project_root: &str,
    consent: &Consent,
    sources: &dyn ComposeSources,
    peers: &[String],
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
            let service = value
                .strip_prefix("container:")
                .is_some_and(|other| same_compose_project(c, other, peers));
            if !service {
                ctx.namespace(key, value, &mut out);
            }
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

/// The bind mounts of a container `aibox up` just started (its `container inspect`
/// JSON) from outside `project_root` that no configuration names: `expected` holds the
/// host paths of the configured bind sources outside the project, as written (`~`
/// expanded) and as their links resolve. Engines resolve a bind source's symbolic links
/// when they mount it, so a project folder swapped for a link after aibox checked it
/// shows here as a host path nothing asked for.
#[must_use]
pub fn unexpected_mounts(
    inspect_json: &str,
    project_root: &str,
    expected: &[String],
) -> Vec<Finding> {
    let Ok(doc) = serde_json::from_str::<Json>(inspect_json) else {
        return vec![unparsable(CONTAINER_LABEL, "inspect JSON", "not JSON")];
    };
    let Some(c) = doc.as_array().and_then(|a| a.first()).or(Some(&doc)) else {
        return Vec::new();
    };
    let root = project_root.trim_end_matches('/');
    let inside = |source: &str| {
        !root.is_empty() && (source == root || source.starts_with(&format!("{root}/")))
    };
    let trim = |p: &str| p.trim_end_matches('/').to_owned();
    c["Mounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["Type"].as_str().unwrap_or("bind") == "bind")
        .filter_map(|m| m["Source"].as_str())
        .filter(|source| !inside(source) && !expected.iter().any(|e| trim(e) == trim(source)))
        .map(|source| {
            Finding::new(
                "aibox::policy::unexpected_mount",
                Severity::Error,
                CONTAINER_LABEL,
                format!(
                    "the engine mounted `{source}`, which no configuration names: a mounted \
                     project folder was a symbolic link to it when the container started \
                     (made after aibox checked the files?)"
                ),
                "replace the link with the folder it replaced (look for links in the \
                 project and in `.aibox-home/`), then run `aibox up` again",
            )
        })
        .collect()
}

/// The containers whose namespaces the container of `inspect_json` joins
/// (`container:<name or id>` in its network, PID or IPC mode), each once: the ones
/// [`check_container_state`] needs the inspect JSON of.
#[must_use]
pub fn namespace_containers(inspect_json: &str) -> Vec<String> {
    let Ok(doc) = serde_json::from_str::<Json>(inspect_json) else {
        return Vec::new();
    };
    let c = doc.as_array().and_then(|a| a.first()).unwrap_or(&doc);
    let mut out: Vec<String> = Vec::new();
    for field in ["NetworkMode", "PidMode", "IpcMode"] {
        if let Some(other) = c["HostConfig"][field]
            .as_str()
            .and_then(|v| v.strip_prefix("container:"))
            .map(str::trim)
            .filter(|o| !o.is_empty())
            && !out.iter().any(|o| o == other)
        {
            out.push(other.to_owned());
        }
    }
    out
}

/// Whether `other` (a name or id) is, among `peers`, a container of the same Compose
/// project as `container`: both carry the same project name label.
fn same_compose_project(container: &Json, other: &str, peers: &[String]) -> bool {
    let project = |c: &Json| -> Option<String> {
        COMPOSE_PROJECT_LABELS
            .iter()
            .find_map(|l| c["Config"]["Labels"][*l].as_str())
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
    };
    let Some(own) = project(container) else {
        return false;
    };
    let other = other.trim();
    peers.iter().any(|json| {
        let Ok(doc) = serde_json::from_str::<Json>(json) else {
            return false;
        };
        let peer = doc.as_array().and_then(|a| a.first()).unwrap_or(&doc);
        let id = peer["Id"].as_str().unwrap_or_default();
        let name = peer["Name"]
            .as_str()
            .unwrap_or_default()
            .trim_start_matches('/');
        // Engines accept a unique id prefix too; a short one is not trusted.
        let named = (!name.is_empty() && name == other)
            || (!id.is_empty() && (id == other || (other.len() >= 12 && id.starts_with(other))));
        named && project(peer).as_deref() == Some(own.as_str())
    })
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

/// Whether `path` is gitignored local state, which may hold personal values and is
/// never committed.
fn is_local_state(path: &str) -> bool {
    aibox_config::is_local_state(path)
}

/// One judged file and what the rules need to judge it. The rules are its methods,
/// one file per concern; every finding goes through [`Ctx::push`], which applies the
/// owner's `[[security.exceptions]]`.
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

impl Ctx<'_> {
    fn push(&self, refuse: bool, option: &str, finding: Finding, out: &mut Vec<Finding>) {
        out.extend(self.consent.judge(refuse, option, finding));
    }
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

/// Whether a flag value reads as true to any of the tools: YAML's words, and what Go's
/// `strconv.ParseBool` (Podman's and Docker's flags) takes, `t` included.
fn str_truthy(s: &str) -> bool {
    matches!(
        s.trim().to_ascii_lowercase().as_str(),
        "true" | "yes" | "on" | "1" | "y" | "t"
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

/// A scalar as Compose reads it into a string (`user: 0`, `max-size: 10`), `""` for
/// anything else.
fn yaml_scalar(v: &Yaml) -> String {
    match v {
        Yaml::String(s) => s.clone(),
        Yaml::Number(n) => n.to_string(),
        Yaml::Bool(b) => b.to_string(),
        _ => String::new(),
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
