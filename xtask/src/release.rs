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
/// Where the offline advisory database copy is prepared (see `deny.toml`).
const ADVISORY_DIR: &str = "target/advisory-dbs/advisory-db-3157b0e258782691";

/// Runs the release gate.
pub fn gate(args: &[String]) -> Result<(), String> {
    let allow_dirty = args.iter().any(|a| a == "--allow-dirty");
    let tag = args
        .iter()
        .position(|a| a == "--tag")
        .and_then(|i| args.get(i + 1))
        .cloned();
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
    let db_date = prepare_advisory_db()?;
    say(&format!(
        "==> cargo deny (advisory database snapshot of {db_date})"
    ));
    run_tool(deny_cmd().args([
        "--offline",
        "check",
        "advisories",
        "bans",
        "licenses",
        "sources",
    ]))?;
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

/// Copies `../shared/advisory-db` into a git checkout where cargo-deny looks for it and
/// returns the snapshot date from its README.
fn prepare_advisory_db() -> Result<String, String> {
    run_tool(
        Command::new("bash")
            .arg("scripts/install-release-tools.sh")
            .arg("cargo-deny"),
    )?;
    let src = Path::new("../shared/advisory-db");
    let readme = fs_err::read_to_string(src.join("README.md")).map_err(|e| e.to_string())?;
    let date = readme
        .split(['(', ')'])
        .find(|s| s.len() == 10 && s.chars().filter(|c| *c == '-').count() == 2)
        .unwrap_or("unknown")
        .to_owned();
    let dst = Path::new(ADVISORY_DIR);
    if !dst.join(".git").exists() {
        if dst.exists() {
            fs_err::remove_dir_all(dst).map_err(|e| e.to_string())?;
        }
        fs_err::create_dir_all(dst).map_err(|e| e.to_string())?;
        run_tool(
            Command::new("cp")
                .args(["-r", "--no-preserve=mode"])
                .arg(src.join("crates"))
                .arg(src.join("rust"))
                .arg(dst),
        )?;
        let env_date = format!("{date}T00:00:00Z");
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
                    .current_dir(dst)
                    .env("GIT_AUTHOR_DATE", &env_date)
                    .env("GIT_COMMITTER_DATE", &env_date),
            )?;
        }
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
    let catalog = catalog_tools()?;
    floating.extend(catalog_floating(&catalog));
    if floating.is_empty() {
        report.push_str("none\n");
    }
    for f in &floating {
        let _ = writeln!(report, "- {f}");
    }
    report.push_str(&catalog_table(&catalog));
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
    let mut exceptions = catalog_exceptions(&catalog);
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
        "advisories are checked against an offline RustSec snapshot (see \
                     ../shared/advisory-db/README.md); advisories newer than it are not covered"
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

/// Catalog entries that float: Debian packages follow their release's signed updates.
fn catalog_floating(catalog: &[CatalogTool]) -> Vec<String> {
    catalog
        .iter()
        .filter(|t| t.verification == "apt-signed")
        .map(|t| {
            format!(
                "{CATALOG}: {}: Debian packages {} follow the {} release's signed updates",
                t.name,
                t.apt.join(", "),
                t.version
            )
        })
        .collect()
}

/// Catalog entries without verification, with their written reason.
fn catalog_exceptions(catalog: &[CatalogTool]) -> Vec<String> {
    catalog
        .iter()
        .filter(|t| t.verification == "exception")
        .map(|t| {
            format!(
                "{CATALOG}: {} {} is not verified: {}",
                t.name,
                t.version,
                t.exception.as_deref().unwrap_or("(no reason written)")
            )
        })
        .collect()
}

/// Every catalog entry with its pin, verification and the registry's newest version.
fn catalog_table(catalog: &[CatalogTool]) -> String {
    let mut out = format!(
        "\n## Tool catalog ({CATALOG})\n\n\
         | tool | pinned | verification | registry | newest |\n|---|---|---|---|---|\n"
    );
    for t in catalog {
        let (registry, newest) = newest_version(t);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {registry} | {newest} |",
            t.name, t.version, t.verification
        );
    }
    out
}

/// The tool catalog the generated Dockerfiles install from.
const CATALOG: &str = "crates/aibox-devcontainer/catalog/tools.toml";

/// The fields of a catalog entry release-state reports.
struct CatalogTool {
    name: String,
    version: String,
    verification: String,
    exception: Option<String>,
    apt: Vec<String>,
    /// First npm package name, or the `PyPI` project named by the first URL.
    npm: Option<String>,
    pypi: Option<String>,
}

fn catalog_tools() -> Result<Vec<CatalogTool>, String> {
    let text = fs_err::read_to_string(CATALOG).map_err(|e| e.to_string())?;
    let doc: toml::Table = toml::from_str(&text).map_err(|e| format!("{CATALOG}: {e}"))?;
    let tools = doc
        .get("tool")
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default();
    let text_of = |v: Option<&toml::Value>| v.and_then(toml::Value::as_str).map(str::to_owned);
    Ok(tools
        .iter()
        .map(|(name, t)| {
            let first = t
                .get("artifact")
                .and_then(toml::Value::as_array)
                .and_then(|a| a.first());
            let npm = text_of(first.and_then(|a| a.get("npm"))).map(|spec| {
                let at = spec
                    .get(1..)
                    .and_then(|s| s.find('@'))
                    .map_or(spec.len(), |i| i + 1);
                spec[..at].to_owned()
            });
            let pypi = text_of(first.and_then(|a| a.get("url")))
                .filter(|u| u.contains("pythonhosted.org"))
                .and_then(|u| {
                    let file = u.rsplit('/').next()?.to_owned();
                    Some(file.split('-').next()?.to_owned())
                });
            CatalogTool {
                name: name.clone(),
                version: text_of(t.get("version")).unwrap_or_default(),
                verification: text_of(t.get("verification")).unwrap_or_default(),
                exception: text_of(t.get("exception")),
                apt: t
                    .get("apt")
                    .and_then(toml::Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
                npm,
                pypi,
            }
        })
        .collect())
}

/// `(registry, newest version)` from the registry the entry comes from, asked through
/// the machine's own clients (npm, the `PyPI` JSON API with curl, apt-cache).
fn newest_version(t: &CatalogTool) -> (String, String) {
    let unreachable = || "(not reachable)".to_owned();
    let stdout = |cmd: &mut Command| {
        cmd.output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    if let Some(name) = &t.npm {
        let v = stdout(Command::new("npm").args(["view", name, "version"]));
        return (
            format!("npm {name}"),
            v.map_or_else(unreachable, |v| v.trim().to_owned()),
        );
    }
    if let Some(name) = &t.pypi {
        let url = format!("https://pypi.org/pypi/{name}/json");
        let v = stdout(Command::new("curl").args(["-fsSL", "--max-time", "30", &url]))
            .and_then(|body| serde_json::from_str::<serde_json::Value>(&body).ok())
            .and_then(|j| j["info"]["version"].as_str().map(str::to_owned));
        return (format!("PyPI {name}"), v.unwrap_or_else(unreachable));
    }
    if let Some(pkg) = t.apt.first() {
        let v = stdout(Command::new("apt-cache").args(["policy", pkg])).and_then(|text| {
            text.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("Candidate:")
                    .map(|v| v.trim().to_owned())
            })
        });
        return (format!("Debian {pkg}"), v.unwrap_or_else(unreachable));
    }
    ("-".to_owned(), "-".to_owned())
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
