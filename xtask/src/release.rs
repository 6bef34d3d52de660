//! `release-gate` and `release-state`: proving a release before it exists.
//!
//! The gate is a list of steps ([`STEPS`]) and stops at the first failure. It prepares what
//! it needs itself, so it runs from a fresh clone on a fresh machine: `cargo fetch` of every
//! target's crates (cargo-deny then runs offline), the pinned release tools, and the advisory
//! database (fetched into cargo-deny's normal place, or an offline copy given with
//! `--advisory-db DIR`; the snapshot used is printed and recorded). Then release-state
//! (kept, and its digest bound into the evidence), the whole CI run, `aibox doctor
//! --processkit` on the bundled example and on the vendored real release (`pk-doctor`),
//! the release binaries
//! (cargo-zigbuild, glibc floor checked, version smoke), `SHA256SUMS` (re-verified with
//! `sha256sum -c`; its first line, a comment, names the version), `evidence.json`, and with
//! `--tag` SSH signatures of both (`SHA256SUMS.sig`, `evidence.json.sig`) and an SSH-signed
//! tag, all verified against `release/allowed_signers`. Everything lands in `target/release-gate/`.

mod artifacts;
mod keys;
mod signing;
mod state;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::{cargo, say};

/// Where the gate writes its outputs.
const OUT_DIR: &str = "target/release-gate";
/// Where an offline advisory database copy (`--advisory-db DIR`) is prepared: a git
/// checkout named the way cargo-deny names its clone of the default `RustSec` URL.
const OFFLINE_DB_ROOT: &str = "target/advisory-dbs";
const OFFLINE_DB_CHECKOUT: &str = "advisory-db-3157b0e258782691";

/// Where the advisory database comes from.
#[derive(Debug, PartialEq, Eq)]
enum AdvisorySource {
    /// cargo-deny's normal location (`$CARGO_HOME/advisory-dbs`), fetched by cargo-deny.
    Default,
    /// An offline copy (a folder with the database's `crates/` and `rust/` trees).
    Offline(PathBuf),
}

/// The gate's options.
#[derive(Debug, PartialEq, Eq)]
struct Options {
    allow_dirty: bool,
    tag: Option<String>,
    source: AdvisorySource,
    allowed_signers: PathBuf,
    skip: Vec<String>,
}

/// Steps that `--skip` may leave out (evidence from such a run is marked not releasable,
/// and `--tag` refuses it).
const SKIPPABLE: &[&str] = &["ci", "pk-doctor", "image", "binaries"];

/// Parses the gate's options.
fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        allow_dirty: false,
        tag: None,
        source: AdvisorySource::Default,
        allowed_signers: PathBuf::from(signing::ALLOWED_SIGNERS),
        skip: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs {what}"))
        };
        match a.as_str() {
            "--allow-dirty" => o.allow_dirty = true,
            "--tag" => o.tag = Some(value("a value (vX.Y.Z)")?),
            "--advisory-db" => {
                o.source = AdvisorySource::Offline(PathBuf::from(value(
                    "a folder (an offline RustSec database copy)",
                )?));
            }
            "--allowed-signers" => o.allowed_signers = PathBuf::from(value("a file")?),
            "--skip" => {
                let step = value("a step name")?;
                if !SKIPPABLE.contains(&step.as_str()) {
                    return Err(format!(
                        "release-gate: `--skip {step}`: only {} can be skipped",
                        SKIPPABLE.join(", ")
                    ));
                }
                o.skip.push(step);
            }
            other => {
                return Err(format!(
                    "release-gate: unknown option `{other}` (known: --tag vX.Y.Z, \
                     --allow-dirty, --advisory-db DIR, --allowed-signers FILE, --skip STEP)"
                ));
            }
        }
    }
    if o.tag.is_some() && !o.skip.is_empty() {
        return Err(format!(
            "release-gate: --tag refuses a run that skips {}: a release runs every step",
            o.skip.join(", ")
        ));
    }
    Ok(o)
}

