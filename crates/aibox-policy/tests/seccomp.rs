//! The seccomp consent gate and the generated profile.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use aibox_config::{AiboxToml, CodexSandbox, Harness, parse_aibox_toml};
use aibox_policy::seccomp::{BWRAP_SYSCALLS, base_profile};
use aibox_policy::{
    PROFILE_PATH, PolicyError, SeccompPosture, container_security, generated_profile,
    generated_profile_sha256, sha256_hex,
};
use miette::Diagnostic;
use serde_json::Value;

fn config(harnesses: &str, security: &str) -> AiboxToml {
    let text = format!(
        "[container]\nname = \"demo\"\n[ai]\nharnesses = [{harnesses}]\n[security]\n{security}\n"
    );
    parse_aibox_toml(&text, "aibox.toml").unwrap()
}

fn render(err: &PolicyError) -> String {
    format!(
        "code: {}\nerror: {err}\nhelp:\n{}\n",
        err.code().map(|c| c.to_string()).unwrap_or_default(),
        err.help().map(|h| h.to_string()).unwrap_or_default()
    )
}

#[test]
fn no_codex_means_no_relaxation_even_with_consent() {
    let d = container_security(&config(
        "\"claude\"",
        "codex_sandbox = \"unconfined\"\nacknowledge_seccomp_unconfined = true",
    ))
    .unwrap();
    assert_eq!(d.posture, SeccompPosture::Default);
    assert!(d.security_opt.is_empty());
    assert!(d.files.is_empty());
    assert_eq!(d.notes.len(), 1);
}

#[test]
fn codex_defaults_to_landlock_without_relaxation() {
    let cfg = config("\"codex\"", "");
    assert_eq!(cfg.security.codex_sandbox, CodexSandbox::Landlock);
    let d = container_security(&cfg).unwrap();
    assert_eq!(d.posture, SeccompPosture::Landlock);
    assert!(d.security_opt.is_empty());
    assert!(d.files.is_empty());
}

#[test]
fn unconfined_is_refused_without_consent() {
    let err =
        container_security(&config("\"codex\"", "codex_sandbox = \"unconfined\"")).unwrap_err();
    insta::assert_snapshot!("seccomp_unconfined_refused", render(&err));
    let help = err.help().unwrap().to_string();
    // Why, then what the key means, then the alternatives.
    let why = help.find("Why:").unwrap();
    let means = help.find("What the key means").unwrap();
    let alts = help.find("Narrower alternatives").unwrap();
    assert!(why < means && means < alts);
}

#[test]
fn unconfined_is_emitted_with_consent() {
    let d = container_security(&config(
        "\"codex\"",
        "codex_sandbox = \"unconfined\"\nacknowledge_seccomp_unconfined = true",
    ))
    .unwrap();
    assert_eq!(d.posture, SeccompPosture::Unconfined);
    assert_eq!(d.security_opt, vec!["seccomp=unconfined".to_owned()]);
    assert!(d.files.is_empty());
}

#[test]
fn legacy_acknowledgement_alone_selects_unconfined() {
    let d = container_security(&config(
        "\"codex\"",
        "acknowledge_seccomp_unconfined = true",
    ))
    .unwrap();
    assert_eq!(d.posture, SeccompPosture::Unconfined);
    assert_eq!(d.security_opt, vec!["seccomp=unconfined".to_owned()]);
}

#[test]
fn profile_is_refused_without_its_own_consent() {
    // The unconfined acknowledgement does not cover the profile.
    let err = container_security(&config(
        "\"codex\"",
        "codex_sandbox = \"seccomp-profile\"\nacknowledge_seccomp_unconfined = true",
    ))
    .unwrap_err();
    insta::assert_snapshot!("seccomp_profile_refused", render(&err));
}

#[test]
fn profile_with_consent_plans_the_file_and_its_hash() {
    let cfg = config(
        "\"claude\", \"codex\"",
        "codex_sandbox = \"seccomp-profile\"\nacknowledge_seccomp_profile = true",
    );
    assert!(cfg.ai.harnesses.contains(&Harness::Codex));
    let d = container_security(&cfg).unwrap();
    assert_eq!(d.posture, SeccompPosture::Profile);
    assert_eq!(
        d.security_opt,
        vec!["seccomp=aibox-seccomp.json".to_owned()]
    );
    assert_eq!(d.files.len(), 1);
    assert_eq!(d.files[0].path.as_str(), PROFILE_PATH);
    let sha = sha256_hex(&d.files[0].contents);
    assert_eq!(d.profile_sha256.as_deref(), Some(sha.as_str()));
    assert_eq!(generated_profile_sha256().unwrap(), sha);
    // Byte-identical on every call.
    assert_eq!(container_security(&cfg).unwrap(), d);
    for opt in &d.security_opt {
        assert!(!opt.contains("privileged") && !opt.to_ascii_uppercase().contains("SYS_ADMIN"));
    }
}

