//! `cargo xtask ci`: everything a normal change can break, the README's test command.
//!
//! Formatting, then one build of every test target, linted as it compiles (clippy's
//! driver as cargo's workspace wrapper, warnings denied: see [`CLIPPY_DRIVER`]); beside
//! both, setup (apt, pip, npm) and then the end-to-end tests' base image when it is
//! missing, which wait on the network and dpkg while the build keeps the CPU busy. Then
//! the end-to-end tests and the base image test in the background, beside each other,
//! while the foreground runs layering, licences, tidy, the API documentation and the docs site,
//! then the test groups fastest first (unit, `tests/it`, doc examples), then the embedder
//! example. Why beside:
//! the background spends most of its time waiting on Podman, the network and the harness
//! CLIs, the foreground on the CPU, and cargo holds its build lock only while it
//! compiles. Why lint in the build: a separate `cargo clippy` checks every dependency
//! again (its own metadata-only build of about 200 crates), 291 to 303 s measured, while
//! the linted build took 159 to 186 s against 143 to 190 s unlinted. Each group's output
//! is shown as one block: a background group's is kept in its log under `target/` and
//! printed when it ends.
//!
//! The tests write their temporary files to a tmpfs where `ci` may mount one (see
//! `scratch.rs`).
//!
//! One compile of each crate: xtask names the crates whose features only other crates or
//! dev-dependencies enable (see `xtask/Cargo.toml`), so `cargo xtask` builds its crates
//! as the test build does, and the cargo runs started here do not inherit the variables
//! `cargo run` set for xtask (see [`crate::cargo_command`]). Either difference made the
//! test build compile a crate xtask's build had compiled, and everything above it.

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::{cargo, layering, licenses, prepare_demo, release, say, step, tidy};

/// The unit test that builds, publishes and pulls back aibox's base image with Podman and
/// a loopback registry: end-to-end work (over a minute) inside `xtask`'s unit tests, so it
/// runs with the end-to-end group and is left out of the unit group.
const BASE_IMAGE_TEST: &str = "image::tests::amd64_build_publish_verify_and_tampering_fails";

/// A test group: its name and its `cargo test` runs (cargo's arguments, then after `--`
/// the test binaries' own).
type Group = (&'static str, &'static [&'static [&'static str]]);

/// The groups in the foreground, fastest first, so a broken change shows its first failure
/// within minutes (`cargo test`, not nextest, so the doc examples run too).
const FOREGROUND: &[Group] = &[
    (
        "unit tests",
        &[&[
            "--lib",
            "--bins",
            "--",
            "--exact",
            "--skip",
            BASE_IMAGE_TEST,
        ]],
    ),
    ("integration tests (tests/it)", &[&["--test", "it"]]),
    ("doc examples", &[&["--doc"]]),
];

/// The groups in the background, beside the foreground groups and beside each other,
/// each with its own log (where its output goes until it is shown): real engines and
/// real tools. They mostly wait: on Podman, the network, dpkg and the harness CLIs. The
/// base image test keeps its images in a Podman store of its own (`image.rs`,
/// `own_storage`): in one store, Podman 4.3 removing one suite's images while the other
/// built from shared layers failed builds with "layer not known", and the two ran one
/// after the other.
const BACKGROUND: [(Group, &str); 2] = [
    (
        (
            "end-to-end tests (tests/e2e: Podman, real tools)",
            &[&["--test", "e2e"]],
        ),
        "target/ci-e2e.log",
    ),
    (
        (
            "the base image test (build, publish, verify; its own Podman store)",
            // `--workspace --bin`, not `--package`: the workspace's features, no rebuild.
            &[&["--bin", "xtask", "--", "--exact", BASE_IMAGE_TEST]],
        ),
        "target/ci-image.log",
    ),
];

/// The end-to-end run of [`BACKGROUND`] when cargo-nextest is installed: one pool for
/// every crate's `tests/e2e`, three tests at a time, each test's time in the log. `cargo
/// test` runs the binaries one after another with two threads each, and the longest
/// binary's slow tail kept the others waiting; these tests mostly wait on Podman, image
/// builds and the network. Measured on an idle machine: the 35 tests in 215 s, against
/// 350 s with `cargo test`. A failed test runs once more and a pass on the second try is
/// reported as FLAKY in the log: with builds side by side, Podman 4.3's build cache
/// sometimes reads a layer another test's image removal just deleted ("layer not known",
/// once in three CI runs), a race in Podman's storage, not in aibox.
const E2E_NEXTEST: &[&str] = &[
    "nextest",
    "run",
    "--workspace",
    "--locked",
    "--no-fail-fast",
    "--retries",
    "1",
    "--test",
    "e2e",
    "--test-threads",
    "3",
    "--status-level",
    "pass",
    "--final-status-level",
    "slow",
];

