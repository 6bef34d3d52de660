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

use crate::PolicyError;
use crate::finding::{Consent, Finding, Severity};
use crate::seccomp::PROFILE_PATH;
use crate::secrets::{TextKind, scan_secrets};
use crate::text::{line_of, line_of_all, strip_jsonc};

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
const SYSTEM_PATHS: [&str; 13] = [
    "/",
    "/etc",
    "/root",
    "/home",
    "/Users",
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/var/lib/docker",
    "/var/lib/containers",
    "/run",
    "/var/run",
];

/// Trees whose descendants are refused writable and warned read-only.
const SYSTEM_TREES: [&str; 6] = [
    "/proc",
    "/sys",
    "/dev",
    "/boot",
    "/var/lib/docker",
    "/var/lib/containers",
];

/// Credential locations under a home directory.
const CREDENTIAL_DIRS: [&str; 9] = [
    ".ssh",
    ".aws",
    ".kube",
    ".docker",
    ".gnupg",
    ".config/gcloud",
    ".config/gh",
    ".netrc",
    ".git-credentials",
];

const ENGINE_SOCKETS: [&str; 4] = ["docker.sock", "podman.sock", "containerd.sock", "crio.sock"];

/// Path of the generated Compose file.
pub const COMPOSE_PATH: &str = ".devcontainer/docker-compose.yml";
/// Path of the user-owned Compose override.
pub const OVERRIDE_PATH: &str = ".devcontainer/docker-compose.override.yml";
/// Path of the generated personal Compose file (local state, still gated).
pub const COMPOSE_LOCAL_PATH: &str = ".devcontainer/docker-compose.local.yml";
/// Path of the generated `devcontainer.json`.
pub const DEVCONTAINER_PATH: &str = ".devcontainer/devcontainer.json";

/// The whole gate over a plan, as `apply` runs it before writing anything: the planned
/// Compose file and `devcontainer.json`, the existing override (`override_text`, read by
/// the caller), the configured volumes of both configuration files, and the secret scan
/// over every planned file that is committed (everything but local state).
///
/// # Errors
/// [`PolicyError::Gate`] when any finding is an error; otherwise the warnings.
pub fn check_plan(
    config: &AiboxToml,
    local: &LocalToml,
    files: &[PlannedFile],
    override_text: Option<&str>,
) -> Result<Vec<Finding>, PolicyError> {
    let consent = Consent::from_config(config);
    let mut out = Vec::new();
    // A scaffold-once override that already exists is not rewritten: its current text is
    // what Compose will use.
    let skip = |f: &PlannedFile| {
        f.path == OVERRIDE_PATH && f.ownership == Ownership::ScaffoldOnce && override_text.is_some()
    };
    let planned_override = files.iter().any(|f| f.path == OVERRIDE_PATH && !skip(f));
    for f in files.iter().filter(|f| !skip(f)) {
        let text = String::from_utf8_lossy(&f.contents);
        match f.path.as_str() {
            COMPOSE_PATH | OVERRIDE_PATH | COMPOSE_LOCAL_PATH => {
                out.extend(check_compose(f.path.as_str(), &text, &consent));
            }
            DEVCONTAINER_PATH => {
                out.extend(check_devcontainer_json(f.path.as_str(), &text, &consent));
            }
            _ => {}
        }
        if f.ownership != Ownership::LocalState && !is_local_state(f.path.as_str()) {
            out.extend(scan_secrets(
                f.path.as_str(),
                &text,
                TextKind::from_path(f.path.as_str()),
            ));
        }
    }
    if let (Some(text), false) = (override_text, planned_override) {
        out.extend(check_compose(OVERRIDE_PATH, text, &consent));
        out.extend(scan_secrets(OVERRIDE_PATH, text, TextKind::Yaml));
    }
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

/// Whether `path` is gitignored local state (`aibox_config::LOCAL_STATE_PATHS`), which may
/// hold personal values and is never committed.
fn is_local_state(path: &str) -> bool {
    aibox_config::LOCAL_STATE_PATHS
        .iter()
        .any(|entry| match entry.split_once("/**/") {
            Some((base, leaf)) => {
                path.starts_with(&format!("{base}/")) && path.contains(&format!("/{leaf}"))
            }
            None if entry.ends_with('/') => path.starts_with(entry),
            None => path == *entry,
        })
}

/// Checks a Compose file (generated or the user-owned override) for dangerous options.
///
/// `file` labels the findings (a project-relative path). Secrets in `environment` and
/// `build.args` are the secret scanner's job ([`crate::scan_secrets`]).
pub fn check_compose(file: &str, yaml_text: &str, consent: &Consent) -> Vec<Finding> {
    let ctx = Ctx {
        file,
        text: yaml_text,
        consent,
    };
    let doc: Yaml = match serde_norway::from_str(yaml_text) {
        Ok(doc) => doc,
        Err(e) => {
            let line = e.location().map(|l| l.line());
            return vec![unparsable(file, "YAML", &e.to_string()).at(line)];
        }
    };
    let mut out = Vec::new();
    if let Some(include) = doc.get("include") {
        out.push(
            Finding::new(
                "aibox::policy::unchecked_include",
                Severity::Warning,
                file,
                format!(
                    "`include:` pulls in other Compose files ({}) that this check did not see",
                    yaml_strings(include).join(", ")
                ),
                "inline the included services into this file, or make sure the included files \
                 pass `aibox doctor` as well",
            )
            .at(line_of(yaml_text, "include")),
        );
    }
    let Some(services) = doc.get("services").and_then(Yaml::as_mapping) else {
        return out;
    };
    for (name, service) in services {
        let name = name.as_str().unwrap_or("?");
        check_service(&ctx, name, service, &mut out);
    }
    out
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
    if let Some(build) = svc.get("build").filter(|b| b.is_mapping()) {
        check_build(ctx, build, out);
    }
    if let Some(extends) = svc.get("extends") {
        let file = extends.get("file").and_then(Yaml::as_str);
        if let Some(file) = file {
            out.push(
                Finding::new(
                    "aibox::policy::unchecked_include",
                    Severity::Warning,
                    ctx.file,
                    format!(
                        "service `{name}` extends a service from `{file}`, which this check \
                         did not see"
                    ),
                    "define the service here, or make sure that file passes `aibox doctor` too",
                )
                .at(line_of(ctx.text, "extends")),
            );
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
    };
    let doc: Json = match serde_json::from_str(&strip_jsonc(jsonc_text)) {
        Ok(doc) => doc,
        Err(e) => return vec![unparsable(file, "JSON", &e.to_string()).at(Some(e.line()))],
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
        // Only the generated file counts, relative to `.devcontainer/` or by an absolute path
        // into a project's `.devcontainer/`; its contents are checked against the lock.
        let ours = matches!(value, "aibox-seccomp.json" | "./aibox-seccomp.json")
            || value.ends_with("/.devcontainer/aibox-seccomp.json");
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
        let line = line_of(self.text, m.source.trim());
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
