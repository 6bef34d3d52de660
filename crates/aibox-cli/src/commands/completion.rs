//! `aibox completion SHELL`: a shell completion script (`--output json`:
//! `{"shell", "script"}`).

use clap::CommandFactory;

use super::{Outcome, json_or};
use crate::args::{Cli, Global};
use crate::exit::Exit;
use crate::render;

pub fn run(g: &Global, shell: clap_complete::Shell) -> Outcome {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "aibox", &mut buf);
    let script = String::from_utf8_lossy(&buf);
    let script = script.trim_end();
    json_or(
        g,
        &serde_json::json!({ "shell": shell.to_string(), "script": script }),
        || render::out(script),
    )?;
    Ok(Exit::Ok)
}
