//! Symbolic links in a real project on disk: the gate judges where each host path leads,
//! as the kernel will, not the path as written. Each test builds a project and a fake
//! home in a temporary folder, links out of the project (to `/`, `/etc/cron.d`, an engine
//! socket, `~/.aws/credentials`, `~`, `~/.ssh`) and hands the gate the same view of the
//! disk the engine gives it (`aibox_config::hostpath`).
#![cfg(unix)]
// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use crate::corpus;

use std::os::unix::fs::symlink;
use std::path::Path;

use aibox_config::{ExtraVolume, LocalToml, SecurityException};
use aibox_policy::{Consent, Finding, Severity, check_compose_setup, check_project_volumes};
use corpus::{Project, project_files};

const BASE: &str = "services:\n  dev:\n    image: localhost/corpus:local\n";

/// A project under `tmp/proj` with the override `override_yaml`, and a fake home under
/// `tmp/home` holding `.aws/credentials` and `.ssh/id_ed25519` (fake contents).
fn project(tmp: &Path, override_yaml: &str, links: &[(&str, &str)]) -> Project {
    let root = tmp.join("proj");
    let home = tmp.join("home");
    fs_err::create_dir_all(root.join(".devcontainer")).unwrap();
    fs_err::create_dir_all(home.join(".aws")).unwrap();
    fs_err::create_dir_all(home.join(".ssh")).unwrap();
    fs_err::write(
        home.join(".aws/credentials"),
        "[default]\naws_access_key_id = AKIAFAKEFAKEFAKEFAKE\n",
    )
    .unwrap();
    fs_err::write(home.join(".ssh/id_ed25519"), "not a key\n").unwrap();
    fs_err::write(root.join(".devcontainer/docker-compose.yml"), BASE).unwrap();
    fs_err::write(
        root.join(".devcontainer/docker-compose.override.yml"),
        override_yaml,
    )
    .unwrap();
    for (link, target) in links {
        let target = target.replace("$HOME", &home.display().to_string());
        symlink(target, root.join(link)).unwrap();
    }
    let mut p = project_files(&root);
    p.home = Some(home);
    p
}

fn link_errors(findings: &[Finding]) -> Vec<&Finding> {
    findings
        .iter()
        .filter(|f| f.code == "aibox::policy::symlink" && f.severity == Severity::Error)
        .collect()
}

/// One case: the override, the link, and what the finding must name.
struct Case {
    yaml: &'static str,
    link: (&'static str, &'static str),
    target: &'static str,
}

const CASES: &[Case] = &[
    Case {
        yaml: "services:\n  dev:\n    volumes: [\"./hostroot:/host\"]\n",
        link: (".devcontainer/hostroot", "/"),
        target: "/",
    },
    Case {
        yaml: "services:\n  dev:\n    volumes:\n      - {type: bind, source: ./cron, target: /c}\n",
        link: (".devcontainer/cron", "/etc/cron.d"),
        target: "/etc/cron.d",
    },
    Case {
        yaml: "services:\n  dev:\n    volumes: [\"./sock:/var/run/docker.sock\"]\n",
        link: (".devcontainer/sock", "/run/docker.sock"),
        target: "/run/docker.sock",
    },
    Case {
        yaml: "services:\n  dev:\n    env_file: [./creds]\n",
        link: (".devcontainer/creds", "$HOME/.aws/credentials"),
        target: "~/.aws/credentials",
    },
    Case {
        yaml: "services:\n  dev:\n    build:\n      context: .\n      additional_contexts: {h: ./h}\n",
        link: (".devcontainer/h", "$HOME"),
        target: "~",
    },
    Case {
        yaml: "services:\n  dev:\n    configs: [k]\nconfigs:\n  k: {file: ./keys}\n",
        link: (".devcontainer/keys", "$HOME/.ssh"),
        target: "~/.ssh",
    },
    Case {
        // A relative link that climbs out of the project.
        yaml: "services:\n  dev:\n    build: {context: ./ctx}\n",
        link: (".devcontainer/ctx", "../../home"),
        target: "~",
    },
];

#[test]
fn links_out_of_the_project_are_refused_naming_their_target() {
    for case in CASES {
        let tmp = tempfile::tempdir().unwrap();
        let p = project(tmp.path(), case.yaml, &[case.link]);
        let findings = check_compose_setup(&p, &Consent::default());
        let errors = link_errors(&findings);
        assert!(
            errors
                .iter()
                .any(|f| f.option.as_deref() == Some(&format!("mount:{}", case.target))),
            "{}: {findings:#?}",
            case.link.0
        );
        // The same text without the link is the project's own folder: accepted.
        fs_err::remove_file(p.root.join(case.link.0)).unwrap();
        fs_err::create_dir_all(p.root.join(case.link.0)).unwrap();
        let findings = check_compose_setup(&p, &Consent::default());
        assert!(link_errors(&findings).is_empty(), "{findings:#?}");
    }
}

