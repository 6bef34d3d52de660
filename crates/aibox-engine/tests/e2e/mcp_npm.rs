//! Team MCP servers started with `npx`: an exactly pinned package is resolved once with
//! the real npm against the real registry, its whole tree recorded with integrity in
//! `aibox.lock [mcp.npm]`, installed by the generated files with `npm ci` (run here on
//! the host, and tampered with), and registered as its installed bin; a version that does
//! not exist is not registered; without npm the servers stay as configured, unlocked.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail loudly

use crate::common;

use std::process::Command;

use aibox_engine::mcp_resolver::Resolver;
use aibox_engine::{ApplyOptions, apply};
use camino::Utf8Path;
use common::empty_project;

/// A small real MCP server (99 packages with the MCP SDK).
const MEMORY: &str = "@modelcontextprotocol/server-memory";
const VERSION: &str = "2026.8.31";

fn project(root: &Utf8Path) {
    let toml = format!(
        "[container]\nname = \"npx\"\n\n[ai]\nharnesses = [\"claude\", \"gemini\"]\n\n\
         [[ai.mcp.servers]]\nname = \"memory\"\ncommand = \"npx\"\n\
         args = [\"-y\", \"{MEMORY}@{VERSION}\"]\nenv = {{ MEMORY_FILE_PATH = \"${{MEMORY_FILE_PATH}}\" }}\n\n\
         [[ai.mcp.servers]]\nname = \"ghost\"\ncommand = \"npx\"\n\
         args = [\"-y\", \"{MEMORY}@1999.1.1\"]\n\n\
         [[ai.mcp.servers]]\nname = \"floating\"\ncommand = \"npx\"\n\
         args = [\"-y\", \"{MEMORY}\"]\n"
    );
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
}

fn options(resolver: Resolver, cache: &Utf8Path) -> ApplyOptions {
    let mut options = common::apply_opts(Some(cache));
    options.plan.npm_resolver = resolver;
    options
}

fn doctor_codes(root: &Utf8Path, cache: &Utf8Path) -> Vec<aibox_policy::Finding> {
    let options = aibox_engine::doctor::DoctorOptions {
        cache_dir: Some(cache.to_owned()),
        skip_engine: true,
        ..aibox_engine::doctor::DoctorOptions::default()
    };
    aibox_engine::doctor::doctor(root, &options)
        .unwrap()
        .findings
        .into_iter()
        .filter(|f| f.code.starts_with("aibox::doctor::mcp_"))
        .collect()
}

/// Runs `npm ci` in `dir` as the image build does (own cache folder); its output.
fn npm_ci(dir: &Utf8Path, cache: &Utf8Path) -> std::process::Output {
    Command::new(aibox_test_support::npm().as_str())
        .args(["ci", "--ignore-scripts", "--no-audit", "--no-fund"])
        .args(["--loglevel=error", "--prefix", dir.as_str()])
        .env("npm_config_cache", cache.as_str())
        .env("npm_config_update_notifier", "false")
        .output()
        .unwrap()
}

/// Starts `command` with `env`, sends `initialize`, returns the first line it answers.
fn initialize(command: &Utf8Path, env: &[(&str, &str)]) -> serde_json::Value {
    let mut cmd = Command::new(command.as_str());
    cmd.envs(env.iter().copied());
    aibox_test_support::mcp_initialize(cmd)
}

