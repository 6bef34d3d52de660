//! `cargo xtask bench`: the processkit install path of the release-built `aibox`, side by
//! side with `cp -r` and `sha256sum` of the same files, measured in the same run.
//!
//! A real-shaped release (`SyntheticRelease::processkit_like`, 146 skills) and its
//! successor are written as local `.tar.gz` archives pinned by digest, at 1x and 10x the
//! content. For each size: first install, no-op `apply`, upgrade to the successor and
//! `doctor --integrity`, with wall time and peak RSS (GNU `time`'s `%M`, when
//! `/usr/bin/time` exists). Baselines: `cp -r` of the installed tree and `sha256sum` of
//! every installed file. Medians of several runs at 1x, one run at 10x, so the whole
//! bench takes well under a few minutes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use aibox_test_support::http::release::SyntheticRelease;

use crate::{say, step};

/// One measured run: wall seconds and peak RSS in KiB (when known).
#[derive(Clone, Copy)]
struct Sample {
    secs: f64,
    rss_kib: Option<u64>,
}

/// Runs `cmd` and measures it; fails when the command fails.
fn measure(cmd: &mut Command, label: &str, scratch: &Path) -> Result<Sample, String> {
    let gnu_time = Path::new("/usr/bin/time");
    let rss_file = scratch.join("rss.txt");
    let mut run = if gnu_time.exists() {
        let mut c = Command::new(gnu_time);
        c.arg("-f").arg("%M").arg("-o").arg(&rss_file);
        c.arg(cmd.get_program()).args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    } else {
        std::mem::replace(cmd, Command::new("true"))
    };
    let started = Instant::now();
    let out = run
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("{label}: cannot run: {e}"))?;
    let secs = started.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "{label} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let rss_kib = fs_err::read_to_string(&rss_file)
        .ok()
        .and_then(|t| t.lines().last().and_then(|l| l.trim().parse().ok()));
    let _ = fs_err::remove_file(&rss_file);
    Ok(Sample { secs, rss_kib })
}

fn median(mut v: Vec<Sample>) -> Sample {
    v.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    let secs = v[v.len() / 2].secs;
    let rss_kib = v.iter().filter_map(|s| s.rss_kib).max();
    Sample { secs, rss_kib }
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(data))
}

fn config(archive: &Path, version: &str, digest: &str) -> String {
    format!(
        "[container]\nname = \"bench\"\n\n[context]\nmode = \"processkit\"\npackages = [\"product\"]\n\n\
         [processkit]\nsource = \"{}\"\nversion = \"{version}\"\nsha256 = \"{digest}\"\n",
        archive.display()
    )
}

struct Release {
    archive: PathBuf,
    version: String,
    digest: String,
}

fn write_release(dir: &Path, release: &SyntheticRelease) -> Result<Release, String> {
    let data = release.tar_gz();
    let archive = dir.join(release.archive_name());
    fs_err::write(&archive, &data).map_err(|e| e.to_string())?;
    Ok(Release {
        archive,
        version: release.version.clone(),
        digest: sha256_hex(&data),
    })
}

/// Files and bytes below `dir`.
fn tree_size(dir: &Path) -> (usize, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs_err::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => {
                    files += 1;
                    bytes += e.metadata().map_or(0, |m| m.len());
                }
                _ => {}
            }
        }
    }
    (files, bytes)
}

#[derive(Default)]
struct Results {
    first: Vec<Sample>,
    noop: Vec<Sample>,
    upgrade: Vec<Sample>,
    integrity: Vec<Sample>,
    cp: Vec<Sample>,
    sha: Vec<Sample>,
    files: (usize, u64),
}

