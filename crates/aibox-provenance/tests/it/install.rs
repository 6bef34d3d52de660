//! Install, no-op, lossless upgrade and integrity on the synthetic release.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use crate::common;

use std::path::Path;

use aibox_provenance::install::{Action, Class};
use aibox_provenance::{IntegrityStatus, ProvenanceError, integrity};
use aibox_test_support::http::release::SyntheticRelease;
use common::{Setup, install, plan, write_lock};

struct Dirs {
    project: tempfile::TempDir,
    store: tempfile::TempDir,
}

fn dirs() -> Dirs {
    Dirs {
        project: tempfile::tempdir().unwrap(),
        store: tempfile::tempdir().unwrap(),
    }
}

/// Installs the `minimal` package of a generated v1.0.0 into the project of `d`.
fn install_minimal(d: &Dirs) -> SyntheticRelease {
    let v1 = SyntheticRelease::generate("v1.0.0", false);
    install(
        d.project.path(),
        d.store.path(),
        &v1,
        &Setup {
            packages: &["minimal"],
            ..Setup::default()
        },
    );
    v1
}

/// The `v2:` install fingerprint of what is installed under `root`, computed here from
/// its definition: SHA-256 over `path NUL contents NUL` of each file below the
/// fingerprinted folders, in path order, leaving out dot-named files and folders and
/// each skill's `config/`.
fn fingerprint_of(root: &Path) -> String {
    use sha2::Digest as _;
    fn walk(root: &Path, rel: &str, out: &mut Vec<String>) {
        let Ok(entries) = fs_err::read_dir(root.join(rel)) else {
            return;
        };
        for entry in entries {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let path = format!("{rel}/{name}");
            if name.starts_with('.') {
                continue;
            }
            if entry.file_type().unwrap().is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    for top in [
        "context/skills/processkit",
        "context/skills/_lib",
        "context/schemas",
        "context/state-machines",
        "context/processes",
    ] {
        walk(root, top, &mut paths);
    }
    let config = |p: &str| {
        let parts: Vec<&str> = p.split('/').collect();
        parts.len() > 5 && parts[1] == "skills" && parts[4] == "config"
    };
    paths.retain(|p| !config(p));
    paths.sort();
    assert!(paths.len() > 10, "{paths:?}");
    let mut h = sha2::Sha256::new();
    for p in &paths {
        h.update(p.as_bytes());
        h.update([0]);
        h.update(fs_err::read(root.join(p)).unwrap());
        h.update([0]);
    }
    format!("v2:{}", hex::encode(h.finalize()))
}

fn read(root: &Path, rel: &str) -> Vec<u8> {
    fs_err::read(root.join(rel)).unwrap()
}

use common::class_of;

#[test]
fn first_install_selects_maps_and_records() {
    let d = dirs();
    let root = d.project.path();
    let v1 = SyntheticRelease::generate("v1.0.0", false);
    let plan = install(root, d.store.path(), &v1, &Setup::default());

    // Selection: product tier = minimal + managed + software + product tiers + core.
    assert!(plan.skills.contains("skill-gate") && plan.skills.contains("product-skill-03"));
    assert!(
        !plan.skills.contains("data-ai-skill-00"),
        "research tier not selected"
    );
    assert!(
        plan.warnings.iter().any(|w| w.contains("backlog-context")),
        "{:?}",
        plan.warnings
    );
    assert_eq!(plan.skills.len(), 9 + 1 + 27 + 35 + 21 + 3);

    // Mapping.
    assert!(
        root.join("context/skills/processkit/skill-gate/SKILL.md")
            .is_file()
    );
    assert!(
        !root
            .join("context/skills/data-ai/data-ai-skill-00")
            .exists()
    );
    assert!(
        root.join("context/skills/_lib/processkit/mod_00.py")
            .is_file()
    );
    assert!(
        root.join("context/skills/processkit/processkit-skill-04/scripts/.gitkeep")
            .is_file()
    );
    assert!(root.join("context/.processkit-mcp-manifest.json").is_file());
    assert_eq!(read(root, "context/INDEX.md"), b"# processkit\n");
    assert!(root.join("AGENTS.md").is_file());
    assert!(!root.join(".processkit").exists());
    assert!(!root.join("context/skills/FORMAT.md").exists());
    assert!(!root.join("PROVENANCE.toml").exists() && !root.join("LICENSE").exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &str| fs_err::metadata(root.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode("context/skills/processkit/processkit-skill-05/scripts/.gitkeep"),
            0o755
        );
        assert_eq!(
            mode("context/skills/processkit/processkit-skill-06/SKILL.md"),
            0o644
        );
    }

    // Snapshot, marker with per-file manifest, lock.
    assert!(
        root.join("context/templates/processkit/v1.0.0/PROVENANCE.toml")
            .is_file()
    );
    assert!(
        root.join("context/templates/processkit/v1.0.0/.processkit/packages/product.yaml")
            .is_file()
    );
    let marker = aibox_provenance::Marker::read(root).unwrap();
    assert_eq!(marker.install.processkit_version, "v1.0.0");
    assert!(
        marker
            .user_files
            .contains_key("context/skills/processkit/skill-finder/config/settings.toml")
    );
    assert!(marker.user_files.contains_key("AGENTS.md"));
    assert!(
        marker
            .files
            .contains_key("context/skills/processkit/skill-gate/SKILL.md")
    );
    assert!(!marker.files.keys().any(|k| k.contains("/config/")));
    assert_eq!(plan.lock.version, "v1.0.0");
    assert_eq!(plan.lock.installed_at, "2026-05-22T19:24:06Z");
    assert_eq!(
        plan.lock.processkit_install_hash.as_deref(),
        Some(fingerprint_of(root).as_str())
    );
    assert_eq!(
        plan.lock.verification,
        aibox_provenance::Verification::Sidecar
    );

    // Servers: the gateway only (it is installed and preferred).
    let names: Vec<_> = plan.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["processkit-gateway"]);
    assert_eq!(plan.servers[0].env["PROCESSKIT_MCP_MODE"], "gateway");
    assert!(plan.migration.is_none(), "no migration on a first install");

    let report = integrity(root).unwrap();
    assert_eq!(report.status, IntegrityStatus::Healthy, "{report:?}");
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn per_skill_servers_when_the_gateway_is_not_wanted() {
    let d = dirs();
    let v1 = SyntheticRelease::generate("v1.0.0", false);
    let setup = Setup {
        prefer_gateway: false,
        packages: &["managed"],
        ..Setup::default()
    };
    let p = plan(d.project.path(), d.store.path(), &v1, &setup).unwrap();
    let names: Vec<_> = p.servers.iter().map(|s| s.name.as_str()).collect();
    // managed covers processkit-skill-04..39; servers live on 04..29.
    assert_eq!(names.len(), 26, "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("processkit-processkit-skill-"))
    );
    assert!(!names.contains(&"processkit-gateway"));
}

#[test]
fn second_run_is_a_no_op_and_keeps_timestamps() {
    let d = dirs();
    let root = d.project.path();
    let v1 = SyntheticRelease::generate("v1.0.0", false);
    install(root, d.store.path(), &v1, &Setup::default());
    let marker_before = read(root, "context/.processkit-provenance.toml");
    let later = Setup {
        now: "2027-01-01T00:00:00Z",
        ..Setup::default()
    };
    let again = plan(root, d.store.path(), &v1, &later).unwrap();
    assert!(
        again.is_noop(),
        "writes {:?}, removals {:?}, snapshot {}, stale {:?}, migration {}, marker {}",
        again.writes.len(),
        again.removals,
        again.snapshot.is_some(),
        again.stale_snapshots,
        again.migration.is_some(),
        again.marker_changed
    );
    assert_eq!(again.lock.installed_at, "2026-05-22T19:24:06Z");
    assert_eq!(
        aibox_config::Render::to_bytes(&*again.marker),
        marker_before.as_slice()
    );
}

#[test]
fn selection_changes_install_and_remove_only_untouched_files() {
    let d = dirs();
    let root = d.project.path();
    let v1 = install_minimal(&d);
    assert!(
        root.join("context/skills/processkit/processkit-skill-04/SKILL.md")
            .is_file()
    );
    let edited = "context/skills/processkit/processkit-skill-05/references/guide.md";
    fs_err::write(root.join(edited), "my notes").unwrap();
    let setup = Setup {
        packages: &["minimal"],
        include: &["data-ai-skill-01", "no-such-skill"],
        exclude: &["processkit-skill-04", "processkit-skill-05", "skill-gate"],
        ..Setup::default()
    };
    let p = install(root, d.store.path(), &v1, &setup);
    assert!(p.warnings.iter().any(|w| w.contains("no-such-skill")));
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("core skill `skill-gate`"))
    );
    assert!(
        root.join("context/skills/data-ai/data-ai-skill-01/SKILL.md")
            .is_file()
    );
    assert!(
        !root
            .join("context/skills/processkit/processkit-skill-04")
            .exists(),
        "deselected skill removed"
    );
    assert_eq!(
        read(root, edited),
        b"my notes",
        "edited file of a deselected skill kept"
    );
    // Said as what happened: the skill was deselected, the release did not remove it
    // (QA26).
    assert!(
        p.warnings.iter().any(|w| w
            == &format!(
                "`{edited}` belongs to a skill that is no longer selected but has local \
                 changes; kept"
            )),
        "{:?}",
        p.warnings
    );
    assert!(!p.warnings.iter().any(|w| w.contains("removed upstream")));
    assert!(
        root.join("context/skills/processkit/skill-gate/SKILL.md")
            .is_file(),
        "core stays"
    );
}

