//! `aibox doctor`: read-only diagnostics of a project as it stands.
//!
//! Each check adds [`Finding`]s with stable codes (`aibox::doctor::*` for doctor's own
//! checks, `aibox::policy::*` for the policy gates, which run exactly as in `apply`).
//! Every string of the report passes through [`aibox_policy::redact`] before the report
//! is returned, so neither the human output, the JSON (`"redacted": true`) nor a report
//! bundle ([`write_report`]) can show a secret, a home path, the user or the host name.
//!
//! Exit status (for the CLI): 0 when the report has no error, 1 when it has at least one
//! (warnings and notes never fail the run).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

use aibox_config::{AiboxToml, Project, SecurityException};
use aibox_policy::{
    Consent, Finding, PROFILE_PATH, Redactor, Severity, TargetEngine, TextKind,
    check_project_volumes, check_seccomp_profile, container_security_for, redact, scan_secrets,
};
use aibox_provenance::lock::{LOCK_FILE, Lock};
use aibox_runtime::DetectEnv;
use camino::{Utf8Path, Utf8PathBuf};
use miette::Diagnostic;
use serde::Serialize;

use crate::EngineError;
use crate::codex_sandbox::{SandboxReport, SandboxStatus};
use crate::writer::ProjectRoot;

/// The generated Compose file.
pub const COMPOSE_FILE: &str = ".devcontainer/docker-compose.yml";
/// The user-owned Compose override.
pub const OVERRIDE_FILE: &str = ".devcontainer/docker-compose.override.yml";
/// The generated `devcontainer.json`.
pub const DEVCONTAINER_FILE: &str = ".devcontainer/devcontainer.json";
/// The generated personal Compose file (local state: personal volumes and env file).
pub const COMPOSE_LOCAL_FILE: &str = ".devcontainer/docker-compose.local.yml";
/// The personal env file.
pub const LOCAL_ENV_FILE: &str = ".aibox-local.env";
/// Committed user-owned files that are scanned for secrets when present.
const USER_OWNED_COMMITTED: [&str; 2] = [OVERRIDE_FILE, ".devcontainer/Dockerfile.local"];
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

/// Options of [`doctor`].
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// Version of the running aibox, compared with the lock's `cli_version`.
    pub cli_version: String,
    /// Environment for container engine detection.
    pub detect: DetectEnv,
    /// Skip the container engine check (embedders without an engine).
    pub skip_engine: bool,
    /// The process environment, for the report bundle and for redaction (values of
    /// secret-like variables are masked wherever they appear).
    pub environment: Vec<(String, String)>,
    /// User names to redact (default: `USER`, `LOGNAME` and the home directory's name).
    pub users: Vec<String>,
    /// Host names to redact (default: the kernel's host name and `HOSTNAME`).
    pub hosts: Vec<String>,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        let environment: Vec<(String, String)> = std::env::vars().collect();
        let get = |name: &str| {
            environment
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        let mut users: Vec<String> = ["USER", "LOGNAME"].iter().filter_map(|n| get(n)).collect();
        if let Some(home) = get("HOME")
            && let Some(name) = Utf8Path::new(&home).file_name()
        {
            users.push(name.to_owned());
        }
        let mut hosts: Vec<String> = get("HOSTNAME").into_iter().collect();
        if let Ok(h) = fs_err::read_to_string("/proc/sys/kernel/hostname") {
            hosts.push(h.trim().to_owned());
        }
        users.sort();
        users.dedup();
        hosts.sort();
        hosts.dedup();
        Self {
            cli_version: env!("CARGO_PKG_VERSION").to_owned(),
            detect: DetectEnv::from_process(),
            skip_engine: false,
            environment,
            users,
            hosts,
        }
    }
}

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// Nothing found.
    Ok,
    /// Only warnings (or notes).
    Warning,
    /// At least one error.
    Error,
    /// Could not run (for example no configuration, not a git repository).
    Skipped,
}

/// One check of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// Stable check name (`config`, `engine`, `sync`, `local-state`, `container-policy`,
    /// `secrets`, `version`, `exceptions`).
    pub name: String,
    /// Outcome.
    pub status: CheckStatus,
    /// Why it was skipped, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_because: Option<String>,
}

/// Counts per severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Errors.
    pub errors: usize,
    /// Warnings.
    pub warnings: usize,
    /// Notes.
    pub notes: usize,
}

