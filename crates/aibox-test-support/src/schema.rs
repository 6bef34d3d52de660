//! Validation of generated files against the JSON schemas vendored in this crate's
//! `schemas/` folder.
//!
//! Every helper returns `Err` with readable messages both when the document is invalid
//! and when the schema itself cannot be read or compiled, so a broken or missing schema
//! fails the calling test instead of letting it pass silently.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use camino::{Utf8Path, Utf8PathBuf};
use jsonschema::{Draft, Validator};
use serde_json::Value;

/// Path of the devcontainer base schema (`devContainer.base.schema.json`).
pub fn devcontainer_schema_path() -> Utf8PathBuf {
    crate::schemas_dir().join("devcontainer/devContainer.base.schema.json")
}

/// Path of the Compose specification schema (`compose-spec.json`).
pub fn compose_schema_path() -> Utf8PathBuf {
    crate::schemas_dir().join("compose/compose-spec.json")
}

/// Validates `devcontainer.json` text (JSONC: `//` and `/* */` comments allowed)
/// against the devcontainer base schema.
pub fn validate_devcontainer_json(text: &str) -> Result<(), Vec<String>> {
    let value: Value =
        jsonc_parser::parse_to_serde_value(text, &jsonc_parser::ParseOptions::default())
            .map_err(|e| vec![format!("devcontainer.json is not valid JSON(C): {e}")])?;
    validate_json_against(&devcontainer_schema_path(), &value)
}

/// Validates Compose YAML text against the Compose specification schema (draft 7).
pub fn validate_compose_yaml(text: &str) -> Result<(), Vec<String>> {
    let value: Value = serde_norway::from_str(text)
        .map_err(|e| vec![format!("compose file is not valid YAML: {e}")])?;
    validate_json_against(&compose_schema_path(), &value)
}

/// Validates `instance` against the JSON schema at `schema_path`.
///
/// The draft is taken from the schema's `$schema` key (draft 4, 6, 7, 2019-09 and
/// 2020-12 are recognised, with or without a trailing `#`). Only local `#/...`
/// references are needed by the vendored schemas; nothing is fetched from the network.
/// Compiled validators are cached per path for the life of the test process.
pub fn validate_json_against(schema_path: &Utf8Path, instance: &Value) -> Result<(), Vec<String>> {
    let validator = compiled(schema_path).map_err(|e| vec![e])?;
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            format!("{at}: {e}")
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

type Cache = Mutex<HashMap<Utf8PathBuf, Arc<Validator>>>;

fn cache() -> &'static Cache {
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    CACHE.get_or_init(Cache::default)
}

fn compiled(schema_path: &Utf8Path) -> Result<Arc<Validator>, String> {
    if let Some(v) = cache()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(schema_path)
    {
        return Ok(Arc::clone(v));
    }
    let text = fs_err::read_to_string(schema_path)
        .map_err(|e| format!("cannot read schema {schema_path}: {e}"))?;
    let schema: Value = serde_json::from_str(&text)
        .map_err(|e| format!("schema {schema_path} is not valid JSON: {e}"))?;
    let mut options = jsonschema::options().offline();
    if let Some(draft) = schema
        .get("$schema")
        .and_then(Value::as_str)
        .and_then(draft_of)
    {
        options = options.with_draft(draft);
    }
    let validator = options
        .build(&schema)
        .map_err(|e| format!("schema {schema_path} does not compile: {e}"))?;
    let validator = Arc::new(validator);
    cache()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(schema_path.to_owned(), Arc::clone(&validator));
    Ok(validator)
}

