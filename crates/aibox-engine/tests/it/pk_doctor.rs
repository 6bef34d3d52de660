//! `aibox doctor --processkit`: the real pk-doctor of processkit v1.0.0-alpha.1 (vendored
//! in `aibox-test-support`'s `processkit-uses` fixture with its licence) is locked by
//! `apply` with a real `uv`, run on the host from that lock, and its JSON findings join the
//! report, tagged `pk-doctor::`. What cannot run is a finding, never a crash: no
//! pk-doctor, dependencies not locked, no `uv`, output that is not its JSON.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::common;

use aibox_engine::doctor::{DoctorOptions, DoctorReport, doctor};
use aibox_engine::mcp_resolver::Resolver;
use aibox_engine::{ApplyOptions, apply};
use aibox_policy::Severity;
use camino::{Utf8Path, Utf8PathBuf};

/// A project on a copy of the fixture release, with pk-doctor selected or not.
fn project(with_pk_doctor: bool) -> (tempfile::TempDir, Utf8PathBuf) {
    let (t, dir) = common::empty_project();
    let release = dir.join("release");
    aibox_test_support::copy_tree(
        &aibox_test_support::processkit_uses("v1.0.0-alpha.1"),
        &release,
    )
    .unwrap();
    let sha = aibox_test_support::tree_sha256(&release);
    let root = dir.join("p");
    fs_err::create_dir_all(&root).unwrap();
    let include = if with_pk_doctor {
        "[skills]\ninclude = [\"pk-doctor\"]\n\n"
    } else {
        ""
    };
    fs_err::write(
        root.join("aibox.toml"),
        format!(
            "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\npackages = [\"minimal\"]\n\n\
             [processkit]\nsource = \"{release}\"\nversion = \"v1.0.0-alpha.1\"\nsha256 = \"{sha}\"\n\
             trusted_sources = [\"{release}\"]\n\n\
             {include}[ai]\nharnesses = [\"claude\"]\n"
        ),
    )
    .unwrap();
    (t, root)
}

fn apply_with(root: &Utf8Path, cache: &Utf8Path, uv: Resolver) -> Vec<String> {
    let mut options: ApplyOptions = common::apply_opts(Some(cache));
    options.plan.python_resolver = uv;
    apply(root, &options).unwrap().warnings
}

fn doctor_with(root: &Utf8Path, cache: &Utf8Path, uv: Resolver) -> DoctorReport {
    let options = DoctorOptions {
        skip_engine: true,
        environment: Vec::new(),
        cache_dir: Some(cache.to_owned()),
        processkit: true,
        uv,
        ..DoctorOptions::default()
    };
    doctor(root, &options).unwrap()
}

fn codes(report: &DoctorReport) -> Vec<&str> {
    report.findings.iter().map(|f| f.code.as_str()).collect()
}

fn real_uv() -> Resolver {
    Resolver::Path(aibox_test_support::uv().into())
}

