//! One definition of a secret: the policy gate's scan, MCP registration's literal check
//! and the skill review's credential findings get the same samples and must agree on
//! which are secrets (they differ only in what they do with a hit: refuse, refuse, fail or
//! warn). All values are obviously fake.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aibox_config::{LocalToml, parse_aibox_toml};
use aibox_policy::secrets::{TextKind, scan_secrets};
use aibox_skill_review::{ReviewContext, SkillOrigin, review_skill};
use camino::Utf8PathBuf;

/// Key samples: (name, is it secret-like?).
const KEYS: [(&str, bool); 8] = [
    ("dbPassword", true),
    ("DB_PASSWORD", true),
    ("apiKey", true),
    ("GITHUB_TOKEN", true),
    ("x-auth", true),
    ("TOKENIZER_MODE", false),
    ("AUTHOR", false),
    ("LOG_LEVEL", false),
];

/// The policy gate: a secret-like key with a literal value in a committed JSON file.
fn policy_says(key: &str) -> bool {
    let text = format!("{{\"env\": {{\"{key}\": \"fake-value-not-real\"}}}}\n");
    !scan_secrets(".mcp.json", &text, TextKind::Json).is_empty()
}

/// MCP registration: a team server whose URL carries that key with a literal value in
/// its query string (team `env` and `headers` refuse every literal, secret or not).
fn mcp_says(key: &str) -> bool {
    let toml = format!(
        "[container]\nname = \"demo\"\n[context]\nmode = \"harness-only\"\n\n\
         [[ai.mcp.servers]]\nname = \"db\"\n\
         url = \"https://mcp.example.invalid/x?{key}=fake-value-not-real\"\n"
    );
    let config = parse_aibox_toml(&toml, "aibox.toml").unwrap();
    match aibox_mcp_registration::collect_servers(&config, &LocalToml::default(), &[]) {
        Ok(_) => false,
        Err(e) => {
            assert!(e.to_string().contains(key), "{key}: {e}");
            true
        }
    }
}

/// The skill review: a script of a third-party skill reads a variable of that name.
fn review_says(key: &str) -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8PathBuf::from_path_buf(tmp.path().join("demo")).unwrap();
    fs_err::create_dir_all(dir.join("scripts")).unwrap();
    fs_err::write(
        dir.join("SKILL.md"),
        "---\nname: demo\ndescription: Demo skill.\n---\n# Demo\n",
    )
    .unwrap();
    fs_err::write(
        dir.join("scripts/run.sh"),
        format!("#!/bin/sh\necho \"${key}\"\n"),
    )
    .unwrap();
    let ctx = ReviewContext {
        origin: SkillOrigin::LocalPath {
            path: dir.to_string(),
        },
        ..ReviewContext::default()
    };
    let review = review_skill(&dir, &ctx).unwrap();
    serde_json::to_string(&review)
        .unwrap()
        .contains(&format!("reads secret-like variable `{key}`"))
}

#[test]
fn policy_mcp_registration_and_skill_review_agree_on_secret_names() {
    for (key, secret) in KEYS {
        assert_eq!(policy_says(key), secret, "policy gate on {key}");
        assert_eq!(mcp_says(key), secret, "MCP registration on {key}");
        // Shell variable names are identifiers; `x-auth` cannot be one.
        if !key.contains('-') {
            assert_eq!(review_says(key), secret, "skill review on {key}");
        }
    }
}

/// Credential values: each of the three flags a known format, whatever the key.
#[test]
fn policy_mcp_registration_and_skill_review_agree_on_secret_values() {
    let token = format!("ghp_{}", "FAKE".repeat(9));
    let url = "https://me:fake-pass-word@db.example.invalid/x";
    for (value, secret) in [
        (token.as_str(), true),
        (url, true),
        ("https://db.example.invalid/x", false),
        ("plain-setting", false),
    ] {
        let text = format!("{{\"env\": {{\"MODE\": \"{value}\"}}}}\n");
        let policy = !scan_secrets(".mcp.json", &text, TextKind::Json).is_empty();
        let mcp = aibox_mcp_registration::refs::looks_like_secret(value);
        let tmp = tempfile::tempdir().unwrap();
        let dir = Utf8PathBuf::from_path_buf(tmp.path().join("demo")).unwrap();
        fs_err::create_dir_all(&dir).unwrap();
        fs_err::write(
            dir.join("SKILL.md"),
            format!("---\nname: demo\ndescription: Demo skill.\n---\nUse `{value}`.\n"),
        )
        .unwrap();
        let ctx = ReviewContext {
            origin: SkillOrigin::LocalPath {
                path: dir.to_string(),
            },
            ..ReviewContext::default()
        };
        let review = serde_json::to_string(&review_skill(&dir, &ctx).unwrap()).unwrap();
        let skill = review.contains("credential-looking text");
        assert_eq!((policy, mcp, skill), (secret, secret, secret), "{value}");
    }
}
