//! `doctor`'s base-image check against a real Podman container: labels and the
//! `/etc/aibox-version` marker compared with the lock and the configuration.

#![allow(clippy::unwrap_used, clippy::panic, clippy::too_many_lines)]

use std::ffi::OsString;

use aibox_engine::doctor::base_image::{container_findings, lock_findings, read_container};
use aibox_engine::doctor::{DoctorOptions, doctor};
use aibox_engine::{ApplyOptions, apply};
use aibox_provenance::lock::Lock;
use aibox_runtime::DetectEnv;
use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Podman};
use camino::Utf8PathBuf;

fn codes(findings: &[aibox_policy::Finding]) -> Vec<String> {
    findings.iter().map(|f| f.code.clone()).collect()
}

#[test]
fn running_container_is_compared_with_lock_and_config() {
    let podman = Podman::ready();
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
    let name = format!("aibox-doctor-base-{}", std::process::id());
    fs_err::write(
        root.join("aibox.toml"),
        format!(
            "[container]\nname = \"{name}\"\nengine = \"podman\"\nbase_image = \"{BASE_IMAGE}\"\n\n\
             [context]\nmode = \"harness-only\"\n"
        ),
    )
    .unwrap();
    apply(&root, &ApplyOptions::default()).unwrap();
    let lock = Lock::parse(
        &fs_err::read_to_string(root.join("aibox.lock")).unwrap(),
        &root.join("aibox.lock"),
    )
    .unwrap();
    let locked = lock.base_image.clone().unwrap();
    assert_eq!(locked.reference, BASE_IMAGE);
    assert!(!locked.default && locked.digest.is_none());
    let loaded = aibox_config::load_project(&root).unwrap();
    let config = loaded.config.clone();
    // This checkout's container: its per-checkout name and path label.
    let target = aibox_engine::lifecycle::target_for(&root, &loaded);

    // Lock versus configuration, no engine.
    assert_eq!(
        codes(&lock_findings(&config, Some(&lock))),
        ["aibox::doctor::base_image_tag_only"]
    );
    let mut stale = lock.clone();
    stale.base_image.as_mut().unwrap().reference = "debian:bookworm".into();
    assert!(
        codes(&lock_findings(&config, Some(&stale)))
            .contains(&"aibox::doctor::base_image_lock_stale".to_owned())
    );

    // A real container labelled as aibox's generated Dockerfile labels it.
    let name = target.container.clone();
    let mut cleanup = Cleanup::new(&podman);
    cleanup.container(&name);
    let version = lock.aibox.cli_version.clone();
    let project = aibox_devcontainer::project_name(&config);
    let start = |labels: &[String]| {
        podman.remove_container(&name);
        let mut args = vec!["run", "-d", "--name", &name];
        let project_label = format!("aibox.project={project}");
        let checkout_label = format!("aibox.checkout={}", target.checkout);
        args.extend(["--label", &project_label, "--label", &checkout_label]);
        for l in labels {
            args.extend(["--label", l]);
        }
        args.extend([BASE_IMAGE, "sleep", "infinity"]);
        let out = podman.run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let set_marker = |text: &str| {
        let out = podman.run(&[
            "exec",
            "--user",
            "root",
            &name,
            "sh",
            "-c",
            &format!("printf '%s\\n' {text} > /etc/aibox-version"),
        ]);
        assert!(out.status.success());
    };
    let env = DetectEnv {
        engine_override: Some("podman".into()),
        path: std::env::var_os("PATH"),
        extra_env: podman
            .env()
            .into_iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
        ..DetectEnv::default()
    };
    let good = [
        format!("aibox.version={version}"),
        "aibox.profile=human-dev".to_owned(),
        format!(
            "org.opencontainers.image.source={}",
            aibox_devcontainer::DEFAULT_IMAGE_SOURCE
        ),
    ];
    start(&good);
    set_marker(&version);
    let facts = read_container(&root, &env).unwrap().unwrap();
    assert_eq!(facts.marker.as_deref(), Some(version.as_str()));
    assert_eq!(
        codes(&container_findings(&facts, &config, Some(&lock))),
        ["aibox::doctor::container_matches"]
    );
    // The whole doctor runs the check.
    let options = DoctorOptions {
        cli_version: version.clone(),
        detect: env.clone(),
        skip_engine: false,
        ..DoctorOptions::default()
    };
    let report = doctor(&root, &options).unwrap();
    let text = report.render_human();
    assert!(text.contains("aibox::doctor::container_matches"), "{text}");

    // A tampered marker is reported.
    set_marker("9.9.9");
    let facts = read_container(&root, &env).unwrap().unwrap();
    let found = container_findings(&facts, &config, Some(&lock));
    assert_eq!(codes(&found), ["aibox::doctor::container_marker"]);
    assert!(found[0].message.contains("`9.9.9`"), "{}", found[0].message);

    // Labels that disagree with the lock and the configuration are reported.
    start(&[
        "aibox.version=0.0.1".to_owned(),
        "aibox.profile=headless-runner".to_owned(),
        "org.opencontainers.image.source=https://elsewhere.invalid/x".to_owned(),
    ]);
    set_marker("0.0.1");
    let facts = read_container(&root, &env).unwrap().unwrap();
    assert_eq!(
        codes(&container_findings(&facts, &config, Some(&lock))),
        [
            "aibox::doctor::container_version",
            "aibox::doctor::container_profile",
            "aibox::doctor::container_source"
        ]
    );
    drop(cleanup);
}
