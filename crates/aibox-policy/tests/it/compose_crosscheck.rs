//! The gate against the real Compose implementation: for every project of the corpus
//! (`fixtures/compose-corpus/compose-bypass/` and `compose-benign/`) the installed `docker-compose`
//! (Debian's 1.29) resolves the configuration with `config`, and an independent, simple
//! reading of that resolved output looks for dangerous settings. The property: whenever
//! the gate accepts a project, the configuration Compose resolves holds nothing
//! dangerous. Compose runs with an empty environment (only `PATH` and a scratch `HOME`),
//! so defaults and `.env` decide, as on a fresh shell.
//!
//! Debian's podman-compose (1.0.x) has no `config` command; its `--dry-run up` prints the
//! merged configuration and the `podman run` command it would start, which the second
//! test reads the same way (it creates the project's network and named volumes as a side
//! effect, so it uses a unique project name and removes them again). Both run the tool's
//! own Python code once per project inside one interpreter where it is Debian's Python
//! build, and one command per project otherwise: the same answers for all 142 projects,
//! in a tenth of the time.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use crate::corpus;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use aibox_policy::{Consent, check_compose_setup, devcontainer_compose_files, has_errors};
use corpus::{fixtures, project_files};
use serde_norway::Value as Yaml;

/// The Compose command of one project: its folder and the arguments of `config`.
fn config_args(root: &Path, files: &BTreeMap<String, String>) -> (PathBuf, Vec<String>) {
    compose_command(root, files, &[], &["config"])
}

/// A Compose tool's command for one project: its folder, and `before`, `-f` and each of
/// the project's Compose files that exists, then `after`.
fn compose_command(
    root: &Path,
    files: &BTreeMap<String, String>,
    before: &[&str],
    after: &[&str],
) -> (PathBuf, Vec<String>) {
    let mut args: Vec<String> = before.iter().map(|a| (*a).to_owned()).collect();
    for name in compose_files(files) {
        let path = root.join(name);
        if path.is_file() {
            args.push("-f".to_owned());
            args.push(path.display().to_string());
        }
    }
    args.extend(after.iter().map(|a| (*a).to_owned()));
    (root.join(".devcontainer"), args)
}

/// Each project's command run on its own, `after_each` after each; their outputs.
fn one_by_one(
    program: &str,
    home: &Path,
    cases: &[(PathBuf, Vec<String>)],
    after_each: impl Fn(),
) -> Vec<std::process::Output> {
    cases
        .iter()
        .map(|(dir, args)| {
            let out = bare(OsStr::new(program), home)
                .current_dir(dir)
                .args(args)
                .output()
                .unwrap();
            after_each();
            out
        })
        .collect()
}

/// A batch driver's input: one JSON line per project, its folder and arguments.
fn batch_input(cases: &[(PathBuf, Vec<String>)]) -> String {
    let mut input = String::new();
    for (dir, args) in cases {
        input.push_str(&serde_json::json!({ "cwd": dir, "args": args }).to_string());
        input.push('\n');
    }
    input
}

/// Compose with an empty environment (only `PATH` and a scratch `HOME`).
fn bare(program: &OsStr, home: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home);
    cmd
}

/// Runs the installed `docker-compose`'s own `main` once per project inside one
/// interpreter: the same code, arguments, working folder and environment as the command
/// line, without starting Python and importing Compose 142 times (most of the test's time).
/// Prints one JSON line per project: its exit code and what it printed.
const BATCH_DRIVER: &str = r#"
import contextlib, io, json, os, sys
from compose.cli.main import main
for line in sys.stdin:
    case = json.loads(line)
    os.chdir(case["cwd"])
    sys.argv = ["docker-compose", *case["args"]]
    out, code = io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(out):
            main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    sys.__stdout__.write(json.dumps({"code": code, "out": out.getvalue()}) + "\n")
    sys.__stdout__.flush()
"#;

