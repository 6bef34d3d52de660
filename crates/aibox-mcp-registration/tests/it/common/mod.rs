//! Shared fixtures for the registration tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use aibox_config::{Harness, Permissions};
use aibox_mcp_registration::{
    Ledger, McpError, Origin, ProcesskitWiring, RegisterOptions, Registration, ServerSpec,
    Transport, register_wired,
};

/// A stdio server.
pub fn stdio(
    name: &str,
    origin: Origin,
    command: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> ServerSpec {
    ServerSpec {
        name: name.to_owned(),
        origin,
        transport: Transport::Stdio {
            command: command.to_owned(),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        },
        allowed_tools: Vec::new(),
        startup_timeout_sec: None,
    }
}

/// A remote server.
pub fn remote(name: &str, origin: Origin, url: &str, headers: &[(&str, &str)]) -> ServerSpec {
    ServerSpec {
        name: name.to_owned(),
        origin,
        transport: Transport::Remote {
            url: url.to_owned(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        },
        allowed_tools: Vec::new(),
        startup_timeout_sec: None,
    }
}

/// The standard fixture: one server of each origin and transport.
pub fn fixture_servers() -> Vec<ServerSpec> {
    let mut gateway = stdio(
        "processkit-gateway",
        Origin::Processkit,
        "uv",
        &[
            "run",
            "--script",
            "context/skills/processkit/processkit-gateway/mcp/server.py",
        ],
        &[("PROCESSKIT_MCP_MODE", "gateway")],
    );
    gateway.allowed_tools = vec!["*".into()];
    let mut docs = stdio(
        "docs",
        Origin::Team,
        "npx",
        &["-y", "@acme/docs-mcp@1.4.2"],
        &[("ACME_TOKEN", "${ACME_TOKEN}")],
    );
    docs.allowed_tools = vec!["search".into(), "fetch_page".into()];
    let issues = remote(
        "issues",
        Origin::Team,
        "https://mcp.example.invalid/mcp",
        &[("Authorization", "Bearer ${ISSUES_TOKEN}")],
    );
    let mine = stdio(
        "my-notes",
        Origin::Personal,
        "node",
        &["./tools/notes.js"],
        &[],
    );
    vec![gateway, docs, issues, mine]
}

/// A fake project: root-relative path → text.
pub type Files = BTreeMap<String, String>;

/// Runs a registration against `files`, then writes the result (and the ledger) back.
pub fn apply(
    files: &mut Files,
    servers: &[ServerSpec],
    harnesses: &[Harness],
    permissions: &Permissions,
) -> Result<Registration, McpError> {
    apply_wired(
        files,
        servers,
        harnesses,
        permissions,
        &ProcesskitWiring::default(),
    )
}

/// [`apply`] with processkit's hooks and pre-authorisation.
pub fn apply_wired(
    files: &mut Files,
    servers: &[ServerSpec],
    harnesses: &[Harness],
    permissions: &Permissions,
    wiring: &ProcesskitWiring,
) -> Result<Registration, McpError> {
    let ledger = files
        .get(aibox_mcp_registration::LEDGER_PATH)
        .map(|t| Ledger::parse(t))
        .transpose()?;
    let opts = RegisterOptions {
        harnesses,
        permissions,
        workspace: "/workspace",
    };
    let snapshot = files.clone();
    let reg = register_wired(servers, &opts, wiring, ledger.as_ref(), &mut |p| {
        Ok(snapshot.get(p).cloned())
    })?;
    for f in &reg.files {
        files.insert(f.path.clone(), f.contents.clone());
    }
    if reg.write_ledger {
        files.insert(
            aibox_mcp_registration::LEDGER_PATH.to_owned(),
            reg.ledger.render(),
        );
    }
    Ok(reg)
}
