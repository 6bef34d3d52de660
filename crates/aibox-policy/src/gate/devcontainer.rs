//! Dev container configurations: `devcontainer.json` keys, `runArgs`, `mounts`,
//! `workspaceMount`, lifecycle commands, and features (registry features pinned, local
//! features judged by their `devcontainer-feature.json`).

use serde_json::Value as Json;

use super::Pass;
use super::consent::visit_security_opt;
use super::mounts::{
    Mount, linked_file, parse_mount_spec, parse_short_volume, visit_host_read, visit_mount,
};
use super::{Ctx, json_strings, json_truthy, str_truthy, unparsable};
use crate::compose::{ComposeSources, NoSources, dir_of, join_project};
use crate::finding::{Consent, Finding, Severity};
use crate::run_args;
use crate::secrets::{TextKind, scan_secrets};
use crate::text::{line_of, parse_jsonc};

/// Local devcontainer features (`"./name"`, relative to the configuration's folder) bring
/// their own container options in `devcontainer-feature.json` (`privileged`, `capAdd`,
/// `securityOpt`, `mounts`): judged like the same keys in `devcontainer.json`. A local
/// feature whose metadata cannot be read is refused.
pub(super) fn check_local_features(
    config: &str,
    jsonc_text: &str,
    sources: &dyn ComposeSources,
    consent: &Consent,
    pass: Pass,
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
        match pass {
            Pass::Traverse => visit_devcontainer(&path, &text, sources),
            Pass::Judge => {
                out.extend(devcontainer_findings(&path, &text, consent, sources));
                out.extend(scan_secrets(&path, &text, TextKind::Json));
            }
        }
    }
    out
}

/// Checks `devcontainer.json` (JSONC) for dangerous options, including `runArgs`,
/// `mounts`, `workspaceMount`, `initializeCommand` and unpinned features.
pub fn check_devcontainer_json(file: &str, jsonc_text: &str, consent: &Consent) -> Vec<Finding> {
    devcontainer_findings(file, jsonc_text, consent, &NoSources)
}

