//! Rendering: the only place that writes to the terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::args::Color;

/// Configures miette's graphical handler for the chosen colour mode.
pub fn install_miette_hook(color: Color) {
    let colored = match color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => {
            !no_color(std::env::var_os("NO_COLOR").as_deref()) && std::io::stderr().is_terminal()
        }
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

/// Whether `NO_COLOR` asks for no colour: per no-color.org only a non-empty value does
/// (`NO_COLOR=` set but empty leaves colour on).
fn no_color(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty())
}

/// Prints a diagnostic to stderr. Diagnostics may quote a line of a configuration file;
/// a secret on that line is masked before it reaches the terminal.
pub fn error(report: &miette::Report) {
    // Further problems (miette's related diagnostics) start like the first, with their
    // code, not under an `Error:` label the first one does not have.
    let rendered = format!("{report:?}")
        .lines()
        .map(|l| {
            l.strip_prefix("Error: ")
                .filter(|r| r.starts_with("aibox::"))
                .unwrap_or(l)
        })
        .collect::<Vec<_>>()
        .join("\n");
    let text = aibox_policy::redact_secrets(&rendered);
    let mut err = std::io::stderr().lock();
    end_status_line(&mut err);
    let _ = writeln!(err, "{text}");
}

/// Prints a failed command as one JSON object on stdout (`--output json`): `code`,
/// `kind`, `message`, `file`, `line`, `column`, `help` (null when unknown) and `related`
/// (further problems of the same shape, for example every problem of an invalid
/// configuration).
pub fn error_json(report: &miette::Report, kind: aibox_config::ErrorKind) {
    let mut value = diagnostic_json(report.as_ref());
    if let serde_json::Value::Object(map) = &mut value {
        map.insert("kind".into(), kind.as_str().into());
        let mut related: Vec<serde_json::Value> = report
            .related()
            .into_iter()
            .flatten()
            .map(diagnostic_json)
            .collect();
        // A policy gate refusal names its findings only in its help text: each one, with
        // its own code, file and line, is a related entry, so a script can tell them apart.
        related.extend(gate_findings(report).iter().map(finding_json));
        map.insert("related".into(), related.into());
        // A literal secret refused by a config edit knows its line but has no source
        // snippet (it would repeat the secret): the place goes in the fields as it is.
        if let Some(line) = secret_line(report) {
            map.insert("file".into(), aibox_config::AIBOX_TOML.into());
            map.insert("line".into(), line.into());
        }
    }
    // Masked string by string, before serialising: a mask that runs to the end of its
    // text (a PEM key without its END line) then ends with the string, and the output
    // stays valid JSON whatever the masker does.
    redact_strings(&mut value);
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| "{}".to_owned());
    out(&text);
}

/// The line of `aibox.toml` a refused literal secret is on (none for any other error, or
/// when the line is unknown).
fn secret_line(report: &miette::Report) -> Option<usize> {
    use aibox_engine::config_check::ConfigCheckError;
    let check = report.downcast_ref::<ConfigCheckError>().or_else(|| {
        match report.downcast_ref::<aibox_engine::config_edit::ConfigEditError>() {
            Some(aibox_engine::config_edit::ConfigEditError::Check(e)) => Some(e),
            _ => None,
        }
    });
    match check {
        Some(ConfigCheckError::Secret { line, .. }) if *line > 0 => Some(*line),
        _ => None,
    }
}

/// Masks secrets in every string of `value`, in place.
fn redact_strings(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => *s = aibox_policy::redact_secrets(s),
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_strings),
        serde_json::Value::Object(map) => map.values_mut().for_each(redact_strings),
        _ => {}
    }
}

