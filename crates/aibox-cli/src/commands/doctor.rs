//! `aibox doctor [--integrity|--processkit] [--report FILE] [--check-updates|--no-update-check]`: the diagnosis of
//! `aibox_engine::doctor`; exit 1 when it found errors.

use aibox_engine::doctor::Severity;
use aibox_engine::updates::UpdateCheck;
use camino::Utf8Path;

use super::{Outcome, json_or, project_root};
use crate::args::{DoctorArgs, Global};
use crate::exit::Exit;
use crate::render;

pub fn run(g: &Global, args: &DoctorArgs) -> Outcome {
    let root = project_root(g)?;
    if args.integrity {
        return integrity(g, &root);
    }
    let update_check = if args.check_updates {
        UpdateCheck::Always
    } else if args.no_update_check {
        UpdateCheck::Never
    } else {
        UpdateCheck::Auto
    };
    let options = aibox_engine::doctor::DoctorOptions {
        update_check,
        processkit: args.processkit,
        ..aibox_engine::doctor::DoctorOptions::default()
    };
    let report = aibox_engine::doctor::doctor(&root, &options)?;
    if let Some(path) = &args.report {
        aibox_engine::doctor::write_report(&root, &report, path)?;
        render::note(
            g.quiet,
            &format!(
                "wrote {path}; it is redacted, but read it before you attach it anywhere public"
            ),
        );
    }
    json_or(g, &report, || {
        if g.quiet {
            quiet_report(&report);
        } else {
            render::out(report.render_human().trim_end());
        }
    })?;
    Ok(if report.has_errors() {
        Exit::Problems
    } else {
        Exit::Ok
    })
}

/// `--quiet`: only the errors and warnings, as the full report words them; nothing when
/// there are none (the exit code still says whether errors were found).
fn quiet_report(report: &aibox_engine::doctor::DoctorReport) {
    for severity in [Severity::Error, Severity::Warning] {
        for finding in report.by_severity(severity) {
            for (i, line) in finding.to_string().lines().enumerate() {
                render::out(&format!("{}{line}", if i == 0 { "" } else { "  " }));
            }
        }
    }
}

fn integrity(g: &Global, root: &Utf8Path) -> Outcome {
    let report = aibox_engine::integrity(root.as_std_path())?;
    json_or(g, &report, || {
        // The files that are wrong, then (not with `--quiet`) the user's own edits.
        let wrong = [
            ("modified", &report.modified),
            ("missing", &report.missing),
            ("unexpected", &report.unexpected),
            (
                "snapshot differs from the release",
                &report.snapshot_modified,
            ),
        ];
        // `--quiet`: only the files that are wrong, no status line or user edits.
        if g.quiet {
            for (label, files) in wrong {
                for f in files {
                    render::out(&format!("{label}: {f}"));
                }
            }
            return;
        }
        let status = serde_json::to_value(report.status)
            .ok()
            .and_then(|v| v.as_str().map(ToOwned::to_owned))
            .unwrap_or_default();
        render::out(&format!(
            "processkit integrity: {status} ({} files checked)",
            report.checked
        ));
        if let Some(fix) = report.status.fix() {
            render::out(&format!("  fix: {fix}"));
        }
        if let Some(v) = &report.lock_version {
            render::out(&format!(
                "  version: lock {v}, marker {}",
                report.marker_version.as_deref().unwrap_or("-")
            ));
        }
        let own = [("edited (user-owned, fine)", &report.user_modified)];
        for (label, files) in wrong.into_iter().chain(own) {
            for f in files {
                render::out(&format!("  {label}: {f}"));
            }
        }
    })?;
    Ok(if report.exit_code() == 0 {
        Exit::Ok
    } else {
        Exit::Problems
    })
}
