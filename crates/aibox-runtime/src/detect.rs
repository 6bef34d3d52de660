//! Choosing the container engine (Podman or Docker) and a Compose provider.
//!
//! Precedence: `AIBOX_ENGINE` over `[container] engine`; `auto` picks Docker only when
//! its daemon answers `docker version` quickly and is not Podman, else Podman. The
//! Compose provider comes from `AIBOX_COMPOSE` or the first one that works with the
//! chosen engine. Every probe has a short deadline, so a missing or wedged engine is
//! reported at once.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use aibox_config::EngineChoice;
use serde::Serialize;

use crate::error::RuntimeError;
use crate::process::{self, ExtraEnv};

/// Variable that overrides `[container] engine`.
pub const ENGINE_ENV: &str = "AIBOX_ENGINE";
/// Variable that names the Compose provider.
pub const COMPOSE_ENV: &str = "AIBOX_COMPOSE";

/// Deadline of a `docker version` / `... compose version` probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A container engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Podman.
    Podman,
    /// Docker.
    Docker,
}

impl Engine {
    /// The engine's program name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Podman => "podman",
            Self::Docker => "docker",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Compose implementation.
/// Serialised as its `AIBOX_COMPOSE` name (`docker compose`, `podman-compose`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ComposeKind {
    /// The Docker Compose v2 plugin, `docker compose`.
    #[serde(rename = "docker compose")]
    DockerPlugin,
    /// Podman's own wrapper, `podman compose` (Podman 4.7 and later).
    #[serde(rename = "podman compose")]
    PodmanSubcommand,
    /// The Python `podman-compose`.
    #[serde(rename = "podman-compose")]
    PodmanCompose,
    /// The standalone `docker-compose` (v1, or v2 installed standalone).
    #[serde(rename = "docker-compose")]
    DockerComposeStandalone,
}

impl ComposeKind {
    /// Every provider, in the order of the `AIBOX_COMPOSE` documentation.
    pub const ALL: [Self; 4] = [
        Self::DockerPlugin,
        Self::PodmanSubcommand,
        Self::PodmanCompose,
        Self::DockerComposeStandalone,
    ];

    /// The name as written in `AIBOX_COMPOSE` and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DockerPlugin => "docker compose",
            Self::PodmanSubcommand => "podman compose",
            Self::PodmanCompose => "podman-compose",
            Self::DockerComposeStandalone => "docker-compose",
        }
    }

    /// Parses an `AIBOX_COMPOSE` value.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s.trim())
    }

    /// The program to look up and the arguments that come before Compose's own.
    fn program(self) -> (&'static str, Option<&'static str>) {
        match self {
            Self::DockerPlugin => ("docker", Some("compose")),
            Self::PodmanSubcommand => ("podman", Some("compose")),
            Self::PodmanCompose => ("podman-compose", None),
            Self::DockerComposeStandalone => ("docker-compose", None),
        }
    }
}

impl std::fmt::Display for ComposeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What detection reads from the environment; separate so tests can vary it without
/// touching the process environment.
#[derive(Debug, Clone, Default)]
pub struct DetectEnv {
    /// Value of `AIBOX_ENGINE`.
    pub engine_override: Option<String>,
    /// Value of `AIBOX_COMPOSE`.
    pub compose_override: Option<String>,
    /// The `PATH` to search for programs.
    pub path: Option<OsString>,
    /// Extra variables for the probe processes (and, later, every engine command).
    pub extra_env: ExtraEnv,
}

impl DetectEnv {
    /// Reads `AIBOX_ENGINE`, `AIBOX_COMPOSE` and `PATH` from this process.
    pub fn from_process() -> Self {
        let var = |name| {
            std::env::var(name)
                .ok()
                .filter(|v: &String| !v.trim().is_empty())
        };
        Self {
            engine_override: var(ENGINE_ENV),
            compose_override: var(COMPOSE_ENV),
            path: std::env::var_os("PATH"),
            extra_env: Vec::new(),
        }
    }
}

/// A located engine program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineCli {
    /// Which engine.
    pub engine: Engine,
    /// Absolute path of its program.
    pub program: PathBuf,
}

/// A located Compose provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComposeCli {
    /// Which provider.
    pub kind: ComposeKind,
    /// Absolute path of its program.
    pub program: PathBuf,
}

impl ComposeCli {
    /// A command for this provider with its leading sub-command (`compose`) in place.
    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        if let (_, Some(sub)) = self.kind.program() {
            cmd.arg(sub);
        }
        cmd
    }
}

/// The result of detection: one engine and one Compose provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    /// The engine.
    pub engine: EngineCli,
    /// The Compose provider.
    pub compose: ComposeCli,
}

