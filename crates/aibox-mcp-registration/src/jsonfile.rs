//! Non-destructive merges into JSON harness files.
//!
//! The user's key order is kept (`serde_json`'s `preserve_order`): an entry aibox already
//! owns is replaced in place, new entries are appended in name order, owned entries no
//! longer wanted are removed with `shift_remove` so nothing else moves. When the merged
//! document equals the parsed original, the original text is returned byte for byte.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::McpError;
use crate::error::line_col;

/// A parsed JSON object file.
pub(crate) struct JsonDoc {
    path: String,
    original_text: Option<String>,
    original: Value,
    /// The document being edited.
    pub root: Map<String, Value>,
}

impl JsonDoc {
    /// Parses `text` (absent or blank = empty object). Errors name the file and position.
    pub fn parse(path: &str, text: Option<&str>) -> Result<Self, McpError> {
        // Editors on Windows may start the file with a UTF-8 byte order mark; JSON
        // parsers refuse it, harnesses read past it. Kept on write (see `render`).
        let parsed = text.map(|t| t.strip_prefix('\u{feff}').unwrap_or(t));
        let root = match parsed {
            Some(t) if !t.trim().is_empty() => {
                let value: Value = serde_json::from_str(t).map_err(|e| {
                    let (line, column) = if e.line() == 0 {
                        line_col(t, t.len())
                    } else {
                        (e.line(), e.column())
                    };
                    McpError::parse(path, t, e.to_string(), line, column)
                })?;
                match value {
                    Value::Object(map) => map,
                    other => {
                        return Err(McpError::Shape {
                            path: path.to_owned(),
                            key: "(root)".to_owned(),
                            found: kind(&other),
                            expected: "an object",
                        });
                    }
                }
            }
            _ => Map::new(),
        };
        Ok(Self {
            path: path.to_owned(),
            original_text: text.map(str::to_owned),
            original: Value::Object(root.clone()),
            root,
        })
    }

    /// The object at `keys` (dotted path for errors); created only when `create`.
    pub fn object_mut(
        &mut self,
        keys: &[&str],
        create: bool,
    ) -> Result<Option<&mut Map<String, Value>>, McpError> {
        let mut map = &mut self.root;
        for (i, key) in keys.iter().enumerate() {
            if !map.contains_key(*key) {
                if !create {
                    return Ok(None);
                }
                map.insert((*key).to_owned(), Value::Object(Map::new()));
            }
            match map.get_mut(*key) {
                Some(Value::Object(m)) => map = m,
                Some(other) => {
                    return Err(McpError::Shape {
                        path: self.path.clone(),
                        key: keys[..=i].join("."),
                        found: kind(other),
                        expected: "an object",
                    });
                }
                None => return Ok(None),
            }
        }
        Ok(Some(map))
    }

    /// Existing keys of the object at `keys` (empty when absent or not an object).
    pub fn keys_at(&self, keys: &[&str]) -> Vec<String> {
        let mut value = Some(&self.original);
        for key in keys {
            value = value.and_then(|v| v.get(*key));
        }
        match value {
            Some(Value::Object(m)) => m.keys().cloned().collect(),
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Merges named entries into the object at `keys`. Returns the owned keys.
    pub fn merge_entries(
        &mut self,
        keys: &[&str],
        desired: Vec<(String, Value)>,
        previously_owned: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, McpError> {
        let create = !desired.is_empty();
        let Some(map) = self.object_mut(keys, create)? else {
            return Ok(BTreeSet::new());
        };
        let wanted: BTreeSet<&str> = desired.iter().map(|(k, _)| k.as_str()).collect();
        for key in previously_owned {
            if !wanted.contains(key.as_str()) {
                map.shift_remove(key);
            }
        }
        let mut owned = BTreeSet::new();
        let mut desired = desired;
        desired.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, value) in desired {
            owned.insert(key.clone());
            if let Some(slot) = map.get_mut(&key) {
                *slot = value;
            } else {
                map.insert(key, value);
            }
        }
        Ok(owned)
    }

    /// Merges string items into the array at `keys` (the last key names the array).
    /// Returns the owned items.
    pub fn merge_list(
        &mut self,
        keys: &[&str],
        desired: &[String],
        previously_owned: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, McpError> {
        let (last, parents) = keys.split_last().unwrap_or((&"", &[]));
        let path = self.path.clone();
        let Some(parent) = self.object_mut(parents, !desired.is_empty())? else {
            return Ok(BTreeSet::new());
        };
        if !parent.contains_key(*last) {
            if desired.is_empty() {
                return Ok(BTreeSet::new());
            }
            parent.insert((*last).to_owned(), Value::Array(Vec::new()));
        }
        let Some(Value::Array(items)) = parent.get_mut(*last) else {
            return Err(McpError::Shape {
                path,
                key: keys.join("."),
                found: parent.get(*last).map_or("missing", kind),
                expected: "an array",
            });
        };
        let wanted: BTreeSet<&str> = desired.iter().map(String::as_str).collect();
        items.retain(|v| {
            v.as_str()
                .is_none_or(|s| wanted.contains(s) || !previously_owned.contains(s))
        });
        for item in desired {
            if !items.iter().any(|v| v.as_str() == Some(item)) {
                items.push(Value::String(item.clone()));
            }
        }
        Ok(desired.iter().cloned().collect())
    }

    /// The merged text; the original text when nothing changed; `None` when the file
    /// does not exist and nothing would be written.
    pub fn render(self) -> Result<Option<String>, McpError> {
        let merged = Value::Object(self.root);
        let bom = self
            .original_text
            .as_deref()
            .is_some_and(|t| t.starts_with('\u{feff}'));
        if let Some(text) = self.original_text {
            if merged == self.original {
                return Ok(Some(text));
            }
        } else if merged.as_object().is_some_and(Map::is_empty) {
            return Ok(None);
        }
        let mut text = serde_json::to_string_pretty(&merged).map_err(|e| McpError::Render {
            path: self.path,
            message: e.to_string(),
        })?;
        text.push('\n');
        if bom {
            text.insert(0, '\u{feff}');
        }
        Ok(Some(text))
    }
}

/// A word for the JSON type of `v`, for error messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