#[test]
#[allow(clippy::too_many_lines)] // one end-to-end scenario, asserted step by step
fn upgrade_keeps_every_local_edit_and_writes_a_migration() {
    let d = dirs();
    let root = d.project.path();
    let v1 = SyntheticRelease::generate("v1.0.0", false);
    let v2 = SyntheticRelease::generate("v2.0.0", true);
    install(root, d.store.path(), &v1, &Setup::default());

    // Local edits of every kind.
    let conflict = "context/skills/processkit/processkit-skill-15/SKILL.md"; // changed upstream too
    let upstream_only = "context/skills/processkit/processkit-skill-25/SKILL.md";
    let local_only = "context/skills/processkit/processkit-skill-06/SKILL.md";
    let deleted = "context/skills/processkit/processkit-skill-07/references/guide.md";
    let added = "context/skills/processkit/processkit-skill-07/references/mine.md";
    let settings = "context/skills/processkit/skill-finder/config/settings.toml";
    let removed_edited = "context/schemas/schema-17.yaml";
    let removed_skill = "context/skills/engineering/engineering-skill-29/SKILL.md";
    let removed_skill_untouched =
        "context/skills/engineering/engineering-skill-29/references/guide.md";
    fs_err::write(root.join(conflict), "local conflict edit\n").unwrap();
    fs_err::write(root.join(local_only), "local only edit\n").unwrap();
    fs_err::remove_file(root.join(deleted)).unwrap();
    fs_err::write(root.join(added), "my own file\n").unwrap();
    fs_err::write(root.join(settings), "verbose = true\n").unwrap();
    fs_err::write(root.join(removed_edited), "kept schema\n").unwrap();
    fs_err::write(root.join(removed_skill), "kept skill doc\n").unwrap();

    let setup = Setup {
        now: "2026-06-01T10:00:00Z",
        include: &["engineering-skill-new"],
        ..Setup::default()
    };
    let p = install(root, d.store.path(), &v2, &setup);
    let class = |path: &str| class_of(&p, path);
    assert_eq!(class(conflict), (Class::Conflict, Action::Keep));
    assert_eq!(
        class(upstream_only),
        (Class::ChangedUpstreamOnly, Action::Write)
    );
    assert_eq!(class(local_only), (Class::ChangedLocallyOnly, Action::Keep));
    assert_eq!(class(deleted), (Class::ChangedLocallyOnly, Action::Keep));
    assert_eq!(
        class(removed_edited),
        (Class::RemovedUpstream, Action::Keep)
    );
    assert_eq!(
        class(removed_skill_untouched),
        (Class::RemovedUpstream, Action::Remove)
    );
    assert_eq!(
        class("context/skills/_lib/processkit/new_helper.py"),
        (Class::NewUpstream, Action::Write)
    );

    assert_eq!(read(root, conflict), b"local conflict edit\n");
    assert_eq!(read(root, local_only), b"local only edit\n");
    assert!(
        !root.join(deleted).exists(),
        "a local deletion is respected"
    );
    assert_eq!(read(root, added), b"my own file\n");
    assert_eq!(read(root, settings), b"verbose = true\n");
    assert_eq!(read(root, removed_edited), b"kept schema\n");
    assert!(
        p.warnings.iter().any(|w| w
            == &format!("`{removed_edited}` was removed upstream but has local changes; kept")),
        "{:?}",
        p.warnings
    );
    assert_eq!(read(root, removed_skill), b"kept skill doc\n");
    assert!(!root.join(removed_skill_untouched).exists());
    assert_eq!(read(root, upstream_only), v2.files[upstream_only].0);
    assert!(
        root.join("context/skills/engineering/engineering-skill-new/SKILL.md")
            .is_file()
    );

    // Snapshot moved to the new version; old one dropped (regenerable).
    assert!(
        root.join("context/templates/processkit/v2.0.0/PROVENANCE.toml")
            .is_file()
    );
    assert!(!root.join("context/templates/processkit/v1.0.0").exists());

    // Migration document and the parked upstream copy of the conflict.
    let doc = String::from_utf8(read(
        root,
        "context/migrations/pending/MIG-20260601T100000.md",
    ))
    .unwrap();
    assert!(
        doc.contains("from_version: v1.0.0\n  to_version: v2.0.0"),
        "{doc}"
    );
    assert!(doc.contains(&format!(
        "{{path: \"{conflict}\", classification: conflict, base_sha256: "
    )));
    assert!(doc.contains("### skills/processkit/processkit-skill-15"));
    let parked = format!("context/migrations/pending/MIG-20260601T100000.upstream/{conflict}");
    assert_eq!(read(root, &parked), v2.files[conflict].0);

    // Integrity names exactly the local differences.
    let report = integrity(root).unwrap();
    assert_eq!(report.status, IntegrityStatus::Drifted);
    assert_eq!(report.exit_code(), 1);
    assert_eq!(
        report.modified,
        vec![local_only.to_owned(), conflict.to_owned()]
    );
    assert_eq!(report.missing, vec![deleted.to_owned()]);
    assert!(report.unexpected.contains(&added.to_owned()));
    assert!(report.unexpected.contains(&removed_edited.to_owned()));
    // The marker records the release's version of every file, kept user files too, so
    // the kept `AGENTS.md` (still v1's) is a user file that differs from it.
    assert_eq!(
        report.user_modified,
        vec!["AGENTS.md".to_owned(), settings.to_owned()]
    );
    assert_eq!(class("AGENTS.md"), (Class::Conflict, Action::Keep));

    // Planned again at the same release, nothing is a conflict any more: each was
    // reported once, by the migration document, and the kept files are local edits.
    let again = plan(root, d.store.path(), &v2, &setup).unwrap();
    for path in ["AGENTS.md", conflict] {
        assert_eq!(
            class_of(&again, path),
            (Class::ChangedLocallyOnly, Action::Keep),
            "{path}"
        );
    }
    assert!(
        again.decisions.iter().all(|x| x.class != Class::Conflict),
        "{:?}",
        again.decisions.iter().find(|x| x.class == Class::Conflict)
    );
    assert!(again.migration.is_none() && again.is_noop());
}

