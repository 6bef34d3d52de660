//! The runtime against a real Podman: build, up, status, exec, down, and the refusal to
//! touch another project's container. Uses hand-written Compose files so it does not
//! depend on the generators; the CLI end-to-end tests cover the generated ones. Engine
//! detection against Podman's Docker-compatible socket and a real `dockerd`.

// Helpers outside `#[test]` functions are test code too: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::OsString;

use aibox_config::EngineChoice;
use aibox_runtime::{
    ComposeKind, ContainerState, DetectEnv, Engine, Event, ExecRequest, Runtime, RuntimeError,
    Target, UpOptions,
};
use aibox_test_support::docker::Docker;
use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Podman};
use camino::{Utf8Path, Utf8PathBuf};

/// Writes the project's Dockerfile and Compose files for container and service `name`.
fn write_project(root: &Utf8Path, name: &str, image: &str, checkout: &str) {
    let dc = root.join(".devcontainer");
    fs_err::create_dir_all(&dc).unwrap();
    fs_err::write(
        dc.join("Dockerfile"),
        format!(
            "FROM {BASE_IMAGE}\nRUN useradd -m -u 1000 tester && echo 0.1.0 > /etc/aibox-version\n\
             USER tester\nARG AIBOX_BUILD_DIGEST=\nLABEL aibox.build-digest=\"${{AIBOX_BUILD_DIGEST}}\"\n"
        ),
    )
    .unwrap();
    fs_err::write(
        dc.join("docker-compose.yml"),
        format!(
            "services:\n  {name}:\n    build:\n      context: .\n      dockerfile: Dockerfile\n\
             \x20   image: {image}\n    container_name: {name}\n    init: true\n\
             \x20   labels:\n      aibox.project: {name}\n      \
             aibox.config-digest: \"${{AIBOX_CONFIG_DIGEST:-none}}\"\n    working_dir: /workspace\n\
             \x20   volumes:\n      - ..:/workspace\n    command: [\"sleep\", \"infinity\"]\n"
        ),
    )
    .unwrap();
    // The user's override and the personal local file are merged in, in this order.
    fs_err::write(
        dc.join("docker-compose.override.yml"),
        format!("services:\n  {name}:\n    labels:\n      test.override: \"yes\"\n"),
    )
    .unwrap();
    fs_err::write(
        dc.join("docker-compose.local.yml"),
        format!(
            "services:\n  {name}:\n    environment:\n      FROM_LOCAL_FILE: \"1\"\n    \
             labels:\n      aibox.checkout: \"{checkout}\"\n"
        ),
    )
    .unwrap();
}

/// A throw-away project with a minimal Dockerfile and Compose file.
fn project(name: &str) -> (tempfile::TempDir, Target) {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    let checkout = fs_err::canonicalize(&root).unwrap().display().to_string();
    let image = format!("{name}-aibox:0.1.0");
    write_project(&root, name, &image, &checkout);
    let target = Target {
        root,
        project: name.to_owned(),
        container: name.to_owned(),
        name: name.to_owned(),
        service: name.to_owned(),
        checkout,
        image,
        user: "tester".to_owned(),
        ids: (1000, 1000),
        egress: false,
        proxy: false,
        lifecycle: Vec::new(),
    };
    (dir, target)
}

/// A throw-away project named `<stem>-<pid>` whose container, image and network are
/// removed at the end.
struct Scratch {
    // First field, so dropped first: the engine objects go before the folder.
    _cleanup: Cleanup,
    _dir: tempfile::TempDir,
    name: String,
    target: Target,
}

impl Scratch {
    fn new(podman: &Podman, stem: &str) -> Self {
        let name = format!("{stem}-{}", std::process::id());
        let (dir, target) = project(&name);
        let mut cleanup = Cleanup::new(podman);
        cleanup
            .container(&name)
            .image(&target.image)
            .network(&format!("{name}_default"));
        Self {
            _cleanup: cleanup,
            _dir: dir,
            name,
            target,
        }
    }
}

