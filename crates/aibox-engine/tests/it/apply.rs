//! Fixture-tree tests of `plan` and `apply` on real temp directories.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use aibox_config::Ownership;
use aibox_engine::{ApplyOptions, EngineError, FileAction, PlanOptions, apply, plan, resolve};
use aibox_provenance::lock::{Lock, sha256_hex};
use camino::Utf8Path;
use common::{Fixture, code};

const DOCKERFILE: &str = ".devcontainer/Dockerfile";
const COMPOSE: &str = ".devcontainer/docker-compose.yml";

fn opts() -> ApplyOptions {
    ApplyOptions {
        plan: PlanOptions {
            aibox_version: "0.1.0".into(),
            ..PlanOptions::default()
        },
        ..ApplyOptions::default()
    }
}

fn dry_run() -> ApplyOptions {
    ApplyOptions {
        dry_run: true,
        ..opts()
    }
}

fn check() -> ApplyOptions {
    ApplyOptions {
        check: true,
        ..opts()
    }
}

fn force() -> ApplyOptions {
    ApplyOptions {
        force: true,
        ..opts()
    }
}

fn action(report: &aibox_engine::ApplyReport, path: &str) -> FileAction {
    report
        .files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("{path} not in report"))
        .action
}

#[test]
fn first_apply_creates_every_planned_file_and_the_lock_last() {
    let fx = Fixture::new();
    let report = apply(&fx.root, &opts()).unwrap();
    assert!(report.changed());
    assert!(!report.wrote_nothing && !report.read_only);
    for f in &report.files {
        assert_eq!(f.action, FileAction::Created, "{}", f.path);
        assert!(fx.path(f.path.as_str()).is_file(), "{}", f.path);
    }
    assert_eq!(report.files.last().unwrap().path, "aibox.lock");
    for p in [
        DOCKERFILE,
        COMPOSE,
        ".devcontainer/devcontainer.json",
        ".devcontainer/aibox-local.env",
    ] {
        assert!(
            report.files.iter().any(|f| f.path == p),
            "{p} missing from report"
        );
    }
    // Personal values go to the 0600 local env file only.
    let env_mode = fs_err::metadata(fx.path(".devcontainer/aibox-local.env"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(env_mode & 0o777, 0o600);
    assert!(
        fx.read(".devcontainer/aibox-local.env")
            .contains("ghp_FAKE")
    );
    for p in [DOCKERFILE, COMPOSE, "aibox.lock"] {
        assert!(!fx.read(p).contains("ghp_FAKE"), "secret leaked into {p}");
    }
    // The lock records the digest of each generated file and nothing else.
    let lock = Lock::parse(&fx.read("aibox.lock"), Utf8Path::new("aibox.lock")).unwrap();
    assert_eq!(lock.aibox.cli_version, "0.1.0");
    let generated: Vec<_> = report
        .files
        .iter()
        .filter(|f| f.ownership == Ownership::Generated && f.path != "aibox.lock")
        .collect();
    assert_eq!(lock.generated.len(), generated.len());
    for f in generated {
        let bytes = fs_err::read(fx.path(f.path.as_str())).unwrap();
        assert_eq!(
            lock.generated_digest(f.path.as_str()),
            Some(sha256_hex(&bytes).as_str())
        );
    }
    // No pending record or temp file is left behind.
    assert!(!fx.path(".aibox/pending.lock").exists());
    let temps = common::temp_files(&fx.root);
    assert!(temps.is_empty(), "{temps:?}");
}

#[test]
fn second_apply_on_unchanged_input_writes_nothing() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    let before = fx.stamps();
    let report = apply(&fx.root, &opts()).unwrap();
    assert!(!report.changed(), "{report:#?}");
    // Said as it is: nothing was written (and it was a real apply).
    assert!(report.wrote_nothing && !report.read_only);
    for f in &report.files {
        assert!(
            matches!(
                f.action,
                FileAction::Unchanged | FileAction::SkippedUserOwned
            ),
            "{} {:?}",
            f.path,
            f.action
        );
    }
    assert_eq!(
        before,
        fx.stamps(),
        "inodes, mtimes or modes changed on a no-op apply"
    );
}

#[test]
fn plan_is_deterministic_and_reads_only() {
    let fx = Fixture::new();
    let a = plan(&resolve(&fx.root, &PlanOptions::default()).unwrap()).unwrap();
    let b = plan(&resolve(&fx.root, &PlanOptions::default()).unwrap()).unwrap();
    assert_eq!(a.files, b.files);
    assert_eq!(a.lock_text, b.lock_text);
    assert_eq!(
        common::walk(&fx.root),
        vec![".aibox-local.toml", "aibox.toml"]
    );
    let paths: Vec<_> = a.files.iter().map(|f| f.path.as_path()).collect();
    let mut sorted = paths.clone();
    sorted.sort_unstable();
    assert_eq!(paths, sorted, "plan files are sorted by path components");
}

#[test]
fn dry_run_prints_unified_diffs_and_writes_nothing() {
    let fx = Fixture::new();
    // On an empty project: everything would be created; nothing is written, not even .aibox/.
    let report = apply(&fx.root, &dry_run()).unwrap();
    assert!(report.wrote_nothing && report.changed());
    let docker = report.files.iter().find(|f| f.path == DOCKERFILE).unwrap();
    let diff = docker.diff().unwrap();
    assert!(
        diff.starts_with("--- /dev/null\n+++ b/.devcontainer/Dockerfile\n"),
        "{diff}"
    );
    assert_eq!(
        common::walk(&fx.root),
        vec![".aibox-local.toml", "aibox.toml"]
    );

    apply(&fx.root, &opts()).unwrap();
    let before = fx.snapshot();
    fx.write(
        "aibox.toml",
        &common::AIBOX_TOML.replace("C.UTF-8", "en_US.UTF-8"),
    );
    let report = apply(&fx.root, &dry_run()).unwrap();
    let changed: Vec<_> = report.files.iter().filter(|f| f.action.changes()).collect();
    assert!(changed.iter().any(|f| f.path == COMPOSE), "{changed:#?}");
    for f in &report.files {
        assert_eq!(f.diff().is_some(), f.action.changes(), "{}", f.path);
    }
    let compose = changed.iter().find(|f| f.path == COMPOSE).unwrap();
    insta::assert_snapshot!("dry_run_compose_diff", compose.diff().unwrap());
    let mut after = fx.snapshot();
    after.insert("aibox.toml".into(), before["aibox.toml"].clone());
    assert_eq!(before, after, "dry run wrote something");
}

#[test]
fn check_reports_pending_changes_without_writing() {
    let fx = Fixture::new();
    let report = apply(&fx.root, &check()).unwrap();
    assert!(report.changed() && report.wrote_nothing);
    assert!(report.files.iter().all(|f| f.diff().is_none()));
    assert_eq!(
        common::walk(&fx.root),
        vec![".aibox-local.toml", "aibox.toml"]
    );

    apply(&fx.root, &opts()).unwrap();
    assert!(!apply(&fx.root, &check()).unwrap().changed());

    fx.write(
        "aibox.toml",
        &common::AIBOX_TOML.replace("\"codex\"", "\"gemini\""),
    );
    let before = fx.stamps();
    assert!(apply(&fx.root, &check()).unwrap().changed());
    assert_eq!(before, fx.stamps());
}

/// A fresh clone has the committed outputs but no local state: `--check` passes there,
/// and names only committed files when one is stale.
#[test]
fn check_judges_committed_outputs_only() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    let mut removed = 0;
    for path in common::walk(&fx.root) {
        if aibox_config::is_local_state(&path) {
            fs_err::remove_file(fx.path(&path)).unwrap();
            removed += 1;
        }
    }
    assert!(removed >= 3, "expected local files to remove");
    let report = apply(&fx.root, &check()).unwrap();
    assert!(
        !report.changed(),
        "{:?}",
        report
            .files
            .iter()
            .filter(|f| f.action.changes())
            .collect::<Vec<_>>()
    );
    assert!(
        report
            .files
            .iter()
            .all(|f| !aibox_config::is_local_state(f.path.as_str()))
    );

    fx.write(
        "aibox.toml",
        &common::AIBOX_TOML.replace("C.UTF-8", "en_US.UTF-8"),
    );
    let report = apply(&fx.root, &check()).unwrap();
    let stale: Vec<&str> = report
        .files
        .iter()
        .filter(|f| f.action.changes())
        .map(|f| f.path.as_str())
        .collect();
    assert!(
        stale.contains(&".devcontainer/docker-compose.yml"),
        "{stale:?}"
    );
    assert!(
        stale.iter().all(|p| !aibox_config::is_local_state(p)),
        "{stale:?}"
    );
}

