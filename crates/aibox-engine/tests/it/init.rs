//! `aibox init` on real directories: fresh folder, existing `.gitignore`, existing
//! `aibox.toml`.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use aibox_config::{Harness, InitOptions, LOCAL_STATE_PATHS, load_project};
use aibox_engine::init::{GitignoreChange, InitError, init};
use camino::Utf8Path;

fn files(dir: &Utf8Path) -> Vec<String> {
    let mut v: Vec<String> = fs_err::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn fresh_folder() {
    let (_t, dir) = common::empty_project();
    let mut opts = InitOptions::new("demo");
    opts.harnesses = vec![Harness::Claude, Harness::Codex];
    let report = init(&dir, &opts).unwrap();
    assert_eq!(report.gitignore_change, GitignoreChange::Created);
    assert_eq!(report.gitignore_added.len(), LOCAL_STATE_PATHS.len());
    assert_eq!(
        files(&dir),
        [".gitignore", "aibox.toml"],
        "no temporary files left behind"
    );
    let project = load_project(&dir).unwrap();
    assert_eq!(project.config.container.name, "demo");
    assert!(!project.config.security.acknowledge_seccomp_unconfined);
    let gi = fs_err::read_to_string(dir.join(".gitignore")).unwrap();
    for entry in LOCAL_STATE_PATHS {
        assert!(gi.lines().any(|l| l == *entry), "{entry}");
    }
}

#[test]
fn existing_gitignore_keeps_user_lines() {
    let (_t, dir) = common::empty_project();
    let user = "# Build output\n/target/\n\n# editor files\n*.swp\n.aibox-local.toml\n";
    fs_err::write(dir.join(".gitignore"), user).unwrap();
    let report = init(&dir, &InitOptions::new("demo")).unwrap();
    assert_eq!(report.gitignore_change, GitignoreChange::Extended);
    assert!(
        !report
            .gitignore_added
            .contains(&".aibox-local.toml".to_owned())
    );
    let gi = fs_err::read_to_string(dir.join(".gitignore")).unwrap();
    assert!(
        gi.starts_with(user),
        "user lines must survive byte for byte:\n{gi}"
    );
    assert_eq!(gi.matches(".aibox-local.toml").count(), 1);

    // A second run refuses (aibox.toml exists) and leaves .gitignore as it is.
    let err = init(&dir, &InitOptions::new("demo")).unwrap_err();
    assert!(matches!(err, InitError::Exists { .. }));
    assert_eq!(fs_err::read_to_string(dir.join(".gitignore")).unwrap(), gi);
    // The merge itself is a no-op on the result.
    assert_eq!(aibox_config::merge_gitignore(Some(&gi)), None);
}

#[test]
fn complete_gitignore_is_unchanged() {
    let (_t, dir) = common::empty_project();
    let all = LOCAL_STATE_PATHS.join("\n") + "\n";
    fs_err::write(dir.join(".gitignore"), &all).unwrap();
    let report = init(&dir, &InitOptions::new("demo")).unwrap();
    assert_eq!(report.gitignore_change, GitignoreChange::Unchanged);
    assert!(report.gitignore_added.is_empty());
    assert_eq!(fs_err::read_to_string(dir.join(".gitignore")).unwrap(), all);
}

#[test]
fn existing_aibox_toml_is_refused() {
    let (_t, dir) = common::empty_project();
    fs_err::write(dir.join("aibox.toml"), "# mine\n").unwrap();
    let err = init(&dir, &InitOptions::new("demo")).unwrap_err();
    assert_eq!(
        miette::Diagnostic::code(&err).unwrap().to_string(),
        "aibox::init::exists"
    );
    assert_eq!(
        fs_err::read_to_string(dir.join("aibox.toml")).unwrap(),
        "# mine\n"
    );
    assert_eq!(files(&dir), ["aibox.toml"], "nothing else may be written");
    // Wide enough that no line wraps: where a line wraps must not depend on the length of
    // the temporary folder's path.
    insta::assert_snapshot!(aibox_config::render_plain(&err, 400).replace(dir.as_str(), "<dir>"));
}

#[test]
fn invalid_answers_write_nothing() {
    let (_t, dir) = common::empty_project();
    let err = init(&dir, &InitOptions::new("not ok")).unwrap_err();
    assert_eq!(
        miette::Diagnostic::code(&err).unwrap().to_string(),
        "aibox::config::invalid_value"
    );
    assert!(files(&dir).is_empty());
}

#[test]
fn missing_directory_is_refused() {
    let (_t, dir) = common::empty_project();
    let err = init(&dir.join("nope"), &InitOptions::new("demo")).unwrap_err();
    assert!(matches!(err, InitError::NotADirectory { .. }));
}

#[cfg(unix)]
#[test]
fn symlinked_gitignore_is_refused() {
    let (_t, dir) = common::empty_project();
    fs_err::write(dir.join("elsewhere"), "x\n").unwrap();
    std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join(".gitignore")).unwrap();
    let err = init(&dir, &InitOptions::new("demo")).unwrap_err();
    assert!(matches!(err, InitError::Symlink { .. }));
    assert!(!dir.join("aibox.toml").exists());
}