fn env_with(podman: &Podman, extra: &[(&str, &str)]) -> DetectEnv {
    let mut extra_env: Vec<(OsString, OsString)> = podman
        .env()
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    extra_env.extend(extra.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    DetectEnv {
        engine_override: None,
        compose_override: None,
        path: std::env::var_os("PATH"),
        extra_env,
    }
}

fn label(inspect: &serde_json::Value, key: &str) -> Option<String> {
    inspect["Config"]["Labels"][key].as_str().map(str::to_owned)
}

#[test]
#[allow(clippy::too_many_lines)] // one lifecycle, asserted step by step
fn full_lifecycle_with_podman_compose() {
    let podman = Podman::ready();
    let scratch = Scratch::new(&podman, "aibox-rt");
    let Scratch { name, target, .. } = &scratch;

    let env = env_with(&podman, &[("AIBOX_RT_TOKEN", "ghp_FAKEFAKEFAKEFAKE")]);
    let runtime = Runtime::detect(EngineChoice::Podman, env).unwrap();
    assert_eq!(runtime.detected().engine.engine, Engine::Podman);
    assert_eq!(runtime.detected().compose.kind, ComposeKind::PodmanCompose);

    let before = runtime.status(target).unwrap();
    assert_eq!(before.state, ContainerState::Missing);
    assert!(!before.image_present);
    assert_eq!(before.container_id, None);

    let mut events = Vec::new();
    let up = runtime
        .up(target, UpOptions::default(), &mut |e| {
            events.push(e.clone());
        })
        .unwrap();
    // A new container, started: both of the Dev Containers CLI's lifecycle commands due.
    assert!(up.created && up.started);
    let up = up.status;
    assert_eq!(up.state, ContainerState::Running);
    assert!(up.image_present);
    assert!(
        events.contains(&Event::Building {
            image: target.image.clone()
        }),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| matches!(e, Event::Running { .. })),
        "{events:?}"
    );
    // The engine agrees: running, our id, labelled with both project names.
    let inspect = podman.inspect_container(name).expect("container exists");
    assert_eq!(inspect["State"]["Running"], true);
    assert_eq!(inspect["Id"].as_str(), up.container_id.as_deref());
    assert_eq!(
        label(&inspect, "aibox.project").as_deref(),
        Some(name.as_str())
    );
    assert_eq!(
        label(&inspect, "com.docker.compose.project").as_deref(),
        Some(name.as_str())
    );

    assert_eq!(label(&inspect, "test.override").as_deref(), Some("yes"));

    // A second `up` changes nothing.
    let mut again = Vec::new();
    let up2 = runtime
        .up(target, UpOptions::default(), &mut |e| {
            again.push(e.clone());
        })
        .unwrap();
    assert!(
        !up2.created && !up2.started,
        "already running: nothing is due"
    );
    // The container as `up` saw it, for the caller's policy check: the engine's JSON of it.
    assert!(
        up2.container
            .json()
            .contains(up.container_id.as_deref().unwrap()),
        "{}",
        up2.container.json()
    );
    assert_eq!(up2.status.container_id, up.container_id);
    assert!(
        again.contains(&Event::AlreadyRunning {
            container: name.clone()
        }),
        "{again:?}"
    );

    check_exec(&runtime, target);

    // Stopped (not removed) containers are reported and restarted by `up`.
    assert!(podman.run(&["stop", "-t", "0", name]).status.success());
    assert_eq!(
        runtime.status(target).unwrap().state,
        ContainerState::Stopped
    );
    let err = exec_sh(&runtime, target, "true", &[]).unwrap_err();
    assert!(matches!(err, RuntimeError::NotRunning { .. }), "{err:?}");
    let mut restart_events = Vec::new();
    let restarted = runtime
        .up(target, UpOptions::default(), &mut |e| {
            restart_events.push(e.clone());
        })
        .unwrap();
    // The events say why, should `up` build or recreate here (seen once in CI: created).
    assert!(
        !restarted.created && restarted.started,
        "the same container, started again: created {}, started {}, events {restart_events:?}",
        restarted.created,
        restarted.started
    );
    let restarted = restarted.status;
    assert_eq!(restarted.state, ContainerState::Running);
    assert_eq!(restarted.container_id, up.container_id);

    // `up --build` rebuilds the image and replaces the container.
    let mut rebuilt_events = Vec::new();
    let rebuilt = runtime
        .up(target, UpOptions { build: true }, &mut |e| {
            rebuilt_events.push(e.clone());
        })
        .unwrap();
    assert!(rebuilt.created && rebuilt.started, "recreated");
    let rebuilt = rebuilt.status;
    assert_eq!(rebuilt.state, ContainerState::Running);
    assert_ne!(rebuilt.container_id, up.container_id, "container recreated");
    assert!(
        rebuilt_events
            .iter()
            .any(|e| matches!(e, Event::Building { .. }))
    );

    let down = runtime.down(target, &mut |_| {}).unwrap();
    assert_eq!(down.state, ContainerState::Missing);
    assert!(podman.inspect_container(name).is_none());
    assert!(podman.image_exists(&target.image), "down keeps the image");
    let networks = podman.run(&["network", "ls", "--format", "{{.Name}}"]);
    let networks = String::from_utf8_lossy(&networks.stdout);
    assert!(
        !networks.lines().any(|n| n.starts_with(name)),
        "network left behind: {networks}"
    );
    let err = exec_sh(&runtime, target, "true", &[]).unwrap_err();
    assert!(matches!(err, RuntimeError::NotRunning { .. }), "{err:?}");
    check_failed_build(&runtime, target, &podman);
}

