//! `release-gate` and `release-state`: proving a release before it exists.
//!
//! The gate stops at the first failing step. Its outputs go to `target/release-gate/`:
//! the release binary, `SHA256SUMS` (in `sha256sum` format, re-verified with
//! `sha256sum -c`), and `evidence.json`, which binds the commit, the clean-tree flag, the
//! toolchain, the `Cargo.lock` digest, the advisory-database date and every artifact's
//! digest.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::{cargo, say, step};

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

/// Parses the gate's options: `--allow-dirty`, `--tag TAG`, `--advisory-db DIR`.
fn parse_args(args: &[String]) -> Result<(bool, Option<String>, AdvisorySource), String> {
    let mut allow_dirty = false;
    let mut tag = None;
    let mut source = AdvisorySource::Default;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--allow-dirty" => allow_dirty = true,
            "--tag" => tag = Some(it.next().ok_or("--tag needs a value (vX.Y.Z)")?.clone()),
            "--advisory-db" => {
                let dir = it
                    .next()
                    .ok_or("--advisory-db needs a folder (an offline RustSec database copy)")?;
                source = AdvisorySource::Offline(PathBuf::from(dir));
            }
            other => {
                return Err(format!(
                    "release-gate: unknown option `{other}` (known: --tag vX.Y.Z, \
                     --allow-dirty, --advisory-db DIR)"
                ));
            }
        }
    }
    Ok((allow_dirty, tag, source))
}

/// Runs the release gate.
pub fn gate(args: &[String]) -> Result<(), String> {
    let (allow_dirty, tag, source) = parse_args(args)?;
    let dirty = !git(&["status", "--porcelain"])?.trim().is_empty();
    if dirty && !allow_dirty {
        return Err(
            "the working tree has uncommitted changes: releases come only from tracked \
                    source (commit first; --allow-dirty runs the checks without producing a \
                    releasable evidence file)"
                .to_owned(),
        );
    }
    crate::ci()?;
    let db_date = advisories(&source)?;
    say("==> documentation site");
    docs()?;
    step(
        "release build",
        &["build", "--release", "--locked", "--package", "aibox-cli"],
    )?;
    let bin = PathBuf::from("target/release/aibox");
    version_smoke(&bin)?;
    let out = Path::new(OUT_DIR);
    if out.exists() {
        fs_err::remove_dir_all(out).map_err(|e| e.to_string())?;
    }
    fs_err::create_dir_all(out).map_err(|e| e.to_string())?;
    let artifact = out.join("aibox-x86_64-unknown-linux-gnu");
    fs_err::copy(&bin, &artifact).map_err(|e| e.to_string())?;
    let digest = sha256_file(&artifact)?;
    let sums = format!("{digest}  aibox-x86_64-unknown-linux-gnu\n");
    fs_err::write(out.join("SHA256SUMS"), &sums).map_err(|e| e.to_string())?;
    run_tool(
        Command::new("sha256sum")
            .args(["-c", "SHA256SUMS"])
            .current_dir(out),
    )?;
    let evidence = serde_json::json!({
        "schema": "aibox-release-evidence/1",
        "version": workspace_version()?,
        "commit": git(&["rev-parse", "HEAD"])?.trim(),
        "clean_tree": !dirty,
        "toolchain": tool_version("rustc")?,
        "cargo": tool_version("cargo")?,
        "cargo_lock_sha256": sha256_file(Path::new("Cargo.lock"))?,
        "advisory_db_date": db_date,
        "artifacts": [{ "name": "aibox-x86_64-unknown-linux-gnu", "sha256": digest }],
    });
    let text = serde_json::to_string_pretty(&evidence).map_err(|e| e.to_string())? + "\n";
    fs_err::write(out.join("evidence.json"), &text).map_err(|e| e.to_string())?;
    let evidence_digest = hex::encode(Sha256::digest(text.as_bytes()));
    say(&format!(
        "release-gate: evidence {OUT_DIR}/evidence.json sha256 {evidence_digest}"
    ));
    if let Some(tag) = tag {
        if dirty {
            return Err("refusing to tag a dirty tree".to_owned());
        }
        let msg = format!("aibox {tag}\n\nevidence.json sha256: {evidence_digest}\n");
        run_tool(Command::new("git").args(["tag", "-a", &tag, "-m", &msg]))?;
        say(&format!("release-gate: tagged {tag}"));
    }
    say("release-gate: passed");
    Ok(())
}

