//! The processkit stat cache: planning skips re-hashing files whose size, mtime, ctime and
//! inode are unchanged, and never mistakes an edit for an unchanged file, even one that
//! keeps the size and restores the mtime (the ctime still moves), so an upgrade keeps it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::process::Command;

use aibox_engine::apply;
use aibox_test_support::http::release::SyntheticRelease;

/// A project with `release` installed from a local archive, its stat cache settled.
struct Installed {
    _dirs: [tempfile::TempDir; 3],
    archives: camino::Utf8PathBuf,
    cache: camino::Utf8PathBuf,
    root: camino::Utf8PathBuf,
}

fn installed(release: &SyntheticRelease) -> Installed {
    let (a, archives) = common::empty_project();
    let (c, cache) = common::empty_project();
    let (p, root) = common::empty_project();
    fs_err::write(
        root.join("aibox.toml"),
        common::release_config(&archives, release),
    )
    .unwrap();
    apply(&root, &common::apply_opts(Some(&cache))).unwrap();
    // Settle the cache (entries written in the last clock tick are racily clean).
    apply(&root, &common::apply_opts(Some(&cache))).unwrap();
    Installed {
        _dirs: [a, c, p],
        archives,
        cache,
        root,
    }
}

#[test]
fn an_edit_that_keeps_size_and_mtime_is_still_seen_and_kept_by_the_upgrade() {
    let v1 = SyntheticRelease::processkit_like("v0.28.3", false);
    let v2 = SyntheticRelease::processkit_like("v0.29.0", true);
    let Installed {
        _dirs,
        archives,
        cache,
        root,
    } = installed(&v1);
    assert!(
        !apply(&root, &common::apply_opts(Some(&cache)))
            .unwrap()
            .changed()
    );
    assert!(root.join(".aibox/processkit-stat-cache").is_file());

    // An installed skill file that changes upstream in v2, of a skill without an MCP
    // server (an edited skill with a server is third-party and must pass the review).
    let path = v1
        .files
        .iter()
        .find(|(p, (data, _))| {
            p.starts_with("context/skills/processkit/")
                && p.ends_with("/SKILL.md")
                && root.join(p.as_str()).is_file()
                && !v1
                    .files
                    .contains_key(&p.replace("/SKILL.md", "/mcp/mcp-config.json"))
                && v2.files.get(*p).is_some_and(|(d, _)| d != data)
        })
        .map(|(p, _)| p.clone())
        .unwrap();

    // Same size, mtime restored: only the ctime tells.
    let file = root.join(&path);
    let reference = root.join("mtime-reference");
    let cp = Command::new("cp")
        .args(["-p", file.as_str(), reference.as_str()])
        .status()
        .unwrap();
    assert!(cp.success());
    let mut bytes = fs_err::read(&file).unwrap();
    bytes[0] = if bytes[0] == b'#' { b'%' } else { b'#' };
    let edited = bytes.clone();
    fs_err::OpenOptions::new()
        .write(true)
        .open(&file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
        .unwrap();
    let touch = Command::new("touch")
        .args(["-r", reference.as_str(), file.as_str()])
        .status()
        .unwrap();
    assert!(touch.success());
    fs_err::remove_file(&reference).unwrap();

    let report = aibox_provenance::integrity(root.as_std_path()).unwrap();
    assert_eq!(report.modified, std::slice::from_ref(&path));
    fs_err::write(
        root.join("aibox.toml"),
        common::release_config(&archives, &v2),
    )
    .unwrap();
    apply(&root, &common::apply_opts(Some(&cache))).unwrap();
    assert!(
        fs_err::read(&file).unwrap() == edited,
        "the local edit of {path} was lost"
    );
}

/// Plain `doctor` summarises the integrity of the installed files from the scan its
/// resolve made (the stat cache vouches for unchanged files, as for planning) instead of
/// hashing the whole tree again; `doctor --integrity` re-hashes every byte. Proven with a
/// stat cache that lies about one unchanged file: only a summary that trusted the cache
/// can report it, and only a re-hash can clear it.
#[test]
fn plain_doctor_takes_installed_digests_from_the_scan_and_integrity_rehashes() {
    let v1 = SyntheticRelease::processkit_like("v0.28.3", false);
    let Installed {
        _dirs,
        archives: _,
        cache,
        root,
    } = installed(&v1);
    let doctor = || {
        let options = aibox_engine::doctor::DoctorOptions {
            skip_engine: true,
            cache_dir: Some(cache.clone()),
            update_check: aibox_engine::updates::UpdateCheck::Never,
            ..aibox_engine::doctor::DoctorOptions::default()
        };
        serde_json::to_string(&aibox_engine::doctor::doctor(&root, &options).unwrap()).unwrap()
    };
    assert!(
        !doctor().contains("aibox::doctor::integrity\""),
        "{}",
        doctor()
    );

    // The cache now says `context/INDEX.md` holds other bytes; the file is untouched.
    let record = root.join(".aibox/processkit-stat-cache");
    let text = fs_err::read_to_string(&record).unwrap();
    let lied: String = text
        .lines()
        .map(|l| match l.strip_suffix(" context/INDEX.md") {
            Some(entry) => format!("{}{} context/INDEX.md\n", "0".repeat(64), &entry[64..]),
            None => format!("{l}\n"),
        })
        .collect();
    assert_ne!(lied, text, "no cache entry for context/INDEX.md:\n{text}");
    fs_err::write(&record, lied).unwrap();

    let summary = doctor();
    assert!(
        summary.contains(
            "processkit content: installed files were modified, deleted or added (1 modified"
        ),
        "{summary}"
    );
    let full = aibox_provenance::integrity(root.as_std_path()).unwrap();
    assert!(full.modified.is_empty(), "{:?}", full.modified);
}