/// Where the output of setup and the base image goes until the build ended.
const PREPARE_LOG: &str = "target/ci-setup.log";

/// Every test target the groups run, built once before any of them starts, and the
/// examples and benches, so that the linted build covers what `cargo clippy
/// --all-targets` would.
pub(crate) const BUILD: &[&str] = &[
    "test",
    "--workspace",
    "--locked",
    "--no-run",
    "--lib",
    "--bins",
    "--test",
    "it",
    "--test",
    "e2e",
    "--examples",
    "--benches",
];

/// The lints `cargo clippy -- -D warnings` hands clippy's driver (in cargo-clippy's
/// encoding of an argument list); the workspace's `[workspace.lints]` add the rest.
const CLIPPY_ARGS: &str = "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__";

/// Clippy's driver, once `ci` chose it for this run: from then on every cargo that `ci`
/// starts compiles the workspace's crates through it, warnings denied, as `cargo clippy`
/// does, but with code generated. The build of the tests is then the lint run, and no
/// second, metadata-only build of every dependency is made for clippy. Every cargo of
/// the run must carry the same wrapper: cargo counts it in a crate's fingerprint, and a
/// cargo without it would build the workspace again.
static CLIPPY_DRIVER: OnceLock<PathBuf> = OnceLock::new();

/// Where the toolchain's clippy driver is (beside `rustc` in its sysroot, where
/// `cargo clippy` finds it too).
fn clippy_driver() -> Result<PathBuf, String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run {rustc}: {e}"))?;
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let driver = Path::new(&sysroot).join("bin/clippy-driver");
    if !out.status.success() || !driver.is_file() {
        return Err(format!(
            "clippy's driver is not at {} (install it: rustup component add clippy)",
            driver.display()
        ));
    }
    Ok(driver)
}

/// Gives `cmd` clippy's driver as the workspace's compiler wrapper, once `ci` chose it
/// ([`CLIPPY_DRIVER`]).
pub(crate) fn apply_lints(cmd: &mut Command) -> &mut Command {
    match CLIPPY_DRIVER.get() {
        Some(driver) => lint_with(cmd, driver),
        None => cmd,
    }
}

/// Gives `cmd` `driver` as the workspace's compiler wrapper with [`CLIPPY_ARGS`].
fn lint_with<'a>(cmd: &'a mut Command, driver: &Path) -> &'a mut Command {
    cmd.env("RUSTC_WORKSPACE_WRAPPER", driver)
        .env("CLIPPY_ARGS", CLIPPY_ARGS)
}

pub(crate) fn run() -> Result<(), String> {
    // `.ci/run` says when it began: the time to here is cargo compiling xtask.
    if let Some(began) = std::env::var("AIBOX_CI_BEGAN")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
    {
        say(&format!(
            "==> xtask built and started: {}s after .ci/run began",
            unix_seconds() - began
        ));
    }
    let _ = CLIPPY_DRIVER.set(clippy_driver()?);
    beside(
        "setup and the end-to-end tests' base image",
        Path::new(PREPARE_LOG),
        prepare,
        || {
            step("formatting", &["fmt", "--all", "--check"])?;
            step("build every test, linted (clippy, warnings denied)", BUILD)
        },
    )?;
    let _scratch = crate::scratch::prepare()?;
    // The test step's own time, apart from the builds before it (issue 29's "warm test
    // step"): `.ci/run`'s wall time also counts compiling xtask and the tests.
    let tests_started = Instant::now();
    let tested = tests();
    say(&format!(
        "==> the test step (every group, after the build): {}s",
        tests_started.elapsed().as_secs()
    ));
    tested?;
    // The embedder example: resolve, plan and apply through the library alone. Chosen by
    // its name in the workspace, not with `--package aibox-engine`: one package's feature
    // set is a second build of the engine and its dependencies (measured: 77 s of CPU
    // against 31 s).
    let embed = prepare_demo("target/aibox-embed")?;
    step(
        "embedder example (examples/embed.rs on examples/demo)",
        &[
            "run",
            "--locked",
            "--quiet",
            "--example",
            "embed",
            "--",
            embed,
        ],
    )?;
    say("xtask ci: all checks passed");
    Ok(())
}

