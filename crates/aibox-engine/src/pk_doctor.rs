//! processkit's own integrity checker, pk-doctor, for `aibox doctor --processkit`.
//!
//! The installed release's `scripts/doctor.py` of the `pk-doctor` skill runs with `--no-log
//! --json` (so it writes nothing) and its findings join doctor's report, each tagged
//! `pk-doctor::<id>`. Its PEP 723 dependencies are locked by `apply` like an MCP server's
//! (`[mcp.environments]` entry serving [`ENV_NAME`]), so nothing resolved at run time
//! floats: in the running container it runs with the environment the image installed
//! (`/opt/aibox/mcp/<id>`); on the host, `uv` installs the same hash-pinned requirements
//! once into the download cache (`pk-doctor/<id>/`). What cannot run (no pk-doctor in the
//! release, dependencies not locked, no `uv`, output that is not its JSON) is a finding
//! that says so, never a crash.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use aibox_policy::{Finding, Severity};
use aibox_provenance::lock::Lock;
use aibox_provenance::pydeps::{self, EnvLock};
use camino::Utf8Path;
use serde::Deserialize;

use crate::mcp_resolver::{Resolver, locate};

/// The name `aibox.lock` records for the pk-doctor script among an environment's users
/// (defined with the environments, which set it apart from the servers).
pub use crate::mcp_envs::PK_DOCTOR_ENV as ENV_NAME;

/// Longest pk-doctor may run (about 6 s on a real project; a cold host environment
/// install adds a download).
const RUN_TIMEOUT: Duration = Duration::from_mins(3);
/// Longest the host environment install may take.
const INSTALL_TIMEOUT: Duration = Duration::from_mins(5);
/// Most stderr lines quoted in a failure.
const TAIL_LINES: usize = 8;

/// The pk-doctor script among `paths` (root- or release-relative):
/// `context/skills/<category>/pk-doctor/scripts/doctor.py`.
pub(crate) fn script_in<'a>(paths: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    paths.into_iter().find(|p| {
        p.strip_prefix("context/skills/")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(category, rest)| {
                !category.starts_with('_') && rest == "pk-doctor/scripts/doctor.py"
            })
    })
}

/// Where pk-doctor may run: in the project's container when it runs, else on the host
/// with `uv` (as `resolver` names it) and the download cache `cache`.
pub(crate) struct Place<'a> {
    /// The engine and the project's container, when an engine was found.
    pub container: Option<(&'a aibox_runtime::Runtime, &'a aibox_runtime::Target)>,
    /// Which `uv` on the host.
    pub resolver: &'a Resolver,
    /// The download cache root.
    pub cache: Option<PathBuf>,
}