/// The error findings of a policy gate refusal carried by `report` (none for any other
/// error).
fn gate_findings(report: &miette::Report) -> Vec<aibox_policy::Finding> {
    use aibox_engine::EngineError;
    let engine = report.downcast_ref::<EngineError>().or_else(|| {
        match report.downcast_ref::<aibox_engine::config_edit::ConfigEditError>() {
            Some(aibox_engine::config_edit::ConfigEditError::Settings(e)) => Some(&**e),
            _ => None,
        }
    });
    match engine {
        Some(EngineError::Policy(p)) => match &**p {
            aibox_policy::PolicyError::Gate { findings, .. } => findings
                .iter()
                .filter(|f| f.severity == aibox_policy::Severity::Error)
                .cloned()
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// One gate finding in the shape of a JSON error entry.
fn finding_json(f: &aibox_policy::Finding) -> serde_json::Value {
    serde_json::json!({
        "code": f.code,
        "message": f.message,
        "file": (!f.file.is_empty()).then_some(&f.file),
        "line": f.line,
        "column": null,
        "help": (!f.remedy.is_empty()).then_some(&f.remedy),
    })
}

/// One diagnostic as JSON; the location is the first labelled span found on it or on
/// its chain of diagnostic sources (1-based line and column).
fn diagnostic_json(diag: &dyn miette::Diagnostic) -> serde_json::Value {
    let (file, line, column) =
        location(diag).map_or((None, None, None), |(f, l, c)| (f, Some(l), Some(c)));
    serde_json::json!({
        "code": diag.code().map(|c| c.to_string()),
        "message": message(diag),
        "file": file,
        "line": line,
        "column": column,
        "help": diag.help().map(|h| h.to_string()),
    })
}

/// The message with its chain of causes (`what: why`), as the human output shows them.
fn message(diag: &dyn miette::Diagnostic) -> String {
    let mut text = diag.to_string();
    let mut cause = std::error::Error::source(diag);
    while let Some(c) = cause {
        let line = c.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        cause = c.source();
    }
    text
}

fn location(diag: &dyn miette::Diagnostic) -> Option<(Option<String>, usize, usize)> {
    if let (Some(src), Some(label)) = (diag.source_code(), diag.labels().and_then(|mut l| l.next()))
        && let Ok(contents) = src.read_span(label.inner(), 0, 0)
    {
        return Some((
            contents.name().map(ToOwned::to_owned),
            contents.line() + 1,
            contents.column() + 1,
        ));
    }
    diag.diagnostic_source().and_then(location)
}

/// Prints a line of normal output to stdout.
pub fn out(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
}

/// Writes bytes to stdout as they are (a file's contents).
pub fn raw(bytes: &[u8]) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(bytes);
    let _ = o.flush();
}

/// Prints a progress or status line to stderr (suppressed by `--quiet`).
pub fn note(quiet: bool, line: &str) {
    if !quiet {
        let mut err = std::io::stderr().lock();
        end_status_line(&mut err);
        let _ = writeln!(err, "{line}");
    }
}

/// Prints `warning: {message}` to stderr. Shown with `--quiet` too: `-q` keeps errors
/// and warnings.
pub fn warning(message: &str) {
    note(false, &format!("warning: {message}"));
}

/// Whether the terminal's last line is a status line that the next output replaces.
static STATUS_LINE_OPEN: AtomicBool = AtomicBool::new(false);
/// Longest status line: longer ones would wrap, and `\r` could not replace them.
const STATUS_LINE_WIDTH: usize = 79;

/// Shows a progress line that the next one replaces (as cargo does) when stderr is a
/// terminal; elsewhere (a log, CI) prints it as a plain line. Suppressed by `--quiet`.
pub fn status_line(quiet: bool, line: &str) {
    if quiet {
        return;
    }
    if !std::io::stderr().is_terminal() {
        note(false, line);
        return;
    }
    let shown: String = line.chars().take(STATUS_LINE_WIDTH).collect();
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r{shown}\x1b[K");
    let _ = err.flush();
    STATUS_LINE_OPEN.store(true, Ordering::Relaxed);
}

/// Clears an open status line so that the next line starts at the left margin.
fn end_status_line(err: &mut impl Write) {
    if STATUS_LINE_OPEN.swap(false, Ordering::Relaxed) {
        let _ = write!(err, "\r\x1b[K");
    }
}

/// Aligns `rows` under `headers` (upper case), each column as wide as its widest cell;
/// the last column is not padded, so long values never push the others.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, cell) in cells.enumerate() {
            if i + 1 == widths.len() {
                out.push_str(cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count());
                out.push_str(cell);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out.trim_end().to_owned()
    };
    let header = headers.iter().map(|h| h.to_uppercase()).collect::<Vec<_>>();
    let mut out = vec![line(&mut header.iter().map(String::as_str))];
    for row in rows {
        out.push(line(&mut row.iter().map(String::as_str)));
    }
    out
}

/// Prints a value as pretty JSON to stdout.
pub fn json<T: serde::Serialize>(value: &T) -> Result<(), crate::error::CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| crate::error::CliError::Json(e.to_string()))?;
    out(&text);
    Ok(())
}

/// The engine's notices before slow steps, as lines on stderr (`None` with `--quiet`).
pub fn notice(quiet: bool) -> Option<aibox_engine::Notice> {
    (!quiet)
        .then(|| -> aibox_engine::Notice { std::sync::Arc::new(|line: &str| note(false, line)) })
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

/// A usage error (from the argument parser) as the JSON error object.
pub fn usage_error_json(text: &str) {
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    let mut message = first.trim_start_matches("error: ").to_owned();
    let mut rest: Vec<&str> = rest.lines().collect();
    // "the following required arguments were not provided:" lists them on the indented
    // lines below: they are what the message is about, not help.
    if message.ends_with(':') {
        let listed = rest
            .iter()
            .take_while(|l| l.starts_with(' ') && !l.trim().is_empty())
            .count();
        let items: Vec<&str> = rest.drain(..listed).map(str::trim).collect();
        if !items.is_empty() {
            message = format!("{message} {}", items.join(", "));
        }
    }
    let rest = rest.join("\n");
    let help = rest.trim();
    let value = serde_json::json!({
        "code": "aibox::cli::usage",
        "message": message,
        "file": null,
        "line": null,
        "column": null,
        "help": if help.is_empty() { None } else { Some(help) },
        "kind": aibox_config::ErrorKind::User.as_str(),
        "related": [],
    });
    out(&serde_json::to_string_pretty(&value).unwrap_or_else(|_| "{}".to_owned()));
}

#[cfg(test)]
mod no_color_tests {
    use std::ffi::OsStr;

    #[test]
    fn only_a_non_empty_no_color_turns_colour_off() {
        assert!(!super::no_color(None));
        assert!(!super::no_color(Some(OsStr::new(""))));
        assert!(super::no_color(Some(OsStr::new("1"))));
        assert!(super::no_color(Some(OsStr::new("0"))));
    }
}

#[cfg(test)]
mod json_error_tests {
    #[test]
    fn a_mask_to_the_end_of_a_string_keeps_the_json_valid() {
        let mut value = serde_json::json!({
            "message": "bad: -----BEGIN RSA PRIVATE KEY-----\nMIIEFAKE \"quoted\"",
            "help": "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "related": [{"message": "password = \"hunter22\""}],
        });
        super::redact_strings(&mut value);
        let text = serde_json::to_string_pretty(&value).unwrap();
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["message"], "bad: ***");
        assert_eq!(back["help"], "GITHUB_TOKEN=***");
        assert_eq!(back["related"][0]["message"], "password = \"***\"");
    }
}