#[test]
fn integrity_ladder() {
    let d = dirs();
    let root = d.project.path();
    assert_eq!(
        integrity(root).unwrap().status,
        IntegrityStatus::NotInstalled
    );
    let v1 = SyntheticRelease::generate("v1.0.0", false);
    let p = install(
        root,
        d.store.path(),
        &v1,
        &Setup {
            packages: &["minimal"],
            ..Setup::default()
        },
    );
    assert_eq!(integrity(root).unwrap().status, IntegrityStatus::Healthy);

    let json = serde_json::to_value(integrity(root).unwrap()).unwrap();
    assert_eq!(json["status"], "healthy");

    let mut wrong = p.lock.clone();
    wrong.version = "v0.9.0".into();
    write_lock(root, &wrong);
    assert_eq!(
        integrity(root).unwrap().status,
        IntegrityStatus::VersionMismatch
    );
    write_lock(root, &p.lock);

    let snap = root.join("context/templates/processkit/v1.0.0");
    fs_err::rename(&snap, root.join("snap-aside")).unwrap();
    assert_eq!(
        integrity(root).unwrap().status,
        IntegrityStatus::MissingSnapshot
    );
    fs_err::rename(root.join("snap-aside"), &snap).unwrap();

    fs_err::write(
        root.join("context/skills/processkit/skill-gate/SKILL.md"),
        "x",
    )
    .unwrap();
    fs_err::write(root.join("context/schemas/extra.yaml"), "x").unwrap();
    let r = integrity(root).unwrap();
    assert_eq!(r.status, IntegrityStatus::Drifted);
    assert_eq!(
        r.modified,
        ["context/skills/processkit/skill-gate/SKILL.md"]
    );
    assert_eq!(r.unexpected, ["context/schemas/extra.yaml"]);
    insta::assert_json_snapshot!(
        "integrity_drifted",
        serde_json::json!({
            "status": r.status, "modified": r.modified, "missing": r.missing,
            "unexpected": r.unexpected, "lock_version": r.lock_version, "marker_version": r.marker_version,
        })
    );

    fs_err::write(
        root.join("context/.processkit-provenance.toml"),
        "schema_version = 99\n",
    )
    .unwrap();
    assert_eq!(
        integrity(root).unwrap().status,
        IntegrityStatus::MissingMarker
    );
}

