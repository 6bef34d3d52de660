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

/// The gzip trailer is checked even though `tar` stops reading at the end of the
/// archive: a damaged CRC or length, or a cut in the padding, is a corrupt archive. Bytes
/// after the member (a second member, padding) are not inflated.
#[test]
fn a_damaged_gzip_trailer_is_a_corrupt_archive() {
    let gz = SyntheticRelease::minimal("v0.0.1").tar_gz();
    let limits = ExtractLimits::default();
    assert!(read_archive(&gz, "ok", None, &limits).is_ok());
    for (at, what) in [(gz.len() - 8, "CRC-32"), (gz.len() - 2, "length")] {
        let mut bad = gz.clone();
        bad[at] ^= 0x55;
        let err = read_archive(&bad, "bad", None, &limits).unwrap_err();
        assert!(
            matches!(err, ProvenanceError::CorruptArchive { .. }) && err.to_string().contains(what),
            "{err}"
        );
    }
    let err = read_archive(&gz[..gz.len() - 5], "cut", None, &limits).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::CorruptArchive { .. }),
        "{err}"
    );
    let mut trailing = gz.clone();
    trailing.extend(gzip(b"a second member"));
    trailing.extend([0u8; 100]);
    assert!(read_archive(&trailing, "trailing", None, &limits).is_ok());
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
            .contains_key(format!("context/{}/file.md", "a".repeat(120)).as_str())
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
    write_tree(&p, p.files.keys().map(|k| (&**k, &**k)), &dest).unwrap();
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
        assert!(
            err.to_string().contains(if kind == b'x' {
                "PAX extended header of"
            } else {
                "GNU long name of"
            }),
            "{err}"
        );
    }
    // The same archive shape with ordinary headers passes.
    let gz = gzip(&tar(&[
        TarEntry::dir("processkit-v1.0.0/"),
        TarEntry::file(&format!("processkit-v1.0.0/{}", "n".repeat(200)), "x"),
    ]));
    read_archive(&gz, "ok", None, &limits).unwrap();
}

/// A source of tar bytes that counts what was pulled from it: a prefix (real headers),
/// then `filler` pseudo-random bytes made on demand (incompressible, so compressed and
/// tar bytes pulled stay alike), then a suffix. Gzipped on the fly, so a header may
/// declare gigabytes without the test holding them.
struct Lazy {
    head: std::io::Cursor<Vec<u8>>,
    filler: u64,
    state: u64,
    tail: std::io::Cursor<Vec<u8>>,
    pulled: std::rc::Rc<std::cell::Cell<u64>>,
}

impl std::io::Read for Lazy {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = self.head.read(buf)?;
        if n == 0 && self.filler > 0 {
            n = buf
                .len()
                .min(usize::try_from(self.filler).unwrap_or(usize::MAX));
            for b in &mut buf[..n] {
                // xorshift64: cheap bytes gzip cannot shrink.
                self.state ^= self.state << 13;
                self.state ^= self.state >> 7;
                self.state ^= self.state << 17;
                *b = self.state.to_le_bytes()[0];
            }
            self.filler -= n as u64;
        }
        if n == 0 {
            n = self.tail.read(buf)?;
        }
        self.pulled.set(self.pulled.get() + n as u64);
        Ok(n)
    }
}

/// One raw tar header block of `kind` declaring `size` bytes.
fn header_block(name: &str, kind: tar::EntryType, size: u64) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.set_path(name).unwrap();
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(size);
    h.set_cksum();
    h.as_bytes().to_vec()
}

/// Extracts the stream `head` + `filler` bytes + `tail` and returns the error and how
/// many tar bytes were pulled from the source.
fn extract_lazily(head: Vec<u8>, filler: u64, tail: Vec<u8>) -> (ProvenanceError, u64) {
    let pulled = std::rc::Rc::new(std::cell::Cell::new(0));
    let source = Lazy {
        head: std::io::Cursor::new(head),
        filler,
        state: 0x9e37_79b9_7f4a_7c15,
        tail: std::io::Cursor::new(tail),
        pulled: std::rc::Rc::clone(&pulled),
    };
    let gz = flate2::read::GzEncoder::new(source, flate2::Compression::fast());
    let dir = tempfile::tempdir().unwrap();
    let err = aibox_provenance::extract::unpack_archive(
        gz,
        "hostile.tar.gz",
        None,
        &ExtractLimits::default(),
        &dir.path().join("pack"),
    )
    .unwrap_err();
    (err, pulled.get())
}

