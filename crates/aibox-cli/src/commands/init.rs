//! `aibox init [NAME]`: asks what it needs at a terminal, says what it chose otherwise,
//! and calls `aibox_engine::init::init`.

use camino::Utf8Path;

use std::io::{BufRead, Write};

use super::{Outcome, cwd, interactive, json_or};
use crate::args::{Global, InitArgs};
use crate::error::{CliError, Failure};
use crate::exit::Exit;
use crate::render;
use aibox_config::{ContextMode, Harness};

pub fn run(g: &Global, args: &InitArgs) -> Outcome {
    let dir = match &g.project {
        Some(d) => {
            super::not_a_file(d)?;
            d.clone()
        }
        None => cwd()?,
    };
    // Refuse before asking anything: answers to a command that cannot run are wasted.
    aibox_engine::init::check_target(&dir)?;
    pk_flags_fit(args, args.context_mode.map(|m| m.0))?;
    let absolute = dir.canonicalize_utf8().ok();
    let name = match &args.name {
        Some(n) => n.clone(),
        None => folder_project_name(absolute.as_deref())?,
    };
    warn_if_nested(absolute.as_deref());
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
    let mut stdin = std::io::stdin().lock();
    let mut stderr = std::io::stderr();
    if harnesses.is_empty() && interactive {
        harnesses = ask_harnesses(&mut stdin, &mut stderr)?;
    }
    if harnesses.is_empty() {
        harnesses.push(Harness::Claude);
    }
    let context_mode = match args.context_mode {
        Some(mode) => mode.0,
        None if interactive => ask_context_mode(&mut stdin, &mut stderr)?,
        None if pk_flags => ContextMode::Processkit,
        None => ContextMode::HarnessOnly,
    };
    pk_flags_fit(args, Some(context_mode))?;
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

/// Asks `question` until `parse` accepts the answer (an empty answer is `default`),
/// saying why an answer was not taken; end of input (Ctrl-D) cancels `init`.
fn ask_until<T>(
    input: &mut impl BufRead,
    out: &mut impl Write,
    question: &str,
    default: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<T, Failure> {
    loop {
        let _ = write!(out, "{question} [{default}]: ");
        let _ = out.flush();
        let mut line = String::new();
        if input.read_line(&mut line).map_err(CliError::Stdin)? == 0 {
            let _ = writeln!(out);
            return Err(CliError::Cancelled.into());
        }
        let answer = match line.trim() {
            "" => default,
            a => a,
        };
        match parse(answer) {
            Ok(v) => return Ok(v),
            Err(why) => {
                let _ = writeln!(out, "{why}");
            }
        }
    }
}

/// The harness question: a comma-separated list, each id checked with its suggestion.
fn ask_harnesses(input: &mut impl BufRead, out: &mut impl Write) -> Result<Vec<Harness>, Failure> {
    ask_until(
        input,
        out,
        "Harnesses to enable (comma-separated: claude, codex, gemini, opencode, cursor, vscode)",
        "claude",
        |answer| {
            let mut harnesses = Vec::new();
            for h in answer.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let harness: Harness = h.parse().map_err(|e: aibox_config::UnknownHarness| {
                    let help = miette::Diagnostic::help(&e).map(|h| h.to_string());
                    format!("{e}; {}", help.unwrap_or_default())
                })?;
                if !harnesses.contains(&harness) {
                    harnesses.push(harness);
                }
            }
            if harnesses.is_empty() {
                return Err("name at least one harness".to_owned());
            }
            Ok(harnesses)
        },
    )
}

/// Refuses processkit flags beside context mode `harness-only`: they would be dropped
/// without a word.
fn pk_flags_fit(args: &InitArgs, mode: Option<ContextMode>) -> Result<(), Failure> {
    if mode != Some(ContextMode::HarnessOnly) {
        return Ok(());
    }
    let flags: Vec<&str> = [
        ("`--processkit-source`", args.processkit_source.is_some()),
        ("`--processkit-version`", args.processkit_version.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect();
    if flags.is_empty() {
        return Ok(());
    }
    Err(CliError::InitFlagsConflict {
        flags: flags.join(" and "),
    }
    .into())
}

/// The context-mode question: exactly one of the two modes.
fn ask_context_mode(
    input: &mut impl BufRead,
    out: &mut impl Write,
) -> Result<ContextMode, Failure> {
    let modes = [ContextMode::Processkit, ContextMode::HarnessOnly];
    ask_until(
        input,
        out,
        "Context mode (processkit | harness-only)",
        "harness-only",
        |answer| {
            if let Some(mode) = modes.into_iter().find(|m| m.as_str() == answer) {
                return Ok(mode);
            }
            let hint = aibox_config::closest(answer, modes.iter().map(|m| m.as_str()))
                .map(|m| format!("did you mean \"{m}\"? "))
                .unwrap_or_default();
            Err(format!(
                "unknown context mode \"{answer}\"; {hint}answer processkit or harness-only"
            ))
        },
    )
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
            // A new project has no personal CA setting yet: the system's roots serve.
            let newest = aibox_engine::versions::newest(&source, false, None)?;
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
fn warn_if_nested(absolute: Option<&Utf8Path>) {
    if let Some(outer) = absolute
        .and_then(Utf8Path::parent)
        .and_then(|p| aibox_config::find_project_root(p).ok())
    {
        render::warning(&format!(
            "{outer} is already an aibox project; this creates a separate project nested \
             inside it (run `aibox` commands from {outer} to work on that one)"
        ));
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
            mode_from.unwrap_or(
                "what init picks unasked, as it needs no download; --context-mode to choose"
            ),
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
    // What is left of a name of other letters (`ünï` -> `n`) names nothing: a neutral
    // example then.
    let suggestion = if trimmed.len() < 3 {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A folder name that is not a container name gets a close valid one, or a neutral
    /// example when little of it is left (`ünï` suggested `aibox init n`).
    #[test]
    fn folder_names_get_a_suggestion_that_means_something() {
        let suggestion = |folder: &str| {
            let Err(err) = folder_project_name(Some(Utf8Path::new(folder))) else {
                panic!("{folder} is a valid name")
            };
            err.report.to_string() + &format!("{:?}", err.report)
        };
        assert!(suggestion("/x/My Project").contains("my-project"));
        assert!(suggestion("/x/Ünï").contains("my-project"));
        assert!(!suggestion("/x/ünï").contains("init n`"));
        assert!(suggestion("/x/Foo Bar").contains("foo-bar"));
        assert_eq!(
            folder_project_name(Some(Utf8Path::new("/x/ok-name"))).ok(),
            Some("ok-name".to_owned())
        );
    }

    fn run<T>(
        answers: &str,
        ask: impl Fn(&mut &[u8], &mut Vec<u8>) -> Result<T, Failure>,
    ) -> (Result<T, Failure>, String) {
        let mut input = answers.as_bytes();
        let mut out = Vec::new();
        let result = ask(&mut input, &mut out);
        (result, String::from_utf8(out).unwrap())
    }

    /// A wrong answer is asked again with a hint, for both questions alike; it never
    /// becomes a default or aborts `init`.
    #[test]
    fn an_invalid_answer_is_asked_again() {
        for typo in ["processkitt", "Processkit", "harness_only"] {
            let (mode, out) = run(&format!("{typo}\nprocesskit\n"), |i, o| {
                ask_context_mode(i, o)
            });
            assert_eq!(mode.ok().unwrap(), ContextMode::Processkit);
            assert!(
                out.contains(&format!("unknown context mode \"{typo}\"")),
                "{out}"
            );
            assert!(out.contains("did you mean"), "{out}");
        }
        let (harnesses, out) = run("claud\n\n", |i, o| ask_harnesses(i, o));
        assert_eq!(harnesses.ok().unwrap(), vec![Harness::Claude]);
        assert!(out.contains("did you mean \"claude\"?"), "{out}");
        let (mode, _) = run("\n", |i, o| ask_context_mode(i, o));
        assert_eq!(mode.ok().unwrap(), ContextMode::HarnessOnly);
    }

    /// Ctrl-D at a question cancels `init` (exit 2), it does not take the defaults.
    #[test]
    fn end_of_input_cancels() {
        let (mode, _) = run("processkitt\n", |i, o| ask_context_mode(i, o));
        let err = mode.unwrap_err();
        assert_eq!(err.kind, aibox_config::ErrorKind::User);
        assert!(
            err.report.to_string().contains("cancelled"),
            "{:?}",
            err.report
        );
        let (harnesses, _) = run("", |i, o| ask_harnesses(i, o));
        assert!(harnesses.is_err());
    }
}
