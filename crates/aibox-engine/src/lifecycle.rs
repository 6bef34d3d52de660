//! The container lifecycle commands (`up`, `down`, `status`, `exec`, `apply --build`).
//!
//! Thin glue: load the project, pick the engine (failing fast when none is installed),
//! bring the generated files up to date where a command needs them, then hand over to
//! `aibox-runtime`, which owns every spawned process. After `up` the engine state of the
//! container is checked under the policy gate's rules; a violation stops it.

use std::fmt::Write as _;

use aibox_config::load_project;
use aibox_policy::{Finding, Severity};
use aibox_runtime::{
    DetectEnv, ExecRequest, Progress, Runtime, RuntimeError, Status, Target, Timeouts,
};
use camino::Utf8Path;
use miette::Diagnostic;

use crate::apply::{ApplyOptions, ApplyReport};
use crate::error::EngineError;

/// Errors of the lifecycle commands: those of the layers they combine, unchanged.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum LifecycleError {
    /// Loading the project or applying the generated files failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Engine(Box<EngineError>),
    /// Detecting or driving the container engine failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Runtime(#[from] RuntimeError),
    /// The started container's engine state breaks the policy without consent (something
    /// the files did not show reached the engine); the container was stopped.
    #[error(
        "the running container `{container}` breaks the security policy without consent, so it \
         was stopped: {summary}"
    )]
    #[diagnostic(code(aibox::lifecycle::container_policy), help("{details}"))]
    ContainerPolicy {
        /// The container's name.
        container: String,
        /// The broken rules, one line.
        summary: String,
        /// Every error finding with its fix.
        details: String,
    },
    /// `down`, `status` or `exec` cannot name the container: the configuration cannot be
    /// read. The help names this checkout's containers (found by their checkout label)
    /// and the engine command that removes them.
    #[error("`aibox {command}` needs aibox.toml, which this aibox cannot read")]
    #[diagnostic(code(aibox::lifecycle::config_unreadable), help("{help}"))]
    ConfigUnreadable {
        /// `down`, `status` or `exec`.
        command: &'static str,
        /// What is wrong with the configuration.
        #[source]
        #[diagnostic_source]
        source: Box<dyn Diagnostic + Send + Sync>,
        /// The configuration error's kind.
        kind: aibox_config::ErrorKind,
        /// How to fix it or remove the container without aibox.
        help: String,
    },
    /// A `[container.lifecycle]` command exited with a failure.
    #[error("`{key}` (`{command}`) failed in the container with exit code {code}")]
    #[diagnostic(
        code(aibox::lifecycle::command_failed),
        help(
            "its output is above; fix the command in aibox.toml [container.lifecycle] (the \
             container is running: try it with `aibox exec -- sh -c '...'`), then run `aibox \
             up`: a changed command recreates the container and runs there. To run an \
             unchanged command again: `aibox down && aibox up`"
        )
    )]
    Command {
        /// `post_create_command` or `post_start_command`.
        key: &'static str,
        /// The command.
        command: String,
        /// Its exit code.
        code: i32,
    },
}

impl LifecycleError {
    /// Who can fix it: the engine's and runtime's own kinds; a container that breaks the
    /// policy is the user's configuration; a failing post-create command is the
    /// environment (it ran in the container).
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Engine(e) => e.kind(),
            Self::ConfigUnreadable { kind, .. } => *kind,
            Self::Runtime(e) => e.kind(),
            Self::ContainerPolicy { .. } => aibox_config::ErrorKind::User,
            Self::Command { .. } => aibox_config::ErrorKind::Environment,
        }
    }
}

// Boxed: the engine's errors carry source text for their diagnostics and are large.
impl From<EngineError> for LifecycleError {
    fn from(err: EngineError) -> Self {
        Self::Engine(Box::new(err))
    }
}

impl From<aibox_config::ConfigError> for LifecycleError {
    fn from(err: aibox_config::ConfigError) -> Self {
        Self::Engine(Box::new(err.into()))
    }
}

/// How long `up` and `down` wait for another one's container lock by default.
pub const CONTAINER_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_mins(30);

/// How the engine is chosen and how long steps may take.
#[derive(Debug, Clone)]
pub struct LifecycleOptions {
    /// Engine/Compose overrides, `PATH` and extra environment for engine commands.
    pub env: DetectEnv,
    /// Step deadlines.
    pub timeouts: Timeouts,
    /// How long `up` and `down` wait for another one's container lock (a first `up`
    /// may build for minutes) before failing with `aibox::lifecycle::busy`.
    pub lock_timeout: std::time::Duration,
}

