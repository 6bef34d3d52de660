//! processkit MCP servers as plain specs for the MCP registration layer: the gateway when
//! its skill is installed (and the gateway is wanted), otherwise one server per skill.
//! Every referenced script must exist, stay inside `context/skills/` and end in
//! `server.py`; all offenders are reported at once.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{ProvenanceError, Result};

/// Name of the gateway skill directory.
pub const GATEWAY_SKILL: &str = "processkit-gateway";

/// One processkit MCP server, as declared by the release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcesskitServer {
    /// Server name, always starting with `processkit-`.
    pub name: String,
    /// Program to start.
    pub command: String,
    /// Arguments (script paths relative to the project root).
    pub args: Vec<String>,
    /// Environment (literal values from the release; never secrets).
    pub env: BTreeMap<String, String>,
    /// Skill that declared it.
    pub skill: String,
    /// True for the gateway.
    pub gateway: bool,
}

impl ProcesskitServer {
    /// The script the server runs: its first argument ending in `.py`.
    pub fn script(&self) -> Option<&str> {
        script_of(&self.args)
    }
}

/// The script among a server's arguments: the first ending in `.py`.
fn script_of(args: &[String]) -> Option<&str> {
    args.iter().map(String::as_str).find(|a| {
        std::path::Path::new(a)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("py"))
    })
}

/// The script of each server a skill's `mcp/mcp-config.json` (`data`) declares (`None`
/// for a server without one), read as [`servers`] reads it; `None` when it does not
/// parse.
pub fn declared_scripts(data: &[u8]) -> Option<Vec<Option<String>>> {
    let cfg: McpConfigFile = serde_json::from_slice(data).ok()?;
    Some(
        cfg.mcp_servers
            .values()
            .map(|entry| script_of(&entry.args).map(ToOwned::to_owned))
            .collect(),
    )
}

#[derive(Deserialize)]
struct McpConfigFile {
    #[serde(rename = "mcpServers")]
    mcp_servers: BTreeMap<String, McpEntry>,
}

