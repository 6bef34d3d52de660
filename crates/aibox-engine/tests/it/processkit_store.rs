//! The unpacked release store and the pure install plan, through the whole engine: a
//! warm no-op apply needs only the store (no archive, no network, no decompression), a
//! damaged store is refused instead of installed, and `plan` works from what `resolve`
//! scanned.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::common;

use aibox_engine::{ApplyOptions, apply, plan, resolve};
use aibox_test_support::http::release::SyntheticRelease;
use aibox_test_support::http::{Route, Server};
use camino::{Utf8Path, Utf8PathBuf};
use common::{apply_opts, code, empty_project};

const PATH: &str = "/org/processkit/releases/download/v0.0.1/processkit-v0.0.1.tar.gz";

/// A project installing a minimal release served over loopback HTTP (sidecar-verified),
/// with its own download cache.
struct Setup {
    server: Server,
    _project: tempfile::TempDir,
    root: Utf8PathBuf,
    _cache: tempfile::TempDir,
    cache: Utf8PathBuf,
    digest: String,
}

fn setup() -> Setup {
    let server = Server::start().unwrap();
    let digest = common::publish(&server, &SyntheticRelease::minimal("v0.0.1"));
    let (project, root) = empty_project();
    let toml = format!(
        "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\n\n\
         [processkit]\nsource = \"{}\"\nversion = \"v0.0.1\"\n",
        server.url("/org/processkit.git")
    );
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
    let (cache_dir, cache) = empty_project();
    Setup {
        server,
        _project: project,
        root,
        _cache: cache_dir,
        cache,
        digest,
    }
}

impl Setup {
    fn opts(&self) -> ApplyOptions {
        apply_opts(Some(&self.cache))
    }
    fn offline(&self) -> ApplyOptions {
        let mut o = self.opts();
        o.plan.offline = true;
        o
    }
    fn archive(&self) -> Utf8PathBuf {
        self.cache
            .join(format!("archives/sha256-{}.tar.gz", self.digest))
    }
    fn store(&self) -> Utf8PathBuf {
        self.cache.join(format!("unpacked/sha256-{}", self.digest))
    }
}

#[test]
fn a_warm_no_op_apply_needs_only_the_unpacked_store() {
    let s = setup();
    // A dry run diffs a planned copy by reading its verified source.
    let dry = apply(
        &s.root,
        &ApplyOptions {
            dry_run: true,
            ..s.opts()
        },
    )
    .unwrap();
    let roster = dry
        .files
        .iter()
        .find(|f| f.path == "context/team/roster.md")
        .unwrap();
    assert!(roster.diff().unwrap().contains("+# Roster"), "{roster:?}");
    assert!(!s.root.join("context").exists(), "a dry run writes nothing");
    assert!(apply(&s.root, &s.opts()).unwrap().changed());
    assert!(s.store().join("manifest").is_file());
    let hits = s.server.hits().len();

    // The archive is replaced by garbage and the server forgets the release: the store
    // alone serves the no-op, so nothing is decompressed, hashed or downloaded.
    fs_err::write(s.archive(), b"not an archive any more").unwrap();
    s.server.route(PATH, Route::status(404));
    let report = apply(&s.root, &s.offline()).unwrap();
    assert!(!report.changed(), "{:?}", report.files);
    let report = apply(&s.root, &s.opts()).unwrap();
    assert!(!report.changed());
    assert_eq!(s.server.hits().len(), hits, "no request");
    // Offline resolves (doctor, mcp list) count the store as cached.
    assert_eq!(
        resolve(&s.root, &s.offline().plan).unwrap().not_resolved(),
        None
    );
}