impl Default for LifecycleOptions {
    /// Reads `AIBOX_ENGINE`, `AIBOX_COMPOSE` and `PATH` from this process.
    fn default() -> Self {
        Self {
            env: DetectEnv::from_process(),
            timeouts: Timeouts::default(),
            lock_timeout: CONTAINER_LOCK_TIMEOUT,
        }
    }
}

/// Options of [`up`].
#[derive(Debug, Clone, Default)]
pub struct UpOptions {
    /// Rebuild the image even when it exists.
    pub build: bool,
    /// Engine selection and deadlines.
    pub lifecycle: LifecycleOptions,
    /// Options of the `apply` that runs first.
    pub apply: ApplyOptions,
}

/// Result of [`up`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct UpReport {
    /// What the preceding apply did (usually nothing).
    pub apply: ApplyReport,
    /// The container afterwards.
    pub status: Status,
    /// One-line notices the user must see on every `up`, such as an active seccomp
    /// relaxation (a consent committed by someone else is not yours).
    pub notices: Vec<String>,
    /// Folders the agent must write that the container user cannot (`/workspace`, its
    /// home, the harness folders), each with [`UNWRITABLE_FIX`] as the fix.
    pub unwritable: Vec<String>,
    /// Whether Codex's sandbox can start in the container (probed when Codex is enabled).
    pub codex_sandbox: Option<crate::codex_sandbox::SandboxReport>,
    /// The `[container.lifecycle]` commands this `up` ran: `post_create_command` after
    /// the container was created, `post_start_command` after it was started.
    pub ran: Vec<&'static str>,
}

/// Notices about relaxations that the project's configuration makes active.
fn relaxation_notices(resolved: &crate::resolve::Resolved) -> Vec<String> {
    let Ok(decision) = &resolved.security.decision else {
        return Vec::new();
    };
    let mut notices = Vec::new();
    match decision.posture {
        aibox_policy::SeccompPosture::Unconfined => notices.push(
            "security: seccomp=unconfined is active for this container (consent: \
             [security] acknowledge_seccomp_unconfined in aibox.toml)"
                .to_owned(),
        ),
        aibox_policy::SeccompPosture::Profile => notices.push(
            "security: the generated seccomp profile allowing user namespaces is active \
             (consent: [security] acknowledge_seccomp_profile in aibox.toml)"
                .to_owned(),
        ),
        _ => {}
    }
    for exception in &resolved.project.config.security.exceptions {
        notices.push(format!(
            "security: exception `{}` is active ({})",
            exception.option, exception.reason
        ));
    }
    notices
}

/// The runtime and target of the project at `root`.
pub fn runtime_for(
    root: &Utf8Path,
    options: &LifecycleOptions,
) -> Result<(Runtime, Target), LifecycleError> {
    let project = load_project(root)?;
    runtime_for_config(root, &project, options)
}

/// The runtime and target of a project whose configuration is already loaded.
pub fn runtime_for_config(
    root: &Utf8Path,
    project: &aibox_config::Project,
    options: &LifecycleOptions,
) -> Result<(Runtime, Target), LifecycleError> {
    let config = &project.config;
    let runtime = Runtime::detect(config.container.engine, options.env.clone())?
        .with_timeouts(options.timeouts);
    Ok((runtime, target_for(root, project)))
}

/// The names the generated files give this checkout's container: the Compose project and
/// container name per checkout, the committed project name of the `aibox.project` label.
pub fn target_for(root: &Utf8Path, project: &aibox_config::Project) -> Target {
    let config = &project.config;
    let checkout = checkout_path(root);
    let container = aibox_devcontainer::container_name(config, &project.local, &checkout);
    Target {
        root: root.to_owned(),
        project: container.clone(),
        container,
        name: aibox_devcontainer::project_name(config),
        service: aibox_devcontainer::service_name(config).to_owned(),
        checkout,
        image: aibox_devcontainer::image_name(config),
        user: config.container.user.clone(),
        ids: (config.container.uid, config.container.gid()),
        egress: config.network.egress != aibox_config::EgressMode::Open,
        proxy: config.network.egress == aibox_config::EgressMode::Allowlist,
        lifecycle: lifecycle_commands(&config.container.lifecycle),
    }
}

/// The lifecycle commands `up` runs, as `key=command` (for the container digest).
fn lifecycle_commands(lifecycle: &aibox_config::model::Lifecycle) -> Vec<String> {
    [
        ("post_create_command", &lifecycle.post_create_command),
        ("post_start_command", &lifecycle.post_start_command),
    ]
    .into_iter()
    .filter_map(|(key, command)| command.as_ref().map(|c| format!("{key}={c}")))
    .collect()
}

