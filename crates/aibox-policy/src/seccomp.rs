//! The Codex seccomp posture (security model §7) and the generated seccomp profile.
//!
//! Codex's Linux sandbox is bubblewrap (Codex 0.147 dropped its Landlock mode), which
//! needs unprivileged user namespaces. Whether a container allows them depends on the
//! engine's default seccomp profile: Podman's (containers/common) does, Docker's (Moby)
//! does not. `[security] codex_sandbox` picks a strategy: the engine's default
//! (`engine-default`, nothing relaxed), a generated profile that adds only what bubblewrap
//! needs to Docker's default, or `seccomp=unconfined`. The two relaxations each need their
//! own consent key, and [`check_engine`] refuses `engine-default` for Codex on an engine
//! whose default blocks the sandbox. This module never emits `privileged` or a capability.
//!
//! The decision of *what* to write ([`container_security`]) never depends on the engine,
//! so the committed Compose file is the same on every teammate's machine; only the gate
//! ([`check_engine`]) does, and the engine layer hands it the engine it resolved.

use std::fmt::Write as _;
use std::sync::OnceLock;

use aibox_config::{AiboxToml, CodexSandbox, Harness, PlannedFile};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::PolicyError;

/// Where the generated profile lives, relative to the project root.
pub const PROFILE_PATH: &str = aibox_config::layout::SECCOMP_PROFILE;

/// The `security_opt` entry that selects the generated profile. A committed absolute path
/// would leak the owner's home, and the Compose providers resolve a relative one against
/// different folders: docker-compose 1.29 against its working directory (the project root
/// under the Dev Containers CLI and VS Code, `.devcontainer/` under `aibox up`), Compose
/// v2 and podman-compose against `.devcontainer/`. The profile is written to both places
/// this path names from those folders ([`aibox_config::layout::SECCOMP_PROFILES`]).
pub const PROFILE_SECURITY_OPT: &str = "seccomp=.devcontainer/aibox-seccomp.json";

/// The `security_opt` entry that removes the syscall filter.
pub const UNCONFINED_SECURITY_OPT: &str = "seccomp=unconfined";

/// The base profile: Docker's (Moby's) default seccomp profile (Apache-2.0, see
/// `vendor/NOTICE.md`).
const BASE_PROFILE: &str = include_str!("../vendor/moby-default-seccomp.json");

/// Syscalls bubblewrap needs on top of Docker's default profile, measured with Codex
/// 0.171's bubblewrap: `clone` and `unshare` for the namespaces, `mount` for the new root
/// ("Failed to make / slave" without it), `pivot_root` and `umount2` to switch to it and
/// drop the old one; leaving out any one of them made the sandbox fail. `setns`, the new
/// mount API and `clone3` (which stays ENOSYS, so the inspectable `clone` is used) are not
/// needed and stay as the base has them.
pub const BWRAP_SYSCALLS: [&str; 5] = ["clone", "mount", "pivot_root", "umount2", "unshare"];

const ATTRIBUTION: &str = "aibox: clone, mount, pivot_root, umount2 and unshare allowed \
unconditionally for Codex's bubblewrap sandbox, on top of Docker's default seccomp profile \
(Moby, Apache-2.0, Copyright Docker, Inc. and the Moby project contributors); every other rule \
is unchanged";

/// Consent key of the generated profile (preferred: narrower).
pub const PROFILE_CONSENT_KEY: &str = "acknowledge_seccomp_profile";
/// Consent key of `seccomp=unconfined`.
pub const UNCONFINED_CONSENT_KEY: &str = "acknowledge_seccomp_unconfined";

/// The container engine the project will run on, as resolved by the engine layer
/// (`[container] engine`, `AIBOX_ENGINE`, and for `auto` the engine detection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetEngine {
    /// Podman: its default seccomp profile allows unprivileged user namespaces.
    Podman,
    /// Docker: its default seccomp profile refuses them.
    Docker,
    /// `auto` found no engine on this machine: treated like Docker, because that is what
    /// most Dev Containers users run and what a teammate is likely to use.
    Unknown,
}

