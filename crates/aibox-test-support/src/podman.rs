//! A real Podman for end-to-end tests, configured for this kind of machine.
//!
//! [`Podman::ready`] writes a project-local `containers.conf` under the workspace
//! `target/` folder (the `runc` runtime and lowered ulimits that CI machines in
//! unprivileged containers need), hands it to child processes through
//! `CONTAINERS_CONF`, and builds the base image [`BASE_IMAGE`] with debootstrap when it
//! is missing. The build holds a file lock, so parallel tests build it once; later runs
//! reuse the cached image. This file is a test-harness setting: aibox never writes it
//! for its users.
//!
//! [`DockerApi`] serves Podman's Docker-compatible API on a socket under `target/` for
//! tools that only speak to Docker (`docker-compose`, the devcontainer CLI).
//!
//! [`Cleanup`] keeps the build layers of the images it removes for a week (see `layers`),
//! so each distinct image is built cold once a week, not once per test run.
//!
//! A missing tool fails the test with a message naming what to install; nothing here
//! skips silently.

// A test harness must stop the test loudly, with an actionable message, when the machine
// is not prepared; panicking is how a test fails.
#![allow(clippy::panic)]

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};

pub(crate) mod layers;

/// A test host for the egress tests and bench (`perl -e TEST_HOST NAME` in [`BASE_IMAGE`]):
/// HTTP on 80 and 443 (`hello from NAME`, one `tcp: <request line>` log line each), UDP
/// on 53 (logged, never answered); prints `ready` once listening. Perl is in every Debian
/// system, so the base image serves as it is.
pub const TEST_HOST: &str = r#"
use IO::Socket::INET; use IO::Select;
my $name = shift; my @l; $| = 1;
for my $p (80, 443) { push @l, IO::Socket::INET->new(LocalPort=>$p, Listen=>16, ReuseAddr=>1, Proto=>'tcp') or die "listen $p: $!"; }
my $u = IO::Socket::INET->new(LocalPort=>53, Proto=>'udp') or die "udp: $!";
my $s = IO::Select->new(@l, $u); print "ready\n";
while (1) { for my $r ($s->can_read) {
  if ($r == $u) { my $d; $r->recv($d, 2048); print "udp datagram\n"; next }
  my $c = $r->accept or next; my $line = <$c>; while (my $h = <$c>) { last if $h =~ /^\r?\n$/ }
  print "tcp: $line"; print $c "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello from $name\n"; close $c } }
"#;

/// The locally built Debian base image every end-to-end project starts `FROM`.
pub const BASE_IMAGE: &str = "localhost/aibox-test-base:bookworm";

/// The host's CA bundle. This machine reaches the package registries through a
/// TLS-inspecting proxy, so image builds that download catalog tools must trust it.
pub const HOST_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// `.aibox-local.toml` text trusting [`HOST_CA_BUNDLE`] (the personal CA setting); append
/// further `[container]` keys or `[[container.extra_volumes]]` tables after it.
pub fn local_toml_with_host_ca() -> String {
    format!("[container]\nextra_ca_certificates = \"{HOST_CA_BUNDLE}\"\n")
}

