//! Structural check of a parsed TOML document against the generated JSON Schema.
//!
//! The schema that `schemars` derives from the model is the one source of truth for
//! which keys exist, which are required, their types and their allowed values. Walking
//! it over the span-preserving `toml_edit` document lets the loader report every
//! unknown key, wrong type, bad enum value and missing key at once, each with the exact
//! span, before serde ever sees the text.

use std::ops::Range;

use miette::SourceSpan;
use serde_json::Value as Json;
use toml_edit::{Item, Value};

use crate::diag::{Problem, ProblemKind, Source};
use crate::path::KeyPath;

/// Harness ids users of other tools may type, mapped to ours.
const HARNESS_ALIASES: &[(&str, &str)] = &[("openai", "codex"), ("claude-code", "claude")];

/// Keys of the reference tool and common misspellings, mapped to ours:
/// (table path, key, replacement).
const KEY_ALIASES: &[(&str, &str, &str)] = &[
    ("skills", "enabled", "include"),
    ("skills", "disabled", "exclude"),
    ("ai.mcp.gateway", "address", "host"),
    ("container", "image", "base_image"),
    ("container", "env", "environment"),
    ("container", "volumes", "extra_volumes"),
    ("mcp", "server", "servers"),
    ("ai.mcp", "server", "servers"),
];

/// A schema node with `$ref`s followed and the name of the last definition seen.
struct Resolved<'s> {
    node: &'s Json,
    def: Option<&'s str>,
}

