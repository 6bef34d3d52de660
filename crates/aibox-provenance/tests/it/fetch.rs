//! Verified fetching over a real loopback HTTP server with injected faults, plus local
//! archive and directory sources and the digest-keyed cache.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::Duration;

use aibox_config::ProcesskitSection;
use aibox_provenance::fetch::{HttpOptions, download};
use aibox_provenance::source::{FetchOptions, Verification, fetch_release, tree_digest};
use aibox_provenance::{Cache, ProcesskitLock, ProvenanceError, Sha256};
use aibox_test_support::http::release::{SyntheticRelease, sha256_hex};
use aibox_test_support::http::{Route, Server};

const PATH: &str = "/org/processkit/releases/download/v0.0.1/processkit-v0.0.1.tar.gz";

struct Fixture {
    server: Server,
    archive: Vec<u8>,
    release: SyntheticRelease,
    cache_dir: tempfile::TempDir,
    project: tempfile::TempDir,
}

fn fixture(with_sidecar: bool) -> Fixture {
    let server = Server::start().unwrap();
    let release = SyntheticRelease::minimal("v0.0.1");
    let archive = release.tar_gz();
    server.route(PATH, Route::ok(archive.clone()));
    if with_sidecar {
        server.route(
            &format!("{PATH}.sha256"),
            Route::ok(release.sidecar(&archive)),
        );
    }
    Fixture {
        server,
        archive,
        release,
        cache_dir: tempfile::tempdir().unwrap(),
        project: tempfile::tempdir().unwrap(),
    }
}

impl Fixture {
    fn section(&self) -> ProcesskitSection {
        ProcesskitSection {
            source: Some(self.server.url("/org/processkit.git")),
            version: Some("v0.0.1".into()),
            ..ProcesskitSection::default()
        }
    }
    fn opts(&self) -> FetchOptions<'static> {
        FetchOptions {
            cache: Some(Cache::new(self.cache_dir.path())),
            http: fast_http(),
            ..FetchOptions::default()
        }
    }
    fn cached_files(&self) -> usize {
        fs_err::read_dir(self.cache_dir.path().join("archives")).map_or(0, Iterator::count)
    }
}

fn fast_http() -> HttpOptions {
    HttpOptions {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_millis(400),
        overall_timeout: Duration::from_secs(5),
        max_bytes: 1024 * 1024,
        max_redirects: 3,
        extra_ca_pem: None,
    }
}

#[test]
fn sidecar_verified_download_is_cached_and_reused_offline() {
    let f = fixture(true);
    let mut seen = 0u64;
    let mut cb = |p: aibox_provenance::Progress| seen = p.received;
    let mut opts = FetchOptions {
        progress: Some(&mut cb),
        ..f.opts()
    };
    let r = fetch_release(&f.section(), f.project.path(), None, &mut opts).unwrap();
    drop(opts);
    assert_eq!(
        seen,
        f.archive.len() as u64,
        "progress reached the full size"
    );
    assert_eq!(r.verification, Verification::Sidecar);
    assert_eq!(r.version, "v0.0.1");
    assert_eq!(r.digest.to_hex(), sha256_hex(&f.archive));
    assert_eq!(r.payload.files.len(), f.release.files.len());
    assert_eq!(f.cached_files(), 1);

    // Second run with the lock as pin: served from the cache, no request at all.
    let lock = locked(&f, &r);
    let hits = f.server.hits().len();
    let again = fetch_release(&f.section(), f.project.path(), Some(&lock), &mut f.opts()).unwrap();
    assert_eq!(
        again.verification,
        Verification::Sidecar,
        "as first established"
    );
    assert_eq!(
        f.server.hits().len(),
        hits,
        "cache hit must not touch the network"
    );

    // The unpacked store alone serves a warm run: the archive is not read (nor
    // decompressed) at all, so a damaged archive goes unnoticed and no request is made.
    let cached = f
        .cache_dir
        .path()
        .join("archives")
        .join(format!("sha256-{}.tar.gz", r.digest));
    fs_err::write(&cached, b"tampered").unwrap();
    let warm = fetch_release(&f.section(), f.project.path(), Some(&lock), &mut f.opts()).unwrap();
    assert_eq!(warm.payload, r.payload);
    assert_eq!(
        f.server.hits().len(),
        hits,
        "served from the unpacked store"
    );

    // Without the store, a corrupted archive is detected, discarded and re-downloaded.
    let store = Cache::new(f.cache_dir.path()).unpacked_path(&r.digest);
    fs_err::remove_dir_all(&store).unwrap();
    let third = fetch_release(&f.section(), f.project.path(), Some(&lock), &mut f.opts()).unwrap();
    assert_eq!(third.digest, r.digest);
    assert_eq!(f.server.hit_count(PATH), 2);
    assert_eq!(fs_err::read(&cached).unwrap(), f.archive);
    assert!(store.join("manifest").is_file(), "unpacked again");
}

