//! Build layers kept while a checkout's tests run, so each distinct image is built once.
//!
//! Every end-to-end test removes the images it built, and `podman rmi` takes their
//! untagged build layers with them: the next test's `aibox up` ran the same `apt-get
//! install` and harness downloads again (a claude image: 30 s cold, 5 s from the cache).
//! Before [`Cleanup`](super::Cleanup) removes an image, [`keep`] tags it
//! `localhost/aibox-test-layers-<pid>:<n>`: its name goes, its layers stay for later
//! builds. Podman's build cache still compares every instruction and every copied byte, so
//! a test never gets an image of files other than its own.
//!
//! The tags go when the tests are done: every process that readies Podman holds a shared
//! lock on `<target>/aibox-podman/layers.lock` until it ends ([`hold`]), and the first
//! [`keep`] starts a watcher, `flock -x` on that file in its own process group, which
//! removes the process's tags once no test process of this checkout holds it. So they go
//! however the process ended (a panic, Ctrl-C, a kill), and never while a later test
//! binary builds on the same layers (Podman 4.3 failed builds with "layer not known" when
//! layers went away under them).
//! A runner that starts a process per test (nextest, under `cargo xtask ci`) holds the
//! lock itself for the whole run ([`super::hold_kept_layers`]), so the layers also
//! outlive the moments between two test processes, and once they are done removes their
//! tags itself ([`super::release_kept_layers`]): a CI job ends every process it started
//! when `ci` ends, watchers too. A run stopped before that leaves its tags; the next run
//! removes them before its tests ([`remove_orphans`]).

use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use camino::{Utf8Path, Utf8PathBuf};

use super::Podman;

/// The repository of the tags that keep layers, one per process.
const REPOSITORY: &str = "localhost/aibox-test-layers";

/// Removes the tags of the repository `$1`, exactly those: an image's other names stay
/// (`--filter reference=` would list every name of a matching image, the base image's too).
const REMOVE_TAGS: &str = r#"for t in $(podman images --format '{{.Repository}}:{{.Tag}}'); do case "$t" in "$1":*) podman rmi "$t" ;; esac; done"#;

/// The lock file's name, beside the harness's `containers.conf`.
pub(super) const LOCK_FILE: &str = "layers.lock";

/// The lock file beside the harness's `containers.conf`.
fn lock_path(podman: &Podman) -> Utf8PathBuf {
    podman.dir.join(LOCK_FILE)
}

/// Holds the shared lock until this process ends (the file is never closed before).
pub(super) fn hold(podman: &Podman) {
    static HELD: OnceLock<fs_err::File> = OnceLock::new();
    HELD.get_or_init(|| {
        let path = lock_path(podman);
        lock_shared(&path).unwrap_or_else(|e| panic!("cannot lock {path}: {e}"))
    });
}

/// Opens (creating it) and share-locks the lock file at `path`; the lock lasts as long
/// as the returned file stays open.
pub(super) fn lock_shared(path: &Utf8Path) -> std::io::Result<fs_err::File> {
    let file = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    file.file().lock_shared()?;
    Ok(file)
}

/// Tags `image` so its layers outlive its removal until the tests are done. Only images
/// by name: one named by its id is a replaced build, nothing a later test builds again.
pub(super) fn keep(podman: &Podman, image: &str) {
    static WATCHER: OnceLock<Option<Child>> = OnceLock::new();
    static SEQ: AtomicU32 = AtomicU32::new(0);
    if !image.starts_with("localhost/") {
        return;
    }
    hold(podman);
    let repository = format!("{REPOSITORY}-{}", std::process::id());
    // Without a watcher no tag: a kept layer nobody removes would be a leftover.
    let watching = WATCHER.get_or_init(|| {
        watcher(podman, &lock_path(podman), &repository)
            .spawn()
            .ok()
    });
    if watching.is_some() {
        let tag = format!("{repository}:{}", SEQ.fetch_add(1, Ordering::Relaxed));
        let _ = podman.run(&["tag", image, &tag]);
    }
}

