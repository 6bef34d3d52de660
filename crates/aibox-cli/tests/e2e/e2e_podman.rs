//! End-to-end: the `aibox` binary against a real Podman, and the whole journey once on
//! a real Docker Engine (`docker_engine_journey`, see `aibox_test_support::docker`).
//!
//! `init` → `apply` → `up` → `status` → `exec` → `down`, checking every step's effect
//! on the engine with `podman inspect`; plus the refusal to touch another project's
//! container and a fast, clear error when no engine is installed. The harness builds
//! and caches the Debian base image (see `aibox_test_support::podman`).
//!
//! The tests run beside each other like the other end-to-end files: the harness keeps
//! build layers for the whole run, so after the first build of an image an `up` is a
//! cached build and a start (they were serial while every test built from scratch).

// Helpers outside `#[test]` functions are test code too: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use aibox_test_support::docker::Docker;
use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Podman};
use camino::{Utf8Path, Utf8PathBuf};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A fresh project folder named after the test and this process (unique container names).
fn project_dir(stem: &str) -> (tempfile::TempDir, Utf8PathBuf, String) {
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("aibox-e2e-{stem}-{}", std::process::id());
    let root = Utf8PathBuf::from_path_buf(tmp.path().join(&name)).unwrap();
    fs_err::create_dir_all(&root).unwrap();
    (tmp, root, name)
}

