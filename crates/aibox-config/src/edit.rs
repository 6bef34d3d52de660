//! Comment- and order-preserving edits of the configuration files.
//!
//! Edits go through `toml_edit`, so comments, blank lines, key order and formatting of
//! everything not touched survive byte for byte. Every edit re-validates the whole
//! result with the strict loader before returning it: an edit that would leave the file
//! invalid is refused with a diagnostic, so a caller that saves the returned text can
//! never save a broken file.

use toml_edit::{DocumentMut, InlineTable, Item, Key, Table, Value};

use crate::diag::{ConfigProblems, source};
use crate::load::{
    AIBOX_TOML, ConfigError, LOCAL_TOML, parse_aibox_toml, parse_local_toml, syntax,
};

/// Which file an edit applies to; decides the validation after the edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFile {
    /// The committed `aibox.toml`.
    Team,
    /// The personal `.aibox-local.toml`.
    Local,
}

impl ConfigFile {
    /// The file name used in diagnostics.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Team => AIBOX_TOML,
            Self::Local => LOCAL_TOML,
        }
    }
}

/// Reads the value at the dotted `key` of an `aibox.toml` text, rendered as TOML.
///
/// Returns `Ok(None)` when the key is not set (defaults are not filled in). Tables are
/// rendered as TOML text; array entries are addressed by number (`ai.mcp.servers.0.name`).
pub fn get(text: &str, key: &str) -> Result<Option<String>, ConfigError> {
    let doc = parse_doc(text, ConfigFile::Team)?;
    let segs = split_key(key)?;
    let mut node = Node::Item(doc.as_item());
    for (i, seg) in segs.iter().enumerate() {
        let walked = segs[..i].join(".");
        let next = match node {
            Node::Item(item) => match item {
                Item::ArrayOfTables(aot) => aot.get(index(key, seg)?).map(Node::Table),
                Item::Value(v) => value_child(v, seg, key, &walked)?,
                Item::Table(t) => t.get(seg).map(Node::Item),
                Item::None => None,
            },
            Node::Table(t) => t.get(seg).map(Node::Item),
            Node::Value(v) => value_child(v, seg, key, &walked)?,
        };
        match next {
            Some(n) => node = n,
            None => return Ok(None),
        }
    }
    Ok(Some(render(node)))
}

/// Reads the effective value at `key`: what aibox uses, with defaults filled in.
///
/// The text must pass the strict loader. Optional keys without a default (such as
/// `processkit.version` when unset) are `None`.
pub fn get_effective(text: &str, key: &str) -> Result<Option<String>, ConfigError> {
    let cfg = parse_aibox_toml(text, AIBOX_TOML)?;
    let full = toml::to_string(&cfg).map_err(|e| bad_key(key, e.to_string()))?;
    get(&full, key)
}

/// Sets the dotted `key` of an `aibox.toml` text to `value` and returns the new text.
///
/// `value` is parsed as a TOML value when it parses (`true`, `1000`, `["a", "b"]`,
/// `"quoted"`), else taken as a plain string. Missing tables are created. Comments and
/// key order are preserved, including a trailing comment on a replaced value. The
/// result is re-validated with the strict loader; an invalid result is refused.
pub fn set(text: &str, key: &str, value: &str) -> Result<String, ConfigError> {
    set_in(ConfigFile::Team, text, key, value)
}

/// [`set`] for either file.
pub fn set_in(file: ConfigFile, text: &str, key: &str, value: &str) -> Result<String, ConfigError> {
    let mut doc = parse_for_insert(text, file)?;
    let segs = split_key(key)?;
    let new = parse_value(value);
    set_item(doc.as_item_mut(), &segs, new, key, 0)?;
    let out = keep_line_endings(text, doc.to_string());
    match file {
        ConfigFile::Team => parse_aibox_toml(&out, file.file_name()).map(|_| ())?,
        ConfigFile::Local => parse_local_toml(&out, file.file_name()).map(|_| ())?,
    }
    Ok(out)
}

/// `edited` with the line endings of `original`: `\r\n` throughout when the original
/// uses them (a Windows checkout's file stays one, not a whole-file diff), and a final
/// line break when the original ended with one.
pub fn keep_line_endings(original: &str, edited: String) -> String {
    let crlf = original.contains("\r\n");
    let mut out = if crlf {
        edited.replace("\r\n", "\n").replace('\n', "\r\n")
    } else {
        edited
    };
    if original.ends_with('\n') && !out.is_empty() && !out.ends_with('\n') {
        out.push_str(if crlf { "\r\n" } else { "\n" });
    }
    out
}

