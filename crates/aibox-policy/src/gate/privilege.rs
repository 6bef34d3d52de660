//! Rules for the powers a container asks of the kernel: privileged mode, capabilities
//! (an allowlist), namespaces shared with the host, host devices, device cgroup rules,
//! kernel parameters and the user the container runs as.

use aibox_config::AiboxToml;

use super::Ctx;
use crate::finding::{Consent, Finding, Severity};
use crate::text::{line_of, line_of_all};

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

/// Whether a rootless network mode maps the host's loopback into the container:
/// `slirp4netns:allow_host_loopback=true`, or `pasta` with `--map-gw`,
/// `--map-host-loopback`, or ports forwarded from the container to the host's loopback
/// (`-T`/`--tcp-ns`, `-U`/`--udp-ns` other than `none`). Options are comma-separated.
fn opens_host_loopback(value: &str) -> bool {
    let (mode, opts) = value.split_once(':').unwrap_or((value, ""));
    if mode.eq_ignore_ascii_case("slirp4netns") {
        return opts.split(',').any(|o| {
            o.split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("allow_host_loopback") && super::str_truthy(v)
            })
        });
    }
    if !mode.eq_ignore_ascii_case("pasta") {
        return false;
    }
    // pasta's options are case-sensitive (`-t` forwards into the container, `-T` out).
    let words: Vec<&str> = opts.split(',').map(str::trim).collect();
    words.iter().enumerate().any(|(i, word)| {
        let next = || words.get(i + 1).copied();
        let given = |v: Option<&str>| v.is_some_and(|v| !v.eq_ignore_ascii_case("none"));
        let (flag, inline) = word
            .split_once('=')
            .map_or((*word, None), |(f, v)| (f, Some(v)));
        match flag {
            "--map-gw" => true,
            "--map-host-loopback" | "--tcp-ns" | "--udp-ns" => given(inline.or_else(next)),
            // `-T 5432`, `-T5432`, `-U=53`.
            _ => ["-T", "-U"].iter().any(|short| {
                word.strip_prefix(short).is_some_and(|rest| {
                    let rest = rest.strip_prefix('=').unwrap_or(rest);
                    given(if rest.is_empty() { next() } else { Some(rest) })
                })
            }),
        }
    })
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
    let message = if c.user == "root" || c.uid == 0 {
        format!(
            "the container runs as root (`[container] user = \"{}\"`, uid {}): a break-out \
             starts with root rights",
            c.user, c.uid
        )
    } else if c.gid() == 0 {
        // The root group owns most of the system; on a rootful engine it is the host's
        // group 0 for every file in a bind mount.
        "the container user is in the root group (`[container] gid = 0`): it reads and \
         writes what group 0 may, in the container and in every bind mount"
            .to_owned()
    } else {
        return Vec::new();
    };
    let f = Finding::new(
        "aibox::policy::root_user",
        Severity::Error,
        aibox_config::AIBOX_TOML,
        message,
        ROOT_REMEDY,
    );
    consent.judge(true, "user:root", f).into_iter().collect()
}

impl Ctx<'_> {
    pub(super) fn privileged(&self, line: Option<usize>, out: &mut Vec<Finding>) {
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

    pub(super) fn cap(&self, raw: &str, out: &mut Vec<Finding>) {
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

    pub(super) fn namespace(&self, key: &str, value: &str, out: &mut Vec<Finding>) {
        let value = value.trim();
        let what = key.trim_end_matches("_mode").trim_start_matches("build.");
        let host = value.eq_ignore_ascii_case("host");
        // Another container's namespace: one outside the project, whatever it holds
        // (`service:<name>` stays inside the project and is allowed).
        let container =
            matches!(key, "network_mode" | "pid" | "ipc") && value.starts_with("container:");
        // Podman joins any namespace by path (`ns:/proc/1/ns/net`): on a rootful engine,
        // the host's.
        let by_path = value
            .get(..3)
            .is_some_and(|p| p.eq_ignore_ascii_case("ns:"));
        let loopback = what == "network" && opens_host_loopback(value);
        if !host && !container && !by_path && !loopback {
            return;
        }
        let option = if container {
            format!("{key}:container")
        } else if by_path {
            format!("{key}:ns")
        } else if loopback {
            format!("{key}:host_loopback")
        } else {
            format!("{key}:host")
        };
        let message = if loopback {
            format!(
                "`{key}: {value}` lets the container reach the host's loopback address, where \
                 the host keeps what it shares with no one (databases, development servers, a \
                 container engine's API on TCP)"
            )
        } else {
            format!(
                "`{key}: {value}` shares the {} {what} namespace with the container",
                if container {
                    "other container's"
                } else if by_path {
                    "named (on a rootful engine, the host's)"
                } else {
                    "host's"
                }
            )
        };
        let f = Finding::new(
            "aibox::policy::host_namespace",
            Severity::Error,
            self.file,
            message,
            if loopback {
                format!(
                    "drop the host loopback option and reach host services by the host's \
                     network address; to keep it, record the consent with a \
                     `[[security.exceptions]]` entry `option = \"{option}\"`"
                )
            } else if what == "network" {
                "remove it; for egress control route traffic through a proxy service \
                 (`network_mode: service:<proxy>` is allowed)"
                    .to_owned()
            } else {
                "remove it; the container keeps its own namespace by default".to_owned()
            },
        )
        .at(line_of_all(
            self.text,
            &[value, key.rsplit('.').next().unwrap_or(key)],
        ));
        self.push(true, &option, f, out);
    }

    /// `user:` of a service: root inside the container is refused until consent names it.
    pub(super) fn user(&self, user: &str, out: &mut Vec<Finding>) {
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

    /// One host device (`devices:`, `--device`): refused until consent names it.
    pub(super) fn device(&self, key: &str, spec: &str, out: &mut Vec<Finding>) {
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
    pub(super) fn device_rule(&self, rule: &str, out: &mut Vec<Finding>) {
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
    pub(super) fn sysctl(&self, name: &str, out: &mut Vec<Finding>) {
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
}
