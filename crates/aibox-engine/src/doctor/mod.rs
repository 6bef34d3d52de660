//! `aibox doctor`: read-only diagnostics of a project as it stands.
//!
//! Each check (one module per concern under `checks`) adds [`Finding`]s with stable
//! codes (`aibox::doctor::*` for doctor's own checks, `aibox::policy::*` for the policy
//! gates, which run exactly as in `apply`). The project is resolved once, offline
//! ([`crate::resolve()`] with `offline = true`): doctor never downloads, and a processkit
//! release missing from the download cache is reported as not resolved. Its one request
//! is the `updates` check's question to the releases feed ([`crate::updates`]), made only
//! outside CI and without `AIBOX_NO_UPDATE_CHECK` unless asked. Every string of
//! the report passes through [`aibox_policy::redact()`] before the report is returned
//! (`report`), so neither the human output, the JSON (`"redacted": true`) nor a report
//! bundle ([`write_report`], in `bundle`) can show a secret, a home path, the user or
//! the host name. Finding messages are plain text (no terminal box drawing, no ANSI).
//!
//! Exit status (for the CLI): 0 when the report has no error, 1 when it has at least one
//! (warnings and notes never fail the run).

mod bundle;
mod checks;
mod git;
mod report;

use aibox_policy::{TargetEngine, redact};
use camino::Utf8Path;

// The types `DoctorReport` and `DoctorOptions` hold, beside them (also at the crate root).
pub use aibox_policy::{Finding, Severity};
pub use aibox_runtime::DetectEnv;

use crate::error::EngineError;
use crate::writer::ProjectRoot;

pub use bundle::{DoctorError, REPORT_REMINDER, write_report};
pub use checks::base_image;
pub use report::{CheckResult, CheckStatus, DoctorReport, Summary};

use report::Run;

/// The personal env file.
pub const LOCAL_ENV_FILE: &str = aibox_config::layout::LOCAL_ENV;

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
    /// The download cache the processkit release is looked up in (default: the one
    /// `apply` uses). Doctor only reads it; it never downloads.
    pub cache_dir: Option<camino::Utf8PathBuf>,
    /// Whether to ask the forge's releases feed for a newer aibox (the one request doctor
    /// makes; by default not in CI and not with `AIBOX_NO_UPDATE_CHECK`).
    pub update_check: crate::updates::UpdateCheck,
    /// Run the installed release's pk-doctor and merge its findings (`--processkit`).
    pub processkit: bool,
    /// The `uv` pk-doctor's host environment is installed with (`AIBOX_UV`, else `PATH`).
    pub uv: crate::mcp_resolver::Resolver,
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
            cache_dir: None,
            update_check: crate::updates::UpdateCheck::Auto,
            processkit: false,
            uv: crate::mcp_resolver::Resolver::Auto,
        }
    }
}

/// The `pk-doctor` check (`--processkit`): the installed release's pk-doctor, in the
/// running container or on the host (`crate::pk_doctor`).
fn pk_doctor(
    run: &mut Run,
    root: &Utf8Path,
    lock: Option<&aibox_provenance::lock::Lock>,
    engine_at: &checks::EngineAt,
    options: &DoctorOptions,
) {
    let place = crate::pk_doctor::Place {
        container: engine_at.as_ref().ok().map(|(r, t)| (r, t)),
        resolver: &options.uv,
        cache: options
            .cache_dir
            .as_ref()
            .map(|d| d.as_std_path().to_owned())
            .or_else(|| aibox_provenance::Cache::default_location().map(|c| c.root().to_owned())),
    };
    run.check("pk-doctor", crate::pk_doctor::findings(root, lock, &place));
}

/// The project resolved as `apply` would, but offline: doctor never downloads.
fn resolve_offline(
    root: &ProjectRoot,
    project: &aibox_config::Project,
    engine: TargetEngine,
    options: &DoctorOptions,
) -> Result<crate::resolve::Resolved, EngineError> {
    let plan = crate::resolve::PlanOptions {
        aibox_version: options.cli_version.clone(),
        engine: Some(engine),
        cache_dir: options.cache_dir.clone(),
        offline: true,
        ..crate::resolve::PlanOptions::default()
    };
    crate::resolve::resolve_checked(root, project.clone(), &plan)
}

