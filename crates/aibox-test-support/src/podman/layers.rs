//! Build layers kept from one test run to the next, so each distinct image is built
//! cold once a week, not once a run.
//!
//! Every end-to-end test removes the images it built, and `podman rmi` takes their
//! untagged build layers with them: the next build of the same image ran the same
//! `apt-get install` and harness downloads again (a three-harness image: 62 s cold, 16 s
//! from the cache; the suite's 29 builds were 246 s of its 840 s of test time). Before
//! [`Cleanup`](super::Cleanup) removes an image, [`keep`] tags it
//! `localhost/aibox-test-layers:<unix seconds>-<id>`: its name goes, its layers stay for
//! later builds, in this run and the next ones, as the Docker tests' data root keeps
//! theirs (`docker.rs`). Podman's build cache still compares every instruction and every
//! copied byte, so a test never gets an image of files other than its own.
//!
//! Tags older than a week ([`KEEP_SECONDS`]) go in a sweep ([`sweep`]), and so do all
//! but the newest [`MAX_KEPT`]: each run's images carry its test projects' names (a
//! label), so most of them are new on every run (19 of 22), their layers shared with the
//! previous run's images; without a bound their number grew by that much a run. The sweep
//! runs only while no test process of this checkout holds
//! `<target>/aibox-podman/layers.lock`: every process that readies Podman holds that lock
//! shared for its life ([`hold`]), and `cargo xtask ci` for its whole run; the first one
//! to find it free sweeps under the exclusive lock before it holds it shared. So no image
//! goes while a test of this checkout may build on its layers (Podman 4.3 failed builds
//! with "layer not known" when layers went away under them). A build reusing an old
//! image tags it again, with the time it was used.
//!
//! What a cold build proved on every run, that each pinned download is still served with
//! its digest, `aibox-devcontainer`'s `catalog_downloads` test proves on every run
//! instead, for every architecture and without building.
//!
//! The sweep also removes the tags of the previous scheme, one repository per test process
//! (`localhost/aibox-test-layers-<pid>:<n>`), which were removed as each run ended.

use std::process::Stdio;
use std::sync::{Mutex, PoisonError};

use camino::Utf8Path;

use super::Podman;

/// The repository of the kept tags (`<unix seconds>-<id>`).
const REPOSITORY: &str = "localhost/aibox-test-layers";

/// How long a kept build's tag stays: a week of catalog changes at most, then a cold
/// build.
pub(crate) const KEEP_SECONDS: u64 = 7 * 86_400;

/// Most kept tags: about three runs' images (22 a run with Podman, fewer with Docker).
pub(crate) const MAX_KEPT: usize = 64;

/// The lock file's name, beside the harness's `containers.conf`.
pub(super) const LOCK_FILE: &str = "layers.lock";

/// This process's hold: the locked file, and what its sweep removed (`None`: another
/// process held the lock, or a runner took the report, see [`take_own_sweep`]).
type Held = Option<(fs_err::File, Option<Result<usize, String>>)>;

static HELD: Mutex<Held> = Mutex::new(None);

/// Holds the shared lock until this process ends (the file is never closed before),
/// sweeping first when no other test process holds it; a second call holds nothing
/// more.
pub(super) fn hold(podman: &Podman) -> Result<(), String> {
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    if held.is_none() {
        let path = podman.dir.join(LOCK_FILE);
        *held =
            Some(hold_at(&path, || sweep(podman)).map_err(|e| format!("cannot lock {path}: {e}"))?);
    }
    Ok(())
}

/// Takes what this process's [`hold`] swept, if it swept (for a runner to report,
/// `cargo xtask ci`).
pub(super) fn take_own_sweep() -> Option<Result<usize, String>> {
    HELD.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_mut()
        .and_then(|(_, swept)| swept.take())
}

/// Opens (creating it) the lock file at `path` and holds it shared; when nobody held it,
/// first runs `sweep` under the exclusive lock and returns what it returned.
pub(super) fn hold_at<T>(
    path: &Utf8Path,
    sweep: impl FnOnce() -> T,
) -> std::io::Result<(fs_err::File, Option<T>)> {
    let file = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    let swept = match file.file().try_lock() {
        Ok(()) => Some(sweep()),
        Err(std::fs::TryLockError::WouldBlock) => None,
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    };
    // Turns an exclusive lock into a shared one, or waits for a sweep under way.
    file.file().lock_shared()?;
    Ok((file, swept))
}

/// Tags `image` so its layers outlive its removal (see the module). Only images by
/// name: one named by its id is a replaced build, nothing a later test builds again.
pub(super) fn keep(podman: &Podman, image: &str) {
    if !image.starts_with("localhost/") {
        return;
    }
    hold(podman).unwrap_or_else(|e| panic!("{e}"));
    let Ok(id) = podman_ok(podman, &["image", "inspect", "--format", "{{.Id}}", image]) else {
        return;
    };
    let _ = podman.run(&["tag", image, &kept_tag(REPOSITORY, &id)]);
}

