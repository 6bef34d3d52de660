//! One function per subcommand: resolve the project, call the library, render, pick the
//! exit code.

use std::io::IsTerminal;

use camino::{Utf8Path, Utf8PathBuf};
use clap::CommandFactory;

use crate::Exit;
use crate::args::{
    AddonCommand, ApplyArgs, Cli, Command, ConfigCommand, DoctorArgs, ExecArgs, Global, InitArgs,
    McpCommand, Output, SkillCommand, UpArgs,
};
use crate::render;

/// A failed command: the diagnostic to show and the exit code to return.
pub struct Failure {
    pub report: miette::Report,
    pub exit: Exit,
}

impl Failure {
    fn user(e: impl Into<miette::Report>) -> Self {
        Self {
            report: e.into(),
            exit: Exit::User,
        }
    }
    fn env(e: impl Into<miette::Report>) -> Self {
        Self {
            report: e.into(),
            exit: Exit::Environment,
        }
    }
}

type Outcome = Result<Exit, Failure>;

/// An `apply` failure: the file system refusing a read or write is the environment
/// (exit 3), everything else is about the project (exit 2).
fn apply_failure(e: aibox_engine::EngineError) -> Failure {
    if matches!(e, aibox_engine::EngineError::Io { .. }) {
        Failure::env(e)
    } else {
        Failure::user(e)
    }
}

/// Runs the parsed command line.
pub fn run(cli: &Cli) -> Outcome {
    let g = &cli.global;
    match &cli.command {
        Command::Completion { shell } => {
            let mut cmd = Cli::command();
            let mut buf = Vec::new();
            clap_complete::generate(*shell, &mut cmd, "aibox", &mut buf);
            render::out(String::from_utf8_lossy(&buf).trim_end());
            Ok(Exit::Ok)
        }
        Command::Docs { page } => {
            let text = if page == "cli" {
                crate::docs::cli_reference()
            } else {
                crate::docs::config_reference()
            };
            render::out(text.trim_end());
            Ok(Exit::Ok)
        }
        Command::Init(args) => init(g, args),
        Command::Apply(args) => apply(g, args),
        Command::Up(args) => up(g, args),
        Command::Down => down(g),
        Command::Status => status(g),
        Command::Exec(args) => exec(g, args),
        Command::Doctor(args) => doctor(g, args),
        Command::Config(cmd) => config(g, cmd),
        Command::Mcp(McpCommand::List) => mcp_list(g),
        Command::Skill(cmd) => skill(g, cmd),
        Command::Addon(cmd) => addon(g, cmd),
    }
}

/// The project root: `--project DIR` as given, else the nearest parent with `aibox.toml`.
fn project_root(explicit: Option<&Utf8Path>) -> Result<Utf8PathBuf, Failure> {
    if let Some(dir) = explicit {
        return Ok(dir.to_owned());
    }
    aibox_config::find_project_root(&cwd()?).map_err(Failure::user)
}

fn cwd() -> Result<Utf8PathBuf, Failure> {
    let cwd = std::env::current_dir().map_err(|e| {
        Failure::env(miette::miette!(
            code = "aibox::cli::cwd",
            "cannot read the current directory: {e}"
        ))
    })?;
    Utf8PathBuf::from_path_buf(cwd).map_err(|p| {
        Failure::user(miette::miette!(
            code = "aibox::cli::non_utf8_path",
            "the current directory is not valid UTF-8: {}",
            p.display()
        ))
    })
}

fn json_or(g: &Global, value: &impl serde::Serialize, human: impl FnOnce()) -> Result<(), Failure> {
    if g.output == Output::Json {
        render::json(value).map_err(|report| Failure {
            report,
            exit: Exit::Internal,
        })
    } else {
        human();
        Ok(())
    }
}