impl TargetEngine {
    /// Whether the engine's default seccomp profile lets an unprivileged user create user
    /// namespaces (what bubblewrap needs). Only Podman's is known to.
    pub fn default_allows_user_namespaces(self) -> bool {
        matches!(self, Self::Podman)
    }

    /// Short name for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Podman => "podman",
            Self::Docker => "docker",
            Self::Unknown => "unknown (auto found no engine)",
        }
    }
}

/// The effective Codex sandbox posture of a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeccompPosture {
    /// Codex is not enabled: the engine's default seccomp profile, no relaxation.
    Default,
    /// Codex with the engine's default seccomp profile: no relaxation.
    EngineDefault,
    /// The generated profile (Docker's default plus bubblewrap's syscalls).
    Profile,
    /// `seccomp=unconfined`.
    Unconfined,
}

impl SeccompPosture {
    /// Short name for human output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::EngineDefault => "engine-default",
            Self::Profile => "seccomp-profile",
            Self::Unconfined => "unconfined",
        }
    }
}

/// What the Compose generator must emit for the container's security options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityDecision {
    /// The effective posture.
    pub posture: SeccompPosture,
    /// `security_opt` entries for the service, in order (empty: emit no key).
    pub security_opt: Vec<String>,
    /// Extra files to write (the generated profile at [`PROFILE_PATH`]).
    pub files: Vec<PlannedFile>,
    /// SHA-256 (hex) of the generated profile when it is used; record it in the lock.
    pub profile_sha256: Option<String>,
    /// Non-blocking remarks (for example a consent that has no effect).
    pub notes: Vec<String>,
    /// Things the user must change soon (a deprecated value); `apply` shows them.
    pub warnings: Vec<String>,
}

/// The warning for the deprecated `codex_sandbox = "landlock"`.
pub const LANDLOCK_DEPRECATED: &str = "`[security] codex_sandbox = \"landlock\"` is deprecated \
and now means \"engine-default\": Codex 0.147 and later always sandboxes with bubblewrap (its \
Landlock mode is gone), so nothing is relaxed and Codex's sandbox works only where the \
engine's default seccomp profile allows user namespaces (Podman's does, Docker's does not). \
Write `codex_sandbox = \"engine-default\"` instead, or choose \"seccomp-profile\"";

/// Decides the container's seccomp posture from the configuration.
///
/// Codex not enabled: no relaxation. Codex enabled: `codex_sandbox = "engine-default"` (and
/// the deprecated `"landlock"`) relaxes nothing; `"seccomp-profile"` needs
/// `acknowledge_seccomp_profile`; `"unconfined"` needs `acknowledge_seccomp_unconfined`.
/// A consent key alone also selects its strategy when `codex_sandbox` is left at the
/// default (the profile when both are set), so recording a consent at the prompt is
/// enough; the reference tool knew only `acknowledge_seccomp_unconfined`.
///
/// The result never depends on the container engine; see [`check_engine`].
///
/// # Errors
/// [`PolicyError::SeccompConsent`] when a relaxation lacks its consent key.
pub fn container_security(config: &AiboxToml) -> Result<SecurityDecision, PolicyError> {
    let sec = &config.security;
    let codex = config.ai.harnesses.contains(&Harness::Codex);
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    if sec.codex_sandbox == CodexSandbox::Landlock {
        warnings.push(LANDLOCK_DEPRECATED.to_owned());
    }
    if !codex {
        if !matches!(
            sec.codex_sandbox,
            CodexSandbox::EngineDefault | CodexSandbox::Landlock
        ) || sec.acknowledge_seccomp_unconfined
            || sec.acknowledge_seccomp_profile
        {
            notes.push(
                "the Codex harness is not enabled, so [security] codex_sandbox and the seccomp \
                 acknowledgements have no effect"
                    .to_owned(),
            );
        }
        return Ok(decision(
            SeccompPosture::Default,
            Vec::new(),
            notes,
            warnings,
        ));
    }
    let strategy = match sec.codex_sandbox {
        CodexSandbox::EngineDefault | CodexSandbox::Landlock => {
            if sec.acknowledge_seccomp_profile {
                if sec.acknowledge_seccomp_unconfined {
                    notes.push(
                        "both seccomp acknowledgements are set and codex_sandbox is left at its \
                         default: the narrower generated profile is used"
                            .to_owned(),
                    );
                }
                CodexSandbox::SeccompProfile
            } else if sec.acknowledge_seccomp_unconfined {
                CodexSandbox::Unconfined
            } else {
                CodexSandbox::EngineDefault
            }
        }
        other => other,
    };
    match strategy {
        CodexSandbox::SeccompProfile => {
            if !sec.acknowledge_seccomp_profile {
                return Err(consent_error(CodexSandbox::SeccompProfile));
            }
            let text = generated_profile()?;
            let sha = sha256_hex(text.as_bytes());
            let files = aibox_config::layout::SECCOMP_PROFILES
                .iter()
                .map(|path| PlannedFile::generated(*path, text.as_bytes().to_vec()))
                .collect();
            Ok(SecurityDecision {
                posture: SeccompPosture::Profile,
                security_opt: vec![PROFILE_SECURITY_OPT.to_owned()],
                files,
                profile_sha256: Some(sha),
                notes,
                warnings,
            })
        }
        CodexSandbox::Unconfined => {
            if !sec.acknowledge_seccomp_unconfined {
                return Err(consent_error(CodexSandbox::Unconfined));
            }
            Ok(decision(
                SeccompPosture::Unconfined,
                vec![UNCONFINED_SECURITY_OPT.to_owned()],
                notes,
                warnings,
            ))
        }
        CodexSandbox::EngineDefault | CodexSandbox::Landlock => Ok(decision(
            SeccompPosture::EngineDefault,
            Vec::new(),
            notes,
            warnings,
        )),
    }
}