#[test]
fn consent_names_the_link_target() {
    let tmp = tempfile::tempdir().unwrap();
    let p = project(
        tmp.path(),
        "services:\n  dev:\n    env_file: [./creds]\n",
        &[(".devcontainer/creds", "$HOME/.aws/credentials")],
    );
    let consent = Consent {
        exceptions: vec![SecurityException {
            option: "mount:~/.aws/credentials".to_owned(),
            reason: "fixture: tested on purpose".to_owned(),
        }],
        ..Consent::default()
    };
    let findings = check_compose_setup(&p, &consent);
    assert!(link_errors(&findings).is_empty(), "{findings:#?}");
    assert!(
        findings
            .iter()
            .any(|f| f.code == "aibox::policy::symlink" && f.accepted_reason.is_some())
    );
}

#[test]
fn links_inside_the_project_are_fine_and_dot_dot_after_a_link_is_the_kernels() {
    let tmp = tempfile::tempdir().unwrap();
    fs_err::create_dir_all(tmp.path().join("proj/data")).unwrap();
    let p = project(
        tmp.path(),
        "services:\n  dev:\n    volumes: [\"./data:/data\"]\n",
        &[(".devcontainer/data", "../data")],
    );
    let findings = check_compose_setup(&p, &Consent::default());
    assert!(link_errors(&findings).is_empty(), "{findings:#?}");
    // `deep/..` is `.devcontainer` to Compose, `/etc` to the kernel.
    let tmp = tempfile::tempdir().unwrap();
    let p = project(
        tmp.path(),
        "services:\n  dev:\n    volumes: [\"./deep/..:/x\"]\n",
        &[(".devcontainer/deep", "/etc/cron.d")],
    );
    let findings = check_compose_setup(&p, &Consent::default());
    assert!(!link_errors(&findings).is_empty(), "{findings:#?}");
}

