//! The secret scanner: positives for each credential format and rule, negatives for every
//! reference syntax. All tokens are obviously fake.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use aibox_policy::{Finding, Severity, TextKind, scan_secrets};

const GHP: &str = "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000";
const ANTHROPIC: &str = "sk-ant-api03-FAKEFAKEFAKEFAKEFAKE";
const OPENAI: &str = "sk-proj-FAKEFAKEFAKEFAKEFAKE";
const AWS: &str = "AKIAFAKEFAKEFAKE0000";
const GOOGLE: &str = "AIzaFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE000";
const SLACK: &str = "xoxb-0000-FAKEFAKEFAKE";
const GITLAB: &str = "glpat-FAKEFAKEFAKEFAKEFAKE";
const PAT: &str = "github_pat_FAKEFAKEFAKEFAKEFAKE_0000";
const RANDOM: &str = "Q7vX2mL9pR4tZ8wK1nB6yF3h";

fn codes(found: &[Finding]) -> Vec<(&str, Option<usize>)> {
    found.iter().map(|f| (f.code.as_str(), f.line)).collect()
}

fn assert_no_value_leaks(found: &[Finding], secrets: &[&str]) {
    let json = serde_json::to_string(found).unwrap();
    for s in secrets {
        assert!(!json.contains(s), "finding leaks {s}");
    }
}

#[test]
fn every_token_format_is_found_in_plain_text() {
    for token in [GHP, ANTHROPIC, OPENAI, AWS, GOOGLE, SLACK, GITLAB, PAT] {
        let text = format!("first line\nvalue: {token} trailing\n");
        let found = scan_secrets("notes.txt", &text, TextKind::Plain);
        assert_eq!(
            codes(&found),
            [("aibox::policy::secret_value", Some(2))],
            "{token}"
        );
        assert_no_value_leaks(&found, &[token]);
    }
    let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKE\n-----END OPENSSH PRIVATE KEY-----\n";
    assert_eq!(
        codes(&scan_secrets("k", pem, TextKind::Plain)),
        [("aibox::policy::secret_value", Some(1))]
    );
    let bearer = "curl -H 'Authorization: Bearer FAKEFAKEFAKEFAKE'";
    assert_eq!(scan_secrets("x.sh", bearer, TextKind::Plain).len(), 1);
    let url = "source = \"https://bob:FAKEPASSWORD@example.invalid/repo.git\"";
    assert_eq!(scan_secrets("x", url, TextKind::Plain).len(), 1);
}

