//! Plan source: the pinned processkit content release.
//!
//! In context mode `processkit` with a configured source, this takes the release that
//! [`crate::resolve()`] fetched and verified (`aibox-provenance`) and the live state it
//! scanned, computes the three-way install plan purely (no file is read here), and adds
//! only the files that plan decides to write: safe content updates, the snapshot of a
//! newly installed version, a migration document, and the live marker. Release files
//! are planned as verified copies from the unpacked release (the writer streams them),
//! never as bytes in memory. The contents are already the merge result, hence
//! [`Ownership::Merged`]. The lock's `[processkit]` section is recorded through the
//! plan builder.

use std::collections::BTreeSet;

use aibox_config::{ContextMode, Ownership, PlannedFile};
use aibox_provenance::install::{FileWrite, WriteData};
use aibox_provenance::plan_scanned;

use aibox_mcp_registration::{Origin, ServerSpec, Transport};

use crate::builder::{PlanBuilder, PlanContext};
use crate::error::EngineError;
use crate::resolve::{ProcesskitState, ResolvedRelease};

/// The planned file of a write at `path`: a verified copy, or bytes aibox made.
fn planned(w: FileWrite) -> PlannedFile {
    let mode = if w.executable { 0o755 } else { 0o644 };
    let mut f = match w.data {
        WriteData::Bytes(bytes) => PlannedFile::new(w.path, bytes, Ownership::Merged),
        WriteData::Copy(from) => PlannedFile::copy(w.path, from, Ownership::Merged),
    };
    f.mode = Some(mode);
    f
}

/// Says why nothing is installed when the configuration asks for processkit content.
fn warn_not_installed(config: &aibox_config::AiboxToml, plan: &mut PlanBuilder) {
    // Nothing is installed: say so when the configuration asks for content.
    if config.context.mode == ContextMode::Processkit {
        plan.warn(
            "processkit: context mode is `processkit` but neither [processkit] `version` nor \
             `source` is set, so no processkit content is installed; set `version` (a \
             release of the official repository; `source` names another), or set [context] \
             mode = \"harness-only\""
                .to_owned(),
        );
    } else if !config.skills.include.is_empty() || !config.skills.exclude.is_empty() {
        plan.warn(
            "processkit: [skills] include/exclude have no effect in context mode \
             `harness-only` (no processkit content is installed)"
                .to_owned(),
        );
    }
}

/// A user-owned file that already exists is kept, never overwritten: say so for the one
/// whose content matters to every agent, on the run that meets a release version of it
/// that differs (a conflict). The marker then records that version as the base, so a
/// later run of the same release is quiet: the user has been told, here or in the
/// upgrade's migration document.
fn warn_kept_agents_md(
    install: &aibox_provenance::install::InstallPlan,
    version: &str,
    plan: &mut PlanBuilder,
) {
    use aibox_provenance::install::{Action, Class};
    if install.decisions.iter().any(|d| {
        &*d.path == "AGENTS.md"
            && d.user_owned
            && d.action == Action::Keep
            && d.class == Class::Conflict
    }) {
        plan.warn(format!(
            "processkit: AGENTS.md already exists, so processkit {version}'s AGENTS.md was not \
             installed; merge its guidance by hand if you want it"
        ));
    }
}

/// Plans the removal of `removals`, and of the skill folders they leave empty (QA: a
/// disabled skill left its folder skeleton, a skill folder without a `SKILL.md`); a
/// folder still holding a file stays. And of `undone_migration`, the document (and its
/// parked copies) of an unfinished upgrade the plan undoes.
fn plan_removals(
    removals: &[String],
    undone_migration: Option<&str>,
    plan: &mut PlanBuilder,
) -> Result<(), EngineError> {
    // The migration of an unfinished upgrade this plan undoes: no upgrade took place.
    if let Some(id) = undone_migration {
        plan.remove(aibox_provenance::migration::document_path(id))?;
        plan.remove_tree(aibox_provenance::migration::parked_dir(id))?;
    }
    let mut emptied: BTreeSet<String> = BTreeSet::new();
    for path in removals {
        plan.remove(path.as_str())?;
        if let Some((category, skill)) = aibox_provenance::catalog::skill_of(path) {
            emptied.insert(format!("context/skills/{category}/{skill}"));
        }
    }
    for dir in emptied {
        plan.prune_dir(dir)?;
    }
    Ok(())
}