/// A new project without a pin (no `sha256`, no lock) asks only for the sidecar when
/// the release is already cached under the digest it names: from the unpacked store, or
/// from the cached archive alone; a damaged archive is downloaded again.
#[test]
fn unpinned_release_cached_under_the_sidecar_digest_is_not_downloaded_again() {
    let f = fixture(true);
    let sidecar = format!("{PATH}.sha256");
    let first = fetch_release(&f.section(), f.project.path(), None, &mut f.opts()).unwrap();
    assert_eq!(f.server.hit_count(PATH), 1);
    assert_eq!(f.server.hit_count(&sidecar), 1);

    // Another project, no pin and no lock: the sidecar only.
    let other = tempfile::tempdir().unwrap();
    let again = fetch_release(&f.section(), other.path(), None, &mut f.opts()).unwrap();
    assert_eq!(f.server.hit_count(PATH), 1, "archive downloaded again");
    assert_eq!(f.server.hit_count(&sidecar), 2);
    assert_eq!(again.digest, first.digest);
    assert_eq!(again.verification, Verification::Sidecar);
    assert_eq!(again.payload, first.payload);

    // Without the unpacked store, the cached archive serves it (unpacked again).
    let cache = Cache::new(f.cache_dir.path());
    let store = cache.unpacked_path(&first.digest);
    fs_err::remove_dir_all(&store).unwrap();
    let from_archive = fetch_release(&f.section(), other.path(), None, &mut f.opts()).unwrap();
    assert_eq!(f.server.hit_count(PATH), 1, "archive downloaded again");
    assert_eq!(from_archive.payload.files.len(), first.payload.files.len());
    assert!(store.join("manifest").is_file(), "unpacked again");

    // A damaged cached archive (and no store) is a miss: downloaded and replaced.
    fs_err::remove_dir_all(&store).unwrap();
    let archive = cache.archive_path(&first.digest);
    fs_err::write(&archive, b"tampered").unwrap();
    let repaired = fetch_release(&f.section(), other.path(), None, &mut f.opts()).unwrap();
    assert_eq!(repaired.digest, first.digest);
    assert_eq!(f.server.hit_count(PATH), 2);
    assert_eq!(fs_err::read(&archive).unwrap(), f.archive);

    // A sidecar naming another digest is not served from the cache: the download is
    // checked against it and refused.
    f.server.route(
        &sidecar,
        Route::ok(format!("{}  processkit-v0.0.1.tar.gz\n", "ab".repeat(32))),
    );
    let refused = fetch_release(&f.section(), other.path(), None, &mut f.opts());
    assert!(
        refused.is_err(),
        "a mismatching sidecar must refuse the release"
    );
    assert_eq!(f.server.hit_count(PATH), 3);
}

