//! A real Docker Engine (`dockerd`) for end-to-end tests, started by the tests themselves.
//!
//! [`Docker::ready`] starts `dockerd` on a socket under `/var/lib/aibox-test-docker/` (as
//! root; `<target>/aibox-docker/` otherwise: see `daemon_dir`) with
//! Docker's defaults (its default seccomp profile in particular: that is what the tests
//! are about) and loads the harness's Debian base image [`BASE_IMAGE`] from Podman's cache
//! (built with debootstrap by [`Podman::ready`]) when it is missing.
//!
//! Lifetime: nothing is started globally (`.ci/run` starts no daemon). The daemon lives as
//! long as a [`Docker`] handle does: handles share one daemon through a reference count,
//! and the last one dropped stops it by its pid (`SIGTERM`, then `SIGKILL`). Rust runs no
//! destructor for statics at process exit, so a daemon kept in a static would outlive the
//! test binary; a handle per test stops it when the tests stop using it (a test starting
//! after that starts it again, a few seconds). The data root is kept between runs, so
//! images (the base image, aibox's builds) are cached like Podman's storage. A file lock
//! held while the daemon runs keeps test processes from sharing the folder; a daemon left
//! by a killed test run is stopped by its pidfile before a new one starts.
//!
//! Build layers: the data root is the tests' own (no one else's images are there), so before
//! [`Cleanup`](crate::podman::Cleanup) removes an image it is tagged
//! `localhost/aibox-test-docker-layers:<unix seconds>-<id>` and its layers stay for later
//! runs: a Docker test built its image cold on every run (the four harness CLIs
//! downloaded each time), while Docker's cache compares every instruction and copied byte
//! as Podman's does. When a daemon starts, the tags go that the Podman tests' kept layers
//! would lose (`podman::layers::expired`: older than a week, or beyond the newest 64);
//! layers a recent build still uses stay under its tag, those of a changed catalog go
//! with the old tags.
//!
//! A missing `dockerd`, `docker` or `docker-compose`, or a daemon that does not start,
//! fails the test; nothing here skips.

// A test harness must stop the test loudly, with an actionable message, when the machine
// is not prepared; panicking is how a test fails.
#![allow(clippy::panic)]

use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};

use crate::podman::{self, BASE_IMAGE, Podman, layers, require_program};

/// The repository of the tags that keep build layers from one run to the next.
const LAYERS: &str = "localhost/aibox-test-docker-layers";

const INSTALL_HINT: &str =
    "install Docker Engine and Compose first: `apt-get install -y docker.io docker-compose`";

/// A running test `dockerd`; dropping the last [`Docker`] handle stops it.
#[derive(Debug, Clone)]
pub struct Docker {
    daemon: Arc<Daemon>,
}

#[derive(Debug)]
struct Daemon {
    child: Mutex<Child>,
    dir: Utf8PathBuf,
    socket: Utf8PathBuf,
    // Held while the daemon runs: one daemon per folder, across test processes.
    _lock: fs_err::File,
}

static DAEMON: Mutex<Weak<Daemon>> = Mutex::new(Weak::new());

impl Docker {
    /// The shared test daemon (started now if no handle is alive) with the base image in
    /// place. Fails the test when a tool is missing or the daemon does not start.
    pub fn ready() -> Self {
        require_program("dockerd", INSTALL_HINT);
        require_program("docker", INSTALL_HINT);
        require_program("docker-compose", INSTALL_HINT);
        let mut shared = DAEMON.lock().unwrap_or_else(PoisonError::into_inner);
        let daemon = shared.upgrade().unwrap_or_else(|| {
            let daemon = Arc::new(Daemon::start());
            *shared = Arc::downgrade(&daemon);
            daemon
        });
        drop(shared);
        let docker = Self { daemon };
        docker.ensure_base_image();
        docker
    }

    /// The value for `DOCKER_HOST`.
    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.daemon.socket)
    }

    /// The variables a child process needs to use this daemon (`DOCKER_HOST`).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("DOCKER_HOST".to_owned(), self.docker_host())]
    }

    /// `BIN --project ROOT` (the aibox binary under test) on this daemon: engine Docker,
    /// Compose `docker-compose`, nothing inherited that could change the outcome.
    pub fn aibox(&self, bin: &str, root: &Utf8Path) -> Command {
        let mut cmd = podman::aibox_isolated(bin, root);
        cmd.envs(self.env())
            .env("AIBOX_ENGINE", "docker")
            .env("AIBOX_COMPOSE", "docker-compose");
        cmd
    }

    /// A `docker` command talking to this daemon.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("docker");
        cmd.envs(self.env()).stdin(Stdio::null());
        cmd
    }

    /// Runs `docker ARGS...` and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command()
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run docker {args:?}: {e}"))
    }

    /// `docker container inspect NAME` as JSON, or `None` when no such container exists.
    pub fn inspect_container(&self, name: &str) -> Option<serde_json::Value> {
        podman::first_inspected(&self.run(&["container", "inspect", name]))
    }

    /// `docker image inspect IMAGE` as JSON, or `None` when no such image exists.
    pub fn inspect_image(&self, image: &str) -> Option<serde_json::Value> {
        podman::first_inspected(&self.run(&["image", "inspect", image]))
    }

    /// Whether `image` exists in this daemon.
    pub fn image_exists(&self, image: &str) -> bool {
        self.inspect_image(image).is_some()
    }

    /// Copies the harness base image from Podman's cache into this daemon once; the
    /// daemon's data root keeps it for later runs.
    fn ensure_base_image(&self) {
        if self.image_exists(BASE_IMAGE) {
            return;
        }
        let podman = Podman::ready();
        let mut save = podman.command();
        save.args(["image", "save", BASE_IMAGE]);
        let mut load = self.command();
        load.arg("load");
        podman::pipe(save, load, "loading the base image into Docker");
        assert!(
            self.image_exists(BASE_IMAGE),
            "{BASE_IMAGE} is still missing"
        );
    }
}