/// `aibox --project ROOT ...` with the harness's Podman settings and nothing inherited
/// that could change the outcome.
fn aibox(podman: &Podman, root: &Utf8Path) -> Command {
    podman.aibox(env!("CARGO_BIN_EXE_aibox"), root)
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

use aibox_test_support::show_output as show;

fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(out.status.success(), "{cmd:?} failed: {}", show(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn init(podman: &Podman, root: &Utf8Path, name: &str, harness: &str) {
    ok(aibox(podman, root).args([
        "init",
        name,
        "--harness",
        harness,
        "--context-mode",
        "harness-only",
        "--base-image",
        BASE_IMAGE,
        "--yes",
    ]));
    assert!(root.join("aibox.toml").is_file());
    fs_err::write(
        root.join(".aibox-local.toml"),
        aibox_test_support::podman::local_toml_with_host_ca(),
    )
    .unwrap();
}

/// Compose project, container, image and user as aibox reports them (`status` before
/// any `up`).
fn names(podman: &Podman, root: &Utf8Path) -> (String, String, String, String) {
    let status = status_json(podman, root);
    let text = |k: &str| {
        status[k]
            .as_str()
            .unwrap_or_else(|| panic!("no {k}: {status}"))
            .to_owned()
    };
    let user = aibox_config::load_project(root)
        .unwrap()
        .config
        .container
        .user;
    (text("project"), text("container"), text("image"), user)
}

/// An initialised project whose container, image and network are removed at the end.
struct TestProject {
    // First field, so dropped first: the engine objects go before the folder.
    cleanup: Cleanup,
    _tmp: tempfile::TempDir,
    root: Utf8PathBuf,
    name: String,
    /// This checkout's container (the project name and a hash of the folder's path).
    container: String,
    project: String,
    image: String,
    user: String,
}

impl TestProject {
    /// Marks the image `up` is about to replace for removal at the end (should `up` not
    /// remove it: a rebuild moves the tag to the new image and leaves the old one
    /// nameless, out of reach of the removal by name), and returns its ID.
    fn replaced_at_rebuild(&mut self, podman: &Podman) -> String {
        let out = podman.run(&["image", "inspect", "--format", "{{.Id}}", &self.image]);
        assert!(out.status.success(), "{}", show(&out));
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        self.cleanup.image(&id);
        id
    }

    fn init(podman: &Podman, stem: &str, harness: &str) -> Self {
        let (tmp, root, name) = project_dir(stem);
        init(podman, &root, &name, harness);
        let (project, container, image, user) = names(podman, &root);
        let mut cleanup = Cleanup::new(podman);
        cleanup
            .container(&container)
            .image(&image)
            .network(&format!("{project}_default"));
        Self {
            cleanup,
            _tmp: tmp,
            root,
            name,
            container,
            project,
            image,
            user,
        }
    }
}

/// Runs `aibox ARGS`, which must fail with every one of `needles` on stderr.
fn refused(mut cmd: Command, args: &[&str], needles: &[&str]) {
    let out = run(cmd.args(args));
    assert!(
        !out.status.success(),
        "{args:?} must refuse: {}",
        show(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in needles {
        assert!(stderr.contains(needle), "{args:?}: {}", show(&out));
    }
}

fn status_json(podman: &Podman, root: &Utf8Path) -> serde_json::Value {
    let text = ok(aibox(podman, root).args(["status", "--output", "json"]));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("status is not JSON ({e}): {text}"))
}

/// `exec`: the version marker, the configured user, the workspace, one named host
/// variable for one command only, and the command's exit code passed through.
fn check_exec(podman: &Podman, root: &Utf8Path, user: &str) {
    let marker = ok(aibox(podman, root).args(["exec", "--", "cat", "/etc/aibox-version"]));
    assert_eq!(marker.trim(), VERSION);
    let whoami = ok(aibox(podman, root).args(["exec", "--", "id", "-un"]));
    assert_eq!(whoami.trim(), user);
    let pwd = ok(aibox(podman, root).args(["exec", "--", "pwd"]));
    assert_eq!(pwd.trim(), "/workspace");
    // The workspace is the project folder, bind-mounted.
    let listed = ok(aibox(podman, root).args(["exec", "--", "cat", "aibox.toml"]));
    assert_eq!(
        listed,
        fs_err::read_to_string(root.join("aibox.toml")).unwrap()
    );

    // One named host variable, for one command only; the command's exit code is ours.
    let token = "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000";
    let passed = run(aibox(podman, root)
        .env("AIBOX_E2E_TOKEN", token)
        .args(["exec", "--env", "AIBOX_E2E_TOKEN", "--"])
        .args(["sh", "-c", &format!("test \"$AIBOX_E2E_TOKEN\" = {token}")]));
    assert!(passed.status.success(), "{}", show(&passed));
    let isolated = run(aibox(podman, root).env("AIBOX_E2E_TOKEN", token).args([
        "exec",
        "--",
        "sh",
        "-c",
        "test -z \"${AIBOX_E2E_TOKEN-}\"",
    ]));
    assert!(
        isolated.status.success(),
        "variable leaked: {}",
        show(&isolated)
    );
    let failing = run(aibox(podman, root).args(["exec", "--", "sh", "-c", "exit 3"]));
    assert_eq!(failing.status.code(), Some(3), "{}", show(&failing));
}

#[test]
fn init_apply_up_status_exec_down() {
    let podman = Podman::ready();
    let p = TestProject::init(&podman, "flow", "claude");
    let TestProject {
        root,
        name,
        container,
        project,
        image,
        user,
        ..
    } = &p;

    ok(aibox(&podman, root).arg("apply"));
    for file in ["Dockerfile", "docker-compose.yml", "devcontainer.json"] {
        assert!(
            root.join(".devcontainer").join(file).is_file(),
            "{file} missing"
        );
    }
    ok(aibox(&podman, root).args(["apply", "--check"]));
    assert!(
        podman.inspect_container(container).is_none(),
        "apply alone starts nothing"
    );
    ok(aibox(&podman, root).args(["apply", "--build"]));
    assert!(podman.image_exists(image), "apply --build built the image");
    assert!(
        podman.inspect_container(container).is_none(),
        "apply --build starts nothing"
    );

    let before = status_json(&podman, root);
    assert_eq!(before["state"], "missing", "{before}");

    ok(aibox(&podman, root).arg("up"));
    let inspect = podman
        .inspect_container(container)
        .expect("up created the container");
    assert_eq!(inspect["State"]["Running"], true, "{inspect}");
    let labels = &inspect["Config"]["Labels"];
    assert_eq!(labels["aibox.project"].as_str(), Some(name.as_str()));
    assert_eq!(
        labels["aibox.version"].as_str(),
        Some(VERSION),
        "image label"
    );
    assert!(podman.image_exists(image));

    let status = status_json(&podman, root);
    assert_eq!(status["state"], "running", "{status}");
    assert_eq!(status["container"], container.as_str());
    assert_eq!(
        status["project"],
        project.as_str(),
        "the Compose project is per checkout"
    );
    assert!(container.starts_with(&format!("{name}-")), "{container}");
    assert_eq!(status["container_id"], inspect["Id"]);
    assert_eq!(status["engine"], "podman");

    check_exec(&podman, root, user);
    // With the default (open) egress too, the agent cannot rewrite the files its next
    // container is made from (devcontainer.json's `initializeCommand` runs on the host),
    // even as root; nor swap a harness state folder for a link the engine would follow,
    // nor add a line to the personal environment file Compose reads.
    for script in [
        "echo '# agent' >> /workspace/.devcontainer/devcontainer.json",
        "echo '# agent' >> /workspace/.devcontainer/docker-compose.override.yml",
        "mv /workspace/.aibox-home/.claude /workspace/.aibox-home/moved",
        "echo GITHUB_TOKEN >> /workspace/.devcontainer/aibox-local.env",
    ] {
        let out = podman.run(&["exec", "-u", "0", container, "sh", "-c", script]);
        assert!(!out.status.success(), "{script}: {}", show(&out));
        assert!(
            show(&out).contains("Read-only file system"),
            "{}",
            show(&out)
        );
    }

    // `up` again is a no-op on a running container.
    ok(aibox(&podman, root).arg("up"));
    let again = podman.inspect_container(container).unwrap();
    assert_eq!(again["Id"], inspect["Id"]);

    let down = run(aibox(&podman, root).arg("down"));
    assert!(down.status.success(), "{}", show(&down));
    // The container being gone is what `down` was asked for, and it says so.
    assert!(
        String::from_utf8_lossy(&down.stderr).contains(&format!("{container} is removed")),
        "{}",
        show(&down)
    );
    assert!(
        podman.inspect_container(container).is_none(),
        "down removed the container"
    );
    let after = status_json(&podman, root);
    assert!(
        matches!(after["state"].as_str(), Some("missing" | "stopped")),
        "{after}"
    );
    let exec_down = run(aibox(&podman, root).args(["exec", "--", "true"]));
    assert!(!exec_down.status.success());
    assert!(
        String::from_utf8_lossy(&exec_down.stderr).contains("aibox up"),
        "{}",
        show(&exec_down)
    );
}

#[test]
fn a_same_named_container_of_another_project_is_refused_and_left_alone() {
    let podman = Podman::ready();
    let p = TestProject::init(&podman, "foreign", "claude");
    let TestProject {
        root,
        container,
        image,
        ..
    } = &p;
    let id = podman.create_foreign(container, "some-other-project");

    for args in [&["up"][..], &["down"], &["status"], &["exec", "--", "true"]] {
        refused(
            aibox(&podman, root),
            args,
            &["aibox::runtime::foreign_container", "some-other-project"],
        );
    }
    let after = podman
        .inspect_container(container)
        .expect("the other container is still there");
    assert_eq!(after["Id"], id);
    assert_eq!(
        after["State"]["Status"], "created",
        "it was neither started nor replaced"
    );
    assert!(
        !podman.image_exists(image),
        "nothing was built for the refused project"
    );
}

/// Two checkouts of one project (clone B is a copy of A at another path, with the same
/// folder name and the same committed `container.name`): each gets its own container,
/// `exec` in B never reaches A's `/workspace`, and a name pinned in B's
/// `.aibox-local.toml` to A's container is refused as A's, naming A's path.
#[test]
fn two_checkouts_of_one_project_never_share_a_container() {
    let podman = Podman::ready();
    let a = TestProject::init(&podman, "clones", "claude");
    ok(aibox(&podman, &a.root).arg("up"));
    let b_tmp = tempfile::tempdir().unwrap();
    let b_root = Utf8PathBuf::from_path_buf(b_tmp.path().join(&a.name)).unwrap();
    ok(Command::new("cp").args(["-a", a.root.as_str(), b_root.as_str()]));
    let (b_project, b_container, b_image, _) = names(&podman, &b_root);
    let mut cleanup = Cleanup::new(&podman);
    cleanup
        .container(&b_container)
        .network(&format!("{b_project}_default"));
    assert_ne!(b_container, a.container, "one container per checkout");
    assert_eq!(b_image, a.image, "identical files build one image");

    // Before B's `up`, nothing in B touches A's container.
    let b_status = status_json(&podman, &b_root);
    assert_eq!(b_status["state"], "missing", "{b_status}");
    let exec = run(aibox(&podman, &b_root).args(["exec", "--", "true"]));
    assert!(!exec.status.success(), "{}", show(&exec));
    assert!(
        String::from_utf8_lossy(&exec.stderr).contains(&format!("`{b_container}` is missing")),
        "{}",
        show(&exec)
    );

    ok(aibox(&podman, &b_root).arg("up"));
    fs_err::write(a.root.join("only-in-a.txt"), "a").unwrap();
    let seen = ok(aibox(&podman, &b_root).args(["exec", "--", "ls", "/workspace"]));
    assert!(
        !seen.contains("only-in-a.txt"),
        "B sees A's workspace: {seen}"
    );
    let seen = ok(aibox(&podman, &a.root).args(["exec", "--", "ls", "/workspace"]));
    assert!(seen.contains("only-in-a.txt"), "{seen}");
    for (root, container) in [(&a.root, &a.container), (&b_root, &b_container)] {
        let inspect = podman.inspect_container(container).unwrap();
        assert_eq!(inspect["State"]["Running"], true);
        let checkout = fs_err::canonicalize(root).unwrap();
        assert_eq!(
            inspect["Config"]["Labels"]["aibox.checkout"].as_str(),
            checkout.to_str()
        );
        let doctor = run(aibox(&podman, root).args(["doctor", "--output", "json"]));
        let text = String::from_utf8_lossy(&doctor.stdout);
        assert!(!text.contains("foreign_container"), "{}", show(&doctor));
    }
    ok(aibox(&podman, &b_root).arg("down"));
    assert!(podman.inspect_container(&b_container).is_none());
    assert_eq!(
        podman.inspect_container(&a.container).unwrap()["State"]["Running"],
        true,
        "B's down leaves A's container alone"
    );

    // A pin in B to A's container name: the path label tells B it is A's.
    let local = fs_err::read_to_string(b_root.join(".aibox-local.toml")).unwrap();
    let pinned = local.replacen(
        "[container]\n",
        &format!("[container]\ncontainer_name = \"{}\"\n", a.container),
        1,
    );
    assert_ne!(pinned, local, "{local}");
    fs_err::write(b_root.join(".aibox-local.toml"), pinned).unwrap();
    let a_checkout = fs_err::canonicalize(&a.root).unwrap();
    let owner = format!("the checkout at {}", a_checkout.display());
    for args in [&["status"][..], &["exec", "--", "true"], &["down"], &["up"]] {
        refused(
            aibox(&podman, &b_root),
            args,
            &[
                "aibox::runtime::foreign_container",
                &owner,
                "container_name",
            ],
        );
    }
    let doctor = run(aibox(&podman, &b_root).args(["doctor", "--output", "json"]));
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("aibox::doctor::foreign_container") && text.contains(&owner),
        "{}",
        show(&doctor)
    );
    assert!(!doctor.status.success(), "{}", show(&doctor));
    assert_eq!(
        podman.inspect_container(&a.container).unwrap()["State"]["Running"],
        true,
        "still running after B's refused commands"
    );

    // A renamed: its container is now this checkout's under a former name, which `doctor`
    // names (and `up` or `down` would remove).
    let toml = fs_err::read_to_string(a.root.join("aibox.toml")).unwrap();
    let renamed = toml.replacen(
        &format!("name = \"{}\"", a.name),
        &format!("name = \"{}-renamed\"", a.name),
        1,
    );
    assert_ne!(renamed, toml, "{toml}");
    fs_err::write(a.root.join("aibox.toml"), renamed).unwrap();
    let doctor = run(aibox(&podman, &a.root).args(["doctor", "--output", "json"]));
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("aibox::doctor::former_container") && text.contains(&a.container),
        "{}",
        show(&doctor)
    );
}

#[test]
fn no_engine_on_path_fails_fast_with_a_clear_error() {
    let podman = Podman::ready();
    let (_tmp, root, name) = project_dir("noengine");
    init(&podman, &root, &name, "claude");
    let compose = root.join(".devcontainer/docker-compose.yml");
    let had_compose = compose.exists();
    let empty = tempfile::tempdir().unwrap();
    for args in [&["up"][..], &["status"], &["down"], &["exec", "--", "true"]] {
        let started = Instant::now();
        let mut cmd = aibox(&podman, &root);
        cmd.env("PATH", empty.path());
        refused(
            cmd,
            args,
            &[
                "aibox::runtime::no_engine",
                "`podman` was requested but is not on PATH",
            ],
        );
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
    }
    assert_eq!(compose.exists(), had_compose, "a failed `up` wrote nothing");
}

/// The seccomp relaxation Codex's sandbox may need reaches the running container only
/// after the owner's consent, for both the unconfined and the generated-profile choice.
#[test]
fn seccomp_relaxation_reaches_the_container_only_after_consent() {
    let podman = Podman::ready();
    let p = TestProject::init(&podman, "seccomp", "codex");
    let TestProject {
        root, container, ..
    } = &p;

    // The default (the engine's own profile) relaxes nothing.
    ok(aibox(&podman, root).arg("up"));
    let inspect = podman.inspect_container(container).expect("container");
    let opts = inspect["HostConfig"]["SecurityOpt"].to_string();
    assert!(!opts.contains("seccomp=unconfined"), "{opts}");
    ok(aibox(&podman, root).arg("down"));

    for (strategy, consent) in [
        ("unconfined", "security.acknowledge_seccomp_unconfined"),
        ("seccomp-profile", "security.acknowledge_seccomp_profile"),
    ] {
        ok(aibox(&podman, root).args(["config", "set", "security.codex_sandbox", strategy]));
        let compose =
            fs_err::read_to_string(root.join(".devcontainer/docker-compose.yml")).unwrap();
        // Without consent: refused, with the code, and nothing relaxed is written.
        let refused = run(aibox(&podman, root).arg("apply"));
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{strategy}: {}",
            show(&refused)
        );
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("aibox::policy::seccomp_consent"),
            "{strategy}: {}",
            show(&refused)
        );
        assert_eq!(
            fs_err::read_to_string(root.join(".devcontainer/docker-compose.yml")).unwrap(),
            compose,
            "{strategy}: a refused apply changed the compose file"
        );
        let up_refused = run(aibox(&podman, root).arg("up"));
        assert!(
            !up_refused.status.success(),
            "{strategy}: {}",
            show(&up_refused)
        );
        assert!(
            podman.inspect_container(container).is_none(),
            "{strategy}: up started anyway"
        );

        // With consent: the option reaches the running container. It relaxes what the
        // first apply recorded, so the owner approves it too (a person at a terminal is
        // asked; see the reach tests).
        ok(aibox(&podman, root).args(["config", "set", consent, "true"]));
        let up = run(aibox(&podman, root).args(["up", "--approve-reach"]));
        assert!(up.status.success(), "{strategy}: {}", show(&up));
        assert!(
            String::from_utf8_lossy(&up.stderr).contains("security: "),
            "{strategy}: up must say a relaxation is active: {}",
            show(&up)
        );
        let inspect = podman.inspect_container(container).expect("container");
        let host = &inspect["HostConfig"];
        let opts = host["SecurityOpt"].to_string();
        // The kernel's view: seccomp mode 0 = no filter, 2 = a filter is installed.
        let status =
            ok(aibox(&podman, root).args(["exec", "--", "grep", "^Seccomp:", "/proc/1/status"]));
        if strategy == "unconfined" {
            assert!(opts.contains("seccomp=unconfined"), "{strategy}: {host}");
            assert!(status.contains('0'), "{strategy}: {status}");
        } else {
            assert!(!opts.contains("seccomp=unconfined"), "{strategy}: {host}");
            assert!(
                opts.contains("seccomp=.devcontainer/aibox-seccomp.json"),
                "{strategy}: {host}"
            );
            assert!(
                status.contains('2'),
                "{strategy}: filter not active: {status}"
            );
            let profile =
                fs_err::read_to_string(root.join(".devcontainer/aibox-seccomp.json")).unwrap();
            assert!(profile.contains("pivot_root"), "profile content");
        }
        ok(aibox(&podman, root).arg("down"));
        ok(aibox(&podman, root).args(["config", "set", consent, "false"]));
    }
}

