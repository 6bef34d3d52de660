//! The skill selection is closed over `uses:`: on the real front matter of two published
//! releases (`aibox-test-support`'s `processkit-uses` fixture) and on made-up catalogs for
//! what the releases do not show (cycles, a skill using itself, an unknown dependency, an
//! excluded dependency).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::{BTreeMap, BTreeSet};

use aibox_provenance::catalog::{Catalog, Selection};
use aibox_provenance::{ExtractLimits, Payload, extract};

fn real(version: &str) -> Catalog {
    let dir = aibox_test_support::processkit_uses(version);
    let payload = extract::read_dir(dir.as_std_path(), &ExtractLimits::default()).unwrap();
    Catalog::from_payload(&payload).unwrap()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn select(catalog: &Catalog, packages: &[&str], include: &[&str], exclude: &[&str]) -> Selection {
    catalog
        .select(&names(packages), &names(include), &names(exclude))
        .unwrap()
}

fn by(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn real_releases_pull_in_what_pk_doctor_uses() {
    for version in ["v0.28.3", "v1.0.0-alpha.1"] {
        let catalog = real(version);
        // The front matter as shipped: `{skill, purpose}` entries, folded `purpose` text.
        assert_eq!(
            catalog.skills["pk-doctor"].uses,
            ["event-log", "migration-management", "index-management"],
            "{version}"
        );

        // Without pk-doctor, the minimal tier needs nothing beyond itself and core.
        let plain = select(&catalog, &["minimal"], &[], &[]);
        assert!(!plain.skills.contains("migration-management"), "{version}");
        assert!(
            plain.dependencies.is_empty(),
            "{version}: {:?}",
            plain.dependencies
        );
        assert!(plain.warnings.is_empty(), "{version}: {:?}", plain.warnings);

        // pk-doctor is in no tier; including it installs what it uses, transitively
        // (migration-management uses decision-record), and says by whom.
        let with = select(&catalog, &["minimal"], &["pk-doctor"], &[]);
        assert!(with.warnings.is_empty(), "{version}: {:?}", with.warnings);
        let expected: BTreeMap<String, BTreeSet<String>> = [
            ("decision-record".to_owned(), by(&["migration-management"])),
            ("migration-management".to_owned(), by(&["pk-doctor"])),
        ]
        .into();
        assert_eq!(with.dependencies, expected, "{version}");
        assert_eq!(with.skills.len(), plain.skills.len() + 3, "{version}");
        // Skills of the tier that pk-doctor uses were selected anyway: not dependencies.
        assert!(with.skills.contains("event-log"));
        assert!(!with.dependencies.contains_key("event-log"));
    }
}

#[test]
fn an_excluded_dependency_stays_with_a_warning() {
    let catalog = real("v1.0.0-alpha.1");
    let s = select(
        &catalog,
        &["minimal"],
        &["pk-doctor"],
        &["migration-management", "workitem-management"],
    );
    assert!(s.skills.contains("migration-management"));
    assert!(
        !s.skills.contains("workitem-management"),
        "a plain exclusion still works"
    );
    assert_eq!(
        s.warnings,
        [
            "`[skills] exclude` names `migration-management`, which pk-doctor uses; it stays installed"
        ]
    );
}

/// A catalog of made-up skills: `(name, uses)`; `core` is always installed.
fn made_up(skills: &[(&str, &str)]) -> Catalog {
    let files = skills.iter().map(|(name, uses)| {
        let core = if *name == "core" {
            "    core: true\n"
        } else {
            ""
        };
        let text = format!(
            "---\nname: {name}\nmetadata:\n  processkit:\n{core}    uses:\n{uses}---\n# {name}\n"
        );
        (
            format!("context/skills/cat/{name}/SKILL.md"),
            text.into_bytes(),
            false,
        )
    });
    Catalog::from_payload(&Payload::from_memory(files.collect::<Vec<_>>())).unwrap()
}

#[test]
fn cycles_self_use_and_unknown_dependencies_end_cleanly() {
    let catalog = made_up(&[
        ("a", "      - skill: b\n        purpose: x\n"),
        ("b", "      - skill: c\n      - skill: b\n"),
        ("c", "      - a\n      - {skill: ghost, purpose: gone}\n"),
        ("core", "      - skill: d\n"),
        ("d", "      []\n"),
        ("lone", "      []\n"),
    ]);
    let s = select(&catalog, &[], &["a"], &[]);
    assert_eq!(s.skills, by(&["a", "b", "c", "core", "d"]));
    let expected: BTreeMap<String, BTreeSet<String>> = [
        ("b".to_owned(), by(&["a"])),
        ("c".to_owned(), by(&["b"])),
        ("d".to_owned(), by(&["core"])),
    ]
    .into();
    // `a` is used by `c` but was selected directly: not a dependency; `b` using itself
    // is no edge.
    assert_eq!(s.dependencies, expected);
    assert_eq!(
        s.warnings,
        ["skill `c` uses `ghost`, which this release does not ship: `c` may not work fully"]
    );
}

#[test]
fn a_uses_entry_of_another_shape_names_the_file() {
    let files = vec![(
        "context/skills/cat/odd/SKILL.md".to_owned(),
        b"---\nname: odd\nmetadata:\n  processkit:\n    uses:\n      - {purpose: no skill}\n---\n"
            .to_vec(),
        false,
    )];
    let err = Catalog::from_payload(&Payload::from_memory(files)).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("context/skills/cat/odd/SKILL.md"), "{text}");
}
