//! The Codex seccomp posture (security model §7) and the generated seccomp profile.
//!
//! Codex's Linux sandbox is bubblewrap, which needs unprivileged user namespaces. A
//! container's default seccomp filter may block them, so `[security] codex_sandbox` picks
//! a strategy: Landlock (no relaxation, the default), a generated profile that adds only
//! what bubblewrap needs, or `seccomp=unconfined`. The two relaxations each need their own
//! consent key; this module never emits `privileged` or a capability.

use std::fmt::Write as _;
use std::sync::OnceLock;

use aibox_config::{AiboxToml, CodexSandbox, Harness, PlannedFile};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::PolicyError;

/// Where the generated profile lives, relative to the project root.
pub const PROFILE_PATH: &str = ".devcontainer/aibox-seccomp.json";

/// The `security_opt` entry that selects the generated profile. The path is relative to
/// the Compose file's directory (`.devcontainer/`), which Compose v2 resolves against the
/// project directory; a committed absolute path would leak the owner's home.
pub const PROFILE_SECURITY_OPT: &str = "seccomp=aibox-seccomp.json";

/// The `security_opt` entry that removes the syscall filter.
pub const UNCONFINED_SECURITY_OPT: &str = "seccomp=unconfined";

/// The base profile: Debian's copy of the `containers/common` default (Apache-2.0, see
/// `vendor/NOTICE.md`).
const BASE_PROFILE: &str = include_str!("../vendor/containers-common-seccomp.json");

/// Syscalls bubblewrap needs for its user, mount and PID namespaces and its new root.
/// `clone3` is left exactly as the base profile has it.
pub const BWRAP_SYSCALLS: [&str; 6] = [
    "clone",
    "mount",
    "pivot_root",
    "setns",
    "umount2",
    "unshare",
];

const ATTRIBUTION: &str = "aibox: clone, mount, pivot_root, setns, umount2 and unshare allowed \
unconditionally for Codex's bubblewrap sandbox, on top of the containers/common default seccomp \
profile (Apache-2.0, Copyright 2018 github.com/containers/common authors and Docker, Inc.); \
every other rule is unchanged";

/// The effective Codex sandbox posture of a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SeccompPosture {
    /// Codex is not enabled: the engine's default seccomp profile, no relaxation.
    Default,
    /// Codex in Landlock mode: no relaxation.
    Landlock,
    /// The generated profile (default plus bubblewrap's syscalls).
    Profile,
    /// `seccomp=unconfined`.
    Unconfined,
}

impl SeccompPosture {
    /// Short name for human output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Landlock => "landlock",
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
}

/// Decides the container's seccomp posture from the configuration.
///
/// Codex not enabled: no relaxation. Codex enabled: `codex_sandbox = "landlock"` relaxes
/// nothing; `"seccomp-profile"` needs `acknowledge_seccomp_profile`; `"unconfined"` needs
/// `acknowledge_seccomp_unconfined`. For compatibility with configurations of the reference
/// tool, which knew only the acknowledgement key, `acknowledge_seccomp_unconfined = true`
/// with the default strategy also selects `unconfined`.
///
/// # Errors
/// [`PolicyError::SeccompConsent`] when a relaxation lacks its consent key.
pub fn container_security(config: &AiboxToml) -> Result<SecurityDecision, PolicyError> {
    let sec = &config.security;
    let codex = config.ai.harnesses.contains(&Harness::Codex);
    let mut notes = Vec::new();
    if !codex {
        if sec.codex_sandbox != CodexSandbox::Landlock
            || sec.acknowledge_seccomp_unconfined
            || sec.acknowledge_seccomp_profile
        {
            notes.push(
                "the Codex harness is not enabled, so [security] codex_sandbox and the seccomp \
                 acknowledgements have no effect"
                    .to_owned(),
            );
        }
        return Ok(decision(SeccompPosture::Default, Vec::new(), None, notes));
    }
    let strategy = match sec.codex_sandbox {
        CodexSandbox::Landlock if sec.acknowledge_seccomp_unconfined => CodexSandbox::Unconfined,
        other => other,
    };
    match strategy {
        CodexSandbox::Landlock => {
            if sec.acknowledge_seccomp_profile {
                notes.push(
                    "acknowledge_seccomp_profile is set but codex_sandbox is \"landlock\": no \
                     profile is used"
                        .to_owned(),
                );
            }
            Ok(decision(SeccompPosture::Landlock, Vec::new(), None, notes))
        }
        CodexSandbox::SeccompProfile => {
            if !sec.acknowledge_seccomp_profile {
                return Err(consent_error(CodexSandbox::SeccompProfile));
            }
            let text = generated_profile()?;
            let sha = sha256_hex(text.as_bytes());
            let file = PlannedFile::generated(PROFILE_PATH, text.as_bytes().to_vec());
            Ok(SecurityDecision {
                posture: SeccompPosture::Profile,
                security_opt: vec![PROFILE_SECURITY_OPT.to_owned()],
                files: vec![file],
                profile_sha256: Some(sha),
                notes,
            })
        }
        CodexSandbox::Unconfined => {
            if !sec.acknowledge_seccomp_unconfined {
                return Err(consent_error(CodexSandbox::Unconfined));
            }
            Ok(decision(
                SeccompPosture::Unconfined,
                vec![UNCONFINED_SECURITY_OPT.to_owned()],
                None,
                notes,
            ))
        }
    }
}