fn init(g: &Global, args: &InitArgs) -> Outcome {
    let dir = match &g.project {
        Some(d) => d.clone(),
        None => cwd()?,
    };
    let absolute = dir.canonicalize_utf8().ok();
    let name = match &args.name {
        Some(n) => n.clone(),
        None => folder_project_name(absolute.as_deref())?,
    };
    warn_if_nested(g, absolute.as_deref());
    let mut harnesses = args.harnesses.clone();
    let interactive = !g.yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let chose_harnesses = harnesses.is_empty() && !interactive;
    let chose_mode =
        args.context_mode.is_none() && args.processkit_source.is_none() && !interactive;
    if harnesses.is_empty() && interactive {
        let answer = ask(
            "Harnesses to enable (comma-separated: claude, codex, gemini, opencode, cursor, vscode)",
            "claude",
        )?;
        harnesses = answer
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
    }
    if harnesses.is_empty() {
        harnesses.push("claude".to_owned());
    }
    let mut parsed = Vec::new();
    for h in &harnesses {
        let harness: aibox_config::Harness = h.parse().map_err(Failure::user)?;
        if !parsed.contains(&harness) {
            parsed.push(harness);
        }
    }
    let context_mode = match args.context_mode.as_deref() {
        Some("harness-only") => aibox_config::ContextMode::HarnessOnly,
        Some(_) => aibox_config::ContextMode::Processkit,
        None if interactive => {
            let answer = ask("Context mode (processkit | harness-only)", "harness-only")?;
            if answer == "processkit" {
                aibox_config::ContextMode::Processkit
            } else {
                aibox_config::ContextMode::HarnessOnly
            }
        }
        None if args.processkit_source.is_some() => aibox_config::ContextMode::Processkit,
        None => aibox_config::ContextMode::HarnessOnly,
    };
    let opts = aibox_config::init::InitOptions {
        name,
        harnesses: parsed,
        context_mode,
        processkit_source: args.processkit_source.clone(),
        processkit_version: args.processkit_version.clone(),
        base_image: args.base_image.clone(),
    };
    if chose_harnesses || chose_mode {
        note_defaults(g, &opts);
    }
    let report = aibox_engine::init::init(&dir, &opts).map_err(Failure::user)?;
    let summary = serde_json::json!({
        "aibox_toml": report.aibox_toml,
        "gitignore": report.gitignore,
        "gitignore_added": report.gitignore_added,
    });
    json_or(g, &summary, || {
        render::note(g.quiet, &format!("created {}", report.aibox_toml));
        if !report.gitignore_added.is_empty() {
            render::note(
                g.quiet,
                &format!(
                    "added {} entries to {}",
                    report.gitignore_added.len(),
                    report.gitignore
                ),
            );
        }
        render::note(g.quiet, "next: review aibox.toml, then run `aibox apply`");
    })?;
    Ok(Exit::Ok)
}

fn ask(question: &str, default: &str) -> Result<String, Failure> {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{question} [{default}]: ");
    let _ = err.flush();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).map_err(|e| {
        Failure::env(miette::miette!(
            code = "aibox::cli::stdin",
            "cannot read the answer: {e}"
        ))
    })?;
    let line = line.trim();
    Ok(if line.is_empty() {
        default.to_owned()
    } else {
        line.to_owned()
    })
}

fn apply(g: &Global, args: &ApplyArgs) -> Outcome {
    let root = project_root(g.project.as_deref())?;
    let mut opts = aibox_engine::ApplyOptions {
        dry_run: args.dry_run,
        check: args.check,
        force: args.force,
        ..aibox_engine::ApplyOptions::default()
    };
    opts.plan.download_progress = render::download_progress(g.quiet);
    // Resolve once; the consent prompt reads the resolved seccomp decision.
    let resolved = aibox_engine::resolve(&root, &opts.plan).map_err(apply_failure)?;
    let report = match consent_question(g, &resolved) {
        None => aibox_engine::apply_resolved(&resolved, &opts).map_err(apply_failure)?,
        Some((key, refusal)) => {
            // Show the full explanation first, then ask.
            render::error(&miette::Report::new(refusal));
            ask_seccomp_consent(g, &root, &key)?;
            aibox_engine::apply(&root, &opts).map_err(apply_failure)?
        }
    };
    json_or(g, &report, || {
        let options = aibox_engine::render::HumanOptions {
            check: args.check,
            verbose: g.verbose > 0,
        };
        for (channel, line) in report.render_human(options) {
            match channel {
                aibox_engine::render::Channel::Note => render::note(g.quiet, &line),
                aibox_engine::render::Channel::Output => render::out(&line),
            }
        }
    })?;
    if args.check && report.changed() {
        return Ok(Exit::Problems);
    }
    if args.build {
        let opts = aibox_engine::lifecycle::LifecycleOptions::default();
        aibox_engine::lifecycle::build(&root, &opts, &mut |e| progress(g, e))
            .map_err(Failure::env)?;
    }
    Ok(Exit::Ok)
}

