//! The `migrations` check: processkit migrations waiting for the user, each with its
//! open conflicts (`aibox migrate` works through them).

use aibox_policy::{Finding, Severity};
use camino::Utf8Path;

/// One warning per pending (or started) migration, stale or not, and per unreadable
/// document.
pub(crate) fn findings(root: &Utf8Path) -> Vec<Finding> {
    let listing = match crate::migrate::list(root) {
        Ok(l) => l,
        Err(e) => {
            return vec![Finding::new(
                "aibox::doctor::migration_unreadable",
                Severity::Warning,
                aibox_provenance::migration::PENDING_DIR,
                format!("the pending migrations cannot be read: {e}"),
                "run `aibox migrate list` for details",
            )];
        }
    };
    let mut out = Vec::new();
    for m in &listing.migrations {
        let open: Vec<&str> = m.open().map(|c| c.path.as_str()).collect();
        let versions = match (&m.from_version, &m.to_version) {
            (Some(from), Some(to)) => format!(" (processkit {from} → {to})"),
            _ => String::new(),
        };
        if let Some(installed) = &m.installed_version {
            out.push(Finding::new(
                "aibox::doctor::stale_migration",
                Severity::Warning,
                m.document.as_str(),
                format!(
                    "migration {}{versions} is stale: {installed} is installed now, and its \
                     parked versions are files of {} ({} open conflict(s))",
                    m.id,
                    m.to_version.as_deref().unwrap_or("another release"),
                    open.len()
                ),
                format!(
                    "keep your files and close it with `aibox migrate resolve {} --take ours`, \
                     or delete {} and its parked copies; `--take theirs|base` is refused",
                    m.id, m.document
                ),
            ));
            continue;
        }
        let (message, help) = if open.is_empty() {
            (
                format!(
                    "migration {}{versions} is {} with no open conflict",
                    m.id, m.state
                ),
                format!(
                    "read {} and mark it done with `aibox migrate resolve {}`",
                    m.document, m.id
                ),
            )
        } else {
            (
                format!(
                    "migration {}{versions} is {} with {} open conflict(s): {}",
                    m.id,
                    m.state,
                    open.len(),
                    open.join(", ")
                ),
                format!(
                    "`aibox migrate show {id}` shows the three versions of each file; settle them \
                     with `aibox migrate resolve {id} --take ours|theirs|base` or `--edited` \
                     after merging by hand",
                    id = m.id
                ),
            )
        };
        out.push(Finding::new(
            "aibox::doctor::pending_migration",
            Severity::Warning,
            m.document.as_str(),
            message,
            help,
        ));
    }
    for (path, reason) in &listing.unreadable {
        out.push(Finding::new(
            "aibox::doctor::migration_unreadable",
            Severity::Warning,
            path.as_str(),
            format!("the migration document cannot be read: {reason}"),
            "fix its YAML front matter, or move it out of `context/migrations/` if it is not one",
        ));
    }
    out
}
