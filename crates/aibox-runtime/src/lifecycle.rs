//! The container lifecycle: build, up, down, status and exec for one project.
//!
//! Compose does the building and starting; the engine CLI answers questions about the
//! container (`container inspect`) and runs commands in it (`exec`). Before touching a
//! container, its labels are checked: one that another project owns is never adopted,
//! stopped or removed.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::os::unix::process::ExitStatusExt as _;
use std::process::Command;
use std::time::{Duration, Instant};

use aibox_config::layout;
use camino::Utf8PathBuf;
use serde::Serialize;

use crate::build_leftovers::{self, BuildTrace};
use crate::build_log::{self, BuildLog, BuildStep};
use crate::detect::{ComposeKind, DetectEnv, Detected, Engine, detect};
use crate::error::RuntimeError;
use crate::fingerprint::Fingerprints;
use crate::process::{self, ExtraEnv, Stream};
use aibox_config::container::{
    BUILD_DIGEST_LABEL, CHECKOUT_LABEL, CONFIG_DIGEST_LABEL, CONFIG_DIGEST_VAR, PROJECT_LABEL,
    WORKSPACE_DIR,
};

pub use aibox_config::container::COMPOSE_PROJECT_LABELS;
/// Label the Dev Containers CLI puts on containers it starts: the local project folder.
pub const DEVCONTAINER_FOLDER_LABEL: &str = "devcontainer.local_folder";
/// Label Compose providers put on containers they create: the service name.
const COMPOSE_SERVICE_LABEL: &str = "com.docker.compose.service";

/// Everything the runtime needs to know about one checkout's container. The engine
/// fills it from the names the generators use (`aibox_devcontainer::container_name`, ...).
///
/// A container is this checkout's when its `aibox.project` label is [`Target::name`] and
/// either its [`CHECKOUT_LABEL`] (aibox `up`) or its `DEVCONTAINER_FOLDER_LABEL` (the Dev
/// Containers CLI or VS Code, from the same committed files) is [`Target::checkout`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Project root (holds `aibox.toml`).
    pub root: Utf8PathBuf,
    /// Compose project name of aibox's container (per checkout).
    pub project: String,
    /// Container name of aibox's container (per checkout).
    pub container: String,
    /// The project's name: the committed `aibox.project` label.
    pub name: String,
    /// The Compose service.
    pub service: String,
    /// The checkout's canonical path: the [`CHECKOUT_LABEL`] of its container.
    pub checkout: String,
    /// Image name with tag.
    pub image: String,
    /// The unprivileged user commands run as.
    pub user: String,
    /// That user's UID and GID in `aibox.toml`: the image's unless the project's owner is
    /// a regular user, whose IDs the image takes instead ([`Fingerprints::owner`]).
    pub ids: (u32, u32),
    /// Whether the agent sits on the internal egress network (`[network] egress` other
    /// than `open`), which `up` makes itself on Podman.
    pub egress: bool,
    /// Whether the Compose project has the egress proxy service (`[network] egress =
    /// "allowlist"`): `up` makes sure it runs, `status` reports it.
    pub proxy: bool,
    /// The `[container.lifecycle]` commands `up` runs in the container, as `key=command`:
    /// part of the container's digest, so a changed (or added) command recreates the
    /// container and runs on the new one.
    pub lifecycle: Vec<String>,
}

impl Target {
    /// Absolute path of the generated Compose file.
    pub fn compose_file(&self) -> Utf8PathBuf {
        self.root.join(layout::COMPOSE)
    }

    /// Absolute path of the Compose override file (it may not exist).
    pub fn override_file(&self) -> Utf8PathBuf {
        self.root.join(layout::COMPOSE_OVERRIDE)
    }

    /// The fingerprints of the project's files and lifecycle commands.
    ///
    /// # Errors
    /// [`RuntimeError::ReadProject`] when a file or folder cannot be read.
    pub fn fingerprints(&self) -> Result<Fingerprints, RuntimeError> {
        Fingerprints::of(&self.root).map(|p| p.with_lifecycle(&self.lifecycle))
    }

    /// Every Compose file that exists, in the order of the file table
    /// (`layout::COMPOSE_FILES`, also the order `devcontainer.json` lists
    /// them): the generated file (always), the user's override, the personal local file.
    pub fn compose_files(&self) -> Vec<Utf8PathBuf> {
        let mut files = vec![self.compose_file()];
        for extra in layout::COMPOSE_FILES {
            let path = self.root.join(extra);
            if extra != layout::COMPOSE && path.is_file() {
                files.push(path);
            }
        }
        files
    }
}

/// Deadlines of the lifecycle steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Quick questions to the engine (`inspect`, `image exists`).
    pub query: Duration,
    /// Building the image.
    pub build: Duration,
    /// Creating and starting the container.
    pub start: Duration,
    /// Waiting for the started container to report `running`.
    pub running: Duration,
    /// Stopping and removing it.
    pub stop: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            query: Duration::from_secs(30),
            build: Duration::from_mins(30),
            start: Duration::from_mins(5),
            running: Duration::from_mins(1),
            stop: Duration::from_mins(2),
        }
    }
}

/// Progress of a long step, for the caller to show. The runtime never prints.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The image is being built.
    Building {
        /// Image name.
        image: String,
    },
    /// The image build began a step (a Dockerfile instruction).
    Step(BuildStep),
    /// The container is being created or started.
    Starting {
        /// Container name.
        container: String,
    },
    /// Waiting for the container to report `running`.
    Waiting {
        /// Container name.
        container: String,
    },
    /// The container runs.
    Running {
        /// Container name.
        container: String,
        /// Its id.
        id: String,
    },
    /// The container was already running; nothing was changed.
    AlreadyRunning {
        /// Container name.
        container: String,
    },
    /// The container is being stopped and removed.
    Stopping {
        /// Container name.
        container: String,
    },
    /// What runs no longer matches the generated files, so it is rebuilt or recreated.
    Stale {
        /// What is stale and what happens, in words.
        reason: String,
    },
    /// A line for the user from aibox itself (such as waiting for another `up`).
    Note {
        /// The line.
        line: String,
    },
    /// One line printed by the engine or Compose.
    Output {
        /// The line, without its newline.
        line: String,
    },
}

/// A progress callback.
pub type Progress<'a> = &'a mut dyn FnMut(&Event);

/// The state of the project's container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerState {
    /// It exists and runs.
    Running,
    /// It exists but does not run (created, exited, ...).
    Stopped,
    /// It exists and is frozen (`podman pause`): `up` unpauses it, `down` removes it.
    Paused,
    /// No container of that name exists.
    Missing,
}

impl std::fmt::Display for ContainerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Running => "running",
            Self::Stopped => "stopped",
            Self::Paused => "paused",
            Self::Missing => "missing",
        })
    }
}

/// What `status` reports (serialisable for `--output json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[allow(clippy::struct_excessive_bools)] // independent facts, serialised as they are
pub struct Status {
    /// Compose project name.
    pub project: String,
    /// Container name (aibox's, or the Dev Containers CLI's for this checkout).
    pub container: String,
    /// The container was made by the Dev Containers CLI (or VS Code) for this checkout,
    /// from the same committed files; aibox uses it until it makes its own with `up`.
    pub devcontainer_cli: bool,
    /// Running, stopped or missing.
    pub state: ContainerState,
    /// The engine's own status word (`running`, `exited`, `created`, ...), if it exists.
    pub engine_status: Option<String>,
    /// Container id, if it exists.
    pub container_id: Option<String>,
    /// The container's image, or the configured image when there is no container.
    pub image: String,
    /// Whether the configured image exists locally.
    pub image_present: bool,
    /// The image exists but was built from other files than `.devcontainer/` holds now
    /// (or by another tool): `up` rebuilds it.
    pub image_stale: bool,
    /// The container exists but was created from other files or another image than now
    /// (or by another tool): `up` recreates it.
    pub container_stale: bool,
    /// Containers aibox made for this checkout under another name (before a change of
    /// `container.name` or `container_name`): `up` and `down` remove them.
    pub former_containers: Vec<String>,
    /// The engine used.
    pub engine: Engine,
    /// The Compose provider used.
    pub compose: ComposeKind,
    /// The egress proxy's container, when the project has one (`[network] egress =
    /// "allowlist"`): without it running the agent has no way out.
    pub proxy: Option<ProxyStatus>,
}

/// The egress proxy's container as `status` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProxyStatus {
    /// Its name (the Compose service's when there is no container).
    pub container: String,
    /// Running, stopped or missing.
    pub state: ContainerState,
    /// The engine's own status word (`running`, `exited`, `created`, ...), if it exists.
    pub engine_status: Option<String>,
}

/// Options of [`Runtime::up`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpOptions {
    /// Rebuild the image (and recreate the container) even when the image exists.
    pub build: bool,
}

/// A command to run in the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest<'a> {
    /// User to run as (normally [`Target::user`]).
    pub user: &'a str,
    /// Program and arguments.
    pub cmd: &'a [String],
    /// Names of host environment variables passed in for this command only. Values are
    /// never put on a command line: the engine reads them from its own environment.
    pub env: &'a [String],
    /// Optional deadline; `None` lets an interactive command run as long as it likes.
    pub timeout: Option<Duration>,
}

/// A command to run in the container with its standard streams piped to the caller
/// ([`Runtime::exec_command`]): what an MCP harness does with a stdio server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipedExec<'a> {
    /// User to run as (normally [`Target::user`]).
    pub user: &'a str,
    /// Program and arguments.
    pub cmd: &'a [String],
    /// Variables set to a literal value (`-e NAME=VALUE`, visible on the command line:
    /// never a secret).
    pub literal_env: &'a [(String, String)],
    /// Names of variables the engine copies from its own environment (`-e NAME`): the
    /// caller sets them on the returned [`Command`] (or they come from this process).
    pub env: &'a [String],
}

/// The user-namespace check [`Runtime::probe_user_namespaces`] runs in the container.
/// `--mount` makes `unshare` also set `/` private in a new mount namespace, the kind of
/// mount bubblewrap makes first ("make / slave"), so a seccomp rule or an `AppArmor` profile
/// that refuses mounts shows up here too.
pub const USERNS_PROBE: [&str; 5] = ["unshare", "--user", "--map-root-user", "--mount", "true"];

/// Result of [`Runtime::probe_user_namespaces`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsernsProbe {
    /// The probe succeeded: Codex's bubblewrap sandbox can create its namespaces.
    pub works: bool,
    /// The first line the probe printed (the refusal, when it failed).
    pub detail: String,
}

/// One engine and Compose provider, ready to drive containers.
#[derive(Debug, Clone)]
pub struct Runtime {
    detected: Detected,
    extra_env: ExtraEnv,
    timeouts: Timeouts,
}