/// What the engine runs is checked, not only the files: a container whose engine state
/// breaks the policy without consent (here: privileged, started while consent was
/// recorded, consent then withdrawn and the files cleaned) is reported by `doctor` and
/// stopped by `up`.
#[test]
fn engine_state_without_consent_is_reported_and_stopped() {
    let podman = Podman::ready();
    let p = TestProject::init(&podman, "state", "claude");
    let TestProject {
        root, container, ..
    } = &p;
    ok(aibox(&podman, root).arg("apply"));
    let compose = fs_err::read_to_string(root.join(".devcontainer/docker-compose.yml")).unwrap();
    let doc: serde_norway::Value = serde_norway::from_str(&compose).unwrap();
    let service = doc["services"]
        .as_mapping()
        .and_then(|m| m.keys().next())
        .and_then(|k| k.as_str())
        .unwrap()
        .to_owned();
    let override_path = root.join(".devcontainer/docker-compose.override.yml");
    let toml_path = root.join("aibox.toml");
    let toml = fs_err::read_to_string(&toml_path).unwrap();

    // With consent the privileged container starts.
    fs_err::write(
        &override_path,
        format!("services:\n  \"{service}\":\n    privileged: true\n"),
    )
    .unwrap();
    fs_err::write(
        &toml_path,
        format!(
            "{toml}\n[[security.exceptions]]\noption = \"privileged\"\nreason = \"e2e test\"\n"
        ),
    )
    .unwrap();
    // The exception widens what the first apply recorded: approved, as its owner would.
    ok(aibox(&podman, root).args(["up", "--approve-reach"]));
    let inspect = podman.inspect_container(container).expect("container");
    assert_eq!(inspect["HostConfig"]["Privileged"], true, "{inspect}");

    // Consent withdrawn, files clean: the running container still is privileged.
    fs_err::write(&toml_path, &toml).unwrap();
    fs_err::write(
        &override_path,
        format!("services:\n  \"{service}\": {{}}\n"),
    )
    .unwrap();
    let doctor = run(aibox(&podman, root).arg("doctor"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&doctor.stdout),
        String::from_utf8_lossy(&doctor.stderr)
    );
    assert!(!doctor.status.success(), "{}", show(&doctor));
    assert!(
        text.contains("running container") && text.contains("aibox::policy::privileged"),
        "{}",
        show(&doctor)
    );

    assert!(
        text.contains("aibox::doctor::stale_container"),
        "{}",
        show(&doctor)
    );

    // `up` sees that the container no longer matches the (clean) files and recreates it
    // from them: the privilege is gone, and the engine state passes the gate.
    let up = run(aibox(&podman, root).arg("up"));
    assert!(up.status.success(), "{}", show(&up));
    assert!(
        String::from_utf8_lossy(&up.stderr).contains("recreating it"),
        "{}",
        show(&up)
    );
    let inspect = podman.inspect_container(container).expect("container");
    assert_eq!(inspect["HostConfig"]["Privileged"], false, "{inspect}");
    assert_eq!(inspect["State"]["Running"], true, "{inspect}");
}

