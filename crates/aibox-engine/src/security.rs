//! The seccomp decision of a project, taken once per resolve: the policy layer's
//! engine-independent decision and, where the posture depends on it, its engine-aware
//! half. Below `resolve` and `config_check`, so `config validate` judges a configuration
//! as `apply` does, with the same function.

use aibox_policy::{PolicyError, SeccompPosture, SecurityDecision, TargetEngine};

/// The seccomp decision of the project, taken once per resolve.
#[derive(Debug, Clone)]
pub struct Security {
    /// The engine-independent decision (`aibox_policy::container_security`), or why the
    /// configuration is refused (a relaxation without its consent key).
    pub decision: Result<SecurityDecision, PolicyError>,
    /// The engine the gate judged; `None` when the posture does not depend on it.
    pub engine: Option<TargetEngine>,
    /// The engine-aware refusal (`aibox_policy::check_engine`): Codex keeps the engine's
    /// default profile on an engine that refuses its sandbox, without consent.
    pub engine_refusal: Option<PolicyError>,
}

impl Security {
    /// Takes the decision for `config`; `engine` is the engine the gate judges (`None`:
    /// resolved from this process's environment, only when the posture depends on it).
    pub fn of(config: &aibox_config::AiboxToml, engine: Option<TargetEngine>) -> Self {
        Self::judged(config, engine, false)
    }

    /// [`Self::of`]; with `check_only` (`apply --check`), an engine-aware refusal for an
    /// engine that was not found becomes a warning of the decision.
    pub fn judged(
        config: &aibox_config::AiboxToml,
        engine: Option<TargetEngine>,
        check_only: bool,
    ) -> Self {
        let mut decision = aibox_policy::container_security(config);
        let mut judged = None;
        let mut engine_refusal = None;
        // The engine-aware half of the gate; the engine is resolved only when it matters.
        if let Ok(d) = &decision
            && d.posture == SeccompPosture::EngineDefault
        {
            let engine = engine.unwrap_or_else(|| {
                crate::codex_sandbox::target_engine(
                    config.container.engine,
                    &aibox_runtime::DetectEnv::from_process(),
                )
            });
            judged = Some(engine);
            engine_refusal = aibox_policy::check_engine(d, engine).err();
        }
        if check_only
            && judged == Some(TargetEngine::Unknown)
            && let (Some(refusal), Ok(d)) = (&engine_refusal, &mut decision)
        {
            d.warnings.push(format!(
                "no container engine found here, so this check does not judge the Docker \
                 case: {refusal}; `aibox apply` asks for that consent where the project \
                 runs on Docker (or set `[container] engine`)"
            ));
            engine_refusal = None;
        }
        Self {
            decision,
            engine: judged,
            engine_refusal,
        }
    }

    /// The decision, or the refusal `apply` reports.
    ///
    /// # Errors
    /// The missing consent, as the policy layer words it.
    pub fn check(&self) -> Result<&SecurityDecision, PolicyError> {
        let decision = self.decision.as_ref().map_err(Clone::clone)?;
        match &self.engine_refusal {
            Some(refusal) => Err(refusal.clone()),
            None => Ok(decision),
        }
    }

    /// The effective posture (`engine-default` when the configuration is refused).
    pub fn posture(&self) -> SeccompPosture {
        self.decision
            .as_ref()
            .map_or(SeccompPosture::EngineDefault, |d| d.posture)
    }

    /// The consent key the configuration lacks for its seccomp choice (for example
    /// `security.acknowledge_seccomp_unconfined`), if any: what the consent prompt asks.
    pub fn missing_consent(&self) -> Option<String> {
        match self.check() {
            Err(
                PolicyError::SeccompConsent { key, .. }
                | PolicyError::EngineBlocksSandbox { key, .. },
            ) => Some(format!("security.{key}")),
            _ => None,
        }
    }
}
