//! Resuming an install that was killed while it created release files in place (the
//! engine creates a new file at its final path, not through a temp file): a file that
//! holds a prefix of the bytes the interrupted run recorded it was creating is completed;
//! any other file at such a path stays someone else's (a conflict, kept).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::common;

use aibox_provenance::install::{Action, Class, WriteData};
use aibox_provenance::{InstallPlan, Intent, apply_plan};
use aibox_test_support::http::release::SyntheticRelease;
use common::Setup;

use common::class_of;

/// A project about to get its first install of a generated release: its folder, the
/// release store, the release's section and the first install's plan.
struct FirstInstall {
    project: tempfile::TempDir,
    _store: tempfile::TempDir,
    section: aibox_config::ProcesskitSection,
    first: InstallPlan,
}

fn first_install() -> FirstInstall {
    let project = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let release = SyntheticRelease::generate("v1.0.0", false);
    let section = common::publish(&release, store.path());
    let first = common::plan_section(project.path(), &section, &Setup::default()).unwrap();
    FirstInstall {
        project,
        _store: store,
        section,
        first,
    }
}

#[test]
fn a_file_killed_while_created_in_place_is_completed_when_the_run_resumes() {
    let FirstInstall {
        project,
        _store,
        section,
        first,
    } = first_install();
    let root = project.path();
    let setup = Setup::default();
    // The record the killed run stored before its first write.
    let intent = first
        .intent
        .as_ref()
        .and_then(|i| Intent::parse(&i.render()))
        .expect("a first install has an intent record");
    // Two files the run was creating, each with a few bytes.
    let mut new_files = first.writes.iter().filter_map(|w| match &w.data {
        WriteData::Copy(from) => {
            let bytes = from.read_verified().unwrap();
            (bytes.len() >= 4 && intent.writes.get(w.path.as_str()).unwrap().before.is_none())
                .then(|| (w.path.as_str().to_owned(), bytes))
        }
        WriteData::Bytes(_) => None,
    });
    let (partial, upstream) = new_files.next().unwrap();
    let (foreign, _) = new_files.next().unwrap();
    // Killed halfway through the first; the second holds bytes of someone else.
    let half = &upstream[..upstream.len() / 2];
    for (path, bytes) in [(&partial, half), (&foreign, &b"my own notes\n"[..])] {
        let abs = root.join(path);
        fs_err::create_dir_all(abs.parent().unwrap()).unwrap();
        fs_err::write(&abs, bytes).unwrap();
    }

    // Without the record, both are files aibox did not write: kept as conflicts.
    let fresh = common::plan_section(root, &section, &setup).unwrap();
    assert_eq!(class_of(&fresh, &partial), (Class::Conflict, Action::Keep));
    assert_eq!(class_of(&fresh, &foreign), (Class::Conflict, Action::Keep));

    // Resumed: the half-written file is the run's own and is completed; the other one
    // (not a prefix of what the run was writing) is still kept.
    let resumed = common::plan_section_resuming(root, &section, &setup, &intent).unwrap();
    assert_eq!(
        class_of(&resumed, &partial),
        (Class::NewUpstream, Action::Write)
    );
    assert_eq!(
        class_of(&resumed, &foreign),
        (Class::Conflict, Action::Keep)
    );
    assert!(resumed.writes.iter().any(|w| w.path == partial));
    apply_plan(root, &resumed).unwrap();
    assert_eq!(fs_err::read(root.join(&partial)).unwrap(), upstream);
    assert_eq!(
        fs_err::read(root.join(&foreign)).unwrap(),
        b"my own notes\n"
    );
}

#[test]
fn a_complete_file_with_other_bytes_is_not_taken_for_a_partial_one() {
    let FirstInstall {
        project,
        _store,
        section,
        first,
    } = first_install();
    let root = project.path();
    let setup = Setup::default();
    let intent = first
        .intent
        .as_ref()
        .and_then(|i| Intent::parse(&i.render()))
        .unwrap();
    let (path, upstream) = first
        .writes
        .iter()
        .find_map(|w| match &w.data {
            WriteData::Copy(from) => {
                let bytes = from.read_verified().unwrap();
                (bytes.len() >= 4).then(|| (w.path.clone(), bytes))
            }
            WriteData::Bytes(_) => None,
        })
        .unwrap();
    // The upstream bytes and more, and the first half of them with one byte changed:
    // neither is a prefix of what the run was writing, so neither is the run's.
    let mut longer = upstream.clone();
    longer.extend_from_slice(b"\nmine\n");
    let mut changed = upstream[..upstream.len() / 2].to_vec();
    changed[0] ^= 1;
    for bytes in [longer, changed] {
        let abs = root.join(&path);
        fs_err::create_dir_all(abs.parent().unwrap()).unwrap();
        fs_err::write(&abs, &bytes).unwrap();
        let resumed = common::plan_section_resuming(root, &section, &setup, &intent).unwrap();
        assert_eq!(
            class_of(&resumed, path.as_str()),
            (Class::Conflict, Action::Keep)
        );
    }
}
