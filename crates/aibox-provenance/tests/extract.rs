//! Safe extraction against hostile archives and the synthetic release.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use aibox_provenance::ProvenanceError;
use aibox_provenance::extract::{ExtractLimits, read_archive, write_tree};
use aibox_test_support::http::release::{
    Hostile, SyntheticRelease, TarEntry, gzip, hostile_archive, tar,
};

#[test]
fn every_hostile_kind_is_rejected_and_named() {
    for kind in Hostile::ALL {
        let gz = hostile_archive(kind);
        // The size bomb's header declares one byte over the default 1 GiB cap, so the
        // default limits refuse it from the header alone.
        let err = read_archive(&gz, "hostile.tar.gz", None, &ExtractLimits::default()).unwrap_err();
        let text = err.to_string();
        let name = kind.entry_name("processkit-v0.0.1");
        assert!(
            text.contains(&name),
            "{kind:?}: `{text}` does not name `{name}`"
        );
        match kind {
            Hostile::SizeBomb => assert!(
                matches!(err, ProvenanceError::ArchiveLimit { .. }),
                "{kind:?}: {err:?}"
            ),
            _ => assert!(
                matches!(err, ProvenanceError::UnsafeEntry { .. }),
                "{kind:?}: {err:?}"
            ),
        }
    }
}

#[test]
fn the_minimal_release_itself_is_accepted() {
    let r = SyntheticRelease::minimal("v0.0.1");
    let p = read_archive(&r.tar_gz(), "ok", Some("v0.0.1"), &ExtractLimits::default()).unwrap();
    assert_eq!(p.top_tag.as_deref(), Some("v0.0.1"));
    assert_eq!(p.files.len(), r.files.len());
}

#[test]
fn entry_count_and_depth_limits() {
    let mut entries = vec![TarEntry::dir("processkit-v1.0.0/")];
    for i in 0..50 {
        entries.push(TarEntry::file(&format!("processkit-v1.0.0/f{i}"), "x"));
    }
    let gz = gzip(&tar(&entries));
    let limits = ExtractLimits {
        max_entries: 20,
        ..ExtractLimits::default()
    };
    let err = read_archive(&gz, "many", None, &limits).unwrap_err();
    assert!(matches!(err, ProvenanceError::ArchiveLimit { .. }), "{err}");

    let deep = format!("processkit-v1.0.0/{}f", "d/".repeat(20));
    let gz = gzip(&tar(&[TarEntry::file(&deep, "x")]));
    let err = read_archive(&gz, "deep", None, &ExtractLimits::default()).unwrap_err();
    assert!(err.to_string().contains("deeper than"), "{err}");
}

#[test]
fn layout_errors() {
    let gz = gzip(&tar(&[TarEntry::file("wrong-top/PROVENANCE.toml", "x")]));
    let err = read_archive(&gz, "w", None, &ExtractLimits::default()).unwrap_err();
    assert!(matches!(err, ProvenanceError::Layout { .. }), "{err}");
    let gz = gzip(&tar(&[TarEntry::file("README", "x")]));
    assert!(read_archive(&gz, "w", None, &ExtractLimits::default()).is_err());
    let r = SyntheticRelease::minimal("v0.0.1");
    let err =
        read_archive(&r.tar_gz(), "w", Some("v0.0.2"), &ExtractLimits::default()).unwrap_err();
    assert!(err.to_string().contains("v0.0.2"), "{err}");
    let err =
        read_archive(b"not gzip at all", "junk", None, &ExtractLimits::default()).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::CorruptArchive { .. }),
        "{err}"
    );
}