/// `doctor --integrity` hashes every file it vouches for (the marker's files, the
/// user-owned ones and every file of the snapshot), never follows a link put in place of
/// an installed file and never waits on a FIFO there.
#[test]
fn integrity_hashes_every_vouched_file_and_neither_follows_nor_waits() {
    let d = dirs();
    let root = d.project.path();
    install_minimal(&d);
    let marker = aibox_provenance::record::Marker::read(root).unwrap();
    let mut snapshot = Vec::new();
    let mut stack = vec![root.join("context/templates/processkit/v1.0.0")];
    while let Some(dir) = stack.pop() {
        for e in fs_err::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                snapshot.push(e.path());
            }
        }
    }
    let report = integrity(root).unwrap();
    assert_eq!(report.status, IntegrityStatus::Healthy, "{report:?}");
    assert_eq!(
        report.checked,
        marker.files.len() + marker.user_files.len() + snapshot.len()
    );

    // A link to an identical copy, and a FIFO, where installed files were.
    let linked = "context/skills/processkit/skill-gate/SKILL.md";
    let piped = marker
        .files
        .keys()
        .find(|p| *p != linked && p.contains("/skills/"))
        .unwrap()
        .to_owned();
    let copy = root.join("copy-of-skill.md");
    fs_err::rename(root.join(linked), &copy).unwrap();
    std::os::unix::fs::symlink(&copy, root.join(linked)).unwrap();
    fs_err::remove_file(root.join(&piped)).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(root.join(&piped))
        .status()
        .unwrap();
    assert!(made.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = root.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(integrity(&owned));
    });
    let report = rx
        .recv_timeout(std::time::Duration::from_mins(1))
        .expect("integrity returns although a FIFO sits where a file was")
        .unwrap();
    assert_eq!(report.status, IntegrityStatus::Drifted);
    let mut missing = report.missing.clone();
    missing.sort();
    let mut expected = vec![linked.to_owned(), piped];
    expected.sort();
    assert_eq!(missing, expected, "{report:?}");

    // An edited snapshot file is drift too.
    fs_err::remove_file(root.join(linked)).unwrap();
    fs_err::rename(&copy, root.join(linked)).unwrap();
    let snap_file = snapshot.iter().find(|p| p.ends_with("SKILL.md")).unwrap();
    fs_err::write(snap_file, "edited").unwrap();
    let report = integrity(root).unwrap();
    assert!(
        report
            .snapshot_modified
            .iter()
            .any(|p| root.join(p) == *snap_file || p.ends_with('/')),
        "{report:?}"
    );
}

#[test]
fn missing_scripts_stop_before_writing() {
    let d = dirs();
    let root = d.project.path();
    let mut v1 = SyntheticRelease::generate("v1.0.0", false);
    v1.files
        .remove("context/skills/processkit/processkit-skill-10/mcp/server.py");
    v1.files
        .remove("context/skills/processkit/processkit-skill-11/mcp/server.py");
    v1.restamp();
    let err = plan(root, d.store.path(), &v1, &Setup::default()).unwrap_err();
    let ProvenanceError::MissingScripts { scripts } = &err else {
        panic!("{err}")
    };
    assert_eq!(
        scripts,
        &[
            "context/skills/processkit/processkit-skill-10/mcp/server.py",
            "context/skills/processkit/processkit-skill-11/mcp/server.py",
        ]
    );
    assert_eq!(
        fs_err::read_dir(root).unwrap().count(),
        0,
        "nothing written"
    );
}

