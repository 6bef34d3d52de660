//! The gate over a corpus of bypass attempts (`fixtures/compose-corpus/compose-bypass/` at
//! the workspace root, one project per folder): YAML merge keys and anchors, Compose interpolation from defaults and
//! `.env`, `extends`/`include`, named volumes that bind host paths, host files read by
//! `env_file`/`configs`/`secrets`/build contexts, sensitive mounts, privileged
//! devcontainer features and extra `dockerComposeFile` entries. Every one is refused
//! without consent; the benign projects (`compose-benign/`) pass.
//!
//! `compose_crosscheck.rs` runs the real Compose over the same corpus.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use crate::corpus;

use corpus::{fixtures, project_files};

use aibox_policy::{Consent, check_compose_setup, has_errors};

#[test]
fn every_bypass_attempt_is_refused_without_consent() {
    let cases = fixtures("compose-bypass");
    assert!(cases.len() >= 133, "corpus shrank: {}", cases.len());
    let mut accepted = Vec::new();
    for case in &cases {
        let findings = check_compose_setup(&project_files(case), &Consent::default());
        if !has_errors(&findings) {
            accepted.push(format!("{}: {findings:#?}", case.display()));
        }
    }
    assert!(
        accepted.is_empty(),
        "{} of {} bypass attempts accepted:\n{}",
        accepted.len(),
        cases.len(),
        accepted.join("\n")
    );
}

#[test]
fn benign_projects_pass() {
    for case in fixtures("compose-benign") {
        let findings = check_compose_setup(&project_files(&case), &Consent::default());
        assert!(!has_errors(&findings), "{}: {findings:#?}", case.display());
    }
}

