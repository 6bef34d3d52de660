//! A release built like processkit's own (framed tier files, 146 skills in 7 categories,
//! MCP manifest with canonical-JSON digests, PEP 723 servers launched with `uv run`):
//! it parses, installs, re-applies as a no-op, and a config that differs from its
//! manifest digest is refused with the file named.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::common;

use aibox_provenance::ProvenanceError;
use aibox_test_support::http::release::SyntheticRelease;
use common::{Setup, install, plan};

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

#[test]
fn the_release_has_the_real_shape() {
    let r = SyntheticRelease::processkit_like("v0.28.3", false);
    let skills: Vec<&String> = r
        .files
        .keys()
        .filter(|k| k.ends_with("/SKILL.md"))
        .collect();
    assert_eq!(skills.len(), 146);
    let categories: std::collections::BTreeSet<&str> = skills
        .iter()
        .map(|k| k.split('/').nth(2).unwrap())
        .collect();
    assert_eq!(categories.len(), 7, "{categories:?}");
    // About 860 files from the source tree, plus LICENSE, CHANGELOG.md, PROVENANCE.toml.
    assert!((840..=900).contains(&r.files.len()), "{}", r.files.len());
    // About 5 MB, as the real release (10 MB installed with its snapshot): SKILL.md files
    // of several KB, larger references, a few assets of 100-250 KB.
    let bytes: usize = r.files.values().map(|(d, _)| d.len()).sum();
    assert!((4_500_000..=5_500_000).contains(&bytes), "{bytes}");
    let skill_md = r.files["context/skills/processkit/event-log/SKILL.md"]
        .0
        .len();
    assert!((4_000..=13_000).contains(&skill_md), "{skill_md}");
    let tier = String::from_utf8(r.files[".processkit/packages/managed.yaml"].0.clone()).unwrap();
    assert!(
        tier.starts_with("---\n") && tier.ends_with("\n---\n"),
        "{tier}"
    );
    let configs = r
        .files
        .keys()
        .filter(|k| k.ends_with("/mcp/mcp-config.json"))
        .count();
    assert_eq!(configs, 28);
    let core = r
        .files
        .values()
        .filter(|(d, _)| String::from_utf8_lossy(d).contains("\n    core: true\n"))
        .count();
    assert_eq!(core, 3);
}

#[test]
#[allow(clippy::cast_precision_loss)] // a ratio of sizes
fn the_scaled_release_grows_files_and_bytes_linearly() {
    let size = |r: &SyntheticRelease| -> (usize, usize) {
        (r.files.len(), r.files.values().map(|(d, _)| d.len()).sum())
    };
    let (files, bytes) = size(&SyntheticRelease::processkit_like("v0.28.3", false));
    let scaled = SyntheticRelease::processkit_like_scaled("v0.28.3", false, 3);
    let (files3, bytes3) = size(&scaled);
    // LICENSE, CHANGELOG.md and PROVENANCE.toml are not copied; every other file is.
    assert_eq!(files3, 3 * files - 6, "{files} -> {files3}");
    let ratio = bytes3 as f64 / bytes as f64;
    assert!((2.95..=3.05).contains(&ratio), "{bytes} -> {bytes3}");
    // The copies add no skill, server or tier: the catalog is the real shape's.
    let count =
        |r: &SyntheticRelease, suffix: &str| r.files.keys().filter(|k| k.ends_with(suffix)).count();
    assert_eq!(count(&scaled, "/SKILL.md"), 146);
    assert_eq!(count(&scaled, "/mcp/mcp-config.json"), 28);
    assert_eq!(
        scaled
            .files
            .keys()
            .filter(|k| k.starts_with(".processkit/packages/"))
            .count(),
        6
    );
}

#[test]
fn installs_registers_every_server_and_reapplies_as_a_no_op() {
    let (project, store) = dirs();
    let v1 = SyntheticRelease::processkit_like("v0.28.3", false);
    let setup = Setup {
        prefer_gateway: false,
        ..Setup::default()
    };
    let p = install(project.path(), store.path(), &v1, &setup);
    // Every per-skill config of the selection, exactly as shipped: `uv run <script>`.
    assert_eq!(p.servers.len(), 27, "{:?}", p.servers);
    let wm = p
        .servers
        .iter()
        .find(|s| s.name == "processkit-workitem-management")
        .unwrap();
    assert_eq!(wm.command, "uv");
    assert_eq!(
        wm.args,
        [
            "run",
            "context/skills/processkit/workitem-management/mcp/server.py"
        ]
    );
    // The stale header digest is a warning, not a refusal.
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("PEP 723 header digest")),
        "{:?}",
        p.warnings
    );
    assert!(p.mcp_aggregate_sha256.is_some());
    let again = plan(project.path(), store.path(), &v1, &setup).unwrap();
    assert!(again.is_noop(), "{:?}", again.writes.first());
    let report = aibox_provenance::integrity(project.path()).unwrap();
    assert_eq!(report.exit_code(), 0, "{report:?}");

    // Gateway mode registers only the gateway, as its shipped config says.
    let gw = plan(project.path(), store.path(), &v1, &Setup::default()).unwrap();
    assert_eq!(gw.servers.len(), 1);
    assert_eq!(gw.servers[0].args[..2], ["run", "--script"]);
    assert_eq!(gw.servers[0].env["PROCESSKIT_MCP_MODE"], "gateway");
}