#[cfg(unix)]
#[test]
fn extended_gitignore_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let (_t, dir) = common::empty_project();
    let gi = dir.join(".gitignore");
    fs_err::write(&gi, "target/\n").unwrap();
    fs_err::set_permissions(&gi, std::fs::Permissions::from_mode(0o640)).unwrap();
    init(&dir, &InitOptions::new("demo")).unwrap();
    let mode = fs_err::metadata(&gi).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

/// QA28 r3: a processkit release named for a harness-only project was left out of
/// `aibox.toml` without a word; the CLI refused it, an embedder got `Ok`.
#[test]
fn a_processkit_pin_for_a_harness_only_project_is_refused() {
    let (_t, dir) = common::empty_project();
    let mut opts = InitOptions::new("demo");
    opts.processkit_version = Some("v0.28.3".to_owned());
    let err = init(&dir, &opts).unwrap_err();
    assert!(
        matches!(err, InitError::ProcesskitUnused { what: "version" }),
        "{err:?}"
    );
    assert_eq!(err.kind(), aibox_config::ErrorKind::User);
    assert!(files(&dir).is_empty(), "nothing written");
    opts.context_mode = aibox_config::ContextMode::Processkit;
    init(&dir, &opts).unwrap();
    assert_eq!(
        load_project(&dir)
            .unwrap()
            .config
            .processkit
            .version
            .as_deref(),
        Some("v0.28.3")
    );
}

/// QA28 r13: `config set` (team or personal) in a folder that is not a project made a
/// bare `aibox.toml` without `init`'s `.gitignore`, so the personal file with its tokens
/// would be committed. Both are refused, and nothing is written.
#[test]
fn config_set_outside_a_project_is_refused() {
    use aibox_config::edit::ConfigFile;
    let (_t, dir) = common::empty_project();
    for file in [ConfigFile::Team, ConfigFile::Local] {
        let err = aibox_engine::config_edit::config_set(&dir, file, "container.name", "demo")
            .unwrap_err();
        assert_eq!(err.kind(), aibox_config::ErrorKind::User, "{err:?}");
        assert!(err.to_string().contains("not an aibox project"), "{err}");
    }
    assert!(files(&dir).is_empty(), "nothing written");
}

/// QA28 r10: the report of a `config set` names what a security consent gives away, so an
/// embedder can say it as the CLI does.
#[test]
fn config_set_reports_what_a_consent_gives_away() {
    use aibox_config::edit::ConfigFile;
    let (_t, dir) = common::empty_project();
    init(&dir, &InitOptions::new("demo")).unwrap();
    let set = aibox_engine::config_edit::config_set_report(
        &dir,
        ConfigFile::Team,
        "container.name",
        "other",
    )
    .unwrap();
    assert_eq!(set.relaxes, None);
    let set = aibox_engine::config_edit::config_set_report(
        &dir,
        ConfigFile::Team,
        "security.acknowledge_seccomp_unconfined",
        "true",
    )
    .unwrap();
    assert!(
        set.relaxes
            .as_deref()
            .is_some_and(|r| r.contains("no syscall filter")),
        "{set:?}"
    );
}
