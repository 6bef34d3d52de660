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
    enable(&f.root, "alpha").unwrap();
    assert_eq!(lists(&f.root), (strings(&["alpha"]), none.clone()));
    enable(&f.root, "alpha").unwrap();
    assert_eq!(lists(&f.root), (strings(&["alpha"]), none.clone()));
    enable(&f.root, "beta").unwrap();
    assert_eq!(lists(&f.root), (strings(&["alpha", "beta"]), none.clone()));

    // Included: disable takes it off `include` and leaves `exclude` alone.
    disable(&f.root, "alpha").unwrap();
    assert_eq!(lists(&f.root), (strings(&["beta"]), none.clone()));

    // Not listed: disable adds it to `exclude`; again is a no-op.
    disable(&f.root, "alpha").unwrap();
    assert_eq!(lists(&f.root), (strings(&["beta"]), strings(&["alpha"])));
    let before = f.read("aibox.toml");
    disable(&f.root, "alpha").unwrap();
    assert_eq!(f.read("aibox.toml"), before);

    // Excluded: enable takes it off `exclude` without adding it to `include`.
    let written = enable(&f.root, "alpha").unwrap();
    assert_eq!(written.file, f.root.join("aibox.toml"));
    assert!(written.no_effect, "the fixture is harness-only");
    assert_eq!(lists(&f.root), (strings(&["beta"]), none));
}
