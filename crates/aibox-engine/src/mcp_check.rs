//! `aibox mcp check`: proves that the project's MCP servers start, by running each one
//! in the project's container the way its harness would and performing the MCP
//! handshake (`aibox_runtime::probe_mcp_server`).
//!
//! The servers are exactly those `aibox mcp list` computes (resolved offline, per
//! harness); each distinct stdio server is started once, as the container user, in
//! `/workspace` (so a relative script path means what it means to the harness), with the
//! server's environment, and reported with the harnesses that use it. Remote servers are
//! listed as not checked. Servers run one after the other, each with a deadline, and the
//! whole check has a total limit. `doctor` runs the same check on a running container.
//!
//! Environment: a harness started in the container expands `${VAR}` from the container's
//! environment, and `docker/podman exec` gives the server that same environment. So a
//! literal value is passed as `-e NAME=VALUE` (literals are never secrets: registration
//! refuses those), `NAME = "${NAME}"` needs nothing, and any other reference is not
//! passed and is named in the server's notes. No value is ever copied out of the
//! container or onto a command line.

use std::time::{Duration, Instant};

use aibox_config::Harness;
use aibox_mcp_registration::refs::Template;
use aibox_mcp_registration::{EffectiveServer, Origin, ServerSpec, Transport};
use aibox_runtime::{
    FoundContainer, McpProbe, PipedExec, ProbeFailure, Runtime, RuntimeError, Target,
};
use camino::Utf8Path;
use miette::Diagnostic;
use serde::Serialize;

use crate::error::EngineError;
use crate::lifecycle::{LifecycleError, LifecycleOptions};
use crate::resolve::Resolved;

/// Deadline of one server's handshake unless the server sets `startup_timeout_sec`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_mins(1);
/// Deadline of the whole check; servers left when it passes are reported not checked.
pub const TOTAL_TIMEOUT: Duration = Duration::from_mins(15);
/// How long the in-container `timeout` wrapper lets a server outlive the probe's own
/// deadline before it kills it (the probe kills the engine client first; the server in
/// the container would otherwise keep running).
const CONTAINER_GRACE_SECS: u64 = 10;

/// Options of [`mcp_check`].
#[derive(Debug, Clone)]
pub struct McpCheckOptions {
    /// Servers to check by name; empty checks every server.
    pub names: Vec<String>,
    /// Deadline per server; `None` uses the server's `startup_timeout_sec` (90 s for
    /// `uv` servers) or [`DEFAULT_TIMEOUT`].
    pub timeout: Option<Duration>,
    /// Deadline of the whole check.
    pub total: Duration,
    /// Engine selection.
    pub lifecycle: LifecycleOptions,
}

impl Default for McpCheckOptions {
    fn default() -> Self {
        Self {
            names: Vec::new(),
            timeout: None,
            total: TOTAL_TIMEOUT,
            lifecycle: LifecycleOptions::default(),
        }
    }
}

/// The outcome for one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerStatus {
    /// It answered `initialize` (and listed its tools).
    Ok,
    /// It did not start or did not speak MCP.
    Failed,
    /// It was not started (a remote server, registered nowhere, or out of time).
    NotChecked,
}

/// One server of the check.
#[derive(Debug, Clone, Serialize)]
pub struct ServerCheck {
    /// Server name.
    pub name: String,
    /// processkit, team or personal.
    pub origin: Origin,
    /// `stdio` or `remote`.
    pub transport: &'static str,
    /// The harnesses it is registered in.
    pub harnesses: Vec<Harness>,
    /// Ok, failed or not checked.
    pub status: ServerStatus,
    /// The command it was started with (stdio), relative to `/workspace`.
    pub command: Vec<String>,
    /// The deadline it had, in seconds.
    pub timeout_secs: Option<u64>,
    /// Why it failed or was not checked, one line.
    pub reason: Option<String>,
    /// What to do about a failure.
    pub fix: Option<String>,
    /// Caveats: environment values the check did not pass, and why.
    pub notes: Vec<String>,
    /// The handshake's details (server info, tools, timing, stderr tail).
    pub probe: Option<McpProbe>,
}