/// pk-doctor's JSON report (`--json`), as v0.28 and v1.0 print it.
#[derive(Deserialize)]
struct Report {
    findings: Vec<PkFinding>,
    #[serde(default)]
    doctor_version: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct PkFinding {
    severity: String,
    #[serde(default)]
    category: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    entity_ref: Option<String>,
    #[serde(default)]
    suggested_fix: Option<String>,
    #[serde(default)]
    default_agent_action: Option<String>,
}

fn finding(code: &str, severity: Severity, message: String, remedy: &str) -> Finding {
    Finding {
        code: code.to_owned(),
        severity,
        file: String::new(),
        line: None,
        message,
        remedy: remedy.to_owned(),
        option: None,
        accepted_reason: None,
    }
}

/// Runs the installed pk-doctor of the project at `root` and returns its findings, plus
/// one of aibox's saying where and how it ran (or why it could not).
pub(crate) fn findings(root: &Utf8Path, lock: Option<&Lock>, place: &Place<'_>) -> Vec<Finding> {
    let installed = installed_script(root);
    let Some(script) = installed else {
        return vec![finding(
            "aibox::doctor::pk_doctor_missing",
            Severity::Warning,
            "pk-doctor is not installed: the project has no \
             `context/skills/<category>/pk-doctor/scripts/doctor.py` (releases before pk-doctor \
             do not ship it, or the skill is not selected)"
                .to_owned(),
            "select it with `aibox skill enable pk-doctor` and run `aibox apply` (a release \
             without it cannot be checked this way)",
        )];
    };
    let Some((id, env)) = lock.and_then(|l| l.mcp.as_ref()).and_then(|m| {
        m.environments
            .iter()
            .find(|(_, e)| e.servers.iter().any(|s| s == ENV_NAME) && e.unresolvable.is_none())
            .map(|(id, e)| (id.clone(), (e.clone(), m.hashes.clone())))
    }) else {
        return vec![finding(
            "aibox::doctor::pk_doctor_unlocked",
            Severity::Warning,
            format!(
                "pk-doctor (`{script}`) was not run: aibox.lock holds no locked environment for \
                 its dependencies, and aibox never runs dependencies it has not pinned"
            ),
            "run `aibox apply` with `uv` available (on PATH or in AIBOX_UV) to lock them",
        )];
    };
    let started = Instant::now();
    let inside = place
        .container
        .and_then(|(runtime, target)| in_container(runtime, target, &script, &id));
    let ran = match inside {
        Some(ran) => ran,
        None => host_allowed(root).and_then(|()| {
            on_host(
                root,
                &script,
                &id,
                &env,
                place.resolver,
                place.cache.as_deref(),
            )
        }),
    };
    let (where_, output) = match ran {
        Ok(ran) => ran,
        Err(f) => return vec![*f],
    };
    let took = started.elapsed().as_secs_f64();
    read_report(&output, (&where_, &script), took)
}

/// On the host pk-doctor runs outside the container's walls, so only as the release
/// shipped it: first-party (a verified release from a trusted source, its files
/// unchanged). Anything else runs only in the container.
fn host_allowed(root: &Utf8Path) -> Result<(), Box<Finding>> {
    match crate::skills::trust_of_installed(root, "pk-doctor") {
        Some(t) if t.trust == crate::skills::Trust::FirstParty => Ok(()),
        other => Err(Box::new(finding(
            "aibox::doctor::pk_doctor_untrusted",
            Severity::Warning,
            format!(
                "pk-doctor was not run on the host: the container is not running and the \
                 installed pk-doctor is not first-party ({}), and aibox runs only the release's \
                 own code outside the container",
                other.map_or_else(|| "its trust cannot be read".to_owned(), |t| t.why)
            ),
            "start the container with `aibox up` (pk-doctor then runs there), or restore the \
             release's files with `aibox apply` and list its source in `[processkit] \
             trusted_sources`",
        ))),
    }
}

/// The installed pk-doctor script, root-relative.
fn installed_script(root: &Utf8Path) -> Option<String> {
    let skills = root.join("context/skills");
    let mut paths: Vec<String> = fs_err::read_dir(&skills)
        .into_iter()
        .flatten()
        .flatten()
        .map(|c| {
            format!(
                "context/skills/{}/pk-doctor/scripts/doctor.py",
                c.file_name().to_string_lossy()
            )
        })
        .filter(|p| root.join(p).is_file())
        .collect();
    paths.sort();
    script_in(paths.iter().map(String::as_str)).map(str::to_owned)
}

fn failed(message: String, remedy: &str) -> Box<Finding> {
    Box::new(finding(
        "aibox::doctor::pk_doctor_failed",
        Severity::Warning,
        message,
        remedy,
    ))
}

/// The last lines of `stderr`, secrets masked.
fn tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    aibox_policy::redact_secrets(&lines[from..].join("\n"))
}

/// Runs pk-doctor in the container; `None` when the container is not running (then it
/// runs on the host).
fn in_container(
    runtime: &aibox_runtime::Runtime,
    target: &aibox_runtime::Target,
    script: &str,
    id: &str,
) -> Option<Result<(String, std::process::Output), Box<Finding>>> {
    let limit = RUN_TIMEOUT.as_secs().to_string();
    let cmd: Vec<String> = [
        "timeout",
        "-k",
        "5",
        &limit,
        &pydeps::env_python(id),
        &format!("/workspace/{script}"),
        "--no-log",
        "--json",
        "--repo-root",
        "/workspace",
    ]
    .into_iter()
    .map(ToOwned::to_owned)
    .collect();
    let command = match runtime.exec_command(
        target,
        &aibox_runtime::PipedExec {
            user: &target.user,
            cmd: &cmd,
            literal_env: &[(
                crate::skills::NO_BYTECODE.0.to_owned(),
                crate::skills::NO_BYTECODE.1.to_owned(),
            )],
            env: &[],
        },
    ) {
        Ok(c) => c,
        Err(aibox_runtime::RuntimeError::NotRunning { .. }) => return None,
        Err(e) => {
            return Some(Err(failed(
                format!("pk-doctor could not start in the container: {e}"),
                "check the container with `aibox status`",
            )));
        }
    };
    let output = crate::process::run_with_deadline(command, RUN_TIMEOUT + Duration::from_secs(10));
    Some(output.map_or_else(
        || {
            Err(failed(
                format!(
                    "pk-doctor did not finish in the container within {} s",
                    RUN_TIMEOUT.as_secs()
                ),
                "run it by hand to see where it stops",
            ))
        },
        |o| Ok((format!("in the container `{}`", target.container), o)),
    ))
}