/// Picks the engine and Compose provider for `choice` (from `[container] engine`).
pub fn detect(choice: EngineChoice, env: &DetectEnv) -> Result<Detected, RuntimeError> {
    let engine = detect_engine(choice, env)?;
    let compose = detect_compose(&engine, env)?;
    Ok(Detected { engine, compose })
}

/// `[container] engine` after the `AIBOX_ENGINE` override; probes nothing.
pub fn effective_choice(
    choice: EngineChoice,
    env: &DetectEnv,
) -> Result<EngineChoice, RuntimeError> {
    match env.engine_override.as_deref().map(str::trim) {
        None | Some("") => Ok(choice),
        Some("podman") => Ok(EngineChoice::Podman),
        Some("docker") => Ok(EngineChoice::Docker),
        Some("auto") => Ok(EngineChoice::Auto),
        Some(other) => Err(RuntimeError::InvalidOverride {
            var: ENGINE_ENV,
            value: other.to_owned(),
            expected: "podman, docker, auto",
        }),
    }
}

/// Picks the engine alone.
pub fn detect_engine(choice: EngineChoice, env: &DetectEnv) -> Result<EngineCli, RuntimeError> {
    let choice = effective_choice(choice, env)?;
    let find = |engine: Engine| {
        process::find_program(engine.as_str(), env.path.as_deref())
            .map(|program| EngineCli { engine, program })
    };
    match choice {
        EngineChoice::Podman => find(Engine::Podman).ok_or_else(|| RuntimeError::NoEngine {
            detail: "`podman` was requested but is not on PATH".to_owned(),
        }),
        EngineChoice::Docker => {
            let docker = find(Engine::Docker).ok_or_else(|| RuntimeError::NoEngine {
                detail: "`docker` was requested but is not on PATH".to_owned(),
            })?;
            // An unreachable daemon is reported by the command that needs it.
            if docker_daemon(&docker, env) == DockerDaemon::Podman {
                return Err(RuntimeError::NoEngine {
                    detail: format!(
                        "`docker` was requested but its daemon is Podman ({PODMAN_BEHIND_DOCKER}); \
                         set `[container] engine = \"podman\"` or point `docker` at Docker Engine"
                    ),
                });
            }
            Ok(docker)
        }
        EngineChoice::Auto => {
            let docker = find(Engine::Docker);
            let daemon = docker
                .as_ref()
                .map_or(DockerDaemon::Unreachable, |d| docker_daemon(d, env));
            if let Some(docker) = &docker
                && daemon == DockerDaemon::Docker
            {
                return Ok(docker.clone());
            }
            if let Some(podman) = find(Engine::Podman) {
                return Ok(podman);
            }
            Err(RuntimeError::NoEngine {
                detail: match (docker.is_some(), daemon) {
                    (true, DockerDaemon::Podman) => format!(
                        "`docker`'s daemon is Podman ({PODMAN_BEHIND_DOCKER}), and `podman` \
                         is not on PATH"
                    ),
                    (true, _) => "`docker` is installed but its daemon does not answer, and \
                                  `podman` is not on PATH"
                        .to_owned(),
                    (false, _) => "neither `docker` nor `podman` is on PATH".to_owned(),
                },
            })
        }
    }
}

/// How error messages name a `docker` CLI that talks to Podman.
const PODMAN_BEHIND_DOCKER: &str = "its Docker-compatible socket";

/// What answers behind a `docker` CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DockerDaemon {
    /// Docker Engine.
    Docker,
    /// Podman's Docker-compatible API (`podman system service`, `podman.socket`).
    Podman,
    /// Nothing answered in time.
    Unreachable,
}

/// Asks the daemon behind `docker` which engine it is. Podman's compatible API names
/// itself in `docker version`'s server components ("Podman Engine").
///
/// Such a `docker` is not Docker: aibox's engine-specific choices (the seccomp default
/// and the Codex sandbox advice that follows from it, user-namespace handling, the
/// Compose provider) would be Docker's while Podman's behaviour applies. Nor is it used
/// as Podman through the `docker` CLI: the Podman path drives `podman` and its own
/// options, which the Docker CLI lacks. So `auto` takes the `podman` CLI for that
/// engine, and an explicit `docker` is refused with the fix named.
fn docker_daemon(docker: &EngineCli, env: &DetectEnv) -> DockerDaemon {
    let mut cmd = Command::new(&docker.program);
    cmd.args([
        "version",
        "--format",
        "{{.Server.Version}};{{range .Server.Components}}{{.Name}};{{end}}",
    ])
    .envs(env.extra_env.iter().map(|(k, v)| (k, v)));
    match process::run(cmd, PROBE_TIMEOUT, &mut |_, _| {}) {
        Ok(f) if f.success() => {
            if f.stdout.to_ascii_lowercase().contains("podman") {
                DockerDaemon::Podman
            } else {
                DockerDaemon::Docker
            }
        }
        _ => DockerDaemon::Unreachable,
    }
}