/// The expected shape of a value, normalised from the schema's many spellings.
enum Expect<'s> {
    Object(&'s Json),
    Array(Option<&'s Json>),
    String,
    Enum(Vec<&'s str>),
    Integer {
        min: Option<i64>,
        max: Option<i64>,
    },
    Number,
    Boolean,
    /// Anything (schema gives no constraint).
    Any,
}

/// Walks `doc_root` against `schema` and returns every structural problem.
///
/// `top_level_hint` is added to the help of unknown top-level keys (the overlay uses it
/// to say that team settings belong in `aibox.toml`).
pub(crate) fn check(
    schema: &Json,
    doc_root: &Item,
    src: &Source,
    top_level_hint: Option<&str>,
) -> Vec<Problem> {
    let mut walker = Walker {
        root: schema,
        src,
        problems: Vec::new(),
        top_level_hint,
    };
    let whole = doc_root.span().unwrap_or(0..0);
    let here = Here {
        path: KeyPath::default(),
        key: None,
        value: Some(whole),
    };
    walker.item(doc_root, schema, &here);
    walker.problems
}

struct Walker<'s, 'r> {
    root: &'s Json,
    src: &'r Source,
    problems: Vec<Problem>,
    top_level_hint: Option<&'r str>,
}

/// Where the walker is: the key path and the spans of the current key and value.
#[derive(Clone)]
struct Here {
    path: KeyPath,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
}

impl Here {
    fn span(&self) -> SourceSpan {
        to_span(self.value.clone().or_else(|| self.key.clone()))
    }
    fn key_span(&self) -> SourceSpan {
        to_span(self.key.clone().or_else(|| self.value.clone()))
    }
}

fn to_span(r: Option<Range<usize>>) -> SourceSpan {
    r.map_or_else(|| SourceSpan::from(0..0), SourceSpan::from)
}

impl<'s> Walker<'s, '_> {
    fn resolve(&self, mut node: &'s Json) -> Resolved<'s> {
        let mut def = None;
        // Bounded: the model has no reference cycles deeper than this.
        for _ in 0..16 {
            let Some(r) = node.get("$ref").and_then(Json::as_str) else {
                break;
            };
            let name = r.rsplit('/').next().unwrap_or(r);
            let Some(target) = self.root.get("$defs").and_then(|d| d.get(name)) else {
                break;
            };
            def = Some(name);
            node = target;
        }
        Resolved { node, def }
    }

    fn expect(&self, schema: &'s Json) -> (Expect<'s>, Option<&'s str>) {
        let Resolved { node, def } = self.resolve(schema);
        // `Option<T>` is `anyOf: [T, null]`; enums with documented variants are
        // `oneOf` of `const`s.
        for combinator in ["anyOf", "oneOf"] {
            if let Some(list) = node.get(combinator).and_then(Json::as_array) {
                let consts: Vec<&str> = list
                    .iter()
                    .filter_map(|v| v.get("const").and_then(Json::as_str))
                    .collect();
                if !consts.is_empty() && consts.len() == list.len() {
                    return (Expect::Enum(consts), def);
                }
                let non_null: Vec<&Json> = list
                    .iter()
                    .filter(|v| v.get("type").and_then(Json::as_str) != Some("null"))
                    .collect();
                if let [only] = non_null.as_slice() {
                    let (e, inner_def) = self.expect(only);
                    return (e, inner_def.or(def));
                }
                return (Expect::Any, def);
            }
        }
        if let Some(values) = node.get("enum").and_then(Json::as_array) {
            return (
                Expect::Enum(values.iter().filter_map(Json::as_str).collect()),
                def,
            );
        }
        if let Some(c) = node.get("const").and_then(Json::as_str) {
            return (Expect::Enum(vec![c]), def);
        }
        let ty = match node.get("type") {
            Some(Json::String(t)) => Some(t.as_str()),
            Some(Json::Array(ts)) => ts.iter().filter_map(Json::as_str).find(|t| *t != "null"),
            _ => None,
        };
        let e = match ty {
            Some("object") => Expect::Object(node),
            Some("array") => Expect::Array(node.get("items")),
            Some("string") => Expect::String,
            Some("integer") => Expect::Integer {
                min: node.get("minimum").and_then(Json::as_i64),
                max: node.get("maximum").and_then(Json::as_i64),
            },
            Some("number") => Expect::Number,
            Some("boolean") => Expect::Boolean,
            _ => Expect::Any,
        };
        (e, def)
    }

    fn item(&mut self, item: &Item, schema: &'s Json, here: &Here) {
        match item {
            Item::None => {}
            Item::Value(v) => self.value(v, schema, here),
            Item::Table(t) => self.table_like(t, t.span().as_ref(), schema, here),
            Item::ArrayOfTables(aot) => {
                let (expect, _) = self.expect(schema);
                let Expect::Array(items) = expect else {
                    self.wrong_type(&expect, "an array of tables", here);
                    return;
                };
                for (i, table) in aot.iter().enumerate() {
                    let h = Here {
                        path: here.path.index(i),
                        key: None,
                        value: table.span(),
                    };
                    if let Some(items) = items {
                        self.table_like(table, table.span().as_ref(), items, &h);
                    }
                }
            }
        }
    }

    fn table_like(
        &mut self,
        table: &dyn toml_edit::TableLike,
        span: Option<&Range<usize>>,
        schema: &'s Json,
        here: &Here,
    ) {
        let (expect, _) = self.expect(schema);
        let Expect::Object(obj) = expect else {
            if matches!(expect, Expect::Array(_)) {
                self.push(
                    Problem::new(
                        ProblemKind::WrongType,
                        self.src,
                        here.span(),
                        format!(
                            "`{}` must be an array of tables, not a single table",
                            here.path
                        ),
                        "expected an array",
                    )
                    .help(format!(
                        "write each entry under a `[[{}]]` header (double brackets)",
                        here.path
                    )),
                );
                return;
            }
            self.wrong_type(&expect, "a table", here);
            return;
        };
        let props = obj.get("properties").and_then(Json::as_object);
        let additional = obj.get("additionalProperties");
        for (key, child) in table.iter() {
            let key_span = table.get_key_value(key).and_then(|(k, _)| k.span());
            let h = Here {
                path: here.path.key(key),
                key: key_span,
                value: child.span(),
            };
            if let Some(child_schema) = props.and_then(|p| p.get(key)) {
                self.item(child, child_schema, &h);
            } else {
                match additional {
                    Some(Json::Bool(false)) => self.unknown_key(key, props, &h, here),
                    Some(s @ Json::Object(_)) => self.item(child, s, &h),
                    _ => {}
                }
            }
        }
        let required = obj.get("required").and_then(Json::as_array);
        for name in required.into_iter().flatten().filter_map(Json::as_str) {
            if table.get(name).is_none() {
                let anchor = Here {
                    path: here.path.clone(),
                    key: here.key.clone(),
                    value: span.cloned(),
                };
                self.missing_key(name, props.and_then(|p| p.get(name)), &anchor);
            }
        }
    }

    fn value(&mut self, value: &Value, schema: &'s Json, here: &Here) {
        let (expect, def) = self.expect(schema);
        match (&expect, value) {
            (Expect::Any, _)
            | (Expect::String, Value::String(_))
            | (Expect::Boolean, Value::Boolean(_))
            | (Expect::Number, Value::Float(_) | Value::Integer(_)) => {}
            (Expect::Integer { min, max }, Value::Integer(i)) => {
                let n = *i.value();
                let below = min.is_some_and(|m| n < m);
                let above = max.is_some_and(|m| n > m);
                if below || above {
                    let range = match (min, max) {
                        (Some(a), Some(b)) => format!("between {a} and {b}"),
                        (Some(a), None) => format!("at least {a}"),
                        (None, Some(b)) => format!("at most {b}"),
                        (None, None) => String::new(),
                    };
                    self.push(
                        Problem::new(
                            ProblemKind::InvalidValue,
                            self.src,
                            here.span(),
                            format!("`{}` is out of range", here.path),
                            format!("must be {range}"),
                        )
                        .help(format!("use a whole number {range}")),
                    );
                }
            }
            (Expect::Enum(allowed), Value::String(s)) => {
                let found = s.value();
                if !allowed.contains(&found.as_str()) {
                    self.bad_enum(found, allowed, def, here);
                }
            }
            (Expect::Object(_), Value::InlineTable(t)) => {
                self.table_like(t, t.span().as_ref(), schema, here);
            }
            (Expect::Array(items), Value::Array(arr)) => {
                if let Some(items) = items {
                    for (i, v) in arr.iter().enumerate() {
                        let h = Here {
                            path: here.path.index(i),
                            key: None,
                            value: v.span(),
                        };
                        self.value(v, items, &h);
                    }
                }
            }
            (Expect::Enum(_), Value::InlineTable(_)) if def == Some("Harness") => {
                self.push(
                    Problem::new(
                        ProblemKind::WrongType,
                        self.src,
                        here.span(),
                        format!("`{}` must be a harness id, not a table", here.path),
                        "expected a harness id",
                    )
                    .help(
                        "list harnesses by id, for example `harnesses = [\"claude\", \"codex\"]`; \
                         the `{ harness = ..., enable = ... }` form of the original tool is not used",
                    ),
                );
            }
            _ => self.wrong_type(&expect, describe(value), here),
        }
    }

    fn push(&mut self, p: Problem) {
        self.problems.push(p);
    }

    fn wrong_type(&mut self, expect: &Expect<'_>, found: &str, here: &Here) {
        let (wanted, example) = match expect {
            Expect::Object(_) => ("a table", "`[name]` header or `{ key = \"value\" }`"),
            Expect::Array(_) => ("an array", "`[\"a\", \"b\"]`"),
            Expect::String | Expect::Enum(_) => ("a string", "`\"text\"` (with quotes)"),
            Expect::Integer { .. } => ("an integer", "`1000` (without quotes)"),
            Expect::Number => ("a number", "`1.5`"),
            Expect::Boolean => ("a boolean", "`true` or `false` (without quotes)"),
            Expect::Any => return,
        };
        let mut help = format!("write {wanted}, for example {example}");
        if let Expect::Enum(allowed) = expect {
            help = format!("write one of {} as a quoted string", list(allowed));
        }
        self.push(
            Problem::new(
                ProblemKind::WrongType,
                self.src,
                here.span(),
                format!("`{}` must be {wanted}, not {found}", here.path),
                format!("expected {wanted}"),
            )
            .help(help),
        );
    }

    fn bad_enum(&mut self, found: &str, allowed: &[&str], def: Option<&str>, here: &Here) {
        let closest = closest(found, allowed.iter().copied());
        if def == Some("Harness") {
            let alias = HARNESS_ALIASES
                .iter()
                .find(|(a, _)| *a == found)
                .map(|(_, to)| *to);
            let hint = alias.or(closest).map_or_else(
                || format!("supported harnesses: {}", list(allowed)),
                |c| {
                    format!(
                        "did you mean \"{c}\"? supported harnesses: {}",
                        list(allowed)
                    )
                },
            );
            self.push(
                Problem::new(
                    ProblemKind::UnknownHarness,
                    self.src,
                    here.span(),
                    format!("unknown harness \"{found}\" in `{}`", here.path.parent()),
                    "not a harness aibox supports",
                )
                .help(hint),
            );
            return;
        }
        let hint = closest.map_or_else(
            || format!("use one of {}", list(allowed)),
            |c| format!("did you mean \"{c}\"? allowed values: {}", list(allowed)),
        );
        self.push(
            Problem::new(
                ProblemKind::InvalidValue,
                self.src,
                here.span(),
                format!("`{}` does not accept \"{found}\"", here.path),
                format!("must be one of {}", list(allowed)),
            )
            .help(hint),
        );
    }

    fn unknown_key(
        &mut self,
        key: &str,
        props: Option<&serde_json::Map<String, Json>>,
        here: &Here,
        table: &Here,
    ) {
        let valid: Vec<&str> = props
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let where_ = if table.path.0.is_empty() {
            "at the top level".to_owned()
        } else {
            format!("in `[{}]`", table.path)
        };
        let table_name = table.path.to_string();
        let alias = KEY_ALIASES
            .iter()
            .find(|(t, k, _)| *t == table_name && *k == key);
        let help = if let Some((_, _, new)) = alias {
            format!("aibox calls this `{new}`; rename the key")
        } else if let (Some(hint), true) = (self.top_level_hint, table.path.0.is_empty()) {
            hint.to_owned()
        } else if self.top_level_hint.is_some() && team_setting(&table_name, key) {
            // The personal overlay: a key of the same table in aibox.toml is a team
            // setting, whatever key of the overlay it happens to resemble.
            let mut help = format!(
                "`{table_name}.{key}` is a team setting: set it in aibox.toml (`aibox config \
                 set {table_name}.{key} VALUE`)"
            );
            if table_name == "container" && key == "name" {
                help.push_str("; `container_name` in this file names the container for you alone");
            }
            help
        } else if self.top_level_hint.is_none() && personal_setting(&table_name, key) {
            // The team file: a key of the personal overlay's table is not a typo.
            let dotted = if table_name.is_empty() {
                key.to_owned()
            } else {
                format!("{table_name}.{key}")
            };
            format!(
                "`{dotted}` is a personal setting: it goes in .aibox-local.toml (`aibox config \
                 set --local {dotted} VALUE`), never in the committed aibox.toml"
            )
        } else if let Some(c) = closest(key, valid.iter().copied()) {
            format!("did you mean `{c}`? valid keys {where_}: {}", ticks(&valid))
        } else if let Some(elsewhere) = self.find_elsewhere(key) {
            if elsewhere.is_empty() {
                format!(
                    "`{key}` is a top-level setting (`[{key}]`), not one {where_}: write it as \
                     its own `[{key}]` table, or before the first table header"
                )
            } else {
                format!("`{key}` belongs in `[{elsewhere}]`, not {where_}")
            }
        } else if valid.is_empty() {
            format!("remove `{key}`; no keys are allowed {where_}")
        } else {
            format!("remove it; valid keys {where_}: {}", ticks(&valid))
        };
        self.push(
            Problem::new(
                ProblemKind::UnknownKey,
                self.src,
                here.key_span(),
                format!("unknown key `{}`", here.path),
                "not a known key",
            )
            .help(help),
        );
    }

    /// The table (dotted path) where a key of this exact name is valid, if any.
    fn find_elsewhere(&self, key: &str) -> Option<String> {
        let mut found = Vec::new();
        self.collect_paths(self.root, &mut Vec::new(), key, &mut found, 0);
        found.sort();
        found.into_iter().next()
    }

    fn collect_paths(
        &self,
        schema: &'s Json,
        prefix: &mut Vec<String>,
        key: &str,
        out: &mut Vec<String>,
        depth: usize,
    ) {
        if depth > 6 {
            return;
        }
        let (expect, _) = self.expect(schema);
        let obj = match expect {
            Expect::Object(o) => o,
            Expect::Array(Some(items)) => match self.expect(items).0 {
                Expect::Object(o) => o,
                _ => return,
            },
            _ => return,
        };
        let Some(props) = obj.get("properties").and_then(Json::as_object) else {
            return;
        };
        for (name, child) in props {
            // A top-level key is found too (as ""): `[network]` is the first guess for a
            // `network` line written under another table.
            if name == key {
                out.push(prefix.join("."));
            }
            prefix.push(name.clone());
            self.collect_paths(child, prefix, key, out, depth + 1);
            prefix.pop();
        }
    }

    fn missing_key(&mut self, name: &str, schema: Option<&'s Json>, table: &Here) {
        let full = table.path.key(name);
        let header = if table.path.0.is_empty() {
            "at the top of the file".to_owned()
        } else {
            format!("under `[{}]`", table.path)
        };
        let example = match schema.map(|s| self.expect(s).0) {
            Some(Expect::Object(_)) => format!("add a `[{full}]` table"),
            Some(Expect::Integer { .. }) => format!("add `{name} = 1` {header}"),
            Some(Expect::Boolean) => format!("add `{name} = true` {header}"),
            _ => format!("add `{name} = \"...\"` {header}"),
        };
        let span = if table.path.0.is_empty() {
            SourceSpan::from(0..0)
        } else {
            table.key_span()
        };
        self.push(
            Problem::new(
                ProblemKind::MissingKey,
                self.src,
                span,
                format!("required key `{full}` is missing"),
                format!("`{name}` is required here"),
            )
            .help(example),
        );
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::InlineTable(_) => "a table",
    }
}

fn list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ticks(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The harness id `given` most likely meant: an alias of the original tool or a typo.
pub(crate) fn harness_suggestion(given: &str) -> Option<&'static str> {
    HARNESS_ALIASES
        .iter()
        .find(|(a, _)| *a == given)
        .map(|(_, to)| *to)
        .or_else(|| closest(given, crate::model::Harness::ALL.iter().map(|h| h.as_str())))
}

/// The candidate closest to `word`, when it is close enough to be a plausible typo
/// (Jaro-Winkler, case-insensitive): the one "did you mean" rule of aibox.
pub fn closest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .map(|c| (strsim::jaro_winkler(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, c)| c)
}

/// Whether `key` is a key of the table `table` (dotted path) in `aibox.toml`.
fn team_setting(table: &str, key: &str) -> bool {
    schema_has(&crate::schema::AIBOX_SCHEMA, crate::AIBOX_TOML, table, key)
}

/// Whether `key` is a key of the table `table` (dotted path) in `.aibox-local.toml`.
fn personal_setting(table: &str, key: &str) -> bool {
    schema_has(&crate::schema::LOCAL_SCHEMA, crate::LOCAL_TOML, table, key)
}

fn schema_has(schema: &Json, name: &str, table: &str, key: &str) -> bool {
    let src = crate::diag::source(name, "");
    let walker = Walker {
        root: schema,
        src: &src,
        problems: Vec::new(),
        top_level_hint: None,
    };
    let mut found = Vec::new();
    walker.collect_paths(walker.root, &mut Vec::new(), key, &mut found, 0);
    found.iter().any(|t| t == table)
}