#[test]
fn a_damaged_unpacked_store_is_rebuilt_or_refused_never_installed() {
    let f = fixture(true);
    let r = fetch_release(&f.section(), f.project.path(), None, &mut f.opts()).unwrap();
    let lock = locked(&f, &r);
    let cache = Cache::new(f.cache_dir.path());
    let store = cache.unpacked_path(&r.digest);
    let manifest = store.join("manifest");
    let text = fs_err::read_to_string(&manifest).unwrap();
    let hits = f.server.hits().len();

    // A truncated manifest (no trailer) and a missing one: the store is dropped and
    // rebuilt from the cached archive, without the network.
    for damage in [Some(&text[..text.len() / 2]), None] {
        match damage {
            Some(cut) => fs_err::write(&manifest, cut).unwrap(),
            None => fs_err::remove_file(&manifest).unwrap(),
        }
        let again =
            fetch_release(&f.section(), f.project.path(), Some(&lock), &mut f.opts()).unwrap();
        assert_eq!(again.payload, r.payload);
        assert_eq!(fs_err::read_to_string(&manifest).unwrap(), text, "rebuilt");
        assert_eq!(f.server.hits().len(), hits);
    }

    // A pack shorter than the manifest's files, and a store of the earlier tree
    // layout: dropped and rebuilt from the cached archive, without the network.
    let pack = store.join("pack");
    let bytes = fs_err::read(&pack).unwrap();
    fs_err::write(&pack, &bytes[..bytes.len() - 1]).unwrap();
    let again = fetch_release(&f.section(), f.project.path(), Some(&lock), &mut f.opts()).unwrap();
    assert_eq!(again.payload, r.payload);
    assert_eq!(fs_err::read(&pack).unwrap(), bytes, "rebuilt");
    fs_err::remove_file(&pack).unwrap();
    fs_err::create_dir_all(store.join("tree")).unwrap();
    fs_err::write(
        &manifest,
        text.replace("aibox-unpacked-release 2", "aibox-unpacked-release 1"),
    )
    .unwrap();
    fetch_release(&f.section(), f.project.path(), Some(&lock), &mut f.opts()).unwrap();
    assert!(!store.join("tree").exists(), "the old layout is removed");
    assert_eq!(fs_err::read(&pack).unwrap(), bytes, "rebuilt");
    assert_eq!(f.server.hits().len(), hits);

    // A stored file whose bytes no longer match the manifest is refused when read.
    let (pack, offset, size) = cache
        .stored_range(&r.digest, "PROVENANCE.toml")
        .unwrap()
        .unwrap();
    assert!(size > 0);
    aibox_test_support::overwrite_at(&pack, offset, b"\0");
    let err =
        fetch_release(&f.section(), f.project.path(), Some(&lock), &mut f.opts()).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::ChangedReleaseFile { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("PROVENANCE.toml"), "{err}");

    // A leftover staging folder of a dead process is removed by the next unpack.
    fs_err::remove_dir_all(&store).unwrap();
    let stale = f.cache_dir.path().join("unpacked/.staging-999999999-x");
    fs_err::create_dir_all(&stale).unwrap();
    fs_err::write(stale.join("pack"), "partial").unwrap();
    fetch_release(&f.section(), f.project.path(), Some(&lock), &mut f.opts()).unwrap();
    assert!(!stale.exists());

    // So is a download a killed run left (QA26), when the next run downloads; one of a
    // running process (pid 1) stays.
    fs_err::remove_dir_all(&store).unwrap();
    let archives = f.cache_dir.path().join("archives");
    for entry in fs_err::read_dir(&archives).unwrap() {
        fs_err::remove_file(entry.unwrap().path()).unwrap();
    }
    let (dead, running) = (
        archives.join(".download-999999999-x"),
        archives.join(".download-1-x"),
    );
    fs_err::write(&dead, "partial").unwrap();
    fs_err::write(&running, "in progress").unwrap();
    let hits = f.server.hits().len();
    fetch_release(&f.section(), f.project.path(), Some(&lock), &mut f.opts()).unwrap();
    assert_eq!(f.server.hits().len(), hits + 1, "downloaded again");
    assert!(!dead.exists());
    assert!(running.exists());
}