/// The engine-aware half of the gate: Codex with the engine's default profile on an
/// engine whose default refuses user namespaces (Docker, or `auto` that found no engine)
/// would leave Codex without its sandbox, so this refuses until the owner records a
/// consent key. `[ai.execution] filesystem = "container-full"` does not count: aibox
/// writes it into no harness file, so Codex would still start bubblewrap and fail.
/// Never suggests `privileged` or `CAP_SYS_ADMIN`.
///
/// # Errors
/// [`PolicyError::EngineBlocksSandbox`] in that case.
pub fn check_engine(decision: &SecurityDecision, engine: TargetEngine) -> Result<(), PolicyError> {
    if decision.posture != SeccompPosture::EngineDefault || engine.default_allows_user_namespaces()
    {
        return Ok(());
    }
    Err(PolicyError::EngineBlocksSandbox {
        engine: engine.as_str(),
        key: PROFILE_CONSENT_KEY,
        help: engine_help(engine),
    })
}

/// [`container_security`] followed by [`check_engine`]: what `apply` runs.
///
/// # Errors
/// As the two functions.
pub fn container_security_for(
    config: &AiboxToml,
    engine: TargetEngine,
) -> Result<SecurityDecision, PolicyError> {
    let decision = container_security(config)?;
    check_engine(&decision, engine)?;
    Ok(decision)
}

/// What to do when Codex's sandbox is (or would be) blocked, for a project whose posture
/// is `posture`: the one-line fix `up` and `doctor` print next to "blocked".
pub fn sandbox_fix(posture: SeccompPosture) -> String {
    match posture {
        SeccompPosture::Default | SeccompPosture::EngineDefault => format!(
            "set `[security] {PROFILE_CONSENT_KEY} = true` and `codex_sandbox = \
             \"seccomp-profile\"` in aibox.toml (preferred: Docker's default profile plus only \
             what bubblewrap needs), or `{UNCONFINED_CONSENT_KEY} = true` with `codex_sandbox = \
             \"unconfined\"`; then `aibox down && aibox up`"
        ),
        SeccompPosture::Profile | SeccompPosture::Unconfined => {
            "seccomp is not what blocks it: the host refuses unprivileged user namespaces \
             (`sysctl user.max_user_namespaces`, Ubuntu's \
             `kernel.apparmor_restrict_unprivileged_userns`, or an AppArmor profile that \
             blocks mounts); fix it on the host"
                .to_owned()
        }
    }
}

