//! Point 5: the dependency supply chain.
//!
//! Every declared requirement carries a version constraint (exact pins preferred) and
//! comes from the registry; no custom index; requirements files carry hashes (warn
//! otherwise); nothing is installed at run time; the server's PEP 723 header matches the
//! manifest's `per_server_header` digest when the caller knows it.

use super::{Skill, spawns};
use crate::context::ReviewContext;
use crate::deps::Constraint;
use crate::report::Findings;
use crate::shell;

pub(crate) fn check(skill: &Skill<'_>, ctx: &ReviewContext) -> Findings {
    let mut f = Findings::default();
    for r in &skill.deps.requirements {
        match &r.constraint {
            Constraint::Direct(src) => f.fail(
                &r.file,
                r.line,
                format!(
                    "`{}` comes from `{src}` instead of the package registry",
                    r.raw
                ),
            ),
            Constraint::Unconstrained => {
                f.fail(
                    &r.file,
                    r.line,
                    format!("`{}` has no version constraint", r.raw),
                );
            }
            Constraint::Range => f.warn(
                &r.file,
                r.line,
                format!(
                    "`{}` is a version range; an exact pin (`==`) is preferred",
                    r.raw
                ),
            ),
            Constraint::Exact => {}
        }
        if r.hashed == Some(false) && !matches!(r.constraint, Constraint::Direct(_)) {
            f.warn(&r.file, r.line, format!("`{}` has no `--hash`", r.raw));
        }
    }
    for (entry, file) in skill.parsed() {
        for spawn in spawns(file) {
            let Some(cmds) = &spawn.commands else {
                continue;
            };
            for install in shell::classify(cmds).install {
                f.fail(
                    &entry.rel,
                    Some(spawn.line),
                    format!("installs software at run time: {install}"),
                );
            }
        }
    }
    for (entry, text) in skill.shell_scripts() {
        for (i, l) in text.lines().enumerate() {
            if l.trim_start().starts_with('#') {
                continue;
            }
            for install in shell::classify(&shell::shell_commands(l)).install {
                f.fail(
                    &entry.rel,
                    u32::try_from(i + 1).ok(),
                    format!("installs software at run time: {install}"),
                );
            }
        }
    }
    let server = skill
        .deps
        .headers
        .iter()
        .find(|h| h.file == "mcp/server.py");
    if skill.entry("mcp/server.py").is_some() && server.is_none() {
        f.warn(
            "mcp/server.py",
            None,
            "no PEP 723 `# /// script` header: its dependencies are not declared with the script",
        );
    }
    if let Some(expected) = &ctx.expected_header_sha256 {
        match server {
            Some(h) if h.sha256.eq_ignore_ascii_case(expected) => {
                f.note(
                    &h.file,
                    Some(h.line),
                    "PEP 723 header matches the manifest digest",
                );
            }
            Some(h) => f.fail(
                &h.file,
                Some(h.line),
                format!(
                    "PEP 723 header digest {} differs from the manifest's {expected}",
                    h.sha256
                ),
            ),
            None => f.fail(
                "mcp/server.py",
                None,
                "the manifest lists a header digest but the server has no PEP 723 header",
            ),
        }
    }
    f.extend(&skill.deps.findings);
    f
}