/// `container.environment.X = "${X}"` passes the host's value into the real container,
/// personal values reach it (winning over the team's), only those, and `aibox up` runs `post_create_command` once per new container and
/// `post_start_command` on every start (both were written to devcontainer.json only).
#[test]
fn host_references_and_lifecycle_commands_reach_the_container() {
    let podman = Podman::ready();
    let p = TestProject::init(&podman, "lifecycle", "claude");
    let root = &p.root;
    let mut toml = fs_err::read_to_string(root.join("aibox.toml")).unwrap();
    toml.push_str(
        "\n[container.environment]\nFROM_HOST = \"${AIBOX_E2E_FROM_HOST}\"\nLITERAL = \"costs $5\"\n\
         OVERRIDDEN = \"team\"\n\n\
         [container.lifecycle]\npost_create_command = \"echo created >> marks/post-create\"\n\
         post_start_command = \"echo started >> marks/post-start\"\n",
    );
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
    // Personal values, one of them overriding a team variable; and the environment file
    // where earlier versions wrote it, with a bare name that would copy a host variable
    // (what an agent in a container VS Code started could have added): it is removed.
    let mut local = fs_err::read_to_string(root.join(".aibox-local.toml")).unwrap();
    local.push_str(
        "\n[container.environment]\nPERSONAL = \"fake-personal-value\"\n\
         OVERRIDDEN = \"mine instead\"\n",
    );
    fs_err::write(root.join(".aibox-local.toml"), local).unwrap();
    fs_err::write(root.join(".aibox-local.env"), "AIBOX_E2E_FROM_HOST\n").unwrap();
    // The container user is not the host user that owns the temp project: let it write.
    fs_err::create_dir_all(root.join("marks")).unwrap();
    fs_err::set_permissions(
        root.join("marks"),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let up = || {
        ok(aibox(&podman, root)
            .env("AIBOX_E2E_FROM_HOST", "from the host")
            .arg("up"));
    };
    let lines = |file: &str| {
        fs_err::read_to_string(root.join(file))
            .unwrap_or_default()
            .lines()
            .count()
    };
    up();
    let env = ok(aibox(&podman, root).args([
        "exec",
        "--",
        "printenv",
        "FROM_HOST",
        "LITERAL",
        "OVERRIDDEN",
        "PERSONAL",
    ]));
    assert_eq!(
        env,
        "from the host\ncosts $5\nmine instead\nfake-personal-value\n"
    );
    assert!(!root.join(".aibox-local.env").exists());
    let leaked = run(aibox(&podman, root).args(["exec", "--", "printenv", "AIBOX_E2E_FROM_HOST"]));
    assert!(!leaked.status.success(), "{}", show(&leaked));
    assert_eq!(
        (lines("marks/post-create"), lines("marks/post-start")),
        (1, 1)
    );
    // Already running: nothing runs again.
    up();
    assert_eq!(
        (lines("marks/post-create"), lines("marks/post-start")),
        (1, 1)
    );
    // A new container gets both again.
    ok(aibox(&podman, root).arg("down"));
    up();
    assert_eq!(
        (lines("marks/post-create"), lines("marks/post-start")),
        (2, 2)
    );

    // A failing command is an error naming the key, after the container is up.
    let toml = fs_err::read_to_string(root.join("aibox.toml"))
        .unwrap()
        .replace("echo started >> marks/post-start", "exit 7");
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
    ok(aibox(&podman, root).arg("down"));
    let out = run(aibox(&podman, root).arg("up"));
    assert!(!out.status.success(), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("post_start_command"), "{}", show(&out));
    assert!(stderr.contains("exit code 7"), "{}", show(&out));

    // A failed post-create command, fixed as its help says, runs at the next `up`: a
    // changed lifecycle command makes the container stale, so `up` recreates it.
    let edit = |from: &str, to: &str| {
        let toml = fs_err::read_to_string(root.join("aibox.toml")).unwrap();
        fs_err::write(root.join("aibox.toml"), toml.replace(from, to)).unwrap();
    };
    edit("exit 7", "echo started >> marks/post-start");
    edit("echo created >> marks/post-create", "exit 4");
    let out = run(aibox(&podman, root).arg("up"));
    assert_eq!(out.status.code(), Some(3), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("post_create_command"),
        "{}",
        show(&out)
    );
    edit("exit 4", "echo fixed >> marks/post-create");
    let status: serde_json::Value =
        serde_json::from_str(&ok(aibox(&podman, root).args(["-o", "json", "status"]))).unwrap();
    assert_eq!(status["container_stale"], true, "{status}");
    up();
    let created = fs_err::read_to_string(root.join("marks/post-create")).unwrap();
    assert_eq!(created.lines().last(), Some("fixed"), "{created}");
}

/// A failing `Dockerfile.local` step: podman-compose 1.0 exits 0 after the failed build,
/// yet `up` fails right after it (exit 3, not after the 60 s running deadline), naming the
/// step, its output and where to fix it without `-v`, and leaves no container behind.
/// Without a terminal, each build step is one plain progress line. A container Compose
/// did not create fails `up` at once as well, and so does a base image the engine cannot
/// pull.
#[test]
fn a_failed_build_fails_up_at_once_with_the_step_and_its_output() {
    let podman = Podman::ready();
    let p = TestProject::init(&podman, "buildfail", "claude");
    let (root, name, container, image) = (&p.root, &p.name, &p.container, &p.image);
    ok(aibox(&podman, root).arg("apply"));
    let local = root.join(".devcontainer/Dockerfile.local");
    let mut text = fs_err::read_to_string(&local).unwrap();
    // The step stamps the moment it fails (ms since the epoch; the container shares the
    // host's clock), so the delay until `up` exits is measured, not guessed.
    text.push_str("RUN echo \"failed-at $(date +%s%3N)\" >&2; echo boom >&2; exit 7\n");
    fs_err::write(&local, text).unwrap();
    ok(aibox(&podman, root).arg("apply"));

    let out = run(aibox(&podman, root).arg("up"));
    let exited_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let failed_at: u64 = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("failed-at "))
        .and_then(|ms| ms.trim().parse().ok())
        .unwrap_or_else(|| panic!("no failure stamp: {}", show(&out)));
    let delay = exited_at.saturating_sub(Duration::from_millis(failed_at));
    eprintln!("up exited {delay:?} after the build step failed");
    assert!(
        delay < Duration::from_secs(15),
        "took {delay:?}: {}",
        show(&out)
    );
    for needle in [
        "aibox::runtime::build_failed",
        image.as_str(),
        "RUN echo \"failed-at",
        "Dockerfile.local",
        "installing claude-code",
    ] {
        assert!(stderr.contains(needle), "{needle}: {}", show(&out));
    }
    assert!(
        stderr.lines().any(|l| l.trim() == "boom"),
        "the step's output: {}",
        show(&out)
    );
    assert!(
        stderr.contains("failed at step ") && !stderr.contains("  | "),
        "the failing step without `-v`: {}",
        show(&out)
    );
    assert!(
        podman.inspect_container(container).is_none(),
        "no container left"
    );
    assert!(!podman.image_exists(image), "no image");

    // The image builds, but `podman run` refuses the service (podman-compose 1.0 exits 0
    // then, too): `up` fails at once with the engine's words, not after the deadline.
    let text = fs_err::read_to_string(&local).unwrap();
    fs_err::write(&local, text.replace("exit 7", "true")).unwrap();
    let override_path = root.join(".devcontainer/docker-compose.override.yml");
    fs_err::write(
        &override_path,
        format!("services:\n  \"{name}\":\n    extra_hosts:\n      - \"bad entry\"\n"),
    )
    .unwrap();
    ok(aibox(&podman, root).args(["apply", "--build"]));
    let started = Instant::now();
    let out = run(aibox(&podman, root).arg("up"));
    let took = started.elapsed();
    eprintln!("up of a refused container failed after {took:?}");
    assert_eq!(out.status.code(), Some(3), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("aibox::runtime::not_created") && stderr.contains("bad entry"),
        "{}",
        show(&out)
    );
    assert!(
        took < Duration::from_secs(30),
        "took {took:?}: {}",
        show(&out)
    );
    assert!(
        podman.inspect_container(container).is_none(),
        "no container left"
    );

    fs_err::remove_file(&override_path).unwrap();
    an_unpullable_base_image_fails_at_the_first_step(&podman, root);
}

