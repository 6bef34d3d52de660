//! An upgrade builds the new processkit snapshot from the previous one: the old snapshot
//! folder is moved into place and only the files that differ between the two releases
//! are copied. The result is exactly the new release (no file of the old one left), the
//! report is the same as for a file-by-file rewrite, and anything unusual in the old
//! folder (a symlink) makes the apply fall back to copying every file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt as _;

use aibox_engine::{ApplyOptions, FileAction, apply};
use aibox_test_support::http::release::SyntheticRelease;
use camino::{Utf8Path, Utf8PathBuf};
use common::{apply_opts, empty_project};

const SNAPSHOTS: &str = "context/templates/processkit";

/// Two releases as local archives, a project with v1 installed, and its download cache.
struct Upgrade {
    _dirs: Vec<tempfile::TempDir>,
    root: Utf8PathBuf,
    cache: Utf8PathBuf,
    v1: SyntheticRelease,
    v2: SyntheticRelease,
    v2_toml: String,
}

fn installed_v1() -> Upgrade {
    let (releases_dir, releases) = empty_project();
    let (project_dir, root) = empty_project();
    let (cache_dir, cache) = empty_project();
    let v1 = SyntheticRelease::generate("v0.1.0", false);
    let v2 = SyntheticRelease::generate("v0.2.0", true);
    fs_err::write(
        root.join("aibox.toml"),
        common::release_config(&releases, &v1),
    )
    .unwrap();
    apply(&root, &apply_opts(Some(&cache))).unwrap();
    let v2_toml = common::release_config(&releases, &v2);
    Upgrade {
        _dirs: vec![releases_dir, project_dir, cache_dir],
        root,
        cache,
        v1,
        v2,
        v2_toml,
    }
}

impl Upgrade {
    fn opts(&self) -> ApplyOptions {
        apply_opts(Some(&self.cache))
    }

    fn snapshot(&self, release: &SyntheticRelease) -> Utf8PathBuf {
        self.root.join(format!("{SNAPSHOTS}/{}", release.version))
    }

    /// A file both releases have with the same bytes.
    fn unchanged_file(&self) -> String {
        self.v2
            .files
            .iter()
            .find(|(p, f)| self.v1.files.get(*p) == Some(f) && p.ends_with("/guide.md"))
            .map(|(p, _)| p.clone())
            .expect("the releases share a file")
    }

    /// Every file below `dir` (relative path → bytes) and every folder.
    fn tree(dir: &Utf8Path) -> (BTreeMap<String, Vec<u8>>, Vec<String>) {
        let (entries, dirs) = common::walk_all(dir);
        let files = entries
            .into_iter()
            .map(|rel| {
                let bytes = fs_err::read(dir.join(&rel)).unwrap();
                (rel, bytes)
            })
            .collect();
        (files, dirs)
    }

    /// The v2 snapshot holds exactly v2's files, and no folder a fresh install lacks.
    fn assert_exact_v2_snapshot(&self) {
        let (files, dirs) = Self::tree(&self.snapshot(&self.v2));
        let expected: BTreeMap<String, Vec<u8>> = self
            .v2
            .files
            .iter()
            .map(|(p, (bytes, _))| (p.clone(), bytes.clone()))
            .collect();
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            expected.keys().collect::<Vec<_>>()
        );
        assert!(files == expected, "the snapshot's bytes are v2's");
        let mut expected_dirs: Vec<String> = expected
            .keys()
            .flat_map(|p| {
                let parts: Vec<&str> = p.split('/').collect();
                (1..parts.len())
                    .map(|n| parts[..n].join("/"))
                    .collect::<Vec<_>>()
            })
            .collect();
        expected_dirs.sort();
        expected_dirs.dedup();
        assert_eq!(dirs, expected_dirs, "no folder of a dropped file is left");
        assert!(
            !self.snapshot(&self.v1).exists(),
            "the old snapshot is gone"
        );
    }
}

