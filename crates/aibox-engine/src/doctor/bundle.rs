//! The diagnostic bundle (`aibox doctor --report FILE`) and the redactor every string of
//! the report and the bundle passes through.

use std::collections::BTreeMap;

use aibox_config::Project;
use aibox_policy::{Redactor, redact};
use camino::{Utf8Path, Utf8PathBuf};
use miette::Diagnostic;

use super::checks::read_text;
use super::{DoctorOptions, DoctorReport, LOCAL_ENV_FILE};
use crate::writer::ProjectRoot;

/// Environment variables whose values a report bundle includes (redacted); of all others
/// only the names are included.
const ENV_VALUES_SHOWN: [&str; 9] = [
    "AIBOX_ENGINE",
    "AIBOX_COMPOSE",
    "CONTAINERS_CONF",
    "DOCKER_HOST",
    "LANG",
    "PATH",
    "SHELL",
    "TERM",
    "HOME",
];
/// Printed by callers after [`write_report`].
pub const REPORT_REMINDER: &str =
    "the report is redacted, but read it before you attach it to a public issue";

/// Errors of [`write_report`].
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum DoctorError {
    /// The bundle could not be serialised or written.
    #[error("cannot write the diagnostic report to {path}: {reason}")]
    #[diagnostic(
        code(aibox::doctor::write_report),
        help("choose a writable path, for example `aibox doctor --report /tmp/aibox-report.json`")
    )]
    Write {
        /// The requested path.
        path: Utf8PathBuf,
        /// What went wrong.
        reason: String,
    },
}

impl DoctorError {
    /// A report that cannot be written is the environment's (disk, permissions).
    pub fn kind(&self) -> aibox_config::ErrorKind {
        aibox_config::ErrorKind::Environment
    }
}

/// Writes a redacted diagnostic bundle (JSON) to `path`: the report, the project's
/// configuration, lock, override, `devcontainer.json` and personal files, the names of
/// all environment variables and the values of a few harmless ones. Every string passes
/// through the report's redactor; the file is created with mode 0600.
///
/// # Errors
/// [`DoctorError::Write`] when the file cannot be written.
pub fn write_report(
    root: &Utf8Path,
    report: &DoctorReport,
    path: &Utf8Path,
) -> Result<(), DoctorError> {
    let fail = |reason: String| DoctorError::Write {
        path: path.to_owned(),
        reason,
    };
    let r = &report.redactor;
    let mut files = BTreeMap::new();
    if let Ok(project_root) = ProjectRoot::open(root) {
        for rel in aibox_config::layout::bundle_files() {
            let text = match project_root.read(Utf8Path::new(rel)) {
                Ok(Some(bytes)) => redact(&String::from_utf8_lossy(&bytes), r),
                Ok(None) => continue,
                Err(e) => format!("(unreadable: {})", redact(&e.to_string(), r)),
            };
            files.insert(rel.to_owned(), text);
        }
    }
    let mut names: Vec<String> = report
        .environment
        .iter()
        .map(|(k, _)| redact(k, r))
        .collect();
    names.sort_unstable();
    let shown: BTreeMap<&str, String> = report
        .environment
        .iter()
        .filter(|(k, _)| ENV_VALUES_SHOWN.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), redact(&format!("{k}={v}"), r)))
        .collect();
    let bundle = serde_json::json!({
        "redacted": true,
        "aibox_version": report.cli_version,
        "system": { "os": std::env::consts::OS, "arch": std::env::consts::ARCH },
        "report": report,
        "files": files,
        "environment": { "names": names, "values": shown },
    });
    let text = serde_json::to_string_pretty(&bundle).map_err(|e| fail(e.to_string()))?;
    write_private(path, text.as_bytes()).map_err(|e| fail(e.to_string()))
}

fn write_private(path: &Utf8Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut opts = fs_err::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use fs_err::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let mut file = opts.open(path)?;
    file.write_all(bytes)?;
    file.write_all(b"\n")
}

/// Everything that must not leave the machine: the known user and host names, the values
/// of the personal configuration and env file, and of secret-like environment variables.
pub(super) fn build_redactor(
    root: &ProjectRoot,
    project: Option<&Project>,
    options: &DoctorOptions,
) -> Redactor {
    let mut values = Vec::new();
    if let Some(local) = project.map(|p| &p.local) {
        values.extend(local.container.environment.values().cloned());
        for s in &local.mcp.servers {
            values.extend(s.env.values().cloned());
            values.extend(s.headers.values().cloned());
        }
    } else if let Some(text) = read_text(root, aibox_config::LOCAL_TOML)
        && let Ok(doc) = text.parse::<toml_edit::DocumentMut>()
    {
        // The overlay does not load: take every value under an env-like key.
        collect_env_values(doc.as_item(), false, &mut values);
    }
    if let Some(env) = read_text(root, LOCAL_ENV_FILE) {
        for line in env.lines() {
            if let Some((_, v)) = line.split_once('=') {
                values.push(v.trim().trim_matches(['"', '\'']).to_owned());
            }
        }
    }
    for (k, v) in &options.environment {
        // The policy gate's own rule, so doctor hides what the redactor would.
        if aibox_policy::secrets::suspicious_key(k) {
            values.push(v.clone());
        }
    }
    values.retain(|v| v.len() >= 4 && !v.contains("${"));
    values.sort();
    values.dedup();
    Redactor {
        users: options.users.clone(),
        hosts: options.hosts.clone(),
        values,
    }
}

fn collect_env_values(item: &toml_edit::Item, under_env: bool, out: &mut Vec<String>) {
    if let Some(table) = item.as_table_like() {
        for (k, v) in table.iter() {
            let env = under_env || matches!(k, "environment" | "env" | "headers");
            collect_env_values(v, env, out);
        }
    } else if let Some(array) = item.as_array_of_tables() {
        for t in array {
            for (k, v) in t {
                let env = under_env || matches!(k, "environment" | "env" | "headers");
                collect_env_values(v, env, out);
            }
        }
    } else if let Some(s) = item.as_str().filter(|_| under_env) {
        out.push(s.to_owned());
    }
}
