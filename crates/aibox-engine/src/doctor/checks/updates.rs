//! The `updates` check: whether a newer aibox release exists (see [`crate::updates`]).
//! Asked only when [`crate::updates::when_to_ask`] allows it (or `--check-updates`), and
//! unasked at most once a day ([`crate::updates::latest_release_daily`]); an unreachable
//! feed is a skip, never a finding, so an offline machine sees nothing.

use aibox_policy::{Finding, Severity};

use super::super::DoctorOptions;
use super::super::report::Run;
use crate::updates::{self, UpdateCheck, UpdateStatus};

/// `project` (at `root`, when it loaded) gives the personal extra CA the request trusts.
pub(crate) fn check(
    run: &mut Run,
    options: &DoctorOptions,
    (root, project): (&camino::Utf8Path, Option<&aibox_config::Project>),
) {
    const NAME: &str = "updates";
    // Read only when the feed is asked.
    let extra_ca = || project.and_then(|p| crate::config_check::http_extra_ca(root, &p.local));
    let url = updates::feed_url(&options.environment);
    let latest = match options.update_check {
        UpdateCheck::Never => return run.skip(NAME, "not asked"),
        UpdateCheck::Auto => {
            if let Err(why) = updates::when_to_ask(&options.environment) {
                return run.skip(NAME, &why);
            }
            // Unasked: the day's answer from the user's cache directory, if any.
            let cache = options.cache_dir.as_ref().map_or_else(
                || aibox_provenance::Cache::default_location().map(|c| c.root().to_owned()),
                |d| Some(d.as_std_path().to_owned()),
            );
            updates::latest_release_daily(
                &url,
                cache.as_deref(),
                std::time::SystemTime::now(),
                extra_ca(),
            )
        }
        // Asked for: always the feed itself.
        UpdateCheck::Always => updates::latest_release(&url, extra_ca()),
    };
    let status = latest.and_then(|latest| updates::assess(&options.cli_version, latest));
    match status {
        Err(e) => run.skip(NAME, &format!("newest release unknown: {e}")),
        Ok(status) => {
            let message = status.message(&options.cli_version);
            let finding = |code: &str, severity| {
                Finding::new(
                    code,
                    severity,
                    "aibox",
                    message.clone(),
                    format!(
                        "update: `{}` (or `cargo install --locked --git \
                         https://github.com/projectious-work/aibox aibox-cli`)",
                        updates::INSTALL_HINT
                    ),
                )
            };
            let findings = match status {
                UpdateStatus::Current => Vec::new(),
                UpdateStatus::PatchAvailable { .. } => {
                    vec![finding(
                        "aibox::doctor::update_available",
                        Severity::Warning,
                    )]
                }
                UpdateStatus::Unsupported { .. } => {
                    vec![finding(
                        "aibox::doctor::unsupported_version",
                        Severity::Warning,
                    )]
                }
                UpdateStatus::Ahead { .. } => vec![Finding::new(
                    "aibox::doctor::development_build",
                    Severity::Info,
                    "aibox",
                    message.clone(),
                    "nothing to do",
                )],
            };
            run.check(NAME, findings);
        }
    }
}
