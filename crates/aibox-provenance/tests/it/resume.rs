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

/// Every file below `root` (relative path → bytes), the stat cache aside.
fn tree(root: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, fs_err::read(&path).unwrap());
            }
        }
    }
    out
}

/// Does what a run of `plan` killed just before its marker did: every content write
/// and removal, and its migration document (the engine writes in path order:
/// `context/migrations/` comes before the skills), not the marker, the lock or the
/// snapshot (its intent record is all that says what it did). Returns how many files
/// it replaced and created.
fn killed_after_its_writes(root: &std::path::Path, plan: &InstallPlan) -> (usize, usize) {
    let (mut replaced, mut created) = (0, 0);
    let write = |path: &str, bytes: &[u8]| {
        let abs = root.join(path);
        fs_err::create_dir_all(abs.parent().unwrap()).unwrap();
        fs_err::write(&abs, bytes).unwrap();
    };
    for w in &plan.writes {
        let WriteData::Copy(from) = &w.data else {
            continue;
        };
        if root.join(w.path.as_str()).exists() {
            replaced += 1;
        } else {
            created += 1;
        }
        write(w.path.as_str(), &from.read_verified().unwrap());
    }
    for r in &plan.removals {
        fs_err::remove_file(root.join(r)).unwrap();
    }
    for w in plan.migration.as_ref().expect("the upgrade's migration") {
        if let WriteData::Bytes(bytes) = &w.data {
            write(w.path.as_str(), bytes);
        }
    }
    (replaced, created)
}

/// An upgrade killed halfway (some files replaced, some created, some removed; the
/// marker not yet written), then the old version pinned again: the plan puts every file
/// the killed run touched back as the old release has it, and removes the ones it
/// created. Nothing of the new release is kept as a "local edit" (QA26). A file the
/// user edited before the upgrade stays theirs.
#[test]
fn pinning_the_old_version_back_after_a_killed_upgrade_undoes_its_work() {
    let project = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let root = project.path();
    let (v1, v2) = (
        SyntheticRelease::generate("v1.0.0", false),
        SyntheticRelease::generate("v2.0.0", true),
    );
    let (s1, s2) = (
        common::publish(&v1, store.path()),
        common::publish(&v2, store.path()),
    );
    let setup = Setup::default();
    common::install_section(root, &s1, &setup);
    let edited = "context/skills/processkit/processkit-skill-06/SKILL.md";
    fs_err::write(root.join(edited), "my edit\n").unwrap();
    let before = tree(root);

    let upgrade = common::plan_section(root, &s2, &setup).unwrap();
    let intent = upgrade
        .intent
        .as_ref()
        .and_then(|i| Intent::parse(&i.render()))
        .unwrap();
    let (replaced, created) = killed_after_its_writes(root, &upgrade);
    assert!(
        replaced > 5 && created >= 5,
        "{replaced} replaced, {created} created"
    );
    // And one new file it was creating in place when it was killed: half written.
    let (partial, bytes) = upgrade
        .writes
        .iter()
        .find_map(|w| match &w.data {
            WriteData::Copy(from) if !before.contains_key(w.path.as_str()) => {
                let bytes = from.read_verified().unwrap();
                (bytes.len() >= 4).then(|| (w.path.as_str().to_owned(), bytes))
            }
            _ => None,
        })
        .unwrap();
    fs_err::write(root.join(&partial), &bytes[..bytes.len() / 2]).unwrap();

    // Without the record, the killed run's files would be local edits, kept.
    let blind = common::plan_section(root, &s1, &setup).unwrap();
    assert!(
        blind
            .decisions
            .iter()
            .any(|d| d.class == Class::ChangedLocallyOnly && d.path.as_ref() != edited)
    );
    // With it, and the release it was installing at hand (the engine reads it from the
    // download cache): back to v1, exactly.
    let v2_payload = aibox_provenance::fetch_release(
        &s2,
        root,
        None,
        &mut aibox_provenance::FetchOptions::default(),
    )
    .unwrap()
    .payload;
    let hints = aibox_provenance::Hints {
        interrupted: Some(&intent),
        abandoned_release: Some(&v2_payload),
        ..aibox_provenance::Hints::default()
    };
    let back = common::plan_section_with(root, &s1, &setup, hints).unwrap();
    assert!(back.intent.is_some());
    assert!(
        back.undone_migration.is_some(),
        "the killed run's migration"
    );
    apply_plan(root, &back).unwrap();
    common::write_lock(root, &back.lock);
    let after = tree(root);
    let differs: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|p| before.get(*p) != after.get(*p))
        .filter(|p| !p.starts_with("context/.processkit-provenance.toml") && *p != "aibox.lock")
        .collect();
    assert!(differs.is_empty(), "{differs:?}");
    assert_eq!(fs_err::read(root.join(edited)).unwrap(), b"my edit\n");
    // And the next plan is a no-op.
    assert!(common::plan_section(root, &s1, &setup).unwrap().is_noop());
}