/// Says which release files the apply does not install because another file was already
/// at their path, which it keeps (QA: a first install kept them without a word, a server
/// script among them).
fn warn_kept_existing(
    install: &aibox_provenance::install::InstallPlan,
    version: &str,
    plan: &mut PlanBuilder,
) {
    use aibox_provenance::install::{Action, Class};
    let kept: Vec<&str> = install
        .decisions
        .iter()
        .filter(|d| {
            d.class == Class::Conflict
                && d.action == Action::Keep
                && !d.user_owned
                && d.digests().base.is_none()
        })
        .map(|d| &*d.path)
        .collect();
    let Some(first) = kept.first() else {
        return;
    };
    let shown = match kept.len() {
        1 => format!("`{first}`"),
        n => format!("`{first}` and {} more", n - 1),
    };
    plan.warn(format!(
        "processkit: {} file(s) of processkit {version} were not installed because another \
         file was already there, which is kept: {shown}; a skill holding one is reviewed as \
         third-party. To take the release's file, remove yours and run `aibox apply` again",
        kept.len()
    ));
}

/// Says which release skills were changed by hand, and returns the servers (name,
/// script) whose script was deleted: a file deleted by hand stays deleted (aibox never
/// undoes a local change), and a server whose script is gone could not start, so it is
/// registered nowhere. An edited skill with a server is third-party (the review gate of
/// `resolve` judged it as this apply leaves it).
fn warn_changed_skills(
    resolved: &ResolvedRelease,
    install: &aibox_provenance::InstallPlan,
    plan: &mut PlanBuilder,
) -> Vec<(String, String)> {
    let release = &resolved.release;
    let deleted: Vec<(String, String)> = install
        .servers
        .iter()
        .filter_map(|s| Some((s.name.clone(), s.script()?.to_owned())))
        .filter(|(_, script)| install.classifies(script) && install.live_after(script).is_none())
        .collect();
    for (server, script) in &deleted {
        let dir = script.split("/mcp/").next().unwrap_or(script);
        let name = dir.rsplit('/').next().unwrap_or(dir);
        // A core skill is always installed: `skill disable` cannot drop it.
        let drop = if resolved.catalog.skills.get(name).is_some_and(|s| s.core) {
            format!("`{name}` is a core skill, so it cannot be disabled")
        } else {
            format!("or run `aibox skill disable {name}` to drop it for good")
        };
        plan.warn(format!(
            "processkit: `{script}` was deleted by hand, so `{server}` is not registered in any \
             harness (aibox keeps a deletion); to restore the skill copy \
             `{snap}/{version}/{dir}/` back to `{dir}/`; {drop}",
            snap = aibox_provenance::record::SNAPSHOT_DIR,
            version = release.version,
        ));
    }
    for e in &resolved.edited {
        plan.warn(format!(
            "processkit: skill `{}` differs from the verified release ({}): it is third-party \
             now, reviewed as this apply leaves it, and its MCP server is registered only while it \
             passes the review or a current [[skills.review_exceptions]] consent covers it",
            e.name, e.changes
        ));
    }
    deleted
}

