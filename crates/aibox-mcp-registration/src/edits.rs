//! Hand edits inside the entries aibox registers.
//!
//! The ledger keeps, per entry aibox owns, the SHA-256 of the entry as aibox last wrote it
//! (in a canonical form: keys sorted, formatting and comments aside). An owned entry that
//! no longer has that digest, and is not what aibox would write now, was edited by hand
//! (a teammate's tuning in a committed file, say): it is left exactly as it is, still
//! owned, and `apply` says so at every run until the edit is moved into `aibox.toml` or
//! the entry is deleted (the next `apply` writes it again). Overwriting it, as before,
//! lost the edit without a word. Without a ledger, or a digest for the entry (a fresh
//! clone, a ledger of an older aibox), nothing can be told apart and the entry is
//! written.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sha2::Digest as _;
use toml_edit::{Item, Table};

use crate::ledger::Ledger;

/// The digest of a JSON entry: its canonical text (object keys sorted at every level).
pub(crate) fn json_digest(value: &Value) -> String {
    hex::encode(sha2::Sha256::digest(
        aibox_config::jsonc::canonical_json(value).as_bytes(),
    ))
}

/// The digest of a TOML entry (a Codex `[mcp_servers.<name>]` table), as the same JSON
/// canonical text: an inline table and a section holding the same values, or an array
/// written with other spacing, digest alike.
pub(crate) fn toml_digest(table: &Table) -> String {
    json_digest(&table_value(table))
}

fn table_value(table: &Table) -> Value {
    Value::Object(
        table
            .iter()
            .map(|(k, item)| (k.to_owned(), item_value(item)))
            .collect(),
    )
}

fn item_value(item: &Item) -> Value {
    match item {
        Item::Value(v) => value_of(v),
        Item::Table(t) => table_value(t),
        Item::ArrayOfTables(a) => Value::Array(a.iter().map(table_value).collect()),
        Item::None => Value::Null,
    }
}

fn value_of(v: &toml_edit::Value) -> Value {
    use toml_edit::Value as V;
    match v {
        V::String(s) => Value::String(s.value().clone()),
        V::Integer(i) => Value::from(*i.value()),
        V::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(Value::Null, Value::Number),
        V::Boolean(b) => Value::Bool(*b.value()),
        V::Datetime(d) => Value::String(d.value().to_string()),
        V::Array(a) => Value::Array(a.iter().map(value_of).collect()),
        V::InlineTable(t) => {
            Value::Object(t.iter().map(|(k, v)| (k.to_owned(), value_of(v))).collect())
        }
    }
}

/// The entries of one slot to write, with the ones edited by hand set aside.
pub(crate) struct Sorted<V> {
    /// What aibox writes (the edited entries left out).
    pub write: Vec<(String, V)>,
    /// Names of the owned entries edited by hand: left as they are and still owned.
    pub kept: BTreeSet<String>,
    /// Digest per owned entry to record: of what aibox writes, or for a kept one the
    /// digest recorded before (so the next run still tells the edit apart).
    pub digests: BTreeMap<String, String>,
}

/// Sorts `desired` (name, entry) of `slot` in `file`: `existing` gives the entry the file
/// holds and `digest` digests an entry.
pub(crate) fn sort<V>(
    file: &str,
    slot: &str,
    desired: Vec<(String, V)>,
    ledger: Option<&Ledger>,
    existing: impl Fn(&str) -> Option<String>,
    digest: impl Fn(&V) -> String,
) -> Sorted<V> {
    let mut sorted = Sorted {
        write: Vec::with_capacity(desired.len()),
        kept: BTreeSet::new(),
        digests: BTreeMap::new(),
    };
    for (name, value) in desired {
        let new = digest(&value);
        let recorded = ledger.and_then(|l| l.entry_digest(file, slot, &name));
        if let (Some(recorded), Some(now)) = (recorded, existing(&name))
            && now != recorded
            && now != new
        {
            sorted.digests.insert(name.clone(), recorded.to_owned());
            sorted.kept.insert(name);
            continue;
        }
        sorted.digests.insert(name.clone(), new);
        sorted.write.push((name, value));
    }
    sorted
}

/// What every notice of a kept entry says ([`kept_notice`], [`is_kept_notice`]).
const KEPT: &str = "was edited by hand since aibox wrote it";

/// What `apply` says of an entry kept because it was edited by hand.
pub(crate) fn kept_notice(file: &str, name: &str) -> String {
    format!(
        "the `{name}` entry in {file} {KEPT}: left as it is (changes to `{name}` in \
         aibox.toml do not reach it); move your change into aibox.toml, or delete the entry \
         and run `aibox apply` to have it written again"
    )
}

/// Whether a notice of [`crate::Registration`] is about an entry kept because it was
/// edited by hand (the ledger, which is this checkout's alone, told it apart).
pub fn is_kept_notice(notice: &str) -> bool {
    notice.contains(KEPT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_ignore_key_order_and_toml_formatting() {
        let a: Value =
            serde_json::from_str(r#"{"b": [1, "x"], "a": {"d": 1, "c": true}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a": {"c": true, "d": 1}, "b": [1, "x"]}"#).unwrap();
        assert_eq!(json_digest(&a), json_digest(&b));
        let doc = |text: &str| -> Table {
            let d: toml_edit::DocumentMut = text.parse().unwrap();
            d["s"].as_table().unwrap().clone()
        };
        let inline = doc("[s]\ncommand = \"x\"\nargs = [\"a\",\"b\"]\nenv = { K = \"${K}\" }\n");
        let section =
            doc("[s]\n# mine\nargs = [ \"a\", \"b\" ]\ncommand = \"x\"\n[s.env]\nK = \"${K}\"\n");
        assert_eq!(toml_digest(&inline), toml_digest(&section));
        let other = doc("[s]\ncommand = \"x\"\nargs = [\"a\"]\nenv = { K = \"${K}\" }\n");
        assert_ne!(toml_digest(&inline), toml_digest(&other));
    }
}