/// What `container inspect` told us.
#[derive(Debug, Clone)]
struct Inspected {
    id: String,
    /// Its name, without Docker's leading `/`.
    name: String,
    status: String,
    /// It runs and is not paused.
    running: bool,
    /// It is paused: neither running nor startable until unpaused.
    paused: bool,
    labels: BTreeMap<String, String>,
    image: String,
    /// The id of the image it was created from (`Image`), without `sha256:`.
    image_id: String,
    /// The engine's whole answer (a JSON array of one object), for the policy checks.
    json: String,
}

impl Inspected {
    /// The Compose project it belongs to, by whichever provider's label says so.
    fn compose_project(&self) -> Option<&str> {
        COMPOSE_PROJECT_LABELS
            .iter()
            .find_map(|l| self.labels.get(*l))
            .map(String::as_str)
    }
}

/// The project's container as the engine described it, found once by
/// [`Runtime::container`] (its owner checked): a caller with several questions about it
/// (`doctor`) asks the engine once instead of once per question.
#[derive(Debug, Clone)]
pub struct FoundContainer(Inspected);

impl FoundContainer {
    /// The engine's `container inspect` JSON.
    #[must_use]
    pub fn json(&self) -> &str {
        &self.0.json
    }

    /// Whether it runs.
    #[must_use]
    pub fn running(&self) -> bool {
        self.0.running
    }
}

/// The Compose project of the agent's container `found` (the Dev Containers CLI's
/// differs from aibox's), else aibox's own: where its egress proxy is.
fn compose_project<'a>(found: Option<&'a Inspected>, target: &'a Target) -> &'a str {
    found
        .and_then(Inspected::compose_project)
        .unwrap_or(target.project.as_str())
}

/// What [`Runtime::up`] did and found.
#[derive(Debug, Clone)]
pub struct UpOutcome {
    /// The status after `up`.
    pub status: Status,
    /// The running container is not the one aibox's name held before (none, or one
    /// recreated): the Dev Containers CLI's `postCreateCommand` is due.
    pub created: bool,
    /// The container was not running before: `postStartCommand` is due.
    pub started: bool,
    /// The running container, its owner checked.
    pub container: FoundContainer,
}

/// What `image inspect` says of the project's image.
#[derive(Debug, Clone)]
struct ImageFacts {
    /// Its id, without `sha256:`.
    id: String,
    /// Its [`BUILD_DIGEST_LABEL`], empty when it has none.
    build_digest: String,
}

impl Runtime {
    /// Detects the engine and Compose provider (see [`crate::detect`]).
    pub fn detect(
        choice: aibox_config::EngineChoice,
        env: DetectEnv,
    ) -> Result<Self, RuntimeError> {
        let detected = detect(choice, &env)?;
        Ok(Self {
            detected,
            extra_env: env.extra_env,
            timeouts: Timeouts::default(),
        })
    }

    /// A runtime from an explicit detection result; `extra_env` is added to the
    /// environment of every command it runs.
    pub fn new(
        detected: Detected,
        extra_env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    ) -> Self {
        Self {
            detected,
            extra_env,
            timeouts: Timeouts::default(),
        }
    }

    /// Replaces the step deadlines.
    #[must_use]
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The engine and Compose provider in use.
    pub fn detected(&self) -> &Detected {
        &self.detected
    }

    /// Builds the image through Compose, labelled with the build digest of the files it
    /// is built from, reporting each step, and checks the result: the command's exit
    /// status, what its output says (podman-compose 1.0 exits 0 after a failed build) and
    /// that an image with this build digest exists afterwards (an older one may remain).
    pub fn build(&self, target: &Target, progress: Progress<'_>) -> Result<(), RuntimeError> {
        require_compose_file(target)?;
        let prints = target.fingerprints()?;
        self.build_from(target, &prints, progress)
    }

    fn build_from(
        &self,
        target: &Target,
        prints: &Fingerprints,
        progress: Progress<'_>,
    ) -> Result<(), RuntimeError> {
        progress(&Event::Building {
            image: target.image.clone(),
        });
        // Once more when another process removed an image the build was reading as a
        // cache (Podman's "layer not known"): nothing is wrong with the build.
        let mut again = true;
        loop {
            let mut cmd = self.compose(target, &["build"]);
            for arg in prints.build_args() {
                cmd.arg("--build-arg").arg(arg);
            }
            let mut log = BuildLog::default();
            let mut trace = BuildTrace::default();
            // Ctrl-C reaches the builder too; held, it does not end aibox before the
            // build's leftovers are removed (see `crate::interrupt`).
            let hold = crate::interrupt::hold();
            let done = process::run(cmd, self.timeouts.build, &mut |_, line| {
                progress(&Event::Output {
                    line: line.to_owned(),
                });
                let step = log.line(line);
                trace.line(line, step.as_ref(), unix_now);
                if let Some(step) = step {
                    progress(&Event::Step(step));
                }
            })?;
            let by_user = hold.interrupted();
            drop(hold);
            if !by_user
                && done.success()
                && !log.says_failed()
                && self
                    .image_facts(&target.image)?
                    // A Dockerfile without the label step (not aibox's) cannot say more.
                    .is_some_and(|f| f.build_digest.is_empty() || f.build_digest == prints.build)
            {
                return Ok(());
            }
            // Ctrl-C that aibox held, or that the builder alone saw (aibox did not
            // install its handler, or it ignores SIGINT, as background jobs do).
            if by_user || interrupted(&done) {
                self.remove_build_leftovers(trace, progress);
                return Err(interrupted_at(target, &log));
            }
            if again && build_log::store_changed_under(&done.tail) {
                again = false;
                progress(&Event::Note {
                    line: "an image the build was reading was removed meanwhile (by another \
                           process); building again"
                        .to_owned(),
                });
                continue;
            }
            return Err(build_failed(target, &log, &done));
        }
    }

    /// Builds the image when missing (or when asked), starts the container and waits
    /// until it runs. Says what it learned on the way too: whether the running container
    /// is a new one or was started now, and the container as the engine last described
    /// it, so the caller asks the engine no second time.
    ///
    /// # Errors
    /// The Compose file is missing, the container is another checkout's or project's, the
    /// build or start fails, or the container does not run in time.
    pub fn up(
        &self,
        target: &Target,
        opts: UpOptions,
        progress: Progress<'_>,
    ) -> Result<UpOutcome, RuntimeError> {
        require_compose_file(target)?;
        // Only aibox's own container is started or recreated; one the Dev Containers CLI
        // made for this checkout stays as it is (aibox uses its own from now on).
        let existing = self.inspect(&target.container)?;
        if let Some(found) = &existing {
            check_owner(found, target)?;
        }
        let prints = target.fingerprints()?;
        let image = self.image_facts(&target.image)?;
        let build = match &image {
            None => true,
            Some(_) if opts.build => true,
            Some(facts) => facts
                .stale_reason(&prints, existing.as_ref())
                .is_some_and(|reason| {
                    progress(&Event::Stale {
                        reason: format!("image `{}` {reason}: rebuilding it", target.image),
                    });
                    true
                }),
        };
        // The image a rebuild replaces, removed once the new container runs.
        let replaced = image.as_ref().filter(|_| build).map(|f| f.id.clone());
        let image = if build {
            self.build_from(target, &prints, progress)?;
            self.image_facts(&target.image)?
        } else {
            image
        };
        let image_id = image.as_ref().map(|f| f.id.clone());
        let recreate = build
            || existing.as_ref().is_some_and(|found| {
                let why = stale_container_reason(found, &prints, image_id.as_deref());
                if let Some(reason) = &why {
                    progress(&Event::Stale {
                        reason: format!("container `{}` {reason}: recreating it", target.container),
                    });
                }
                why.is_some()
            });
        // One container per checkout: the one made under a former name goes first (it
        // mounts the same folder and may hold a published port).
        self.remove_former(target, progress)?;
        if let Some(found) = existing.as_ref().filter(|f| f.paused && recreate) {
            self.unpause(found, progress)?;
        }
        // The running container, as last inspected: one found running just now is not
        // inspected again, neither for the wait nor for the status.
        let running =
            self.start_or_create(target, existing.as_ref(), recreate, &prints, progress)?;
        let running = match running {
            Some(found) => found,
            None => self.wait_running(target, progress)?,
        };
        check_owner(&running, target)?;
        // The image this `up` left: the one its build replaced, or else the one the
        // recreated container ran (another checkout's rebuild replaced it, and no later
        // `up` would remove it: QA25, 0.7 to 1.7 GB left for good).
        let left = replaced
            .map(|id| (id, "this build replaced"))
            .or_else(|| {
                let found = existing.as_ref().filter(|_| recreate)?;
                Some((found.image_id.clone(), "the previous container ran"))
            })
            .filter(|(old, _)| Some(old) != image_id.as_ref());
        if let Some((old, what)) = left {
            self.remove_replaced_image(&old, what, progress);
        }
        // Every service runs, not only the agent: one whose proxy stopped (or never
        // started: podman-compose 1.0 leaves a failed one `created`) has no way out.
        let proxy = if target.proxy {
            Some(self.ensure_proxy(target, &prints, progress)?)
        } else {
            None
        };
        progress(&Event::Running {
            container: target.container.clone(),
            id: running.id.clone(),
        });
        let created = existing.as_ref().is_none_or(|found| found.id != running.id);
        // Unpausing resumes the processes that ran: nothing is started.
        let started = created
            || existing
                .as_ref()
                .is_none_or(|found| !found.running && !found.paused);
        let mut status =
            self.status_with_image(target, Some(&prints), Some(running.clone()), image.as_ref());
        status.proxy = proxy;
        Ok(UpOutcome {
            status,
            created,
            started,
            container: FoundContainer(running),
        })
    }

    /// Stops and removes the project's container (Compose `down`) and the volume the
    /// generated Compose file declares (the egress proxy's socket, which holds nothing
    /// else). Files, `.aibox-home/`, the user's volumes and the image are kept.
    pub fn down(&self, target: &Target, progress: Progress<'_>) -> Result<Status, RuntimeError> {
        let existing = self.find(target)?;
        if let Some(found) = &existing {
            check_owner(found, target)?;
        }
        progress(&Event::Stopping {
            container: existing
                .as_ref()
                .map_or_else(|| target.container.clone(), |f| f.name.clone()),
        });
        if let Some(found) = existing.as_ref().filter(|f| f.paused) {
            self.unpause(found, progress)?;
        }
        if let Some(found) = existing.as_ref().filter(|f| f.name != target.container) {
            // The Dev Containers CLI's container of this checkout, under its own Compose
            // project.
            self.remove_with_project(found, progress)?;
        } else if target.compose_file().is_file() {
            let cmd = self.compose(target, &["down"]);
            run_checked(cmd, self.timeouts.stop, progress)?;
            self.remove_leftover_network(target, progress);
            self.remove_volumes(&target.project, progress);
        } else if existing.is_some() {
            // Without the Compose file only our own (label-checked) container is removed.
            let mut cmd = self.engine_cmd();
            cmd.args(["rm", "-f", &target.container]);
            run_checked(cmd, self.timeouts.stop, progress)?;
        }
        self.remove_former(target, progress)?;
        // The former containers were just removed: none is left to look up.
        self.status_with(target, target.fingerprints().ok().as_ref())
    }