impl ServerCheck {
    fn new(spec: &ServerSpec, harnesses: Vec<Harness>) -> Self {
        let (transport, command) = match &spec.transport {
            Transport::Stdio { command, args, .. } => (
                "stdio",
                std::iter::once(command).chain(args).cloned().collect(),
            ),
            Transport::Remote { .. } => ("remote", Vec::new()),
        };
        Self {
            name: spec.name.clone(),
            origin: spec.origin,
            transport,
            harnesses,
            status: ServerStatus::NotChecked,
            command,
            timeout_secs: None,
            reason: None,
            fix: None,
            notes: Vec::new(),
            probe: None,
        }
    }

    /// `(3 tools, initialize 1.2 s)` for a server that started.
    pub fn summary(&self) -> String {
        let Some(probe) = &self.probe else {
            return String::new();
        };
        let tools = match probe.tools.len() {
            1 => "1 tool".to_owned(),
            n => format!("{n} tools"),
        };
        match probe.initialize_time() {
            Some(t) => format!("{tools}, initialize {:.1} s", t.as_secs_f64()),
            None => tools,
        }
    }
}

/// The result of [`mcp_check`].
#[derive(Debug, Clone, Serialize)]
pub struct McpCheckReport {
    /// The container the servers ran in.
    pub container: String,
    /// Every checked (or not checked) server, in `aibox mcp list` order.
    pub servers: Vec<ServerCheck>,
    /// Set when the processkit release is not resolved (not in the download cache): its
    /// servers are missing from `servers`.
    pub not_resolved: Option<String>,
}

impl McpCheckReport {
    /// The servers that failed.
    pub fn failed(&self) -> impl Iterator<Item = &ServerCheck> {
        self.servers
            .iter()
            .filter(|s| s.status == ServerStatus::Failed)
    }

    /// True when no server failed.
    pub fn all_ok(&self) -> bool {
        self.failed().next().is_none()
    }
}

/// Why the check could not run.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum McpCheckError {
    /// Resolving the project, finding the engine or reaching the container failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Lifecycle(Box<LifecycleError>),
    /// A name given to check is not a server of this project.
    #[error("no MCP server named `{name}` in this project")]
    #[diagnostic(code(aibox::mcp::unknown_server), help("{help}"))]
    UnknownServer {
        /// The name given.
        name: String,
        /// A suggestion and the known names.
        help: String,
    },
}

impl McpCheckError {
    /// Who can fix it: an unknown name is the user's; the rest keeps its own kind (no
    /// running container is the environment).
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Lifecycle(e) => e.kind(),
            Self::UnknownServer { .. } => aibox_config::ErrorKind::User,
        }
    }

    /// The project's container is missing or stopped.
    pub fn is_not_running(&self) -> bool {
        matches!(self, Self::Lifecycle(e)
            if matches!(**e, LifecycleError::Runtime(RuntimeError::NotRunning { .. })))
    }
}

impl From<LifecycleError> for McpCheckError {
    fn from(e: LifecycleError) -> Self {
        Self::Lifecycle(Box::new(e))
    }
}

impl From<EngineError> for McpCheckError {
    fn from(e: EngineError) -> Self {
        LifecycleError::from(e).into()
    }
}

impl From<RuntimeError> for McpCheckError {
    fn from(e: RuntimeError) -> Self {
        LifecycleError::from(e).into()
    }
}