/// Layering, licences, tidy, the API documentation and the docs site (clippy ran in the
/// build).
fn checks() -> Result<(), String> {
    say("==> layering");
    layering::check()?;
    say("==> licenses");
    licenses::check()?;
    say("==> tidy");
    tidy::check()?;
    api_docs()?;
    say("==> documentation site (mdBook production build)");
    release::docs()
}

/// `cargo doc` of the product's crates with rustdoc's warnings denied, so an embedder's
/// docs have no broken or private links (31 had gathered, and a fixture's link to `/`
/// inside a crate had made `cargo doc` fail). Without `ci`'s lints: rustdoc's own, and the
/// metadata build it needs is apart from the test build either way. Not xtask's: its
/// dependencies (mdBook's among them) were a quarter of the time (44 against 34 s from
/// nothing, on both cores).
fn api_docs() -> Result<(), String> {
    let name = "API documentation (cargo doc of the crates, rustdoc warnings denied)";
    say(&format!("==> {name}"));
    let mut cmd = Command::new(cargo());
    crate::without_cargo_run_env(&mut cmd)
        .env("RUSTDOCFLAGS", "-D warnings")
        .args([
            "doc",
            "--no-deps",
            "--workspace",
            "--exclude",
            "xtask",
            "--locked",
            "--quiet",
        ]);
    crate::run_timed(name, &mut cmd)
}

/// The `cargo test` arguments of one run of a group.
fn test_args(run: &[&'static str]) -> Vec<&'static str> {
    let mut args = vec!["test", "--workspace", "--locked", "--no-fail-fast"];
    args.extend_from_slice(run);
    args
}

/// The groups, on what [`BUILD`] built, with the checks first in the foreground. Every
/// group runs even after one failed (`--no-fail-fast` over the whole suite) unless
/// `AIBOX_CI_FAIL_FAST` is set, which also stops the background group; the failed groups
/// are named at the end.
fn tests() -> Result<(), String> {
    let fail_fast = std::env::var_os("AIBOX_CI_FAIL_FAST").is_some();
    let started = unix_seconds();
    // Build layers the end-to-end tests keep for a week (the newest 64 tags); expired
    // ones go only while no test process holds their lock. nextest starts a process per
    // test, so between two tests nobody might: this process holds it until it ends,
    // having swept first (or when it readied Podman for the base image).
    match aibox_test_support::podman::hold_kept_layers() {
        Ok(Some(swept)) => say_removed(
            swept,
            ("expired build-layer tag", "expired build-layer tags"),
            "expired build-layer tags",
        ),
        Ok(None) => {}
        Err(e) => say(&format!("==> warning: build layers are not held: {e}")),
    }
    let nextest = nextest_installed();
    let mut background = Vec::new();
    for (group, log) in &BACKGROUND {
        let running =
            Background::start(group.0, background_commands(group, nextest), Path::new(log))?;
        // The foreground's `cargo test` takes cargo's build lock too, however briefly:
        // each background cargo gets it first.
        running.wait_until_running();
        background.push(running);
    }
    let stop = |background: Vec<Background>| {
        background.into_iter().for_each(Background::stop);
        clean_up(started);
    };
    let mut failed = Vec::new();
    if let Err(e) = checks() {
        if fail_fast {
            stop(background);
            return Err(e);
        }
        say(&format!("==> checks failed: {e}"));
        failed.push("checks");
    }
    for (name, runs) in FOREGROUND {
        for run in *runs {
            if let Err(e) = step(name, &test_args(run)) {
                if fail_fast {
                    stop(background);
                    return Err(e);
                }
                failed.push(*name);
            }
        }
    }
    for running in background {
        let name = running.name;
        if !running.finish().0 {
            failed.push(name);
        }
    }
    clean_up(started);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("groups failed: {}", failed.join(", ")))
    }
}

/// The clock in Unix seconds (what `.ci/run`'s `date +%s` and Podman's `created` say).
fn unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs().cast_signed())
}

/// Once no test runs, so no build can take layers from them any more: removes the
/// images that the builds the tests failed on purpose since `started` (Unix seconds) left
/// as their last step (Podman 4.3). The kept build layers' tags stay for the next runs
/// (see `aibox_test_support::podman`).
fn clean_up(started: i64) {
    say_removed(
        aibox_test_support::podman::remove_failed_builds(started),
        (
            "image of builds the tests failed on purpose",
            "images of builds the tests failed on purpose",
        ),
        "failed builds' images",
    );
}

