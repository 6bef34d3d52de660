//! Every `aibox …` command shown in a shell code block of the README and the documentation
//! site runs, as written, against the real binary, when it can run offline and without a
//! container engine: `init` in an empty folder, everything else in a fresh project made
//! by `init` and `apply`. Lines with placeholders (`NAME`, `[REF]`, `a|b`, `…`) and the
//! commands that need an engine, a running container or the network (`up`, `exec`,
//! `base-image pin`, `self check`, `mcp check`, …) are left out; the test names how many
//! ran, so a parser that finds nothing fails.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use aibox_test_support::cli::CliContext;
use aibox_test_support::{files_with_extension, show_output};

/// Subcommands that need a container engine, a running container or the network.
const NEEDS_MORE: &[&str] = &[
    "up",
    "down",
    "status",
    "exec",
    "self",
    "base-image",
    "mcp check",
];

/// Words that stand for a value the reader fills in.
const PLACEHOLDERS: &[&str] = &[
    "NAME", "PATH", "REF", "CMD", "ARGS", "KEY", "VALUE", "FILE", "DIR", "X.Y.Z",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `(file:line, words)` of every `aibox` command line in a shell code block.
fn documented_commands() -> Vec<(String, Vec<String>)> {
    let root = workspace();
    let mut files = vec![root.join("README.md")];
    files.extend(files_with_extension(&root.join("docs-site/src"), "md"));
    let mut out = Vec::new();
    for file in files {
        let text = fs_err::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        let mut shell = None;
        for (i, line) in text.lines().enumerate() {
            if let Some(lang) = line.trim_start().strip_prefix("```") {
                shell = match shell {
                    None => Some(matches!(
                        lang.trim(),
                        "sh" | "bash" | "shell" | "console" | ""
                    )),
                    Some(_) => None,
                };
                continue;
            }
            if shell != Some(true) {
                continue;
            }
            let line = line.trim().trim_start_matches("$ ");
            let command = line.split(" #").next().unwrap_or_default().trim();
            if command.starts_with("aibox ") {
                let words = command
                    .split_whitespace()
                    .skip(1)
                    .map(str::to_owned)
                    .collect();
                out.push((format!("{shown}:{}", i + 1), words));
            }
        }
    }
    out
}

/// Whether the command can run here as written.
fn runnable(words: &[String]) -> bool {
    let line = words.join(" ");
    !NEEDS_MORE
        .iter()
        .any(|n| line == *n || line.starts_with(&format!("{n} ")))
        && !words.iter().any(|w| {
            PLACEHOLDERS.iter().any(|p| w.contains(p))
                || w.contains(['|', '[', '<', '…', '\'', '"', '$'])
                || w == "/"
        })
}

fn run(ctx: &CliContext, args: &[&str]) -> Output {
    ctx.command(args)
        .stdin(Stdio::null())
        .output()
        .expect("run aibox")
}

/// A fresh folder (`project/`, with no container engine on `PATH` and a private download
/// cache), empty or with a project made as the quick start makes one.
fn context(project: bool) -> CliContext {
    let ctx = CliContext::new(env!("CARGO_BIN_EXE_aibox"));
    if project {
        for args in [
            // Claude only: with no engine found, `apply` judges Codex's sandbox against
            // Docker's default and asks for a consent the docs' commands do not give.
            &["init", "demo", "--harness", "claude", "--yes"][..],
            &["apply"],
        ] {
            let out = run(&ctx, args);
            assert!(out.status.success(), "{args:?}: {}", show_output(&out));
        }
    }
    ctx
}

#[test]
fn documented_commands_run_as_written() {
    let commands = documented_commands();
    let mut ran = 0;
    for (at, words) in &commands {
        if !runnable(words) {
            continue;
        }
        let ctx = context(words[0] != "init");
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let out = run(&ctx, &args);
        // `doctor` exits 1 when a check fails, which here (no container engine) it may.
        let ok = match out.status.code() {
            Some(0) => true,
            Some(1) => words[0] == "doctor",
            _ => false,
        };
        assert!(
            ok,
            "{at}: `aibox {}`: {}",
            words.join(" "),
            show_output(&out)
        );
        ran += 1;
    }
    assert!(
        ran >= 15,
        "only {ran} of {} documented commands ran; is the parser broken?",
        commands.len()
    );
}

#[test]
fn placeholders_and_engine_commands_are_left_out() {
    let words = |s: &str| -> Vec<String> { s.split_whitespace().map(str::to_owned).collect() };
    for skipped in [
        "up",
        "exec -- claude",
        "mcp check",
        "mcp add NAME -- CMD ARGS…",
        "skill list|enable|disable NAME",
        "base-image pin [REF] [--dry-run]",
        "up / down / status",
        "self check",
    ] {
        assert!(!runnable(&words(skipped)), "{skipped}");
    }
    for run in [
        "apply --check",
        "mcp list",
        "config get container.user",
        "--version",
    ] {
        assert!(runnable(&words(run)), "{run}");
    }
}
