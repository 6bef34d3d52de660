//! The `local-state` check: personal local state is gitignored and not tracked.

use aibox_policy::{Finding, Severity};
use std::collections::BTreeSet;

use camino::Utf8Path;

use crate::doctor::report::Run;

/// Local state that must be gitignored and untracked (glob entries are left to git).
fn local_state_paths() -> impl Iterator<Item = &'static str> {
    aibox_config::LOCAL_STATE_PATHS
        .iter()
        .copied()
        .filter(|p| !p.contains('*'))
}

/// The pattern entries of local state (`context/**/private/`), each with the pathspec
/// that makes `git ls-files` list what lies below a match (a plain pathspec would take
/// the `*` as a wildcard that never matches the trailing `/`).
fn local_state_patterns() -> impl Iterator<Item = (&'static str, String)> {
    aibox_config::LOCAL_STATE_PATHS
        .iter()
        .copied()
        .filter(|p| p.contains('*'))
        .map(|p| (p, format!(":(glob){p}**")))
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
    // Two `git` processes for all paths, not two per path: each start costs a few
    // milliseconds, and doctor checked about a dozen paths.
    let paths: Vec<&str> = local_state_paths().collect();
    let patterns: Vec<(&str, String)> = local_state_patterns().collect();
    let ignored = ignored_paths(root, &paths);
    let mut specs = paths.clone();
    specs.extend(patterns.iter().map(|(_, spec)| spec.as_str()));
    let tracked = tracked_files(root, &specs);
    let mut findings = Vec::new();
    // A tracked file under a pattern is named itself: the pattern is no path to `git rm`.
    // (One a plain entry also covers is reported under that entry below.)
    for file in tracked
        .iter()
        .filter(|f| !paths.iter().any(|p| covers(p, f)))
    {
        if let Some((pattern, _)) = patterns
            .iter()
            .find(|(p, _)| aibox_config::layout::covers(p, file))
        {
            findings.push(Finding::new(
                "aibox::doctor::local_state_tracked",
                Severity::Error,
                file.as_str(),
                format!(
                    "`{file}` is tracked by git although it holds personal local state \
                     (`{pattern}`)"
                ),
                format!("run `git rm --cached {file}` and commit; rotate any token it contained"),
            ));
        }
    }
    for path in paths {
        match &ignored {
            Some(ignored) if ignored.contains(path) => {}
            Some(_) => findings.push(Finding::new(
                "aibox::doctor::local_state_not_ignored",
                Severity::Error,
                ".gitignore",
                format!("`{path}` (personal local state) is not gitignored"),
                format!(
                    "add `{path}` to .gitignore (`aibox apply` adds missing entries); a `!` line \
                     that makes git track it again is yours to delete"
                ),
            )),
            None => findings.push(Finding::new(
                "aibox::doctor::git_failed",
                Severity::Warning,
                ".gitignore",
                format!("`git check-ignore {path}` failed"),
                "run it by hand to see why",
            )),
        }
        if tracked.iter().any(|f| covers(path, f)) {
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

/// Which of `paths` git ignores, from one `git check-ignore` call (it prints the ignored
/// ones as given); `None` when git fails.
fn ignored_paths(root: &Utf8Path, paths: &[&str]) -> Option<BTreeSet<String>> {
    let mut args = vec!["check-ignore", "--no-index", "--"];
    args.extend_from_slice(paths);
    let out = git(root, &args)?;
    // check-ignore: 0 = some ignored, 1 = none ignored, 128 = fatal.
    match out.status.code() {
        Some(0 | 1) => Some(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_owned)
                .collect(),
        ),
        _ => None,
    }
}

/// The tracked files below any of `paths`, from one `git ls-files` call (none when git
/// fails).
fn tracked_files(root: &Utf8Path, paths: &[&str]) -> Vec<String> {
    let mut args = vec!["ls-files", "-z", "--"];
    args.extend_from_slice(paths);
    git(root, &args)
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split('\0')
                .filter(|f| !f.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the tracked `file` is the pathspec `path` or lies below it (a pathspec with
/// a trailing `/` names a directory only). This reads `git ls-files`' answer as git
/// reads a pathspec, not as the file table reads its paths (`aibox_config::layout::covers`):
/// a file entry also names a folder of that name, which the `.gitignore` line ignores
/// as a whole, so doctor reports what is tracked inside it.
fn covers(path: &str, file: &str) -> bool {
    let dir = path.trim_end_matches('/');
    (!path.ends_with('/') && file == path)
        || file
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::covers;

    #[test]
    fn a_pathspec_covers_itself_and_what_lies_below_it() {
        assert!(covers(".aibox-local.toml", ".aibox-local.toml"));
        assert!(!covers(".aibox-local.toml", ".aibox-local.toml.bak"));
        assert!(covers(".aibox-home/", ".aibox-home/x/y"));
        assert!(!covers(".aibox-home/", ".aibox-home"));
        assert!(!covers(".aibox-home/", ".aibox-homes/x"));
        assert!(covers(".env", ".env/inner"));
    }
}
