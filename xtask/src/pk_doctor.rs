//! The release gate's `pk-doctor` step (also `cargo xtask pk-doctor`): the debug `aibox`
//! runs `doctor --processkit` on the bundled example (`examples/demo` with its content
//! pack, which ships no pk-doctor: the step requires that this is reported, not a
//! failure) and on a project of the vendored real release (`aibox-test-support`'s
//! `processkit-uses/v1.0.0-alpha.1` with pk-doctor selected: the step requires that the
//! real pk-doctor ran on locked dependencies, with `uv` from `PATH`). Each outcome goes
//! into the evidence.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::say;

/// The codes aibox reports about pk-doctor itself (not pk-doctor's own findings).
fn outcome(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["code"].as_str())
        .filter(|c| c.starts_with("aibox::doctor::pk_doctor"))
        .map(ToOwned::to_owned)
        .collect()
}

/// `aibox` (the debug build) in `project` with `args`; `uv` from `PATH`, never the
/// `AIBOX_UV=none` cargo sets for its own processes.
fn aibox(project: &Path, args: &[&str]) -> Result<std::process::Output, String> {
    say(&format!(
        "==> aibox --project {} {}",
        project.display(),
        args.join(" ")
    ));
    Command::new("target/debug/aibox")
        .arg("--project")
        .arg(project)
        .args(args)
        .env_remove("AIBOX_UV")
        .env("AIBOX_NO_UPDATE_CHECK", "1")
        .output()
        .map_err(|e| format!("cannot run target/debug/aibox: {e}"))
}

/// `apply`, then `doctor --processkit -o json`; returns the pk-doctor codes and how many
/// `pk-doctor::` findings were merged.
fn run_on(project: &Path) -> Result<(Vec<String>, usize), String> {
    let out = aibox(project, &["apply", "--yes"])?;
    if !out.status.success() {
        return Err(format!(
            "aibox apply failed in {}:\n{}",
            project.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let out = aibox(project, &["doctor", "--processkit", "-o", "json"])?;
    // doctor exits 1 for errors in the report; anything else is a crash.
    if !matches!(out.status.code(), Some(0 | 1)) {
        return Err(format!(
            "aibox doctor --processkit failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let report: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("doctor printed no JSON report: {e}"))?;
    let merged = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| {
            f["code"]
                .as_str()
                .is_some_and(|c| c.starts_with("pk-doctor::"))
        })
        .count();
    Ok((outcome(&report), merged))
}

/// Runs the step; returns the evidence.
pub fn run() -> Result<Value, String> {
    crate::step(
        "build aibox",
        &["build", "--locked", "--quiet", "--package", "aibox-cli"],
    )?;
    let demo = Path::new(crate::prepare_demo("target/aibox-pk-doctor-demo")?).to_owned();
    let (demo_codes, _) = run_on(&demo)?;
    if demo_codes != ["aibox::doctor::pk_doctor_missing"] {
        return Err(format!(
            "the bundled example ships no pk-doctor, so doctor --processkit must say \
             exactly that; it reported {demo_codes:?}"
        ));
    }

    let base = Path::new("target/aibox-pk-doctor-real");
    if base.exists() {
        fs_err::remove_dir_all(base).map_err(|e| e.to_string())?;
    }
    let release = base.join("release");
    crate::copy_dir(
        Path::new("crates/aibox-test-support/fixtures/processkit-uses/v1.0.0-alpha.1"),
        &release,
    )?;
    let project = base.join("p");
    fs_err::create_dir_all(&project).map_err(|e| e.to_string())?;
    let source = fs_err::canonicalize(&release).map_err(|e| e.to_string())?;
    let sha = aibox_test_support::tree_sha256(
        camino::Utf8Path::from_path(&release).ok_or("the checkout's path is not UTF-8")?,
    );
    fs_err::write(
        project.join("aibox.toml"),
        format!(
            "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\npackages = [\"minimal\"]\n\n\
             [processkit]\nsource = \"{}\"\nversion = \"v1.0.0-alpha.1\"\nsha256 = \"{sha}\"\n\
             trusted_sources = [\"{}\"]\n\n\
             [skills]\ninclude = [\"pk-doctor\"]\n\n[ai]\nharnesses = [\"claude\"]\n",
            source.display(),
            source.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let (real_codes, merged) = run_on(&project)?;
    if !real_codes.iter().any(|c| c == "aibox::doctor::pk_doctor")
        || real_codes.iter().any(|c| c != "aibox::doctor::pk_doctor")
        || merged == 0
    {
        return Err(format!(
            "the real pk-doctor of v1.0.0-alpha.1 did not run cleanly: {real_codes:?}, {merged} \
             finding(s) merged (is uv on PATH?)"
        ));
    }
    say(&format!(
        "pk-doctor: bundled example reports it missing; the real release's ran and gave \
         {merged} finding(s)"
    ));
    Ok(json!({
        "bundled_example": demo_codes,
        "real_release": { "version": "v1.0.0-alpha.1", "findings_merged": merged },
    }))
}
