//! Locked Python environments for MCP servers that declare their dependencies in a
//! PEP 723 `# /// script` block.
//!
//! Real processkit servers declare floating ranges (`mcp[cli]>=1.0`); resolved at start
//! they pick whatever is newest, which broke every server when `mcp` 2.0 renamed a
//! module. So aibox resolves each distinct set of declared dependencies once, as of the
//! release's date (`exclude-newer`), records every pinned requirement with its hashes in
//! `aibox.lock` (`[mcp]`), and the image installs exactly that with `--require-hashes`.
//! (Team servers started with `npx` are locked the same way: [`crate::npmdeps`].)
//!
//! This module is pure: parsing the block, naming an environment, reading the resolver's
//! output into lock entries and rendering the requirements file the image build reads.
//! Running the resolver is the engine's job.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::digest::Sha256;

/// Where the generated Dockerfile installs the environment `id`.
pub fn env_dir(id: &str) -> String {
    format!("{}/{id}", aibox_config::container::MCP_ENVS_DIR)
}

/// The interpreter of the environment `id`: what a locked server is started with.
pub fn env_python(id: &str) -> String {
    format!("{}/bin/python", env_dir(id))
}

/// The dependencies a script declares in its PEP 723 `script` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptDeps {
    /// `requires-python`, as written.
    pub requires_python: Option<String>,
    /// `dependencies`, as written.
    pub dependencies: Vec<String>,
}

/// The `# /// script` block of `text`: `Ok(None)` when there is none or it declares no
/// dependencies; an error (one sentence) when the block is malformed.
///
/// # Errors
/// An unclosed block, a line inside it that is not a comment, invalid TOML, or a
/// `dependencies` value that is not a list of strings.
pub fn script_deps(text: &str) -> Result<Option<ScriptDeps>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines.iter().position(|l| l.trim_end() == "# /// script") else {
        return Ok(None);
    };
    let Some(len) = lines[start + 1..]
        .iter()
        .position(|l| l.trim_end() == "# ///")
    else {
        return Err("its `# /// script` block is never closed by `# ///`".to_owned());
    };
    let mut body = String::new();
    for (i, line) in lines[start + 1..start + 1 + len].iter().enumerate() {
        let content = if *line == "#" {
            ""
        } else if let Some(rest) = line.strip_prefix("# ") {
            rest
        } else {
            return Err(format!(
                "line {} inside its `# /// script` block is not a `#` comment",
                start + 2 + i
            ));
        };
        body.push_str(content);
        body.push('\n');
    }
    let doc: toml::Table = toml::from_str(&body).map_err(|e| {
        format!(
            "its `# /// script` block is not valid TOML: {}",
            e.message()
        )
    })?;
    let requires_python = match doc.get("requires-python") {
        None => None,
        Some(toml::Value::String(s)) => Some(s.trim().to_owned()),
        Some(_) => return Err("its `requires-python` is not a string".to_owned()),
    };
    let dependencies = match doc.get("dependencies") {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(|s| s.trim().to_owned()).ok_or_else(|| {
                    "its `dependencies` holds a value that is not a string".to_owned()
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err("its `dependencies` is not a list".to_owned()),
    };
    if dependencies.is_empty() {
        return Ok(None);
    }
    Ok(Some(ScriptDeps {
        requires_python,
        dependencies,
    }))
}

/// What an environment is resolved from. Two servers with the same spec share one
/// environment; the spec's digest names it, so a changed spec is a new environment and
/// an unchanged one is never resolved again.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EnvSpec {
    /// `requires-python`, if declared.
    pub requires_python: Option<String>,
    /// Declared requirements, trimmed, sorted and deduplicated.
    pub dependencies: Vec<String>,
    /// Upload-time cutoff (RFC 3339): the release's date, so a floating range resolves to
    /// what its authors ran. `None` when the release does not say when it was made.
    pub exclude_newer: Option<String>,
}

impl EnvSpec {
    /// The spec of a script's declaration with a cutoff.
    pub fn new(deps: &ScriptDeps, exclude_newer: Option<&str>) -> Self {
        let dependencies: BTreeSet<String> = deps
            .dependencies
            .iter()
            .map(|d| d.trim().to_owned())
            .collect();
        Self {
            requires_python: deps.requires_python.clone(),
            dependencies: dependencies.into_iter().collect(),
            exclude_newer: exclude_newer.map(str::to_owned),
        }
    }

