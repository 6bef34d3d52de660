//! The plain-text apply report, shared by the CLI and embedders.
//!
//! The engine never prints; it returns the lines and says where each belongs:
//! [`Channel::Note`] lines are status (the CLI writes them to stderr and hides them with
//! `--quiet`), [`Channel::Output`] lines are the result a script reads (diffs, on
//! stdout). `aibox apply` and `examples/embed.rs` print the same lines the same way.

use crate::apply::ApplyReport;

/// Where a line of the human report belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// Status for the person at the terminal (stderr; hidden by `--quiet`).
    Note,
    /// A warning, without its `warning: ` prefix (stderr; kept by `--quiet`, which
    /// drops status, not problems).
    Warning,
    /// The command's result (stdout): the diffs of a dry run.
    Output,
}

/// How to render an [`ApplyReport`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HumanOptions {
    /// The report is of `apply --check`: changed files are "stale".
    pub check: bool,
    /// List unchanged files too (`-v`).
    pub verbose: bool,
}

impl ApplyReport {
    /// The human report: a summary by default (the files whose previous contents were
    /// saved, warnings, then one line counting the files per action); one line per
    /// changed file when the run wrote nothing (`--dry-run`, `--check`) and every file
    /// when verbose, with diffs.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let root = camino::Utf8Path::from_path(dir.path()).unwrap();
    /// # fs_err::write(root.join("aibox.toml"), "[container]\nname = \"demo\"\n").unwrap();
    /// use aibox_engine::render::{Channel, HumanOptions};
    /// let report = aibox_engine::apply(root, &aibox_engine::ApplyOptions::default())?;
    /// let lines = report.render_human(HumanOptions::default());
    /// let (channel, summary) = lines.last().unwrap();
    /// assert_eq!(*channel, Channel::Note);
    /// assert!(summary.starts_with("created ") && summary.ends_with("file(s)"));
    /// # Ok::<(), aibox_engine::EngineError>(())
    /// ```
    pub fn render_human(&self, options: HumanOptions) -> Vec<(Channel, String)> {
        let mut lines = Vec::new();
        // A first install writes thousands of files: list them only when asked, or when
        // nothing was written and the list is the answer.
        let per_file = options.verbose || self.read_only;
        for f in &self.files {
            if (f.action.changes() && (per_file || f.backup().is_some())) || options.verbose {
                let verb = if options.check && f.action.changes() {
                    format!("stale ({})", f.action.as_str())
                } else if self.read_only {
                    format!("would be {}", f.action.as_str())
                } else {
                    f.action.as_str().to_owned()
                };
                lines.push((Channel::Note, format!("{verb:>22}  {}", f.path)));
            }
            if let Some(b) = f.backup() {
                lines.push((
                    Channel::Note,
                    format!("{:>22}  previous contents saved to {b}", ""),
                ));
            }
            if let Some(d) = f.diff() {
                lines.push((Channel::Output, d.trim_end().to_owned()));
            }
        }
        for warning in &self.warnings {
            lines.push((Channel::Warning, warning.clone()));
        }
        self.render_migrations(&mut lines);
        // The harness files name the servers' new locked environments at once; the image
        // that holds them comes with the next build (QA: every server of a running
        // container failed after an upgrade, and nothing said why).
        // What `up` does about it is what its digests say: a file only Compose reads
        // recreates the container, any other of the build context rebuilds the image.
        let (mut build, mut compose) = (false, false);
        for f in self.files.iter().filter(|f| f.action.changes()) {
            let path = f.path.as_str();
            if aibox_config::layout::read_by_compose_only(path) {
                compose = true;
            } else if path.starts_with(aibox_config::layout::DEVCONTAINER_DIR)
                && path != aibox_config::layout::DEVCONTAINER_JSON
            {
                build = true;
            }
        }
        if !self.read_only && build {
            lines.push((
                Channel::Note,
                "the container's files changed: `aibox up` rebuilds the image and recreates \
                 the container; one running now keeps the previous image until then (an MCP \
                 server whose locked environment changed does not start in it)"
                    .to_owned(),
            ));
        } else if !self.read_only && compose {
            lines.push((
                Channel::Note,
                "the container's settings changed: `aibox up` recreates the container with them"
                    .to_owned(),
            ));
        }
        let changed = self.files.iter().filter(|f| f.action.changes()).count();
        let summary = match (self.read_only, changed) {
            (_, 0) => "everything is up to date".to_owned(),
            (true, n) if options.check => format!(
                "{n} committed file(s) differ from what aibox.toml generates: run `aibox apply` \
                 and commit the result (local, gitignored files are not checked; the next apply \
                 creates them)"
            ),
            (true, n) => format!("{n} file(s) would change"),
            (false, n) => self.counts(n),
        };
        lines.push((Channel::Note, summary));
        lines
    }

