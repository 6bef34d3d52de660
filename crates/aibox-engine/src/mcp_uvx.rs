//! Locking what team MCP servers started with `uvx` run: the resolve-time half of
//! [`aibox_provenance::uvxdeps`], beside [`crate::mcp_npm`] for `npx`.
//!
//! `uvx pkg==1.2.3` pins the package but not its dependencies: a floating `mcp>=1.0`
//! resolves at every start to the newest release, and a server written against 1.x dies
//! on 2.x. Every enabled team stdio server whose command is `uvx` (or `uv tool run`) with
//! one exactly pinned package gets a locked environment instead, resolved as of the day
//! that version was uploaded (the package index's `upload-time`, [`aibox_provenance::
//! uvxdeps::release_facts`]): what its authors ran. The environment is an ordinary
//! `[mcp.environments]` entry (see [`crate::mcp_envs`]): the image installs it with its
//! hashes, and the server starts as the environment's own executable, with no resolver
//! and no network.
//!
//! The index is asked once: the previous `aibox.lock` keeps the date. A version the index
//! does not have, or whose dependencies cannot be resolved, is recorded and its servers
//! are not registered: they could not start. Without `uv`, the index or the network the
//! servers are registered as configured and reported as unlocked. A range or no version
//! is not locked (the registration already asks to pin it).

use std::collections::BTreeMap;

use aibox_config::McpServer;
use aibox_provenance::pydeps::{self, EnvSpec, McpLock};
use aibox_provenance::uvxdeps::{self, Uvx, UvxRun};

use crate::mcp_envs::{McpEnvs, Resolving};

/// What resolve decided for the team servers started with `uvx`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UvxEnvs {
    /// Their environments (the lock's `[mcp.environments]` entries and hashes), which
    /// servers use which, and the servers not locked or not registered, with why.
    pub envs: McpEnvs,
    /// Locked servers: name → the environment's executable and the server's arguments.
    pub commands: BTreeMap<String, (String, Vec<String>)>,
}

impl UvxEnvs {
    /// The warnings `apply` shows (one per cause, naming the servers).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, why) in &self.envs.broken {
            out.push(format!(
                "MCP server `{name}` is not registered: {}. Fix its package or version in \
                 aibox.toml [[ai.mcp.servers]], then run `aibox apply` again",
                why.trim_end_matches('.')
            ));
        }
        let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, why) in &self.envs.unlocked {
            by_reason.entry(why).or_default().push(name);
        }
        for (why, names) in by_reason {
            out.push(format!(
                "{} uvx MCP server(s) are not locked ({}): {}; uvx resolves their \
                 dependencies at first start, to whatever is newest then",
                names.len(),
                names.join(", "),
                why.trim_end_matches('.')
            ));
        }
        out
    }
}

/// Where the index question goes and how (the project's extra CA included).
pub(crate) struct Index {
    /// The simple-API base URL, ending in `/`.
    pub url: String,
    /// HTTP limits and trust.
    pub http: aibox_provenance::HttpOptions,
}

impl Index {
    /// The index `uv` itself uses (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`, else `PyPI`), asked
    /// through `http`.
    pub(crate) fn from_env(http: aibox_provenance::HttpOptions) -> Self {
        Self {
            url: uvxdeps::index_url(|k| std::env::var(k).ok()),
            http,
        }
    }
}