#[test]
fn foreign_generated_file_is_refused_then_backed_up_with_force() {
    let fx = Fixture::new();
    fx.write(DOCKERFILE, "FROM alpine:3.20\nRUN echo hand-written\n");
    let err = apply(&fx.root, &opts()).unwrap_err();
    assert_eq!(code(&err), "aibox::apply::foreign_file");
    let EngineError::ForeignFile { path } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, DOCKERFILE);
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(help.contains("--force"), "{help}");
    // Refused before anything was written (only the project lock file exists).
    assert_eq!(
        common::walk(&fx.root),
        vec![
            ".aibox-local.toml",
            ".aibox/apply.lock",
            DOCKERFILE,
            "aibox.toml"
        ]
    );
    // dry-run and check refuse the same way; with --force they announce the backup.
    assert_eq!(
        code(&apply(&fx.root, &dry_run()).unwrap_err()),
        "aibox::apply::foreign_file"
    );
    let preview = apply(
        &fx.root,
        &ApplyOptions {
            force: true,
            ..dry_run()
        },
    )
    .unwrap();
    let entry = preview.files.iter().find(|f| f.path == DOCKERFILE).unwrap();
    assert_eq!(entry.action, FileAction::BackedUp);
    assert_eq!(
        entry.backup().unwrap(),
        ".aibox/backups/.devcontainer/Dockerfile.1"
    );
    assert!(entry.diff().unwrap().contains("-RUN echo hand-written"));
    assert!(!fx.path(".aibox/backups").exists());

    let report = apply(&fx.root, &force()).unwrap();
    let entry = report.files.iter().find(|f| f.path == DOCKERFILE).unwrap();
    assert_eq!(entry.action, FileAction::BackedUp);
    assert_eq!(
        entry.backup().unwrap(),
        ".aibox/backups/.devcontainer/Dockerfile.1"
    );
    assert!(
        fx.read(".aibox/backups/.devcontainer/Dockerfile.1")
            .contains("hand-written")
    );
    assert!(
        fx.read(DOCKERFILE)
            .contains(aibox_devcontainer::GENERATED_HEADER_MARKER)
    );

    // A second foreign edit gets the next backup number.
    fx.write(DOCKERFILE, "FROM alpine:3.21\n");
    let report = apply(&fx.root, &force()).unwrap();
    let entry = report.files.iter().find(|f| f.path == DOCKERFILE).unwrap();
    assert_eq!(
        entry.backup().unwrap(),
        ".aibox/backups/.devcontainer/Dockerfile.2"
    );
    assert_eq!(
        fx.read(".aibox/backups/.devcontainer/Dockerfile.1")
            .lines()
            .count(),
        2
    );
}

