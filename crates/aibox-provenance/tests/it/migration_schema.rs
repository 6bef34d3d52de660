//! The migration documents aibox writes are valid processkit `Migration` entities under
//! the schema the installed release itself ships: the flat schema of v0.28.x and the
//! generated schema of v1.0.0-alpha.1 (the real files, vendored with processkit's licence
//! in `tests/fixtures/processkit-schemas/`), with date-time formats checked the way
//! processkit's validator checks them. Each test upgrades a synthetic release carrying
//! the real schema files at their release paths, with a local edit that conflicts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::common;

use std::path::{Path, PathBuf};

use aibox_provenance::migration::{Document, Shape};
use aibox_test_support::http::release::SyntheticRelease;
use common::{Setup, install};
use serde_json::Value;

const CONFLICT: &str = "context/skills/processkit/skill-gate/SKILL.md";

fn fixtures(tag: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/processkit-schemas")
        .join(tag)
}

/// The release `version` with the real schema files of `tag` at their release paths;
/// `edit` changes the conflicting file upstream.
fn release_with_schemas(version: &str, tag: &str, edit: bool) -> SyntheticRelease {
    let mut r = SyntheticRelease::generate(version, edit);
    for rel in [
        "context/schemas/migration.yaml",
        "context/schemas/_generated/migration.yaml",
    ] {
        if let Ok(bytes) = fs_err::read(fixtures(tag).join(rel)) {
            r.files.insert(rel.to_owned(), (bytes, 0o644));
        }
    }
    if edit {
        // Still the same skill (its front matter intact), changed upstream.
        let (text, _) = r.files.get_mut(CONFLICT).unwrap();
        text.extend_from_slice(format!("\nChanged in {version}.\n").as_bytes());
    }
    r.restamp();
    r
}

/// The `spec.spec_schema` of a processkit Schema entity file.
fn spec_schema(path: &Path) -> Value {
    let text = fs_err::read_to_string(path).unwrap();
    let entity: Value = serde_norway::from_str(&text).unwrap();
    entity["spec"]["spec_schema"].clone()
}

/// Validation errors of `spec` under `schema`, formats checked (processkit registers its
/// own RFC 3339 `date-time` check).
fn errors(schema: &Value, spec: &Value) -> Vec<String> {
    let validator = jsonschema::options()
        .offline()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(schema)
        .unwrap();
    validator
        .iter_errors(spec)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Installs `tag`'s shape at v1, edits the conflicting file, upgrades to v2; returns the
/// document's text and the shape the plan chose.
fn upgrade(tag: &str) -> (String, Shape, tempfile::TempDir) {
    let project = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let root = project.path();
    let (v1, v2) = (
        release_with_schemas("v1.0.0", tag, false),
        release_with_schemas("v2.0.0", tag, true),
    );
    install(root, store.path(), &v1, &Setup::default());
    fs_err::write(root.join(CONFLICT), "my local gate\n").unwrap();
    let setup = Setup {
        now: "2026-06-01T10:00:00Z",
        ..Setup::default()
    };
    let plan = install(root, store.path(), &v2, &setup);
    let shape = Shape::of(&plan.payload);
    let doc = root.join("context/migrations/pending/MIG-20260601T100000.md");
    (fs_err::read_to_string(doc).unwrap(), shape, project)
}

fn spec_of(doc: &str) -> Value {
    let yaml = aibox_provenance::migration::front_matter(doc).unwrap();
    let entity: Value = serde_norway::from_str(yaml).unwrap();
    assert_eq!(entity["kind"], "Migration");
    assert_eq!(entity["apiVersion"], "processkit.projectious.work/v2");
    entity["spec"].clone()
}

#[test]
fn a_v0_28_document_is_valid_under_v0_28s_flat_schema() {
    let (doc, shape, _p) = upgrade("v0.28.3");
    assert_eq!(shape, Shape::Flat);
    let spec = spec_of(&doc);
    let flat = spec_schema(&fixtures("v0.28.3").join("context/schemas/migration.yaml"));
    assert_eq!(errors(&flat, &spec), Vec::<String>::new(), "{doc}");
    assert_eq!(spec["apply_mode"], "one-shot");
    assert_eq!(spec["generated_at"], "2026-06-01T10:00:00Z");

    // The same document is not valid under v1.0's generated schema: the validator
    // really checks the enum, so the shape must follow the release.
    let generated =
        spec_schema(&fixtures("v1.0.0-alpha.1").join("context/schemas/_generated/migration.yaml"));
    let e = errors(&generated, &spec);
    assert!(e.iter().any(|e| e.contains("/apply_mode")), "{e:?}");
}

#[test]
fn a_v1_0_document_is_valid_under_v1_0s_generated_schema() {
    let (doc, shape, _p) = upgrade("v1.0.0-alpha.1");
    assert_eq!(shape, Shape::Generated);
    let spec = spec_of(&doc);
    let generated =
        spec_schema(&fixtures("v1.0.0-alpha.1").join("context/schemas/_generated/migration.yaml"));
    assert_eq!(errors(&generated, &spec), Vec::<String>::new(), "{doc}");
    // Applied changes and a conflict kept for the user: both kinds of work.
    assert_eq!(spec["apply_mode"], "mixed");
    assert_eq!(spec["source_api_version"], "processkit.projectious.work/v2");
    assert_eq!(spec["target_api_version"], "processkit.projectious.work/v2");
    // Without the API versions (aibox's old shape) it would be refused.
    let mut old = spec.clone();
    for key in ["source_api_version", "target_api_version", "from_version"] {
        old.as_object_mut().unwrap().remove(key);
    }
    assert!(!errors(&generated, &old).is_empty());
}

#[test]
fn the_conflict_entry_records_the_three_digests_that_migrate_reads_back() {
    let (doc, _, p) = upgrade("v1.0.0-alpha.1");
    let parsed = Document::parse(&doc).unwrap();
    assert_eq!(parsed.id, "MIG-20260601T100000");
    assert_eq!(parsed.state, "pending");
    assert_eq!(parsed.from_version.as_deref(), Some("v1.0.0"));
    assert_eq!(parsed.to_version.as_deref(), Some("v2.0.0"));
    assert!(parsed.from_release.is_some());
    // AGENTS.md is the user's once installed: a new upstream version is a conflict too.
    let paths: Vec<&str> = parsed.conflicts.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["AGENTS.md", CONFLICT], "{doc}");
    let c = &parsed.conflicts[1];
    let sha = |b: &[u8]| aibox_provenance::Sha256::of(b);
    assert_eq!(c.local, Some(sha(b"my local gate\n")));
    let upstream_copy = p
        .path()
        .join("context/migrations/pending/MIG-20260601T100000.upstream")
        .join(CONFLICT);
    assert_eq!(c.upstream, Some(sha(&fs_err::read(upstream_copy).unwrap())));
    let base = release_with_schemas("v1.0.0", "v1.0.0-alpha.1", false);
    assert_eq!(c.base, Some(sha(&base.files[CONFLICT].0)));
}