/// The checkout's canonical path (what names and labels its container); the path as
/// given when it cannot be resolved.
pub(crate) fn checkout_path(root: &Utf8Path) -> String {
    fs_err::canonicalize(root.as_std_path())
        .map_or_else(|_| root.to_string(), |p| p.display().to_string())
}

/// Brings the generated files up to date, then builds (when needed) and starts the
/// container and waits until it runs. The configuration is loaded once and the project
/// resolved once (see [`crate::resolve()`]); everything below works from that value.
pub fn up(
    root: &Utf8Path,
    options: &UpOptions,
    progress: Progress<'_>,
) -> Result<UpReport, LifecycleError> {
    // An invalid configuration first, then a missing engine, before anything is written.
    let project = crate::config_check::check_project(root)?;
    let (runtime, target) = runtime_for_config(root, &project, &options.lifecycle)?;
    let notice = options.apply.plan.notice.clone();
    let _lock = container_lock(root, &options.lifecycle, &mut |line| {
        if let Some(notice) = &notice {
            notice(line);
        }
    })?;
    let apply_opts = ApplyOptions {
        dry_run: false,
        check: false,
        ..options.apply.clone()
    };
    // The seccomp gate judges the engine `up` is about to use.
    let mut plan_opts = options.apply.plan.clone();
    plan_opts.engine = Some(crate::codex_sandbox::from_engine(
        runtime.detected().engine.engine,
    ));
    let resolved = crate::resolve::resolve_project(root, project, &plan_opts)?;
    let report = crate::apply::apply_resolved(&resolved, &apply_opts)?;
    let config = &resolved.project.config;
    let up = runtime.up(
        &target,
        aibox_runtime::UpOptions {
            build: options.build,
        },
        progress,
    )?;
    // What the engine actually runs, under the same rules: a violation stops the container.
    // So does a bind mount from outside the project that no configuration names (a
    // project folder swapped for a link while the image built).
    let mut findings = container_state_of(&runtime, up.container.json(), &target, config);
    findings.extend(aibox_policy::unexpected_mounts(
        up.container.json(),
        &target.checkout,
        &expected_outside(&resolved.project),
    ));
    let errors: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    if !errors.is_empty() {
        runtime.stop(&target, progress)?;
        let mut summary: Vec<String> = errors.iter().map(|f| f.code.clone()).collect();
        summary.dedup();
        let mut details = String::new();
        for f in &errors {
            let _ = writeln!(details, "{f}");
        }
        details.push_str(
            "Run `aibox doctor` for the files that set it; consent goes into aibox.toml \
             [[security.exceptions]].",
        );
        return Err(LifecycleError::ContainerPolicy {
            container: target.container.clone(),
            summary: summary.join(", "),
            details,
        });
    }
    let codex_sandbox = crate::codex_sandbox::probe(
        config,
        resolved.security.posture(),
        (&runtime, &target),
        Some(&up.container),
    );
    let unwritable = unwritable_folders(&runtime, &target, &up.container, config)?
        .iter()
        .map(|folder| unwritable_message(&target.user, folder))
        .collect();
    // Like the Dev Containers CLI: post-create once per new container, post-start on
    // every start.
    let lifecycle = config.container.lifecycle.clone();
    let mut ran = Vec::new();
    for (key, command, due) in [
        (
            "post_create_command",
            lifecycle.post_create_command,
            up.created,
        ),
        (
            "post_start_command",
            lifecycle.post_start_command,
            up.started,
        ),
    ] {
        if let Some(command) = command.filter(|_| due) {
            run_lifecycle_command(&runtime, &target, key, command)?;
            ran.push(key);
        }
    }
    Ok(UpReport {
        apply: report,
        status: up.status,
        notices: relaxation_notices(&resolved),
        unwritable,
        codex_sandbox,
        ran,
    })
}