#[test]
fn generated_file_with_recorded_digest_is_updated_without_force() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    // A configuration change rewrites files whose bytes match the recorded digests.
    fx.write(
        "aibox.toml",
        &common::AIBOX_TOML.replace("C.UTF-8", "en_US.UTF-8"),
    );
    let report = apply(&fx.root, &opts()).unwrap();
    assert_eq!(action(&report, COMPOSE), FileAction::Updated);

    // Without the header, the digest recorded in the lock identifies it.
    let headerless = "FROM debian:bookworm-slim\n";
    fx.write(DOCKERFILE, headerless);
    let mut lock = Lock::parse(&fx.read("aibox.lock"), Utf8Path::new("aibox.lock")).unwrap();
    lock.generated
        .insert(DOCKERFILE.into(), sha256_hex(headerless.as_bytes()));
    fx.write("aibox.lock", &lock.render().unwrap());
    let report = apply(&fx.root, &opts()).unwrap();
    assert_eq!(action(&report, DOCKERFILE), FileAction::Updated);
    assert!(!fx.path(".aibox/backups").exists());
}

/// A hand edit of a generated file, even one that keeps aibox's header, is refused with
/// the diff (a check lists it as stale); `--force` keeps a backup. Nothing is lost.
#[test]
fn hand_edited_generated_file_is_refused_then_backed_up_with_force() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    let edited = format!("{}RUN echo my tweak\n", fx.read(DOCKERFILE));
    assert!(edited.contains(aibox_devcontainer::GENERATED_HEADER_MARKER));
    fx.write(DOCKERFILE, &edited);
    // `--check` lists it as stale (the CLI's exit 1) and says what apply will do.
    let report = apply(&fx.root, &check()).unwrap();
    assert!(report.changed());
    assert_eq!(action(&report, DOCKERFILE), FileAction::Updated);
    let entry = report.files.iter().find(|f| f.path == DOCKERFILE).unwrap();
    assert_eq!(entry.backup(), None, "a check saves nothing");
    assert!(
        report.warnings.iter().any(|w| w.contains(DOCKERFILE)
            && w.contains("edited by hand")
            && w.contains("--force")),
        "{:?}",
        report.warnings
    );
    assert_eq!(fx.read(DOCKERFILE), edited);
    for options in [opts(), dry_run()] {
        let err = apply(&fx.root, &options).unwrap_err();
        assert_eq!(code(&err), "aibox::apply::edited_file");
        let EngineError::EditedFile { path, diff } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(path, DOCKERFILE);
        assert!(diff.contains("-RUN echo my tweak"), "{diff}");
        let help = miette::Diagnostic::help(&err).unwrap().to_string();
        assert!(help.contains("--force"), "{help}");
        assert_eq!(fx.read(DOCKERFILE), edited, "the edit must survive");
    }
    assert!(!fx.path(".aibox/backups").exists());

    let report = apply(&fx.root, &force()).unwrap();
    let entry = report.files.iter().find(|f| f.path == DOCKERFILE).unwrap();
    assert_eq!(entry.action, FileAction::BackedUp);
    let backup = entry.backup().unwrap().to_owned();
    assert_eq!(fx.read(backup.as_str()), edited);
    assert!(!fx.read(DOCKERFILE).contains("my tweak"));
    // The next apply is clean again.
    assert!(!apply(&fx.root, &check()).unwrap().changed());
}

#[test]
fn scaffold_once_files_are_created_once_and_never_overwritten() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    let local = ".devcontainer/Dockerfile.local";
    assert!(fx.path(local).is_file());
    fx.write(local, "RUN echo mine\n");
    let report = apply(&fx.root, &opts()).unwrap();
    assert_eq!(action(&report, local), FileAction::SkippedUserOwned);
    assert_eq!(fx.read(local), "RUN echo mine\n");
    // The generated Dockerfile picks up the user's fragment.
    assert_eq!(action(&report, DOCKERFILE), FileAction::Updated);
    assert!(fx.read(DOCKERFILE).contains("RUN echo mine"));
}

/// The personal environment file where earlier versions wrote it, in the workspace the
/// agent may write, goes at the next apply (reported as removed); its values live on in
/// the file below `.devcontainer/`. A dry run lists the removal and keeps the file.
#[test]
fn the_environment_file_of_earlier_versions_is_removed() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    fx.write(".aibox-local.env", "GITHUB_TOKEN\nMY_EDITOR=vim\n");
    let dry = apply(&fx.root, &dry_run()).unwrap();
    assert_eq!(action(&dry, ".aibox-local.env"), FileAction::Removed);
    assert!(fx.path(".aibox-local.env").exists());
    let report = apply(&fx.root, &opts()).unwrap();
    assert_eq!(action(&report, ".aibox-local.env"), FileAction::Removed);
    assert!(!fx.path(".aibox-local.env").exists());
    assert!(
        fx.read(".devcontainer/aibox-local.env")
            .contains("ghp_FAKE"),
        "the personal values are in the new file"
    );
    // Nothing left to do, and nothing to remove when it is not there.
    assert!(!apply(&fx.root, &opts()).unwrap().changed());
}

