//! `aibox addon list|add|remove`: the tool catalog and the project's `[addons] tools`.
//!
//! Adding and removing edit `aibox.toml` with `toml_edit`, so comments and layout stay;
//! removing the last addon drops the `tools` key and an `[addons]` table left empty, so
//! `add` followed by `remove` gives back the original bytes. Names are checked against
//! the catalog before anything is written; the next `aibox apply` changes the image.

use aibox_config::{AiboxToml, ContextMode};
use aibox_devcontainer::catalog::{self, Catalog};
use camino::{Utf8Path, Utf8PathBuf};
use serde::Serialize;
use toml_edit::{Array, DocumentMut, Item, Table, Value};

use crate::init::{InitError, write_error};

/// One catalog tool as `aibox addon list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddonRow {
    /// Catalog name.
    pub name: String,
    /// Pinned version.
    pub version: String,
    /// Verification kind.
    pub verification: String,
    /// The written exception of an unverified tool.
    pub exception: Option<String>,
    /// One line on what it is.
    pub summary: String,
    /// Why the project's image has it (`base`, `harness claude`, `processkit`, `addon`,
    /// `required`), or `None` when it does not.
    pub installed: Option<String>,
}

/// Errors of the addon commands.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum AddonError {
    /// The shipped catalog is broken (a bug).
    #[error("{0}")]
    #[diagnostic(code(aibox::addon::catalog))]
    Catalog(String),
    /// The name is not in the catalog.
    #[error("`{name}` is not in aibox's tool catalog{suggestion}")]
    #[diagnostic(
        code(aibox::addon::unknown),
        help("known tools: {known}; `aibox addon list` shows versions and verification")
    )]
    Unknown {
        /// The name asked for.
        name: String,
        /// `; did you mean `x`?` when a catalog name is close, else empty.
        suggestion: String,
        /// The catalog's names.
        known: String,
    },
    /// `aibox.toml` could not be read, or the edit is invalid.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(#[from] aibox_config::ConfigError),
    /// `aibox.toml` is not valid TOML.
    #[error("{path} is not valid TOML: {message}")]
    #[diagnostic(code(aibox::addon::toml), help("fix the file, then try again"))]
    Toml {
        /// The file.
        path: Utf8PathBuf,
        /// The parser's message.
        message: String,
    },
    /// `[addons]` is not a table or `tools` not an array of strings.
    #[error("{path}: `[addons] tools` is not an array of tool names")]
    #[diagnostic(
        code(aibox::addon::shape),
        help("make it `tools = [\"python\"]` under `[addons]`")
    )]
    Shape {
        /// The file.
        path: Utf8PathBuf,
    },
    /// Reading failed.
    #[error("cannot read {path}")]
    #[diagnostic(code(aibox::addon::io))]
    Io {
        /// The file.
        path: Utf8PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Writing failed.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Write(#[from] InitError),
}

impl AddonError {
    /// Who can fix it: a disk error is the environment, a broken built-in catalog a bug,
    /// everything else the user.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Catalog(_) => aibox_config::ErrorKind::Internal,
            Self::Io { .. } => aibox_config::ErrorKind::Environment,
            Self::Config(e) => e.kind(),
            Self::Write(e) => e.kind(),
            Self::Unknown { .. } | Self::Toml { .. } | Self::Shape { .. } => {
                aibox_config::ErrorKind::User
            }
        }
    }
}

fn builtin() -> Result<Catalog, AddonError> {
    Catalog::builtin().map_err(|e| AddonError::Catalog(e.to_string()))
}

/// Every catalog tool, marked with why `config`'s image has it (when given).
pub fn list(config: Option<&AiboxToml>) -> Result<Vec<AddonRow>, AddonError> {
    let catalog = builtin()?;
    let installed = |name: &str| -> Option<String> {
        let config = config?;
        if catalog::BASE_TOOLS.contains(&name) {
            return Some("base".into());
        }
        if let Some(h) = config
            .ai
            .harnesses
            .iter()
            .find(|h| catalog::harness_tool(**h) == Some(name))
        {
            return Some(format!("harness {}", h.as_str()));
        }
        if config.context.mode == ContextMode::Processkit
            && catalog::PROCESSKIT_TOOLS.contains(&name)
        {
            return Some("processkit".into());
        }
        if name == "npm"
            && config.ai.mcp.servers.iter().any(|s| {
                s.command
                    .as_deref()
                    .and_then(|c| c.rsplit('/').next())
                    .is_some_and(|c| c == "npx" || c == "npm")
            })
        {
            return Some("npx server".into());
        }
        if config.addons.tools.iter().any(|t| t == name) {
            return Some("addon".into());
        }
        let selected = aibox_devcontainer::selected_tools(config, &catalog).ok()?;
        selected
            .iter()
            .any(|t| t.name == name)
            .then(|| "required".into())
    };
    Ok(catalog
        .tools()
        .map(|t| AddonRow {
            name: t.name.clone(),
            version: t.version.clone(),
            verification: t.verification.as_str().to_owned(),
            exception: t.exception.clone(),
            summary: t.summary.clone(),
            installed: installed(&t.name),
        })
        .collect())
}