/// The result of [`doctor`]: redacted, serialisable, grouped by severity.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    /// Always true: every string was redacted.
    pub redacted: bool,
    /// Version of aibox that ran the checks.
    pub cli_version: String,
    /// Counts.
    pub summary: Summary,
    /// Every check in run order.
    pub checks: Vec<CheckResult>,
    /// Findings, errors first, then warnings, then notes.
    pub findings: Vec<Finding>,
    /// The Codex seccomp posture (`default`, `engine-default`, `seccomp-profile`, `unconfined`)
    /// when the configuration could be evaluated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seccomp_posture: Option<String>,
    /// Active `[[security.exceptions]]` and consent keys, listed on every run.
    pub exceptions: Vec<SecurityException>,
    /// Whether Codex's sandbox can start in the running container (Codex enabled only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub codex_sandbox: Option<SandboxReport>,
    #[serde(skip)]
    redactor: Redactor,
    #[serde(skip)]
    environment: Vec<(String, String)>,
}

impl DoctorReport {
    /// True when at least one finding is an error.
    pub fn has_errors(&self) -> bool {
        self.summary.errors > 0
    }

    /// Process exit status: 0 without errors, 1 with errors.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.has_errors())
    }

    /// Findings of one severity.
    pub fn by_severity(&self, severity: Severity) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.severity == severity)
    }

    /// Human output: a summary line, the checks, then findings grouped by severity.
    pub fn render_human(&self) -> String {
        let mut out = String::new();
        let s = self.summary;
        let _ = writeln!(
            out,
            "aibox doctor: {} error(s), {} warning(s), {} note(s) (output redacted)",
            s.errors, s.warnings, s.notes
        );
        for c in &self.checks {
            let status = match c.status {
                CheckStatus::Ok => "ok",
                CheckStatus::Warning => "warn",
                CheckStatus::Error => "ERROR",
                CheckStatus::Skipped => "skipped",
            };
            let _ = write!(out, "  {status:<7} {}", c.name);
            if let Some(why) = &c.skipped_because {
                let _ = write!(out, " ({why})");
            }
            out.push('\n');
        }
        for (severity, title) in [
            (Severity::Error, "Errors"),
            (Severity::Warning, "Warnings"),
            (Severity::Info, "Notes"),
        ] {
            let mut group = self.by_severity(severity).peekable();
            if group.peek().is_none() {
                continue;
            }
            let _ = writeln!(out, "\n{title}:");
            for f in group {
                for (i, line) in f.to_string().lines().enumerate() {
                    let _ = writeln!(out, "{}{line}", if i == 0 { "  " } else { "    " });
                }
            }
        }
        if !self.exceptions.is_empty() {
            let _ = writeln!(out, "\nActive security exceptions:");
            for e in &self.exceptions {
                let _ = writeln!(out, "  {}: {}", e.option, e.reason);
            }
        }
        out
    }
}

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

/// The container engine check: which engine `up` would use, or why none is usable.
fn engine_check(run: &mut Run, project: Option<&Project>, options: &DoctorOptions) {
    match (project, options.skip_engine) {
        (_, true) => run.skip("engine", "skipped by the caller"),
        (None, false) => run.skip("engine", "no valid configuration"),
        (Some(p), false) => {
            let f = match aibox_runtime::detect::detect_engine(
                p.config.container.engine,
                &options.detect,
            ) {
                Ok(cli) => Finding::new(
                    "aibox::doctor::engine",
                    Severity::Info,
                    "",
                    format!(
                        "container engine: {} ({})",
                        cli.engine,
                        cli.program.display()
                    ),
                    "",
                ),
                Err(e) => Finding::new(
                    "aibox::doctor::no_engine",
                    Severity::Warning,
                    "",
                    format!("no usable container engine: {e}"),
                    e.help()
                        .map_or_else(|| "install Podman or Docker".to_owned(), |h| h.to_string()),
                ),
            };
            run.check("engine", vec![f]);
        }
    }
}