#[test]
fn exact_npx_packages_are_locked_with_the_real_npm() {
    let (_t, root) = empty_project();
    let cache = tempfile::tempdir().unwrap();
    let cache = Utf8Path::from_path(cache.path()).unwrap();
    project(&root);
    let npm = aibox_test_support::npm();
    let report = apply(&root, &options(Resolver::Path(npm.clone().into()), cache)).unwrap();
    let warnings = report.warnings.join("\n");
    assert!(
        warnings.contains(
            "MCP server `ghost` is not registered: npm cannot find \
             @modelcontextprotocol/server-memory@1999.1.1 (ETARGET): No matching version found"
        ),
        "{warnings}"
    );
    assert!(
        warnings.contains("runs `@modelcontextprotocol/server-memory` without an exact version"),
        "the registration still asks to pin the floating one: {warnings}"
    );

    let lock = fs_err::read_to_string(root.join("aibox.lock")).unwrap();
    let (id, tree, own) = the_lock_records_the_tree(&lock);
    registered_as_the_installed_bin(&root, &id);
    let dir = root.join(format!(".devcontainer/aibox-mcp/npm-{id}"));
    the_generated_files_install_with_npm_ci(&root, &id, &own);

    // doctor (offline) names the unregistered and the floating server.
    let findings = doctor_codes(&root, cache);
    let text = format!("{findings:#?}");
    assert!(
        findings
            .iter()
            .any(|f| f.code == "aibox::doctor::mcp_unresolvable" && f.message.contains("`ghost`")),
        "{text}"
    );
    assert!(
        findings
            .iter()
            .any(|f| f.code == "aibox::doctor::mcp_unlocked" && f.message.contains("floating")),
        "{text}"
    );
    assert!(
        !text.contains("memory (") && !text.contains("`memory`"),
        "{text}"
    );

    // Unchanged configuration: reused from the lock, with no npm at all, byte for byte.
    let again = apply(&root, &options(Resolver::Off, cache)).unwrap();
    assert!(!again.changed(), "{:?}", again.files);
    assert_eq!(
        fs_err::read_to_string(root.join("aibox.lock")).unwrap(),
        lock
    );

    // Another project with the same package reuses the cached resolution, without npm.
    let (_t2, other) = empty_project();
    project(&other);
    apply(&other, &options(Resolver::Off, cache)).unwrap();
    let other_lock: toml::Table =
        toml::from_str(&fs_err::read_to_string(other.join("aibox.lock")).unwrap()).unwrap();
    assert_eq!(other_lock["mcp"]["npm"][&id], tree);
    // (A version that does not exist is not cached: the next project asks again.)
    assert_eq!(other_lock["mcp"]["npm"].as_table().unwrap().len(), 1);

    // A server dropped from the configuration takes its tree and files with it.
    fs_err::write(
        root.join("aibox.toml"),
        "[container]\nname = \"npx\"\n\n[ai]\nharnesses = [\"claude\", \"gemini\"]\n",
    )
    .unwrap();
    apply(&root, &options(Resolver::Off, cache)).unwrap();
    let lock = fs_err::read_to_string(root.join("aibox.lock")).unwrap();
    assert!(!lock.contains("[mcp"), "{lock}");
    assert!(!dir.exists());
}

/// Without npm, npx servers not in the lock are registered as configured and `apply` and
/// `doctor` say they are unlocked.
#[test]
fn without_npm_npx_servers_stay_unlocked_and_apply_says_so() {
    let (_t, root) = empty_project();
    let cache = tempfile::tempdir().unwrap();
    let cache = Utf8Path::from_path(cache.path()).unwrap();
    project(&root);
    let report = apply(&root, &options(Resolver::Off, cache)).unwrap();
    let warnings = report.warnings.join("\n");
    assert!(
        warnings.contains(
            "2 npx MCP server(s) are not locked (ghost, memory): resolving is turned off"
        ),
        "{warnings}"
    );
    let mcp = fs_err::read_to_string(root.join(".mcp.json")).unwrap();
    assert!(
        mcp.contains(&format!("\"{MEMORY}@{VERSION}\"")),
        "registered as configured: {mcp}"
    );
    let lock = fs_err::read_to_string(root.join("aibox.lock")).unwrap();
    assert!(!lock.contains("[mcp"), "{lock}");
    assert!(!root.join(".devcontainer/aibox-mcp").exists());
    let findings = doctor_codes(&root, cache);
    let finding = findings
        .iter()
        .find(|f| f.code == "aibox::doctor::mcp_unlocked" && f.message.contains("memory"))
        .unwrap_or_else(|| panic!("{findings:#?}"));
    assert!(finding.remedy.contains("AIBOX_NPM"), "{finding:?}");
}