    /// The environment's name: 12 hex digits of the SHA-256 of the spec.
    pub fn id(&self) -> String {
        let mut text = String::new();
        let _ = writeln!(
            text,
            "requires-python={}",
            self.requires_python.as_deref().unwrap_or("")
        );
        let _ = writeln!(
            text,
            "exclude-newer={}",
            self.exclude_newer.as_deref().unwrap_or("")
        );
        for d in &self.dependencies {
            let _ = writeln!(text, "{d}");
        }
        Sha256::of(text.as_bytes()).to_hex()[..12].to_owned()
    }

    /// The lowest Python the resolution must hold for: the `>=` bound of
    /// `requires-python` (`>=3.10` gives `3.10`, and `>=3.8.1` keeps its patch level:
    /// resolved for 3.8.0, such a release has no solution), else 3.10.
    pub fn python_floor(&self) -> String {
        self.requires_python
            .as_deref()
            .and_then(|r| {
                r.split(',').find_map(|part| {
                    let v = part.trim().strip_prefix(">=")?.trim();
                    let mut it = v.split('.');
                    let major: u32 = it.next()?.parse().ok()?;
                    let minor: u32 = it.next().unwrap_or("0").parse().ok()?;
                    match it.next().map(str::parse::<u32>) {
                        Some(Ok(patch)) if patch > 0 => Some(format!("{major}.{minor}.{patch}")),
                        Some(Err(_)) => None,
                        _ => Some(format!("{major}.{minor}")),
                    }
                })
            })
            .unwrap_or_else(|| "3.10".to_owned())
    }
}

/// `[mcp]` of `aibox.lock`: the locked environments of the registered MCP servers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpLock {
    /// `[mcp.environments.<id>]`, by [`EnvSpec::id`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environments: BTreeMap<String, EnvLock>,
    /// `[mcp.hashes]`: `name==version` → every `sha256:<hex>` the index lists for it
    /// (shared between environments, so each package's list is written once).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hashes: BTreeMap<String, Vec<String>>,
    /// `[mcp.npm.<id>]`, by [`crate::npmdeps::NpmSpec::id`]: the locked package trees of
    /// team servers started with `npx`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub npm: BTreeMap<String, crate::npmdeps::NpmLock>,
}

impl McpLock {
    /// Whether it locks nothing (no `[mcp]` in the lock then).
    pub fn is_empty(&self) -> bool {
        self.environments.is_empty() && self.hashes.is_empty() && self.npm.is_empty()
    }

    /// Adds `other`'s Python environments and hashes (its npm trees are not touched).
    /// A package pinned by both keeps every hash either lists: two resolutions with
    /// different upload cutoffs list different files of one version (a wheel uploaded
    /// after the earlier cutoff), and each of them is the index's file.
    pub fn add_environments(&mut self, other: &McpLock) {
        self.environments.extend(
            other
                .environments
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        for (key, list) in &other.hashes {
            let mine = self.hashes.entry(key.clone()).or_default();
            mine.extend(list.iter().cloned());
            mine.sort_unstable();
            mine.dedup();
        }
    }
}

/// One locked environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvLock {
    /// The declared `requires-python`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_python: Option<String>,
    /// The declared requirements (sorted).
    pub dependencies: Vec<String>,
    /// The upload-time cutoff it was resolved with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_newer: Option<String>,
    /// The resolver that produced it (`uv 0.13.9`).
    pub resolver: String,
    /// The servers started with it (sorted).
    pub servers: Vec<String>,
    /// Every pinned requirement, `name==version` with its environment marker when it
    /// has one (`rpds-py==0.30.0 ; python_full_version < '3.11'`), in resolver order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<String>,
    /// Set when the declaration has no solution (the resolver's reason): its servers are
    /// not registered, and the same declaration is not resolved again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresolvable: Option<String>,
}

impl EnvLock {
    /// The spec this entry was resolved from.
    pub fn spec(&self) -> EnvSpec {
        EnvSpec {
            requires_python: self.requires_python.clone(),
            dependencies: self.dependencies.clone(),
            exclude_newer: self.exclude_newer.clone(),
        }
    }
}

/// A resolution read from the resolver's output: pinned requirements and their hashes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolution {
    /// As [`EnvLock::requirements`].
    pub requirements: Vec<String>,
    /// `name==version` → `sha256:<hex>` list.
    pub hashes: BTreeMap<String, Vec<String>>,
}

