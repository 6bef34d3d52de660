//! `cargo xtask bench`: the processkit install path of the release-built `aibox`, side by
//! side with `cp -r` and `sha256sum` of the same files, and optionally a previous aibox
//! (`--baseline`), measured in the same run and reported against the targets of issue 32.
//!
//! A real-sized release (`SyntheticRelease::processkit_like`: 146 skills, about 860 files,
//! 5 MB; every skill selected, so about 1,720 installed files and 10 MB with the
//! snapshot) and its successor are written as local `.tar.gz` archives pinned by digest,
//! at 1x and 10x the files and bytes (`processkit_like_scaled`). For each size: first
//! install, a cold first install (an empty download cache, the release downloaded from
//! a loopback server and verified against its sidecar: of a clone of a project, whose
//! committed `aibox.lock` pins the MCP servers' dependencies, and shown beside it, of a
//! new project, which also locks them against the package index with the uv this machine
//! has, overriding the `AIBOX_UV=none` of cargo's `[env]`), no-op `apply`, upgrade to the successor, `doctor --integrity`, and the
//! read-only `doctor`, `skill list` and `mcp list` (held to linear growth), with wall
//! time, CPU time (GNU `time`'s `%U` and `%S`, when `/usr/bin/time` exists; wall time
//! well above CPU time is waiting, on `fsync` or on a busy machine) and aibox's own peak
//! RSS (`AIBOX_PEAK_RSS`; GNU `time`'s `%M` counts children too). Baselines: `cp -r` of
//! the installed tree and `sha256sum` of exactly the files `doctor --integrity` vouches
//! for (the fastest of three tries per run, as they swing most with a busy disk); the
//! previous aibox runs the same steps on its own project of the same releases, fetched
//! from the same loopback server, as it fetches release assets. `--loaded` makes every
//! measured run a second time with the other cores busy and reports every row of those
//! runs in a table of its own, with the same targets. Each row carries its target and
//! whether it was met;
//! a linearity line compares the largest factor with the smallest. Medians of several
//! runs at 1x, one run above, so the whole bench takes a few minutes. A measurement, not
//! a gate: missed targets are printed, the exit code stays 0.

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
        if let Some(dir) = cmd.get_current_dir() {
            c.current_dir(dir);
        }
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
    // aibox reports its own peak memory on request: `doctor`'s children (`podman`,
    // `git`) are not aibox's memory, and GNU time counts the largest of them.
    run.env("AIBOX_PEAK_RSS", "1");
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
    let (rss_kib, cpu_secs) = readings(&line, &String::from_utf8_lossy(&out.stderr));
    let _ = fs_err::remove_file(&rss_file);
    Ok(Sample {
        secs,
        rss_kib,
        cpu_secs,
    })
}

/// Peak RSS (KiB) and CPU seconds from GNU time's `%M %U %S` line and the command's
/// stderr: aibox's own peak when it reported one (`AIBOX_PEAK_RSS`), else GNU time's,
/// which is the largest of the command and its children.
fn readings(time_line: &str, stderr: &str) -> (Option<u64>, Option<f64>) {
    let mut fields = time_line.split_whitespace();
    let time_rss = fields.next().and_then(|f| f.parse().ok());
    let cpu_secs = match (
        fields.next().and_then(|f| f.parse::<f64>().ok()),
        fields.next().and_then(|f| f.parse::<f64>().ok()),
    ) {
        (Some(user), Some(system)) => Some(user + system),
        _ => None,
    };
    (own_peak_rss(stderr).or(time_rss), cpu_secs)
}

