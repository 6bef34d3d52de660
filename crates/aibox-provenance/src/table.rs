//! [`PathTable`]: a compact, sorted map from project paths to small values, and
//! [`SharedPathTable`], its kind for paths held elsewhere already.
//!
//! Per-file state of a processkit install (the marker's tables, the live scan) has one
//! entry per installed file: 17,000 at ten times processkit's size. A
//! `BTreeMap<String, _>` spends a heap allocation, a 24-byte `String` and its share of
//! tree nodes on every key (about 60 bytes beside the path and the value); here every
//! path lives in one text, each entry is its end offset and its value, and lookups are
//! binary searches. Entries are kept in the byte order of their paths (that of
//! `BTreeMap<String, _>`), so iteration and rendering are unchanged.

use std::fmt;
use std::sync::Arc;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Sorted `path → value` entries with every path in one text (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct PathTable<V> {
    /// Every path, one after the other, in order.
    text: String,
    /// Where each entry's path ends in `text` (it starts where the previous one ends).
    ends: Vec<u32>,
    /// Each entry's value.
    values: Vec<V>,
}

impl<V> Default for PathTable<V> {
    fn default() -> Self {
        Self {
            text: String::new(),
            ends: Vec::new(),
            values: Vec::new(),
        }
    }
}

impl<V: fmt::Debug> fmt::Debug for PathTable<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V> PathTable<V> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table with room for `entries` entries and `text` bytes of paths.
    pub fn with_capacity(entries: usize, text: usize) -> Self {
        Self {
            text: String::with_capacity(text),
            ends: Vec::with_capacity(entries),
            values: Vec::with_capacity(entries),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The path of entry `i`.
    fn key(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// The path of the last entry.
    fn last_key(&self) -> Option<&str> {
        self.len().checked_sub(1).map(|i| self.key(i))
    }

    /// Where `path` is, or where it would go.
    fn find(&self, path: &str) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.key(mid).cmp(path) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// The value of `path`.
    pub fn get(&self, path: &str) -> Option<&V> {
        self.find(path).ok().map(|i| &self.values[i])
    }

    /// Whether `path` has an entry.
    pub fn contains_key(&self, path: &str) -> bool {
        self.find(path).is_ok()
    }

    /// Every entry in path order.
    pub fn iter(&self) -> Iter<'_, V> {
        Iter {
            table: self,
            at: 0,
            end: self.len(),
        }
    }

    /// Every path in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator + Clone {
        (0..self.len()).map(|i| self.key(i))
    }

    /// Every value in path order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator + Clone {
        self.values.iter()
    }

    /// The entries from `path` on (the first one at or after it), in order.
    pub fn range_from(&self, path: &str) -> Iter<'_, V> {
        let at = self.find(path).unwrap_or_else(|i| i);
        Iter {
            table: self,
            at,
            end: self.len(),
        }
    }

    /// Adds an entry, or replaces the value of an existing one (returning the old
    /// value). Appending in path order is cheap; anything else moves the entries after
    /// it (tests and small tables only).
    pub fn insert(&mut self, path: &str, value: V) -> Option<V> {
        let last_is_smaller = self.last_key().is_none_or(|last| last < path);
        if last_is_smaller {
            self.push_unchecked(path, value);
            return None;
        }
        match self.find(path) {
            Ok(i) => Some(std::mem::replace(&mut self.values[i], value)),
            Err(i) => {
                let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
                self.text.insert_str(start, path);
                let len = offset(path.len());
                for end in &mut self.ends[i..] {
                    *end += len;
                }
                self.ends.insert(i, offset(start) + len);
                self.values.insert(i, value);
                None
            }
        }
    }

    /// Appends an entry known to sort after every other one.
    fn push_unchecked(&mut self, path: &str, value: V) {
        self.text.push_str(path);
        self.ends.push(offset(self.text.len()));
        self.values.push(value);
    }

    /// Appends an entry when it sorts after every other one; `false` (nothing added)
    /// when it does not: a repeated or out-of-order path.
    pub fn push(&mut self, path: &str, value: V) -> bool {
        if self.last_key().is_some_and(|last| last >= path) {
            return false;
        }
        self.push_unchecked(path, value);
        true
    }

    /// Gives back the spare room of a table built by pushing.
    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.values.shrink_to_fit();
    }
}

/// A text offset: paths of one table total far less than 4 GiB (a release is limited to
/// a few hundred MB, its paths to a small part of that).
fn offset(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl<'a, V> FromIterator<(&'a str, V)> for PathTable<V> {
    /// Collects entries in any order (sorted first); of a repeated path the last wins.
    fn from_iter<I: IntoIterator<Item = (&'a str, V)>>(iter: I) -> Self {
        let mut entries: Vec<(&str, V)> = iter.into_iter().collect();
        if !entries.is_sorted_by(|a, b| a.0 < b.0) {
            // Stable: of equal paths the last stays last, and wins below.
            entries.sort_by(|a, b| a.0.cmp(b.0));
        }
        let text: usize = entries.iter().map(|(p, _)| p.len()).sum();
        let mut table = Self::with_capacity(entries.len(), text);
        for (path, value) in entries {
            if table.last_key() == Some(path) {
                if let Some(last) = table.values.last_mut() {
                    *last = value;
                }
            } else {
                table.push_unchecked(path, value);
            }
        }
        table
    }
}

impl<V> std::ops::Index<&str> for PathTable<V> {
    type Output = V;

    /// The value of `path`; panics when there is none (as `BTreeMap`'s index does).
    #[allow(clippy::panic)] // the `Index` contract, for tests
    fn index(&self, path: &str) -> &V {
        self.get(path)
            .unwrap_or_else(|| panic!("no entry for `{path}`"))
    }
}