/// A base image the engine cannot pull (a registry that cannot exist, as the default one
/// is for a machine without access to it) fails at the first step, with the engine's
/// reason and a hint about the base image rather than the build's downloads.
fn an_unpullable_base_image_fails_at_the_first_step(podman: &Podman, root: &Utf8Path) {
    ok(aibox(podman, root).args([
        "config",
        "set",
        "container.base_image",
        "registry.invalid/library/debian:bookworm-slim",
    ]));
    let started = Instant::now();
    let out = run(aibox(podman, root).arg("up"));
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(3), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "failed at step 1/",
        "could not pull the base image",
        "container.base_image",
        "https://registry.invalid/v2/",
    ] {
        assert!(stderr.contains(needle), "{needle}: {}", show(&out));
    }
    assert!(
        took < Duration::from_secs(30),
        "took {took:?}: {}",
        show(&out)
    );
}

/// `cmd` started as a terminal's foreground job would be: a process group of its own,
/// `SIGINT` at its default (a background shell would pass it on ignored), stderr read on a
/// thread, line by line, into the returned channel.
fn spawn_as_foreground_job(
    base: &Command,
) -> (
    std::process::Child,
    std::sync::mpsc::Receiver<String>,
    std::thread::JoinHandle<()>,
) {
    use std::io::BufRead as _;
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new("env");
    cmd.arg("--default-signal=INT")
        .arg(base.get_program())
        .args(base.get_args());
    for (key, value) in base.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    (child, rx, reader)
}

/// Sends Ctrl-C to the process group of `child` (see [`spawn_as_foreground_job`]) and
/// waits for it to end; kills the group and fails after two minutes.
fn ctrl_c(child: &mut std::process::Child, seen: &[String]) -> std::process::ExitStatus {
    let group = format!("-{}", child.id());
    let sent = Command::new("kill")
        .args(["-INT", "--", &group])
        .status()
        .unwrap();
    assert!(sent.success());
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if started.elapsed() > Duration::from_mins(2) {
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            panic!("no stop after Ctrl-C: {}", seen.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Ctrl-C during the image build, as a terminal sends it to its foreground job: `up`
/// stops the build, removes the working containers Podman leaves of it (one per step,
/// each holding a layer), and exits with 130 naming the step; no container is started.
/// Without aibox's handling it died of the signal at once and left them all (14 after
/// one interrupted `up`).
#[test]
fn ctrl_c_during_the_build_stops_up_and_removes_its_working_containers() {
    let podman = Podman::ready();
    let p = TestProject::init(&podman, "ctrlc", "claude");
    let root = &p.root;
    ok(aibox(&podman, root).arg("apply"));
    let local = root.join(".devcontainer/Dockerfile.local");
    let mut text = fs_err::read_to_string(&local).unwrap();
    // A step of this test's own (an image no other build makes), then one that waits.
    text.push_str(&["RUN echo ", &p.name, " > /etc/aibox-ctrl-c\n"].concat());
    text.push_str("RUN echo waiting-for-ctrl-c; sleep 600\n");
    fs_err::write(&local, text).unwrap();
    ok(aibox(&podman, root).arg("apply"));

    let (mut child, rx, reader) = spawn_as_foreground_job(aibox(&podman, root).args(["-v", "up"]));
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_mins(15);
    while !lines
        .iter()
        .any(|l: &String| l.contains("| waiting-for-ctrl-c"))
    {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => lines.push(line),
            Err(e) => {
                let _ = child.kill();
                panic!("no sign of the waiting step ({e}): {}", lines.join("\n"));
            }
        }
    }
    // The step runs: Ctrl-C.
    std::thread::sleep(Duration::from_secs(2));
    let status = ctrl_c(&mut child, &lines);
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    let all = lines.join("\n");
    assert_eq!(status.code(), Some(130), "{status:?}: {all}");
    for needle in [
        "aibox::runtime::interrupted",
        "RUN echo waiting-for-ctrl-c",
        "working container(s) the interrupted build left behind",
    ] {
        assert!(all.contains(needle), "{needle}: {all}");
    }
    assert!(
        podman.inspect_container(&p.container).is_none(),
        "no container started"
    );
    // The waiting step's working container was made from this test's own step's image,
    // the last one the build printed (other tests' builds beside it share the others).
    let step_image = lines
        .iter()
        .filter_map(|l| l.trim().strip_prefix("| --> "))
        .rfind(|id| id.len() >= 11 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| panic!("no step image: {all}"));
    let listed = podman.run(&["ps", "--all", "--external", "--format", "json"]);
    assert!(listed.status.success(), "{}", show(&listed));
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let left: Vec<&serde_json::Value> = listed
        .iter()
        .filter(|c| {
            c["ImageID"]
                .as_str()
                .is_some_and(|i| i.trim_start_matches("sha256:").starts_with(step_image))
        })
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}\n{all}");
}

/// `status --output json` field `key` as a bool.
fn status_flag(podman: &Podman, root: &Utf8Path, key: &str) -> bool {
    let status = status_json(podman, root);
    status[key]
        .as_bool()
        .unwrap_or_else(|| panic!("no {key}: {status}"))
}

/// What runs tracks what was generated: a changed `Dockerfile.local` rebuilds the image
/// at the next `up`, a changed setting recreates the container, `status` and `doctor`
/// report both before, and an unchanged project is left running.
#[test]
fn up_rebuilds_and_recreates_what_no_longer_matches_the_files() {
    let podman = Podman::ready();
    let mut p = TestProject::init(&podman, "stale", "claude");
    let (root, container) = (&p.root.clone(), &p.container.clone());
    ok(aibox(&podman, root).arg("apply"));
    ok(aibox(&podman, root).arg("up"));
    assert!(!status_flag(&podman, root, "image_stale"));
    assert!(!status_flag(&podman, root, "container_stale"));
    let first_id = podman.inspect_container(container).unwrap()["Id"].clone();

    // An image addition: the image and the container it runs are stale.
    let local = root.join(".devcontainer/Dockerfile.local");
    let mut text = fs_err::read_to_string(&local).unwrap();
    // It also copies the whole build context, to see what the engine was sent.
    text.push_str("RUN touch /etc/aibox-e2e-marker\nCOPY . /etc/aibox-e2e-context/\n");
    fs_err::write(&local, text).unwrap();
    ok(aibox(&podman, root).arg("apply"));
    assert!(status_flag(&podman, root, "image_stale"));
    assert!(status_flag(&podman, root, "container_stale"));
    let doctor = run(aibox(&podman, root).args(["doctor", "--output", "json"]));
    let report = String::from_utf8_lossy(&doctor.stdout);
    for code in [
        "aibox::doctor::stale_image",
        "aibox::doctor::stale_container",
    ] {
        assert!(report.contains(code), "{code}: {}", show(&doctor));
    }
    let replaced = p.replaced_at_rebuild(&podman);
    let out = run(aibox(&podman, root).arg("up"));
    assert!(out.status.success(), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rebuilding it"), "{}", show(&out));
    // The image it replaced is gone, not left dangling (a gigabyte or more each time).
    assert!(
        stderr.contains("removed the image this build replaced") && !podman.image_exists(&replaced),
        "{}",
        show(&out)
    );
    ok(aibox(&podman, root).args(["exec", "--", "test", "-f", "/etc/aibox-e2e-marker"]));
    personal_files_stay_out_of_the_build_context(&ok(aibox(&podman, root).args([
        "exec",
        "--",
        "find",
        "/etc/aibox-e2e-context",
    ])));
    assert!(!status_flag(&podman, root, "image_stale"));
    assert!(!status_flag(&podman, root, "container_stale"));
    let rebuilt_id = podman.inspect_container(container).unwrap()["Id"].clone();
    assert_ne!(rebuilt_id, first_id, "the container runs the new image");

    // A setting that only the container sees: recreated, not rebuilt.
    ok(aibox(&podman, root).args(["config", "set", "container.timezone", "Europe/Berlin"]));
    ok(aibox(&podman, root).arg("apply"));
    assert!(!status_flag(&podman, root, "image_stale"));
    assert!(status_flag(&podman, root, "container_stale"));
    let out = run(aibox(&podman, root).arg("up"));
    assert!(out.status.success(), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("recreating it") && !stderr.contains("rebuilding it"),
        "{}",
        show(&out)
    );
    let tz = ok(aibox(&podman, root).args(["exec", "--", "printenv", "TZ"]));
    assert_eq!(tz.trim(), "Europe/Berlin");
    let doctor = run(aibox(&podman, root).args(["doctor", "--output", "json"]));
    assert!(
        !String::from_utf8_lossy(&doctor.stdout).contains("aibox::doctor::stale_"),
        "{}",
        show(&doctor)
    );

    // Nothing changed: left running as it is.
    let before = podman.inspect_container(container).unwrap()["Id"].clone();
    let out = run(aibox(&podman, root).arg("up"));
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already running"),
        "{}",
        show(&out)
    );
    assert_eq!(podman.inspect_container(container).unwrap()["Id"], before);
    ok(aibox(&podman, root).arg("down"));
}

/// Two checkouts of one project share its image. One rebuilds it: the image it replaced
/// stays while the other checkout's container runs it. When that checkout takes the
/// change and its `up` recreates the container on the new image, the old one goes (QA25:
/// no `up` removed it any more, 0.7 to 1.7 GB for good).
#[test]
fn the_last_checkout_to_move_off_a_replaced_image_removes_it() {
    let podman = Podman::ready();
    let mut a = TestProject::init(&podman, "twins", "claude");
    let root = a.root.clone();
    ok(aibox(&podman, &root).arg("up"));
    // The second checkout: the same files in another folder (its own container).
    let other_tmp = tempfile::tempdir().unwrap();
    let other = Utf8PathBuf::from_path_buf(other_tmp.path().join(&a.name)).unwrap();
    ok(Command::new("cp").args(["-a", root.as_str(), other.as_str()]));
    let (_, other_container, image, _) = names(&podman, &other);
    assert_eq!(image, a.image, "the checkouts share the image");
    a.cleanup.container(&other_container);
    ok(aibox(&podman, &other).arg("up"));

    let old = a.replaced_at_rebuild(&podman);
    let step = "RUN touch /etc/aibox-e2e-twins\n";
    let local = ".devcontainer/Dockerfile.local";
    let mut text = fs_err::read_to_string(root.join(local)).unwrap();
    text.push_str(step);
    fs_err::write(root.join(local), &text).unwrap();
    let out = run(aibox(&podman, &root).arg("up"));
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        !show(&out).contains("removed the image") && podman.image_exists(&old),
        "the other checkout's container runs it: {}",
        show(&out)
    );

    // The other checkout takes the change (a pull): its container moves to the new image.
    fs_err::write(other.join(local), &text).unwrap();
    let out = run(aibox(&podman, &other).arg("up"));
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        show(&out).contains("removed the image the previous container ran")
            && !podman.image_exists(&old),
        "{}",
        show(&out)
    );
    ok(aibox(&podman, &other).args(["exec", "--", "test", "-f", "/etc/aibox-e2e-twins"]));
    ok(aibox(&podman, &other).arg("down"));
    ok(aibox(&podman, &root).arg("down"));
}

