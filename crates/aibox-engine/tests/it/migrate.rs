//! An upgrade with conflicts, seen and finished: `apply` summarises it (counts,
//! conflicts with their parked copies, the migration document), `apply --check` and
//! `doctor` report the pending migration, and `aibox migrate` shows the three versions
//! of a conflicting file, settles it and marks the migration applied, after which
//! `apply` and `doctor` are clean. Every refusal (unknown id, a file that is not a
//! conflict, a file changed since the upgrade, an altered parked copy, a base version
//! not in the cache, an unreadable document) and an interrupted resolve are covered. A
//! settled conflict stays settled: later applies of the same release find none, and a
//! later release brings one only when it changes the file again.
//! Real applies of synthetic releases, real files.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may fail loudly

use crate::common;

use aibox_engine::doctor::{DoctorOptions, doctor};
use aibox_engine::migrate::{self, MigrateOptions, Resolution, ResolveRequest, Side};
use aibox_engine::{ApplyOptions, apply};
use aibox_provenance::Sha256;
use aibox_test_support::http::release::SyntheticRelease;
use camino::{Utf8Path, Utf8PathBuf};

/// A project upgraded from v0.28.3 to v0.29.0 with two conflicts (`AGENTS.md`, which is
/// the user's once installed, and an edited skill file changed upstream too).
struct Upgraded {
    _dirs: (tempfile::TempDir, tempfile::TempDir, tempfile::TempDir),
    root: Utf8PathBuf,
    cache: Utf8PathBuf,
    /// Where the release archives are (a later release is added here).
    releases: Utf8PathBuf,
    v1: SyntheticRelease,
    v2: SyntheticRelease,
    /// The edited skill file.
    skill: String,
    id: String,
    report: aibox_engine::ApplyReport,
}

const SKILL_EDIT: &str = "my local skill notes\n";
/// The user's own `AGENTS.md` before the upgrade: ours, neither base nor theirs.
const AGENTS_EDIT: &str = "# Agents\n\nOur build command: `make check`.\n";

impl Upgraded {
    fn new() -> Self {
        let (d, releases) = common::empty_project();
        let (c, cache) = common::empty_project();
        let (p, root) = common::empty_project();
        let v1 = SyntheticRelease::generate("v0.28.3", false);
        let v2 = SyntheticRelease::generate("v0.29.0", true);
        let (c1, c2) = (
            common::release_config(&releases, &v1),
            common::release_config(&releases, &v2),
        );
        fs_err::write(root.join("aibox.toml"), &c1).unwrap();
        apply(&root, &common::apply_opts(Some(&cache))).unwrap();
        let skill = v2
            .changed_plain_skill(&v1, &root)
            .expect("the next release changes an installed skill");
        fs_err::write(root.join(&skill), SKILL_EDIT).unwrap();
        fs_err::write(root.join("AGENTS.md"), AGENTS_EDIT).unwrap();
        // A local edit of a file the next release leaves alone: kept, no conflict.
        fs_err::write(root.join("context/INDEX.md"), "# our index\n").unwrap();
        fs_err::write(root.join("aibox.toml"), &c2).unwrap();
        let report = apply(&root, &common::apply_opts(Some(&cache))).unwrap();
        let id = report.pending_migrations[0].id.clone();
        Self {
            _dirs: (d, c, p),
            root,
            cache,
            releases,
            v1,
            v2,
            skill,
            id,
            report,
        }
    }

    fn options(&self) -> MigrateOptions {
        MigrateOptions {
            cache_dir: Some(self.cache.clone()),
        }
    }

    fn resolve(
        &self,
        paths: &[&str],
        resolution: Option<Resolution>,
        force: bool,
    ) -> Result<migrate::ResolveReport, aibox_engine::EngineError> {
        let request = ResolveRequest {
            id: self.id.clone(),
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            resolution,
            force,
        };
        migrate::resolve(&self.root, &request, &self.options())
    }

    fn parked(&self, path: &str) -> Utf8PathBuf {
        self.root.join(format!(
            "context/migrations/pending/{}.upstream/{path}",
            self.id
        ))
    }

    /// Installs `release` (a later one) with `apply`.
    fn upgrade_to(&self, release: &SyntheticRelease) -> aibox_engine::ApplyReport {
        let config = common::release_config(&self.releases, release);
        fs_err::write(self.root.join("aibox.toml"), config).unwrap();
        apply(&self.root, &common::apply_opts(Some(&self.cache))).unwrap()
    }