/// Contents of the harness's `containers.conf` (also used by `cargo xtask image`).
pub const CONTAINERS_CONF: &str = "\
# Written by aibox's test harness for CI machines (cgroup v1 hybrid mode, no
# CAP_SYS_RESOURCE): use runc and lower the default ulimits.
[containers]
default_ulimits = [\"nofile=1024:1024\", \"nproc=4096:4096\"]
[engine]
runtime = \"runc\"
";

const INSTALL_HINT: &str = "install the container tools first: `apt-get install -y podman runc \
     debootstrap podman-compose docker-compose uidmap slirp4netns fuse-overlayfs catatonit`";

/// A prepared Podman: its configuration file and the base image are in place.
#[derive(Debug, Clone)]
pub struct Podman {
    dir: Utf8PathBuf,
    conf: Utf8PathBuf,
}

/// The folder for the harness's files: `<target dir>/aibox-podman`.
pub fn harness_dir() -> Utf8PathBuf {
    target_dir().join("aibox-podman")
}

/// Holds the build layers the end-to-end tests keep (see `layers`) until this process
/// ends, as [`Podman::ready`] does: for a runner that starts a process per test (`cargo
/// xtask ci` around nextest), so they are held between two test processes too. When no
/// test process of this checkout held them, this process removed the expired tags (older
/// than a week, or beyond the newest 64) as it first held them: how many went, or why
/// they stay (`None`: another process held them, nothing was swept).
///
/// # Errors
/// When the lock file cannot be made or locked.
pub fn hold_kept_layers() -> Result<Option<Result<usize, String>>, String> {
    layers::hold(&Podman::configured()?)?;
    Ok(layers::take_own_sweep())
}

/// Removes the images that builds which failed since `since` (Unix seconds) left (see
/// `layers::failed_builds`); returns how many. For a runner to call once its tests
/// ended: a build may still take layers from them while tests run.
///
/// # Errors
/// When Podman cannot list or remove the images.
pub fn remove_failed_builds(since: i64) -> Result<usize, String> {
    let podman = Podman::configured()?;
    layers::remove_images(&podman, &layers::failed_builds(&podman, since)?)
}

/// The workspace's Cargo target folder (`CARGO_TARGET_DIR` or `<workspace>/target`).
pub(crate) fn target_dir() -> Utf8PathBuf {
    std::env::var("CARGO_TARGET_DIR").map_or_else(
        |_| crate::workspace_root().join("target"),
        Utf8PathBuf::from,
    )
}

/// Finds `name` on `PATH`, or fails the test with `hint`.
pub fn require_program(name: &str, hint: &str) -> PathBuf {
    find_program(name, std::env::var_os("PATH").as_deref())
        .unwrap_or_else(|| panic!("`{name}` is not on PATH; {hint}"))
}

fn find_program(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?).find_map(|dir| {
        let candidate = dir.join(name);
        let meta = fs_err::metadata(&candidate).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
    })
}

/// `BIN --project ROOT` (the aibox binary under test) on Podman with `containers_conf`,
/// and nothing inherited that could change the outcome (engine, Compose provider, project,
/// colours, standard input).
pub fn aibox_command(bin: &str, containers_conf: &Utf8Path, root: &Utf8Path) -> Command {
    let mut cmd = aibox_isolated(bin, root);
    cmd.env("CONTAINERS_CONF", containers_conf.as_str())
        .env("AIBOX_ENGINE", "podman");
    cmd
}

/// `BIN --project ROOT` with nothing inherited that could change the outcome (engine,
/// Compose provider, project, colours, standard input); the caller names the engine.
pub(crate) fn aibox_isolated(bin: &str, root: &Utf8Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env("NO_COLOR", "1")
        .env_remove("AIBOX_ENGINE")
        .env_remove("AIBOX_COMPOSE")
        .env_remove("AIBOX_PROJECT")
        .env_remove("DOCKER_HOST")
        .arg("--project")
        .arg(root.as_str())
        .stdin(Stdio::null());
    cmd
}

impl Podman {
    /// [`aibox_command`] with this harness's `containers.conf`.
    pub fn aibox(&self, bin: &str, root: &Utf8Path) -> Command {
        aibox_command(bin, &self.conf, root)
    }

    /// Checks that Podman is installed, writes `containers.conf` and makes sure the base
    /// image exists (building it with debootstrap the first time). Fails the test with
    /// instructions when a tool is missing.
    pub fn ready() -> Self {
        require_program("podman", INSTALL_HINT);
        require_program("runc", INSTALL_HINT);
        let podman = Self::configured().unwrap_or_else(|e| panic!("{e}"));
        // For the process's life: expired build layers go only when no test can build on them.
        layers::hold(&podman).unwrap_or_else(|e| panic!("{e}"));
        podman.ensure_base_image();
        podman
    }

    /// The harness folder with its `containers.conf` written, nothing checked or built.
    fn configured() -> Result<Self, String> {
        let dir = harness_dir();
        fs_err::create_dir_all(&dir)
            .map_err(|e| format!("cannot create the Podman harness folder: {e}"))?;
        let conf = dir.join("containers.conf");
        // Written only when different, so concurrent tests never see a half-written file.
        if fs_err::read_to_string(&conf).ok().as_deref() != Some(CONTAINERS_CONF) {
            static SEQ: AtomicU32 = AtomicU32::new(0);
            let n = SEQ.fetch_add(1, Ordering::Relaxed);
            let tmp = dir.join(format!("containers.conf.{}.{n}", std::process::id()));
            fs_err::write(&tmp, CONTAINERS_CONF)
                .and_then(|()| fs_err::rename(&tmp, &conf))
                .map_err(|e| format!("cannot write {conf}: {e}"))?;
        }
        Ok(Self { dir, conf })
    }