/// A dry run after a personal token changed shows the change to the personal files with
/// the values masked, the old one included (the QA saw both in clear, in text and JSON).
#[test]
fn a_dry_run_masks_personal_values_in_its_diffs() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    let old = "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE";
    let new = "fake-new-token-value-for-tests";
    fx.write(
        ".aibox-local.toml",
        &format!("[container.environment]\nGITHUB_TOKEN = \"{new}\"\nNOTE = \"plain\"\n"),
    );
    let report = apply(&fx.root, &dry_run()).unwrap();
    let diff = report
        .files
        .iter()
        .find(|f| f.path == ".devcontainer/aibox-local.env")
        .and_then(|f| f.diff())
        .expect("the personal environment file's diff");
    assert!(diff.contains("-GITHUB_TOKEN=***\n"), "{diff}");
    assert!(diff.contains("+GITHUB_TOKEN=***\n"), "{diff}");
    assert!(diff.contains("+NOTE=***\n"), "{diff}");
    let json = serde_json::to_string(&report).unwrap();
    assert!(!json.contains(old) && !json.contains(new), "{json}");
    // Applied: a file only Compose reads changed, so `up` recreates the container; it
    // does not rebuild the image.
    let report = apply(&fx.root, &opts()).unwrap();
    let notes: Vec<String> = report
        .render_human(aibox_engine::render::HumanOptions::default())
        .into_iter()
        .map(|(_, line)| line)
        .collect();
    assert!(
        notes
            .iter()
            .any(|l| l.contains("`aibox up` recreates the container with them"))
            && !notes.iter().any(|l| l.contains("rebuilds the image")),
        "{notes:?}"
    );
}

/// After a merge, the committed files aibox writes that still hold conflict markers are
/// named all at once, with nothing written (the QA needed one run per file); the user's
/// own scaffolded files are not among them.
#[test]
fn merge_conflicts_in_files_aibox_writes_are_named_at_once() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    let conflicted = |text: &str| {
        let mid = text[..text.len() / 2].rfind('\n').map_or(0, |i| i + 1);
        let (head, tail) = text.split_at(mid);
        format!("{head}<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> feature\n{tail}")
    };
    for rel in [
        "aibox.lock",
        DOCKERFILE,
        ".devcontainer/devcontainer.json",
        ".devcontainer/Dockerfile.local",
        ".gitignore",
    ] {
        fx.write(rel, &conflicted(&fx.read(rel)));
    }
    let before = fx.read(DOCKERFILE);
    let err = apply(&fx.root, &opts()).unwrap_err();
    assert_eq!(code(&err), "aibox::apply::merge_conflict");
    let shown = err.to_string();
    for rel in ["aibox.lock", DOCKERFILE, ".devcontainer/devcontainer.json"] {
        assert!(
            shown.contains(&format!("\n  {rel} (line ")),
            "{rel}: {shown}"
        );
    }
    assert!(
        !shown.contains("Dockerfile.local") && !shown.contains(".gitignore"),
        "{shown}"
    );
    assert_eq!(fx.read(DOCKERFILE), before, "nothing written");
}

/// `apply --force` writes conflicted files aibox writes whole again, each backed up as a
/// hand edit is; the lock (and the harness files), which hold what no configuration says,
/// are still refused.
#[test]
fn force_writes_again_the_conflicted_files_aibox_writes_whole() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    let clean = fx.read(DOCKERFILE);
    let conflicted =
        |text: &str| format!("<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> feature\n{text}");
    fx.write(DOCKERFILE, &conflicted(&clean));
    fx.write("aibox.lock", &conflicted(&fx.read("aibox.lock")));
    let forced = ApplyOptions {
        force: true,
        ..opts()
    };
    let err = apply(&fx.root, &forced).unwrap_err();
    assert_eq!(code(&err), "aibox::apply::merge_conflict");
    let shown = err.to_string();
    assert!(
        shown.contains("aibox.lock") && !shown.contains(DOCKERFILE),
        "{shown}"
    );

    fx.write(
        "aibox.lock",
        &fx.read("aibox.lock")
            .replace("<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> feature\n", ""),
    );
    // Without `--force` the Dockerfile is still refused, named as a merge conflict.
    let err = apply(&fx.root, &opts()).unwrap_err();
    assert_eq!(code(&err), "aibox::apply::merge_conflict");
    apply(&fx.root, &forced).unwrap();
    assert_eq!(fx.read(DOCKERFILE), clean);
    let backup = fx.read(&format!(".aibox/backups/{DOCKERFILE}.1"));
    assert!(backup.starts_with("<<<<<<< HEAD"), "{backup}");
}

#[test]
fn local_state_mode_is_restored() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    let env = fx.path(".devcontainer/aibox-local.env");
    fs_err::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).unwrap();
    let report = apply(&fx.root, &opts()).unwrap();
    assert_eq!(
        action(&report, ".devcontainer/aibox-local.env"),
        FileAction::Updated
    );
    assert_eq!(
        fs_err::metadata(&env).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn symlinked_devcontainer_dir_pointing_outside_is_refused() {
    let fx = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), fx.path(".devcontainer")).unwrap();
    for options in [opts(), dry_run(), force()] {
        let err = apply(&fx.root, &options).unwrap_err();
        assert_eq!(code(&err), "aibox::apply::symlink", "{err:?}");
        let EngineError::Write(write) = &err else {
            panic!("{err:?}")
        };
        let aibox_engine::writer::WriteError::Symlink { link, .. } = write.as_ref() else {
            panic!("{err:?}")
        };
        assert_eq!(link, ".devcontainer");
    }
    assert_eq!(fs_err::read_dir(outside.path()).unwrap().count(), 0);
    assert!(!fx.path("aibox.lock").exists());
}