#[test]
fn a_refused_archive_leaves_no_unpacked_store() {
    use aibox_test_support::http::release::{Hostile, hostile_archive};
    let f = fixture(false);
    for kind in [Hostile::DotDot, Hostile::SizeBomb, Hostile::Symlink] {
        let bad = hostile_archive(kind);
        f.server.route(PATH, Route::ok(bad.clone()));
        let section = ProcesskitSection {
            sha256: Some(sha256_hex(&bad)),
            ..f.section()
        };
        let err = fetch_release(&section, f.project.path(), None, &mut f.opts()).unwrap_err();
        assert!(
            matches!(
                err,
                ProvenanceError::UnsafeEntry { .. } | ProvenanceError::ArchiveLimit { .. }
            ),
            "{kind:?}: {err:?}"
        );
        let unpacked = f.cache_dir.path().join("unpacked");
        let left: Vec<_> = fs_err::read_dir(&unpacked)
            .map(|d| d.map(|e| e.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{kind:?}: {left:?}");
        assert_eq!(
            f.cached_files(),
            0,
            "{kind:?}: a refused archive is not cached"
        );
    }
}

#[test]
fn missing_sidecar_without_pin_fails_and_caches_nothing() {
    let f = fixture(false);
    let err = fetch_release(&f.section(), f.project.path(), None, &mut f.opts()).unwrap_err();
    assert!(matches!(err, ProvenanceError::NoDigest { .. }), "{err}");
    assert_eq!(f.cached_files(), 0);
    // Only asked whether it exists (one `HEAD`), never downloaded into the cache.
    assert!(f.server.hit_count(PATH) <= 1, "archive downloaded");
}

#[test]
fn allow_unverified_is_reported_and_never_cached() {
    let f = fixture(false);
    let section = ProcesskitSection {
        allow_unverified: true,
        ..f.section()
    };
    let r = fetch_release(&section, f.project.path(), None, &mut f.opts()).unwrap();
    assert_eq!(r.verification, Verification::Unverified);
    assert_eq!(f.cached_files(), 0);
}

#[test]
fn wrong_digests_fail_hard() {
    let f = fixture(true);
    let wrong = "0".repeat(64);
    let section = ProcesskitSection {
        sha256: Some(wrong.clone()),
        ..f.section()
    };
    let err = fetch_release(&section, f.project.path(), None, &mut f.opts()).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::DigestMismatch { .. }),
        "{err}"
    );
    assert_eq!(f.cached_files(), 0);

    // A sidecar that disagrees with the archive.
    f.server.route(
        &format!("{PATH}.sha256"),
        Route::ok(format!("{wrong}  processkit-v0.0.1.tar.gz\n")),
    );
    let err = fetch_release(&f.section(), f.project.path(), None, &mut f.opts()).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::DigestMismatch { .. }),
        "{err}"
    );
    assert_eq!(f.cached_files(), 0);

    // A malformed sidecar.
    f.server
        .route(&format!("{PATH}.sha256"), Route::ok("not a digest\n"));
    let err = fetch_release(&f.section(), f.project.path(), None, &mut f.opts()).unwrap_err();
    assert!(matches!(err, ProvenanceError::Sidecar { .. }), "{err}");

    // A pin that is not a digest.
    let section = ProcesskitSection {
        sha256: Some("abc".into()),
        ..f.section()
    };
    let err = fetch_release(&section, f.project.path(), None, &mut f.opts()).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::InvalidDigest { .. }),
        "{err}"
    );
}

#[test]
fn a_replaced_release_does_not_match_the_lock() {
    let f = fixture(true);
    let lock = ProcesskitLock {
        source: f.section().source.unwrap(),
        version: "v0.0.1".into(),
        src_path: None,
        release_asset_sha256: Some(Sha256::of(b"the archive installed last time")),
        verification: Verification::Sidecar,
        installed_at: "2026-01-01T00:00:00Z".into(),
        processkit_install_hash: None,
    };
    // The server's archive and sidecar agree with each other, but not with the lock.
    let err =
        fetch_release(&f.section(), f.project.path(), Some(&lock), &mut f.opts()).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::DigestMismatch { .. }),
        "{err}"
    );
    assert_eq!(f.cached_files(), 0);
    // A different version is not bound by that lock entry.
    let mut other = lock.clone();
    other.version = "v0.0.0".into();
    fetch_release(&f.section(), f.project.path(), Some(&other), &mut f.opts()).unwrap();
}