/// Whether `cmd` is exactly the `initializeCommand` aibox generates with `[network]
/// egress` for the project the file names: it only makes (or replaces) the agent's
/// internal network on a Podman host. The name must be a Compose project name, so
/// nothing but that name varies in the command.
fn is_egress_initialize(doc: &Json, cmd: &Json) -> bool {
    doc.get("name")
        .and_then(Json::as_str)
        .filter(|name| aibox_config::validate::is_compose_project_name(name))
        .is_some_and(|name| {
            cmd.as_str() == Some(&aibox_config::container::egress_initialize_command(name))
        })
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
pub(super) fn devcontainer_findings(
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
    for mount in devcontainer_mounts(&doc) {
        ctx.mount(&mount, &mut out);
    }
    // The image build of a configuration: its context and Dockerfile are read from the
    // host relative to the configuration's folder.
    if let Some(build) = doc.get("build") {
        let build_ctx = Ctx {
            dir: Some(dir_of(file)),
            ..ctx
        };
        for (what, path) in devcontainer_build_reads(build) {
            build_ctx.host_read(what, path, &mut out);
        }
    }
    if let Some(cmd) = doc
        .get("initializeCommand")
        .filter(|cmd| !is_egress_initialize(&doc, cmd))
    {
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

/// The bind mounts a configuration asks for: `mounts` (strings and objects) and
/// `workspaceMount`.
fn devcontainer_mounts(doc: &Json) -> Vec<Mount> {
    let mut out = Vec::new();
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
            out.extend(mount);
        }
    }
    out.extend(
        doc.get("workspaceMount")
            .and_then(Json::as_str)
            .and_then(parse_mount_spec),
    );
    out
}

/// The host files a configuration's `build` reads, relative to its folder.
fn devcontainer_build_reads(build: &Json) -> Vec<(&'static str, &str)> {
    let context = build.get("context").and_then(Json::as_str).unwrap_or(".");
    let mut out = vec![("build.context", context)];
    if let Some(dockerfile) = build.get("dockerfile").and_then(Json::as_str) {
        out.push(("build.dockerfile", dockerfile));
    }
    out
}

/// What [`devcontainer_findings`] reads for a configuration (or a local feature's
/// metadata) in `file`, read from `sources` without judging (the gate's traversal).
pub(super) fn visit_devcontainer(file: &str, jsonc_text: &str, sources: &dyn ComposeSources) {
    let Ok(doc) = parse_jsonc(jsonc_text) else {
        return;
    };
    // `${localWorkspaceFolder}` is the project root; a build reads from the file's folder.
    let root = Some("");
    for opt in json_strings(doc.get("securityOpt")) {
        visit_security_opt(sources, root, &opt);
    }
    for opt in run_args::parse(&json_strings(doc.get("runArgs"))) {
        // Reads and writes are judged on the same path questions (`Ctx::engine_file`).
        if let Some((_, path)) = run_args::host_file(&opt) {
            visit_host_read(sources, root, path);
        }
        let value = opt.value();
        let mount = match opt.name.as_str() {
            "security-opt" => {
                visit_security_opt(sources, root, value);
                None
            }
            "volume" => parse_short_volume(value),
            "mount" => parse_mount_spec(value),
            _ => None,
        };
        if let Some(m) = mount {
            visit_mount(sources, root, &m.source);
        }
    }
    for m in devcontainer_mounts(&doc) {
        visit_mount(sources, root, &m.source);
    }
    if let Some(build) = doc.get("build") {
        for (_, path) in devcontainer_build_reads(build) {
            visit_host_read(sources, Some(dir_of(file)), path);
        }
    }
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
    // `mounts`, …) is fetched when the container is built; the gate cannot read it. The
    // consent names the version (or digest) whose metadata was read: another version may
    // ask for more, so it is refused again.
    if !id.starts_with("./") && !id.starts_with("../") {
        remote_feature(ctx, id, line, out);
    }
}

/// A feature from a registry: refused until consent names it with its version.
fn remote_feature(ctx: &Ctx<'_>, id: &str, line: Option<usize>, out: &mut Vec<Finding>) {
    let base = id.split('@').next().unwrap_or(id);
    let base = match base.rsplit_once(':') {
        Some((b, tag)) if !tag.contains('/') => b,
        _ => base,
    };
    let message = format!(
        "devcontainer feature `{id}` brings container options from a registry (its \
         `devcontainer-feature.json` may ask for privileged mode, capabilities or mounts), \
         which the gate cannot read"
    );
    let option = format!("feature:{id}");
    let unversioned = format!("feature:{base}");
    let unpinned = feature_unpinned(id);
    let (text, remedy) = if unpinned {
        // No version: whatever the registry serves next time, so no consent covers it.
        (
            format!("{message}; it names no version, so no consent can say which one was read"),
            format!(
                "install the tool in `.devcontainer/Dockerfile.local` instead, or pin the \
                 feature (`{base}:1.2.3` or `{base}@sha256:<digest>`), read that version's \
                 metadata and record the consent with a `[[security.exceptions]]` entry \
                 `option = \"feature:{base}:<version>\"`"
            ),
        )
    } else if ctx.consent.exception(&option).is_none()
        && ctx.consent.exception(&unversioned).is_some()
    {
        (
            format!(
                "{message}; the `[[security.exceptions]]` entry `{unversioned}` names no \
                 version, so it no longer counts as consent to `{id}`"
            ),
            format!(
                "read the metadata of `{id}` and change the entry to `option = \"{option}\"` \
                 (consent now names the version or digest it was given for)"
            ),
        )
    } else {
        (
            message,
            format!(
                "install the tool in `.devcontainer/Dockerfile.local` instead, or read the \
                 metadata of this version and record the consent with a \
                 `[[security.exceptions]]` entry `option = \"{option}\"` (another version \
                 needs its own)"
            ),
        )
    };
    let mut f = Finding::new(
        "aibox::policy::remote_feature",
        Severity::Error,
        ctx.file,
        text,
        remedy,
    )
    .at(line);
    if unpinned {
        // Never acceptable: reported whatever the exceptions say.
        f.option = Some(option);
        out.push(f);
    } else {
        ctx.push(true, &option, f, out);
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
    for opt in run_args::parse(args) {
        if let Some((kind, path)) = run_args::host_file(&opt) {
            ctx.engine_file(&format!("--{}", opt.name), kind, path, out);
        }
        let value = opt.value();
        match opt.name.as_str() {
            "privileged" if opt.value.is_none() || str_truthy(value) => {
                ctx.privileged(line_of(text, "--privileged"), out);
            }
            "cap-add" => ctx.cap(value, out),
            "security-opt" => ctx.security_opt(value, out),
            "network" => ctx.namespace("network_mode", value, out),
            "pid" => ctx.namespace("pid", value, out),
            "ipc" => ctx.namespace("ipc", value, out),
            "uts" => ctx.namespace("uts", value, out),
            "userns" => ctx.namespace("userns_mode", value, out),
            "cgroupns" => ctx.namespace("cgroup", value, out),
            "volume" => {
                if let Some(m) = parse_short_volume(value) {
                    ctx.mount(&m, out);
                }
            }
            "mount" => {
                if let Some(m) = parse_mount_spec(value) {
                    ctx.mount(&m, out);
                }
            }
            "device" => ctx.device("--device", value, out),
            "device-cgroup-rule" => ctx.device_rule(value, out),
            "sysctl" => ctx.sysctl(value.split('=').next().unwrap_or(value), out),
            "user" => ctx.user(value, out),
            "volumes-from" => ctx.volumes_from("`--volumes-from`", value, out),
            "log-opt" => {
                let (key, v) = value.split_once('=').unwrap_or((value, ""));
                ctx.log_option("--log-opt", key, v, out);
            }
            _ => podman_option(ctx, &opt, out),
        }
    }
}

/// Podman's own `run` options that reach past the container (and registry credentials
/// spelled out), judged like the options Compose shares.
fn podman_option(ctx: &Ctx<'_>, opt: &run_args::RunOpt, out: &mut Vec<Finding>) {
    let text = ctx.text;
    let value = opt.value();
    match opt.name.as_str() {
        // Podman's: every host variable, or a host folder as the root file system.
        "env-host" if opt.value.is_none() || str_truthy(value) => ctx.relaxation(
            "aibox::policy::host_environment",
            "env-host",
            "`--env-host` copies every variable of the host's environment into the \
                 container, the tokens and credentials of the shell that starts it included",
            line_of(text, "--env-host"),
            out,
        ),
        "pod" if !value.trim().is_empty() => ctx.relaxation(
            "aibox::policy::host_namespace",
            &format!("pod:{}", value.trim()),
            &format!(
                "`--pod {}` puts the container into a pod this project does not make, \
                     sharing its namespaces with whatever runs there",
                value.trim()
            ),
            line_of(text, "--pod"),
            out,
        ),
        // `container:host:count` ranges that put host ID 0 into the container (its
        // root is then the host's root on a rootful engine).
        "uidmap" | "gidmap" if maps_host_root(value) => ctx.relaxation(
            "aibox::policy::host_namespace",
            &format!("{}:{}", opt.name, value.trim()),
            &format!(
                "`--{} {}` maps the host's ID 0 into the container",
                opt.name,
                value.trim()
            ),
            line_of(text, value.trim()),
            out,
        ),
        "annotation" if keeps_groups(value) => ctx.relaxation(
            "aibox::policy::host_groups",
            "group-add:keep-groups",
            "the `run.oci.keep_original_groups` annotation keeps the groups of the user \
                 who starts the container, with their access to the files in its mounts",
            line_of(text, "keep_original_groups"),
            out,
        ),
        "group-add" if value.trim() == "keep-groups" => ctx.relaxation(
            "aibox::policy::host_groups",
            "group-add:keep-groups",
            "`--group-add keep-groups` keeps the groups of the user who starts the \
                 container, with their access to the files in its mounts",
            line_of(text, "keep-groups"),
            out,
        ),
        "rootfs" if opt.value.is_none() || str_truthy(value) => ctx.relaxation(
            "aibox::policy::host_rootfs",
            "rootfs",
            "`--rootfs` runs the container on a host folder as its root file system, \
                 which the container then writes in place",
            line_of(text, "--rootfs"),
            out,
        ),
        // Registry credentials spelled out in a committed file; a `${...}` reference
        // takes them from the host when the editor starts the container.
        "creds" if !value.contains("${") => out.push(
            Finding::new(
                "aibox::policy::secret_value",
                Severity::Error,
                ctx.file,
                "`--creds` writes registry credentials into the dev container \
                     configuration, a committed file",
                "remove it; log in with `podman login` (or `docker login`) on the host \
                     instead",
            )
            .at(line_of(text, "--creds")),
        ),
        _ => {}
    }
}

/// Whether a `--uidmap`/`--gidmap` value (`container:host:count`, `+` and `@` forms
/// included) maps host ID 0 into the container.
fn maps_host_root(value: &str) -> bool {
    let parts: Vec<&str> = value
        .trim()
        .trim_start_matches(['+', '@'])
        .split(':')
        .collect();
    match parts.as_slice() {
        [_, host, ..] => host.trim_start_matches(['+', '@']).trim() == "0",
        _ => false,
    }
}

/// Whether an `--annotation` sets crun's `run.oci.keep_original_groups` to a true value.
fn keeps_groups(value: &str) -> bool {
    value
        .split_once('=')
        .is_some_and(|(k, v)| k.trim() == "run.oci.keep_original_groups" && v.trim() != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_root_maps_and_kept_groups_are_read() {
        assert!(maps_host_root("0:0:4294967295"));
        assert!(maps_host_root("1000:0:1"));
        assert!(!maps_host_root("0:100000:65536"));
        assert!(keeps_groups("run.oci.keep_original_groups=1"));
        assert!(!keeps_groups("run.oci.keep_original_groups=0"));
        assert!(!keeps_groups("org.example=1"));
    }

    #[test]
    fn features_pinning() {
        assert!(feature_unpinned("ghcr.io/devcontainers/features/node"));
        assert!(!feature_unpinned("ghcr.io/devcontainers/features/node:1"));
        assert!(!feature_unpinned("ghcr.io/x/y@sha256:abcd"));
        assert!(!feature_unpinned("./local-feature"));
    }
}