fn engine_help(engine: TargetEngine) -> String {
    let which = match engine {
        TargetEngine::Unknown => {
            "`[container] engine = \"auto\"` found no container engine on this machine, so \
             aibox assumes Docker, whose default seccomp profile refuses them"
        }
        _ => "Docker's default seccomp profile refuses them (Podman's allows them)",
    };
    format!(
        "Why: Codex runs commands in a bubblewrap sandbox, which needs unprivileged user \
         namespaces; {which}. Without a change Codex's sandbox cannot start and Codex asks to \
         run commands unsandboxed.\n\
         Choose one, by editing aibox.toml (only the project owner decides; `--yes` never \
         counts as consent):\n  \
         1. `[security] {PROFILE_CONSENT_KEY} = true` with `codex_sandbox = \
         \"seccomp-profile\"` (preferred): Docker's default profile plus unconditional allows \
         for clone, mount, pivot_root, umount2 and unshare; user namespaces become available, \
         every other rule stays.\n  \
         2. `[security] {UNCONFINED_CONSENT_KEY} = true` with `codex_sandbox = \
         \"unconfined\"`: no syscall filter at all (no root, no capability, but every default \
         denial is gone).\n  \
         3. Run the project on Podman (`[container] engine = \"podman\"`), whose default \
         profile lets the sandbox work with nothing relaxed.\n\
         aibox never uses `privileged` or CAP_SYS_ADMIN for this."
    )
}

/// `no-new-privileges` for the agent's container: a setuid binary of the base image
/// (`su`, `mount`, `passwd`) cannot raise the agent's privileges. Nothing aibox puts in
/// the image needs setuid (no sudo; Codex's bubblewrap sandbox uses user namespaces,
/// which it still may create).
pub const NO_NEW_PRIVILEGES: &str = "no-new-privileges:true";

/// The agent service's `security_opt` for the `decided` entries (the decision's): first
/// [`NO_NEW_PRIVILEGES`], unless the user-owned Compose override sets
/// `no-new-privileges` itself (`false` needs the consent the gate asks for), then the
/// decided entries the override does not already set (see
/// [`without_override_duplicates`]).
pub fn agent_security_opt(decided: &[String], override_text: Option<&str>) -> Vec<String> {
    let set = override_security_opt(override_text);
    let sets_it = |opts: &[String]| opts.iter().any(|o| o.starts_with("no-new-privileges"));
    let mut out = Vec::with_capacity(decided.len() + 1);
    if !sets_it(&set) && !sets_it(decided) {
        out.push(NO_NEW_PRIVILEGES.to_owned());
    }
    out.extend(without_set(decided, &set));
    out
}

/// Drops the entries of `security_opt` that the user-owned Compose override already sets
/// for any service (SEC-SECCOMP-1: never emit an option twice). `=` and `:` separators
/// count as the same option. The gate still checks the override itself.
pub fn without_override_duplicates(
    security_opt: &[String],
    override_text: Option<&str>,
) -> Vec<String> {
    without_set(security_opt, &override_security_opt(override_text))
}

/// A `security_opt` entry as compared: its first `:` as `=`, lowercase.
fn normalise_opt(s: &str) -> String {
    s.trim().replacen(':', "=", 1).to_ascii_lowercase()
}

/// Every `security_opt` entry of every service of the override, normalised.
fn override_security_opt(override_text: Option<&str>) -> Vec<String> {
    override_text
        .and_then(|t| serde_norway::from_str::<serde_norway::Value>(t).ok())
        .and_then(|doc| {
            doc.get("services")
                .and_then(serde_norway::Value::as_mapping)
                .cloned()
        })
        .map(|services| {
            services
                .values()
                .filter_map(|svc| {
                    svc.get("security_opt")
                        .and_then(serde_norway::Value::as_sequence)
                })
                .flatten()
                .filter_map(serde_norway::Value::as_str)
                .map(normalise_opt)
                .collect()
        })
        .unwrap_or_default()
}

