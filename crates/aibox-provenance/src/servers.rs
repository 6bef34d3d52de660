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
