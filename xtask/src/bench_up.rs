//! `cargo xtask bench up`: how long a developer waits for the dev container, on Podman
//! and Docker, with the release-built `aibox` beside the reference Dev Containers CLI.
//!
//! The project is the one `aibox init NAME --harness claude --harness codex --yes`
//! makes, with two changes the machine forces: the tests' local base image
//! ([`BASE_IMAGE`]; no registry is reachable) and the host's CA through
//! `.aibox-local.toml` (downloads pass a TLS-inspecting proxy). On Docker the owner also
//! consents to the generated seccomp profile Codex's sandbox needs, as the e2e Docker
//! journey does. Measured per engine:
//! - `up` cold (no image, nothing cached), `up` of a running container, `down`, `up`
//!   after `down` (warm: the image exists); for each `up` the time to the container
//!   running (aibox's own progress line, timestamped as it arrives), the build's share,
//!   and how many build steps came from the layer cache (`-v` shows the engine's lines);
//! - the image's size (`image inspect`);
//! - `devcontainer up` of the same project's committed files (`devcontainer.json` and the
//!   Compose file it names) with the pinned CLI from `test-tools/`, cold, running and
//!   warm (container removed, image kept), on both engines.
//!
//! Cold means nothing to reuse: every engine runs on storage of its own under
//! `target/bench-up/` that holds only the base image. Podman gets a private graph root
//! and run root (`CONTAINERS_STORAGE_CONF`; the harness's `containers.conf` otherwise),
//! and its Docker-compatible API for the Dev Containers CLI runs on that storage; Docker
//! is a `dockerd` started here with a fresh `--data-root` (as `aibox-test-support`'s
//! daemon, but never one with a cache). Before the CLI's cold run every image but the
//! base is removed from that private storage, after checking it is the private one: no
//! other engineer's images or cache are touched. The counted cache hits show it.
//!
//! A measurement, not a gate: the numbers are printed (and written as JSON with
//! `--json`); the run fails only when a step fails to run.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aibox_test_support::podman::{BASE_IMAGE, Podman, aibox_command, local_toml_with_host_ca};
use camino::{Utf8Path, Utf8PathBuf};

use crate::say;

/// The engines measured, in this order, unless `--engines` says otherwise.
const ENGINES: [Kind; 2] = [Kind::Podman, Kind::Docker];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Podman,
    Docker,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Podman => "podman",
            Self::Docker => "docker",
        }
    }

    /// How "cold" is made on this engine, for the report.
    fn cold_method(self) -> &'static str {
        match self {
            Self::Podman => {
                "private Podman storage (own graph root and run root through \
                 CONTAINERS_STORAGE_CONF) holding only the base image; before the \
                 Dev Containers CLI's cold run every other image is removed from it"
            }
            Self::Docker => "own dockerd with a fresh --data-root holding only the base image",
        }
    }
}

