//! Plan source: the pinned processkit content release.
//!
//! In context mode `processkit` with a configured source, this fetches and verifies the
//! release (`aibox-provenance`), computes the three-way install plan against the live
//! files, and adds only the files that plan decides to write: safe content updates, the
//! snapshot of a newly installed version, a migration document, and the live marker.
//! The contents are already the merge result, hence [`Ownership::Merged`]. The lock's
//! `[processkit]` section is recorded through the plan builder.

use aibox_config::{ContextMode, GatewayMode, Ownership, PlannedFile};
use aibox_provenance::install::FileWrite;
use aibox_provenance::source::{FetchOptions, fetch_release};
use aibox_provenance::{Cache, PlanOptions, plan_install};

use crate::EngineError;
use crate::plan::{PlanBuilder, PlanContext};

fn planned(w: &FileWrite) -> PlannedFile {
    let mut f = PlannedFile::new(w.path.as_str(), w.file.data.clone(), Ownership::Merged);
    f.mode = Some(if w.file.executable { 0o755 } else { 0o644 });
    f
}

/// Adds the processkit content files (and its lock section) to the plan.
pub fn contribute(ctx: &PlanContext, plan: &mut PlanBuilder) -> Result<(), EngineError> {
    let config = &ctx.project.config;
    if config.context.mode != ContextMode::Processkit || config.processkit.source.is_none() {
        return Ok(());
    }
    let root = ctx.root().as_std_path();
    let previous = ctx.previous_lock.and_then(|l| l.processkit.as_ref());
    let mut fetch = FetchOptions {
        cache: Cache::default_location(),
        ..FetchOptions::default()
    };
    let release = fetch_release(&config.processkit, root, previous, &mut fetch)
        .map_err(EngineError::source)?;
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
    let install = plan_install(root, &release, previous, &opts).map_err(EngineError::source)?;
    for w in &install.writes {
        plan.add(planned(w))?;
    }
    if let Some(snapshot) = &install.snapshot {
        for (rel, file) in &snapshot.files {
            let w = FileWrite {
                path: format!("{}/{rel}", snapshot.dir),
                file: file.clone(),
            };
            plan.add(planned(&w))?;
        }
    }
    for w in install.migration.iter().flatten() {
        plan.add(planned(w))?;
    }
    plan.add(PlannedFile::new(
        aibox_provenance::record::MARKER_PATH,
        install.marker.clone().into_bytes(),
        Ownership::Merged,
    ))?;
    plan.lock_mut().processkit = Some(install.lock);
    Ok(())
}
