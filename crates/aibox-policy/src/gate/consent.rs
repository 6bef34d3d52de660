//! Security options that relax the container's confinement (`seccomp=`, `apparmor=`,
//! `label=`, `systempaths=`) and the consent each needs: a `seccomp=<file>` counts as the
//! generated profile only when its bytes are that profile's; anything else needs a
//! recorded exception.

use super::{CONTAINER_LABEL, Ctx};
use crate::compose::{ComposeSources, dir_of, join_project};
use crate::finding::{Finding, Severity};
use crate::seccomp::PROFILE_PATH;
use crate::text::line_of;

/// The generated profile at [`PROFILE_PATH`] must be byte-identical to what aibox
/// generates (and what the lock recorded); anything else is an edited profile.
pub fn check_seccomp_profile(file_text: &[u8], recorded_sha256: Option<&str>) -> Vec<Finding> {
    let actual = crate::seccomp::sha256_hex(file_text);
    let expected = crate::seccomp::generated_profile_sha256().ok();
    let mut out = Vec::new();
    let matches_generated = expected.as_deref() == Some(actual.as_str());
    let matches_lock = recorded_sha256.is_none_or(|r| r == actual);
    if !matches_generated || !matches_lock {
        out.push(Finding::new(
            "aibox::policy::seccomp_profile_edited",
            Severity::Error,
            PROFILE_PATH,
            format!(
                "the seccomp profile differs from the one aibox generates (SHA-256 {actual}); \
                 an edited profile may allow more than bubblewrap needs"
            ),
            "run `aibox apply` to regenerate it; put other relaxations in \
             `[[security.exceptions]]` instead of editing the profile",
        ));
    }
    out
}

/// A security option's key (lower case) and value (`seccomp=x`, `seccomp:x`).
fn split_security_opt(raw: &str) -> Option<(String, &str)> {
    let pos = raw.find(['=', ':'])?;
    Some((
        raw[..pos].trim().to_ascii_lowercase(),
        raw[pos + 1..].trim(),
    ))
}

/// Where the Compose tools read a `seccomp=<value>` file from a file in `dir` (`None`:
/// the generated profile's folder): the file's folder (Compose v2, podman-compose) and
/// the project root (docker-compose 1.29); one `None` for a path the gate cannot place.
fn profile_readings(dir: Option<&str>, value: &str) -> Vec<Option<String>> {
    let dir = dir.unwrap_or_else(|| dir_of(PROFILE_PATH));
    if value.starts_with(['/', '~', '$']) {
        return vec![None];
    }
    let mut r = vec![join_project(dir, value), join_project("", value)];
    r.dedup();
    r
}

/// Whether every reading is one of the generated profile's places.
fn names_ours(readings: &[Option<String>]) -> bool {
    readings.iter().all(|r| {
        r.as_deref()
            .is_some_and(|p| aibox_config::layout::SECCOMP_PROFILES.contains(&p))
    })
}

/// The files [`Ctx::security_opt`] reads for `raw` in a file whose relative paths start
/// at `dir`, read from `sources` without judging (the gate's traversal).
pub(super) fn visit_security_opt(sources: &dyn ComposeSources, dir: Option<&str>, raw: &str) {
    let Some((key, value)) = split_security_opt(raw.trim()) else {
        return;
    };
    if key != "seccomp" || value.eq_ignore_ascii_case("unconfined") {
        return;
    }
    let readings = profile_readings(dir, value);
    if names_ours(&readings) {
        for path in readings.iter().flatten() {
            sources.read(path);
        }
    }
}