/// The container user takes the UID and GID of the host user who owns the project (here
/// not 1000), so the agent can write `/workspace`; `doctor` checks that it can, and says
/// so when the project belongs to root.
#[test]
fn the_container_user_gets_the_project_owners_ids_and_can_write_the_workspace() {
    let podman = Podman::ready();
    let mut p = TestProject::init(&podman, "uid", "claude");
    let (root, container) = (&p.root.clone(), &p.container.clone());
    ok(aibox(&podman, root).arg("apply"));
    // As the owner would have it, had they run `aibox apply` themselves.
    ok(Command::new("chown").args(["-R", "4321:4322", root.as_str()]));
    let out = run(aibox(&podman, root).arg("up"));
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("cannot write"),
        "{}",
        show(&out)
    );
    let id = ok(aibox(&podman, root).args(["exec", "--", "sh", "-c", "echo $(id -u):$(id -g)"]));
    assert_eq!(id.trim(), "4321:4322");
    ok(aibox(&podman, root).args(["exec", "--", "touch", "/workspace/written-by-agent"]));
    assert!(root.join("written-by-agent").is_file());
    ok(aibox(&podman, root).args(["exec", "--", "sh", "-c", "touch \"$HOME/.claude/probe\""]));
    let doctor = run(aibox(&podman, root).args(["doctor", "--output", "json"]));
    assert!(
        !String::from_utf8_lossy(&doctor.stdout).contains("aibox::doctor::not_writable"),
        "{}",
        show(&doctor)
    );

    // Handed back to root: the image keeps aibox.toml's IDs (no user may share root's),
    // so the agent cannot write the workspace, and doctor says so with the fix.
    ok(Command::new("chown").args(["-R", "0:0", root.as_str()]));
    p.replaced_at_rebuild(&podman);
    let out = run(aibox(&podman, root).arg("up"));
    assert!(out.status.success(), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("rebuilding it"),
        "another owner is another image: {}",
        show(&out)
    );
    assert!(
        stderr.contains("warning: the container user `aibox` cannot write /workspace"),
        "up says so too: {}",
        show(&out)
    );
    let doctor = run(aibox(&podman, root).args(["doctor", "--output", "json"]));
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("aibox::doctor::not_writable") && report.contains("/workspace"),
        "{}",
        show(&doctor)
    );
    assert_eq!(doctor.status.code(), Some(1), "{}", show(&doctor));
    assert!(podman.inspect_container(container).is_some());
    ok(aibox(&podman, root).arg("down"));
}

/// `aibox init` with all four CLI harnesses on Docker, the host CA in `.aibox-local.toml`.
fn init_on_docker(aibox: &dyn Fn() -> Command, root: &Utf8Path, name: &str) {
    let mut init = vec!["init", name];
    for harness in ["claude", "codex", "gemini", "opencode"] {
        init.extend(["--harness", harness]);
    }
    init.extend([
        "--context-mode",
        "harness-only",
        "--base-image",
        BASE_IMAGE,
        "--yes",
    ]);
    ok(aibox().args(&init));
    ok(aibox().args(["config", "set", "container.engine", "docker"]));
    fs_err::write(
        root.join(".aibox-local.toml"),
        aibox_test_support::podman::local_toml_with_host_ca(),
    )
    .unwrap();
}