    /// Every parked upstream copy in the project (root-relative).
    fn parked_copies(&self) -> Vec<String> {
        common::walk(&self.root)
            .into_iter()
            .filter(|p| p.contains(".upstream/"))
            .collect()
    }

    /// The digest the install marker records for `AGENTS.md`.
    fn recorded_agents(&self) -> Sha256 {
        aibox_provenance::Marker::read(self.root.as_std_path())
            .unwrap()
            .user_files["AGENTS.md"]
    }

    fn doctor_codes(&self) -> Vec<String> {
        let options = DoctorOptions {
            skip_engine: true,
            cache_dir: Some(self.cache.clone()),
            update_check: aibox_engine::updates::UpdateCheck::Never,
            ..DoctorOptions::default()
        };
        doctor(&self.root, &options)
            .unwrap()
            .findings
            .into_iter()
            .map(|f| f.code)
            .collect()
    }
}

/// Why the first file `show` lists has no base version to show (it must have none).
fn base_missing_because(shown: &migrate::Shown) -> String {
    let base = &shown.files[0].base;
    assert!(!base.available, "{base:?}");
    base.note.clone().unwrap_or_default()
}

fn code(e: &aibox_engine::EngineError) -> String {
    common::code(e)
}

#[test]
fn apply_summarises_the_upgrade_and_check_and_doctor_report_the_pending_migration() {
    let u = Upgraded::new();
    let up = u.report.upgrade.as_ref().expect("an upgrade summary");
    assert_eq!(
        (up.from_version.as_str(), up.to_version.as_str()),
        ("v0.28.3", "v0.29.0")
    );
    assert!(up.changed > 0 && up.new > 0 && up.removed > 0, "{up:?}");
    assert_eq!(up.kept_local_edits, 1, "{up:?}");
    let doc = up.migration_document.clone().unwrap();
    assert_eq!(doc, format!("context/migrations/pending/{}.md", u.id));
    let conflicts: Vec<&str> = up.conflicts.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(conflicts, ["AGENTS.md", u.skill.as_str()]);
    for c in &up.conflicts {
        assert_eq!(
            Utf8Path::new(&c.upstream_copy),
            u.parked(&c.path).strip_prefix(&u.root).unwrap()
        );
        assert!(u.root.join(&c.upstream_copy).is_file());
    }
    // The human report ends with the upgrade: counts, each conflict and the document.
    let lines: Vec<String> = u
        .report
        .render_human(aibox_engine::render::HumanOptions::default())
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let text = lines.join("\n");
    assert!(
        text.contains("processkit upgraded v0.28.3 → v0.29.0: "),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "conflict: {} (yours kept; the new version is in ",
            u.skill
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("  migration document: {doc}")),
        "{text}"
    );
    // Described once: not again as a pending migration in the same report.
    assert!(!text.contains("pending migration"), "{text}");
    // JSON carries the same.
    let json = serde_json::to_value(&u.report).unwrap();
    assert_eq!(json["upgrade"]["conflicts"][1]["path"], u.skill.as_str());
    assert_eq!(
        json["pending_migrations"][0]["open_conflicts"][1],
        u.skill.as_str()
    );

    // `apply --check` reports the pending migration (and changes nothing).
    let check = ApplyOptions {
        check: true,
        ..common::apply_opts(Some(&u.cache))
    };
    let report = apply(&u.root, &check).unwrap();
    assert!(report.upgrade.is_none());
    assert_eq!(report.pending_migrations[0].id, u.id);
    assert_eq!(report.pending_migrations[0].open_conflicts.len(), 2);
    let text: Vec<String> = report
        .render_human(aibox_engine::render::HumanOptions {
            check: true,
            verbose: false,
        })
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert!(
        text.iter()
            .any(|l| l.starts_with(&format!("pending migration {} ", u.id))
                && l.contains("2 open conflict(s)")),
        "{text:?}"
    );
    // So does doctor, with its own code.
    assert!(
        u.doctor_codes()
            .contains(&"aibox::doctor::pending_migration".to_owned())
    );
}