#[test]
fn the_release_pk_doctor_runs_locked_on_the_host_and_its_findings_join_the_report() {
    let (_t, root) = project(true);
    let (_c, cache) = common::empty_project();
    apply_with(&root, &cache, real_uv());

    // The script's PEP 723 dependencies are locked like a server's.
    let lock = fs_err::read_to_string(root.join("aibox.lock")).unwrap();
    let parsed: toml::Table = toml::from_str(&lock).unwrap();
    let envs = parsed["mcp"]["environments"].as_table().unwrap();
    let (_, env) = envs
        .iter()
        .find(|(_, e)| {
            e["servers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s.as_str() == Some("pk-doctor-script"))
        })
        .unwrap_or_else(|| panic!("pk-doctor's environment is not locked: {lock}"));
    let requirements: Vec<&str> = env["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.as_str())
        .collect();
    for package in ["pyyaml==", "jsonschema==", "sqlite-vec=="] {
        assert!(
            requirements.iter().any(|r| r.starts_with(package)),
            "{package} not pinned: {requirements:?}"
        );
    }

    let started = std::time::Instant::now();
    let report = doctor_with(&root, &cache, real_uv());
    let took = started.elapsed();
    let summary = report
        .findings
        .iter()
        .find(|f| f.code == "aibox::doctor::pk_doctor")
        .unwrap_or_else(|| panic!("pk-doctor did not run: {}", report.render_human()));
    assert!(summary.message.contains("on the host"), "{summary:?}");
    let merged: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.code.starts_with("pk-doctor::"))
        .collect();
    assert!(!merged.is_empty(), "{}", report.render_human());
    assert!(merged.iter().all(|f| f.message.starts_with("[pk-doctor ")));
    // Its own checks, by the ids v1.0.0-alpha.1 reports.
    assert!(
        merged.iter().any(|f| f.code == "pk-doctor::schema.walked"),
        "{:?}",
        codes(&report)
    );
    // In JSON the source tag is the code.
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["findings"].as_array().unwrap().iter().any(|f| {
        f["code"]
            .as_str()
            .is_some_and(|c| c.starts_with("pk-doctor::"))
    }));
    assert!(report.render_human().contains("[pk-doctor "));
    eprintln!("doctor --processkit with a cold environment: {took:?}");

    // A second run reuses the environment in the cache.
    let started = std::time::Instant::now();
    let again = doctor_with(&root, &cache, real_uv());
    eprintln!("doctor --processkit, warm: {:?}", started.elapsed());
    assert!(codes(&again).contains(&"aibox::doctor::pk_doctor"));

    // Edited, it is no longer the release's code: not run on the host (only in the
    // container).
    fs_err::write(
        root.join("context/skills/processkit/pk-doctor/scripts/doctor.py"),
        "import sys\nprint('Traceback: boom')\nsys.exit(2)\n",
    )
    .unwrap();
    let edited = doctor_with(&root, &cache, real_uv());
    let refused = edited
        .findings
        .iter()
        .find(|f| f.code == "aibox::doctor::pk_doctor_untrusted")
        .unwrap_or_else(|| panic!("{}", edited.render_human()));
    assert!(refused.message.contains("edited"), "{refused:?}");
    assert_eq!(refused.severity, Severity::Warning);
    assert!(!codes(&edited).contains(&"aibox::doctor::pk_doctor"));
}

#[test]
fn what_cannot_run_is_a_finding() {
    // Not selected: nothing to run.
    let (_t, root) = project(false);
    let (_c, cache) = common::empty_project();
    apply_with(&root, &cache, Resolver::Off);
    let report = doctor_with(&root, &cache, Resolver::Off);
    assert!(
        codes(&report).contains(&"aibox::doctor::pk_doctor_missing"),
        "{:?}",
        codes(&report)
    );

    // Selected but applied without a resolver: never run on floating dependencies.
    let (_t, root) = project(true);
    let warnings = apply_with(&root, &cache, Resolver::Off);
    // Said as what it is, never as an MCP server.
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("pk-doctor's dependencies are not locked")),
        "{warnings:?}"
    );
    assert!(
        !warnings.iter().any(|w| w.contains("pk-doctor-script")),
        "{warnings:?}"
    );
    assert!(
        root.join("context/skills/processkit/pk-doctor/scripts/doctor.py")
            .is_file()
    );
    let report = doctor_with(&root, &cache, real_uv());
    assert!(
        codes(&report).contains(&"aibox::doctor::pk_doctor_unlocked"),
        "{:?}",
        codes(&report)
    );

    // Locked, but no uv on the host and no container.
    apply_with(&root, &cache, real_uv());
    let report = doctor_with(&root, &cache, Resolver::Path("/nonexistent/uv".into()));
    let f = report
        .findings
        .iter()
        .find(|f| f.code == "aibox::doctor::pk_doctor_unavailable")
        .unwrap_or_else(|| panic!("{:?}", codes(&report)));
    assert!(f.remedy.contains("aibox up"), "{f:?}");

    // Without `--processkit` nothing of it runs.
    let plain = doctor(
        &root,
        &DoctorOptions {
            skip_engine: true,
            environment: Vec::new(),
            cache_dir: Some(cache.clone()),
            ..DoctorOptions::default()
        },
    )
    .unwrap();
    assert!(!codes(&plain).iter().any(|c| c.contains("pk_doctor")));
}
