//! JSON Schema of both configuration files, generated from the model.
//!
//! The schema is the single source of truth for the shape of the files: the strict
//! loader walks it to find unknown keys, wrong types and bad enum values, and editors
//! can use the committed copies under `schema/` for completion.

use std::sync::LazyLock;

use schemars::schema_for;

use crate::model::{AiboxToml, LocalToml};

/// The JSON Schema (draft 2020-12) of `aibox.toml`.
pub fn aibox_toml_schema() -> serde_json::Value {
    schema_for!(AiboxToml).to_value()
}

/// The JSON Schema (draft 2020-12) of `.aibox-local.toml`.
pub fn local_toml_schema() -> serde_json::Value {
    schema_for!(LocalToml).to_value()
}

/// Cached copies for the loader, which walks the schema on every parse.
pub(crate) static AIBOX_SCHEMA: LazyLock<serde_json::Value> = LazyLock::new(aibox_toml_schema);
pub(crate) static LOCAL_SCHEMA: LazyLock<serde_json::Value> = LazyLock::new(local_toml_schema);

/// Pretty JSON text of a schema, exactly as committed under `schema/`.
pub fn render_schema(schema: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(schema).unwrap_or_default();
    text.push('\n');
    text
}
