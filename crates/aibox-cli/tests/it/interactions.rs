//! Whole-interaction snapshots: every command's exit code, stdout and stderr together,
//! human and `--output json`, success and failure (`aibox_snapshot!`, uv style).
//!
//! Commands run with a `PATH` holding no container engine, so `up`, `down`, `status` and
//! `exec` fail the same way everywhere; the container paths themselves are covered by the
//! Podman end-to-end tests. Regenerate with `INSTA_UPDATE=always cargo test -p aibox-cli
//! --test it -- interactions::` (or `cargo insta review`) and read the diff.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may fail loudly

use aibox_test_support::aibox_snapshot;
use aibox_test_support::cli::CliContext;
use aibox_test_support::http::release::SyntheticRelease;
use aibox_test_support::http::{Route, Server};

fn context() -> CliContext {
    CliContext::new(env!("CARGO_BIN_EXE_aibox"))
}

const HARNESS_ONLY: &str = "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n\
[ai]\nharnesses = [\"claude\"]\n\n[[ai.mcp.servers]]\nname = \"docs\"\ncommand = \"npx\"\n\
args = [\"-y\", \"docs-mcp@1.0.0\"]\n";

/// A context with a valid harness-only project.
fn project() -> CliContext {
    let ctx = context();
    ctx.write("aibox.toml", HARNESS_ONLY);
    ctx
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON value")
}

#[test]
fn version_and_usage_errors() {
    let ctx = context();
    aibox_snapshot!(ctx.filters(), ctx.command(&["--version"]));
    aibox_snapshot!(ctx.filters(), ctx.command(&["frobnicate"]));
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["frobnicate", "-o", "json"]));
    assert_eq!(json(&out)["code"], "aibox::cli::usage");
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["init", "--harness", "claude-code", "--output=json"])
    );
    let out = ctx.command(&["-o", "json", "config"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["message"], "a subcommand is required");
    // QA: the missing argument was only in `help`; the message ended in a colon.
    let out = ctx
        .command(&["-o", "json", "config", "get"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let usage = json(&out);
    assert_eq!(
        usage["message"],
        "the following required arguments were not provided: <KEY>"
    );
    assert!(
        usage["help"]
            .as_str()
            .unwrap()
            .starts_with("Usage: aibox config get <KEY>"),
        "{usage}"
    );
}

#[test]
fn init_human_json_and_refusal() {
    let ctx = context();
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["init", "demo", "--harness", "claude", "--harness", "codex"])
    );
    // A second init refuses to overwrite, as a user error.
    aibox_snapshot!(ctx.filters(), ctx.command(&["init", "demo"]));
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["init", "demo", "-o", "json"]));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["code"], "aibox::init::exists");

    let other = context();
    aibox_snapshot!(
        other.filters(),
        other.command(&[
            "init",
            "demo",
            "--context-mode",
            "harness-only",
            "-o",
            "json"
        ])
    );
}

#[test]
fn no_project_is_a_user_error_for_every_project_command() {
    let ctx = context();
    for args in [
        &["apply"][..],
        &["up"],
        &["down"],
        &["status"],
        &["exec", "--", "true"],
        &["doctor"],
        &["config", "validate"],
        &["mcp", "list"],
        &["mcp", "check"],
        &["skill", "list"],
        &["addon", "add", "python"],
        &["base-image", "pin"],
    ] {
        // Before the arguments: `exec` passes everything after `--` to the command.
        let mut with_json = vec!["-o", "json"];
        with_json.extend_from_slice(args);
        let out = ctx.command(&with_json).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(json(&out)["code"], "aibox::config::not_found", "{args:?}");
    }
    aibox_snapshot!(ctx.filters(), ctx.command(&["apply"]));
    aibox_snapshot!(ctx.filters(), ctx.command(&["apply", "-o", "json"]));
}

#[test]
fn invalid_config_points_at_file_line_and_column() {
    let ctx = context();
    ctx.write(
        "aibox.toml",
        "[container]\nname = \"x\"\nnmae = \"y\"\n\n[ai]\nharnesses = [\"claud\"]\n",
    );
    aibox_snapshot!(ctx.filters(), ctx.command(&["config", "validate"]));
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["config", "validate", "-o", "json"])
    );
    let err = json(&out);
    assert!(
        err["file"]
            .as_str()
            .unwrap()
            .ends_with("/project/aibox.toml")
    );
    assert_eq!(err["line"], 3);
    assert_eq!(err["column"], 1);
    assert!(err["help"].is_string());
    aibox_snapshot!(ctx.filters(), ctx.command(&["apply", "-o", "json"]));
}