/// Locks the enabled team stdio servers of `servers` (see the module docs); `offline`
/// asks neither the index nor the resolver.
pub(crate) fn lock(servers: &[McpServer], index: &Index, how: Resolving<'_>) -> UvxEnvs {
    let mut out = UvxEnvs::default();
    let mut runs: Vec<(String, UvxRun)> = Vec::new();
    for server in servers.iter().filter(|s| s.enabled && s.url.is_none()) {
        let Some(command) = &server.command else {
            continue;
        };
        match uvxdeps::parse_uvx(command, &server.args) {
            Uvx::NotUvx | Uvx::Unpinned(_) => {}
            Uvx::NotLockable(why) => {
                out.envs
                    .unlocked
                    .insert(server.name.clone(), format!("not lockable: {why}"));
            }
            Uvx::Run(run) => runs.push((server.name.clone(), run)),
        }
    }
    if runs.is_empty() {
        return out;
    }
    let off = crate::mcp_resolver::turned_off(how.resolver, crate::mcp_envs::UV_ENV);
    let mut specs = Vec::new();
    let mut asked: BTreeMap<String, Result<Option<EnvSpec>, String>> = BTreeMap::new();
    for (name, run) in &runs {
        if let Some(spec) = how
            .previous
            .and_then(|l| locked_spec(l, name, &run.requirement))
        {
            specs.push((name.clone(), spec));
            continue;
        }
        let answer = if how.offline {
            Err("not locked yet, and this command never resolves; `aibox apply` does".to_owned())
        } else if let Some(why) = &off {
            Err(why.clone())
        } else {
            asked
                .entry(run.requirement.clone())
                .or_insert_with(|| ask(index, run, how.notice))
                .clone()
        };
        match answer {
            Ok(Some(spec)) => specs.push((name.clone(), spec)),
            Ok(None) => {
                out.envs.broken.insert(
                    name.clone(),
                    format!(
                        "the package index ({}) has no release `{}`",
                        uvxdeps::redact(&index.url),
                        run.requirement
                    ),
                );
            }
            Err(why) => {
                out.envs.unlocked.insert(name.clone(), why);
            }
        }
    }
    let locked = crate::mcp_envs::lock_specs(specs, how);
    for (name, run) in runs {
        if let Some(id) = locked.server_env.get(&name) {
            let bin = format!("{}/bin/{}", pydeps::env_dir(id), run.command);
            out.commands.insert(name, (bin, run.args));
        }
    }
    out.envs.broken.extend(locked.broken);
    out.envs.unlocked.extend(locked.unlocked);
    out.envs.server_env = locked.server_env;
    out.envs.lock = locked.lock;
    out
}

/// The spec `previous` locked `name` with, when it ran the same requirement: the index's
/// date is never asked again for an unchanged server.
fn locked_spec(previous: &McpLock, name: &str, requirement: &str) -> Option<EnvSpec> {
    previous
        .environments
        .values()
        .find(|env| {
            env.servers.iter().any(|s| s == name)
                && env.dependencies == [requirement]
                && env.exclude_newer.is_some()
        })
        .map(pydeps::EnvLock::spec)
}

/// Asks the index when `run`'s release was uploaded and which Python it needs: its
/// environment's spec, `Ok(None)` when the index has no such release, `Err` (why) when
/// the index could not be asked.
fn ask(
    index: &Index,
    run: &UvxRun,
    notice: Option<&crate::mcp_resolver::Notice>,
) -> Result<Option<EnvSpec>, String> {
    if let Some(notice) = notice {
        notice(&format!(
            "dating {}=={} on the package index ...",
            run.package, run.version
        ));
    }
    // The index URL may carry credentials (a private index): never in a message.
    let facts = uvxdeps::release_facts(&index.url, &run.package, &run.version, &index.http)
        .map_err(|e| {
            let why = e
                .to_string()
                .replace(&index.url, &uvxdeps::redact(&index.url));
            format!("the package index could not date the release: {why}")
        })?;
    Ok(facts.map(|facts| {
        let deps = pydeps::ScriptDeps {
            requires_python: facts.requires_python,
            dependencies: vec![run.requirement.clone()],
        };
        EnvSpec::new(&deps, Some(&facts.cutoff))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A private index given with its credentials, as uv takes it: they reach no warning.
    #[test]
    fn an_index_password_is_not_repeated() {
        let index = Index {
            url: "http://me:fake-index-password@127.0.0.1:9/simple/".to_owned(),
            http: aibox_provenance::HttpOptions::default(),
        };
        let server = McpServer {
            name: "time".to_owned(),
            command: Some("uvx".to_owned()),
            args: vec!["mcp-server-time==2025.9.25".to_owned()],
            env: std::collections::BTreeMap::new(),
            url: None,
            headers: std::collections::BTreeMap::new(),
            allowed_tools: Vec::new(),
            startup_timeout_sec: None,
            enabled: true,
        };
        let resolver = crate::mcp_resolver::Resolver::Path("/nonexistent/uv".into());
        let how = Resolving {
            previous: None,
            resolver: &resolver,
            offline: false,
            cache: None,
            notice: None,
        };
        let envs = lock(&[server], &index, how);
        let warnings = envs.warnings().join("\n");
        assert!(warnings.contains("could not date"), "{warnings}");
        assert!(warnings.contains("***@127.0.0.1:9"), "{warnings}");
        assert!(!warnings.contains("fake-index-password"), "{warnings}");
    }
}
