//! Every `aibox …` command shown in a shell code block of the README and the documentation
//! site runs, as written, against the real binary, when it can run offline and without a
//! container engine: `init` in an empty folder, everything else in a fresh project made
//! by `init` and `apply`. Lines with placeholders (`NAME`, `[REF]`, `a|b`, `…`) and the
//! commands that need an engine, a running container or the network (`up`, `exec`,
//! `base-image pin`, `self check`, `mcp check`, …) are left out; the test names how many
//! ran, so a parser that finds nothing fails.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use camino::Utf8PathBuf;

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

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs_err::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

/// `(file:line, words)` of every `aibox` command line in a shell code block.
fn documented_commands() -> Vec<(String, Vec<String>)> {
    let root = workspace();
    let mut files = vec![root.join("README.md")];
    markdown_files(&root.join("docs-site/src"), &mut files);
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

fn aibox(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aibox"))
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("AIBOX_PROJECT")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run aibox")
}

fn text(out: &Output) -> String {
    format!(
        "status: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An empty folder, or a project made as the quick start makes one.
fn folder(project: bool) -> (tempfile::TempDir, Utf8PathBuf) {
    let t = tempfile::tempdir().unwrap();
    // Named as in the docs (`cd my-project`): `init` takes the folder's name.
    let dir = Utf8PathBuf::from_path_buf(t.path().join("my-project")).unwrap();
    fs_err::create_dir(&dir).unwrap();
    if project {
        for args in [
            &[
                "init",
                "demo",
                "--harness",
                "claude",
                "--harness",
                "codex",
                "--yes",
            ][..],
            &["apply"],
        ] {
            let out = aibox(dir.as_std_path(), args);
            assert!(out.status.success(), "{args:?}: {}", text(&out));
        }
    }
    (t, dir)
}

#[test]
fn documented_commands_run_as_written() {
    let commands = documented_commands();
    let mut ran = 0;
    for (at, words) in &commands {
        if !runnable(words) {
            continue;
        }
        let (_t, dir) = folder(words[0] != "init");
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let out = aibox(dir.as_std_path(), &args);
        // `doctor` exits 1 when a check fails, which here (no container engine) it may.
        let ok = match out.status.code() {
            Some(0) => true,
            Some(1) => words[0] == "doctor",
            _ => false,
        };
        assert!(ok, "{at}: `aibox {}`: {}", words.join(" "), text(&out));
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
