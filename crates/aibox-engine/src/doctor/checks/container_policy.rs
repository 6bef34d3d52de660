//! The `container-policy` check: the seccomp posture and the Compose setup under the
//! policy gate's rules.

use aibox_config::Project;
use aibox_policy::{Consent, Finding, Severity, check_project_volumes, check_seccomp_profile};
use aibox_provenance::lock::Lock;
use camino::Utf8Path;
use miette::Diagnostic as _;

use crate::security::Security;
use crate::writer::ProjectRoot;

/// The findings and the posture's name (when the configuration could be evaluated). The
/// seccomp decision is the resolve's ([`crate::security::Security`]), not taken again here.
pub(crate) fn findings(
    root: &ProjectRoot,
    project: &Project,
    security: &Security,
    lock: Option<&Lock>,
) -> (Vec<Finding>, Option<String>) {
    let config = &project.config;
    let consent = Consent::from_config(config);
    let mut out = Vec::new();
    let posture = match security.check().cloned() {
        Ok(decision) => {
            let name = decision.posture.as_str().to_owned();
            if !decision.security_opt.is_empty() {
                out.push(Finding::new(
                    "aibox::doctor::seccomp_relaxed",
                    Severity::Info,
                    aibox_config::AIBOX_TOML,
                    format!(
                        "seccomp is relaxed for Codex's sandbox ({}), with the owner's recorded \
                         consent",
                        decision.security_opt.join(", ")
                    ),
                    "on Podman, `[security] codex_sandbox = \"engine-default\"` needs no \
                     relaxation",
                ));
            }
            for warning in decision.warnings {
                out.push(Finding::new(
                    "aibox::doctor::seccomp_deprecated",
                    Severity::Warning,
                    aibox_config::AIBOX_TOML,
                    warning,
                    "write `codex_sandbox = \"engine-default\"` (same meaning) or choose another \
                     strategy",
                ));
            }
            for note in decision.notes {
                out.push(Finding::new(
                    "aibox::doctor::seccomp_note",
                    Severity::Info,
                    aibox_config::AIBOX_TOML,
                    note,
                    "remove the unused keys, or enable the codex harness",
                ));
            }
            Some(name)
        }
        Err(e) => {
            out.push(Finding::new(
                "aibox::doctor::seccomp_consent",
                Severity::Error,
                aibox_config::AIBOX_TOML,
                e.to_string(),
                e.help().map(|h| h.to_string()).unwrap_or_default(),
            ));
            None
        }
    };
    // The Compose files as Compose resolves them, with `devcontainer.json`.
    let disk = crate::snapshot::DiskSources(root);
    out.extend(aibox_policy::check_compose_setup(&disk, &consent));
    out.extend(aibox_policy::check_container_user(config, &consent));
    out.extend(check_project_volumes(
        config,
        &project.local,
        &consent,
        &disk,
    ));
    for path in aibox_config::layout::SECCOMP_PROFILES {
        if let Ok(Some(bytes)) = root.read(Utf8Path::new(path)) {
            let recorded = lock.and_then(|l| l.generated_digest(path));
            out.extend(check_seccomp_profile(&bytes, recorded));
        }
    }
    (out, posture)
}