/// The entries of a [`PathTable`] in path order.
#[derive(Clone)]
pub struct Iter<'a, V> {
    table: &'a PathTable<V>,
    at: usize,
    end: usize,
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (&'a str, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.end {
            return None;
        }
        let i = self.at;
        self.at += 1;
        Some((self.table.key(i), &self.table.values[i]))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.at;
        (n, Some(n))
    }
}

impl<V> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.at >= self.end {
            return None;
        }
        self.end -= 1;
        Some((self.table.key(self.end), &self.table.values[self.end]))
    }
}

impl<V> ExactSizeIterator for Iter<'_, V> {}

impl<'a, V> IntoIterator for &'a PathTable<V> {
    type Item = (&'a str, &'a V);
    type IntoIter = Iter<'a, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<V: Serialize> Serialize for PathTable<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for PathTable<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = PathTable<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of paths")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut table = PathTable::new();
                while let Some((k, v)) = map.next_entry::<String, V>()? {
                    table.insert(&k, v);
                }
                Ok(table)
            }
        }
        deserializer.deserialize_map(Entries(std::marker::PhantomData))
    }
}

/// Sorted `path → value` entries whose paths are shared allocations: for per-file state
/// keyed by paths something else holds already (the release's file list), where a
/// [`PathTable`]'s copy of every path would be the larger part. 16 bytes of pointer per
/// entry beside the value; lookups are binary searches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedPathTable<V> {
    entries: Vec<(Arc<str>, V)>,
}

impl<V> Default for SharedPathTable<V> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<V> SharedPathTable<V> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of `path`.
    pub fn get(&self, path: &str) -> Option<&V> {
        let at = self
            .entries
            .binary_search_by(|(p, _)| (**p).cmp(path))
            .ok()?;
        Some(&self.entries[at].1)
    }

    /// Every entry in path order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &V)> + ExactSizeIterator {
        self.entries.iter().map(|(p, v)| (&**p, v))
    }

    /// Every path in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.entries.iter().map(|(p, _)| &**p)
    }

    /// Appends an entry when it sorts after every other one; `false` (nothing added)
    /// when it does not: a repeated or out-of-order path.
    pub fn push(&mut self, path: Arc<str>, value: V) -> bool {
        if self.entries.last().is_some_and(|(last, _)| **last >= *path) {
            return false;
        }
        self.entries.push((path, value));
        true
    }

    /// Adds an entry anywhere, or replaces the value of an existing one (returning the
    /// old value); appending in path order is [`Self::push`].
    pub fn insert(&mut self, path: &str, value: V) -> Option<V> {
        match self.entries.binary_search_by(|(p, _)| (**p).cmp(path)) {
            Ok(at) => Some(std::mem::replace(&mut self.entries[at].1, value)),
            Err(at) => {
                self.entries.insert(at, (Arc::from(path), value));
                None
            }
        }
    }

    /// Removes the entry of `path`, returning its value.
    pub fn remove(&mut self, path: &str) -> Option<V> {
        let at = self
            .entries
            .binary_search_by(|(p, _)| (**p).cmp(path))
            .ok()?;
        Some(self.entries.remove(at).1)
    }

    /// Gives back the spare room of a table built by pushing.
    pub fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::{PathTable, SharedPathTable};

    /// Both kinds of table, filled the same way, keep their entries in byte order.
    #[test]
    fn keeps_byte_order_whatever_the_insertion_order() {
        let mut t = PathTable::new();
        let mut shared = SharedPathTable::new();
        for (i, p) in ["b/c", "a", "b", "a/z", "b-c", "b/c"].iter().enumerate() {
            t.insert(p, i);
            shared.insert(p, i);
        }
        let kept = [("a", 1), ("a/z", 3), ("b", 2), ("b-c", 4), ("b/c", 5)];
        let entries: Vec<(&str, usize)> = t.iter().map(|(k, v)| (k, *v)).collect();
        assert_eq!(entries, kept);
        let entries: Vec<(&str, usize)> = shared.iter().map(|(k, v)| (k, *v)).collect();
        assert_eq!(entries, kept);
        assert_eq!((t.get("b-c"), shared.get("b-c")), (Some(&4), Some(&4)));
        assert_eq!((t.get("b/"), shared.get("b/")), (None, None));
        assert!(t.contains_key("a/z"));
        let from: Vec<&str> = t.range_from("a/").map(|(k, _)| k).collect();
        assert_eq!(from, ["a/z", "b", "b-c", "b/c"]);
        let collected: PathTable<usize> = [("z", 1), ("y", 2), ("z", 3)].into_iter().collect();
        let entries: Vec<(&str, usize)> = collected.iter().map(|(k, v)| (k, *v)).collect();
        assert_eq!(entries, [("y", 2), ("z", 3)]);
        let mut pushed = PathTable::new();
        let mut pushed_shared = SharedPathTable::new();
        for (p, added) in [("a", true), ("a", false), ("b", true)] {
            assert_eq!(pushed.push(p, ()), added, "{p}");
            assert_eq!(pushed_shared.push(p.into(), ()), added, "{p}");
        }
        assert_eq!((pushed.len(), pushed_shared.len()), (2, 2));
        assert_eq!(shared.remove("b"), Some(2));
        assert_eq!(shared.remove("b"), None);
        assert_eq!(
            shared.keys().collect::<Vec<_>>(),
            ["a", "a/z", "b-c", "b/c"]
        );
        assert_eq!(t.iter().next_back().map(|(k, _)| k), Some("b/c"));
    }
}
