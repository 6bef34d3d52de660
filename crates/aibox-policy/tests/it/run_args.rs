//! `runArgs` as the engines read them: every spelling of an option (`-v/:/h`, `-v=/:/h`,
//! `-iv /:/h`, `-u0`, `--volume=…`) is judged as its separated form is, and the options
//! the Compose rules judge under other names (`--env-file`, `--volumes-from`,
//! `--log-opt path=…`, `-e KEY=value`) are judged as Compose's are.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use aibox_config::SecurityException;
use aibox_policy::{
    Consent, Finding, Severity, check_compose_setup, check_devcontainer_json, check_run_args,
};

const ROOT_CONFIG: &str = ".devcontainer.json";

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn consent(option: &str) -> Consent {
    Consent {
        exceptions: vec![SecurityException {
            option: option.to_owned(),
            reason: "fixture: tested on purpose".to_owned(),
        }],
        ..Consent::default()
    }
}

fn error_codes(findings: &[Finding]) -> Vec<&str> {
    findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| f.code.as_str())
        .collect()
}

/// The findings for `runArgs` in a dev container configuration of its own
/// (`.devcontainer.json`), as `apply` and `doctor` judge the project.
fn judged(run_args: &[&str], consent: &Consent) -> Vec<Finding> {
    let json = serde_json::json!({ "image": "debian:bookworm", "runArgs": run_args });
    let sources: BTreeMap<String, String> =
        BTreeMap::from([(ROOT_CONFIG.to_owned(), json.to_string())]);
    check_compose_setup(&sources, consent)
}

#[test]
fn attached_and_bundled_short_options_are_judged_like_separated_ones() {
    let cases: &[(&[&str], &str)] = &[
        (&["-v", "/:/h"], "aibox::policy::sensitive_mount"),
        (&["-v/:/h"], "aibox::policy::sensitive_mount"),
        (&["-v=/:/h"], "aibox::policy::sensitive_mount"),
        (
            &["-v/var/run/docker.sock:/s"],
            "aibox::policy::engine_socket",
        ),
        (&["-v/home:/h:ro"], "aibox::policy::sensitive_mount"),
        (&["-u", "0"], "aibox::policy::root_user"),
        (&["-u0"], "aibox::policy::root_user"),
        (&["-u=root"], "aibox::policy::root_user"),
        (&["-iv", "/:/h"], "aibox::policy::sensitive_mount"),
        (&["-iv/:/h"], "aibox::policy::sensitive_mount"),
        (&["-itu0"], "aibox::policy::root_user"),
        (&["--rm", "-dtv=/etc:/x"], "aibox::policy::sensitive_mount"),
        (&["--net=host"], "aibox::policy::host_namespace"),
        (&["--privileged=true"], "aibox::policy::privileged"),
        // An unknown flag may or may not take the next argument: both are judged.
        (
            &["--future-flag", "-e", "-v/:/h"],
            "aibox::policy::sensitive_mount",
        ),
    ];
    for (list, code) in cases {
        let found = check_run_args(ROOT_CONFIG, "", &args(list), &Consent::default());
        assert!(error_codes(&found).contains(code), "{list:?}: {found:#?}");
        let found = judged(list, &Consent::default());
        assert!(error_codes(&found).contains(code), "{list:?}: {found:#?}");
    }
    // A value is not an option: `-e` takes `-v/:/h` as the variable it sets.
    let found = check_run_args(
        ROOT_CONFIG,
        "",
        &args(&["-e", "-v/:/h"]),
        &Consent::default(),
    );
    assert!(error_codes(&found).is_empty(), "{found:#?}");
    let found = check_run_args(
        ROOT_CONFIG,
        "",
        &args(&["-it", "--privileged=false", "-u1000", "-v./data:/data"]),
        &Consent::default(),
    );
    assert!(error_codes(&found).is_empty(), "{found:#?}");
}

