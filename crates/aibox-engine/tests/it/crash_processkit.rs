//! Crash safety of a real-shaped processkit install and upgrade: an apply killed with
//! `SIGKILL` at points spread over the whole run (the pending records, content, the
//! commit point, the marker, the lock) is completed by the next apply to exactly the
//! tree of an uninterrupted run, with no stray temp files; and while it is incomplete,
//! `apply --check` and the integrity check say so.
//!
//! The child is this test binary re-run with `AIBOX_TEST_CRASH_AFTER_WRITES=N` (the
//! writer's debug-build crash hook). Install times and migration ids differ between runs
//! by the clock only, so trees are compared with timestamps masked.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)]

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use aibox_engine::{ApplyOptions, apply};
use aibox_test_support::http::release::SyntheticRelease;
use camino::Utf8Path;

const CHILD_ROOT: &str = "AIBOX_ENGINE_TEST_PK_CHILD_ROOT";
const CHILD_CACHE: &str = "AIBOX_ENGINE_TEST_PK_CHILD_CACHE";
/// Kill points per scenario.
const KILLS: u32 = 20;

/// Entry point of the child process; does nothing unless the crash test spawned it.
#[test]
fn child_entry_point() {
    if let (Ok(root), Ok(cache)) = (std::env::var(CHILD_ROOT), std::env::var(CHILD_CACHE)) {
        apply(
            Utf8Path::new(&root),
            &common::apply_opts(Some(Utf8Path::new(&cache))),
        )
        .unwrap();
    }
}