/// A failing step fails `up --build` although the previous image still exists (and
/// podman-compose 1.0 exits 0): the error names the step and carries its output, each
/// step was reported as it began, and no container was started.
fn check_failed_build(runtime: &Runtime, target: &Target, podman: &Podman) {
    let dockerfile = target.root.join(".devcontainer/Dockerfile");
    let good = fs_err::read_to_string(&dockerfile).unwrap();
    fs_err::write(&dockerfile, format!("{good}RUN echo boom >&2; exit 7\n")).unwrap();
    let mut steps = Vec::new();
    let err = runtime
        .up(target, UpOptions { build: true }, &mut |e| {
            if let Event::Step(step) = e {
                steps.push(step.index);
            }
        })
        .unwrap_err();
    fs_err::write(&dockerfile, good).unwrap();
    let RuntimeError::BuildFailed { step, output, .. } = &err else {
        panic!("not a build failure: {err:?}");
    };
    assert_eq!(step, " at step 6/6: RUN echo boom >&2; exit 7", "{err:?}");
    assert!(output.lines().any(|l| l.trim() == "boom"), "{output}");
    assert_eq!(steps, [1, 2, 3, 4, 5, 6]);
    assert!(podman.inspect_container(&target.container).is_none());
}

fn exec_sh(
    runtime: &Runtime,
    target: &Target,
    script: &str,
    env: &[String],
) -> Result<i32, RuntimeError> {
    let cmd = vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()];
    runtime.exec(
        target,
        &ExecRequest {
            user: "tester",
            cmd: &cmd,
            env,
            timeout: None,
        },
    )
}

