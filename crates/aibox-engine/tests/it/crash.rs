//! Crash safety: an apply killed at any write leaves every file old or new, and the next
//! apply completes the job.
//!
//! The test re-runs this very test binary as a child process that applies with
//! `AIBOX_TEST_CRASH_AFTER_WRITES=N` (a debug-build-only hook in the writer) and is
//! killed with `SIGKILL` at its N-th crash point; N walks over every point of the run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::collections::BTreeMap;

use aibox_engine::apply;
use camino::Utf8Path;
use common::Fixture;

const CHILD_ENV: &str = "AIBOX_ENGINE_TEST_CHILD_ROOT";

/// Entry point of the child process; does nothing unless the crash test spawned it.
#[test]
fn child_entry_point() {
    if let Ok(root) = std::env::var(CHILD_ENV) {
        apply(Utf8Path::new(&root), &common::apply_opts(None)).unwrap();
    }
}

/// Files allowed to exist besides old and new project files after a kill.
fn is_crash_debris(path: &str) -> bool {
    path.contains(".aibox-tmp.") || path == ".aibox/pending.lock"
}

fn check_old_or_new(
    after_crash: &BTreeMap<String, String>,
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
    n: u32,
) {
    for (path, bytes) in after_crash {
        if is_crash_debris(path) {
            continue;
        }
        let is_old = old.get(path) == Some(bytes);
        let is_new = new.get(path) == Some(bytes);
        assert!(
            is_old || is_new,
            "crash point {n}: {path} is neither old nor new"
        );
    }
}

fn run_crash_matrix(setup: impl Fn(&Fixture), change: impl Fn(&Fixture)) -> u32 {
    // Reference: the same project applied without interruption.
    let reference = Fixture::new();
    setup(&reference);
    change(&reference);
    apply(&reference.root, &common::apply_opts(None)).unwrap();
    let new = reference.snapshot();

    let mut crashes = 0;
    for n in 1.. {
        let fx = Fixture::new();
        setup(&fx);
        change(&fx);
        let old = fx.snapshot();
        if common::apply_in_child_killed_at(&[(CHILD_ENV, fx.root.as_str())], n) {
            assert_eq!(fx.snapshot(), new, "an uninterrupted child apply differs");
            break;
        }
        crashes += 1;
        let after_crash = fx.snapshot();
        check_old_or_new(&after_crash, &old, &new, n);
        // The lock is written last: once it is new, every other file is new too.
        if after_crash.get("aibox.lock") == new.get("aibox.lock")
            && old.get("aibox.lock") != new.get("aibox.lock")
        {
            for (path, bytes) in &new {
                assert_eq!(
                    after_crash.get(path),
                    Some(bytes),
                    "crash point {n}: lock before {path}"
                );
            }
        }
        let had_temp = after_crash.keys().any(|p| p.contains(".aibox-tmp."));
        let report = apply(&fx.root, &common::apply_opts(None)).unwrap();
        assert_eq!(
            !report.removed_temp_files.is_empty(),
            had_temp,
            "crash point {n}"
        );
        assert_eq!(
            fx.snapshot(),
            new,
            "crash point {n}: recovery apply did not complete the job"
        );
        assert!(
            !apply(&fx.root, &common::apply_opts(None))
                .unwrap()
                .changed(),
            "crash point {n}: not settled"
        );
    }
    crashes
}

#[test]
fn first_apply_killed_at_every_write_recovers() {
    let crashes = run_crash_matrix(|_| {}, |_| {});
    // Several generated files, two points each, plus the pending record and the lock.
    assert!(crashes >= 10, "only {crashes} crash points exercised");
}

#[test]
fn updating_apply_killed_at_every_write_recovers() {
    let crashes = run_crash_matrix(
        |fx| {
            apply(&fx.root, &common::apply_opts(None)).unwrap();
        },
        |fx| {
            fx.write(
                "aibox.toml",
                &common::AIBOX_TOML.replace("C.UTF-8", "en_US.UTF-8"),
            );
            fx.write(
                ".aibox-local.toml",
                "[container.environment]\nOTHER = \"1\"\n",
            );
        },
    );
    assert!(crashes >= 4, "only {crashes} crash points exercised");
}