#[test]
fn long_names_and_the_synthetic_release() {
    let r = SyntheticRelease::generate("v1.0.0", false);
    let skills = r.files.keys().filter(|k| k.ends_with("/SKILL.md")).count();
    assert_eq!(skills, 146);
    assert!(
        (850..=1000).contains(&r.files.len()),
        "{} files",
        r.files.len()
    );
    let long = format!("processkit-v1.0.0/context/{}/file.md", "a".repeat(120));
    let gz = gzip(&tar(&[TarEntry::file(&long, "x")]));
    let p = read_archive(&gz, "long", None, &ExtractLimits::default()).unwrap();
    assert!(
        p.files
            .contains_key(&format!("context/{}/file.md", "a".repeat(120)))
    );
    let p = read_archive(
        &r.tar_gz(),
        "synthetic",
        Some("v1.0.0"),
        &ExtractLimits::default(),
    )
    .unwrap();
    assert_eq!(p.files.len(), r.files.len());
    assert!(p.files["context/skills/processkit/processkit-skill-05/scripts/.gitkeep"].executable);
    assert!(!p.files["AGENTS.md"].executable);
}

#[cfg(unix)]
#[test]
fn write_tree_stages_and_normalises_modes() {
    use std::os::unix::fs::PermissionsExt;
    let r = SyntheticRelease::minimal("v0.0.1");
    let mut entries = r.entries();
    // setuid + world-writable in the archive must not survive.
    entries.push(TarEntry {
        mode: 0o4777,
        ..TarEntry::file("processkit-v0.0.1/context/run.sh", "#!/bin/sh\n")
    });
    let p = read_archive(&gzip(&tar(&entries)), "m", None, &ExtractLimits::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    fs_err::create_dir_all(&dest).unwrap();
    fs_err::write(dest.join("old-file"), "old").unwrap();
    write_tree(&p, p.files.keys().map(|k| (k.as_str(), k.as_str())), &dest).unwrap();
    assert!(!dest.join("old-file").exists(), "replaced as a whole");
    let mode = |rel: &str| {
        fs_err::metadata(dest.join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("context/run.sh"), 0o755);
    assert_eq!(mode("AGENTS.md"), 0o644);
    let leftovers: Vec<_> = fs_err::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers,
        vec![std::ffi::OsString::from("out")],
        "no staging left behind"
    );
}

/// PAX extension and GNU long-name data is read by the tar reader before the entry it
/// describes: it counts against the size limit, so a small archive cannot make aibox
/// buffer gigabytes of header data (8 MiB here against a 1 MiB content limit).
#[test]
fn pax_and_gnu_long_name_data_count_against_the_limits() {
    let limits = ExtractLimits {
        max_total_bytes: 1024 * 1024,
        max_entries: 100,
        ..ExtractLimits::default()
    };
    let huge = 8 * 1024 * 1024;
    let mut pax_record = b" comment=".to_vec();
    pax_record.resize(huge, b'a');
    pax_record.push(b'\n');
    let len = pax_record.len() + format!("{}", pax_record.len() + 8).len();
    let mut pax = format!("{len}").into_bytes();
    pax.extend_from_slice(&pax_record);
    for (kind, data) in [(b'x', pax), (b'L', vec![b'n'; huge])] {
        let header = TarEntry {
            name: b"././@LongLink".to_vec(),
            kind,
            mode: 0o644,
            data,
            link: Vec::new(),
        };
        let gz = gzip(&tar(&[
            TarEntry::dir("processkit-v1.0.0/"),
            header,
            TarEntry::file("processkit-v1.0.0/f", "x"),
        ]));
        assert!(gz.len() < huge / 50, "the hostile archive is small");
        let err = read_archive(&gz, "headers", None, &limits).unwrap_err();
        assert!(
            matches!(err, ProvenanceError::ArchiveLimit { .. }),
            "{}: {err:?}",
            kind as char
        );
        assert!(err.to_string().contains("PAX"), "{err}");
    }
    // The same archive shape with ordinary headers passes.
    let gz = gzip(&tar(&[
        TarEntry::dir("processkit-v1.0.0/"),
        TarEntry::file(&format!("processkit-v1.0.0/{}", "n".repeat(200)), "x"),
    ]));
    read_archive(&gz, "ok", None, &limits).unwrap();
}