/// A minimal release with the package tier files `tiers` (name, YAML text).
fn with_tiers(tiers: &[(&str, &str)]) -> SyntheticRelease {
    let mut release = SyntheticRelease::minimal("v1.0.0");
    for (name, yaml) in tiers {
        release.files.insert(
            format!(".processkit/packages/{name}.yaml"),
            (yaml.as_bytes().to_vec(), 0o644),
        );
    }
    release.restamp();
    release
}

/// The plan of `release` into a fresh project with `packages` selected.
fn plan_packages(
    release: &SyntheticRelease,
    packages: &[&str],
) -> aibox_provenance::Result<aibox_provenance::InstallPlan> {
    let d = dirs();
    plan(
        d.project.path(),
        d.store.path(),
        release,
        &Setup {
            packages,
            ..Setup::default()
        },
    )
}

#[test]
fn tier_cycle_is_an_error() {
    let v1 = with_tiers(&[
        ("a", "metadata: {name: a}\nspec: {extends: [b]}\n"),
        ("b", "metadata: {name: b}\nspec: {extends: [a]}\n"),
    ]);
    let err = plan_packages(&v1, &["a"]).unwrap_err();
    assert!(matches!(err, ProvenanceError::TierCycle { .. }), "{err}");
    assert!(err.to_string().contains("a -> b -> a"), "{err}");
}

/// A package tier the release does not have is refused, with the nearest name, before
/// anything is planned: ignored, a typo removed every skill only that tier selected
/// (QA26: `packages = ["prodcut"]` uninstalled 319 files). A tier's own `extends`
/// naming no tier is the release's slip: a warning.
#[test]
fn an_unknown_package_tier_is_an_error_not_an_uninstall() {
    let v1 = with_tiers(&[(
        "product",
        "metadata: {name: product}\nspec: {extends: [gone]}\n",
    )]);
    let err = plan_packages(&v1, &["prodcut"]).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::UnknownPackage { .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("`prodcut`") && text.contains("did you mean `product`?"),
        "{text}"
    );
    assert_eq!(err.kind(), aibox_config::ErrorKind::User);
    let ok = plan_packages(&v1, &["product"]).unwrap();
    assert!(
        ok.warnings
            .iter()
            .any(|w| w.contains("unknown package tier `gone` ignored")),
        "{:?}",
        ok.warnings
    );
}

#[cfg(unix)]
#[test]
fn symlinked_parent_is_refused() {
    let d = dirs();
    let root = d.project.path();
    let outside = tempfile::tempdir().unwrap();
    fs_err::create_dir_all(root.join("context")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("context/skills")).unwrap();
    let v1 = SyntheticRelease::minimal("v1.0.0");
    let p = plan(
        root,
        d.store.path(),
        &v1,
        &Setup {
            packages: &[],
            ..Setup::default()
        },
    )
    .unwrap();
    let err = aibox_provenance::apply_plan(root, &p).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::UnsafeDestination { .. }),
        "{err}"
    );
    assert_eq!(
        fs_err::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written through the link"
    );
}

#[test]
fn migration_document_format() {
    let d = dirs();
    let root = d.project.path();
    let mut v1 = SyntheticRelease::minimal("v1.0.0");
    for (p, t) in [
        ("context/artifacts/a.md", "a1\n"),
        ("context/artifacts/b.md", "b1\n"),
        ("context/artifacts/c.md", "c1\n"),
    ] {
        v1.files.insert(p.into(), (t.as_bytes().to_vec(), 0o644));
    }
    v1.restamp();
    let mut v2 = v1.clone();
    v2.version = "v1.1.0".into();
    v2.files
        .insert("context/artifacts/a.md".into(), (b"a2\n".to_vec(), 0o644));
    v2.files
        .insert("context/artifacts/b.md".into(), (b"b2\n".to_vec(), 0o644));
    v2.files.remove("context/artifacts/c.md");
    v2.files
        .insert("context/artifacts/d.md".into(), (b"d2\n".to_vec(), 0o644));
    v2.restamp();
    let setup = Setup {
        packages: &[],
        ..Setup::default()
    };
    install(root, d.store.path(), &v1, &setup);
    fs_err::write(root.join("context/artifacts/b.md"), "local b\n").unwrap();
    let setup = Setup {
        packages: &[],
        now: "2026-07-01T08:30:00Z",
        ..Setup::default()
    };
    install(root, d.store.path(), &v2, &setup);
    let doc = String::from_utf8(read(
        root,
        "context/migrations/pending/MIG-20260701T083000.md",
    ))
    .unwrap();
    let front: serde_norway::Value =
        serde_norway::from_str(doc.split("---\n").nth(1).unwrap()).unwrap();
    assert_eq!(front["spec"]["state"].as_str(), Some("pending"));
    assert_eq!(
        front["spec"]["affected_files"].as_sequence().unwrap().len(),
        4
    );
    insta::assert_snapshot!(
        "migration_document",
        doc.replace(d.store.path().to_str().unwrap(), "<store>")
    );
}