/// Maps a `$schema` URI to a draft; `None` lets the validator decide.
fn draft_of(uri: &str) -> Option<Draft> {
    let uri = uri.trim_end_matches('#');
    [
        ("draft-04/schema", Draft::Draft4),
        ("draft-06/schema", Draft::Draft6),
        ("draft-07/schema", Draft::Draft7),
        ("draft/2019-09/schema", Draft::Draft201909),
        ("draft/2020-12/schema", Draft::Draft202012),
    ]
    .into_iter()
    .find_map(|(suffix, draft)| uri.ends_with(suffix).then_some(draft))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonc_comments_and_trailing_commas_are_read() {
        let text = "// head\n{\n  \"name\": \"http://x//y\", // tail\n  /* block\n * */ \"dockerComposeFile\": [\"a.yml\",],\n  \"service\": \"x\", \"workspaceFolder\": \"/w\",\n}\n";
        validate_devcontainer_json(text).unwrap();
    }

    #[test]
    fn vendored_schemas_live_in_the_repository_and_match_their_recorded_digests() {
        use sha2::Digest as _;
        let dir = crate::schemas_dir();
        assert!(dir.starts_with(crate::workspace_root()), "{dir}");
        let readme = fs_err::read_to_string(dir.join("README.md")).unwrap();
        for path in [
            devcontainer_schema_path(),
            compose_schema_path(),
            dir.join("claude-code/claude-code-settings.json"),
            dir.join("gemini-cli/settings.schema.json"),
        ] {
            let digest = hex::encode(sha2::Sha256::digest(fs_err::read(&path).unwrap()));
            let name = path.strip_prefix(&dir).unwrap().as_str();
            let row = readme
                .lines()
                .find(|l| l.starts_with(&format!("| `{name}`")))
                .unwrap_or_else(|| panic!("{name} has no row in schemas/README.md"));
            assert!(
                row.contains(&digest),
                "{name}: digest {digest} not in {row}"
            );
            let folder = path.parent().unwrap();
            assert!(
                fs_err::read_dir(folder).unwrap().any(|e| e
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("LICENSE")),
                "{folder} has no licence file"
            );
        }
    }

    #[test]
    fn minimal_compose_based_devcontainer_is_valid() {
        let text = r#"// generated
{ "name": "x", "dockerComposeFile": ["docker-compose.yml"], "service": "x",
  "workspaceFolder": "/workspace" }"#;
        validate_devcontainer_json(text).unwrap();
    }

    #[test]
    fn unknown_top_level_devcontainer_key_is_rejected() {
        let text = r#"{ "dockerComposeFile": ["a.yml"], "service": "x", "bogus": 1 }"#;
        let errors = validate_devcontainer_json(text).unwrap_err();
        assert!(errors.iter().any(|e| e.contains("bogus")), "{errors:?}");
    }

    #[test]
    fn run_args_in_compose_mode_is_rejected() {
        let text =
            r#"{ "dockerComposeFile": ["a.yml"], "service": "x", "runArgs": ["--privileged"] }"#;
        assert!(validate_devcontainer_json(text).is_err());
    }

    #[test]
    fn broken_jsonc_is_an_error() {
        let errors = validate_devcontainer_json("{ \"name\": ").unwrap_err();
        assert!(errors[0].contains("not valid JSON"), "{errors:?}");
    }

    #[test]
    fn compose_accepts_a_plain_service_and_rejects_typos() {
        validate_compose_yaml("services:\n  app:\n    image: x\n    init: true\n").unwrap();
        let errors =
            validate_compose_yaml("services:\n  app:\n    image: x\n    securityopt: [a]\n")
                .unwrap_err();
        assert!(
            errors.iter().any(|e| e.contains("securityopt")),
            "{errors:?}"
        );
    }

    #[test]
    fn broken_yaml_is_an_error() {
        assert!(validate_compose_yaml("services: [\n").is_err());
    }

    #[test]
    fn missing_schema_fails_instead_of_passing() {
        let errors = validate_json_against(Utf8Path::new("/nonexistent/schema.json"), &Value::Null)
            .unwrap_err();
        assert!(errors[0].contains("cannot read schema"), "{errors:?}");
    }

    #[test]
    fn drafts_are_recognised_with_and_without_hash() {
        assert_eq!(
            draft_of("https://json-schema.org/draft-07/schema"),
            Some(Draft::Draft7)
        );
        assert_eq!(
            draft_of("http://json-schema.org/draft-07/schema#"),
            Some(Draft::Draft7)
        );
        assert_eq!(
            draft_of("https://json-schema.org/draft/2019-09/schema"),
            Some(Draft::Draft201909)
        );
        assert_eq!(draft_of("https://example.invalid/custom"), None);
    }
}