#[test]
fn config_get_set_validate_human_and_json() {
    let ctx = project();
    aibox_snapshot!(ctx.filters(), ctx.command(&["config", "validate"]));
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["config", "validate", "-o", "json"])
    );
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["config", "get", "container.name"])
    );
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["config", "get", "container.user", "-o", "json"])
    );
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["config", "get", "container.nmae"])
    );
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["config", "get", "container.nmae", "-o", "json"])
    );
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["config", "set", "container.user", "dev"])
    );
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["config", "set", "container.user", "dev2", "-o", "json"])
    );
    assert_eq!(json(&out)["key"], "container.user");
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["config", "set", "container.uid", "\"many\"", "-o", "json"])
    );
    // A refused edit says the file was not changed, before the snippet of the edit.
    let before = fs_err::read_to_string(ctx.dir().join("aibox.toml")).unwrap();
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["config", "set", "container.user", "root"])
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        fs_err::read_to_string(ctx.dir().join("aibox.toml")).unwrap(),
        before
    );
    let out = ctx
        .command(&["config", "schema", "-o", "json"])
        .output()
        .unwrap();
    assert!(json(&out)["properties"].is_object());
}

#[test]
fn apply_check_dry_run_human_and_json() {
    let ctx = project();
    aibox_snapshot!(ctx.filters(), ctx.command(&["apply", "--check"]));
    aibox_snapshot!(ctx.filters(), ctx.command(&["apply"]));
    aibox_snapshot!(ctx.filters(), ctx.command(&["apply", "-o", "json"]));
    ctx.write(
        "aibox.toml",
        &HARNESS_ONLY.replace("docs-mcp@1.0.0", "docs-mcp@1.0.1"),
    );
    aibox_snapshot!(ctx.filters(), ctx.command(&["apply", "--dry-run"]));
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["apply", "--check", "-o", "json"])
    );
}

#[test]
fn seccomp_consent_refusal_without_a_terminal() {
    let ctx = context();
    ctx.write(
        "aibox.toml",
        "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\n\
         harnesses = [\"codex\"]\n\n[security]\ncodex_sandbox = \"unconfined\"\n",
    );
    aibox_snapshot!(ctx.filters(), ctx.command(&["apply"]));
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["apply", "--yes", "-o", "json"])
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["code"], "aibox::policy::seccomp_consent");
}

/// A project whose processkit release is served by `server` at `/org/processkit.git`.
fn processkit_project(server: &Server) -> CliContext {
    let ctx = context().with_filter(r"[0-9a-f]{64}", "[SHA256]");
    ctx.write(
        "aibox.toml",
        &format!(
            "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\n\n\
             [processkit]\nsource = \"{}\"\nversion = \"v0.0.1\"\n",
            server.url("/org/processkit.git")
        ),
    );
    ctx
}

const ARCHIVE: &str = "/org/processkit/releases/download/v0.0.1/processkit-v0.0.1.tar.gz";

/// A failed download is the environment's fault: exit 3, in both output formats.
#[test]
fn a_failed_download_exits_3() {
    let server = Server::start().unwrap();
    server.route(ARCHIVE, Route::status(500));
    server.route(&format!("{ARCHIVE}.sha256"), Route::status(500));
    let ctx = processkit_project(&server);
    aibox_snapshot!(ctx.filters(), ctx.command(&["apply"]));
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["apply", "-o", "json"]));
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(json(&out)["kind"], "environment");
    assert!(!ctx.dir.join("aibox.lock").exists());
}

/// A download whose digest does not match its sidecar is refused with exit 3.
#[test]
fn a_wrong_digest_exits_3() {
    let server = Server::start().unwrap();
    let release = SyntheticRelease::minimal("v0.0.1");
    let archive = release.tar_gz();
    server.route(ARCHIVE, Route::ok(archive));
    server.route(
        &format!("{ARCHIVE}.sha256"),
        Route::ok(format!("{}\n", "0".repeat(64))),
    );
    let ctx = processkit_project(&server);
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["apply", "-o", "json"]));
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(json(&out)["code"], "aibox::provenance::digest_mismatch");
    assert!(!ctx.dir.join("aibox.lock").exists());
}