#[test]
fn env_files_and_volumes_from_are_judged_like_compose() {
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["--env-file", "/etc/shadow"],
            "aibox::policy::host_read",
            "mount:/etc/shadow",
        ),
        (
            &["--env-file=${localEnv:HOME}/.aws/credentials"],
            "aibox::policy::host_read",
            "mount:~/.aws/credentials",
        ),
        (
            &["--env-file", "../outside.env"],
            "aibox::policy::host_read",
            "mount:../outside.env",
        ),
        (
            &["--volumes-from=othercontainer"],
            "aibox::policy::volumes_from_container",
            "volumes_from:container",
        ),
        (
            &["--volumes-from", "othercontainer:ro"],
            "aibox::policy::volumes_from_container",
            "volumes_from:container",
        ),
    ];
    for (list, code, option) in cases {
        let found = judged(list, &Consent::default());
        assert!(error_codes(&found).contains(code), "{list:?}: {found:#?}");
        let accepted = judged(list, &consent(option));
        assert!(error_codes(&accepted).is_empty(), "{list:?}: {accepted:#?}");
    }
    // A file of the project is the project's.
    let found = judged(
        &["--env-file", "${localWorkspaceFolder}/.env.dev"],
        &Consent::default(),
    );
    assert!(error_codes(&found).is_empty(), "{found:#?}");
}

#[test]
fn host_files_the_engine_reads_or_writes_are_judged_like_compose_ones() {
    let cases: &[(&[&str], &str, &str)] = &[
        // Writes: the engine writes with its rights; only the project is the project's.
        (
            &["--cidfile", "/home/u/.bashrc"],
            "aibox::policy::host_write",
            "mount:/home/u/.bashrc",
        ),
        (
            &["--cidfile=/tmp/aibox.cid"],
            "aibox::policy::host_write",
            "mount:/tmp/aibox.cid",
        ),
        (
            &["--pidfile", "${localEnv:HOME}/.profile"],
            "aibox::policy::host_write",
            "mount:~/.profile",
        ),
        (
            &["--conmon-pidfile=../outside.pid"],
            "aibox::policy::host_write",
            "mount:../outside.pid",
        ),
        (
            &["--health-log-destination", "/var/log/x"],
            "aibox::policy::host_write",
            "mount:/var/log/x",
        ),
        // Reads: judged as `--env-file` and Compose's `env_file` are.
        (
            &["--label-file", "/etc/shadow"],
            "aibox::policy::host_read",
            "mount:/etc/shadow",
        ),
        (
            &["--authfile=${localEnv:HOME}/.docker/config.json"],
            "aibox::policy::host_read",
            "mount:~/.docker/config.json",
        ),
        (
            &[
                "--decryption-key",
                "${localEnv:HOME}/.ssh/id_ed25519:passphrase",
            ],
            "aibox::policy::host_read",
            "mount:~/.ssh/id_ed25519",
        ),
        (
            &["--init-path", "../tools/init"],
            "aibox::policy::host_read",
            "mount:../tools/init",
        ),
        (
            &["--pod-id-file=/root/pod"],
            "aibox::policy::host_read",
            "mount:/root/pod",
        ),
    ];
    for (list, code, option) in cases {
        let found = judged(list, &Consent::default());
        assert!(error_codes(&found).contains(code), "{list:?}: {found:#?}");
        let accepted = judged(list, &consent(option));
        assert!(error_codes(&accepted).is_empty(), "{list:?}: {accepted:#?}");
    }
    // Files of the project are the project's; a health log kept by the engine is no file.
    for list in [
        &["--cidfile", "${localWorkspaceFolder}/.devcontainer/cid"][..],
        &["--label-file=.devcontainer/labels"],
        &["--health-log-destination", "local"],
    ] {
        let found = judged(list, &Consent::default());
        assert!(error_codes(&found).is_empty(), "{list:?}: {found:#?}");
    }
}

