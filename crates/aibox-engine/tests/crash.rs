//! Crash safety: an apply killed at any write leaves every file old or new, and the next
//! apply completes the job.
//!
//! The test re-runs this very test binary as a child process that applies with
//! `AIBOX_TEST_CRASH_AFTER_WRITES=N` (a debug-build-only hook in the writer) and is
//! killed with `SIGKILL` at its N-th crash point; N walks over every point of the run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};

use aibox_engine::{ApplyOptions, PlanOptions, apply};
use camino::Utf8Path;
use common::Fixture;

const CHILD_ENV: &str = "AIBOX_ENGINE_TEST_CHILD_ROOT";

fn opts() -> ApplyOptions {
    ApplyOptions {
        plan: PlanOptions {
            aibox_version: "0.1.0".into(),
            ..PlanOptions::default()
        },
        ..ApplyOptions::default()
    }
}

/// Entry point of the child process; does nothing unless the crash test spawned it.
#[test]
fn child_entry_point() {
    if let Ok(root) = std::env::var(CHILD_ENV) {
        apply(Utf8Path::new(&root), &opts()).unwrap();
    }
}

/// Runs an apply in a child killed at crash point `n`; returns whether it finished.
fn apply_in_child_killed_at(root: &Utf8Path, n: u32) -> bool {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry_point", "--test-threads=1"])
        .env(CHILD_ENV, root.as_str())
        .env("AIBOX_TEST_CRASH_AFTER_WRITES", n.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    if status.success() {
        return true;
    }
    assert_eq!(
        status.signal(),
        Some(9),
        "child failed instead of being killed: {status:?}"
    );
    false
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
    apply(&reference.root, &opts()).unwrap();
    let new = reference.snapshot();

    let mut crashes = 0;
    for n in 1.. {
        let fx = Fixture::new();
        setup(&fx);
        change(&fx);
        let old = fx.snapshot();
        if apply_in_child_killed_at(&fx.root, n) {
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
        let report = apply(&fx.root, &opts()).unwrap();
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
            !apply(&fx.root, &opts()).unwrap().changed(),
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
            apply(&fx.root, &opts()).unwrap();
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