/// Behind a TLS-inspecting proxy the release's HTTPS answer is signed by the proxy's
/// CA. aibox refuses it (exit 3, naming the fix), then installs once the CA is trusted
/// the way the image build trusts it (`.aibox-local.toml` `extra_ca_certificates`), or
/// the way curl does (the system store, here `SSL_CERT_FILE`).
#[test]
fn a_release_behind_a_tls_inspecting_proxy_installs_once_its_ca_is_trusted() {
    let server = Server::start_tls().unwrap();
    let release = SyntheticRelease::minimal("v0.0.1");
    let archive = release.tar_gz();
    server.route(
        &format!("{ARCHIVE}.sha256"),
        Route::ok(release.sidecar(&archive)),
    );
    server.route(ARCHIVE, Route::ok(archive));
    let ca = server.ca_pem().unwrap();

    let ctx = processkit_project(&server);
    let out = ctx.command(&["apply", "-o", "json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let message = json(&out)["message"].to_string();
    assert!(
        message.contains("UnknownIssuer") && message.contains("extra_ca_certificates"),
        "{message}"
    );
    assert!(!ctx.dir.join("aibox.lock").exists());

    ctx.write("proxy-ca.pem", ca).write(
        ".aibox-local.toml",
        "[container]\nextra_ca_certificates = \"proxy-ca.pem\"\n",
    );
    let out = ctx.command(&["apply", "-o", "json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(ctx.dir.join("aibox.lock").exists());

    let system = processkit_project(&server);
    let bundle = system.dir.join("../system-bundle.pem");
    fs_err::write(&bundle, ca).unwrap();
    let out = system
        .command(&["apply", "-o", "json"])
        .env("SSL_CERT_FILE", &bundle)
        .env_remove("SSL_CERT_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(system.dir.join("aibox.lock").exists());
}

/// A harness-only project with one team server, `command` `package`, and `ca` as its
/// personal extra CA file.
fn fake_server_project(command: &str, package: &str, ca: &str) -> CliContext {
    let ctx = context();
    ctx.write(
        "aibox.toml",
        &format!(
            "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\n\
             harnesses = [\"claude\"]\n\n[[ai.mcp.servers]]\nname = \"fake\"\n\
             command = \"{command}\"\nargs = [\"{package}\"]\n"
        ),
    )
    .write("proxy-ca.pem", ca)
    .write(
        ".aibox-local.toml",
        "[container]\nextra_ca_certificates = \"proxy-ca.pem\"\n",
    );
    ctx
}

/// The personal extra CA reaches the resolver too: `uv`, which `apply` starts to lock a
/// team `uvx` server, gets a bundle of every root aibox trusts, so it passes the same
/// TLS-inspecting proxy (here a private-CA HTTPS index) that aibox's own question passed.
#[test]
fn the_resolver_trusts_the_extra_ca_too() {
    let server = Server::start_tls().unwrap();
    let wheel = "/files/fakepkg-1.0-py3-none-any.whl";
    let project = serde_json::json!({
        "meta": {"api-version": "1.1"},
        "name": "fakepkg",
        "versions": ["1.0"],
        "files": [{
            "filename": "fakepkg-1.0-py3-none-any.whl",
            "url": server.url(wheel),
            "hashes": {"sha256": "0".repeat(64)},
            "requires-python": ">=3.8",
            "upload-time": "2025-01-01T00:00:00.000000Z",
            "yanked": false
        }]
    });
    server.route(
        "/simple/fakepkg/",
        Route {
            headers: vec![(
                "Content-Type".into(),
                "application/vnd.pypi.simple.v1+json".into(),
            )],
            ..Route::ok(project.to_string())
        },
    );
    let ctx = fake_server_project("uvx", "fakepkg==1.0", server.ca_pem().unwrap());
    let uv_cache = tempfile::tempdir().unwrap();
    let uv = aibox_test_support::uv();
    // uv needs a Python to resolve for: the one that runs it, and nothing else on PATH.
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = camino::Utf8PathBuf::from(String::from_utf8(python.stdout).unwrap().trim());
    let path = format!("{}:{}", uv.parent().unwrap(), python.parent().unwrap());
    let out = ctx
        .command(&["apply"])
        .env("AIBOX_UV", uv.as_str())
        .env("PATH", path)
        .env("UV_INDEX_URL", server.url("/simple/"))
        .env("UV_CACHE_DIR", uv_cache.path())
        .env_remove("UV_DEFAULT_INDEX")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // uv got as far as the wheel (which this index does not serve): through TLS.
    assert!(
        server.hits().iter().any(|h| h == wheel),
        "uv never reached the index: {:?}\n{stderr}",
        server.hits()
    );
    assert!(!stderr.contains("UnknownIssuer"), "{stderr}");
}

/// An unusable CA file is refused before anything goes to the network through it.
#[test]
fn an_unusable_ca_file_is_refused_before_the_index_is_asked() {
    // Plain HTTP on loopback, so that any question at all shows in its hits.
    let server = Server::start().unwrap();
    let damaged = "-----BEGIN CERTIFICATE-----\nMIIFAKEFAKEFAKE\n-----END CERTIFICATE-----\n";
    let ctx = fake_server_project("uvx", "fakepkg==1.0", damaged);
    let out = ctx
        .command(&["apply", "-o", "json"])
        .env("AIBOX_UV", aibox_test_support::uv().as_str())
        .env("UV_INDEX_URL", server.url("/simple/"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(json(&out)["code"], "aibox::apply::extra_ca");
    assert!(server.hits().is_empty(), "{:?}", server.hits());
}

/// Every command that asks the network refuses an unusable CA file first, as `apply`
/// does: `processkit versions`, `self check`, `base-image pin` and the resolve of `up`
/// (here through the engine's online resolve). Dropped, the request failed later as an
/// untrusted certificate whose hint sent the user to the setting already made. An
/// offline resolve asks nothing, so it does not judge the file.
#[test]
fn every_command_that_asks_the_network_refuses_an_unusable_ca_file_first() {
    let server = Server::start().unwrap();
    let ctx = fake_server_project("uvx", "fakepkg==1.0", "not a certificate\n");
    let api = server.url("/api/");
    let registry = server
        .url("/")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let image = format!("{registry}/team/base:1");
    for args in [
        &["processkit", "versions", "--source", "owner/repo"][..],
        &["self", "check"],
        &["base-image", "pin", image.as_str()],
    ] {
        let mut with_json = vec!["-o", "json"];
        with_json.extend_from_slice(args);
        let out = ctx
            .command(&with_json)
            .env("AIBOX_GITHUB_API", &api)
            .env("CI", "true")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert_eq!(json(&out)["code"], "aibox::apply::extra_ca", "{args:?}");
    }
    assert!(server.hits().is_empty(), "{:?}", server.hits());
    let root = ctx.dir();
    let err = aibox_engine::resolve(root, &aibox_engine::PlanOptions::default()).unwrap_err();
    assert!(
        matches!(err, aibox_engine::EngineError::ExtraCa { .. }),
        "{err}"
    );
    let offline = aibox_engine::PlanOptions {
        offline: true,
        ..aibox_engine::PlanOptions::default()
    };
    aibox_engine::resolve(root, &offline).unwrap();
}

/// And npm, which `apply` starts to lock a team `npx` server, trusts it beside its own
/// roots (`NODE_EXTRA_CA_CERTS`): a private-CA registry is reached, not refused.
#[test]
fn npm_trusts_the_extra_ca_too() {
    let server = Server::start_tls().unwrap();
    let ctx = fake_server_project("npx", "fakepkg@1.0.0", server.ca_pem().unwrap());
    let npm = aibox_test_support::npm();
    // npm runs on the Node beside it, and nothing else on PATH.
    let node = std::process::Command::new("node")
        .args(["-e", "process.stdout.write(process.execPath)"])
        .output()
        .unwrap();
    let node = camino::Utf8PathBuf::from(String::from_utf8(node.stdout).unwrap());
    let npm_cache = tempfile::tempdir().unwrap();
    let out = ctx
        .command(&["apply"])
        .env("AIBOX_NPM", npm.as_str())
        .env(
            "PATH",
            format!("{}:{}", npm.parent().unwrap(), node.parent().unwrap()),
        )
        .env("npm_config_registry", server.url("/"))
        .env("npm_config_cache", npm_cache.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The registry has no such package: npm asked for it, through TLS.
    assert!(
        server.hits().iter().any(|h| h == "/fakepkg"),
        "npm never reached the registry: {:?}\n{stderr}",
        server.hits()
    );
    assert!(stderr.contains("is not registered"), "{stderr}");
}

/// A file where aibox needs a folder is a disk error: exit 3, nothing written.
#[test]
fn a_file_in_the_way_exits_3() {
    let ctx = project();
    ctx.write(".devcontainer", "not a folder\n");
    aibox_snapshot!(ctx.filters(), ctx.command(&["apply"]));
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["apply", "-o", "json"]));
    assert_eq!(out.status.code(), Some(3));
    assert!(!ctx.dir.join("aibox.lock").exists());
}

#[test]
fn lifecycle_commands_without_a_container_engine_exit_3() {
    let ctx = project();
    for args in [&["up"][..], &["down"], &["status"], &["exec", "--", "true"]] {
        aibox_snapshot!(ctx.filters(), ctx.command(args));
        // Before the arguments: `exec` passes everything after `--` to the command.
        let mut with_json = vec!["-o", "json"];
        with_json.extend_from_slice(args);
        let out = aibox_snapshot!(ctx.filters(), ctx.command(&with_json));
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        assert_eq!(json(&out)["kind"], "environment", "{args:?}");
    }
}

#[test]
fn mcp_list_human_and_json() {
    let ctx = project();
    aibox_snapshot!(ctx.filters(), ctx.command(&["mcp", "list"]));
    aibox_snapshot!(ctx.filters(), ctx.command(&["mcp", "list", "-o", "json"]));
}

/// `mcp check` names an unknown server with a suggestion (exit 2) before it looks for an
/// engine; with no engine on `PATH` it is an environment error (exit 3).
#[test]
fn mcp_check_without_an_engine_and_with_a_typo() {
    let ctx = project();
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["mcp", "check", "doc"]));
    assert_eq!(out.status.code(), Some(2));
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["mcp", "check", "doc", "-o", "json"])
    );
    assert_eq!(json(&out)["code"], "aibox::mcp::unknown_server");
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["mcp", "check"]));
    assert_eq!(out.status.code(), Some(3));
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["-o", "json", "mcp", "check"]));
    assert_eq!(json(&out)["kind"], "environment");
}