/// The whole journey on a real Docker Engine (the test's own `dockerd`, Docker's default
/// seccomp profile, `docker-compose` 1.29): `init` with four harnesses → `apply` → `up`
/// → Docker's default blocks Codex's sandbox, so `apply` needs consent to the generated
/// profile, under which the sandbox works → each harness CLI runs → `down` → a
/// `Dockerfile.local` step rebuilds, and the replaced image is removed. Each step is
/// checked with `docker inspect`.
#[test]
#[allow(clippy::print_stderr)] // the measured numbers go to the test log
fn docker_engine_journey() {
    let docker = Docker::ready();
    let (tmp, root, name) = project_dir("docker");
    let aibox = || docker.aibox(env!("CARGO_BIN_EXE_aibox"), &root);
    init_on_docker(&aibox, &root, &name);
    let status: serde_json::Value =
        serde_json::from_str(&ok(aibox().args(["status", "--output", "json"]))).unwrap();
    let container = status["container"].as_str().unwrap().to_owned();
    let image = status["image"].as_str().unwrap().to_owned();
    let mut cleanup = Cleanup::for_project(&docker, &status);

    // Docker's default seccomp profile blocks Codex's sandbox: `apply` refuses without
    // the owner's consent, with the code, and writes nothing.
    let refused = run(aibox().arg("apply"));
    assert_eq!(refused.status.code(), Some(2), "{}", show(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("aibox::policy::seccomp_consent"),
        "{}",
        show(&refused)
    );
    assert!(!root.join(".devcontainer/docker-compose.yml").exists());
    ok(aibox().args(["config", "set", "security.codex_sandbox", "seccomp-profile"]));
    ok(aibox().args([
        "config",
        "set",
        "security.acknowledge_seccomp_profile",
        "true",
    ]));

    ok(aibox().arg("apply"));
    assert!(root.join(".devcontainer/aibox-seccomp.json").is_file());
    assert!(
        docker.inspect_container(&container).is_none(),
        "apply starts nothing"
    );

    // The image build: cold on a fresh data root (it downloads the harness CLIs), from
    // the layers the test daemon keeps (see `aibox_test_support::docker`) after that.
    let started = Instant::now();
    ok(aibox().args(["apply", "--build"]));
    let build = started.elapsed();
    assert!(docker.image_exists(&image), "apply --build built the image");
    // Docker maps no user namespace: hand the folder (with the harness state under
    // `.aibox-home/`, which aibox created as this root test) to the container user, as a
    // developer's checkout would be.
    let config = aibox_config::load_project(&root).unwrap().config.container;
    let owner = format!("{}:{}", config.uid, config.gid());
    aibox_test_support::podman::chown_tree(&root, &owner);
    let started = Instant::now();
    let up = run(aibox().arg("up"));
    let cold = started.elapsed();
    assert!(up.status.success(), "{}", show(&up));
    let up_text = show(&up);
    let inspect = docker
        .inspect_container(&container)
        .expect("up created the container");
    assert_eq!(inspect["State"]["Running"], true, "{inspect}");
    let labels = &inspect["Config"]["Labels"];
    assert_eq!(labels["aibox.project"].as_str(), Some(name.as_str()));
    assert_eq!(labels["aibox.version"].as_str(), Some(VERSION));
    // The generated profile (Docker's default plus bubblewrap's syscalls), not none.
    let opts = inspect["HostConfig"]["SecurityOpt"].to_string();
    assert!(opts.contains("seccomp"), "{opts}");
    assert!(!opts.contains("seccomp=unconfined"), "{opts}");
    assert!(
        up_text.contains("Codex sandbox: works (seccomp-profile)"),
        "user namespaces work inside the container: {up_text}"
    );
    let seccomp = ok(aibox().args(["exec", "--", "grep", "^Seccomp:", "/proc/1/status"]));
    assert!(seccomp.contains('2'), "a filter is active: {seccomp}");
    let size = docker.inspect_image(&image).unwrap()["Size"]
        .as_u64()
        .unwrap();
    let status: serde_json::Value =
        serde_json::from_str(&ok(aibox().args(["status", "--output", "json"]))).unwrap();
    assert_eq!(status["engine"], "docker", "{status}");
    assert_eq!(status["state"], "running", "{status}");
    assert_eq!(status["container_id"], inspect["Id"]);

    for cli in ["claude", "codex", "gemini", "opencode"] {
        let out = run(aibox().args(["exec", "--", cli, "--version"]));
        assert!(out.status.success(), "{cli}: {}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout)
                .chars()
                .any(|c| c.is_ascii_digit()),
            "{cli}: {}",
            show(&out)
        );
    }

    ok(aibox().arg("down"));
    assert!(
        docker.inspect_container(&container).is_none(),
        "down removed it"
    );
    // Warm: the image is cached.
    let started = Instant::now();
    ok(aibox().arg("up"));
    let warm = started.elapsed();
    eprintln!(
        "[measured] docker: image build {build:?}, first up {cold:?}, up after down \
         {warm:?}, image {} MB",
        size / 1_000_000
    );
    a_rebuild_removes_the_image_it_replaced(&docker, &aibox, &root, &image, &mut cleanup);
    ok(aibox().arg("down"));
    assert!(
        docker.inspect_container(&container).is_none(),
        "down removed it"
    );
    devcontainer_cli_on_docker(&docker, &aibox, &root, &name);
    drop(cleanup);
    drop(tmp);
}

/// A rebuild removes the image it replaced on Docker too, once the new container runs.
fn a_rebuild_removes_the_image_it_replaced(
    docker: &Docker,
    aibox: &dyn Fn() -> Command,
    root: &Utf8Path,
    image: &str,
    cleanup: &mut Cleanup,
) {
    let old_id = docker.inspect_image(image).unwrap()["Id"]
        .as_str()
        .unwrap()
        .to_owned();
    cleanup.image(&old_id);
    let local = root.join(".devcontainer/Dockerfile.local");
    let text = fs_err::read_to_string(&local).unwrap()
        + "RUN touch /etc/aibox-e2e-rebuilt\nCOPY . /etc/aibox-e2e-context/\n";
    fs_err::write(&local, text).unwrap();
    ok(aibox().arg("apply"));
    let rebuilt = run(aibox().arg("up"));
    assert!(rebuilt.status.success(), "{}", show(&rebuilt));
    personal_files_stay_out_of_the_build_context(&ok(aibox().args([
        "exec",
        "--",
        "find",
        "/etc/aibox-e2e-context",
    ])));
    assert!(
        show(&rebuilt).contains("removed the image this build replaced")
            && docker.inspect_image(&old_id).is_none(),
        "{}",
        show(&rebuilt)
    );
}

/// What a build that copies its whole context got (`find` of the copy): the Dockerfile
/// and the folders the image build copies, never the personal environment file or
/// Compose overlay (the generated `.dockerignore`), which the engine is not sent.
fn personal_files_stay_out_of_the_build_context(found: &str) {
    let copied = |rel: &str| {
        found
            .lines()
            .any(|l| l.trim_end() == format!("/etc/aibox-e2e-context/{rel}"))
    };
    for sent in [
        "Dockerfile",
        "Dockerfile.local",
        "aibox-ca",
        ".dockerignore",
    ] {
        assert!(copied(sent), "{sent} is in the build context: {found}");
    }
    for kept in [
        "aibox-local.env",
        "docker-compose.local.yml",
        "docker-compose.yml",
    ] {
        assert!(!copied(kept), "{kept} reached the build context: {found}");
    }
}

/// The real Dev Containers CLI on the same files and the same Docker Engine, with
/// docker-compose 1.29, which reads the seccomp profile relative to the CLI's working
/// directory (the project root): the container comes up with the profile, and aibox
/// takes it for this checkout's (`status`, `exec`) and removes it on `down`.
#[allow(clippy::print_stderr)] // the measured number goes to the test log
fn devcontainer_cli_on_docker(
    docker: &Docker,
    aibox: &dyn Fn() -> Command,
    root: &Utf8Path,
    name: &str,
) {
    let cli = aibox_test_support::workspace_root()
        .join("test-tools/devcontainers/node_modules/.bin/devcontainer");
    assert!(
        cli.is_file(),
        "{cli} is missing: `npm ci --prefix test-tools/devcontainers`"
    );
    let cli_project = format!("{name}_devcontainer");
    let mut cleanup = Cleanup::new(docker);
    cleanup
        .container(&format!("{cli_project}_{name}_1"))
        .network(&format!("{cli_project}_default"));
    let mut cmd = Command::new(cli.as_str());
    cmd.envs(docker.env())
        .current_dir(root)
        .args(["up", "--workspace-folder", root.as_str()])
        .args(["--docker-path", "docker"])
        .args(["--docker-compose-path", "docker-compose"])
        .stdin(std::process::Stdio::null());
    let started = Instant::now();
    let out = run(&mut cmd);
    eprintln!(
        "[measured] docker: devcontainer up of the same files {:?}",
        started.elapsed()
    );
    assert!(out.status.success(), "devcontainer up: {}", show(&out));
    let result: serde_json::Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON result: {}", show(&out)));
    assert_eq!(result["outcome"], "success", "{}", show(&out));
    let id = result["containerId"].as_str().unwrap();
    let inspect = docker.inspect_container(id).expect("the CLI's container");
    let opts = inspect["HostConfig"]["SecurityOpt"].to_string();
    assert!(opts.contains("seccomp"), "the profile is applied: {opts}");
    if let Some(derived) = inspect["Config"]["Image"].as_str() {
        cleanup.image(derived);
    }

    let status: serde_json::Value =
        serde_json::from_str(&ok(aibox().args(["status", "--output", "json"]))).unwrap();
    assert_eq!(status["devcontainer_cli"], true, "{status}");
    assert_eq!(status["container_id"].as_str(), Some(id), "{status}");
    let pwd = ok(aibox().args(["exec", "--", "pwd"]));
    assert_eq!(pwd.trim(), "/workspace");
    ok(aibox().arg("down"));
    assert!(docker.inspect_container(id).is_none(), "down removed it");
}

/// The unprivileged user the rootless test runs Podman as (created once, with sub-IDs and
/// its own overlay storage in its home).
const ROOTLESS_USER: &str = "aibox-rootless";

/// Creates [`ROOTLESS_USER`] when missing; returns its UID, GID and home.
fn rootless_user() -> (u32, u32, Utf8PathBuf) {
    let exists = Command::new("id").arg(ROOTLESS_USER).output().unwrap();
    if !exists.status.success() {
        ok(Command::new("useradd").args(["--create-home", ROOTLESS_USER]));
        ok(Command::new("usermod").args([
            "--add-subuids",
            "300000-365535",
            "--add-subgids",
            "300000-365535",
            ROOTLESS_USER,
        ]));
    }
    let id = |flag: &str| -> u32 {
        ok(Command::new("id").args([flag, ROOTLESS_USER]))
            .trim()
            .parse()
            .unwrap()
    };
    let home = Utf8PathBuf::from(format!("/home/{ROOTLESS_USER}"));
    // Native rootless overlay (kernel 5.13+): no full copy of every layer, as `vfs` makes.
    let conf = home.join(".config/containers");
    fs_err::create_dir_all(&conf).unwrap();
    fs_err::write(
        conf.join("storage.conf"),
        "[storage]\ndriver = \"overlay\"\n",
    )
    .unwrap();
    aibox_test_support::podman::chown_tree(&home, ROOTLESS_USER);
    (id("-u"), id("-g"), home)
}

/// `PROGRAM ARGS` as [`ROOTLESS_USER`], with its own home, runtime folder and a copy of
/// the harness's `containers.conf`.
fn as_rootless(home: &Utf8Path, program: &str) -> Command {
    let run = home.join("run");
    fs_err::create_dir_all(&run).unwrap();
    ok(Command::new("chown").args([ROOTLESS_USER, run.as_str()]));
    ok(Command::new("chmod").args(["0700", run.as_str()]));
    let mut cmd = Command::new("runuser");
    cmd.args(["-u", ROOTLESS_USER, "--", program])
        .env("HOME", home.as_str())
        .env("XDG_RUNTIME_DIR", run.as_str())
        .env("CONTAINERS_CONF", home.join("containers.conf").as_str())
        .env_remove("DOCKER_HOST")
        // The tests' own temporary folder (`cargo xtask ci`'s tmpfs below `target/`) may
        // be out of this user's reach: the system's, as a real user has.
        .env_remove("TMPDIR")
        .env("NO_COLOR", "1")
        .current_dir(home.as_str())
        .stdin(std::process::Stdio::null());
    cmd
}

/// Rootless Podman maps container IDs to the user's sub-IDs, so without more the agent
/// cannot write the project its owner bind-mounts. `aibox up` run by the owner on
/// rootless Podman maps the owner to the container user (`keep-id`): the agent writes
/// `/workspace` and its harness folder, and what it writes belongs to the owner. The
/// image is built rootful once and loaded into the user's storage (the same build a
/// rootless `up` would make, without downloading the tools twice).
#[test]
#[allow(clippy::print_stderr)] // the UID map goes to the test log
fn rootless_podman_maps_the_owner_into_the_container() {
    let podman = Podman::ready();
    require_program_for_rootless();
    let (uid, gid, home) = rootless_user();
    fs_err::copy(podman.containers_conf(), home.join("containers.conf")).unwrap();
    let tmp = tempfile::tempdir_in(&home).unwrap();
    let name = format!("aibox-e2e-rootless-{}", std::process::id());
    let root = Utf8PathBuf::from_path_buf(tmp.path().join(&name)).unwrap();
    fs_err::create_dir_all(&root).unwrap();
    init(&podman, &root, &name, "claude");
    aibox_test_support::podman::chown_tree(&home, &format!("{uid}:{gid}"));
    let (project, container, image, user) = names(&podman, &root);
    // The rootful build handed over below is the owner's too; leave no copy behind, also
    // when a step before the rootless part fails (two such copies were found left over).
    // Through `Cleanup`, which keeps its layers first: a bare `rmi` deletes them at once,
    // while another test's build may be reading them from its cache (Podman 4.3 then fails
    // that build with "layer not known").
    let mut rootful = Cleanup::new(&podman);
    rootful.image(&image);
    // Built rootful, with the owner's IDs (the folder is theirs), then handed over.
    ok(aibox(&podman, &root).args(["apply", "--build"]));
    aibox_test_support::podman::chown_tree(&root, &format!("{uid}:{gid}"));
    let saved = home.join("image.tar");
    // A failed earlier run may have left one, which `podman save` refuses to overwrite.
    let _ = fs_err::remove_file(&saved);
    ok(podman
        .command()
        .args(["save", "-o", saved.as_str(), &image]));
    ok(Command::new("chown").args([ROOTLESS_USER, saved.as_str()]));
    ok(as_rootless(&home, "podman").args(["load", "-i", saved.as_str()]));
    fs_err::remove_file(&saved).unwrap();
    let rootless = |args: &[&str]| {
        let mut cmd = as_rootless(&home, env!("CARGO_BIN_EXE_aibox"));
        cmd.env("AIBOX_ENGINE", "podman")
            .env("AIBOX_COMPOSE", "podman-compose")
            .args(["--project", root.as_str()])
            .args(args);
        cmd
    };
    let cleanup = |what: &[&str]| {
        let _ = as_rootless(&home, "podman").args(what).output();
    };
    let _tun = TunForUsers::open();

    let up = run(&mut rootless(&["up"]));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert!(up.status.success(), "{}", show(&up));
        assert!(
            !String::from_utf8_lossy(&up.stderr).contains("cannot write"),
            "{}",
            show(&up)
        );
        let inspect = ok(as_rootless(&home, "podman").args([
            "container",
            "inspect",
            "--format",
            "{{.HostConfig.IDMappings.UIDMap}}",
            &container,
        ]));
        eprintln!("[measured] rootless UID map: {}", inspect.trim());
        let id = ok(&mut rootless(&[
            "exec",
            "--",
            "sh",
            "-c",
            "id -un; touch /workspace/by-agent \
             \"$HOME/.claude/by-agent\" && echo wrote",
        ]));
        assert!(id.contains(&user) && id.contains("wrote"), "{id}");
        for written in [
            root.join("by-agent"),
            root.join(".aibox-home/.claude/by-agent"),
        ] {
            use std::os::unix::fs::MetadataExt as _;
            let meta = fs_err::metadata(&written).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (uid, gid), "{written}");
        }
        let doctor = run(&mut rootless(&["doctor", "--output", "json"]));
        let text = String::from_utf8_lossy(&doctor.stdout);
        assert!(!text.contains("not_writable"), "{}", show(&doctor));
        ok(&mut rootless(&["down"]));
    }));
    cleanup(&["rm", "-f", &container]);
    cleanup(&["network", "rm", &format!("{project}_default")]);
    cleanup(&["rmi", &image]);
    drop(rootful);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