#[test]
fn a_damaged_store_is_rebuilt_or_refused_never_installed() {
    let s = setup();
    apply(&s.root, &s.opts()).unwrap();
    let snapshot = s.root.join("context/templates/processkit/v0.0.1");
    let agents = snapshot.join("AGENTS.md");
    let installed = fs_err::read(&agents).unwrap();

    // A store file whose bytes differ from its manifest: the snapshot must be rewritten
    // (its PROVENANCE.toml and AGENTS.md are gone), and the copy of the damaged file is
    // refused.
    fs_err::remove_file(snapshot.join("PROVENANCE.toml")).unwrap();
    fs_err::remove_file(&agents).unwrap();
    let digest = aibox_provenance::Sha256::parse(&s.digest, "test").unwrap();
    let (pack, offset, _) = aibox_provenance::Cache::new(s.cache.as_std_path())
        .stored_range(&digest, "AGENTS.md")
        .unwrap()
        .unwrap();
    aibox_test_support::overwrite_at(&pack, offset, b"\0");
    let err = apply(&s.root, &s.opts()).unwrap_err();
    assert_eq!(code(&err), "aibox::apply::source_changed", "{err:?}");
    // The release path and the pack are named apart: the pack is one file, not a folder.
    assert!(
        err.to_string().contains(&format!(
            "`AGENTS.md` in the unpacked release `{}`",
            pack.display()
        )),
        "{err}"
    );
    assert!(!agents.exists(), "never installed");
    let temps = common::temp_files(&s.root);
    assert!(temps.is_empty(), "{temps:?}");

    // A truncated manifest: the store is dropped and unpacked anew from the cached
    // archive, and the interrupted apply completes.
    let manifest = s.store().join("manifest");
    let text = fs_err::read_to_string(&manifest).unwrap();
    fs_err::write(&manifest, &text[..text.len() / 2]).unwrap();
    let hits = s.server.hits().len();
    apply(&s.root, &s.opts()).unwrap();
    assert_eq!(fs_err::read_to_string(&manifest).unwrap(), text);
    assert_eq!(fs_err::read(&agents).unwrap(), installed);
    assert!(snapshot.join("PROVENANCE.toml").is_file());
    assert_eq!(
        s.server.hits().len(),
        hits,
        "rebuilt from the cached archive"
    );
    let report = aibox_provenance::integrity(s.root.as_std_path()).unwrap();
    assert_eq!(
        report.status,
        aibox_provenance::IntegrityStatus::Healthy,
        "{report:?}"
    );
}

#[test]
fn plan_works_from_the_resolved_scan() {
    let s = setup();
    apply(&s.root, &s.opts()).unwrap();
    let resolved = resolve(&s.root, &s.opts().plan).unwrap();
    let before = plan(&resolved).unwrap();

    // The live install changes after the resolve: the snapshot's PROVENANCE.toml goes,
    // a content file is edited, the marker is removed.
    let snapshot = Utf8Path::new("context/templates/processkit/v0.0.1/PROVENANCE.toml");
    fs_err::remove_file(s.root.join(snapshot)).unwrap();
    fs_err::write(s.root.join("context/team/roster.md"), "edited\n").unwrap();
    fs_err::remove_file(s.root.join("context/.processkit-provenance.toml")).unwrap();

    let after = plan(&resolved).unwrap();
    assert_eq!(after.files, before.files);
    // The marker's bytes are made when written: the same too.
    let marker = |p: &aibox_engine::Plan| {
        let f = p
            .files
            .iter()
            .find(|f| f.path == "context/.processkit-provenance.toml")
            .unwrap();
        p.contents(f).into_owned()
    };
    assert_eq!(marker(&after), marker(&before));
    assert_eq!(after.removals, before.removals);
    assert_eq!(after.lock_text, before.lock_text);
    assert_eq!(after.processkit_intent, before.processkit_intent);

    // A fresh resolve sees the change.
    let fresh = plan(&resolve(&s.root, &s.opts().plan).unwrap()).unwrap();
    assert!(
        fresh
            .files
            .iter()
            .any(|f| f.path.as_str().ends_with(snapshot.as_str())),
        "the snapshot is planned again"
    );
}