/// Starts the MCP servers of the project at `root` in its running container and
/// reports whether each answers the MCP handshake. Resolves offline (never downloads).
/// `progress` is called with each server's name before it is started.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let root = camino::Utf8Path::from_path(dir.path()).unwrap();
/// # fs_err::write(root.join("aibox.toml"), "[container]\nname = \"demo\"\n").unwrap();
/// use aibox_engine::{McpCheckError, McpCheckOptions, mcp_check};
/// // Names are checked first, before any engine or container is needed.
/// let options = McpCheckOptions { names: vec!["docs".into()], ..McpCheckOptions::default() };
/// let err = mcp_check(root, &options, &mut |name| println!("starting {name} ...")).unwrap_err();
/// assert!(matches!(err, McpCheckError::UnknownServer { .. }));
/// assert_eq!(err.kind(), aibox_config::ErrorKind::User);
/// ```
///
/// # Errors
/// An invalid configuration, no engine, no running container (or another project's),
/// an unknown name in [`McpCheckOptions::names`].
pub fn mcp_check(
    root: &Utf8Path,
    options: &McpCheckOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<McpCheckReport, McpCheckError> {
    let plan = crate::resolve::PlanOptions {
        offline: true,
        ..crate::resolve::PlanOptions::default()
    };
    let resolved = crate::resolve(root, &plan)?;
    // Names are checked before the engine is looked for: a typo is the user's, whatever
    // the machine has.
    let (specs, list) = crate::mcp_list::servers_resolved(&resolved)?;
    let selected = select(&specs, &options.names)?;
    let (runtime, target) =
        crate::lifecycle::runtime_for_config(root, &resolved.project, &options.lifecycle)?;
    let probes = Probes::new(&runtime, &target, None);
    run_checks(&selected, list, probes, options, progress)
}

/// [`mcp_check`] for a project already resolved, with its runtime and target (`doctor`).
///
/// # Errors
/// As [`mcp_check`].
pub fn mcp_check_resolved(
    resolved: &Resolved,
    runtime: &Runtime,
    target: &Target,
    options: &McpCheckOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<McpCheckReport, McpCheckError> {
    let (specs, list) = crate::mcp_list::servers_resolved(resolved)?;
    let selected = select(&specs, &options.names)?;
    run_checks(
        &selected,
        list,
        Probes::new(runtime, target, None),
        options,
        progress,
    )
}

/// [`mcp_check_resolved`] with the processkit servers of the plan `doctor` made once for
/// all its checks (none when the release is not resolved): no second plan.
/// `container` is the project's container as doctor found it, when it runs: the probes
/// run in it without a lookup of their own.
pub(crate) fn mcp_check_planned(
    resolved: &Resolved,
    processkit: &[ServerSpec],
    (runtime, target): (&Runtime, &Target),
    container: Option<&FoundContainer>,
    progress: &mut dyn FnMut(&str),
) -> Result<McpCheckReport, McpCheckError> {
    let (specs, list) = crate::mcp_list::servers_planned(resolved, processkit)?;
    let selected: Vec<&ServerSpec> = specs.iter().collect();
    let running = container.filter(|c| c.running()).cloned();
    run_checks(
        &selected,
        list,
        Probes::new(runtime, target, running),
        &McpCheckOptions::default(),
        progress,
    )
}

/// Where the probes run: the project's running container, looked up at the first probe
/// (not at all when no server is probed) and reused by the rest. Each engine lookup
/// costs tens of milliseconds, and `mcp check` made one per server.
struct Probes<'a> {
    runtime: &'a Runtime,
    target: &'a Target,
    container: Option<FoundContainer>,
}

impl<'a> Probes<'a> {
    fn new(runtime: &'a Runtime, target: &'a Target, container: Option<FoundContainer>) -> Self {
        Self {
            runtime,
            target,
            container,
        }
    }

    /// The command that runs `exec` in the container, found on the first call.
    fn command(&mut self, exec: &PipedExec<'_>) -> Result<std::process::Command, McpCheckError> {
        let container = match &mut self.container {
            Some(found) => found,
            none => none.insert(self.runtime.running(self.target)?),
        };
        Ok(self.runtime.exec_command_in(container, exec)?)
    }
}

/// Checks the selected servers one after the other.
fn run_checks(
    selected: &[&ServerSpec],
    list: crate::mcp_list::McpList,
    mut probes: Probes<'_>,
    options: &McpCheckOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<McpCheckReport, McpCheckError> {
    let started = Instant::now();
    let mut servers = Vec::new();
    for &spec in selected {
        let harnesses = registered_in(spec, &list.servers);
        let mut check = ServerCheck::new(spec, harnesses);
        let remaining = options.total.saturating_sub(started.elapsed());
        if let Transport::Remote { .. } = spec.transport {
            check.reason = Some("remote (http) server: not checked".to_owned());
        } else if check.harnesses.is_empty() {
            let why = list
                .servers
                .iter()
                .find_map(|s| {
                    (s.name == spec.name)
                        .then_some(s.skipped.as_deref())
                        .flatten()
                })
                .unwrap_or("no enabled harness");
            check.reason = Some(format!("not registered in any harness ({why})"));
        } else if remaining.is_zero() {
            check.reason = Some(format!(
                "not checked: the whole check's limit of {} s was reached",
                options.total.as_secs()
            ));
        } else {
            let configured = spec
                .effective_startup_timeout()
                .map(|s| Duration::from_secs(u64::from(s)));
            let deadline = options
                .timeout
                .or(configured)
                .unwrap_or(DEFAULT_TIMEOUT)
                .min(remaining);
            run_one(&mut probes, spec, &mut check, deadline, progress)?;
        }
        servers.push(check);
    }
    Ok(McpCheckReport {
        container: probes.target.container.clone(),
        servers,
        not_resolved: list.not_resolved,
    })
}

/// The servers named in `names` (all when empty), in configuration order.
fn select<'a>(
    specs: &'a [ServerSpec],
    names: &[String],
) -> Result<Vec<&'a ServerSpec>, McpCheckError> {
    for name in names {
        if !specs.iter().any(|s| &s.name == name) {
            let known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            let list = if known.is_empty() {
                "this project has no MCP servers (`aibox mcp list`)".to_owned()
            } else {
                format!("its servers: {}", known.join(", "))
            };
            let help = match aibox_config::closest(name, known.iter().copied()) {
                Some(c) => format!("did you mean `{c}`? {list}"),
                None => list,
            };
            return Err(McpCheckError::UnknownServer {
                name: name.clone(),
                help,
            });
        }
    }
    Ok(specs
        .iter()
        .filter(|s| names.is_empty() || names.contains(&s.name))
        .collect())
}

