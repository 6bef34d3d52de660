//! The `aibox.toml` that `init` writes: commented, strict-valid, never consenting.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aibox_config::{ContextMode, Harness, InitOptions, parse_aibox_toml, render_aibox_toml};

fn no_uncommented_consent(text: &str) {
    for line in text.lines() {
        let code = line.split('#').next().unwrap_or("").trim();
        assert!(
            !code.starts_with("acknowledge_") && !code.starts_with("codex_sandbox"),
            "init must not set a consent key: {line}"
        );
    }
}

#[test]
fn default_options_render_valid_commented_file() {
    // The defaults are those of `aibox init --yes`: harness-only, which needs no download
    // (QA28 r4: processkit mode with nothing pinned warned at every apply).
    assert_eq!(
        InitOptions::new("demo").context_mode,
        ContextMode::HarnessOnly
    );
    let text = render_aibox_toml(&InitOptions {
        context_mode: ContextMode::Processkit,
        ..InitOptions::new("demo")
    });
    let cfg = parse_aibox_toml(&text, "aibox.toml").unwrap();
    assert_eq!(cfg.container.name, "demo");
    assert_eq!(cfg.ai.harnesses, [Harness::Claude]);
    assert!(!cfg.security.acknowledge_seccomp_unconfined);
    assert!(!cfg.security.acknowledge_seccomp_profile);
    no_uncommented_consent(&text);
    insta::assert_snapshot!(text);
}

#[test]
fn every_answer_is_used() {
    let opts = InitOptions {
        name: "my-app".into(),
        harnesses: vec![Harness::Codex, Harness::Gemini],
        context_mode: ContextMode::Processkit,
        processkit_source: Some("https://releases.example.invalid/pk".into()),
        processkit_version: Some("v0.28.3".into()),
        base_image: Some("docker.io/library/debian:12.8".into()),
    };
    let text = render_aibox_toml(&opts);
    let cfg = parse_aibox_toml(&text, "aibox.toml").unwrap();
    assert_eq!(cfg.ai.harnesses, [Harness::Codex, Harness::Gemini]);
    assert_eq!(
        cfg.processkit.source.as_deref(),
        Some("https://releases.example.invalid/pk")
    );
    assert_eq!(cfg.processkit.version.as_deref(), Some("v0.28.3"));
    assert_eq!(cfg.container.base_image, "docker.io/library/debian:12.8");
    // Codex must not pull in any consent.
    assert!(!cfg.security.acknowledge_seccomp_unconfined);
    // The text says what Codex really does (bubblewrap, never a Landlock mode) and which
    // engine needs a consent.
    assert!(!text.to_ascii_lowercase().contains("landlock"), "{text}");
    for needle in [
        "bubblewrap",
        "codex_sandbox = \"engine-default\"",
        "Docker's refuses them",
        "acknowledge_seccomp_profile",
        "acknowledge_seccomp_unconfined",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    no_uncommented_consent(&text);
    assert_eq!(
        text,
        render_aibox_toml(&opts),
        "rendering must be deterministic"
    );
}

#[test]
fn harness_only_mode() {
    let mut opts = InitOptions::new("tools");
    opts.context_mode = ContextMode::HarnessOnly;
    opts.harnesses = vec![];
    let text = render_aibox_toml(&opts);
    let cfg = parse_aibox_toml(&text, "aibox.toml").unwrap();
    assert_eq!(cfg.context.mode, ContextMode::HarnessOnly);
    assert!(cfg.ai.harnesses.is_empty());
}

#[test]
fn strings_are_escaped() {
    let mut opts = InitOptions::new("demo");
    opts.context_mode = ContextMode::Processkit;
    opts.processkit_source = Some("dir with \"quotes\" and \\ slash".into());
    let text = render_aibox_toml(&opts);
    let cfg = parse_aibox_toml(&text, "aibox.toml").unwrap();
    assert_eq!(
        cfg.processkit.source.as_deref(),
        Some("dir with \"quotes\" and \\ slash")
    );
}

#[test]
fn invalid_answers_fail_the_strict_loader() {
    let err = parse_aibox_toml(
        &render_aibox_toml(&InitOptions::new("bad name")),
        "aibox.toml",
    )
    .unwrap_err();
    assert_eq!(err.problems()[0].code(), "aibox::config::invalid_value");
    let mut opts = InitOptions::new("demo");
    opts.base_image = Some("debian".into());
    let err = parse_aibox_toml(&render_aibox_toml(&opts), "aibox.toml").unwrap_err();
    assert_eq!(err.problems()[0].code(), "aibox::config::invalid_value");
}

/// A harness-only project gets no empty `[processkit]` or `[skills]` table, and no file
/// of aibox's mentions a document user projects do not have.
#[test]
fn harness_only_has_no_processkit_tables_and_no_dangling_references() {
    let mut opts = InitOptions::new("demo");
    opts.context_mode = ContextMode::HarnessOnly;
    let text = render_aibox_toml(&opts);
    let cfg = parse_aibox_toml(&text, "aibox.toml").unwrap();
    assert_eq!(cfg.context.mode, ContextMode::HarnessOnly);
    for table in ["[processkit]", "[skills]"] {
        assert!(
            !text.lines().any(|l| l.trim() == table),
            "{table} in a harness-only file:\n{text}"
        );
    }
    let processkit = render_aibox_toml(&InitOptions {
        context_mode: ContextMode::Processkit,
        ..InitOptions::new("demo")
    });
    for text in [&text, &processkit] {
        assert!(!text.contains("SECURITY.md"), "{text}");
    }
    assert!(processkit.lines().any(|l| l.trim() == "[processkit]"));
}
