//! The `integrity` check: the installed processkit content against its records.

use aibox_policy::{Finding, Severity};
use camino::Utf8Path;

/// The integrity summary: drift of the installed processkit content is a warning here,
/// so plain `doctor` sees what `doctor --integrity` lists file by file. The installed
/// files' digests come from the scan of `resolved` (which trusts the stat cache for
/// unchanged files, as planning does); only what it did not see is hashed, so plain
/// `doctor` does not read the whole tree a second time. `--integrity` re-hashes all.
pub(crate) fn findings(
    root: &Utf8Path,
    resolved: Option<&Result<crate::resolve::Resolved, crate::error::EngineError>>,
) -> Vec<Finding> {
    use aibox_provenance::IntegrityStatus;
    let scan = match resolved {
        Some(Ok(r)) => match &r.processkit {
            crate::resolve::ProcesskitState::Resolved(release) => Some(&release.scan),
            _ => None,
        },
        _ => None,
    };
    // The scan's marker and live states when there is one, so the marker is parsed once.
    let report = match scan {
        Some(scan) => aibox_provenance::integrity_scanned(root.as_std_path(), scan),
        None => aibox_provenance::integrity_known(
            root.as_std_path(),
            &aibox_provenance::SharedPathTable::new(),
        ),
    };
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            return vec![Finding::new(
                "aibox::doctor::integrity_unreadable",
                Severity::Warning,
                "aibox.lock",
                format!("the processkit integrity check cannot run: {e}"),
                "run `aibox doctor --integrity` for details",
            )];
        }
    };
    let problem = match report.status {
        IntegrityStatus::NotInstalled | IntegrityStatus::Healthy => return Vec::new(),
        IntegrityStatus::Interrupted => "an `aibox apply` did not finish; run `aibox apply`",
        IntegrityStatus::Unverified => "installed without verification",
        IntegrityStatus::MissingMarker => "the live marker is missing",
        IntegrityStatus::VersionMismatch => "lock, marker and snapshot disagree on the version",
        IntegrityStatus::MissingSnapshot => "the snapshot of the installed version is missing",
        IntegrityStatus::Drifted if report.snapshot_differing == drifted(&report) => {
            "the snapshot differs from the verified release"
        }
        IntegrityStatus::Drifted => "installed files were modified, deleted or added",
    };
    let mut fix = "`aibox doctor --integrity` lists the files; aibox never undoes a local \
                   change: an edited skill is third-party (reviewed and gated), a deleted \
                   file stays deleted and a skill whose server script is gone is registered \
                   nowhere; copy a file back from `context/templates/processkit/<version>/` \
                   to restore it, or `aibox skill disable NAME` to drop a skill; a snapshot \
                   that differs is written again by `aibox apply` once you delete its folder"
        .to_owned();
    if let Some(bytecode) = bytecode_fix(&report.unexpected) {
        fix.push_str("; ");
        fix.push_str(&bytecode);
    }
    vec![Finding::new(
        "aibox::doctor::integrity",
        Severity::Warning,
        "context/",
        format!(
            "processkit content: {problem} ({} modified, {} missing, {} unexpected, {} in the \
             snapshot of {} checked)",
            report.modified.len(),
            report.missing.len(),
            report.unexpected.len(),
            report.snapshot_differing,
            report.checked
        ),
        fix,
    )]
}

/// What to do about the Python bytecode among the `unexpected` files, if any: written
/// where the scripts ran without `PYTHONPYCACHEPREFIX` (on the host, or in a container
/// built before aibox set it), it is derived and safe to delete.
fn bytecode_fix(unexpected: &[String]) -> Option<String> {
    // One folder per bytecode file: the count is the files', the set the folders'.
    let per_file: Vec<&str> = unexpected
        .iter()
        .filter_map(|p| crate::skills::bytecode_dir(p))
        .collect();
    let files = per_file.len();
    let dirs: std::collections::BTreeSet<&str> = per_file.into_iter().collect();
    let first = dirs.first()?;
    let more = match dirs.len() {
        1 => String::new(),
        n => format!(" (and {} more such folder(s))", n - 1),
    };
    Some(format!(
        "{files} of the unexpected files are Python bytecode, written when the scripts ran \
         on the host or in a container built before aibox set PYTHONPYCACHEPREFIX: delete \
         the `__pycache__` folders, for example `rm -rf {first}`{more}"
    ))
}

/// Every drifted file the report names.
fn drifted(report: &aibox_provenance::IntegrityReport) -> usize {
    report.modified.len()
        + report.missing.len()
        + report.unexpected.len()
        + report.snapshot_differing
}
