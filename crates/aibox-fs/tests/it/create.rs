//! New files created in place (`Writer::create_verified`): the bytes of a verified source
//! land at their final paths, read once for all of them, with no temp file; an existing
//! file or symlink is never replaced; a source that no longer matches leaves nothing.
//! And the lookups the writer remembers (folders found, folders found missing) stay true
//! as it creates and moves folders.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::sync::Arc;

use aibox_config::CopyFrom;
use aibox_fs::{ProjectRoot, WriteError, Writer};
use camino::{Utf8Path, Utf8PathBuf};
use sha2::Digest as _;

/// A project folder and a verified source file beside it.
struct Fixture {
    _dir: tempfile::TempDir,
    root: Utf8PathBuf,
    source: CopyFrom,
    bytes: Vec<u8>,
}

fn fixture(bytes: &[u8]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
    let root = base.join("project");
    fs_err::create_dir_all(&root).unwrap();
    fs_err::create_dir_all(base.join("release/context")).unwrap();
    fs_err::write(base.join("release/context/guide.md"), bytes).unwrap();
    let source = CopyFrom::new(
        Arc::new(base.join("release").into_std_path_buf()),
        Arc::from("context/guide.md"),
        sha2::Sha256::digest(bytes).into(),
        bytes.len() as u64,
    );
    Fixture {
        _dir: dir,
        root,
        source,
        bytes: bytes.to_vec(),
    }
}

const LIVE: &str = "context/skills/a/guide.md";
const SNAPSHOT: &str = "context/templates/processkit/v1/context/skills/a/guide.md";

#[test]
fn new_files_are_created_in_place_with_their_bytes_and_mode() {
    let f = fixture(&vec![b'x'; 200_000]);
    let root = ProjectRoot::open(&f.root).unwrap();
    let mut writer = Writer::new(&root);
    writer
        .create_verified(
            &[Utf8Path::new(LIVE), Utf8Path::new(SNAPSHOT)],
            &f.source,
            Some(0o755),
        )
        .unwrap();
    for rel in [LIVE, SNAPSHOT] {
        let path = f.root.join(rel);
        assert_eq!(fs_err::read(&path).unwrap(), f.bytes, "{rel}");
        let mode = fs_err::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755, "{rel}");
    }
    // The two files and their folders, nothing else (no temp file).
    let files: Vec<String> = crate::writer::walk(&f.root, true)
        .into_iter()
        .filter(|p| f.root.join(p).is_file())
        .collect();
    assert_eq!(files, [LIVE, SNAPSHOT]);
}

#[test]
fn an_existing_file_or_symlink_is_never_replaced() {
    let f = fixture(b"release bytes\n");
    let root = ProjectRoot::open(&f.root).unwrap();
    let mut writer = Writer::new(&root);
    fs_err::create_dir_all(f.root.join("context/skills/a")).unwrap();
    fs_err::write(f.root.join(LIVE), "mine\n").unwrap();
    let err = writer
        .create_verified(&[Utf8Path::new(LIVE)], &f.source, Some(0o644))
        .unwrap_err();
    assert!(matches!(err, WriteError::Appeared { .. }), "{err:?}");
    assert_eq!(fs_err::read_to_string(f.root.join(LIVE)).unwrap(), "mine\n");

    // A dangling symlink at the target is not followed: nothing appears where it points.
    let outside = f.root.parent().unwrap().join("outside.md");
    let other = "context/skills/a/other.md";
    std::os::unix::fs::symlink(&outside, f.root.join(other)).unwrap();
    let err = writer
        .create_verified(&[Utf8Path::new(other)], &f.source, Some(0o644))
        .unwrap_err();
    assert!(matches!(err, WriteError::Appeared { .. }), "{err:?}");
    assert!(!outside.exists(), "written through the symlink");

    // A symlinked folder on the way is refused before anything is created.
    let elsewhere = f.root.parent().unwrap().join("elsewhere");
    fs_err::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, f.root.join("context/skills/b")).unwrap();
    let err = writer
        .create_verified(
            &[Utf8Path::new("context/skills/b/guide.md")],
            &f.source,
            None,
        )
        .unwrap_err();
    assert!(matches!(err, WriteError::Symlink { .. }), "{err:?}");
    assert!(fs_err::read_dir(&elsewhere).unwrap().next().is_none());
}

#[test]
fn a_source_that_changed_leaves_no_file_behind() {
    let f = fixture(b"verified bytes\n");
    fs_err::write(f.source.path(), b"tampered bytes\n").unwrap();
    let root = ProjectRoot::open(&f.root).unwrap();
    let mut writer = Writer::new(&root);
    let err = writer
        .create_verified(
            &[Utf8Path::new(LIVE), Utf8Path::new(SNAPSHOT)],
            &f.source,
            Some(0o644),
        )
        .unwrap_err();
    assert!(matches!(err, WriteError::SourceChanged { .. }), "{err:?}");
    let files: Vec<String> = crate::writer::walk(&f.root, true)
        .into_iter()
        .filter(|p| !f.root.join(p).is_dir())
        .collect();
    assert!(files.is_empty(), "left {files:?}");
}

