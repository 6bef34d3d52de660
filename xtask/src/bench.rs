//! `cargo xtask bench`: the processkit install path of the release-built `aibox`, side by
//! side with `cp -r` and `sha256sum` of the same files, measured in the same run, and
//! reported against the targets of issue 16.
//!
//! A real-sized release (`SyntheticRelease::processkit_like`: 146 skills, about 860 files,
//! 5 MB; every skill selected, so about 1,720 installed files and 10 MB with the
//! snapshot) and its successor are written as local `.tar.gz` archives pinned by digest,
//! at 1x and 10x the files and bytes (`processkit_like_scaled`). For each size: first
//! install, no-op `apply`, upgrade to the successor, `doctor --integrity`, and the
//! read-only `doctor`, `skill list` and `mcp list` (held to linear growth), with wall
//! time, CPU time and peak RSS (GNU `time`'s `%U`, `%S` and `%M`, when `/usr/bin/time`
//! exists; wall time well above CPU time is waiting, on `fsync` or on a busy machine).
//! Baselines: `cp -r` of the installed tree and `sha256sum` of every installed file (the
//! fastest of three tries per run, as they swing most with a busy disk). Each row
//! carries its target and whether it was met; a linearity line compares the largest
//! factor with the smallest. Medians of several runs at 1x, one run above, so the whole
//! bench takes a few minutes. A measurement, not a gate: missed targets are printed, the
//! exit code stays 0.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use aibox_test_support::http::release::{SyntheticRelease, sha256_hex};

use crate::{say, step};

/// One measured run: wall seconds, and peak RSS in KiB and CPU seconds (user + system)
/// when GNU `time` is there. The CPU time shows how much of the wall time was waiting
/// (on `fsync`, or on other jobs of a shared machine).
#[derive(Clone, Copy)]
struct Sample {
    secs: f64,
    rss_kib: Option<u64>,
    cpu_secs: Option<f64>,
}

