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

fn fixture(name: &str) -> Utf8PathBuf {
    Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn sha(name: &str) -> String {
    aibox_skill_review::content_sha256(&fixture(name)).unwrap()
}

/// A consent for the fixture `skill` as it is, accepting `points`.
fn consent_for(skill: &str, reviewer: &str, points: &[u8]) -> String {
    let points: Vec<String> = points.iter().map(u8::to_string).collect();
    format!(
        "[[skills.review_exceptions]]\nskill = \"{skill}\"\nsha256 = \"{}\"\npoints = [{}]\n\
         reviewer = \"{reviewer}\"\nreason = \"reviewed\"\n",
        sha(skill),
        points.join(", ")
    )
}

fn skills(names: &[&str]) -> Vec<(String, Utf8PathBuf, ReviewContext)> {
    let ctx = ReviewContext::verified_release(
        "https://releases.example.invalid/x",
        "v1.0.0",
        "ef".repeat(32),
    );
    names
        .iter()
        .map(|n| ((*n).to_owned(), fixture(n), ctx.clone()))
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
        "refusing to register 2 skill(s) that fail the skill review: \
         p3-credentials (point 3); p4-tools (point 4)"
    );
    assert!(
        help.contains("[[skills.review_exceptions]]\nskill = \"p4-tools\""),
        "{help}"
    );

    // The help gives the entry to paste, bound to the content and the points.
    let sha = sha("p4-tools");
    assert!(
        help.contains(&format!("sha256 = \"{sha}\"\npoints = [4]\n")),
        "{help}"
    );

    // Consent for one of the two is not enough.
    let one = project(&consent_for("p3-credentials", "Alex Reviewer", &[3]));
    let err = gate(&one, &input).unwrap_err();
    let GateError::Refused { skills, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(skills.len(), 1);
    assert_eq!(skills[0].skill, "p4-tools");

    // Consent for both: everything is allowed, in input order, and the consents are reported.
    let both = project(&format!(
        "{}{}",
        consent_for("p3-credentials", "Alex Reviewer", &[3]),
        consent_for("p4-tools", "Sam Reviewer", &[4])
    ));
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

#[test]
fn a_consent_is_bound_to_the_content_and_the_points_it_accepts() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = Utf8PathBuf::from_path_buf(scratch.path().join("p3-credentials")).unwrap();
    aibox_test_support::copy_dir(&fixture("p3-credentials"), &dir);
    let ctx = skills(&["p3-credentials"]).remove(0).2;
    let input = vec![("p3-credentials".to_owned(), dir.clone(), ctx)];

    // An entry from before consents were bound (no digest, no points) is stale.
    let old = project(
        "[[skills.review_exceptions]]\nskill = \"p3-credentials\"\nreviewer = \"Alex\"\nreason = \"ok\"\n",
    );
    let err = gate(&old, &input).unwrap_err();
    assert_eq!(
        err.code().unwrap().to_string(),
        "aibox::skill_review::stale_consent"
    );
    assert!(
        err.to_string()
            .contains("p3-credentials (point 3: the consent records no content digest; point(s) 3 fail but the consent accepts none)"),
        "{err}"
    );

    // Bound to this content and point 3: allowed.
    let sha = aibox_skill_review::content_sha256(&dir).unwrap();
    let bound = |points: &str, sha: &str| {
        project(&format!(
            "[[skills.review_exceptions]]\nskill = \"p3-credentials\"\nsha256 = \"{sha}\"\n\
             points = [{points}]\nreviewer = \"Alex\"\nreason = \"ok\"\n"
        ))
    };
    assert_eq!(gate(&bound("3", &sha), &input).unwrap(), ["p3-credentials"]);
    // Accepting another point only: the difference is named.
    let err = gate(&bound("2", &sha), &input).unwrap_err();
    assert!(
        err.to_string()
            .contains("point(s) 3 fail but the consent accepts only 2; point(s) 2 no longer fail"),
        "{err}"
    );
    // An agent-mutable `config/` file is data: the consent still holds.
    fs_err::create_dir_all(dir.join("config")).unwrap();
    fs_err::write(dir.join("config/settings.yaml"), "limit: 3\n").unwrap();
    assert_eq!(gate(&bound("3", &sha), &input).unwrap(), ["p3-credentials"]);
    // One changed byte of the code: stale, naming both digests.
    let skill_md = dir.join("SKILL.md");
    let mut text = fs_err::read_to_string(&skill_md).unwrap();
    text.push('\n');
    fs_err::write(&skill_md, text).unwrap();
    let now = aibox_skill_review::content_sha256(&dir).unwrap();
    assert_ne!(now, sha);
    let err = gate(&bound("3", &sha), &input).unwrap_err();
    let GateError::StaleConsent { skills, help } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(skills[0].sha256, now);
    assert!(
        err.to_string().contains(&format!(
            "its content changed since the consent (sha256 {} recorded, {} now)",
            &sha[..12],
            &now[..12]
        )),
        "{err}"
    );
    assert!(help.contains(&format!("sha256 = \"{now}\"")), "{help}");
    // Refreshing the entry with the new digest lets it through again.
    assert_eq!(gate(&bound("3", &now), &input).unwrap(), ["p3-credentials"]);
}

/// The one pass over a skill (`SkillTree`) gives the content digest `content_sha256`
/// gives, the digest of every regular file (`config/` included, a `.git` folder and
/// links left out), and the review `review_skill` gives.
#[test]
fn one_read_of_a_skill_gives_its_digests_and_its_review() {
    use sha2::Digest as _;
    let tmp = tempfile::tempdir().unwrap();
    let dir = Utf8PathBuf::from_path_buf(tmp.path().join("p3-credentials")).unwrap();
    copy_dir(&fixture("p3-credentials"), &dir);
    fs_err::create_dir_all(dir.join("config")).unwrap();
    fs_err::write(dir.join("config/settings.yaml"), "limit: 3\n").unwrap();
    fs_err::create_dir_all(dir.join(".git")).unwrap();
    fs_err::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    // Above the review's in-memory limit: hashed from disk.
    fs_err::write(dir.join("assets.bin"), vec![7u8; 5 * 1024 * 1024]).unwrap();
    std::os::unix::fs::symlink("SKILL.md", dir.join("README.md")).unwrap();

    let tree = aibox_skill_review::SkillTree::read(&dir).unwrap();
    let digests = tree.digests().unwrap();
    assert_eq!(
        digests.content_sha256,
        aibox_skill_review::content_sha256(&dir).unwrap()
    );
    for rel in ["SKILL.md", "config/settings.yaml", "assets.bin"] {
        let want: [u8; 32] = sha2::Sha256::digest(fs_err::read(dir.join(rel)).unwrap()).into();
        assert_eq!(digests.files.get(rel), Some(&want), "{rel}");
    }
    assert!(!digests.files.contains_key(".git/HEAD"));
    assert!(
        !digests.files.contains_key("README.md"),
        "a link is no file"
    );
    let ctx = ReviewContext::default();
    assert_eq!(
        tree.review(&ctx),
        aibox_skill_review::review_skill(&dir, &ctx).unwrap()
    );
}

fn copy_dir(from: &Utf8PathBuf, to: &Utf8PathBuf) {
    fs_err::create_dir_all(to).unwrap();
    for e in fs_err::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let (src, dst) = (from.join(&name), to.join(&name));
        if e.file_type().unwrap().is_dir() {
            copy_dir(&src, &dst);
        } else {
            fs_err::copy(&src, &dst).unwrap();
        }
    }
}