/// Every fixture whose name starts with `prefix` is refused by `code` (at least `min` of
/// them): the gate judged the construct itself, not something next to it.
fn family_refused_by(prefix: &str, code: &str, min: usize) {
    let cases: Vec<_> = fixtures("compose-bypass")
        .into_iter()
        .filter(|c| c.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    assert!(cases.len() >= min, "{prefix}: {}", cases.len());
    for case in cases {
        let findings = check_compose_setup(&project_files(&case), &Consent::default());
        assert!(
            findings
                .iter()
                .any(|f| f.code == code && f.severity == aibox_policy::Severity::Error),
            "{}: {findings:#?}",
            case.display()
        );
    }
}

/// Symbolic links (`link-*`) are judged where they lead.
#[test]
fn links_are_refused_as_links() {
    family_refused_by("link-", "aibox::policy::symlink", 16);
}

/// YAML tags and directives (`tag-*`, `tagged-*`) are refused as such, whatever the value.
#[test]
fn tags_are_refused_as_tags() {
    family_refused_by("tag", "aibox::policy::yaml_tag", 12);
}

/// Every way to join a host namespace: Podman's `ns:` paths for each namespace key, and
/// networks that are the host's (`host` by key, by `name`, by driver, or joined directly).
#[test]
fn namespaces_by_path_and_host_networks_are_refused() {
    family_refused_by("ns-", "aibox::policy::host_namespace", 3);
    family_refused_by("network-", "aibox::policy::host_namespace", 5);
}

/// Socket folders are refused even read-only: a read-only mount still lets a process
/// connect to the sockets inside.
#[test]
fn socket_folders_are_refused_in_any_mode() {
    family_refused_by("socket-dir-", "aibox::policy::engine_socket", 6);
}

/// `include` with a `project_directory` outside the project (or through a variable).
#[test]
fn include_project_directories_outside_the_project_are_refused() {
    family_refused_by(
        "include-project-directory-",
        "aibox::policy::unchecked_include",
        3,
    );
}

/// Each attempt and the rule it tries to dodge, which must be the one that refuses it.
const EXPECTED_RULES: &[(&str, &str)] = &[
    ("merge-privileged", "aibox::policy::privileged"),
    ("merge-cap-sys-admin", "aibox::policy::cap_add"),
    ("merge-host-network", "aibox::policy::host_namespace"),
    (
        "merge-seccomp-unconfined",
        "aibox::policy::seccomp_unconfined",
    ),
    ("merge-docker-socket", "aibox::policy::engine_socket"),
    ("interp-privileged-default", "aibox::policy::privileged"),
    ("interp-network-default", "aibox::policy::host_namespace"),
    (
        "interp-dotenv-privileged",
        "aibox::policy::unresolved_variable",
    ),
    ("extends-other-file", "aibox::policy::privileged"),
    ("include-privileged", "aibox::policy::privileged"),
    ("named-volume-bind-root", "aibox::policy::sensitive_mount"),
    ("env-file-credentials", "aibox::policy::host_read"),
    ("configs-shadow", "aibox::policy::host_read"),
    ("build-context-root", "aibox::policy::host_read"),
    ("build-additional-contexts", "aibox::policy::host_read"),
    ("build-dockerfile-absolute", "aibox::policy::host_read"),
    ("mount-sudoers-d", "aibox::policy::sensitive_mount"),
    ("mount-claude", "aibox::policy::credential_mount"),
    ("mount-bashrc", "aibox::policy::credential_mount"),
    ("devcontainer-docker-in-docker", "aibox::policy::privileged"),
    (
        "devcontainer-extra-compose-file",
        "aibox::policy::privileged",
    ),
    (
        "devcontainer-local-feature-privileged",
        "aibox::policy::privileged",
    ),
    (
        "volumes-from-foreign-container",
        "aibox::policy::volumes_from_container",
    ),
    ("device-raw-disk", "aibox::policy::devices"),
    ("device-long-syntax", "aibox::policy::devices"),
    (
        "device-cgroup-rule-all",
        "aibox::policy::device_cgroup_rule",
    ),
    ("label-spc-t", "aibox::policy::security_label"),
    ("label-colon-unconfined-t", "aibox::policy::security_label"),
    ("cap-net-admin", "aibox::policy::cap_add"),
    ("cap-sys-ptrace", "aibox::policy::cap_add"),
    ("cap-net-raw", "aibox::policy::cap_add"),
    ("sysctls-mapping", "aibox::policy::sysctl"),
    ("sysctls-list", "aibox::policy::sysctl"),
    ("user-root", "aibox::policy::root_user"),
    ("user-zero-zero", "aibox::policy::root_user"),
    ("user-root-and-disk", "aibox::policy::devices"),
    ("user-root-and-disk", "aibox::policy::root_user"),
    ("devcontainer-runargs-device", "aibox::policy::devices"),
    ("devcontainer-runargs-device", "aibox::policy::sysctl"),
    ("devcontainer-runargs-device", "aibox::policy::root_user"),
    (
        "seccomp-lookalike-absolute",
        "aibox::policy::seccomp_profile",
    ),
    (
        "seccomp-allow-all-in-place",
        "aibox::policy::seccomp_profile_edited",
    ),
    ("devcontainer-root-file", "aibox::policy::privileged"),
    (
        "devcontainer-root-file",
        "aibox::policy::initialize_command",
    ),
    (
        "devcontainer-named-run-args",
        "aibox::policy::host_namespace",
    ),
    ("devcontainer-named-run-args", "aibox::policy::cap_add"),
    (
        "devcontainer-named-run-args",
        "aibox::policy::engine_socket",
    ),
    (
        "devcontainer-named-security-opt",
        "aibox::policy::apparmor_unconfined",
    ),
    (
        "devcontainer-named-compose",
        "aibox::policy::sensitive_mount",
    ),
    (
        "devcontainer-root-file-compose-escape",
        "aibox::policy::unchecked_include",
    ),
    ("mount-opts-ro-then-rw", "aibox::policy::sensitive_mount"),
    ("mount-short-mode-ro-rw", "aibox::policy::sensitive_mount"),
    ("mount-home-ro", "aibox::policy::home_mount"),
    (
        "devcontainer-build-context-outside",
        "aibox::policy::host_read",
    ),
    (
        "named-volume-block-device-ro",
        "aibox::policy::sensitive_mount",
    ),
];

/// Each attempt is refused for its own reason, not by accident: the rule that fires.
#[test]
fn attempts_are_refused_by_the_rule_they_try_to_dodge() {
    let expected = EXPECTED_RULES;
    let dir = corpus::corpus_dir().join("compose-bypass");
    for (case, code) in expected {
        let findings = check_compose_setup(&project_files(&dir.join(case)), &Consent::default());
        assert!(
            findings
                .iter()
                .any(|f| f.code == *code && f.severity == aibox_policy::Severity::Error),
            "{case}: no {code}: {findings:#?}"
        );
    }
}