/// `flock -x LOCK` removing the tags of `repository`: waits for every holder of the lock,
/// in a process group of its own so the signal that stops the tests does not stop it.
fn watcher(podman: &Podman, lock: &Utf8Path, repository: &str) -> Command {
    let mut cmd = Command::new("flock");
    cmd.args([
        "-x",
        lock.as_str(),
        "sh",
        "-c",
        REMOVE_TAGS,
        "sh",
        repository,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    podman.configure(&mut cmd);
    // It outlives the tests, and so their temporary folder: `cargo xtask ci` unmounts its
    // tmpfs as it ends, and `podman images` with a missing `TMPDIR` fails, which left
    // every tag behind (138 on one machine after a few runs).
    cmd.env("TMPDIR", WATCHER_TMPDIR);
    cmd
}

/// Removes the tags of every process's repository (`REPOSITORY-<pid>`) whose watcher is
/// gone, in one `podman rmi`; returns how many. A watcher names its repository in its
/// arguments (see [`watcher`]), and [`keep`] starts it before the first tag, so a tag
/// with no process naming its repository is one nobody will remove.
pub(super) fn remove_orphans(podman: &Podman) -> Result<usize, String> {
    let watched = repositories_named_with(|_| true);
    remove_tags(podman, |repository| {
        is_process_repository(repository) && !watched.iter().any(|w| w == repository)
    })
}

/// Removes, in one `podman rmi`, every tag whose repository `remove` picks; returns how
/// many.
fn remove_tags(podman: &Podman, remove: impl Fn(&str) -> bool) -> Result<usize, String> {
    let names = image_names(podman)?;
    let tags: Vec<&str> = names
        .lines()
        .filter(|tag| {
            tag.rsplit_once(':')
                .is_some_and(|(repository, _)| remove(repository))
        })
        .collect();
    remove_images(podman, &tags)
}

/// The images failed builds left since `since` (Unix seconds), by ID. Podman 4.3 keeps
/// the last step a failed `build --layers` committed as a visible image without a name,
/// its only name ever a made-up `<hash>-tmp`; the end-to-end tests fail builds on purpose
/// (a tampered lock, a failing step), and each such image held a whole tool image's
/// layers once its tests removed their own (1.5 GB after one `cargo xtask ci`).
pub(super) fn failed_builds(podman: &Podman, since: i64) -> Result<Vec<String>, String> {
    let text = podman_ok(
        podman,
        &["images", "--filter", "dangling=true", "--format", "json"],
    )?;
    let images: Vec<serde_json::Value> = serde_json::from_str(&text)
        .map_err(|e| format!("podman images printed no image list: {e}"))?;
    Ok(images
        .iter()
        .filter(|image| is_failed_build(image, since))
        .filter_map(|image| image["Id"].as_str().map(str::to_owned))
        .collect())
}

/// Whether `image` (a dangling entry of `podman images --format json`) is a failed
/// build's last step made at `since` or later: no name but a `-tmp` one ever, no
/// container.
fn is_failed_build(image: &serde_json::Value, since: i64) -> bool {
    let only_tmp_names = image["History"].as_array().is_some_and(|names| {
        !names.is_empty()
            && names
                .iter()
                .all(|n| n.as_str().is_some_and(|n| n.ends_with("-tmp:latest")))
    });
    only_tmp_names
        && image["Containers"].as_u64() == Some(0)
        && image["Created"]
            .as_i64()
            .is_some_and(|created| created >= since)
}

/// Removes the images (IDs or names) `images` in one `podman rmi`; returns how many.
pub(super) fn remove_images(podman: &Podman, images: &[impl AsRef<str>]) -> Result<usize, String> {
    if !images.is_empty() {
        let mut args = vec!["rmi"];
        args.extend(images.iter().map(AsRef::as_ref));
        podman_ok(podman, &args)?;
    }
    Ok(images.len())
}

/// Every name of every image in the store, `REPOSITORY:TAG` a line.
fn image_names(podman: &Podman) -> Result<String, String> {
    let list = || podman_ok(podman, &["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    // Podman 4.3 fails the whole listing when another process removes an image while it
    // reads ("image not known", "layer not known"); the next listing no longer sees it.
    let mut tries = 1;
    loop {
        match list() {
            Err(e) if tries < 3 && e.contains(" not known") => tries += 1,
            done => return done,
        }
    }
}

/// The output of `podman ARGS`, or why it did not run or failed: unlike [`Podman::run`]
/// no panic, for a runner that goes on without Podman.
fn podman_ok(podman: &Podman, args: &[&str]) -> Result<String, String> {
    let out = podman
        .command()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run podman: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "podman {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether `repository` is one [`keep`] tags into: `REPOSITORY-<pid>`.
fn is_process_repository(repository: &str) -> bool {
    repository
        .strip_prefix(REPOSITORY)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// The tag repositories named by running processes whose arguments `pick` accepts: the
/// watchers' (a watcher names its repository, and its lock file, among its arguments).
fn repositories_named_with(pick: impl Fn(&[String]) -> bool) -> Vec<String> {
    let Ok(entries) = fs_err::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| fs_err::read(entry.path().join("cmdline")).ok())
        .map(|cmdline| {
            cmdline
                .split(|&b| b == 0)
                .filter_map(|arg| std::str::from_utf8(arg).ok())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|args| pick(args))
        .flat_map(|args| args.into_iter().filter(|arg| is_process_repository(arg)))
        .collect()
}

/// The repositories of the watchers waiting on the lock file `lock`.
fn watched_through(lock: &Utf8Path) -> Vec<String> {
    repositories_named_with(|args| args.iter().any(|a| a == lock.as_str()))
}

/// Removes, in one `podman rmi`, the tags of the processes whose watchers wait on `lock`
/// (this checkout's test processes); returns how many. For a runner once its tests
/// ended: the watchers then find nothing left to remove. One by one, each in its turn
/// under the lock, they took a minute for 17 processes.
pub(super) fn remove_watched(podman: &Podman, lock: &Utf8Path) -> Result<usize, String> {
    let watched = watched_through(lock);
    if watched.is_empty() {
        return Ok(0);
    }
    remove_tags(podman, |repository| watched.iter().any(|w| w == repository))
}

/// The watcher's temporary folder: Podman's own default for image work, there for as
/// long as the system is.
const WATCHER_TMPDIR: &str = "/var/tmp";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podman::BASE_IMAGE;

    /// The tags of `repository`, sorted (every name of every image, filtered here).
    fn tags(podman: &Podman, repository: &str) -> String {
        let names = image_names(podman).unwrap();
        let mut tags: Vec<_> = names
            .lines()
            .filter_map(|line| line.strip_prefix(&format!("{repository}:")))
            .collect();
        tags.sort_unstable();
        tags.join(" ")
    }

    /// For a watcher test: the base image's names to itself, Podman, and a lock file's
    /// path in a new temporary folder (gone with it).
    fn with_a_lock_file() -> (
        std::sync::MutexGuard<'static, ()>,
        Podman,
        tempfile::TempDir,
        Utf8PathBuf,
    ) {
        let names = BASE_IMAGE_NAMES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = tempfile::tempdir().unwrap();
        let lock = Utf8PathBuf::from_path_buf(dir.path().join("layers.lock")).unwrap();
        (names, Podman::ready(), dir, lock)
    }

    /// A process repository no process of this machine has (pids stop at 2^22): this
    /// test process's id behind a 9, then `n`.
    fn no_process_repository(n: u32) -> String {
        format!("{REPOSITORY}-9{}{n:03}", std::process::id())
    }

    /// Gives the base image each of `tags` as a further name.
    fn tag_base_image(podman: &Podman, tags: &[String]) {
        for tag in tags {
            assert!(podman.run(&["tag", BASE_IMAGE, tag]).status.success());
        }
    }

    /// Serialises the tests that name the base image: Podman 4.3 loses a name when two
    /// processes tag or untag one image at once (seen here: a tag gone that nobody removed).
    static BASE_IMAGE_NAMES: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Tags whose watcher is gone go; tags a live process names stay, and so do other
    /// repositories' tags.
    #[test]
    fn orphaned_tags_go_and_watched_ones_stay() {
        let _names = BASE_IMAGE_NAMES.lock();
        let podman = Podman::ready();
        let (orphan, watched) = (no_process_repository(1), no_process_repository(2));
        let selftest = format!("{REPOSITORY}-selftest-orphan-{}", std::process::id());
        tag_base_image(
            &podman,
            &[
                format!("{orphan}:0"),
                format!("{orphan}:1"),
                format!("{watched}:0"),
                format!("{selftest}:0"),
            ],
        );
        // A watcher's stand-in: a process with the repository among its arguments.
        let mut stand_in = Command::new("sh")
            .args(["-c", "sleep 60; true", "sh", &watched])
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let removed = remove_orphans(&podman);
        let _ = stand_in.kill();
        let _ = stand_in.wait();
        assert!(removed.unwrap() >= 2);
        assert_eq!(tags(&podman, &orphan), "");
        assert_eq!(tags(&podman, &watched), "0");
        assert_eq!(tags(&podman, &selftest), "0", "not a process's repository");
        assert!(podman.image_exists(BASE_IMAGE));
        for tag in [format!("{watched}:0"), format!("{selftest}:0")] {
            assert!(podman.run(&["rmi", &tag]).status.success());
        }
    }

    /// A failed build's leftover image is found (and only images made since the given
    /// time), and goes.
    #[test]
    fn a_failed_builds_leftover_is_found_and_removed() {
        let podman = Podman::ready();
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            .cast_signed();
        let dir = tempfile::tempdir().unwrap();
        // A step of its own (no other build has it), then a failing one.
        let unique = format!("{}-{since}", std::process::id());
        fs_err::write(
            dir.path().join("Dockerfile"),
            format!("FROM {BASE_IMAGE}\nRUN echo {unique} > /unique\nRUN false\n"),
        )
        .unwrap();
        let out = podman
            .command()
            .args([
                "build",
                "--layers",
                "-t",
                &format!("aibox-failed-build-{unique}"),
            ])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        // Podman prints `--> <short id>` after each committed step.
        let text = String::from_utf8_lossy(&out.stdout);
        let left = text
            .lines()
            .filter_map(|l| l.strip_prefix("--> "))
            .next_back()
            .unwrap_or_else(|| panic!("no committed step: {text}"))
            .trim()
            .to_owned();
        let found = failed_builds(&podman, since).unwrap();
        let ours: Vec<String> = found
            .into_iter()
            .filter(|id| id.starts_with(&left))
            .collect();
        assert_eq!(ours.len(), 1, "{left}: {text}");
        let later = failed_builds(&podman, since + 3600).unwrap();
        assert!(!later.iter().any(|id| id.starts_with(&left)));
        assert_eq!(remove_images(&podman, &ours), Ok(1));
        assert!(!podman.image_exists(&ours[0]));
        assert!(podman.image_exists(BASE_IMAGE));
    }

    /// A runner removes the tags of its own watchers' processes while it still holds the
    /// lock; another process's tags stay, and the watcher then ends with nothing to do.
    #[test]
    fn a_runner_removes_its_watchers_tags() {
        let (_names, podman, _dir, lock) = with_a_lock_file();
        let held = lock_shared(&lock).unwrap();
        let (ours, other) = (no_process_repository(3), no_process_repository(4));
        let tags_to_make = [
            format!("{ours}:0"),
            format!("{ours}:1"),
            format!("{other}:0"),
        ];
        tag_base_image(&podman, &tags_to_make);
        let mut watcher = watcher(&podman, &lock, &ours).spawn().unwrap();
        while watched_through(&lock).is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(remove_watched(&podman, &lock), Ok(2));
        assert_eq!(tags(&podman, &ours), "");
        assert_eq!(tags(&podman, &other), "0", "another process's tags stay");
        drop(held);
        assert!(watcher.wait().unwrap().success());
        assert!(podman.image_exists(BASE_IMAGE));
        assert!(podman.run(&["rmi", &format!("{other}:0")]).status.success());
    }

    /// The watcher waits for every holder of the lock, then removes its tags and only
    /// those (the image itself keeps its other names).
    #[test]
    fn the_watcher_removes_the_tags_once_the_last_holder_ends() {
        let (_names, podman, _dir, lock) = with_a_lock_file();
        fs_err::write(&lock, "").unwrap();
        let repository = format!("{REPOSITORY}-selftest-{}", std::process::id());
        let other = format!("{REPOSITORY}-selftest-other-{}", std::process::id());
        tag_base_image(
            &podman,
            &[
                format!("{repository}:0"),
                format!("{repository}:1"),
                format!("{other}:0"),
            ],
        );
        // A test process holding the lock until its stdin closes; the watcher starts once
        // it holds it (a fixed head start and hold time failed on a loaded machine: the
        // watcher took the lock first, or after the hold had already ended).
        let held = lock.with_extension("held");
        let mut holder = Command::new("flock")
            .args([
                "-s",
                lock.as_str(),
                "sh",
                "-c",
                "touch \"$0\"; cat >/dev/null",
                held.as_str(),
            ])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        while !held.exists() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut watcher = watcher(&podman, &lock, &repository);
        // Not the tests' temporary folder, which may be gone by the time it runs.
        let tmpdir = watcher.get_envs().find(|(k, _)| *k == "TMPDIR");
        assert_eq!(
            tmpdir,
            Some(("TMPDIR".as_ref(), Some(WATCHER_TMPDIR.as_ref())))
        );
        let mut watcher = watcher.spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(
            tags(&podman, &repository),
            "0 1",
            "gone while the lock was held"
        );
        drop(holder.stdin.take());
        assert!(holder.wait().unwrap().success());
        assert!(watcher.wait().unwrap().success());
        assert_eq!(tags(&podman, &repository), "");
        assert_eq!(tags(&podman, &other), "0", "another process's tags stay");
        assert!(podman.image_exists(BASE_IMAGE));
        assert!(podman.run(&["rmi", &format!("{other}:0")]).status.success());
    }
}