/// Adds `names` to `[addons] tools` (those already there are left alone). Returns
/// whether the file changed.
pub fn add(root: &Utf8Path, names: &[String]) -> Result<bool, AddonError> {
    let catalog = builtin()?;
    for name in names {
        if catalog.get(name).is_none() {
            let suggestion = aibox_config::closest(name, catalog.tools().map(|t| t.name.as_str()))
                .map_or_else(String::new, |c| format!("; did you mean `{c}`?"));
            return Err(AddonError::Unknown {
                name: name.clone(),
                suggestion,
                known: catalog
                    .tools()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    edit(root, |path, doc| {
        if !doc.contains_key("addons") {
            // The new table goes last, after the comments that end the file (they belong
            // to the table above); `remove` hands them back.
            let trailing = doc.trailing().as_str().unwrap_or_default().to_owned();
            doc.set_trailing("");
            let mut table = Table::new();
            table.decor_mut().set_prefix(format!("{trailing}\n"));
            doc.insert("addons", Item::Table(table));
        }
        let table = doc["addons"]
            .as_table_like_mut()
            .ok_or_else(|| AddonError::Shape {
                path: path.to_owned(),
            })?;
        if !table.contains_key("tools") {
            table.insert("tools", Item::Value(Value::Array(Array::new())));
        }
        let tools = table
            .get_mut("tools")
            .and_then(Item::as_array_mut)
            .ok_or_else(|| AddonError::Shape {
                path: path.to_owned(),
            })?;
        for name in names {
            if !tools.iter().any(|v| v.as_str() == Some(name)) {
                tools.push(name.as_str());
            }
        }
        Ok(())
    })
}

/// Removes `names` from `[addons] tools`; an emptied list and `[addons]` table go too.
/// Returns whether the file changed.
pub fn remove(root: &Utf8Path, names: &[String]) -> Result<bool, AddonError> {
    edit(root, |path, doc| {
        let Some(table) = doc.get_mut("addons") else {
            return Ok(());
        };
        let table = table.as_table_like_mut().ok_or_else(|| AddonError::Shape {
            path: path.to_owned(),
        })?;
        let commented = |text: Option<&str>| text.is_some_and(|t| t.contains('#'));
        let key_commented = table
            .key("tools")
            .is_some_and(|k| commented(k.leaf_decor().prefix().and_then(|p| p.as_str())));
        if let Some(tools) = table.get_mut("tools") {
            let tools = tools.as_array_mut().ok_or_else(|| AddonError::Shape {
                path: path.to_owned(),
            })?;
            let asked = |v: &Value| v.as_str().is_some_and(|s| names.iter().any(|n| n == s));
            loop {
                let Some(i) = tools.iter().position(asked) else {
                    break;
                };
                remove_entry(tools, i);
            }
            // An emptied list goes, unless the user wrote comments on it: `tools = []`
            // keeps them (and the table they are in).
            let keep = key_commented
                || commented(tools.trailing().as_str())
                || commented(tools.decor().suffix().and_then(|s| s.as_str()));
            if tools.is_empty() && !keep {
                table.remove("tools");
            } else if tools.is_empty() && !commented(tools.trailing().as_str()) {
                tools.set_trailing("");
                tools.set_trailing_comma(false);
            }
        }
        if table.is_empty() {
            let addons = doc.get("addons").and_then(Item::as_table);
            let at = addons.and_then(Table::position);
            let prefix = addons
                .and_then(|t| t.decor().prefix())
                .and_then(|p| p.as_str())
                .map(str::to_owned);
            // The table written after `[addons]` in the file (not in key order: an
            // `[[ai.mcp.servers]]` below it belongs to `ai`, which comes first).
            let mut after = Vec::new();
            positions(doc.as_table(), &mut after);
            let next = at.and_then(|at| after.into_iter().filter(|p| *p > at).min());
            doc.remove("addons");
            match (prefix, next) {
                // The comments above the table stay where they were: above what followed.
                (Some(prefix), Some(next)) => {
                    if let Some(t) = table_at(doc.as_table_mut(), next) {
                        let decor = t.decor_mut();
                        let rest = decor
                            .prefix()
                            .and_then(|p| p.as_str())
                            .unwrap_or("")
                            .to_owned();
                        decor.set_prefix(format!("{prefix}{rest}"));
                    }
                }
                // Undo `add`: comments it moved in front of the table go back to the end.
                (Some(prefix), None) if doc.trailing().as_str() == Some("") => {
                    let restored = prefix.strip_suffix('\n').unwrap_or(&prefix).to_owned();
                    doc.set_trailing(restored);
                }
                _ => {}
            }
        }
        Ok(())
    })
}

/// Removes entry `i` of `array` with the comment written after it on its line (which the
/// parser gives to what follows: the next entry, or the end of the list); the next entry
/// takes its place on its line. Comment lines above an entry may head a group, so they
/// stay.
fn remove_entry(array: &mut Array, i: usize) {
    let removed = array.remove(i);
    let prefix_of = |v: &Value| {
        v.decor()
            .prefix()
            .and_then(|p| p.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let own = prefix_of(&removed);
    // What stays of the removed entry's own prefix: the lines above it, not its indent.
    let above = &own[..own.rfind('\n').map_or(0, |n| n + 1)];
    // `text` (what follows the entry) without the rest of the entry's line; that line's
    // break stays when the entry shared its line with what came before (`[` or another
    // entry).
    let below = |text: &str, n: usize| {
        let from = if own.contains('\n') { n + 1 } else { n };
        format!("{above}{}", &text[from..])
    };
    if let Some(next) = array.get_mut(i) {
        let prefix = prefix_of(next);
        let new = match prefix.find('\n') {
            // The rest of the removed entry's line goes with it.
            Some(n) => below(&prefix, n),
            // On the same line: the next entry takes the removed one's place.
            None => own.clone(),
        };
        next.decor_mut().set_prefix(new);
    } else {
        // The last entry: what follows it up to `]` is its suffix (without a comma after
        // it) and the list's trailing text.
        let suffix = removed
            .decor()
            .suffix()
            .and_then(|p| p.as_str())
            .unwrap_or_default();
        let trailing = format!("{suffix}{}", array.trailing().as_str().unwrap_or_default());
        if let Some(n) = trailing.find('\n') {
            array.set_trailing(below(&trailing, n));
        }
    }
}

/// The document positions of every table written below `table` (arrays of tables
/// included; implicit tables have no line of their own).
fn positions(table: &Table, out: &mut Vec<isize>) {
    for (_, item) in table {
        let tables: Vec<&Table> = match item {
            Item::Table(t) => vec![t],
            Item::ArrayOfTables(a) => a.iter().collect(),
            _ => Vec::new(),
        };
        for t in tables {
            if let Some(p) = t.position().filter(|_| !t.is_implicit()) {
                out.push(p);
            }
            positions(t, out);
        }
    }
}

/// The table at document position `at` below `table`.
fn table_at(table: &mut Table, at: isize) -> Option<&mut Table> {
    for (_, item) in table.iter_mut() {
        let tables: Vec<&mut Table> = match item {
            Item::Table(t) => vec![t],
            Item::ArrayOfTables(a) => a.iter_mut().collect(),
            _ => Vec::new(),
        };
        for t in tables {
            if t.position() == Some(at) && !t.is_implicit() {
                return Some(t);
            }
            if let Some(found) = table_at(t, at) {
                return Some(found);
            }
        }
    }
    None
}

fn edit(
    root: &Utf8Path,
    change: impl FnOnce(&Utf8Path, &mut DocumentMut) -> Result<(), AddonError>,
) -> Result<bool, AddonError> {
    let path = root.join(aibox_config::AIBOX_TOML);
    let text = fs_err::read_to_string(&path).map_err(|source| AddonError::Io {
        path: path.clone(),
        source,
    })?;
    let mut doc: DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| AddonError::Toml {
                path: path.clone(),
                message: e.message().to_owned(),
            })?;
    change(&path, &mut doc)?;
    let new = aibox_config::edit::keep_line_endings(&text, doc.to_string());
    if new == text {
        return Ok(false);
    }
    aibox_config::parse_aibox_toml(&new, aibox_config::AIBOX_TOML)?;
    let project = aibox_fs::ProjectRoot::open(root).map_err(|e| write_error(root, e))?;
    aibox_fs::Writer::for_command(&project, aibox_config::layout::Writers::CONFIG_SET)
        .write(
            Utf8Path::new(aibox_config::AIBOX_TOML),
            new.as_bytes(),
            None,
        )
        .map_err(|e| write_error(root, e))?;
    Ok(true)
}