/// The consent key to ask for (with the refusal to show) when the resolved project lacks
/// a seccomp consent and a person is at the terminal without `--yes` (which never counts
/// as consent).
fn consent_question(
    g: &Global,
    resolved: &aibox_engine::Resolved,
) -> Option<(String, aibox_policy::PolicyError)> {
    if g.yes || !interactive() {
        return None;
    }
    let key = aibox_engine::consent::missing_seccomp_consent(resolved)?;
    let refusal = resolved.security.check().err()?;
    Some((key, refusal))
}

/// Asks (default No) and, on "yes", records `key = true` in `aibox.toml`.
fn ask_seccomp_consent(g: &Global, root: &Utf8Path, key: &str) -> Result<(), Failure> {
    let answer = ask(
        &format!("Record your consent (`{key} = true` in aibox.toml)? y/N"),
        "N",
    )?;
    if !matches!(answer.to_ascii_lowercase().as_str(), "y" | "yes") {
        return Err(Failure::user(miette::miette!(
            code = "aibox::policy::seccomp_consent",
            help = "nothing was written; see the explanation above for the narrower options",
            "consent not given"
        )));
    }
    let path = aibox_engine::consent::record_consent(root, key).map_err(Failure::user)?;
    render::note(g.quiet, &format!("recorded `{key} = true` in {path}"));
    Ok(())
}

/// A project inside another one works, but is rarely meant: say so.
fn warn_if_nested(g: &Global, absolute: Option<&Utf8Path>) {
    if let Some(outer) = absolute
        .and_then(Utf8Path::parent)
        .and_then(|p| aibox_config::find_project_root(p).ok())
    {
        render::note(
            g.quiet,
            &format!(
                "warning: {outer} is already an aibox project; this creates a separate project \
                 nested inside it (run `aibox` commands from {outer} to work on that one)"
            ),
        );
    }
}

/// No terminal to ask on (or `--yes`): say what `init` chose, so nothing is implicit.
fn note_defaults(g: &Global, opts: &aibox_config::init::InitOptions) {
    render::note(
        g.quiet,
        &format!(
            "no questions asked (no terminal or --yes); chose the defaults: harnesses = [{}], \
             context mode = {}; pass --harness and --context-mode to choose",
            opts.harnesses
                .iter()
                .map(|h| format!("\"{}\"", h.as_str()))
                .collect::<Vec<_>>()
                .join(", "),
            opts.context_mode.as_str()
        ),
    );
}

/// The project name `init` takes from the folder, or an error suggesting
/// `aibox init NAME` when the folder name is not a valid project name.
fn folder_project_name(absolute: Option<&Utf8Path>) -> Result<String, Failure> {
    let folder = absolute
        .and_then(Utf8Path::file_name)
        .unwrap_or("project")
        .to_owned();
    if aibox_config::validate::is_container_name(&folder) {
        return Ok(folder);
    }
    let mapped: String = folder
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let suggestion = if trimmed.is_empty() {
        "my-project"
    } else {
        trimmed
    };
    Err(Failure::user(miette::miette!(
        code = "aibox::init::folder_name",
        help = format!(
            "name the project yourself: `aibox init {suggestion}` (letters, digits, `.`, `_` \
             and `-`, starting with a letter or digit)"
        ),
        "the folder name `{folder}` is not a valid project name"
    )))
}

fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

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

fn up(g: &Global, args: &UpArgs) -> Outcome {
    let root = project_root(g.project.as_deref())?;
    let mut opts = aibox_engine::lifecycle::UpOptions {
        build: args.build,
        ..Default::default()
    };
    opts.apply.plan.download_progress = render::download_progress(g.quiet);
    let report = aibox_engine::lifecycle::up(&root, &opts, &mut |e| progress(g, e))
        .map_err(lifecycle_failure)?;
    // Relaxation notices are shown even with --quiet: they concern security.
    for notice in &report.notices {
        render::note(false, notice);
    }
    for warning in &report.apply.warnings {
        render::note(false, &format!("warning: {warning}"));
    }
    if let Some(sandbox) = &report.codex_sandbox {
        render::note(false, &sandbox.line());
    }
    json_or(g, &report, || {})?;
    Ok(Exit::Ok)
}

fn lifecycle_failure(e: aibox_engine::lifecycle::LifecycleError) -> Failure {
    use aibox_engine::lifecycle::LifecycleError;
    if matches!(
        e,
        LifecycleError::Engine(_) | LifecycleError::ContainerPolicy { .. }
    ) {
        Failure::user(e)
    } else {
        Failure::env(e)
    }
}