#[test]
fn an_upgrade_moves_the_previous_snapshot_and_copies_only_what_changed() {
    let u = installed_v1();
    let same = u.unchanged_file();
    let inode_before = fs_err::metadata(u.snapshot(&u.v1).join(&same))
        .unwrap()
        .ino();
    fs_err::write(u.root.join("aibox.toml"), &u.v2_toml).unwrap();

    // The dry run reports what the real run does, file for file.
    let dry = apply(
        &u.root,
        &ApplyOptions {
            dry_run: true,
            ..u.opts()
        },
    )
    .unwrap();
    assert!(u.snapshot(&u.v1).is_dir(), "a dry run moves nothing");
    // QA: every file of the moved reference copy was diffed as new (296,000 lines for an
    // upgrade of 25 files). A file the move brings unchanged has no diff; one that
    // changed is diffed against the copy it moves from.
    let diff_of = |path: &str| {
        dry.files
            .iter()
            .find(|f| f.path.as_str() == path)
            .and_then(|f| f.diff().map(str::to_owned))
    };
    let snap = |p: &str| format!("{SNAPSHOTS}/{}/{p}", u.v2.version);
    assert_eq!(diff_of(&snap(&same)), None, "{same}");
    // The previous copy, which the move takes away, is listed without a diff.
    for p in u.v1.files.keys() {
        let old = format!("{SNAPSHOTS}/{}/{p}", u.v1.version);
        assert!(
            dry.files.iter().any(|f| f.path.as_str() == old),
            "{old} listed"
        );
        assert_eq!(diff_of(&old), None, "{old}");
    }
    let changed: Vec<&String> =
        u.v2.files
            .iter()
            .filter(|(p, b)| u.v1.files.get(*p).is_some_and(|old| old.0 != b.0))
            .map(|(p, _)| p)
            .collect();
    assert!(!changed.is_empty());
    for p in changed {
        let d = diff_of(&snap(p));
        assert!(
            d.as_deref()
                .is_some_and(|d| d.contains("\n@@ -") && !d.contains("@@ -0,0 ")),
            "{p}: a diff against the old copy: {d:?}"
        );
    }
    let report = apply(&u.root, &u.opts()).unwrap();
    // (The migration document is named by the clock; the real run lists the records it
    // writes last at the end.)
    let actions = |r: &aibox_engine::ApplyReport| -> Vec<(String, FileAction)> {
        let mut v: Vec<(String, FileAction)> = r
            .files
            .iter()
            .filter(|f| !f.path.starts_with("context/migrations"))
            .map(|f| (f.path.to_string(), f.action))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(actions(&dry), actions(&report));

    // Reported as a new snapshot created and the old one removed, file by file.
    for (release, action, said) in [
        (&u.v2, FileAction::Created, "created"),
        (&u.v1, FileAction::Removed, "removed"),
    ] {
        let reported: BTreeSet<&str> = report
            .files
            .iter()
            .filter(|f| f.action == action)
            .map(|f| f.path.as_str())
            .collect();
        for path in release.files.keys() {
            let p = format!("{SNAPSHOTS}/{}/{path}", release.version);
            assert!(reported.contains(p.as_str()), "{p} reported {said}");
        }
    }
    // Moved, not copied: the unchanged file is the same inode.
    let inode_after = fs_err::metadata(u.snapshot(&u.v2).join(&same))
        .unwrap()
        .ino();
    assert_eq!(inode_before, inode_after, "{same} was copied, not moved");
    u.assert_exact_v2_snapshot();
    assert!(!apply(&u.root, &u.opts()).unwrap().changed());
}

#[test]
fn an_old_snapshot_holding_a_symlink_is_not_moved() {
    let u = installed_v1();
    let same = u.unchanged_file();
    let old = u.snapshot(&u.v1);
    let inode_before = fs_err::metadata(old.join(&same)).unwrap().ino();
    std::os::unix::fs::symlink("/etc/hostname", old.join("context/planted-link")).unwrap();
    fs_err::write(u.root.join("aibox.toml"), &u.v2_toml).unwrap();
    apply(&u.root, &u.opts()).unwrap();
    // Copied file by file: a new inode, and the symlink stays where it was planted.
    let inode_after = fs_err::metadata(u.snapshot(&u.v2).join(&same))
        .unwrap()
        .ino();
    assert_ne!(inode_before, inode_after);
    assert!(
        fs_err::symlink_metadata(old.join("context/planted-link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(!u.snapshot(&u.v2).join("context/planted-link").exists());
    let (files, _) = Upgrade::tree(&u.snapshot(&u.v2));
    assert_eq!(files.len(), u.v2.files.len());
}

#[test]
fn a_snapshot_folder_of_the_version_with_other_contents_is_made_exact() {
    let u = installed_v1();
    fs_err::write(u.root.join("aibox.toml"), &u.v2_toml).unwrap();
    apply(&u.root, &u.opts()).unwrap();
    // As an interrupted upgrade can leave it: other provenance, a file v2 does not have
    // (in a folder of its own), a changed file.
    let snap = u.snapshot(&u.v2);
    fs_err::write(snap.join("PROVENANCE.toml"), "# not this release\n").unwrap();
    fs_err::create_dir_all(snap.join("context/dropped")).unwrap();
    fs_err::write(snap.join("context/dropped/old.md"), "from v1\n").unwrap();
    let same = u.unchanged_file();
    fs_err::write(snap.join(&same), "changed\n").unwrap();
    let report = apply(&u.root, &u.opts()).unwrap();
    assert!(report.files.iter().any(|f| {
        f.path == format!("{SNAPSHOTS}/{}/context/dropped/old.md", u.v2.version)
            && f.action == FileAction::Removed
    }));
    u.assert_exact_v2_snapshot();
    assert!(!apply(&u.root, &u.opts()).unwrap().changed());
}