impl Ctx<'_> {
    pub(super) fn security_opt(&self, raw: &str, out: &mut Vec<Finding>) {
        let raw = raw.trim();
        let Some((key, value)) = split_security_opt(raw) else {
            return;
        };
        let line = line_of(self.text, raw);
        match key.as_str() {
            "seccomp" => self.seccomp_opt(value, line, out),
            "apparmor" if value.eq_ignore_ascii_case("unconfined") => self.relaxation(
                "aibox::policy::apparmor_unconfined",
                "apparmor=unconfined",
                "`apparmor=unconfined` removes the AppArmor confinement of the container",
                line,
                out,
            ),
            "label" if value.eq_ignore_ascii_case("disable") => self.relaxation(
                "aibox::policy::selinux_disabled",
                "label=disable",
                "`label=disable` turns off SELinux separation for the container",
                line,
                out,
            ),
            // Any other label (a type such as `spc_t` or `unconfined_t`, a user, a role, an
            // MCS level shared with other containers) replaces the engine's separation.
            "label" => self.relaxation(
                "aibox::policy::security_label",
                &format!("label={value}"),
                &format!(
                    "`label={value}` replaces the SELinux label the engine gives the container \
                     (`type:spc_t` runs it unconfined, a shared level reaches other containers' \
                     files)"
                ),
                line,
                out,
            ),
            "apparmor" if !value.eq_ignore_ascii_case("docker-default") => self.relaxation(
                "aibox::policy::security_label",
                &format!("apparmor={value}"),
                &format!(
                    "`apparmor={value}` replaces the AppArmor profile the engine gives the \
                     container with one the gate cannot read"
                ),
                line,
                out,
            ),
            "systempaths" if value.eq_ignore_ascii_case("unconfined") => self.relaxation(
                "aibox::policy::systempaths_unconfined",
                "systempaths=unconfined",
                "`systempaths=unconfined` unmasks /proc/kcore, /proc/keys, /proc/sysrq-trigger and \
                 other host paths",
                line,
                out,
            ),
            "unmask" => self.relaxation(
                "aibox::policy::systempaths_unconfined",
                "unmask",
                "`unmask` exposes masked /proc and /sys paths of the host",
                line,
                out,
            ),
            "no-new-privileges" if value.eq_ignore_ascii_case("false") => {
                let f = Finding::new(
                    "aibox::policy::no_new_privileges",
                    Severity::Warning,
                    self.file,
                    "`no-new-privileges=false` lets processes regain privileges through setuid \
                     binaries",
                    "remove the option",
                )
                .at(line);
                self.push(false, "no-new-privileges=false", f, out);
            }
            _ => {}
        }
    }

    pub(super) fn seccomp_opt(&self, value: &str, line: Option<usize>, out: &mut Vec<Finding>) {
        if value.eq_ignore_ascii_case("unconfined") {
            if self.consent.seccomp_unconfined {
                return;
            }
            out.push(
                Finding::new(
                    "aibox::policy::seccomp_unconfined",
                    Severity::Error,
                    self.file,
                    "`seccomp=unconfined` removes the container's syscall filter, and the \
                         owner has not consented",
                    "prefer `[security] codex_sandbox = \"engine-default\"` (no relaxation) or \
                         \"seccomp-profile\" (narrower); to keep it, set `[security] \
                         acknowledge_seccomp_unconfined = true` in aibox.toml",
                )
                .at(line),
            );
            return;
        }
        // The generated profile is judged where every Compose tool will read it, by its
        // bytes: consent covers the profile aibox generates, not a file of that name. A
        // relative path is read from the Compose file's folder by Compose v2 and
        // podman-compose and from the working directory (the project root, under the Dev
        // Containers CLI) by docker-compose 1.29, so both readings must be one of the
        // generated copies (`SECCOMP_PROFILES`) with the generated bytes. A running
        // container shows the option as Compose passed it.
        let dir = if self.file == CONTAINER_LABEL {
            None
        } else {
            self.dir
        };
        let readings = profile_readings(dir, value);
        if !names_ours(&readings) {
            let f = Finding::new(
                "aibox::policy::seccomp_profile",
                Severity::Error,
                self.file,
                format!(
                    "seccomp profile `{value}` is not the one aibox generates, so its rules are \
                     unknown"
                ),
                format!(
                    "use `[security] codex_sandbox = \"seccomp-profile\"` (aibox's generated \
                     profile, judged by its SHA-256) or remove the option; to keep it, record \
                     the consent in aibox.toml as `[[security.exceptions]] option = \
                     \"seccomp={value}\"` with a reason"
                ),
            )
            .at(line);
            self.push(true, &format!("seccomp={value}"), f, out);
            return;
        }
        let expected = crate::seccomp::generated_profile_sha256().unwrap_or_default();
        for path in readings.iter().flatten() {
            let actual = self
                .sources
                .read(path)
                .map(|text| crate::seccomp::sha256_hex(text.as_bytes()));
            if actual.as_deref() == Some(expected.as_str()) {
                continue;
            }
            let found = actual.map_or_else(
                || "it is missing".to_owned(),
                |sha| format!("its SHA-256 is {sha}"),
            );
            let f = Finding::new(
                "aibox::policy::seccomp_profile_edited",
                Severity::Error,
                self.file,
                format!(
                    "`seccomp={value}` names `{path}`, but that file is not the profile aibox \
                     generates ({found}, expected {expected}); the consent \
                     `acknowledge_seccomp_profile` covers only the generated profile"
                ),
                "run `aibox apply` to regenerate it; put other relaxations in \
                 `[[security.exceptions]]` instead of editing the profile",
            )
            .at(line);
            out.push(f);
            return;
        }
        if self.consent.seccomp_profile {
            return;
        }
        out.push(
            Finding::new(
                "aibox::policy::seccomp_profile",
                Severity::Error,
                self.file,
                "the generated seccomp profile enables user namespaces, and the owner has not \
                 consented",
                "set `[security] acknowledge_seccomp_profile = true` in aibox.toml, or use \
                 `codex_sandbox = \"engine-default\"`",
            )
            .at(line),
        );
    }

    pub(super) fn relaxation(
        &self,
        code: &str,
        option: &str,
        message: &str,
        line: Option<usize>,
        out: &mut Vec<Finding>,
    ) {
        let f = Finding::new(
            code,
            Severity::Error,
            self.file,
            message,
            format!(
                "remove it; if a tool really needs it, record the consent in aibox.toml as \
                 `[[security.exceptions]] option = \"{option}\"` with a reason"
            ),
        )
        .at(line);
        self.push(true, option, f, out);
    }
}