/// The lock records the whole tree, every package with its integrity, and the version that
/// does not exist as unresolvable: the tree's id, its table and the package's own entry.
fn the_lock_records_the_tree(lock: &str) -> (String, toml::Value, serde_json::Value) {
    let parsed: toml::Table = toml::from_str(lock).unwrap();
    let trees = parsed["mcp"]["npm"].as_table().unwrap();
    assert_eq!(trees.len(), 2, "{lock}");
    let (id, tree) = trees
        .iter()
        .find(|(_, t)| t.get("unresolvable").is_none())
        .unwrap();
    assert_eq!(tree["package"].as_str(), Some(MEMORY));
    assert_eq!(tree["version"].as_str(), Some(VERSION));
    assert_eq!(tree["servers"].as_array().unwrap().len(), 1);
    assert!(
        tree["resolver"].as_str().unwrap().starts_with("npm "),
        "{tree}"
    );
    let packages = tree["packages"].as_table().unwrap();
    assert!(packages.len() > 20, "the SDK's tree: {}", packages.len());
    for (path, entry) in packages {
        let entry: serde_json::Value = serde_json::from_str(entry.as_str().unwrap()).unwrap();
        assert!(
            entry["integrity"].as_str().unwrap().starts_with("sha512-"),
            "{path}: {entry}"
        );
    }
    let own: serde_json::Value = serde_json::from_str(
        packages[&format!("node_modules/{MEMORY}")]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(own["version"], VERSION);
    assert_eq!(own["bin"]["mcp-server-memory"], "dist/index.js");
    let ghost = trees
        .values()
        .find(|t| t.get("unresolvable").is_some())
        .unwrap();
    assert_eq!(
        ghost["servers"].as_array().unwrap()[0].as_str(),
        Some("ghost")
    );

    (id.clone(), tree.clone(), own)
}

/// Registered as the installed bin, its environment kept; the ghost is not registered;
/// the floating one stays as configured.
fn registered_as_the_installed_bin(root: &Utf8Path, id: &str) {
    let bin = format!("/opt/aibox/mcp-npm/{id}/node_modules/.bin/mcp-server-memory");
    let mcp: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(root.join(".mcp.json")).unwrap()).unwrap();
    let servers = mcp["mcpServers"].as_object().unwrap();
    assert_eq!(servers["memory"]["command"], bin.as_str(), "{mcp:#}");
    assert!(
        servers["memory"]
            .get("args")
            .is_none_or(|a| a == &serde_json::json!([])),
        "no npx arguments left: {mcp:#}"
    );
    assert_eq!(
        servers["memory"]["env"]["MEMORY_FILE_PATH"],
        "${MEMORY_FILE_PATH}"
    );
    assert!(!servers.contains_key("ghost"), "{mcp:#}");
    assert_eq!(servers["floating"]["command"], "npx");
    let gemini = fs_err::read_to_string(root.join(".gemini/settings.json")).unwrap();
    assert!(
        gemini.contains(&bin) && !gemini.contains("ghost"),
        "{gemini}"
    );
}

/// The image installs the tree from the generated files with `npm ci`; the real npm
/// installs exactly that tree from them, and the server answers `initialize` started as
/// registered (the bin, no npx); a tarball that does not match the lock installs nothing.
fn the_generated_files_install_with_npm_ci(root: &Utf8Path, id: &str, own: &serde_json::Value) {
    let dockerfile = fs_err::read_to_string(root.join(".devcontainer/Dockerfile")).unwrap();
    for needle in [
        format!("COPY aibox-mcp/npm-{id}/ /opt/aibox/mcp-npm/{id}/"),
        format!("    install {id} 'memory'; \\"),
        "npm ci --prefix".to_owned(),
    ] {
        assert!(dockerfile.contains(&needle), "{needle}: {dockerfile}");
    }
    let dir = root.join(format!(".devcontainer/aibox-mcp/npm-{id}"));
    let manifest: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    assert_eq!(manifest["dependencies"][MEMORY], VERSION);

    let host = tempfile::tempdir().unwrap();
    let host = Utf8Path::from_path(host.path()).unwrap();
    let tree_dir = host.join("tree");
    fs_err::create_dir_all(&tree_dir).unwrap();
    for file in ["package.json", "package-lock.json"] {
        fs_err::copy(dir.join(file), tree_dir.join(file)).unwrap();
    }
    let out = npm_ci(&tree_dir, &host.join("npm-cache"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = tree_dir.join("node_modules/.bin/mcp-server-memory");
    let memory_file = host.join("memory.jsonl");
    let init = initialize(&installed, &[("MEMORY_FILE_PATH", memory_file.as_str())]);
    assert_eq!(
        init["result"]["serverInfo"]["name"], "memory-server",
        "{init}"
    );
    // A tarball that does not match the locked integrity installs nothing.
    let lock_file = tree_dir.join("package-lock.json");
    let text = fs_err::read_to_string(&lock_file).unwrap();
    let wanted = own["integrity"].as_str().unwrap();
    let wrong = format!("sha512-{}==", "A".repeat(86));
    fs_err::write(&lock_file, text.replace(wanted, &wrong)).unwrap();
    let out = npm_ci(&tree_dir, &host.join("npm-cache"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("EINTEGRITY"),
        "{stderr}"
    );
}