    /// The names of every container labelled as this checkout's (`checkout`, its canonical
    /// path), whatever the configuration calls them: what a user can remove with the
    /// engine when aibox cannot read the configuration.
    ///
    /// # Errors
    /// The engine fails.
    pub fn checkout_containers(&self, checkout: &str) -> Result<Vec<String>, RuntimeError> {
        self.list_containers(&[(CHECKOUT_LABEL, checkout)], true)
    }

    /// The containers that carry every `label=value` of `labels`: their full ids, or their
    /// names (`names`).
    fn list_containers(
        &self,
        labels: &[(&str, &str)],
        names: bool,
    ) -> Result<Vec<String>, RuntimeError> {
        let mut cmd = self.engine_cmd();
        cmd.args(["ps", "-a", "--no-trunc"]);
        if names {
            cmd.args(["--format", "{{.Names}}"]);
        } else {
            cmd.arg("-q");
        }
        for (label, value) in labels {
            cmd.arg("--filter").arg(format!("label={label}={value}"));
        }
        let rendered = process::render(&cmd);
        let done = process::run(cmd, self.timeouts.query, &mut |_, _| {})?;
        if !done.success() {
            return Err(failed(&rendered, &done));
        }
        Ok(done.stdout.split_whitespace().map(str::to_owned).collect())
    }

    /// Unpauses a paused container: Compose can neither stop (`down`) nor replace (`up
    /// --force-recreate`) one, and leaves it as it is.
    fn unpause(&self, found: &Inspected, progress: Progress<'_>) -> Result<(), RuntimeError> {
        let mut cmd = self.engine_cmd();
        cmd.args(["unpause", &found.id]);
        run_checked(cmd, self.timeouts.stop, progress)?;
        Ok(())
    }

    /// The containers aibox made for this checkout under another name: its
    /// [`CHECKOUT_LABEL`] is this checkout, its Compose project another (a renamed
    /// `container.name` or `container_name`; the egress proxy of that project too).
    fn former(&self, target: &Target) -> Result<Vec<Inspected>, RuntimeError> {
        let ids = self.list_containers(&[(CHECKOUT_LABEL, &target.checkout)], false)?;
        let mut former = Vec::new();
        for id in &ids {
            let Some(found) = self.inspect_container(id)? else {
                continue;
            };
            if found.name != target.container
                && found.compose_project() != Some(target.project.as_str())
            {
                former.push(found);
            }
        }
        Ok(former)
    }

    /// Removes [`Self::former`] containers and their Compose networks.
    fn remove_former(&self, target: &Target, progress: Progress<'_>) -> Result<(), RuntimeError> {
        for found in self.former(target)? {
            progress(&Event::Stale {
                reason: format!(
                    "container `{}` is this checkout's under a former name: removing it",
                    found.name
                ),
            });
            self.remove_with_project(&found, progress)?;
        }
        Ok(())
    }

    /// Removes a container of this checkout that is not under `up`'s Compose project (the
    /// Dev Containers CLI's, or one under a former name) by id, then its project's network
    /// and aibox's volume when nothing else uses them.
    fn remove_with_project(
        &self,
        found: &Inspected,
        progress: Progress<'_>,
    ) -> Result<(), RuntimeError> {
        let mut cmd = self.engine_cmd();
        cmd.args(["rm", "-f", &found.id]);
        run_checked(cmd, self.timeouts.stop, progress)?;
        if let Some(project) = found.compose_project() {
            self.remove_network(project, progress);
            self.remove_volumes(project, progress);
        }
        Ok(())
    }

    /// The project's container (`None` when there is none), its owner checked: an error
    /// when it is another checkout's. The lookup that [`Self::status`] makes, for callers
    /// that ask more than one question (its `inspect` JSON, a command run in it).
    ///
    /// # Errors
    /// The container is another checkout's or project's, or the engine fails.
    pub fn container(&self, target: &Target) -> Result<Option<FoundContainer>, RuntimeError> {
        let Some(found) = self.find(target)? else {
            return Ok(None);
        };
        check_owner(&found, target)?;
        Ok(Some(FoundContainer(found)))
    }

    /// Stops the project's container (kept for inspection, not removed).
    pub fn stop(&self, target: &Target, progress: Progress<'_>) -> Result<(), RuntimeError> {
        let Some(found) = self.find(target)? else {
            return Ok(());
        };
        check_owner(&found, target)?;
        progress(&Event::Stopping {
            container: found.name.clone(),
        });
        let mut cmd = self.engine_cmd();
        cmd.args(["stop", &found.id]);
        run_checked(cmd, self.timeouts.stop, progress)?;
        Ok(())
    }

    /// Reports whether the project's container runs, and whether it and its image still
    /// match the files.
    pub fn status(&self, target: &Target) -> Result<Status, RuntimeError> {
        // Unreadable files make nothing stale: `up` reports them when it needs them.
        let prints = target.fingerprints().ok();
        let mut status = self.status_with(target, prints.as_ref())?;
        status.former_containers = self.former_containers(target)?;
        Ok(status)
    }

    /// The names of the containers aibox made for this checkout under a former name
    /// (before `container.name` or `container_name` changed): `up` and `down` remove them.
    ///
    /// # Errors
    /// The engine fails.
    pub fn former_containers(&self, target: &Target) -> Result<Vec<String>, RuntimeError> {
        Ok(self.former(target)?.into_iter().map(|f| f.name).collect())
    }

    /// [`Self::status`] of the container already found by [`Self::container`] (`None`:
    /// there is none), without asking the engine for it again.
    ///
    /// # Errors
    /// The engine fails to inspect the image.
    pub fn status_of(
        &self,
        target: &Target,
        found: Option<&FoundContainer>,
    ) -> Result<Status, RuntimeError> {
        let prints = target.fingerprints().ok();
        self.status_found(target, prints.as_ref(), found.map(|f| f.0.clone()))
    }

    fn status_with(
        &self,
        target: &Target,
        prints: Option<&Fingerprints>,
    ) -> Result<Status, RuntimeError> {
        let found = self.find(target)?;
        if let Some(found) = &found {
            check_owner(found, target)?;
        }
        self.status_found(target, prints, found)
    }

    fn status_found(
        &self,
        target: &Target,
        prints: Option<&Fingerprints>,
        found: Option<Inspected>,
    ) -> Result<Status, RuntimeError> {
        let image = self.image_facts(&target.image)?;
        let proxy = self.proxy_of(target, found.as_ref())?;
        let mut status = self.status_with_image(target, prints, found, image.as_ref());
        status.proxy = proxy;
        Ok(status)
    }

    /// The egress proxy's container beside the agent's container `agent` (found by
    /// [`Self::container`]; its Compose project is the proxy's, the Dev Containers CLI's
    /// differing from aibox's), `None` when there is none. Found once, by its labels, for
    /// every question asked of it ([`ProxyStatus::of`], [`Self::logs`],
    /// [`Self::exec_output_in`]).
    ///
    /// # Errors
    /// The engine's CLI fails or does not answer in time.
    pub fn egress_proxy(
        &self,
        target: &Target,
        agent: Option<&FoundContainer>,
    ) -> Result<Option<FoundContainer>, RuntimeError> {
        let project = compose_project(agent.map(|a| &a.0), target);
        Ok(self.find_proxy(project)?.map(FoundContainer))
    }

    fn proxy_of(
        &self,
        target: &Target,
        agent: Option<&Inspected>,
    ) -> Result<Option<ProxyStatus>, RuntimeError> {
        if !target.proxy {
            return Ok(None);
        }
        let project = compose_project(agent, target);
        Ok(Some(proxy_status_of(self.find_proxy(project)?.as_ref())))
    }

