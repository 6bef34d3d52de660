//! `aibox config get KEY`: the effective value (defaults filled in), with a suggestion
//! when the key does not exist.
//!
//! Values come from the validated configuration serialised to JSON, so a default the
//! user never wrote is shown as aibox uses it. Whether a key exists is decided by the JSON
//! Schema of `aibox.toml`, which also supplies the suggestions for a typo.

use camino::{Utf8Path, Utf8PathBuf};
use miette::Diagnostic;
use serde_json::Value;

use crate::{AIBOX_TOML, ConfigError, ErrorKind, LOCAL_TOML};

/// Why `get` has no value to show.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum GetError {
    /// `aibox.toml` cannot be read or is invalid.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Config(Box<ConfigError>),

    /// A valid key with no value and no default.
    #[error("`{key}` is not set in {path}")]
    #[diagnostic(code(aibox::config::key_not_set), help("{help}"))]
    KeyNotSet {
        /// The key.
        key: String,
        /// The file.
        path: Utf8PathBuf,
        /// How to set it: `config set`, or the command that edits a list of tables.
        help: String,
    },

    /// Not a key of the file asked.
    #[error("`{at}` is not a key of {file}")]
    #[diagnostic(code(aibox::config::unknown_key), help("{help}"))]
    UnknownKey {
        /// The dotted prefix up to the bad segment.
        at: String,
        /// The file: `aibox.toml` or `.aibox-local.toml`.
        file: &'static str,
        /// A suggestion.
        help: String,
    },
}

impl GetError {
    /// Who can fix it: the configuration's own kind, else the user.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Config(e) => e.kind(),
            Self::KeyNotSet { .. } | Self::UnknownKey { .. } => ErrorKind::User,
        }
    }
}

/// The effective value at the dotted `key` of the project's `aibox.toml` at `root`
/// (defaults included; `.aibox-local.toml` is not consulted: see [`get_local`]).
pub fn get(root: &Utf8Path, key: &str) -> Result<Value, GetError> {
    let path = root.join(AIBOX_TOML);
    let config_error = |e: ConfigError| GetError::Config(Box::new(e));
    let text = crate::load::read_team(root).map_err(config_error)?;
    let mut config = crate::parse_aibox_toml(&text, AIBOX_TOML).map_err(config_error)?;
    with_derived_defaults(&mut config);
    // The model always serialises; a failure would leave `Null`, reported as unset.
    let effective = serde_json::to_value(&config).unwrap_or(Value::Null);
    let schema = crate::schema::aibox_toml_schema();
    match lookup(&effective, &schema, key) {
        Lookup::Value(v) => Ok(v),
        Lookup::Unset => Err(GetError::KeyNotSet {
            help: if key.trim() == "ai.mcp.servers" {
                // A list of tables is not one value `config set` could take.
                "add a server with `aibox mcp add NAME -- COMMAND ARGS...` (or `--url URL`)"
                    .to_owned()
            } else {
                format!("it has no default; set it with `aibox config set {key} VALUE`")
            },
            key: key.to_owned(),
            path,
        }),
        Lookup::Unknown { at, suggestion } => {
            // A personal key asked of the team file: say where it lives.
            let local = crate::schema::local_toml_schema();
            let help = if matches!(
                lookup(&Value::Null, &local, key),
                Lookup::Value(_) | Lookup::Unset
            ) {
                format!(
                    "`{key}` is a key of the personal {LOCAL_TOML}: read it with `aibox config \
                     get --local {key}`"
                )
            } else {
                suggestion.map_or_else(
                    || "`aibox config schema` lists every key".to_owned(),
                    |s| format!("did you mean `{s}`? (`aibox config schema` lists every key)"),
                )
            };
            Err(GetError::UnknownKey {
                at,
                file: AIBOX_TOML,
                help,
            })
        }
    }
}