fn one_run(
    bin: &Path,
    work: &Path,
    run: usize,
    v1: &Release,
    v2: &Release,
    r: &mut Results,
    keep: bool,
) -> Result<(), String> {
    let project = work.join(format!("project-{run}"));
    let copy = work.join(format!("copy-{run}"));
    for d in [&project, &copy] {
        if d.exists() {
            fs_err::remove_dir_all(d).map_err(|e| e.to_string())?;
        }
    }
    fs_err::create_dir_all(&project).map_err(|e| e.to_string())?;
    fs_err::create_dir_all(&copy).map_err(|e| e.to_string())?;
    let toml = project.join("aibox.toml");
    fs_err::write(&toml, config(&v1.archive, &v1.version, &v1.digest))
        .map_err(|e| e.to_string())?;
    let aibox = |args: &[&str]| {
        let mut c = Command::new(bin);
        c.arg("--project")
            .arg(&project)
            .arg("--quiet")
            .args(args)
            .env("XDG_CACHE_HOME", work.join("cache"))
            .env("NO_COLOR", "1");
        c
    };
    r.first
        .push(measure(&mut aibox(&["apply"]), "first install", work)?);
    r.files = tree_size(&project.join("context"));
    r.noop
        .push(measure(&mut aibox(&["apply"]), "no-op apply", work)?);
    let mut cp = Command::new("cp");
    cp.arg("-r")
        .arg(project.join("context"))
        .arg(project.join("AGENTS.md"))
        .arg(&copy);
    r.cp.push(measure(&mut cp, "cp -r", work)?);
    let mut sha = Command::new("sh");
    sha.arg("-c")
        .arg("find \"$1\" -type f -print0 | xargs -0 sha256sum > /dev/null")
        .arg("sh")
        .arg(project.join("context"));
    r.sha.push(measure(&mut sha, "sha256sum", work)?);
    fs_err::write(&toml, config(&v2.archive, &v2.version, &v2.digest))
        .map_err(|e| e.to_string())?;
    r.upgrade
        .push(measure(&mut aibox(&["apply"]), "upgrade", work)?);
    r.integrity.push(measure(
        &mut aibox(&["doctor", "--integrity"]),
        "doctor --integrity",
        work,
    )?);
    if !keep {
        fs_err::remove_dir_all(&project).map_err(|e| e.to_string())?;
        fs_err::remove_dir_all(&copy).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[allow(clippy::cast_precision_loss)] // display only
fn fmt_row(out: &mut String, name: &str, ours: Sample, base: Sample, base_name: &str) {
    let rss = ours.rss_kib.map_or_else(
        || "n/a".to_owned(),
        |k| format!("{:.1} MiB", k as f64 / 1024.0),
    );
    let _ = writeln!(
        out,
        "  {name:<20} {:>9.1} ms  rss {rss:>10}   {base_name:<10} {:>8.1} ms   ratio {:>6.2}x",
        ours.secs * 1000.0,
        base.secs * 1000.0,
        ours.secs / base.secs
    );
}

/// `cargo xtask bench [--factors 1,10] [--runs N] [--bin PATH] [--keep]` (`--bin`: measure
/// that `aibox` instead of building this tree's; `--keep`: leave `target/bench/`).
#[allow(clippy::cast_precision_loss)] // display only
pub fn run(args: &[String]) -> Result<(), String> {
    let mut factors = vec![1_usize, 10];
    let mut runs_1x = 5_usize;
    let mut given_bin: Option<PathBuf> = None;
    let mut keep = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--factors" => {
                factors = it
                    .next()
                    .ok_or("--factors needs a list")?
                    .split(',')
                    .map(|f| f.parse().map_err(|_| format!("bad factor `{f}`")))
                    .collect::<Result<_, _>>()?;
            }
            "--runs" => {
                runs_1x = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or("--runs needs a number")?;
            }
            "--keep" => keep = true,
            "--bin" => given_bin = Some(PathBuf::from(it.next().ok_or("--bin needs a path")?)),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let bin = if let Some(bin) = given_bin {
        bin
    } else {
        step(
            "build aibox (release)",
            &[
                "build",
                "--release",
                "--locked",
                "--quiet",
                "--package",
                "aibox-cli",
            ],
        )?;
        std::env::current_dir()
            .map_err(|e| e.to_string())?
            .join("target/release/aibox")
    };
    let base = std::env::current_dir()
        .map_err(|e| e.to_string())?
        .join("target/bench");
    if base.exists() {
        fs_err::remove_dir_all(&base).map_err(|e| e.to_string())?;
    }
    if !Path::new("/usr/bin/time").exists() {
        say("bench: /usr/bin/time (Debian package `time`) is missing: peak RSS not measured");
    }
    let mut report = String::new();
    for factor in factors {
        let work = base.join(format!("{factor}x"));
        fs_err::create_dir_all(&work).map_err(|e| e.to_string())?;
        say(&format!("==> bench {factor}x: generating releases"));
        let v1 = write_release(
            &work,
            &SyntheticRelease::processkit_like_scaled("v0.28.3", false, factor),
        )?;
        let v2 = write_release(
            &work,
            &SyntheticRelease::processkit_like_scaled("v0.29.0", true, factor),
        )?;
        let runs = if factor <= 1 { runs_1x } else { 1 };
        let mut r = Results::default();
        // One warm-up run fills the page cache and the archive cache.
        one_run(&bin, &work, 0, &v1, &v2, &mut Results::default(), false)?;
        for i in 0..runs {
            say(&format!("==> bench {factor}x: run {}/{runs}", i + 1));
            one_run(&bin, &work, i + 1, &v1, &v2, &mut r, keep)?;
        }
        let _ = writeln!(
            report,
            "processkit-like release at {factor}x: {} installed files under context/ ({:.1} MB), median of {runs}",
            r.files.0,
            r.files.1 as f64 / 1e6
        );
        let cp = median(r.cp);
        let sha = median(r.sha);
        fmt_row(&mut report, "first install", median(r.first), cp, "cp -r");
        fmt_row(&mut report, "no-op apply", median(r.noop), cp, "cp -r");
        fmt_row(&mut report, "upgrade", median(r.upgrade), cp, "cp -r");
        fmt_row(
            &mut report,
            "doctor --integrity",
            median(r.integrity),
            sha,
            "sha256sum",
        );
        if !keep {
            fs_err::remove_dir_all(&work).map_err(|e| e.to_string())?;
        }
    }
    say(&report);
    Ok(())
}