/// QA: a file gone upstream but kept because it was edited was "1 removed" in the
/// migration document while `apply` said "0 removed": the document counts what was
/// removed and says which files were kept because of an edit, as `apply` counts them.
#[test]
fn the_migration_document_counts_an_edited_file_gone_upstream_as_kept() {
    let d = dirs();
    let root = d.project.path();
    let mut v1 = SyntheticRelease::minimal("v1.0.0");
    for (p, t) in [
        ("context/artifacts/a.md", "a1\n"),
        ("context/artifacts/b.md", "b1\n"),
        ("context/artifacts/c.md", "c1\n"),
    ] {
        v1.files.insert(p.into(), (t.as_bytes().to_vec(), 0o644));
    }
    v1.restamp();
    let mut v2 = v1.clone();
    v2.version = "v1.1.0".into();
    v2.files
        .insert("context/artifacts/a.md".into(), (b"a2\n".to_vec(), 0o644));
    v2.files.remove("context/artifacts/c.md");
    v2.restamp();
    bare_install(root, d.store.path(), &v1, Setup::default().now);
    fs_err::write(root.join("context/artifacts/c.md"), "local c\n").unwrap();
    // QA: an edit of a file upstream left alone was kept too, yet counted "0 kept".
    fs_err::write(root.join("context/artifacts/b.md"), "local b\n").unwrap();
    bare_install(root, d.store.path(), &v2, "2026-07-01T08:30:00Z");
    let doc = String::from_utf8(read(
        root,
        "context/migrations/pending/MIG-20260701T083000.md",
    ))
    .unwrap();
    assert!(doc.contains("0 removed, 2 kept (edited)"), "{doc}");
    assert!(
        doc.contains("`context/artifacts/c.md` → `context/artifacts/c.md` (kept (edited))"),
        "{doc}"
    );
    assert_eq!(read(root, "context/artifacts/c.md"), b"local c\n");
}

/// Installs `release` with no package selected, at the time `now`.
fn bare_install(
    root: &std::path::Path,
    store: &std::path::Path,
    release: &SyntheticRelease,
    now: &str,
) {
    let setup = Setup {
        packages: &[],
        now,
        ..Setup::default()
    };
    install(root, store, release, &setup);
}

/// Two version changes within one second get two migration documents: the second takes
/// `MIG-<time>-2` (it overwrote the first's document and parked copies).
#[test]
fn two_migrations_within_one_second_keep_both_documents() {
    let d = dirs();
    let root = d.project.path();
    let mut v1 = SyntheticRelease::minimal("v1.0.0");
    v1.files
        .insert("context/artifacts/a.md".into(), (b"a1\n".to_vec(), 0o644));
    v1.restamp();
    let mut v2 = v1.clone();
    v2.version = "v1.1.0".into();
    v2.files
        .insert("context/artifacts/a.md".into(), (b"a2\n".to_vec(), 0o644));
    v2.restamp();
    let mut v3 = v2.clone();
    v3.version = "v1.2.0".into();
    v3.files
        .insert("context/artifacts/a.md".into(), (b"a3\n".to_vec(), 0o644));
    v3.restamp();
    for v in [&v1, &v2, &v3] {
        bare_install(root, d.store.path(), v, "2026-07-01T08:30:00Z");
    }
    let first = String::from_utf8(read(
        root,
        "context/migrations/pending/MIG-20260701T083000.md",
    ))
    .unwrap();
    let second = String::from_utf8(read(
        root,
        "context/migrations/pending/MIG-20260701T083000-2.md",
    ))
    .unwrap();
    assert!(
        first.contains("v1.0.0") && first.contains("v1.1.0"),
        "{first}"
    );
    assert!(
        second.contains("v1.1.0") && second.contains("v1.2.0"),
        "{second}"
    );
    assert!(second.contains("MIG-20260701T083000-2"), "{second}");
}

/// A plan's copy sources cost no path per copy: every source names the one folder of
/// the release (the same allocation), and a file written both into the project and into
/// the snapshot names its release path once for the two. Each source still leads to the
/// release file with the planned digest, and the copies install byte for byte.
#[test]
fn copy_sources_share_their_folder_and_release_path() {
    use aibox_provenance::install::WriteData;
    use std::sync::Arc;
    let d = dirs();
    let root = d.project.path();
    let v1 = SyntheticRelease::generate("v1.0.0", false);
    let plan = plan(root, d.store.path(), &v1, &Setup::default()).unwrap();
    let copy = |data: &WriteData| match data {
        WriteData::Copy(c) => c.clone(),
        WriteData::Bytes(_) => panic!("a release file on disk is planned as a copy"),
    };
    let snapshot = plan
        .snapshot
        .as_ref()
        .expect("a first install writes the snapshot");
    let content: Vec<_> = plan.writes.iter().map(|w| copy(&w.data)).collect();
    let snap: Vec<_> = snapshot
        .writes(&plan.payload)
        .map(|w| copy(&w.unwrap().data))
        .collect();
    assert!(!content.is_empty() && snap.len() > content.len());
    let dir = &content[0].dir;
    assert!(
        content
            .iter()
            .chain(&snap)
            .all(|c| Arc::ptr_eq(&c.dir, dir)),
        "one folder for every source"
    );
    let mut shared = 0;
    for c in &content {
        let twin = snap
            .iter()
            .find(|s| s.rel == c.rel)
            .expect("every installed release file is in the snapshot");
        assert!(Arc::ptr_eq(&twin.rel, &c.rel), "{} named twice", c.rel);
        shared += 1;
    }
    assert_eq!(shared, content.len());
    // The sources are the release files, with the digests the plan promises.
    for c in content.iter().chain(&snap) {
        let bytes = c.read_verified().unwrap();
        assert_eq!(bytes.len() as u64, c.size, "{}", c.rel);
        assert_eq!(aibox_provenance::Sha256::of(&bytes).as_bytes(), &c.sha256);
        assert_eq!(c.path(), dir.join(&*c.rel));
    }
    aibox_provenance::install::apply_plan(root, &plan).unwrap();
    for (w, c) in plan.writes.iter().zip(&content) {
        assert_eq!(
            read(root, w.path.as_str()),
            c.read_verified().unwrap(),
            "{}",
            w.path
        );
    }
}