/// Runs every check on the project at `root`. Only reads (and runs `git` and the engine's
/// version probe); never writes.
///
/// # Errors
/// Only when `root` is not an accessible directory; every problem inside the project is a
/// finding.
pub fn doctor(root: &Utf8Path, options: &DoctorOptions) -> Result<DoctorReport, EngineError> {
    let project_root = ProjectRoot::open(root)?;
    let mut run = Run::default();

    // configuration
    let project = match aibox_config::load_project(project_root.path()) {
        Ok(p) => {
            run.check("config", Vec::new());
            Some(p)
        }
        Err(e) => {
            let f = Finding::new(
                "aibox::doctor::config_invalid",
                Severity::Error,
                aibox_config::AIBOX_TOML,
                format!(
                    "the configuration does not load:\n{}",
                    aibox_config::render_plain(&e, 100)
                ),
                "fix the reported keys; `aibox config validate` shows the same diagnostics",
            );
            run.check("config", vec![f]);
            None
        }
    };
    let lock = read_lock(&project_root);

    // container engine
    engine_check(&mut run, project.as_ref(), options);

    // generated files in sync (what `apply --check` reports)
    // The engine the seccomp gate judges, resolved with the same environment as above.
    let engine = project.as_ref().map_or(TargetEngine::Unknown, |p| {
        crate::codex_sandbox::target_engine(p.config.container.engine, &options.detect)
    });
    if project.is_some() {
        run.check("sync", sync_findings(project_root.path(), options, engine));
    } else {
        run.skip("sync", "no valid configuration");
    }

    // processkit content as installed (the summary of `doctor --integrity`)
    run.check("integrity", integrity_findings(project_root.path()));

    // local state ignored and untracked
    local_state(&mut run, project_root.path());

    // seccomp posture and dangerous container options
    let mut posture = None;
    if let Some(p) = &project {
        let (findings, p_name) = container_policy(
            &project_root,
            p,
            lock.as_ref().ok().and_then(Option::as_ref),
            engine,
        );
        posture = p_name;
        run.check("container-policy", findings);
    } else {
        run.skip("container-policy", "no valid configuration");
    }

    // Codex's sandbox, probed in the running container (only when Codex is enabled)
    let codex_sandbox =
        codex_sandbox_check(&mut run, project_root.path(), project.as_ref(), options);
    container_state_check(&mut run, project_root.path(), project.as_ref(), options);
    // the running container's labels and marker against the lock and the configuration
    let locked = lock.as_ref().ok().and_then(Option::as_ref);
    match crate::doctor_base_image::check(
        project_root.path(),
        project.as_ref(),
        locked,
        &options.detect,
        options.skip_engine,
    ) {
        Ok(findings) => run.check("base-image", findings),
        Err(why) => run.skip("base-image", &why),
    }
    // secrets in committed files
    run.check(
        "secrets",
        secret_findings(&project_root, lock.as_ref().ok().and_then(Option::as_ref)),
    );

    // the skill review of installed skills (only when there are any)
    if let Some(p) = &project
        && let Ok(skills) = crate::skills::list(project_root.path())
        && !skills.is_empty()
    {
        run.check("skills", skill_findings(p, &skills));
    }

    // CLI version versus the lock
    run.check("version", version_findings(&lock, &options.cli_version));

    // consents, listed on every run
    let mut exceptions = Vec::new();
    if let Some(p) = &project {
        let (findings, list) = exception_findings(&p.config);
        exceptions = list;
        run.check("exceptions", findings);
    } else {
        run.skip("exceptions", "no valid configuration");
    }

    let redactor = build_redactor(&project_root, project.as_ref(), options);
    let mut report = run.finish(options, posture, exceptions, redactor);
    report.codex_sandbox = codex_sandbox.map(|mut c| {
        c.detail = redact(&c.detail, &report.redactor);
        c
    });
    Ok(report)
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
        for rel in [
            aibox_config::AIBOX_TOML,
            aibox_config::LOCAL_TOML,
            LOCAL_ENV_FILE,
            LOCK_FILE,
            COMPOSE_FILE,
            OVERRIDE_FILE,
            COMPOSE_LOCAL_FILE,
            DEVCONTAINER_FILE,
        ] {
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

#[derive(Default)]
struct Run {
    checks: Vec<CheckResult>,
    findings: Vec<Finding>,
}

impl Run {
    fn check(&mut self, name: &str, findings: Vec<Finding>) {
        let status = if findings.iter().any(|f| f.severity == Severity::Error) {
            CheckStatus::Error
        } else if findings.iter().any(|f| f.severity == Severity::Warning) {
            CheckStatus::Warning
        } else {
            CheckStatus::Ok
        };
        self.checks.push(CheckResult {
            name: name.to_owned(),
            status,
            skipped_because: None,
        });
        self.findings.extend(findings);
    }

    fn skip(&mut self, name: &str, why: &str) {
        self.checks.push(CheckResult {
            name: name.to_owned(),
            status: CheckStatus::Skipped,
            skipped_because: Some(why.to_owned()),
        });
    }

    fn finish(
        self,
        options: &DoctorOptions,
        posture: Option<String>,
        exceptions: Vec<SecurityException>,
        redactor: Redactor,
    ) -> DoctorReport {
        let r = &redactor;
        let mut findings: Vec<Finding> = self
            .findings
            .into_iter()
            .map(|mut f| {
                f.file = redact(&f.file, r);
                f.message = redact(&f.message, r);
                f.remedy = redact(&f.remedy, r);
                f.option = f.option.map(|o| redact(&o, r));
                f.accepted_reason = f.accepted_reason.map(|o| redact(&o, r));
                f
            })
            .collect();
        // Stable order: severity, then check order (the sort is stable).
        findings.sort_by_key(|f| f.severity);
        let count = |s| findings.iter().filter(|f| f.severity == s).count();
        let summary = Summary {
            errors: count(Severity::Error),
            warnings: count(Severity::Warning),
            notes: count(Severity::Info),
        };
        let exceptions = exceptions
            .into_iter()
            .map(|e| SecurityException {
                option: redact(&e.option, r),
                reason: redact(&e.reason, r),
            })
            .collect();
        DoctorReport {
            redacted: true,
            cli_version: options.cli_version.clone(),
            summary,
            checks: self.checks,
            findings,
            seccomp_posture: posture,
            exceptions,
            codex_sandbox: None,
            redactor,
            environment: options.environment.clone(),
        }
    }
}

fn read_lock(root: &ProjectRoot) -> Result<Option<Lock>, String> {
    match root.read(Utf8Path::new(LOCK_FILE)) {
        Ok(Some(bytes)) => Lock::parse(
            &String::from_utf8_lossy(&bytes),
            &root.path().join(LOCK_FILE),
        )
        .map(Some)
        .map_err(|e| aibox_config::render_plain(&e, 100)),
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

fn read_text(root: &ProjectRoot, rel: &str) -> Option<String> {
    root.read(Utf8Path::new(rel))
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn sync_findings(root: &Utf8Path, options: &DoctorOptions, engine: TargetEngine) -> Vec<Finding> {
    let apply_options = crate::ApplyOptions {
        check: true,
        plan: crate::PlanOptions {
            aibox_version: options.cli_version.clone(),
            engine: Some(engine),
            ..crate::PlanOptions::default()
        },
        ..crate::ApplyOptions::default()
    };
    match crate::apply(root, &apply_options) {
        Ok(report) => report
            .files
            .iter()
            .filter(|f| f.action.changes())
            .map(|f| {
                Finding::new(
                    "aibox::doctor::out_of_sync",
                    Severity::Warning,
                    f.path.as_str(),
                    format!(
                        "differs from what `aibox apply` would write ({})",
                        f.action.as_str()
                    ),
                    "run `aibox apply` (`aibox apply --dry-run` shows the diff)",
                )
            })
            // What `apply` warns about settings with no effect and skipped or kept
            // processkit content is a finding here too, so `doctor` never says ok
            // about it. The `mcp:` notices are guidance (approval commands, seeded trust)
            // and stay with `apply` and `aibox mcp list`.
            .chain(
                report
                    .warnings
                    .iter()
                    .filter(|w| w.starts_with("processkit:") || w.starts_with("config:"))
                    .map(|w| {
                        Finding::new(
                            "aibox::doctor::apply_warning",
                            Severity::Warning,
                            "aibox.toml",
                            w.clone(),
                            "follow the advice in the message; `aibox apply` shows the same \
                             warning",
                        )
                    }),
            )
            .collect(),
        Err(e) => {
            let code = e.code().map(|c| c.to_string()).unwrap_or_default();
            vec![Finding::new(
                "aibox::doctor::plan_failed",
                Severity::Error,
                "",
                format!("`aibox apply` would fail [{code}]: {e}"),
                e.help().map_or_else(
                    || "run `aibox apply` for details".to_owned(),
                    |h| h.to_string(),
                ),
            )]
        }
    }
}

/// The integrity summary: drift of the installed processkit content is a warning here,
/// so plain `doctor` sees what `doctor --integrity` lists file by file.
fn integrity_findings(root: &Utf8Path) -> Vec<Finding> {
    use aibox_provenance::IntegrityStatus;
    let report = match aibox_provenance::integrity(root.as_std_path()) {
        Ok(r) => r,
        Err(e) => {
            return vec![Finding::new(
                "aibox::doctor::integrity_unreadable",
                Severity::Warning,
                "aibox.lock",
                format!("the processkit integrity check cannot run: {e}"),
                "run `aibox doctor --integrity` for details",
            )];
        }
    };
    let problem = match report.status {
        IntegrityStatus::NotInstalled | IntegrityStatus::Healthy => return Vec::new(),
        IntegrityStatus::Unverified => "installed without verification",
        IntegrityStatus::MissingMarker => "the live marker is missing",
        IntegrityStatus::VersionMismatch => "lock, marker and snapshot disagree on the version",
        IntegrityStatus::MissingSnapshot => "the snapshot of the installed version is missing",
        IntegrityStatus::Drifted => "installed files were modified, deleted or added",
    };
    vec![Finding::new(
        "aibox::doctor::integrity",
        Severity::Warning,
        "context/",
        format!(
            "processkit content: {problem} ({} modified, {} missing, {} unexpected of {} checked)",
            report.modified.len(),
            report.missing.len(),
            report.unexpected.len(),
            report.checked
        ),
        "`aibox doctor --integrity` lists the files; `aibox apply` restores untouched ones",
    )]
}

/// Local state that must be gitignored and untracked (glob entries are left to git).
fn local_state_paths() -> impl Iterator<Item = &'static str> {
    aibox_config::LOCAL_STATE_PATHS
        .iter()
        .copied()
        .filter(|p| !p.contains('*'))
}

fn git(root: &Utf8Path, args: &[&str]) -> Option<std::process::Output> {
    Command::new("git")
        .arg("-C")
        .arg(root.as_str())
        .args(args)
        .output()
        .ok()
}

fn local_state(run: &mut Run, root: &Utf8Path) {
    let Some(probe) = git(root, &["rev-parse", "--show-toplevel"]) else {
        run.check(
            "local-state",
            vec![Finding::new(
                "aibox::doctor::git_unavailable",
                Severity::Warning,
                "",
                "`git` could not be run, so doctor cannot tell whether local state is ignored",
                "install git, or check `.gitignore` by hand",
            )],
        );
        return;
    };
    if !probe.status.success() {
        run.skip("local-state", "not a git repository");
        return;
    }
    let mut findings = Vec::new();
    for path in local_state_paths() {
        // check-ignore: 0 = ignored, 1 = not ignored, 128 = fatal.
        let ignored = git(root, &["check-ignore", "-q", "--no-index", "--", path]);
        match ignored.as_ref().and_then(|o| o.status.code()) {
            Some(0) => {}
            Some(1) => findings.push(Finding::new(
                "aibox::doctor::local_state_not_ignored",
                Severity::Error,
                ".gitignore",
                format!("`{path}` (personal local state) is not gitignored"),
                format!("add `{path}` to .gitignore (`aibox apply` adds missing entries)"),
            )),
            _ => findings.push(Finding::new(
                "aibox::doctor::git_failed",
                Severity::Warning,
                ".gitignore",
                format!("`git check-ignore {path}` failed"),
                "run it by hand to see why",
            )),
        }
        let tracked = git(root, &["ls-files", "--", path])
            .is_some_and(|o| o.status.success() && !o.stdout.trim_ascii().is_empty());
        if tracked {
            findings.push(Finding::new(
                "aibox::doctor::local_state_tracked",
                Severity::Error,
                path,
                format!("`{path}` is tracked by git although it holds personal local state"),
                format!(
                    "run `git rm -r --cached {path}` and commit; rotate any token it contained"
                ),
            ));
        }
    }
    run.check("local-state", findings);
}

fn container_policy(
    root: &ProjectRoot,
    project: &Project,
    lock: Option<&Lock>,
    engine: TargetEngine,
) -> (Vec<Finding>, Option<String>) {
    let config = &project.config;
    let consent = Consent::from_config(config);
    let mut out = Vec::new();
    let posture = match container_security_for(config, engine) {
        Ok(decision) => {
            let name = decision.posture.as_str().to_owned();
            if !decision.security_opt.is_empty() {
                out.push(Finding::new(
                    "aibox::doctor::seccomp_relaxed",
                    Severity::Info,
                    aibox_config::AIBOX_TOML,
                    format!(
                        "seccomp is relaxed for Codex's sandbox ({}), with the owner's recorded \
                         consent",
                        decision.security_opt.join(", ")
                    ),
                    "on Podman, `[security] codex_sandbox = \"engine-default\"` needs no \
                     relaxation",
                ));
            }
            for warning in decision.warnings {
                out.push(Finding::new(
                    "aibox::doctor::seccomp_deprecated",
                    Severity::Warning,
                    aibox_config::AIBOX_TOML,
                    warning,
                    "write `codex_sandbox = \"engine-default\"` (same meaning) or choose another \
                     strategy",
                ));
            }
            for note in decision.notes {
                out.push(Finding::new(
                    "aibox::doctor::seccomp_note",
                    Severity::Info,
                    aibox_config::AIBOX_TOML,
                    note,
                    "remove the unused keys, or enable the codex harness",
                ));
            }
            Some(name)
        }
        Err(e) => {
            out.push(Finding::new(
                "aibox::doctor::seccomp_consent",
                Severity::Error,
                aibox_config::AIBOX_TOML,
                e.to_string(),
                e.help().map(|h| h.to_string()).unwrap_or_default(),
            ));
            None
        }
    };
    // The Compose files as Compose resolves them, with `devcontainer.json`.
    out.extend(aibox_policy::check_compose_setup(
        &crate::plan::ProjectSources(root),
        &consent,
    ));
    out.extend(aibox_policy::check_container_user(config, &consent));
    out.extend(check_project_volumes(config, &project.local, &consent));
    if let Ok(Some(bytes)) = root.read(Utf8Path::new(PROFILE_PATH)) {
        let recorded = lock.and_then(|l| l.generated_digest(PROFILE_PATH));
        out.extend(check_seccomp_profile(&bytes, recorded));
    }
    (out, posture)
}

fn secret_findings(root: &ProjectRoot, lock: Option<&Lock>) -> Vec<Finding> {
    let mut paths: Vec<String> = vec![aibox_config::AIBOX_TOML.to_owned(), LOCK_FILE.to_owned()];
    if let Some(lock) = lock {
        paths.extend(lock.generated.keys().cloned());
    }
    paths.extend(USER_OWNED_COMMITTED.iter().map(|p| (*p).to_owned()));
    paths.sort();
    paths.dedup();
    let mut out = Vec::new();
    for path in paths {
        if local_state_paths().any(|l| path == l || path.starts_with(l)) {
            continue;
        }
        if let Some(text) = read_text(root, &path) {
            out.extend(scan_secrets(&path, &text, TextKind::from_path(&path)));
        }
    }
    out
}

/// The review verdicts of the installed skills: first-party failures summarised in one
/// note (reported, never blocking unless `[processkit] review = "all"`), each gated skill
/// that fails without a recorded consent as a warning (`apply` refuses it).
fn skill_findings(project: &Project, skills: &[crate::skills::SkillInfo]) -> Vec<Finding> {
    use crate::skills::Trust;
    let strict = project.config.processkit.review == aibox_config::ReviewScope::All;
    let consented = |name: &str| {
        project
            .config
            .skills
            .review_exceptions
            .iter()
            .any(|e| e.skill == name)
    };
    let points = |s: &crate::skills::SkillInfo| {
        s.failed_points
            .iter()
            .map(u8::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    let mut first_party = Vec::new();
    for s in skills.iter().filter(|s| !s.failed_points.is_empty()) {
        let gated = s.origin == Trust::ThirdParty || strict;
        if gated && s.mcp_server && !consented(&s.name) {
            out.push(Finding::new(
                "aibox::doctor::skill_review_failed",
                Severity::Warning,
                &s.dir,
                format!(
                    "{} skill `{}` fails review point(s) {}; `aibox apply` refuses to register it",
                    if s.origin == Trust::ThirdParty { "third-party" } else { "first-party" },
                    s.name,
                    points(s)
                ),
                format!(
                    "read `aibox skill review {}`; remove it, or record a [[skills.review_exceptions]] consent",
                    s.name
                ),
            ));
        } else if s.origin == Trust::FirstParty {
            first_party.push(format!("{} (point {})", s.name, points(s)));
        }
    }
    if !first_party.is_empty() {
        out.push(Finding::new(
            "aibox::doctor::first_party_review",
            Severity::Info,
            "context/skills",
            format!(
                "{} skill(s) of the verified processkit release fail review points (reported, not blocking): {}",
                first_party.len(),
                first_party.join("; ")
            ),
            "`aibox skill review NAME` shows the evidence; `[processkit] review = \"all\"` gates them",
        ));
    }
    out
}

fn version_findings(lock: &Result<Option<Lock>, String>, cli: &str) -> Vec<Finding> {
    match lock {
        Err(message) => vec![Finding::new(
            "aibox::doctor::lock_invalid",
            Severity::Error,
            LOCK_FILE,
            format!("aibox.lock cannot be read:\n{message}"),
            "fix it by hand, or remove it and run `aibox apply`",
        )],
        Ok(None) => vec![Finding::new(
            "aibox::doctor::no_lock",
            Severity::Info,
            LOCK_FILE,
            "no aibox.lock yet",
            "run `aibox apply`",
        )],
        Ok(Some(lock)) => {
            let recorded = lock.aibox.cli_version.as_str();
            let minor = |v: &str| -> Option<(u64, u64)> {
                let mut parts = v.trim_start_matches('v').split('.');
                Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
            };
            match (minor(recorded), minor(cli)) {
                (Some(a), Some(b)) if a == b => Vec::new(),
                (Some(a), Some(b)) => vec![Finding::new(
                    "aibox::doctor::version_skew",
                    Severity::Warning,
                    LOCK_FILE,
                    format!(
                        "aibox.lock was written by aibox {recorded}, this is aibox {cli}{}",
                        if a > b { " (older than the lock)" } else { "" }
                    ),
                    if a > b {
                        "update aibox to at least the lock's version; an older CLI is the most \
                         common cause of still seeing a fixed bug"
                    } else {
                        "run `aibox apply` to regenerate the files with this version"
                    },
                )],
                _ => vec![Finding::new(
                    "aibox::doctor::version_skew",
                    Severity::Warning,
                    LOCK_FILE,
                    format!("aibox.lock records an unreadable cli_version `{recorded}`"),
                    "run `aibox apply` to record the current version",
                )],
            }
        }
    }
}

fn exception_findings(config: &AiboxToml) -> (Vec<Finding>, Vec<SecurityException>) {
    let mut list = Vec::new();
    let sec = &config.security;
    if sec.acknowledge_seccomp_unconfined {
        list.push(SecurityException {
            option: "acknowledge_seccomp_unconfined".to_owned(),
            reason: "seccomp=unconfined accepted for Codex's bubblewrap sandbox".to_owned(),
        });
    }
    if sec.acknowledge_seccomp_profile {
        list.push(SecurityException {
            option: "acknowledge_seccomp_profile".to_owned(),
            reason: "generated seccomp profile with user namespaces accepted".to_owned(),
        });
    }
    list.extend(sec.exceptions.iter().cloned());
    let mut findings: Vec<Finding> = list
        .iter()
        .map(|e| {
            Finding::new(
                "aibox::doctor::exception",
                Severity::Info,
                aibox_config::AIBOX_TOML,
                format!("active security exception `{}`: {}", e.option, e.reason),
                "remove it from [security] when it is no longer needed",
            )
        })
        .collect();
    if let Ok(catalog) = aibox_devcontainer::catalog::Catalog::builtin() {
        findings.extend(unverified_tool_findings(config, &catalog));
    }
    if config.processkit.allow_unverified {
        findings.push(Finding::new(
            "aibox::doctor::unverified_processkit",
            Severity::Warning,
            aibox_config::AIBOX_TOML,
            "`[processkit] allow_unverified = true`: processkit content is installed without a \
             verified digest",
            "set `[processkit] sha256` to the release archive's digest and remove the opt-out",
        ));
    }
    (findings, list)
}

/// Catalog tools this project's image installs without verification: always shown, with
/// the catalog's written reason.
fn unverified_tool_findings(
    config: &AiboxToml,
    catalog: &aibox_devcontainer::catalog::Catalog,
) -> Vec<Finding> {
    let Ok(tools) = aibox_devcontainer::selected_tools(config, catalog) else {
        return Vec::new();
    };
    tools
        .into_iter()
        .filter(|t| t.verification == aibox_devcontainer::catalog::Verification::Exception)
        .map(|t| {
            Finding::new(
                "aibox::doctor::unverified_tool",
                Severity::Warning,
                aibox_devcontainer::DOCKERFILE_PATH,
                format!(
                    "`{} {}` is installed without verification: {}",
                    t.name,
                    t.version,
                    t.exception.as_deref().unwrap_or_default()
                ),
                "prefer a verified catalog version; `aibox addon list` shows each tool's check",
            )
        })
        .collect()
}

/// Everything that must not leave the machine: the known user and host names, the values
/// of the personal configuration and env file, and of secret-like environment variables.
fn build_redactor(
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

/// Probes the project's running container; a container that is not running (or an
/// engine that cannot be used) gives "not checked" with the reason.
fn codex_sandbox_probe(
    root: &Utf8Path,
    config: &AiboxToml,
    options: &DoctorOptions,
) -> SandboxReport {
    let lifecycle = crate::lifecycle::LifecycleOptions {
        env: options.detect.clone(),
        timeouts: aibox_runtime::Timeouts::default(),
    };
    let posture = aibox_policy::container_security(config)
        .map_or(aibox_policy::SeccompPosture::EngineDefault, |d| d.posture);
    let not_checked = |detail: String| SandboxReport {
        status: SandboxStatus::NotChecked,
        posture: posture.as_str().to_owned(),
        probe: aibox_runtime::USERNS_PROBE.join(" "),
        detail,
        fix: None,
    };
    match crate::lifecycle::runtime_for(root, &lifecycle) {
        Ok((runtime, target)) => crate::codex_sandbox::probe(config, &runtime, &target)
            .unwrap_or_else(|| not_checked(String::new())),
        Err(e) => not_checked(e.to_string()),
    }
}

fn codex_sandbox_finding(report: &SandboxReport) -> Finding {
    match report.status {
        SandboxStatus::Works => Finding::new(
            "aibox::doctor::codex_sandbox",
            Severity::Info,
            "",
            report.line(),
            "",
        ),
        SandboxStatus::Blocked => Finding::new(
            "aibox::doctor::codex_sandbox_blocked",
            Severity::Warning,
            aibox_config::AIBOX_TOML,
            format!(
                "Codex sandbox: blocked ({}): `{}` failed in the container: {}",
                report.posture, report.probe, report.detail
            ),
            report.fix.clone().unwrap_or_default(),
        ),
        SandboxStatus::NotChecked => Finding::new(
            "aibox::doctor::codex_sandbox_unchecked",
            Severity::Info,
            "",
            format!("Codex sandbox: not checked ({})", report.detail),
            "start the container (`aibox up`) and run `aibox doctor` again",
        ),
    }
}

/// The `container-state` check: the engine state of the project's container (what the
/// engine actually runs) under the policy gate's rules, as `up` checks it.
fn container_state_check(
    run: &mut Run,
    root: &Utf8Path,
    project: Option<&Project>,
    options: &DoctorOptions,
) {
    let Some(p) = project else {
        run.skip("container-state", "no valid configuration");
        return;
    };
    if options.skip_engine {
        run.skip("container-state", "skipped by the caller");
        return;
    }
    let lifecycle = crate::lifecycle::LifecycleOptions {
        env: options.detect.clone(),
        timeouts: aibox_runtime::Timeouts::default(),
    };
    let state = crate::lifecycle::runtime_for(root, &lifecycle)
        .map_err(|e| e.to_string())
        .and_then(|(runtime, target)| {
            crate::lifecycle::container_state(&runtime, &target, &p.config)
                .map_err(|e| e.to_string())
        });
    match state {
        Ok(Some(findings)) => run.check("container-state", findings),
        Ok(None) => run.skip("container-state", "no container"),
        Err(e) => run.skip("container-state", &e),
    }
}

/// The `codex-sandbox` check (Codex enabled only): the probe's finding, and its report.
fn codex_sandbox_check(
    run: &mut Run,
    root: &Utf8Path,
    project: Option<&Project>,
    options: &DoctorOptions,
) -> Option<SandboxReport> {
    let p = project.filter(|p| crate::codex_sandbox::codex_enabled(&p.config))?;
    if options.skip_engine {
        run.skip("codex-sandbox", "skipped by the caller");
        return None;
    }
    let report = codex_sandbox_probe(root, &p.config, options);
    run.check("codex-sandbox", vec![codex_sandbox_finding(&report)]);
    Some(report)
}

#[cfg(test)]
mod tool_exception_tests {
    use aibox_devcontainer::catalog::Catalog;

    /// An unverified catalog entry the project installs is always reported, with its
    /// reason; one it does not install is not.
    #[test]
    fn an_installed_unverified_tool_is_reported_with_its_reason() {
        let catalog = Catalog::parse(
            "[tool.ca-certificates]\nversion = \"bookworm\"\nsummary = \"c\"\n\
             verification = \"apt-signed\"\napt = [\"ca-certificates\"]\n\
             [tool.curl]\nversion = \"bookworm\"\nsummary = \"c\"\n\
             verification = \"apt-signed\"\napt = [\"curl\"]\n\
             [tool.git]\nversion = \"bookworm\"\nsummary = \"g\"\n\
             verification = \"apt-signed\"\napt = [\"git\"]\n\
             [tool.odd]\nversion = \"1.0.0\"\nsummary = \"o\"\n\
             verification = \"exception\"\nexception = \"upstream publishes no digest\"\n\
             [[tool.odd.artifact]]\nurl = \"https://example.invalid/odd.tar.gz\"\n",
        )
        .unwrap();
        let config = |addons: &str| -> aibox_config::AiboxToml {
            aibox_config::parse_aibox_toml(
                &format!("[container]\nname = \"x\"\n[context]\nmode = \"harness-only\"\n{addons}"),
                "aibox.toml",
            )
            .unwrap()
        };
        assert!(super::unverified_tool_findings(&config(""), &catalog).is_empty());
        let findings =
            super::unverified_tool_findings(&config("[addons]\ntools = [\"odd\"]\n"), &catalog);
        assert_eq!(findings.len(), 1);
        let text = format!("{findings:?}");
        assert!(
            text.contains("odd 1.0.0") && text.contains("upstream publishes no digest"),
            "{text}"
        );
    }
}