#[test]
fn an_edit_after_the_resolve_is_never_overwritten() {
    let s = setup();
    let resolved = resolve(&s.root, &s.opts().plan).unwrap();
    // The plan (from the resolve-time scan) creates `context/team/roster.md`; the user
    // writes their own before the apply runs.
    assert!(
        plan(&resolved)
            .unwrap()
            .files
            .iter()
            .any(|f| f.path == "context/team/roster.md")
    );
    let roster = s.root.join("context/team/roster.md");
    fs_err::create_dir_all(roster.parent().unwrap()).unwrap();
    fs_err::write(&roster, "our own roster\n").unwrap();
    aibox_engine::apply_resolved(&resolved, &s.opts()).unwrap();
    // Resolved again under the lock: the file is a conflict and kept.
    assert_eq!(fs_err::read_to_string(&roster).unwrap(), "our own roster\n");
    assert!(
        s.root.join("context/skills").is_dir(),
        "the rest is installed"
    );
}

/// The install fingerprint (`v2:`) of a release and selection is computed once and
/// remembered in the store: a second project installing the same release records the
/// same value without reading every file again; a malformed memo is ignored.
#[test]
fn the_install_fingerprint_is_remembered_in_the_store() {
    let s = setup();
    apply(&s.root, &s.opts()).unwrap();
    let lock = |root: &Utf8Path| {
        let text = fs_err::read_to_string(root.join("aibox.lock")).unwrap();
        text.lines()
            .find(|l| l.starts_with("processkit_install_hash"))
            .unwrap()
            .to_owned()
    };
    let first = lock(&s.root);
    let memo_dir = s.store().join("memo");
    // Beside the release's catalog (`catalog-v1`), one fingerprint.
    let memos: Vec<_> = fs_err::read_dir(&memo_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("catalog-v1"))
        .collect();
    assert_eq!(memos.len(), 1, "{memos:?}");
    assert!(memo_dir.join("catalog-v1").is_file());
    let remembered = fs_err::read_to_string(&memos[0]).unwrap();
    assert!(first.contains(remembered.trim()), "{first} / {remembered}");

    // A second project with the same release and selection takes the remembered value:
    // proven by planting a different well-formed value, which it then records.
    let planted = format!("v2:{}", "ab".repeat(32));
    fs_err::write(&memos[0], format!("{planted}\n")).unwrap();
    let (_other, other) = empty_project();
    fs_err::copy(s.root.join("aibox.toml"), other.join("aibox.toml")).unwrap();
    apply(&other, &s.opts()).unwrap();
    assert!(lock(&other).contains(&planted), "{}", lock(&other));

    // A malformed memo is ignored and replaced by the computed value.
    fs_err::write(&memos[0], "not a fingerprint\n").unwrap();
    let (_third, third) = empty_project();
    fs_err::copy(s.root.join("aibox.toml"), third.join("aibox.toml")).unwrap();
    apply(&third, &s.opts()).unwrap();
    assert_eq!(lock(&third), first);
    assert_eq!(
        fs_err::read_to_string(&memos[0]).unwrap().trim(),
        remembered.trim()
    );
}

