//! The bundled content pack `examples/processkit-pack/`: it verifies against its
//! published pin, installs offline, and its MCP server answers real JSON-RPC over stdio.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use aibox_config::ProcesskitSection;
use aibox_provenance::source::{FetchOptions, Verification, fetch_release};
use aibox_provenance::{PlanOptions, apply_plan, integrity, plan_install};

/// The pin documented for the pack. Changing any file of the pack changes it: update the
/// example project's `[processkit] sha256` together with this constant.
const PACK_SHA256: &str = "85e26571936b8e418b23fb0ded82e31c63c0993fd567a1e6fa0914473d014af0";

fn pack_dir() -> std::path::PathBuf {
    aibox_test_support::workspace_root()
        .join("examples/processkit-pack")
        .into_std_path_buf()
}

#[test]
fn pack_installs_offline_and_its_server_answers() {
    let project = tempfile::tempdir().unwrap();
    let root = project.path();
    let section = ProcesskitSection {
        source: Some(pack_dir().to_string_lossy().into_owned()),
        version: Some("v0.1.0".into()),
        sha256: Some(PACK_SHA256.into()),
        ..ProcesskitSection::default()
    };
    let release = fetch_release(&section, root, None, &mut FetchOptions::default()).unwrap();
    assert_eq!(release.verification, Verification::Pinned);
    assert!(release.warnings.is_empty(), "{:?}", release.warnings);

    let packages = vec!["starter".to_owned()];
    let opts = PlanOptions {
        packages: &packages,
        include: &[],
        exclude: &[],
        prefer_gateway: true,
        src_path: None,
        now: "2026-11-29T00:00:00Z",
        cli_version: "0.1.0",
    };
    let plan = plan_install(root, &release, None, &opts).unwrap();
    let skills: Vec<_> = plan.skills.iter().map(String::as_str).collect();
    assert_eq!(skills, ["decision-record", "skill-finder"]);
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    assert_eq!(
        plan.mcp_aggregate_sha256.as_deref(),
        Some("aa44b1646b0dcb3fbd6a8b03d7eb12bdba7bd3d106515af77b4f2ff219859401"),
        "matches the pack's manifest, computed like processkit does"
    );
    assert_eq!(plan.servers.len(), 1);
    assert_eq!(plan.servers[0].name, "processkit-skill-finder");
    assert_eq!(plan.servers[0].command, "python3");
    apply_plan(root, &plan).unwrap();
    common::write_lock(root, &plan.lock);
    assert!(!root.join("context/skills/engineering").exists());
    assert!(
        !root.join("README.md").exists(),
        "top-level pack files are not installed"
    );
    assert_eq!(
        integrity(root).unwrap().status,
        aibox_provenance::IntegrityStatus::Healthy
    );

    // Start the server exactly as a harness would: from the project root.
    let mut child = Command::new(&plan.servers[0].command)
        .args(&plan.servers[0].args)
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is required for this test (apt-get install python3)");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut rpc = |msg: serde_json::Value| -> serde_json::Value {
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let init = rpc(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}),
    );
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        "processkit-skill-finder"
    );
    let tools = rpc(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let names: Vec<_> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["list_skills", "find_skill"]);
    let found = rpc(
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "find_skill", "arguments": {"query": "decision"}}}),
    );
    let text = found["result"]["content"][0]["text"].as_str().unwrap();
    let hits: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(hits[0]["name"], "decision-record");
    assert_eq!(
        hits.as_array().unwrap().len(),
        1,
        "only installed skills are found: {hits}"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
