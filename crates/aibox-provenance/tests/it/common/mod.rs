//! Shared helpers of the integration tests: install a synthetic release from a local
//! archive (with its sidecar) into a project directory, writing the lock like the engine.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code
use std::path::Path;

use aibox_config::ProcesskitSection;
use aibox_provenance::source::{FetchOptions, fetch_release};
use aibox_provenance::{InstallPlan, PlanOptions, ProcesskitLock, apply_plan, plan_resume};
use aibox_test_support::http::release::SyntheticRelease;

pub struct Setup<'a> {
    pub packages: &'a [&'a str],
    pub include: &'a [&'a str],
    pub exclude: &'a [&'a str],
    pub prefer_gateway: bool,
    pub now: &'a str,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Self {
            packages: &["product"],
            include: &[],
            exclude: &[],
            prefer_gateway: true,
            now: "2026-05-22T19:24:06Z",
        }
    }
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// Writes the release archive and sidecar into `store` and returns the section.
pub fn publish(release: &SyntheticRelease, store: &Path) -> ProcesskitSection {
    let archive = release.tar_gz();
    let path = store.join(release.archive_name());
    fs_err::write(&path, &archive).unwrap();
    fs_err::write(
        store.join(format!("{}.sha256", release.archive_name())),
        release.sidecar(&archive),
    )
    .unwrap();
    ProcesskitSection {
        source: Some(path.to_string_lossy().into_owned()),
        version: Some(release.version.clone()),
        ..ProcesskitSection::default()
    }
}

pub fn read_lock(root: &Path) -> Option<ProcesskitLock> {
    ProcesskitLock::read_from_lock_file(&root.join("aibox.lock")).unwrap()
}

pub fn write_lock(root: &Path, lock: &ProcesskitLock) {
    #[derive(serde::Serialize)]
    struct File<'a> {
        processkit: &'a ProcesskitLock,
    }
    fs_err::write(
        root.join("aibox.lock"),
        toml::to_string(&File { processkit: lock }).unwrap(),
    )
    .unwrap();
}

/// Plans against the project's current state (lock before the run), without applying.
pub fn plan(
    root: &Path,
    store: &Path,
    release: &SyntheticRelease,
    setup: &Setup<'_>,
) -> aibox_provenance::Result<InstallPlan> {
    let section = publish(release, store);
    plan_section(root, &section, setup)
}

/// Plans from an already published section (benchmarks exclude the packing).
pub fn plan_section(
    root: &Path,
    section: &ProcesskitSection,
    setup: &Setup<'_>,
) -> aibox_provenance::Result<InstallPlan> {
    plan_section_with(root, section, setup, aibox_provenance::Hints::default())
}

/// [`plan_section`], resuming the run that recorded `interrupted` (see
/// [`aibox_provenance::plan_resume`]).
#[allow(dead_code)] // not every test module resumes
pub fn plan_section_resuming(
    root: &Path,
    section: &ProcesskitSection,
    setup: &Setup<'_>,
    interrupted: &aibox_provenance::Intent,
) -> aibox_provenance::Result<InstallPlan> {
    let hints = aibox_provenance::Hints {
        interrupted: Some(interrupted),
        ..aibox_provenance::Hints::default()
    };
    plan_section_with(root, section, setup, hints)
}

/// [`plan_section`] with `hints`.
#[allow(dead_code)] // not every test module resumes
pub fn plan_section_with(
    root: &Path,
    section: &ProcesskitSection,
    setup: &Setup<'_>,
    hints: aibox_provenance::Hints<'_>,
) -> aibox_provenance::Result<InstallPlan> {
    let previous = read_lock(root);
    let verified = fetch_release(
        section,
        root,
        previous.as_ref(),
        &mut FetchOptions::default(),
    )?;
    let (packages, include, exclude) = (
        owned(setup.packages),
        owned(setup.include),
        owned(setup.exclude),
    );
    let opts = PlanOptions {
        packages: &packages,
        include: &include,
        exclude: &exclude,
        prefer_gateway: setup.prefer_gateway,
        src_path: None,
        now: setup.now,
        cli_version: "0.1.0",
    };
    plan_resume(root, &verified, previous.as_ref(), &opts, hints)
}

/// Plans from a published section, applies, writes the lock.
#[allow(dead_code)] // only `benches/processkit.rs` calls it
pub fn install_section(root: &Path, section: &ProcesskitSection, setup: &Setup<'_>) -> InstallPlan {
    let plan = plan_section(root, section, setup).unwrap();
    apply_plan(root, &plan).unwrap();
    write_lock(root, &plan.lock);
    plan
}

/// Plans, applies and writes the lock last.
pub fn install(
    root: &Path,
    store: &Path,
    release: &SyntheticRelease,
    setup: &Setup<'_>,
) -> InstallPlan {
    let plan = plan(root, store, release, setup).unwrap();
    apply_plan(root, &plan).unwrap();
    write_lock(root, &plan.lock);
    plan
}

/// The class and action `plan` gives `path`.
pub fn class_of(
    plan: &InstallPlan,
    path: &str,
) -> (
    aibox_provenance::install::Class,
    aibox_provenance::install::Action,
) {
    plan.decisions
        .iter()
        .find(|x| &*x.path == path)
        .map(|x| (x.class, x.action))
        .unwrap()
}