/// A folder found missing is remembered so that the paths below it are not looked up
/// one by one; once the writer creates it, or moves a folder there, it is found again.
#[test]
fn folders_found_missing_are_found_again_once_made_or_moved_in() {
    let f = fixture(b"bytes\n");
    let root = ProjectRoot::open(&f.root).unwrap();
    let mut writer = Writer::new(&root);
    assert!(!root.is_file(Utf8Path::new(LIVE)).unwrap());
    writer
        .create_verified(&[Utf8Path::new(LIVE)], &f.source, None)
        .unwrap();
    assert!(root.is_file(Utf8Path::new(LIVE)).unwrap());
    assert_eq!(root.read(Utf8Path::new(LIVE)).unwrap().unwrap(), f.bytes);

    // `v2` is found missing (its parent exists), then a folder is moved there.
    let moved = "context/templates/processkit/v2/context/skills/a/guide.md";
    fs_err::create_dir_all(f.root.join("context/templates/processkit/v1")).unwrap();
    assert!(!root.is_file(Utf8Path::new(moved)).unwrap());
    writer
        .create_verified(&[Utf8Path::new(SNAPSHOT)], &f.source, None)
        .unwrap();
    assert!(
        writer
            .move_dir(
                Utf8Path::new("context/templates/processkit/v1"),
                Utf8Path::new("context/templates/processkit/v2"),
            )
            .unwrap()
    );
    assert!(root.is_file(Utf8Path::new(moved)).unwrap());
    // A folder made by a plain write is found too.
    let written = "context/notes/deep/file.md";
    assert!(!root.is_file(Utf8Path::new(written)).unwrap());
    writer
        .write(Utf8Path::new(written), b"text\n", None)
        .unwrap();
    assert!(root.is_file(Utf8Path::new(written)).unwrap());
}

/// Sources in one pack file are read by their ranges through the pack a writer keeps
/// open, not by opening it again for each copy: after the first copy the pack's name can
/// go and the writer still copies (and checks) the rest, while a new writer finds it
/// missing. A damaged range is still refused.
#[test]
fn packed_sources_are_read_through_the_pack_the_writer_keeps_open() {
    let dir = tempfile::tempdir().unwrap();
    let base = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
    let root = base.join("project");
    fs_err::create_dir_all(&root).unwrap();
    let parts: [&[u8]; 3] = [b"first\n", b"second file\n", b""];
    let pack = base.join("pack");
    fs_err::write(&pack, parts.concat()).unwrap();
    let pack = Arc::new(pack.into_std_path_buf());
    let mut offset = 0;
    let sources: Vec<CopyFrom> = parts
        .iter()
        .enumerate()
        .map(|(i, bytes)| {
            let from = CopyFrom::in_pack(
                Arc::clone(&pack),
                Arc::from(format!("context/{i}.md")),
                sha2::Sha256::digest(bytes).into(),
                bytes.len() as u64,
                offset,
            );
            offset += bytes.len() as u64;
            from
        })
        .collect();
    let project = ProjectRoot::open(&root).unwrap();
    let mut writer = Writer::new(&project);
    writer
        .create_verified(&[Utf8Path::new("context/0.md")], &sources[0], None)
        .unwrap();
    fs_err::remove_file(&*pack).unwrap();
    writer
        .create_verified(&[Utf8Path::new("context/1.md")], &sources[1], None)
        .unwrap();
    writer
        .copy_verified(Utf8Path::new("context/2.md"), &sources[2], None)
        .unwrap();
    for (i, bytes) in parts.iter().enumerate() {
        assert_eq!(
            fs_err::read(root.join(format!("context/{i}.md"))).unwrap(),
            *bytes
        );
    }
    let err = Writer::new(&project)
        .create_verified(&[Utf8Path::new("context/again.md")], &sources[1], None)
        .unwrap_err();
    assert!(
        matches!(&err, WriteError::SourceChanged { reason, .. } if reason.contains("missing")),
        "{err:?}"
    );
    // A damaged byte in a source's range.
    fs_err::write(&*pack, b"first\nsecond fiLe\n").unwrap();
    let err = Writer::new(&project)
        .create_verified(&[Utf8Path::new("context/damaged.md")], &sources[1], None)
        .unwrap_err();
    assert!(matches!(err, WriteError::SourceChanged { .. }), "{err:?}");
    assert!(!root.join("context/damaged.md").exists());
}