#[test]
fn http_faults() {
    let server = Server::start().unwrap();
    server.route("/404", Route::status(404));
    server.route("/500", Route::status(500));
    server.route("/loop-a", Route::redirect("/loop-b"));
    server.route("/loop-b", Route::redirect("/loop-a"));
    server.route("/hop", Route::redirect("/ok"));
    server.route("/ok", Route::ok("payload"));
    server.route("/slow", Route::ok("late").slow(Duration::from_millis(1500)));
    server.route("/truncated", Route::ok(vec![7u8; 10_000]).truncated(100));
    server.route("/big", Route::ok(vec![0u8; 2 * 1024 * 1024]));
    server.route("/insecure", Route::redirect("http://example.invalid/x"));
    let opts = fast_http();
    let get = |p: &str| download(&server.url(p), &opts, None);

    assert!(matches!(
        get("/404").unwrap_err(),
        ProvenanceError::HttpStatus { status: 404, .. }
    ));
    let e500 = get("/500").unwrap_err();
    assert!(
        matches!(e500, ProvenanceError::HttpStatus { status: 500, .. }),
        "{e500:?}"
    );
    // A server fault is not explained as a missing release.
    let help = miette::Diagnostic::help(&e500).unwrap().to_string();
    assert!(
        help.contains("server failed") && !help.contains("version"),
        "{help}"
    );
    assert!(matches!(
        get("/loop-a").unwrap_err(),
        ProvenanceError::Redirects { limit: 3, .. }
    ));
    let ok = get("/hop").unwrap();
    assert_eq!(ok.bytes, b"payload");
    assert_eq!(ok.digest, Sha256::of(b"payload"));
    assert!(ok.final_url.ends_with("/ok"));
    let truncated = get("/truncated").unwrap_err();
    assert!(
        matches!(truncated, ProvenanceError::Http { .. }),
        "{truncated:?}"
    );
    assert!(!truncated.to_string().contains("timeout"), "{truncated}");
    let big = get("/big").unwrap_err();
    assert!(matches!(big, ProvenanceError::TooLarge { .. }), "{big:?}");
    assert!(matches!(
        get("/insecure").unwrap_err(),
        ProvenanceError::InsecureUrl { .. }
    ));
    assert!(matches!(
        download("http://example.invalid/x", &opts, None).unwrap_err(),
        ProvenanceError::InsecureUrl { .. }
    ));
    // Last: the single-threaded server stays busy while it sleeps.
    let slow = get("/slow").unwrap_err();
    // The timeout names the limit and its duration, not just "timeout: global".
    let text = format!("{slow:?}");
    assert!(text.contains("timed out"), "{text}");
    assert!(text.contains("0.4 s") || text.contains("5.0 s"), "{text}");
}

/// A body of many chunks is hashed whole and in order, whether or not its length was
/// announced (the hash runs on a helper thread that the chunks are handed to, reusing
/// their buffers); without an announced length the size cap holds while streaming.
#[test]
fn long_bodies_are_hashed_whole_and_capped_while_streaming() {
    let server = Server::start().unwrap();
    // Not a multiple of any chunk size, and no two chunks alike: a chunk hashed twice,
    // dropped or swapped changes the digest.
    let long: Vec<u8> = (0..900_001u32)
        .map(|i| u8::try_from((i * 7 + i / 65_536) % 251).unwrap())
        .collect();
    server.route("/long", Route::ok(long.clone()));
    server.route("/long-open", Route::ok(long.clone()).unannounced());
    server.route(
        "/big-open",
        Route::ok(vec![1u8; 3 * 1024 * 1024]).unannounced(),
    );
    let opts = fast_http();
    for path in ["/long", "/long-open"] {
        let got = download(&server.url(path), &opts, None).unwrap();
        assert!(got.bytes == long, "{path}: the body changed");
        assert_eq!(got.digest, Sha256::of(&long), "{path}");
    }
    let mut seen = Vec::new();
    let mut progress = |p: aibox_provenance::Progress| seen.push(p.received);
    let big = download(&server.url("/big-open"), &opts, Some(&mut progress)).unwrap_err();
    assert!(matches!(big, ProvenanceError::TooLarge { .. }), "{big:?}");
    // Stopped at the first chunk past the cap, and nothing past it was reported saved.
    assert!(
        seen.last().is_some_and(|&n| n <= opts.max_bytes),
        "{:?}",
        seen.last()
    );
}

#[test]
fn release_404_is_a_clear_error() {
    let f = fixture(true);
    let section = ProcesskitSection {
        version: Some("v9.9.9".into()),
        ..f.section()
    };
    let err = fetch_release(&section, f.project.path(), None, &mut f.opts()).unwrap_err();
    // The sidecar 404s, and so does the asset: the version does not exist (not a
    // missing digest, and no `allow_unverified` advice).
    assert!(
        matches!(err, ProvenanceError::HttpStatus { status: 404, .. }),
        "{err}"
    );
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(help.contains("does not exist"), "{help}");
    assert!(!help.contains("allow_unverified"), "{help}");
    let section = ProcesskitSection {
        sha256: Some("1".repeat(64)),
        ..section
    };
    let err = fetch_release(&section, f.project.path(), None, &mut f.opts()).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::HttpStatus { status: 404, .. }),
        "{err}"
    );
}