/// The TOML value `value` denotes: a TOML literal when it parses, else a string.
fn parse_value(value: &str) -> Value {
    match value.trim().parse::<Value>() {
        Ok(mut v) => {
            v.decor_mut().clear();
            v
        }
        Err(_) => Value::from(value),
    }
}

fn parse_doc(text: &str, file: ConfigFile) -> Result<DocumentMut, ConfigError> {
    text.parse::<DocumentMut>().map_err(|e| {
        let src = source(file.file_name(), text);
        let p = syntax(&e, &src);
        ConfigProblems::from_vec(vec![p])
            .map_or_else(|| bad_key("", "invalid TOML"), ConfigError::Invalid)
    })
}

/// [`parse_doc`] for an edit that may add keys or tables, with the comments that follow
/// a table's last line tied to that line.
///
/// `toml_edit` keeps comment lines after a table's last key as the prefix of the next
/// header (or the document's trailing text), so a table inserted between them would
/// land above those comments, and a commented-out example the user later uncomments
/// would silently belong to the new table. Comment lines that directly follow a table
/// (no blank line between) are that table's; they are moved into the decor of its last
/// line, which renders them in the same place, so whatever is added goes below them.
/// When the move would change a single byte of the unedited text it is not made.
fn parse_for_insert(text: &str, file: ConfigFile) -> Result<DocumentMut, ConfigError> {
    let mut doc = parse_doc(text, file)?;
    let mut tied = doc.clone();
    tie_trailing_comments(&mut tied);
    if tied.to_string() == text {
        doc = tied;
    }
    Ok(doc)
}

/// One step of a path to a displayed table: a key, or an entry of an array of tables.
#[derive(Clone)]
enum Step {
    Key(String),
    Entry(String, usize),
}