#[test]
fn symlinked_target_file_is_refused() {
    let fx = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs_err::write(&victim, "precious\n").unwrap();
    fs_err::create_dir(fx.path(".devcontainer")).unwrap();
    std::os::unix::fs::symlink(&victim, fx.path(COMPOSE)).unwrap();
    let err = apply(&fx.root, &force()).unwrap_err();
    assert_eq!(code(&err), "aibox::apply::symlink");
    assert_eq!(fs_err::read_to_string(&victim).unwrap(), "precious\n");
}

#[test]
fn a_file_in_the_way_of_a_directory_is_a_clear_error() {
    let fx = Fixture::new();
    fx.write(".devcontainer", "not a dir");
    let err = apply(&fx.root, &opts()).unwrap_err();
    assert_eq!(code(&err), "aibox::apply::wrong_kind", "{err:?}");
}

#[test]
fn corrupt_lock_is_reported_and_kept() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    fx.write("aibox.lock", "[aibox\ncli_version = \n");
    for options in [opts(), check(), force()] {
        let err = apply(&fx.root, &options).unwrap_err();
        assert_eq!(code(&err), "aibox::lock::invalid");
        let help = miette::Diagnostic::help(&err).unwrap().to_string();
        assert!(help.contains("regenerate"), "{help}");
    }
    assert_eq!(fx.read("aibox.lock"), "[aibox\ncli_version = \n");
}

#[test]
fn invalid_configuration_passes_its_diagnostic_through() {
    let fx = Fixture::with("[container]\nname = \"demo\"\nbogus = 1\n");
    let err = apply(&fx.root, &opts()).unwrap_err();
    assert!(code(&err).starts_with("aibox::config::"), "{}", code(&err));
    let missing = tempfile::tempdir().unwrap();
    let root = camino::Utf8PathBuf::from_path_buf(missing.path().join("nope")).unwrap();
    assert_eq!(
        code(&apply(&root, &opts()).unwrap_err()),
        "aibox::apply::root"
    );
}

/// `aibox apply` loads the configuration once, whether it writes (under the project lock,
/// taken at once here), finds nothing to do or only checks (the loader's count of
/// `aibox.toml` reads on this thread). Only an apply that had to wait for the lock reads
/// it again (`an_apply_waiting_for_the_lock_applies_the_configuration_it_finds_under_it`).
#[test]
fn apply_reads_the_configuration_once() {
    let fx = Fixture::new();
    for (options, changes) in [(opts(), true), (opts(), false), (check(), false)] {
        let before = aibox_config::team_config_reads();
        assert_eq!(apply(&fx.root, &options).unwrap().changed(), changes);
        assert_eq!(aibox_config::team_config_reads() - before, 1);
    }
    // A refused configuration is read once too (and reported before the lock exists).
    fx.write("aibox.toml", "[container]\nname = \"demo\"\nbogus = 1\n");
    let before = aibox_config::team_config_reads();
    apply(&fx.root, &opts()).unwrap_err();
    assert_eq!(aibox_config::team_config_reads() - before, 1);
}

/// Holds the project lock like a running apply would, until `unlock`.
fn hold_project_lock(fx: &Fixture) -> fs_err::File {
    let holder = fs_err::OpenOptions::new()
        .write(true)
        .open(fx.path(".aibox/apply.lock"))
        .unwrap();
    holder.file().lock().unwrap();
    holder
}

#[test]
fn second_apply_waits_for_the_project_lock_then_refuses() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    let holder = hold_project_lock(&fx);
    let started = std::time::Instant::now();
    let busy = ApplyOptions {
        lock_timeout: Duration::from_millis(400),
        ..opts()
    };
    let err = apply(&fx.root, &busy).unwrap_err();
    assert_eq!(code(&err), "aibox::apply::busy");
    assert!(started.elapsed() >= Duration::from_millis(400));
    // Read-only modes never wait.
    assert!(!apply(&fx.root, &check()).unwrap().changed());
    // Once released, a waiting apply proceeds.
    let waiter = {
        let root = fx.root.clone();
        std::thread::spawn(move || apply(&root, &opts()))
    };
    std::thread::sleep(Duration::from_millis(200));
    holder.file().unlock().unwrap();
    assert!(!waiter.join().unwrap().unwrap().changed());
}

/// An apply that waits for the project lock applies the configuration as it is once it
/// holds the lock, not as it was when it started waiting: a change made meanwhile (here
/// by the lock holder) is never reverted. The same for `.aibox-local.toml`.
#[test]
fn an_apply_waiting_for_the_lock_applies_the_configuration_it_finds_under_it() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    assert!(
        fx.read(".devcontainer/docker-compose.yml")
            .contains("C.UTF-8")
    );
    let holder = hold_project_lock(&fx);
    let waiter = {
        let root = fx.root.clone();
        std::thread::spawn(move || apply(&root, &opts()))
    };
    // The waiter has read the old files and is polling the lock by now.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!waiter.is_finished());
    // What the holder does meanwhile: a new team setting and a new personal variable.
    fx.write(
        "aibox.toml",
        &common::AIBOX_TOML.replace("C.UTF-8", "de_CH.UTF-8"),
    );
    fx.write(
        ".aibox-local.toml",
        &format!("{}MY_EDITOR = \"helix\"\n", common::LOCAL_TOML),
    );
    holder.file().unlock().unwrap();
    assert!(waiter.join().unwrap().unwrap().changed());
    let compose = fx.read(".devcontainer/docker-compose.yml");
    assert!(
        compose.contains("de_CH.UTF-8") && !compose.contains("\"C.UTF-8\""),
        "{compose}"
    );
    assert!(
        fx.read(".devcontainer/aibox-local.env")
            .contains("MY_EDITOR=helix")
    );
    // And what the waiter wrote is what a fresh apply would: nothing left to do.
    assert!(!apply(&fx.root, &opts()).unwrap().changed());
}

