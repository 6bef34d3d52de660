//! The fixture skills: one clean, six each made to fail exactly one review point.
//! Snapshots hold the JSON and the human report of each.

// Helpers outside `#[test]` functions panic on purpose: a failed helper is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aibox_skill_review::{Outcome, Review, ReviewContext, SkillOrigin, review_skill};
use camino::Utf8PathBuf;

fn fixture(name: &str) -> Utf8PathBuf {
    Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A context for a skill from a verified release (fake digest of the right shape).
fn pinned() -> ReviewContext {
    ReviewContext::verified_release(
        "https://releases.example.invalid/fixtures",
        "v1.0.0",
        "ab".repeat(32),
    )
}

fn review(name: &str, ctx: &ReviewContext) -> Review {
    review_skill(&fixture(name), ctx).unwrap()
}

fn check_fixture(name: &str, ctx: &ReviewContext, expected_failed: &[u8]) -> Review {
    let r = review(name, ctx);
    assert_eq!(
        r.failed_points(),
        expected_failed,
        "{name}:\n{}",
        r.render_human()
    );
    assert_eq!(r.failed(), !expected_failed.is_empty());
    assert_eq!(r.points.len(), 6);
    insta::assert_json_snapshot!(format!("{name}.json"), r);
    insta::assert_snapshot!(format!("{name}.txt"), r.render_human());
    r
}

#[test]
fn clean_skill_passes_every_point() {
    let r = check_fixture("clean-skill", &pinned(), &[]);
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.render_human());
    assert_eq!(r.skill, "clean-skill");
}

#[test]
fn obfuscated_payload_fails_point_1() {
    check_fixture("p1-obfuscated", &pinned(), &[1]);
}

#[test]
fn undeclared_network_fails_point_2() {
    check_fixture("p2-network", &pinned(), &[2]);
}

#[test]
fn declaring_the_host_turns_point_2_into_a_warning() {
    let ctx = ReviewContext {
        declared_hosts: vec!["*.example.com".to_owned()],
        ..pinned()
    };
    let r = review("p2-network", &ctx);
    assert!(!r.failed(), "{}", r.render_human());
    assert_eq!(r.point(2).unwrap().outcome, Outcome::Warn);
}

#[test]
fn credential_access_fails_point_3() {
    check_fixture("p3-credentials", &pinned(), &[3]);
}

#[test]
fn undeclared_tool_fails_point_4() {
    let r = check_fixture("p4-tools", &pinned(), &[4]);
    let p4 = r.point(4).unwrap();
    assert!(
        p4.evidence
            .iter()
            .any(|e| e.message.contains("`purge_notes`") && e.level == Outcome::Fail)
    );
    assert!(
        p4.evidence
            .iter()
            .any(|e| e.message.contains("destructive") && e.level == Outcome::Warn)
    );
}

#[test]
fn unpinned_and_git_dependencies_fail_point_5() {
    check_fixture("p5-dependencies", &pinned(), &[5]);
}

#[test]
fn floating_branch_fails_point_6() {
    let ctx = ReviewContext {
        origin: SkillOrigin::Git {
            url: "https://git.example.invalid/skills.git".to_owned(),
            reference: "main".to_owned(),
        },
        ..ReviewContext::default()
    };
    check_fixture("p6-floating", &ctx, &[6]);
}

#[test]
fn every_other_origin_shape_is_judged() {
    let git = |reference: &str| ReviewContext {
        origin: SkillOrigin::Git {
            url: "https://git.example.invalid/s.git".into(),
            reference: reference.into(),
        },
        ..ReviewContext::default()
    };
    let outcome = |ctx: &ReviewContext| review("clean-skill", ctx).point(6).unwrap().outcome;
    assert_eq!(
        outcome(&git(&"0123456789abcdef".repeat(3)[..40])),
        Outcome::Pass
    );
    assert_eq!(outcome(&git("v1.2.3")), Outcome::Fail);
    assert_eq!(outcome(&ReviewContext::default()), Outcome::Fail);
    let local = ReviewContext {
        origin: SkillOrigin::LocalPath {
            path: "/tmp/x".into(),
        },
        ..ReviewContext::default()
    };
    assert_eq!(outcome(&local), Outcome::Warn);
    let release = |version: &str, sha: Option<String>, verified: bool| ReviewContext {
        origin: SkillOrigin::Release {
            source: "s".into(),
            version: version.into(),
            sha256: sha,
            verified,
        },
        ..ReviewContext::default()
    };
    assert_eq!(
        outcome(&release("latest", Some("ab".repeat(32)), true)),
        Outcome::Fail
    );
    assert_eq!(
        outcome(&release("^1.2", Some("ab".repeat(32)), true)),
        Outcome::Fail
    );
    assert_eq!(outcome(&release("v1.2.3", None, false)), Outcome::Fail);
    assert_eq!(
        outcome(&release("v1.2.3", Some("ab".repeat(32)), false)),
        Outcome::Fail
    );
    assert_eq!(
        outcome(&release("v1.2.3", Some("xyz".into()), true)),
        Outcome::Fail
    );
}

#[test]
fn manifest_digests_are_compared() {
    let dir = fixture("clean-skill");
    let server = fs_err::read_to_string(dir.join("mcp/server.py")).unwrap();
    let start = server.find("# /// script").unwrap();
    let end = server.find("# ///\n").unwrap() + "# ///\n".len();
    let header_hash = sha256_hex(&server[start..end]);
    // Canonical JSON of mcp-config.json: sorted keys, no whitespace.
    let canonical = "{\"mcpServers\":{\"processkit-clean-skill\":{\"args\":[\"run\",\"context/skills/testing/clean-skill/mcp/server.py\"],\"command\":\"uv\",\"env\":{}}}}";
    let config_hash = sha256_hex(canonical);
    let good = ReviewContext {
        expected_header_sha256: Some(header_hash.clone()),
        expected_config_sha256: Some(config_hash.clone()),
        ..pinned()
    };
    let r = review("clean-skill", &good);
    assert!(!r.failed(), "{}", r.render_human());
    let bad = ReviewContext {
        expected_header_sha256: Some("00".repeat(32)),
        expected_config_sha256: Some("11".repeat(32)),
        ..pinned()
    };
    let r = review("clean-skill", &bad);
    assert_eq!(r.failed_points(), vec![5, 6], "{}", r.render_human());
}

fn sha256_hex(s: &str) -> String {
    use std::process::Command;
    // Independent of the crate's own hashing: the coreutils tool.
    let mut child = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum (coreutils) must be installed");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), s.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn same_input_gives_byte_identical_reports() {
    let a = serde_json::to_string_pretty(&review("p4-tools", &pinned())).unwrap();
    let b = serde_json::to_string_pretty(&review("p4-tools", &pinned())).unwrap();
    assert_eq!(a, b);
}