/// The value at the dotted `key` of the project's personal `.aibox-local.toml` at `root`,
/// as written there (the file has no defaults of its own: an absent key is unset).
///
/// # Errors
/// The file is unreadable or invalid, the key is not one of the personal file, or it is
/// not set.
pub fn get_local(root: &Utf8Path, key: &str) -> Result<Value, GetError> {
    let path = root.join(LOCAL_TOML);
    let config_error = |e: ConfigError| GetError::Config(Box::new(e));
    // Only a project's personal file: the team file must be there.
    crate::load::read_team(root).map_err(config_error)?;
    let local = if path.symlink_metadata().is_ok() {
        let text = crate::read_config_file(&path, LOCAL_TOML).map_err(config_error)?;
        crate::parse_local_toml(&text, LOCAL_TOML).map_err(config_error)?
    } else {
        crate::LocalToml::default()
    };
    let written = serde_json::to_value(&local).unwrap_or(Value::Null);
    let schema = crate::schema::local_toml_schema();
    match lookup(&written, &schema, key) {
        Lookup::Value(v) if !v.is_null() => Ok(v),
        Lookup::Value(_) | Lookup::Unset => Err(GetError::KeyNotSet {
            help: format!("set it with `aibox config set --local {key} VALUE`"),
            key: key.to_owned(),
            path,
        }),
        Lookup::Unknown { at, suggestion } => Err(GetError::UnknownKey {
            at,
            file: LOCAL_TOML,
            help: suggestion.map_or_else(
                || "`aibox config schema --local` lists every key".to_owned(),
                |s| format!("did you mean `{s}`? (`aibox config schema --local` lists every key)"),
            ),
        }),
    }
}

/// Sets the keys whose default is another key's value (the model keeps them unset and
/// its users read them through): to the value those users get, from the same accessors.
fn with_derived_defaults(config: &mut crate::AiboxToml) {
    config.container.hostname = Some(config.container.hostname().to_owned());
    config.container.gid = Some(config.container.gid());
    if config.aibox.project_name.is_none() {
        config.aibox.project_name = Some(config.container.name.clone());
    }
}

/// What `get` found at a key.
#[derive(Debug, PartialEq)]
pub enum Lookup {
    /// The effective value.
    Value(Value),
    /// A valid key with no value and no default (for example `processkit.version`).
    Unset,
    /// Not a key of `aibox.toml`; `suggestion` is the closest valid spelling, if any.
    Unknown {
        /// Where the path stopped matching (the dotted prefix including the bad segment).
        at: String,
        /// A close valid key at that level.
        suggestion: Option<String>,
    },
}

/// Looks `key` up in `effective` (the serialised configuration), checking it against
/// `schema` (the JSON Schema of `aibox.toml`).
pub fn lookup(effective: &Value, schema: &Value, key: &str) -> Lookup {
    let segs: Vec<&str> = key.split('.').collect();
    let mut node = Some(schema);
    let mut last = schema;
    for (i, seg) in segs.iter().enumerate() {
        let Some(current) = node.map(|n| resolve(schema, n)) else {
            break;
        };
        node = child(schema, current, seg);
        if let Some(n) = node {
            last = n;
        }
        if node.is_none() {
            let at = segs[..=i].join(".");
            let prefix = segs[..i].join(".");
            let suggestion = names(schema, current)
                .into_iter()
                .map(|n| (strsim::jaro_winkler(seg, &n), n))
                .filter(|(score, _)| *score > 0.8)
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, n)| {
                    if prefix.is_empty() {
                        n
                    } else {
                        format!("{prefix}.{n}")
                    }
                });
            return Lookup::Unknown { at, suggestion };
        }
    }
    let mut value = Some(effective);
    for seg in &segs {
        value = value.and_then(|v| match v {
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            other => other.get(*seg),
        });
    }
    // A section left out of the serialised model when it is all defaults (`[network]`)
    // has its keys' defaults in the schema.
    let schema_default = || {
        [last, resolve(schema, last)]
            .into_iter()
            .find_map(|n| n.get("default").filter(|d| !d.is_null()))
    };
    value
        .filter(|v| !v.is_null())
        .or_else(schema_default)
        .cloned()
        .map_or(Lookup::Unset, Lookup::Value)
}

/// The raw text of a value: strings without quotes, everything else as JSON.
pub fn raw(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    }
}

/// Follows `$ref`s and picks the object-like branch of `anyOf`/`oneOf`/`allOf`.
fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    let mut node = node;
    for _ in 0..16 {
        if let Some(name) = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            && let Some(def) = root.get("$defs").and_then(|d| d.get(name))
        {
            node = def;
            continue;
        }
        let branch = ["anyOf", "oneOf", "allOf"].iter().find_map(|k| {
            node.get(*k)?.as_array()?.iter().find(|b| {
                b.get("$ref").is_some() || b.get("properties").is_some() || b.get("items").is_some()
            })
        });
        match branch {
            Some(b) => node = b,
            None => return node,
        }
    }
    node
}