/// exec: configured user, workspace dir, exit codes, one named variable for one command.
fn check_exec(runtime: &Runtime, target: &Target) {
    let run = |cmd: &str, env: &[String]| exec_sh(runtime, target, cmd, env);
    assert_eq!(
        run(
            "test \"$(id -un)\" = tester && test \"$PWD\" = /workspace",
            &[]
        )
        .unwrap(),
        0
    );
    assert_eq!(run("grep -qx 0.1.0 /etc/aibox-version", &[]).unwrap(), 0);
    assert_eq!(run("exit 7", &[]).unwrap(), 7);
    assert_eq!(run("test \"$FROM_LOCAL_FILE\" = 1", &[]).unwrap(), 0);
    let token = ["AIBOX_RT_TOKEN".to_owned()];
    assert_eq!(
        run("test \"$AIBOX_RT_TOKEN\" = ghp_FAKEFAKEFAKEFAKE", &token).unwrap(),
        0
    );
    assert_eq!(
        run("test -z \"${AIBOX_RT_TOKEN-}\"", &[]).unwrap(),
        0,
        "variable leaked"
    );
    let err = run("true", &["AIBOX_RT_SURELY_UNSET_VAR".to_owned()]).unwrap_err();
    assert!(matches!(err, RuntimeError::EnvNotSet { .. }), "{err:?}");
    let err = run("true", &["A=B".to_owned()]).unwrap_err();
    assert!(
        matches!(err, RuntimeError::InvalidEnvName { .. }),
        "{err:?}"
    );
    let empty = runtime
        .exec(
            target,
            &ExecRequest {
                user: "tester",
                cmd: &[],
                env: &[],
                timeout: None,
            },
        )
        .unwrap_err();
    assert!(matches!(empty, RuntimeError::EmptyCommand), "{empty:?}");
}