/// Builds the documentation site with the pinned mdBook.
pub fn docs() -> Result<(), String> {
    run_tool(
        Command::new("bash")
            .arg("scripts/install-release-tools.sh")
            .arg("mdbook"),
    )?;
    run_tool(Command::new(tool_path("mdbook")).args(["build", "docs-site"]))
}

fn tool_path(name: &str) -> PathBuf {
    let root = std::env::var("AIBOX_TOOLS_DIR").map_or_else(
        |_| {
            let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
            PathBuf::from(home).join(".aibox-tools")
        },
        PathBuf::from,
    );
    root.join("bin").join(name)
}

fn deny_cmd() -> Command {
    let mut c = Command::new(cargo());
    c.env("PATH", path_with_tools()).arg("deny");
    c
}

fn path_with_tools() -> String {
    let tools = tool_path("x");
    let dir = tools
        .parent()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!("{dir}:{}", std::env::var("PATH").unwrap_or_default())
}

/// Runs cargo-deny (advisories, bans, licenses, sources) and returns the advisory
/// database's date. By default cargo-deny fetches the database into its normal location;
/// with an offline copy, the copy is prepared as a checkout and cargo-deny runs offline
/// with a derived config pointing at it.
fn advisories(source: &AdvisorySource) -> Result<String, String> {
    run_tool(
        Command::new("bash")
            .arg("scripts/install-release-tools.sh")
            .arg("cargo-deny"),
    )?;
    let checks = ["check", "advisories", "bans", "licenses", "sources"];
    match source {
        AdvisorySource::Default => {
            say("==> cargo deny (advisory database fetched into $CARGO_HOME/advisory-dbs)");
            run_tool(deny_cmd().args(checks))?;
            let date = default_db_date();
            say(&format!("cargo deny: advisory database of {date}"));
            Ok(date)
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
            say(&format!(
                "==> cargo deny (offline advisory database copy of {date} from {})",
                src.display()
            ));
            run_tool(deny_cmd().args(offline_args(&config_path, &checks)))?;
            Ok(date)
        }
    }
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

/// Date of the newest commit in cargo-deny's default database checkout, or "unknown".
fn default_db_date() -> String {
    let home = std::env::var("CARGO_HOME").map_or_else(
        |_| {
            PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned()))
                .join(".cargo")
        },
        PathBuf::from,
    );
    let dir = home.join("advisory-dbs").join(OFFLINE_DB_CHECKOUT);
    Command::new("git")
        .args(["log", "-1", "--format=%cs"])
        .current_dir(&dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
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

fn version_smoke(bin: &Path) -> Result<(), String> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .map_err(|e| e.to_string())?;
    let got = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let want = format!("aibox {}", workspace_version()?);
    say(&format!("==> version smoke: {got}"));
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "`aibox --version` printed `{got}`, expected `{want}`"
        ))
    }
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
    let out = Command::new("git")
        .args(args)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn run_tool(cmd: &mut Command) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({status})"))
    }
}

