//! Codex's sandbox in the container: which engine the seccomp gate judges, and the
//! user-namespace probe `up` and `doctor` run.
//!
//! The policy layer stays pure: it is handed a [`TargetEngine`]. This module resolves it
//! the way the runtime will pick the engine: `AIBOX_ENGINE` over `[container] engine`; an
//! explicit `podman`/`docker` is taken as written (nothing is probed); `auto` runs the
//! runtime's detection (Docker when its daemon answers, else Podman) and, when no engine
//! is found, counts as [`TargetEngine::Unknown`], which the gate treats like Docker.
//!
//! Profiles, kernels and host security modules differ, so the gate is backed by a probe:
//! `unshare --user --map-root-user --mount true` as the container user in the running
//! container: a user namespace and, in it, a mount namespace whose `/` is made private,
//! which is what bubblewrap does first. What it cannot see (a profile that refuses only
//! `clone` with namespace flags, `pivot_root` or `umount2`) only Codex itself shows; the
//! end-to-end tests run Codex's own sandbox for that.

use aibox_config::{AiboxToml, EngineChoice, Harness};
use aibox_policy::{SeccompPosture, TargetEngine, sandbox_fix};
use aibox_runtime::{DetectEnv, Engine, FoundContainer, Runtime, Target};
use serde::Serialize;

/// The engine the gate judges for `choice` (see the module documentation).
pub fn target_engine(choice: EngineChoice, env: &DetectEnv) -> TargetEngine {
    // An invalid `AIBOX_ENGINE` is reported by the runtime; the gate judges the file.
    let choice = aibox_runtime::detect::effective_choice(choice, env).unwrap_or(choice);
    match choice {
        EngineChoice::Podman => TargetEngine::Podman,
        EngineChoice::Docker => TargetEngine::Docker,
        EngineChoice::Auto => aibox_runtime::detect::detect_engine(choice, env)
            .map_or(TargetEngine::Unknown, |cli| from_engine(cli.engine)),
    }
}

/// The gate's name for a detected engine.
pub fn from_engine(engine: Engine) -> TargetEngine {
    match engine {
        Engine::Podman => TargetEngine::Podman,
        Engine::Docker => TargetEngine::Docker,
    }
}

/// Outcome of the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxStatus {
    /// User namespaces work: Codex's bubblewrap sandbox can start.
    Works,
    /// They are refused: Codex's sandbox cannot start.
    Blocked,
    /// The probe could not run (container not running, engine error).
    NotChecked,
}

impl SandboxStatus {
    /// The word shown after "Codex sandbox:".
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Works => "works",
            Self::Blocked => "blocked",
            Self::NotChecked => "not checked",
        }
    }
}

/// What `up` and `doctor` report about Codex's sandbox (`codex_sandbox` in their JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxReport {
    /// Works, blocked or not checked.
    pub status: SandboxStatus,
    /// The project's posture (`engine-default`, `seccomp-profile`, `unconfined`).
    pub posture: String,
    /// The probe that ran.
    pub probe: String,
    /// What the probe printed when it failed, or why it did not run.
    pub detail: String,
    /// How to make it work, when blocked.
    pub fix: Option<String>,
}

impl SandboxReport {
    /// One line for people: `Codex sandbox: works (engine-default)` or
    /// `Codex sandbox: blocked (...); fix: ...`.
    pub fn line(&self) -> String {
        let mut line = format!("Codex sandbox: {} ({})", self.status.as_str(), self.posture);
        if !self.detail.is_empty() {
            line.push_str(": ");
            line.push_str(&self.detail);
        }
        if let Some(fix) = &self.fix {
            line.push_str("; fix: ");
            line.push_str(fix);
        }
        line
    }
}

/// Whether the project enables Codex (only then is the sandbox probed).
pub fn codex_enabled(config: &AiboxToml) -> bool {
    config.ai.harnesses.contains(&Harness::Codex)
}

/// Runs the probe in the project's running container as the configured user. `None`
/// when Codex is not enabled. `posture` is the project's (see
/// [`crate::security::Security::posture`]). `found` is the container as the caller last
/// saw it (`up`, doctor): when it runs, the probe runs in it without another lookup;
/// otherwise the probe looks the container up and reports why it cannot run.
pub fn probe(
    config: &AiboxToml,
    posture: SeccompPosture,
    (runtime, target): (&Runtime, &Target),
    found: Option<&FoundContainer>,
) -> Option<SandboxReport> {
    if !codex_enabled(config) {
        return None;
    }
    let probe = aibox_runtime::USERNS_PROBE.join(" ");
    let outcome = match found.filter(|f| f.running()) {
        Some(found) => runtime.probe_user_namespaces_in(found, &target.user),
        None => runtime.probe_user_namespaces(target, &target.user),
    };
    let report = match outcome {
        Ok(outcome) if outcome.works => SandboxReport {
            status: SandboxStatus::Works,
            posture: posture.as_str().to_owned(),
            probe,
            detail: String::new(),
            fix: None,
        },
        Ok(outcome) => SandboxReport {
            status: SandboxStatus::Blocked,
            posture: posture.as_str().to_owned(),
            probe,
            detail: outcome.detail,
            fix: Some(sandbox_fix(posture)),
        },
        Err(e) => SandboxReport {
            status: SandboxStatus::NotChecked,
            posture: posture.as_str().to_owned(),
            probe,
            detail: e.to_string(),
            fix: None,
        },
    };
    Some(report)
}