/// The project planned once: the sync check compares the plan with the files, and the
/// MCP-servers check starts the processkit servers it registers (planning is most of a
/// large release's cost, and that check planned again even without a container).
struct Planned {
    /// No plan when the resolve failed or the release is not resolved.
    plan: Option<Result<crate::builder::Plan, EngineError>>,
    /// The plan's processkit servers (none without a plan), or why it failed.
    servers: Result<Vec<aibox_mcp_registration::ServerSpec>, String>,
}

fn plan_once(resolved: Option<&Result<crate::resolve::Resolved, EngineError>>) -> Planned {
    let plan = resolved
        .and_then(|r| r.as_ref().ok())
        .filter(|r| r.not_resolved().is_none())
        .map(crate::plan::plan);
    let servers = match &plan {
        Some(Ok(plan)) => Ok(plan.processkit_servers.clone()),
        Some(Err(e)) => Err(e.to_string()),
        None => Ok(Vec::new()),
    };
    Planned { plan, servers }
}

/// The engine the seccomp gate judges: the one found for the container checks
/// (detection runs the engines' CLIs, so not twice), else resolved with the same
/// environment.
fn judged_engine(
    project: Option<&aibox_config::Project>,
    engine_at: &checks::EngineAt,
    options: &DoctorOptions,
) -> TargetEngine {
    match (project, engine_at) {
        (None, _) => TargetEngine::Unknown,
        (Some(_), Ok((runtime, _))) => {
            crate::codex_sandbox::from_engine(runtime.detected().engine.engine)
        }
        (Some(p), Err(_)) => {
            crate::codex_sandbox::target_engine(p.config.container.engine, &options.detect)
        }
    }
}

/// The checks of the project's container as the engine runs it, looked up once for all
/// of them (`container`; each engine call costs tens of milliseconds).
fn container_checks(
    run: &mut Run,
    project: Option<&aibox_config::Project>,
    lock: Option<&aibox_provenance::lock::Lock>,
    engine_at: &checks::EngineAt,
    container: Option<&checks::Container>,
) {
    checks::container_state::check(run, project, engine_at, container);
    // the egress proxy runs beside the agent, and the hosts it refused (allowlist mode)
    let agent = container
        .and_then(|c| c.as_ref().ok())
        .and_then(Option::as_ref);
    checks::egress::check(run, project, engine_at, agent);
    // the running container's labels and marker against the lock and the configuration
    match checks::base_image::check(project, lock, engine_at, container) {
        Ok(findings) => run.check("base-image", findings),
        Err(why) => run.skip("base-image", &why),
    }
}