#[test]
fn local_archive_and_directory_sources() {
    let project = tempfile::tempdir().unwrap();
    let release = SyntheticRelease::minimal("v0.0.1");
    let archive = release.tar_gz();
    let name = release.archive_name();
    fs_err::write(project.path().join(&name), &archive).unwrap();
    let section = ProcesskitSection {
        source: Some(name.clone()),
        ..ProcesskitSection::default()
    };
    let mut opts = FetchOptions::default();
    let err = fetch_release(&section, project.path(), None, &mut opts).unwrap_err();
    assert!(matches!(err, ProvenanceError::NoDigest { .. }), "{err}");
    // A sidecar naming another file is rejected.
    fs_err::write(
        project.path().join(format!("{name}.sha256")),
        format!("{}  other.tar.gz\n", sha256_hex(&archive)),
    )
    .unwrap();
    let err = fetch_release(&section, project.path(), None, &mut opts).unwrap_err();
    assert!(matches!(err, ProvenanceError::Sidecar { .. }), "{err}");
    fs_err::write(
        project.path().join(format!("{name}.sha256")),
        release.sidecar(&archive),
    )
    .unwrap();
    let r = fetch_release(&section, project.path(), None, &mut opts).unwrap();
    assert_eq!(
        (r.version.as_str(), r.verification),
        ("v0.0.1", Verification::Sidecar)
    );

    release.write_dir(&project.path().join("pack")).unwrap();
    let section = ProcesskitSection {
        source: Some("pack".into()),
        ..ProcesskitSection::default()
    };
    let err = fetch_release(&section, project.path(), None, &mut opts).unwrap_err();
    let ProvenanceError::NoDigest { computed, .. } = &err else {
        panic!("{err}")
    };
    let section = ProcesskitSection {
        sha256: Some(computed.clone()),
        ..section
    };
    let r = fetch_release(&section, project.path(), None, &mut opts).unwrap();
    assert_eq!(r.verification, Verification::Pinned);
    assert_eq!(r.version, "v0.0.1", "version from PROVENANCE.toml");
    assert_eq!(tree_digest(&r.payload).to_hex(), *computed);
    // Hashed line by line, it is the digest of the whole `sha256sum`-style listing.
    let mut listing = String::new();
    for (path, f) in r.payload.files.iter() {
        listing.push_str(&f.sha256.to_hex());
        listing.push_str("  ");
        listing.push_str(path);
        listing.push('\n');
    }
    assert_eq!(
        tree_digest(&r.payload),
        aibox_provenance::Sha256::of(listing.as_bytes())
    );

    // An extra file not listed in PROVENANCE.toml changes the digest and fails the layout check.
    fs_err::write(project.path().join("pack/context/extra.md"), "x").unwrap();
    let err = fetch_release(&section, project.path(), None, &mut opts).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::DigestMismatch { .. }),
        "{err}"
    );
    let section = ProcesskitSection {
        sha256: None,
        allow_unverified: true,
        ..section
    };
    let err = fetch_release(&section, project.path(), None, &mut opts).unwrap_err();
    assert!(err.to_string().contains("context/extra.md"), "{err}");

    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc/passwd", project.path().join("pack/context/link"))
            .unwrap();
        fs_err::remove_file(project.path().join("pack/context/extra.md")).unwrap();
        let err = fetch_release(&section, project.path(), None, &mut opts).unwrap_err();
        assert!(
            matches!(err, ProvenanceError::UnsafeEntry { .. })
                && err.to_string().contains("context/link"),
            "{err}"
        );
    }
}

#[test]
fn versions_must_be_concrete() {
    let f = fixture(true);
    for v in ["latest", "main", "unset"] {
        let section = ProcesskitSection {
            version: Some(v.into()),
            ..f.section()
        };
        let err = fetch_release(&section, f.project.path(), None, &mut f.opts()).unwrap_err();
        assert!(matches!(err, ProvenanceError::Version { .. }), "{v}: {err}");
    }
    let section = ProcesskitSection {
        version: None,
        ..f.section()
    };
    assert!(matches!(
        fetch_release(&section, f.project.path(), None, &mut f.opts()).unwrap_err(),
        ProvenanceError::Version { .. }
    ));
    // No source means the official repository (never a guess from elsewhere); asking it
    // would leave loopback, so only the choice is checked here.
    let section = ProcesskitSection {
        source: None,
        ..f.section()
    };
    assert_eq!(
        section.effective_source(),
        aibox_config::OFFICIAL_PROCESSKIT_SOURCE
    );
}