/// Every table that renders a header (and the root when it has keys), in display order.
fn displayed_tables(doc: &DocumentMut) -> Vec<Vec<Step>> {
    fn walk(
        t: &Table,
        path: &mut Vec<Step>,
        out: &mut Vec<(bool, isize, Vec<Step>)>,
        last: &mut isize,
    ) {
        if let Some(pos) = t.position() {
            *last = pos;
        }
        let visible = if path.is_empty() {
            !t.get_values().is_empty()
        } else {
            !(t.is_implicit() && t.get_values().is_empty())
        };
        if visible {
            out.push((!path.is_empty(), *last, path.clone()));
        }
        for (k, item) in t {
            match item {
                Item::Table(sub) if !sub.is_dotted() => {
                    path.push(Step::Key(k.to_owned()));
                    walk(sub, path, out, last);
                    path.pop();
                }
                Item::ArrayOfTables(aot) => {
                    for (i, sub) in aot.iter().enumerate() {
                        path.push(Step::Entry(k.to_owned(), i));
                        walk(sub, path, out, last);
                        path.pop();
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(doc.as_table(), &mut Vec::new(), &mut out, &mut 0);
    // The order `toml_edit` renders in: root first, then by position, stable.
    out.sort_by_key(|(has_path, pos, _)| (*has_path, *pos));
    out.into_iter().map(|(_, _, p)| p).collect()
}

fn table_at<'a>(doc: &'a mut DocumentMut, path: &[Step]) -> Option<&'a mut Table> {
    let mut t = doc.as_table_mut();
    for step in path {
        t = match step {
            Step::Key(k) => t.get_mut(k)?.as_table_mut()?,
            Step::Entry(k, i) => t.get_mut(k)?.as_array_of_tables_mut()?.get_mut(*i)?,
        };
    }
    Some(t)
}

/// The value a table's body renders last, if its last line is a plain `key = value`.
fn last_body_value(t: &mut Table) -> Option<&mut Value> {
    let items: Vec<_> = t.iter_mut().collect();
    for (_, item) in items.into_iter().rev() {
        match item {
            Item::Value(v) if v.as_inline_table().is_some_and(InlineTable::is_dotted) => {
                return None;
            }
            Item::Value(v) => return Some(v),
            Item::Table(sub) if sub.is_dotted() => return last_body_value(sub),
            _ => {}
        }
    }
    None
}

/// The leading comment lines of `prefix` up to the first line that is not a comment.
fn leading_comment_block(prefix: &str) -> usize {
    let mut end = 0;
    for line in prefix.split_inclusive('\n') {
        if !line.ends_with('\n') || !line.trim_start().starts_with('#') {
            break;
        }
        end += line.len();
    }
    end
}

/// Moves the comment block that directly follows each table's last line into that line's
/// decor (see [`parse_for_insert`]).
fn tie_trailing_comments(doc: &mut DocumentMut) {
    let tables = displayed_tables(doc);
    for (i, owner) in tables.iter().enumerate() {
        let following = match tables.get(i + 1) {
            Some(next) => {
                table_at(doc, next).and_then(|t| t.decor().prefix()?.as_str().map(str::to_owned))
            }
            None => doc.trailing().as_str().map(str::to_owned),
        };
        let Some(following) = following else { continue };
        let end = leading_comment_block(&following);
        if end == 0 {
            continue;
        }
        let (block, rest) = following.split_at(end);
        let Some(owner_table) = table_at(doc, owner) else {
            continue;
        };
        let eol = if block.ends_with("\r\n") {
            "\r\n"
        } else {
            "\n"
        };
        let tied = block.strip_suffix(eol).unwrap_or(block);
        if let Some(v) = last_body_value(owner_table) {
            let old = v
                .decor()
                .suffix()
                .and_then(|s| s.as_str())
                .unwrap_or("")
                .to_owned();
            v.decor_mut().set_suffix(format!("{old}{eol}{tied}"));
        } else if owner.is_empty() {
            continue;
        } else {
            let old = owner_table
                .decor()
                .suffix()
                .and_then(|s| s.as_str())
                .unwrap_or("")
                .to_owned();
            owner_table
                .decor_mut()
                .set_suffix(format!("{old}{eol}{tied}"));
        }
        let rest = rest.to_owned();
        match tables.get(i + 1) {
            Some(next) => {
                if let Some(t) = table_at(doc, next) {
                    t.decor_mut().set_prefix(rest);
                }
            }
            None => doc.set_trailing(rest),
        }
    }
}

fn bad_key(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::KeyPath {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

fn split_key(key: &str) -> Result<Vec<String>, ConfigError> {
    if key.trim().is_empty() {
        return Err(bad_key(key, "the key is empty"));
    }
    let keys = Key::parse(key).map_err(|_| bad_key(key, "not a valid dotted TOML key"))?;
    Ok(keys.iter().map(|k| k.get().to_owned()).collect())
}

fn index(key: &str, seg: &str) -> Result<usize, ConfigError> {
    seg.parse::<usize>().map_err(|_| {
        bad_key(
            key,
            format!("`{seg}` addresses an array; use an index such as 0"),
        )
    })
}

#[derive(Clone, Copy)]
enum Node<'a> {
    Item(&'a Item),
    Table(&'a Table),
    Value(&'a Value),
}

fn value_child<'a>(
    v: &'a Value,
    seg: &str,
    key: &str,
    walked: &str,
) -> Result<Option<Node<'a>>, ConfigError> {
    match v {
        Value::InlineTable(t) => Ok(t.get(seg).map(Node::Value)),
        Value::Array(a) => Ok(a.get(index(key, seg)?).map(Node::Value)),
        _ => Err(bad_key(
            key,
            format!("`{walked}` is a {}, not a table", v.type_name()),
        )),
    }
}

fn render(node: Node<'_>) -> String {
    match node {
        Node::Item(Item::Value(v)) | Node::Value(v) => bare(v),
        Node::Item(Item::Table(t)) | Node::Table(t) => table_text(t),
        Node::Item(Item::ArrayOfTables(aot)) => {
            let mut arr = toml_edit::Array::new();
            for t in aot {
                arr.push(t.clone().into_inline_table());
            }
            bare(&Value::Array(arr))
        }
        Node::Item(Item::None) => String::new(),
    }
}

fn bare(v: &Value) -> String {
    let mut v = v.clone();
    v.decor_mut().clear();
    v.to_string().trim().to_owned()
}

fn table_text(t: &Table) -> String {
    let mut doc = DocumentMut::new();
    for (k, item) in t {
        doc.insert(k, item.clone());
    }
    doc.to_string().trim_end().to_owned()
}

fn set_item(
    item: &mut Item,
    segs: &[String],
    value: Value,
    key: &str,
    depth: usize,
) -> Result<(), ConfigError> {
    let Some((head, tail)) = segs.split_first() else {
        return Err(bad_key(key, "the key is empty"));
    };
    let walked = key_prefix(key, depth);
    match item {
        Item::Table(t) => set_in_table(t, head, tail, value, key, depth, false),
        Item::Value(Value::InlineTable(t)) => set_in_table(t, head, tail, value, key, depth, true),
        Item::ArrayOfTables(aot) => {
            let i = index(key, head)?;
            let len = aot.len();
            let t = aot.get_mut(i).ok_or_else(|| {
                bad_key(key, format!("`{walked}` has {len} entries, not {}", i + 1))
            })?;
            let Some((field, rest)) = tail.split_first() else {
                return Err(bad_key(
                    key,
                    "replacing a whole table entry is not supported",
                ));
            };
            set_in_table(t, field, rest, value, key, depth + 1, false)
        }
        Item::Value(Value::Array(arr)) => {
            let i = index(key, head)?;
            let len = arr.len();
            let slot = arr.get_mut(i).ok_or_else(|| {
                bad_key(key, format!("`{walked}` has {len} elements, not {}", i + 1))
            })?;
            if tail.is_empty() {
                replace_value(slot, value);
                return Ok(());
            }
            let mut as_item = Item::Value(slot.clone());
            set_item(&mut as_item, tail, value, key, depth + 1)?;
            if let Item::Value(v) = as_item {
                *slot = v;
            }
            Ok(())
        }
        Item::Value(v) => Err(bad_key(
            key,
            format!("`{walked}` is a {}, not a table", v.type_name()),
        )),
        Item::None => Err(bad_key(key, format!("`{walked}` does not exist"))),
    }
}

fn set_in_table(
    t: &mut dyn toml_edit::TableLike,
    head: &str,
    tail: &[String],
    value: Value,
    key: &str,
    depth: usize,
    inline: bool,
) -> Result<(), ConfigError> {
    if tail.is_empty() {
        match t.get_mut(head) {
            Some(Item::Value(old)) => replace_value(old, value),
            // A table written with a header holds comments and a layout a value in its
            // place would drop (and it would move to the top of the file): its keys are
            // set one by one instead.
            Some(Item::Table(_)) => {
                return Err(bad_key(
                    key,
                    format!(
                        "`{key}` is a table: setting it whole would drop its comments and \
                         layout; set its keys one by one (`aibox config set {key}.<key> \
                         <value>`)"
                    ),
                ));
            }
            Some(Item::ArrayOfTables(_)) => {
                return Err(bad_key(
                    key,
                    format!(
                        "`{key}` is a list of tables: setting it whole would drop its \
                         comments and layout; set a field of one entry (`aibox config set \
                         {key}.0.<field> <value>`){}",
                        if key.ends_with("mcp.servers") {
                            ", or use `aibox mcp add` and `aibox mcp remove`"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            Some(other) => *other = Item::Value(value),
            None => {
                let mut value = value;
                if inline {
                    take_closing_space(t, &mut value);
                }
                match value {
                    // At the top level a value renders above every table: a new table
                    // gets its own header at the end of the file instead.
                    Value::InlineTable(table) if depth == 0 && !inline => {
                        t.insert(head, Item::Table(table.into_table()));
                    }
                    value => {
                        t.insert(head, Item::Value(value));
                    }
                }
            }
        }
        return Ok(());
    }
    if t.get(head).is_none() {
        let fresh = if inline {
            Item::Value(Value::InlineTable(InlineTable::new()))
        } else {
            let mut nt = Table::new();
            // Only the innermost table gets a header, like `[ai.mcp.gateway]`.
            nt.set_implicit(true);
            Item::Table(nt)
        };
        t.insert(head, fresh);
    }
    let child = t
        .get_mut(head)
        .ok_or_else(|| bad_key(key, "could not create the table"))?;
    set_item(child, tail, value, key, depth + 1)
}

/// In an inline table the space before `}` belongs to the last value; hand it to the
/// value appended after it so `{ A = "x" }` becomes `{ A = "x", B = "y" }`.
fn take_closing_space(t: &mut dyn toml_edit::TableLike, value: &mut Value) {
    if let Some((_, last)) = t.iter_mut().last()
        && let Some(v) = last.as_value_mut()
    {
        let suffix = v.decor().suffix().cloned();
        v.decor_mut().set_suffix("");
        if let Some(s) = suffix {
            value.decor_mut().set_suffix(s);
        }
        value.decor_mut().set_prefix(" ");
    }
}

/// Replaces a value in place, keeping its surrounding whitespace and trailing comment.
fn replace_value(old: &mut Value, mut new: Value) {
    *new.decor_mut() = old.decor().clone();
    *old = new;
}

fn key_prefix(key: &str, depth: usize) -> String {
    split_key(key)
        .map(|segs| {
            segs.iter()
                .take(depth)
                .cloned()
                .collect::<Vec<_>>()
                .join(".")
        })
        .unwrap_or_default()
}

/// Where a file keeps its MCP servers: `ai.mcp.servers` (team) or `mcp.servers` (local).
fn servers_path(file: ConfigFile) -> &'static [&'static str] {
    match file {
        ConfigFile::Team => &["ai", "mcp", "servers"],
        ConfigFile::Local => &["mcp", "servers"],
    }
}

/// Appends `server` as a new `[[ai.mcp.servers]]` (team) or `[[mcp.servers]]` (local)
/// table, keeping everything else byte for byte, and re-validates the result with the
/// strict loader (so a literal secret in `env`, a bad name or a duplicate is refused).
///
/// # Errors
/// A server of that name already exists in the file, the text is not valid TOML, or the
/// result would not load.
pub fn add_mcp_server(
    file: ConfigFile,
    text: &str,
    server: &crate::model::McpServer,
) -> Result<String, ConfigError> {
    let mut doc = parse_for_insert(text, file)?;
    let path = servers_path(file);
    let key = path.join(".");
    let mut node = doc.as_table_mut();
    for seg in &path[..path.len() - 1] {
        let entry = node.entry(seg).or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        });
        node = entry
            .as_table_mut()
            .ok_or_else(|| bad_key(&key, format!("`{seg}` is not a table")))?;
    }
    let leaf = path[path.len() - 1];
    let list = node
        .entry(leaf)
        .or_insert_with(|| Item::ArrayOfTables(toml_edit::ArrayOfTables::new()))
        .as_array_of_tables_mut()
        .ok_or_else(|| bad_key(&key, "is not an array of tables (`[[...]]`)"))?;
    if list
        .iter()
        .any(|t| t.get("name").and_then(Item::as_str) == Some(server.name.as_str()))
    {
        return Err(ConfigError::DuplicateServer {
            file: file.file_name().to_owned(),
            name: server.name.clone(),
        });
    }
    let mut table = Table::new();
    table.insert("name", toml_edit::value(server.name.as_str()));
    if let Some(command) = &server.command {
        table.insert("command", toml_edit::value(command.as_str()));
    }
    if !server.args.is_empty() {
        let args: toml_edit::Array = server.args.iter().map(String::as_str).collect();
        table.insert("args", toml_edit::value(args));
    }
    if let Some(url) = &server.url {
        table.insert("url", toml_edit::value(url.as_str()));
    }
    for (field, map) in [("env", &server.env), ("headers", &server.headers)] {
        if !map.is_empty() {
            let mut inline = InlineTable::new();
            for (k, v) in map {
                inline.insert(k, Value::from(v.as_str()));
            }
            table.insert(field, toml_edit::value(inline));
        }
    }
    list.push(table);
    let out = keep_line_endings(text, doc.to_string());
    validate_as(file, &out)?;
    Ok(out)
}

/// Removes the MCP server `name` from the file's server list (team or local); `None`
/// when there is no such server. Everything else stays byte for byte.
///
/// # Errors
/// The text is not valid TOML, or the result would not load.
pub fn remove_mcp_server(
    file: ConfigFile,
    text: &str,
    name: &str,
) -> Result<Option<String>, ConfigError> {
    let mut doc = parse_doc(text, file)?;
    let path = servers_path(file);
    let mut node: Option<&mut Table> = Some(doc.as_table_mut());
    for seg in &path[..path.len() - 1] {
        node = node
            .and_then(|t| t.get_mut(seg))
            .and_then(Item::as_table_mut);
    }
    let Some(parent) = node else {
        return Ok(None);
    };
    let leaf = path[path.len() - 1];
    let Some(list) = parent.get_mut(leaf).and_then(Item::as_array_of_tables_mut) else {
        return Ok(None);
    };
    let Some(at) = list
        .iter()
        .position(|t| t.get("name").and_then(Item::as_str) == Some(name))
    else {
        return Ok(None);
    };
    list.remove(at);
    if list.is_empty() {
        parent.remove(leaf);
    }
    let out = keep_line_endings(text, doc.to_string());
    validate_as(file, &out)?;
    Ok(Some(out))
}

fn validate_as(file: ConfigFile, text: &str) -> Result<(), ConfigError> {
    match file {
        ConfigFile::Team => parse_aibox_toml(text, file.file_name()).map(|_| ()),
        ConfigFile::Local => parse_local_toml(text, file.file_name()).map(|_| ()),
    }
}