#[test]
fn show_finds_ours_theirs_and_base_and_the_diff() {
    let u = Upgraded::new();
    let shown = migrate::show(&u.root, &u.id, Some(&u.skill), &u.options()).unwrap();
    assert_eq!(shown.files.len(), 1);
    let f = &shown.files[0];
    assert!(
        f.ours.available && f.theirs.available && f.base.available,
        "{f:?}"
    );
    let diff = f.diff.as_deref().unwrap();
    assert!(diff.contains(&format!("--- ours/{}", u.skill)), "{diff}");
    assert!(diff.contains("-my local skill notes"), "{diff}");
    let version = |side| migrate::version(&u.root, &u.id, &u.skill, side, &u.options()).unwrap();
    assert_eq!(version(Side::Ours), SKILL_EDIT.as_bytes());
    assert_eq!(version(Side::Theirs), u.v2.files[&u.skill].0);
    assert_eq!(version(Side::Base), u.v1.files[&u.skill].0);
    // Without a path, every open conflict.
    let all = migrate::show(&u.root, &u.id, None, &u.options()).unwrap();
    assert_eq!(all.files.len(), 2);

    // A base that is not in the (empty) cache is reported, not guessed.
    let (_e, empty) = common::empty_project();
    let no_cache = MigrateOptions {
        cache_dir: Some(empty),
    };
    let shown = migrate::show(&u.root, &u.id, Some(&u.skill), &no_cache).unwrap();
    assert!(base_missing_because(&shown).contains("not in the download cache"));
    let err = migrate::version(&u.root, &u.id, &u.skill, Side::Base, &no_cache).unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::base_unavailable");
    assert_eq!(err.kind(), aibox_config::ErrorKind::Environment);
}

#[test]
fn resolving_every_conflict_marks_the_migration_applied_and_leaves_apply_and_doctor_clean() {
    let u = Upgraded::new();
    // Open conflicts need a decision.
    let err = u.resolve(&[], None, false).unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::conflicts_open");
    assert_eq!(err.kind(), aibox_config::ErrorKind::User);

    let r = u
        .resolve(&[&u.skill], Some(Resolution::Take(Side::Theirs)), false)
        .unwrap();
    assert_eq!(r.remaining, ["AGENTS.md"]);
    assert!(r.applied.is_none());
    assert_eq!(
        fs_err::read(u.root.join(&u.skill)).unwrap(),
        u.v2.files[&u.skill].0
    );
    assert!(!u.parked(&u.skill).exists());
    let agents_before = fs_err::read(u.root.join("AGENTS.md")).unwrap();

    let r = u
        .resolve(&["AGENTS.md"], Some(Resolution::Take(Side::Ours)), false)
        .unwrap();
    let applied = r.applied.unwrap();
    assert_eq!(applied, format!("context/migrations/applied/{}.md", u.id));
    assert_eq!(
        fs_err::read(u.root.join("AGENTS.md")).unwrap(),
        agents_before
    );
    let doc = fs_err::read_to_string(u.root.join(&applied)).unwrap();
    assert!(
        doc.contains("\n  state: applied\n  applied_at: \""),
        "{doc}"
    );
    assert!(
        !u.root
            .join(format!("context/migrations/pending/{}.md", u.id))
            .exists()
    );
    assert!(
        !u.root
            .join(format!("context/migrations/pending/{}.upstream", u.id))
            .exists()
    );
    assert!(migrate::list(&u.root).unwrap().migrations.is_empty());

    // A following apply and doctor are clean of it; the taken file is the release's.
    let report = apply(&u.root, &common::apply_opts(Some(&u.cache))).unwrap();
    assert!(report.pending_migrations.is_empty() && report.upgrade.is_none());
    let codes = u.doctor_codes();
    assert!(!codes.iter().any(|c| c.contains("migration")), "{codes:?}");
    let integrity = aibox_provenance::integrity(u.root.as_std_path()).unwrap();
    assert!(!integrity.modified.contains(&u.skill), "{integrity:?}");
    assert!(
        !integrity
            .unexpected
            .iter()
            .any(|p| p.contains("migrations")),
        "{integrity:?}"
    );
    // The id is gone now.
    let err = u.resolve(&[], None, false).unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::unknown_id");
}