/// The same for a project resolved before the lock is taken (`up`, embedders):
/// `apply_resolved` reads the configuration again under the lock and resolves anew when it
/// changed.
#[test]
fn apply_resolved_applies_a_configuration_changed_after_the_resolve() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    let resolved = resolve(&fx.root, &PlanOptions::default()).unwrap();
    fx.write(
        "aibox.toml",
        &common::AIBOX_TOML.replace("C.UTF-8", "de_CH.UTF-8"),
    );
    assert!(
        aibox_engine::apply_resolved(&resolved, &opts())
            .unwrap()
            .changed()
    );
    assert!(
        fx.read(".devcontainer/docker-compose.yml")
            .contains("de_CH.UTF-8")
    );
    assert!(!apply(&fx.root, &opts()).unwrap().changed());
}

#[test]
fn concurrent_applies_serialise_and_agree() {
    let fx = Fixture::new();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let root = fx.root.clone();
            std::thread::spawn(move || apply(&root, &opts()).map(|r| r.changed()))
        })
        .collect();
    let changed: Vec<bool> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    assert_eq!(
        changed.iter().filter(|c| **c).count(),
        1,
        "exactly one apply does the work"
    );
    let reference = Fixture::new();
    apply(&reference.root, &opts()).unwrap();
    assert_eq!(fx.snapshot(), reference.snapshot());
    // The personal Compose file names this checkout's own path (the snapshot hides it).
    let local =
        fs_err::read_to_string(fx.root.join(".devcontainer/docker-compose.local.yml")).unwrap();
    let checkout = fs_err::canonicalize(&fx.root).unwrap();
    assert!(
        local.contains(&format!("\"aibox.checkout\": \"{}\"", checkout.display())),
        "{local}"
    );
}

#[test]
fn gitignore_gets_missing_local_state_entries_and_keeps_user_lines() {
    let fx = Fixture::new();
    fx.write(".gitignore", "target/\n# mine\n.aibox-local.env\n");
    let report = apply(&fx.root, &opts()).unwrap();
    assert_eq!(action(&report, ".gitignore"), FileAction::Updated);
    let text = fx.read(".gitignore");
    assert!(
        text.starts_with("target/\n# mine\n.aibox-local.env\n"),
        "{text}"
    );
    for entry in aibox_config::LOCAL_STATE_PATHS {
        assert!(
            text.lines().any(|l| l == *entry),
            "{entry} missing:\n{text}"
        );
    }
    assert_eq!(text.matches(".aibox-local.env").count(), 1, "{text}");
    let report = apply(&fx.root, &opts()).unwrap();
    assert_eq!(action(&report, ".gitignore"), FileAction::Unchanged);

    let fresh = Fixture::new();
    apply(&fresh.root, &opts()).unwrap();
    assert!(fresh.read(".gitignore").contains(".aibox-home/"));
}

/// A `.gitignore` line that re-includes personal local state is kept (it is the user's)
/// and `apply` says so, naming the line: not only `doctor`.
#[test]
fn apply_warns_about_a_gitignore_that_re_includes_local_state() {
    let fx = Fixture::new();
    fx.write(".gitignore", "target/\n!.aibox-local.toml\n");
    let report = apply(&fx.root, &opts()).unwrap();
    let warnings = report.warnings.join("\n");
    assert!(
        warnings.contains(".gitignore line 2 `!.aibox-local.toml` re-includes `.aibox-local.toml`"),
        "{warnings}"
    );
    assert!(fx.read(".gitignore").contains("!.aibox-local.toml\n"));
}

#[test]
fn digest_recorded_by_an_interrupted_apply_counts_as_ours() {
    let fx = Fixture::new();
    apply(&fx.root, &opts()).unwrap();
    // A header-less generated file written by a run killed before it wrote aibox.lock.
    let headerless = "FROM debian:bookworm-slim\n";
    fx.write(DOCKERFILE, headerless);
    let mut pending = Lock::default();
    pending
        .generated
        .insert(DOCKERFILE.into(), sha256_hex(headerless.as_bytes()));
    fx.write(".aibox/pending.lock", &pending.render().unwrap());
    let report = apply(&fx.root, &opts()).unwrap();
    assert_eq!(action(&report, DOCKERFILE), FileAction::Updated);
    assert!(!fx.path(".aibox/pending.lock").exists());
    assert!(!fx.path(".aibox/backups").exists());
}

#[test]
fn report_serialises_with_kebab_case_actions() {
    let fx = Fixture::new();
    fx.write(DOCKERFILE, "FROM alpine:3.20\n");
    let report = apply(&fx.root, &force()).unwrap();
    let json = serde_json::to_value(&report).unwrap();
    let entry = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == DOCKERFILE)
        .unwrap();
    assert_eq!(entry["action"], "backed-up");
    assert_eq!(entry["backup"], ".aibox/backups/.devcontainer/Dockerfile.1");
    assert_eq!(FileAction::SkippedUserOwned.as_str(), "skipped-user-owned");
}

#[test]
fn symlinked_state_dir_is_refused_before_locking() {
    let fx = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), fx.path(".aibox")).unwrap();
    let err = apply(&fx.root, &opts()).unwrap_err();
    assert_eq!(code(&err), "aibox::apply::symlink", "{err:?}");
    assert_eq!(fs_err::read_dir(outside.path()).unwrap().count(), 0);
}