/// `name==version` of a requirement line (its marker dropped).
pub fn requirement_key(requirement: &str) -> &str {
    requirement.split(';').next().unwrap_or(requirement).trim()
}

/// Reads a hash-pinned requirements file (`uv pip compile --generate-hashes` output):
/// every requirement must be pinned with `==` and carry at least one `sha256` hash.
///
/// # Errors
/// A requirement that is not `name==version`, one without a hash, a hash that is not
/// SHA-256, or an option line other than `--hash` (one sentence, naming the line).
pub fn parse_requirements(text: &str) -> Result<Resolution, String> {
    let mut out = Resolution::default();
    let mut current: Option<(String, Vec<String>)> = None;
    let finish = |entry: Option<(String, Vec<String>)>, out: &mut Resolution| {
        let Some((req, hashes)) = entry else {
            return Ok(());
        };
        if hashes.is_empty() {
            return Err(format!("`{req}` has no hash"));
        }
        let key = requirement_key(&req).to_owned();
        let list = out.hashes.entry(key).or_default();
        for h in hashes {
            if !list.contains(&h) {
                list.push(h);
            }
        }
        list.sort();
        out.requirements.push(req);
        Ok(())
    };
    for raw in text.lines() {
        let line = raw.trim_end().trim_end_matches('\\').trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(hash) = line.strip_prefix("--hash=") {
            let Some(hex) = hash.strip_prefix("sha256:") else {
                return Err(format!("`{line}` is not a SHA-256 hash"));
            };
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("`{line}` is not a SHA-256 hash"));
            }
            let Some((_, hashes)) = current.as_mut() else {
                return Err(format!("`{line}` follows no requirement"));
            };
            hashes.push(format!("sha256:{}", hex.to_ascii_lowercase()));
            continue;
        }
        if line.starts_with('-') {
            return Err(format!("`{line}` is an option aibox does not accept here"));
        }
        finish(current.take(), &mut out)?;
        let key = requirement_key(line);
        let pinned = key.split_once("==").is_some_and(|(name, version)| {
            !name.trim().is_empty()
                && !version.trim().is_empty()
                && !version.contains(['*', ',', '=', '<', '>', '@', ' '])
        });
        if !pinned {
            return Err(format!("`{line}` is not pinned to one version"));
        }
        current = Some((line.to_owned(), Vec::new()));
    }
    finish(current.take(), &mut out)?;
    if out.requirements.is_empty() {
        return Err("the resolution pins no package".to_owned());
    }
    Ok(out)
}