#[test]
fn refusals_change_nothing() {
    let u = Upgraded::new();
    let snapshot = || {
        common::walk(&u.root)
            .into_iter()
            .filter(|p| p != ".aibox/apply.lock")
            .map(|p| {
                let bytes = fs_err::read(u.root.join(&p)).unwrap();
                (p, bytes)
            })
            .collect::<Vec<_>>()
    };
    let before = snapshot();

    // An unknown id names the ones that exist.
    let err = migrate::show(&u.root, "MIG-19990101T000000", None, &u.options()).unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::unknown_id");
    assert!(format!("{:?}", miette::Report::new(err)).contains(&u.id));
    // A path that is not a conflict of the migration.
    let theirs = Some(Resolution::Take(Side::Theirs));
    let err = u.resolve(&["context/INDEX.md"], theirs, false).unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::not_a_conflict");
    // `--edited` on a file nobody edited since the upgrade.
    let err = u
        .resolve(&[&u.skill], Some(Resolution::Edited), false)
        .unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::not_edited");
    assert_eq!(snapshot(), before);

    // The working file changed after the upgrade: taking another version would lose it.
    fs_err::write(u.root.join(&u.skill), "merged by hand\n").unwrap();
    let err = u.resolve(&[&u.skill], theirs, false).unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::changed_since");
    assert_eq!(
        fs_err::read_to_string(u.root.join(&u.skill)).unwrap(),
        "merged by hand\n"
    );
    // An altered parked copy is never installed as the release's version.
    fs_err::write(u.parked(&u.skill), "not the release\n").unwrap();
    let err = u.resolve(&[&u.skill], theirs, true).unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::upstream_changed");
    assert_eq!(
        fs_err::read_to_string(u.root.join(&u.skill)).unwrap(),
        "merged by hand\n"
    );
    // A missing base fails before anything is written, the other conflict included.
    let (_e, empty) = common::empty_project();
    let request = ResolveRequest {
        id: u.id.clone(),
        resolution: Some(Resolution::Take(Side::Base)),
        force: true,
        ..ResolveRequest::default()
    };
    let err = migrate::resolve(
        &u.root,
        &request,
        &MigrateOptions {
            cache_dir: Some(empty),
        },
    )
    .unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::base_unavailable");
    assert!(u.parked("AGENTS.md").is_file());

    // The hand-merged file is accepted as edited.
    let r = u
        .resolve(&[&u.skill], Some(Resolution::Edited), false)
        .unwrap();
    assert_eq!(r.remaining, ["AGENTS.md"]);
    assert_eq!(
        fs_err::read_to_string(u.root.join(&u.skill)).unwrap(),
        "merged by hand\n"
    );
}

#[test]
fn an_interrupted_resolve_finishes_on_the_next_run_and_force_replaces_a_changed_file() {
    let u = Upgraded::new();
    // A resolve killed after writing the file, before removing the parked copy: the file
    // already is the version asked for, so taking it again is not refused.
    fs_err::copy(u.parked(&u.skill), u.root.join(&u.skill)).unwrap();
    let r = u
        .resolve(&[&u.skill], Some(Resolution::Take(Side::Theirs)), false)
        .unwrap();
    assert_eq!(r.remaining, ["AGENTS.md"]);

    // `--force` replaces a working file changed since the upgrade; `base` comes from the
    // previous release in the cache.
    fs_err::write(u.root.join("AGENTS.md"), "rewritten since\n").unwrap();
    let err = u
        .resolve(&["AGENTS.md"], Some(Resolution::Take(Side::Base)), false)
        .unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::changed_since");
    let r = u
        .resolve(&["AGENTS.md"], Some(Resolution::Take(Side::Base)), true)
        .unwrap();
    assert!(r.applied.is_some());
    assert_eq!(
        fs_err::read(u.root.join("AGENTS.md")).unwrap(),
        u.v1.files["AGENTS.md"].0
    );

    // Killed after writing the applied document but before removing the pending one:
    // the next resolve (no conflict left) finishes the move.
    let applied = r.applied.unwrap();
    let pending = format!("context/migrations/pending/{}.md", u.id);
    let text = fs_err::read_to_string(u.root.join(&applied)).unwrap();
    fs_err::write(
        u.root.join(&pending),
        text.replace("state: applied", "state: pending"),
    )
    .unwrap();
    let r = u.resolve(&[], None, false).unwrap();
    assert_eq!(r.applied.as_deref(), Some(applied.as_str()));
    assert!(!u.root.join(&pending).exists());
}