/// The tag that keeps the image `id` under `repository`, made now.
pub(crate) fn kept_tag(repository: &str, id: &str) -> String {
    let id = id.trim().trim_start_matches("sha256:");
    format!("{repository}:{}-{}", now(), &id[..id.len().min(12)])
}

/// Seconds since the Unix epoch, the kept tags' clock.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// When the kept tag `tag` was made: `<unix seconds>-<id>`, or `<day>-<id>` as the
/// Docker tests' tags counted before (fewer than seven digits until the year 4700).
fn tagged_at(tag: &str) -> Option<u64> {
    let (time, _) = tag.split_once('-')?;
    let time: u64 = time.parse().ok()?;
    Some(if time < 1_000_000 {
        time.saturating_mul(86_400)
    } else {
        time
    })
}

/// The kept tags of `tags` to remove at `now`: those older than [`KEEP_SECONDS`], those
/// of another shape (nothing else is kept under the repository), and all but the newest
/// [`MAX_KEPT`] of the rest.
pub(crate) fn expired<'a>(tags: impl IntoIterator<Item = &'a str>, now: u64) -> Vec<&'a str> {
    let mut recent = Vec::new();
    let mut gone = Vec::new();
    for tag in tags {
        match tagged_at(tag) {
            Some(at) if now.saturating_sub(at) <= KEEP_SECONDS => recent.push((at, tag)),
            _ => gone.push(tag),
        }
    }
    recent.sort_unstable_by(|a, b| b.cmp(a));
    gone.extend(recent.into_iter().skip(MAX_KEPT).map(|(_, tag)| tag));
    gone
}

/// Removes, in one `podman rmi`, the expired kept tags (see [`expired`]) and the previous
/// scheme's per-process tags; returns how many. Only while no test process holds the
/// lock (see the module).
pub(super) fn sweep(podman: &Podman) -> Result<usize, String> {
    let names = image_names(podman)?;
    remove_images(podman, &to_sweep(&names, now()))
}

/// What [`sweep`] removes out of `names` (every `REPOSITORY:TAG` of the store, a line) at
/// `now`: the previous scheme's tags and the expired kept ones.
fn to_sweep(names: &str, now: u64) -> Vec<String> {
    let mut kept = Vec::new();
    let mut gone = Vec::new();
    for name in names.lines() {
        let Some((repository, tag)) = name.rsplit_once(':') else {
            continue;
        };
        if repository == REPOSITORY {
            kept.push(tag);
        } else if is_legacy_repository(repository) {
            gone.push(name.to_owned());
        }
    }
    gone.extend(
        expired(kept, now)
            .into_iter()
            .map(|tag| format!("{REPOSITORY}:{tag}")),
    );
    gone
}

