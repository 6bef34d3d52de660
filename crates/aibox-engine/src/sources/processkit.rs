//! Plan source: the pinned processkit content release.
//!
//! In context mode `processkit` with a configured source, this takes the release that
//! [`crate::resolve`] fetched and verified (`aibox-provenance`), computes the three-way install plan against the live
//! files, and adds only the files that plan decides to write: safe content updates, the
//! snapshot of a newly installed version, a migration document, and the live marker.
//! The contents are already the merge result, hence [`Ownership::Merged`]. The lock's
//! `[processkit]` section is recorded through the plan builder.

use aibox_config::{ContextMode, GatewayMode, Ownership, PlannedFile};
use aibox_provenance::install::FileWrite;
use aibox_provenance::{Hints, Intent, PlanOptions, StatCache, plan_resume};

use aibox_mcp_registration::{Origin, ServerSpec, Transport};
use camino::{Utf8Path, Utf8PathBuf};

use crate::EngineError;
use crate::plan::{PlanBuilder, PlanContext};
use crate::resolve::{ProcesskitState, ResolvedRelease};

/// The planned file of a write; moves the contents (no copy of the payload).
fn planned(w: FileWrite) -> PlannedFile {
    let mode = if w.file.executable { 0o755 } else { 0o644 };
    let mut f = PlannedFile::new(w.path, w.file.data, Ownership::Merged);
    f.mode = Some(mode);
    f
}