/// The skill review's view of an apply that changes nothing (`after_apply` when the
/// marker records this release and selection, read from the marker and the scan alone)
/// is the one the full comparison gives, for a skill untouched, edited, with a file
/// deleted, and with a file added by hand.
#[test]
fn after_apply_of_the_installed_release_is_the_full_comparisons() {
    let d = dirs();
    let root = d.project.path();
    let v1 = SyntheticRelease::generate("v1.0.0", false);
    let setup = Setup::default();
    let section = common::publish(&v1, d.store.path());
    common::install_section(root, &section, &setup);
    let skills: Vec<String> = v1
        .files
        .keys()
        .filter_map(|p| aibox_provenance::catalog::skill_of(p))
        .map(|(c, s)| format!("context/skills/{c}/{s}"))
        .filter(|dir| root.join(dir).is_dir())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .take(4)
        .collect();
    assert_eq!(skills.len(), 4);
    let first_file = |dir: &str| {
        let mut files: Vec<_> = v1
            .files
            .keys()
            .filter(|p| p.starts_with(&format!("{dir}/")))
            .collect();
        files.sort();
        files[0].clone()
    };
    fs_err::write(root.join(first_file(&skills[1])), "edited\n").unwrap();
    fs_err::remove_file(root.join(first_file(&skills[2]))).unwrap();
    fs_err::write(root.join(&skills[3]).join("mine.md"), "added\n").unwrap();

    let packages = vec!["product".to_owned()];
    let opts = scan_options(&packages, &[], setup.now);
    let (verified, catalog, scan) = fetch_and_scan(root, &section, &opts);
    let dirs: std::collections::BTreeSet<&str> = skills.iter().map(String::as_str).collect();
    let quick = aibox_provenance::after_apply(&verified, &catalog, &opts, &scan, &dirs).unwrap();
    // An empty intent record takes the full comparison and changes nothing of it.
    let mut full_scan = scan.clone();
    full_scan.interrupted = Some(aibox_provenance::Intent {
        version: "v0.0.0".to_owned(),
        release_asset_sha256: verified.digest,
        base_marker_sha256: None,
        skills: Vec::new(),
        now: setup.now.to_owned(),
        writes: aibox_provenance::record::IntentWrites::default(),
        removals: aibox_provenance::table::PathTable::default(),
        undoes: None,
    });
    let full =
        aibox_provenance::after_apply(&verified, &catalog, &opts, &full_scan, &dirs).unwrap();
    assert_eq!(quick, full);
    let after = |dir: &str, path: &str| quick[dir][path].clone();
    assert!(matches!(
        after(&skills[0], &first_file(&skills[0])),
        aibox_provenance::After::Release(_)
    ));
    assert_eq!(
        after(&skills[1], &first_file(&skills[1])),
        aibox_provenance::After::Live
    );
    assert_eq!(
        after(&skills[2], &first_file(&skills[2])),
        aibox_provenance::After::Absent
    );
}

/// A large install's scan looks its paths up on two threads, batch by batch (a helper
/// takes every other batch): each path's live state is still what is on disk, whichever
/// thread looked it up, for files edited, deleted, replaced by a link or a folder, below
/// a deleted folder and below a file where a folder was.
#[test]
fn a_large_scan_sees_every_path_as_it_is_on_disk() {
    use aibox_provenance::Live;
    let d = dirs();
    let root = d.project.path();
    let (section, every) = install_every_skill(&d);
    let marker = aibox_provenance::record::Marker::read(root).unwrap();
    let mut installed: Vec<String> = (marker.files.keys())
        .chain(marker.user_files.keys())
        .map(str::to_owned)
        .collect();
    installed.sort();
    // Enough paths for the helper thread (256), in batches of 64 on both threads.
    assert!(installed.len() > 800, "{}", installed.len());
    let skill_dirs: Vec<&str> = installed
        .iter()
        .filter_map(|p| p.strip_suffix("/SKILL.md"))
        .collect();
    // Two skill folders: one deleted whole, one replaced by a file (its paths are then
    // below a file: not a directory).
    let (gone, flat) = (skill_dirs[3], skill_dirs[skill_dirs.len() - 4]);
    fs_err::remove_dir_all(root.join(gone)).unwrap();
    fs_err::remove_dir_all(root.join(flat)).unwrap();
    fs_err::write(root.join(flat), "a file where a folder was\n").unwrap();
    disturb_every_29th(root, &installed, &[gone, flat]);

    let packages = vec!["product".to_owned()];
    let now = Setup::default().now;
    let (_, _, scan) = fetch_and_scan(root, &section, &scan_options(&packages, &every, now));
    let on_disk = |path: &str| match fs_err::symlink_metadata(root.join(path)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Ok(m) if m.file_type().is_file() => Some(Live::File(aibox_provenance::Sha256::of(
            &fs_err::read(root.join(path)).unwrap(),
        ))),
        _ => Some(Live::Odd),
    };
    let mut seen = [0usize; 3];
    for path in &installed {
        let expected = on_disk(path);
        assert_eq!(scan.files.get(path).copied(), expected, "{path}");
        seen[match expected {
            None => 0,
            Some(Live::Odd) => 1,
            Some(_) => 2,
        }] += 1;
    }
    assert!(seen.iter().all(|n| *n > 10), "{seen:?}");
    assert!(scan.files.get(&format!("{flat}/SKILL.md")) == Some(&Live::Odd));
    assert!(scan.files.get(&format!("{gone}/SKILL.md")).is_none());
}