#[derive(Deserialize)]
struct McpEntry {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

fn script_ok(script: &str, installed: &BTreeSet<&str>) -> bool {
    script.starts_with("context/skills/")
        && script.ends_with("/server.py")
        && !script
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        && installed.contains(script)
}

/// Builds the server list from the installed files (`project path → contents`).
/// `prefer_gateway` is false when `[ai.mcp.gateway] mode = "separate"`.
pub fn servers<'a>(
    installed: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    prefer_gateway: bool,
) -> Result<Vec<ProcesskitServer>> {
    let files: BTreeMap<&str, &[u8]> = installed.into_iter().collect();
    let paths: BTreeSet<&str> = files.keys().copied().collect();
    let mut all = Vec::new();
    let mut bad_scripts = BTreeSet::new();
    for (path, data) in &files {
        let Some((_, skill)) = crate::catalog::skill_of(path) else {
            continue;
        };
        if !path.ends_with(&format!("/{skill}/mcp/mcp-config.json")) {
            continue;
        }
        let cfg: McpConfigFile =
            serde_json::from_slice(data).map_err(|e| ProvenanceError::Catalog {
                path: (*path).to_owned(),
                reason: e.to_string(),
            })?;
        for (name, entry) in cfg.mcp_servers {
            if !name.starts_with("processkit-") {
                return Err(ProvenanceError::Catalog {
                    path: (*path).to_owned(),
                    reason: format!("server `{name}` does not start with `processkit-`"),
                });
            }
            let scripts: Vec<&String> = entry
                .args
                .iter()
                .filter(|a| {
                    std::path::Path::new(a.as_str())
                        .extension()
                        .is_some_and(|e| e.eq_ignore_ascii_case("py"))
                        || a.contains("context/")
                })
                .collect();
            if scripts.is_empty() {
                bad_scripts.insert(format!("{name}: no script argument"));
            }
            for s in scripts {
                if !script_ok(s, &paths) {
                    bad_scripts.insert(s.clone());
                }
            }
            all.push(ProcesskitServer {
                gateway: skill == GATEWAY_SKILL,
                name,
                command: entry.command,
                args: entry.args,
                env: entry.env,
                skill: skill.to_owned(),
            });
        }
    }
    if !bad_scripts.is_empty() {
        return Err(ProvenanceError::MissingScripts {
            scripts: bad_scripts.into_iter().collect(),
        });
    }
    let has_gateway = all.iter().any(|s| s.gateway);
    let use_gateway = prefer_gateway && has_gateway;
    all.retain(|s| s.gateway == use_gateway);
    all.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(name: &str, script: &str) -> Vec<u8> {
        format!(r#"{{"mcpServers": {{"{name}": {{"command": "uv", "args": ["run", "{script}"], "env": {{}}}}}}}}"#).into_bytes()
    }

    #[test]
    fn gateway_or_per_skill_and_missing_scripts() {
        let a = cfg("processkit-a", "context/skills/x/a/mcp/server.py");
        let g = cfg(
            "processkit-gateway",
            "context/skills/processkit/processkit-gateway/mcp/server.py",
        );
        let files = vec![
            ("context/skills/x/a/mcp/mcp-config.json", a.as_slice()),
            ("context/skills/x/a/mcp/server.py", b"".as_slice()),
            (
                "context/skills/processkit/processkit-gateway/mcp/mcp-config.json",
                g.as_slice(),
            ),
            (
                "context/skills/processkit/processkit-gateway/mcp/server.py",
                b"".as_slice(),
            ),
        ];
        let gw = servers(files.clone(), true).unwrap();
        assert_eq!(
            gw.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["processkit-gateway"]
        );
        let sep = servers(files.clone(), false).unwrap();
        assert_eq!(
            sep.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["processkit-a"]
        );

        let b = cfg("processkit-b", "context/skills/x/b/mcp/server.py");
        let c = cfg("processkit-c", "../../etc/server.py");
        let files = vec![
            ("context/skills/x/b/mcp/mcp-config.json", b.as_slice()),
            ("context/skills/x/c/mcp/mcp-config.json", c.as_slice()),
        ];
        let err = servers(files, true).unwrap_err();
        let ProvenanceError::MissingScripts { scripts } = &err else {
            panic!("{err}")
        };
        assert_eq!(
            scripts,
            &["../../etc/server.py", "context/skills/x/b/mcp/server.py"]
        );
    }
}

/// Serialises JSON canonically, as processkit hashes MCP configs (the one definition, in
/// `aibox_config::jsonc`).
pub use aibox_config::jsonc::canonical_json;

/// Project path of the MCP manifest.
pub const MCP_MANIFEST: &str = "context/.processkit-mcp-manifest.json";

/// SHA-256 of the PEP 723 block of a server script (spec §9): from the `# /// script`
/// line through the closing `# ///` line, lines joined by `\n` plus one trailing `\n`.
pub fn pep723_header_digest(script: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(script).ok()?;
    let mut block: Vec<&str> = Vec::new();
    for line in text.lines() {
        if block.is_empty() {
            if line == "# /// script" {
                block.push(line);
            }
        } else {
            block.push(line);
            if line == "# ///" {
                let mut joined = block.join("\n");
                joined.push('\n');
                return Some(crate::digest::Sha256::of(joined.as_bytes()).to_hex());
            }
        }
    }
    None
}

/// SHA-256 of the canonical JSON of a config file, as the manifest records it.
pub fn config_digest(data: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(data).ok()?;
    Some(crate::digest::Sha256::of(canonical_json(&value).as_bytes()).to_hex())
}

/// Checks `context/.processkit-mcp-manifest.json` against the shipped MCP configs
/// (spec §9): every `per_skill` and `per_gateway` digest must equal the SHA-256 of the
/// canonical JSON of its file, every shipped `mcp/mcp-config.json` must be listed, and
/// `aggregate_sha256` must equal the digest over the per-skill digests in path order.
/// Any disagreement refuses the release, naming the file. A stale `per_server_header`
/// digest (real releases have shipped some) or another `processkit_version` is only a
/// warning. Returns the recomputed aggregate (re-merge harness configs whenever it
/// changes) and the warnings; a release without a manifest yields `None`.
pub fn check_mcp_manifest(
    payload: &crate::extract::Payload,
    version: &str,
) -> Result<(Option<String>, Vec<String>)> {
    let mut warnings = Vec::new();
    let files = &payload.files;
    if !files.contains_key(MCP_MANIFEST) {
        return Ok((None, warnings));
    }
    // Only the few files named here are read (and re-verified) from the payload; a file
    // that changed since it was verified is that error, not a manifest problem.
    let data = |path: &str| -> Result<Option<Vec<u8>>> {
        files
            .contains_key(path)
            .then(|| payload.read(path))
            .transpose()
    };
    let manifest_bytes = payload.read(MCP_MANIFEST)?;
    let manifest = serde_json::from_slice::<serde_json::Value>(&manifest_bytes).map_err(|e| {
        ProvenanceError::McpManifest {
            problems: vec![format!("`{MCP_MANIFEST}` is not valid JSON: {e}")],
        }
    })?;
    let mut problems = Vec::new();
    let mut per_skill = Vec::new();
    let mut listed = BTreeSet::new();
    for list in ["per_skill", "per_gateway"] {
        for entry in manifest[list].as_array().into_iter().flatten() {
            let Some(path) = entry["path"].as_str() else {
                problems.push(format!("a `{list}` entry has no `path`"));
                continue;
            };
            listed.insert(path.to_owned());
            match data(path)?.and_then(|d| config_digest(&d)) {
                None => problems.push(format!(
                    "`{path}` is listed in `{list}` but missing from the release or not JSON"
                )),
                Some(actual) => {
                    if entry["sha256"].as_str() != Some(actual.as_str()) {
                        problems.push(format!(
                            "`{path}`: content digest {actual} differs from the manifest's {}",
                            entry["sha256"].as_str().unwrap_or("(none)")
                        ));
                    }
                    if list == "per_skill" {
                        per_skill.push((path.to_owned(), actual));
                    }
                }
            }
        }
    }
    for path in files.keys() {
        if path.starts_with("context/skills/")
            && path.ends_with("/mcp/mcp-config.json")
            && !listed.contains(&**path)
        {
            problems.push(format!(
                "`{path}` is shipped but not listed in the manifest"
            ));
        }
    }
    per_skill.sort();
    let joined: Vec<&str> = per_skill.iter().map(|(_, d)| d.as_str()).collect();
    let aggregate = crate::digest::Sha256::of(joined.join("\n").as_bytes()).to_hex();
    if let Some(recorded) = manifest["aggregate_sha256"].as_str()
        && recorded != aggregate
    {
        problems.push(format!(
            "`aggregate_sha256` {recorded} differs from {aggregate} computed over the per-skill digests"
        ));
    }
    if !problems.is_empty() {
        return Err(ProvenanceError::McpManifest { problems });
    }
    for entry in manifest["per_server_header"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(path) = entry["path"].as_str() else {
            continue;
        };
        let actual = data(path)?.and_then(|d| pep723_header_digest(&d));
        if actual.as_deref() != entry["sha256"].as_str() {
            warnings.push(format!(
                "MCP manifest: the PEP 723 header digest of `{path}` is stale (a known processkit release slip; the server configs themselves match)"
            ));
        }
    }
    if let Some(v) = manifest["processkit_version"].as_str()
        && v != version
    {
        warnings.push(format!(
            "MCP manifest says processkit_version = {v}, installing it as {version}"
        ));
    }
    Ok((Some(aggregate), warnings))
}

#[cfg(test)]
mod manifest_tests {
    use super::*;
    use crate::extract::Payload;

    fn payload(files: &BTreeMap<String, Vec<u8>>) -> Payload {
        Payload::from_memory(files.iter().map(|(p, d)| (p.clone(), d.clone(), false)))
    }

    #[test]
    fn canonical_json_matches_python_json_dumps() {
        // python3 -c 'import json;print(json.dumps(v, sort_keys=True, separators=(",",":"), ensure_ascii=False))'
        let v: serde_json::Value =
            serde_json::from_str(r#"{"b": [1, {"z": "é\n", "a": null}], "a": true}"#).unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"a":true,"b":[1,{"a":null,"z":"é\n"}]}"#
        );
    }

    #[test]
    fn manifest_check_recomputes_digests() {
        let cfg = br#"{"mcpServers": {"processkit-a": {"command": "uv", "args": ["run", "x"]}}}"#;
        let value: serde_json::Value = serde_json::from_slice(cfg).unwrap();
        let digest = crate::digest::Sha256::of(canonical_json(&value).as_bytes()).to_hex();
        let aggregate = crate::digest::Sha256::of(digest.as_bytes()).to_hex();
        let manifest = format!(
            r#"{{"aggregate_sha256": "{aggregate}", "per_skill": [{{"path": "c/a.json", "sha256": "{digest}"}}], "version": 1}}"#
        );
        let mut files = BTreeMap::new();
        files.insert("c/a.json".to_owned(), cfg.to_vec());
        files.insert(
            "context/.processkit-mcp-manifest.json".to_owned(),
            manifest.into_bytes(),
        );
        let (agg, warnings) = check_mcp_manifest(&payload(&files), "v1").unwrap();
        assert_eq!(agg.as_deref(), Some(aggregate.as_str()));
        assert!(warnings.is_empty(), "{warnings:?}");
        // Whitespace and key order do not matter: the manifest hashes canonical JSON.
        files.insert(
            "c/a.json".to_owned(),
            br#"{ "mcpServers" : { "processkit-a" : { "args" : ["run", "x"], "command" : "uv" } } }"#.to_vec(),
        );
        assert!(check_mcp_manifest(&payload(&files), "v1").is_ok());
        files.insert("c/a.json".to_owned(), b"{}".to_vec());
        let err = check_mcp_manifest(&payload(&files), "v1").unwrap_err();
        let ProvenanceError::McpManifest { problems } = &err else {
            panic!("{err}")
        };
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("`c/a.json`: content digest"),
            "{problems:?}"
        );
        assert!(problems[1].contains("aggregate_sha256"), "{problems:?}");
    }
}
