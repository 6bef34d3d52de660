//! Team MCP servers started with `uvx`: locked as of their release's upload, with the real
//! uv against the real `PyPI`. `mcp-server-time` 2025.9.25 declares `mcp>=1.0`; resolved
//! today that is mcp 2.x, which dropped the `McpError` it imports, and the server dies at
//! start. Locked, it runs the mcp 1.x it was published against.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aibox_engine::apply;
use aibox_engine::mcp_resolver::Resolver;

use crate::common::{self, Fixture};

fn toml(package: &str) -> String {
    format!(
        "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\n\
         harnesses = [\"claude\"]\n\n[[ai.mcp.servers]]\nname = \"time\"\ncommand = \"uvx\"\n\
         args = [\"{package}\", \"--local-timezone=UTC\"]\n"
    )
}

/// The server's entry in `.mcp.json`: command and arguments.
fn registered(f: &Fixture) -> Option<(String, Vec<String>)> {
    let mcp: serde_json::Value = serde_json::from_str(&f.read(".mcp.json")).unwrap();
    let time = mcp["mcpServers"].get("time")?;
    let args = time["args"].as_array().unwrap();
    Some((
        time["command"].as_str().unwrap().to_owned(),
        args.iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect(),
    ))
}

#[test]
fn a_team_uvx_server_runs_what_its_release_was_published_against() {
    let f = Fixture::with(&toml("mcp-server-time==2025.9.25"));
    let cache = tempfile::tempdir().unwrap();
    let cache = camino::Utf8Path::from_path(cache.path()).unwrap();
    let mut options = common::apply_opts(Some(cache));
    options.plan.python_resolver = Resolver::Path(aibox_test_support::uv().into());
    let report = apply(&f.root, &options).unwrap();
    assert!(
        !report.warnings.iter().any(|w| w.contains("not locked")),
        "{:?}",
        report.warnings
    );

    let lock: toml::Table = toml::from_str(&f.read("aibox.lock")).unwrap();
    let envs = lock["mcp"]["environments"].as_table().unwrap();
    assert_eq!(envs.len(), 1, "{envs:?}");
    let (id, env) = envs.iter().next().unwrap();
    // The wheel was uploaded at 21:25:55.29 and the sdist at 21:25:57.07 (PyPI's
    // `upload-time`): resolved as of the second after the later one.
    assert_eq!(env["exclude_newer"].as_str(), Some("2025-09-25T21:25:58Z"));
    assert_eq!(env["requires_python"].as_str(), Some(">=3.10"));
    assert_eq!(env["servers"].as_array().unwrap()[0].as_str(), Some("time"));
    let requirements: Vec<&str> = env["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(
        requirements.contains(&"mcp-server-time==2025.9.25"),
        "{requirements:?}"
    );
    let mcp = requirements
        .iter()
        .find(|r| r.starts_with("mcp=="))
        .unwrap();
    assert!(
        mcp.starts_with("mcp==1."),
        "{mcp}: mcp 2.x breaks this server"
    );
    let hashes = lock["mcp"]["hashes"].as_table().unwrap();
    assert!(requirements.iter().all(|r| {
        let key = aibox_provenance::pydeps::requirement_key(r);
        hashes
            .get(key)
            .is_some_and(|h| !h.as_array().unwrap().is_empty())
    }));

    // Started as the environment's own executable, with its arguments: no uvx, no
    // resolver, no network at start.
    let (command, args) = registered(&f).unwrap();
    assert_eq!(command, format!("/opt/aibox/mcp/{id}/bin/mcp-server-time"));
    assert_eq!(args, ["--local-timezone=UTC"]);
    // The image installs it, hash-checked.
    let requirements_file = f.read(&format!(".devcontainer/aibox-mcp/{id}.txt"));
    assert!(requirements_file.contains("mcp-server-time==2025.9.25"));
    assert!(requirements_file.contains("--hash=sha256:"));
    assert!(
        f.read(".devcontainer/Dockerfile")
            .contains(&format!("install {id} 'time'"))
    );

    // The lock keeps the date: with no resolver and no question to the index the next
    // apply changes nothing.
    options.plan.python_resolver = Resolver::Off;
    let again = apply(&f.root, &options).unwrap();
    assert!(!again.changed(), "{:?}", again.files);
    assert!(
        again.warnings.iter().all(|w| !w.contains("time")),
        "{:?}",
        again.warnings
    );

    // A version the index does not have could not start: not registered, and said.
    options.plan.python_resolver = Resolver::Path(aibox_test_support::uv().into());
    fs_err::write(f.path("aibox.toml"), toml("mcp-server-time==1999.1.1")).unwrap();
    let report = apply(&f.root, &options).unwrap();
    assert!(registered(&f).is_none());
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("`time` is not registered") && w.contains("has no release")),
        "{:?}",
        report.warnings
    );
}

#[test]
fn without_a_resolver_or_in_a_form_aibox_does_not_read_it_runs_as_configured() {
    let f = Fixture::with(&toml("mcp-server-time==2025.9.25"));
    let mut options = common::apply_opts(None);
    options.plan.python_resolver = Resolver::Off;
    let report = apply(&f.root, &options).unwrap();
    assert_eq!(
        registered(&f).unwrap(),
        (
            "uvx".to_owned(),
            vec![
                "mcp-server-time==2025.9.25".to_owned(),
                "--local-timezone=UTC".to_owned()
            ]
        )
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("1 uvx MCP server(s) are not locked (time)")
                && w.contains("resolving is turned off")),
        "{:?}",
        report.warnings
    );
    assert!(!f.read("aibox.lock").contains("[mcp"));

    fs_err::write(
        f.path("aibox.toml"),
        toml("mcp-server-time==2025.9.25").replace("args = [", "args = [\"--with\", \"tzdata\", "),
    )
    .unwrap();
    let report = apply(&f.root, &options).unwrap();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("not lockable") && w.contains("`--with`")),
        "{:?}",
        report.warnings
    );
}