/// Runs every check on the project at `root`. Only reads (and runs `git` and the engine's
/// version probe); never writes and never downloads.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let root = camino::Utf8Path::from_path(dir.path()).unwrap();
/// # fs_err::write(root.join("aibox.toml"), "[container]\nname = \"demo\"\n").unwrap();
/// use aibox_engine::doctor::{DoctorOptions, doctor};
/// let options = DoctorOptions { skip_engine: true, ..DoctorOptions::default() };
/// let report = doctor(root, &options)?;
/// // Nothing was applied yet: the generated files are out of sync (a warning).
/// assert!(report.summary.warnings > 0);
/// println!("{}", report.render_human());
/// # Ok::<(), aibox_engine::EngineError>(())
/// ```
///
/// # Errors
/// Only when `root` is not an accessible directory; every problem inside the project is a
/// finding.
pub fn doctor(root: &Utf8Path, options: &DoctorOptions) -> Result<DoctorReport, EngineError> {
    let project_root = ProjectRoot::open(root)?;
    let mut run = Run::default();

    // configuration (loaded once; the resolve below takes it)
    let project = checks::config::check(&mut run, &project_root);
    let engine_cell = std::sync::OnceLock::new();
    std::thread::scope(|s| {
        // What waits on other processes (`git`, the engine, the releases feed) runs on a
        // thread of its own from the start, so it overlaps the resolve and the plan; each
        // result joins the report where its check stands.
        let local_state = s.spawn(|| {
            let mut part = Run::default();
            checks::local_state::check(&mut part, project_root.path());
            part
        });
        let updates = s.spawn(|| {
            let mut part = Run::default();
            checks::updates::check(&mut part, options, (project_root.path(), project.as_ref()));
            part
        });
        let lock = checks::read_lock(&project_root);
        let lock_ref = lock.as_ref().ok().and_then(Option::as_ref);

        // The engine, found once for every check that asks it (detection runs the
        // engines' CLIs), and the project's container, looked up meanwhile.
        let engine_at: &checks::EngineAt = engine_cell
            .get_or_init(|| checks::engine_at(project_root.path(), project.as_ref(), options));
        let container = s.spawn(|| checks::container(engine_at));
        // container engine
        checks::engine::check(&mut run, project.as_ref(), options, engine_at);

        let engine = judged_engine(project.as_ref(), engine_at, options);
        // Resolved offline: doctor never downloads.
        let resolved = project
            .as_ref()
            .map(|p| resolve_offline(&project_root, p, engine, options));
        // The seccomp decision, taken once: the resolve's, or (when the resolve failed)
        // its own.
        let security = match (&resolved, &project) {
            (Some(Ok(r)), _) => Some(r.security.clone()),
            (_, Some(p)) => Some(crate::security::Security::of(&p.config, Some(engine))),
            _ => None,
        };

        // An unfinished apply first: until it is finished, drift, trust and sync are
        // verdicts on aibox's own half-done work, not on the user's changes.
        let unfinished = crate::records::unfinished_apply(&project_root);
        let servers = content_checks(&mut run, project_root.path(), resolved.as_ref(), unfinished);

        // local state ignored and untracked, and personal files private
        run.append(joined(local_state));
        run.check(
            "personal-files",
            checks::local_state::permission_findings(project_root.path()),
        );

        // seccomp posture and dangerous container options
        let mut posture = None;
        if let (Some(p), Some(security)) = (&project, &security) {
            let (findings, p_name) =
                checks::container_policy::findings(&project_root, p, security, lock_ref);
            posture = p_name;
            run.check("container-policy", findings);
        } else {
            run.skip("container-policy", "no valid configuration");
        }

        // The container as found once: the Codex probe, the container checks and the MCP
        // probes all read it.
        let container = joined(container);
        let found = container
            .as_ref()
            .and_then(|c| c.as_ref().ok())
            .and_then(Option::as_ref);
        // Codex's sandbox, probed in the running container (only when Codex is enabled)
        let codex_sandbox = checks::codex_sandbox::check(
            &mut run,
            project.as_ref(),
            security.as_ref(),
            engine_at,
            found,
        );
        container_checks(
            &mut run,
            project.as_ref(),
            lock_ref,
            engine_at,
            container.as_ref(),
        );
        // the MCP servers the harnesses start, started in the running container
        checks::mcp_servers::check(&mut run, resolved.as_ref(), &servers, engine_at, found);
        // processkit's own checker, on request
        if options.processkit {
            pk_doctor(&mut run, project_root.path(), lock_ref, engine_at, options);
        }
        // secrets in committed files
        run.check(
            "secrets",
            checks::secrets::findings(&project_root, lock_ref),
        );
        // the skill review of installed skills (only when there are any)
        // On this thread, not beside the resolve or the plan: it reads the install marker
        // and the release too, and the two peaks together raised doctor's memory per
        // installed file by a third (`aibox-cli` `it` `memory::`). The resolve is freed
        // first: its scan, marker and release manifest (2.7 MB at 10x processkit) were
        // held beside the review's largest skill folder, read whole (3 MB).
        drop(resolved);
        if let Some(record) = unfinished {
            run.skip("skills", &unfinished_skip(record));
        } else {
            run.append(skills_check(&project_root, project.as_ref()));
        }

        // CLI version versus the lock, and versus the newest release
        run.check(
            "version",
            checks::version::findings(&lock, &options.cli_version),
        );
        run.append(joined(updates));

        // consents, listed on every run
        let mut exceptions = Vec::new();
        if let Some(p) = &project {
            let (findings, list) = checks::exceptions::findings(&p.config);
            exceptions = list;
            run.check("exceptions", findings);
        } else {
            run.skip("exceptions", "no valid configuration");
        }

        let redactor = bundle::build_redactor(&project_root, project.as_ref(), options);
        let mut report = run.finish(options, posture, exceptions, redactor);
        report.codex_sandbox = codex_sandbox.map(|mut c| {
            c.detail = redact(&c.detail, report.redactor());
            c
        });
        Ok(report)
    })
}