/// The requirement lines of the file the image build installs with `--require-hashes`,
/// rendered from the lock (the generator adds its header): byte-identical for the same
/// entry.
pub fn render_requirements(env: &EnvLock, hashes: &BTreeMap<String, Vec<String>>) -> String {
    let mut out = String::new();
    for req in &env.requirements {
        let list = hashes
            .get(requirement_key(req))
            .map_or(&[][..], Vec::as_slice);
        out.push_str(req);
        for h in list {
            out.push_str(" \\\n    --hash=");
            out.push_str(h);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REAL_HEADER: &str = "#!/usr/bin/env -S uv run\n# /// script\n# requires-python = \">=3.10\"\n# dependencies = [\n#   \"mcp[cli]>=1.0\",\n#   \"pyyaml>=6.0\",\n# ]\n# ///\n\"\"\"doc\"\"\"\n";

    #[test]
    fn reads_a_real_processkit_header() {
        let deps = script_deps(REAL_HEADER).unwrap().unwrap();
        assert_eq!(deps.requires_python.as_deref(), Some(">=3.10"));
        assert_eq!(deps.dependencies, ["mcp[cli]>=1.0", "pyyaml>=6.0"]);
        let spec = EnvSpec::new(&deps, Some("2026-07-23T15:43:27Z"));
        assert_eq!(spec.python_floor(), "3.10");
        assert_eq!(spec.id().len(), 12);
        for (requires, floor) in [
            (">=3.8.1,<4.0", "3.8.1"),
            (">=3.11.0", "3.11"),
            ("<4,>=3.9", "3.9"),
            ("~=3.10", "3.10"),
        ] {
            let spec = EnvSpec {
                requires_python: Some(requires.to_owned()),
                ..spec.clone()
            };
            assert_eq!(spec.python_floor(), floor, "{requires}");
        }
        // Order and spacing of the declaration do not make another environment.
        let other = script_deps(
            "# /// script\n# dependencies = [ \"pyyaml>=6.0\" , \"mcp[cli]>=1.0\"]\n# requires-python = \">=3.10\"\n# ///\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            EnvSpec::new(&other, Some("2026-07-23T15:43:27Z")).id(),
            spec.id()
        );
        assert_ne!(EnvSpec::new(&other, None).id(), spec.id());
    }

    #[test]
    fn no_block_or_no_dependencies_needs_no_environment() {
        assert_eq!(script_deps("import sys\n").unwrap(), None);
        assert_eq!(
            script_deps("# /// script\n# dependencies = []\n# ///\n").unwrap(),
            None
        );
    }

    #[test]
    fn malformed_blocks_are_named() {
        assert!(
            script_deps("# /// script\n# dependencies = []\n")
                .unwrap_err()
                .contains("never closed")
        );
        assert!(
            script_deps("# /// script\ndependencies = []\n# ///\n")
                .unwrap_err()
                .contains("not a `#` comment")
        );
        assert!(
            script_deps("# /// script\n# dependencies = [\n# ///\n")
                .unwrap_err()
                .contains("not valid TOML")
        );
        assert!(
            script_deps("# /// script\n# dependencies = [1]\n# ///\n")
                .unwrap_err()
                .contains("not a string")
        );
    }

    #[test]
    fn resolver_output_round_trips_through_the_lock() {
        let text = "annotated-types==0.7.0 \\\n    --hash=sha256:AAAA000000000000000000000000000000000000000000000000000000000000 \\\n    --hash=sha256:1111000000000000000000000000000000000000000000000000000000000000\nrpds-py==0.30.0 ; python_full_version < '3.11' \\\n    --hash=sha256:2222000000000000000000000000000000000000000000000000000000000000\n";
        let r = parse_requirements(text).unwrap();
        assert_eq!(
            r.requirements,
            [
                "annotated-types==0.7.0",
                "rpds-py==0.30.0 ; python_full_version < '3.11'"
            ]
        );
        assert_eq!(r.hashes["annotated-types==0.7.0"].len(), 2);
        assert!(r.hashes["annotated-types==0.7.0"][1].starts_with("sha256:aaaa"));
        let env = EnvLock {
            requirements: r.requirements.clone(),
            ..EnvLock::default()
        };
        let rendered = render_requirements(&env, &r.hashes);
        let again = parse_requirements(&rendered).unwrap();
        assert_eq!(again, r);
    }

    #[test]
    fn unpinned_or_unhashed_output_is_refused() {
        for (text, want) in [
            ("mcp>=1.0 \\\n    --hash=sha256:", "not pinned"),
            ("mcp==1.2.0\n", "no hash"),
            ("mcp==1.2.0 \\\n    --hash=md5:00\n", "not a SHA-256"),
            ("-e ./local\n", "option"),
            ("git+https://example.invalid/x\n", "not pinned"),
            ("", "pins no package"),
        ] {
            let err = parse_requirements(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn environments_added_keep_every_hash_of_a_shared_pin() {
        let hashes = |pairs: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.iter().map(|h| (*h).to_owned()).collect()))
                .collect()
        };
        let env = |dep: &str| EnvLock {
            dependencies: vec![dep.to_owned()],
            ..EnvLock::default()
        };
        let mut release = McpLock {
            environments: [("a".to_owned(), env("x"))].into(),
            hashes: hashes(&[("pyyaml==6.0.1", &["sha256:1", "sha256:3"])]),
            ..McpLock::default()
        };
        // Resolved with a later cutoff: one more wheel of the same version.
        let team = McpLock {
            environments: [("b".to_owned(), env("y"))].into(),
            hashes: hashes(&[
                ("pyyaml==6.0.1", &["sha256:2", "sha256:3"]),
                ("mcp==1.15.0", &["sha256:9"]),
            ]),
            ..McpLock::default()
        };
        release.add_environments(&team);
        assert_eq!(release.environments.len(), 2);
        assert_eq!(
            release.hashes,
            hashes(&[
                ("mcp==1.15.0", &["sha256:9"]),
                ("pyyaml==6.0.1", &["sha256:1", "sha256:2", "sha256:3"]),
            ])
        );
    }
}