/// The schema node of `seg` under `node`: a named property, a map entry, or an array item.
fn child<'a>(root: &'a Value, node: &'a Value, seg: &str) -> Option<&'a Value> {
    if let Some(p) = node.get("properties").and_then(|p| p.get(seg)) {
        return Some(p);
    }
    if let Some(extra) = node.get("additionalProperties").filter(|a| a.is_object()) {
        return Some(extra);
    }
    if seg.parse::<usize>().is_ok()
        && let Some(items) = node.get("items")
    {
        return Some(resolve(root, items));
    }
    None
}

fn names(_root: &Value, node: &Value) -> Vec<String> {
    node.get("properties")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effective(text: &str) -> Value {
        serde_json::to_value(crate::parse_aibox_toml(text, "aibox.toml").unwrap()).unwrap()
    }

    /// [`effective`] with the derived defaults, as `get` reads the file.
    fn effective_derived(text: &str) -> Value {
        let mut config = crate::parse_aibox_toml(text, "aibox.toml").unwrap();
        with_derived_defaults(&mut config);
        serde_json::to_value(&config).unwrap()
    }

    /// QA: `processkit.review` said "it has no default" where the docs say
    /// `third-party`; the consents and `allow_unverified` read `false` when unset.
    #[test]
    fn keys_left_out_at_their_default_read_as_that_default() {
        let schema = crate::schema::aibox_toml_schema();
        let cfg = effective_derived("[container]\nname = \"demo\"\n");
        for (key, value) in [
            ("processkit.review", Value::from("third-party")),
            ("processkit.allow_unverified", Value::from(false)),
            (
                "security.acknowledge_seccomp_unconfined",
                Value::from(false),
            ),
            ("security.acknowledge_seccomp_profile", Value::from(false)),
        ] {
            assert_eq!(lookup(&cfg, &schema, key), Lookup::Value(value), "{key}");
        }
        // The schema states the model's own default (its serialisation leaves it out).
        assert_eq!(
            lookup(&Value::Null, &schema, "processkit.review"),
            Lookup::Value(serde_json::to_value(crate::model::ReviewScope::default()).unwrap())
        );
        let cfg =
            effective_derived("[container]\nname = \"demo\"\n[processkit]\nreview = \"all\"\n");
        assert_eq!(
            lookup(&cfg, &schema, "processkit.review"),
            Lookup::Value("all".into())
        );
    }

    #[test]
    fn effective_values_typos_and_unset_keys() {
        let schema = crate::schema::aibox_toml_schema();
        let cfg =
            effective("[container]\nname = \"demo\"\n[container.environment]\nLANG = \"C\"\n");
        assert_eq!(
            lookup(&cfg, &schema, "container.name"),
            Lookup::Value("demo".into())
        );
        // A default the file never states.
        assert!(matches!(
            lookup(&cfg, &schema, "container.user"),
            Lookup::Value(Value::String(_))
        ));
        assert_eq!(
            lookup(&cfg, &schema, "container.environment.LANG"),
            Lookup::Value("C".into())
        );
        assert_eq!(lookup(&cfg, &schema, "processkit.version"), Lookup::Unset);
        assert_eq!(
            lookup(&cfg, &schema, "container.usr"),
            Lookup::Unknown {
                at: "container.usr".into(),
                suggestion: Some("container.user".into())
            }
        );
        assert!(matches!(
            lookup(&cfg, &schema, "contaner.name"),
            Lookup::Unknown { suggestion: Some(s), .. } if s == "container"
        ));
        assert_eq!(raw(&Value::from("x y")), "x y");
    }

    /// Documented defaults are values, also when derived from another key or when the
    /// whole section is left out because it is all defaults.
    #[test]
    fn documented_defaults_are_values() {
        let schema = crate::schema::aibox_toml_schema();
        let cfg = effective_derived("[container]\nname = \"demo\"\nuid = 1234\n");
        for (key, value) in [
            ("network.egress", Value::from("open")),
            ("container.hostname", Value::from("demo")),
            ("container.gid", Value::from(1234)),
            ("aibox.project_name", Value::from("demo")),
        ] {
            assert_eq!(lookup(&cfg, &schema, key), Lookup::Value(value), "{key}");
        }
        let cfg = effective_derived(
            "[container]\nname = \"demo\"\nhostname = \"box\"\ngid = 7\n[network]\negress = \"none\"\n",
        );
        assert_eq!(
            lookup(&cfg, &schema, "container.hostname"),
            Lookup::Value("box".into())
        );
        assert_eq!(
            lookup(&cfg, &schema, "container.gid"),
            Lookup::Value(7.into())
        );
        assert_eq!(
            lookup(&cfg, &schema, "network.egress"),
            Lookup::Value("none".into())
        );
        assert_eq!(raw(&Value::from(1000)), "1000");
    }
}