#[test]
fn an_unreadable_document_is_reported_not_fatal() {
    let u = Upgraded::new();
    let bad = u
        .root
        .join("context/migrations/pending/MIG-20990101T000000.md");
    fs_err::write(&bad, "---\nmetadata: [not, a, map]\n---\n").unwrap();
    // A conflict path that leaves the project is never read or written.
    fs_err::write(
        u.root.join("context/migrations/pending/MIG-20990102T000000.md"),
        "---\nmetadata: {id: MIG-20990102T000000}\nspec:\n  state: pending\n  affected_files:\n  - {path: \"../../outside\", classification: conflict}\n---\n",
    )
    .unwrap();
    let listing = migrate::list(&u.root).unwrap();
    assert_eq!(listing.migrations.len(), 1);
    assert_eq!(listing.unreadable.len(), 2, "{:?}", listing.unreadable);
    let err = migrate::show(&u.root, "MIG-20990102T000000", None, &u.options()).unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::unreadable");
    assert!(err.to_string().contains("`..` components"), "{err}");
    assert!(
        u.doctor_codes()
            .contains(&"aibox::doctor::migration_unreadable".to_owned())
    );
}

/// The `AGENTS.md` warning of an apply, if any.
fn agents_warning(report: &aibox_engine::ApplyReport) -> Option<&String> {
    report.warnings.iter().find(|w| w.contains("AGENTS.md"))
}

/// A settled conflict on a user-owned file stays settled: whichever version was kept
/// (ours, base, or a hand merge), the next apply of the same release finds no conflict,
/// warns about nothing, parks nothing and leaves the file alone; the marker records the
/// release's version, and the applied document still records the old base.
#[test]
fn a_settled_conflict_on_agents_md_stays_settled_at_the_same_release() {
    const MERGED: &str = "# Agents\n\nOur build command: `make check`.\n\nMerged by hand.\n";
    for resolution in [
        Resolution::Take(Side::Ours),
        Resolution::Take(Side::Base),
        Resolution::Edited,
    ] {
        let u = Upgraded::new();
        let name = resolution.name();
        let upstream = Sha256::of(&u.v2.files["AGENTS.md"].0);
        assert!(
            agents_warning(&u.report).is_some(),
            "{name}: {:?}",
            u.report.warnings
        );
        if resolution == Resolution::Edited {
            fs_err::write(u.root.join("AGENTS.md"), MERGED).unwrap();
        }
        u.resolve(&[&u.skill], Some(Resolution::Take(Side::Theirs)), false)
            .unwrap();
        let r = u.resolve(&["AGENTS.md"], Some(resolution), false).unwrap();
        let applied = r.applied.expect("no conflict left");
        let kept = fs_err::read(u.root.join("AGENTS.md")).unwrap();
        let expected: &[u8] = match resolution {
            Resolution::Take(Side::Ours) => AGENTS_EDIT.as_bytes(),
            Resolution::Take(_) => &u.v1.files["AGENTS.md"].0,
            Resolution::Edited => MERGED.as_bytes(),
        };
        assert_eq!(kept, expected, "{name}");

        for _ in 0..2 {
            let report = apply(&u.root, &common::apply_opts(Some(&u.cache))).unwrap();
            assert_eq!(agents_warning(&report), None, "{name}");
            assert!(report.upgrade.is_none(), "{name}: {:?}", report.upgrade);
            assert!(report.pending_migrations.is_empty(), "{name}");
            let json = serde_json::to_value(&report).unwrap();
            assert!(json["upgrade"].is_null(), "{name}: {json}");
            assert!(
                json["pending_migrations"]
                    .as_array()
                    .is_none_or(Vec::is_empty),
                "{name}: {json}"
            );
            assert!(
                u.parked_copies().is_empty(),
                "{name}: {:?}",
                u.parked_copies()
            );
            assert_eq!(
                fs_err::read(u.root.join("AGENTS.md")).unwrap(),
                kept,
                "{name}"
            );
            assert_eq!(u.recorded_agents(), upstream, "{name}");
        }
        let listing = migrate::list(&u.root).unwrap();
        assert!(listing.migrations.is_empty(), "{name}");
        // The document of the upgrade keeps the versions it was about.
        let text = fs_err::read_to_string(u.root.join(&applied)).unwrap();
        let doc = aibox_provenance::migration::Document::parse(&text).unwrap();
        let agents = doc
            .conflicts
            .iter()
            .find(|c| c.path == "AGENTS.md")
            .unwrap();
        assert_eq!(agents.base, Some(Sha256::of(&u.v1.files["AGENTS.md"].0)));
        assert_eq!(agents.upstream, Some(upstream));
        assert_eq!(agents.local, Some(Sha256::of(AGENTS_EDIT.as_bytes())));
        let codes = u.doctor_codes();
        assert!(
            !codes.iter().any(|c| c.contains("migration")),
            "{name}: {codes:?}"
        );
    }
}