fn on_host(
    root: &Utf8Path,
    script: &str,
    id: &str,
    env: &(EnvLock, std::collections::BTreeMap<String, Vec<String>>),
    resolver: &Resolver,
    cache: Option<&Path>,
) -> Result<(String, std::process::Output), Box<Finding>> {
    let (uv, version) = locate(
        resolver,
        "uv",
        crate::mcp_envs::UV_ENV,
        "install uv from https://docs.astral.sh/uv/",
    )
    .map_err(|why| {
        Box::new(finding(
            "aibox::doctor::pk_doctor_unavailable",
            Severity::Warning,
            format!("pk-doctor was not run: the container is not running and {why}"),
            "start the container with `aibox up`, or install uv on the host",
        ))
    })?;
    let scratch;
    let base = if let Some(c) = cache {
        c.join("pk-doctor")
    } else {
        scratch = tempfile::tempdir().map_err(|e| {
            failed(
                format!("no folder for pk-doctor's environment: {e}"),
                "check $TMPDIR",
            )
        })?;
        scratch.path().to_owned()
    };
    let dir = base.join(id);
    let python = dir.join("bin/python");
    if !dir.join(".aibox-complete").is_file() {
        install_env(&uv, &dir, &env.0, &env.1)?;
    }
    let mut cmd = Command::new(&python);
    // Bytecode goes beside the environment, never into the installed skill (where it
    // reads as an edit of the release), and none left there is loaded.
    cmd.env("PYTHONPYCACHEPREFIX", dir.join("pycache"))
        .arg(root.join(script).as_std_path())
        .args(["--no-log", "--json", "--repo-root"])
        .arg(root.as_std_path())
        .current_dir(root.as_std_path());
    let output = crate::process::run_with_deadline(cmd, RUN_TIMEOUT).ok_or_else(|| {
        failed(
            format!(
                "pk-doctor did not finish on the host within {} s",
                RUN_TIMEOUT.as_secs()
            ),
            "run it by hand to see where it stops",
        )
    })?;
    Ok((
        format!("on the host (uv {version}, environment {id})"),
        output,
    ))
}

/// Installs the locked, hash-pinned requirements into `dir` (a virtual environment); the
/// `.aibox-complete` marker is written last, so a half-made environment is made again.
fn install_env(
    uv: &Path,
    dir: &Path,
    env: &EnvLock,
    hashes: &std::collections::BTreeMap<String, Vec<String>>,
) -> Result<(), Box<Finding>> {
    let remedy = "check the network and the uv cache; `aibox doctor --processkit` tries again";
    let _ = fs_err::remove_dir_all(dir);
    let reqs = dir.with_extension("txt");
    if let Some(parent) = dir.parent() {
        fs_err::create_dir_all(parent)
            .map_err(|e| failed(format!("cannot create {}: {e}", parent.display()), remedy))?;
    }
    fs_err::write(&reqs, pydeps::render_requirements(env, hashes))
        .map_err(|e| failed(format!("cannot write {}: {e}", reqs.display()), remedy))?;
    let mut venv = Command::new(uv);
    venv.arg("venv").arg("--quiet").arg(dir);
    if let Some(floor) = env.requires_python.as_deref() {
        venv.arg("--python").arg(floor);
    }
    let mut install = Command::new(uv);
    install
        .args([
            "pip",
            "install",
            "--quiet",
            "--require-hashes",
            "--no-deps",
            "--python",
        ])
        .arg(dir.join("bin/python"))
        .arg("-r")
        .arg(&reqs);
    for (what, cmd) in [("create", venv), ("install", install)] {
        let out = crate::process::run_with_deadline(cmd, INSTALL_TIMEOUT);
        match out {
            Some(o) if o.status.success() => {}
            Some(o) => {
                return Err(failed(
                    format!(
                        "uv could not {what} pk-doctor's locked environment in {}:\n{}",
                        dir.display(),
                        tail(&o.stderr)
                    ),
                    remedy,
                ));
            }
            None => {
                return Err(failed(
                    format!("uv did not {what} pk-doctor's environment in time"),
                    remedy,
                ));
            }
        }
    }
    fs_err::write(dir.join(".aibox-complete"), b"")
        .map_err(|e| failed(format!("cannot finish {}: {e}", dir.display()), remedy))
}