#[test]
fn aibox_toml_with_literals_is_refused_with_key_and_reference() {
    let text = format!(
        r#"[container]
name = "demo"
environment = {{ LANG = "C.UTF-8", API_KEY = "not-a-reference" }}

[[ai.mcp.servers]]
name = "github"
command = "github-mcp"
env = {{ GITHUB_PERSONAL_ACCESS_TOKEN = "{GHP}", RANDOM_THING = "{RANDOM}" }}

[[ai.mcp.servers]]
name = "remote"
url = "https://mcp.example.invalid"
headers = {{ Authorization = "Bearer FAKEFAKEFAKEFAKE" }}
# old key: {AWS}
"#
    );
    let found = scan_secrets("aibox.toml", &text, TextKind::Toml);
    assert!(found.iter().all(|f| f.severity == Severity::Error));
    assert_no_value_leaks(
        &found,
        &[GHP, RANDOM, AWS, "not-a-reference", "FAKEFAKEFAKEFAKE"],
    );
    insta::assert_snapshot!(
        "aibox_toml_secrets",
        found
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_secret_in_a_url_or_an_argument_gets_a_remedy_that_stays_valid() {
    let text = format!(
        r#"[[ai.mcp.servers]]
name = "remote"
url = "https://mcp.example.invalid/mcp?key={GHP}"

[[ai.mcp.servers]]
name = "local"
command = "tool"
args = ["{GHP}"]
"#
    );
    let found = scan_secrets("aibox.toml", &text, TextKind::Toml);
    assert_no_value_leaks(&found, &[GHP]);
    let remedy = |field: &str| {
        found
            .iter()
            .find(|f| f.message.contains(field))
            .map(|f| f.remedy.as_str())
            .unwrap()
    };
    // The URL keeps its scheme and host (a whole-value `${URL}` is refused as no URL).
    let url = remedy("servers[0].url");
    assert!(url.contains("`https://host/mcp?key=${KEY}`"), "{url}");
    assert!(!url.contains("${URL}"), "{url}");
    assert!(
        remedy("servers[1].args[0]").contains("`${TOKEN}`"),
        "{found:?}"
    );
    let found = scan_secrets(
        "opencode.json",
        &format!(
            r#"{{"mcp": {{"r": {{"type": "remote", "url": "https://h.invalid/?k={GHP}"}}}}}}"#
        ),
        TextKind::Json,
    );
    assert!(found[0].remedy.contains("{env:KEY}"), "{found:?}");
}

#[test]
fn references_are_allowed_everywhere() {
    let toml = r#"[container]
name = "demo"
environment = { GH_TOKEN = "${GH_TOKEN}", DEFAULTED_TOKEN = "${X:-}", EMPTY_SECRET = "" }

[[ai.mcp.servers]]
name = "github"
command = "github-mcp"
env = { GITHUB_TOKEN = "$GITHUB_TOKEN" }
headers = { Authorization = "Bearer ${GH_TOKEN}" }
"#;
    assert_eq!(scan_secrets("aibox.toml", toml, TextKind::Toml), vec![]);
    let json = r#"{
  // comments are fine
  "mcp": {
    "a": { "environment": { "TOKEN": "{env:TOKEN}" } },
    "b": { "env": { "TOKEN": "${env:TOKEN}" }, "headers": { "X-Api-Key": "${input:api-key}" } }
  },
  "remoteEnv": { "TOKEN": "${localEnv:TOKEN}", "OTHER": "${containerEnv:PATH}" },
  "max_tokens": 4096,
}"#;
    assert_eq!(scan_secrets("opencode.json", json, TextKind::Json), vec![]);
    let codex = r#"[mcp_servers.github]
command = "github-mcp"
env_vars = ["GITHUB_TOKEN"]
bearer_token_env_var = "GITHUB_TOKEN"
env_http_headers = { "X-Api-Key" = "API_TOKEN" }
"#;
    assert_eq!(
        scan_secrets(".codex/config.toml", codex, TextKind::Toml),
        vec![]
    );
    let lock = "[processkit]\nrelease_asset_sha256 = \"4f2a9c0e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a19\"\n";
    assert_eq!(scan_secrets("aibox.lock", lock, TextKind::Toml), vec![]);
    // Hosts are keys of the lock's network tables, whatever words they hold (the QA:
    // every Codex project with the allowlist failed `doctor` on `auth.openai.com`).
    let network = "[network.allow]\n\"auth.openai.com\" = [\"tool codex 0.171.0\"]\n\
                   \"token.corp.example\" = [\"aibox.toml [network] allow\"]\n\n\
                   [network.build]\n\"api-key.example.org\" = [\"aibox.toml\"]\n";
    assert_eq!(scan_secrets("aibox.lock", network, TextKind::Toml), vec![]);
    // Elsewhere such a name still counts.
    let other = "[tools]\n\"auth.openai.com\" = \"literal\"\n";
    assert_ne!(scan_secrets("aibox.lock", other, TextKind::Toml), vec![]);
}

#[test]
fn compose_environment_lists_and_devcontainer_run_args_are_scanned() {
    let yaml = format!(
        "services:\n  dev:\n    environment:\n      - LANG=C.UTF-8\n      - OPENAI_API_KEY={OPENAI}\n      - SESSION=${{SESSION}}\n    build:\n      args:\n        NPM_AUTH: literal-value\n"
    );
    let found = scan_secrets("docker-compose.yml", &yaml, TextKind::Yaml);
    assert_eq!(
        codes(&found),
        [
            ("aibox::policy::secret_value", Some(5)),
            ("aibox::policy::secret_key", Some(9))
        ]
    );
    let json = format!(
        "{{\n  \"runArgs\": [\"-e\", \"TOKEN=plain-literal\"],\n  \"containerEnv\": {{ \"X\": \"{RANDOM}\" }}\n}}"
    );
    let found = scan_secrets(".devcontainer/devcontainer.json", &json, TextKind::Json);
    assert_eq!(
        codes(&found),
        [
            ("aibox::policy::secret_key", Some(2)),
            ("aibox::policy::secret_entropy", Some(3))
        ]
    );
    assert!(found[0].remedy.contains("${localEnv:TOKEN}"));
}

#[test]
fn env_files_are_scanned() {
    let env = format!(
        "# comment\nLANG=C\nexport GH_TOKEN=\"{GHP}\"\nMY_PASSWORD='hunter2'\nBUILD_ID={RANDOM}\nEMPTY_TOKEN=\n"
    );
    let found = scan_secrets(".env", &env, TextKind::Env);
    assert_eq!(
        codes(&found),
        [
            ("aibox::policy::secret_value", Some(3)),
            ("aibox::policy::secret_key", Some(4)),
            ("aibox::policy::secret_entropy", Some(5))
        ]
    );
}

#[test]
fn ordinary_text_is_not_flagged() {
    let text = "task-runner-for-the-whole-team\nhttps://example.invalid/a@b\nauthor = \"Ada\"\nskip-this-part\nBearer ${TOKEN}\n";
    assert_eq!(scan_secrets("README", text, TextKind::Plain), vec![]);
    let toml = "[aibox]\nproject_name = \"demo\"\n[container]\nname = \"demo\"\nbase_image = \"docker.io/library/debian:bookworm-slim\"\nenvironment = { PATH_EXTRA = \"/opt/bin\", TZ = \"Europe/Berlin\" }\n";
    assert_eq!(scan_secrets("aibox.toml", toml, TextKind::Toml), vec![]);
}

#[test]
fn malformed_structured_text_still_gets_the_line_scan() {
    let text = format!("not = [valid toml\nkey = \"{GHP}\"\n");
    let found = scan_secrets("aibox.toml", &text, TextKind::Toml);
    assert_eq!(codes(&found), [("aibox::policy::secret_value", Some(2))]);
}

#[test]
fn kinds_from_paths() {
    assert_eq!(TextKind::from_path("aibox.toml"), TextKind::Toml);
    assert_eq!(TextKind::from_path("aibox.lock"), TextKind::Toml);
    assert_eq!(
        TextKind::from_path(".devcontainer/devcontainer.json"),
        TextKind::Json
    );
    assert_eq!(
        TextKind::from_path(".devcontainer/docker-compose.yml"),
        TextKind::Yaml
    );
    assert_eq!(TextKind::from_path(".aibox-local.env"), TextKind::Env);
    assert_eq!(TextKind::from_path(".env.local"), TextKind::Env);
    assert_eq!(
        TextKind::from_path(".devcontainer/Dockerfile"),
        TextKind::Dockerfile
    );
    assert_eq!(
        TextKind::from_path(".devcontainer/Dockerfile.local"),
        TextKind::Dockerfile
    );
    assert_eq!(TextKind::from_path("README.md"), TextKind::Plain);
}

#[test]
fn dockerfile_env_and_arg_values_are_scanned() {
    let text = format!(
        "FROM debian:bookworm-slim\nARG NPM_TOKEN=literal-npm\nENV LANG=C.UTF-8 API_KEY=\"abc\"\nENV SESSION {RANDOM}\nARG GH_TOKEN\nENV TOKEN_REF=${{TOKEN}}\nRUN echo {GHP}\n"
    );
    let found = scan_secrets(
        ".devcontainer/Dockerfile.local",
        &text,
        TextKind::Dockerfile,
    );
    assert_eq!(
        codes(&found),
        [
            ("aibox::policy::secret_key", Some(2)),
            ("aibox::policy::secret_key", Some(3)),
            ("aibox::policy::secret_entropy", Some(4)),
            ("aibox::policy::secret_value", Some(7)),
        ]
    );
}

/// A Compose file listed only by another dev container configuration is committed like
/// the override, so the gate (and doctor, through `check_compose_setup`) scans it too;
/// `aibox up`'s own files are scanned with the plan, not here a second time.
#[test]
fn compose_files_of_other_configurations_are_scanned() {
    use std::collections::BTreeMap;

    let token = format!("ghp_{}", "x".repeat(36));
    let listed = format!("services:\n  eb1:\n    environment:\n      GITHUB_TOKEN: {token}\n");
    let sources: BTreeMap<String, String> = BTreeMap::from([
        (
            ".devcontainer/alt/devcontainer.json".to_owned(),
            r#"{"dockerComposeFile": ["../docker-compose.override.yml", "alt.yml"], "service": "eb1"}"#
                .to_owned(),
        ),
        (".devcontainer/alt/alt.yml".to_owned(), listed.clone()),
        (
            ".devcontainer/docker-compose.override.yml".to_owned(),
            listed.clone(),
        ),
    ]);
    let found = aibox_policy::check_compose_setup(&sources, &aibox_policy::Consent::default());
    let secrets: Vec<(&str, Option<usize>)> = found
        .iter()
        .filter(|f| f.code.starts_with("aibox::policy::secret"))
        .map(|f| (f.file.as_str(), f.line))
        .collect();
    assert_eq!(
        secrets,
        [(".devcontainer/alt/alt.yml", Some(4))],
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .filter(|f| f.file == ".devcontainer/alt/alt.yml")
            .all(|f| f.severity == Severity::Error)
    );
    assert_no_value_leaks(&found, &[&token]);
}

/// A token written at several places of `aibox.toml` is reported at each place, once:
/// each value at its own line (not every one at the first), a copy in a comment by the
/// line scan, and two keys on one line each once there.
#[test]
fn a_token_written_twice_is_reported_once_at_each_place() {
    let token = format!("ghp_{}", "x".repeat(36));
    let text = format!(
        "[container.environment]\nA = \"{token}\"\nB = \"{token}\"\n# was: {token}\n\
         [mcp.servers.x.env]\nC = \"{token}\"\n[x]\ninline = {{ D = \"{token}\", E = \"{token}\" }}\n"
    );
    let found = scan_secrets("aibox.toml", &text, TextKind::Toml);
    let places: Vec<(Option<usize>, &str)> = found
        .iter()
        .map(|f| (f.line, f.message.split('`').nth(1).unwrap_or("line scan")))
        .collect();
    assert_eq!(
        places,
        [
            (Some(2), "container.environment.A"),
            (Some(3), "container.environment.B"),
            (Some(4), "line scan"),
            (Some(6), "mcp.servers.x.env.C"),
            (Some(8), "x.inline.D"),
            (Some(8), "x.inline.E"),
        ],
        "{found:#?}"
    );
    assert!(found.iter().all(|f| f.severity == Severity::Error));
    assert_no_value_leaks(&found, &[&token]);
}
