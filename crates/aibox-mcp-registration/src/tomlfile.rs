//! Non-destructive merges into TOML harness files (Codex), with `toml_edit` so that
//! comments, formatting and the order of everything aibox does not own survive.
//!
//! An owned table is refilled in place (its header comment and position stay); a new
//! table is appended after the last entry of its parent; an owned table that is no
//! longer wanted is removed.

use std::collections::BTreeSet;

use toml_edit::{DocumentMut, Item, Table};

use crate::McpError;
use crate::error::line_col;

/// A parsed TOML file.
pub(crate) struct TomlDoc {
    path: String,
    original_text: Option<String>,
    /// The document being edited.
    pub doc: DocumentMut,
}

impl TomlDoc {
    /// Parses `text` (absent = empty document). Errors name the file and position.
    pub fn parse(path: &str, text: Option<&str>) -> Result<Self, McpError> {
        let doc = match text {
            Some(t) => t.parse::<DocumentMut>().map_err(|e| {
                let offset = e.span().map_or(0, |s| s.start);
                let (line, column) = line_col(t, offset);
                let message = e.message().trim().to_owned();
                McpError::parse(path, t, message, line, column)
            })?,
            None => DocumentMut::new(),
        };
        Ok(Self {
            path: path.to_owned(),
            original_text: text.map(str::to_owned),
            doc,
        })
    }

    /// Keys of the table `parent` as they exist now.
    pub fn keys_at(&self, parent: &str) -> Vec<String> {
        self.doc
            .get(parent)
            .and_then(Item::as_table_like)
            .map(|t| t.iter().map(|(k, _)| k.to_owned()).collect())
            .unwrap_or_default()
    }

    /// The table `parent.name`, when the file holds one there.
    pub fn table_at(&self, parent: &str, name: &str) -> Option<&Table> {
        self.doc
            .get(parent)
            .and_then(Item::as_table_like)
            .and_then(|t| t.get(name))
            .and_then(Item::as_table)
    }

    /// Whether `parent.name` exists with other contents than `new` (formatting and
    /// comments aside): taking it over would change it.
    pub fn differs(&self, parent: &str, name: &str, new: &Table) -> bool {
        match self
            .doc
            .get(parent)
            .and_then(Item::as_table_like)
            .and_then(|t| t.get(name))
        {
            None | Some(Item::None) => false,
            Some(Item::Table(existing)) => !same_table(existing, new),
            Some(_) => true,
        }
    }

    /// The table `parent` (implicit, so no empty `[parent]` header is written).
    fn parent_mut(&mut self, parent: &str, create: bool) -> Result<Option<&mut Table>, McpError> {
        if !self.doc.contains_key(parent) {
            if !create {
                return Ok(None);
            }
            let mut t = Table::new();
            t.set_implicit(true);
            self.doc.insert(parent, Item::Table(t));
        }
        match self.doc.get_mut(parent) {
            Some(Item::Table(t)) => Ok(Some(t)),
            Some(other) => Err(McpError::Shape {
                path: self.path.clone(),
                key: parent.to_owned(),
                found: if other.is_inline_table() {
                    "an inline table"
                } else {
                    "not a table"
                },
                expected: "a table (`[parent.name]` sections)",
            }),
            None => Ok(None),
        }
    }

    /// Merges tables under `parent` (for example `mcp_servers`). Returns owned names.
    pub fn merge_tables(
        &mut self,
        parent: &str,
        desired: Vec<(String, Table)>,
        previously_owned: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, McpError> {
        let path = self.path.clone();
        let Some(table) = self.parent_mut(parent, !desired.is_empty())? else {
            return Ok(BTreeSet::new());
        };
        let wanted: BTreeSet<&str> = desired.iter().map(|(k, _)| k.as_str()).collect();
        for key in previously_owned {
            if !wanted.contains(key.as_str()) {
                table.remove(key);
            }
        }
        let mut desired = desired;
        desired.sort_by(|a, b| a.0.cmp(&b.0));
        let mut owned = BTreeSet::new();
        for (name, new) in desired {
            owned.insert(name.clone());
            match table.get_mut(&name) {
                Some(Item::Table(existing)) => {
                    if !same_table(existing, &new) {
                        existing.clear();
                        for (k, v) in new {
                            existing.insert(&k, v);
                        }
                    }
                }
                Some(Item::None) | None => {
                    table.insert(&name, Item::Table(new));
                }
                Some(_) => {
                    return Err(McpError::Shape {
                        path,
                        key: format!("{parent}.{name}"),
                        found: "not a table",
                        expected: "a table",
                    });
                }
            }
        }
        Ok(owned)
    }

    /// Sets `key = value` in the table `parent.name` (created when missing), or removes
    /// the key (and the table when it becomes empty) when `value` is `None`.
    pub fn set_nested(
        &mut self,
        parent: &str,
        name: &str,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), McpError> {
        let path = self.path.clone();
        let Some(table) = self.parent_mut(parent, value.is_some())? else {
            return Ok(());
        };
        if !table.contains_key(name) {
            if value.is_none() {
                return Ok(());
            }
            table.insert(name, Item::Table(Table::new()));
        }
        let Some(Item::Table(inner)) = table.get_mut(name) else {
            return Err(McpError::Shape {
                path,
                key: format!("{parent}.\"{name}\""),
                found: "not a table",
                expected: "a table",
            });
        };
        if let Some(v) = value {
            if inner.get(key).and_then(Item::as_str) != Some(v) {
                inner.insert(key, toml_edit::value(v));
            }
        } else {
            inner.remove(key);
            if inner.is_empty() {
                table.remove(name);
            }
        }
        Ok(())
    }

    /// The merged text; `None` when the file does not exist and stays empty.
    pub fn render(self) -> Option<String> {
        let text = self.doc.to_string();
        match self.original_text {
            Some(orig) if orig == text => Some(orig),
            None if text.trim().is_empty() => None,
            _ => Some(text),
        }
    }
}

/// Same keys and the same values, ignoring formatting and comments (nested tables such
/// as `[mcp_servers.x.env]` compared the same way).
fn same_table(a: &Table, b: &Table) -> bool {
    norm_table(a) == norm_table(b)
}

fn norm_table(t: &Table) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = t
        .iter()
        .map(|(k, v)| {
            let text = match v {
                Item::Value(val) => {
                    let mut val = val.clone();
                    val.decor_mut().clear();
                    match val.as_inline_table_mut() {
                        // An inline `env = { … }` and an `[x.env]` section hold the same.
                        Some(inline) => format!("{:?}", norm_table(&inline.clone().into_table())),
                        None => val.to_string(),
                    }
                }
                Item::Table(inner) => format!("{:?}", norm_table(inner)),
                other => other.to_string(),
            };
            (k.to_owned(), text)
        })
        .collect();
    out.sort();
    out
}