/// The harnesses that register `spec` (the report's entries not skipped).
fn registered_in(spec: &ServerSpec, effective: &[EffectiveServer]) -> Vec<Harness> {
    let mut harnesses: Vec<Harness> = effective
        .iter()
        .filter(|e| e.name == spec.name && e.origin == spec.origin && e.skipped.is_none())
        .map(|e| e.harness)
        .collect();
    harnesses.sort();
    harnesses.dedup();
    harnesses
}

/// Starts one stdio server in the container and records the handshake; `deadline` bounds
/// it, `progress` hears its name once the container is known to run.
fn run_one(
    probes: &mut Probes<'_>,
    spec: &ServerSpec,
    check: &mut ServerCheck,
    deadline: Duration,
    progress: &mut dyn FnMut(&str),
) -> Result<(), McpCheckError> {
    let Transport::Stdio { env, .. } = &spec.transport else {
        return Ok(());
    };
    check.timeout_secs = Some(deadline.as_secs() + u64::from(deadline.subsec_nanos() > 0));
    let (mut literal_env, notes) = environment(env);
    check.notes = notes;
    let (name, value) = crate::skills::NO_BYTECODE;
    if !env.contains_key(name) {
        literal_env.push((name.to_owned(), value.to_owned()));
    }
    // The in-container bound: the probe kills the engine client, which does not stop
    // the process inside the container; coreutils `timeout` (in every Debian-based
    // image aibox builds) does.
    let limit = deadline.as_secs() + CONTAINER_GRACE_SECS;
    let cmd: Vec<String> = ["timeout", "-k", "5", &limit.to_string()]
        .into_iter()
        .map(ToOwned::to_owned)
        .chain(check.command.iter().cloned())
        .collect();
    let exec = PipedExec {
        user: &probes.target.user,
        cmd: &cmd,
        literal_env: &literal_env,
        env: &[],
    };
    let first = probes.command(&exec)?;
    progress(&spec.name);
    let mut probe = aibox_runtime::probe_mcp_server(first, deadline);
    // The engine's exec client may exit before it relayed the last stderr of a process
    // that died at once (Podman's `exec` output race, worst on a busy machine): exactly
    // the lines that say why a server died. A server that died without a word is asked
    // once more, this time under `sh`, which holds the output open for a second after
    // the server exits so the client relays its last lines before the exec session ends
    // (a retry alone still lost them on a loaded machine); the second answer counts when
    // it failed the same way.
    if probe.failure == Some(ProbeFailure::Exited) && probe.stderr_tail.is_empty() {
        let held: Vec<String> = ["sh", "-c", "\"$@\"; status=$?; sleep 1; exit $status", "sh"]
            .into_iter()
            .map(ToOwned::to_owned)
            .chain(cmd.iter().cloned())
            .collect();
        let exec = PipedExec { cmd: &held, ..exec };
        let again = aibox_runtime::probe_mcp_server(probes.command(&exec)?, deadline);
        if again.failure == Some(ProbeFailure::Exited) {
            probe = again;
        }
    }
    // A server may print its environment or a token in a traceback: mask secrets.
    probe.stderr_tail = probe
        .stderr_tail
        .iter()
        .map(|l| aibox_policy::redact_secrets(l))
        .collect();
    probe.reason = probe.reason.map(|r| aibox_policy::redact_secrets(&r));
    if probe.ok {
        check.status = ServerStatus::Ok;
    } else {
        check.status = ServerStatus::Failed;
        check.reason.clone_from(&probe.reason);
        check.fix = Some(fix(spec, check, probe.failure, deadline));
    }
    check.probe = Some(probe);
    Ok(())
}