#[test]
fn marking_applied_keeps_the_document_valid_and_the_rest_byte_for_byte() {
    let (doc, _, _p) = upgrade("v1.0.0-alpha.1");
    let applied = aibox_provenance::migration::mark_applied(&doc, "2026-06-02T09:00:00Z").unwrap();
    let spec = spec_of(&applied);
    assert_eq!(spec["state"], "applied");
    assert_eq!(spec["applied_at"], "2026-06-02T09:00:00Z");
    let generated =
        spec_schema(&fixtures("v1.0.0-alpha.1").join("context/schemas/_generated/migration.yaml"));
    assert_eq!(errors(&generated, &spec), Vec::<String>::new());
    let flat = spec_schema(&fixtures("v0.28.3").join("context/schemas/migration.yaml"));
    let (flat_doc, _, _q) = upgrade("v0.28.3");
    let flat_applied =
        aibox_provenance::migration::mark_applied(&flat_doc, "2026-06-02T09:00:00Z").unwrap();
    assert_eq!(errors(&flat, &spec_of(&flat_applied)), Vec::<String>::new());
    // Only the state line changed and one line was added.
    let diff: Vec<_> = doc.lines().filter(|l| !applied.contains(l)).collect();
    assert_eq!(diff, ["  state: pending"]);
    assert_eq!(applied.lines().count(), doc.lines().count() + 1);
    // A text without a state line is not guessed at.
    assert!(aibox_provenance::migration::mark_applied("---\na: 1\n---\n", "x").is_none());
    assert!(Document::parse("# no front matter\n").is_err());
    // Ids and paths name files aibox reads and writes: nothing that leaves its folder.
    let doc = |id: &str, path: &str| {
        format!(
            "---\nmetadata: {{id: {id}}}\nspec: {{state: pending, affected_files: [{{path: \"{path}\", classification: conflict}}]}}\n---\n"
        )
    };
    assert!(Document::parse(&doc("MIG-1", "context/a.md")).is_ok());
    assert!(Document::parse(&doc("MIG-../../x", "context/a.md")).is_err());
    assert!(Document::parse(&doc("notes", "context/a.md")).is_err());
    assert!(Document::parse(&doc("MIG-1", "../outside.md")).is_err());
    assert!(Document::parse(&doc("MIG-1", "/etc/passwd")).is_err());
    assert!(Document::parse("---\nmetadata: {id: MIG-1}\nspec: {state: pending, affected_files: [{path: a, classification: conflict, local_sha256: nothex}]}\n---\n").is_err());
}