/// After a settled conflict, a later release that ships the same `AGENTS.md` again brings
/// no conflict (the user's file is a kept local edit); one that really changes it does,
/// with the version the user last saw as the base, available from the cache.
#[test]
fn a_later_release_is_a_conflict_only_when_it_changes_agents_md_again() {
    let u = Upgraded::new();
    u.resolve(&[&u.skill], Some(Resolution::Take(Side::Theirs)), false)
        .unwrap();
    u.resolve(&["AGENTS.md"], Some(Resolution::Take(Side::Ours)), false)
        .unwrap();

    // The same AGENTS.md as v0.29.0, other files changed.
    let mut same = SyntheticRelease::generate("v0.29.1", true);
    same.files
        .insert("AGENTS.md".into(), u.v2.files["AGENTS.md"].clone());
    same.restamp();
    let report = u.upgrade_to(&same);
    let up = report.upgrade.as_ref().expect("an upgrade summary");
    assert_eq!(up.to_version, "v0.29.1");
    assert!(up.conflicts.is_empty(), "{up:?}");
    assert!(up.kept_local_edits >= 1, "{up:?}");
    assert_eq!(agents_warning(&report), None, "{:?}", report.warnings);
    assert!(u.parked_copies().is_empty(), "{:?}", u.parked_copies());
    assert_eq!(
        fs_err::read_to_string(u.root.join("AGENTS.md")).unwrap(),
        AGENTS_EDIT
    );

    // A release that changes it again: a conflict, parked, its base the version of
    // v0.29.1 (what the user's file was last compared with), not the long-gone v0.28.3.
    let next = SyntheticRelease::generate("v0.30.0", true);
    assert_ne!(next.files["AGENTS.md"], same.files["AGENTS.md"]);
    let report = u.upgrade_to(&next);
    let up = report.upgrade.as_ref().expect("an upgrade summary");
    let conflicts: Vec<&str> = up.conflicts.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(conflicts, ["AGENTS.md"]);
    assert!(agents_warning(&report).is_some(), "{:?}", report.warnings);
    assert_eq!(
        fs_err::read(u.root.join(&up.conflicts[0].upstream_copy)).unwrap(),
        next.files["AGENTS.md"].0
    );
    assert_eq!(
        fs_err::read_to_string(u.root.join("AGENTS.md")).unwrap(),
        AGENTS_EDIT
    );
    let document = up.migration_document.as_deref().unwrap();
    let id = Utf8Path::new(document).file_stem().unwrap();
    let pending = report
        .pending_migrations
        .iter()
        .find(|m| m.id == id)
        .unwrap();
    assert_eq!(pending.open_conflicts, ["AGENTS.md"]);
    let version = |side| migrate::version(&u.root, id, "AGENTS.md", side, &u.options()).unwrap();
    assert_eq!(version(Side::Base), same.files["AGENTS.md"].0);
    assert_eq!(version(Side::Theirs), next.files["AGENTS.md"].0);
    assert_eq!(version(Side::Ours), AGENTS_EDIT.as_bytes());
}