/// The release-state report: floating inputs, available updates, provenance exceptions.
pub fn state() -> Result<(), String> {
    let mut report = String::from("# aibox release state\n\n## Floating inputs\n\n");
    let mut floating = Vec::new();
    for file in files_named(Path::new("."), "aibox.toml")? {
        let text = fs_err::read_to_string(&file).map_err(|e| e.to_string())?;
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.starts_with("base_image") && !l.contains("@sha256:") {
                floating.push(format!(
                    "{}:{}: base image without a digest: {l}",
                    file.display(),
                    i + 1
                ));
            }
            if l.starts_with("version") && (l.contains("latest") || l.contains("main")) {
                floating.push(format!(
                    "{}:{}: floating version: {l}",
                    file.display(),
                    i + 1
                ));
            }
        }
    }
    for file in files_named(Path::new("test-tools"), "package.json")? {
        let text = fs_err::read_to_string(&file).map_err(|e| e.to_string())?;
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        for section in ["dependencies", "devDependencies"] {
            for (name, v) in json[section].as_object().into_iter().flatten() {
                let v = v.as_str().unwrap_or_default();
                if v.starts_with(['^', '~', '>', '*']) || v == "latest" {
                    floating.push(format!(
                        "{}: {name} {v} is not an exact version",
                        file.display()
                    ));
                }
            }
        }
    }
    let script = fs_err::read_to_string("scripts/setup-test-deps.sh").map_err(|e| e.to_string())?;
    if script.contains("apt-get install") {
        floating.push(
            "scripts/setup-test-deps.sh: Debian packages follow the distribution's \
                       stable updates (versions not pinned; the Debian release is)"
                .to_owned(),
        );
    }
    if floating.is_empty() {
        report.push_str("none\n");
    }
    for f in &floating {
        let _ = writeln!(report, "- {f}");
    }
    report.push_str("\n## Available dependency updates (crates.io)\n\n```\n");
    let out = Command::new(cargo())
        .args(["update", "--dry-run", "--verbose"])
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stderr);
    let updates: Vec<&str> = text
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            (l.starts_with("Updating") && !l.contains("index")) || l.starts_with("Unchanged")
        })
        .collect();
    if updates.is_empty() {
        report.push_str("(none, or the registry was not reachable)\n");
    }
    for u in updates {
        let _ = writeln!(report, "{}", u.trim());
    }
    report.push_str("```\n\n## Provenance exceptions\n\n");
    let mut exceptions = Vec::new();
    for file in files_named(Path::new("."), "aibox.toml")? {
        let text = fs_err::read_to_string(&file).map_err(|e| e.to_string())?;
        for (i, line) in text.lines().enumerate() {
            if line.contains("allow_unverified = true") || line.trim() == "[[security.exceptions]]"
            {
                exceptions.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    exceptions.push(
        "`release-gate --advisory-db DIR` checks advisories against an offline RustSec \
         copy; advisories newer than it are not covered (the evidence file records its date)"
            .to_owned(),
    );
    for e in &exceptions {
        let _ = writeln!(report, "- {e}");
    }
    fs_err::create_dir_all(OUT_DIR).map_err(|e| e.to_string())?;
    fs_err::write(Path::new(OUT_DIR).join("release-state.md"), &report)
        .map_err(|e| e.to_string())?;
    say(report.trim_end());
    say(&format!(
        "release-state: written to {OUT_DIR}/release-state.md"
    ));
    Ok(())
}

fn files_named(dir: &Path, name: &str) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    if !dir.exists() {
        return Ok(found);
    }
    for entry in fs_err::read_dir(dir).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let file_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if matches!(file_name, "target" | "node_modules" | ".git") {
                continue;
            }
            found.extend(files_named(&path, name)?);
        } else if file_name == name {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn advisories_come_from_cargo_deny_default_location_unless_a_copy_is_named() {
        let (dirty, tag, source) = parse_args(&args(&["--tag", "v1.0.0"])).unwrap();
        assert!(!dirty);
        assert_eq!(tag.as_deref(), Some("v1.0.0"));
        assert_eq!(source, AdvisorySource::Default);
        let (_, _, source) = parse_args(&args(&[
            "--advisory-db",
            "/data/advisory-db",
            "--allow-dirty",
        ]))
        .unwrap();
        assert_eq!(
            source,
            AdvisorySource::Offline(PathBuf::from("/data/advisory-db"))
        );
        assert!(parse_args(&args(&["--advisory-db"])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
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
}