/// The policy findings over the engine state of the project's container: its `container
/// inspect` JSON, already asked for, and that of the containers whose namespaces it
/// joins (a service of the same Compose project passes, as `service:<name>` does in the
/// files; one the engine cannot show is judged as another project's).
pub(crate) fn container_state_of(
    runtime: &Runtime,
    json: &str,
    target: &Target,
    config: &aibox_config::AiboxToml,
) -> Vec<Finding> {
    let peers: Vec<String> = aibox_policy::namespace_containers(json)
        .iter()
        .filter_map(|other| runtime.container_json(other).ok().flatten())
        .collect();
    // Engines report bind sources as resolved absolute paths.
    // Where the project's bind sources lead through symbolic links, read now.
    let project = crate::writer::ProjectRoot::open(&target.root).ok();
    let disk = project.as_ref().map(crate::snapshot::DiskSources);
    let sources: &dyn aibox_policy::ComposeSources = match &disk {
        Some(d) => d,
        None => &aibox_policy::NoSources,
    };
    aibox_policy::check_container_state(
        json,
        &target.checkout,
        &aibox_policy::Consent::from_config(config),
        sources,
        &peers,
    )
}

/// The host paths of the configured bind sources outside the project (both files'
/// `extra_volumes`): as written, with `~` expanded, and where their links lead now; and
/// where a project folder's link leads when an exception consents to that target.
fn expected_outside(project: &aibox_config::Project) -> Vec<String> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let consented: Vec<&str> = project
        .config
        .security
        .exceptions
        .iter()
        .filter_map(|e| e.option.strip_prefix("mount:"))
        .collect();
    let tilde = |p: &std::path::Path| {
        home.as_deref()
            .and_then(|h| p.strip_prefix(h).ok())
            .map(|rest| format!("~/{}", rest.display()))
    };
    let mut out = Vec::new();
    let volumes = project.config.container.extra_volumes.iter();
    for v in volumes.chain(&project.local.container.extra_volumes) {
        let source = v.source.trim();
        let written = if source == "~" || source.starts_with("~/") {
            home.as_deref()
                .map(|h| h.join(source.trim_start_matches('~').trim_start_matches('/')))
        } else if source.starts_with('/') {
            Some(std::path::PathBuf::from(source))
        } else {
            None
        };
        let canonical = fs_err::canonicalize(match &written {
            Some(path) => path.clone(),
            None => project.root.as_std_path().join(source),
        })
        .ok();
        if let Some(path) = &written {
            out.push(path.display().to_string());
            out.extend(canonical.map(|c| c.display().to_string()));
        } else if let Some(target) = canonical {
            let shown = target.display().to_string();
            let named = tilde(&target);
            if consented.contains(&shown.as_str())
                || named.is_some_and(|n| consented.contains(&n.as_str()))
            {
                out.push(shown);
            }
        }
    }
    out
}

