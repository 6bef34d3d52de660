//! End-to-end on a real Podman: `aibox doctor --processkit` runs the installed release's
//! pk-doctor inside the running container, with the environment the image installed from
//! `aibox.lock` (processkit v1.0.0-alpha.1's real pk-doctor, vendored in
//! `aibox-test-support`'s `processkit-uses` fixture). The host has no `uv` for it
//! (`AIBOX_UV=none`), so a result can only come from the container.

// Helpers outside `#[test]` functions are test code too: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Podman};
use aibox_test_support::show_output as show;
use camino::{Utf8Path, Utf8PathBuf};

fn aibox(podman: &Podman, root: &Utf8Path, uv: &str) -> Command {
    let mut cmd = podman.aibox(env!("CARGO_BIN_EXE_aibox"), root);
    cmd.env("AIBOX_UV", uv).env("AIBOX_NO_UPDATE_CHECK", "1");
    cmd
}

fn ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?} failed: {}", show(&out));
    out
}

#[test]
fn doctor_processkit_runs_pk_doctor_in_the_running_container() {
    let podman = Podman::ready();
    let tmp = tempfile::tempdir().unwrap();
    let base = Utf8PathBuf::from_path_buf(tmp.path().to_owned()).unwrap();
    let release = base.join("release");
    aibox_test_support::copy_tree(
        &aibox_test_support::processkit_uses("v1.0.0-alpha.1"),
        &release,
    )
    .unwrap();
    let sha = aibox_test_support::tree_sha256(&release);
    let name = format!("aibox-e2e-pkdoctor-{}", std::process::id());
    let root = base.join(&name);
    fs_err::create_dir_all(&root).unwrap();
    fs_err::write(
        root.join("aibox.toml"),
        format!(
            "[aibox]\nproject_name = \"{name}\"\n\n[container]\nname = \"{name}\"\n\
             base_image = \"{BASE_IMAGE}\"\n\n\
             [context]\nmode = \"processkit\"\npackages = [\"minimal\"]\n\n\
             [processkit]\nsource = \"{release}\"\nversion = \"v1.0.0-alpha.1\"\nsha256 = \"{sha}\"\n\
             trusted_sources = [\"{release}\"]\n\n\
             [skills]\ninclude = [\"pk-doctor\"]\n\n[ai]\nharnesses = [\"claude\"]\n"
        ),
    )
    .unwrap();
    fs_err::write(
        root.join(".aibox-local.toml"),
        aibox_test_support::podman::local_toml_with_host_ca(),
    )
    .unwrap();

    let uv = aibox_test_support::uv();
    ok(aibox(&podman, &root, uv.as_str()).arg("apply"));
    let status: serde_json::Value = serde_json::from_slice(
        &ok(aibox(&podman, &root, "none").args(["status", "-o", "json"])).stdout,
    )
    .unwrap();
    let text = |k: &str| status[k].as_str().unwrap().to_owned();
    let mut cleanup = Cleanup::new(&podman);
    cleanup
        .container(&text("container"))
        .image(&text("image"))
        .network(&format!("{}_default", text("project")));

    ok(aibox(&podman, &root, "none").arg("up"));
    let started = std::time::Instant::now();
    let out = aibox(&podman, &root, "none")
        .args(["doctor", "--processkit", "-o", "json"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON ({e}): {}", show(&out)));
    let findings = report["findings"].as_array().unwrap();
    let summary = findings
        .iter()
        .find(|f| f["code"] == "aibox::doctor::pk_doctor")
        .unwrap_or_else(|| panic!("pk-doctor did not run: {report}"));
    assert!(
        summary["message"]
            .as_str()
            .unwrap()
            .contains("in the container"),
        "{summary}"
    );
    assert!(
        findings
            .iter()
            .any(|f| f["code"] == "pk-doctor::schema.walked"),
        "{report}"
    );
    eprintln!("doctor --processkit in the container: {took:?}");
    ok(aibox(&podman, &root, "none").arg("down"));
    drop(cleanup);
}