#[test]
fn a_log_file_on_the_host_is_refused_in_run_args_and_compose() {
    for list in [
        &["--log-opt", "path=/etc/x"][..],
        &["--log-opt=path=/home/u/.bashrc"],
        &[
            "--log-driver",
            "k8s-file",
            "--log-opt",
            "path=./logs/out.log",
        ],
    ] {
        let found = judged(list, &Consent::default());
        assert!(
            error_codes(&found).contains(&"aibox::policy::log_path"),
            "{list:?}: {found:#?}"
        );
        assert!(error_codes(&judged(list, &consent("logging:path"))).is_empty());
    }
    let found = judged(&["--log-opt", "max-size=10m"], &Consent::default());
    assert!(error_codes(&found).is_empty(), "{found:#?}");

    let compose = |options: &str| {
        format!(
            "services:\n  dev:\n    image: localhost/demo:1\n    logging:\n      driver: \
             k8s-file\n      options:\n{options}"
        )
    };
    let refused = compose("        path: /work/outside/existing.txt\n");
    let found = aibox_policy::check_compose(
        ".devcontainer/docker-compose.override.yml",
        &refused,
        &Consent::default(),
    );
    let f = found
        .iter()
        .find(|f| f.code == "aibox::policy::log_path")
        .unwrap_or_else(|| panic!("{found:#?}"));
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(f.line, Some(7));
    assert!(f.remedy.contains("logging:path"), "{}", f.remedy);
    let syslog = compose("        syslog-address: unix:///run/user/1000/bus\n");
    let found = aibox_policy::check_compose("x.yml", &syslog, &Consent::default());
    assert!(
        error_codes(&found).contains(&"aibox::policy::log_path"),
        "{found:#?}"
    );
    let fine = compose("        max-size: 10m\n        max-file: \"3\"\n");
    let found = aibox_policy::check_compose("x.yml", &fine, &Consent::default());
    assert!(found.is_empty(), "{found:#?}");
    // A variable there could name any file.
    let variable = compose("        path: ${LOG_FILE}\n");
    let found = aibox_policy::check_compose("x.yml", &variable, &Consent::default());
    assert!(
        error_codes(&found).contains(&"aibox::policy::unresolved_variable"),
        "{found:#?}"
    );
}

