//! `aibox init [NAME]`: asks what it needs at a terminal, says what it chose otherwise,
//! and calls `aibox_engine::init::init`.

use camino::Utf8Path;

use super::{Outcome, ask, cwd, interactive, json_or};
use crate::args::{Global, InitArgs};
use crate::error::{CliError, Failure};
use crate::exit::Exit;
use crate::render;
use aibox_config::{ContextMode, Harness};

pub fn run(g: &Global, args: &InitArgs) -> Outcome {
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
    let interactive = !g.yes && interactive();
    let mut harnesses: Vec<Harness> = Vec::new();
    for h in &args.harnesses {
        if !harnesses.contains(&h.0) {
            harnesses.push(h.0);
        }
    }
    let chose_harnesses = harnesses.is_empty() && !interactive;
    let pk_flags = args.processkit_source.is_some() || args.processkit_version.is_some();
    let chose_mode = args.context_mode.is_none() && !pk_flags && !interactive;
    if harnesses.is_empty() && interactive {
        let answer = ask(
            "Harnesses to enable (comma-separated: claude, codex, gemini, opencode, cursor, vscode)",
            "claude",
        )?;
        for h in answer.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let harness: Harness = h.parse()?;
            if !harnesses.contains(&harness) {
                harnesses.push(harness);
            }
        }
    }
    if harnesses.is_empty() {
        harnesses.push(Harness::Claude);
    }
    let context_mode = match args.context_mode {
        Some(mode) => mode.0,
        None if interactive => {
            let answer = ask("Context mode (processkit | harness-only)", "harness-only")?;
            if answer == "processkit" {
                ContextMode::Processkit
            } else {
                ContextMode::HarnessOnly
            }
        }
        None if pk_flags => ContextMode::Processkit,
        None => ContextMode::HarnessOnly,
    };
    let opts = aibox_config::init::InitOptions {
        name,
        harnesses,
        context_mode,
        processkit_source: args.processkit_source.clone(),
        processkit_version: processkit_version(g, args, context_mode)?,
        base_image: args.base_image.clone(),
    };
    if chose_harnesses || chose_mode {
        let mode_from = if args.context_mode.is_some() {
            "from --context-mode"
        } else {
            "from --processkit-source / --processkit-version"
        };
        note_defaults(
            g,
            &opts,
            chose_harnesses,
            (!chose_mode).then_some(mode_from),
        );
    }
    let report = aibox_engine::init::init(&dir, &opts)?;
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

/// `--processkit-version`, with `latest` resolved now to the newest published release
/// of the source (the official repository when none is given) and written as that exact
/// tag, so `aibox.toml` never floats.
fn processkit_version(
    g: &Global,
    args: &InitArgs,
    mode: ContextMode,
) -> Result<Option<String>, crate::error::Failure> {
    match args.processkit_version.as_deref() {
        Some("latest") if mode == ContextMode::Processkit => {
            let source =
                aibox_engine::versions::source_for(None, args.processkit_source.as_deref())?;
            let newest = aibox_engine::versions::newest(&source, false)?;
            render::note(
                g.quiet,
                &format!(
                    "the newest release of {source} is {}; pinned it",
                    newest.version
                ),
            );
            Ok(Some(newest.version))
        }
        other => Ok(other.map(str::to_owned)),
    }
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

/// No terminal to ask on (or `--yes`): say what `init` chose and where each choice came
/// from, so nothing is implicit.
fn note_defaults(
    g: &Global,
    opts: &aibox_config::init::InitOptions,
    default_harnesses: bool,
    mode_from: Option<&str>,
) {
    let harnesses = opts
        .harnesses
        .iter()
        .map(|h| format!("\"{}\"", h.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let harnesses_from = if default_harnesses {
        "the default; --harness to choose"
    } else {
        "from --harness"
    };
    render::note(
        g.quiet,
        &format!(
            "no questions asked (no terminal or --yes): harnesses = [{harnesses}] ({}), \
             context mode = {} ({})",
            harnesses_from,
            opts.context_mode.as_str(),
            mode_from.unwrap_or("the default; --context-mode to choose"),
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
    Err(CliError::FolderName {
        folder,
        suggestion: suggestion.to_owned(),
    }
    .into())
}