    /// The `containers.conf` this harness uses.
    pub fn containers_conf(&self) -> &Utf8Path {
        &self.conf
    }

    /// The variables a child process needs to use this Podman (`CONTAINERS_CONF`).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("CONTAINERS_CONF".to_owned(), self.conf.to_string())]
    }

    /// Sets [`Podman::env`] on `cmd`.
    pub fn configure<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.envs(self.env())
    }

    /// A `podman` command with the harness configuration.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("podman");
        self.configure(&mut cmd);
        cmd
    }

    /// Runs `podman ARGS...` and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run podman {args:?}: {e}"))
    }

    /// Runs `podman build ARGS...` in `dir` and returns its output. A build that failed
    /// only because another test removed an image it was weighing as a cache (Podman
    /// 4.3's "checking if cached image exists ... layer not known", a race in its
    /// store, the one aibox's own runtime retries) runs once more.
    pub fn build(&self, dir: &Path, args: &[&str]) -> Output {
        let once = || {
            self.command()
                .arg("build")
                .args(args)
                .current_dir(dir)
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("cannot run podman build {args:?}: {e}"))
        };
        let first = once();
        let lost_cache = String::from_utf8_lossy(&first.stderr).lines().any(|l| {
            l.trim_start()
                .starts_with("Error: checking if cached image exists")
                && (l.ends_with("layer not known") || l.ends_with("image not known"))
        });
        if first.status.success() || !lost_cache {
            return first;
        }
        once()
    }

    /// Creates (without starting) a container `name` that belongs to aibox project
    /// `owner`, as another project on the same machine would, and returns its id.
    pub fn create_foreign(&self, name: &str, owner: &str) -> serde_json::Value {
        let label = format!("aibox.project={owner}");
        let created = self.run(&[
            "create", "--name", name, "--label", &label, BASE_IMAGE, "sleep", "infinity",
        ]);
        assert!(
            created.status.success(),
            "{}",
            String::from_utf8_lossy(&created.stderr)
        );
        self.inspect_container(name)
            .unwrap_or_else(|| panic!("{name} was not created"))["Id"]
            .clone()
    }

    /// `podman container inspect NAME` as JSON, or `None` when no such container exists.
    pub fn inspect_container(&self, name: &str) -> Option<serde_json::Value> {
        first_inspected(&self.run(&["container", "inspect", name]))
    }

    /// Whether `image` exists locally.
    pub fn image_exists(&self, image: &str) -> bool {
        self.run(&["image", "exists", image]).status.success()
    }

    /// Removes a container (if any), ignoring errors: cleanup must not mask a failure.
    pub fn remove_container(&self, name: &str) {
        let _ = self.run(&["rm", "-f", "-t", "0", name]);
    }

    /// Removes an image (if any), ignoring errors.
    pub fn remove_image(&self, image: &str) {
        let _ = self.run(&["rmi", "-f", image]);
    }

    /// Starts Podman's Docker-compatible API service on a fresh socket under `target/`.
    pub fn docker_api(&self) -> DockerApi {
        DockerApi::start(self)
    }

    fn ensure_base_image(&self) {
        if self.image_exists(BASE_IMAGE) {
            return;
        }
        let lock_path = self.dir.join("base-image.lock");
        let lock = fs_err::File::create(&lock_path)
            .unwrap_or_else(|e| panic!("cannot create {lock_path}: {e}"));
        lock.file()
            .lock()
            .unwrap_or_else(|e| panic!("cannot lock {lock_path}: {e}"));
        // Another test may have built it while we waited for the lock.
        if self.image_exists(BASE_IMAGE) {
            return;
        }
        require_program("debootstrap", INSTALL_HINT);
        let rootfs = self.dir.join("rootfs");
        if rootfs.exists() {
            fs_err::remove_dir_all(&rootfs)
                .unwrap_or_else(|e| panic!("cannot clear a stale {rootfs}: {e}"));
        }
        let out = Command::new("timeout")
            .args(["900", "debootstrap", "--variant=minbase", "bookworm"])
            .arg(rootfs.as_str())
            .arg("http://deb.debian.org/debian")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run debootstrap: {e}"));
        assert!(
            out.status.success(),
            "debootstrap of the base image failed (it needs root and access to \
             deb.debian.org): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.import(&rootfs);
        let _ = fs_err::remove_dir_all(&rootfs);
        assert!(
            self.image_exists(BASE_IMAGE),
            "{BASE_IMAGE} is still missing after the build"
        );
    }

    fn import(&self, rootfs: &Utf8Path) {
        let mut tar = Command::new("tar");
        tar.args(["-C", rootfs.as_str(), "-c", "."]);
        let mut import = self.command();
        import.args(["import", "-", BASE_IMAGE]);
        pipe(tar, import, "importing the base image");
    }
}