/// GNU long names, long link names and PAX headers that declare a huge size (64 MiB to
/// 8 GiB, well inside the default stream cap) are refused from the declared size, before
/// their data is read: the extraction pulls at most 1 MiB of the stream (buffers), so
/// memory stays bounded whatever the header says, and the message is short.
#[test]
fn huge_extension_headers_are_refused_before_their_data_is_read() {
    let dir = header_block("processkit-v1.0.0/", tar::EntryType::Directory, 0);
    for (kind, what) in [
        (tar::EntryType::GNULongName, "GNU long name"),
        (tar::EntryType::GNULongLink, "GNU long link name"),
        (tar::EntryType::XHeader, "PAX extended header"),
    ] {
        for declared in [64 * 1024 * 1024, 1024 * 1024 * 1024, 8 * 1024 * 1024 * 1024] {
            let mut head = dir.clone();
            head.extend(header_block("././@LongLink", kind, declared));
            let (err, pulled) = extract_lazily(head, declared, vec![0; 1024]);
            assert!(
                matches!(err, ProvenanceError::ArchiveLimit { .. }),
                "{what} {declared}: {err:?}"
            );
            let text = err.to_string();
            assert!(
                text.contains(&format!("{what} of {declared} bytes")),
                "{text}"
            );
            assert!(text.len() < 300, "{} bytes of message", text.len());
            assert!(
                pulled < 1024 * 1024,
                "{what} {declared}: {pulled} bytes pulled"
            );
        }
    }
}

/// A long name under the header bound but far over the path limit (512 KiB) is read and
/// refused by name; the message quotes a bounded part of it and gives its length.
#[test]
fn messages_quote_a_bounded_part_of_a_hostile_name() {
    let name = format!("processkit-v1.0.0/{}", "\u{7}".repeat(512 * 1024));
    for long in [
        TarEntry {
            name: b"././@LongLink".to_vec(),
            kind: b'L',
            mode: 0o644,
            data: name.clone().into_bytes(),
            link: Vec::new(),
        },
        {
            let record = format!(" path={name}\n");
            let len = record.len() + (record.len() + 8).to_string().len();
            TarEntry {
                name: b"PaxHeaders/f".to_vec(),
                kind: b'x',
                mode: 0o644,
                data: format!("{len}{record}").into_bytes(),
                link: Vec::new(),
            }
        },
    ] {
        let gz = gzip(&tar(&[
            TarEntry::dir("processkit-v1.0.0/"),
            long,
            TarEntry::file("processkit-v1.0.0/short", "x"),
        ]));
        let err = read_archive(&gz, "hostile", None, &ExtractLimits::default()).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, ProvenanceError::UnsafeEntry { .. }),
            "{err:?}"
        );
        assert!(text.len() < 2048, "{} bytes of message", text.len());
        assert!(
            text.contains(&format!("… ({} bytes)", name.len())),
            "{text}"
        );
        assert!(text.contains("processkit-v1.0.0/\\u{7}"), "{text}");
    }
}

/// A PAX `size` that disagrees with the header would make `tar` and the raw stream read
/// different entries: refused. The same name through PAX `path` is read as `tar` reads it.
#[test]
fn pax_records_are_read_as_tar_reads_them() {
    let pax = |records: &str| {
        let mut out = String::new();
        for record in records.lines() {
            let body = format!(" {record}\n");
            // The length counts its own digits.
            let mut len = body.len() + 1;
            while body.len() + len.to_string().len() != len {
                len = body.len() + len.to_string().len();
            }
            out += &len.to_string();
            out += &body;
        }
        TarEntry {
            name: b"PaxHeaders/f".to_vec(),
            kind: b'x',
            mode: 0o644,
            data: out.into_bytes(),
            link: Vec::new(),
        }
    };
    let with = |header: TarEntry| {
        gzip(&tar(&[
            TarEntry::dir("processkit-v1.0.0/"),
            header,
            TarEntry::file("processkit-v1.0.0/a", "x"),
        ]))
    };
    let err = read_archive(
        &with(pax("size=1000")),
        "h",
        None,
        &ExtractLimits::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("PAX size"), "{err}");
    let p = read_archive(
        &with(pax("path=processkit-v1.0.0/renamed.md\nsize=1")),
        "h",
        None,
        &ExtractLimits::default(),
    )
    .unwrap();
    assert_eq!(
        p.files.keys().map(|k| &**k).collect::<Vec<_>>(),
        ["renamed.md"]
    );
    // Extension headers with nothing after them are a corrupt archive.
    let gz = gzip(&tar(&[TarEntry::dir("processkit-v1.0.0/"), pax("path=x")]));
    let err = read_archive(&gz, "h", None, &ExtractLimits::default()).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::CorruptArchive { .. }),
        "{err:?}"
    );
}
