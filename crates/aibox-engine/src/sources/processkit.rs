//! Plan source: the pinned processkit content release.
//!
//! In context mode `processkit` with a configured source, this fetches and verifies the
//! release (`aibox-provenance`), computes the three-way install plan against the live
//! files, and adds only the files that plan decides to write: safe content updates, the
//! snapshot of a newly installed version, a migration document, and the live marker.
//! The contents are already the merge result, hence [`Ownership::Merged`]. The lock's
//! `[processkit]` section is recorded through the plan builder.

use std::collections::BTreeSet;

use aibox_config::{ContextMode, GatewayMode, Ownership, PlannedFile, ReviewScope};
use aibox_provenance::install::FileWrite;
use aibox_provenance::source::{FetchOptions, fetch_release};
use aibox_provenance::{Cache, Hints, Intent, PlanOptions, StatCache, plan_resume};

use aibox_mcp_registration::{Origin, ServerSpec, Transport};
use camino::{Utf8Path, Utf8PathBuf};

use crate::EngineError;
use crate::plan::{PlanBuilder, PlanContext};
use crate::sources::skill_review::{ReviewContext, SkillOrigin};

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

/// Adds the processkit content files (and its lock section) to the plan.
pub fn contribute(ctx: &PlanContext, plan: &mut PlanBuilder) -> Result<(), EngineError> {
    let config = &ctx.project.config;
    if config.context.mode != ContextMode::Processkit || config.processkit.source.is_none() {
        warn_not_installed(config, plan);
        return Ok(());
    }
    let root = ctx.root().as_std_path();
    let previous = ctx.previous_lock.and_then(|l| l.processkit.as_ref());
    let mut report = |p: aibox_provenance::Progress| {
        if let Some(sink) = &ctx.options.download_progress {
            sink(p.received, p.total);
        }
    };
    let mut fetch = FetchOptions {
        cache: match &ctx.options.cache_dir {
            Some(dir) => Some(Cache::new(dir.as_std_path())),
            None => Cache::default_location(),
        },
        progress: Some(&mut report),
        ..FetchOptions::default()
    };
    let release =
        fetch_release(&config.processkit, root, previous, &mut fetch).map_err(EngineError::from)?;
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
        plan_resume(root, &release, previous, &opts, hints).map_err(EngineError::from)?;
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
    let servers = registered_servers(ctx, &release, &install)?;
    plan.set_processkit_servers(servers);
    plan.lock_mut().processkit = Some(install.lock);
    Ok(())
}