/// The Python interpreter of the `program` on `PATH` (`docker-compose` or
/// `podman-compose`) when it is the Python program (Debian's), from its `#!` line; `None`
/// for any other build.
fn python_of(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let script = std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())?;
    let head = fs_err::read(&script).ok()?;
    let first = head.split(|b| *b == b'\n').next()?;
    let interpreter = std::str::from_utf8(first.strip_prefix(b"#!")?).ok()?.trim();
    (interpreter.contains("python") && !interpreter.contains(' '))
        .then(|| PathBuf::from(interpreter))
}

/// `docker-compose config` over the files Compose would get, for every project; `None`
/// where Compose refuses the project (then nothing runs).
fn real_configs(
    projects: &[(PathBuf, BTreeMap<String, String>)],
    home: &Path,
) -> Vec<Option<Yaml>> {
    let cases: Vec<(PathBuf, Vec<String>)> = projects
        .iter()
        .map(|(root, files)| config_args(root, files))
        .collect();
    // docker-compose must be installed (scripts/setup-test-deps.sh): without it this fails.
    let Some(python) = python_of("docker-compose") else {
        // Another Compose build: one command per project.
        return one_by_one("docker-compose", home, &cases, || {})
            .into_iter()
            .map(|out| {
                out.status
                    .success()
                    .then(|| serde_norway::from_slice(&out.stdout).unwrap())
            })
            .collect();
    };
    let input = batch_input(&cases);
    let out = drive(
        bare(python.as_os_str(), home).args(["-c", BATCH_DRIVER]),
        input,
    );
    let results: Vec<Option<Yaml>> = out
        .lines()
        .map(|line| {
            let result: serde_json::Value = serde_json::from_str(line).unwrap();
            (result["code"] == 0)
                .then(|| serde_norway::from_str(result["out"].as_str().unwrap()).unwrap())
        })
        .collect();
    assert_eq!(results.len(), cases.len(), "one answer per project");
    results
}

/// Runs a batch driver with `input` on its standard input; returns what it printed.
fn drive(cmd: &mut Command, input: String) -> String {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written from a thread: the driver answers while it reads, and both pipes are bounded.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "the batch driver failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// [`BATCH_DRIVER`] for podman-compose (1.0.x): its own `run` once per project, with the
/// arguments, folder and environment of the command line. Its `--dry-run up` still
/// creates the project's networks and named volumes through `podman` (as it prints them);
/// after each project the driver removes what that project created, except the default
/// network `argv[1]` that every project makes alike (removed once, at the end): about six
/// `podman` and one Python start-up fewer per project (55 s of the test's 60 before).
const PODMAN_COMPOSE_DRIVER: &str = r#"
import ast, contextlib, io, json, os, subprocess, sys
from podman_compose import podman_compose
keep = sys.argv[1]
for line in sys.stdin:
    case = json.loads(line)
    os.chdir(case["cwd"])
    sys.argv = ["podman-compose", *case["args"]]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            podman_compose.run()
    except (SystemExit, Exception):
        pass
    made = {"network": [], "volume": []}
    for printed in out.getvalue().splitlines():
        if printed.startswith(("['podman', 'network', 'create'", "['podman', 'volume', 'create'")):
            words = ast.literal_eval(printed)
            if words[-1] != keep:
                made[words[1]].append(words[-1])
    for kind, names in made.items():
        if names:
            subprocess.run(["podman", kind, "rm", "-f", *names], capture_output=True)
    sys.__stdout__.write(json.dumps({"out": out.getvalue()}) + "\n")
    sys.__stdout__.flush()
"#;

/// Where the kernel takes a path Compose resolved: its symbolic links followed (a dangling
/// link counts as its target). Compose prints paths as written; the engine mounts targets.
fn real(path: &str) -> String {
    let p = Path::new(path);
    if let Ok(c) = fs_err::canonicalize(p) {
        return c.display().to_string();
    }
    match std::fs::read_link(p) {
        Ok(target) => p
            .parent()
            .map_or(target.clone(), |dir| dir.join(&target))
            .display()
            .to_string(),
        Err(_) => path.to_owned(),
    }
}

/// Is a host path that Compose resolved (absolute) dangerous to hand to the container,
/// as written or where its links lead?
fn dangerous_path(path: &str, project: &Path, home: &Path) -> bool {
    written_dangerous(path, project, home) || written_dangerous(&real(path), project, home)
}

fn is_sock(path: &str) -> bool {
    [path.to_owned(), real(path)].iter().any(|p| {
        Path::new(p)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("sock"))
    })
}