/// pk-doctor's findings from its output, or why its output is unusable.
fn read_report(
    output: &std::process::Output,
    (where_, script): (&str, &str),
    took: f64,
) -> Vec<Finding> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    // It exits 1 when it reports an ERROR: that is a report, not a failure.
    let report = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .and_then(|l| serde_json::from_str::<Report>(l).ok());
    let Some(report) = report else {
        let code = output
            .status
            .code()
            .map_or_else(|| "a signal".to_owned(), |c| format!("exit code {c}"));
        return vec![*failed(
            format!(
                "pk-doctor ran {where_} but printed no JSON report ({code}); its last lines:\n{}",
                tail(if output.stderr.is_empty() {
                    &output.stdout
                } else {
                    &output.stderr
                })
            ),
            &format!(
                "run it by hand (`{script} --no-log --json`, with the python of the locked \
                 environment) to see the error; an older pk-doctor without `--json` cannot be \
                 merged"
            ),
        )];
    };
    let mut counts = [0usize; 3];
    let mut out: Vec<Finding> = report
        .findings
        .into_iter()
        .map(|f| {
            let severity = match f.severity.to_ascii_uppercase().as_str() {
                "ERROR" => Severity::Error,
                "WARN" | "WARNING" => Severity::Warning,
                _ => Severity::Info,
            };
            counts[match severity {
                Severity::Error => 0,
                Severity::Warning => 1,
                Severity::Info => 2,
            }] += 1;
            let mut message = format!(
                "[pk-doctor {}] {}",
                aibox_config::bounded(&f.category, 80),
                aibox_config::bounded(&f.message, 2000)
            );
            if let Some(r) = f.entity_ref.filter(|r| !r.is_empty()) {
                let _ = write!(message, " ({})", aibox_config::bounded(&r, 200));
            }
            let remedy = f
                .suggested_fix
                .or(f.default_agent_action)
                .map(|r| aibox_config::bounded(&r, 1000))
                .unwrap_or_default();
            finding(
                &format!("pk-doctor::{}", aibox_config::bounded(&f.id, 120)),
                severity,
                aibox_policy::redact_secrets(&message),
                &aibox_policy::redact_secrets(&remedy),
            )
        })
        .collect();
    let version = report
        .doctor_version
        .map(|v| v.as_str().map_or_else(|| v.to_string(), ToOwned::to_owned))
        .map_or_else(String::new, |v| format!(" {v}"));
    out.insert(
        0,
        finding(
            "aibox::doctor::pk_doctor",
            Severity::Info,
            format!(
                "pk-doctor{version} ran {where_} in {took:.1} s: {} error(s), {} warning(s), {} \
                 info; its findings follow, tagged `pk-doctor::`",
                counts[0], counts[1], counts[2]
            ),
            "",
        ),
    );
    out
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;
    use std::process::{ExitStatus, Output};

    use super::*;

    fn output(code: i32, stdout: &str, stderr: &str) -> Output {
        Output {
            status: ExitStatus::from_raw(code << 8),
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_report_is_read_and_anything_else_is_a_failure() {
        // pk-doctor's shape: exit 1 with ERRORs is a report, after log lines.
        let json = r#"{"findings": [{"severity": "ERROR", "category": "migrations", "id": "migrations.pending", "message": "1 pending", "entity_ref": "context/migrations/pending/x.md", "suggested_fix": "apply it"}, {"severity": "INFO", "category": "c", "id": "c.ok", "message": "fine"}], "doctor_version": "1.0.0"}"#;
        let out = read_report(
            &output(1, &format!("note\n{json}\n"), ""),
            ("here", "doctor.py"),
            0.5,
        );
        let codes: Vec<&str> = out.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(
            codes,
            [
                "aibox::doctor::pk_doctor",
                "pk-doctor::migrations.pending",
                "pk-doctor::c.ok"
            ]
        );
        assert!(
            out[0].message.contains("1 error(s), 0 warning(s), 1 info"),
            "{:?}",
            out[0]
        );
        assert_eq!(out[1].severity, Severity::Error);
        assert_eq!(out[1].remedy, "apply it");
        assert!(
            out[1]
                .message
                .starts_with("[pk-doctor migrations] 1 pending (context/")
        );

        // A traceback, or the human report of a pk-doctor without --json.
        let token = "ghp_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000";
        let out = read_report(
            &output(
                2,
                "pk-doctor report\n",
                &format!("Traceback\nKeyError: {token}\n"),
            ),
            (
                "here",
                "context/skills/processkit/pk-doctor/scripts/doctor.py",
            ),
            0.1,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].code, "aibox::doctor::pk_doctor_failed");
        assert!(
            out[0].remedy.contains(
                "`context/skills/processkit/pk-doctor/scripts/doctor.py --no-log --json`"
            ),
            "{:?}",
            out[0]
        );
        assert!(out[0].message.contains("exit code 2") && out[0].message.contains("KeyError"));
        assert!(!out[0].message.contains(token), "{:?}", out[0]);
        // JSON of another shape is no report either.
        let out = read_report(
            &output(0, "{\"ok\": true}\n", ""),
            ("here", "doctor.py"),
            0.1,
        );
        assert_eq!(out[0].code, "aibox::doctor::pk_doctor_failed");
    }

    #[test]
    fn the_script_is_found_in_any_category() {
        let paths = [
            "context/skills/_lib/pk-doctor/scripts/doctor.py",
            "context/skills/tools/pk-doctor/scripts/doctor.py",
        ];
        assert_eq!(script_in(paths), Some(paths[1]));
        assert_eq!(script_in(["context/skills/x/pk-doctor/doctor.py"]), None);
    }
}