fn down(g: &Global) -> Outcome {
    let root = project_root(g.project.as_deref())?;
    let opts = aibox_engine::lifecycle::LifecycleOptions::default();
    let status = aibox_engine::lifecycle::down(&root, &opts, &mut |e| progress(g, e))
        .map_err(lifecycle_failure)?;
    json_or(g, &status, || {
        render::note(
            g.quiet,
            &format!("{} is {}", status.container, status.state),
        );
    })?;
    Ok(Exit::Ok)
}

fn status(g: &Global) -> Outcome {
    let root = project_root(g.project.as_deref())?;
    let opts = aibox_engine::lifecycle::LifecycleOptions::default();
    let status = aibox_engine::lifecycle::status(&root, &opts).map_err(lifecycle_failure)?;
    json_or(g, &status, || {
        render::out(&format!("container: {}", status.container));
        render::out(&format!("state:     {}", status.state));
        render::out(&format!("image:     {}", status.image));
        if let Some(id) = &status.container_id {
            render::out(&format!("id:        {id}"));
        }
    })?;
    Ok(Exit::Ok)
}

fn exec(g: &Global, args: &ExecArgs) -> Outcome {
    let root = project_root(g.project.as_deref())?;
    let opts = aibox_engine::lifecycle::LifecycleOptions::default();
    let code = aibox_engine::lifecycle::exec(&root, &opts, &args.cmd, &args.env)
        .map_err(lifecycle_failure)?;
    // The command's own exit code is the result; clamp it into a process exit code.
    std::process::exit(code.clamp(0, 255));
}

fn doctor(g: &Global, args: &DoctorArgs) -> Outcome {
    let root = project_root(g.project.as_deref())?;
    if args.integrity {
        return integrity(g, &root);
    }
    let report =
        aibox_engine::doctor::doctor(&root, &aibox_engine::doctor::DoctorOptions::default())
            .map_err(Failure::user)?;
    if let Some(path) = &args.report {
        aibox_engine::doctor::write_report(&root, &report, path).map_err(Failure::env)?;
        render::note(
            g.quiet,
            &format!(
                "wrote {path}; it is redacted, but read it before you attach it anywhere public"
            ),
        );
    }
    json_or(g, &report, || render::out(report.render_human().trim_end()))?;
    Ok(if report.has_errors() {
        Exit::Problems
    } else {
        Exit::Ok
    })
}

fn config(g: &Global, cmd: &ConfigCommand) -> Outcome {
    match cmd {
        ConfigCommand::Schema { local } => {
            let schema = if *local {
                aibox_config::schema::local_toml_schema()
            } else {
                aibox_config::schema::aibox_toml_schema()
            };
            render::out(aibox_config::schema::render_schema(&schema).trim_end());
            Ok(Exit::Ok)
        }
        ConfigCommand::Validate => {
            let root = project_root(g.project.as_deref())?;
            // The same checks as `apply` and `config set`.
            aibox_engine::config_check::check_project(&root).map_err(Failure::user)?;
            json_or(
                g,
                &serde_json::json!({ "valid": true, "project": root }),
                || {
                    render::note(g.quiet, &format!("{root}/aibox.toml is valid"));
                },
            )?;
            Ok(Exit::Ok)
        }
        ConfigCommand::Get { key } => {
            let root = project_root(g.project.as_deref())?;
            let path = root.join(aibox_config::AIBOX_TOML);
            let text = read(&path)?;
            let config = aibox_config::parse_aibox_toml(&text, aibox_config::AIBOX_TOML)
                .map_err(Failure::user)?;
            let effective = serde_json::to_value(&config)
                .map_err(|e| Failure::env(miette::miette!(code = "aibox::cli::internal", "{e}")))?;
            let schema = aibox_config::schema::aibox_toml_schema();
            match crate::config_get::lookup(&effective, &schema, key) {
                crate::config_get::Lookup::Value(v) => {
                    json_or(g, &serde_json::json!({ "key": key, "value": v }), || {
                        render::out(&crate::config_get::raw(&v));
                    })?;
                    Ok(Exit::Ok)
                }
                crate::config_get::Lookup::Unset => Err(Failure::user(miette::miette!(
                    code = "aibox::config::key_not_set",
                    help = format!("it has no default; set it with `aibox config set {key} VALUE`"),
                    "`{key}` is not set in {path}"
                ))),
                crate::config_get::Lookup::Unknown { at, suggestion } => {
                    let help = suggestion.map_or_else(
                        || "`aibox config schema` lists every key".to_owned(),
                        |s| format!("did you mean `{s}`? (`aibox config schema` lists every key)"),
                    );
                    Err(Failure::user(miette::miette!(
                        code = "aibox::config::unknown_key",
                        help = help,
                        "`{at}` is not a key of aibox.toml"
                    )))
                }
            }
        }
        ConfigCommand::Set { key, value, local } => {
            let root = project_root(g.project.as_deref())?;
            let file = if *local {
                aibox_config::edit::ConfigFile::Local
            } else {
                aibox_config::edit::ConfigFile::Team
            };
            let path = aibox_engine::config_edit::config_set(&root, file, key, value)
                .map_err(Failure::user)?;
            render::note(g.quiet, &format!("set {key} in {path}"));
            Ok(Exit::Ok)
        }
    }
}