/// Masks `YYYY-MM-DDTHH:MM:SSZ`, `YYYY-MM-DD HH:MM:SS+00:00` and `YYYYMMDDTHHMMSS`
/// (install times, migration dates and ids).
fn mask_times(text: &str) -> String {
    fn fits(b: &[u8], pattern: &[u8]) -> bool {
        b.len() >= pattern.len()
            && pattern.iter().zip(b).all(|(p, c)| match p {
                b'9' => c.is_ascii_digit(),
                _ => p == c,
            })
    }
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        // Every pattern starts with a digit: copy the run before the next one at once
        // (the trees are megabytes of text, and this runs unoptimised).
        if !b[i].is_ascii_digit() {
            let run = b[i..]
                .iter()
                .position(u8::is_ascii_digit)
                .unwrap_or(b.len() - i);
            out.extend_from_slice(&b[i..i + run]);
            i += run;
        } else if fits(&b[i..], b"9999-99-99 99:99:99+00:00") {
            out.extend_from_slice(b"<time>");
            i += 25;
        } else if fits(&b[i..], b"9999-99-99T99:99:99Z") {
            out.extend_from_slice(b"<time>");
            i += 20;
        } else if fits(&b[i..], b"99999999T999999") {
            out.extend_from_slice(b"<id>");
            i += 15;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every file below `root` (masked path → masked contents), except the apply's lock file.
fn tree(root: &Utf8Path) -> BTreeMap<String, String> {
    let (entries, _) = common::walk_all(root);
    entries
        .into_iter()
        // The apply's OS lock, and the stat cache (inodes and times differ).
        .filter(|rel| rel != ".aibox/apply.lock" && rel != ".aibox/processkit-stat-cache")
        .map(|rel| {
            let text =
                String::from_utf8_lossy(&fs_err::read(root.join(&rel)).unwrap()).into_owned();
            let text = common::mask_checkout(&rel, text);
            (mask_times(&rel), mask_times(&text))
        })
        .collect()
}

fn is_debris(path: &str) -> bool {
    path.contains(".aibox-tmp.") || path.starts_with(".aibox/pending")
}

fn copy_tree(from: &Utf8Path, to: &Utf8Path) {
    let status = Command::new("cp")
        .args(["-a", &format!("{from}/."), to.as_str()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Crash points spread over a run with `total` points: the first few, the last few
/// (commit point, marker, lock), `also`, and evenly between.
fn kill_points(total: u32, also: &[u32]) -> Vec<u32> {
    let mut points: Vec<u32> = (1..=3)
        .chain(total.saturating_sub(5)..=total)
        .chain(also.iter().copied())
        .collect();
    let between = KILLS.saturating_sub(u32::try_from(points.len()).unwrap());
    for k in 1..=between {
        points.push(3 + (total - 8) * k / (between + 1));
    }
    points.retain(|&n| n >= 1 && n <= total);
    points.sort_unstable();
    points.dedup();
    points
}

/// The crash point of the move of the previous snapshot: the fifth, after the two pending
/// records.
const MOVE_POINT: u32 = 5;

/// How a run's crash points differ from two per written file: files that arrive by the
/// move of the previous snapshot are reported as created but not written, and the move
/// itself (when any file moved) is one point, [`MOVE_POINT`].
#[derive(Default)]
struct Moved {
    files: usize,
}

/// Returns (kills, incomplete after recovery).
fn run_matrix(start: &Utf8Path, cache: &Utf8Path, moved: &Moved) -> (u32, u32) {
    // The uninterrupted reference, which also tells how many crash points a run has.
    let (_r, reference) = common::empty_project();
    copy_tree(start, &reference);
    let report = apply(&reference, &common::apply_opts(Some(cache))).unwrap();
    assert!(
        !apply(&reference, &common::apply_opts(Some(cache)))
            .unwrap()
            .changed()
    );
    let expected = tree(&reference);
    let expected_integrity = format!(
        "{:?}",
        aibox_provenance::integrity(reference.as_std_path()).unwrap()
    );
    let written = report
        .files
        .iter()
        .filter(|f| f.action.changes() && f.action != aibox_engine::FileAction::Removed)
        .count();
    // Two points per write (temp complete, renamed) including the two pending records,
    // the commit point, and the snapshot move; removals have none.
    let move_point = (moved.files > 0).then_some(MOVE_POINT);
    let total = u32::try_from(2 * (written - moved.files + 2) + 1).unwrap()
        + u32::from(move_point.is_some());

    let (mut kills, mut incomplete) = (0, 0);
    for n in kill_points(total, move_point.as_slice()) {
        let (_p, project) = common::empty_project();
        copy_tree(start, &project);
        if common::apply_in_child_killed_at(
            &[
                (CHILD_ROOT, project.as_str()),
                (CHILD_CACHE, cache.as_str()),
            ],
            n,
        ) {
            continue;
        }
        kills += 1;
        let after_crash: BTreeMap<String, String> = tree(&project)
            .into_iter()
            .filter(|(p, _)| !is_debris(p))
            .collect();
        if after_crash != expected {
            // Truthful while incomplete.
            let check = apply(
                &project,
                &ApplyOptions {
                    check: true,
                    ..common::apply_opts(Some(cache))
                },
            )
            .unwrap();
            assert!(check.changed(), "kill {n}: `apply --check` says up to date");
            let integrity = aibox_provenance::integrity(project.as_std_path()).unwrap();
            assert_ne!(
                integrity.status,
                aibox_provenance::IntegrityStatus::Healthy,
                "kill {n}: the integrity check says healthy"
            );
            assert_ne!(
                format!("{integrity:?}"),
                expected_integrity,
                "kill {n}: the integrity check cannot tell the difference"
            );
        }
        // Recovery.
        apply(&project, &common::apply_opts(Some(cache))).unwrap();
        let after = tree(&project);
        let stray: Vec<&String> = after.keys().filter(|p| is_debris(p)).collect();
        assert!(stray.is_empty(), "kill {n}: left {stray:?}");
        if after != expected {
            incomplete += 1;
            let missing: Vec<&String> = expected
                .keys()
                .filter(|k| after.get(*k) != expected.get(*k))
                .take(5)
                .collect();
            let extra: Vec<&String> = after
                .keys()
                .filter(|k| !expected.contains_key(*k))
                .take(5)
                .collect();
            eprintln!("kill {n} of {total}: differs: {missing:?}, extra {extra:?}");
            continue;
        }
        // The reference is settled, so an equal tree is too; the integrity check agrees.
        let integrity = aibox_provenance::integrity(project.as_std_path()).unwrap();
        assert_eq!(format!("{integrity:?}"), expected_integrity, "kill {n}");
    }
    (kills, incomplete)
}

#[test]
fn killed_processkit_install_recovers_to_the_uninterrupted_tree() {
    let (_d, releases) = common::empty_project();
    let (_c, cache) = common::empty_project();
    let v1 = common::release_config(
        &releases,
        &SyntheticRelease::processkit_like("v0.28.3", false),
    );
    let (_s, start) = common::empty_project();
    fs_err::write(start.join("aibox.toml"), &v1).unwrap();
    let (kills, incomplete) = run_matrix(&start, &cache, &Moved::default());
    eprintln!("{kills} kills, {incomplete} incomplete after recovery");
    assert!(kills >= KILLS - 2, "only {kills} kills");
    assert_eq!(incomplete, 0);
}

/// New release files are created at their final paths, not through temp files: killed
/// halfway through one, the project holds that file's first bytes at its own path and no
/// temp file; the next apply knows the file for the interrupted run's own (its intent
/// record names it, and it holds a prefix of the release's bytes) and completes it.
#[test]
fn a_new_file_killed_halfway_is_at_its_path_and_completed_by_the_next_apply() {
    let (_d, releases) = common::empty_project();
    let (_c, cache) = common::empty_project();
    let v1 = common::release_config(
        &releases,
        &SyntheticRelease::processkit_like("v0.28.3", false),
    );
    let (_r, reference) = common::empty_project();
    fs_err::write(reference.join("aibox.toml"), &v1).unwrap();
    apply(&reference, &common::apply_opts(Some(&cache))).unwrap();
    let expected = tree(&reference);
    // After the two pending records (two points each), every odd point is the middle of
    // a write: of a new file, half of it is written then.
    let mut found = None;
    for n in (5..80).step_by(2) {
        let (p, project) = common::empty_project();
        fs_err::write(project.join("aibox.toml"), &v1).unwrap();
        let finished = common::apply_in_child_killed_at(
            &[
                (CHILD_ROOT, project.as_str()),
                (CHILD_CACHE, cache.as_str()),
            ],
            n,
        );
        assert!(!finished, "kill point {n} is past the end of the run");
        let now = tree(&project);
        let debris: Vec<&String> = now.keys().filter(|k| k.contains(".aibox-tmp.")).collect();
        let partial = now.iter().find(|(path, text)| {
            path.starts_with("context/")
                && expected
                    .get(*path)
                    .is_some_and(|full| full.len() > text.len() && full.starts_with(*text))
        });
        if let Some((path, _)) = partial {
            assert!(debris.is_empty(), "kill {n}: temp files {debris:?}");
            found = Some((p, project, path.clone()));
            break;
        }
    }
    let (_p, project, path) = found.expect("no kill point left a half-written new file");
    apply(&project, &common::apply_opts(Some(&cache))).unwrap();
    let after = tree(&project);
    assert_eq!(
        after.get(&path),
        expected.get(&path),
        "{path} not completed"
    );
    assert!(after == expected, "the recovered tree differs");
}

/// Two processkit-like releases published for `apply` (v0.28.3, then v0.29.0 with
/// changes), their configurations and a download cache.
struct Two {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    cache: camino::Utf8PathBuf,
    r1: SyntheticRelease,
    r2: SyntheticRelease,
    v1: String,
    v2: String,
}

fn two_releases() -> Two {
    let (d, releases) = common::empty_project();
    let (c, cache) = common::empty_project();
    let (r1, r2) = (
        SyntheticRelease::processkit_like("v0.28.3", false),
        SyntheticRelease::processkit_like("v0.29.0", true),
    );
    let (v1, v2) = (
        common::release_config(&releases, &r1),
        common::release_config(&releases, &r2),
    );
    Two {
        _dirs: (d, c),
        cache,
        r1,
        r2,
        v1,
        v2,
    }
}

#[test]
fn killed_processkit_upgrade_recovers_to_the_uninterrupted_tree() {
    let Two {
        _dirs,
        cache,
        r1,
        r2,
        v1,
        v2,
    } = two_releases();
    // The v1 snapshot moves into place as v2's: its files that v2 has unchanged are not
    // written again.
    let moved = Moved {
        files: r2
            .files
            .iter()
            .filter(|(path, file)| r1.files.get(*path) == Some(file))
            .count(),
    };
    assert!(moved.files > 700, "{} unchanged files", moved.files);
    // An installed v1 with a local edit that must survive (a conflict upstream).
    let (_s, start) = common::empty_project();
    fs_err::write(start.join("aibox.toml"), &v1).unwrap();
    apply(&start, &common::apply_opts(Some(&cache))).unwrap();
    let edited = start.join("context/skills/processkit/skill-finder/SKILL.md");
    assert!(edited.exists());
    fs_err::write(&edited, "my local edit\n").unwrap();
    fs_err::write(start.join("aibox.toml"), &v2).unwrap();
    let (kills, incomplete) = run_matrix(&start, &cache, &moved);
    eprintln!("{kills} kills, {incomplete} incomplete after recovery");
    assert!(kills >= KILLS - 2, "only {kills} kills");
    assert_eq!(incomplete, 0);

    // The old snapshot goes entirely, directories included, and the next apply is a no-op.
    apply(&start, &common::apply_opts(Some(&cache))).unwrap();
    assert!(!start.join("context/templates/processkit/v0.28.3").exists());
    assert!(start.join("context/templates/processkit/v0.29.0").is_dir());
    assert!(
        !apply(&start, &common::apply_opts(Some(&cache)))
            .unwrap()
            .changed()
    );
}

/// v1 installed (its tree kept), then the upgrade to v2 killed amid its content writes
/// (past the pending records and the snapshot's move), v1 pinned again.
struct KilledUpgrade {
    two: Two,
    _dir: tempfile::TempDir,
    project: camino::Utf8PathBuf,
    before: BTreeMap<String, String>,
    /// The integrity check's report on v1's tree.
    healthy: String,
}

/// The integrity check's report on `project`, as text.
fn integrity(project: &Utf8Path) -> String {
    format!(
        "{:?}",
        aibox_provenance::integrity(project.as_std_path()).unwrap()
    )
}

impl KilledUpgrade {
    fn new() -> Self {
        let two = two_releases();
        let (dir, project) = common::empty_project();
        fs_err::write(project.join("aibox.toml"), &two.v1).unwrap();
        apply(&project, &common::apply_opts(Some(&two.cache))).unwrap();
        let k = Self {
            before: tree(&project),
            healthy: integrity(&project),
            two,
            _dir: dir,
            project,
        };
        fs_err::write(k.project.join("aibox.toml"), &k.two.v2).unwrap();
        assert!(!k.apply_killed_at(40), "the upgrade ran to its end");
        assert!(k.project.join(".aibox/pending-processkit.toml").is_file());
        assert_ne!(tree(&k.project), k.before, "the killed run changed nothing");
        fs_err::write(k.project.join("aibox.toml"), &k.two.v1).unwrap();
        k
    }

    /// An apply in a child killed after `n` writes; `true` when it ran to its end.
    fn apply_killed_at(&self, n: u32) -> bool {
        common::apply_in_child_killed_at(
            &[
                (CHILD_ROOT, self.project.as_str()),
                (CHILD_CACHE, self.two.cache.as_str()),
            ],
            n,
        )
    }

    /// The paths whose contents differ from the tree before the upgrade, after an apply.
    fn differs_after_apply(&self) -> Vec<String> {
        apply(&self.project, &common::apply_opts(Some(&self.two.cache))).unwrap();
        let after = tree(&self.project);
        let before = &self.before;
        before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .cloned()
            .collect()
    }
}

/// An upgrade killed halfway, then the previous version pinned again (QA26): the apply
/// undoes what the killed run wrote, from its intent record and its release in the
/// download cache, and ends in the tree the project had before the upgrade, no file of
/// the newer release kept as a local edit; the integrity check agrees.
#[test]
fn pinning_back_after_a_killed_upgrade_restores_the_tree_before_it() {
    let k = KilledUpgrade::new();
    let differs = k.differs_after_apply();
    assert!(differs.is_empty(), "{differs:?}");
    assert_eq!(integrity(&k.project), k.healthy);
}

/// The apply that undoes a killed upgrade killed in turn, at points spread over its own
/// writes: the next apply still ends in the tree before the upgrade. The undoing run's
/// record carries what the first run wrote and it had not restored yet; replaced by the
/// undo's own record alone, those files looked like local edits and stayed.
#[test]
fn an_undo_of_a_killed_upgrade_killed_in_turn_still_restores_the_tree_before_it() {
    let k = KilledUpgrade::new();
    let (_s, saved) = common::empty_project();
    copy_tree(&k.project, &saved);
    let mut undone_at = Vec::new();
    // Kill points spread over the undo's writes, denser at its start (its own record,
    // the first restores and removals; later ones land in the snapshot's rewrite), until
    // it runs to its end.
    let mut n = 0;
    loop {
        n = n * 3 + 2;
        fs_err::remove_dir_all(&k.project).unwrap();
        fs_err::create_dir(&k.project).unwrap();
        copy_tree(&saved, &k.project);
        if k.apply_killed_at(n) {
            break;
        }
        let differs = k.differs_after_apply();
        if let Some(first) = differs.first() {
            undone_at.push((n, differs.len(), first.clone()));
        }
    }
    assert!(
        undone_at.is_empty(),
        "killed at (write, files differing, first): {undone_at:?}"
    );
}

/// The crash hook runs the copies on one thread (its kill points count in one order), so
/// the parallel copies of a real apply are killed here from outside instead: `SIGKILL` at
/// times spread over the writes of an uninterrupted child's run (from its intent record,
/// stored before the first write, to its exit: on a tmpfs the writes are a few
/// milliseconds of a run that is mostly start-up and planning, and kills spread over the
/// whole run all missed them). Wherever the kill lands, the next apply ends in the
/// uninterrupted tree with no stray temp file.
#[test]
fn an_install_killed_at_any_moment_of_its_parallel_copies_recovers() {
    use std::time::Instant;
    const TRIES: u32 = 8;
    let (_d, releases) = common::empty_project();
    let (_c, cache) = common::empty_project();
    let v1 = common::release_config(
        &releases,
        &SyntheticRelease::processkit_like("v0.28.3", false),
    );
    let child = |project: &Utf8Path| {
        common::child_apply(&[
            (CHILD_ROOT, project.as_str()),
            (CHILD_CACHE, cache.as_str()),
        ])
        .env_remove("AIBOX_TEST_CRASH_AFTER_WRITES")
        .spawn()
        .unwrap()
    };
    // The reference, run the way the killed children run (this also fills the store).
    let (_r, reference) = common::empty_project();
    fs_err::write(reference.join("aibox.toml"), &v1).unwrap();
    assert!(child(&reference).wait().unwrap().success());
    // When the writes start (or the run's end, when they were too quick to see).
    let writing = |project: &Utf8Path, running: &mut std::process::Child| {
        let pending = project.join(aibox_engine::records::PENDING_PROCESSKIT);
        while !pending.exists() && running.try_wait().unwrap().is_none() {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        Instant::now()
    };
    let (_t, timed) = common::empty_project();
    fs_err::write(timed.join("aibox.toml"), &v1).unwrap();
    let mut running = child(&timed);
    let started = writing(&timed, &mut running);
    assert!(running.wait().unwrap().success());
    let writes = started.elapsed();
    let expected = tree(&reference);
    assert_eq!(tree(&timed), expected, "two uninterrupted runs agree");

    let mut mid_apply = 0;
    for k in 1..=TRIES {
        let (_p, project) = common::empty_project();
        fs_err::write(project.join("aibox.toml"), &v1).unwrap();
        let mut running = child(&project);
        writing(&project, &mut running);
        std::thread::sleep(writes * k / (TRIES + 1));
        let _ = running.kill();
        let _ = running.wait();
        let after_kill: BTreeMap<String, String> = tree(&project)
            .into_iter()
            .filter(|(p, _)| !is_debris(p))
            .collect();
        let touched = after_kill.len() > 1;
        if touched && after_kill != expected {
            mid_apply += 1;
        }
        apply(&project, &common::apply_opts(Some(&cache))).unwrap();
        let after = tree(&project);
        let stray: Vec<&String> = after.keys().filter(|p| is_debris(p)).collect();
        assert!(
            stray.is_empty(),
            "kill at {k}/{}: left {stray:?}",
            TRIES + 1
        );
        assert!(
            after == expected,
            "kill at {k}/{} of {writes:?}: the recovered tree differs",
            TRIES + 1
        );
    }
    eprintln!("{mid_apply} of {TRIES} kills landed while files were being written");
    assert!(
        mid_apply >= 1,
        "no kill landed during the writes ({writes:?} from the intent record to the exit)"
    );
}

/// QA: with the intent record of a killed apply present, doctor called aibox's own
/// unfinished writes the user's (drift, third-party skills, dozens of out-of-sync files)
/// and `doctor --integrity` said `not-installed` with exit 0. The unfinished apply is the
/// one error, with its fix, and the integrity check says so before anything else.
#[test]
fn doctor_and_the_integrity_check_name_an_unfinished_apply_first() {
    let (_d, releases) = common::empty_project();
    let (_c, cache) = common::empty_project();
    let v1 = common::release_config(
        &releases,
        &SyntheticRelease::processkit_like("v0.28.3", false),
    );
    let (_p, project) = common::empty_project();
    fs_err::write(project.join("aibox.toml"), &v1).unwrap();
    // Past the two pending records, in the middle of the content.
    let finished = common::apply_in_child_killed_at(
        &[
            (CHILD_ROOT, project.as_str()),
            (CHILD_CACHE, cache.as_str()),
        ],
        41,
    );
    assert!(!finished, "the kill point is past the end of the run");
    assert!(project.join(".aibox/pending-processkit.toml").is_file());

    let integrity = aibox_provenance::integrity(project.as_std_path()).unwrap();
    assert_eq!(
        integrity.status,
        aibox_provenance::IntegrityStatus::Interrupted,
        "{integrity:?}"
    );
    assert_eq!(integrity.exit_code(), 1);

    let options = aibox_engine::doctor::DoctorOptions {
        skip_engine: true,
        cache_dir: Some(cache.clone()),
        update_check: aibox_engine::updates::UpdateCheck::Never,
        ..aibox_engine::doctor::DoctorOptions::default()
    };
    let report = aibox_engine::doctor::doctor(&project, &options).unwrap();
    let text = report.render_human();
    assert!(text.contains("aibox::doctor::unfinished_apply"), "{text}");
    assert!(text.contains("run `aibox apply` to finish it"), "{text}");
    assert!(report.summary.errors >= 1, "{text}");
    for derived in [
        "out_of_sync",
        "aibox::doctor::integrity]",
        "skill_review_failed",
        "trusted_sources",
    ] {
        assert!(!text.contains(derived), "{derived}: {text}");
    }

    // Finished by the next apply: the error is gone.
    apply(&project, &common::apply_opts(Some(&cache))).unwrap();
    let text = aibox_engine::doctor::doctor(&project, &options)
        .unwrap()
        .render_human();
    assert!(!text.contains("unfinished_apply"), "{text}");
    assert_eq!(
        aibox_provenance::integrity(project.as_std_path())
            .unwrap()
            .status,
        aibox_provenance::IntegrityStatus::Healthy
    );
}