fn written_dangerous(path: &str, project: &Path, home: &Path) -> bool {
    let path = Path::new(path);
    if !path.is_absolute() {
        return false;
    }
    if path.starts_with(project) {
        return false;
    }
    // Anything outside the project counts as long as it is a system or home location.
    let system = [
        "/", "/etc", "/usr", "/bin", "/sbin", "/lib", "/var", "/run", "/proc", "/sys", "/dev",
        "/root", "/home", "/boot", "/tmp",
    ];
    path.starts_with(home)
        || system.iter().any(|s| path == Path::new(s))
        || system[1..].iter().any(|s| path.starts_with(s))
        // Other folders above the project (its parents, siblings of the corpus).
        || project.ancestors().any(|a| path == a)
        || path.starts_with(project.parent().unwrap())
}

fn strings(v: Option<&Yaml>) -> Vec<String> {
    match v {
        Some(Yaml::Sequence(items)) => items
            .iter()
            .filter_map(|i| match i {
                Yaml::String(s) => Some(s.clone()),
                Yaml::Mapping(_) => i
                    .get("source")
                    .or_else(|| i.get("path"))
                    .and_then(Yaml::as_str)
                    .map(str::to_owned),
                _ => None,
            })
            .collect(),
        Some(Yaml::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// Capabilities, security options, devices, device rules, kernel parameters and a root
/// user of one resolved service.
fn kernel_dangers(name: &str, svc: &Yaml) -> Vec<String> {
    let mut out = Vec::new();
    for cap in strings(svc.get("cap_add")) {
        let cap = cap.to_ascii_uppercase();
        if [
            "SYS_ADMIN",
            "ALL",
            "SYS_MODULE",
            "SYS_PTRACE",
            "NET_ADMIN",
            "NET_RAW",
        ]
        .iter()
        .any(|c| cap.ends_with(c))
        {
            out.push(format!("{name}: cap_add {cap}"));
        }
    }
    for opt in strings(svc.get("security_opt")) {
        if opt.contains("unconfined")
            || opt.contains("disable")
            || opt.contains("spc_t")
            || opt.contains("seccomp")
        {
            out.push(format!("{name}: security_opt {opt}"));
        }
    }
    for key in ["devices", "device_cgroup_rules", "sysctls"] {
        if svc.get(key).is_some_and(|v| {
            v.as_sequence().is_some_and(|s| !s.is_empty())
                || v.as_mapping().is_some_and(|m| !m.is_empty())
        }) {
            out.push(format!("{name}: {key}"));
        }
    }
    if let Some(user) = svc.get("user") {
        let user = match user {
            Yaml::Number(n) => n.to_string(),
            other => other.as_str().unwrap_or("").to_owned(),
        };
        let name_part = user.split(':').next().unwrap_or("");
        if name_part == "root" || name_part == "0" {
            out.push(format!("{name}: user {user}"));
        }
    }
    out
}

/// What in a resolved configuration is dangerous (empty when nothing is).
fn dangers(config: &Yaml, project: &Path, home: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let empty = serde_norway::Mapping::new();
    let services = config
        .get("services")
        .and_then(Yaml::as_mapping)
        .unwrap_or(&empty);
    for (name, svc) in services {
        let name = name.as_str().unwrap_or("?");
        if svc.get("privileged").and_then(Yaml::as_bool) == Some(true) {
            out.push(format!("{name}: privileged"));
        }
        for key in ["network_mode", "pid", "ipc", "uts", "userns_mode"] {
            if let Some(v) = svc.get(key).and_then(Yaml::as_str)
                && (v == "host" || v.starts_with("container:"))
            {
                out.push(format!("{name}: {key} {v}"));
            }
        }
        out.extend(kernel_dangers(name, svc));
        for vol in strings(svc.get("volumes")) {
            let source = vol.split(':').next().unwrap_or("");
            // Read-only files of the home (a `.gitconfig`) are warned by policy, not refused.
            let read_only_home = vol.ends_with(":ro") && Path::new(source).starts_with(home);
            if is_sock(source) || (dangerous_path(source, project, home) && !read_only_home) {
                out.push(format!("{name}: volume {vol}"));
            }
        }
        for file in strings(svc.get("env_file")) {
            if dangerous_path(&file, project, home) {
                out.push(format!("{name}: env_file {file}"));
            }
        }
        let build = svc.get("build");
        let context = build
            .and_then(|b| b.get("context").or(Some(b)))
            .and_then(Yaml::as_str);
        if let Some(context) = context
            && dangerous_path(context, project, home)
        {
            out.push(format!("{name}: build context {context}"));
        }
        if let Some(extra) = build
            .and_then(|b| b.get("additional_contexts"))
            .and_then(Yaml::as_mapping)
        {
            for path in extra.values().filter_map(Yaml::as_str) {
                if dangerous_path(path, project, home) {
                    out.push(format!("{name}: additional context {path}"));
                }
            }
        }
    }
    for key in ["volumes", "configs", "secrets"] {
        if let Some(defs) = config.get(key).and_then(Yaml::as_mapping) {
            for (name, def) in defs {
                let device = def
                    .get("driver_opts")
                    .and_then(|o| o.get("device"))
                    .or_else(|| def.get("file"))
                    .and_then(Yaml::as_str);
                if let Some(device) = device {
                    let device = if device.starts_with('/') {
                        device.to_owned()
                    } else {
                        project
                            .join(".devcontainer")
                            .join(device)
                            .display()
                            .to_string()
                    };
                    if dangerous_path(&device, project, home) {
                        out.push(format!("{key} {}: {device}", name.as_str().unwrap_or("?")));
                    }
                }
            }
        }
    }
    out
}

/// Runs the gate and a real Compose tool over the whole corpus. `resolve` gives what the
/// tool makes of each project, in order: `None` when it refuses it, else the dangers it
/// would run. Fails on a benign project the tool or the gate refuses and on any project the
/// gate accepts that the tool resolves to something dangerous; returns how many bypass
/// attempts there are and how many of them the tool resolves to something dangerous.
fn cross_check(
    tool: &str,
    resolve: impl FnOnce(&[(PathBuf, BTreeMap<String, String>)]) -> Vec<Option<Vec<String>>>,
) -> (usize, usize) {
    let mut cases = Vec::new();
    for kind in ["compose-bypass", "compose-benign"] {
        for case in fixtures(kind) {
            cases.push((kind, case));
        }
    }
    let projects: Vec<(PathBuf, BTreeMap<String, String>)> = cases
        .iter()
        .map(|(_, case)| {
            let project = fs_err::canonicalize(case).unwrap();
            let files = project_files(&project).files;
            (project, files)
        })
        .collect();
    let resolved = resolve(&projects);
    assert_eq!(
        resolved.len(),
        projects.len(),
        "{tool}: one answer per project"
    );
    let mut bypass_total = 0;
    let mut bypass_real_danger = 0;
    let mut violations = Vec::new();
    for (((kind, case), (project, _)), real) in cases.iter().zip(&projects).zip(resolved) {
        let files = project_files(project);
        let accepted = !has_errors(&check_compose_setup(&files, &Consent::default()));
        let danger = real.clone().unwrap_or_default();
        if *kind == "compose-bypass" {
            bypass_total += 1;
            bypass_real_danger += usize::from(!danger.is_empty());
        } else {
            assert!(
                real.is_some(),
                "{}: {tool} refused a benign project",
                case.display()
            );
            assert!(
                accepted,
                "{}: the gate refused a benign project",
                case.display()
            );
        }
        if accepted && !danger.is_empty() {
            violations.push(format!("{}: {danger:?}", case.display()));
        }
    }
    assert!(
        violations.is_empty(),
        "accepted yet dangerous: {violations:#?}"
    );
    (bypass_total, bypass_real_danger)
}

#[test]
fn whenever_the_gate_accepts_the_real_compose_config_is_harmless() {
    let home = tempfile::tempdir().unwrap();
    let (bypass_total, bypass_real_danger) = cross_check("Compose", |projects| {
        real_configs(projects, home.path())
            .into_iter()
            .zip(projects)
            .map(|(config, (project, _))| config.map(|c| dangers(&c, project, home.path())))
            .collect()
    });
    // The corpus exercises the real thing: most attempts do resolve to something dangerous
    // in Compose's own view (the rest are refused by Compose 1.29 itself or carry
    // devcontainer-only settings).
    eprintln!(
        "{bypass_real_danger} of {bypass_total} bypass attempts are dangerous in docker-compose's resolution"
    );
    assert!(
        bypass_real_danger * 2 > bypass_total,
        "{bypass_real_danger} of {bypass_total}"
    );
}

/// The `podman run` arguments podman-compose would use for each fixture, and the merged
/// configuration it printed; `None` when podman-compose refuses the project.
fn podman_compose_runs(
    projects: &[(PathBuf, BTreeMap<String, String>)],
    home: &Path,
    project: &str,
) -> Vec<Option<(Vec<String>, Yaml)>> {
    let cases: Vec<(PathBuf, Vec<String>)> = projects
        .iter()
        .map(|(root, files)| {
            compose_command(root, files, &["--dry-run", "-p", project], &["up", "-d"])
        })
        .collect();
    // podman-compose must be installed (scripts/setup-test-deps.sh): without it this fails.
    let Some(python) = python_of("podman-compose") else {
        // Another build: one command per project, and what it made removed after each.
        return one_by_one("podman-compose", home, &cases, || podman_cleanup(project))
            .iter()
            .map(|out| dry_run_result(&String::from_utf8_lossy(&out.stdout)))
            .collect();
    };
    let input = batch_input(&cases);
    let default_net = format!("{project}_default");
    let mut driver = bare(python.as_os_str(), home);
    driver
        .args(["-c", PODMAN_COMPOSE_DRIVER, &default_net])
        .stderr(Stdio::null());
    let results: Vec<Option<(Vec<String>, Yaml)>> = drive(&mut driver, input)
        .lines()
        .map(|line| {
            let result: serde_json::Value = serde_json::from_str(line).unwrap();
            dry_run_result(result["out"].as_str().unwrap())
        })
        .collect();
    assert_eq!(results.len(), cases.len(), "one answer per project");
    results
}

/// The `podman run` arguments and the merged configuration of what a podman-compose
/// `--dry-run up` printed; `None` when it printed no merged configuration (it refused).
fn dry_run_result(stdout: &str) -> Option<(Vec<String>, Yaml)> {
    let merged_start = stdout.find("** merged:")? + "** merged:".len();
    let merged_end = stdout[merged_start..]
        .find("\n}\n")
        .map(|e| merged_start + e + 2)?;
    let merged: Yaml = serde_norway::from_str(&stdout[merged_start..merged_end]).ok()?;
    let run: Vec<String> = stdout
        .lines()
        .filter(|l| l.starts_with("podman run "))
        .flat_map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    Some((run, merged))
}

fn compose_files(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut names = vec![
        ".devcontainer/docker-compose.yml".to_owned(),
        ".devcontainer/docker-compose.override.yml".to_owned(),
    ];
    if let Some(listed) = files
        .get(".devcontainer/devcontainer.json")
        .and_then(|t| devcontainer_compose_files(t))
    {
        for name in listed {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// What is dangerous in a `podman run` command line and the merged configuration.
fn run_dangers(args: &[String], merged: &Yaml, project: &Path, home: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let (flag, inline) = match args[i].split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (args[i].as_str(), None),
        };
        let takes = matches!(
            flag,
            "--cap-add"
                | "--security-opt"
                | "--net"
                | "--network"
                | "--pid"
                | "--ipc"
                | "-v"
                | "--volume"
                | "--env-file"
                | "--uts"
                | "--device"
                | "--device-cgroup-rule"
                | "--sysctl"
                | "-u"
                | "--user"
        );
        let value = if takes && inline.is_none() {
            i += 1;
            args.get(i).cloned().unwrap_or_default()
        } else {
            inline.unwrap_or_default()
        };
        i += 1;
        match flag {
            "--privileged" => out.push("privileged".to_owned()),
            "--cap-add"
                if ["SYS_ADMIN", "ALL", "SYS_PTRACE", "NET_ADMIN", "NET_RAW"]
                    .iter()
                    .any(|c| value.to_ascii_uppercase().ends_with(c)) =>
            {
                out.push(format!("cap_add {value}"));
            }
            "--device" | "--device-cgroup-rule" | "--sysctl" => out.push(format!("{flag} {value}")),
            "-u" | "--user" if matches!(value.split(':').next(), Some("root" | "0")) => {
                out.push(format!("{flag} {value}"));
            }
            "--security-opt"
                if value.contains("unconfined")
                    || value.contains("disable")
                    || value.contains("spc_t")
                    || value.contains("seccomp") =>
            {
                out.push(format!("security_opt {value}"));
            }
            "--net" | "--network" | "--pid" | "--ipc" | "--uts"
                if value == "host" || value.starts_with("container:") =>
            {
                out.push(format!("{flag} {value}"));
            }
            "-v" | "--volume" | "--env-file" => {
                let source = value.split(':').next().unwrap_or("");
                let read_only_home = value.ends_with(":ro") && Path::new(source).starts_with(home);
                if is_sock(source) || (dangerous_path(source, project, home) && !read_only_home) {
                    out.push(format!("{flag} {value}"));
                }
            }
            _ => {}
        }
    }
    // Named volumes and build contexts are in the merged configuration.
    out.extend(
        dangers(merged, project, home).into_iter().filter(|d| {
            d.starts_with("volumes ") || d.contains("build") || d.contains("additional")
        }),
    );
    out
}

/// Removes what `podman-compose --dry-run up` created for `project`: its named volumes and
/// every network (`<project>_default` and the fixtures' own), found by its label.
fn podman_cleanup(project: &str) {
    let label = format!("label=io.podman.compose.project={project}");
    for kind in ["volume", "network"] {
        if let Ok(out) = Command::new("podman")
            .args([kind, "ls", "-q", "--filter", &label])
            .output()
        {
            for name in String::from_utf8_lossy(&out.stdout).lines() {
                let _ = Command::new("podman")
                    .args([kind, "rm", "-f", name])
                    .output();
            }
        }
    }
}

#[test]
fn whenever_the_gate_accepts_podman_compose_runs_nothing_dangerous() {
    let home = tempfile::tempdir().unwrap();
    let project_name = format!("aibox-xcheck-{}", std::process::id());
    let (bypass_total, bypass_real_danger) = cross_check("podman-compose", |projects| {
        let runs = podman_compose_runs(projects, home.path(), &project_name);
        podman_cleanup(&project_name);
        runs.into_iter()
            .zip(projects)
            .map(|(real, (project, _))| {
                real.map(|(run, merged)| run_dangers(&run, &merged, project, home.path()))
            })
            .collect()
    });
    eprintln!(
        "{bypass_real_danger} of {bypass_total} bypass attempts are dangerous in podman-compose's run"
    );
    assert!(
        bypass_real_danger * 2 > bypass_total,
        "{bypass_real_danger} of {bypass_total}"
    );
}
