//! Property: random local edits, deletions and additions across random upstream changes
//! never lose a local byte, and the run after an upgrade is a no-op.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::common;

use common::{Setup, install, plan};
use proptest::prelude::*;

use aibox_provenance::Sha256;
use aibox_test_support::http::release::SyntheticRelease;

const FILES: usize = 6;
const NEW: usize = 3;

#[derive(Debug, Clone)]
enum Local {
    Keep,
    Edit(Vec<u8>),
    Delete,
}

fn local() -> impl Strategy<Value = Local> {
    prop_oneof![
        Just(Local::Keep),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Local::Edit),
        Just(Local::Delete),
    ]
}

fn path(i: usize) -> String {
    format!("context/artifacts/f{i}.md")
}
fn new_path(j: usize) -> String {
    format!("context/artifacts/n{j}.md")
}

fn release(version: &str, files: &[(String, Vec<u8>)]) -> SyntheticRelease {
    let mut r = SyntheticRelease::minimal(version);
    for (p, data) in files {
        r.files.insert(p.clone(), (data.clone(), 0o644));
    }
    r.restamp();
    r
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn upgrades_never_lose_local_bytes(
        upstream in proptest::collection::vec(0u8..3, FILES),
        upstream_new in proptest::collection::vec(any::<bool>(), NEW),
        locals in proptest::collection::vec(local(), FILES),
        local_new in proptest::collection::vec(proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)), NEW),
    ) {
        let project = tempfile::tempdir().unwrap();
        let store = tempfile::tempdir().unwrap();
        let root = project.path();
        let v1_files: Vec<(String, Vec<u8>)> = (0..FILES).map(|i| (path(i), format!("base {i}\n").into_bytes())).collect();
        let mut v2_files = Vec::new();
        for (i, op) in upstream.iter().enumerate() {
            match op {
                0 => v2_files.push((path(i), format!("base {i}\n").into_bytes())),
                1 => v2_files.push((path(i), format!("upstream {i}\n").into_bytes())),
                _ => {}
            }
        }
        for (j, add) in upstream_new.iter().enumerate() {
            if *add {
                v2_files.push((new_path(j), format!("new upstream {j}\n").into_bytes()));
            }
        }
        let v1 = release("v1.0.0", &v1_files);
        let v2 = release("v2.0.0", &v2_files);
        let setup = Setup { packages: &[], ..Setup::default() };
        install(root, store.path(), &v1, &setup);

        for (i, op) in locals.iter().enumerate() {
            match op {
                Local::Keep => {}
                Local::Edit(bytes) => fs_err::write(root.join(path(i)), bytes).unwrap(),
                Local::Delete => fs_err::remove_file(root.join(path(i))).unwrap(),
            }
        }
        for (j, add) in local_new.iter().enumerate() {
            if let Some(bytes) = add {
                fs_err::write(root.join(new_path(j)), bytes).unwrap();
            }
        }

        let setup2 = Setup { packages: &[], now: "2026-06-01T00:00:00Z", ..Setup::default() };
        // The digests the stat cache records after the upgrade, read from the planned
        // marker and its exceptions, are each decision's own.
        let mut planned = plan(root, store.path(), &v2, &setup2).unwrap();
        let expected: Vec<(String, Sha256)> = planned
            .decisions
            .iter()
            .filter_map(|d| Some((d.path.to_string(), planned.live_after(&d.path)?)))
            .collect();
        let after: Vec<(String, Sha256)> = planned
            .take_live_after()
            .iter()
            .map(|(p, d)| (p.to_owned(), d))
            .collect();
        prop_assert_eq!(after, expected);
        install(root, store.path(), &v2, &setup2);

        let v2_map: std::collections::BTreeMap<_, _> = v2_files.iter().cloned().collect();
        for (i, op) in locals.iter().enumerate() {
            let live = fs_err::read(root.join(path(i))).ok();
            match op {
                Local::Edit(bytes) => prop_assert_eq!(live.as_ref(), Some(bytes), "local edit of f{} lost", i),
                Local::Delete => prop_assert!(live.is_none(), "deleted f{} resurrected", i),
                Local::Keep => prop_assert_eq!(live.as_ref(), v2_map.get(&path(i)), "untouched f{} not at upstream", i),
            }
        }
        for (j, add) in local_new.iter().enumerate() {
            let live = fs_err::read(root.join(new_path(j))).ok();
            if let Some(bytes) = add {
                prop_assert_eq!(live.as_ref(), Some(bytes), "local file n{} lost", j);
            } else {
                prop_assert_eq!(live.as_ref(), v2_map.get(&new_path(j)));
            }
        }

        let again = plan(root, store.path(), &v2, &setup2).unwrap();
        prop_assert!(again.is_noop(), "run after the upgrade must be a no-op");
    }
}