/// Drops the entries of `security_opt` that the user-owned Compose override already sets
/// for any service (SEC-SECCOMP-1: never emit an option twice). `=` and `:` separators
/// count as the same option. The gate still checks the override itself.
pub fn without_override_duplicates(
    security_opt: &[String],
    override_text: Option<&str>,
) -> Vec<String> {
    let normalise = |s: &str| s.trim().replacen(':', "=", 1).to_ascii_lowercase();
    let existing: Vec<String> = override_text
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
                .map(normalise)
                .collect()
        })
        .unwrap_or_default();
    security_opt
        .iter()
        .filter(|o| !existing.contains(&normalise(o)))
        .cloned()
        .collect()
}

fn decision(
    posture: SeccompPosture,
    security_opt: Vec<String>,
    profile_sha256: Option<String>,
    notes: Vec<String>,
) -> SecurityDecision {
    SecurityDecision {
        posture,
        security_opt,
        files: Vec::new(),
        profile_sha256,
        notes,
    }
}

fn consent_error(strategy: CodexSandbox) -> PolicyError {
    const WHY: &str = "Why: Codex runs commands in a bubblewrap sandbox, which needs \
        unprivileged user namespaces; a container's default seccomp filter can block them.";
    const LANDLOCK: &str = "codex_sandbox = \"landlock\" (the default): Codex's Landlock mode, \
        no container relaxation at all; needs a kernel >= 5.13 with Landlock and isolates the \
        file system only.";
    const NO_SANDBOX: &str = "[ai.execution] filesystem = \"container-full\": no nested sandbox, \
        the container is the boundary; no relaxation, but the harness has full rights inside \
        the container.";
    const PROFILE: &str = "codex_sandbox = \"seccomp-profile\" with acknowledge_seccomp_profile \
        = true: the default profile plus only the syscalls bubblewrap needs; still enables user \
        namespaces, but far narrower than unconfined.";
    let (name, key, what, alternatives) = match strategy {
        CodexSandbox::Unconfined => (
            "unconfined",
            "acknowledge_seccomp_unconfined",
            "`seccomp=unconfined` removes the whole syscall filter: it grants no root and no \
             capability, but discards every default denial and widens the kernel surface \
             reachable from the container. Setting `[security] acknowledge_seccomp_unconfined \
             = true` in aibox.toml lets apply emit `security_opt: [\"seccomp=unconfined\"]`, \
             stops doctor warning about it, and records in the repository that the owner \
             accepted weaker syscall filtering instead of `privileged` or CAP_SYS_ADMIN (which \
             aibox never uses).",
            vec![LANDLOCK, NO_SANDBOX, PROFILE],
        ),
        _ => (
            "seccomp-profile",
            "acknowledge_seccomp_profile",
            "The generated profile (.devcontainer/aibox-seccomp.json) is the default seccomp \
             profile plus unconditional allows for clone, unshare, setns, mount, umount2 and \
             pivot_root, so user namespaces become available inside the container. Setting \
             `[security] acknowledge_seccomp_profile = true` in aibox.toml lets apply write the \
             profile and emit `security_opt: [\"seccomp=aibox-seccomp.json\"]`, and records that \
             the owner accepted it; its SHA-256 is pinned in aibox.lock so doctor detects edits.",
            vec![LANDLOCK, NO_SANDBOX],
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
