//! `aibox completion SHELL`: a shell completion script (`--output json`:
//! `{"shell", "script"}`). It completes what `aibox --help` shows: hidden commands
//! (`aibox docs`) are left out.

use clap::{Command, CommandFactory};

use super::{Outcome, json_or};
use crate::args::{Cli, Global};
use crate::exit::Exit;
use crate::render;

pub fn run(g: &Global, shell: clap_complete::Shell) -> Outcome {
    let mut cmd = completed_command();
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

/// `aibox`'s command tree without its hidden subcommands, for the completion scripts.
///
/// `clap_complete`'s generators offer every subcommand, hidden or not (clap-rs/clap#1335),
/// and clap cannot remove a subcommand, so the root is put together again from its
/// settings, arguments and visible subcommands. Only the root has hidden subcommands (a
/// test holds that, and the rebuilt root's help to the original's).
fn completed_command() -> Command {
    let full = Cli::command();
    // `Command::new` and `version` take `'static` text: the derive's own values.
    let mut cmd = Command::new("aibox").version(env!("CARGO_PKG_VERSION"));
    if let Some(about) = full.get_about() {
        cmd = cmd.about(about.clone());
    }
    if let Some(about) = full.get_long_about() {
        cmd = cmd.long_about(about.clone());
    }
    cmd.propagate_version(full.is_propagate_version_set())
        .disable_help_subcommand(full.is_disable_help_subcommand_set())
        .subcommand_required(full.is_subcommand_required_set())
        .args(full.get_arguments().cloned())
        .groups(full.get_groups().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand below `cmd` (not `cmd` itself), depth first.
    fn descendants(cmd: &Command) -> Vec<&Command> {
        cmd.get_subcommands()
            .flat_map(|s| std::iter::once(s).chain(descendants(s)))
            .collect()
    }

    /// The rebuilt root is the original without its hidden subcommands: same name,
    /// version, help (which leaves hidden commands out) and arguments, every visible
    /// subcommand unchanged once built (so with what the root propagates to it).
    #[test]
    fn the_completed_tree_is_the_cli_without_hidden_commands() {
        let mut full = Cli::command();
        let mut completed = completed_command();
        full.build();
        completed.build();
        assert!(
            full.get_subcommands().any(Command::is_hide_set),
            "no hidden command left"
        );
        assert!(!completed.get_subcommands().any(Command::is_hide_set));
        let visible: Vec<&str> = full
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(Command::get_name)
            .collect();
        let offered: Vec<&str> = completed.get_subcommands().map(Command::get_name).collect();
        assert_eq!(offered, visible);
        for (a, b) in full
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .zip(completed.get_subcommands())
        {
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{}", a.get_name());
        }
        assert_eq!(full.get_name(), completed.get_name());
        assert_eq!(full.get_version(), completed.get_version());
        assert_eq!(full.render_version(), completed.render_version());
        assert_eq!(
            full.render_long_help().to_string(),
            completed.render_long_help().to_string()
        );
        assert_eq!(
            full.render_help().to_string(),
            completed.render_help().to_string()
        );
    }

    /// [`completed_command`] rebuilds the root only; a hidden command or argument further
    /// down would be completed (`clap_complete` offers hidden arguments too).
    #[test]
    fn nothing_below_the_root_is_hidden() {
        let full = Cli::command();
        for cmd in std::iter::once(&full).chain(descendants(&full)) {
            for arg in cmd.get_arguments() {
                assert!(
                    !arg.is_hide_set(),
                    "`{} --{}` is hidden: leave it out of the completion too",
                    cmd.get_name(),
                    arg.get_id()
                );
            }
        }
        for sub in full.get_subcommands().flat_map(descendants) {
            assert!(
                !sub.is_hide_set(),
                "`{}` is hidden below the root: leave it out of the completion too",
                sub.get_name()
            );
        }
    }
}
