//! Redaction: every planted fake secret, home path, user and host name disappears.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use aibox_policy::{Redactor, redact};

const PLANTED: &[&str] = &[
    "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000",
    "sk-ant-api03-FAKEFAKEFAKEFAKEFAKE",
    "sk-proj-FAKEFAKEFAKEFAKEFAKE",
    "AKIAFAKEFAKEFAKE0000",
    "AIzaFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE000",
    "xoxp-0000-FAKEFAKEFAKE",
    "FAKEBEARERFAKEBEARER",
    "FAKEPASSWORD",
    "FAKEPEMBODY",
    "hunter2-fake",
    "Q7vX2mL9pR4tZ8wK1nB6yF3h",
    "basicFAKEcredentials",
    "my-personal-value",
    "alice",
    "alicebox",
];

fn sample() -> String {
    format!(
        "GITHUB_TOKEN={}\n\
         \"anthropic\": \"{}\",\n\
         openai = '{}'\n\
         aws: {}\n\
         google {}\n\
         slack={}\n\
         Authorization: Bearer FAKEBEARERFAKEBEARER\n\
         Authorization: Basic basicFAKEcredentials\n\
         remote = \"https://alice:FAKEPASSWORD@example.invalid/x\"\n\
         -----BEGIN RSA PRIVATE KEY-----\nFAKEPEMBODY\n-----END RSA PRIVATE KEY-----\n\
         DB_PASSWORD=hunter2-fake\n\
         SESSION_ID=Q7vX2mL9pR4tZ8wK1nB6yF3h\n\
         CUSTOM=my-personal-value\n\
         root: /home/alice/projects/demo and /Users/alice/x\n\
         host alicebox, user alice\n\
         kept: GH_TOKEN=${{GH_TOKEN}} LANG=C.UTF-8 digest 4f2a9c0e8b7d release v0.28.3\n",
        PLANTED[0], PLANTED[1], PLANTED[2], PLANTED[3], PLANTED[4], PLANTED[5]
    )
}

fn redactor() -> Redactor {
    Redactor {
        users: vec!["alice".to_owned()],
        hosts: vec!["alicebox".to_owned()],
        values: vec!["my-personal-value".to_owned()],
    }
}

#[test]
fn nothing_planted_survives() {
    let out = redact(&sample(), &redactor());
    for p in PLANTED {
        assert!(!out.contains(p), "{p} survived:\n{out}");
    }
    insta::assert_snapshot!("redacted_sample", out);
}

#[test]
fn references_and_ordinary_values_stay() {
    let out = redact(&sample(), &redactor());
    assert!(out.contains("GH_TOKEN=${GH_TOKEN}"));
    assert!(out.contains("LANG=C.UTF-8"));
    assert!(out.contains("v0.28.3"));
}

#[test]
fn redaction_is_idempotent() {
    let once = redact(&sample(), &redactor());
    assert_eq!(redact(&once, &redactor()), once);
}

#[test]
fn short_or_generic_names_are_not_mangled() {
    let r = Redactor {
        users: vec!["root".to_owned(), "a".to_owned()],
        ..Redactor::default()
    };
    assert_eq!(redact("a root path /root", &r), "a root path /root");
}

#[test]
fn redacting_json_text_keeps_it_valid_json() {
    let value = serde_json::json!({
        "files": {
            "aibox.toml": "[container]\nname = \"demo\"\nenv = { GITHUB_TOKEN = \"ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000\", API_KEY = \"plain\" }\n",
            ".env": "OPENAI_API_KEY=sk-proj-FAKEFAKEFAKEFAKEFAKE\nPLAIN=x\n",
        },
        "headers": { "Authorization": "Bearer FAKEFAKEFAKEFAKE", "authorization": "Basic abc" },
        "env": ["DOCKER_HOST=tcp://admin:FAKEPASSWORD@alicebox:2376", "HOME=/home/alice"],
        "client_secret": "literal",
        "token": 5,
    });
    let text = serde_json::to_string_pretty(&value).unwrap();
    let out = redact(&text, &redactor());
    let parsed: Result<serde_json::Value, _> = serde_json::from_str(&out);
    assert!(parsed.is_ok(), "{out}");
    for p in [
        "ghp_FAKE",
        "sk-proj-FAKE",
        "FAKEFAKEFAKEFAKE",
        "FAKEPASSWORD",
        "alice",
        "literal",
        "plain",
    ] {
        assert!(!out.contains(p), "{p} survived:\n{out}");
    }
}

/// Shapes `doctor --report` leaked: a list value under a secret-like key, a password
/// passed as a command-line flag in an MCP server's `args`, and `curl -u user:password`.
#[test]
fn list_values_flags_and_user_passwords_are_masked() {
    let text = "DB_PASSWORD = [\"list-secret-fake\"]\n\
                args = [\"--password\", \"flag-secret-fake\"]\n\
                command = \"curl -u deploy:curl-secret-fake https://example.invalid\"\n\
                run --api-key=inline-secret-fake\n";
    let out = redact(text, &Redactor::default());
    for secret in [
        "list-secret-fake",
        "flag-secret-fake",
        "curl-secret-fake",
        "inline-secret-fake",
    ] {
        assert!(!out.contains(secret), "{secret} survived:\n{out}");
    }
    assert!(out.contains("curl -u deploy:***"), "{out}");
    assert_eq!(redact(&out, &Redactor::default()), out);
}
