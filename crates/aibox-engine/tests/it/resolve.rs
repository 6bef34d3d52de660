//! Resolve, then plan: `doctor` and `mcp list` never download. A loopback HTTP server
//! serves the release and records every request; the offline commands must not make one.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use crate::common;

use aibox_engine::doctor::{DoctorOptions, doctor};
use aibox_engine::{ApplyOptions, PlanOptions, ProcesskitState, apply, mcp_list, resolve};
use aibox_test_support::http::{Server, release::SyntheticRelease};
use camino::{Utf8Path, Utf8PathBuf};
use common::empty_project;

/// A server with the release (and its sidecar) and a project pinned to it.
fn served_project(pin: Option<&str>) -> (Server, tempfile::TempDir, Utf8PathBuf) {
    let server = Server::start().unwrap();
    common::publish(&server, &SyntheticRelease::minimal("v0.0.1"));
    let (dir, root) = empty_project();
    let pin = pin.map_or_else(String::new, |p| format!("sha256 = \"{p}\"\n"));
    let toml = format!(
        "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\n\n\
         [processkit]\nsource = \"{}\"\nversion = \"v0.0.1\"\n{pin}",
        server.url("/org/processkit.git")
    );
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
    (server, dir, root)
}

fn utf8(dir: &tempfile::TempDir) -> Utf8PathBuf {
    Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap()
}

fn offline(cache: &Utf8Path) -> PlanOptions {
    PlanOptions {
        cache_dir: Some(cache.to_owned()),
        offline: true,
        ..PlanOptions::default()
    }
}

fn doctor_options(cache: &Utf8Path) -> DoctorOptions {
    DoctorOptions {
        skip_engine: true,
        environment: Vec::new(),
        cache_dir: Some(cache.to_owned()),
        ..DoctorOptions::default()
    }
}

fn codes(report: &aibox_engine::doctor::DoctorReport) -> Vec<&str> {
    report.findings.iter().map(|f| f.code.as_str()).collect()
}

#[test]
fn doctor_reports_not_resolved_and_never_contacts_the_server() {
    let (server, _dir, root) = served_project(None);
    let cache = tempfile::tempdir().unwrap();
    let report = doctor(&root, &doctor_options(&utf8(&cache))).unwrap();
    assert!(
        codes(&report).contains(&"aibox::doctor::not_resolved"),
        "{:?}",
        report.findings
    );
    let finding = report
        .findings
        .iter()
        .find(|f| f.code == "aibox::doctor::not_resolved")
        .unwrap();
    assert!(finding.message.contains("not resolved"), "{finding:?}");
    assert!(
        server.hits().is_empty(),
        "doctor downloaded: {:?}",
        server.hits()
    );
}

#[test]
fn resolve_offline_is_not_resolved_and_never_contacts_the_server() {
    // With a pin whose archive is not cached.
    let (server, _dir, root) = served_project(Some(&"ab".repeat(32)));
    let cache = tempfile::tempdir().unwrap();
    let resolved = resolve(&root, &offline(&utf8(&cache))).unwrap();
    assert!(
        matches!(resolved.processkit, ProcesskitState::NotResolved { .. }),
        "{:?}",
        resolved.processkit
    );
    assert!(resolved.not_resolved().unwrap().contains("download cache"));
    // Planning it is a clear error, not a download.
    let err = aibox_engine::plan(&resolved).unwrap_err();
    assert_eq!(common::code(&err), "aibox::processkit::not_resolved");
    assert!(server.hits().is_empty(), "{:?}", server.hits());
}

#[test]
fn mcp_list_never_downloads() {
    // The default cache location cannot hold an archive with this made-up digest.
    let (server, _dir, root) = served_project(Some(&"cd".repeat(32)));
    let list = mcp_list(&root).unwrap();
    assert!(list.not_resolved.is_some(), "{list:?}");
    assert!(
        server.hits().is_empty(),
        "mcp list downloaded: {:?}",
        server.hits()
    );
}