/// The peak RSS in KiB that aibox printed as its last `aibox: peak RSS N KiB` line.
fn own_peak_rss(stderr: &str) -> Option<u64> {
    stderr.lines().rev().find_map(|l| {
        l.strip_prefix("aibox: peak RSS ")?
            .strip_suffix(" KiB")?
            .parse()
            .ok()
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
    /// First install with an empty download cache (download included) of a clone of a
    /// project: its committed `aibox.lock` pins the MCP servers' dependencies.
    cold: Vec<Sample>,
    /// The same for a new project, with no `aibox.lock`: it also locks the MCP servers'
    /// dependencies, asking the package index (`uv pip compile`, network).
    cold_new: Vec<Sample>,
    noop: Vec<Sample>,
    upgrade: Vec<Sample>,
    integrity: Vec<Sample>,
    doctor: Vec<Sample>,
    skill_list: Vec<Sample>,
    mcp_list: Vec<Sample>,
    cp: Vec<Sample>,
    sha: Vec<Sample>,
    files: (usize, u64),
    /// The previous aibox's steps (`--baseline`), empty without one.
    prev: PrevResults,
}

/// The steps the previous aibox has (it has no `skill list` or `mcp list` of installed
/// content), measured on its own project of the same release.
#[derive(Default)]
struct PrevResults {
    first: Vec<Sample>,
    cold: Vec<Sample>,
    noop: Vec<Sample>,
    upgrade: Vec<Sample>,
    integrity: Vec<Sample>,
    doctor: Vec<Sample>,
    /// Files and bytes it installed (context/ and AGENTS.md).
    files: (usize, u64),
}

/// The loopback server the releases are fetched from as release assets (an archive and
/// its `.sha256` sidecar under `{source}/{version}/`): by the cold first install, and by
/// the previous aibox, which reads no local archive.
struct Served {
    server: aibox_test_support::http::Server,
    /// The uv a new project's cold install locks its MCP servers' dependencies with,
    /// asking the package index (cargo's `[env]` gives aibox `AIBOX_UV=none`, which
    /// would leave them unlocked); `None` when this machine has none.
    uv: Option<camino::Utf8PathBuf>,
}

impl Served {
    fn start(releases: &[&Release]) -> Result<Self, String> {
        let server = aibox_test_support::http::Server::start().map_err(|e| e.to_string())?;
        for r in releases {
            let data = fs_err::read(&r.archive).map_err(|e| e.to_string())?;
            let path = format!("/bench/processkit/{v}/processkit-{v}.tar.gz", v = r.version);
            server.route(
                &format!("{path}.sha256"),
                aibox_test_support::http::Route::ok(format!(
                    "{}  processkit-{}.tar.gz\n",
                    r.digest, r.version
                )),
            );
            server.route(&path, aibox_test_support::http::Route::ok(data));
        }
        Ok(Self {
            server,
            uv: aibox_test_support::find_uv(),
        })
    }

    /// The `[processkit] source` the releases are served under.
    fn source(&self) -> String {
        self.server.url("/bench/processkit")
    }
}

/// The asset URL template of [`Served`] (both aibox versions read it).
const ASSET_TEMPLATE: &str = "{source}/{version}/processkit-{version}.tar.gz";

/// Our `aibox.toml` for a cold first install: the release fetched from [`Served`] and
/// verified against its sidecar (no pin: a new project), every skill selected, the
/// served source trusted as the official one is.
fn cold_config(release: &Release, served: &Served) -> String {
    let include: Vec<String> = release.skills.iter().map(|s| format!("\"{s}\"")).collect();
    let source = served.source();
    format!(
        "[container]\nname = \"bench\"\n\n[context]\nmode = \"processkit\"\npackages = [\"product\"]\n\n\
         [skills]\ninclude = [{}]\n\n\
         [processkit]\nsource = \"{source}\"\nversion = \"{}\"\n\
         release_asset_url_template = \"{ASSET_TEMPLATE}\"\ntrusted_sources = [\"{source}\"]\n",
        include.join(", "),
        release.version,
    )
}

/// The two cold first installs of run `run` (an empty download cache each) into `cold`
/// and a clone of it: each must install the `files` the first install did.
fn cold_installs(
    ours: &dyn Fn(&Path, &Path, &[&str]) -> Command,
    (work, run): (&Path, usize),
    (cold, served): (&Path, &Served),
    files: usize,
    r: &mut Results,
) -> Result<(), String> {
    // Cold: an empty download cache, so the release is downloaded (from the loopback
    // server), verified against its sidecar and unpacked first. A new project also
    // locks its MCP servers' dependencies against the package index (network, about the
    // same at every size); a clone of it (its `aibox.toml` and committed `aibox.lock`)
    // reuses that lock, so its row is the download, unpack and install alone.
    let empty = work.join(format!("cache-cold-{run}"));
    let mut new_project = ours(cold, &empty, &["apply"]);
    if let Some(uv) = &served.uv {
        new_project.env("AIBOX_UV", uv);
    }
    r.cold_new.push(measure(
        &mut new_project,
        "cold first install, new project",
        work,
    )?);
    let lock = fs_err::read_to_string(cold.join("aibox.lock")).unwrap_or_default();
    if served.uv.is_some() && !lock.contains("[mcp.environments.") {
        say(&format!(
            "==> bench: the new project in {} did not lock its MCP servers' dependencies \
             (no package index?): its row is without the locking",
            cold.display()
        ));
    }
    let clone = work.join(format!("clone-{run}"));
    fs_err::create_dir_all(&clone).map_err(|e| e.to_string())?;
    for committed in ["aibox.toml", "aibox.lock"] {
        fs_err::copy(cold.join(committed), clone.join(committed)).map_err(|e| e.to_string())?;
    }
    r.cold.push(measure(
        &mut ours(&clone, &work.join(format!("cache-clone-{run}")), &["apply"]),
        "cold first install, clone",
        work,
    )?);
    for dir in [cold, &clone] {
        if tree_size(&dir.join("context")).0 != files {
            return Err(format!(
                "the cold first install in {} did not install the {files} files the first \
                 install did",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// The previous aibox (`--baseline PATH`, a binary the user built, v0.21.2 when the
/// issue measured it), fetching the releases from [`Served`].
struct Prev {
    bin: PathBuf,
}

impl Prev {
    /// Its `aibox.toml` (its own schema) for the same selection of the same release.
    fn config(release: &Release, served: &Served) -> String {
        let include: Vec<String> = release.skills.iter().map(|s| format!("\"{s}\"")).collect();
        format!(
            "[aibox]\nversion = \"0.21.2\"\n\n[container]\nname = \"bench\"\n\n\
             [context]\npackages = [\"product\"]\n\n[skills]\ninclude = [{}]\n\n\
             [processkit]\nsource = \"{}\"\nversion = \"{}\"\n\
             release_asset_url_template = \"{ASSET_TEMPLATE}\"\n",
            include.join(", "),
            served.source(),
            release.version
        )
    }

    /// `aibox` of the previous version in `project`, with its download cache in `cache`.
    fn command(&self, project: &Path, cache: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.current_dir(project)
            .args(args)
            .env("XDG_CACHE_HOME", cache)
            .env("AIBOX_NO_CONTAINER", "1")
            .env("NO_COLOR", "1");
        c
    }
}

/// The measured steps of the previous aibox on a project of its own (`sync
/// --no-container` installs and upgrades; it has no `skill list` of installed content),
/// the cold first install in another project with an empty download cache.
fn prev_run(
    prev: &Prev,
    served: &Served,
    work: &Path,
    run: usize,
    (v1, v2): (&Release, &Release),
    r: &mut PrevResults,
) -> Result<(), String> {
    let project = work.join(format!("prev-{run}"));
    let cold = work.join(format!("prev-cold-{run}"));
    for dir in [&project, &cold] {
        fs_err::create_dir_all(dir).map_err(|e| e.to_string())?;
        fs_err::write(dir.join("aibox.toml"), Prev::config(v1, served))
            .map_err(|e| e.to_string())?;
    }
    let cache = work.join("cache-prev");
    let sync = ["sync", "--no-container"];
    r.first.push(measure(
        &mut prev.command(&project, &cache, &sync),
        "previous aibox: first install",
        work,
    )?);
    let (files, bytes) = tree_size(&project.join("context"));
    let agents = fs_err::metadata(project.join("AGENTS.md")).map_or(0, |m| m.len());
    r.files = (files + usize::from(agents > 0), bytes + agents);
    // It reports a failed install as a warning and exits 0: check that it installed.
    if !project.join("context/skills").is_dir() {
        return Err(format!(
            "previous aibox installed nothing in {} (run `{} sync --no-container` there to see why; \
             it reads its addon definitions from AIBOX_ADDONS_DIR or ~/.config/aibox/addons)",
            project.display(),
            prev.bin.display()
        ));
    }
    r.cold.push(measure(
        &mut prev.command(&cold, &work.join(format!("cache-prev-cold-{run}")), &sync),
        "previous aibox: cold first install",
        work,
    )?);
    r.noop.push(measure(
        &mut prev.command(&project, &cache, &sync),
        "previous aibox: no-op",
        work,
    )?);
    fs_err::write(project.join("aibox.toml"), Prev::config(v2, served))
        .map_err(|e| e.to_string())?;
    r.upgrade.push(measure(
        &mut prev.command(&project, &cache, &sync),
        "previous aibox: upgrade",
        work,
    )?);
    r.integrity.push(measure(
        &mut prev.command(&project, &cache, &["doctor", "--integrity"]),
        "previous aibox: doctor --integrity",
        work,
    )?);
    r.doctor.push(measure(
        &mut prev.command(&project, &cache, &["doctor"]),
        "previous aibox: doctor",
        work,
    )?);
    Ok(())
}

/// Every file `doctor --integrity` vouches for, root-relative: the marker's installed and
/// user-owned files and every file of the snapshot folders. `sha256sum` hashes this list,
/// so the integrity row compares the same work.
fn vouched_files(project: &Path) -> Result<Vec<PathBuf>, String> {
    let marker = project.join("context/.processkit-provenance.toml");
    let text = fs_err::read_to_string(&marker).map_err(|e| e.to_string())?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", marker.display()))?;
    let mut out = Vec::new();
    for key in ["files", "user_files"] {
        if let Some(files) = table.get(key).and_then(toml::Value::as_table) {
            out.extend(files.keys().map(|p| project.join(p)));
        }
    }
    let mut stack = vec![project.join("context/templates/processkit")];
    while let Some(d) = stack.pop() {
        for e in fs_err::read_dir(&d).map_err(|e| e.to_string())?.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => out.push(e.path()),
                _ => {}
            }
        }
    }
    Ok(out)
}

/// One run of every step into `r`, with `tries` tries of each baseline (none for the
/// warm-up run, whose numbers are dropped), and the previous aibox's steps after ours.
#[allow(clippy::too_many_arguments)] // one run's inputs, named where they are used
fn one_run(
    bin: &Path,
    prev: Option<&Prev>,
    served: &Served,
    work: &Path,
    run: usize,
    (v1, v2): (&Release, &Release),
    r: &mut Results,
    tries: usize,
) -> Result<(), String> {
    // Fresh folders: `run` starts from an empty `target/bench/` (see there for why).
    let project = work.join(format!("project-{run}"));
    let cold = work.join(format!("cold-{run}"));
    let copy = work.join(format!("copy-{run}"));
    for dir in [&project, &cold, &copy] {
        fs_err::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let toml = project.join("aibox.toml");
    fs_err::write(&toml, config(v1)).map_err(|e| e.to_string())?;
    fs_err::write(cold.join("aibox.toml"), cold_config(v1, served)).map_err(|e| e.to_string())?;
    let ours = |project: &Path, cache: &Path, args: &[&str]| {
        let mut c = Command::new(bin);
        c.arg("--project")
            .arg(project)
            .arg("--quiet")
            .args(args)
            .env("XDG_CACHE_HOME", cache)
            .env("NO_COLOR", "1");
        c
    };
    let cache = work.join("cache");
    let aibox = |args: &[&str]| ours(&project, &cache, args);
    r.first
        .push(measure(&mut aibox(&["apply"]), "first install", work)?);
    let (files, bytes) = tree_size(&project.join("context"));
    let agents = fs_err::metadata(project.join("AGENTS.md")).map_or(0, |m| m.len());
    r.files = (files + usize::from(agents > 0), bytes + agents);
    cold_installs(&ours, (work, run), (&cold, served), files, r)?;
    r.noop
        .push(measure(&mut aibox(&["apply"]), "no-op apply", work)?);
    // The baselines are short and swing most with a busy disk: the fastest of a few
    // tries, which holds aibox to the stricter ratio.
    let mut cps = Vec::new();
    for k in 0..tries {
        let into = copy.join(k.to_string());
        fs_err::create_dir_all(&into).map_err(|e| e.to_string())?;
        let mut cp = Command::new("cp");
        cp.arg("-r")
            .arg(project.join("context"))
            .arg(project.join("AGENTS.md"))
            .arg(&into);
        cps.push(measure(&mut cp, "cp -r", work)?);
    }
    fs_err::write(&toml, config(v2)).map_err(|e| e.to_string())?;
    r.upgrade
        .push(measure(&mut aibox(&["apply"]), "upgrade", work)?);
    r.integrity.push(measure(
        &mut aibox(&["doctor", "--integrity"]),
        "doctor --integrity",
        work,
    )?);
    // `sha256sum` of exactly the files `doctor --integrity` just hashed.
    let list = work.join(format!("vouched-{run}.list"));
    let mut listing = Vec::new();
    for p in vouched_files(&project)? {
        listing.extend_from_slice(p.as_os_str().as_encoded_bytes());
        listing.push(0);
    }
    fs_err::write(&list, listing).map_err(|e| e.to_string())?;
    let mut shas = Vec::new();
    for _ in 0..tries {
        let mut sha = Command::new("xargs");
        sha.arg("-0").arg("-a").arg(&list).arg("sha256sum");
        shas.push(measure(&mut sha, "sha256sum", work)?);
    }
    if tries > 0 {
        r.cp.push(fastest(cps));
        r.sha.push(fastest(shas));
    }
    // The read-only commands a user runs at any time: each must stay linear in the
    // installed content (issue 32 saw `doctor` and `skill list` grow quadratically).
    r.doctor
        .push(measure(&mut aibox(&["doctor"]), "doctor", work)?);
    r.skill_list
        .push(measure(&mut aibox(&["skill", "list"]), "skill list", work)?);
    r.mcp_list
        .push(measure(&mut aibox(&["mcp", "list"]), "mcp list", work)?);
    if let Some(prev) = prev {
        prev_run(prev, served, work, run, (v1, v2), &mut r.prev)?;
    }
    // Nothing is deleted here: see `run` for why trees stay until the factor is done.
    Ok(())
}

/// Keeps the other cores busy while alive (`--loaded`): one shell loop per core beyond
/// the first, so the measured command competes for CPU as on a machine where something
/// else is compiling. Helper threads that only pay off on an idle machine show here.
struct Spinners(Vec<std::process::Child>);

impl Spinners {
    fn start() -> Result<Self, String> {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        let mut children = Vec::new();
        for _ in 0..cores.saturating_sub(1).max(1) {
            children.push(
                Command::new("sh")
                    .arg("-c")
                    .arg("while :; do :; done")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("cannot start the load: {e}"))?,
            );
        }
        Ok(Self(children))
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// First install: within this factor of `cp -r` of the same tree (issue 32).
const COPY_RATIO: f64 = 1.3;
/// Upgrade: within this factor of `cp -r` of the whole tree (it writes far less).
const UPGRADE_RATIO: f64 = 2.0;
/// No-op `apply` at 1x, in milliseconds.
const NOOP_MS: f64 = 30.0;
/// `doctor --integrity` re-hashes every file it vouches for: no slower than `sha256sum`
/// of the same files.
const HASH_RATIO: f64 = 1.0;
/// Peak RSS of every step at every size, in MiB: memory must not grow with the release.
const RSS_MIB: f64 = 16.0;
/// First install (every factor) and `doctor` (above 1x): no slower than the previous
/// aibox (`--baseline`), in the same run.
const PREV_RATIO: f64 = 1.0;
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
    /// The previous aibox's median of the same step (`--baseline`), if it has the step.
    prev: Option<Sample>,
    /// At most this ratio to the previous aibox.
    prev_target: Option<f64>,
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

    /// Ours over the previous aibox's, when it was measured.
    fn prev_ratio(&self) -> Option<f64> {
        self.prev
            .filter(|_| self.timed())
            .map(|p| self.ours.secs / p.secs)
    }

    /// `Some(met)` when the row has a target (RSS unknown counts as not met); with a
    /// previous aibox, its target must be met too.
    fn met(&self) -> Option<bool> {
        let own = match self.target {
            Target::Ratio(r) => Some(self.ratio() <= r),
            Target::Millis(ms) => Some(self.ours.secs * 1000.0 < ms),
            Target::RssMib(m) => Some(self.ours.rss_kib.is_some_and(|k| mib(k) < m)),
            Target::None => None,
        };
        let prev = self
            .prev_target
            .zip(self.prev_ratio())
            .map(|(limit, r)| r <= limit);
        match (own, prev) {
            (Some(a), Some(b)) => Some(a && b),
            (a, b) => a.or(b),
        }
    }
}

/// The medians of one factor, and its rows with their targets.
struct FactorReport {
    factor: usize,
    runs: usize,
    files: usize,
    bytes: u64,
    /// Files and bytes the previous aibox installed, when it ran.
    prev_files: Option<(usize, u64)>,
    loaded: bool,
    rows: Vec<Row>,
}

/// The median of `v`, `None` when nothing was measured.
fn median_of(v: Vec<Sample>) -> Option<Sample> {
    (!v.is_empty()).then(|| median(v))
}

impl FactorReport {
    #[allow(clippy::too_many_lines)] // one row per step, in report order
    fn new(factor: usize, runs: usize, loaded: bool, r: Results) -> Self {
        let cp = median(r.cp);
        let sha = median(r.sha);
        let first = median(r.first);
        let cold = median(r.cold);
        let cold_new = median(r.cold_new);
        let noop = median(r.noop);
        let upgrade = median(r.upgrade);
        let integrity = median(r.integrity);
        let doctor = median(r.doctor);
        let skill_list = median(r.skill_list);
        let mcp_list = median(r.mcp_list);
        let p = r.prev;
        let prev_files = (!p.first.is_empty()).then_some(p.files);
        let (p_first, p_cold, p_noop, p_upgrade, p_integrity, p_doctor) = (
            median_of(p.first),
            median_of(p.cold),
            median_of(p.noop),
            median_of(p.upgrade),
            median_of(p.integrity),
            median_of(p.doctor),
        );
        let peak = [
            first, cold, cold_new, noop, upgrade, integrity, doctor, skill_list, mcp_list,
        ]
        .iter()
        .filter_map(|s| s.rss_kib)
        .max();
        let prev_peak = [p_first, p_cold, p_noop, p_upgrade, p_integrity, p_doctor]
            .iter()
            .flatten()
            .filter_map(|s| s.rss_kib)
            .max();
        let row = |step, ours, baseline, base, target| Row {
            step,
            ours,
            baseline,
            base,
            target,
            prev: None,
            prev_target: None,
        };
        let rows = vec![
            Row {
                prev: p_first,
                prev_target: Some(PREV_RATIO),
                ..row(
                    "first install",
                    first,
                    "cp -r",
                    cp,
                    Target::Ratio(COPY_RATIO),
                )
            },
            // The same targets as a warm first install: downloading 1.3 MB (13 MB at
            // 10x) from the loopback server is part of the work, as it is for the
            // previous aibox (which locks no dependencies: its cold install is a
            // clone's).
            Row {
                prev: p_cold,
                prev_target: Some(PREV_RATIO),
                ..row(
                    "cold first install",
                    cold,
                    "cp -r",
                    cp,
                    Target::Ratio(COPY_RATIO),
                )
            },
            // Plus `uv pip compile` against the real index: a network wait of seconds,
            // shown, not held to a copy's time.
            row("cold, new project", cold_new, "cp -r", cp, Target::None),
            Row {
                prev: p_noop,
                ..row(
                    "no-op apply",
                    noop,
                    "cp -r",
                    cp,
                    if factor <= 1 {
                        Target::Millis(NOOP_MS)
                    } else {
                        Target::None
                    },
                )
            },
            Row {
                prev: p_upgrade,
                ..row(
                    "upgrade",
                    upgrade,
                    "cp -r",
                    cp,
                    Target::Ratio(UPGRADE_RATIO),
                )
            },
            Row {
                prev: p_integrity,
                ..row(
                    "doctor --integrity",
                    integrity,
                    "sha256sum",
                    sha,
                    Target::Ratio(HASH_RATIO),
                )
            },
            // Held by the linearity line (10x within the bytes ratio), and above 1x to
            // the previous aibox.
            Row {
                prev: p_doctor,
                prev_target: (factor > 1).then_some(PREV_RATIO),
                ..row("doctor", doctor, "cp -r", cp, Target::None)
            },
            row("skill list", skill_list, "cp -r", cp, Target::None),
            row("mcp list", mcp_list, "cp -r", cp, Target::None),
            Row {
                prev: prev_peak.map(|k| Sample {
                    secs: f64::NAN,
                    rss_kib: Some(k),
                    cpu_secs: None,
                }),
                ..row(
                    "peak RSS, any step",
                    Sample {
                        secs: f64::NAN,
                        rss_kib: peak,
                        cpu_secs: None,
                    },
                    "",
                    cp,
                    Target::RssMib(RSS_MIB),
                )
            },
        ];
        Self {
            factor,
            runs,
            files: r.files.0,
            bytes: r.files.1,
            prev_files,
            loaded,
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

/// A CPU time as GNU time gives it (hundredths of a second).
fn cpu_text(cpu: Option<f64>) -> String {
    cpu.map_or_else(
        || "n/a".to_owned(),
        |c| {
            if c < 0.01 {
                "<10 ms".to_owned()
            } else {
                format!("{:.0} ms", c * 1000.0)
            }
        },
    )
}

impl Row {
    /// The row's target in words, the previous aibox's included.
    fn target_text(&self) -> String {
        let own = self.target.describe(self.baseline);
        match (self.prev_target, self.prev) {
            (Some(r), Some(_)) if own == "-" => format!("<= {r:.1}x previous"),
            (Some(r), Some(_)) => format!("{own}, <= {r:.1}x previous"),
            _ => own,
        }
    }
}

#[allow(clippy::cast_precision_loss)] // display only
fn render_factor(out: &mut String, f: &FactorReport) {
    let _ = writeln!(
        out,
        "processkit-like release at {}x: {} installed files ({:.1} MB) under context/ and AGENTS.md, \
         every skill selected; median of {} run(s){}",
        f.factor,
        f.files,
        f.bytes as f64 / 1e6,
        f.runs,
        if f.loaded {
            "; the other core(s) kept busy (--loaded)"
        } else {
            ""
        }
    );
    if let Some((files, bytes)) = f.prev_files {
        let _ = writeln!(
            out,
            "  previous aibox installed {files} files ({:.1} MB) from the same release",
            bytes as f64 / 1e6
        );
    }
    let with_prev = f.prev_files.is_some();
    let _ = write!(
        out,
        "  {:<20} {:>11} {:>10}   {:<10} {:>10}  {:>8}  {:>10}",
        "step", "aibox", "(cpu)", "baseline", "", "ratio", "peak RSS"
    );
    if with_prev {
        let _ = write!(
            out,
            "   {:>11} {:>10} {:>8} {:>10}",
            "previous", "(cpu)", "ratio", "peak RSS"
        );
    }
    let _ = writeln!(out, "   {:<34} result", "target");
    for row in &f.rows {
        let target = row.target_text();
        if row.timed() {
            let _ = write!(
                out,
                "  {:<20} {:>8.1} ms {:>10}   {:<10} {:>7.1} ms  {:>7.2}x  {:>10}",
                row.step,
                row.ours.secs * 1000.0,
                format!("({})", cpu_text(row.ours.cpu_secs)),
                row.baseline,
                row.base.secs * 1000.0,
                row.ratio(),
                rss_text(row.ours.rss_kib),
            );
        } else {
            let _ = write!(
                out,
                "  {:<20} {:>11} {:>10}   {:<10} {:>10}  {:>8}  {:>10}",
                row.step,
                "",
                "",
                "",
                "",
                "",
                rss_text(row.ours.rss_kib),
            );
        }
        if with_prev {
            match (row.prev, row.prev_ratio()) {
                (Some(p), Some(r)) => {
                    let _ = write!(
                        out,
                        "   {:>8.1} ms {:>10} {:>7.2}x {:>10}",
                        p.secs * 1000.0,
                        format!("({})", cpu_text(p.cpu_secs)),
                        r,
                        rss_text(p.rss_kib)
                    );
                }
                (Some(p), None) => {
                    let _ = write!(
                        out,
                        "   {:>11} {:>10} {:>8} {:>10}",
                        "",
                        "",
                        "",
                        rss_text(p.rss_kib)
                    );
                }
                _ => {
                    let _ = write!(out, "   {:>11} {:>10} {:>8} {:>10}", "-", "", "", "");
                }
            }
        }
        let _ = writeln!(out, "   {target:<34} {}", verdict(row.met()));
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
                "previous_ms": row.prev.filter(|_| timed).map(|p| p.secs * 1000.0),
                "previous_cpu_ms": row.prev.and_then(|p| p.cpu_secs).map(|c| c * 1000.0),
                "previous_peak_rss_kib": row.prev.and_then(|p| p.rss_kib),
                "previous_ratio": row.prev_ratio(),
                "loaded": f.loaded,
                "target": (row.target_text() != "-").then(|| row.target_text()),
                "met": row.met(),
            })
        })
        .collect();
    serde_json::json!({
        "factor": f.factor,
        "runs": f.runs,
        "installed_files": f.files,
        "installed_bytes": f.bytes,
        "previous_installed": f.prev_files.map(|(files, bytes)| serde_json::json!({"files": files, "bytes": bytes})),
        "loaded": f.loaded,
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

/// The value of `flag`, a number of runs from 1.
fn run_count(flag: &str, value: Option<&String>) -> Result<usize, String> {
    value
        .and_then(|n| n.parse().ok())
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("{flag} needs a number from 1"))
}

/// `cargo xtask bench [--factors 1,10] [--runs N] [--runs-large N] [--baseline PATH] [--loaded]
/// [--bin PATH] [--keep] [--json FILE]` (`--runs`: runs at 1x; `--runs-large`: runs at each
/// factor above 1x, one by default, since a 10x run takes minutes; `--baseline`: the
/// previous aibox, measured in the same runs; `--loaded`: each run made again with the
/// other cores busy, reported as tables of their own; `--bin`: measure that `aibox` instead of building this
/// tree's; `--keep`: leave `target/bench/`; `--json`: also write the numbers there).
#[allow(clippy::too_many_lines)] // one linear recipe reads better than fragments
pub fn run(args: &[String]) -> Result<(), String> {
    let mut factors = vec![1_usize, 10];
    let mut runs_1x = 5_usize;
    let mut runs_large = 1_usize;
    let mut baseline: Option<PathBuf> = None;
    let mut loaded = false;
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
            "--runs" => runs_1x = run_count(a, it.next())?,
            "--runs-large" => runs_large = run_count(a, it.next())?,
            "--baseline" => {
                let path = PathBuf::from(it.next().ok_or("--baseline needs a path")?);
                if !path.is_file() {
                    return Err(format!(
                        "--baseline {}: no such file (build the previous aibox first)",
                        path.display()
                    ));
                }
                baseline = Some(path);
            }
            "--loaded" => loaded = true,
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
    // Nothing is deleted until every factor is measured (see `one_run`'s warm-up for
    // why): a previous bench's trees are moved aside first and deleted at the end with
    // this one's, which were deleted between the factors before: 10x then ran right
    // after 25,000 files of 1x were freed.
    let mut stale = Vec::new();
    if base.exists() {
        let aside = base.with_file_name(format!("bench.old-{}", std::process::id()));
        fs_err::rename(&base, &aside).map_err(|e| e.to_string())?;
        stale.push(aside);
    }
    if !Path::new(GNU_TIME).exists() {
        say(
            "bench: /usr/bin/time (Debian package `time`) is missing: peak RSS not measured \
             (scripts/setup-test-deps.sh installs it)",
        );
    }
    let mut reports = Vec::new();
    let mut loaded_reports = Vec::new();
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
        let runs = if factor <= 1 { runs_1x } else { runs_large };
        let served = Served::start(&[&v1, &v2])?;
        say(&match &served.uv {
            Some(uv) => format!(
                "==> bench {factor}x: a new project locks its MCP servers' dependencies with \
                 {uv}, asking the package index"
            ),
            None => format!(
                "==> bench {factor}x: no uv here: a new project's MCP servers stay unlocked"
            ),
        });
        let prev = baseline.clone().map(|bin| Prev { bin });
        let mut r = Results::default();
        // One warm-up run fills the page cache and the archive cache. Every run works in
        // fresh folders and no tree is deleted until every factor is done: ext4 without a
        // journal skips inodes freed in the last 60 s when it allocates new ones, so
        // creating thousands of files right after deleting thousands costs several times
        // more kernel time (seen in `perf` as `recently_deleted` under `ext4_create` and
        // `ext4_mkdir`). Deleting between runs measured that artefact, for aibox and
        // `cp -r` unevenly.
        one_run(
            &bin,
            prev.as_ref(),
            &served,
            &work,
            0,
            (&v1, &v2),
            &mut Results::default(),
            0,
        )?;
        // With `--loaded`, every run is made twice, quiet and then with the other cores
        // busy, so each row has both numbers from the same conditions otherwise.
        let mut busy = loaded.then(Results::default);
        for i in 0..runs {
            say(&format!("==> bench {factor}x: run {}/{runs}", i + 1));
            one_run(
                &bin,
                prev.as_ref(),
                &served,
                &work,
                i + 1,
                (&v1, &v2),
                &mut r,
                BASELINE_TRIES,
            )?;
            if let Some(busy) = &mut busy {
                say(&format!(
                    "==> bench {factor}x: run {}/{runs}, other cores busy",
                    i + 1
                ));
                let load = Spinners::start()?;
                one_run(
                    &bin,
                    prev.as_ref(),
                    &served,
                    &work,
                    runs + i + 1,
                    (&v1, &v2),
                    busy,
                    BASELINE_TRIES,
                )?;
                drop(load);
            }
        }
        reports.push(FactorReport::new(factor, runs, false, r));
        if let Some(busy) = busy {
            loaded_reports.push(FactorReport::new(factor, runs, true, busy));
        }
        if !keep {
            stale.push(work);
        }
    }
    for dir in stale {
        fs_err::remove_dir_all(&dir).map_err(|e| e.to_string())?;
    }

    let mut out = String::new();
    for f in reports.iter().chain(&loaded_reports) {
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
        .chain(&loaded_reports)
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
            "loaded_factors": loaded_reports.iter().map(json_factor).collect::<Vec<_>>(),
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
    fn results(factor: usize, scale: f64, rss: u64) -> Results {
        Results {
            first: vec![sample(300.0 * scale, rss)],
            cold: vec![sample(340.0 * scale, 10)],
            cold_new: vec![sample(2000.0, 10)],
            noop: vec![sample(20.0 * scale, 10)],
            upgrade: vec![sample(600.0 * scale, 10)],
            integrity: vec![sample(30.0 * scale, 5)],
            doctor: vec![sample(40.0 * scale, 5)],
            skill_list: vec![sample(40.0 * scale, 5)],
            mcp_list: vec![sample(10.0 * scale, 5)],
            cp: vec![sample(250.0 * scale, 1)],
            sha: vec![sample(40.0 * scale, 1)],
            files: (
                1700 * factor,
                10_000_000 * u64::try_from(factor).unwrap_or(0),
            ),
            prev: PrevResults::default(),
        }
    }

    fn report(factor: usize, scale: f64, rss: u64) -> FactorReport {
        FactorReport::new(factor, 1, false, results(factor, scale, rss))
    }

    #[test]
    fn rows_carry_their_targets_and_verdicts() {
        let one = report(1, 1.0, 12);
        let met: Vec<(&str, Option<bool>)> = one.rows.iter().map(|r| (r.step, r.met())).collect();
        assert_eq!(
            met,
            [
                ("first install", Some(true)),       // 1.2x cp -r
                ("cold first install", Some(false)), // 1.36x cp -r
                ("cold, new project", None),
                ("no-op apply", Some(true)),        // 20 ms
                ("upgrade", Some(false)),           // 2.4x cp -r
                ("doctor --integrity", Some(true)), // 0.75x sha256sum
                ("doctor", None),
                ("skill list", None),
                ("mcp list", None),
                ("peak RSS, any step", Some(true)), // 12 MiB
            ]
        );
        let ten = report(10, 10.0, 100);
        let met: Vec<Option<bool>> = ten.rows.iter().map(Row::met).collect();
        // No-op has no absolute target at 10x; 100 MiB misses the RSS target.
        assert_eq!(
            met,
            [
                Some(true),
                Some(false),
                None,
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
            text.contains("MISSED") && text.contains("< 16 MiB") && !text.contains("previous"),
            "{text}"
        );
    }

    #[test]
    fn the_previous_aibox_adds_its_ratio_and_target() {
        let mut r = results(10, 10.0, 12);
        // The previous aibox: first install faster than ours (ours 1.2x: missed), doctor
        // slower (ours 0.5x: met), no skill list.
        r.prev = PrevResults {
            first: vec![sample(2500.0, 9)],
            cold: vec![sample(4000.0, 9)],
            noop: vec![sample(300.0, 9)],
            upgrade: vec![sample(9000.0, 9)],
            integrity: vec![sample(500.0, 9)],
            doctor: vec![sample(800.0, 11)],
            files: (17_000, 100_000_000),
        };
        let f = FactorReport::new(10, 1, true, r);
        let rows: Vec<(&str, Option<f64>, Option<bool>)> = f
            .rows
            .iter()
            .map(|row| {
                (
                    row.step,
                    row.prev_ratio().map(|x| (x * 100.0).round() / 100.0),
                    row.met(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("first install", Some(1.2), Some(false)), // 1.2x cp -r met, 1.2x previous not
                ("cold first install", Some(0.85), Some(false)), // 0.85x previous, 1.36x cp -r
                ("cold, new project", None, None),
                ("no-op apply", Some(0.67), None),
                ("upgrade", Some(0.67), Some(false)),
                ("doctor --integrity", Some(0.6), Some(true)),
                ("doctor", Some(0.5), Some(true)),
                ("skill list", None, None),
                ("mcp list", None, None),
                ("peak RSS, any step", None, Some(true)),
            ]
        );
        let mut text = String::new();
        render_factor(&mut text, &f);
        assert!(
            text.contains("previous aibox installed 17000 files"),
            "{text}"
        );
        assert!(text.contains("<= 1.3x cp -r, <= 1.0x previous"), "{text}");
        assert!(text.contains("--loaded"), "{text}");
        // The peak RSS row shows the previous aibox's highest (11 MiB).
        let peak = text
            .lines()
            .find(|l| l.contains("peak RSS, any step"))
            .unwrap_or_default();
        assert!(
            peak.contains("11.0 MiB") && peak.contains("12.0 MiB"),
            "{peak}"
        );
        let json = json_factor(&f);
        assert_eq!(json["loaded"], true);
        assert_eq!(json["steps"][1]["step"], "cold first install");
        assert_eq!(json["steps"][1]["previous_ms"], 4000.0);
        assert_eq!(json["steps"][2]["step"], "cold, new project");
        assert_eq!(json["steps"][2]["previous_ms"], serde_json::Value::Null);
        assert_eq!(json["steps"][6]["previous_ms"], 800.0);
        assert_eq!(json["steps"][7]["previous_ms"], serde_json::Value::Null);
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

    #[test]
    fn cpu_time_is_read_whoever_reports_the_peak() {
        let (rss, cpu) = readings("34000 0.25 0.50", "aibox: peak RSS 8000 KiB\n");
        assert_eq!(rss, Some(8000));
        assert!(cpu.is_some_and(|c| (c - 0.75).abs() < 1e-9), "{cpu:?}");
        let (rss, cpu) = readings("34000 0.25 0.50", "");
        assert_eq!(rss, Some(34000));
        assert!(cpu.is_some_and(|c| (c - 0.75).abs() < 1e-9), "{cpu:?}");
        assert_eq!(readings("", ""), (None, None));
    }

    #[test]
    fn aibox_own_peak_is_its_last_report() {
        assert_eq!(
            own_peak_rss("warning: x\naibox: peak RSS 8123 KiB\n"),
            Some(8123)
        );
        assert_eq!(own_peak_rss("aibox: peak RSS lots KiB\n"), None);
        assert_eq!(own_peak_rss(""), None);
    }

    #[test]
    fn the_load_runs_until_dropped() {
        let load = Spinners::start().expect("start the load");
        let pids: Vec<u32> = load.0.iter().map(std::process::Child::id).collect();
        assert!(!pids.is_empty());
        for pid in &pids {
            assert!(
                Path::new(&format!("/proc/{pid}")).exists(),
                "spinner {pid} runs"
            );
        }
        drop(load);
        for pid in &pids {
            // Reaped by `wait`, so the process is gone, not a zombie.
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists(),
                "spinner {pid} stopped"
            );
        }
    }

    #[test]
    fn vouched_files_are_the_marker_files_and_the_snapshot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let snap = root.join("context/templates/processkit/v1/context/skills");
        fs_err::create_dir_all(&snap).expect("mkdir");
        fs_err::write(snap.join("SKILL.md"), "x").expect("write");
        fs_err::write(root.join("context/templates/processkit/v1/INDEX.md"), "y").expect("write");
        fs_err::write(
            root.join("context/.processkit-provenance.toml"),
            "schema_version = 1\n[files]\n\"context/INDEX.md\" = \"ab\"\n\
             [user_files]\n\"AGENTS.md\" = \"cd\"\n",
        )
        .expect("write");
        let mut got: Vec<String> = vouched_files(root)
            .expect("list")
            .iter()
            .map(|p| p.strip_prefix(root).expect("inside").display().to_string())
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                "AGENTS.md",
                "context/INDEX.md",
                "context/templates/processkit/v1/INDEX.md",
                "context/templates/processkit/v1/context/skills/SKILL.md",
            ]
        );
        fs_err::remove_file(root.join("context/.processkit-provenance.toml")).expect("rm");
        assert!(vouched_files(root).is_err(), "no marker, no list");
    }
}
