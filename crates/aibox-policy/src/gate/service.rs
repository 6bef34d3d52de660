//! One Compose service: its keys (privileged, capabilities, security options,
//! namespaces, users, volumes, devices, sysctls, `volumes_from`) and its build
//! (contexts, Dockerfile, entitlements, SSH) handed to the rules.

use serde_norway::Value as Yaml;

use super::consent::visit_security_opt;
use super::mounts::{Mount, parse_short_volume, visit_host_read, visit_mount};
use super::{Ctx, yaml_scalar, yaml_strings, yaml_truthy};
use crate::compose::ComposeSources;
use crate::finding::{Finding, Severity};
use crate::text::{line_of, line_of_all};

pub(super) fn check_service(ctx: &Ctx<'_>, name: &str, svc: &Yaml, out: &mut Vec<Finding>) {
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
                ctx.volumes_from(&format!("service `{name}`"), container, out);
            }
        }
    }
    check_logging(ctx, svc, out);
    if let Some(user) = svc.get("user") {
        ctx.user(&yaml_scalar(user), out);
    }
    check_newer_keys(ctx, name, svc, out);
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
    // Findings in key order: the build's reads, its options, then `env_file`.
    if let Some(build) = svc.get("build").filter(|b| b.is_mapping()) {
        for (what, path) in build_host_reads(build) {
            ctx.host_read(what, &path, out);
        }
        check_build(ctx, build, out);
    } else if let Some(context) = svc.get("build").and_then(Yaml::as_str) {
        ctx.host_read("build.context", context, out);
    }
    for file in svc.get("env_file").map(yaml_strings).unwrap_or_default() {
        ctx.host_read("env_file", &file, out);
    }
    for m in service_mounts(svc) {
        ctx.mount(&m, out);
    }
}

/// `logging.options` of a service: an option naming a host path is a host write.
fn check_logging(ctx: &Ctx<'_>, svc: &Yaml, out: &mut Vec<Finding>) {
    if let Some(options) = svc
        .get("logging")
        .and_then(|l| l.get("options"))
        .and_then(Yaml::as_mapping)
    {
        for (key, value) in options {
            let key = key.as_str().unwrap_or("");
            ctx.log_option("logging.options", key, &yaml_scalar(value), out);
        }
    }
}

/// Keys of Compose versions newer than the ones installed here, which another machine's
/// Compose runs: lifecycle hooks and provider services.
fn check_newer_keys(ctx: &Ctx<'_>, name: &str, svc: &Yaml, out: &mut Vec<Finding>) {
    // Lifecycle hooks (Compose 2.30) run as an exec in the container with their own
    // `privileged` and `user`: judged like the service's.
    for hook in ["post_start", "pre_stop"] {
        for h in svc
            .get(hook)
            .and_then(Yaml::as_sequence)
            .into_iter()
            .flatten()
        {
            if h.get("privileged").is_some_and(yaml_truthy) {
                ctx.privileged(line_of_all(ctx.text, &["privileged"]), out);
            }
            if let Some(user) = h.get("user") {
                ctx.user(&yaml_scalar(user), out);
            }
        }
    }
    if let Some(provider) = svc.get("provider") {
        let kind = provider
            .get("type")
            .and_then(Yaml::as_str)
            .unwrap_or("")
            .trim();
        let shown = aibox_config::bounded(kind, 128);
        let option = format!("provider:{kind}");
        let f = Finding::new(
            "aibox::policy::provider_service",
            Severity::Error,
            ctx.file,
            format!(
                "service `{name}` is a `provider` service (`type: {shown}`): Compose runs the \
                 host program `docker-{shown}` (or a plugin of that name) on the host, outside \
                 any container"
            ),
            format!(
                "remove `provider` and run the dependency as a container service; to keep it, \
                 record the consent with a `[[security.exceptions]]` entry `option = \"{option}\"`"
            ),
        )
        .at(line_of(ctx.text, "provider"));
        ctx.push(true, &option, f, out);
    }
}

/// What [`check_service`] reads for a service in a file whose relative paths start at
/// `dir`, read from `sources` without judging (the gate's traversal).
pub(super) fn visit_service(sources: &dyn ComposeSources, dir: &str, svc: &Yaml) {
    let dir = Some(dir);
    if let Some(opts) = svc.get("security_opt") {
        for opt in yaml_strings(opts) {
            visit_security_opt(sources, dir, &opt);
        }
    }
    for (_, path) in service_host_reads(svc) {
        visit_host_read(sources, dir, &path);
    }
    for m in service_mounts(svc) {
        visit_mount(sources, dir, &m.source);
    }
}

/// The host files a service hands to Compose to read: build contexts, the Dockerfile,
/// additional contexts and `env_file`s (what each is, the path as written).
fn service_host_reads(svc: &Yaml) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    match svc.get("build") {
        Some(Yaml::String(context)) => out.push(("build.context", context.clone())),
        Some(build) if build.is_mapping() => out.extend(build_host_reads(build)),
        _ => {}
    }
    if let Some(env_files) = svc.get("env_file") {
        out.extend(yaml_strings(env_files).into_iter().map(|f| ("env_file", f)));
    }
    out
}

/// The bind mounts of a service (short and long syntax).
fn service_mounts(svc: &Yaml) -> Vec<Mount> {
    let mut out = Vec::new();
    for vol in svc
        .get("volumes")
        .and_then(Yaml::as_sequence)
        .into_iter()
        .flatten()
    {
        if let Some(short) = vol.as_str() {
            out.extend(parse_short_volume(short));
        } else if vol.is_mapping() {
            let kind = vol.get("type").and_then(Yaml::as_str).unwrap_or("bind");
            let source = vol.get("source").and_then(Yaml::as_str);
            if let (Some(source), "bind") = (source, kind) {
                out.push(Mount {
                    source: source.to_owned(),
                    read_only: vol.get("read_only").is_some_and(yaml_truthy),
                });
            }
        }
    }
    out
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

/// The host files a build mapping reads: its context, its Dockerfile (relative to the
/// context: the client reads the file itself, so a link there counts; an absolute one is a
/// host file of its own) and its additional contexts.
fn build_host_reads(build: &Yaml) -> Vec<(&'static str, String)> {
    let context = build.get("context").and_then(Yaml::as_str).unwrap_or(".");
    let mut out = vec![("build.context", context.to_owned())];
    if let Some(file) = build.get("dockerfile").and_then(Yaml::as_str) {
        if file.starts_with(['/', '~']) {
            out.push(("build.dockerfile", file.to_owned()));
        } else if !context.contains(':') && !context.starts_with(['/', '~']) {
            out.push(("build.dockerfile", format!("{context}/{file}")));
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
        out.extend(paths.into_iter().map(|p| ("build.additional_contexts", p)));
    }
    out
}

/// A build's own options (its host reads are [`service_host_reads`]).
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