#[test]
fn another_projects_container_is_left_alone() {
    let podman = Podman::ready();
    let scratch = Scratch::new(&podman, "aibox-rt-foreign");
    let Scratch { name, target, .. } = &scratch;
    let id = podman.create_foreign(name, "someone-else");

    let runtime = Runtime::detect(EngineChoice::Podman, env_with(&podman, &[])).unwrap();
    for err in [
        runtime
            .up(target, UpOptions::default(), &mut |_| {})
            .unwrap_err(),
        runtime.down(target, &mut |_| {}).unwrap_err(),
        runtime.status(target).unwrap_err(),
    ] {
        match &err {
            RuntimeError::ForeignContainer { owner, .. } => {
                assert_eq!(owner, "aibox project `someone-else`");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(err.to_string().contains("aibox leaves it alone"), "{err}");
    }
    let after = podman
        .inspect_container(name)
        .expect("the other container still exists");
    assert_eq!(after["Id"], id);
    assert_eq!(after["State"]["Status"], "created", "it was not started");
    assert!(
        !podman.image_exists(&target.image),
        "nothing was built for the refused project"
    );
}

#[test]
fn docker_compose_through_the_docker_api_socket() {
    let podman = Podman::ready();
    let api = podman.docker_api();
    let scratch = Scratch::new(&podman, "aibox-rt-dc");
    let Scratch { name, target, .. } = &scratch;

    let mut env = env_with(&podman, &[("DOCKER_HOST", &api.docker_host())]);
    env.compose_override = Some("docker-compose".to_owned());
    let runtime = Runtime::detect(EngineChoice::Podman, env).unwrap();
    assert_eq!(
        runtime.detected().compose.kind,
        ComposeKind::DockerComposeStandalone
    );
    let up = runtime
        .up(target, UpOptions::default(), &mut |_| {})
        .unwrap()
        .status;
    assert_eq!(up.state, ContainerState::Running);
    let inspect = podman.inspect_container(name).unwrap();
    assert_eq!(
        label(&inspect, "com.docker.compose.project").as_deref(),
        Some(name.as_str())
    );
    let down = runtime.down(target, &mut |_| {}).unwrap();
    assert_eq!(down.state, ContainerState::Missing);
    assert!(podman.inspect_container(name).is_none());
    check_failed_build(&runtime, target, &podman);
}

/// A `docker` CLI on Podman's Docker-compatible socket is not Docker: `auto` takes the
/// `podman` CLI, an explicit `docker` is refused; on a real Docker Engine both are Docker.
#[test]
fn a_docker_cli_on_podmans_socket_is_not_docker_but_real_dockerd_is() {
    let podman = Podman::ready();
    let api = podman.docker_api();
    let on_podman = env_with(&podman, &[("DOCKER_HOST", &api.docker_host())]);
    let auto = aibox_runtime::detect::detect_engine(EngineChoice::Auto, &on_podman).unwrap();
    assert_eq!(auto.engine, Engine::Podman);
    let err = aibox_runtime::detect::detect_engine(EngineChoice::Docker, &on_podman).unwrap_err();
    assert!(
        matches!(err, RuntimeError::NoEngine { .. })
            && err.to_string().contains("daemon is Podman"),
        "{err}"
    );
    drop(api);

    let docker = Docker::ready();
    let on_docker = env_with(&podman, &[("DOCKER_HOST", &docker.docker_host())]);
    for choice in [EngineChoice::Auto, EngineChoice::Docker] {
        let found = aibox_runtime::detect::detect_engine(choice, &on_docker).unwrap();
        assert_eq!(found.engine, Engine::Docker, "{choice:?}");
    }
}

#[test]
fn missing_compose_file_is_reported() {
    let podman = Podman::ready();
    let (dir, mut target) = project("aibox-rt-nofile");
    target.root = Utf8PathBuf::from_path_buf(dir.path().join("elsewhere")).unwrap();
    let runtime = Runtime::detect(EngineChoice::Podman, env_with(&podman, &[])).unwrap();
    let err = runtime
        .up(&target, UpOptions::default(), &mut |_| {})
        .unwrap_err();
    assert!(
        matches!(err, RuntimeError::MissingComposeFile { .. }),
        "{err:?}"
    );
}

/// A paused container is reported as paused, unpaused by `up` (the same container, nothing
/// started) and removed by `down`; after a rename (another container and Compose project
/// name for the same checkout) `status` names the former container and `up` removes it.
#[test]
fn paused_and_renamed_containers() {
    let podman = Podman::ready();
    let scratch = Scratch::new(&podman, "aibox-rt-pause");
    let Scratch { name, target, .. } = &scratch;
    let runtime = Runtime::detect(EngineChoice::Podman, env_with(&podman, &[])).unwrap();
    let first = runtime
        .up(target, UpOptions::default(), &mut |_| {})
        .unwrap();

    assert!(podman.run(&["pause", name]).status.success());
    assert_eq!(
        runtime.status(target).unwrap().state,
        ContainerState::Paused
    );
    let up = runtime
        .up(target, UpOptions::default(), &mut |_| {})
        .unwrap();
    assert!(!up.created && !up.started, "unpaused, not started");
    assert_eq!(up.status.state, ContainerState::Running);
    assert_eq!(up.status.container_id, first.status.container_id);
    // A paused container that is stale is replaced (Compose cannot stop it paused).
    assert!(podman.run(&["pause", name]).status.success());
    let override_file = target.override_file();
    let text = fs_err::read_to_string(&override_file).unwrap();
    fs_err::write(&override_file, text.replace("\"yes\"", "\"changed\"")).unwrap();
    let up = runtime
        .up(target, UpOptions::default(), &mut |_| {})
        .unwrap();
    assert!(up.created, "recreated");
    assert_eq!(up.status.state, ContainerState::Running);

    let renamed = format!("{name}-renamed");
    let mut cleanup = Cleanup::new(&podman);
    cleanup
        .container(&renamed)
        .network(&format!("{renamed}_default"));
    write_project(&target.root, &renamed, &target.image, &target.checkout);
    let renamed_target = Target {
        project: renamed.clone(),
        container: renamed.clone(),
        name: renamed.clone(),
        service: renamed.clone(),
        ..target.clone()
    };
    let status = runtime.status(&renamed_target).unwrap();
    assert_eq!(status.state, ContainerState::Missing);
    assert_eq!(status.former_containers, std::slice::from_ref(name));
    let mut events = Vec::new();
    let up = runtime
        .up(&renamed_target, UpOptions::default(), &mut |e| {
            events.push(e.clone());
        })
        .unwrap();
    assert_eq!(up.status.state, ContainerState::Running);
    assert!(up.status.former_containers.is_empty());
    assert!(podman.inspect_container(name).is_none(), "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Stale { reason } if reason.contains(name.as_str()))),
        "{events:?}"
    );

    assert!(podman.run(&["pause", &renamed]).status.success());
    let down = runtime.down(&renamed_target, &mut |_| {}).unwrap();
    assert_eq!(down.state, ContainerState::Missing);
    assert!(podman.inspect_container(&renamed).is_none());
}
