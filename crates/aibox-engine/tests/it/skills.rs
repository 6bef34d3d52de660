//! `aibox skill enable|disable`: how the `[skills]` lists of `aibox.toml` change.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use aibox_engine::skills::{disable, enable};
use camino::Utf8Path;
use common::Fixture;

fn lists(root: &Utf8Path) -> (Vec<String>, Vec<String>) {
    let skills = aibox_config::load_project(root).unwrap().config.skills;
    (skills.include, skills.exclude)
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn enable_and_disable_move_a_skill_between_the_lists() {
    let f = Fixture::new();
    let none: Vec<String> = Vec::new();

    // Not listed: enable adds it to `include`; again is a no-op.
    enable(&f.root, "alpha", None).unwrap();
    assert_eq!(lists(&f.root), (strings(&["alpha"]), none.clone()));
    enable(&f.root, "alpha", None).unwrap();
    assert_eq!(lists(&f.root), (strings(&["alpha"]), none.clone()));
    enable(&f.root, "beta", None).unwrap();
    assert_eq!(lists(&f.root), (strings(&["alpha", "beta"]), none.clone()));

    // Included: disable takes it off `include` and leaves `exclude` alone.
    disable(&f.root, "alpha", None).unwrap();
    assert_eq!(lists(&f.root), (strings(&["beta"]), none.clone()));

    // Not listed: disable adds it to `exclude`; again is a no-op.
    disable(&f.root, "alpha", None).unwrap();
    assert_eq!(lists(&f.root), (strings(&["beta"]), strings(&["alpha"])));
    let before = f.read("aibox.toml");
    disable(&f.root, "alpha", None).unwrap();
    assert_eq!(f.read("aibox.toml"), before);

    // Excluded: enable takes it off `exclude` without adding it to `include`.
    let written = enable(&f.root, "alpha", None).unwrap();
    assert_eq!(written.file, f.root.join("aibox.toml"));
    assert!(written.no_effect, "the fixture is harness-only");
    assert_eq!(lists(&f.root), (strings(&["beta"]), none));
}

/// `skill list` and `doctor` read the install marker a fixed number of times, whatever
/// the number of installed skills: reading it once per skill (twice, through the trust
/// check) made both quadratic in the release (issue 32). Counted, not timed: the same
/// release with a few skills selected and with every skill selected must parse the marker
/// equally often.
#[test]
fn skill_list_and_doctor_parse_the_marker_a_fixed_number_of_times_at_any_size() {
    use aibox_test_support::http::release::SyntheticRelease;
    let release = SyntheticRelease::processkit_like("v0.28.3", false);
    let parses = |every_skill: bool| {
        let (_a, archives) = common::empty_project();
        let (_c, cache) = common::empty_project();
        let (_p, root) = common::empty_project();
        let mut config = common::release_config(&archives, &release);
        if every_skill {
            let skills: Vec<String> = release
                .files
                .keys()
                .filter_map(|p| p.strip_prefix("context/skills/")?.strip_suffix("/SKILL.md"))
                .filter_map(|s| s.split_once('/'))
                .filter(|(category, name)| !category.starts_with('_') && !name.contains('/'))
                .map(|(_, name)| format!("\"{name}\""))
                .collect();
            config = format!("{config}\n[skills]\ninclude = [{}]\n", skills.join(", "));
        } else {
            config = config.replace("packages = [\"product\"]", "packages = [\"minimal\"]");
        }
        fs_err::write(root.join("aibox.toml"), config).unwrap();
        aibox_engine::apply(&root, &common::apply_opts(Some(&cache))).unwrap();
        let before = aibox_provenance::record::marker_parses();
        let listed = aibox_engine::skills::list(&root).unwrap().len();
        let list = aibox_provenance::record::marker_parses() - before;
        let options = aibox_engine::doctor::DoctorOptions {
            skip_engine: true,
            cache_dir: Some(cache.clone()),
            update_check: aibox_engine::updates::UpdateCheck::Never,
            ..aibox_engine::doctor::DoctorOptions::default()
        };
        let before = aibox_provenance::record::marker_parses();
        aibox_engine::doctor::doctor(&root, &options).unwrap();
        let doctor = aibox_provenance::record::marker_parses() - before;
        (listed, list, doctor)
    };
    let (few, list_few, doctor_few) = parses(false);
    let (all, list_all, doctor_all) = parses(true);
    assert!(all >= 2 * few && few > 0, "{few} skills, then {all}");
    assert_eq!(
        (list_few, doctor_few),
        (list_all, doctor_all),
        "marker parses (skill list, doctor) with {few} and with {all} skills"
    );
    assert!(
        (1..=2).contains(&list_few) && (1..=8).contains(&doctor_few),
        "{list_few}, {doctor_few}"
    );
}

/// `skill list` reads the next skill's folder while another thread reviews the one before:
/// each skill is still described from its own folder (its digest and trust are what the
/// one-skill path, `trust_of_installed`, gives), and a folder that cannot be read fails
/// the list with the first such skill in order, as on one thread.
#[test]
fn skill_list_describes_each_skill_from_its_own_folder_and_fails_on_the_first_bad_one() {
    use aibox_test_support::http::release::SyntheticRelease;
    use std::os::unix::ffi::OsStrExt as _;
    let release = SyntheticRelease::processkit_like("v0.28.3", false);
    let (_a, archives) = common::empty_project();
    let (_c, cache) = common::empty_project();
    let (_p, root) = common::empty_project();
    let config = common::release_config(&archives, &release);
    fs_err::write(root.join("aibox.toml"), config).unwrap();
    aibox_engine::apply(&root, &common::apply_opts(Some(&cache))).unwrap();

    let listed = aibox_engine::skills::list(&root).unwrap();
    assert!(listed.len() >= 10, "{} skills", listed.len());
    let digests: std::collections::BTreeSet<&str> =
        listed.iter().map(|s| s.sha256.as_str()).collect();
    assert_eq!(digests.len(), listed.len(), "two skills share a digest");
    for skill in &listed {
        let alone = aibox_engine::skills::trust_of_installed(&root, &skill.name).unwrap();
        assert_eq!(
            (&alone.sha256, alone.trust),
            (&skill.sha256, skill.origin),
            "{}",
            skill.name
        );
    }

    // A name that is not UTF-8 makes a folder unreadable for the review: in the third and
    // the second-to-last skill, in the order the folders are read.
    let mut in_order: Vec<(&str, &str, &str)> = listed
        .iter()
        .map(|s| (s.category.as_str(), s.name.as_str(), s.dir.as_str()))
        .collect();
    in_order.sort_unstable();
    let dirs: Vec<&str> = in_order.iter().map(|(_, _, dir)| *dir).collect();
    for dir in [dirs[2], dirs[dirs.len() - 2]] {
        let bad = std::ffi::OsStr::from_bytes(b"notes-\xff.md");
        fs_err::write(root.join(dir).as_std_path().join(bad), "x").unwrap();
    }
    let err = aibox_engine::skills::list(&root).unwrap_err().to_string();
    assert!(
        err.contains(dirs[2]) && !err.contains(dirs[dirs.len() - 2]),
        "{err}"
    );
}

/// QA: after the pinned version was changed in `aibox.toml` (not applied yet), every
/// installed skill was called third-party "installed from …, which is not a trusted
/// source" although that archive's folder is a trusted source. Trust is judged for what
/// is installed: the source the marker records, against the trusted sources.
#[test]
fn a_pinned_but_not_applied_version_leaves_the_installed_skills_first_party() {
    use aibox_test_support::http::release::SyntheticRelease;
    let v1 = SyntheticRelease::processkit_like("v0.28.3", false);
    let v2 = SyntheticRelease::processkit_like("v0.29.0", true);
    let (_a, archives) = common::empty_project();
    let (_c, cache) = common::empty_project();
    let (_p, root) = common::empty_project();
    fs_err::write(
        root.join("aibox.toml"),
        common::release_config(&archives, &v1),
    )
    .unwrap();
    aibox_engine::apply(&root, &common::apply_opts(Some(&cache))).unwrap();
    fs_err::write(
        root.join("aibox.toml"),
        common::release_config(&archives, &v2),
    )
    .unwrap();

    let listed = aibox_engine::skills::list(&root).unwrap();
    let third: Vec<(&str, &str)> = listed
        .iter()
        .filter(|s| s.origin != aibox_engine::skills::Trust::FirstParty)
        .map(|s| (s.name.as_str(), s.origin_reason.as_str()))
        .collect();
    assert!(third.is_empty(), "{third:?}");
    assert!(listed.iter().all(|s| !s.gate.blocks()));
    // A source that is not trusted is still judged as such.
    let untrusted = common::release_config(&archives, &v2).replace(
        &format!("trusted_sources = [\"{archives}\"]"),
        "trusted_sources = []",
    );
    fs_err::write(root.join("aibox.toml"), untrusted).unwrap();
    let listed = aibox_engine::skills::list(&root).unwrap();
    assert!(
        listed
            .iter()
            .all(|s| s.origin == aibox_engine::skills::Trust::ThirdParty
                && s.origin_reason.contains("not a trusted source"))
    );
}