/// The `-e NAME=VALUE` pairs for a server's environment, and notes on what is not
/// passed (see the module documentation).
fn environment(
    env: &std::collections::BTreeMap<String, String>,
) -> (Vec<(String, String)>, Vec<String>) {
    let mut literal = Vec::new();
    let mut notes = Vec::new();
    for (key, value) in env {
        let template = Template::parse(value);
        match template.single_var() {
            // The container's own variable, which exec passes on like the harness.
            Some((name, None)) if name == key => {}
            Some((name, _)) => notes.push(format!(
                "`{key}` is not set for the check: its value `${{{name}}}` is a reference the \
                 check does not copy"
            )),
            None if template.has_var() => notes.push(format!(
                "`{key}` is not set for the check: its value mixes text and references"
            )),
            None => literal.push((key.clone(), value.clone())),
        }
    }
    (literal, notes)
}

/// What to do about a failed server: where it is defined, how to see it fail.
fn fix(
    spec: &ServerSpec,
    check: &ServerCheck,
    failure: Option<ProbeFailure>,
    deadline: Duration,
) -> String {
    let rerun = format!(
        "aibox exec -- {}",
        crate::process::shell_words(&check.command)
    );
    let owner = match spec.origin {
        Origin::Processkit => format!(
            "it ships with the pinned processkit release: pin a release whose servers start \
             (`[processkit] version`), or disable its skill (`aibox skill disable`); see it fail \
             with `{rerun}`"
        ),
        Origin::Team => format!(
            "fix its `command`/`args` in aibox.toml `[[ai.mcp.servers]]` (name = \"{}\") or what \
             it needs in the image, then `aibox apply`; see it fail with `{rerun}`",
            spec.name
        ),
        Origin::Personal => format!(
            "fix its `command`/`args` in .aibox-local.toml `[[mcp.servers]]` (name = \"{}\"), \
             then `aibox apply`; see it fail with `{rerun}`",
            spec.name
        ),
    };
    // A locked environment the image lacks: the harness files name the new one as soon
    // as `apply` writes them, the image gets it at the next build.
    let program = check.command.first().map_or("", String::as_str);
    let locked = [
        aibox_config::container::MCP_ENVS_DIR,
        aibox_config::container::MCP_NPM_DIR,
    ]
    .iter()
    .any(|dir| {
        program
            .strip_prefix(dir)
            .is_some_and(|r| r.starts_with('/'))
    });
    let not_found = check
        .reason
        .as_deref()
        .is_some_and(|r| r.contains("code 127"));
    if failure == Some(ProbeFailure::Exited) && locked && not_found {
        return format!(
            "its locked environment (`{program}`) is not in the running container: the image \
             was built before an `aibox apply` changed the servers' locked environments; run \
             `aibox up` to rebuild the image and recreate the container"
        );
    }
    match failure {
        Some(ProbeFailure::Timeout) => {
            let program = check
                .command
                .first()
                .map_or("", |c| c.rsplit('/').next().unwrap_or(c));
            let why = if matches!(program, "uv" | "uvx") {
                "; a first `uv run` may still be downloading dependencies"
            } else {
                ""
            };
            format!(
                "it did not answer within {} s{why}: try `aibox mcp check {} --timeout {}`; {owner}",
                deadline.as_secs(),
                spec.name,
                deadline.as_secs().saturating_mul(3).max(180)
            )
        }
        _ => owner,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A processkit server whose locked environment the running image lacks (exit 127
    /// from `timeout`): the fix is rebuilding the image, not pinning another release.
    #[test]
    fn a_locked_environment_missing_from_the_image_says_to_rebuild() {
        let spec = |command: &str| ServerSpec {
            name: "processkit-skill-gate".to_owned(),
            origin: Origin::Processkit,
            transport: Transport::Stdio {
                command: command.to_owned(),
                args: vec!["context/skills/processkit/skill-gate/mcp/server.py".to_owned()],
                env: std::collections::BTreeMap::new(),
            },
            allowed_tools: Vec::new(),
            startup_timeout_sec: None,
        };
        let deadline = Duration::from_secs(30);
        let fixed = |command: &str, reason: &str| {
            let spec = spec(command);
            let mut check = ServerCheck::new(&spec, Vec::new());
            check.reason = Some(reason.to_owned());
            fix(&spec, &check, Some(ProbeFailure::Exited), deadline)
        };
        let missing = "exited with code 127 before answering initialize";
        let text = fixed("/opt/aibox/mcp/3a95004f1f4b/bin/python", missing);
        assert!(
            text.contains(
                "`/opt/aibox/mcp/3a95004f1f4b/bin/python`) is not in the running container"
            ) && text.contains("run `aibox up`")
                && !text.contains("pin a release"),
            "{text}"
        );
        // Any other death, or another program, keeps the owner's fix.
        for (command, reason) in [
            (
                "/opt/aibox/mcp/3a95004f1f4b/bin/python",
                "exited with code 1 before answering initialize",
            ),
            ("/opt/aibox/mcp-other/x/bin/python", missing),
            ("python3", missing),
        ] {
            let text = fixed(command, reason);
            assert!(text.contains("pin a release"), "{command}: {text}");
        }
    }

    #[test]
    fn environment_passes_literals_and_leaves_references_to_the_container() {
        let env = [
            ("LOG_LEVEL", "info"),
            ("EMPTY", ""),
            ("API_TOKEN", "${API_TOKEN}"),
            ("RENAMED", "${OTHER}"),
            ("MIXED", "x-${Y}"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let (literal, notes) = environment(&env);
        assert_eq!(
            literal,
            [
                ("EMPTY".to_owned(), String::new()),
                ("LOG_LEVEL".to_owned(), "info".to_owned())
            ]
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("`MIXED`"), "{notes:?}");
        assert!(notes[1].contains("`RENAMED`") && notes[1].contains("${OTHER}"));
    }
}
