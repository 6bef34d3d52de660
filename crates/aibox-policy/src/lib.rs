//! `aibox-policy`: pure security policy gates.
//!
//! Every function here takes texts and the configuration and returns decisions or
//! [`Finding`]s; nothing reads a file, spawns a process or touches the network. The engine
//! reads the files and hands their text in, so the same gates run in `apply` (blocking),
//! `up` and `doctor` (reporting).
//!
//! - [`seccomp`]: the Codex seccomp posture and the generated seccomp profile.
//! - [`compose`]: what Compose resolves before it runs a file (merge keys, interpolation).
//! - [`gate`]: dangerous options in Compose files, `devcontainer.json` and bind mounts;
//!   over a plan, [`gate_inputs`] lists what it reads and [`judge_plan`] judges only that.
//! - [`secrets`]: the secret scanner for committed and generated files.
//! - [`redact`](mod@redact): redaction of diagnostics before they are shown or written.

pub mod compose;
pub mod egress;
pub mod gate;
pub mod redact;
pub mod relax;
pub mod seccomp;
pub mod secrets;

mod finding;
mod run_args;
mod text;

pub use aibox_config::hostpath::HostPath;
pub use compose::{ComposeSources, NoSources, parse_env_file};
pub use finding::{Consent, Finding, MAX_FINDING_TEXT, Severity, has_errors};
pub use gate::{
    CONTAINER_LABEL, DEVCONTAINER_PATH, GateInputs, check_compose, check_compose_project,
    check_compose_setup, check_container_state, check_container_user, check_devcontainer_json,
    check_plan, check_project_volumes, check_run_args, check_seccomp_profile, check_volumes,
    devcontainer_compose_files, gate_inputs, judge_plan, namespace_containers, plan_judgements,
    unexpected_mounts,
};
pub use redact::{MASK, Redactor, redact, redact_secrets};
pub use relax::relaxation;
pub use seccomp::{
    NO_NEW_PRIVILEGES, PROFILE_PATH, PROFILE_SECURITY_OPT, SeccompPosture, SecurityDecision,
    TargetEngine, UNCONFINED_SECURITY_OPT, agent_security_opt, check_engine, container_security,
    container_security_for, generated_profile, generated_profile_sha256, sandbox_fix, sha256_hex,
    without_override_duplicates,
};
pub use secrets::{TextKind, scan_secrets};

use miette::Diagnostic;

/// Errors of this crate: decisions that block an operation outright.
#[derive(Debug, Clone, thiserror::Error, Diagnostic)]
pub enum PolicyError {
    /// Codex's sandbox strategy relaxes seccomp but the owner has not consented.
    #[error(
        "Codex's sandbox strategy `{strategy}` relaxes the container's seccomp filter, but \
         `[security] {key} = true` is not set in aibox.toml"
    )]
    #[diagnostic(code(aibox::policy::seccomp_consent), help("{help}"))]
    SeccompConsent {
        /// The configured `[security] codex_sandbox` value.
        strategy: &'static str,
        /// The consent key that is missing.
        key: &'static str,
        /// Why, what the key means, and the narrower alternatives, in that order.
        help: String,
    },
    /// Codex keeps the engine's default seccomp profile on an engine whose default refuses
    /// the user namespaces its sandbox needs (Docker), and no consent key is set. Same code
    /// as [`PolicyError::SeccompConsent`]: the fix is recording a consent.
    #[error(
        "Codex's sandbox cannot start on the container engine `{engine}`: its default seccomp \
         profile refuses user namespaces, and neither `[security] acknowledge_seccomp_profile` \
         nor `[security] acknowledge_seccomp_unconfined` is set in aibox.toml"
    )]
    #[diagnostic(code(aibox::policy::seccomp_consent), help("{help}"))]
    EngineBlocksSandbox {
        /// The engine the project resolves to.
        engine: &'static str,
        /// The preferred consent key (the narrower one).
        key: &'static str,
        /// Why, and every way out, narrowest first.
        help: String,
    },
    /// The planned files (or the user-owned files they run with) break security rules.
    #[error("{summary}")]
    #[diagnostic(code(aibox::policy::gate), help("{details}"))]
    Gate {
        /// One line: how many rules are broken, in which files.
        summary: String,
        /// Every error finding with its location and fix.
        details: String,
        /// The findings (errors and warnings).
        findings: Vec<Finding>,
    },
    /// The gate's judgement needed a file, host path or folder its traversal
    /// ([`gate_inputs`]) did not read: the two disagree, a bug.
    #[error("the policy gate's judgement read `{path}`, which its traversal did not")]
    #[diagnostic(
        code(aibox::policy::untraversed),
        help("this is a bug in aibox; please report it with `aibox doctor --report FILE`")
    )]
    Untraversed {
        /// What the judgement asked for.
        path: String,
    },
    /// The vendored base seccomp profile could not be turned into the generated profile.
    #[error("the built-in seccomp profile is malformed: {reason}")]
    #[diagnostic(
        code(aibox::policy::seccomp_profile_internal),
        help("this is a bug in aibox; please report it with `aibox doctor --report FILE`")
    )]
    BaseProfile {
        /// What is wrong with it.
        reason: String,
    },
}

impl PolicyError {
    /// Who can fix it: every refusal is the user's; a broken built-in profile is a bug.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::BaseProfile { .. } | Self::Untraversed { .. } => {
                aibox_config::ErrorKind::Internal
            }
            _ => aibox_config::ErrorKind::User,
        }
    }

    /// The `[security]` consent key this refusal asks for (for example
    /// `acknowledge_seccomp_unconfined`), when it is a missing seccomp consent.
    pub fn consent_key(&self) -> Option<&'static str> {
        match self {
            Self::SeccompConsent { key, .. } | Self::EngineBlocksSandbox { key, .. } => Some(key),
            _ => None,
        }
    }
}