/// Literal secrets in any dev container configuration are refused as in a Compose file,
/// without their value in the finding.
#[test]
fn literal_secrets_in_dev_container_configurations_are_refused() {
    let token = format!("ghp_{}", "x".repeat(36));
    let configs = [
        format!(r#"{{"image":"debian:bookworm","containerEnv":{{"GH_TOKEN":"{token}"}}}}"#),
        format!(r#"{{"image":"debian:bookworm","remoteEnv":{{"X":"{token}"}}}}"#),
        r#"{"build":{"dockerfile":"Dockerfile","args":{"NPM_TOKEN":"hunter2hunter2"}}}"#.to_owned(),
        r#"{"image":"i","runArgs":["-e","GH_TOKEN=hunter2hunter2"]}"#.to_owned(),
        r#"{"image":"i","runArgs":["-eGH_TOKEN=hunter2hunter2"]}"#.to_owned(),
        r#"{"image":"i","runArgs":["--env=API_KEY=hunter2hunter2"]}"#.to_owned(),
        r#"{"image":"i","runArgs":["-it","--env","DB_PASSWORD=hunter2hunter2"]}"#.to_owned(),
        format!(r#"{{"image":"i","runArgs":["--env=X={token}"]}}"#),
    ];
    for path in [ROOT_CONFIG, ".devcontainer/alt/devcontainer.json"] {
        for config in &configs {
            let sources: BTreeMap<String, String> =
                BTreeMap::from([(path.to_owned(), config.clone())]);
            let found = check_compose_setup(&sources, &Consent::default());
            let secrets: Vec<&Finding> = found
                .iter()
                .filter(|f| f.code.starts_with("aibox::policy::secret") && f.file == path)
                .collect();
            assert!(
                !secrets.is_empty() && secrets.iter().all(|f| f.severity == Severity::Error),
                "{path}: {config}: {found:#?}"
            );
            for f in &found {
                let shown = format!("{f}");
                assert!(
                    !shown.contains("hunter2") && !shown.contains(&token),
                    "{shown}"
                );
            }
        }
    }
    // References are the way to pass them.
    let fine = r#"{"image":"i","containerEnv":{"GH_TOKEN":"${localEnv:GH_TOKEN}"},"runArgs":["-e","GH_TOKEN","--env=X=${localEnv:X}"]}"#;
    let sources: BTreeMap<String, String> =
        BTreeMap::from([(ROOT_CONFIG.to_owned(), fine.to_owned())]);
    let found = check_compose_setup(&sources, &Consent::default());
    assert!(found.is_empty(), "{found:#?}");
    // The configuration's own check (as for a local feature's metadata) finds them too.
    let found = aibox_policy::scan_secrets(
        ROOT_CONFIG,
        r#"{"runArgs":["-eGH_TOKEN=hunter2hunter2"]}"#,
        aibox_policy::TextKind::Json,
    );
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].message.contains("runArgs.env.GH_TOKEN"),
        "{found:#?}"
    );
    // Unchanged: the per-file check of devcontainer.json judges options, not secrets.
    let json = r#"{"image":"i","runArgs":["-v/:/h"]}"#;
    let found = check_devcontainer_json(ROOT_CONFIG, json, &Consent::default());
    assert!(error_codes(&found).contains(&"aibox::policy::sensitive_mount"));
}

/// Podman's own options that reach past the container: a glob mount is judged as a bind
/// of the folder its matches lie in, `--env-host` and `--rootfs` are relaxations an
/// exception must name, and registry credentials spelled out in the file are refused.
#[test]
fn podman_only_options_are_judged() {
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["--mount", "type=glob,src=/home/*/.ssh,dst=/keys"],
            "aibox::policy::sensitive_mount",
            "mount:/home",
        ),
        (
            &["--mount=type=glob,source=/var/run/docker.so?k,target=/s"],
            "aibox::policy::sensitive_mount",
            "mount:/var/run",
        ),
        (
            &["--env-host"],
            "aibox::policy::host_environment",
            "env-host",
        ),
        (
            &["--env-host=true"],
            "aibox::policy::host_environment",
            "env-host",
        ),
        (&["--rootfs"], "aibox::policy::host_rootfs", "rootfs"),
        // Go's `ParseBool`, which the engines' flags use, reads `t` as true.
        (
            &["--env-host=t"],
            "aibox::policy::host_environment",
            "env-host",
        ),
        (&["--rootfs=T"], "aibox::policy::host_rootfs", "rootfs"),
        (
            &["--privileged=t"],
            "aibox::policy::privileged",
            "privileged",
        ),
        (
            &["--pod", "other"],
            "aibox::policy::host_namespace",
            "pod:other",
        ),
        (
            &["--group-add=keep-groups"],
            "aibox::policy::host_groups",
            "group-add:keep-groups",
        ),
        (
            &["--annotation", "run.oci.keep_original_groups=1"],
            "aibox::policy::host_groups",
            "group-add:keep-groups",
        ),
        (
            &["--uidmap", "0:0:4294967295"],
            "aibox::policy::host_namespace",
            "uidmap:0:0:4294967295",
        ),
    ];
    for (list, code, option) in cases {
        let found = judged(list, &Consent::default());
        assert!(error_codes(&found).contains(code), "{list:?}: {found:#?}");
        let found = check_run_args(ROOT_CONFIG, "", &args(list), &Consent::default());
        assert!(error_codes(&found).contains(code), "{list:?}: {found:#?}");
        if !option.starts_with("mount:") {
            let accepted = judged(list, &consent(option));
            assert!(error_codes(&accepted).is_empty(), "{list:?}: {accepted:#?}");
        }
    }
    // A glob inside the project is the project's; `--env-host=false` copies nothing.
    for list in [
        &[
            "--mount",
            "type=glob,src=${localWorkspaceFolder}/data/*.csv,dst=/d",
        ][..],
        &["--env-host=false"][..],
    ] {
        let found = judged(list, &Consent::default());
        assert!(error_codes(&found).is_empty(), "{list:?}: {found:#?}");
    }
    // Credentials: refused, never quoted; a reference to the host's variable passes.
    let found = judged(&["--creds", "ci-bot:hunter2-not-real"], &Consent::default());
    assert_eq!(
        error_codes(&found),
        ["aibox::policy::secret_value"],
        "{found:#?}"
    );
    assert!(!format!("{found:?}").contains("hunter2"), "{found:#?}");
    let found = judged(&["--creds=${localEnv:REGISTRY_CREDS}"], &Consent::default());
    assert!(error_codes(&found).is_empty(), "{found:#?}");
}