/// Whether `repository` is one of the previous scheme's: `REPOSITORY-<pid>`.
fn is_legacy_repository(repository: &str) -> bool {
    repository
        .strip_prefix(REPOSITORY)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// The images failed builds left since `since` (Unix seconds), by ID. Podman 4.3 keeps
/// the last step a failed `build --layers` committed as a visible image without a name,
/// its only name ever a made-up `<hash>-tmp`; the end-to-end tests fail builds on purpose
/// (a tampered lock, a failing step), and each such image held a whole tool image's
/// layers once its tests removed their own (1.5 GB after one `cargo xtask ci`).
pub(super) fn failed_builds(podman: &Podman, since: i64) -> Result<Vec<String>, String> {
    let text = listing(
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
    listing(podman, &["images", "--format", "{{.Repository}}:{{.Tag}}"])
}

/// The output of the image listing `podman ARGS`, tried again while the store changes
/// under it.
fn listing(podman: &Podman, args: &[&str]) -> Result<String, String> {
    // Podman 4.3 fails the whole listing when another process removes or writes an image
    // while it reads ("image not known", "layer not known", an image whose "manifest"
    // "does not exist" yet or any more); the next listing no longer sees it. While
    // end-to-end tests build and clean up beside it, three quick tries in a row all
    // failed (ci71): wait a little between tries. The dangling listing of failed builds
    // met it too (ci106).
    let changing = |e: &str| e.contains(" not known") || e.contains("does not exist");
    let mut tries = 1;
    loop {
        match podman_ok(podman, args) {
            Err(e) if tries < 10 && changing(&e) => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podman::BASE_IMAGE;

    /// Serialises the tests that name the base image: Podman 4.3 loses a name when two
    /// processes tag or untag one image at once (seen here: a tag gone that nobody removed).
    static BASE_IMAGE_NAMES: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A tag goes once it is more than a week old, counted in seconds or, as the Docker
    /// tests' earlier tags were, in days; one of another shape goes too.
    #[test]
    fn kept_tags_expire_after_a_week() {
        let now = 2_000_000_000;
        let week = KEEP_SECONDS;
        let (fresh, edge, stale) = (
            format!("{now}-aaa"),
            format!("{}-bbb", now - week),
            format!("{}-ccc", now - week - 1),
        );
        let (day, old_day) = (
            format!("{}-ddd", now / 86_400 - 1),
            format!("{}-eee", now / 86_400 - 8),
        );
        let tags = [&fresh, &edge, &stale, &day, &old_day, &"latest".to_owned()];
        assert_eq!(
            expired(tags.iter().map(|t| t.as_str()), now),
            [stale.as_str(), &old_day, "latest"]
        );
        assert_eq!(expired([], now), Vec::<&str>::new());
    }

    /// Beyond the newest [`MAX_KEPT`] tags, the older ones go.
    #[test]
    fn only_the_newest_tags_stay() {
        let now = 2_000_000_000;
        let tags: Vec<String> = (0..MAX_KEPT + 3)
            .map(|n| format!("{}-{n:03}", now - n as u64))
            .collect();
        let gone = expired(tags.iter().map(String::as_str), now);
        assert_eq!(
            gone,
            tags[MAX_KEPT..]
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
        );
    }

    /// The sweep picks the expired kept tags and the per-process tags of the previous
    /// scheme, nothing else: not a recent kept tag, not another repository's.
    #[test]
    fn the_sweep_picks_expired_and_legacy_tags_only() {
        let names = format!(
            "{REPOSITORY}:1999999999-aaa\n{REPOSITORY}:1000000000-bbb\n{REPOSITORY}-4242:0\n\
             {REPOSITORY}-selftest-1:0\nlocalhost/aibox-test-base:bookworm\n\
             localhost/other:1000000000-ccc\n<none>:<none>\n"
        );
        assert_eq!(
            to_sweep(&names, 2_000_000_000),
            [
                format!("{REPOSITORY}-4242:0"),
                format!("{REPOSITORY}:1000000000-bbb")
            ]
        );
    }

    /// The first holder of a free lock sweeps; while another holds it shared, nobody
    /// sweeps and both hold it.
    #[test]
    fn only_the_first_holder_sweeps() {
        let dir = tempfile::tempdir().unwrap();
        let path = camino::Utf8PathBuf::from_path_buf(dir.path().join(LOCK_FILE)).unwrap();
        let (first, swept) = hold_at(&path, || "swept").unwrap();
        assert_eq!(swept, Some("swept"));
        let (second, swept) = hold_at(&path, || "swept").unwrap();
        assert_eq!(swept, None, "another process held the lock");
        // An exclusive lock is refused while they hold it: the sweep waits for them.
        let probe = fs_err::File::open(&path).unwrap();
        assert!(probe.file().try_lock().is_err());
        drop((first, second));
        assert!(probe.file().try_lock().is_ok());
    }

    /// [`keep`] tags a built image with the time and its id; Podman's own listing
    /// reads as the sweep expects, so an expired tag and a previous-scheme tag of the
    /// base image are picked, and the recent one is not.
    #[test]
    fn kept_tags_are_read_back_from_podman() {
        let _names = BASE_IMAGE_NAMES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let podman = Podman::ready();
        let pid = std::process::id();
        let started = now();
        let image = format!("localhost/aibox-test-keep-selftest:{pid}");
        let (old, legacy) = (
            format!("{REPOSITORY}:1-self{pid}"),
            format!("{REPOSITORY}-9{pid}:0"),
        );
        for tag in [&image, &old, &legacy] {
            assert!(podman.run(&["tag", BASE_IMAGE, tag]).status.success());
        }
        keep(&podman, &image);
        let id = podman_ok(
            &podman,
            &["image", "inspect", "--format", "{{.Id}}", BASE_IMAGE],
        )
        .unwrap();
        let names = image_names(&podman).unwrap();
        let picked = to_sweep(&names, now());
        let suffix = format!("-{}", &id.trim().trim_start_matches("sha256:")[..12]);
        let kept = names
            .lines()
            .find(|n| {
                n.strip_prefix(&format!("{REPOSITORY}:"))
                    .and_then(|tag| tag.strip_suffix(&suffix))
                    .and_then(|at| at.parse::<u64>().ok())
                    .is_some_and(|at| at >= started)
            })
            .unwrap_or_default()
            .to_owned();
        let had_kept = !kept.is_empty();
        // Removes the names this test gave, whatever it found.
        for tag in [&image, &old, &legacy, &kept] {
            let _ = podman.run(&["rmi", tag]);
        }
        assert!(had_kept, "no tag of {suffix} since {started}:\n{names}");
        assert!(picked.contains(&old), "{picked:?}");
        assert!(picked.contains(&legacy), "{picked:?}");
        assert!(!picked.contains(&kept), "{picked:?}");
        assert!(podman.image_exists(BASE_IMAGE));
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
}
