//! The committed JSON Schemas match the model, and fixtures agree with both the
//! strict loader and the schema.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aibox_config::schema::{aibox_toml_schema, local_toml_schema, render_schema};
use camino::Utf8PathBuf;

fn crate_dir() -> Utf8PathBuf {
    Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn check_drift(file: &str, schema: &serde_json::Value) {
    let path = crate_dir().join("schema").join(file);
    let fresh = render_schema(schema);
    if std::env::var_os("AIBOX_UPDATE_SCHEMA").is_some() {
        fs_err::write(&path, &fresh).unwrap();
        return;
    }
    let committed = fs_err::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{path} is out of date with the model in src/model.rs.\n\
         Regenerate it with `AIBOX_UPDATE_SCHEMA=1 cargo test -p aibox-config --test it -- schema::` \
         and commit the result."
    );
}

#[test]
fn aibox_schema_is_committed_and_current() {
    check_drift("aibox.schema.json", &aibox_toml_schema());
}

#[test]
fn local_schema_is_committed_and_current() {
    check_drift("aibox-local.schema.json", &local_toml_schema());
}

fn fixtures(kind: &str) -> Vec<Utf8PathBuf> {
    let dir = crate_dir().join("tests/fixtures").join(kind);
    let mut files: Vec<Utf8PathBuf> = fs_err::read_dir(&dir)
        .unwrap()
        .map(|e| Utf8PathBuf::from_path_buf(e.unwrap().path()).unwrap())
        .filter(|p| p.extension() == Some("toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "expected fixtures in {dir}");
    files
}

fn is_local(path: &Utf8PathBuf) -> bool {
    path.as_str().ends_with(".aibox-local.toml")
}

/// Loads with the strict loader; `Ok` when accepted.
fn strict(path: &Utf8PathBuf) -> Result<(), String> {
    let text = fs_err::read_to_string(path).unwrap();
    let r = if is_local(path) {
        aibox_config::parse_local_toml(&text, path.as_str()).map(|_| ())
    } else {
        aibox_config::parse_aibox_toml(&text, path.as_str()).map(|_| ())
    };
    r.map_err(|e| aibox_config::render_plain(&e, 100))
}

/// Validates against the generated JSON Schema; `Ok` when valid.
fn schema_valid(path: &Utf8PathBuf) -> Result<(), String> {
    let text = fs_err::read_to_string(path).unwrap();
    let instance: serde_json::Value = toml::from_str(&text).unwrap();
    let schema = if is_local(path) {
        local_toml_schema()
    } else {
        aibox_toml_schema()
    };
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| e.to_string())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

#[test]
fn valid_fixtures_pass_loader_and_schema() {
    for path in fixtures("valid") {
        if let Err(e) = strict(&path) {
            panic!("{path} was rejected by the loader:\n{e}");
        }
        if let Err(e) = schema_valid(&path) {
            panic!("{path} was rejected by the JSON Schema:\n{e}");
        }
    }
}

#[test]
fn invalid_fixtures_fail_loader_and_schema() {
    for path in fixtures("invalid") {
        assert!(strict(&path).is_err(), "{path} was accepted by the loader");
        assert!(
            schema_valid(&path).is_err(),
            "{path} was accepted by the JSON Schema"
        );
    }
}

#[test]
fn committed_schema_files_are_valid_json_schemas() {
    for file in ["aibox.schema.json", "aibox-local.schema.json"] {
        let text = fs_err::read_to_string(crate_dir().join("schema").join(file)).unwrap();
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        jsonschema::validator_for(&schema).unwrap();
    }
}