#[test]
fn a_config_that_differs_from_its_manifest_digest_is_refused() {
    let (project, store) = dirs();
    let path = "context/skills/processkit/event-log/mcp/mcp-config.json";

    // Reformatting is not a change: the manifest hashes canonical JSON.
    let mut v1 = SyntheticRelease::processkit_like("v0.28.3", false);
    let text = String::from_utf8(v1.files[path].0.clone()).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    v1.files.get_mut(path).unwrap().0 = serde_json::to_vec(&value).unwrap();
    v1.restamp();
    plan(project.path(), store.path(), &v1, &Setup::default()).unwrap();

    // A changed argument is.
    v1.files.get_mut(path).unwrap().0 = text
        .replace("\"run\"", "\"run\", \"--with\", \"evil\"")
        .into_bytes();
    v1.restamp();
    let err = plan(project.path(), store.path(), &v1, &Setup::default()).unwrap_err();
    let ProvenanceError::McpManifest { problems } = &err else {
        panic!("{err}")
    };
    assert!(problems.iter().any(|p| p.contains(path)), "{problems:?}");
    assert!(
        problems.iter().any(|p| p.contains("aggregate_sha256")),
        "{problems:?}"
    );
    assert!(
        !project.path().join("context").exists(),
        "nothing is written"
    );
}

#[test]
fn upgrade_keeps_local_edits_and_writes_the_migration_document() {
    let (project, store) = dirs();
    let v1 = SyntheticRelease::processkit_like("v0.28.3", false);
    let v2 = SyntheticRelease::processkit_like("v0.29.0", true);
    install(project.path(), store.path(), &v1, &Setup::default());
    let root = project.path();
    // An edit to a file that also changed upstream, and one to a file that did not.
    let conflict = "context/skills/processkit/workitem-management/SKILL.md";
    let local = "context/skills/processkit/event-log/SKILL.md";
    for f in [conflict, local] {
        let mut text = fs_err::read_to_string(root.join(f)).unwrap();
        text.push_str("\nLocal note.\n");
        fs_err::write(root.join(f), text).unwrap();
    }
    let p = install(root, store.path(), &v2, &Setup::default());
    for f in [conflict, local] {
        assert!(
            fs_err::read_to_string(root.join(f))
                .unwrap()
                .ends_with("\nLocal note.\n"),
            "{f} lost its edit"
        );
    }
    let docs: Vec<_> = fs_err::read_dir(root.join("context/migrations/pending"))
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            e.file_name()
                .to_string_lossy()
                .ends_with(".md")
                .then(|| e.path())
        })
        .collect();
    assert_eq!(docs.len(), 1);
    let doc = fs_err::read_to_string(&docs[0]).unwrap();
    assert!(doc.contains(conflict), "{doc}");
    assert!(doc.contains("conflict"), "{doc}");
    // The new skill arrived through the changed tier file; the removed one is gone.
    assert!(p.skills.contains("observability-patterns"));
    assert!(
        root.join("context/skills/engineering/observability-patterns/SKILL.md")
            .is_file()
    );
    assert!(p.mcp_aggregate_sha256.is_some(), "manifest re-verified");
}

#[test]
fn a_tier_file_with_two_documents_is_refused_with_its_name() {
    let (project, store) = dirs();
    let mut v1 = SyntheticRelease::processkit_like("v0.28.3", false);
    let tier = ".processkit/packages/research.yaml";
    let mut text = String::from_utf8(v1.files[tier].0.clone()).unwrap();
    text.push_str("apiVersion: processkit.projectious.work/v1\nkind: Package\n");
    v1.files.get_mut(tier).unwrap().0 = text.into_bytes();
    v1.restamp();
    let err = plan(project.path(), store.path(), &v1, &Setup::default()).unwrap_err();
    let shown = err.to_string();
    assert!(shown.contains(tier), "{shown}");
    assert!(
        shown.contains("more than one non-empty YAML document"),
        "{shown}"
    );
}

#[test]
fn crlf_tier_files_and_a_stale_provenance_stamp_still_install() {
    let (project, store) = dirs();
    let mut v1 = SyntheticRelease::processkit_like("v0.28.3", false);
    for (path, (data, _)) in &mut v1.files {
        if path.starts_with(".processkit/packages/") && !path.ends_with("INDEX.md") {
            *data = String::from_utf8_lossy(data)
                .replace('\n', "\r\n")
                .into_bytes();
        }
    }
    v1.restamp();
    let prov = String::from_utf8(v1.files["PROVENANCE.toml"].0.clone()).unwrap();
    v1.files.get_mut("PROVENANCE.toml").unwrap().0 = prov
        .replace(
            "generated_for_tag = \"v0.28.3\"",
            "generated_for_tag = \"v0.28.2\"",
        )
        .into_bytes();
    let p = plan(project.path(), store.path(), &v1, &Setup::default()).unwrap();
    assert!(p.skills.contains("workitem-management"));
    assert!(
        p.warnings.iter().any(|w| w.contains("generated_for_tag")),
        "{:?}",
        p.warnings
    );
}