/// `aibox help` explains itself and any command; `aibox exec` takes the command after
/// its options without `--`, as `docker exec` does (here it fails on the missing engine,
/// past argument parsing).
#[test]
fn help_of_help_and_exec_without_a_double_dash() {
    let ctx = project();
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["help", "--help"]));
    assert_eq!(out.status.code(), Some(0));
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["help", "mcp", "check"]));
    assert_eq!(out.status.code(), Some(0));
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["help", "mcp", "chek"]));
    assert_eq!(out.status.code(), Some(2));
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["exec", "claude", "--version"]));
    assert_eq!(out.status.code(), Some(3), "parsed; no engine here");
    let dashed = ctx
        .command(&["exec", "--", "claude", "--version"])
        .output()
        .unwrap();
    assert_eq!(dashed.status.code(), Some(3));
}

/// `aibox mcp add` and `remove` edit the server list as `claude mcp add` does; a refused
/// edit (a literal secret, a duplicate, no command) writes nothing; `config get` of the
/// list points at them.
#[test]
fn mcp_add_and_remove_human_and_json() {
    let ctx = project();
    let before = fs_err::read_to_string(ctx.dir().join("aibox.toml")).unwrap();
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&[
            "mcp",
            "add",
            "issues",
            "--env",
            "ISSUES_TOKEN=${ISSUES_TOKEN}",
            "--",
            "npx",
            "-y",
            "@acme/issues-mcp@2.1.0",
        ])
    );
    assert_eq!(out.status.code(), Some(0));
    let text = fs_err::read_to_string(ctx.dir().join("aibox.toml")).unwrap();
    assert!(text.starts_with(&before), "everything else kept:\n{text}");
    assert!(
        text.ends_with(
            "[[ai.mcp.servers]]\nname = \"issues\"\ncommand = \"npx\"\n\
             args = [\"-y\", \"@acme/issues-mcp@2.1.0\"]\n\
             env = { ISSUES_TOKEN = \"${ISSUES_TOKEN}\" }\n"
        ),
        "{text}"
    );
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["mcp", "add", "issues", "--", "npx", "other"])
    );
    assert_eq!(out.status.code(), Some(2));
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&[
            "mcp",
            "add",
            "leak",
            "--env",
            "GITHUB_TOKEN=ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE",
            "--",
            "npx",
            "x",
        ])
    );
    assert_eq!(out.status.code(), Some(2));
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["mcp", "add", "nothing"]));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        fs_err::read_to_string(ctx.dir().join("aibox.toml")).unwrap(),
        text
    );
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["mcp", "remove", "issues", "-o", "json"])
    );
    assert_eq!(json(&out)["removed"], true);
    assert_eq!(
        fs_err::read_to_string(ctx.dir().join("aibox.toml")).unwrap(),
        before
    );
    // With no server at all, `config get` of the list points at `mcp add`.
    let empty = context();
    empty.write("aibox.toml", "[container]\nname = \"demo\"\n");
    let out = aibox_snapshot!(
        empty.filters(),
        empty.command(&["config", "get", "ai.mcp.servers"])
    );
    assert_eq!(out.status.code(), Some(2));
}