/// The release's MCP servers (and those of hand-added skills) as registration specs,
/// after the skill review.
///
/// Trust comes from provenance, never from a skill's own metadata (`core: true` decides
/// only that a skill is always installed). Skills shipped in the verified, pinned release
/// are first-party: their review runs in `aibox skill review` / `skill list` / `doctor`,
/// and does not block `apply` unless `[processkit] review = "all"`. Third-party skills
/// are gated: those of an unverified release (`allow_unverified`), and skill folders under
/// `context/skills/` that the release did not ship but that declare an MCP server. A
/// failing gated skill stops the apply until `aibox.toml` records a
/// `[[skills.review_exceptions]]` consent. Release skills are reviewed from the verified
/// release's copy (staged in a temporary folder), before they are installed or registered.
fn registered_servers(
    ctx: &PlanContext,
    release: &aibox_provenance::VerifiedRelease,
    install: &aibox_provenance::InstallPlan,
) -> Result<Vec<ServerSpec>, EngineError> {
    let catalog = aibox_provenance::catalog::Catalog::from_payload(&release.payload)
        .map_err(EngineError::from)?;
    let first_party = release.verification != aibox_provenance::Verification::Unverified;
    let gate_release = !first_party || ctx.project.config.processkit.review == ReviewScope::All;
    let review_ctx = ReviewContext::verified_release(
        release.source.clone(),
        release.version.clone(),
        release.digest.to_string(),
    );
    let review_ctx = if first_party {
        review_ctx
    } else {
        ReviewContext {
            origin: SkillOrigin::Release {
                source: release.source.clone(),
                version: release.version.clone(),
                sha256: None,
                verified: false,
            },
            ..review_ctx
        }
    };
    let staging = tempfile::tempdir()
        .map_err(|e| EngineError::io("create a review staging folder in", "$TMPDIR", e))?;
    let mut to_review = Vec::new();
    if gate_release {
        // Every selected skill that ships an MCP server is reviewed, whether it is
        // registered on its own or served through the gateway (which exposes its tools
        // too). Core skills are no exception: `core: true` is not a trust decision.
        let selected = |skill: &aibox_provenance::catalog::Skill| {
            let prefix = format!("{}/", skill.dir);
            install
                .decisions
                .iter()
                .any(|d| d.path.starts_with(&prefix))
                || install.servers.iter().any(|s| s.skill == skill.name)
        };
        for skill in catalog.skills.values().filter(|s| selected(s)) {
            let prefix = format!("{}/", skill.dir);
            let mcp = format!("{prefix}mcp/");
            if !release.payload.files.keys().any(|p| p.starts_with(&mcp)) {
                continue;
            }
            let files = release
                .payload
                .files
                .iter()
                .filter_map(|(p, f)| p.strip_prefix(prefix.as_str()).map(|rel| (rel, f)));
            let dest = staging.path().join(&skill.name);
            aibox_provenance::extract::write_tree(files, &dest).map_err(EngineError::from)?;
            let dir = Utf8PathBuf::from_path_buf(dest).map_err(|p| {
                EngineError::io(
                    "stage",
                    p.display().to_string(),
                    std::io::Error::other("non-UTF-8 path"),
                )
            })?;
            to_review.push((skill.name.clone(), dir, review_ctx.clone()));
        }
    }
    // Skill folders the release did not ship: third-party whatever they claim.
    let shipped: BTreeSet<&str> = catalog.skills.values().map(|s| s.dir.as_str()).collect();
    let foreign = crate::skills::hand_added(ctx.root(), &shipped);
    for skill in &foreign {
        to_review.push((
            skill.name.clone(),
            ctx.root().join(&skill.dir),
            ReviewContext {
                origin: SkillOrigin::LocalPath {
                    path: skill.dir.clone(),
                },
                ..ReviewContext::default()
            },
        ));
    }
    // Refuses (stopping the apply) when a gated skill fails without a recorded consent;
    // past this point every gated skill passed or was consented to.
    crate::sources::skill_review::gate(ctx.project, &to_review)?;
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
    for skill in &foreign {
        for server in hand_added_servers(ctx.root(), skill)? {
            if !out.iter().any(|s| s.name == server.name) {
                out.push(spec(&server));
            }
        }
    }
    Ok(out)
}

/// The servers a hand-added skill declares in its `mcp/mcp-config.json`, with the same
/// checks as the release's (name prefix, script inside the skill folder).
fn hand_added_servers(
    root: &Utf8Path,
    skill: &crate::skills::HandAdded,
) -> Result<Vec<aibox_provenance::ProcesskitServer>, EngineError> {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for rel in files_under(root, &skill.dir) {
        if rel.ends_with("/mcp/mcp-config.json") || rel.ends_with("/server.py") {
            let data = fs_err::read(root.join(&rel))
                .map_err(|e| EngineError::io("read", root.join(&rel), e))?;
            files.push((rel, data));
        }
    }
    aibox_provenance::servers::servers(files.iter().map(|(p, d)| (p.as_str(), d.as_slice())), false)
        .map_err(EngineError::from)
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
fn files_under(root: &Utf8Path, dir: &str) -> Vec<String> {
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
        let plan = crate::plan(root, &crate::PlanOptions::default()).unwrap();
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