/// The lock section a previous install of `r` from `f` would have recorded.
fn locked(f: &Fixture, r: &aibox_provenance::VerifiedRelease) -> ProcesskitLock {
    ProcesskitLock {
        source: f.section().source.unwrap(),
        version: "v0.0.1".into(),
        src_path: None,
        release_asset_sha256: Some(r.digest),
        verification: r.verification,
        installed_at: "2026-01-01T00:00:00Z".into(),
        processkit_install_hash: None,
    }
}

/// The catalog of a cached release is remembered in its unpacked store: a later command
/// reads the memo instead of every `SKILL.md`, and a memo that does not fit the release's
/// files (or does not parse) is ignored and written again.
#[test]
fn the_catalog_of_a_cached_release_is_remembered_and_a_memo_that_does_not_fit_is_redone() {
    use aibox_provenance::catalog::Catalog;
    let f = fixture(true);
    let release = fetch_release(&f.section(), f.project.path(), None, &mut f.opts()).unwrap();
    let scanned = Catalog::from_payload(&release.payload).unwrap();
    assert!(!scanned.skills.is_empty());
    let memo = Cache::new(f.cache_dir.path())
        .unpacked_path(&release.digest)
        .join("memo/catalog-v1");
    let written = fs_err::read_to_string(&memo).unwrap();
    assert_eq!(Catalog::from_payload(&release.payload).unwrap(), scanned);

    // The memo is what a later command reads: a skill's `core` flipped there is flipped.
    let (name, skill) = scanned.skills.iter().next().unwrap();
    let field = |core: bool| {
        format!(
            "{{\"name\":\"{name}\",\"category\":\"{}\",\"core\":{core}",
            skill.category
        )
    };
    let flipped = written.replace(&field(skill.core), &field(!skill.core));
    assert_ne!(flipped, written);
    fs_err::write(&memo, &flipped).unwrap();
    assert_eq!(
        Catalog::from_payload(&release.payload).unwrap().skills[name].core,
        !skill.core
    );

    // A memo missing a skill, naming one the release lacks, or not JSON: scanned again
    // and remembered right.
    let missing = written.replacen(&format!("\"name\":\"{name}\""), "\"name\":\"ghost\"", 1);
    for bad in [missing.as_str(), "{\"skills\":[],\"tiers\":[]}", "not json"] {
        fs_err::write(&memo, bad).unwrap();
        assert_eq!(
            Catalog::from_payload(&release.payload).unwrap(),
            scanned,
            "{bad}"
        );
        assert_eq!(fs_err::read_to_string(&memo).unwrap(), written);
    }
}

