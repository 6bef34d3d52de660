//! Key paths inside a parsed TOML document and the spans they cover.
//!
//! Checks that run on the typed model still need to point at the file, so they name
//! the offending value by path and this module finds its key and value spans in the
//! span-preserving `toml_edit` document.

use std::fmt;
use std::ops::Range;

use toml_edit::{Item, Key, Value};

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    /// A table key.
    Key(String),
    /// An array element or array-of-tables entry.
    Index(usize),
}

/// A key path such as `container.extra_volumes[0].target`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyPath(pub Vec<Seg>);

impl KeyPath {
    pub fn key(&self, k: &str) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Key(k.to_owned()));
        p
    }

    pub fn index(&self, i: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }

    /// The table a key lives in, for messages such as "under `[container]`".
    pub fn parent(&self) -> Self {
        let mut p = self.clone();
        p.0.pop();
        p
    }
}

/// Builds a path of table keys, such as `path(&["container", "name"])`.
pub(crate) fn path(keys: &[&str]) -> KeyPath {
    KeyPath(keys.iter().map(|k| Seg::Key((*k).to_owned())).collect())
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for seg in &self.0 {
            match seg {
                Seg::Key(k) => {
                    if !first {
                        f.write_str(".")?;
                    }
                    if k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                        && !k.is_empty()
                    {
                        f.write_str(k)?;
                    } else {
                        write!(f, "{k:?}")?;
                    }
                }
                Seg::Index(i) => write!(f, "[{i}]")?,
            }
            first = false;
        }
        Ok(())
    }
}

/// Spans of one located entry.
#[derive(Debug, Clone, Default)]
pub(crate) struct Located {
    /// The key (absent for array elements).
    pub key: Option<Range<usize>>,
    /// The value (a table's header for standard tables).
    pub value: Option<Range<usize>>,
}

impl Located {
    /// The best span to underline: the value, else the key.
    pub fn best(&self) -> Option<Range<usize>> {
        self.value.clone().or_else(|| self.key.clone())
    }
}

/// Finds the spans of `path` in `root`; `None` when the path does not exist.
pub(crate) fn locate(root: &Item, path: &KeyPath) -> Option<Located> {
    walk_item(
        root,
        &path.0,
        Located {
            key: None,
            value: root.span(),
        },
    )
}

fn walk_item(item: &Item, rest: &[Seg], here: Located) -> Option<Located> {
    let Some((seg, tail)) = rest.split_first() else {
        return Some(here);
    };
    match (seg, item) {
        (Seg::Key(k), _) => {
            let (key, child) = item.as_table_like()?.get_key_value(k)?;
            walk_entry(key, child, tail)
        }
        (Seg::Index(i), Item::ArrayOfTables(aot)) => {
            let table = aot.get(*i)?;
            let here = Located {
                key: None,
                value: table.span(),
            };
            let Some((seg, tail)) = tail.split_first() else {
                return Some(here);
            };
            let Seg::Key(k) = seg else { return None };
            let (key, child) = table.get_key_value(k)?;
            walk_entry(key, child, tail)
        }
        (Seg::Index(_), Item::Value(v)) => walk_value(v, rest, here),
        _ => None,
    }
}

/// Steps into the entry `key = child` and walks the rest of the path from there.
fn walk_entry(key: &Key, child: &Item, rest: &[Seg]) -> Option<Located> {
    walk_item(
        child,
        rest,
        Located {
            key: key.span(),
            value: child.span(),
        },
    )
}

fn walk_value(value: &Value, rest: &[Seg], here: Located) -> Option<Located> {
    let Some((seg, tail)) = rest.split_first() else {
        return Some(here);
    };
    match (seg, value) {
        (Seg::Key(k), Value::InlineTable(t)) => {
            let (key, child) = t.get_key_value(k)?;
            walk_entry(key, child, tail)
        }
        (Seg::Index(i), Value::Array(a)) => {
            let e = a.get(*i)?;
            walk_value(
                e,
                tail,
                Located {
                    key: None,
                    value: e.span(),
                },
            )
        }
        _ => None,
    }
}