/// Says how many leftovers a sweep removed (`what`: singular, plural), or why `stay` stay;
/// a run goes on either way.
fn say_removed(removed: Result<usize, String>, what: (&str, &str), stay: &str) {
    match removed {
        Ok(0) => {}
        Ok(n) => say(&format!(
            "==> removed {n} {}",
            if n == 1 { what.0 } else { what.1 }
        )),
        Err(e) => say(&format!("==> warning: {stay} stay: {e}")),
    }
}

/// Whether `cargo nextest` runs here.
fn nextest_installed() -> bool {
    crate::cargo_command()
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A background group's commands: its `cargo test` runs, the end-to-end one through
/// nextest when `nextest` ([`E2E_NEXTEST`]).
fn background_commands(group: &Group, nextest: bool) -> Vec<Vec<String>> {
    group
        .1
        .iter()
        .map(|run| {
            let args = if nextest && run == &["--test", "e2e"] {
                E2E_NEXTEST.to_vec()
            } else {
                test_args(run)
            };
            std::iter::once(cargo())
                .chain(args.into_iter().map(str::to_owned))
                .collect()
        })
        .collect()
}

/// A group running its `cargo test` runs one after another on a thread, output to a log
/// file; each run is its own process group, so stopping it stops the test
/// binaries and what they started too.
struct Background {
    name: &'static str,
    log: PathBuf,
    started: Instant,
    state: Arc<Mutex<Running>>,
    /// Whether every run passed, and when the last one ended.
    thread: std::thread::JoinHandle<(bool, Instant)>,
}

/// The background group's current `cargo test`, and whether it was told to stop.
#[derive(Default)]
struct Running {
    child: Option<Child>,
    stopped: bool,
}

/// Locks `state`; a thread that panicked while holding it left nothing half-changed.
fn lock(state: &Mutex<Running>) -> std::sync::MutexGuard<'_, Running> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Background {
    /// Starts running `commands` (each a program and its arguments) one after another,
    /// their output to `log`.
    fn start(name: &'static str, commands: Vec<Vec<String>>, log: &Path) -> Result<Self, String> {
        let file = fs_err::File::create(log)
            .map_err(|e| e.to_string())?
            .into_parts()
            .0;
        say(&format!(
            "==> {name}: in the background, output in {} (shown when it ends)",
            log.display()
        ));
        let state = Arc::new(Mutex::new(Running::default()));
        let shared = Arc::clone(&state);
        let started = Instant::now();
        let run = move || {
            let mut ok = true;
            for argv in commands {
                let Some((program, args)) = argv.split_first() else {
                    continue;
                };
                let (Ok(out), Ok(err)) = (file.try_clone(), file.try_clone()) else {
                    return false;
                };
                {
                    let mut running = lock(&shared);
                    if running.stopped {
                        return false;
                    }
                    let _ = writeln!(&file, "==> {name}: {}", argv.join(" "));
                    let mut cmd = Command::new(program);
                    match crate::started_by_xtask(&mut cmd)
                        .args(args)
                        .stdin(Stdio::null())
                        .stdout(out)
                        .stderr(err)
                        .process_group(0)
                        .spawn()
                    {
                        Ok(child) => running.child = Some(child),
                        Err(e) => {
                            let _ = writeln!(&file, "cannot run {program}: {e}");
                            return false;
                        }
                    }
                }
                ok &= wait_for(&shared);
            }
            ok
        };
        // The end is taken on the thread: `finish` may be called long after it (a group
        // waited for after another).
        let thread = std::thread::spawn(move || (run(), Instant::now()));
        Ok(Self {
            name,
            log: log.to_owned(),
            started,
            state,
            thread,
        })
    }

    /// Waits until the first run's tests started (cargo printed `Running`, nextest
    /// `Starting`), the group ended, or two minutes passed: then its cargo no longer
    /// needs the build lock.
    fn wait_until_running(&self) {
        let deadline = Instant::now() + std::time::Duration::from_mins(2);
        while !self.thread.is_finished() && Instant::now() < deadline {
            if fs_err::read_to_string(&self.log)
                .is_ok_and(|log| log.contains("     Running ") || log.contains("    Starting "))
            {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Waits for the group to end, prints its output and time; whether every run passed,
    /// and how long the group ran.
    fn finish(self) -> (bool, std::time::Duration) {
        say(&format!(
            "==> waiting for {} (running for {:.0}s)",
            self.name,
            self.started.elapsed().as_secs_f64()
        ));
        let (ok, ended) = self.thread.join().unwrap_or((false, Instant::now()));
        match fs_err::read_to_string(&self.log) {
            Ok(text) => say(text.trim_end()),
            Err(e) => say(&format!("cannot read {}: {e}", self.log.display())),
        }
        let took = ended.duration_since(self.started);
        say(&format!("<== {}: {:.1}s", self.name, took.as_secs_f64()));
        (ok, took)
    }

    /// Stops the running `cargo test` and everything it started (fail-fast).
    fn stop(self) {
        {
            let mut running = lock(&self.state);
            running.stopped = true;
            if let Some(child) = &running.child {
                let _ = Command::new("kill")
                    .args(["-TERM", "--", &format!("-{}", child.id())])
                    .status();
            }
        }
        let _ = self.thread.join();
        say(&format!(
            "<== {}: stopped (its output so far: {})",
            self.name,
            self.log.display()
        ));
    }
}

/// Waits for the current child in `state` without holding the lock, so
/// [`Background::stop`] can reach it meanwhile; whether it passed.
fn wait_for(state: &Mutex<Running>) -> bool {
    loop {
        {
            let mut running = lock(state);
            let Some(child) = running.child.as_mut() else {
                return false;
            };
            match child.try_wait() {
                Ok(Some(status)) => return status.success() && !running.stopped,
                Ok(None) => {}
                Err(_) => return false,
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Runs `foreground` (the build) while `prepare` runs on a thread beside it, its output
/// going to `log`; once both ended, shows that output and returns the first error, the
/// foreground's first. Waits for `prepare` even when the foreground failed, so no apt-get
/// or debootstrap is left running on its own.
fn beside(
    name: &str,
    log: &Path,
    prepare: impl FnOnce(&fs_err::File) -> Result<(), String> + Send + 'static,
    foreground: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    if let Some(dir) = log.parent() {
        fs_err::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let file = fs_err::File::create(log).map_err(|e| e.to_string())?;
    say(&format!(
        "==> {name}: beside the build, output in {} (shown when the build ended)",
        log.display()
    ));
    let started = Instant::now();
    // Its own time tells whether it, not the build, held up the tests.
    let preparing = std::thread::spawn(move || (prepare(&file), started.elapsed()));
    let built = foreground();
    let foreground_took = started.elapsed();
    let (prepared, took) = preparing
        .join()
        .unwrap_or_else(|_| (Err("it panicked".to_owned()), started.elapsed()));
    match fs_err::read_to_string(log) {
        Ok(text) => say(text.trim_end()),
        Err(e) => say(&format!("cannot read {}: {e}", log.display())),
    }
    say(&format!(
        "<== {name}: {} in {:.1}s (the build beside it: {:.1}s)",
        if prepared.is_ok() { "done" } else { "FAILED" },
        took.as_secs_f64(),
        foreground_took.as_secs_f64()
    ));
    built.and(prepared.map_err(|e| format!("{name}: {e}")))
}

/// Installs the test suite's system and npm dependencies when they are missing, then makes
/// the end-to-end tests' base image when it is missing (a debootstrap of Debian the first
/// time, a minute or more). Both wait on the network and dpkg, the build beside them on
/// the CPU, and nothing in the build needs them.
fn prepare(log: &fs_err::File) -> Result<(), String> {
    if std::env::var_os("AIBOX_SKIP_SETUP").is_some() {
        let _ = writeln!(&*log, "setup: skipped (AIBOX_SKIP_SETUP)");
    } else {
        let _ = writeln!(&*log, "setup: scripts/setup-test-deps.sh");
        let (out, err) = (
            log.file().try_clone().map_err(|e| e.to_string())?,
            log.file().try_clone().map_err(|e| e.to_string())?,
        );
        release::run_tool(
            Command::new("bash")
                .arg("scripts/setup-test-deps.sh")
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err),
        )?;
    }
    // The tests find the image, or wait on its lock. A failure's message is on stderr;
    // the end-to-end tests try again and fail with the same message, in their group.
    if std::thread::spawn(aibox_test_support::podman::Podman::ready)
        .join()
        .is_err()
    {
        let _ = writeln!(
            &*log,
            "the end-to-end tests' base image is not ready (see above)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name that matched no test would leave the base image test out of both groups
    /// without a word (`--exact` filters and skips pass on zero matches).
    #[test]
    fn the_base_image_test_runs_in_the_background_group_only() {
        // Compiles only while the test exists at this path.
        let test: fn() = crate::image::tests::amd64_build_publish_verify_and_tampering_fails;
        assert!(!std::ptr::fn_addr_eq(
            test,
            the_build_covers_every_group as fn()
        ));
        assert_eq!(
            BASE_IMAGE_TEST,
            concat!(
                "image::tests::",
                stringify!(amd64_build_publish_verify_and_tampering_fails)
            )
        );
        let unit = FOREGROUND[0].1[0];
        assert_eq!(unit[..2], ["--lib", "--bins"]);
        assert!(unit.ends_with(&["--skip", BASE_IMAGE_TEST]));
        let runs = BACKGROUND.iter().flat_map(|(g, _)| g.1.iter());
        assert_eq!(runs.filter(|r| r.ends_with(&[BASE_IMAGE_TEST])).count(), 1);
        // In a group of its own, so it runs beside the end-to-end tests, not after them.
        assert_eq!(
            BACKGROUND[1].0.1,
            [["--bin", "xtask", "--", "--exact", BASE_IMAGE_TEST]]
        );
        for (_, runs) in FOREGROUND {
            for run in *runs {
                assert!(
                    !run.contains(&"--package") && !run.contains(&"-p"),
                    "{run:?}"
                );
            }
        }
    }

    /// With nextest, only the end-to-end run changes: all of `tests/e2e`, every test run
    /// even after a failure; the base image test stays a `cargo test` run.
    #[test]
    fn nextest_runs_the_end_to_end_tests_only() {
        let with = background_commands(&BACKGROUND[0].0, true);
        let without = background_commands(&BACKGROUND[0].0, false);
        assert_eq!((with.len(), without.len()), (1, 1));
        assert_eq!(with[0][1..3], ["nextest", "run"]);
        for flag in ["--workspace", "--locked", "--no-fail-fast"] {
            assert!(with[0].iter().any(|a| a == flag), "{flag}");
        }
        assert!(with[0].windows(2).any(|w| w == ["--test", "e2e"]));
        assert_eq!(without[0][1..], test_args(&["--test", "e2e"]));
        assert_eq!(
            background_commands(&BACKGROUND[1].0, true),
            background_commands(&BACKGROUND[1].0, false)
        );
    }

    /// Every target a group runs is in the one build, so no group compiles (and takes
    /// cargo's build lock) while another runs.
    #[test]
    fn the_build_covers_every_group() {
        for (_, runs) in FOREGROUND.iter().chain(BACKGROUND.iter().map(|(g, _)| g)) {
            for run in *runs {
                let cargo_args = run.split(|a| *a == "--").next().unwrap_or_default();
                for pair in cargo_args.windows(2) {
                    if pair[0] == "--test" {
                        assert!(BUILD.windows(2).any(|b| b == pair), "{pair:?}");
                    }
                }
                for flag in ["--lib", "--bins"] {
                    if cargo_args.contains(&flag) {
                        assert!(BUILD.contains(&flag), "{flag}");
                    }
                }
            }
        }
    }

    /// The linted build covers every kind of target `cargo clippy --all-targets` checks.
    #[test]
    fn the_build_lints_every_kind_of_target() {
        for flag in ["--lib", "--bins", "--examples", "--benches"] {
            assert!(BUILD.contains(&flag), "{flag}");
        }
    }

    /// A build through clippy's driver with [`CLIPPY_ARGS`] fails on a clippy lint, as
    /// `cargo clippy -- -D warnings` does; the same crate builds without it. A real cargo
    /// on a one-file crate.
    #[test]
    fn a_build_through_clippys_driver_fails_on_a_lint() {
        let dir = tempfile::tempdir().unwrap();
        let krate = dir.path().join("probe");
        fs_err::create_dir_all(krate.join("src")).unwrap();
        fs_err::write(
            krate.join("Cargo.toml"),
            "[package]\nname = \"probe\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[workspace]\n",
        )
        .unwrap();
        fs_err::write(
            krate.join("src/lib.rs"),
            "//! Probe.\n\n/// Empty?\npub fn empty(v: &[u8]) -> bool {\n    v.len() == 0\n}\n",
        )
        .unwrap();
        let build = |lint: bool| {
            let mut cmd = Command::new(cargo());
            // Under `ci` this test inherits the run's own wrapper: the plain build has none.
            crate::without_cargo_run_env(&mut cmd)
                .env_remove("RUSTC_WORKSPACE_WRAPPER")
                .env_remove("CLIPPY_ARGS");
            if lint {
                lint_with(&mut cmd, &clippy_driver().unwrap());
            }
            cmd.args(["build", "--quiet", "--offline", "--manifest-path"])
                .arg(krate.join("Cargo.toml"))
                .env("CARGO_TARGET_DIR", dir.path().join("target"))
                .output()
                .unwrap()
        };
        let plain = build(false);
        assert!(plain.status.success(), "{plain:?}");
        let linted = build(true);
        let err = String::from_utf8_lossy(&linted.stderr);
        assert!(!linted.status.success(), "{err}");
        assert!(err.contains("len_zero"), "{err}");
    }

    /// Setup runs while the build runs, is waited for even when the build failed, and its
    /// failure fails the run after the build's own.
    #[test]
    fn preparation_runs_beside_the_build_and_is_waited_for() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("setup.log");
        let second = std::time::Duration::from_secs(1);

        let started = Instant::now();
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let result = beside(
            "setup",
            &log,
            move |log| {
                writeln!(&*log, "installing").unwrap();
                std::thread::sleep(second);
                flag.store(true, Ordering::SeqCst);
                Err("apt-get failed".to_owned())
            },
            || {
                std::thread::sleep(second);
                Err("build failed".to_owned())
            },
        );
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_millis(1750),
            "not beside: {took:?}"
        );
        assert!(
            done.load(Ordering::SeqCst),
            "waited for even after the build failed"
        );
        assert_eq!(result, Err("build failed".to_owned()));
        assert_eq!(fs_err::read_to_string(&log).unwrap(), "installing\n");

        let result = beside(
            "setup",
            &log,
            |_| Err("apt-get failed".to_owned()),
            || Ok(()),
        );
        assert_eq!(result, Err("setup: apt-get failed".to_owned()));
        let result = beside("setup", &log, |_| panic!("no podman"), || Ok(()));
        assert_eq!(result, Err("setup: it panicked".to_owned()));
        assert_eq!(beside("setup", &log, |_| Ok(()), || Ok(())), Ok(()));
    }

    /// Each package's features, from `cargo tree` of `packages` over the given edge kinds.
    fn features(packages: &str, edges: &str) -> std::collections::BTreeMap<String, Vec<String>> {
        let out = Command::new(cargo())
            .args(["tree", packages, "--locked", "--prefix", "none"])
            .args(["-e", edges, "-f", "{p}|{f}"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let mut map = std::collections::BTreeMap::<String, Vec<String>>::new();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let Some((package, features)) = line.split_once('|') else {
                continue;
            };
            let package = package.split(" (").next().unwrap_or(package).to_owned();
            let features = features.trim_end_matches(" (*)").to_owned();
            let entry = map.entry(package).or_default();
            if !entry.contains(&features) {
                entry.push(features);
                entry.sort();
            }
        }
        map
    }

    /// `cargo xtask` builds xtask alone (`--package xtask`), the test build the workspace
    /// with its dev-dependencies. Where a crate under xtask gets other features, it and
    /// everything above it is compiled twice on a fresh machine (52 crates before
    /// xtask/Cargo.toml named `clap`, `getrandom` and `zerocopy`).
    #[test]
    fn xtask_builds_with_the_test_builds_features() {
        let xtask = features("--package=xtask", "normal,build");
        let all = features("--workspace", "normal,build,dev");
        let differ: Vec<_> = xtask
            .iter()
            .filter(|(package, features)| all.get(*package) != Some(features))
            .map(|(package, features)| format!("{package}: {features:?} vs {:?}", all.get(package)))
            .collect();
        assert!(
            differ.is_empty(),
            "the test build enables other features of these crates than `cargo xtask` \
             (through other crates or dev-dependencies); name them with those features in \
             xtask/Cargo.toml:\n{}",
            differ.join("\n")
        );
    }

    /// The dev profile optimises only named dependencies, and the release profile (built
    /// for size) optimises named ones for speed, each one in the lock: cargo only warns
    /// about a name that matches no package, so a renamed or replaced crate would leave
    /// the hot code unoptimised without a failure. `"*"` sets no opt-level: it would
    /// outrank `build-override` and optimise every proc macro too.
    #[test]
    fn the_profiles_name_only_dependencies_of_the_lock() {
        let read = |name: &str| -> toml::Table {
            let text = fs_err::read_to_string(crate::image::root().join(name)).unwrap();
            text.parse().unwrap()
        };
        let manifest = read("Cargo.toml");
        let lock = read("Cargo.lock");
        let locked: Vec<&str> = lock["package"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        let profiles = manifest["profile"].as_table().unwrap();
        // The release binary is built for size, its hot dependencies for speed.
        assert_eq!(profiles["release"].get("opt-level"), Some(&"s".into()));
        for (profile, level) in [("dev", 1), ("release", 3)] {
            let packages = profiles[profile]["package"].as_table().unwrap();
            assert!(packages.contains_key("sha2"), "{profile}: {packages:?}");
            for (name, settings) in packages {
                if name == "*" {
                    assert!(settings.get("opt-level").is_none(), "{packages:?}");
                    continue;
                }
                assert!(
                    locked.contains(&name.as_str()),
                    "{profile}: {name} is not in Cargo.lock"
                );
                assert_eq!(
                    settings.get("opt-level"),
                    Some(&toml::Value::from(level)),
                    "{profile}: {name}"
                );
            }
        }
    }

    fn sh(script: &str) -> Vec<String> {
        ["sh", "-c", script].map(str::to_owned).to_vec()
    }

    #[test]
    fn the_background_runs_in_order_into_its_log_and_reports_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("group.log");
        let passing = Background::start(
            "passing",
            vec![sh("echo first; echo to-stderr >&2"), sh("echo second")],
            &log,
        )
        .unwrap();
        assert!(passing.finish().0);
        let text = fs_err::read_to_string(&log).unwrap();
        let first = text.find("first").unwrap();
        assert!(text[first..].contains("to-stderr"), "{text}");
        assert!(text.find("second").unwrap() > first, "{text}");
        assert!(text.contains("==> passing: sh -c echo second"), "{text}");

        // A failed run fails the group; the runs after it still run.
        let failing = Background::start(
            "failing",
            vec![
                sh("exit 3"),
                sh("echo after"),
                vec!["/nonexistent/cargo".to_owned()],
            ],
            &log,
        )
        .unwrap();
        assert!(!failing.finish().0);
        let text = fs_err::read_to_string(&log).unwrap();
        assert!(text.contains("after"), "{text}");
        assert!(text.contains("cannot run /nonexistent/cargo"), "{text}");
    }

    /// A group waited for after another reports the time it ran, not the time until it
    /// was waited for.
    #[test]
    fn a_group_reports_when_it_ended_not_when_it_was_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("group.log");
        let quick = Background::start("quick", vec![sh("true")], &log).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let (ok, took) = quick.finish();
        assert!(ok);
        assert!(took.as_millis() < 1000, "{took:?}");
    }

    /// The foreground's cargo starts once the background's cargo has started its test
    /// binary, or at once when the group ended without one.
    #[test]
    fn waiting_for_the_background_ends_at_cargos_running_line_or_at_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("group.log");
        let started = Instant::now();
        let running = Background::start(
            "running",
            vec![sh(
                // Not the line itself: the log's header line repeats this script.
                "sleep 0.5; printf '%5sRunning tests/e2e/main.rs\\n' ''; sleep 30",
            )],
            &log,
        )
        .unwrap();
        running.wait_until_running();
        let waited = started.elapsed();
        assert!(waited.as_millis() >= 500, "{waited:?}");
        assert!(waited.as_secs() < 10, "{waited:?}");
        running.stop();

        let started = Instant::now();
        let failed = Background::start("failed", vec![sh("exit 1")], &log).unwrap();
        failed.wait_until_running();
        assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
        assert!(!failed.finish().0);
    }

    #[test]
    fn stopping_the_background_ends_what_its_run_started_and_the_rest_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("group.log");
        let marker = dir.path().join("grandchild-lived");
        // The run starts a grandchild, as cargo starts the test binaries.
        let grandchild = format!("(sleep 2; touch {}) & wait", marker.display());
        let started = Instant::now();
        let group =
            Background::start("stopped", vec![sh(&grandchild), sh("echo never")], &log).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        group.stop();
        assert!(started.elapsed().as_secs() < 2, "{:?}", started.elapsed());
        std::thread::sleep(std::time::Duration::from_millis(2500));
        assert!(!marker.exists(), "the run's own children are stopped too");
        let text = fs_err::read_to_string(&log).unwrap();
        assert!(!text.contains("never"), "{text}");
    }
}