/// Picks the Compose provider for `engine`.
pub fn detect_compose(engine: &EngineCli, env: &DetectEnv) -> Result<ComposeCli, RuntimeError> {
    if let Some(value) = env
        .compose_override
        .as_deref()
        .filter(|v| !v.trim().is_empty())
    {
        let kind = ComposeKind::parse(value).ok_or_else(|| RuntimeError::InvalidOverride {
            var: COMPOSE_ENV,
            value: value.to_owned(),
            expected: "docker compose, podman compose, podman-compose, docker-compose",
        })?;
        return locate(kind, env).ok_or_else(|| RuntimeError::NoCompose {
            engine: engine.engine.to_string(),
            tried: format!("{kind} (from {COMPOSE_ENV}), which is not on PATH"),
        });
    }
    let order: &[ComposeKind] = match engine.engine {
        Engine::Docker => &[
            ComposeKind::DockerPlugin,
            ComposeKind::DockerComposeStandalone,
        ],
        Engine::Podman => &[
            ComposeKind::PodmanCompose,
            ComposeKind::PodmanSubcommand,
            ComposeKind::DockerComposeStandalone,
        ],
    };
    for &kind in order {
        let Some(cli) = locate(kind, env) else {
            continue;
        };
        // A sub-command provider exists only if the engine accepts `compose`.
        if kind.program().1.is_some() && !answers_compose(&cli, env) {
            continue;
        }
        return Ok(cli);
    }
    Err(RuntimeError::NoCompose {
        engine: engine.engine.to_string(),
        tried: order
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

fn locate(kind: ComposeKind, env: &DetectEnv) -> Option<ComposeCli> {
    let (program, _) = kind.program();
    process::find_program(program, env.path.as_deref()).map(|program| ComposeCli { kind, program })
}

fn answers_compose(compose: &ComposeCli, env: &DetectEnv) -> bool {
    let mut cmd = compose.command();
    cmd.arg("version")
        .envs(env.extra_env.iter().map(|(k, v)| (k, v)));
    process::run(cmd, PROBE_TIMEOUT, &mut |_, _| {}).is_ok_and(|f| f.success())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A PATH holding fake programs (shell scripts) with the given bodies.
    fn fake_path(programs: &[(&str, &str)]) -> (tempfile::TempDir, OsString) {
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in programs {
            let path = dir.path().join(name);
            fs_err::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = dir.path().as_os_str().to_owned();
        (dir, path)
    }

    fn env(path: OsString) -> DetectEnv {
        DetectEnv {
            path: Some(path),
            ..DetectEnv::default()
        }
    }

    #[test]
    fn override_beats_configuration() {
        let (_d, path) = fake_path(&[("podman", "exit 0"), ("docker", "exit 0")]);
        let mut e = env(path);
        e.engine_override = Some("podman".into());
        assert_eq!(
            detect_engine(EngineChoice::Docker, &e).unwrap().engine,
            Engine::Podman
        );
        e.engine_override = Some("docker".into());
        assert_eq!(
            detect_engine(EngineChoice::Podman, &e).unwrap().engine,
            Engine::Docker
        );
        e.engine_override = None;
        assert_eq!(
            detect_engine(EngineChoice::Podman, &e).unwrap().engine,
            Engine::Podman
        );
    }

    #[test]
    fn bad_override_is_rejected() {
        let (_d, path) = fake_path(&[]);
        let mut e = env(path);
        e.engine_override = Some("lxc".into());
        let err = detect_engine(EngineChoice::Auto, &e).unwrap_err();
        assert!(
            matches!(
                err,
                RuntimeError::InvalidOverride {
                    var: ENGINE_ENV,
                    ..
                }
            ),
            "{err:?}"
        );
        e.engine_override = None;
        e.compose_override = Some("nerdctl compose".into());
        let engine = EngineCli {
            engine: Engine::Podman,
            program: "/bin/true".into(),
        };
        let err = detect_compose(&engine, &e).unwrap_err();
        assert!(
            matches!(
                err,
                RuntimeError::InvalidOverride {
                    var: COMPOSE_ENV,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn auto_prefers_an_answering_docker() {
        let (_d, path) = fake_path(&[("podman", "exit 0"), ("docker", "echo 27.0.0")]);
        assert_eq!(
            detect_engine(EngineChoice::Auto, &env(path))
                .unwrap()
                .engine,
            Engine::Docker
        );
    }

    #[test]
    fn a_docker_cli_on_podman_is_not_docker() {
        let fake = "echo '5.4.2;Podman Engine;Conmon;'";
        let (_d, path) = fake_path(&[("podman", "exit 0"), ("docker", fake)]);
        let e = env(path);
        assert_eq!(
            detect_engine(EngineChoice::Auto, &e).unwrap().engine,
            Engine::Podman
        );
        let err = detect_engine(EngineChoice::Docker, &e).unwrap_err();
        assert!(err.to_string().contains("its daemon is Podman"), "{err}");
        let (_d, path) = fake_path(&[("docker", fake)]);
        let err = detect_engine(EngineChoice::Auto, &env(path)).unwrap_err();
        assert!(err.to_string().contains("daemon is Podman"), "{err}");
    }

    #[test]
    fn auto_falls_back_to_podman_when_docker_has_no_daemon() {
        let (_d, path) = fake_path(&[("podman", "exit 0"), ("docker", "exit 1")]);
        assert_eq!(
            detect_engine(EngineChoice::Auto, &env(path))
                .unwrap()
                .engine,
            Engine::Podman
        );
    }

    #[test]
    fn no_engine_fails_fast_with_a_clear_error() {
        let (_d, path) = fake_path(&[]);
        let started = std::time::Instant::now();
        for choice in [
            EngineChoice::Auto,
            EngineChoice::Podman,
            EngineChoice::Docker,
        ] {
            let err = detect_engine(choice, &env(path.clone())).unwrap_err();
            assert!(matches!(err, RuntimeError::NoEngine { .. }), "{err:?}");
        }
        let err = detect_engine(EngineChoice::Podman, &env(path)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no container engine found: `podman` was requested but is not on PATH"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn docker_without_daemon_or_podman_says_so() {
        let (_d, path) = fake_path(&[("docker", "exit 1")]);
        let err = detect_engine(EngineChoice::Auto, &env(path)).unwrap_err();
        assert!(err.to_string().contains("daemon does not answer"), "{err}");
    }

    #[test]
    fn a_hanging_docker_does_not_hang_detection() {
        let (_d, path) = fake_path(&[("docker", "exec sleep 60"), ("podman", "exit 0")]);
        let started = std::time::Instant::now();
        assert_eq!(
            detect_engine(EngineChoice::Auto, &env(path))
                .unwrap()
                .engine,
            Engine::Podman
        );
        assert!(started.elapsed() < PROBE_TIMEOUT + Duration::from_secs(3));
    }

    #[test]
    fn compose_order_per_engine() {
        // Podman 4.3 has no `compose` sub-command: the fake fails `podman compose version`.
        let (_d, path) = fake_path(&[
            ("podman", "[ \"$1\" = compose ] && exit 125; exit 0"),
            ("docker", "[ \"$1\" = compose ] && echo v2.29; exit 0"),
            ("podman-compose", "exit 0"),
            ("docker-compose", "exit 0"),
        ]);
        let e = env(path.clone());
        let podman = detect_engine(EngineChoice::Podman, &e).unwrap();
        assert_eq!(
            detect_compose(&podman, &e).unwrap().kind,
            ComposeKind::PodmanCompose
        );
        let docker = detect_engine(EngineChoice::Docker, &e).unwrap();
        assert_eq!(
            detect_compose(&docker, &e).unwrap().kind,
            ComposeKind::DockerPlugin
        );

        let (_d2, path2) = fake_path(&[
            ("podman", "[ \"$1\" = compose ] && exit 125; exit 0"),
            ("docker-compose", "exit 0"),
        ]);
        let e2 = env(path2);
        let podman = detect_engine(EngineChoice::Podman, &e2).unwrap();
        assert_eq!(
            detect_compose(&podman, &e2).unwrap().kind,
            ComposeKind::DockerComposeStandalone
        );

        let mut e3 = env(path);
        e3.compose_override = Some("docker-compose".into());
        assert_eq!(
            detect_compose(&podman, &e3).unwrap().kind,
            ComposeKind::DockerComposeStandalone
        );
    }

    #[test]
    fn no_compose_is_reported() {
        let (_d, path) = fake_path(&[("podman", "exit 125")]);
        let e = env(path);
        let podman = detect_engine(EngineChoice::Podman, &e).unwrap();
        let err = detect_compose(&podman, &e).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no Compose provider found for podman: tried podman-compose, podman compose, docker-compose"
        );
        let mut e = e;
        e.compose_override = Some("podman-compose".into());
        let err = detect_compose(&podman, &e).unwrap_err();
        assert!(err.to_string().contains("from AIBOX_COMPOSE"), "{err}");
    }

    #[test]
    fn compose_kinds_round_trip() {
        for kind in ComposeKind::ALL {
            assert_eq!(ComposeKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ComposeKind::parse("compose"), None);
    }
}