#[test]
fn a_pin_moved_back_is_a_downgrade_and_leaves_the_earlier_migration_stale() {
    // QA: pinning v0.1.0 after v0.2.0 said "processkit upgraded v0.2.0 → v0.1.0", and the
    // upgrade's migration stayed pending: `--take theirs` then wrote v0.2.0's AGENTS.md
    // into the v0.1.0 project.
    let u = Upgraded::new();
    // Migration ids are the second they are made in: the downgrade's own migration must
    // not take the upgrade's id.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let report = u.upgrade_to(&u.v1);
    let down = report.upgrade.as_ref().expect("a version change summary");
    assert_eq!(down.direction, migrate::Direction::Downgrade);
    let text: Vec<String> = report
        .render_human(aibox_engine::render::HumanOptions::default())
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let text = text.join("\n");
    assert!(
        text.contains("processkit downgraded v0.29.0 → v0.28.3: "),
        "{text}"
    );
    assert!(!text.contains("upgraded"), "{text}");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["upgrade"]["direction"], "downgrade");
    // The upgrade's migration, made for v0.29.0, is stale: every place says so.
    assert!(
        text.contains(&format!(
            "pending migration {} (context/migrations/pending/{}.md): stale: made for v0.29.0, \
             but v0.28.3 is installed",
            u.id, u.id
        )),
        "{text}"
    );
    let listing = migrate::list(&u.root).unwrap();
    let m = listing.migrations.iter().find(|m| m.id == u.id).unwrap();
    assert_eq!(m.state, "stale");
    assert_eq!(m.installed_version.as_deref(), Some("v0.28.3"));
    assert!(
        u.doctor_codes()
            .contains(&"aibox::doctor::stale_migration".to_owned())
    );

    // Taking theirs (or base) is refused and changes nothing; ours closes it.
    let agents = fs_err::read(u.root.join("AGENTS.md")).unwrap();
    for side in [Side::Theirs, Side::Base] {
        let err = u
            .resolve(&["AGENTS.md"], Some(Resolution::Take(side)), true)
            .unwrap_err();
        assert_eq!(code(&err), "aibox::migrate::stale", "{err}");
        assert!(
            err.to_string().contains(&format!(
                "{} was made for processkit v0.29.0, but v0.28.3 is installed now",
                u.id
            )),
            "{err}"
        );
        let help = miette::Diagnostic::help(&err).unwrap().to_string();
        assert!(
            help.contains(&format!("`aibox migrate resolve {} --take ours`", u.id)),
            "{help}"
        );
    }
    assert_eq!(fs_err::read(u.root.join("AGENTS.md")).unwrap(), agents);
    assert!(u.parked("AGENTS.md").is_file());
    u.resolve(&[], Some(Resolution::Take(Side::Ours)), false)
        .unwrap();
    assert_eq!(fs_err::read(u.root.join("AGENTS.md")).unwrap(), agents);
    assert!(
        !migrate::list(&u.root)
            .unwrap()
            .migrations
            .iter()
            .any(|m| m.id == u.id)
    );
}

/// Pinned back and then forward again, the upgrade meets the same conflicts: its first
/// migration is brought up to date and is current again, not joined by a second one
/// listing them twice (QA26: settling the newer left the older open, and `apply` and
/// `doctor` kept warning about it).
#[test]
fn an_upgrade_made_again_reuses_its_pending_migration() {
    let u = Upgraded::new();
    assert!(u.parked(&u.skill).is_file());
    std::thread::sleep(std::time::Duration::from_millis(1100));
    u.upgrade_to(&u.v1);
    // The skill's edit undone meanwhile: made again, the upgrade meets no conflict there,
    // and the brought-up-to-date document's folder keeps no parked copy of it.
    fs_err::write(u.root.join(&u.skill), &u.v1.files[&u.skill].0).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let again = u.upgrade_to(&u.v2);
    assert!(!u.parked(&u.skill).exists(), "{:?}", u.parked_copies());
    assert!(u.parked("AGENTS.md").is_file(), "{:?}", u.parked_copies());
    let ids: Vec<&str> = again
        .pending_migrations
        .iter()
        .map(|m| m.id.as_str())
        .collect();
    assert!(ids.contains(&u.id.as_str()), "{ids:?}");
    let listing = migrate::list(&u.root).unwrap();
    let upgrades: Vec<&str> = listing
        .migrations
        .iter()
        .filter(|m| m.to_version.as_deref() == Some("v0.29.0"))
        .map(|m| m.id.as_str())
        .collect();
    assert_eq!(upgrades, [u.id.as_str()]);
    let m = listing.migrations.iter().find(|m| m.id == u.id).unwrap();
    assert_eq!(m.state, "pending");
    // Settling it settles the conflicts for good.
    u.resolve(&[], Some(Resolution::Take(Side::Theirs)), false)
        .unwrap();
    let after = migrate::list(&u.root).unwrap();
    assert!(
        !after
            .migrations
            .iter()
            .any(|m| m.state == "pending" && m.to_version.as_deref() == Some("v0.29.0")),
        "{:?}",
        after.migrations
    );
}

