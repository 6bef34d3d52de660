//! `plan` does no I/O: it works from the files `resolve` captured, the bytes of an
//! unverified release it read and the time it took. Changing, deleting or moving the
//! project's files, the release folder or the download cache after the resolve leaves the
//! plan exactly as it was, and `apply_resolved` with a stale resolve never writes over
//! newer files.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use crate::common;

use aibox_config::ErrorKind;
use aibox_engine::{ApplyOptions, EngineError, PlanOptions, apply, apply_resolved, plan, resolve};
use camino::{Utf8Path, Utf8PathBuf};
use common::{AIBOX_TOML, Fixture};

const LOCAL: &str = "[container]\nextra_ca_certificates = \"my-ca.pem\"\n\n\
                     [container.environment]\nGITHUB_TOKEN = \"ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE\"\n";

/// A project that exercises every file the plan reads: a previous apply (lock and
/// generated files), a Compose override with an `include`, `Dockerfile.local`, a
/// `.gitignore` and an MCP file with user lines, a personal CA file.
fn project() -> Fixture {
    let fx = Fixture::new();
    fx.write(".aibox-local.toml", LOCAL);
    fx.write("my-ca.pem", aibox_test_support::http::test_ca_pem());
    fx.write(".gitignore", "target/\n");
    fx.write(
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"mine\": { \"command\": \"my-server\" }\n  }\n}\n",
    );
    apply(&fx.root, &ApplyOptions::default()).unwrap();
    write_include(&fx);
    fx.write(
        ".devcontainer/Dockerfile.local",
        "RUN echo local > /etc/local\n",
    );
    fx
}

/// A Compose override that includes a second file.
fn write_include(fx: &Fixture) {
    fx.write(
        ".devcontainer/docker-compose.override.yml",
        "include:\n  - extra.yml\nservices:\n  demo: {}\n",
    );
    fx.write(
        ".devcontainer/extra.yml",
        "services:\n  helper:\n    image: busybox\n",
    );
}

fn offline() -> PlanOptions {
    PlanOptions {
        offline: true,
        ..PlanOptions::default()
    }
}

/// Everything a plan carries, as one comparable string.
fn rendered(resolved: &aibox_engine::Resolved) -> String {
    format!("{:#?}", plan(resolved).unwrap())
}

/// Changes every file the plan of [`project`] reads.
fn change_everything(fx: &Fixture) {
    fx.write(".gitignore", "something-else/\n");
    fx.write(".mcp.json", "{}\n");
    fx.write(".devcontainer/Dockerfile", "FROM scratch\n");
    fx.write(
        ".devcontainer/docker-compose.override.yml",
        "services:\n  demo:\n    privileged: true\n",
    );
    fx.write(
        ".devcontainer/extra.yml",
        "services:\n  helper:\n    privileged: true\n",
    );
    fs_err::remove_file(fx.path(".devcontainer/Dockerfile.local")).unwrap();
    fs_err::remove_file(fx.path("my-ca.pem")).unwrap();
    fs_err::remove_file(fx.path("aibox.lock")).unwrap();
}

#[test]
fn plan_ignores_changes_made_after_the_resolve() {
    let fx = project();
    let resolved = resolve(&fx.root, &offline()).unwrap();
    let before = rendered(&resolved);
    let planned = plan(&resolved).unwrap();
    let text = |path: &str| {
        planned
            .files
            .iter()
            .find(|f| f.path == path)
            .map(|f| String::from_utf8_lossy(&f.contents).into_owned())
            .unwrap_or_default()
    };
    assert!(text(".devcontainer/Dockerfile").contains("RUN echo local"));
    assert_eq!(
        text(".devcontainer/aibox-ca/extra-ca.crt"),
        aibox_test_support::http::test_ca_pem()
    );
    assert!(text(".mcp.json").contains("my-server"));
    change_everything(&fx);
    assert_eq!(rendered(&resolved), before);
    // Not vacuous: a new resolve sees the changes (and the gate refuses them).
    let again = resolve(&fx.root, &offline()).unwrap();
    assert!(plan(&again).is_err());
}

#[test]
fn plan_works_after_the_project_folder_is_gone() {
    let fx = project();
    let resolved = resolve(&fx.root, &offline()).unwrap();
    let before = rendered(&resolved);
    let moved = Utf8PathBuf::from(format!("{}-moved", fx.root));
    fs_err::rename(&fx.root, &moved).unwrap();
    let after = plan(&resolved).map(|p| format!("{p:#?}"));
    fs_err::rename(&moved, &fx.root).unwrap();
    assert_eq!(after.unwrap(), before);
}

