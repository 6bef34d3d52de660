//! One module per command. Each parses nothing itself: it takes its typed arguments,
//! calls one library function, renders the result (human or `--output json`) and returns
//! an [`Exit`]; errors go back as [`Failure`], whose kind picks the exit code in
//! `crate::exit`.

mod addon;
mod apply;
mod base_image;
mod completion;
mod config;
mod docs;
mod doctor;
mod exec;
mod init;
mod lifecycle;
mod mcp;
mod migrate;
mod network;
mod own;
mod processkit;
mod skill;

use std::io::IsTerminal;

use camino::{Utf8Path, Utf8PathBuf};

use crate::args::{Cli, Command, Global, McpCommand, NetworkCommand, Output};
use crate::error::{CliError, Failure};
use crate::exit::Exit;
use crate::render;

/// What a command returns.
pub type Outcome = Result<Exit, Failure>;

/// Runs the parsed command line.
pub fn run(cli: &Cli) -> Outcome {
    let g = &cli.global;
    match &cli.command {
        Command::Completion { shell } => completion::run(g, *shell),
        Command::Docs { page } => docs::run(g, *page),
        Command::Help { command } => help(g, command),
        Command::Init(args) => init::run(g, args),
        Command::Apply(args) => apply::run(g, args),
        Command::Up(args) => lifecycle::up(g, args),
        Command::Down => lifecycle::down(g),
        Command::Status => lifecycle::status(g),
        Command::Exec(args) => exec::run(g, args),
        Command::Doctor(args) => doctor::run(g, args),
        Command::Own(crate::args::SelfCommand::Check) => own::check(g),
        Command::Config(cmd) => config::run(g, cmd),
        Command::Network(NetworkCommand::List) => network::list(g),
        Command::Mcp(McpCommand::List) => mcp::list(g),
        Command::Mcp(McpCommand::Check(args)) => mcp::check(g, args),
        Command::Mcp(McpCommand::Add(args)) => mcp::add(g, args),
        Command::Mcp(McpCommand::Remove { name, local }) => mcp::remove(g, name, *local),
        Command::Skill(cmd) => skill::run(g, cmd),
        Command::Migrate(cmd) => migrate::run(g, cmd),
        Command::Processkit(crate::args::ProcesskitCommand::Versions { source }) => {
            processkit::versions(g, source.as_deref())
        }
        Command::Addon(cmd) => addon::run(g, cmd),
        Command::BaseImage(cmd) => base_image::run(g, cmd),
    }
}

/// The project root: `--project DIR` as given, else the nearest parent with `aibox.toml`.
fn project_root(g: &Global) -> Result<Utf8PathBuf, Failure> {
    if let Some(dir) = &g.project {
        if dir.symlink_metadata().is_err() {
            return Err(CliError::ProjectMissing { path: dir.clone() }.into());
        }
        not_a_file(dir)?;
        return Ok(dir.clone());
    }
    Ok(aibox_config::find_project_root(&cwd()?)?)
}

/// The project root when there is one (commands that also work outside a project).
fn optional_project_root(g: &Global) -> Result<Option<Utf8PathBuf>, Failure> {
    Ok(match &g.project {
        Some(p) => {
            not_a_file(p)?;
            Some(p.clone())
        }
        None => aibox_config::find_project_root(&cwd()?).ok(),
    })
}

/// Refuses a `--project` that names a file (`--project aibox.toml`): a usage mistake,
/// not a file aibox failed to read.
fn not_a_file(path: &Utf8Path) -> Result<(), Failure> {
    if path.metadata().is_ok_and(|m| !m.is_dir()) {
        let folder = match path.parent() {
            Some(p) if !p.as_str().is_empty() => p.to_string(),
            _ => ".".to_owned(),
        };
        return Err(CliError::ProjectNotFolder {
            path: path.to_owned(),
            folder,
        }
        .into());
    }
    Ok(())
}

fn cwd() -> Result<Utf8PathBuf, Failure> {
    let cwd = std::env::current_dir().map_err(CliError::Cwd)?;
    Ok(Utf8PathBuf::from_path_buf(cwd)
        .map_err(|p| CliError::NonUtf8Cwd(p.display().to_string()))?)
}

/// Prints `value` as JSON with `--output json`, else runs `human`.
fn json_or(g: &Global, value: &impl serde::Serialize, human: impl FnOnce()) -> Result<(), Failure> {
    if g.output == Output::Json {
        render::json(value)?;
    } else {
        human();
    }
    Ok(())
}

/// Asks a question on the terminal; an empty answer is `default`.
fn ask(question: &str, default: &str) -> Result<String, Failure> {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{question} [{default}]: ");
    let _ = err.flush();
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(CliError::Stdin)?;
    let line = line.trim();
    Ok(if line.is_empty() {
        default.to_owned()
    } else {
        line.to_owned()
    })
}

/// On a refusal of more reach for the container, with a person at the terminal and no
/// `--yes` (which never counts as approval): shows the refusal and asks (default No);
/// `Ok` on "yes". Any other error, or no one to ask, is returned as the failure.
fn approve_reach_asked(g: &Global, err: aibox_engine::EngineError) -> Result<(), Failure> {
    if g.yes || !interactive() || !matches!(err, aibox_engine::EngineError::ReachNotApproved { .. })
    {
        return Err(err.into());
    }
    render::error(&miette::Report::new(err));
    let answer = ask("Approve this for this checkout? y/N", "N")?;
    if matches!(answer.to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(())
    } else {
        Err(CliError::ReachRefused.into())
    }
}

fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Renders a container lifecycle event as a progress line on stderr.
fn progress(g: &Global, event: &aibox_runtime::Event) {
    use aibox_runtime::Event;
    let line = match event {
        Event::Building { image } => format!("building image {image} ..."),
        Event::Starting { container } => format!("starting {container} ..."),
        Event::Waiting { container } => format!("waiting for {container} to run ..."),
        Event::Running { container, id } => {
            format!("{container} is running ({})", id.get(..12).unwrap_or(id))
        }
        Event::AlreadyRunning { container } => format!("{container} is already running"),
        Event::Stopping { container } => format!("stopping {container} ..."),
        Event::Stale { reason } => reason.clone(),
        Event::Note { line } => line.clone(),
        // With `-v` the engine's own step lines are shown instead.
        Event::Step(step) if g.verbose == 0 => {
            render::status_line(g.quiet, &format!("  {step}"));
            return;
        }
        Event::Output { line } => {
            if g.verbose == 0 {
                return;
            }
            format!("  | {line}")
        }
        _ => return,
    };
    render::note(g.quiet, &line);
}

/// `aibox help [COMMAND...]`: the long help of aibox or of the named (sub)command
/// (`{"help"}` with `--output json`).
fn help(g: &Global, path: &[String]) -> Outcome {
    use clap::CommandFactory as _;
    let mut cmd = crate::args::Cli::command();
    let mut names = Vec::new();
    for name in path {
        let Some(sub) = cmd.find_subcommand(name).cloned() else {
            let asked: Vec<&str> = names
                .iter()
                .chain(std::iter::once(name))
                .map(String::as_str)
                .collect();
            return Err(CliError::UnknownCommand {
                name: asked.join(" "),
            }
            .into());
        };
        names.push(name.clone());
        cmd = sub.bin_name(format!("aibox {}", names.join(" ")));
    }
    let text = cmd.render_long_help().to_string();
    json_or(g, &serde_json::json!({ "help": text }), || {
        render::out(&text);
    })?;
    Ok(Exit::Ok)
}