/// An invalid configuration is reported before anything is created: no `.aibox/`
/// folder, no apply lock, no generated file.
#[test]
fn invalid_configuration_creates_nothing_not_even_the_apply_lock() {
    let fx = Fixture::with("[container]\nname = \"demo\"\nuid = \"not a number\"\n");
    let before = fx.snapshot();
    let err = apply(&fx.root, &opts()).unwrap_err();
    assert!(matches!(err, EngineError::Config(_)), "{err:?}");
    assert!(!fx.path(".aibox").exists(), "apply created .aibox/");
    assert_eq!(fx.snapshot(), before);
}

/// A folder that refuses writes part-way through the harness files stops the apply
/// before anything is written: all or nothing, never three of five files updated.
#[test]
fn a_write_refused_mid_apply_changes_nothing() {
    let toml = "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"claude\", \"codex\", \"gemini\", \"vscode\"]\n\n[[ai.mcp.servers]]\nname = \"first\"\ncommand = \"npx\"\nargs = [\"-y\", \"first-mcp@1.0.0\"]\n";
    let fx = Fixture::with(toml);
    apply(&fx.root, &opts()).unwrap();
    // A new team server changes every harness file.
    fx.write(
        "aibox.toml",
        &format!("{toml}\n[[ai.mcp.servers]]\nname = \"docs\"\ncommand = \"npx\"\nargs = [\"-y\", \"docs-mcp@1.0.0\"]\n"),
    );
    let before = fx.snapshot();
    let planned = plan(&resolve(&fx.root, &PlanOptions::default()).unwrap()).unwrap();
    assert!(planned.files.iter().any(|f| f.path == ".vscode/mcp.json"));
    {
        let _lock = aibox_test_support::Immutable::set(fx.path(".vscode"));
        let err = apply(&fx.root, &opts()).unwrap_err();
        assert!(
            matches!(&err, EngineError::Write(e) if matches!(**e, aibox_fs::WriteError::Io { .. })),
            "{err:?}"
        );
        assert!(err.to_string().contains(".vscode"), "{err}");
        assert_eq!(fx.snapshot(), before, "a refused apply changed files");
    }
    apply(&fx.root, &opts()).unwrap();
    assert!(fx.read(".vscode/mcp.json").contains("docs"));
}

/// `[container]` values are judged by one rule set: `config validate` (through
/// `config_check::check_project`) refuses `user = "root", uid = 1000` exactly as `apply`
/// does, with the same message, and neither writes anything.
#[test]
fn config_validate_and_apply_refuse_a_root_user_with_a_non_zero_uid_alike() {
    let f = Fixture::with(
        "[container]\nname = \"demo\"\nuser = \"root\"\nuid = 1000\n\n[context]\nmode = \"harness-only\"\n",
    );
    let validate = aibox_engine::config_check::check_project(&f.root).unwrap_err();
    let applied = apply(&f.root, &opts()).unwrap_err();
    for err in [
        &validate as &dyn miette::Diagnostic,
        &applied as &dyn miette::Diagnostic,
    ] {
        let mut text = err.to_string();
        let mut related = Vec::new();
        if let Some(r) = err.related() {
            related.extend(r.map(ToString::to_string));
        }
        text.push_str(&related.join("\n"));
        assert!(
            text.contains("UID 1000 does not fit user \"root\""),
            "{}: {text}",
            code(err)
        );
    }
    assert!(!f.path(DOCKERFILE).exists());
}

/// Run as root on a developer's project (`sudo aibox up` for a rootful engine), aibox
/// hands what it creates to the project's owner: the files stay theirs, and the
/// container user, who takes their IDs, can write the harness folders under
/// `.aibox-home/`. (These tests run as root, as CI does.)
#[test]
fn files_made_as_root_in_a_users_project_belong_to_that_user() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(dir.path()).unwrap().join("project");
    fs_err::create_dir(&root).unwrap();
    fs_err::write(
        root.join("aibox.toml"),
        "[container]\nname = \"owned\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"claude\", \"codex\"]\n",
    )
    .unwrap();
    std::os::unix::fs::chown(&root, Some(4321), Some(4322))
        .expect("these tests run as root (chown of the project folder)");
    apply(&root, &opts()).unwrap();
    let mut seen = 0;
    for rel in [
        ".aibox-home",
        ".aibox-home/.claude",
        ".aibox-home/.claude/.keep",
        ".aibox-home/.codex/.keep",
        ".devcontainer",
        ".devcontainer/Dockerfile",
        ".devcontainer/aibox-local.env",
        ".gitignore",
        "aibox.lock",
    ] {
        let meta = fs_err::symlink_metadata(root.join(rel)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (4321, 4322), "{rel}");
        seen += 1;
    }
    assert_eq!(seen, 9);
    // The file the owner (here: the test) made keeps its owner.
    assert_eq!(fs_err::metadata(root.join("aibox.toml")).unwrap().uid(), 0);
}

