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

/// Whether one of `report`'s warnings holds every one of `needles`.
fn warned(report: &aibox_engine::ApplyReport, needles: &[&str]) -> bool {
    report
        .warnings
        .iter()
        .any(|w| needles.iter().all(|n| w.contains(n)))
}

/// The server's entry in `.mcp.json`: command and arguments.
fn registered(f: &Fixture) -> Option<(String, Vec<String>)> {
    let text = fs_err::read_to_string(f.path(".mcp.json")).ok()?;
    let mcp: serde_json::Value = serde_json::from_str(&text).unwrap();
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

    // Renamed, it is the same release: still locked, with nothing to ask or resolve.
    fs_err::write(
        f.path("aibox.toml"),
        toml("mcp-server-time==2025.9.25").replace("name = \"time\"", "name = \"clock\""),
    )
    .unwrap();
    let renamed = apply(&f.root, &options).unwrap();
    assert!(renamed.warnings.is_empty(), "{:?}", renamed.warnings);
    let mcp: serde_json::Value = serde_json::from_str(&f.read(".mcp.json")).unwrap();
    assert_eq!(
        mcp["mcpServers"]["clock"]["command"].as_str(),
        Some(command.as_str())
    );

    // A version the index does not have could not start: not registered, and said.
    options.plan.python_resolver = Resolver::Path(aibox_test_support::uv().into());
    fs_err::write(f.path("aibox.toml"), toml("mcp-server-time==1999.1.1")).unwrap();
    let report = apply(&f.root, &options).unwrap();
    assert!(registered(&f).is_none());
    assert!(
        warned(&report, &["`time` is not registered", "has no release"]),
        "{:?}",
        report.warnings
    );

    // The answer is recorded: the next apply asks nobody and changes nothing.
    options.plan.python_resolver = Resolver::Off;
    let again = apply(&f.root, &options).unwrap();
    assert!(!again.changed(), "{:?}", again.files);
    assert!(
        again
            .warnings
            .iter()
            .any(|w| w.contains("`time` is not registered") && w.contains("has no release"))
            && !again.warnings.iter().any(|w| w.contains("not locked")),
        "{:?}",
        again.warnings
    );
}

/// What the index says of a release is checked before anything is resolved: one the
/// image's Python (Debian bookworm's 3.11 by default) cannot install is not registered
/// (the image build would fail), and one its authors yanked is locked with a warning.
#[test]
fn the_index_answer_is_checked_against_the_image() {
    let f = Fixture::with(&toml("basic-memory==0.24.1").replace("\"--local-timezone=UTC\"", ""));
    let cache = tempfile::tempdir().unwrap();
    let cache = camino::Utf8Path::from_path(cache.path()).unwrap();
    let mut options = common::apply_opts(Some(cache));
    options.plan.python_resolver = Resolver::Path(aibox_test_support::uv().into());
    let report = apply(&f.root, &options).unwrap();
    assert!(registered(&f).is_none());
    assert!(
        warned(
            &report,
            &[
                "`time` is not registered",
                "requires Python >=3.12",
                "Debian bookworm's python3 3.11"
            ]
        ),
        "{:?}",
        report.warnings
    );

    fs_err::write(
        f.path("aibox.toml"),
        toml("ruff==0.12.6").replace("\"--local-timezone=UTC\"", "\"server\""),
    )
    .unwrap();
    let report = apply(&f.root, &options).unwrap();
    let (command, _) = registered(&f).unwrap();
    assert!(command.ends_with("/bin/ruff"), "{command}");
    assert!(
        warned(&report, &["`ruff==0.12.6` is yanked on the package index"]),
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
        warned(
            &report,
            &[
                "1 uvx MCP server(s) are not locked (time)",
                "resolving is turned off"
            ]
        ),
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
        warned(&report, &["not lockable", "`--with`"]),
        "{:?}",
        report.warnings
    );
}

/// A "no solution" recorded in the lock may have come from the index of that day (a
/// mirror not yet synced): it stands while nothing can resolve, and is asked again as
/// soon as something can.
#[test]
fn a_recorded_no_solution_is_tried_again_when_it_can_be() {
    let f = Fixture::with(&toml("mcp-server-time==2025.9.25"));
    let cache = tempfile::tempdir().unwrap();
    let cache = camino::Utf8Path::from_path(cache.path()).unwrap();
    let mut options = common::apply_opts(Some(cache));
    options.plan.python_resolver = Resolver::Path(aibox_test_support::uv().into());
    apply(&f.root, &options).unwrap();
    let locked = registered(&f).unwrap();
    // As a run against an incomplete mirror would have recorded it.
    let mut lock: toml::Table = toml::from_str(&f.read("aibox.lock")).unwrap();
    let envs = lock["mcp"]["environments"].as_table_mut().unwrap();
    let id = envs.keys().next().unwrap().clone();
    let env = envs.get_mut(&id).unwrap().as_table_mut().unwrap();
    env.insert("requirements".into(), toml::Value::Array(Vec::new()));
    env.insert(
        "unresolvable".into(),
        "its dependencies have no solution (fake verdict of a mirror)".into(),
    );
    fs_err::write(f.path("aibox.lock"), toml::to_string(&lock).unwrap()).unwrap();

    options.plan.python_resolver = Resolver::Off;
    let kept = apply(&f.root, &options).unwrap();
    assert!(
        kept.warnings
            .iter()
            .any(|w| w.contains("`time` is not registered") && w.contains("fake verdict")),
        "{:?}",
        kept.warnings
    );
    assert!(f.read("aibox.lock").contains("fake verdict"));

    options.plan.python_resolver = Resolver::Path(aibox_test_support::uv().into());
    let retried = apply(&f.root, &options).unwrap();
    assert!(retried.warnings.is_empty(), "{:?}", retried.warnings);
    assert_eq!(registered(&f).unwrap(), locked);
    assert!(!f.read("aibox.lock").contains("fake verdict"));
}
