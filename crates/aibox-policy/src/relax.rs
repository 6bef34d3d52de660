//! What a consent or relaxation key set by hand (`aibox config set`) gives away.
//!
//! The interactive consent prompt explains a key before recording it; `config set` writes
//! any key it is given, so it prints the same trade-off afterwards: a relaxation is never
//! recorded without a word.

use crate::seccomp::{PROFILE_CONSENT_KEY, PROFILE_PATH, UNCONFINED_CONSENT_KEY};

/// What setting dotted `key` to `value` relaxes, or `None` when it relaxes nothing
/// (any other key, or a consent set to `false`). `value` is the text given to
/// `config set`.
pub fn relaxation(key: &str, value: &str) -> Option<String> {
    let value = value.trim().trim_matches('"');
    let on = value == "true";
    match key {
        k if k == format!("security.{UNCONFINED_CONSENT_KEY}") && on => Some(format!(
            "this consent lets `[security] codex_sandbox = \"unconfined\"` run the container \
             with `seccomp=unconfined`: no syscall filter at all (no root and no capability, \
             but every default denial is gone and more of the kernel is reachable). Narrower: \
             `{PROFILE_CONSENT_KEY} = true` with `codex_sandbox = \"seccomp-profile\"`"
        )),
        k if k == format!("security.{PROFILE_CONSENT_KEY}") && on => Some(format!(
            "this consent lets `[security] codex_sandbox = \"seccomp-profile\"` write \
             {PROFILE_PATH}: the engine's default seccomp profile plus unconditional allows for \
             clone, mount, pivot_root, umount2 and unshare, so processes in the container can \
             create user namespaces (what Codex's bubblewrap sandbox needs); every other rule \
             stays"
        )),
        // What it relaxes only: whether its consent is missing is the caller's to say
        // (QA: this claimed a refusal with the consent recorded).
        "security.codex_sandbox" if value == "unconfined" => Some(format!(
            "`unconfined` removes the container's syscall filter, under the owner's consent \
             `[security] {UNCONFINED_CONSENT_KEY}`"
        )),
        "security.codex_sandbox" if value == "seccomp-profile" => Some(format!(
            "`seccomp-profile` lets processes in the container create user namespaces, under \
             the owner's consent `[security] {PROFILE_CONSENT_KEY}`"
        )),
        "processkit.allow_unverified" if on => Some(
            "processkit content is installed without a verified SHA-256: whatever the source \
             serves is accepted (recorded as `verification = \"unverified\"`; doctor reports \
             it every time). Prefer pinning `[processkit] sha256`"
                .to_owned(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consents_say_what_they_relax_and_nothing_else_does() {
        let unconfined = relaxation("security.acknowledge_seccomp_unconfined", "true").unwrap();
        assert!(unconfined.contains("no syscall filter"), "{unconfined}");
        let profile = relaxation("security.acknowledge_seccomp_profile", "true").unwrap();
        assert!(profile.contains("user namespaces"), "{profile}");
        assert!(relaxation("security.codex_sandbox", "\"unconfined\"").is_some());
        // Whether the consent is there is not this function's to know.
        let sandbox = relaxation("security.codex_sandbox", "seccomp-profile").unwrap();
        assert!(!sandbox.contains("refuses"), "{sandbox}");
        assert!(relaxation("processkit.allow_unverified", "true").is_some());
        assert_eq!(
            relaxation("security.acknowledge_seccomp_unconfined", "false"),
            None
        );
        assert_eq!(relaxation("security.codex_sandbox", "engine-default"), None);
        assert_eq!(relaxation("container.name", "true"), None);
    }
}
