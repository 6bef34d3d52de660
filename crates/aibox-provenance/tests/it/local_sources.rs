//! Local processkit sources are read with limits: kernel pseudo-file systems (`/proc`,
//! `/sys`, `/dev`, also through a symlink) and special files (a FIFO) are refused
//! before anything is opened, so nothing hangs or reads without bound.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::process::Command;

use aibox_test_support::within;

use aibox_config::ProcesskitSection;
use aibox_provenance::ProvenanceError;
use aibox_provenance::extract::{ExtractLimits, read_dir};
use aibox_provenance::source::{FetchOptions, fetch_release};

fn fetch(project: &std::path::Path, source: &str) -> Result<(), ProvenanceError> {
    let section = ProcesskitSection {
        source: Some(source.to_owned()),
        version: Some("v0.0.1".into()),
        allow_unverified: true,
        ..ProcesskitSection::default()
    };
    fetch_release(&section, project, None, &mut FetchOptions::default()).map(|_| ())
}

#[test]
fn pseudo_file_systems_and_special_files_are_refused() {
    let project = tempfile::tempdir().unwrap();
    let fifo = project.path().join("release.tar.gz");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("/proc/self", project.path().join("into-proc")).unwrap();
    let root = project.path().to_owned();
    for (source, needle) in [
        ("/proc", "/proc"),
        ("/sys/kernel", "/sys"),
        ("/dev/zero", "/dev"),
        ("/dev", "/dev"),
        ("into-proc", "/proc"),
        ("release.tar.gz", "special file"),
    ] {
        let root = root.clone();
        let err = within(source, move || fetch(&root, source)).unwrap_err();
        assert!(
            matches!(err, ProvenanceError::Config { .. }),
            "{source}: {err:?}"
        );
        assert!(err.to_string().contains(needle), "{source}: {err}");
    }
}

#[test]
fn a_fifo_next_to_an_archive_or_inside_a_tree_does_not_block() {
    let project = tempfile::tempdir().unwrap();
    // A sidecar that is a FIFO: refused, not waited on.
    fs_err::write(project.path().join("r.tar.gz"), b"not really gzip").unwrap();
    let sidecar = project.path().join("r.tar.gz.sha256");
    assert!(
        Command::new("mkfifo")
            .arg(&sidecar)
            .status()
            .unwrap()
            .success()
    );
    let root = project.path().to_owned();
    let err = within("fifo sidecar", move || fetch(&root, "r.tar.gz")).unwrap_err();
    assert!(err.to_string().contains("sha256"), "{err}");

    let tree = project.path().join("tree");
    fs_err::create_dir_all(&tree).unwrap();
    fs_err::write(tree.join("PROVENANCE.toml"), "").unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(tree.join("pipe"))
            .status()
            .unwrap()
            .success()
    );
    let err = within("fifo in tree", move || {
        read_dir(&tree, &ExtractLimits::default())
    })
    .unwrap_err();
    assert!(err.to_string().contains("special file"), "{err}");
    let err = within("proc tree", || {
        read_dir(
            std::path::Path::new("/proc/self"),
            &ExtractLimits::default(),
        )
    })
    .unwrap_err();
    assert!(err.to_string().contains("/proc"), "{err}");
}

#[test]
fn an_oversized_local_archive_is_refused_by_size() {
    let project = tempfile::tempdir().unwrap();
    fs_err::write(project.path().join("big.tar.gz"), vec![0_u8; 4096]).unwrap();
    let section = ProcesskitSection {
        source: Some("big.tar.gz".to_owned()),
        version: Some("v0.0.1".into()),
        allow_unverified: true,
        ..ProcesskitSection::default()
    };
    let mut opts = FetchOptions {
        limits: ExtractLimits {
            max_total_bytes: 1024,
            ..ExtractLimits::default()
        },
        ..FetchOptions::default()
    };
    let err = fetch_release(&section, project.path(), None, &mut opts).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::ArchiveLimit { .. }),
        "{err:?}"
    );
}