/// A local directory source is read in place and then moves on (the owner edits the
/// release there for the next version): the release `apply` installed is kept in the
/// download cache under its tree digest, so the base version of a conflict is there to
/// show and take after the upgrade, as for an archive.
#[test]
fn the_base_of_a_directory_source_is_kept_in_the_cache() {
    let (_r, releases) = common::empty_project();
    let (_c, cache) = common::empty_project();
    let (_p, root) = common::empty_project();
    let pack = releases.join("pack");
    let v1 = SyntheticRelease::generate("v0.28.3", false);
    let v2 = SyntheticRelease::generate("v0.29.0", true);
    let config = |release: &SyntheticRelease| {
        fs_err::remove_dir_all(&pack).ok();
        release.write_dir(pack.as_std_path()).unwrap();
        let payload = aibox_provenance::extract::read_dir(
            pack.as_std_path(),
            &aibox_provenance::ExtractLimits::default(),
        )
        .unwrap();
        format!(
            "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\npackages = [\"product\"]\n\n\
             [processkit]\nsource = \"{pack}\"\nversion = \"{}\"\nsha256 = \"{}\"\n\
             trusted_sources = [\"{releases}\"]\n",
            release.version,
            aibox_provenance::tree_digest(&payload).to_hex()
        )
    };
    fs_err::write(root.join("aibox.toml"), config(&v1)).unwrap();
    apply(&root, &common::apply_opts(Some(&cache))).unwrap();
    let skill = v2.changed_plain_skill(&v1, &root).unwrap();
    fs_err::write(root.join(&skill), SKILL_EDIT).unwrap();
    // The directory now holds the next release only.
    fs_err::write(root.join("aibox.toml"), config(&v2)).unwrap();
    let report = apply(&root, &common::apply_opts(Some(&cache))).unwrap();
    let id = report.pending_migrations[0].id.clone();
    let options = MigrateOptions {
        cache_dir: Some(cache.clone()),
    };
    let shown = migrate::show(&root, &id, Some(&skill), &options).unwrap();
    assert!(shown.files[0].base.available, "{:?}", shown.files[0]);
    assert_eq!(
        migrate::version(&root, &id, &skill, Side::Base, &options).unwrap(),
        v1.files[&skill].0
    );
    let request = ResolveRequest {
        id,
        paths: vec![skill.clone()],
        resolution: Some(Resolution::Take(Side::Base)),
        force: false,
    };
    migrate::resolve(&root, &request, &options).unwrap();
    assert_eq!(fs_err::read(root.join(&skill)).unwrap(), v1.files[&skill].0);
}

/// QA: the base of a conflict on a file the release adds (a file of the user's was
/// already at that path) was "not available" for a cache problem, exit 3. There is no
/// base: the previous release had no such file, and the error says so (exit 2).
#[test]
fn a_file_new_in_the_release_has_no_base_and_says_why() {
    let (_d, releases) = common::empty_project();
    let (_c, cache) = common::empty_project();
    let (_p, root) = common::empty_project();
    let v1 = SyntheticRelease::generate("v0.28.3", false);
    let v2 = SyntheticRelease::generate("v0.29.0", true);
    fs_err::write(
        root.join("aibox.toml"),
        common::release_config(&releases, &v1),
    )
    .unwrap();
    apply(&root, &common::apply_opts(Some(&cache))).unwrap();
    let new = v2
        .files
        .keys()
        .find(|p| {
            !v1.files.contains_key(*p) && p.starts_with("context/") && !p.contains("/skills/")
        })
        .or_else(|| {
            v2.files
                .keys()
                .find(|p| !v1.files.contains_key(*p) && p.starts_with("context/"))
        })
        .expect("the next release adds a file")
        .clone();
    let path = root.join(&new);
    fs_err::create_dir_all(path.parent().unwrap()).unwrap();
    fs_err::write(&path, "mine\n").unwrap();
    fs_err::write(
        root.join("aibox.toml"),
        common::release_config(&releases, &v2),
    )
    .unwrap();
    let report = apply(&root, &common::apply_opts(Some(&cache))).unwrap();
    let id = report.pending_migrations[0].id.clone();
    let options = MigrateOptions {
        cache_dir: Some(cache.clone()),
    };
    let err = migrate::version(&root, &id, &new, Side::Base, &options).unwrap_err();
    assert_eq!(code(&err), "aibox::migrate::no_base", "{err}");
    assert_eq!(err.kind(), aibox_config::ErrorKind::User);
    assert!(
        err.to_string().contains("v0.28.3 did not have this file"),
        "{err}"
    );
    let shown = migrate::show(&root, &id, Some(&new), &options).unwrap();
    let why = base_missing_because(&shown);
    assert!(why.contains("did not have this file"), "{why}");
}
