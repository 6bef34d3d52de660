//! The plan: every file aibox would write, with its owner and new contents.
//!
//! A plan is assembled by independent sources (see [`crate::sources`]), each reading the
//! project through a [`PlanContext`] and adding files to a [`PlanBuilder`]. Planning does
//! no I/O: the project's current files come from the snapshot [`crate::resolve()`] took
//! ([`crate::snapshot::Snapshot`]), so the same resolved value always gives the same
//! plan, whatever happened on disk since. Nothing is written until [`crate::apply`] hands
//! the plan to the writer (which reads each target again under the project lock).

use aibox_config::PlannedFile;
use aibox_provenance::lock::{Lock, sha256_hex};
use camino::Utf8Path;

use crate::builder::{Plan, PlanBuilder, PlanContext};
use crate::error::EngineError;
use crate::resolve::{GatedCopies, ProcesskitState, Resolved};
use crate::snapshot::Snapshot;

/// A planned file as the policy gate scans it: a copy of an unverified release's file
/// (the only copies the gate sees) takes the bytes [`crate::resolve()`] read for it, so
/// planning reads no release file.
fn gated_contents(
    f: &PlannedFile,
    copies: Option<&GatedCopies>,
) -> Result<PlannedFile, EngineError> {
    let mut f = f.clone();
    if let Some(from) = f.copy_from.take() {
        match copies.and_then(|c| c.get(&from)) {
            Some(Ok(bytes)) => f.contents = Box::from(bytes),
            Some(Err(reason)) => {
                return Err(crate::writer::WriteError::SourceChanged {
                    path: f.path.clone().into(),
                    from: from.path().display().to_string(),
                    reason: reason.to_owned(),
                }
                .into());
            }
            None => {
                return Err(EngineError::NotCaptured {
                    path: f.path.into(),
                });
            }
        }
    }
    Ok(f)
}

/// Builds the plan of a resolved project. Pure: every download, temporary file and read
/// of the project's files happened in [`crate::resolve()`]; the same resolved value gives
/// the same plan even after the files on disk changed.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let root = camino::Utf8Path::from_path(dir.path()).unwrap();
/// # fs_err::write(root.join("aibox.toml"), "[container]\nname = \"demo\"\n").unwrap();
/// let resolved = aibox_engine::resolve(root, &aibox_engine::PlanOptions::default())?;
/// let plan = aibox_engine::plan(&resolved)?;
/// assert!(plan.files.iter().any(|f| f.path == ".devcontainer/Dockerfile"));
/// # Ok::<(), aibox_engine::EngineError>(())
/// ```
///
/// # Errors
/// A refusal of the policy or skill review gates, a failing generator, an unusable extra
/// CA file; [`EngineError::NotCaptured`] (internal) if a source asks for a file resolve
/// did not read.
pub fn plan(resolved: &Resolved) -> Result<Plan, EngineError> {
    PLANS.with(|n| n.set(n.get() + 1));
    let files = &resolved.files;
    let project = &resolved.project;
    let options = &resolved.options;
    let previous_lock = resolved.previous_lock.as_ref();
    // Policy: the seccomp posture decides the Compose security options (and may add the
    // generated profile); options the user's override already sets are not repeated.
    let policy_err = EngineError::from;
    let security = resolved.security.check().map_err(policy_err)?;
    let override_text = files
        .get(Utf8Path::new(aibox_config::layout::COMPOSE_OVERRIDE))?
        .map(|b| String::from_utf8_lossy(b).into_owned());
    let ctx = PlanContext {
        project,
        previous_lock,
        aibox_version: &options.aibox_version,
        security_opt: aibox_policy::agent_security_opt(
            &security.security_opt,
            override_text.as_deref(),
        ),
        options,
        processkit: &resolved.processkit,
        mcp_npm: &resolved.mcp_npm,
        mcp_uvx: &resolved.mcp_uvx,
        files,
        root: resolved.root(),
    };
    let mut builder = PlanBuilder::default();
    for warning in &security.warnings {
        builder.warn(warning.clone());
    }
    for warning in crate::config_check::unapplied_settings(&project.config, &project.local) {
        builder.warn(warning);
    }
    builder.extend(security.files.iter().cloned())?;
    crate::sources::contribute_all(&ctx, &mut builder)?;
    retire_generated(files, previous_lock, &mut builder)?;
    // Policy gate over what would be written, the user's override and the configured
    // volumes, plus the secret scan of committed files: a refusal leaves the project as is.
    // Verified release content is not what users write; the gate skips it.
    let copies = match &resolved.processkit {
        ProcesskitState::Resolved(r) => Some(&r.gated_copies),
        _ => None,
    };
    let gated: Vec<PlannedFile> = builder
        .unverified()
        .map(|f| gated_contents(f, copies))
        .collect::<Result<_, _>>()?;
    let mut plan = builder.finish(&options.aibox_version)?;
    let sources = files.compose_sources();
    let judged = aibox_policy::check_plan(
        &project.config,
        &project.local,
        &gated,
        override_text.as_deref(),
        &sources,
    );
    // A judgement over a file resolve did not read is no judgement.
    sources.finish()?;
    // What the gate lets through with a warning (a narrow capability, an accepted
    // exception with its reason) is shown by `apply` as well as `doctor`.
    for finding in judged.map_err(policy_err)? {
        let message = finding.without_severity();
        if !plan.warnings.contains(&message) {
            plan.warnings.push(message);
        }
    }
    Ok(plan)
}

thread_local! {
    /// How many plans this thread has made.
    static PLANS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Test hook: how many plans the calling thread has made ([`plan`]). Per thread, so tests
/// running in parallel do not see each other's plans; the engine's tests hold `doctor`
/// to one plan (it planned twice, once more for its MCP-servers check).
#[doc(hidden)]
pub fn plans_made() -> usize {
    PLANS.with(std::cell::Cell::get)
}

/// Generated files the previous apply wrote and this plan no longer contains (for
/// example the seccomp profile after switching back to the engine's default) are removed, but only
/// while their bytes still match the digest recorded in `aibox.lock`: an edited copy is
/// somebody's work and stays.
fn retire_generated(
    files: &Snapshot,
    previous: Option<&Lock>,
    builder: &mut PlanBuilder,
) -> Result<(), EngineError> {
    let Some(previous) = previous else {
        return Ok(());
    };
    for (path, digest) in &previous.generated {
        let rel = Utf8Path::new(path);
        if builder.contains(rel) || !crate::writer::in_perimeter(rel) {
            continue;
        }
        if let Some(bytes) = files.get(rel)?
            && sha256_hex(bytes) == *digest
        {
            builder.remove(rel)?;
        }
    }
    Ok(())
}