#[test]
fn doctor_uses_the_cached_release_after_apply_without_a_request() {
    let (server, _dir, root) = served_project(None);
    let cache = tempfile::tempdir().unwrap();
    let mut options = ApplyOptions::default();
    options.plan.cache_dir = Some(utf8(&cache));
    apply(&root, &options).unwrap();
    let before = server.hits().len();
    assert!(before > 0, "apply downloads");

    let report = doctor(&root, &doctor_options(&utf8(&cache))).unwrap();
    assert!(
        !codes(&report).contains(&"aibox::doctor::not_resolved"),
        "{:?}",
        report.findings
    );
    assert!(
        !codes(&report).contains(&"aibox::doctor::out_of_sync"),
        "{:?}",
        report.findings
    );
    let resolved = resolve(&root, &offline(&utf8(&cache))).unwrap();
    assert!(matches!(resolved.processkit, ProcesskitState::Resolved(_)));
    assert_eq!(server.hits().len(), before, "{:?}", server.hits());
}

/// Doctor's JSON messages are plain text: no terminal box drawing, no ANSI escapes, even
/// for diagnostics with source spans (a configuration that does not load, a corrupt lock).
#[test]
fn doctor_json_messages_hold_no_box_drawing_or_ansi() {
    let (dir, root) = empty_project();
    fs_err::write(
        root.join("aibox.toml"),
        "[container]\nname = \"x\"\nuser = 5\n",
    )
    .unwrap();
    fs_err::write(root.join("aibox.lock"), "[aibox\ncli_version = \n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let report = doctor(&root, &doctor_options(&utf8(&cache))).unwrap();
    let json: serde_json::Value = serde_json::to_value(&report).unwrap();
    let findings = json["findings"].as_array().unwrap();
    let codes: Vec<&str> = findings
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(
        codes.contains(&"aibox::doctor::config_invalid"),
        "{codes:?}"
    );
    assert!(codes.contains(&"aibox::doctor::lock_invalid"), "{codes:?}");
    for f in findings {
        let message = f["message"].as_str().unwrap();
        assert!(
            !message
                .chars()
                .any(|c| ('\u{2500}'..='\u{257f}').contains(&c) || c == '\u{1b}'),
            "{message}"
        );
    }
    let config = findings
        .iter()
        .find(|f| f["code"] == "aibox::doctor::config_invalid")
        .unwrap();
    // Still says where: file, line and column.
    assert!(
        config["message"]
            .as_str()
            .unwrap()
            .contains("aibox.toml:3:"),
        "{config}"
    );
    drop(dir);
}

/// The official repository is the default source: a version alone resolves from it (here
/// offline, so the reason names it without a request), it counts as trusted, and with
/// neither a source nor a version nothing is pinned and nothing is installed.
#[test]
fn a_version_without_a_source_means_the_official_repository() {
    let (_dir, root) = empty_project();
    let toml = "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\n\n\
                [processkit]\nversion = \"v0.28.3\"\n";
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let resolved = resolve(&root, &offline(&utf8(&cache))).unwrap();
    let reason = resolved.not_resolved().unwrap_or_default().to_owned();
    assert!(
        reason.contains("processkit v0.28.3 from https://github.com/projectious-work/processkit"),
        "{:?}",
        resolved.processkit
    );
    let section = aibox_config::load_project(&root).unwrap().config.processkit;
    assert_eq!(
        aibox_provenance::trust::trusted_by(&section, root.as_std_path()).as_deref(),
        Some(aibox_config::OFFICIAL_PROCESSKIT_SOURCE)
    );

    fs_err::write(
        root.join("aibox.toml"),
        "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\n",
    )
    .unwrap();
    let resolved = resolve(&root, &offline(&utf8(&cache))).unwrap();
    assert!(
        matches!(resolved.processkit, ProcesskitState::NotConfigured),
        "{:?}",
        resolved.processkit
    );
}