/// A large snapshot is hashed in batches, each split between two threads: `doctor
/// --integrity` vouches for every file of it in order (the whole listing's digest
/// matches), and the copies of installed files changed anywhere in it, in either half of
/// a batch, are each named.
#[test]
fn a_large_snapshot_is_checked_file_by_file_in_order() {
    let d = dirs();
    let root = d.project.path();
    install_every_skill(&d);
    let marker = aibox_provenance::record::Marker::read(root).unwrap();
    let report = integrity(root).unwrap();
    assert_eq!(report.status, IntegrityStatus::Healthy, "{report:?}");
    let snapshot_files = report.checked - marker.files.len() - marker.user_files.len();
    // Several batches of 128.
    assert!(snapshot_files > 600, "{snapshot_files}");

    // Every 37th installed file's snapshot copy, edited or deleted in turn.
    let snapshot = "context/templates/processkit/v1.0.0";
    let mut expected = Vec::new();
    let skill_files = marker
        .files
        .keys()
        .filter(|p| p.starts_with("context/skills/"));
    for (k, installed) in skill_files.step_by(37).enumerate() {
        // A skill file's release path is its installed path.
        let copy = format!("{snapshot}/{installed}");
        assert!(root.join(&copy).is_file(), "{copy}");
        if k % 2 == 0 {
            fs_err::write(root.join(&copy), format!("edited {k}\n")).unwrap();
            expected.push(format!("{copy} (changed)"));
        } else {
            fs_err::remove_file(root.join(&copy)).unwrap();
            expected.push(format!("{copy} (missing)"));
        }
    }
    expected.sort();
    assert!(expected.len() > 20, "{}", expected.len());
    let report = integrity(root).unwrap();
    assert_eq!(report.status, IntegrityStatus::Drifted, "{report:?}");
    assert_eq!(report.snapshot_differing, expected.len(), "{report:?}");
    let named = aibox_provenance::SNAPSHOT_NAMED;
    assert_eq!(report.snapshot_modified[..named], expected[..named]);
}

/// Installs a processkit-like release v1.0.0 with every skill selected (about 1,700
/// paths: the release's and its snapshot's) into `d`'s project; returns its lock section
/// and the skills.
fn install_every_skill(d: &Dirs) -> (aibox_config::ProcesskitSection, Vec<String>) {
    let v1 = SyntheticRelease::processkit_like("v1.0.0", false);
    let every: Vec<String> = v1
        .files
        .keys()
        .filter_map(|p| aibox_provenance::catalog::skill_of(p))
        .map(|(_, s)| s.to_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let include: Vec<&str> = every.iter().map(String::as_str).collect();
    let setup = Setup {
        include: &include,
        ..Setup::default()
    };
    let section = common::publish(&v1, d.store.path());
    common::install_section(d.project.path(), &section, &setup);
    (section, every)
}

/// Edits, deletes, or replaces by a link or a folder (in turn) every 29th of the
/// `installed` files, those below the folders `skip` aside.
fn disturb_every_29th(root: &Path, installed: &[String], skip: &[&str]) {
    let spread = installed
        .iter()
        .filter(|p| !skip.iter().any(|dir| p.starts_with(&format!("{dir}/"))))
        .step_by(29);
    for (k, path) in spread.enumerate() {
        let at = root.join(path);
        match k % 4 {
            0 => fs_err::write(&at, format!("edited {k}\n")).unwrap(),
            1 => fs_err::remove_file(&at).unwrap(),
            2 => {
                fs_err::remove_file(&at).unwrap();
                std::os::unix::fs::symlink("elsewhere", &at).unwrap();
            }
            _ => {
                fs_err::remove_file(&at).unwrap();
                fs_err::create_dir(&at).unwrap();
            }
        }
    }
}

/// The plan options of a scan of `packages` and `include`, as of `now`.
fn scan_options<'a>(
    packages: &'a [String],
    include: &'a [String],
    now: &'a str,
) -> aibox_provenance::PlanOptions<'a> {
    aibox_provenance::PlanOptions {
        packages,
        include,
        exclude: &[],
        prefer_gateway: true,
        src_path: None,
        now,
        cli_version: "0.1.0",
    }
}

/// The release `section` names, fetched as the lock pins it, its catalog, and the scan
/// of the project at `root` for it.
fn fetch_and_scan(
    root: &Path,
    section: &aibox_config::ProcesskitSection,
    opts: &aibox_provenance::PlanOptions<'_>,
) -> (
    aibox_provenance::source::VerifiedRelease,
    aibox_provenance::catalog::Catalog,
    aibox_provenance::LiveScan,
) {
    let previous = common::read_lock(root);
    let verified = aibox_provenance::source::fetch_release(
        section,
        root,
        previous.as_ref(),
        &mut aibox_provenance::source::FetchOptions::default(),
    )
    .unwrap();
    let catalog = aibox_provenance::catalog::Catalog::from_payload(&verified.payload).unwrap();
    let scan = aibox_provenance::scan(
        root,
        &verified,
        &catalog,
        opts,
        aibox_provenance::Hints::default(),
    )
    .unwrap();
    (verified, catalog, scan)
}