/// `cargo xtask bench up [--engines podman,docker] [--bin PATH] [--keep] [--json FILE]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut engines = ENGINES.to_vec();
    let mut common = crate::bench::Common::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if common.take(a, &mut it)? {
            continue;
        }
        match a.as_str() {
            "--engines" => {
                engines = it
                    .next()
                    .ok_or("--engines needs a list")?
                    .split(',')
                    .map(|e| match e {
                        "podman" => Ok(Kind::Podman),
                        "docker" => Ok(Kind::Docker),
                        other => Err(format!("unknown engine `{other}` (podman, docker)")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let crate::bench::Common {
        bin: given_bin,
        keep,
        json: json_out,
    } = common;
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let cwd = Utf8PathBuf::from_path_buf(cwd).map_err(|p| format!("non-UTF-8 {}", p.display()))?;
    let cli = cwd.join("test-tools/devcontainers/node_modules/.bin/devcontainer");
    if !cli.is_file() {
        return Err(format!(
            "{cli} is missing: install the pinned Dev Containers CLI with \
             `npm ci --prefix test-tools/devcontainers`"
        ));
    }
    let bin = crate::bench::release_aibox(given_bin)?;
    let bin = bin.to_string_lossy().into_owned();
    say("==> bench up: Podman and the local base image");
    let podman = Podman::ready();
    // Short: dockerd's sockets live below it (Unix socket paths have a length limit).
    let scratch = cwd
        .join("target/bench-up")
        .join(std::process::id().to_string());
    fs_err::create_dir_all(&scratch).map_err(|e| e.to_string())?;

    let mut reports = Vec::new();
    let mut failures = Vec::new();
    for kind in engines {
        say(&format!("==> bench up: {}", kind.name()));
        let bench = Bench {
            kind,
            bin: &bin,
            cli: &cli,
            podman: &podman,
        };
        let mut rows = Vec::new();
        let result = bench.engine(&scratch.join(kind.name()), keep, &mut rows);
        if let Err(e) = &result {
            say(&format!("bench up: {} FAILED: {e}", kind.name()));
            failures.push(format!("{}: {e}", kind.name()));
        }
        // The steps measured before a failure are reported too.
        reports.push(serde_json::json!({
            "engine": kind.name(),
            "cold": kind.cold_method(),
            "steps": rows,
            "error": result.err(),
        }));
    }
    if keep {
        say(&format!("bench up: kept {scratch}"));
    } else {
        let _ = fs_err::remove_dir_all(&scratch);
        // The parent too, when no other run's folder is in it.
        let _ = fs_err::remove_dir(scratch.parent().unwrap_or(&scratch));
    }
    let report = serde_json::json!({ "engines": reports });
    say(&render(&report));
    if let Some(path) = json_out {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        fs_err::write(&path, text + "\n").map_err(|e| e.to_string())?;
        say(&format!("bench up: wrote {}", path.display()));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// What every engine's run shares.
struct Bench<'a> {
    kind: Kind,
    bin: &'a str,
    cli: &'a Utf8Path,
    podman: &'a Podman,
}

impl Bench<'_> {
    /// Every step on one engine, in private storage under `dir`; each measured step is
    /// added to `rows` when it ends.
    fn engine(
        &self,
        dir: &Utf8Path,
        keep: bool,
        rows: &mut Vec<serde_json::Value>,
    ) -> Result<(), String> {
        if dir.exists() {
            return Err(format!("{dir} exists already"));
        }
        let name = format!("aibox-bench-up-{}-{}", self.kind.name(), std::process::id());
        let mut engine = Engine::start(self.kind, self.podman, dir, keep)?;
        // Removed even when a step fails: the containers and networks of both tools (the
        // CLI's container has Compose's own name, as the committed files name none).
        engine
            .containers
            .push(format!("{name}_devcontainer_{name}_1"));
        engine.networks.push(format!("{name}_devcontainer_default"));
        let root = dir.join(&name);
        fs_err::create_dir_all(&root).map_err(|e| e.to_string())?;
        self.project(&engine, &root, &name)?;
        let status: serde_json::Value = serde_json::from_str(&output(
            &mut self.aibox(&engine, &root, &["status", "--output", "json"]),
            "aibox status",
        )?)
        .map_err(|e| e.to_string())?;
        let image = status["image"].as_str().unwrap_or_default().to_owned();
        if let Some(project) = status["project"].as_str() {
            engine.networks.push(format!("{project}_default"));
        }
        if let Some(container) = status["container"].as_str() {
            engine.containers.push(container.to_owned());
        }
        self.aibox_steps(&engine, &root, &image, rows)?;
        // Leave nothing the CLI could reuse but the base image.
        engine.only_base_image(self.podman)?;
        self.devcontainer_steps(&engine, &root, rows)
    }

    fn aibox(&self, engine: &Engine, root: &Utf8Path, args: &[&str]) -> Command {
        let mut cmd = aibox_command(self.bin, self.podman.containers_conf(), root);
        cmd.envs(engine.env.iter().map(|(k, v)| (k, v)));
        if self.kind == Kind::Docker {
            cmd.env_remove("CONTAINERS_CONF")
                .env("AIBOX_ENGINE", "docker")
                .env("AIBOX_COMPOSE", "docker-compose");
        }
        cmd.args(args);
        cmd
    }

    /// The project as a user makes it (see the module docs for the three changes).
    fn project(&self, engine: &Engine, root: &Utf8Path, name: &str) -> Result<(), String> {
        let init = [
            "init",
            name,
            "--harness",
            "claude",
            "--harness",
            "codex",
            "--base-image",
            BASE_IMAGE,
            "--yes",
        ];
        output(&mut self.aibox(engine, root, &init), "aibox init")?;
        fs_err::write(root.join(".aibox-local.toml"), local_toml_with_host_ca())
            .map_err(|e| e.to_string())?;
        if self.kind == Kind::Docker {
            // Docker's default seccomp profile blocks Codex's sandbox: the owner's
            // consent to the generated profile, as the e2e Docker journey records it.
            for (key, value) in [
                ("container.engine", "docker"),
                ("security.codex_sandbox", "seccomp-profile"),
                ("security.acknowledge_seccomp_profile", "true"),
            ] {
                output(
                    &mut self.aibox(engine, root, &["config", "set", key, value]),
                    "aibox config set",
                )?;
            }
        }
        output(&mut self.aibox(engine, root, &["apply"]), "aibox apply")?;
        if self.kind == Kind::Docker {
            // Docker maps no user namespace: the checkout belongs to the developer the
            // container user stands for, as on a developer's machine.
            let get = |key: &str| {
                output(&mut self.aibox(engine, root, &["config", "get", key]), key)
                    .map(|s| s.trim().to_owned())
            };
            let uid = get("container.uid")?;
            let gid = get("container.gid").unwrap_or_else(|_| uid.clone());
            output(
                Command::new("chown").args(["-R", &format!("{uid}:{gid}"), root.as_str()]),
                "chown",
            )?;
        }
        Ok(())
    }

    fn aibox_steps(
        &self,
        engine: &Engine,
        root: &Utf8Path,
        image: &str,
        rows: &mut Vec<serde_json::Value>,
    ) -> Result<(), String> {
        let up = |label| timed_up(&mut self.aibox(engine, root, &["-v", "up"]), label);
        say("  aibox up (cold)");
        let cold = up("aibox up (cold)")?;
        rows.push(cold.row("aibox up, cold", Some(engine.image_size(image)?)));
        say("  aibox up (running)");
        rows.push(up("aibox up (running)")?.row("aibox up, running", None));
        say("  aibox down");
        let (_, down) = timed(&mut self.aibox(engine, root, &["down"]), "aibox down")?;
        rows.push(serde_json::json!({ "step": "aibox down", "secs": down }));
        say("  aibox up (warm)");
        rows.push(up("aibox up (warm)")?.row("aibox up, warm (after down)", None));
        output(&mut self.aibox(engine, root, &["down"]), "aibox down")?;
        Ok(())
    }

    fn devcontainer_steps(
        &self,
        engine: &Engine,
        root: &Utf8Path,
        rows: &mut Vec<serde_json::Value>,
    ) -> Result<(), String> {
        let up = |label| -> Result<(Up, String), String> {
            let mut cmd = Command::new(self.cli.as_str());
            // In the project folder, as a developer runs it.
            cmd.current_dir(root)
                .envs(engine.env.iter().map(|(k, v)| (k, v)))
                .env("DOCKER_HOST", &engine.docker_host)
                .env("NO_COLOR", "1")
                .args(["up", "--workspace-folder", root.as_str()])
                .args(["--docker-path", "docker"])
                .args(["--docker-compose-path", "docker-compose"]);
            let run = timed_up(&mut cmd, label)?;
            let outcome = run
                .stdout
                .lines()
                .rev()
                .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .map(|v| v["outcome"].clone());
            let result = run
                .stdout
                .lines()
                .rev()
                .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .unwrap_or_default();
            if outcome != Some(serde_json::json!("success")) {
                return Err(format!("{label}: no success result:\n{}", run.stdout));
            }
            let id = result["containerId"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            Ok((run, id))
        };
        say("  devcontainer up (cold)");
        let (cold, id) = up("devcontainer up (cold)")?;
        let image = engine.text(&["container", "inspect", "--format", "{{.Image}}", &id])?;
        rows.push(cold.row("devcontainer up, cold", Some(engine.image_size(&image)?)));
        say("  devcontainer up (running)");
        rows.push(
            up("devcontainer up (running)")?
                .0
                .row("devcontainer up, running", None),
        );
        // The CLI has no `down`: remove the container, keep the image.
        engine.text(&["rm", "-f", &id])?;
        say("  devcontainer up (warm)");
        rows.push(
            up("devcontainer up (warm)")?
                .0
                .row("devcontainer up, warm (no container)", None),
        );
        Ok(())
    }
}

/// An engine on storage of its own: a private Podman store with its API service, or a
/// `dockerd` with a fresh data root. Dropping it removes what the bench made.
struct Engine {
    kind: Kind,
    dir: Utf8PathBuf,
    /// What every engine, aibox and CLI process gets to use this storage.
    env: Vec<(String, String)>,
    /// The Docker API for the Dev Containers CLI.
    docker_host: String,
    /// Where this engine keeps images: checked before removing any.
    store: String,
    service: Option<Child>,
    containers: Vec<String>,
    networks: Vec<String>,
    keep: bool,
}

impl Engine {
    fn start(kind: Kind, podman: &Podman, dir: &Utf8Path, keep: bool) -> Result<Self, String> {
        fs_err::create_dir_all(dir).map_err(|e| e.to_string())?;
        let socket = dir.join("api.sock");
        let docker_host = format!("unix://{socket}");
        let (env, store) = match kind {
            Kind::Podman => {
                let conf = dir.join("storage.conf");
                let store = dir.join("graph");
                fs_err::write(
                    &conf,
                    format!(
                        "[storage]\ndriver = \"overlay\"\ngraphroot = \"{store}\"\n\
                         runroot = \"{}\"\n",
                        dir.join("run")
                    ),
                )
                .map_err(|e| e.to_string())?;
                let mut env = podman.env();
                env.push(("CONTAINERS_STORAGE_CONF".to_owned(), conf.to_string()));
                (env, store.to_string())
            }
            Kind::Docker => (
                vec![("DOCKER_HOST".to_owned(), docker_host.clone())],
                dir.join("data").to_string(),
            ),
        };
        let mut engine = Self {
            kind,
            dir: dir.to_owned(),
            env,
            docker_host,
            store,
            service: None,
            containers: Vec::new(),
            networks: Vec::new(),
            keep,
        };
        let log = fs_err::File::create(dir.join("service.log")).map_err(|e| e.to_string())?;
        let err = log.file().try_clone().map_err(|e| e.to_string())?;
        let mut service = match kind {
            Kind::Podman => {
                let mut cmd = Command::new("podman");
                cmd.args(["system", "service", "--time=0", &engine.docker_host]);
                cmd
            }
            Kind::Docker => {
                let mut cmd = Command::new("dockerd");
                cmd.args(["--data-root", &engine.store])
                    .args(["--exec-root", dir.join("exec").as_str()])
                    .args(["--pidfile", dir.join("docker.pid").as_str()])
                    .args(["-H", &engine.docker_host]);
                cmd
            }
        };
        let child = service
            .envs(engine.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.into_parts().0)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start the {} service: {e}", kind.name()))?;
        engine.service = Some(child);
        engine.wait_for_api()?;
        engine.check_private()?;
        // The base image from the shared Podman store (read only), not timed.
        let mut save = podman.command();
        save.args(["image", "save", BASE_IMAGE]);
        engine.load(save)?;
        Ok(engine)
    }

    /// `podman`/`docker` on this storage.
    fn command(&self) -> Command {
        let mut cmd = Command::new(self.kind.name());
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        cmd
    }

    /// Runs the engine's CLI with `args`; its trimmed standard output.
    fn text(&self, args: &[&str]) -> Result<String, String> {
        output(
            self.command().args(args),
            &format!("{} {args:?}", self.kind.name()),
        )
        .map(|s| s.trim().to_owned())
    }

    fn wait_for_api(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_mins(1);
        loop {
            let mut ping = Command::new("docker");
            ping.args(["--host", &self.docker_host, "version"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if ping.status().is_ok_and(|s| s.success()) {
                return Ok(());
            }
            let exited = self
                .service
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                return Err(format!(
                    "the {} service did not answer on {}: {}",
                    self.kind.name(),
                    self.docker_host,
                    fs_err::read_to_string(self.dir.join("service.log")).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Refuses to go on unless the engine really stores images in this run's folder, so
    /// the removals below can never reach a shared store.
    fn check_private(&self) -> Result<(), String> {
        let format = match self.kind {
            Kind::Podman => "{{.Store.GraphRoot}}",
            Kind::Docker => "{{.DockerRootDir}}",
        };
        let store = self.text(&["info", "--format", format])?;
        if store == self.store {
            Ok(())
        } else {
            Err(format!(
                "{} stores images in {store}, not in {}: refusing to go on",
                self.kind.name(),
                self.store
            ))
        }
    }

    /// Loads the image archive `save` prints into this storage.
    fn load(&self, mut save: Command) -> Result<(), String> {
        let mut source = save
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run podman image save: {e}"))?;
        let data = source.stdout.take().ok_or("podman image save: no stdout")?;
        let loaded = self.command().arg("load").stdin(data).output();
        let saved = source.wait().map_err(|e| e.to_string())?;
        let loaded = loaded.map_err(|e| format!("cannot run {} load: {e}", self.kind.name()))?;
        if saved.success() && loaded.status.success() {
            Ok(())
        } else {
            Err(format!(
                "loading {BASE_IMAGE}: {}",
                String::from_utf8_lossy(&loaded.stderr)
            ))
        }
    }

    /// Removes every image and cached layer of this private storage, then loads the base
    /// image again.
    fn only_base_image(&self, podman: &Podman) -> Result<(), String> {
        self.check_private()?;
        self.text(&["image", "prune", "--all", "--force"])?;
        if self.kind == Kind::Docker {
            self.text(&["builder", "prune", "--all", "--force"])?;
        }
        let mut save = podman.command();
        save.args(["image", "save", BASE_IMAGE]);
        self.load(save)
    }

    fn image_size(&self, image: &str) -> Result<u64, String> {
        self.text(&["image", "inspect", "--format", "{{.Size}}", image])?
            .parse()
            .map_err(|e| format!("size of {image}: {e}"))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        for name in &self.containers {
            let _ = self.command().args(["rm", "-f", name]).output();
        }
        // Podman keeps networks in the machine's shared configuration, not the store.
        for network in &self.networks {
            let _ = self.command().args(["network", "rm", network]).output();
        }
        // Podman's store is removed through Podman (Docker's goes with its daemon).
        if !self.keep && self.kind == Kind::Podman && self.check_private().is_ok() {
            let _ = self.command().args(["rmi", "--all", "--force"]).output();
        }
        if let Some(mut child) = self.service.take() {
            aibox_test_support::docker::stop_service(&mut child);
        }
        // Podman keeps an exec session's `conmon` for minutes after the session ends,
        // and its exit command would create the store again: end those of this storage
        // (their command line names this run's folder).
        stop_processes_naming(&self.dir);
        if !self.keep {
            unmount_below(&self.dir);
            let _ = fs_err::remove_dir_all(&self.dir);
        }
    }
}

/// Ends (by pid) the processes whose command line names `dir`, a folder of this run,
/// and those they start meanwhile (a `conmon` runs its exit command when ended).
fn stop_processes_naming(dir: &Utf8Path) {
    let me = std::process::id().to_string();
    for pass in 0..20 {
        let Ok(entries) = fs_err::read_dir("/proc") else {
            return;
        };
        let pids: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|pid| *pid != me && pid.bytes().all(|b| b.is_ascii_digit()))
            .filter(|pid| {
                fs_err::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(dir.as_str()))
            })
            .collect();
        if pids.is_empty() {
            return;
        }
        let signal = if pass < 10 { "-TERM" } else { "-KILL" };
        for pid in &pids {
            let _ = Command::new("kill").args([signal, pid]).status();
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Unmounts whatever an engine left mounted below `dir` (deepest first), so the folder
/// can be removed.
fn unmount_below(dir: &Utf8Path) {
    let Ok(info) = fs_err::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<&str> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| Utf8Path::new(p).starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for point in points {
        let _ = Command::new("umount").args(["-l", point]).status();
    }
}

/// Runs `cmd`, failing with its output when it fails; returns stdout.
fn output(cmd: &mut Command, label: &str) -> Result<String, String> {
    Ok(timed(cmd, label)?.0)
}

/// Runs `cmd` (no input), failing with its output when it fails; returns stdout and the
/// wall time. Shared by the container benches.
pub(crate) fn timed(cmd: &mut Command, label: &str) -> Result<(String, f64), String> {
    let started = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{label}: cannot run: {e}"))?;
    let secs = started.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "{label} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), secs))
}

/// One `up`: its wall time, aibox's progress lines timed as they arrived, and the build
/// steps the engine reported (with `-v`) and how many of them it took from its cache.
struct Up {
    secs: f64,
    /// From "building image" to "starting" (aibox's lines); `None` when nothing was built.
    build_secs: Option<f64>,
    /// From the start to "NAME is running" (aibox's line).
    running_secs: Option<f64>,
    steps: usize,
    cached: usize,
    stdout: String,
}

impl Up {
    fn row(&self, step: &str, image_bytes: Option<u64>) -> serde_json::Value {
        serde_json::json!({
            "step": step,
            "secs": self.secs,
            "build_secs": self.build_secs,
            "running_secs": self.running_secs,
            "build_steps": self.steps,
            "cached_steps": self.cached,
            "image_bytes": image_bytes,
        })
    }
}

/// Runs `cmd` with its standard error read line by line as it comes, each line stamped
/// with the time since the start.
fn timed_up(cmd: &mut Command, label: &str) -> Result<Up, String> {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{label}: cannot run: {e}"))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let mut lines = Vec::new();
    for line in BufReader::new(child.stderr.take().ok_or("no stderr")?).lines() {
        let Ok(line) = line else { break };
        lines.push((started.elapsed().as_secs_f64(), line));
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let secs = started.elapsed().as_secs_f64();
    let stdout = reader.join().unwrap_or_default();
    if !status.success() {
        let err: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
        return Err(format!(
            "{label} failed ({status}):\n{stdout}\n{}",
            err.join("\n")
        ));
    }
    // aibox's own progress lines; the engine's lines (`-v`) are indented under `  | `.
    let at = |found: &dyn Fn(&str) -> bool| {
        lines
            .iter()
            .find(|(_, l)| !l.starts_with(' ') && found(l))
            .map(|(t, _)| *t)
    };
    let building = at(&|l| l.starts_with("building image "));
    let build_secs = building.and_then(|b| at(&|l| l.starts_with("starting ")).map(|s| s - b));
    let all = lines
        .iter()
        .map(|(_, l)| l.as_str())
        .chain(stdout.lines())
        .collect::<Vec<_>>();
    Ok(Up {
        secs,
        build_secs,
        running_secs: at(&|l| l.contains(" is running (")),
        steps: all.iter().filter(|l| is_build_step(l)).count(),
        cached: all
            .iter()
            .filter(|l| l.contains("Using cache") || l.contains(" CACHED"))
            .count(),
        stdout,
    })
}

/// Whether `line` announces a Dockerfile step: `STEP 3/12:` (Podman), `Step 3/12 :`
/// (Docker's classic builder).
fn is_build_step(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let Some(at) = lower.find("step ") else {
        return false;
    };
    let rest = &lower[at + 5..];
    let Some((n, m)) = rest.split_once('/') else {
        return false;
    };
    let m = m.split([':', ' ']).next().unwrap_or_default();
    !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
        && !m.is_empty()
        && m.bytes().all(|b| b.is_ascii_digit())
}

#[allow(clippy::cast_precision_loss)] // byte counts far below 2^52
fn render(report: &serde_json::Value) -> String {
    let mut out = String::from(
        "bench up (aibox init --harness claude --harness codex, local base image)\n\
         engine  step                                    total s  build s  to running s  \
         cached/steps  image MiB\n",
    );
    let secs = |v: &serde_json::Value| v.as_f64().map_or("-".to_owned(), |s| format!("{s:.1}"));
    for engine in report["engines"].as_array().into_iter().flatten() {
        let name = engine["engine"].as_str().unwrap_or_default();
        for row in engine["steps"].as_array().into_iter().flatten() {
            let cached = match (row["cached_steps"].as_u64(), row["build_steps"].as_u64()) {
                (Some(c), Some(s)) if s > 0 => format!("{c}/{s}"),
                _ => "-".to_owned(),
            };
            let mib = row["image_bytes"]
                .as_u64()
                .map_or("-".to_owned(), |b| format!("{:.0}", b as f64 / 1_048_576.0));
            let _ = writeln!(
                out,
                "{name:<7} {:<39} {:>7}  {:>7}  {:>12}  {cached:>12}  {mib:>9}",
                row["step"].as_str().unwrap_or_default(),
                secs(&row["secs"]),
                secs(&row["build_secs"]),
                secs(&row["running_secs"]),
            );
        }
    }
    for engine in report["engines"].as_array().into_iter().flatten() {
        let name = engine["engine"].as_str().unwrap_or_default();
        let _ = writeln!(
            out,
            "cold on {name}: {}",
            engine["cold"].as_str().unwrap_or_default()
        );
        if let Some(error) = engine["error"].as_str() {
            let first = error.lines().next().unwrap_or_default();
            let _ = writeln!(
                out,
                "{name} FAILED (rows above are the steps before): {first}"
            );
        }
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::is_build_step;

    #[test]
    fn build_steps_of_both_builders_are_recognised() {
        assert!(is_build_step("  | STEP 3/12: RUN apt-get update"));
        assert!(is_build_step("  | Step 3/12 : RUN apt-get update"));
        assert!(!is_build_step("  | --> Using cache 0123"));
        assert!(!is_build_step("next step 3 of 12"));
    }
}
