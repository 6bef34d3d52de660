//! The typed errors of the runtime layer, each with a stable `aibox::runtime::*` code.

use camino::Utf8PathBuf;
use miette::Diagnostic;

/// Everything that can go wrong while detecting or driving a container engine.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum RuntimeError {
    /// Neither Podman nor Docker could be found (or the requested one is missing).
    #[error("no container engine found: {detail}")]
    #[diagnostic(
        code(aibox::runtime::no_engine),
        help(
            "install Podman (`apt-get install podman`) or Docker, or choose an installed one \
             with `AIBOX_ENGINE=podman|docker` or `[container] engine` in aibox.toml"
        )
    )]
    NoEngine {
        /// What was looked for and what was found.
        detail: String,
    },

    /// No Compose provider works with the chosen engine.
    #[error("no Compose provider found for {engine}: tried {tried}")]
    #[diagnostic(
        code(aibox::runtime::no_compose),
        help(
            "install one (`apt-get install podman-compose` or `docker-compose`, or the Docker \
             Compose plugin), or name one with `AIBOX_COMPOSE` (docker compose, podman compose, \
             podman-compose, docker-compose)"
        )
    )]
    NoCompose {
        /// The engine.
        engine: String,
        /// The providers that were tried.
        tried: String,
    },

    /// An environment variable that selects the engine or Compose provider has a bad value.
    #[error("{var}={value:?} is not a valid choice")]
    #[diagnostic(code(aibox::runtime::invalid_override), help("use one of: {expected}"))]
    InvalidOverride {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// The accepted values.
        expected: &'static str,
    },

    /// A program could not be started at all.
    #[error("cannot run {program}")]
    #[diagnostic(
        code(aibox::runtime::spawn),
        help("check that it is installed and executable")
    )]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },

    /// A command did not finish in time and was stopped.
    #[error("`{command}` did not finish within {seconds} s and was stopped")]
    #[diagnostic(
        code(aibox::runtime::timeout),
        help("check that the container engine is healthy (`podman info` / `docker info`)")
    )]
    Timeout {
        /// The command line.
        command: String,
        /// The limit.
        seconds: u64,
    },

    /// A command exited unsuccessfully.
    #[error("`{command}` failed (exit status {status})")]
    #[diagnostic(
        code(aibox::runtime::command_failed),
        help("its last output:\n{output}")
    )]
    CommandFailed {
        /// The command line.
        command: String,
        /// Exit status (`signal N` when killed).
        status: String,
        /// The last lines it printed.
        output: String,
    },

    /// The image build was interrupted (Ctrl-C): aibox saw the signal (see
    /// [`crate::interrupt`]), the builder ended by `SIGINT`, or a step did (exit status
    /// 130). The working containers a Podman build leaves then are removed first.
    #[error("building image `{image}` was interrupted{step}")]
    #[diagnostic(
        code(aibox::runtime::interrupted),
        help(
            "nothing is wrong with the step: run `aibox up` again to build it (the steps \
             done before it come from the engine's cache)"
        )
    )]
    Interrupted {
        /// The image.
        image: String,
        /// ` at step 12/14: RUN ...`, or empty when no step was seen.
        step: String,
    },

    /// The image build failed: the command said so, its output did, or the image is not
    /// there afterwards (podman-compose 1.0 exits 0 after a failed build).
    #[error("building image `{image}` failed{step}")]
    #[diagnostic(
        code(aibox::runtime::build_failed),
        help("{hint}\nthe build's last output:\n{output}")
    )]
    BuildFailed {
        /// The image.
        image: String,
        /// ` at step 12/14: RUN ...`, or empty when no step was seen.
        step: String,
        /// The likely cause and its fix.
        hint: String,
        /// The last lines the build printed.
        output: String,
    },

    /// Compose returned without creating the container (podman-compose 1.0 ignores a
    /// failed `podman run`).
    #[error("container `{container}` was not created by `{command}`")]
    #[diagnostic(
        code(aibox::runtime::not_created),
        help("{hint}\nits last output:\n{output}")
    )]
    NotCreated {
        /// The container name.
        container: String,
        /// The Compose command line.
        command: String,
        /// The likely cause and its fix.
        hint: String,
        /// The last lines it printed.
        output: String,
    },

    /// The created container could not be started.
    #[error("container `{container}` could not be started; {leftover}")]
    #[diagnostic(
        code(aibox::runtime::start_failed),
        help("the engine said:\n{output}{hint}")
    )]
    StartFailed {
        /// The container name.
        container: String,
        /// What happened to the container (removed, or left behind and how to remove it).
        leftover: String,
        /// The last lines the start printed.
        output: String,
        /// The likely cause and its fix, after a blank line, when the output names one
        /// aibox knows; empty otherwise.
        hint: String,
    },

    /// A command printed something aibox could not understand.
    #[error("unexpected output from `{command}`: {detail}")]
    #[diagnostic(
        code(aibox::runtime::unexpected_output),
        help(
            "this engine version may be unsupported; please report it with `aibox doctor --report`"
        )
    )]
    UnexpectedOutput {
        /// The command line.
        command: String,
        /// What was wrong.
        detail: String,
    },

    /// The generated Compose file is missing.
    #[error("{path} does not exist")]
    #[diagnostic(
        code(aibox::runtime::no_compose_file),
        help("run `aibox apply` to generate the dev container files")
    )]
    MissingComposeFile {
        /// The expected path.
        path: Utf8PathBuf,
    },

    /// A dev container file could not be read to fingerprint it.
    #[error("cannot read {path}")]
    #[diagnostic(
        code(aibox::runtime::read_project),
        help("check the file's permissions, or run `aibox apply` to generate it again")
    )]
    ReadProject {
        /// The file or folder.
        path: Utf8PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },

    /// A container with the project's container name belongs to someone else.
    #[error(
        "a container named `{container}` already exists and belongs to {owner}, not to this \
         checkout of project `{project}` ({checkout}); aibox leaves it alone"
    )]
    #[diagnostic(
        code(aibox::runtime::foreign_container),
        help(
            "each checkout gets its own container (the project name and a hash of its path); \
             give this one another name with `[container] container_name` in \
             .aibox-local.toml, or remove the other container yourself if you are sure it is \
             not needed"
        )
    )]
    ForeignContainer {
        /// The container name.
        container: String,
        /// This project's name.
        project: String,
        /// This checkout's path.
        checkout: String,
        /// Who owns it, in words.
        owner: String,
    },

    /// The internal egress network's name is taken by a network of someone else.
    #[error(
        "a network named `{network}` already exists and is not project `{project}`'s; \
         aibox leaves it alone and does not start the agent on it"
    )]
    #[diagnostic(
        code(aibox::runtime::foreign_network),
        help(
            "with `[network] egress` the agent must be alone on an internal network aibox \
             made (no DNS server, no route): remove that network yourself if you are sure \
             it is not needed, or give this checkout's container another name with \
             `[container] container_name` in .aibox-local.toml"
        )
    )]
    ForeignNetwork {
        /// The network name.
        network: String,
        /// The Compose project.
        project: String,
    },

    /// The container is not running, so a command cannot be run in it.
    #[error("container `{container}` is {state}")]
    #[diagnostic(code(aibox::runtime::not_running), help("start it with `aibox up`"))]
    NotRunning {
        /// The container name.
        container: String,
        /// Its state.
        state: String,
    },

    /// The container stopped right after it was started.
    #[error("container `{container}` exited right after starting (status `{status}`)")]
    #[diagnostic(
        code(aibox::runtime::exited),
        help("see why with `{engine} logs {container}`")
    )]
    Exited {
        /// The container name.
        container: String,
        /// Its state.
        status: String,
        /// Engine program name for the hint.
        engine: String,
    },

    /// The egress proxy does not run after `up` started it: the agent has no way out.
    #[error(
        "the egress proxy `{container}` does not run (state `{state}`): the agent container has \
         no way out"
    )]
    #[diagnostic(
        code(aibox::runtime::egress_proxy),
        help(
            "see why with `{engine} logs {container}`; fix the cause, then run `aibox up` again \
             (it starts the proxy, or makes it when it is missing)"
        )
    )]
    ProxyNotRunning {
        /// The proxy container's name (its Compose service when there is none).
        container: String,
        /// Its last state (`created`, `exited`, `missing`, ...).
        state: String,
        /// Engine program name for the hint.
        engine: String,
    },

    /// The container did not reach the running state in time.
    #[error("container `{container}` was not running after {seconds} s (last state: {state})")]
    #[diagnostic(
        code(aibox::runtime::start_timeout),
        help("see what it is doing with `{engine} logs {container}`")
    )]
    StartTimeout {
        /// The container name.
        container: String,
        /// The limit.
        seconds: u64,
        /// Engine program name for the hint.
        engine: String,
        /// The last state the engine reported (`created`, `configured`, ...).
        state: String,
    },

    /// `exec` was asked to run nothing.
    #[error("no command given")]
    #[diagnostic(
        code(aibox::runtime::empty_command),
        help("for example: `aibox exec -- bash`")
    )]
    EmptyCommand,

    /// An `--env` name is not a valid variable name.
    #[error("`{name}` is not a valid environment variable name")]
    #[diagnostic(
        code(aibox::runtime::invalid_env_name),
        help(
            "pass only the NAME (letters, digits, `_`; not starting with a digit); the value is taken from your environment"
        )
    )]
    InvalidEnvName {
        /// The rejected name.
        name: String,
    },

    /// An `--env` variable is not set on the host.
    #[error("environment variable `{name}` is not set on the host")]
    #[diagnostic(
        code(aibox::runtime::env_not_set),
        help(
            "give it a value in your shell first and export it (`export {name}`), or drop `--env {name}`"
        )
    )]
    EnvNotSet {
        /// The variable.
        name: String,
    },
}

impl RuntimeError {
    /// Who can fix it: an invalid override, environment variable name or empty command is
    /// the user's; everything about the engine and the container is the environment.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::InvalidOverride { .. }
            | Self::EmptyCommand
            | Self::InvalidEnvName { .. }
            | Self::EnvNotSet { .. }
            | Self::ForeignContainer { .. } => aibox_config::ErrorKind::User,
            Self::Interrupted { .. } => aibox_config::ErrorKind::Interrupted,
            _ => aibox_config::ErrorKind::Environment,
        }
    }
}