#[test]
fn plan_works_in_an_unreadable_project_folder() {
    use std::os::unix::fs::PermissionsExt as _;
    let fx = project();
    let resolved = resolve(&fx.root, &offline()).unwrap();
    let before = rendered(&resolved);
    // As root this takes nothing away; the moved-folder test above covers that case.
    fs_err::set_permissions(&fx.root, std::fs::Permissions::from_mode(0o000)).unwrap();
    let after = plan(&resolved).map(|p| format!("{p:#?}"));
    fs_err::set_permissions(&fx.root, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(after.unwrap(), before);
}

#[test]
fn a_path_resolve_did_not_capture_is_an_internal_error() {
    let fx = Fixture::with(AIBOX_TOML);
    let resolved = resolve(&fx.root, &offline()).unwrap();
    let err = resolved
        .files
        .get(Utf8Path::new("not/captured.txt"))
        .unwrap_err();
    assert!(matches!(err, EngineError::NotCaptured { .. }), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Internal);
    assert!(err.to_string().contains("not/captured.txt"), "{err}");
    // What the plan sources read is captured, absent files included.
    let captured: Vec<&str> = resolved.files.paths().map(Utf8Path::as_str).collect();
    for path in [
        ".gitignore",
        ".devcontainer/Dockerfile.local",
        ".devcontainer/docker-compose.override.yml",
        ".mcp.json",
        ".codex/config.toml",
        ".aibox/mcp-ledger.json",
    ] {
        assert!(captured.contains(&path), "{path} in {captured:?}");
    }
    assert_eq!(
        resolved.files.get(Utf8Path::new(".gitignore")).unwrap(),
        None
    );
}

#[test]
fn a_symlinked_file_the_plan_reads_is_refused_at_resolve() {
    let fx = Fixture::new();
    fx.write("elsewhere", "target/\n");
    std::os::unix::fs::symlink(fx.path("elsewhere"), fx.path(".gitignore")).unwrap();
    let err = resolve(&fx.root, &offline()).unwrap_err();
    assert!(err.to_string().contains(".gitignore"), "{err}");
    assert_eq!(fx.read("elsewhere"), "target/\n");
}

#[test]
fn a_stale_resolve_never_overwrites_a_hand_edited_generated_file() {
    let fx = project();
    let resolved = resolve(&fx.root, &offline()).unwrap();
    let edited = format!("{}# mine\n", fx.read(".devcontainer/Dockerfile"));
    fx.write(".devcontainer/Dockerfile", &edited);
    let err = apply_resolved(&resolved, &ApplyOptions::default()).unwrap_err();
    assert!(matches!(err, EngineError::EditedFile { .. }), "{err:?}");
    assert_eq!(fx.read(".devcontainer/Dockerfile"), edited);
    // With --force the edit is backed up, not lost.
    let force = ApplyOptions {
        force: true,
        ..ApplyOptions::default()
    };
    apply_resolved(&resolved, &force).unwrap();
    let backups = common::walk(&fx.path(".aibox/backups"));
    assert!(
        backups
            .iter()
            .any(|b| fs_err::read_to_string(fx.path(".aibox/backups").join(b)).unwrap() == edited),
        "{backups:?}"
    );
}

#[test]
fn a_stale_resolve_keeps_lines_added_to_merged_files_since() {
    let fx = project();
    apply(&fx.root, &ApplyOptions::default()).unwrap();
    let resolved = resolve(&fx.root, &offline()).unwrap();
    let gitignore = format!("{}added-after-resolve/\n", fx.read(".gitignore"));
    fx.write(".gitignore", &gitignore);
    let mcp = fx.read(".mcp.json").replace("my-server", "my-newer-server");
    fx.write(".mcp.json", &mcp);
    apply_resolved(&resolved, &ApplyOptions::default()).unwrap();
    assert_eq!(fx.read(".gitignore"), gitignore);
    assert!(fx.read(".mcp.json").contains("my-newer-server"));
}

/// An unverified processkit release (a local folder with `allow_unverified`) is planned
/// as copies from the folder, and the policy gate scans those copies: `resolve` reads
/// their bytes, so the plan is the same after the release folder is gone.
#[test]
fn plan_works_after_an_unverified_release_folder_is_gone() {
    let (_t, root) = common::empty_project();
    let scratch = tempfile::tempdir().unwrap();
    let source = Utf8Path::from_path(scratch.path()).unwrap().join("pack");
    aibox_test_support::copy_dir(
        &aibox_test_support::workspace_root().join("examples/processkit-pack"),
        &source,
    );
    let mut toml = format!(
        "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\npackages = [\"product\"]\n\n\
         [processkit]\nsource = \"{source}\"\nversion = \"v0.1.0\"\nallow_unverified = true\n\n\
         [ai]\nharnesses = [\"claude\"]\n"
    );
    fs_err::write(root.join("aibox.toml"), &toml).unwrap();
    // Every skill of an unverified release is gated; record the consent its server needs.
    let err = apply(&root, &ApplyOptions::default()).unwrap_err();
    toml.push('\n');
    toml.push_str(&common::consent_from_refusal(&err, "skill-finder"));
    fs_err::write(root.join("aibox.toml"), &toml).unwrap();

    let resolved = resolve(&root, &offline()).unwrap();
    let planned = plan(&resolved).unwrap();
    let before = format!("{planned:#?}");
    // Not vacuous: the plan copies release files from the folder, and they are gated.
    let copies: Vec<_> = planned
        .files
        .iter()
        .filter_map(|f| f.copy_from.as_ref())
        .collect();
    assert!(!copies.is_empty(), "{before}");
    assert!(
        copies.iter().all(|c| c.path().starts_with(&source)),
        "{copies:?}"
    );
    let aibox_engine::ProcesskitState::Resolved(release) = &resolved.processkit else {
        panic!("not resolved: {:?}", resolved.processkit);
    };
    assert_eq!(
        release.release.verification,
        aibox_provenance::Verification::Unverified
    );

    fs_err::remove_dir_all(&source).unwrap();
    assert_eq!(rendered(&resolved), before);
    // A new resolve needs the folder.
    assert!(resolve(&root, &offline()).is_err());
}

/// A verified release is planned as copies from the download cache's unpacked store:
/// the plan is the same after the cache (and the archive it came from) is gone, and a
/// second later.
#[test]
fn plan_works_after_the_download_cache_is_gone() {
    let release =
        aibox_test_support::http::release::SyntheticRelease::processkit_like("v0.28.3", false);
    let (_a, archives) = common::empty_project();
    let (_c, cache) = common::empty_project();
    let (_p, root) = common::empty_project();
    fs_err::write(
        root.join("aibox.toml"),
        common::release_config(&archives, &release),
    )
    .unwrap();
    let options = PlanOptions {
        cache_dir: Some(cache.clone()),
        ..offline()
    };
    let resolved = resolve(&root, &options).unwrap();
    let before = rendered(&resolved);
    // Not vacuous: the plan copies release files out of the cache.
    assert!(
        plan(&resolved)
            .unwrap()
            .files
            .iter()
            .filter_map(|f| f.copy_from.as_ref())
            .any(|c| c.path().starts_with(&cache)),
        "{before}"
    );
    fs_err::remove_dir_all(&cache).unwrap();
    fs_err::remove_dir_all(&archives).unwrap();
    // Past the next second too: the install record's time is the resolve's, not a clock
    // read while planning.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(rendered(&resolved), before);
}

/// `apply` judges the policy gate once: resolve's capture takes what the gate's
/// traversal (`aibox_policy::gate_inputs`) reads without judging, and only the plan
/// judges. Counted on this thread, for a first apply, a no-op apply and a check.
#[test]
fn apply_judges_the_policy_gate_once() {
    let fx = Fixture::with(AIBOX_TOML);
    write_include(&fx);
    let check = ApplyOptions {
        check: true,
        ..ApplyOptions::default()
    };
    for (options, changes) in [
        (ApplyOptions::default(), true),
        (ApplyOptions::default(), false),
        (check, false),
    ] {
        let before = aibox_policy::plan_judgements();
        assert_eq!(apply(&fx.root, &options).unwrap().changed(), changes);
        assert_eq!(aibox_policy::plan_judgements() - before, 1);
    }
    let before = aibox_policy::plan_judgements();
    let resolved = resolve(&fx.root, &offline()).unwrap();
    assert_eq!(
        aibox_policy::plan_judgements() - before,
        0,
        "capture judged"
    );
    plan(&resolved).unwrap();
    assert_eq!(aibox_policy::plan_judgements() - before, 1);
}

/// Messy projects for the capture: nested and cyclic includes, an `extends` chain and
/// cycle, missing files, linked files and folders, a local feature, named
/// configurations listing several Compose files, a file over the size limit and one
/// that is not UTF-8. Each written into `fx` (the plan may refuse them; it never finds a
/// read the capture missed).
fn messy(fx: &Fixture) {
    fx.write(
        ".devcontainer/docker-compose.override.yml",
        "include:\n  - a.yml\n  - linked.yml\n  - big.yml\n  - latin1.yml\n  - path: sub/b.yml\n    project_directory: sub\nservices:\n  demo:\n    extends:\n      file: base/one.yml\n      service: one\n    volumes:\n      - ../data-link:/d\n      - ../data-link/../up:/u:ro\n    security_opt: [\"seccomp=.devcontainer/aibox-seccomp.json\"]\n",
    );
    fx.write(
        ".devcontainer/a.yml",
        "include: [sub/b.yml, missing.yml]\nservices:\n  a:\n    image: busybox\n    env_file: [../a.env]\n",
    );
    fx.write(
        ".devcontainer/sub/b.yml",
        "include: [../a.yml]\nservices:\n  b:\n    image: busybox\n    build:\n      context: ../../ctx-link\n",
    );
    fx.write(
        ".devcontainer/base/one.yml",
        "services:\n  one:\n    extends:\n      file: ../two.yml\n      service: two\n",
    );
    fx.write(
        ".devcontainer/two.yml",
        "services:\n  two:\n    extends:\n      file: base/one.yml\n      service: one\n    volumes: [\"./t:/t\"]\n",
    );
    fx.write(".devcontainer/real.yml", "services: {}\n");
    let mut big = "services:\n  big:\n    image: busybox\n".to_owned();
    while big.len() <= 1 << 20 {
        big.push_str("# padding padding padding padding padding padding padding\n");
    }
    fx.write(".devcontainer/big.yml", &big);
    fs_err::write(
        fx.path(".devcontainer/latin1.yml"),
        b"services:\n  caf\xe9:\n    volumes: [\"./d\xe9j\xe0:/x\"]\n",
    )
    .unwrap();
    fx.write(
        ".devcontainer/other/devcontainer.json",
        r#"{ "dockerComposeFile": ["compose.yml", "more/compose.yml", "../missing.yml"], "features": { "./feat": {}, "./gone": {} }, "mounts": ["source=${localWorkspaceFolder}/data-link,target=/m,type=bind"] }"#,
    );
    fx.write(
        ".devcontainer/other/compose.yml",
        "services:\n  other:\n    volumes: [\"../../data-link:/o\"]\n",
    );
    fx.write(
        ".devcontainer/other/more/compose.yml",
        "include: [../compose.yml]\n",
    );
    fx.write(
        ".devcontainer/other/feat/devcontainer-feature.json",
        r#"{ "id": "feat", "mounts": [{ "source": "${localWorkspaceFolder}/feat-data", "target": "/f", "type": "bind" }] }"#,
    );
    fx.write(
        ".devcontainer.json",
        r#"{ "runArgs": ["-v", "./data-link:/r"] }"#,
    );
    fx.write("data/file", "x\n");
    symlink_at(fx, "data", "data-link");
    symlink_at(fx, "/nowhere/at/all", "ctx-link");
    symlink_at(fx, "real.yml", ".devcontainer/linked.yml");
    symlink_at(fx, "other", ".devcontainer/other-link");
}

fn symlink_at(fx: &Fixture, target: &str, link: &str) {
    std::os::unix::fs::symlink(target, fx.path(link)).unwrap();
}

/// On messy projects, before the first apply and after it, planning never asks for a
/// file, host path or folder the capture did not take (`NotCaptured`), and the gate's
/// judgement never reads past its traversal (`Untraversed`): the plan either passes or
/// is refused by the gate's rules.
#[test]
fn the_capture_holds_everything_the_gate_reads_on_messy_projects() {
    for first in [true, false] {
        let fx = Fixture::with(AIBOX_TOML);
        if !first {
            apply(&fx.root, &ApplyOptions::default()).unwrap();
        }
        messy(&fx);
        let resolved = resolve(&fx.root, &offline()).unwrap();
        match plan(&resolved) {
            Ok(_) => {}
            Err(EngineError::Policy(e)) if matches!(*e, aibox_policy::PolicyError::Gate { .. }) => {
            }
            Err(other) => panic!("first apply {first}: {other:?}"),
        }
        match apply(&fx.root, &ApplyOptions::default()) {
            Ok(_) => {}
            Err(EngineError::Policy(e)) if matches!(*e, aibox_policy::PolicyError::Gate { .. }) => {
            }
            Err(other) => panic!("first apply {first}: {other:?}"),
        }
    }
}
