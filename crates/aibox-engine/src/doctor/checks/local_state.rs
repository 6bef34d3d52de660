//! The `local-state` check: personal local state is gitignored and not tracked.

use aibox_policy::{Finding, Severity};
use camino::Utf8Path;

use crate::doctor::report::Run;

/// Local state that must be gitignored and untracked (glob entries are left to git).
pub(crate) fn local_state_paths() -> impl Iterator<Item = &'static str> {
    aibox_config::LOCAL_STATE_PATHS
        .iter()
        .copied()
        .filter(|p| !p.contains('*'))
}

fn git(root: &Utf8Path, args: &[&str]) -> Option<std::process::Output> {
    crate::doctor::git::git(root, args, crate::doctor::git::GIT_TIMEOUT)
}

/// The personal files that may hold tokens, with who writes them.
const PERSONAL_FILES: [(&str, &str); 3] = [
    (aibox_config::LOCAL_TOML, "aibox config set --local"),
    (aibox_config::layout::LOCAL_ENV, "aibox apply"),
    (aibox_config::layout::COMPOSE_LOCAL, "aibox apply"),
];

/// The `personal-files` check: personal files that others on this machine can read.
pub(crate) fn permission_findings(root: &Utf8Path) -> Vec<Finding> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut findings = Vec::new();
    for (rel, writer) in PERSONAL_FILES {
        let Ok(meta) = fs_err::symlink_metadata(root.join(rel)) else {
            continue;
        };
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_file() && mode & 0o077 != 0 {
            findings.push(Finding::new(
                "aibox::doctor::personal_file_readable",
                Severity::Warning,
                rel,
                format!(
                    "`{rel}` holds personal values (tokens, paths) but is readable by others \
                     on this machine (mode {mode:04o})"
                ),
                format!("run `chmod 600 {rel}` (`{writer}` writes it 0600)"),
            ));
        }
    }
    findings
}

/// Runs the check.
pub(crate) fn check(run: &mut Run, root: &Utf8Path) {
    let Some(probe) = git(root, &["rev-parse", "--show-toplevel"]) else {
        run.check(
            "local-state",
            vec![Finding::new(
                "aibox::doctor::git_unavailable",
                Severity::Warning,
                "",
                "`git` could not be run (or did not answer in time), so doctor cannot tell whether \
                 local state is ignored",
                "install git, or check `.gitignore` by hand",
            )],
        );
        return;
    };
    if !probe.status.success() {
        run.skip("local-state", "not a git repository");
        return;
    }
    let mut findings = Vec::new();
    for path in local_state_paths() {
        // check-ignore: 0 = ignored, 1 = not ignored, 128 = fatal.
        let ignored = git(root, &["check-ignore", "-q", "--no-index", "--", path]);
        match ignored.as_ref().and_then(|o| o.status.code()) {
            Some(0) => {}
            Some(1) => findings.push(Finding::new(
                "aibox::doctor::local_state_not_ignored",
                Severity::Error,
                ".gitignore",
                format!("`{path}` (personal local state) is not gitignored"),
                format!("add `{path}` to .gitignore (`aibox apply` adds missing entries)"),
            )),
            _ => findings.push(Finding::new(
                "aibox::doctor::git_failed",
                Severity::Warning,
                ".gitignore",
                format!("`git check-ignore {path}` failed"),
                "run it by hand to see why",
            )),
        }
        let tracked = git(root, &["ls-files", "--", path])
            .is_some_and(|o| o.status.success() && !o.stdout.trim_ascii().is_empty());
        if tracked {
            findings.push(Finding::new(
                "aibox::doctor::local_state_tracked",
                Severity::Error,
                path,
                format!("`{path}` is tracked by git although it holds personal local state"),
                format!(
                    "run `git rm -r --cached {path}` and commit; rotate any token it contained"
                ),
            ));
        }
    }
    run.check("local-state", findings);
}