/// A typo of a required key leads; the missing key it causes follows, labelled like it.
#[test]
fn a_typo_leads_the_missing_key_it_causes() {
    let ctx = context();
    ctx.write("aibox.toml", "[container]\nnmae = \"demo\"\n");
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["config", "validate"]));
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.starts_with("aibox::config::unknown_key"), "{text}");
    assert!(!text.contains("Error: "), "{text}");
}

#[test]
fn skill_commands_human_and_json() {
    let ctx = project();
    aibox_snapshot!(ctx.filters(), ctx.command(&["skill", "list"]));
    aibox_snapshot!(ctx.filters(), ctx.command(&["skill", "list", "-o", "json"]));
    aibox_snapshot!(ctx.filters(), ctx.command(&["skill", "enable", "pdf"]));
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["skill", "disable", "pdf", "-o", "json"])
    );
    assert_eq!(json(&out)["enabled"], false);
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["skill", "review", "no-such-skill"])
    );
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["skill", "review", "no-such-skill", "-o", "json"])
    );
}

#[test]
fn migrate_commands_human_and_json() {
    let ctx = project();
    aibox_snapshot!(ctx.filters(), ctx.command(&["migrate", "list"]));
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["migrate", "list", "-o", "json"])
    );
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["migrate", "show", "MIG-20260601T100000"])
    );
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&[
            "migrate",
            "resolve",
            "MIG-20260601T100000",
            "--take",
            "ours",
            "-o",
            "json"
        ])
    );
    assert_eq!(json(&out)["code"], "aibox::migrate::unknown_id");
    assert_eq!(out.status.code(), Some(2));
    let out = aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["migrate", "resolve", "MIG-1", "--take", "ours", "--edited"])
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn base_image_pin_refuses_a_reference_without_a_tag() {
    let ctx = project();
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["base-image", "pin", "127.0.0.1:1/x/y"])
    );
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["base-image", "pin", "127.0.0.1:1/x/y", "-o", "json"])
    );
}

