//! Non-destructive merges into JSON and JSONC harness files.
//!
//! The user's key order is kept (`serde_json`'s `preserve_order`): an entry aibox already
//! owns is replaced in place, new entries are appended in name order, owned entries no
//! longer wanted are removed with `shift_remove` so nothing else moves. When the merged
//! document equals the parsed original, the original text is returned byte for byte.
//!
//! Files may carry `//` and `/* */` comments and trailing commas (VS Code and Gemini CLI
//! read both). They are parsed with `jsonc-parser`, and an existing file is edited through
//! its concrete syntax tree: only the keys and array items that changed are touched, so
//! every comment and the user's formatting elsewhere survive.

use std::collections::BTreeSet;

use jsonc_parser::cst::{CstArray, CstInputValue, CstObject, CstRootNode};
use serde_json::{Map, Value};

use crate::McpError;

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
                let value: Value =
                    jsonc_parser::parse_to_serde_value(t, &aibox_config::jsonc::parse_options())
                        .map_err(|e| jsonc_error(path, t, &e))?;
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

    /// The value of entry `name` in the object at `keys`, if present.
    pub fn entry(&self, keys: &[&str], name: &str) -> Option<&Value> {
        let mut map = &self.root;
        for key in keys {
            map = map.get(*key)?.as_object()?;
        }
        map.get(name)
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

    /// The array at `keys` (the last key names it), created with its parents when
    /// `create`; `None` when absent and not created. Not an array: an error.
    fn array_mut(
        &mut self,
        keys: &[&str],
        create: bool,
    ) -> Result<Option<&mut Vec<Value>>, McpError> {
        let (last, parents) = keys.split_last().unwrap_or((&"", &[]));
        let path = self.path.clone();
        let Some(parent) = self.object_mut(parents, create)? else {
            return Ok(None);
        };
        if !parent.contains_key(*last) {
            if !create {
                return Ok(None);
            }
            parent.insert((*last).to_owned(), Value::Array(Vec::new()));
        }
        match parent.get_mut(*last) {
            Some(Value::Array(items)) => Ok(Some(items)),
            other => Err(McpError::Shape {
                path,
                key: keys.join("."),
                found: other.map_or("missing", |v| kind(v)),
                expected: "an array",
            }),
        }
    }

    /// Merges string items into the array at `keys` (the last key names the array).
    /// Returns the owned items.
    pub fn merge_list(
        &mut self,
        keys: &[&str],
        desired: &[String],
        previously_owned: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, McpError> {
        let Some(items) = self.array_mut(keys, !desired.is_empty())? else {
            return Ok(BTreeSet::new());
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

    /// The items of the array at `keys` (empty when absent or not an array).
    pub fn items_at(&self, keys: &[&str]) -> Vec<Value> {
        let mut value = self.root.get(keys[0]);
        for key in &keys[1..] {
            value = value.and_then(|v| v.get(*key));
        }
        value.and_then(Value::as_array).cloned().unwrap_or_default()
    }

    /// Merges whole items into the array at `keys` (the last key names the array): an
    /// item whose `id` was owned before is removed unless it is exactly a desired one,
    /// desired items not present are appended, every other item stays where it is. An
    /// array left empty is removed. Returns the owned ids.
    pub fn merge_items(
        &mut self,
        keys: &[&str],
        desired: &[Value],
        previously_owned: &BTreeSet<String>,
        id: impl Fn(&Value) -> Option<&str>,
    ) -> Result<BTreeSet<String>, McpError> {
        let Some(items) = self.array_mut(keys, !desired.is_empty())? else {
            return Ok(BTreeSet::new());
        };
        items
            .retain(|v| id(v).is_none_or(|i| !previously_owned.contains(i)) || desired.contains(v));
        for item in desired {
            if !items.contains(item) {
                items.push(item.clone());
            }
        }
        if items.is_empty() {
            let (last, parents) = keys.split_last().unwrap_or((&"", &[]));
            if let Some(parent) = self.object_mut(parents, false)? {
                parent.shift_remove(*last);
            }
        }
        Ok(desired
            .iter()
            .filter_map(|v| id(v).map(str::to_owned))
            .collect())
    }

    /// Removes the top-level object `key` when it is empty.
    pub fn drop_empty_object(&mut self, key: &str) {
        if self
            .root
            .get(key)
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            self.root.shift_remove(key);
        }
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
            if !text.trim().is_empty() {
                let body = text.strip_prefix('\u{feff}').unwrap_or(&text);
                let edited = edit_in_place(&self.path, body, &self.original, &merged)?;
                return Ok(Some(if bom {
                    format!("\u{feff}{edited}")
                } else {
                    edited
                }));
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

/// A parse error naming the file, line and column.
fn jsonc_error(path: &str, text: &str, e: &jsonc_parser::errors::ParseError) -> McpError {
    let (line, column) = (e.line_display(), e.column_display());
    McpError::parse(
        path,
        text,
        format!("{} at line {line} column {column}", e.kind()),
        line,
        column,
    )
}

/// Applies the difference between `original` and `merged` to the syntax tree of `text`,
/// keeping comments and formatting of everything that did not change.
fn edit_in_place(
    path: &str,
    text: &str,
    original: &Value,
    merged: &Value,
) -> Result<String, McpError> {
    let root = CstRootNode::parse(text, &aibox_config::jsonc::parse_options())
        .map_err(|e| jsonc_error(path, text, &e))?;
    let (Value::Object(old), Value::Object(new)) = (original, merged) else {
        return Err(McpError::Render {
            path: path.to_owned(),
            message: "the document root is not an object".to_owned(),
        });
    };
    sync_object(&root.object_value_or_set(), old, new);
    let mut out = root.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
}

/// Makes the CST object `obj` (parsed as `old`) hold `new`.
fn sync_object(obj: &CstObject, old: &Map<String, Value>, new: &Map<String, Value>) {
    for key in old.keys().filter(|k| !new.contains_key(*k)) {
        if let Some(prop) = obj.get(key) {
            prop.remove();
        }
    }
    for (key, value) in new {
        let Some(prop) = obj.get(key) else {
            obj.append(key, input(value));
            continue;
        };
        match (old.get(key), value) {
            (Some(o), v) if o == v => {}
            (Some(Value::Object(o)), Value::Object(n)) => match prop.object_value() {
                Some(child) => sync_object(&child, o, n),
                None => prop.set_value(input(value)),
            },
            (Some(Value::Array(o)), Value::Array(n)) => match prop.array_value() {
                Some(child) if sync_array(&child, o, n) => {}
                _ => prop.set_value(input(value)),
            },
            _ => prop.set_value(input(value)),
        }
    }
}

/// Edits the CST array `arr` (parsed as `old`) into `new` when `new` is `old` with some
/// items removed and others appended (how aibox merges lists); otherwise returns `false`
/// and leaves it alone.
fn sync_array(arr: &CstArray, old: &[Value], new: &[Value]) -> bool {
    let kept: Vec<&Value> = old.iter().filter(|v| new.contains(v)).collect();
    if kept.len() > new.len() || kept.iter().zip(new).any(|(k, n)| *k != n) {
        return false;
    }
    let elements = arr.elements();
    if elements.len() != old.len() {
        return false;
    }
    for (element, value) in elements.into_iter().zip(old) {
        if !new.contains(value) {
            element.remove();
        }
    }
    for value in &new[kept.len()..] {
        arr.append(input(value));
    }
    true
}

/// A `serde_json` value as `jsonc-parser` input.
fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(input).collect()),
        Value::Object(m) => {
            CstInputValue::Object(m.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
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
