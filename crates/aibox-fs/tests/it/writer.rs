//! The writer on a real temp project, through the public API only: the perimeter, path
//! checks, write-if-changed and modes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;

use aibox_fs::{PERIMETER, ProjectRoot, WriteOutcome, Writer};
use camino::{Utf8Path, Utf8PathBuf};

/// A project as users have it: a team file and a local file holding a (fake) token.
const AIBOX_TOML: &str = "[container]\nname = \"demo\"\n";
const LOCAL_TOML: &str =
    "[container.environment]\nGITHUB_TOKEN = \"ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE\"\n";

fn code(err: &dyn miette::Diagnostic) -> String {
    err.code().map(|c| c.to_string()).unwrap_or_default()
}

/// Every file below `root` (with `folders`, every folder too), relative and sorted.
pub(crate) fn walk(root: &Utf8Path, folders: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = Utf8PathBuf::from_path_buf(entry.path()).unwrap();
            let is_dir = entry.file_type().unwrap().is_dir();
            if !is_dir || folders {
                out.push(path.strip_prefix(root).unwrap().to_string());
            }
            if is_dir {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

fn mode(path: &Utf8Path) -> u32 {
    fs_err::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn writer_refuses_paths_outside_the_perimeter() {
    let dir = tempfile::tempdir().unwrap();
    let root_path = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
    fs_err::write(root_path.join("aibox.toml"), AIBOX_TOML).unwrap();
    fs_err::write(root_path.join(".aibox-local.toml"), LOCAL_TOML).unwrap();
    let root = ProjectRoot::open(&root_path).unwrap();
    let mut writer = Writer::new(&root);
    for (path, expected) in [
        ("README.md", "aibox::apply::outside_perimeter"),
        ("aibox.toml", "aibox::apply::outside_perimeter"),
        (".git/config", "aibox::apply::outside_perimeter"),
        (".devcontainer/evil.sh", "aibox::apply::outside_perimeter"),
        ("context/../README.md", "aibox::apply::invalid_path"),
        ("/etc/passwd", "aibox::apply::invalid_path"),
        (".aibox//x", "aibox::apply::invalid_path"),
    ] {
        let err = writer.write(Utf8Path::new(path), b"x", None).unwrap_err();
        assert_eq!(code(&err), expected, "{path}");
    }
    assert_eq!(
        walk(&root_path, false),
        vec![".aibox-local.toml", "aibox.toml"]
    );
    // Inside the perimeter: created, then unchanged, then updated.
    let p = Utf8Path::new(".aibox/notes/x.txt");
    assert_eq!(writer.write(p, b"1", None).unwrap(), WriteOutcome::Created);
    assert_eq!(
        writer.write(p, b"1", None).unwrap(),
        WriteOutcome::Unchanged
    );
    assert_eq!(
        writer.write(p, b"2", Some(0o640)).unwrap(),
        WriteOutcome::Updated
    );
    assert_eq!(mode(&root_path.join(p)), 0o640);
    // A later write without a mode keeps it.
    writer.write(p, b"3", None).unwrap();
    assert_eq!(mode(&root_path.join(p)), 0o640);
    assert!(PERIMETER.contains(&"aibox.lock"));
}

/// `plain_tree` answers only for a folder of folders and regular files;
/// `regular_files_below` lists the regular files of any real folder, leaving out what is
/// not one (a symlink is not followed), and nothing for a symlinked or missing folder.
#[test]
fn tree_listings_take_regular_files_and_never_follow_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(dir.path()).unwrap();
    let tree = root.join(".aibox/snapshots/v1");
    fs_err::create_dir_all(tree.join("context/skills/a")).unwrap();
    fs_err::write(tree.join("PROVENANCE.toml"), "x\n").unwrap();
    fs_err::write(tree.join("context/skills/a/SKILL.md"), "a\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs_err::write(outside.path().join("secret"), "not aibox's\n").unwrap();
    let project = ProjectRoot::open(root).unwrap();
    let rel = Utf8Path::new(".aibox/snapshots/v1");
    let files = vec![
        "PROVENANCE.toml".to_owned(),
        "context/skills/a/SKILL.md".to_owned(),
    ];
    assert_eq!(project.plain_tree(rel).unwrap(), Some(files.clone()));
    assert_eq!(project.regular_files_below(rel).unwrap(), files);

    std::os::unix::fs::symlink(outside.path(), tree.join("context/linked")).unwrap();
    assert_eq!(project.plain_tree(rel).unwrap(), None);
    assert_eq!(project.regular_files_below(rel).unwrap(), files);

    let linked = root.join(".aibox/snapshots/v2");
    std::os::unix::fs::symlink(outside.path(), &linked).unwrap();
    let via_link = Utf8Path::new(".aibox/snapshots/v2");
    assert!(project.regular_files_below(via_link).unwrap().is_empty());
    assert!(
        project
            .regular_files_below(Utf8Path::new(".aibox/snapshots/v3"))
            .unwrap()
            .is_empty()
    );
}

/// A streamed write creates and replaces the file atomically with what its callback
/// wrote, keeps an existing file's mode, leaves the old file and no temp file when the
/// callback fails, and refuses what `write` refuses (a symlinked target, a path outside
/// the perimeter). A cache's write (never fsynced) does all the same.
#[test]
fn streamed_writes_replace_atomically_and_a_failure_keeps_the_old_file() {
    streamed_writes_in(false);
    streamed_writes_in(true);
}

/// A streamed write to `rel`: a cache's when `cache`, else a durable one.
fn streamed(
    writer: &mut Writer<'_>,
    cache: bool,
    rel: &Utf8Path,
    fill: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<WriteOutcome, aibox_fs::WriteError> {
    if cache {
        writer.write_cache_streamed(rel, fill)
    } else {
        writer.write_streamed(rel, None, fill)
    }
}

fn streamed_writes_in(cache: bool) {
    let dir = tempfile::tempdir().unwrap();
    let root_path = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
    fs_err::write(root_path.join("aibox.toml"), AIBOX_TOML).unwrap();
    let root = ProjectRoot::open(&root_path).unwrap();
    let mut writer = Writer::new(&root);
    let rel = Utf8Path::new(".aibox/processkit-stat-cache");
    let lines = |n: usize| {
        move |out: &mut dyn std::io::Write| (0..n).try_for_each(|i| writeln!(out, "line {i}"))
    };
    // Larger than the writer's buffer, so it is flushed more than once.
    let created = streamed(&mut writer, cache, rel, lines(20_000)).unwrap();
    assert_eq!(created, WriteOutcome::Created);
    let text = fs_err::read_to_string(root_path.join(rel)).unwrap();
    assert_eq!(text.lines().count(), 20_000);
    assert!(text.ends_with("line 19999\n"));

    fs_err::set_permissions(root_path.join(rel), std::fs::Permissions::from_mode(0o640)).unwrap();
    let updated = streamed(&mut writer, cache, rel, lines(2)).unwrap();
    assert_eq!(updated, WriteOutcome::Updated);
    assert_eq!(
        fs_err::read_to_string(root_path.join(rel)).unwrap(),
        "line 0\nline 1\n"
    );
    assert_eq!(mode(&root_path.join(rel)), 0o640);

    let err = streamed(&mut writer, cache, rel, |out| {
        writeln!(out, "half of it")?;
        Err(std::io::Error::other("the source went away"))
    })
    .unwrap_err();
    let cause = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(cause.as_deref(), Some("the source went away"), "{err}");
    assert_eq!(
        fs_err::read_to_string(root_path.join(rel)).unwrap(),
        "line 0\nline 1\n"
    );
    assert_eq!(
        walk(&root_path.join(".aibox"), false),
        ["processkit-stat-cache"]
    );

    let outside = streamed(&mut writer, cache, Utf8Path::new("README.md"), lines(1)).unwrap_err();
    assert_eq!(code(&outside), "aibox::apply::outside_perimeter");
    fs_err::remove_file(root_path.join(rel)).unwrap();
    std::os::unix::fs::symlink(root_path.join("aibox.toml"), root_path.join(rel)).unwrap();
    let linked = streamed(&mut writer, cache, rel, lines(1)).unwrap_err();
    assert_eq!(code(&linked), "aibox::apply::symlink");
    assert_eq!(
        fs_err::read_to_string(root_path.join("aibox.toml")).unwrap(),
        AIBOX_TOML
    );
}

/// The write probe (the all-or-nothing check before an apply writes) finds a refusing
/// folder wherever it comes in a path-ordered list: after targets sharing its parent
/// folders (which it remembers from one target to the next), and as the nearest
/// existing folder of a target whose folders are still to be made. It leaves nothing.
#[test]
fn the_write_probe_finds_a_refusing_folder_among_remembered_ones() {
    let dir = tempfile::tempdir().unwrap();
    let root_path = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
    for d in ["context/a/b", "context/a/c", "context/d"] {
        fs_err::create_dir_all(root_path.join(d)).unwrap();
    }
    let root = ProjectRoot::open(&root_path).unwrap();
    let writer = Writer::new(&root);
    let targets: Vec<&Utf8Path> = [
        "context/a/b/x.md",
        "context/a/b/y.md",
        "context/a/c/z.md",
        "context/a/new/deep/n.md",
        "context/d/w.md",
        "context/a/b/again.md",
    ]
    .into_iter()
    .map(Utf8Path::new)
    .collect();
    let before = walk(&root_path, true);
    writer.probe_writable(&targets).unwrap();
    assert_eq!(walk(&root_path, true), before);
    for (refusing, named) in [
        ("context/a/c", "context/a/c/z.md"),
        ("context/a", "context/a/new/deep/n.md"),
        ("context/d", "context/d/w.md"),
    ] {
        let _immutable = aibox_test_support::Immutable::set(root_path.join(refusing));
        let err = writer.probe_writable(&targets).unwrap_err();
        assert!(err.to_string().contains(named), "{refusing}: {err}");
        assert_eq!(walk(&root_path, true), before);
    }
}

/// More folders than the writer remembers as checked (its cache is bounded): files go
/// into each, then into the first ones again, whose folders it mostly has to look at
/// again, and every write lands where it should.
#[test]
fn writes_into_more_folders_than_the_writer_remembers() {
    let dir = tempfile::tempdir().unwrap();
    let root_path = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
    let root = ProjectRoot::open(&root_path).unwrap();
    let mut writer = Writer::new(&root);
    let file = |i: usize, name: &str| Utf8PathBuf::from(format!("context/d{}/{i}/{name}", i % 7));
    for i in 0..6_000 {
        writer.write(&file(i, "a.md"), b"a", None).unwrap();
    }
    for i in 0..50 {
        writer.write(&file(i, "b.md"), b"b", None).unwrap();
    }
    for i in [0, 3, 49, 5_999] {
        assert_eq!(fs_err::read(root_path.join(file(i, "a.md"))).unwrap(), b"a");
    }
    assert_eq!(fs_err::read(root_path.join(file(3, "b.md"))).unwrap(), b"b");
    assert_eq!(walk(&root_path, false).len(), 6_050);
}