/// The folders the agent must write, as the container user in the running container,
/// that it cannot: `/workspace`, its home and the enabled harnesses' state folders there.
/// `up` warns about them and `doctor` reports them, each in the container it already
/// found (`found`, running), so the engine is not asked for it again.
pub(crate) fn unwritable_folders(
    runtime: &Runtime,
    target: &Target,
    found: &aibox_runtime::FoundContainer,
    config: &aibox_config::AiboxToml,
) -> Result<Vec<String>, RuntimeError> {
    let mut probe = format!(
        "for d in {} \"$HOME\"",
        aibox_config::container::WORKSPACE_DIR
    );
    for dir in config
        .ai
        .harnesses
        .iter()
        .filter_map(|h| aibox_config::container::harness_home_dir(*h))
    {
        let _ = write!(probe, " \"$HOME/{dir}\"");
    }
    probe.push_str("; do if [ -e \"$d\" ] && ! [ -w \"$d\" ]; then echo \"$d\"; fi; done");
    let (_, stdout) = runtime.exec_output_in(found, &target.user, &["sh", "-c", &probe])?;
    Ok(stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// What `up` and `doctor` say of a folder from [`unwritable_folders`].
pub(crate) fn unwritable_message(user: &str, folder: &str) -> String {
    format!("the container user `{user}` cannot write {folder}, so the agent cannot work there")
}

/// The fix for `unwritable_message`.
pub const UNWRITABLE_FIX: &str = "the project folder should belong to your own \
    (non-root) user: `aibox up` gives the container user that user's UID and GID; then `aibox \
    up` rebuilds the image. On rootless Podman `aibox up` maps you to the container user \
    (`keep-id`); a container made by VS Code or `devcontainer up` there is not mapped: `aibox \
    down` it and use `aibox up`";

/// Runs one lifecycle command as the container user in `/workspace`, through `sh -c`
/// like `devcontainer.json` string commands. Its output goes to stderr so `--output
/// json` stays clean.
fn run_lifecycle_command(
    runtime: &Runtime,
    target: &Target,
    key: &'static str,
    command: String,
) -> Result<(), LifecycleError> {
    let cmd = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!("exec 1>&2\n{command}"),
    ];
    let request = ExecRequest {
        user: &target.user,
        cmd: &cmd,
        env: &[],
        timeout: None,
    };
    match runtime.exec(target, &request)? {
        0 => Ok(()),
        code => Err(LifecycleError::Command { key, command, code }),
    }
}

/// [`runtime_for`] for a command that only drives the container (`down`, `status`,
/// `exec`): a configuration this aibox cannot read (a key a newer aibox knows, a typo)
/// fails with the names of this checkout's containers and how to remove them with the
/// engine, so the container is never stuck behind the file.
fn runtime_for_container(
    root: &Utf8Path,
    options: &LifecycleOptions,
    command: &'static str,
) -> Result<(Runtime, Target), LifecycleError> {
    let unreadable =
        |e: &EngineError| matches!(e, EngineError::Config(c) if !c.problems().is_empty());
    match runtime_for(root, options) {
        Err(LifecycleError::Engine(source)) if unreadable(&source) => {
            Err(config_unreadable(root, options, command, source))
        }
        other => other,
    }
}

fn config_unreadable(
    root: &Utf8Path,
    options: &LifecycleOptions,
    command: &'static str,
    source: Box<EngineError>,
) -> LifecycleError {
    let fix = "fix the problem in aibox.toml (a key this aibox does not know may be one of a \
               newer aibox: update aibox)";
    let found = Runtime::detect(aibox_config::EngineChoice::Auto, options.env.clone())
        .ok()
        .and_then(|runtime| {
            let names = runtime.checkout_containers(&checkout_path(root)).ok()?;
            Some((runtime.detected().engine.engine.as_str().to_owned(), names))
        });
    let help = match found {
        Some((engine, names)) if !names.is_empty() => format!(
            "{fix}. To stop and remove this checkout's container without aibox: `{engine} rm \
             -f {}`",
            names.join(" ")
        ),
        _ => format!("{fix}; no container of this checkout was found"),
    };
    LifecycleError::ConfigUnreadable {
        command,
        kind: source.kind(),
        source,
        help,
    }
}

/// Stops and removes the project's container.
pub fn down(
    root: &Utf8Path,
    options: &LifecycleOptions,
    progress: Progress<'_>,
) -> Result<Status, LifecycleError> {
    let (runtime, target) = runtime_for_container(root, options, "down")?;
    let _lock = container_lock(root, options, &mut |line| note(progress, line))?;
    Ok(runtime.down(&target, progress)?)
}

/// Says `line` through `progress`.
fn note(progress: Progress<'_>, line: &str) {
    progress(&aibox_runtime::Event::Note {
        line: line.to_owned(),
    });
}

/// Takes the project's container lock for `up`, `down` or a build: a second one waits for
/// the first (saying so once through `say`) instead of racing it in Compose or the engine.
fn container_lock(
    root: &Utf8Path,
    options: &LifecycleOptions,
    say: &mut dyn FnMut(&str),
) -> Result<crate::records::ProjectLock, LifecycleError> {
    let project = crate::writer::ProjectRoot::open(root).map_err(EngineError::from)?;
    Ok(crate::records::ProjectLock::acquire_container(
        &project,
        options.lock_timeout,
        &mut || {
            say(
                "another `aibox up`, `aibox down` or `aibox apply --build` is running in this \
                 project: waiting for it",
            );
        },
    )?)
}

/// Reports the project's container state.
pub fn status(root: &Utf8Path, options: &LifecycleOptions) -> Result<Status, LifecycleError> {
    let (runtime, target) = runtime_for_container(root, options, "status")?;
    Ok(runtime.status(&target)?)
}

/// Runs `cmd` in the running container as the configured user, passing the named host
/// variables in `env` for this command only, and returns its exit code.
pub fn exec(
    root: &Utf8Path,
    options: &LifecycleOptions,
    cmd: &[String],
    env: &[String],
) -> Result<i32, LifecycleError> {
    let (runtime, target) = runtime_for_container(root, options, "exec")?;
    let request = ExecRequest {
        user: &target.user,
        cmd,
        env,
        timeout: None,
    };
    Ok(runtime.exec(&target, &request)?)
}

/// Builds the image (`aibox apply --build`, after the apply itself).
pub fn build(
    root: &Utf8Path,
    options: &LifecycleOptions,
    progress: Progress<'_>,
) -> Result<(), LifecycleError> {
    // A build replaces the image `up` may be starting a container from.
    let _lock = container_lock(root, options, &mut |line| note(progress, line))?;
    let (runtime, target) = runtime_for(root, options)?;
    Ok(runtime.build(&target, progress)?)
}