    /// The processkit upgrade (counts, each conflict, the migration document) and the
    /// migrations still waiting for the user.
    fn render_migrations(&self, lines: &mut Vec<(Channel, String)>) {
        if let Some(u) = &self.upgrade {
            // A pin moved back is a downgrade, not an "upgrade" to an older version.
            let would = if self.read_only {
                format!("would {}", u.direction.verb())
            } else {
                u.direction.past().to_owned()
            };
            lines.push((
                Channel::Note,
                format!(
                    "processkit {would} {} → {}: {} changed, {} new, {} removed, {} local edit(s) \
                 kept, {} conflict(s)",
                    u.from_version,
                    u.to_version,
                    u.changed,
                    u.new,
                    u.removed,
                    u.kept_local_edits,
                    u.conflicts.len()
                ),
            ));
            // Conflicts and waiting migrations ask something of the user: warnings, which
            // `--quiet` keeps.
            for c in &u.conflicts {
                lines.push((
                    Channel::Warning,
                    format!(
                        "conflict: {} (yours kept; the new version is in {})",
                        c.path, c.upstream_copy
                    ),
                ));
            }
            if let Some(d) = &u.migration_document {
                lines.push((Channel::Note, format!("  migration document: {d}")));
            }
        }
        let written = self
            .upgrade
            .as_ref()
            .and_then(|u| u.migration_document.as_deref());
        // The migration this run wrote was just described; the others still wait.
        for p in self
            .pending_migrations
            .iter()
            .filter(|p| Some(p.document.as_str()) != written)
        {
            let what = match (p.open_conflicts.len(), &p.installed_version) {
                (n, Some(installed)) => format!(
                    "stale: made for {}, but {installed} is installed ({n} open conflict(s)); \
                     close it with `aibox migrate resolve {id} --take ours` (keeps your files), \
                     or delete it",
                    p.to_version.as_deref().unwrap_or("?"),
                    id = p.id
                ),
                (0, None) => {
                    "no open conflict; review it, then mark it done with `aibox migrate resolve \
                      ID`"
                    .replace("ID", &p.id)
                }
                (n, None) => format!(
                    "{n} open conflict(s): {}; `aibox migrate show {id}` shows the versions, \
                     `aibox migrate resolve {id} --take ours|theirs|base` settles them",
                    p.open_conflicts.join(", "),
                    id = p.id
                ),
            };
            lines.push((
                Channel::Warning,
                format!("pending migration {} ({}): {what}", p.id, p.document),
            ));
        }
    }

    /// The summary of a run that wrote `total` files: `created 11 file(s)`, or per action
    /// and the total (`created 2, updated 3: 5 file(s) written`).
    fn counts(&self, total: usize) -> String {
        let mut counts: Vec<(crate::apply::FileAction, usize)> = Vec::new();
        for f in self.files.iter().filter(|f| f.action.changes()) {
            match counts.iter_mut().find(|(a, _)| *a == f.action) {
                Some((_, n)) => *n += 1,
                None => counts.push((f.action, 1)),
            }
        }
        counts.sort_by_key(|(a, _)| *a as u8);
        if let [(action, n)] = counts.as_slice() {
            return format!("{} {n} file(s)", action.as_str());
        }
        let parts: Vec<String> = counts
            .iter()
            .map(|(a, n)| format!("{} {n}", a.as_str()))
            .collect();
        format!("{}: {total} file(s) written", parts.join(", "))
    }
}