/// The entries of `security_opt` not in `set` (normalised entries).
fn without_set(security_opt: &[String], set: &[String]) -> Vec<String> {
    security_opt
        .iter()
        .filter(|o| !set.contains(&normalise_opt(o)))
        .cloned()
        .collect()
}

fn decision(
    posture: SeccompPosture,
    security_opt: Vec<String>,
    notes: Vec<String>,
    warnings: Vec<String>,
) -> SecurityDecision {
    SecurityDecision {
        posture,
        security_opt,
        files: Vec::new(),
        profile_sha256: None,
        notes,
        warnings,
    }
}

fn consent_error(strategy: CodexSandbox) -> PolicyError {
    const WHY: &str = "Why: Codex runs commands in a bubblewrap sandbox, which needs \
        unprivileged user namespaces; Docker's default seccomp filter refuses them (Podman's \
        allows them).";
    const ENGINE_DEFAULT: &str = "codex_sandbox = \"engine-default\" (the default): nothing \
        relaxed; Codex's sandbox works where the engine's default profile allows user \
        namespaces (Podman), and apply refuses it on Docker.";
    const PROFILE: &str = "codex_sandbox = \"seccomp-profile\" with acknowledge_seccomp_profile \
        = true: Docker's default profile plus only the syscalls bubblewrap needs; still enables \
        user namespaces, but far narrower than unconfined.";
    let (name, key, what, alternatives) = match strategy {
        CodexSandbox::Unconfined => (
            "unconfined",
            UNCONFINED_CONSENT_KEY,
            "`seccomp=unconfined` removes the whole syscall filter: it grants no root and no \
             capability, but discards every default denial and widens the kernel surface \
             reachable from the container. Setting `[security] acknowledge_seccomp_unconfined \
             = true` in aibox.toml lets apply emit `security_opt: [\"seccomp=unconfined\"]`, \
             stops doctor warning about it, and records in the repository that the owner \
             accepted weaker syscall filtering instead of `privileged` or CAP_SYS_ADMIN (which \
             aibox never uses).",
            vec![PROFILE, ENGINE_DEFAULT],
        ),
        _ => (
            "seccomp-profile",
            PROFILE_CONSENT_KEY,
            "The generated profile (.devcontainer/aibox-seccomp.json) is Docker's default \
             seccomp profile plus unconditional allows for clone, mount, pivot_root, umount2 \
             and unshare, so user namespaces become available inside the container. Setting \
             `[security] acknowledge_seccomp_profile = true` in aibox.toml lets apply write the \
             profile and emit `security_opt: [\"seccomp=.devcontainer/aibox-seccomp.json\"]`, and records that \
             the owner accepted it; its SHA-256 is pinned in aibox.lock so doctor detects edits.",
            vec![ENGINE_DEFAULT],
        ),
    };
    let mut help = format!("{WHY}\nWhat the key means: {what}\nNarrower alternatives:");
    for (i, alt) in alternatives.iter().enumerate() {
        let _ = write!(help, "\n  {}. {alt}", i + 1);
    }
    help.push_str(
        "\nOnly the project owner sets the key, by editing aibox.toml; `--yes` never counts as \
         consent.",
    );
    PolicyError::SeccompConsent {
        strategy: name,
        key,
        help,
    }
}

/// The generated seccomp profile: the vendored default plus unconditional allows for
/// [`BWRAP_SYSCALLS`]. Deterministic (pretty JSON, trailing newline).
///
/// # Errors
/// [`PolicyError::BaseProfile`] if the vendored profile does not have the expected shape.
pub fn generated_profile() -> Result<String, PolicyError> {
    static CACHE: OnceLock<Result<String, String>> = OnceLock::new();
    CACHE
        .get_or_init(|| build_profile(BASE_PROFILE))
        .clone()
        .map_err(|reason| PolicyError::BaseProfile { reason })
}

/// SHA-256 (lowercase hex) of [`generated_profile`].
///
/// # Errors
/// As [`generated_profile`].
pub fn generated_profile_sha256() -> Result<String, PolicyError> {
    generated_profile().map(|t| sha256_hex(t.as_bytes()))
}