    /// Makes sure the egress proxy runs: starts its container when it exists but does not
    /// run, makes it (Compose, that service only) when it is missing, and waits until it
    /// runs. Returns its status.
    fn ensure_proxy(
        &self,
        target: &Target,
        prints: &Fingerprints,
        progress: Progress<'_>,
    ) -> Result<ProxyStatus, RuntimeError> {
        let service = aibox_config::container::EGRESS_PROXY_SERVICE;
        match self.find_proxy(&target.project)? {
            Some(found) if found.running => return Ok(proxy_status_of(Some(&found))),
            Some(found) => {
                progress(&Event::Starting {
                    container: found.name.clone(),
                });
                let mut cmd = self.engine_cmd();
                cmd.args(["start", &found.id]);
                // A failure is reported below, with the state it left.
                let _ = run_checked(cmd, self.timeouts.start, progress);
            }
            None => {
                progress(&Event::Starting {
                    container: service.to_owned(),
                });
                let mut cmd = self.compose(target, &["up", "-d", "--no-build", service]);
                cmd.env(CONFIG_DIGEST_VAR, &prints.config);
                let _ = run_checked(cmd, self.timeouts.start, progress);
            }
        }
        let deadline = Instant::now() + self.timeouts.running;
        loop {
            let found = self.find_proxy(&target.project)?;
            let status = proxy_status_of(found.as_ref());
            let settled = found
                .as_ref()
                .is_none_or(|f| matches!(f.status.as_str(), "exited" | "dead" | "stopped"));
            if status.state == ContainerState::Running {
                return Ok(status);
            }
            if settled || Instant::now() >= deadline {
                return Err(RuntimeError::ProxyNotRunning {
                    container: status.container,
                    state: status
                        .engine_status
                        .unwrap_or_else(|| ContainerState::Missing.to_string()),
                    engine: self.engine_name(),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The status of the container `found` and the configured image `image`, both as
    /// the engine just described them.
    fn status_with_image(
        &self,
        target: &Target,
        prints: Option<&Fingerprints>,
        found: Option<Inspected>,
        image: Option<&ImageFacts>,
    ) -> Status {
        let image_present = image.is_some();
        let image_stale = match (&image, prints) {
            (Some(facts), Some(p)) => facts.stale_reason(p, None).is_some(),
            _ => false,
        };
        let container_stale = match (&found, prints) {
            (Some(c), Some(p)) => {
                stale_container_reason(c, p, image.as_ref().map(|f| f.id.as_str())).is_some()
            }
            _ => false,
        };
        let container = found
            .as_ref()
            .map_or_else(|| target.container.clone(), |c| c.name.clone());
        let devcontainer_cli = container != target.container;
        let (state, engine_status, container_id, image) = match found {
            None => (ContainerState::Missing, None, None, target.image.clone()),
            Some(c) => {
                let state = if c.running {
                    ContainerState::Running
                } else if c.paused {
                    ContainerState::Paused
                } else {
                    ContainerState::Stopped
                };
                (state, Some(c.status), Some(c.id), c.image)
            }
        };
        Status {
            project: target.project.clone(),
            container,
            devcontainer_cli,
            state,
            engine_status,
            container_id,
            image,
            image_present,
            image_stale,
            container_stale,
            former_containers: Vec::new(),
            engine: self.detected.engine.engine,
            compose: self.detected.compose.kind,
            proxy: None,
        }
    }

    /// Runs a command in the running container with the caller's stdin, stdout and
    /// stderr, and returns its exit code.
    pub fn exec(&self, target: &Target, request: &ExecRequest<'_>) -> Result<i32, RuntimeError> {
        if request.cmd.is_empty() {
            return Err(RuntimeError::EmptyCommand);
        }
        for name in request.env {
            if !valid_env_name(name) {
                return Err(RuntimeError::InvalidEnvName { name: name.clone() });
            }
            let in_extra = self.extra_env.iter().any(|(k, _)| k == name.as_str());
            if !in_extra && std::env::var_os(name).is_none() {
                return Err(RuntimeError::EnvNotSet { name: name.clone() });
            }
        }
        let found = self.running_container(target)?;
        let mut cmd = self.engine_cmd();
        cmd.arg("exec").arg("-i");
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            cmd.arg("-t");
        }
        cmd.args(["--user", request.user, "--workdir", WORKSPACE_DIR]);
        for name in request.env {
            // `-e NAME` without a value: the engine copies it from its environment.
            cmd.args(["-e", name]);
        }
        cmd.arg(&found.id).args(request.cmd);
        let status = process::run_inherited(cmd, request.timeout)?;
        Ok(process::exit_code(status))
    }

    /// The `<engine> exec -i --user U --workdir /workspace -e ... <container> CMD ARGS`
    /// command for `request`, built but not run: the caller pipes its streams (the MCP
    /// probe, [`crate::probe_mcp_server`]) and owns its deadline.
    ///
    /// # Errors
    /// The container is missing, stopped or another project's; an empty command; an
    /// invalid variable name; the engine fails to answer `inspect`.
    pub fn exec_command(
        &self,
        target: &Target,
        request: &PipedExec<'_>,
    ) -> Result<Command, RuntimeError> {
        // A bad request is refused before the engine is asked anything.
        check_piped(request)?;
        let found = self.running(target)?;
        Ok(self.piped_command(&found.0.id, request))
    }

    /// [`Self::exec_command`] in the container [`Self::running`] already found, without
    /// asking the engine for it again: a caller that runs several commands (`mcp check`,
    /// one per server) looks it up once.
    ///
    /// # Errors
    /// An empty command; an invalid variable name.
    pub fn exec_command_in(
        &self,
        found: &FoundContainer,
        request: &PipedExec<'_>,
    ) -> Result<Command, RuntimeError> {
        check_piped(request)?;
        Ok(self.piped_command(&found.0.id, request))
    }

    /// The project's container when it runs, its owner checked: what
    /// [`Self::exec_command_in`] runs commands in.
    ///
    /// # Errors
    /// The container is missing, stopped or another project's, or the engine fails.
    pub fn running(&self, target: &Target) -> Result<FoundContainer, RuntimeError> {
        self.running_container(target).map(FoundContainer)
    }

    /// The exec command of [`Self::exec_command`] for the container `id`.
    fn piped_command(&self, id: &str, request: &PipedExec<'_>) -> Command {
        let mut cmd = self.engine_cmd();
        cmd.args([
            "exec",
            "-i",
            "--user",
            request.user,
            "--workdir",
            WORKSPACE_DIR,
        ]);
        for (name, value) in request.literal_env {
            cmd.arg("-e").arg(format!("{name}={value}"));
        }
        for name in request.env {
            // `-e NAME` without a value: the engine copies it from its environment.
            cmd.args(["-e", name]);
        }
        cmd.arg(id).args(request.cmd);
        cmd
    }

    /// Checks, as `user` in the running container, whether an unprivileged user may
    /// create a user namespace and a mount namespace in it: `unshare --user
    /// --map-root-user --mount true` (util-linux, part of every Debian base). That is what
    /// Codex's bubblewrap sandbox needs first; a refusal
    /// here means the sandbox cannot start, whatever the reason (seccomp, sysctl,
    /// a host security module).
    ///
    /// # Errors
    /// The container is missing, stopped or another project's, or the engine fails.
    pub fn probe_user_namespaces(
        &self,
        target: &Target,
        user: &str,
    ) -> Result<UsernsProbe, RuntimeError> {
        self.probe_user_namespaces_in(&self.running(target)?, user)
    }

    /// [`Self::probe_user_namespaces`] in the container [`Self::up`] or
    /// [`Self::container`] already found running, without asking the engine for it again.
    ///
    /// # Errors
    /// The engine fails.
    pub fn probe_user_namespaces_in(
        &self,
        found: &FoundContainer,
        user: &str,
    ) -> Result<UsernsProbe, RuntimeError> {
        let mut cmd = self.engine_cmd();
        cmd.args(["exec", "--user", user, "--workdir", WORKSPACE_DIR])
            .arg(&found.0.id)
            .args(USERNS_PROBE);
        let rendered = process::render(&cmd);
        let done = process::run(cmd, self.timeouts.query, &mut |_, _| {})?;
        // 125 and up: the probe did not run (the engine's own failure: 125, an `exec` the
        // runtime could not start: 126 on Docker, 255 on Podman, for example in a
        // container whose workspace folder was deleted; 127: no `unshare`). That says
        // nothing about the sandbox, and a seccomp fix would not help. `unshare` itself
        // exits 1 when it is refused, or dies of a signal.
        if done.status.code().is_some_and(|c| c >= 125) {
            return Err(failed(&rendered, &done));
        }
        let detail = done
            .stderr
            .lines()
            .chain(done.stdout.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or_default()
            .to_owned();
        Ok(UsernsProbe {
            works: done.success(),
            detail,
        })
    }

    /// Runs `cmd` as `user` in the container already found by [`Self::container`] or
    /// [`Self::up`] (the caller saw it running) and returns whether it succeeded and its
    /// standard output (what `doctor` reads, such as `/etc/aibox-version`), without
    /// asking the engine for the container again.
    ///
    /// # Errors
    /// The engine fails.
    pub fn exec_output_in(
        &self,
        found: &FoundContainer,
        user: &str,
        cmd: &[&str],
    ) -> Result<(bool, String), RuntimeError> {
        let mut command = self.engine_cmd();
        command
            .args(["exec", "--user", user])
            .arg(&found.0.id)
            .args(cmd);
        let done = process::run(command, self.timeouts.query, &mut |_, _| {})?;
        Ok((done.success(), done.stdout))
    }

    /// Whether `image` exists locally.
    pub fn image_exists(&self, image: &str) -> Result<bool, RuntimeError> {
        Ok(self.image_facts(image)?.is_some())
    }

    /// The id and build digest of `image`, `None` when it does not exist locally.
    fn image_facts(&self, image: &str) -> Result<Option<ImageFacts>, RuntimeError> {
        let Some((rendered, stdout)) = self.inspect_raw("image", image)? else {
            return Ok(None);
        };
        parse_image_inspect(&stdout).map_err(|detail| RuntimeError::UnexpectedOutput {
            command: rendered,
            detail,
        })
    }

    /// Removes the working containers a Podman build that Ctrl-C ended left behind (see
    /// [`crate::build_leftovers`]), and says so. Best effort: the interruption is the
    /// error to report, so a failure here is a note with the commands to run instead.
    fn remove_build_leftovers(&self, mut trace: BuildTrace, progress: Progress<'_>) {
        if self.detected.engine.engine != Engine::Podman || trace.is_empty() {
            return;
        }
        let quiet = &mut |_: Stream, _: &str| {};
        for base in trace.bases() {
            let mut cmd = self.engine_cmd();
            cmd.args(["image", "inspect", "--format", "{{.Id}}", &base]);
            if let Ok(done) = process::run(cmd, self.timeouts.query, quiet)
                && done.success()
            {
                trace.resolve(&base, &done.stdout);
            }
        }
        let mut cmd = self.engine_cmd();
        cmd.args(["ps", "--all", "--external", "--format", "json"]);
        let found = process::run(cmd, self.timeouts.query, quiet)
            .ok()
            .filter(process::Finished::success)
            .and_then(|done| build_leftovers::leftovers(&done.stdout, &trace, unix_now()).ok());
        let unsure = || {
            "the interrupted build may have left working containers behind: `podman ps \
             --all --external` lists them, `podman rm --force ID` removes one"
                .to_owned()
        };
        let line = match found {
            None => unsure(),
            Some(ids) if ids.is_empty() => return,
            Some(ids) => {
                let mut cmd = self.engine_cmd();
                cmd.args(["rm", "--force"]).args(&ids);
                if process::run(cmd, self.timeouts.stop, quiet).is_ok_and(|d| d.success()) {
                    format!(
                        "removed the {} working container(s) the interrupted build left behind",
                        ids.len()
                    )
                } else {
                    unsure()
                }
            }
        };
        progress(&Event::Note { line });
    }

    /// Removes the image `id` a rebuild replaced (or the one a recreated container ran,
    /// see [`Self::up`]) when no tag names it any more (each rebuild left one behind, a
    /// gigabyte or more: QA24); `what` says which, in the note. One that a tag still names is
    /// someone's; one that a container still uses is refused by the engine, which is no
    /// error here: it stays, as it would have.
    fn remove_replaced_image(&self, id: &str, what: &str, progress: Progress<'_>) {
        let Ok(Some((_, json))) = self.inspect_raw("image", id) else {
            return;
        };
        let untagged = serde_json::from_str::<serde_json::Value>(&json)
            .ok()
            .and_then(|v| v.get(0)?.get("RepoTags").cloned())
            .is_some_and(|tags| tags.is_null() || tags.as_array().is_some_and(Vec::is_empty));
        if !untagged {
            return;
        }
        let mut cmd = self.engine_cmd();
        cmd.args(["rmi", id]);
        if process::run(cmd, self.timeouts.stop, &mut |_, _| {}).is_ok_and(|d| d.success()) {
            let short = id.trim_start_matches("sha256:");
            progress(&Event::Note {
                line: format!(
                    "removed the image {what} ({})",
                    short.get(..12).unwrap_or(short)
                ),
            });
        }
    }

    /// `<engine> <kind> inspect <name>`: the command line and its JSON, `None` when the
    /// engine knows no such object.
    fn inspect_raw(
        &self,
        kind: &str,
        name: &str,
    ) -> Result<Option<(String, String)>, RuntimeError> {
        let mut cmd = self.engine_cmd();
        cmd.args([kind, "inspect", name]);
        let rendered = process::render(&cmd);
        let done = process::run(cmd, self.timeouts.query, &mut |_, _| {})?;
        if done.success() {
            Ok(Some((rendered, done.stdout)))
        } else if is_not_found(&done.stderr) {
            Ok(None)
        } else {
            Err(failed(&rendered, &done))
        }
    }

    /// The project's running container; an error when it is missing, stopped or another
    /// project's.
    fn running_container(&self, target: &Target) -> Result<Inspected, RuntimeError> {
        let found = self.find(target)?.ok_or_else(|| RuntimeError::NotRunning {
            container: target.container.clone(),
            state: "missing".to_owned(),
        })?;
        check_owner(&found, target)?;
        if !found.running {
            return Err(RuntimeError::NotRunning {
                container: found.name,
                state: found.status,
            });
        }
        Ok(found)
    }

    /// This checkout's container: aibox's own (by name), else the one the Dev Containers
    /// CLI (or VS Code) made for this checkout from the same committed files (by its
    /// labels). The caller checks the owner of what is found under aibox's name.
    fn find(&self, target: &Target) -> Result<Option<Inspected>, RuntimeError> {
        if let Some(own) = self.inspect(&target.container)? {
            return Ok(Some(own));
        }
        let mut folders = vec![target.checkout.clone()];
        if target.root.as_str() != target.checkout {
            folders.push(target.root.to_string());
        }
        for folder in folders {
            let ids = self.list_containers(
                &[
                    (PROJECT_LABEL, target.name.as_str()),
                    (COMPOSE_SERVICE_LABEL, target.service.as_str()),
                    (DEVCONTAINER_FOLDER_LABEL, folder.as_str()),
                ],
                false,
            )?;
            if let Some(id) = ids.first() {
                return self.inspect_container(id);
            }
        }
        Ok(None)
    }

    /// The last `tail` lines of the log of the container `found` (standard output and
    /// error), such as the egress proxy's refusals.
    ///
    /// # Errors
    /// The engine's CLI fails or does not answer in time.
    pub fn logs(&self, found: &FoundContainer, tail: u32) -> Result<String, RuntimeError> {
        let mut cmd = self.engine_cmd();
        cmd.args(["logs", "--tail", &tail.to_string(), &found.0.id]);
        let rendered = process::render(&cmd);
        let done = process::run(cmd, self.timeouts.query, &mut |_, _| {})?;
        if !done.success() {
            return Err(failed(&rendered, &done));
        }
        Ok(format!("{}{}", done.stdout, done.stderr))
    }

    /// The egress proxy container of Compose project `project` (`None` when there is
    /// none), found by its labels, so any Compose provider's naming works.
    fn find_proxy(&self, project: &str) -> Result<Option<Inspected>, RuntimeError> {
        let ids = self.list_containers(
            &[
                (aibox_config::container::EGRESS_PROXY_LABEL, "proxy"),
                (COMPOSE_PROJECT_LABELS[0], project),
            ],
            false,
        )?;
        match ids.first() {
            Some(id) => self.inspect_container(id),
            None => Ok(None),
        }
    }

    /// The `container inspect` JSON of a name or id, `None` when the engine knows no such
    /// container (the containers whose namespaces the project's joins, for the policy).
    ///
    /// # Errors
    /// The engine's CLI fails or does not answer in time.
    pub fn container_json(&self, name_or_id: &str) -> Result<Option<String>, RuntimeError> {
        Ok(self
            .inspect_raw("container", name_or_id)?
            .map(|(_, json)| json))
    }

    /// The container named `container`, `None` when there is none.
    fn inspect(&self, container: &str) -> Result<Option<Inspected>, RuntimeError> {
        // `inspect` also matches id prefixes; only a container with exactly this name counts.
        Ok(self
            .inspect_container(container)?
            .filter(|found| found.name == container))
    }

    /// `container inspect` of a name or id.
    fn inspect_container(&self, name_or_id: &str) -> Result<Option<Inspected>, RuntimeError> {
        let Some((rendered, stdout)) = self.inspect_raw("container", name_or_id)? else {
            return Ok(None);
        };
        parse_inspect(&stdout).map_err(|detail| RuntimeError::UnexpectedOutput {
            command: rendered,
            detail,
        })
    }

    /// Brings the project's container up as `up` decided: leaves one running as it is
    /// (returned, so it is not inspected again), starts or unpauses a stopped one, or has
    /// Compose create it (`recreate`: replacing the one there).
    fn start_or_create(
        &self,
        target: &Target,
        existing: Option<&Inspected>,
        recreate: bool,
        prints: &Fingerprints,
        progress: Progress<'_>,
    ) -> Result<Option<Inspected>, RuntimeError> {
        match existing {
            Some(found) if found.running && !recreate => {
                progress(&Event::AlreadyRunning {
                    container: target.container.clone(),
                });
                return Ok(Some(found.clone()));
            }
            Some(found) if !recreate => {
                progress(&Event::Starting {
                    container: target.container.clone(),
                });
                // A paused container cannot be started, only unpaused.
                let verb = if found.paused { "unpause" } else { "start" };
                let mut cmd = self.engine_cmd();
                cmd.args([verb, &target.container]);
                run_checked(cmd, self.timeouts.start, progress)?;
            }
            _ => {
                progress(&Event::Starting {
                    container: target.container.clone(),
                });
                self.prepare_internal_network(target, progress)?;
                let mut args = vec!["up", "-d", "--no-build"];
                if existing.is_some() {
                    args.push("--force-recreate");
                }
                let mut cmd = self.compose(target, &args);
                cmd.env(CONFIG_DIGEST_VAR, &prints.config);
                if let Some(userns) = self.keep_id(prints.owner.unwrap_or(target.ids))? {
                    // Read by every `podman create`/`run` that podman-compose starts.
                    cmd.env("PODMAN_USERNS", userns);
                }
                let rendered = process::render(&cmd);
                let done = run_checked(cmd, self.timeouts.start, progress)?;
                // podman-compose 1.0 exits 0 when `podman run` failed: fail now with its
                // output, not after the running deadline.
                if self.inspect(&target.container)?.is_none() {
                    return Err(not_created(target, &rendered, &done));
                }
            }
        }
        Ok(None)
    }

    /// Waits until the project's container runs (starting it once when podman-compose
    /// left it created) and returns it as last inspected.
    fn wait_running(
        &self,
        target: &Target,
        progress: Progress<'_>,
    ) -> Result<Inspected, RuntimeError> {
        progress(&Event::Waiting {
            container: target.container.clone(),
        });
        let deadline = Instant::now() + self.timeouts.running;
        let mut last_state = String::from("no such container");
        let mut started_by_hand = false;
        loop {
            if let Some(found) = self.inspect(&target.container)? {
                if found.running {
                    return Ok(found);
                }
                if matches!(found.status.as_str(), "exited" | "dead" | "stopped") {
                    return Err(RuntimeError::Exited {
                        container: target.container.clone(),
                        status: found.status,
                        engine: self.engine_name(),
                    });
                }
                // podman-compose 1.0 ignores a failed `podman run -d`, which leaves the
                // container `created` and never started: start it once ourselves, so a
                // transient failure (seen under load) is retried and a real one is shown.
                if found.status == "created" && !started_by_hand {
                    started_by_hand = true;
                    let mut cmd = self.engine_cmd();
                    cmd.args(["start", &target.container]);
                    let done = process::run(cmd, self.timeouts.query, &mut |_, _| {})?;
                    if !done.success() {
                        return Err(self.start_failed(target, &found, &done));
                    }
                }
                last_state = found.status;
            }
            if Instant::now() >= deadline {
                return Err(RuntimeError::StartTimeout {
                    container: target.container.clone(),
                    seconds: self.timeouts.running.as_secs(),
                    engine: self.engine_name(),
                    state: last_state,
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The error for a created container that would not start. It never ran, so there
    /// are no logs to keep: ours (label-checked) is removed, anyone else's is named.
    fn start_failed(
        &self,
        target: &Target,
        found: &Inspected,
        done: &process::Finished,
    ) -> RuntimeError {
        let engine = self.engine_name();
        let leftover = if check_owner(found, target).is_ok() {
            let mut cmd = self.engine_cmd();
            cmd.args(["rm", "-f", &found.id]);
            match process::run(cmd, self.timeouts.stop, &mut |_, _| {}) {
                Ok(rm) if rm.success() => "the half-created container was removed".to_owned(),
                _ => format!(
                    "it was left behind: remove it with `{engine} rm -f {}`",
                    target.container
                ),
            }
        } else {
            format!(
                "container `{}` was left behind (it is not this project's)",
                target.container
            )
        };
        RuntimeError::StartFailed {
            container: target.container.clone(),
            leftover,
            output: tail_text(&done.tail),
            hint: start_hint(&done.tail),
        }
    }

    /// On Podman, makes the project's internal egress network before Compose does:
    /// internal and without a DNS server. podman-compose 1.0 cannot ask for that (nor run
    /// a service with `network_mode: none`), and the server netavark gives an internal
    /// network (aardvark-dns 1.4) answers outside names through the host's resolvers: a
    /// tunnel out. Without it the network has no gateway address either, so the agent
    /// alone on it reaches nothing. One of that name made otherwise (by podman-compose,
    /// or an older aibox) is replaced, after `down` of the project's containers on it.
    fn prepare_internal_network(
        &self,
        target: &Target,
        progress: Progress<'_>,
    ) -> Result<(), RuntimeError> {
        if !target.egress || self.detected.engine.engine != Engine::Podman {
            return Ok(());
        }
        let internal = aibox_config::container::EGRESS_NETWORKS[0];
        let network = internal_network(&target.project);
        let mut cmd = self.engine_cmd();
        cmd.args(["network", "inspect", &network]);
        let done = process::run(cmd, self.timeouts.query, &mut |_, _| {})?;
        if done.success() {
            if !labelled_for(&done.stdout, &target.project) {
                return Err(RuntimeError::ForeignNetwork {
                    network,
                    project: target.project.clone(),
                });
            }
            if network_is_sealed(&done.stdout) {
                return Ok(());
            }
            run_checked(
                self.compose(target, &["down"]),
                self.timeouts.stop,
                progress,
            )?;
            let mut cmd = self.engine_cmd();
            cmd.args(["network", "rm", &network]);
            run_checked(cmd, self.timeouts.query, progress)?;
        }
        let mut cmd = self.engine_cmd();
        cmd.args(["network", "create", "--internal", "--disable-dns"]);
        for label in COMPOSE_PROJECT_LABELS {
            cmd.args(["--label", &format!("{label}={}", target.project)]);
        }
        cmd.args(["--label", &format!("com.docker.compose.network={internal}")]);
        cmd.arg(&network);
        run_checked(cmd, self.timeouts.query, progress)?;
        Ok(())
    }

    /// `podman-compose` 1.0 leaves the project's default network behind on `down`;
    /// remove it when its labels say it is ours. Best effort: a network still in use
    /// (or already gone) is not an error.
    fn remove_leftover_network(&self, target: &Target, progress: Progress<'_>) {
        if self.detected.compose.kind != ComposeKind::PodmanCompose {
            return;
        }
        self.remove_network(&target.project, progress);
    }

    /// Removes Compose project `project`'s default network, and the egress networks of
    /// `[network] egress`, when their labels say they are that project's. Best effort: a
    /// network still in use (or already gone) is not an error.
    fn remove_network(&self, project: &str, progress: Progress<'_>) {
        for name in std::iter::once("default").chain(aibox_config::container::EGRESS_NETWORKS) {
            self.remove_projects("network", project, &format!("{project}_{name}"), progress);
        }
    }

    /// Removes the volumes the generated Compose file declares for Compose project
    /// `project` (the egress proxy's socket volume), when their labels say they are that
    /// project's: `down` left one per checkout behind. Best effort, like the networks.
    /// Named volumes of the user's own Compose files are theirs and stay.
    fn remove_volumes(&self, project: &str, progress: Progress<'_>) {
        let volume = format!(
            "{project}_{}",
            aibox_config::container::EGRESS_SOCKET_VOLUME
        );
        self.remove_projects("volume", project, &volume, progress);
    }

    /// Removes the `kind` (`network` or `volume`) `name` when its labels say it is
    /// Compose project `project`'s. Best effort: one still in use (or already gone) is
    /// not an error; a refusal is shown.
    fn remove_projects(&self, kind: &str, project: &str, name: &str, progress: Progress<'_>) {
        let mut cmd = self.engine_cmd();
        cmd.args([kind, "inspect", name]);
        let Ok(done) = process::run(cmd, self.timeouts.query, &mut |_, _| {}) else {
            return;
        };
        if !done.success() || !labelled_for(&done.stdout, project) {
            return;
        }
        let mut cmd = self.engine_cmd();
        cmd.args([kind, "rm", name]);
        if let Ok(done) = process::run(cmd, self.timeouts.query, &mut |_, _| {})
            && !done.success()
        {
            for line in done.tail {
                progress(&Event::Output { line });
            }
        }
    }

    /// On rootless Podman, the `PODMAN_USERNS` value that maps the host user to the
    /// container user's IDs (`keep-id:uid=U,gid=G`), so the agent can write the bind-mounted
    /// project and harness folders; otherwise the container's IDs are sub-IDs the host user
    /// owns nothing as. `None` on Docker and rootful Podman (the image already has the
    /// owner's IDs there).
    fn keep_id(&self, (uid, gid): (u32, u32)) -> Result<Option<String>, RuntimeError> {
        if self.detected.engine.engine != Engine::Podman {
            return Ok(None);
        }
        let mut cmd = self.engine_cmd();
        cmd.args(["info", "--format", "{{.Host.Security.Rootless}}"]);
        let rendered = process::render(&cmd);
        let done = process::run(cmd, self.timeouts.query, &mut |_, _| {})?;
        if !done.success() {
            return Err(failed(&rendered, &done));
        }
        Ok(keep_id_value(&done.stdout, uid, gid))
    }

    fn engine_name(&self) -> String {
        self.detected.engine.engine.as_str().to_owned()
    }

    fn engine_cmd(&self) -> Command {
        let mut cmd = Command::new(&self.detected.engine.program);
        cmd.envs(self.extra_env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    fn compose(&self, target: &Target, args: &[&str]) -> Command {
        let mut cmd = self.detected.compose.command();
        cmd.envs(self.extra_env.iter().map(|(k, v)| (k, v)));
        cmd.current_dir(target.root.join(".devcontainer"));
        // The internal egress network is this checkout's own (the one
        // `prepare_internal_network` makes), not the name other front ends share.
        cmd.env(
            aibox_config::container::EGRESS_NETWORK_VAR,
            internal_network(&target.project),
        );
        cmd.arg("-p").arg(&target.project);
        for file in target.compose_files() {
            cmd.arg("-f").arg(file);
        }
        cmd.args(args);
        cmd
    }
}

fn run_checked(
    cmd: Command,
    timeout: Duration,
    progress: Progress<'_>,
) -> Result<process::Finished, RuntimeError> {
    let rendered = process::render(&cmd);
    let done = process::run(cmd, timeout, &mut |_: Stream, line| {
        progress(&Event::Output {
            line: line.to_owned(),
        });
    })?;
    if done.success() {
        Ok(done)
    } else {
        Err(failed(&rendered, &done))
    }
}

fn require_compose_file(target: &Target) -> Result<(), RuntimeError> {
    let path = target.compose_file();
    if path.is_file() {
        Ok(())
    } else {
        Err(RuntimeError::MissingComposeFile { path })
    }
}

fn failed(command: &str, done: &process::Finished) -> RuntimeError {
    RuntimeError::CommandFailed {
        command: command.to_owned(),
        status: process::describe_status(done.status),
        output: tail_text(&done.tail),
    }
}

/// The cause and fix of a failed container start that the engine's output names, after
/// a blank line; empty for any other output. The one known is a limit of the machine, not
/// of the project: sandboxes and nested containers where the session may not raise
/// resource limits (no `CAP_SYS_RESOURCE`), so Podman's default ulimits fail at start.
/// The files named are those Podman 4.3 reads: as root it ignores
/// `~/.config/containers/containers.conf` (tried: the start failed the same way).
fn start_hint(lines: &[String]) -> String {
    if lines.iter().any(|l| l.contains("error setting rlimit")) {
        "\n\nthe engine could not give the container its default resource limits (open \
         files, processes): this session may not raise them (it lacks CAP_SYS_RESOURCE, as in \
         some CI runners and nested containers). Lower Podman's defaults with `[containers]` \
         `default_ulimits = [\"nofile=1024:1024\", \"nproc=4096:4096\"]` in a file of \
         /etc/containers/containers.conf.d/ (Podman as root) or in \
         ~/.config/containers/containers.conf (rootless Podman); then run `aibox up` again"
            .to_owned()
    } else if lines.iter().any(|l| l.contains("slirp4netns")) {
        format!("\n\n{}", build_log::TUN_HINT)
    } else {
        String::new()
    }
}

/// Output lines, one per line, for an error message.
fn tail_text(lines: &[String]) -> String {
    if lines.is_empty() {
        "(nothing)".to_owned()
    } else {
        lines.join("\n")
    }
}

/// Whether a build ended because of Ctrl-C, which reaches the whole foreground process
/// group: the builder itself ended by `SIGINT` (or with a shell's 130 for it), a step's
/// process did (the engine says `exit status 130`), or Podman caught it and stopped in
/// the middle of a step without an error line ([`build_log::stopped_silently`]).
fn interrupted(done: &process::Finished) -> bool {
    const SIGINT: i32 = 2;
    done.status.signal() == Some(SIGINT)
        || done.status.code() == Some(128 + SIGINT)
        || done
            .tail
            .iter()
            .any(|l| l.contains("exit status 130") || l.contains("signal: interrupt"))
        || build_log::stopped_silently(&done.tail)
}

/// The error for a build Ctrl-C ended, at the step it was in.
fn interrupted_at(target: &Target, log: &BuildLog) -> RuntimeError {
    RuntimeError::Interrupted {
        image: target.image.clone(),
        step: log
            .failing_step()
            .map_or_else(String::new, |s| format!(" at {s}")),
    }
}

/// Seconds since the epoch, as the engine dates what it creates.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The error for a failed build: the image, the failing step, the likely cause and the
/// last lines of output (or that Ctrl-C stopped it).
fn build_failed(target: &Target, log: &BuildLog, done: &process::Finished) -> RuntimeError {
    let step = log.failing_step();
    // A step from `Dockerfile.local` is the user's to fix; engines print it verbatim.
    let in_local = step.is_some_and(|s| {
        let local = target.root.join(aibox_config::layout::DOCKERFILE_LOCAL);
        fs_err::read_to_string(local).is_ok_and(|text| {
            build_log::instructions(&text).contains(&build_log::normalize(&s.instruction))
        })
    });
    let output = build_log::failure_output(&done.tail, step);
    RuntimeError::BuildFailed {
        image: target.image.clone(),
        step: step.map_or_else(String::new, |s| format!(" at {s}")),
        hint: build_log::hint(output, step, in_local),
        output: tail_text(
            &output
                .iter()
                .map(|l| build_log::shorten(l))
                .collect::<Vec<_>>(),
        ),
    }
}

/// The error for a container that Compose did not create.
fn not_created(target: &Target, command: &str, done: &process::Finished) -> RuntimeError {
    let text = done.tail.join("\n").to_ascii_lowercase();
    let hint = if text.contains("trying to pull") || text.contains("image not known") {
        format!(
            "the image `{}` is missing, so the engine tried to pull it: build it with \
             `aibox up --build`",
            target.image
        )
    } else if text.contains("already in use") {
        format!(
            "another container already uses the name `{}`: remove it, or give this \
             checkout's container another name (`[container] container_name` in \
             .aibox-local.toml)",
            target.container
        )
    } else {
        "fix the cause shown below; `-v` shows every line Compose printed".to_owned()
    };
    RuntimeError::NotCreated {
        container: target.container.clone(),
        command: command.to_owned(),
        hint,
        output: tail_text(build_log::failure_output(&done.tail, None)),
    }
}

/// Podman says "no such container"/"image not known"; Docker says "No such container".
fn is_not_found(stderr: &str) -> bool {
    let lower = stderr.to_ascii_lowercase();
    lower.contains("no such") || lower.contains("image not known")
}

/// Refuses a piped exec request with no command or an invalid variable name, before the
/// engine is asked anything.
fn check_piped(request: &PipedExec<'_>) -> Result<(), RuntimeError> {
    if request.cmd.is_empty() {
        return Err(RuntimeError::EmptyCommand);
    }
    let names = request
        .literal_env
        .iter()
        .map(|(name, _)| name)
        .chain(request.env);
    if let Some(name) = names.into_iter().find(|n| !valid_env_name(n)) {
        return Err(RuntimeError::InvalidEnvName { name: name.clone() });
    }
    Ok(())
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses `container inspect` JSON (an array with one object) into the name and facts.
fn parse_inspect(stdout: &str) -> Result<Option<Inspected>, String> {
    let Some(first) = first_inspected(stdout)? else {
        return Ok(None);
    };
    let first = &first;
    let text = |v: &serde_json::Value, what: &str| {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("`{what}` is missing"))
    };
    let id = text(&first["Id"], "Id")?;
    let name = text(&first["Name"], "Name")?;
    let status = text(&first["State"]["Status"], "State.Status")?;
    let running = first["State"]["Running"]
        .as_bool()
        .ok_or_else(|| "`State.Running` is missing".to_owned())?;
    // Docker says `Running: true` of a paused container, Podman 4.3 `false`; both say
    // `Paused` and the status word.
    let paused = first["State"]["Paused"].as_bool() == Some(true) || status == "paused";
    let running = running && !paused;
    let labels = match &first["Config"]["Labels"] {
        serde_json::Value::Object(map) => map
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
            .collect(),
        _ => BTreeMap::new(),
    };
    let image = first["Config"]["Image"]
        .as_str()
        .or_else(|| first["ImageName"].as_str())
        .unwrap_or_default()
        .to_owned();
    let image_id = bare_id(first["Image"].as_str().unwrap_or_default());
    Ok(Some(Inspected {
        id,
        name: name.trim_start_matches('/').to_owned(),
        status,
        running,
        paused,
        labels,
        image,
        image_id,
        json: stdout.to_owned(),
    }))
}

/// The first object of an `inspect` answer (a JSON array), `None` for an empty one.
fn first_inspected(stdout: &str) -> Result<Option<serde_json::Value>, String> {
    let value: serde_json::Value =
        serde_json::from_str(stdout).map_err(|e| format!("not JSON: {e}"))?;
    match value {
        serde_json::Value::Array(items) => Ok(items.into_iter().next()),
        _ => Err("not a JSON array".to_owned()),
    }
}

/// An image id without its `sha256:` prefix (Docker writes it, Podman does not).
fn bare_id(id: &str) -> String {
    id.trim_start_matches("sha256:").to_owned()
}

/// Parses `image inspect` JSON: the id and the build-digest label (Docker keeps labels in
/// `Config.Labels`, Podman in both `Config.Labels` and `Labels`).
fn parse_image_inspect(stdout: &str) -> Result<Option<ImageFacts>, String> {
    let Some(first) = first_inspected(stdout)? else {
        return Ok(None);
    };
    let first = &first;
    let id = first["Id"].as_str().ok_or("`Id` is missing")?;
    let build_digest = [&first["Config"]["Labels"], &first["Labels"]]
        .into_iter()
        .find_map(|labels| labels[BUILD_DIGEST_LABEL].as_str())
        .unwrap_or_default()
        .to_owned();
    Ok(Some(ImageFacts {
        id: bare_id(id),
        build_digest,
    }))
}

impl ImageFacts {
    /// Why the image must be rebuilt, `None` when it matches the files. `container` is
    /// this checkout's container: when its configuration digest still matches the files,
    /// nothing changed here since it was created, so another checkout of the project
    /// (they share the image tag) or another tool rebuilt the image from other files.
    fn stale_reason(
        &self,
        prints: &Fingerprints,
        container: Option<&Inspected>,
    ) -> Option<&'static str> {
        let unchanged_here =
            container.is_some_and(|c| c.labels.get(CONFIG_DIGEST_LABEL) == Some(&prints.config));
        if self.build_digest.is_empty() {
            Some("was not built by aibox (it has no `aibox.build-digest` label)")
        } else if self.build_digest != prints.build && unchanged_here {
            Some(
                "was rebuilt from other files by another checkout of this project (checkouts \
                 of one project share the image tag; nothing changed in this checkout since \
                 its container was created)",
            )
        } else if self.build_digest != prints.build {
            Some(
                "was built from other files than .devcontainer/ holds now (the Dockerfile, \
                 Dockerfile.local, the personal CA or the project owner changed)",
            )
        } else {
            None
        }
    }
}

/// Why the container must be recreated, `None` when it matches the files and the image.
fn stale_container_reason(
    found: &Inspected,
    prints: &Fingerprints,
    image_id: Option<&str>,
) -> Option<&'static str> {
    let label = found
        .labels
        .get(CONFIG_DIGEST_LABEL)
        .map_or("", String::as_str);
    // `none` is the generated Compose file's default, when another tool starts it.
    if label.is_empty() || label == "none" {
        Some("was not created by aibox `up` (it has no configuration digest)")
    } else if label != prints.config {
        Some(
            "was created from other Compose files, settings or lifecycle commands than now, or \
             for another folder at this path (deleted and cloned again, say)",
        )
    } else if image_id.is_some_and(|id| id != found.image_id) {
        Some("runs an older build of the image")
    } else {
        None
    }
}

/// The `PODMAN_USERNS` value when `podman info` says rootless (`true`), else `None`.
fn keep_id_value(rootless: &str, uid: u32, gid: u32) -> Option<String> {
    (rootless.trim() == "true").then(|| format!("keep-id:uid={uid},gid={gid}"))
}

impl ProxyStatus {
    /// The status of the egress proxy container `found` (`None`: missing), as found by
    /// [`Runtime::egress_proxy`].
    #[must_use]
    pub fn of(found: Option<&FoundContainer>) -> Self {
        proxy_status_of(found.map(|f| &f.0))
    }
}

/// The status of the egress proxy container `found` (`None`: missing).
fn proxy_status_of(found: Option<&Inspected>) -> ProxyStatus {
    match found {
        Some(f) => ProxyStatus {
            container: f.name.clone(),
            state: if f.running {
                ContainerState::Running
            } else {
                ContainerState::Stopped
            },
            engine_status: Some(f.status.clone()),
        },
        None => ProxyStatus {
            container: aibox_config::container::EGRESS_PROXY_SERVICE.to_owned(),
            state: ContainerState::Missing,
            engine_status: None,
        },
    }
}

/// The internal egress network of Compose project `project` under `aibox up`
/// (`<project>_aibox-internal`, as Compose itself would name it).
fn internal_network(project: &str) -> String {
    format!("{project}_{}", aibox_config::container::EGRESS_NETWORKS[0])
}

/// Whether Podman's `network inspect` output is an internal network without a DNS server.
fn network_is_sealed(stdout: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(stdout).is_ok_and(|value| {
        let first = &value[0];
        first["internal"].as_bool() == Some(true) && first["dns_enabled"].as_bool() == Some(false)
    })
}

/// Whether `network inspect` or `volume inspect` output (the same label fields) describes
/// a network or volume of Compose project `project`.
fn labelled_for(stdout: &str, project: &str) -> bool {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(stdout) else {
        return false;
    };
    let first = &value[0];
    // Podman's own format says `labels`; the Docker-compatible one says `Labels`.
    let labels = if first["labels"].is_object() {
        &first["labels"]
    } else {
        &first["Labels"]
    };
    COMPOSE_PROJECT_LABELS
        .iter()
        .any(|l| labels[*l].as_str() == Some(project))
}

/// Refuses a container that is not this checkout's: another project's, another checkout's
/// (its [`CHECKOUT_LABEL`] or [`DEVCONTAINER_FOLDER_LABEL`] names another folder), or one
/// that says nothing about its checkout (an earlier aibox's, or made by hand).
fn check_owner(found: &Inspected, target: &Target) -> Result<(), RuntimeError> {
    let label = |l: &str| found.labels.get(l).map(String::as_str);
    let owner = match label(PROJECT_LABEL) {
        None => Some(format!(
            "something other than aibox (it has no `{PROJECT_LABEL}` label)"
        )),
        Some(p) if p != target.name => Some(format!("aibox project `{p}`")),
        Some(_) => match (label(CHECKOUT_LABEL), label(DEVCONTAINER_FOLDER_LABEL)) {
            (Some(path), _) => {
                (!same_folder(path, &target.checkout)).then(|| format!("the checkout at {path}"))
            }
            (None, Some(folder)) => (!same_folder(folder, &target.checkout)).then(|| {
                format!(
                    "the Dev Containers CLI (VS Code) container of {folder}; stop it from there"
                )
            }),
            (None, None) => Some(format!(
                "no checkout (it has no `{CHECKOUT_LABEL}` label: made by an earlier aibox or by \
                 hand)"
            )),
        },
    };
    match owner {
        None => Ok(()),
        Some(owner) => Err(RuntimeError::ForeignContainer {
            container: found.name.clone(),
            project: target.name.clone(),
            checkout: target.checkout.clone(),
            owner,
        }),
    }
}

/// Whether a label's folder is the checkout: the same text, or the same folder once
/// resolved (the Dev Containers CLI records the folder as it was given).
fn same_folder(label: &str, checkout: &str) -> bool {
    label == checkout
        || fs_err::canonicalize(label)
            .is_ok_and(|p| p.as_os_str() == std::ffi::OsStr::new(checkout))
}

#[cfg(test)]
mod tests {
    /// A start that fails on the machine's resource limits gets the cause and fix; other
    /// output gets none. The line is Podman 4.3's with runc, seen on this kind of machine.
    #[test]
    fn start_failures_of_machine_limits_are_explained() {
        let hint = |line: &str| super::start_hint(&[line.to_owned()]);
        let rlimit = hint(
            "Error: unable to start container \"f913\": runc: runc create failed: unable to \
             start container process: error during container init: error setting rlimits for \
             ready process: error setting rlimit type 7: operation not permitted: OCI \
             permission denied",
        );
        assert!(rlimit.starts_with("\n\n"), "{rlimit}");
        assert!(rlimit.contains("default_ulimits"), "{rlimit}");
        assert!(
            rlimit.contains("/etc/containers/containers.conf.d/ (Podman as root)"),
            "{rlimit}"
        );
        assert_eq!(hint("Error: no such image"), "");
        // Rootless Podman where /dev/net/tun is 0600 (Podman 4.3, seen here).
        let tun = hint(
            "Error: /usr/bin/slirp4netns failed: \"open(\\\"/dev/net/tun\\\"): Permission \
             denied\\nchild failed(1)\\n\"",
        );
        assert!(
            tun.starts_with("\n\n") && tun.contains("chmod 0666 /dev/net/tun"),
            "{tun}"
        );
    }

    use super::*;

    fn target() -> Target {
        Target {
            root: "/p".into(),
            project: "demo-1a2b3c4d".into(),
            container: "demo-1a2b3c4d".into(),
            name: "demo".into(),
            service: "demo".into(),
            checkout: "/src/a/demo".into(),
            image: "demo-aibox:0.1.0".into(),
            user: "aibox".into(),
            ids: (1000, 1000),
            egress: false,
            proxy: false,
            lifecycle: Vec::new(),
        }
    }

    #[test]
    fn rootless_podman_maps_the_host_user_to_the_container_user() {
        assert_eq!(
            keep_id_value("true\n", 1001, 1002).as_deref(),
            Some("keep-id:uid=1001,gid=1002")
        );
        assert_eq!(keep_id_value("false\n", 1001, 1002), None);
        assert_eq!(keep_id_value("", 1001, 1002), None);
    }

    fn with_labels(labels: &[(&str, &str)]) -> Inspected {
        Inspected {
            id: "abc".into(),
            name: "demo-1a2b3c4d".into(),
            status: "running".into(),
            running: true,
            paused: false,
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            image: "x".into(),
            image_id: "1".into(),
            json: String::new(),
        }
    }

    #[test]
    fn this_checkouts_containers_are_accepted() {
        // aibox's own, labelled with this checkout's path.
        check_owner(
            &with_labels(&[(PROJECT_LABEL, "demo"), (CHECKOUT_LABEL, "/src/a/demo")]),
            &target(),
        )
        .unwrap();
        // The Dev Containers CLI's (or VS Code's) for this folder, under its own Compose
        // project name.
        check_owner(
            &with_labels(&[
                (PROJECT_LABEL, "demo"),
                ("com.docker.compose.project", "demo_devcontainer"),
                (DEVCONTAINER_FOLDER_LABEL, "/src/a/demo"),
            ]),
            &target(),
        )
        .unwrap();
    }

    #[test]
    fn other_checkouts_and_projects_are_refused() {
        for (labels, owner) in [
            (
                vec![],
                "something other than aibox (it has no `aibox.project` label)",
            ),
            (vec![(PROJECT_LABEL, "other")], "aibox project `other`"),
            (
                vec![(PROJECT_LABEL, "demo"), (CHECKOUT_LABEL, "/src/b/demo")],
                "the checkout at /src/b/demo",
            ),
            (
                vec![
                    (PROJECT_LABEL, "demo"),
                    ("com.docker.compose.project", "demo_devcontainer"),
                    (DEVCONTAINER_FOLDER_LABEL, "/src/b/demo"),
                ],
                "the Dev Containers CLI (VS Code) container of /src/b/demo; stop it from there",
            ),
            (
                vec![
                    (PROJECT_LABEL, "demo"),
                    ("com.docker.compose.project", "demo"),
                ],
                "no checkout (it has no `aibox.checkout` label: made by an earlier aibox or by \
                 hand)",
            ),
        ] {
            let err = check_owner(&with_labels(&labels), &target()).unwrap_err();
            match &err {
                RuntimeError::ForeignContainer { owner: got, .. } => assert_eq!(got, owner),
                other => panic!("unexpected {other:?}"),
            }
            let text = err.to_string();
            assert!(
                text.contains("checkout of project `demo` (/src/a/demo)"),
                "{text}"
            );
        }
    }

    #[test]
    fn parses_podman_and_docker_inspect() {
        let podman = r#"[{"Id":"1234","Name":"demo","State":{"Status":"running","Running":true},
            "ImageName":"demo-aibox:0.1.0","Config":{"Image":"demo-aibox:0.1.0",
            "Labels":{"aibox.project":"demo"}}}]"#;
        let c = parse_inspect(podman).unwrap().unwrap();
        assert_eq!(c.name, "demo");
        assert_eq!(
            (c.id.as_str(), c.status.as_str(), c.running),
            ("1234", "running", true)
        );
        assert_eq!(
            c.labels.get(PROJECT_LABEL).map(String::as_str),
            Some("demo")
        );
        let docker = r#"[{"Id":"99","Name":"/demo","State":{"Status":"exited","Running":false},
            "Config":{"Image":"demo-aibox:0.1.0","Labels":null}}]"#;
        let c = parse_inspect(docker).unwrap().unwrap();
        assert_eq!(c.name, "demo", "Docker's leading `/` is dropped");
        assert!(!c.running);
        assert!(c.labels.is_empty());
        assert!(parse_inspect("[]").unwrap().is_none());
        assert!(parse_inspect("{").unwrap_err().starts_with("not JSON"));
        assert_eq!(
            parse_inspect(r#"[{"Name":"x"}]"#).unwrap_err(),
            "`Id` is missing"
        );
    }

    /// Ctrl-C during a build is an interruption, whichever process it ended; a step that
    /// fails on its own is not.
    #[test]
    fn interrupted_builds_are_told_from_failed_ones() {
        let sh = |script: &str| {
            let mut cmd = std::process::Command::new("sh");
            cmd.args(["-c", script]);
            process::run(cmd, Duration::from_secs(10), &mut |_, _| {}).unwrap()
        };
        // SIGINT back at its default first: a shell started in the background (as CI may
        // run the tests) inherits it ignored, and `kill -INT` would then do nothing.
        assert!(interrupted(&sh(
            "exec env --default-signal=INT sh -c 'kill -INT $$'"
        )));
        assert!(interrupted(&sh("exit 130")));
        assert!(interrupted(&sh(
            "echo 'Error: building at STEP \"RUN sleep 30\": while running runtime: exit status \
             130' >&2; exit 125"
        )));
        assert!(!interrupted(&sh(
            "echo 'Error: building at STEP \"RUN exit 7\": while running runtime: exit status 7' \
             >&2; exit 125"
        )));
        assert!(!interrupted(&sh("kill -TERM $$")));
        // Podman 4.3 on Ctrl-C: the step header, then only podman-compose's exit code.
        assert!(interrupted(&sh(
            "echo 'STEP 14/18: RUN sleep 30'; echo 'exit code: 1'; exit 1"
        )));
        assert!(!interrupted(&sh(
            "echo 'STEP 14/18: RUN exit 7'; echo 'Error: building at STEP \"RUN exit 7\": \
             while running runtime: exit status 7' >&2; echo 'exit code: 7'; exit 7"
        )));
    }

    /// An image rebuilt by another checkout is named as such when this checkout's files
    /// did not change since its container was created; otherwise the files changed here.
    #[test]
    fn an_image_rebuilt_by_another_checkout_is_named_as_the_cause() {
        let prints = Fingerprints {
            build: "sha256:here".into(),
            config: "sha256:config-here".into(),
            owner: None,
        };
        let image = ImageFacts {
            id: "1".into(),
            build_digest: "sha256:other-checkout".into(),
        };
        let mut container = with_labels(&[(CONFIG_DIGEST_LABEL, "sha256:config-here")]);
        let shared = image.stale_reason(&prints, Some(&container)).unwrap();
        assert!(shared.contains("another checkout"), "{shared}");
        container
            .labels
            .insert(CONFIG_DIGEST_LABEL.into(), "sha256:config-before".into());
        for found in [Some(&container), None] {
            let here = image.stale_reason(&prints, found).unwrap();
            assert!(here.contains("Dockerfile.local"), "{here}");
        }
        let current = ImageFacts {
            build_digest: prints.build.clone(),
            ..image
        };
        assert_eq!(current.stale_reason(&prints, Some(&container)), None);
    }

    /// A paused container neither runs nor is stopped, whichever way the engine says it.
    #[test]
    fn paused_containers_are_paused_on_podman_and_docker() {
        for state in [
            r#"{"Status":"paused","Running":false,"Paused":true}"#,
            r#"{"Status":"paused","Running":true,"Paused":true}"#,
        ] {
            let json = format!(r#"[{{"Id":"1","Name":"demo","State":{state},"Config":{{}}}}]"#);
            let c = parse_inspect(&json).unwrap().unwrap();
            assert!(c.paused && !c.running, "{state}");
        }
    }

    #[test]
    fn compose_files_in_devcontainer_json_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = target();
        t.root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
        assert_eq!(
            t.compose_files(),
            [t.root.join(layout::COMPOSE)],
            "only the generated file"
        );
        fs_err::create_dir_all(t.root.join(".devcontainer")).unwrap();
        fs_err::write(t.root.join(layout::COMPOSE_LOCAL), "").unwrap();
        assert_eq!(
            t.compose_files(),
            [
                t.root.join(layout::COMPOSE),
                t.root.join(layout::COMPOSE_LOCAL)
            ]
        );
        fs_err::write(t.root.join(layout::COMPOSE_OVERRIDE), "").unwrap();
        assert_eq!(
            t.compose_files(),
            [
                t.root.join(layout::COMPOSE),
                t.root.join(layout::COMPOSE_OVERRIDE),
                t.root.join(layout::COMPOSE_LOCAL)
            ]
        );
    }

    #[test]
    fn only_our_networks_are_removed() {
        let ours = r#"[{"name":"demo_default","labels":{"io.podman.compose.project":"demo"}}]"#;
        assert!(labelled_for(ours, "demo"));
        assert!(!labelled_for(ours, "other"));
        let docker = r#"[{"Name":"demo_default","Labels":{"com.docker.compose.project":"demo"}}]"#;
        assert!(labelled_for(docker, "demo"));
        assert!(!labelled_for(
            r#"[{"name":"demo_default","labels":{}}]"#,
            "demo"
        ));
        assert!(!labelled_for("[]", "demo"));
        assert!(!labelled_for("not json", "demo"));
    }

    /// Podman 4.3's `network inspect` of the internal network as podman-compose 1.0 makes
    /// it (a DNS server), as `up` makes it, and a routed one.
    #[test]
    fn only_an_internal_network_without_dns_is_sealed() {
        let inspect = |internal: bool, dns: bool| {
            format!(
                r#"[{{"name": "demo_aibox-internal", "driver": "bridge",
                     "subnets": [{{"subnet": "10.89.11.0/24"}}], "ipv6_enabled": false,
                     "internal": {internal}, "dns_enabled": {dns},
                     "labels": {{"io.podman.compose.project": "demo"}}}}]"#
            )
        };
        assert!(network_is_sealed(&inspect(true, false)));
        assert!(!network_is_sealed(&inspect(true, true)));
        assert!(!network_is_sealed(&inspect(false, false)));
        assert!(!network_is_sealed(r#"[{"name": "demo_aibox-internal"}]"#));
        assert!(!network_is_sealed("not json"));
    }

    #[test]
    fn env_names_are_checked() {
        for ok in ["A", "_X", "GITHUB_TOKEN", "a1"] {
            assert!(valid_env_name(ok), "{ok}");
        }
        for bad in ["", "1A", "A=B", "A B", "Ä"] {
            assert!(!valid_env_name(bad), "{bad}");
        }
    }

    #[test]
    fn not_found_messages() {
        assert!(is_not_found("Error: no such container demo"));
        assert!(is_not_found("Error: No such container: demo"));
        assert!(is_not_found("Error: demo: image not known"));
        assert!(!is_not_found("Error: cannot connect to Podman"));
    }
}