#[test]
fn linked_guarded_files_are_refused() {
    for (link, yaml) in [
        (".devcontainer/devcontainer.json", ""),
        (".devcontainer.json", ""),
        (".devcontainer/docker-compose.override.yml", ""),
        (".devcontainer/.env", "services:\n  dev: {}\n"),
        (
            ".devcontainer/inc.yml",
            "include: [inc.yml]\nservices:\n  dev: {}\n",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("evil");
        fs_err::write(&outside, "{}\n").unwrap();
        let p = project(tmp.path(), yaml, &[]);
        let _ = fs_err::remove_file(p.root.join(link));
        symlink(&outside, p.root.join(link)).unwrap();
        let p = project_files(&p.root);
        let findings = check_compose_setup(&p, &Consent::default());
        assert!(
            link_errors(&findings)
                .iter()
                .any(|f| f.message.contains(link)),
            "{link}: {findings:#?}"
        );
    }
}

#[test]
fn linked_extra_volumes_are_judged_where_they_lead() {
    let tmp = tempfile::tempdir().unwrap();
    let p = project(
        tmp.path(),
        "services:\n  dev: {}\n",
        &[("home-link", "$HOME"), ("etc-link", "/etc")],
    );
    let mut config =
        aibox_config::parse_aibox_toml("[container]\nname = \"demo\"\n", "aibox.toml").unwrap();
    config.container.extra_volumes = vec![ExtraVolume {
        source: "home-link".to_owned(),
        target: "/mnt/home".to_owned(),
        read_only: true,
    }];
    let mut local = LocalToml::default();
    local.container.extra_volumes = vec![ExtraVolume {
        source: "./etc-link/cron.d".to_owned(),
        target: "/mnt/cron".to_owned(),
        read_only: false,
    }];
    let findings = check_project_volumes(&config, &local, &Consent::default(), &p);
    let errors = link_errors(&findings);
    assert!(
        errors
            .iter()
            .any(|f| f.file.starts_with("aibox.toml") && f.option.as_deref() == Some("mount:~")),
        "{findings:#?}"
    );
    assert!(
        errors
            .iter()
            .any(|f| f.file.starts_with(".aibox-local.toml")
                && f.option.as_deref() == Some("mount:/etc/cron.d")),
        "{findings:#?}"
    );
}

/// `devcontainer.json` mounts name the project as `${localWorkspaceFolder}`: a link there
/// is followed too, in every dev container configuration.
#[test]
fn devcontainer_mounts_through_links_are_refused() {
    for config in [
        ".devcontainer/devcontainer.json",
        ".devcontainer.json",
        ".devcontainer/alt/devcontainer.json",
    ] {
        for source in ["hostroot", "deep/.."] {
            devcontainer_mount_case(config, source);
        }
    }
}

/// One configuration mounting `${localWorkspaceFolder}/<source>`, where `hostroot` is a
/// link to `/` and `deep` one to `/etc/cron.d` (so `deep/..` is `/etc` to the kernel).
fn devcontainer_mount_case(config: &str, source: &str) {
    {
        let tmp = tempfile::tempdir().unwrap();
        let p = project(
            tmp.path(),
            "services:\n  dev: {}\n",
            &[("hostroot", "/"), ("deep", "/etc/cron.d")],
        );
        let path = p.root.join(config);
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(
            &path,
            format!(
                "{{\"image\": \"x\", \"mounts\": [\"source=${{localWorkspaceFolder}}/{source},target=/h,type=bind,readonly\"]}}"
            ),
        )
        .unwrap();
        let mut p = project_files(&p.root);
        p.home = Some(tmp.path().join("home"));
        let findings = check_compose_setup(&p, &Consent::default());
        assert!(
            link_errors(&findings).iter().any(|f| f.file == config
                && f.option
                    .as_deref()
                    .is_some_and(|o| o == "mount:/" || o == "mount:/etc")),
            "{config} {source}: {findings:#?}"
        );
    }
}

/// The running container: a bind source inside the project (as an engine may report it)
/// whose link leads out is refused; a plain one is the project's own.
#[test]
fn container_state_follows_project_links() {
    let tmp = tempfile::tempdir().unwrap();
    let p = project(tmp.path(), "services:\n  dev: {}\n", &[("hostroot", "/")]);
    fs_err::create_dir(p.root.join("data")).unwrap();
    let root = fs_err::canonicalize(&p.root).unwrap().display().to_string();
    let inspect = |source: &str| {
        format!(
            "[{{\"HostConfig\": {{}}, \"Config\": {{}}, \"Mounts\": [{{\"Type\": \"bind\", \"Source\": \"{root}/{source}\", \"RW\": false}}]}}]"
        )
    };
    let found = aibox_policy::check_container_state(
        &inspect("hostroot"),
        &root,
        &Consent::default(),
        &p,
        &[],
    );
    assert!(
        link_errors(&found)
            .iter()
            .any(|f| f.option.as_deref() == Some("mount:/")),
        "{found:#?}"
    );
    let found =
        aibox_policy::check_container_state(&inspect("data"), &root, &Consent::default(), &p, &[]);
    assert!(found.is_empty(), "{found:#?}");
}

/// A bind mount from outside the project that no configuration names (what an engine
/// reports for a project folder swapped for a link after the files were checked) is an
/// error after `up`; a configured one, as written or as its link resolves, and the
/// project's own are not.
#[test]
fn a_started_container_mounts_only_what_the_configuration_names() {
    let inspect = |sources: &[&str]| {
        let mounts: Vec<String> = sources
            .iter()
            .map(|s| format!("{{\"Type\": \"bind\", \"Source\": \"{s}\", \"RW\": true}}"))
            .collect();
        format!(
            "[{{\"HostConfig\": {{}}, \"Mounts\": [{}]}}]",
            mounts.join(", ")
        )
    };
    let root = "/home/u/proj";
    let expected = ["/home/u/shared".to_owned(), "/data/shared/".to_owned()];
    let found = aibox_policy::unexpected_mounts(
        &inspect(&[
            root,
            "/home/u/proj/.aibox-home/.claude",
            "/home/u/shared",
            "/data/shared",
        ]),
        root,
        &expected,
    );
    assert!(found.is_empty(), "{found:#?}");
    let found = aibox_policy::unexpected_mounts(
        &inspect(&[root, "/home/u/.ssh", "/home/u/projects"]),
        root,
        &expected,
    );
    let codes: Vec<&str> = found.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(
        codes,
        [
            "aibox::policy::unexpected_mount",
            "aibox::policy::unexpected_mount"
        ],
        "{found:#?}"
    );
    assert!(found[0].message.contains("`/home/u/.ssh`"), "{found:#?}");
    // A project whose name starts like another folder's is not that folder.
    let found = aibox_policy::unexpected_mounts(&inspect(&["/home/u/proj2"]), root, &[]);
    assert_eq!(found.len(), 1, "{found:#?}");
    // Volumes are the engine's, not host paths.
    let volume = "[{\"Mounts\": [{\"Type\": \"volume\", \"Source\": \"/var/lib/x\"}]}]";
    assert!(aibox_policy::unexpected_mounts(volume, root, &[]).is_empty());
}