/// Runs `from | into`, failing the test (named `what`) when either fails.
pub(crate) fn pipe(mut from: Command, mut into: Command, what: &str) {
    let mut source = from
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot run {from:?}: {e}"));
    let data = source
        .stdout
        .take()
        .unwrap_or_else(|| panic!("{what}: {from:?} has no stdout"));
    let out = into
        .stdin(data)
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {into:?}: {e}"));
    let status = source
        .wait()
        .unwrap_or_else(|e| panic!("{what}: {from:?} failed: {e}"));
    assert!(
        status.success() && out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running `podman system service` that speaks the Docker API on a Unix socket.
/// Dropping it stops the service.
#[derive(Debug)]
pub struct DockerApi {
    child: Child,
    dir: Utf8PathBuf,
    socket: Utf8PathBuf,
}

impl DockerApi {
    fn start(podman: &Podman) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = podman.dir.join(format!("api-{}-{n}", std::process::id()));
        fs_err::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {dir}: {e}"));
        let socket = dir.join("podman.sock");
        let log_path = dir.join("service.log");
        let (out, err) = log_to(&log_path);
        let child = podman
            .command()
            .args(["system", "service", "--time=0", &format!("unix://{socket}")])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `podman system service`: {e}"));
        let mut api = Self { child, dir, socket };
        wait_for_api(
            &mut api.child,
            &api.socket,
            &log_path,
            "podman system service",
        );
        api
    }

    /// The value for `DOCKER_HOST`.
    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.socket)
    }

    /// The socket path.
    pub fn socket(&self) -> &Utf8Path {
        &self.socket
    }
}

/// The first object an `inspect` command printed, or `None` when it failed (no such
/// object).
pub(crate) fn first_inspected(out: &Output) -> Option<serde_json::Value> {
    if !out.status.success() {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("inspect printed no JSON: {e}"));
    value.as_array().and_then(|a| a.first()).cloned()
}

/// Hands the tree at `root` to `owner` (`uid:gid`): these tests run as root, a
/// developer's checkout belongs to the developer the container user stands for.
pub fn chown_tree(root: &Utf8Path, owner: &str) {
    let status = Command::new("chown")
        .args(["-R", owner, root.as_str()])
        .status()
        .unwrap_or_else(|e| panic!("cannot run chown: {e}"));
    assert!(status.success(), "chown -R {owner} {root} failed");
}

/// Standard output and error of a service process, both appended to the file `path`.
pub(crate) fn log_to(path: &Utf8Path) -> (Stdio, Stdio) {
    let log = fs_err::File::create(path).unwrap_or_else(|e| panic!("cannot create {path}: {e}"));
    let err = log
        .file()
        .try_clone()
        .unwrap_or_else(|e| panic!("cannot dup {path}: {e}"));
    (log.into_parts().0.into(), err.into())
}

/// Waits until the Docker-compatible API on `socket` answers `/_ping`, failing the test
/// with the log at `log` when `child` (named `what`) exits or 60 s pass.
pub(crate) fn wait_for_api(child: &mut Child, socket: &Utf8Path, log: &Utf8Path, what: &str) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while !api_answers(socket) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "`{what}` exited ({status}): {}",
                fs_err::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "the API socket {socket} of `{what}` did not answer within 60 s: {}",
            fs_err::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether a Docker-compatible API answers `GET /_ping` on `socket`.
fn api_answers(socket: &Utf8Path) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    if stream
        .write_all(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply.starts_with("HTTP/1.") && reply.contains(" 200 ")
}

impl Drop for DockerApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs_err::remove_dir_all(&self.dir);
    }
}