fn read(path: &Utf8Path) -> Result<String, Failure> {
    fs_err::read_to_string(path).map_err(|e| {
        Failure::user(miette::miette!(
            code = "aibox::cli::read",
            "cannot read {path}: {e}"
        ))
    })
}

fn mcp_list(g: &Global) -> Outcome {
    let root = project_root(g.project.as_deref())?;
    let list = aibox_engine::mcp_list(&root).map_err(Failure::user)?;
    if let Some(reason) = &list.not_resolved {
        // Never downloaded here: say the processkit servers are missing and why.
        render::note(
            false,
            &format!("warning: processkit servers not listed: not resolved: {reason}"),
        );
    }
    let servers = list.servers;
    json_or(g, &servers, || {
        if servers.is_empty() {
            render::out("no MCP servers are configured");
        }
        for s in &servers {
            let target = s.target_file.as_deref().unwrap_or("-");
            let tools = if s.allowed_tools.is_empty() {
                "(ask)".to_owned()
            } else {
                s.allowed_tools.join(", ")
            };
            render::out(&format!(
                "{:<9} {:<24} {:<10} {:<6} -> {target}",
                s.harness.as_str(),
                s.name,
                format!("{:?}", s.origin).to_lowercase(),
                s.transport
            ));
            render::out(&format!(
                "{:<9} trust: {}; allowed tools: {tools}",
                "", s.trust_scope
            ));
            if let Some(why) = &s.skipped {
                render::out(&format!("{:<9} not registered: {why}", ""));
            }
            for note in &s.notes {
                render::out(&format!("{:<9} note: {note}", ""));
            }
        }
    })?;
    Ok(Exit::Ok)
}

fn addon(g: &Global, cmd: &AddonCommand) -> Outcome {
    match cmd {
        AddonCommand::List => {
            let root = match &g.project {
                Some(p) => Some(p.clone()),
                None => aibox_config::find_project_root(&cwd()?).ok(),
            };
            let project = match root {
                Some(r) => Some(aibox_config::load_project(&r).map_err(Failure::user)?),
                None => None,
            };
            let rows = aibox_engine::addons::list(project.as_ref().map(|p| &p.config))
                .map_err(Failure::user)?;
            json_or(g, &rows, || {
                for r in &rows {
                    render::out(&format!(
                        "{:<16} {:<10} {:<14} {:<16} {}",
                        r.name,
                        r.version,
                        r.verification,
                        r.installed.as_deref().unwrap_or("-"),
                        r.summary
                    ));
                    if let Some(e) = &r.exception {
                        render::out(&format!("{:<16} UNVERIFIED: {e}", ""));
                    }
                }
            })?;
            Ok(Exit::Ok)
        }
        AddonCommand::Add { names } | AddonCommand::Remove { names } => {
            let root = project_root(g.project.as_deref())?;
            let changed = if matches!(cmd, AddonCommand::Add { .. }) {
                aibox_engine::addons::add(&root, names)
            } else {
                aibox_engine::addons::remove(&root, names)
            }
            .map_err(Failure::user)?;
            json_or(g, &serde_json::json!({ "changed": changed }), || {
                let msg = if changed {
                    "aibox.toml updated; run `aibox apply` to change the image"
                } else {
                    "nothing to change"
                };
                render::note(g.quiet, msg);
            })?;
            Ok(Exit::Ok)
        }
    }
}