#[test]
fn addon_commands_human_and_json() {
    let ctx = project();
    aibox_snapshot!(ctx.filters(), ctx.command(&["addon", "add", "python"]));
    aibox_snapshot!(ctx.filters(), ctx.command(&["addon", "list"]));
    aibox_snapshot!(ctx.filters(), ctx.command(&["addon", "list", "-o", "json"]));
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["addon", "remove", "python", "-o", "json"])
    );
    aibox_snapshot!(ctx.filters(), ctx.command(&["addon", "add", "pyhton"]));
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["addon", "add", "pyhton", "-o", "json"])
    );
}

#[test]
fn doctor_human_and_json() {
    let ctx = project();
    let out = ctx.command(&["apply"]).output().unwrap();
    assert!(out.status.success());
    aibox_snapshot!(ctx.filters(), ctx.command(&["doctor", "--integrity"]));
    aibox_snapshot!(
        ctx.filters(),
        ctx.command(&["doctor", "--integrity", "-o", "json"])
    );
    // No engine and no git on PATH: the same warnings on every machine.
    aibox_snapshot!(ctx.filters(), ctx.command(&["doctor"]));
    let out = aibox_snapshot!(ctx.filters(), ctx.command(&["doctor", "-o", "json"]));
    assert!(json(&out).is_object());
}

#[test]
fn completion_and_docs_honour_json() {
    let ctx = context();
    let out = ctx
        .command(&["completion", "bash", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(json(&out)["shell"], "bash");
    assert!(json(&out)["script"].as_str().unwrap().contains("aibox"));
    let out = ctx
        .command(&["docs", "cli", "-o", "json"])
        .output()
        .unwrap();
    assert!(
        json(&out)["markdown"]
            .as_str()
            .unwrap()
            .contains("## Exit codes")
    );
}