/// Adds the processkit content files (and its lock section) to the plan, from the
/// release [`crate::resolve()`] fetched and verified.
pub fn contribute(ctx: &PlanContext, plan: &mut PlanBuilder) -> Result<(), EngineError> {
    let config = &ctx.project.config;
    let resolved = match ctx.processkit {
        ProcesskitState::NotConfigured => {
            warn_not_installed(config, plan);
            return Ok(());
        }
        ProcesskitState::NotResolved { reason } => {
            return Err(EngineError::NotResolved {
                reason: reason.clone(),
            });
        }
        ProcesskitState::Resolved(r) => r,
    };
    let release = &resolved.release;
    let previous = ctx.previous_lock.and_then(|l| l.processkit.as_ref());
    let opts = crate::resolve::install_options(config, &resolved.now, ctx.aibox_version);
    // Pure: the live state was scanned by `resolve` (including the intent record of an
    // interrupted apply, which makes this the interrupted run's own plan).
    let mut install = plan_scanned(release, &resolved.catalog, previous, &opts, &resolved.scan)
        .map_err(EngineError::from)?;
    let deleted = warn_changed_skills(resolved, &install, plan);
    // The record is written line by line from its two tables when the apply starts.
    if let Some(intent) = install.intent.take() {
        plan.set_processkit_intent(intent);
    }
    for warning in &install.warnings {
        plan.warn(format!("processkit: {warning}"));
    }
    // Release content of a verified release, its snapshot, the parked upstream copies and
    // aibox's own records of them (migration documents, marker) are not scanned for
    // secrets: the digest covers the content, and the records only list its paths.
    let verified = release.verification != aibox_provenance::Verification::Unverified;
    let add = |plan: &mut PlanBuilder, w: FileWrite, content: bool| {
        if verified || !content {
            plan.add_verified(planned(w))
        } else {
            plan.add(planned(w))
        }
    };
    warn_kept_agents_md(&install, &release.version, plan);
    warn_kept_existing(&install, &release.version, plan);
    plan.set_processkit_upgrade(crate::migrate::UpgradeSummary::of(&install));
    // Every decision has been read (warnings, upgrade summary): taken apart into the
    // stat cache's digests when it is rewritten (the planned marker, shared, and the
    // files it does not tell), and freed before the planned files take their place, so
    // the two never peak together.
    if install.stat_cache_stale {
        plan.set_processkit_stat_cache(install.take_live_after());
    }
    install.decisions = Vec::new();
    // Release files are planned as copies from the unpacked release: no payload bytes
    // are held in memory. Room for the writes first, and for the rest (snapshot,
    // migration, marker) once the writes' own list is freed: reserved at once, the whole
    // list and the writes were the peak of a large first install (the list grows in
    // place, the allocator mapping buffers this large on their own).
    plan.reserve(install.writes.len());
    for w in std::mem::take(&mut install.writes) {
        add(plan, w, true)?;
    }
    plan.reserve(
        install
            .snapshot
            .as_ref()
            .map_or(0, |_| install.payload.files.len())
            + install.migration.as_ref().map_or(0, Vec::len)
            + 1,
    );
    if let Some(snapshot) = install.snapshot.take() {
        if let Some(from) = &snapshot.move_from {
            plan.move_first(from.as_str(), snapshot.dir.as_str())?;
        }
        for extra in &snapshot.extras {
            plan.remove(extra.as_str())?;
        }
        if !snapshot.extras.is_empty() {
            plan.prune_dir(snapshot.dir.as_str())?;
        }
        for w in snapshot.writes(&install.payload) {
            add(plan, w.map_err(EngineError::from)?, true)?;
        }
    }
    for w in install.migration.take().into_iter().flatten() {
        // Its document is aibox's record, the rest parked release copies.
        let document = plan_stale_parked_copies(&w, plan)?;
        add(plan, w, !document)?;
    }
    plan.write_last(aibox_provenance::record::MARKER_PATH);
    // Written from its tables (a line per installed file), never held as text.
    plan.add_rendered(
        aibox_provenance::record::MARKER_PATH,
        install.marker.clone(),
    )?;
    // Files the three-way plan found safe to delete (unchanged since install and gone
    // upstream or deselected), and snapshots of other versions (regenerable).
    plan_removals(&install.removals, install.undone_migration.as_deref(), plan)?;
    for dir in &resolved.scan.stale_snapshots {
        plan.remove_tree(dir.as_str())?;
    }
    let servers = registered_servers(resolved, &install, &deleted)?;
    let gone: Vec<&str> = deleted.iter().map(|(server, _)| server.as_str()).collect();
    for warning in resolved.mcp_envs.warnings_except(&gone) {
        plan.warn(warning);
    }
    plan.set_processkit_servers(servers);
    // Hooks run the scripts of `skill-gate` (core): wired only while it is installed.
    if install.skills.contains("skill-gate") {
        plan.set_processkit_wiring(resolved.wiring.clone());
    }
    plan.lock_mut().processkit = Some(install.lock);
    let mcp = &resolved.mcp_envs.lock;
    if !mcp.environments.is_empty() {
        // Added to, not replaced: the team's `uvx` servers' environments are there too.
        plan.lock_mut()
            .mcp
            .get_or_insert_default()
            .add_environments(mcp);
    }
    Ok(())
}

/// Whether `w` is the migration document; for it, the removal of its parked copies'
/// folder, whose planned copies the removal leaves. A document brought up to date (the
/// same upgrade made again while it is pending) then drops the copy of a conflict gone
/// since.
fn plan_stale_parked_copies(w: &FileWrite, plan: &mut PlanBuilder) -> Result<bool, EngineError> {
    let Some(id) = aibox_provenance::migration::document_id(w.path.as_str()) else {
        return Ok(false);
    };
    plan.remove_tree(aibox_provenance::migration::parked_dir(id))?;
    Ok(true)
}