/// What [`Cleanup`] needs of an engine: removals that ignore errors, because cleanup
/// must not mask a failure.
pub trait Engine: std::fmt::Debug + Send {
    /// Removes a container (if any).
    fn remove_container(&self, name: &str);
    /// Removes an image (if any).
    fn remove_image(&self, image: &str);
    /// Removes a network (if any).
    fn remove_network(&self, network: &str);
    /// Removes a volume (if any).
    fn remove_volume(&self, volume: &str);
    /// Keeps the build layers of `image` for later builds (this run's and the next
    /// week's), before [`Engine::remove_image`] removes its name; nothing by default.
    fn keep_layers(&self, _image: &str) {}
}

impl Engine for Podman {
    fn remove_container(&self, name: &str) {
        Self::remove_container(self, name);
    }
    fn remove_image(&self, image: &str) {
        Self::remove_image(self, image);
    }
    fn keep_layers(&self, image: &str) {
        layers::keep(self, image);
    }
    fn remove_network(&self, network: &str) {
        let _ = self.run(&["network", "rm", "-f", network]);
    }
    fn remove_volume(&self, volume: &str) {
        let _ = self.run(&["volume", "rm", "-f", volume]);
    }
}

/// Removes the named containers, images, networks and volumes when dropped, so a
/// failing test still cleans up after itself.
#[derive(Debug)]
pub struct Cleanup {
    engine: Box<dyn Engine>,
    containers: Vec<String>,
    images: Vec<String>,
    networks: Vec<String>,
    volumes: Vec<String>,
}

impl Cleanup {
    /// A cleanup list for `engine` (a [`Podman`] or a [`crate::docker::Docker`]).
    pub fn new<E: Engine + Clone + 'static>(engine: &E) -> Self {
        Self {
            engine: Box::new(engine.clone()),
            containers: Vec::new(),
            networks: Vec::new(),
            volumes: Vec::new(),
            images: Vec::new(),
        }
    }

    /// A cleanup list for an aibox project: the container, the image and the
    /// Compose network (`<project>_default`) that `aibox status --output json` named.
    pub fn for_project<E: Engine + Clone + 'static>(
        engine: &E,
        status: &serde_json::Value,
    ) -> Self {
        let text = |key: &str| {
            status[key]
                .as_str()
                .unwrap_or_else(|| panic!("no {key} in {status}"))
                .to_owned()
        };
        let mut cleanup = Self::new(engine);
        cleanup
            .container(&text("container"))
            .image(&text("image"))
            .network(&format!("{}_default", text("project")));
        cleanup
    }

    /// Adds what `[network] egress = "allowlist"` makes beside the project's own
    /// container and image (named by `aibox status`): the egress proxy's container and
    /// image, the two egress networks and the proxy's socket volume, with the names the
    /// generator gives them.
    pub fn egress(&mut self, project: &str, image: &str) -> &mut Self {
        use aibox_config::container::{
            EGRESS_NETWORKS, EGRESS_PROXY_SERVICE, EGRESS_SOCKET_VOLUME,
        };
        // `localhost/<project>-aibox:local` beside `localhost/<project>-aibox-egress:local`.
        let proxy_image = image.replace("-aibox:local", &format!("-{EGRESS_PROXY_SERVICE}:local"));
        assert_ne!(proxy_image, image, "not an aibox image name: {image}");
        self.container(&format!("{project}_{EGRESS_PROXY_SERVICE}_1"))
            .image(&proxy_image);
        for network in EGRESS_NETWORKS {
            self.network(&format!("{project}_{network}"));
        }
        self.volumes
            .push(format!("{project}_{EGRESS_SOCKET_VOLUME}"));
        self
    }

    /// Removes this container at the end (and now, if a stale one exists).
    pub fn container(&mut self, name: &str) -> &mut Self {
        self.engine.remove_container(name);
        self.containers.push(name.to_owned());
        self
    }

    /// Removes this network at the end (Compose creates `<project>_default`).
    pub fn network(&mut self, network: &str) -> &mut Self {
        self.networks.push(network.to_owned());
        self
    }

    /// Removes this image at the end.
    pub fn image(&mut self, image: &str) -> &mut Self {
        self.images.push(image.to_owned());
        self
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for name in &self.containers {
            self.engine.remove_container(name);
        }
        for image in &self.images {
            self.engine.keep_layers(image);
            self.engine.remove_image(image);
        }
        for network in &self.networks {
            self.engine.remove_network(network);
        }
        for volume in &self.volumes {
            self.engine.remove_volume(volume);
        }
    }
}
