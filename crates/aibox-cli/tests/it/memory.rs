//! Memory of the processkit install path grows slowly with the release: the per-file
//! state a command holds (the release manifest, the marker, the live scan, the plan) is
//! compact, so the peak of every step stays flat enough for a 10x release.
//!
//! Measured on the real binary (`AIBOX_PEAK_RSS`, the kernel's `VmHWM`) on a synthetic
//! processkit-like release at 1x and 3x, as the difference per added installed file, so
//! the binary's own size and the allocator's start-up cancel out.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test helpers may fail loudly

use std::process::Command;

use aibox_test_support::http::release::{SyntheticRelease, sha256_hex};
use camino::{Utf8Path, Utf8PathBuf};

/// Bytes of peak memory per added installed file above which a step counts as holding
/// too much per-file state, per step. Before the per-file state was compacted (the
/// marker's text held by the scan, three maps copied out of the plan's decisions, the
/// TOML parser's tokens of `PROVENANCE.toml`) a no-op apply took 1,020 to 1,130 bytes per
/// file here, `mcp list` and `doctor` as much; then 570 to 770. Since the per-file tables
/// are `PathTable`s, the stat cache is not captured whole, the marker is parsed once per
/// run and the apply frees what only planning reads, debug runs measure 490 to 660
/// (no-op apply, `mcp list`, `doctor`) and 1,170 to 1,370 for a first install and an
/// upgrade (which plan and write every file). Since the apply's decisions and copy jobs
/// are compact, the writer keeps checked folders as hashes, the install plan trims what
/// it grew and the old snapshot is listed only by the apply: 1,070 to 1,170 for a first
/// install, 980 to 1,140 for an upgrade. Since the binary sets glibc's allocator (at most
/// two arenas, fixed trim and mmap thresholds; `main.rs`): 580 to 740 for a first
/// install, 730 to 870 for an upgrade, 220 to 580 for the read-only steps. Since the
/// install's intent record shares the plan's paths, the stat cache's digests are the
/// planned marker's but for a few, and the stat cache is read a line at a time: 320 to
/// 480 for a first install, 300 to 380 for an upgrade, 100 to 450 for the read-only
/// steps. Each bound sits about 150 above the highest seen, or more (runs of one build
/// vary by up to 270). Each file's path alone is about 60 bytes.
const MAX_BYTES_PER_FILE: [(&str, u64); 5] = [
    ("first install", 700),
    ("no-op apply", 700),
    ("mcp list", 720),
    ("doctor", 760),
    ("upgrade", 700),
];

/// Writes `release`'s archive into `dir` and an `aibox.toml` into `project` that
/// installs it with every skill selected.
fn configure(dir: &Utf8Path, project: &Utf8Path, release: &SyntheticRelease) {
    let archive_bytes = release.tar_gz();
    let archive = dir.join(release.archive_name());
    fs_err::write(&archive, &archive_bytes).expect("write archive");
    let skills: Vec<String> = release
        .files
        .keys()
        .filter_map(|p| p.strip_prefix("context/skills/")?.strip_suffix("/SKILL.md"))
        .filter_map(|s| {
            let (cat, skill) = s.split_once('/')?;
            (!cat.starts_with('_') && !skill.contains('/')).then(|| format!("\"{skill}\""))
        })
        .collect();
    fs_err::write(
        project.join("aibox.toml"),
        format!(
            "[container]\nname = \"mem\"\n\n[context]\nmode = \"processkit\"\npackages = \
             [\"product\"]\n\n[skills]\ninclude = [{}]\n\n[processkit]\nsource = \"{archive}\"\n\
             version = \"{}\"\nsha256 = \"{}\"\ntrusted_sources = [\"{archive}\"]\n",
            skills.join(", "),
            release.version,
            sha256_hex(&archive_bytes)
        ),
    )
    .expect("write aibox.toml");
}

/// A project with `release` (every skill selected) installed; returns its folder, the
/// number of files the install wrote and the install's peak memory in KiB.
fn installed(dir: &Utf8Path, release: &SyntheticRelease) -> (Utf8PathBuf, usize, u64) {
    let project = dir.join("project");
    fs_err::create_dir_all(&project).expect("project folder");
    configure(dir, &project, release);
    let first = peak_kib(&project, dir, &["apply"]);
    let mut files = 0;
    let mut stack = vec![project.join("context").into_std_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs_err::read_dir(&d).expect("read_dir").flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => files += 1,
                _ => {}
            }
        }
    }
    (project, files, first)
}

/// Peak RSS in KiB of `aibox --quiet ARGS` in `project` (whatever its exit code: `doctor`
/// reports the missing container engine).
fn peak_kib(project: &Utf8Path, cache: &Utf8Path, args: &[&str]) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_aibox"))
        .arg("--project")
        .arg(project)
        .arg("--quiet")
        .args(args)
        .env("XDG_CACHE_HOME", cache.join("cache"))
        .env("NO_COLOR", "1")
        .env("AIBOX_PEAK_RSS", "1")
        .env_remove("AIBOX_PROJECT")
        .output()
        .expect("run aibox");
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .last()
        .and_then(|l| l.strip_prefix("aibox: peak RSS "))
        .and_then(|l| l.strip_suffix(" KiB"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("aibox {args:?}: no peak RSS line in {err}"))
}

/// Peak memory in KiB of every step of [`MAX_BYTES_PER_FILE`] on a release of `factor`
/// times processkit's size; returns them and the number of installed files.
fn steps(dir: &Utf8Path, factor: usize) -> (Vec<u64>, usize) {
    let (project, files, first) = installed(
        dir,
        &SyntheticRelease::processkit_like_scaled("v0.28.3", false, factor),
    );
    let mut peaks = vec![first];
    for args in [&["apply"][..], &["mcp", "list"], &["doctor"]] {
        peaks.push(peak_kib(&project, dir, args));
    }
    configure(
        dir,
        &project,
        &SyntheticRelease::processkit_like_scaled("v0.29.0", true, factor),
    );
    peaks.push(peak_kib(&project, dir, &["apply"]));
    (peaks, files)
}

#[test]
fn per_file_state_stays_compact_for_every_step_that_reads_the_install() {
    let small_dir = tempfile::tempdir().expect("tempdir");
    let large_dir = tempfile::tempdir().expect("tempdir");
    let small_dir = Utf8Path::from_path(small_dir.path()).expect("utf-8");
    let large_dir = Utf8Path::from_path(large_dir.path()).expect("utf-8");
    let (small, small_files) = steps(small_dir, 1);
    let (large, large_files) = steps(large_dir, 3);
    assert!(
        large_files > small_files * 2,
        "{small_files} / {large_files}"
    );
    let added = u64::try_from(large_files - small_files).expect("file count");
    let report: Vec<(String, u64, u64)> = MAX_BYTES_PER_FILE
        .iter()
        .zip(small.iter().zip(&large))
        .map(|((step, max), (at_small, at_large))| {
            let per_file = at_large.saturating_sub(*at_small) * 1024 / added;
            (
                format!(
                    "{step}: {at_small} KiB at {small_files} files, {at_large} KiB at \
                     {large_files} files: {per_file} bytes per added file (at most {max})"
                ),
                per_file,
                *max,
            )
        })
        .collect();
    let text: Vec<&str> = report.iter().map(|(line, _, _)| line.as_str()).collect();
    eprintln!("{}", text.join("\n"));
    for (line, per_file, max) in &report {
        assert!(
            per_file <= max,
            "{line}: too much per-file state\n{}",
            text.join("\n")
        );
    }
}