fn unconditional_allow(rule: &Value) -> bool {
    rule["action"] == "SCMP_ACT_ALLOW"
        && rule["args"].as_array().is_none_or(Vec::is_empty)
        && rule["includes"]
            .as_object()
            .is_none_or(serde_json::Map::is_empty)
        && rule["excludes"]
            .as_object()
            .is_none_or(serde_json::Map::is_empty)
}

#[test]
fn profile_is_the_default_plus_only_what_bubblewrap_needs() {
    let base: Value = serde_json::from_str(base_profile()).unwrap();
    let generated: Value = serde_json::from_str(&generated_profile().unwrap()).unwrap();
    // Top-level settings unchanged.
    for key in ["defaultAction", "defaultErrnoRet", "archMap"] {
        assert_eq!(base[key], generated[key], "{key}");
    }
    let base_rules = base["syscalls"].as_array().unwrap();
    let gen_rules = generated["syscalls"].as_array().unwrap();
    // Every bubblewrap syscall is allowed unconditionally, and denied nowhere without args.
    for name in BWRAP_SYSCALLS {
        assert!(
            gen_rules.iter().any(|r| unconditional_allow(r)
                && r["names"].as_array().unwrap().iter().any(|n| n == name)),
            "{name} not allowed"
        );
        assert!(!gen_rules.iter().any(|r| r["action"] != "SCMP_ACT_ALLOW"
            && r["args"].as_array().is_none_or(Vec::is_empty)
            && r["names"].as_array().unwrap().iter().any(|n| n == name)));
    }
    // clone3 is exactly as the base has it.
    let count = |rules: &[Value], name: &str| {
        rules
            .iter()
            .filter(|r| r["names"].as_array().unwrap().iter().any(|n| n == name))
            .count()
    };
    assert_eq!(count(base_rules, "clone3"), count(gen_rules, "clone3"));
    // All other rules are unchanged: the base with bubblewrap's names removed from its
    // argument-free denials (whose comment then says so), plus an added allow rule only for
    // names the base does not already allow unconditionally.
    let mut expected = base_rules.clone();
    let mut changed = Vec::new();
    for (i, r) in expected.iter_mut().enumerate() {
        if r["action"] != "SCMP_ACT_ALLOW" && r["args"].as_array().is_none_or(Vec::is_empty) {
            let names = r["names"].as_array_mut().unwrap();
            let before = names.len();
            names.retain(|n| !BWRAP_SYSCALLS.contains(&n.as_str().unwrap()));
            if names.len() != before {
                changed.push(i);
            }
        }
    }
    expected.retain(|r| !r["names"].as_array().unwrap().is_empty());
    let strip = |r: &Value| {
        let mut r = r.clone();
        r.as_object_mut().unwrap().remove("comment");
        r
    };
    assert!(gen_rules.len() >= expected.len());
    for (g, e) in gen_rules.iter().zip(&expected) {
        assert_eq!(strip(g), strip(e));
    }
    let extra = &gen_rules[expected.len()..];
    assert!(extra.iter().all(unconditional_allow));
    assert!(!changed.is_empty());
    let modified: Vec<&Value> = changed
        .iter()
        .map(|i| &gen_rules[*i])
        .chain(extra)
        .collect();
    for r in &modified {
        assert!(r["comment"].as_str().unwrap().contains("Apache-2.0"));
    }
    insta::assert_json_snapshot!("seccomp_changed_rules", modified);
    // No capability is granted anywhere new.
    let text = generated_profile().unwrap();
    assert!(!text.contains("privileged"));
}

#[test]
fn generated_profile_ends_with_newline_and_is_stable() {
    let a = generated_profile().unwrap();
    assert!(a.ends_with("}\n"));
    assert_eq!(a, generated_profile().unwrap());
}

#[test]
fn options_the_override_already_sets_are_not_emitted_twice() {
    use aibox_policy::without_override_duplicates;
    let opts = vec!["seccomp=unconfined".to_owned()];
    let override_text = "services:\n  demo:\n    security_opt:\n      - seccomp:unconfined\n";
    assert!(without_override_duplicates(&opts, Some(override_text)).is_empty());
    assert_eq!(without_override_duplicates(&opts, None), opts);
    assert_eq!(
        without_override_duplicates(&opts, Some("services:\n  demo:\n    image: x\n")),
        opts
    );
    assert_eq!(without_override_duplicates(&opts, Some("not: [yaml")), opts);
}
