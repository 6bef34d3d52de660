//! The ownership ledger: which entries aibox wrote into which harness file last time.
//!
//! Stored as `.aibox/mcp-ledger.json` (the whole `.aibox/` folder is gitignored local
//! state), so personal server names never reach a committed file, and no marker key
//! is ever added inside a harness file. Layout:
//!
//! ```json
//! { "version": 1,
//!   "files": { ".mcp.json": { "mcpServers": ["docs", "issues"] },
//!              ".claude/settings.json": { "enabledMcpjsonServers": ["docs"],
//!                                         "permissions.allow": ["mcp__docs__*"] } } }
//! ```
//!
//! Each file maps a *slot* (the map or list aibox merges into) to the keys or items it
//! owns there. The next apply removes owned entries that are no longer wanted and
//! leaves everything else alone. When the ledger is missing (a fresh clone), only
//! recomputable `processkit-*` entries are treated as owned.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::McpError;

/// Root-relative path of the ledger.
pub const LEDGER_PATH: &str = ".aibox/mcp-ledger.json";

const VERSION: u32 = 1;

/// What aibox owns in each harness file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    /// Format version (1).
    pub version: u32,
    /// File path → slot → owned keys or items.
    pub files: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// File path → `slot/name` → SHA-256 of the entry as aibox last wrote it (canonical
    /// form), to tell a hand edit inside an owned entry from aibox's own writing.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub entries: BTreeMap<String, BTreeMap<String, String>>,
    /// Configured servers the last `apply` left out of every harness file, name → why
    /// (a team server whose npm package does not exist): `aibox mcp list` reads the
    /// registration from here, not from the configuration.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_registered: BTreeMap<String, String>,
}

impl Ledger {
    /// An empty ledger of the current version.
    pub fn new() -> Self {
        Self {
            version: VERSION,
            files: BTreeMap::new(),
            entries: BTreeMap::new(),
            not_registered: BTreeMap::new(),
        }
    }

    /// Parses ledger text; an unknown version or shape is an error.
    pub fn parse(text: &str) -> Result<Self, McpError> {
        let ledger: Self = serde_json::from_str(text).map_err(|e| McpError::Ledger {
            path: LEDGER_PATH.to_owned(),
            message: e.to_string(),
        })?;
        if ledger.version != VERSION {
            return Err(McpError::Ledger {
                path: LEDGER_PATH.to_owned(),
                message: format!(
                    "unsupported version {} (expected {VERSION})",
                    ledger.version
                ),
            });
        }
        Ok(ledger)
    }

    /// Deterministic JSON text (sorted keys, trailing newline).
    pub fn render(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The keys owned in `slot` of `file`.
    pub fn owned(&self, file: &str, slot: &str) -> Option<&BTreeSet<String>> {
        self.files.get(file).and_then(|f| f.get(slot))
    }

    /// Records the keys owned in `slot` of `file` (an empty set removes the slot).
    pub fn set(&mut self, file: &str, slot: &str, keys: BTreeSet<String>) {
        let entry = self.files.entry(file.to_owned()).or_default();
        if keys.is_empty() {
            entry.remove(slot);
        } else {
            entry.insert(slot.to_owned(), keys);
        }
        if entry.is_empty() {
            self.files.remove(file);
        }
    }

    /// The digest recorded for entry `name` of `slot` in `file`, if any.
    pub fn entry_digest(&self, file: &str, slot: &str, name: &str) -> Option<&str> {
        self.entries
            .get(file)?
            .get(&format!("{slot}/{name}"))
            .map(String::as_str)
    }

    /// Records the digests of the entries of `slot` in `file` (replacing that slot's).
    pub fn set_entry_digests(&mut self, file: &str, slot: &str, digests: BTreeMap<String, String>) {
        let entry = self.entries.entry(file.to_owned()).or_default();
        let prefix = format!("{slot}/");
        entry.retain(|k, _| !k.starts_with(&prefix));
        entry.extend(
            digests
                .into_iter()
                .map(|(name, d)| (format!("{prefix}{name}"), d)),
        );
        if entry.is_empty() {
            self.entries.remove(file);
        }
    }

    /// Every file that has owned entries.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }
}

/// What to treat as previously owned: the ledger's record, or without a ledger only
/// the entries `fallback` recognises as recomputable (processkit's).
pub(crate) fn previously_owned(
    ledger: Option<&Ledger>,
    file: &str,
    slot: &str,
    existing: impl Iterator<Item = String>,
    fallback: impl Fn(&str) -> bool,
) -> BTreeSet<String> {
    match ledger {
        Some(l) => l.owned(file, slot).cloned().unwrap_or_default(),
        None => existing.filter(|k| fallback(k)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_drops_empty_slots() {
        let mut l = Ledger::new();
        l.set(
            ".mcp.json",
            "mcpServers",
            ["b".to_owned(), "a".to_owned()].into(),
        );
        l.set(".x", "y", BTreeSet::new());
        let text = l.render();
        assert_eq!(Ledger::parse(&text).unwrap(), l);
        assert!(!text.contains(".x"));
        l.set(".mcp.json", "mcpServers", BTreeSet::new());
        assert!(l.files.is_empty());
    }

    #[test]
    fn corrupt_or_future_ledgers_are_errors() {
        assert!(matches!(Ledger::parse("{"), Err(McpError::Ledger { .. })));
        assert!(matches!(
            Ledger::parse(r#"{"version": 9, "files": {}}"#),
            Err(McpError::Ledger { .. })
        ));
    }
}
