//! `skill review` never reads kernel pseudo-file systems and never blocks on special
//! files: `/proc`, `/sys`, `/dev` (also through a symlink) are refused up front; a FIFO in
//! a skill is reported as a special file without being opened.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::process::Command;

use aibox_test_support::within;

use aibox_skill_review::{ReviewContext, ReviewError, review_skill};
use camino::{Utf8Path, Utf8PathBuf};

#[test]
fn pseudo_file_systems_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let link = Utf8PathBuf::from_path_buf(tmp.path().join("skill")).unwrap();
    std::os::unix::fs::symlink("/proc/self", &link).unwrap();
    for dir in [
        Utf8PathBuf::from("/proc"),
        Utf8PathBuf::from("/sys/kernel"),
        Utf8PathBuf::from("/dev"),
        link,
    ] {
        let shown = dir.to_string();
        let err = within(&shown, move || {
            review_skill(&dir, &ReviewContext::default()).map(|_| ())
        })
        .unwrap_err();
        assert!(
            matches!(err, ReviewError::PseudoFilesystem { .. }),
            "{shown}: {err:?}"
        );
    }
}

#[test]
fn a_fifo_in_a_skill_does_not_block_the_review() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8Path::from_path(tmp.path()).unwrap().join("skill");
    fs_err::create_dir_all(&dir).unwrap();
    fs_err::write(
        dir.join("SKILL.md"),
        "---\nname: skill\ndescription: x\n---\nHello\n",
    )
    .unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(dir.join("pipe").as_str())
            .status()
            .unwrap()
            .success()
    );
    let review = within("fifo", move || {
        review_skill(&dir, &ReviewContext::default())
    });
    assert!(review.is_ok(), "{review:?}");
}