/// The vendored base profile, for showing a diff against the generated one.
pub fn base_profile() -> &'static str {
    BASE_PROFILE
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn build_profile(base: &str) -> Result<String, String> {
    let mut profile: Value = serde_json::from_str(base).map_err(|e| e.to_string())?;
    let rules = profile
        .get_mut("syscalls")
        .and_then(Value::as_array_mut)
        .ok_or("no `syscalls` array")?;
    // Take bubblewrap's syscalls out of argument-free denials (in the base these apply
    // when CAP_SYS_ADMIN is missing); every other rule stays as it is. Changed rules say so
    // in their `comment`, which also carries the attribution.
    for rule in rules.iter_mut() {
        let deny = rule.get("action").and_then(Value::as_str) != Some("SCMP_ACT_ALLOW");
        if !deny || !rule_args_empty(rule) {
            continue;
        }
        let Some(names) = rule.get_mut("names").and_then(Value::as_array_mut) else {
            continue;
        };
        let before = names.len();
        names.retain(|n| n.as_str().is_none_or(|n| !BWRAP_SYSCALLS.contains(&n)));
        if names.len() != before {
            rule["comment"] = Value::String(format!("{ATTRIBUTION} (denial lifted here)"));
        }
    }
    rules.retain(|r| {
        r.get("names")
            .and_then(Value::as_array)
            .is_none_or(|n| !n.is_empty())
    });
    let missing: Vec<Value> = BWRAP_SYSCALLS
        .iter()
        .filter(|name| !rules.iter().any(|r| unconditional_allow(r, name)))
        .map(|name| Value::String((*name).to_owned()))
        .collect();
    if !missing.is_empty() {
        let mut added = Map::new();
        added.insert("names".to_owned(), Value::Array(missing));
        added.insert(
            "action".to_owned(),
            Value::String("SCMP_ACT_ALLOW".to_owned()),
        );
        added.insert("args".to_owned(), Value::Array(Vec::new()));
        added.insert("comment".to_owned(), Value::String(ATTRIBUTION.to_owned()));
        added.insert("includes".to_owned(), Value::Object(Map::new()));
        added.insert("excludes".to_owned(), Value::Object(Map::new()));
        rules.push(Value::Object(added));
    }
    let mut text = serde_json::to_string_pretty(&profile).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

fn rule_args_empty(rule: &Value) -> bool {
    rule.get("args")
        .is_none_or(|a| a.is_null() || a.as_array().is_some_and(Vec::is_empty))
}

fn empty_object(rule: &Value, key: &str) -> bool {
    rule.get(key)
        .is_none_or(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty))
}

fn unconditional_allow(rule: &Value, name: &str) -> bool {
    rule.get("action").and_then(Value::as_str) == Some("SCMP_ACT_ALLOW")
        && rule_args_empty(rule)
        && empty_object(rule, "includes")
        && empty_object(rule, "excludes")
        && rule
            .get("names")
            .and_then(Value::as_array)
            .is_some_and(|n| n.iter().any(|v| v.as_str() == Some(name)))
}

#[cfg(test)]
mod agent_security_opt_tests {
    use super::agent_security_opt;

    #[test]
    fn the_agent_gets_no_new_privileges_unless_the_override_decides() {
        let policy = vec!["seccomp=unconfined".to_owned()];
        assert_eq!(
            agent_security_opt(&policy, None),
            ["no-new-privileges:true", "seccomp=unconfined"]
        );
        let unrelated = "services:\n  demo:\n    security_opt:\n      - label=disable\n";
        assert_eq!(agent_security_opt(&[], Some(unrelated)).len(), 1);
        for set in ["no-new-privileges:false", "no-new-privileges=true"] {
            let text = format!("services:\n  demo:\n    security_opt:\n      - {set}\n");
            assert!(agent_security_opt(&[], Some(&text)).is_empty(), "{set}");
        }
        // An entry the override already sets is not written twice.
        let text = "services:\n  demo:\n    security_opt:\n      - seccomp:unconfined\n";
        assert_eq!(
            agent_security_opt(&policy, Some(text)),
            ["no-new-privileges:true"]
        );
    }
}