/// Says why nothing is installed when the configuration asks for processkit content.
fn warn_not_installed(config: &aibox_config::AiboxToml, plan: &mut PlanBuilder) {
    // Nothing is installed: say so when the configuration asks for content.
    if config.context.mode == ContextMode::Processkit {
        plan.warn(
            "processkit: context mode is `processkit` but [processkit] source is not set, so \
             no processkit content is installed; set `source` and `version`, or set \
             [context] mode = \"harness-only\""
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
/// whose content matters to every agent.
fn warn_kept_agents_md(
    install: &aibox_provenance::install::InstallPlan,
    version: &str,
    plan: &mut PlanBuilder,
) {
    if install.decisions.iter().any(|d| {
        d.path == "AGENTS.md" && d.user_owned && d.action == aibox_provenance::install::Action::Keep
    }) {
        plan.warn(format!(
            "processkit: AGENTS.md already exists, so processkit {version}'s AGENTS.md was not \
             installed; merge its guidance by hand if you want it"
        ));
    }
}

/// Adds the processkit content files (and its lock section) to the plan, from the
/// release [`crate::resolve`] fetched and verified.
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
    let root = ctx.root().as_std_path();
    let previous = ctx.previous_lock.and_then(|l| l.processkit.as_ref());
    let now = aibox_provenance::time::now_rfc3339();
    let opts = PlanOptions {
        packages: &config.context.packages,
        include: &config.skills.include,
        exclude: &config.skills.exclude,
        prefer_gateway: config.ai.mcp.gateway.mode == GatewayMode::Auto,
        src_path: config.processkit.src_path.as_deref(),
        now: &now,
        cli_version: ctx.aibox_version,
    };
    // The record of an interrupted apply, if any: resuming it completes exactly what
    // that run intended (see `aibox_provenance::Intent`).
    let interrupted = ctx
        .read(Utf8Path::new(crate::apply::PENDING_PROCESSKIT))?
        .and_then(|b| Intent::parse(&String::from_utf8_lossy(&b)));
    let stat_cache = read_stat_cache(ctx)?;
    let hints = Hints {
        interrupted: interrupted.as_ref(),
        stat_cache: stat_cache.as_ref(),
    };
    let mut install =
        plan_resume(root, release, previous, &opts, hints).map_err(EngineError::from)?;
    if install.stat_cache_stale {
        plan.set_processkit_stat_cache(std::mem::take(&mut install.live_after));
    }
    if let Some(intent) = &install.intent {
        plan.set_processkit_intent(intent.render());
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
            plan.mark_verified_content(w.path.as_str());
        }
        plan.add(planned(w))
    };
    warn_kept_agents_md(&install, &release.version, plan);
    // Contents are moved into the plan, never copied: memory stays one payload plus
    // what is written.
    for w in std::mem::take(&mut install.writes) {
        add(plan, w, true)?;
    }
    if let Some(snapshot) = install.snapshot.take() {
        for (rel, file) in snapshot.files {
            let w = FileWrite {
                path: format!("{}/{rel}", snapshot.dir),
                file,
            };
            add(plan, w, true)?;
        }
    }
    for w in install.migration.take().into_iter().flatten() {
        let content = w.path.contains(".upstream/");
        add(plan, w, content)?;
    }
    plan.mark_verified_content(aibox_provenance::record::MARKER_PATH);
    plan.write_last(aibox_provenance::record::MARKER_PATH);
    plan.add(PlannedFile::new(
        aibox_provenance::record::MARKER_PATH,
        install.marker.clone().into_bytes(),
        Ownership::Merged,
    ))?;
    // Files the three-way plan found safe to delete (unchanged since install and gone
    // upstream or deselected), and snapshots of other versions (regenerable).
    for path in &install.removals {
        plan.remove(path.as_str())?;
    }
    for dir in &install.stale_snapshots {
        for file in files_under(ctx.root(), dir) {
            plan.remove(file)?;
        }
        plan.prune_dir(dir.as_str())?;
    }
    let servers = registered_servers(resolved, &install)?;
    plan.set_processkit_servers(servers);
    plan.lock_mut().processkit = Some(install.lock);
    Ok(())
}

/// The release's MCP servers (and those of hand-added skills) as registration specs,
/// once the skill review gate (run by [`crate::resolve`]) let them through.
fn registered_servers(
    resolved: &ResolvedRelease,
    install: &aibox_provenance::InstallPlan,
) -> Result<Vec<ServerSpec>, EngineError> {
    // Refuses (stopping the apply) when a gated skill fails without a recorded consent;
    // past this point every gated skill passed or was consented to.
    resolved.gate()?;
    let spec = |s: &aibox_provenance::ProcesskitServer| ServerSpec {
        name: s.name.clone(),
        origin: Origin::Processkit,
        transport: Transport::Stdio {
            command: s.command.clone(),
            args: s.args.clone(),
            env: s.env.clone(),
        },
        allowed_tools: Vec::new(),
        startup_timeout_sec: None,
    };
    let mut out: Vec<ServerSpec> = install.servers.iter().map(spec).collect();
    for (_, servers) in &resolved.hand_added {
        for server in servers {
            if !out.iter().any(|s| s.name == server.name) {
                out.push(spec(server));
            }
        }
    }
    Ok(out)
}

/// The stat cache of the last apply, if any (a damaged one only costs re-hashing).
fn read_stat_cache(ctx: &PlanContext) -> Result<Option<StatCache>, EngineError> {
    let rel = Utf8Path::new(crate::apply::STAT_CACHE);
    let Some(bytes) = ctx.read(rel)? else {
        return Ok(None);
    };
    let Ok(meta) = fs_err::symlink_metadata(ctx.root().join(rel)) else {
        return Ok(None);
    };
    Ok(Some(StatCache::parse(
        &String::from_utf8_lossy(&bytes),
        &meta,
    )))
}

/// Every regular file below `dir` (root-relative), for removing a stale snapshot.
pub(crate) fn files_under(root: &Utf8Path, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![Utf8PathBuf::from(dir)];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = fs_err::read_dir(root.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = rel.join(&name);
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(child),
                Ok(t) if t.is_file() => out.push(child.into_string()),
                _ => {}
            }
        }
    }
    out.sort();
    out
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
             [processkit]\nsource = \"{pack}\"\nversion = \"v0.1.0\"\nsha256 = \"{PACK_SHA256}\"\n"
        );
        fs_err::write(root.join("aibox.toml"), toml).unwrap();
        let plan =
            crate::plan(&crate::resolve(root, &crate::PlanOptions::default()).unwrap()).unwrap();
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
        let opts = crate::ApplyOptions::default();
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