fn require_program_for_rootless() {
    let hint = "rootless Podman needs `runuser` (util-linux), `useradd` (passwd) and \
                `newuidmap` (uidmap): `apt-get install -y util-linux passwd uidmap`";
    for program in ["runuser", "useradd", "newuidmap"] {
        aibox_test_support::podman::require_program(program, hint);
    }
}

/// Rootless networking (slirp4netns) opens `/dev/net/tun`, which desktop distributions
/// leave readable by every user (0666) and this machine's minimal `/dev` does not: for
/// the test's duration it gets the usual mode, and its own back afterwards.
struct TunForUsers {
    restore: Option<u32>,
}

impl TunForUsers {
    const PATH: &str = "/dev/net/tun";

    fn open() -> Self {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = fs_err::metadata(Self::PATH).unwrap().permissions().mode() & 0o7777;
        if mode & 0o666 == 0o666 {
            return Self { restore: None };
        }
        fs_err::set_permissions(Self::PATH, std::fs::Permissions::from_mode(0o666)).unwrap();
        Self {
            restore: Some(mode),
        }
    }
}

impl Drop for TunForUsers {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt as _;
        if let Some(mode) = self.restore {
            let _ = fs_err::set_permissions(Self::PATH, std::fs::Permissions::from_mode(mode));
        }
    }
}