/// What the gate learns on its way; the evidence is built from it.
#[derive(Default)]
struct Gate {
    version: String,
    commit: String,
    /// Evidence fields contributed by steps (advisory snapshot, release-state, images, …).
    evidence: serde_json::Map<String, Value>,
    /// `(artifact file name, path of the built binary)`.
    artifacts: Vec<(String, PathBuf)>,
    source: Option<AdvisorySource>,
}

/// A gate step: a name (for `--skip` and the log) and what it does.
type Step = (&'static str, fn(&mut Gate) -> Result<(), String>);

/// The gate's steps, in order.
///
const STEPS: &[Step] = &[
    ("prepare", step_prepare),
    ("advisories", step_advisories),
    ("release-state", step_release_state),
    ("ci", step_ci),
    ("pk-doctor", step_pk_doctor),
    ("image", step_image),
    ("binaries", step_binaries),
];

/// `release-key add|remove`: maintainer keys in `release/allowed_signers` and the installer.
pub fn release_key(args: &[String]) -> Result<(), String> {
    keys::run(Path::new("."), args)
}

/// Runs the release gate.
pub fn gate(args: &[String]) -> Result<(), String> {
    let started = Instant::now();
    let mut opts = parse_args(args)?;
    let dirty = !git(&["status", "--porcelain"])?.trim().is_empty();
    if dirty && !opts.allow_dirty {
        return Err(
            "the working tree has uncommitted changes: releases come only from tracked \
             source (commit first; --allow-dirty runs the checks without producing a \
             releasable evidence file)"
                .to_owned(),
        );
    }
    if dirty && opts.tag.is_some() {
        return Err("refusing to tag a dirty tree".to_owned());
    }
    let version = workspace_version()?;
    if let Some(tag) = &opts.tag
        && *tag != format!("v{version}")
    {
        return Err(format!(
            "--tag {tag} does not match the workspace version {version} (expected v{version})"
        ));
    }
    let out = Path::new(OUT_DIR);
    if out.exists() {
        fs_err::remove_dir_all(out).map_err(|e| e.to_string())?;
    }
    fs_err::create_dir_all(out).map_err(|e| e.to_string())?;
    let mut g = Gate {
        version,
        commit: git(&["rev-parse", "HEAD"])?.trim().to_owned(),
        source: Some(std::mem::replace(&mut opts.source, AdvisorySource::Default)),
        ..Gate::default()
    };
    g.evidence.insert(
        "images".to_owned(),
        json!("not built by this gate (--skip image)"),
    );
    for (name, run) in STEPS {
        if opts.skip.iter().any(|s| s == name) {
            say(&format!(
                "==> {name}: SKIPPED (--skip {name}; not releasable)"
            ));
            continue;
        }
        let t = Instant::now();
        say(&format!("=== release-gate step: {name}"));
        run(&mut g).map_err(|e| format!("step {name}: {e}"))?;
        say(&format!(
            "=== release-gate step {name}: {:.1}s",
            t.elapsed().as_secs_f64()
        ));
    }
    if git(&["rev-parse", "HEAD"])?.trim() != g.commit {
        return Err("HEAD moved while the gate ran; run it again".to_owned());
    }
    let releasable = !dirty && opts.skip.is_empty();
    let evidence_digest = write_evidence(&mut g, dirty, releasable, &opts)?;
    if let Some(tag) = &opts.tag {
        for line in signing::sign_release(Path::new("."), out, &opts.allowed_signers)? {
            say(&format!("release-gate: {line}"));
        }
        let msg = format!(
            "aibox {tag}\n\ncommit: {}\nevidence.json sha256: {evidence_digest}\n",
            g.commit
        );
        let repo = Path::new(".");
        signing::sign_tag(repo, tag, &msg)?;
        let verified = signing::verify_tag(repo, tag, &opts.allowed_signers).and_then(|report| {
            let target = git(&["rev-parse", &format!("{tag}^{{commit}}")])?;
            if target.trim() == g.commit {
                Ok(report)
            } else {
                Err(format!("tag {tag} does not point at {}", g.commit))
            }
        });
        match verified {
            Ok(report) => {
                fs_err::write(out.join("tag-verification.txt"), &report)
                    .map_err(|e| e.to_string())?;
                say(&format!(
                    "release-gate: signed tag {tag} verified: {}",
                    report.trim()
                ));
            }
            Err(e) => {
                let _ = git(&["tag", "-d", tag]);
                return Err(format!("{e} (the tag was deleted)"));
            }
        }
    }
    say(&format!(
        "release-gate: passed in {:.0}s{}",
        started.elapsed().as_secs_f64(),
        if releasable {
            ""
        } else {
            " (NOT releasable: dirty tree or skipped steps)"
        }
    ));
    Ok(())
}

/// `cargo fetch` of every target's crates (so cargo-deny can run offline) and the pinned
/// release tools.
fn step_prepare(_: &mut Gate) -> Result<(), String> {
    crate::step("fetch crates of every target", &["fetch", "--locked"])?;
    run_tool(
        Command::new("bash")
            .arg("scripts/install-release-tools.sh")
            .args(["cargo-deny", "cargo-zigbuild"]),
    )
}

/// cargo-deny (advisories, bans, licenses, sources), offline, against the named snapshot.
fn step_advisories(g: &mut Gate) -> Result<(), String> {
    let source = g.source.take().unwrap_or(AdvisorySource::Default);
    let snapshot = advisories(&source)?;
    say(&format!(
        "cargo deny: advisory snapshot used: {} at {} (commit {}, {})",
        snapshot["source"].as_str().unwrap_or_default(),
        snapshot["path"].as_str().unwrap_or_default(),
        snapshot["commit"].as_str().unwrap_or_default(),
        snapshot["date"].as_str().unwrap_or_default()
    ));
    g.evidence.insert("advisory_db".to_owned(), snapshot);
    Ok(())
}

/// release-state: kept in the output folder; its digest goes into the evidence.
fn step_release_state(g: &mut Gate) -> Result<(), String> {
    let (digest, passed) = write_state()?;
    g.evidence.insert(
        "release_state".to_owned(),
        json!({ "file": "release-state.json", "sha256": digest, "passed": passed }),
    );
    if passed {
        Ok(())
    } else {
        Err(format!(
            "release-state failed (see {OUT_DIR}/release-state.md)"
        ))
    }
}

fn step_ci(_: &mut Gate) -> Result<(), String> {
    crate::ci::run()
}

/// `aibox doctor --processkit` on the bundled example and on the vendored real release
/// (`crate::pk_doctor`); the outcome goes into the evidence.
fn step_pk_doctor(g: &mut Gate) -> Result<(), String> {
    let ev = crate::pk_doctor::run()?;
    g.evidence.insert("pk_doctor".to_owned(), ev);
    Ok(())
}

/// The base image (`image.rs`): amd64 and arm64 built, published to a loopback registry,
/// pulled back by digest and checked, with the downstream `aibox up` smoke; the digests go
/// into the evidence and `image/image-evidence.json` into `SHA256SUMS`.
fn step_image(g: &mut Gate) -> Result<(), String> {
    let tag = format!("v{}", g.version);
    let ev = crate::image::release(&tag, &Path::new(OUT_DIR).join("image"))?;
    g.evidence.insert("images".to_owned(), ev.json());
    Ok(())
}

/// The release binaries (see `artifacts.rs`), each version-smoked and copied under its
/// target's name.
fn step_binaries(g: &mut Gate) -> Result<(), String> {
    let built = artifacts::build_all(&path_with_tools())?;
    let mut listed = Vec::new();
    let mut not_built = Vec::new();
    for b in built {
        match b {
            artifacts::Built::Yes {
                target,
                path,
                max_glibc,
            } => {
                artifacts::version_smoke(&path, &g.version)?;
                let name = target.artifact_name();
                let dest = Path::new(OUT_DIR).join(&name);
                fs_err::copy(&path, &dest).map_err(|e| e.to_string())?;
                listed.push(json!({
                    "name": name,
                    "target": target.triple,
                    "glibc_floor": target.glibc_floor,
                    "glibc_max_referenced": max_glibc,
                    "sha256": sha256_file(&dest)?,
                }));
                g.artifacts.push((name, dest));
            }
            artifacts::Built::No { target, reason } => {
                say(&format!(
                    "release build: {} NOT built: {reason}",
                    target.triple
                ));
                not_built.push(json!({ "target": target.triple, "reason": reason }));
            }
        }
    }
    g.evidence
        .insert("artifacts".to_owned(), Value::Array(listed));
    g.evidence
        .insert("not_built".to_owned(), Value::Array(not_built));
    Ok(())
}

/// Writes `evidence.json` and `SHA256SUMS` (artifacts, release-state, evidence), checks the
/// sums with `sha256sum -c`, and returns the evidence digest.
fn write_evidence(
    g: &mut Gate,
    dirty: bool,
    releasable: bool,
    opts: &Options,
) -> Result<String, String> {
    let out = Path::new(OUT_DIR);
    let mut evidence = serde_json::Map::new();
    evidence.insert("schema".into(), json!("aibox-release-evidence/2"));
    evidence.insert("version".into(), json!(g.version));
    evidence.insert("tag".into(), json!(opts.tag));
    evidence.insert("commit".into(), json!(g.commit));
    evidence.insert("clean_tree".into(), json!(!dirty));
    evidence.insert("releasable".into(), json!(releasable));
    evidence.insert("skipped_steps".into(), json!(opts.skip));
    evidence.insert("toolchain".into(), json!(tool_version("rustc")?));
    evidence.insert("cargo".into(), json!(tool_version("cargo")?));
    evidence.insert(
        "cargo_lock_sha256".into(),
        json!(sha256_file(Path::new("Cargo.lock"))?),
    );
    evidence.append(&mut g.evidence);
    let text =
        serde_json::to_string_pretty(&Value::Object(evidence)).map_err(|e| e.to_string())? + "\n";
    fs_err::write(out.join("evidence.json"), &text).map_err(|e| e.to_string())?;
    let mut names: Vec<String> = g.artifacts.iter().map(|(n, _)| n.clone()).collect();
    for f in [
        "release-state.json",
        "image/image-evidence.json",
        "evidence.json",
    ] {
        if out.join(f).is_file() {
            names.push(f.to_owned());
        }
    }
    let mut entries = Vec::new();
    for n in &names {
        entries.push((sha256_file(&out.join(n))?, n.clone()));
    }
    fs_err::write(out.join("SHA256SUMS"), sums_file(&g.version, &entries))
        .map_err(|e| e.to_string())?;
    run_tool(
        Command::new("sha256sum")
            .args(["--strict", "-c", "SHA256SUMS"])
            .current_dir(out),
    )?;
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    say(&format!(
        "release-gate: evidence {OUT_DIR}/evidence.json sha256 {digest}"
    ));
    Ok(digest)
}

/// `SHA256SUMS` in `sha256sum`'s format, `(digest, name)` per line. The first line, a
/// comment `sha256sum -c` skips, names the version: signed with the rest, it is what lets
/// `scripts/install.sh` refuse an older signed release served in place of the one asked for.
fn sums_file(version: &str, entries: &[(String, String)]) -> String {
    let mut sums = format!("# aibox {version}\n");
    for (digest, name) in entries {
        let _ = writeln!(sums, "{digest}  {name}");
    }
    sums
}

/// Collects release-state, writes `release-state.json` and `.md`, returns the JSON's
/// digest and whether it passed.
fn write_state() -> Result<(String, bool), String> {
    let root = Path::new(".");
    let report = state::collect(root)?;
    let verdict = state::verdict(&report, root);
    let json = state::to_json(&report, &verdict);
    let md = state::to_markdown(&report, &verdict);
    let out = Path::new(OUT_DIR);
    fs_err::create_dir_all(out).map_err(|e| e.to_string())?;
    fs_err::write(out.join("release-state.json"), &json).map_err(|e| e.to_string())?;
    fs_err::write(out.join("release-state.md"), &md).map_err(|e| e.to_string())?;
    say(md.trim_end());
    let digest = hex::encode(Sha256::digest(json.as_bytes()));
    say(&format!(
        "release-state: {OUT_DIR}/release-state.json sha256 {digest}"
    ));
    Ok((digest, verdict.is_ok()))
}

/// `cargo xtask release-state`: the same report the gate keeps, on its own.
pub fn state() -> Result<(), String> {
    let (_, passed) = write_state()?;
    if passed {
        Ok(())
    } else {
        Err("undeferred drift or invalid deferrals (see the findings above)".to_owned())
    }
}

/// Builds the documentation site with mdBook's own library at its pinned version
/// (`mdbook-driver`, the code behind `mdbook build`). Compiled with the workspace, in its
/// dev profile: the `mdbook` binary, `cargo install`ed in release mode, took about 4 min
/// of both cores on every fresh CI machine, beside the end-to-end tests.
pub fn docs() -> Result<(), String> {
    let book = mdbook_driver::MDBook::load(crate::image::root().join("docs-site"))
        .map_err(|e| format!("mdBook cannot load docs-site: {e:#}"))?;
    book.build()
        .map_err(|e| format!("mdBook cannot build docs-site: {e:#}"))
}

/// Where `scripts/install-release-tools.sh` installs (`AIBOX_TOOLS_DIR`, else
/// `~/.aibox-tools`).
fn tools_dir() -> PathBuf {
    std::env::var("AIBOX_TOOLS_DIR").map_or_else(
        |_| {
            let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
            PathBuf::from(home).join(".aibox-tools")
        },
        PathBuf::from,
    )
}

fn deny_cmd() -> Command {
    let mut c = Command::new(cargo());
    c.env("PATH", path_with_tools()).arg("deny");
    c
}

/// PATH with the release tools (cargo-deny and cargo-zigbuild's virtualenv, whose
/// python carries the pinned Zig) in front.
fn path_with_tools() -> String {
    let tools = tools_dir();
    format!(
        "{}:{}:{}",
        tools.join("bin").display(),
        tools.join("zigbuild/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// cargo-deny's home for advisory databases.
fn cargo_home() -> PathBuf {
    std::env::var("CARGO_HOME").map_or_else(
        |_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned()))
                .join(".cargo")
        },
        PathBuf::from,
    )
}

/// Runs cargo-deny (advisories, bans, licenses, sources) offline and returns the snapshot
/// it used (`source`, `path`, `commit`, `date`). By default cargo-deny first fetches the
/// database into its normal location; with an offline copy, the copy is prepared as a
/// checkout and a derived config points cargo-deny at it.
fn advisories(source: &AdvisorySource) -> Result<Value, String> {
    let checks = ["check", "advisories", "bans", "licenses", "sources"];
    match source {
        AdvisorySource::Default => {
            say("==> cargo deny fetch db (into $CARGO_HOME/advisory-dbs)");
            run_tool(deny_cmd().args(["fetch", "db"])).map_err(|e| {
                format!(
                    "{e}: the RustSec advisory database could not be fetched into \
                     cargo-deny's normal place; give an offline copy with --advisory-db DIR"
                )
            })?;
            let dir = cargo_home().join("advisory-dbs").join(OFFLINE_DB_CHECKOUT);
            let snapshot = snapshot_of(&dir, "cargo-deny default location");
            say("==> cargo deny --offline check (crates fetched, database fetched)");
            run_tool(deny_cmd().arg("--offline").args(checks))?;
            Ok(snapshot)
        }
        AdvisorySource::Offline(src) => {
            let date = prepare_offline_db(src)?;
            let root = std::env::current_dir()
                .map_err(|e| e.to_string())?
                .join(OFFLINE_DB_ROOT);
            let config = offline_config(
                &fs_err::read_to_string("deny.toml").map_err(|e| e.to_string())?,
                &root,
            )?;
            let config_path = Path::new(OFFLINE_DB_ROOT).join("deny-offline.toml");
            fs_err::write(&config_path, config).map_err(|e| e.to_string())?;
            let mut snapshot = snapshot_of(
                &Path::new(OFFLINE_DB_ROOT).join(OFFLINE_DB_CHECKOUT),
                "offline copy (--advisory-db)",
            );
            // The checkout's commit is derived from the copy's content and date alone
            // (fixed author and dates), so the same copy always yields the same commit.
            snapshot["checkout"] = snapshot["path"].clone();
            snapshot["path"] = json!(src.display().to_string());
            snapshot["date"] = json!(date);
            if let Some(commit) = git_in(src, &["rev-parse", "HEAD"]) {
                snapshot["source_commit"] = json!(commit);
            }
            say(&format!(
                "==> cargo deny --offline (advisory database copy of {date} from {})",
                src.display()
            ));
            run_tool(deny_cmd().args(offline_args(&config_path, &checks)))?;
            Ok(snapshot)
        }
    }
}

/// Path, newest commit and its date of an advisory database checkout.
fn snapshot_of(dir: &Path, source: &str) -> Value {
    let commit = git_in(dir, &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    let date = git_in(dir, &["log", "-1", "--format=%cs"]).unwrap_or_else(|| "unknown".to_owned());
    json!({ "source": source, "path": dir.display().to_string(), "commit": commit, "date": date })
}

fn git_in(dir: &Path, args: &[&str]) -> Option<String> {
    if !dir.join(".git").exists() {
        return None;
    }
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// cargo-deny arguments for an offline run with a derived config. `--offline` and
/// `--config` are global options of cargo-deny 0.20 and must precede `check` (checked
/// against the real 0.20.2 binary, which rejects `check --config`).
fn offline_args(config: &Path, checks: &[&str]) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = vec!["--offline".into(), "--config".into()];
    args.push(config.as_os_str().to_owned());
    args.extend(checks.iter().map(Into::into));
    args
}

/// `deny.toml` with `[advisories] db-path` set to `root` (the offline copy's parent).
fn offline_config(deny_toml: &str, root: &Path) -> Result<String, String> {
    let root = root
        .to_str()
        .ok_or("the offline advisory database path is not UTF-8")?;
    let line = format!("db-path = {}", serde_json::Value::from(root));
    let mut out = String::new();
    let mut done = false;
    for l in deny_toml.lines() {
        if l.trim_start().starts_with("db-path") {
            continue;
        }
        out.push_str(l);
        out.push('\n');
        if l.trim() == "[advisories]" {
            out.push_str(&line);
            out.push('\n');
            done = true;
        }
    }
    if !done {
        return Err("deny.toml has no [advisories] section".to_owned());
    }
    Ok(out)
}

/// Copies an offline database (`crates/`, `rust/`, optional `README.md` naming its date in
/// parentheses) into a fresh git checkout where cargo-deny looks for it; returns the date.
fn prepare_offline_db(src: &Path) -> Result<String, String> {
    for sub in ["crates", "rust"] {
        if !src.join(sub).is_dir() {
            return Err(format!(
                "--advisory-db {}: no `{sub}/` folder; pass a copy of the RustSec \
                 advisory database (its `crates/` and `rust/` trees)",
                src.display()
            ));
        }
    }
    let date = fs_err::read_to_string(src.join("README.md"))
        .ok()
        .and_then(|readme| {
            readme
                .split(['(', ')'])
                .find(|s| s.len() == 10 && s.chars().filter(|c| *c == '-').count() == 2)
                .map(ToOwned::to_owned)
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let dst = Path::new(OFFLINE_DB_ROOT).join(OFFLINE_DB_CHECKOUT);
    if dst.exists() {
        fs_err::remove_dir_all(&dst).map_err(|e| e.to_string())?;
    }
    fs_err::create_dir_all(&dst).map_err(|e| e.to_string())?;
    run_tool(
        Command::new("cp")
            .args(["-r", "--no-preserve=mode"])
            .arg(src.join("crates"))
            .arg(src.join("rust"))
            .arg(&dst),
    )?;
    let env_date = if date == "unknown" {
        "2000-01-01T00:00:00Z".to_owned()
    } else {
        format!("{date}T00:00:00Z")
    };
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=aibox",
            "-c",
            "user.email=aibox@invalid",
            "commit",
            "-q",
            "-m",
            "advisory-db snapshot",
        ],
    ] {
        run_tool(
            Command::new("git")
                .args(args)
                .current_dir(&dst)
                .env("GIT_AUTHOR_DATE", &env_date)
                .env("GIT_COMMITTER_DATE", &env_date),
        )?;
    }
    Ok(date)
}

fn workspace_version() -> Result<String, String> {
    let text = fs_err::read_to_string("Cargo.toml").map_err(|e| e.to_string())?;
    text.lines()
        .skip_while(|l| l.trim() != "[workspace.package]")
        .find_map(|l| l.strip_prefix("version = "))
        .map(|v| v.trim_matches('"').to_owned())
        .ok_or_else(|| "no [workspace.package] version in Cargo.toml".to_owned())
}

fn tool_version(tool: &str) -> Result<String, String> {
    let out = Command::new(tool)
        .arg("--version")
        .output()
        .map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn sha256_file(path: &Path) -> Result<String, String> {
    let bytes = fs_err::read(path).map_err(|e| e.to_string())?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

fn git(args: &[&str]) -> Result<String, String> {
    let out = output_of(
        Command::new("git").args(args),
        &format!("git {}", args.join(" ")),
    )?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Runs `cmd` (named `what` in errors) and returns its standard output; an error carries
/// what it printed on standard error.
pub(crate) fn output_of(cmd: &mut Command, what: &str) -> Result<Vec<u8>, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `cmd` with inherited output; an error names the command and how it ended.
pub(crate) fn run_tool(cmd: &mut Command) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({status})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn advisories_come_from_cargo_deny_default_location_unless_a_copy_is_named() {
        let o = parse_args(&args(&["--tag", "v1.0.0"])).unwrap();
        assert!(!o.allow_dirty);
        assert_eq!(o.tag.as_deref(), Some("v1.0.0"));
        assert_eq!(o.source, AdvisorySource::Default);
        assert_eq!(o.allowed_signers, PathBuf::from("release/allowed_signers"));
        let o = parse_args(&args(&[
            "--advisory-db",
            "/data/advisory-db",
            "--allow-dirty",
        ]))
        .unwrap();
        assert_eq!(
            o.source,
            AdvisorySource::Offline(PathBuf::from("/data/advisory-db"))
        );
        assert!(parse_args(&args(&["--advisory-db"])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
    }

    #[test]
    fn skipping_a_step_is_limited_and_never_tags() {
        let o = parse_args(&args(&["--skip", "ci", "--skip", "binaries"])).unwrap();
        assert_eq!(o.skip, ["ci", "binaries"]);
        assert!(parse_args(&args(&["--skip", "advisories"])).is_err());
        assert!(parse_args(&args(&["--skip", "release-state"])).is_err());
        let err = parse_args(&args(&["--skip", "ci", "--tag", "v0.1.0"])).unwrap_err();
        assert!(err.contains("--tag refuses"), "{err}");
    }

    #[test]
    fn sha256sums_names_its_version_first_and_sha256sum_accepts_it() {
        let dir = std::env::temp_dir().join(format!("aibox-xtask-sums-{}", std::process::id()));
        fs_err::create_dir_all(&dir).unwrap();
        fs_err::write(dir.join("aibox-x86_64-unknown-linux-gnu"), "binary").unwrap();
        let digest = sha256_file(&dir.join("aibox-x86_64-unknown-linux-gnu")).unwrap();
        let text = sums_file(
            "1.2.3",
            &[(digest, "aibox-x86_64-unknown-linux-gnu".to_owned())],
        );
        // The line scripts/install.sh reads the signed version from.
        assert!(text.starts_with("# aibox 1.2.3\n"), "{text}");
        fs_err::write(dir.join("SHA256SUMS"), &text).unwrap();
        let ok = Command::new("sha256sum")
            .args(["--strict", "-c", "SHA256SUMS"])
            .current_dir(&dir)
            .output()
            .unwrap();
        fs_err::remove_dir_all(&dir).unwrap();
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
    }

    #[test]
    fn the_steps_run_state_and_advisories_before_the_build() {
        let names: Vec<&str> = STEPS.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "prepare",
                "advisories",
                "release-state",
                "ci",
                "pk-doctor",
                "image",
                "binaries"
            ]
        );
    }

    /// The release page's step table lists exactly the gate's steps, in order, and every
    /// skippable one under `--skip`.
    #[test]
    fn the_release_page_lists_the_steps_the_gate_runs() {
        let page = fs_err::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs-site/src/release.md"),
        )
        .unwrap();
        let rows: Vec<&str> = page
            .split("## Steps")
            .nth(1)
            .unwrap()
            .lines()
            .skip_while(|l| !l.starts_with("| step |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.split('|').nth(1).unwrap().trim())
            .collect();
        let names: Vec<&str> = STEPS.iter().map(|(n, _)| *n).collect();
        assert_eq!(rows, names);
        for step in SKIPPABLE {
            assert!(page.contains(&format!("`--skip {step}`")), "{step}");
        }
    }

    #[test]
    fn the_committed_policy_names_no_database_path_outside_the_repository() {
        let deny =
            fs_err::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../deny.toml"))
                .unwrap();
        assert!(!deny.lines().any(|l| l.trim_start().starts_with("db-path")));
        let derived = offline_config(&deny, Path::new("/tmp/x y/advisory-dbs")).unwrap();
        assert!(
            derived.contains("[advisories]\ndb-path = \"/tmp/x y/advisory-dbs\"\n"),
            "{derived}"
        );
        assert!(derived.contains("[licenses]"));
        assert!(offline_config("[bans]\n", Path::new("/x")).is_err());
    }

    #[test]
    fn offline_options_precede_the_check_subcommand() {
        let args = offline_args(Path::new("t/deny.toml"), &["check", "advisories"]);
        let args: Vec<&str> = args.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "--offline",
                "--config",
                "t/deny.toml",
                "check",
                "advisories"
            ]
        );
    }

    #[test]
    fn an_offline_copy_without_the_database_trees_is_refused() {
        let dir = std::env::temp_dir().join(format!("aibox-xtask-db-{}", std::process::id()));
        fs_err::create_dir_all(&dir).unwrap();
        let err = prepare_offline_db(&dir).unwrap_err();
        assert!(err.contains("no `crates/` folder"), "{err}");
        fs_err::remove_dir_all(&dir).unwrap();
    }

    /// A fresh clone has nothing beside it: no code or test may name a folder that sits
    /// next to the repository (relative `../<name>` or absolute), whatever those folders are
    /// on the machine running the test. Names of one or two characters are left out: the
    /// tests' hostile paths (`../x`, `/tmp/x`) name no real folder, and a scratch folder
    /// `/tmp/x` beside a clone in `/tmp` failed this test.
    #[test]
    fn no_code_or_test_names_a_folder_beside_the_repository() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .canonicalize()
            .unwrap();
        let parent = root.parent().unwrap();
        let mut needles = Vec::new();
        for e in fs_err::read_dir(parent).unwrap().flatten() {
            let path = e.path();
            if path == root || !path.is_dir() {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name.chars().count() < 3 {
                continue;
            }
            for prefix in [String::from("../"), format!("{}/", parent.display())] {
                for end in ['/', '"'] {
                    needles.push(format!("{prefix}{name}{end}"));
                }
            }
        }
        let mut hits = Vec::new();
        for dir in ["crates", "xtask", "scripts", "examples"] {
            for f in walk(&root.join(dir)) {
                if let Ok(text) = fs_err::read_to_string(&f)
                    && let Some(n) = needles.iter().find(|n| text.contains(n.as_str()))
                {
                    hits.push(format!("{}: {n}", f.display()));
                }
            }
        }
        assert!(hits.is_empty(), "{hits:?}");
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let Ok(entries) = fs_err::read_dir(dir) else {
            return out;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name();
            // Symbolic links are not followed: the policy corpus links to `/` on purpose.
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            if p.is_dir() {
                if name != "target" && name != "node_modules" {
                    out.extend(walk(&p));
                }
            } else {
                out.push(p);
            }
        }
        out
    }
}
