//! The apply gate: a failing skill is refused until `aibox.toml` records a consent.

// Helpers outside `#[test]` functions panic on purpose: a failed helper is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aibox_config::{LocalToml, Project, parse_aibox_toml};
use aibox_skill_review::{GateError, ReviewContext, gate, gate_report};
use camino::Utf8PathBuf;
use miette::Diagnostic;

fn project(extra: &str) -> Project {
    let text = format!("[container]\nname = \"demo\"\n{extra}");
    Project {
        root: Utf8PathBuf::from("/nonexistent/project"),
        config: parse_aibox_toml(&text, "aibox.toml").unwrap(),
        local: LocalToml::default(),
    }
}

fn skills(names: &[&str]) -> Vec<(String, Utf8PathBuf, ReviewContext)> {
    let ctx = ReviewContext::verified_release(
        "https://releases.example.invalid/x",
        "v1.0.0",
        "ef".repeat(32),
    );
    names
        .iter()
        .map(|n| {
            let dir = Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(n);
            ((*n).to_owned(), dir, ctx.clone())
        })
        .collect()
}

#[test]
fn passing_skills_are_allowed() {
    let allowed = gate(&project(""), &skills(&["clean-skill"])).unwrap();
    assert_eq!(allowed, vec!["clean-skill"]);
}

#[test]
fn failing_skills_are_refused_until_consent_is_recorded() {
    let input = skills(&["clean-skill", "p3-credentials", "p4-tools"]);
    let err = gate(&project(""), &input).unwrap_err();
    let GateError::Refused { skills, help } = &err else {
        panic!("{err:?}")
    };
    let refused: Vec<_> = skills
        .iter()
        .map(|s| (s.skill.as_str(), s.failed_points.clone()))
        .collect();
    assert_eq!(
        refused,
        vec![("p3-credentials", vec![3]), ("p4-tools", vec![4])]
    );
    assert_eq!(
        err.code().unwrap().to_string(),
        "aibox::skill_review::refused"
    );
    assert_eq!(
        err.to_string(),
        "refusing to register 2 skill(s) that fail the third-party skill review: \
         p3-credentials (point 3); p4-tools (point 4)"
    );
    assert!(
        help.contains("[[skills.review_exceptions]]\nskill = \"p4-tools\""),
        "{help}"
    );

    // Consent for one of the two is not enough.
    let one = project(
        "[[skills.review_exceptions]]\nskill = \"p3-credentials\"\nreviewer = \"Alex Reviewer\"\nreason = \"reads the deploy key on purpose\"\n",
    );
    let err = gate(&one, &input).unwrap_err();
    let GateError::Refused { skills, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(skills.len(), 1);
    assert_eq!(skills[0].skill, "p4-tools");

    // Consent for both: everything is allowed, in input order, and the consents are reported.
    let both = project(
        "[[skills.review_exceptions]]\nskill = \"p3-credentials\"\nreviewer = \"Alex Reviewer\"\nreason = \"reads the deploy key on purpose\"\n\
         [[skills.review_exceptions]]\nskill = \"p4-tools\"\nreviewer = \"Sam Reviewer\"\nreason = \"purge is wanted\"\n",
    );
    let report = gate_report(&both, &input).unwrap();
    assert_eq!(
        report.allowed,
        vec!["clean-skill", "p3-credentials", "p4-tools"]
    );
    assert_eq!(
        report.consented,
        vec![
            ("p3-credentials".to_owned(), "Alex Reviewer".to_owned()),
            ("p4-tools".to_owned(), "Sam Reviewer".to_owned())
        ]
    );
    assert_eq!(report.reviews.len(), 3);
}

#[test]
fn incomplete_consent_is_an_error() {
    let p = project(
        "[[skills.review_exceptions]]\nskill = \"p4-tools\"\nreviewer = \" \"\nreason = \"ok\"\n",
    );
    let err = gate(&p, &skills(&["p4-tools"])).unwrap_err();
    assert!(
        matches!(
            err,
            GateError::IncompleteConsent {
                field: "reviewer",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.code().unwrap().to_string(),
        "aibox::skill_review::incomplete_consent"
    );
    let p = project(
        "[[skills.review_exceptions]]\nskill = \"p4-tools\"\nreviewer = \"Sam\"\nreason = \"\"\n",
    );
    let err = gate(&p, &skills(&["p4-tools"])).unwrap_err();
    assert!(
        matches!(
            err,
            GateError::IncompleteConsent {
                field: "reason",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn unreadable_skills_stop_the_gate() {
    let mut input = skills(&["clean-skill"]);
    input[0].1 = Utf8PathBuf::from("/nonexistent/skill");
    let err = gate(&project(""), &input).unwrap_err();
    assert!(matches!(err, GateError::Review { .. }), "{err:?}");
    assert_eq!(err.to_string(), "cannot review skill `clean-skill`");
    assert_eq!(
        err.code().unwrap().to_string(),
        "aibox::skill_review::unreadable"
    );
}