/// The release's MCP servers (and those of hand-added skills) as registration specs,
/// once the skill review gate (run by [`crate::resolve()`]) let them through.
fn registered_servers(
    resolved: &ResolvedRelease,
    install: &aibox_provenance::InstallPlan,
    deleted: &[(String, String)],
) -> Result<Vec<ServerSpec>, EngineError> {
    // Refuses (stopping the apply) when a gated skill fails without a recorded consent;
    // past this point every gated skill passed or was consented to.
    resolved.gate()?;
    let envs = &resolved.mcp_envs;
    let spec = |s: &aibox_provenance::ProcesskitServer| {
        let (command, args) = locked_command(s, envs.server_env.get(&s.name));
        ServerSpec {
            name: s.name.clone(),
            origin: Origin::Processkit,
            transport: Transport::Stdio {
                command,
                args,
                env: s.env.clone(),
            },
            allowed_tools: Vec::new(),
            startup_timeout_sec: None,
        }
    };
    let mut out: Vec<ServerSpec> = Vec::new();
    let hand_added = resolved.hand_added.iter().flat_map(|(_, s)| s.iter());
    for server in install.servers.iter().chain(hand_added) {
        // A server whose dependencies cannot be installed could not start: not
        // registered (and so not approved); the warning says why.
        if envs.broken.contains_key(&server.name)
            || deleted.iter().any(|(name, _)| name == &server.name)
            || out.iter().any(|s| s.name == server.name)
        {
            continue;
        }
        out.push(spec(server));
    }
    Ok(out)
}

/// The command that starts `server`: with a locked environment, that environment's
/// interpreter on the script (and the arguments after it), so it runs exactly what the
/// lock pins, with no resolver and no network; otherwise the command as shipped.
fn locked_command(
    server: &aibox_provenance::ProcesskitServer,
    env: Option<&String>,
) -> (String, Vec<String>) {
    let shipped = || (server.command.clone(), server.args.clone());
    let (Some(env), Some(script)) = (env, server.script()) else {
        return shipped();
    };
    let Some(at) = server.args.iter().position(|a| a == script) else {
        return shipped();
    };
    (
        aibox_provenance::pydeps::env_python(env),
        server.args[at..].to_vec(),
    )
}

#[cfg(test)]
mod tests {
    use camino::Utf8Path;

    const PACK_SHA256: &str = "85e26571936b8e418b23fb0ded82e31c63c0993fd567a1e6fa0914473d014af0";

    #[test]
    fn plans_the_example_pack_and_records_the_lock_section() {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8Path::from_path(dir.path()).unwrap();
        let pack = aibox_test_support::workspace_root().join("examples/processkit-pack");
        let toml = format!(
            "[container]\nname = \"t\"\n\n[context]\nmode = \"processkit\"\npackages = [\"starter\"]\n\n\
             [processkit]\nsource = \"{pack}\"\nversion = \"v0.1.0\"\nsha256 = \"{PACK_SHA256}\"\n\
             trusted_sources = [\"{pack}\"]\n"
        );
        fs_err::write(root.join("aibox.toml"), toml).unwrap();
        let plan =
            crate::plan(&crate::resolve(root, &crate::resolve::PlanOptions::default()).unwrap())
                .unwrap();
        let paths: Vec<&str> = plan.files.iter().map(|f| f.path.as_str()).collect();
        assert!(
            paths.contains(&"context/skills/processkit/skill-finder/SKILL.md"),
            "{paths:?}"
        );
        assert!(paths.contains(&"context/.processkit-provenance.toml"));
        assert!(paths.contains(&"context/templates/processkit/v0.1.0/PROVENANCE.toml"));
        assert!(
            !paths
                .iter()
                .any(|p| p.starts_with("context/skills/engineering/"))
        );
        let lock = plan.lock.processkit.as_ref().unwrap();
        assert_eq!(lock.version, "v0.1.0");
        assert_eq!(lock.release_asset_sha256.unwrap().to_hex(), PACK_SHA256);
        assert!(
            plan.lock_text.contains("[processkit]"),
            "{}",
            plan.lock_text
        );

        // Apply, then a second apply is a no-op; a local edit survives and the
        // integrity check names it.
        let opts = crate::apply::ApplyOptions::default();
        assert!(crate::apply(root, &opts).unwrap().changed());
        let report = aibox_provenance::integrity(root.as_std_path()).unwrap();
        assert_eq!(
            report.status,
            aibox_provenance::IntegrityStatus::Healthy,
            "{report:?}"
        );
        assert!(
            !crate::apply(root, &opts).unwrap().changed(),
            "second apply must be a no-op"
        );
        let skill = root.join("context/skills/processkit/decision-record/SKILL.md");
        fs_err::write(&skill, "my edit\n").unwrap();
        crate::apply(root, &opts).unwrap();
        assert_eq!(fs_err::read_to_string(&skill).unwrap(), "my edit\n");
        let report = aibox_provenance::integrity(root.as_std_path()).unwrap();
        assert_eq!(
            report.modified,
            ["context/skills/processkit/decision-record/SKILL.md"]
        );
    }
}
