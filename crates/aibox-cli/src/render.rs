//! Rendering: the only place that writes to the terminal.

use std::io::{IsTerminal, Write};

use crate::args::Color;

/// Configures miette's graphical handler for the chosen colour mode.
pub fn install_miette_hook(color: Color) {
    let colored = match color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal(),
    };
    // A hook can only be set once per process; a second call is harmless to ignore.
    let _ = miette::set_hook(Box::new(move |_| {
        let theme = if colored {
            miette::GraphicalTheme::unicode()
        } else {
            miette::GraphicalTheme::unicode_nocolor()
        };
        Box::new(miette::GraphicalReportHandler::new_themed(theme).with_context_lines(2))
    }));
}

/// Prints a diagnostic to stderr. Diagnostics may quote a line of a configuration file;
/// a secret on that line is masked before it reaches the terminal.
pub fn error(report: &miette::Report) {
    let text = aibox_policy::redact_secrets(&format!("{report:?}"));
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

/// Prints a line of normal output to stdout.
pub fn out(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
}

/// Prints a progress or status line to stderr (suppressed by `--quiet`).
pub fn note(quiet: bool, line: &str) {
    if !quiet {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{line}");
    }
}

/// Prints a value as pretty JSON to stdout.
pub fn json<T: serde::Serialize>(value: &T) -> Result<(), miette::Report> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| miette::miette!(code = "aibox::cli::json", "cannot render JSON: {e}"))?;
    out(&text);
    Ok(())
}

/// A download progress line for a terminal: `None` when stderr is not a terminal or
/// `--quiet` is set, so logs and pipes never see carriage returns.
pub fn download_progress(quiet: bool) -> Option<aibox_engine::DownloadProgress> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    Some(std::sync::Arc::new(|received: u64, total: Option<u64>| {
        let mut err = std::io::stderr().lock();
        let line = match total {
            Some(t) if t > 0 => format!(
                "downloading processkit: {} of {} KiB ({}%)",
                received / 1024,
                t / 1024,
                received * 100 / t
            ),
            _ => format!("downloading processkit: {} KiB", received / 1024),
        };
        let _ = write!(err, "\r{line}\x1b[K");
        if total.is_some_and(|t| received >= t) {
            let _ = writeln!(err);
        }
    }))
}