fn skill(g: &Global, cmd: &SkillCommand) -> Outcome {
    match cmd {
        SkillCommand::List => {
            let root = project_root(g.project.as_deref())?;
            let skills = aibox_engine::skills::list(&root).map_err(Failure::user)?;
            json_or(g, &skills, || {
                if skills.is_empty() {
                    render::out("no processkit skills are installed");
                }
                for s in &skills {
                    let mut tags = Vec::new();
                    if s.core {
                        tags.push("core");
                    }
                    if s.mcp_server {
                        tags.push("mcp");
                    }
                    if s.included {
                        tags.push("included");
                    }
                    if s.excluded {
                        tags.push("excluded");
                    }
                    let origin = match s.origin {
                        aibox_engine::skills::Trust::FirstParty => "first-party",
                        aibox_engine::skills::Trust::ThirdParty => "third-party",
                    };
                    let verdict = if s.failed_points.is_empty() {
                        s.verdict.as_str().to_owned()
                    } else {
                        let points: Vec<String> =
                            s.failed_points.iter().map(u8::to_string).collect();
                        format!("fail (point {})", points.join(", "))
                    };
                    render::out(&format!(
                        "{:<24} {:<14} {:<12} {:<18} {}",
                        s.name,
                        s.category,
                        origin,
                        verdict,
                        tags.join(", ")
                    ));
                }
            })?;
            Ok(Exit::Ok)
        }
        SkillCommand::Review { target } => {
            let root = match &g.project {
                Some(p) => Some(p.clone()),
                None => aibox_config::find_project_root(&cwd()?).ok(),
            };
            let review = aibox_engine::skills::review_target(root.as_deref(), target)
                .map_err(Failure::user)?;
            json_or(g, &review, || {
                render::out(review.render_human().trim_end());
                let first_party = root.as_deref().is_some_and(|r| {
                    !Utf8Path::new(target).is_dir()
                        && aibox_engine::skills::trust_of_installed(r, target)
                            == Some(aibox_engine::skills::Trust::FirstParty)
                });
                if first_party && review.failed() {
                    render::out(
                        "This skill is first-party (shipped in the verified release pinned in aibox.lock): \
                         its findings are reported and do not block `aibox apply` unless \
                         `[processkit] review = \"all\"`.",
                    );
                }
            })?;
            Ok(if review.failed() {
                Exit::Problems
            } else {
                Exit::Ok
            })
        }
        SkillCommand::Enable { name } | SkillCommand::Disable { name } => {
            let root = project_root(g.project.as_deref())?;
            let path = if matches!(cmd, SkillCommand::Enable { .. }) {
                aibox_engine::skills::enable(&root, name)
            } else {
                aibox_engine::skills::disable(&root, name)
            }
            .map_err(Failure::user)?;
            render::note(
                g.quiet,
                &format!("updated [skills] in {path}; run `aibox apply` to install or remove it"),
            );
            // Shown even with --quiet: the command did nothing the user can use yet.
            if aibox_config::load_project(&root)
                .is_ok_and(|p| p.config.context.mode == aibox_config::ContextMode::HarnessOnly)
            {
                render::note(
                    false,
                    "warning: context mode is `harness-only`, so no processkit skill is \
                     installed and this has no effect until [context] mode = \"processkit\"",
                );
            }
            Ok(Exit::Ok)
        }
    }
}

fn integrity(g: &Global, root: &Utf8Path) -> Outcome {
    let report = aibox_engine::integrity(root.as_std_path()).map_err(Failure::user)?;
    json_or(g, &report, || {
        let status = serde_json::to_value(report.status)
            .ok()
            .and_then(|v| v.as_str().map(ToOwned::to_owned))
            .unwrap_or_default();
        render::out(&format!(
            "processkit integrity: {status} ({} files checked)",
            report.checked
        ));
        if let Some(v) = &report.lock_version {
            render::out(&format!(
                "  version: lock {v}, marker {}",
                report.marker_version.as_deref().unwrap_or("-")
            ));
        }
        for (label, files) in [
            ("modified", &report.modified),
            ("missing", &report.missing),
            ("unexpected", &report.unexpected),
            ("edited (user-owned, fine)", &report.user_modified),
        ] {
            for f in files {
                render::out(&format!("  {label}: {f}"));
            }
        }
    })?;
    Ok(if report.exit_code() == 0 {
        Exit::Ok
    } else {
        Exit::Problems
    })
}