/// The human report of an apply is a summary (counts per action, saved contents,
/// warnings); per-file lines come with `-v` or when nothing was written (`--dry-run`).
#[test]
fn the_human_report_is_a_summary_unless_verbose_or_dry_run() {
    use aibox_engine::render::HumanOptions;
    let notes = |report: &aibox_engine::ApplyReport, verbose: bool| -> Vec<String> {
        report
            .render_human(HumanOptions {
                check: false,
                verbose,
            })
            .into_iter()
            .map(|(_, l)| l)
            .collect()
    };
    let fx = Fixture::new();
    let preview = apply(&fx.root, &dry_run()).unwrap();
    let n = preview.files.len();
    let listed = notes(&preview, false);
    assert!(
        listed
            .iter()
            .any(|l| l.trim_start().starts_with("would be created  ")),
        "{listed:?}"
    );
    let report = apply(&fx.root, &opts()).unwrap();
    let quiet = notes(&report, false);
    assert_eq!(
        quiet.last().unwrap(),
        &format!("created {n} file(s)"),
        "{quiet:?}"
    );
    assert!(
        !quiet.iter().any(|l| l.contains(DOCKERFILE)),
        "no per-file lines by default: {quiet:?}"
    );
    // `.devcontainer/` changed: the note says the image comes with `aibox up`; a dry run
    // and an apply that changes nothing do not say it.
    let rebuild = |lines: &[String]| lines.iter().any(|l| l.contains("`aibox up` rebuilds"));
    assert!(rebuild(&quiet), "{quiet:?}");
    assert!(!rebuild(&listed), "{listed:?}");
    assert!(!rebuild(&notes(&apply(&fx.root, &opts()).unwrap(), false)));
    let verbose = notes(&report, true);
    assert!(
        verbose
            .iter()
            .any(|l| l.trim_start() == format!("created  {DOCKERFILE}")),
        "{verbose:?}"
    );

    // A hand-edited generated file, replaced with `--force`: its previous contents are
    // saved, and that file is named even in the summary (where the contents went).
    fx.write(COMPOSE, "services: {}\n");
    let again = apply(&fx.root, &force()).unwrap();
    let summary = notes(&again, false);
    assert_eq!(action(&again, COMPOSE), FileAction::BackedUp);
    let last = summary.last().unwrap();
    assert!(
        last.starts_with(&format!("{} 1", FileAction::BackedUp.as_str())),
        "{summary:?}"
    );
    assert!(
        last.ends_with("file(s)") || last.ends_with("file(s) written"),
        "{summary:?}"
    );
    assert!(again.files.iter().any(|f| f.backup().is_some()));
    for f in again.files.iter().filter(|f| f.backup().is_some()) {
        assert!(
            summary.iter().any(|l| l.ends_with(f.path.as_str())),
            "{f:?} not named: {summary:?}"
        );
    }
}

/// `config validate` (`config_check::check_all`) refuses, with `apply`'s own code, each
/// setting `apply` refuses while it plans: a `$` in a personal environment value, a
/// missing seccomp consent, a personal CA file that is not there. `config set` refuses
/// the first and the last (nothing saved) and saves the setting that needs a consent,
/// which `apply` asks for at a terminal.
#[test]
fn config_validate_and_set_refuse_what_apply_refuses_of_the_settings() {
    use aibox_config::edit::ConfigFile;
    use aibox_engine::config_check::check_all;
    use aibox_engine::config_edit::config_set;
    const TEAM: &str = "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"codex\"]\n";
    let cases: [(&str, &str, &str); 3] = [
        (
            ".aibox-local.toml",
            "[container.environment]\nQ = \"a$b\"\n",
            "aibox::devcontainer::local_env_value",
        ),
        (
            "aibox.toml",
            "[security]\ncodex_sandbox = \"seccomp-profile\"\n",
            "aibox::policy::seccomp_consent",
        ),
        (
            ".aibox-local.toml",
            "[container]\nextra_ca_certificates = \"/nonexistent/ca.pem\"\n",
            "aibox::apply::extra_ca",
        ),
    ];
    for (file, extra, expected) in cases {
        let f = Fixture::with(TEAM);
        let text = if file == "aibox.toml" {
            format!("{TEAM}\n{extra}")
        } else {
            extra.to_owned()
        };
        f.write(file, &text);
        let validate = check_all(&f.root).unwrap_err();
        let applied = apply(&f.root, &opts()).unwrap_err();
        assert_eq!(code(&validate), expected, "validate, {file}: {validate}");
        assert_eq!(code(&applied), expected, "apply, {file}: {applied}");
        assert!(!f.path(DOCKERFILE).exists());
    }

    // `config set`, from a configuration `apply` takes.
    let f = Fixture::with(TEAM);
    let local_before = f.read(".aibox-local.toml");
    let set = |file, key, value| config_set(&f.root, file, key, value);
    let err = set(ConfigFile::Local, "container.environment.Q", "a$b").unwrap_err();
    assert_eq!(code(&err), "aibox::devcontainer::local_env_value", "{err}");
    let err = set(
        ConfigFile::Local,
        "container.extra_ca_certificates",
        "/nonexistent/ca.pem",
    )
    .unwrap_err();
    assert_eq!(code(&err), "aibox::apply::extra_ca", "{err}");
    assert_eq!(
        f.read(".aibox-local.toml"),
        local_before,
        "a refused edit saved the file"
    );
    set(
        ConfigFile::Team,
        "security.codex_sandbox",
        "seccomp-profile",
    )
    .unwrap();
    assert_eq!(
        code(&check_all(&f.root).unwrap_err()),
        "aibox::policy::seccomp_consent"
    );
    // A problem the files had before the edit blocks no other key.
    f.write(
        ".aibox-local.toml",
        "[container]\nextra_ca_certificates = \"/nonexistent/ca.pem\"\n",
    );
    set(
        ConfigFile::Team,
        "security.acknowledge_seccomp_profile",
        "true",
    )
    .unwrap();
    set(ConfigFile::Local, "container.environment.OK", "plain").unwrap();
}