impl podman::Engine for Docker {
    fn remove_container(&self, name: &str) {
        let _ = self.run(&["rm", "-f", name]);
    }
    fn remove_image(&self, image: &str) {
        let _ = self.run(&["rmi", "-f", image]);
    }
    fn remove_network(&self, network: &str) {
        let _ = self.run(&["network", "rm", network]);
    }
    fn remove_volume(&self, volume: &str) {
        let _ = self.run(&["volume", "rm", "-f", volume]);
    }
    fn keep_layers(&self, image: &str) {
        // Only aibox's builds by name: an id is a replaced build, nothing built again.
        if !image.starts_with("localhost/") {
            return;
        }
        let Some(id) = self
            .inspect_image(image)
            .and_then(|i| i["Id"].as_str().map(str::to_owned))
        else {
            return;
        };
        let _ = self.run(&["tag", image, &layers::kept_tag(LAYERS, &id)]);
    }
}

/// Removes the expired kept tags (`podman::layers::expired`; and the layers only they
/// kept) from the daemon on `socket`.
fn remove_expired_layers(socket: &Utf8Path) {
    let docker = |args: &[&str]| {
        Command::new("docker")
            .env("DOCKER_HOST", format!("unix://{socket}"))
            .args(args)
            .stdin(Stdio::null())
            .output()
    };
    let Ok(out) = docker(&["images", "--format", "{{.Tag}}", LAYERS]) else {
        return;
    };
    for tag in layers::expired(String::from_utf8_lossy(&out.stdout).lines(), layers::now()) {
        let _ = docker(&["rmi", &format!("{LAYERS}:{tag}")]);
    }
}

/// The daemon's folder (data root, exec root, socket, pidfile, lock). As root, as CI
/// runs, one per machine, `/var/lib/aibox-test-docker`, like Podman's store: its data root
/// then keeps the base image and the kept build layers from one run to the next. Under
/// `target/` each CI run's fresh clone started from an empty data root: it loaded the
/// base image again and built every Docker test's image cold (four harness images, 1.7 GB
/// of layers). One folder per machine also means one test daemon per machine, so two
/// checkouts' daemons never contend for Docker's default bridge; the lock makes the second
/// wait. Without root (`dockerd` needs it anyway) the folder stays under `target/`.
fn daemon_dir() -> Utf8PathBuf {
    if rustix::process::geteuid().is_root() {
        Utf8PathBuf::from("/var/lib/aibox-test-docker")
    } else {
        podman::target_dir().join("aibox-docker")
    }
}

impl Daemon {
    fn start() -> Self {
        let dir = daemon_dir();
        fs_err::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {dir}: {e}"));
        let lock_path = dir.join("daemon.lock");
        let lock = fs_err::File::create(&lock_path)
            .unwrap_or_else(|e| panic!("cannot create {lock_path}: {e}"));
        lock.file()
            .lock()
            .unwrap_or_else(|e| panic!("cannot lock {lock_path}: {e}"));
        let pidfile = dir.join("docker.pid");
        // We hold the lock, so a daemon named there is left over from a killed run.
        if let Ok(pid) = fs_err::read_to_string(&pidfile) {
            stop_pid(pid.trim());
        }
        let socket = dir.join("docker.sock");
        let log_path = dir.join("dockerd.log");
        let (out, err) = podman::log_to(&log_path);
        let mut child = Command::new("dockerd")
            .arg("--data-root")
            .arg(dir.join("data").as_str())
            .arg("--exec-root")
            .arg(dir.join("exec").as_str())
            .arg("-H")
            .arg(format!("unix://{socket}"))
            .arg("--pidfile")
            .arg(pidfile.as_str())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start dockerd: {e}"));
        podman::wait_for_api(&mut child, &socket, &log_path, "dockerd");
        remove_expired_layers(&socket);
        Self {
            child: Mutex::new(child),
            dir,
            socket,
            _lock: lock,
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        stop_service(self.child.get_mut().unwrap_or_else(PoisonError::into_inner));
        let _ = fs_err::remove_file(&self.socket);
        let _ = fs_err::remove_file(self.dir.join("docker.pid"));
    }
}

/// Stops a service this process started (`dockerd`, `podman system service`): SIGTERM,
/// so `dockerd` stops its containers and unmounts, up to 30 s for that, then SIGKILL.
pub fn stop_service(child: &mut std::process::Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Stops a left-over daemon by its pid and waits until it is gone.
fn stop_pid(pid: &str) {
    if pid.parse::<u32>().is_err() || !Utf8Path::new("/proc").join(pid).exists() {
        return;
    }
    let _ = Command::new("kill").args(["-TERM", pid]).status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Utf8Path::new("/proc").join(pid).exists() {
        if Instant::now() > deadline {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
            std::thread::sleep(Duration::from_secs(1));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
