//! The seccomp consent gate and the generated profile.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use aibox_config::{AiboxToml, CodexSandbox, Harness, parse_aibox_toml};
use aibox_policy::seccomp::{BWRAP_SYSCALLS, base_profile};
use aibox_policy::{
    PROFILE_PATH, PolicyError, SeccompPosture, TargetEngine, container_security,
    container_security_for, generated_profile, generated_profile_sha256, sha256_hex,
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
fn codex_defaults_to_the_engine_default_without_relaxation() {
    let cfg = config("\"codex\"", "");
    assert_eq!(cfg.security.codex_sandbox, CodexSandbox::EngineDefault);
    let d = container_security(&cfg).unwrap();
    assert_eq!(d.posture, SeccompPosture::EngineDefault);
    assert!(d.security_opt.is_empty());
    assert!(d.files.is_empty());
    assert!(d.warnings.is_empty());
}

#[test]
fn landlock_loads_as_engine_default_with_a_deprecation_warning() {
    let legacy = container_security(&config("\"codex\"", "codex_sandbox = \"landlock\"")).unwrap();
    let current =
        container_security(&config("\"codex\"", "codex_sandbox = \"engine-default\"")).unwrap();
    assert_eq!(legacy.posture, SeccompPosture::EngineDefault);
    assert_eq!(legacy.security_opt, current.security_opt);
    assert_eq!(legacy.files, current.files);
    assert_eq!(legacy.warnings.len(), 1);
    let warning = &legacy.warnings[0];
    for needle in ["deprecated", "engine-default", "bubblewrap", "Docker"] {
        assert!(warning.contains(needle), "{needle}: {warning}");
    }
    // Also when Codex is off: the value is still deprecated.
    let off = container_security(&config("\"claude\"", "codex_sandbox = \"landlock\"")).unwrap();
    assert_eq!(off.warnings.len(), 1);
    assert!(
        off.notes.is_empty(),
        "landlock is the old default, not a relaxation"
    );
}

#[test]
fn a_consent_key_alone_selects_its_strategy_profile_first() {
    let d = container_security(&config("\"codex\"", "acknowledge_seccomp_profile = true")).unwrap();
    assert_eq!(d.posture, SeccompPosture::Profile);
    let both = container_security(&config(
        "\"codex\"",
        "acknowledge_seccomp_profile = true\nacknowledge_seccomp_unconfined = true",
    ))
    .unwrap();
    assert_eq!(both.posture, SeccompPosture::Profile, "the narrower one");
    assert_eq!(both.notes.len(), 1);
}

#[test]
fn engine_gate_refuses_codex_on_docker_and_names_both_keys() {
    for engine in [TargetEngine::Docker, TargetEngine::Unknown] {
        for security in [
            "",
            "codex_sandbox = \"engine-default\"",
            "codex_sandbox = \"landlock\"",
        ] {
            let err = container_security_for(&config("\"codex\"", security), engine).unwrap_err();
            assert!(
                matches!(err, PolicyError::EngineBlocksSandbox { .. }),
                "{err:?}"
            );
            let text = render(&err);
            assert!(text.contains("aibox::policy::seccomp_consent"), "{text}");
            let profile = text.find("acknowledge_seccomp_profile").unwrap();
            let unconfined = text.find("acknowledge_seccomp_unconfined").unwrap();
            assert!(text[profile..].contains("(preferred)") || text.contains("preferred"));
            assert!(
                profile < unconfined || text.contains("1. `[security] acknowledge_seccomp_profile")
            );
            assert!(
                !text.contains("cap_add")
                    && text.contains("never uses `privileged` or CAP_SYS_ADMIN")
            );
        }
    }
    let err = container_security_for(&config("\"codex\"", ""), TargetEngine::Docker).unwrap_err();
    insta::assert_snapshot!("engine_gate_docker", render(&err));
}

#[test]
fn engine_gate_passes_podman_relaxations_and_projects_without_codex() {
    let ok = |harness: &str, security: &str, engine| {
        container_security_for(&config(harness, security), engine).unwrap()
    };
    assert_eq!(
        ok("\"codex\"", "", TargetEngine::Podman).posture,
        SeccompPosture::EngineDefault
    );
    for engine in [
        TargetEngine::Podman,
        TargetEngine::Docker,
        TargetEngine::Unknown,
    ] {
        assert_eq!(
            ok("\"claude\"", "", engine).posture,
            SeccompPosture::Default
        );
        assert_eq!(
            ok(
                "\"codex\"",
                "codex_sandbox = \"seccomp-profile\"\nacknowledge_seccomp_profile = true",
                engine
            )
            .posture,
            SeccompPosture::Profile
        );
        assert_eq!(
            ok(
                "\"codex\"",
                "codex_sandbox = \"unconfined\"\nacknowledge_seccomp_unconfined = true",
                engine
            )
            .posture,
            SeccompPosture::Unconfined
        );
        // The decision of what to write never depends on the engine.
        assert_eq!(
            ok("\"codex\"", "acknowledge_seccomp_profile = true", engine),
            container_security(&config("\"codex\"", "acknowledge_seccomp_profile = true")).unwrap()
        );
    }
    // Consent is still required for the relaxations, whatever the engine.
    assert!(matches!(
        container_security_for(
            &config("\"codex\"", "codex_sandbox = \"seccomp-profile\""),
            TargetEngine::Podman
        ),
        Err(PolicyError::SeccompConsent { .. })
    ));
}

/// `[ai.execution] filesystem = "container-full"` is written into no Codex file, so Codex
/// still starts bubblewrap: it satisfies nothing, and no help offers it.
#[test]
fn container_full_is_neither_a_pass_nor_offered() {
    let full = "[container]\nname = \"demo\"\n[ai]\nharnesses = [\"codex\"]\n[ai.execution]\nfilesystem = \"container-full\"\n";
    let full = parse_aibox_toml(full, "aibox.toml").unwrap();
    let err = container_security_for(&full, TargetEngine::Docker).unwrap_err();
    assert!(matches!(err, PolicyError::EngineBlocksSandbox { .. }));
    let mut texts = vec![err.help().unwrap().to_string()];
    for posture in [
        SeccompPosture::EngineDefault,
        SeccompPosture::Profile,
        SeccompPosture::Unconfined,
    ] {
        texts.push(aibox_policy::sandbox_fix(posture));
    }
    for sandbox in ["unconfined", "seccomp-profile"] {
        let refused = container_security(&config(
            "\"codex\"",
            &format!("codex_sandbox = \"{sandbox}\""),
        ))
        .unwrap_err();
        texts.push(refused.help().unwrap().to_string());
    }
    for text in texts {
        assert!(!text.contains("container-full"), "{text}");
    }
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
        vec!["seccomp=.devcontainer/aibox-seccomp.json".to_owned()]
    );
    // The same bytes where each Compose provider looks for the path (see
    // `PROFILE_SECURITY_OPT`).
    let paths: Vec<&str> = d.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            PROFILE_PATH,
            ".devcontainer/.devcontainer/aibox-seccomp.json"
        ]
    );
    assert_eq!(d.files[0].contents, d.files[1].contents);
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
    // Docker's default denies none of them without arguments: exactly one rule is added,
    // naming exactly bubblewrap's syscalls, and no base rule changes.
    assert!(changed.is_empty());
    assert_eq!(gen_rules.len(), base_rules.len() + 1);
    let added: Vec<&str> = extra[0]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert_eq!(added, BWRAP_SYSCALLS);
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