/// A local release archive's digest is remembered in the cache with the archive's stat:
/// a second run goes by the memo (a forged one is what it reads, and what the pin then
/// refuses), and an archive whose stat changed (rewritten at the same size with its old
/// mtime put back: only its ctime tells) is hashed again.
#[test]
fn a_local_archive_is_hashed_again_only_when_its_stat_changed() {
    let project = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let release = SyntheticRelease::minimal("v0.0.1");
    let archive = release.tar_gz();
    let digest = sha256_hex(&archive);
    let path = project.path().join("release.tar.gz");
    let old = std::time::SystemTime::now() - Duration::from_hours(1);
    let write = |bytes: &[u8]| {
        fs_err::write(&path, bytes).unwrap();
        // Older than the memo, so never "racily clean".
        let f = fs_err::File::options().write(true).open(&path).unwrap();
        f.set_modified(old).unwrap();
    };
    write(&archive);
    let section = ProcesskitSection {
        source: Some("release.tar.gz".into()),
        sha256: Some(digest.clone()),
        ..ProcesskitSection::default()
    };
    let mut opts = FetchOptions {
        cache: Some(Cache::new(cache.path())),
        ..FetchOptions::default()
    };
    let r = fetch_release(&section, project.path(), None, &mut opts).unwrap();
    assert_eq!(r.digest.to_hex(), digest);
    let memos: Vec<_> = fs_err::read_dir(cache.path().join("local-archives"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(memos.len(), 1, "{memos:?}");
    let memo = &memos[0];
    let text = fs_err::read_to_string(memo).unwrap();
    assert!(text.contains(&digest), "{text}");

    let forged = sha256_hex(b"another archive");
    fs_err::write(memo, text.replace(&digest, &forged)).unwrap();
    let err = fetch_release(&section, project.path(), None, &mut opts).unwrap_err();
    assert!(err.to_string().contains(&forged), "{err}");
    fs_err::write(memo, &text).unwrap();
    let r = fetch_release(&section, project.path(), None, &mut opts).unwrap();
    assert_eq!(r.digest.to_hex(), digest);

    // The same size and mtime, other bytes (the gzip trailer's last byte): hashed again.
    let mut changed = archive.clone();
    *changed.last_mut().unwrap() ^= 1;
    write(&changed);
    let err = fetch_release(&section, project.path(), None, &mut opts).unwrap_err();
    assert!(err.to_string().contains(&sha256_hex(&changed)), "{err}");
    // Its new digest is remembered in turn.
    let pinned = ProcesskitSection {
        sha256: Some(sha256_hex(&changed)),
        ..section
    };
    let _ = fetch_release(&pinned, project.path(), None, &mut opts);
    let text = fs_err::read_to_string(memo).unwrap();
    assert!(text.contains(&sha256_hex(&changed)), "{text}");
}

/// QA: every layout error said "releases before v0.8.0 are not supported", also a file
/// missing from a release that otherwise has the layout. Only a release older than
/// v0.8.0 that lacks what such releases lack is told so.
#[test]
fn only_an_old_release_without_the_layout_is_told_it_is_too_old() {
    let project = tempfile::tempdir().unwrap();
    let mut opts = FetchOptions::default();
    let mut error = |version: &str, remove: &str| {
        let release = SyntheticRelease::minimal(version);
        let dir = project.path().join(version);
        release.write_dir(&dir).unwrap();
        fs_err::remove_file(dir.join(remove)).unwrap();
        let section = ProcesskitSection {
            source: Some(version.to_owned()),
            version: Some(version.to_owned()),
            allow_unverified: true,
            ..ProcesskitSection::default()
        };
        let err = fetch_release(&section, project.path(), None, &mut opts).unwrap_err();
        assert!(matches!(err, ProvenanceError::Layout { .. }), "{err}");
        let help = miette::Diagnostic::help(&err).unwrap().to_string();
        assert!(!help.contains("v0.8.0"), "{help}");
        err.to_string()
    };
    let listed = SyntheticRelease::minimal("v0.1.0")
        .files
        .keys()
        .find(|p| p.starts_with("context/") && p.ends_with("/SKILL.md"))
        .unwrap()
        .clone();
    let err = error("v0.1.0", &listed);
    assert!(
        err.contains("files listed in PROVENANCE.toml but absent") && !err.contains("v0.8.0"),
        "{err}"
    );
    let err = error("v0.1.0", "PROVENANCE.toml");
    assert!(
        err.contains(
            "`PROVENANCE.toml` is missing; releases before v0.8.0 do not have this layout"
        ),
        "{err}"
    );
    let err = error("v0.9.0", "PROVENANCE.toml");
    assert!(
        err.contains("`PROVENANCE.toml` is missing") && !err.contains("v0.8.0"),
        "{err}"
    );
}

/// Behind a TLS-inspecting proxy every HTTPS answer is signed by the proxy's own CA:
/// refused (naming the fix) until that CA is trusted, then downloaded.
#[test]
fn https_signed_by_a_private_ca_needs_that_ca_trusted() {
    let server = Server::start_tls().unwrap();
    server.route("/archive", Route::ok("through the proxy"));
    let url = server.url("/archive");
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    let refused = download(&url, &fast_http(), None).unwrap_err().to_string();
    assert!(refused.contains("UnknownIssuer"), "{refused}");
    assert!(
        refused.contains("extra_ca_certificates") && refused.contains("SSL_CERT_FILE"),
        "the error names the ways to trust the CA: {refused}"
    );

    let trusting = HttpOptions {
        extra_ca_pem: Some(server.ca_pem().unwrap().into()),
        ..fast_http()
    };
    let got = download(&url, &trusting, None).unwrap();
    assert_eq!(got.bytes, b"through the proxy");
    assert_eq!(got.final_url, url);
}