/// The result of a check run on its own thread (a panic there is a panic here).
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The `skills` check: the review of the installed skills (none when there are none).
fn skills_check(root: &ProjectRoot, project: Option<&aibox_config::Project>) -> Run {
    let mut part = Run::default();
    if let Some(p) = project
        && let Ok(skills) = crate::skills::list_for(root.path(), p)
        && !skills.is_empty()
    {
        part.check("skills", checks::skills::findings(p, &skills));
    }
    part
}

/// The checks of the resolved project's files: generated files in sync (what `apply
/// --check` reports), whether the MCP servers' dependencies are locked, the installed
/// processkit content (the summary of `doctor --integrity`) and its waiting migrations.
/// Returns the processkit servers of the one plan, for the MCP-servers check.
fn content_checks(
    run: &mut Run,
    root: &Utf8Path,
    resolved: Option<&Result<crate::resolve::Resolved, EngineError>>,
    unfinished: Option<&str>,
) -> Result<Vec<aibox_mcp_registration::ServerSpec>, String> {
    let mut planned = plan_once(resolved);
    if let Some(record) = unfinished {
        // The one error to fix; the half state's differences, drift and trust verdicts
        // would all be aibox's own unfinished writes presented as the user's.
        run.check("sync", vec![unfinished_finding(record)]);
        if let Some(Ok(r)) = resolved {
            run.check("mcp-dependencies", checks::mcp_deps::findings(r));
        }
        run.skip("integrity", &unfinished_skip(record));
        run.check("migrations", checks::migrations::findings(root));
        return planned.servers;
    }
    // The egress proxy's personal files, which `sync` (as `apply --check`) leaves out.
    if let Some(Ok(plan)) = &planned.plan
        && plan
            .files
            .iter()
            .any(|f| f.path == aibox_config::layout::EGRESS_FILTER)
    {
        run.check(
            "egress-files",
            checks::egress::local_file_findings(root, &plan.files),
        );
    }
    match resolved {
        Some(resolved) => run.check(
            "sync",
            checks::sync::findings(resolved, planned.plan.take()),
        ),
        None => run.skip("sync", "no valid configuration"),
    }
    if let Some(Ok(r)) = resolved {
        run.check("mcp-dependencies", checks::mcp_deps::findings(r));
    }
    run.check("integrity", checks::integrity::findings(root, resolved));
    // processkit migrations waiting for the user (`aibox migrate`)
    run.check("migrations", checks::migrations::findings(root));
    planned.servers
}

/// The error of an apply that did not finish, naming the record it left (`record`).
fn unfinished_finding(record: &str) -> Finding {
    Finding::new(
        "aibox::doctor::unfinished_apply",
        Severity::Error,
        record,
        "an `aibox apply` did not finish (it was interrupted, failed, or is running now): the \
         project is half updated, so its differences from the plan, the processkit \
         integrity and the skills' trust are not judged until it is finished",
        "run `aibox apply` to finish it (it completes exactly the interrupted work and keeps \
         every local edit), then run `aibox doctor` again",
    )
}

/// Why a check derived from the project's files is not run while an apply is unfinished.
fn unfinished_skip(record: &str) -> String {
    format!("an `aibox apply` did not finish ({record}); run `aibox apply` to finish it")
}

/// A finding whose message is a diagnostic rendered as plain text (see
/// [`report::plain_diagnostic`]).
pub(crate) fn diagnostic_finding(
    code: &str,
    severity: Severity,
    file: &str,
    intro: &str,
    diagnostic: &dyn miette::Diagnostic,
    remedy: impl Into<String>,
) -> Finding {
    Finding::new(
        code,
        severity,
        file,
        format!("{intro}{}", report::plain_diagnostic(diagnostic)),
        remedy,
    )
}