/// A first install of a real-sized release copies its files on several threads: a
/// damaged store file is still refused there, no record names the failed install, no
/// temp file is left, and once the store is whole again the next apply completes it.
#[test]
fn a_damaged_store_file_is_refused_by_the_parallel_copies() {
    let release = SyntheticRelease::processkit_like("v0.28.3", false);
    let (_r, releases) = empty_project();
    let (_c, cache) = empty_project();
    let toml = common::release_config(&releases, &release);
    let digest = aibox_test_support::http::release::sha256_hex(
        &fs_err::read(releases.join(release.archive_name())).unwrap(),
    );
    // A first project fills the store.
    let (_a, first) = empty_project();
    fs_err::write(first.join("aibox.toml"), &toml).unwrap();
    apply(&first, &apply_opts(Some(&cache))).unwrap();

    let damaged = release
        .files
        .keys()
        // Copied, never parsed (a parsed file is refused earlier, by resolve).
        .filter(|p| p.starts_with("context/skills/") && p.ends_with("/references/guide.md"))
        .nth(40)
        .unwrap()
        .clone();
    let store = aibox_provenance::Cache::new(cache.as_std_path());
    let digest = aibox_provenance::Sha256::parse(&digest, "test").unwrap();
    let (pack, offset, _) = store.stored_range(&digest, &damaged).unwrap().unwrap();
    // Every release file is copied into the snapshot (selected skills also live).
    let target = format!("context/templates/processkit/v0.28.3/{damaged}");
    let original = aibox_test_support::overwrite_at(&pack, offset, b"\0");

    let (_b, root) = empty_project();
    fs_err::write(root.join("aibox.toml"), &toml).unwrap();
    let err = apply(&root, &apply_opts(Some(&cache))).unwrap_err();
    assert_eq!(code(&err), "aibox::apply::source_changed", "{err:?}");
    assert!(err.to_string().contains(&damaged), "{err}");
    assert!(!root.join(&target).exists(), "never installed");
    assert!(!root.join("aibox.lock").exists());
    assert!(!root.join("context/.processkit-provenance.toml").exists());
    let temps = common::temp_files(&root);
    assert!(temps.is_empty(), "{temps:?}");

    aibox_test_support::overwrite_at(&pack, offset, &original);
    apply(&root, &apply_opts(Some(&cache))).unwrap();
    let (_, _, size) = store.stored_range(&digest, &damaged).unwrap().unwrap();
    let installed = fs_err::read(root.join(&target)).unwrap();
    assert_eq!(installed.len() as u64, size);
    assert!(installed.starts_with(&original));
    let report = aibox_provenance::integrity(root.as_std_path()).unwrap();
    assert_eq!(
        report.status,
        aibox_provenance::IntegrityStatus::Healthy,
        "{report:?}"
    );

    // A damaged MCP config (read by the resolve's manifest check) is that same damage,
    // named as such, not a problem of the release's MCP manifest.
    let config = release
        .files
        .keys()
        .find(|p| p.ends_with("/mcp/mcp-config.json"))
        .unwrap()
        .clone();
    let (pack, offset, _) = store.stored_range(&digest, &config).unwrap().unwrap();
    aibox_test_support::overwrite_at(&pack, offset, b"\0");
    let (_c2, third) = empty_project();
    fs_err::write(third.join("aibox.toml"), &toml).unwrap();
    let err = apply(&third, &apply_opts(Some(&cache))).unwrap_err();
    assert_eq!(
        code(&err),
        "aibox::provenance::changed_release_file",
        "{err:?}"
    );
    assert!(err.to_string().contains(&config), "{err}");
}

/// The install marker (a line per installed file) is planned as its tables, not its
/// text, and written from them: the plan holds no bytes for it but knows what they are;
/// an unedited marker is left alone, one edited by hand shows in a dry run's diff and is
/// rewritten to the same bytes as before.
#[test]
fn the_marker_is_written_from_its_tables_and_rewritten_when_edited() {
    use aibox_engine::FileAction;
    const MARKER: &str = "context/.processkit-provenance.toml";
    let s = setup();
    apply(&s.root, &s.opts()).unwrap();
    let on_disk = s.root.join(MARKER);
    let written = fs_err::read(&on_disk).unwrap();
    assert!(written.starts_with(b"# aibox-managed install marker"));

    let planned = plan(&resolve(&s.root, &s.opts().plan).unwrap()).unwrap();
    let file = planned.files.iter().find(|f| f.path == MARKER).unwrap();
    assert!(file.contents.is_empty(), "the plan holds no text");
    assert_eq!(&*planned.contents(file), written.as_slice());

    let action = |report: &aibox_engine::ApplyReport| {
        let r = report.files.iter().find(|r| r.path == MARKER).unwrap();
        (r.action, r.diff().map(ToOwned::to_owned))
    };
    assert_eq!(
        action(&apply(&s.root, &s.opts()).unwrap()),
        (FileAction::Unchanged, None)
    );

    fs_err::write(&on_disk, [written.as_slice(), b"# mine\n"].concat()).unwrap();
    let mut dry = s.opts();
    dry.dry_run = true;
    let (act, diff) = action(&apply(&s.root, &dry).unwrap());
    assert_eq!(act, FileAction::Updated);
    assert!(diff.unwrap().contains("-# mine"));
    assert_ne!(
        fs_err::read(&on_disk).unwrap(),
        written,
        "a dry run writes nothing"
    );

    assert_eq!(
        action(&apply(&s.root, &s.opts()).unwrap()).0,
        FileAction::Updated
    );
    assert_eq!(fs_err::read(&on_disk).unwrap(), written);
}