/// Runs `cmd` and measures it; fails when the command fails.
fn measure(cmd: &mut Command, label: &str, scratch: &Path) -> Result<Sample, String> {
    let gnu_time = Path::new(GNU_TIME);
    let rss_file = scratch.join("rss.txt");
    let mut run = if gnu_time.exists() {
        let mut c = Command::new(gnu_time);
        c.arg("-f").arg("%M %U %S").arg("-o").arg(&rss_file);
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
    // Each measured command starts with nothing left to write back from the steps
    // before it: aibox's commit point (`syncfs`) then waits only for its own writes,
    // and a baseline is not slowed by writeback it did not cause.
    let _ = Command::new("sync").status();
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
    // The last line is ours (earlier ones are GNU time's notes about the command).
    let line = fs_err::read_to_string(&rss_file)
        .ok()
        .and_then(|t| t.lines().last().map(str::to_owned))
        .unwrap_or_default();
    let mut fields = line.split_whitespace();
    let rss_kib = fields.next().and_then(|f| f.parse().ok());
    let cpu_secs = match (
        fields.next().and_then(|f| f.parse::<f64>().ok()),
        fields.next().and_then(|f| f.parse::<f64>().ok()),
    ) {
        (Some(user), Some(system)) => Some(user + system),
        _ => None,
    };
    let _ = fs_err::remove_file(&rss_file);
    Ok(Sample {
        secs,
        rss_kib,
        cpu_secs,
    })
}

/// Tries of each baseline per measured run.
const BASELINE_TRIES: usize = 3;
/// GNU `time` (Debian package `time`), for CPU time and peak RSS.
const GNU_TIME: &str = "/usr/bin/time";

/// The fastest run by wall time.
fn fastest(v: Vec<Sample>) -> Sample {
    v.into_iter()
        .min_by(|a, b| a.secs.total_cmp(&b.secs))
        .unwrap_or(Sample {
            secs: f64::NAN,
            rss_kib: None,
            cpu_secs: None,
        })
}

/// The median run by wall time (its CPU time with it), and the highest RSS of all runs.
fn median(mut v: Vec<Sample>) -> Sample {
    v.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    let mid = v[v.len() / 2];
    let rss_kib = v.iter().filter_map(|s| s.rss_kib).max();
    Sample { rss_kib, ..mid }
}

/// A project selecting every skill of the release (the issue's measurement installed
/// all of them: about 1,720 files with the snapshot at 1x). The local archive is a
/// trusted source, as the official release is: its skills are first-party, so the
/// review gate lets them through and `skill list` and `doctor` check them against the
/// install marker, the path a real project takes.
fn config(release: &Release) -> String {
    let include: Vec<String> = release.skills.iter().map(|s| format!("\"{s}\"")).collect();
    let archive = release.archive.display();
    format!(
        "[container]\nname = \"bench\"\n\n[context]\nmode = \"processkit\"\npackages = [\"product\"]\n\n\
         [skills]\ninclude = [{}]\n\n\
         [processkit]\nsource = \"{archive}\"\nversion = \"{}\"\nsha256 = \"{}\"\n\
         trusted_sources = [\"{archive}\"]\n",
        include.join(", "),
        release.version,
        release.digest
    )
}

struct Release {
    archive: PathBuf,
    version: String,
    digest: String,
    /// Every skill name of the release.
    skills: Vec<String>,
}

fn write_release(dir: &Path, release: &SyntheticRelease) -> Result<Release, String> {
    let data = release.tar_gz();
    let archive = dir.join(release.archive_name());
    fs_err::write(&archive, &data).map_err(|e| e.to_string())?;
    let skills = release
        .files
        .keys()
        .filter_map(|p| p.strip_prefix("context/skills/")?.strip_suffix("/SKILL.md"))
        .filter_map(|cat_skill| {
            let (cat, skill) = cat_skill.split_once('/')?;
            (!cat.starts_with('_') && !skill.contains('/')).then(|| skill.to_owned())
        })
        .collect();
    Ok(Release {
        archive,
        version: release.version.clone(),
        digest: sha256_hex(&data),
        skills,
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
    doctor: Vec<Sample>,
    skill_list: Vec<Sample>,
    mcp_list: Vec<Sample>,
    cp: Vec<Sample>,
    sha: Vec<Sample>,
    files: (usize, u64),
}

/// One run of every step into `r`, with `tries` tries of each baseline (none for the
/// warm-up run, whose numbers are dropped).
fn one_run(
    bin: &Path,
    work: &Path,
    run: usize,
    (v1, v2): (&Release, &Release),
    r: &mut Results,
    tries: usize,
) -> Result<(), String> {
    // Fresh folders: `run` starts from an empty `target/bench/` (see there for why).
    let project = work.join(format!("project-{run}"));
    let copy = work.join(format!("copy-{run}"));
    fs_err::create_dir_all(&project).map_err(|e| e.to_string())?;
    fs_err::create_dir_all(&copy).map_err(|e| e.to_string())?;
    let toml = project.join("aibox.toml");
    fs_err::write(&toml, config(v1)).map_err(|e| e.to_string())?;
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
    let (files, bytes) = tree_size(&project.join("context"));
    let agents = fs_err::metadata(project.join("AGENTS.md")).map_or(0, |m| m.len());
    r.files = (files + usize::from(agents > 0), bytes + agents);
    r.noop
        .push(measure(&mut aibox(&["apply"]), "no-op apply", work)?);
    // The baselines are short and swing most with a busy disk: the fastest of a few
    // tries, which holds aibox to the stricter ratio.
    let mut cps = Vec::new();
    let mut shas = Vec::new();
    for k in 0..tries {
        let into = copy.join(k.to_string());
        fs_err::create_dir_all(&into).map_err(|e| e.to_string())?;
        let mut cp = Command::new("cp");
        cp.arg("-r")
            .arg(project.join("context"))
            .arg(project.join("AGENTS.md"))
            .arg(&into);
        cps.push(measure(&mut cp, "cp -r", work)?);
        let mut sha = Command::new("sh");
        sha.arg("-c")
            .arg("find \"$1\" \"$2\" -type f -print0 | xargs -0 sha256sum > /dev/null")
            .arg("sh")
            .arg(project.join("context"))
            .arg(project.join("AGENTS.md"));
        shas.push(measure(&mut sha, "sha256sum", work)?);
    }
    if tries > 0 {
        r.cp.push(fastest(cps));
        r.sha.push(fastest(shas));
    }
    fs_err::write(&toml, config(v2)).map_err(|e| e.to_string())?;
    r.upgrade
        .push(measure(&mut aibox(&["apply"]), "upgrade", work)?);
    r.integrity.push(measure(
        &mut aibox(&["doctor", "--integrity"]),
        "doctor --integrity",
        work,
    )?);
    // The read-only commands a user runs at any time: each must stay linear in the
    // installed content (issue 32 saw `doctor` and `skill list` grow quadratically).
    r.doctor
        .push(measure(&mut aibox(&["doctor"]), "doctor", work)?);
    r.skill_list
        .push(measure(&mut aibox(&["skill", "list"]), "skill list", work)?);
    r.mcp_list
        .push(measure(&mut aibox(&["mcp", "list"]), "mcp list", work)?);
    // Nothing is deleted here: see `run` for why trees stay until the factor is done.
    Ok(())
}

/// First install and upgrade: within this factor of `cp -r` of the same tree.
const COPY_RATIO: f64 = 2.0;
/// No-op `apply` at 1x, in milliseconds.
const NOOP_MS: f64 = 30.0;
/// `doctor --integrity` re-hashes every byte: within this factor of `sha256sum` (the
/// target of the criterion bench, `crates/aibox-provenance/benches/processkit.rs`).
const HASH_RATIO: f64 = 3.0;
/// Peak RSS of any step at 10x and above, in MiB.
const RSS_MIB: f64 = 64.0;
/// A step grows linearly when its 10x/1x time ratio stays within this factor of the
/// content's byte ratio (fixed start-up costs make small factors look sub-linear).
const LINEAR_SLACK: f64 = 1.5;

/// What a row is held to.
#[derive(Clone, Copy)]
enum Target {
    /// At most this ratio to the row's baseline.
    Ratio(f64),
    /// Under this many milliseconds.
    Millis(f64),
    /// Peak RSS under this many MiB.
    RssMib(f64),
    /// No target at this factor.
    None,
}

impl Target {
    fn describe(self, baseline: &str) -> String {
        match self {
            Self::Ratio(r) => format!("<= {r:.1}x {baseline}"),
            Self::Millis(ms) => format!("< {ms:.0} ms"),
            Self::RssMib(m) => format!("< {m:.0} MiB"),
            Self::None => "-".to_owned(),
        }
    }
}

/// One reported step.
struct Row {
    step: &'static str,
    ours: Sample,
    baseline: &'static str,
    base: Sample,
    target: Target,
}

#[allow(clippy::cast_precision_loss)] // KiB to MiB, display and comparison only
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

impl Row {
    /// Whether the row has a time (the peak-RSS row has none).
    fn timed(&self) -> bool {
        !self.ours.secs.is_nan()
    }

    fn ratio(&self) -> f64 {
        self.ours.secs / self.base.secs
    }

    /// `Some(met)` when the row has a target (RSS unknown counts as not met).
    fn met(&self) -> Option<bool> {
        match self.target {
            Target::Ratio(r) => Some(self.ratio() <= r),
            Target::Millis(ms) => Some(self.ours.secs * 1000.0 < ms),
            Target::RssMib(m) => Some(self.ours.rss_kib.is_some_and(|k| mib(k) < m)),
            Target::None => None,
        }
    }
}

/// The medians of one factor, and its rows with their targets.
struct FactorReport {
    factor: usize,
    runs: usize,
    files: usize,
    bytes: u64,
    rows: Vec<Row>,
}

impl FactorReport {
    fn new(factor: usize, runs: usize, r: Results) -> Self {
        let cp = median(r.cp);
        let sha = median(r.sha);
        let first = median(r.first);
        let noop = median(r.noop);
        let upgrade = median(r.upgrade);
        let integrity = median(r.integrity);
        let doctor = median(r.doctor);
        let skill_list = median(r.skill_list);
        let mcp_list = median(r.mcp_list);
        let peak = [
            first, noop, upgrade, integrity, doctor, skill_list, mcp_list,
        ]
        .iter()
        .filter_map(|s| s.rss_kib)
        .max();
        let rows = vec![
            Row {
                step: "first install",
                ours: first,
                baseline: "cp -r",
                base: cp,
                target: Target::Ratio(COPY_RATIO),
            },
            Row {
                step: "no-op apply",
                ours: noop,
                baseline: "cp -r",
                base: cp,
                target: if factor <= 1 {
                    Target::Millis(NOOP_MS)
                } else {
                    Target::None
                },
            },
            Row {
                step: "upgrade",
                ours: upgrade,
                baseline: "cp -r",
                base: cp,
                target: Target::Ratio(COPY_RATIO),
            },
            Row {
                step: "doctor --integrity",
                ours: integrity,
                baseline: "sha256sum",
                base: sha,
                target: Target::Ratio(HASH_RATIO),
            },
            // Held by the linearity line (10x within the bytes ratio), not per factor.
            Row {
                step: "doctor",
                ours: doctor,
                baseline: "cp -r",
                base: cp,
                target: Target::None,
            },
            Row {
                step: "skill list",
                ours: skill_list,
                baseline: "cp -r",
                base: cp,
                target: Target::None,
            },
            Row {
                step: "mcp list",
                ours: mcp_list,
                baseline: "cp -r",
                base: cp,
                target: Target::None,
            },
            Row {
                step: "peak RSS, any step",
                ours: Sample {
                    secs: f64::NAN,
                    rss_kib: peak,
                    cpu_secs: None,
                },
                baseline: "",
                base: cp,
                target: if factor >= 10 {
                    Target::RssMib(RSS_MIB)
                } else {
                    Target::None
                },
            },
        ];
        Self {
            factor,
            runs,
            files: r.files.0,
            bytes: r.files.1,
            rows,
        }
    }
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "-",
    }
}

fn rss_text(kib: Option<u64>) -> String {
    kib.map_or_else(|| "n/a".to_owned(), |k| format!("{:.1} MiB", mib(k)))
}

#[allow(clippy::cast_precision_loss)] // display only
fn render_factor(out: &mut String, f: &FactorReport) {
    let _ = writeln!(
        out,
        "processkit-like release at {}x: {} installed files ({:.1} MB) under context/ and AGENTS.md, \
         every skill selected; median of {} run(s)",
        f.factor,
        f.files,
        f.bytes as f64 / 1e6,
        f.runs
    );
    let _ = writeln!(
        out,
        "  {:<20} {:>11} {:>10}   {:<10} {:>10}  {:>8}  {:>10}   {:<18} result",
        "step", "aibox", "(cpu)", "baseline", "", "ratio", "peak RSS", "target"
    );
    for row in &f.rows {
        let target = row.target.describe(row.baseline);
        if !row.timed() {
            let _ = writeln!(
                out,
                "  {:<20} {:>11} {:>10}   {:<10} {:>10}  {:>8}  {:>10}   {target:<18} {}",
                row.step,
                "",
                "",
                "",
                "",
                "",
                rss_text(row.ours.rss_kib),
                verdict(row.met())
            );
            continue;
        }
        let cpu = row.ours.cpu_secs.map_or_else(
            || "n/a".to_owned(),
            // GNU time counts in hundredths of a second.
            |c| {
                if c < 0.01 {
                    "<10 ms".to_owned()
                } else {
                    format!("{:.0} ms", c * 1000.0)
                }
            },
        );
        let _ = writeln!(
            out,
            "  {:<20} {:>8.1} ms {:>10}   {:<10} {:>7.1} ms  {:>7.2}x  {:>10}   {target:<18} {}",
            row.step,
            row.ours.secs * 1000.0,
            format!("({cpu})"),
            row.baseline,
            row.base.secs * 1000.0,
            row.ratio(),
            rss_text(row.ours.rss_kib),
            verdict(row.met())
        );
    }
}

/// Growth from the smallest to the largest factor: `(name, ratio)` per step, and whether
/// every step stayed linear.
#[allow(clippy::cast_precision_loss)] // ratios of counts
fn linearity(small: &FactorReport, large: &FactorReport) -> (f64, f64, Vec<(String, f64)>, bool) {
    let files = large.files as f64 / small.files as f64;
    let bytes = large.bytes as f64 / small.bytes as f64;
    let mut steps = Vec::new();
    let mut linear = true;
    // Each baseline once, after the steps, for comparison (they bound what linear looks
    // like here).
    let mut baselines: Vec<(String, f64)> = Vec::new();
    for (a, b) in small.rows.iter().zip(&large.rows) {
        if !a.timed() {
            if let (Some(x), Some(y)) = (a.ours.rss_kib, b.ours.rss_kib) {
                steps.push(("peak RSS".to_owned(), y as f64 / x as f64));
            }
            continue;
        }
        let r = b.ours.secs / a.ours.secs;
        linear &= r <= bytes * LINEAR_SLACK;
        steps.push((a.step.to_owned(), r));
        if !baselines.iter().any(|(name, _)| name == a.baseline) {
            baselines.push((a.baseline.to_owned(), b.base.secs / a.base.secs));
        }
    }
    steps.extend(baselines);
    (files, bytes, steps, linear)
}

fn json_factor(f: &FactorReport) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = f
        .rows
        .iter()
        .map(|row| {
            let timed = row.timed();
            serde_json::json!({
                "step": row.step,
                "ms": timed.then_some(row.ours.secs * 1000.0),
                "peak_rss_kib": row.ours.rss_kib,
                "cpu_ms": row.ours.cpu_secs.map(|c| c * 1000.0),
                "baseline": timed.then_some(row.baseline),
                "baseline_ms": timed.then_some(row.base.secs * 1000.0),
                "ratio": timed.then(|| row.ratio()),
                "target": match row.target {
                    Target::None => None,
                    t => Some(t.describe(row.baseline)),
                },
                "met": row.met(),
            })
        })
        .collect();
    serde_json::json!({
        "factor": f.factor,
        "runs": f.runs,
        "installed_files": f.files,
        "installed_bytes": f.bytes,
        "steps": rows,
    })
}

/// The options every bench takes: `--bin PATH`, `--keep`, `--json FILE`.
#[derive(Default)]
pub(crate) struct Common {
    pub bin: Option<PathBuf>,
    pub keep: bool,
    pub json: Option<PathBuf>,
}

impl Common {
    /// Takes `arg` (reading its value from `rest`) when it is one of the common options;
    /// `Ok(false)` leaves it to the bench.
    pub(crate) fn take<'a>(
        &mut self,
        arg: &str,
        rest: &mut impl Iterator<Item = &'a String>,
    ) -> Result<bool, String> {
        match arg {
            "--keep" => self.keep = true,
            "--bin" => self.bin = Some(PathBuf::from(rest.next().ok_or("--bin needs a path")?)),
            "--json" => self.json = Some(PathBuf::from(rest.next().ok_or("--json needs a path")?)),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The `aibox` to measure: `given` (`--bin`), else this tree's, built in release mode.
pub(crate) fn release_aibox(given: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(bin) = given {
        return Ok(bin);
    }
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
    Ok(std::env::current_dir()
        .map_err(|e| e.to_string())?
        .join("target/release/aibox"))
}

/// `cargo xtask bench [--factors 1,10] [--runs N] [--bin PATH] [--keep] [--json FILE]`
/// (`--runs`: runs at 1x, one run above; `--bin`: measure that `aibox` instead of
/// building this tree's; `--keep`: leave `target/bench/`; `--json`: also write the
/// numbers there).
#[allow(clippy::too_many_lines)] // one linear recipe reads better than fragments
pub fn run(args: &[String]) -> Result<(), String> {
    let mut factors = vec![1_usize, 10];
    let mut runs_1x = 5_usize;
    let mut common = Common::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if common.take(a, &mut it)? {
            continue;
        }
        match a.as_str() {
            "--factors" => {
                factors = it
                    .next()
                    .ok_or("--factors needs a list")?
                    .split(',')
                    .map(|f| match f.parse() {
                        Ok(n) if n >= 1 => Ok(n),
                        _ => Err(format!("bad factor `{f}` (a whole number from 1)")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--runs" => {
                runs_1x = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n >= 1)
                    .ok_or("--runs needs a number from 1")?;
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let Common {
        bin: given_bin,
        keep,
        json: json_out,
    } = common;
    factors.sort_unstable();
    factors.dedup();
    let bin = release_aibox(given_bin)?;
    let base = std::env::current_dir()
        .map_err(|e| e.to_string())?
        .join("target/bench");
    if base.exists() {
        fs_err::remove_dir_all(&base).map_err(|e| e.to_string())?;
    }
    if !Path::new(GNU_TIME).exists() {
        say(
            "bench: /usr/bin/time (Debian package `time`) is missing: peak RSS not measured \
             (scripts/setup-test-deps.sh installs it)",
        );
    }
    let mut reports = Vec::new();
    for &factor in &factors {
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
        // One warm-up run fills the page cache and the archive cache. Every run works in
        // fresh folders and no tree is deleted until the factor is done: ext4 without a
        // journal skips inodes freed in the last 60 s when it allocates new ones, so
        // creating thousands of files right after deleting thousands costs several times
        // more kernel time (seen in `perf` as `recently_deleted` under `ext4_create` and
        // `ext4_mkdir`). Deleting between runs measured that artefact, for aibox and
        // `cp -r` unevenly.
        one_run(&bin, &work, 0, (&v1, &v2), &mut Results::default(), 0)?;
        for i in 0..runs {
            say(&format!("==> bench {factor}x: run {}/{runs}", i + 1));
            one_run(&bin, &work, i + 1, (&v1, &v2), &mut r, BASELINE_TRIES)?;
        }
        reports.push(FactorReport::new(factor, runs, r));
        if !keep {
            fs_err::remove_dir_all(&work).map_err(|e| e.to_string())?;
        }
    }

    let mut out = String::new();
    for f in &reports {
        render_factor(&mut out, f);
        out.push('\n');
    }
    let mut json_linearity = serde_json::Value::Null;
    if let (Some(small), Some(large)) = (reports.first(), reports.last())
        && reports.len() > 1
    {
        let (files, bytes, steps, linear) = linearity(small, large);
        let shown: Vec<String> = steps
            .iter()
            .map(|(name, r)| format!("{name} {r:.1}x"))
            .collect();
        let _ = writeln!(
            out,
            "linearity {}x -> {}x: files {files:.2}x, bytes {bytes:.2}x; time {}\n  \
             target: every aibox step within {LINEAR_SLACK:.1}x of the bytes ratio: {}",
            small.factor,
            large.factor,
            shown.join(", "),
            verdict(Some(linear))
        );
        json_linearity = serde_json::json!({
            "from": small.factor,
            "to": large.factor,
            "files_ratio": files,
            "bytes_ratio": bytes,
            "time_ratios": steps.iter().map(|(n, r)| serde_json::json!({"step": n, "ratio": r})).collect::<Vec<_>>(),
            "linear": linear,
        });
    }
    let verdicts: Vec<bool> = reports
        .iter()
        .flat_map(|f| f.rows.iter().filter_map(Row::met))
        .collect();
    let missed = verdicts.iter().filter(|m| !**m).count();
    let _ = writeln!(
        out,
        "targets: {} met, {missed} missed (a measurement, not a gate: the exit code stays 0)",
        verdicts.len() - missed
    );
    say(&out);
    if let Some(path) = json_out {
        let doc = serde_json::json!({
            "factors": reports.iter().map(json_factor).collect::<Vec<_>>(),
            "linearity": json_linearity,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        fs_err::write(&path, format!("{text}\n")).map_err(|e| e.to_string())?;
        say(&format!("bench: numbers written to {}", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The report's arithmetic on made-up medians: targets, verdicts, linearity.

    use super::*;

    fn sample(ms: f64, rss_mib: u64) -> Sample {
        Sample {
            secs: ms / 1000.0,
            rss_kib: Some(rss_mib * 1024),
            cpu_secs: Some(ms / 2000.0),
        }
    }

    /// A factor's medians: `scale` multiplies every time, `rss` is the first install's.
    fn report(factor: usize, scale: f64, rss: u64) -> FactorReport {
        let r = Results {
            first: vec![sample(300.0 * scale, rss)],
            noop: vec![sample(20.0 * scale, 10)],
            upgrade: vec![sample(500.0 * scale, 10)],
            integrity: vec![sample(30.0 * scale, 5)],
            doctor: vec![sample(40.0 * scale, 5)],
            skill_list: vec![sample(40.0 * scale, 5)],
            mcp_list: vec![sample(10.0 * scale, 5)],
            cp: vec![sample(200.0 * scale, 1)],
            sha: vec![sample(20.0 * scale, 1)],
            files: (
                1700 * factor,
                10_000_000 * u64::try_from(factor).unwrap_or(0),
            ),
        };
        FactorReport::new(factor, 1, r)
    }

    #[test]
    fn rows_carry_their_targets_and_verdicts() {
        let one = report(1, 1.0, 20);
        let met: Vec<(&str, Option<bool>)> = one.rows.iter().map(|r| (r.step, r.met())).collect();
        assert_eq!(
            met,
            [
                ("first install", Some(true)), // 1.5x cp -r
                ("no-op apply", Some(true)),   // 20 ms
                ("upgrade", Some(false)),      // 2.5x cp -r
                ("doctor --integrity", Some(true)),
                ("doctor", None),
                ("skill list", None),
                ("mcp list", None),
                ("peak RSS, any step", None), // only held at 10x
            ]
        );
        let ten = report(10, 10.0, 100);
        let met: Vec<Option<bool>> = ten.rows.iter().map(Row::met).collect();
        // No-op has no absolute target at 10x; 100 MiB misses the RSS target.
        assert_eq!(
            met,
            [
                Some(true),
                None,
                Some(false),
                Some(true),
                None,
                None,
                None,
                Some(false)
            ]
        );
        let mut text = String::new();
        render_factor(&mut text, &ten);
        assert!(
            text.contains("MISSED") && text.contains("< 64 MiB"),
            "{text}"
        );
    }

    #[test]
    fn linearity_compares_each_step_with_the_content() {
        let (files, bytes, steps, linear) = linearity(&report(1, 1.0, 20), &report(10, 10.0, 40));
        assert!((files - 10.0).abs() < 1e-9 && (bytes - 10.0).abs() < 1e-9);
        assert!(linear, "{steps:?}");
        assert!(
            steps
                .iter()
                .any(|(n, r)| n == "peak RSS" && (*r - 2.0).abs() < 1e-9)
        );
        let (_, _, steps, linear) = linearity(&report(1, 1.0, 20), &report(10, 20.0, 40));
        assert!(!linear, "20x the time for 10x the bytes: {steps:?}");
    }
}
