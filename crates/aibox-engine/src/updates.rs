//! Staying current: whether a newer aibox release exists, read from the forge's releases
//! feed (GitHub's `GET /repos/{owner}/{repo}/releases/latest`), and what the support policy
//! ("fixes land only on the newest minor release line", `SECURITY.md`) means for the
//! running version.
//!
//! [`assess`] is pure; [`latest_release`] is the one request (short timeouts, small size
//! cap, `https://` or loopback `http://` only, through `aibox_provenance::fetch`).
//! [`when_to_ask`] decides whether an unasked check (doctor's) may go to the network: not
//! in CI (`CI` set), not when `AIBOX_NO_UPDATE_CHECK` is set; `aibox self check` always asks.
//! An unasked check asks at most once a day: [`latest_release_daily`] records the answer
//! (or the failure) in the user's cache directory and reuses it for a day.
//! The feed's base is `AIBOX_GITHUB_API` (default `https://api.github.com`), so tests point
//! it at a loopback server.

use std::time::Duration;

use aibox_config::ErrorKind;
use aibox_provenance::HttpOptions;
use miette::Diagnostic;
use serde::Serialize;

/// The repository whose releases are aibox's.
pub const REPOSITORY: &str = "projectious-work/aibox";
/// The forge API's default base.
pub const DEFAULT_API: &str = aibox_provenance::releases::GITHUB_API;
/// The one-line install, shown when an update is due.
pub const INSTALL_HINT: &str = "curl -fsSL https://raw.githubusercontent.com/projectious-work/aibox/main/scripts/install.sh | sh";

/// Whether an update check goes to the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UpdateCheck {
    /// Unless [`when_to_ask`] says no (CI, `AIBOX_NO_UPDATE_CHECK`).
    #[default]
    Auto,
    /// Always (asked for explicitly).
    Always,
    /// Never.
    Never,
}

/// A release as the feed describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Release {
    /// The version (`X.Y.Z`, the tag without its `v`).
    pub version: String,
    /// The release's page.
    pub url: String,
}

/// The running version against the newest release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum UpdateStatus {
    /// This is the newest release.
    Current,
    /// A newer patch on the same minor line: fixes this version does not have.
    PatchAvailable {
        /// The newest release.
        latest: Release,
    },
    /// A newer minor or major line: this version's line no longer gets fixes.
    Unsupported {
        /// The newest release.
        latest: Release,
    },
    /// This version is newer than the newest release (a development build).
    Ahead {
        /// The newest release.
        latest: Release,
    },
}

impl UpdateStatus {
    /// One sentence for the user, the support policy's meaning included.
    pub fn message(&self, current: &str) -> String {
        match self {
            Self::Current => format!("aibox {current} is the newest release"),
            Self::PatchAvailable { latest } => format!(
                "aibox {} is out ({}); it carries fixes for your {} line that {current} lacks",
                latest.version,
                latest.url,
                line(current)
            ),
            Self::Unsupported { latest } => format!(
                "aibox {} is out ({}); your {} line ({current}) gets no more fixes, not even \
                 security fixes: only the newest minor line ({}) is supported",
                latest.version,
                latest.url,
                line(current),
                line(&latest.version)
            ),
            Self::Ahead { latest } => format!(
                "aibox {current} is newer than the newest release {} (a development build)",
                latest.version
            ),
        }
    }

    /// Whether the user should update.
    pub fn update_due(&self) -> bool {
        matches!(self, Self::PatchAvailable { .. } | Self::Unsupported { .. })
    }
}

fn line(v: &str) -> String {
    parse(v).map_or_else(|| v.to_owned(), |(a, b, _)| format!("{a}.{b}"))
}

/// `X.Y.Z` (an optional `v`, any pre-release or build suffix on the patch ignored).
fn parse(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.trim().trim_start_matches('v').splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next()?;
    let digits: String = patch.chars().take_while(char::is_ascii_digit).collect();
    Some((major, minor, digits.parse().ok()?))
}

/// The running version `current` against `latest`.
///
/// # Errors
/// When either is not `X.Y.Z`.
pub fn assess(current: &str, latest: Release) -> Result<UpdateStatus, UpdateError> {
    let bad = |v: &str| UpdateError::BadVersion {
        version: v.chars().take(40).collect(),
    };
    let have = parse(current).ok_or_else(|| bad(current))?;
    let newest = parse(&latest.version).ok_or_else(|| bad(&latest.version))?;
    Ok(if have == newest {
        UpdateStatus::Current
    } else if have > newest {
        UpdateStatus::Ahead { latest }
    } else if (have.0, have.1) == (newest.0, newest.1) {
        UpdateStatus::PatchAvailable { latest }
    } else {
        UpdateStatus::Unsupported { latest }
    })
}

/// Whether an unasked check may go to the network, given the process environment; the
/// reason when not.
pub fn when_to_ask(environment: &[(String, String)]) -> Result<(), String> {
    let set = |name: &str| {
        environment
            .iter()
            .any(|(k, v)| k == name && !v.is_empty() && v != "0" && v != "false")
    };
    if set("AIBOX_NO_UPDATE_CHECK") {
        Err("AIBOX_NO_UPDATE_CHECK is set".to_owned())
    } else if set("CI") {
        Err("running in CI (`CI` is set); `aibox self check` asks anyway".to_owned())
    } else {
        Ok(())
    }
}

/// The feed URL: `AIBOX_GITHUB_API` (from `environment`) or [`DEFAULT_API`], then
/// `/repos/<REPOSITORY>/releases/latest`.
pub fn feed_url(environment: &[(String, String)]) -> String {
    let base = environment
        .iter()
        .find(|(k, v)| k == aibox_provenance::releases::API_URL_ENV && !v.is_empty())
        .map_or(DEFAULT_API, |(_, v)| v.as_str());
    format!(
        "{}/repos/{REPOSITORY}/releases/latest",
        base.trim_end_matches('/')
    )
}

/// Asks the feed at `url` for the newest release. Short timeouts: an unreachable forge
/// must not hold up `doctor`.
///
/// # Errors
/// [`UpdateError::Unreachable`] when the request fails (offline, refused, not found,
/// timed out); [`UpdateError::BadFeed`] when the answer is not a release.
pub fn latest_release(
    url: &str,
    extra_ca: Option<std::sync::Arc<str>>,
) -> Result<Release, UpdateError> {
    let opts = HttpOptions {
        connect_timeout: Duration::from_secs(3),
        read_timeout: Duration::from_secs(5),
        overall_timeout: Duration::from_secs(10),
        max_bytes: 1024 * 1024,
        max_redirects: 3,
        extra_ca_pem: extra_ca,
    };
    let got = aibox_provenance::fetch::download(url, &opts, None).map_err(|e| {
        UpdateError::Unreachable {
            url: url.to_owned(),
            reason: e.to_string(),
        }
    })?;
    parse_feed(url, &got.bytes)
}

/// How long an unasked check reuses the feed's last answer: at most one request a day.
pub const CHECK_INTERVAL: Duration = Duration::from_hours(24);

/// The file in the user's cache directory (`$XDG_CACHE_HOME/aibox/`, else
/// `~/.cache/aibox/`) that records the last unasked check.
pub const CHECK_RECORD: &str = "update-check.json";

/// The last unasked check: which feed, when (seconds since the epoch), and its answer or
/// why there was none.
#[derive(Debug, Serialize, serde::Deserialize)]
struct CheckRecord {
    url: String,
    checked: u64,
    latest: Option<Release>,
    failure: Option<String>,
}

/// The newest release for an unasked check (doctor's): the answer recorded in
/// `cache_dir` by a check of the same feed less than [`CHECK_INTERVAL`] before `now`,
/// else one request ([`latest_release`]) whose outcome, answer or failure, is recorded
/// for the next day (best effort: an unwritable cache only means asking again). So a
/// user who runs `doctor` all day, or offline, waits for the forge once a day at most.
///
/// # Errors
/// As [`latest_release`]; a failure recorded within the day is
/// [`UpdateError::Unreachable`] again, saying so.
pub fn latest_release_daily(
    url: &str,
    cache_dir: Option<&std::path::Path>,
    now: std::time::SystemTime,
    extra_ca: Option<std::sync::Arc<str>>,
) -> Result<Release, UpdateError> {
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let record = cache_dir.map(|d| d.join(CHECK_RECORD));
    let recent = record
        .as_deref()
        .and_then(|f| fs_err::read(f).ok())
        .and_then(|bytes| serde_json::from_slice::<CheckRecord>(&bytes).ok())
        .filter(|r| {
            r.url == url
                && secs
                    .checked_sub(r.checked)
                    .is_some_and(|age| age < CHECK_INTERVAL.as_secs())
        });
    if let Some(r) = recent {
        return r.latest.ok_or_else(|| UpdateError::Unreachable {
            url: url.to_owned(),
            reason: format!(
                "{} (asked less than a day ago; `--check-updates` asks again)",
                r.failure.unwrap_or_default()
            ),
        });
    }
    let answer = latest_release(url, extra_ca);
    if let Some(file) = record {
        let r = CheckRecord {
            url: url.to_owned(),
            checked: secs,
            latest: answer.as_ref().ok().cloned(),
            // The reason alone: the error is rebuilt around it (with the feed's URL)
            // when the record is reused, so the URL is not said twice.
            failure: answer.as_ref().err().map(|e| match e {
                UpdateError::Unreachable { reason, .. } => reason.clone(),
                other => other.to_string(),
            }),
        };
        // Best effort: a cache that cannot be written only means asking again next run.
        let _ = write_record(&file, &r);
    }
    answer
}

/// Writes `record` to `file` whole (a temporary file renamed over it), so two runs at
/// once never leave half a record.
fn write_record(file: &std::path::Path, record: &CheckRecord) -> std::io::Result<()> {
    let dir = file.parent().unwrap_or_else(|| std::path::Path::new("."));
    fs_err::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{CHECK_RECORD}.{}.tmp", std::process::id()));
    fs_err::write(
        &tmp,
        serde_json::to_vec(record).map_err(std::io::Error::other)?,
    )?;
    fs_err::rename(&tmp, file)
}

/// A release from the feed's JSON (`tag_name`, `html_url`; drafts and pre-releases are
/// not offered as updates).
fn parse_feed(url: &str, body: &[u8]) -> Result<Release, UpdateError> {
    let bad = |reason: &str| UpdateError::BadFeed {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let json: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| bad(&format!("not JSON: {e}")))?;
    if json["draft"].as_bool() == Some(true) || json["prerelease"].as_bool() == Some(true) {
        return Err(bad("the newest release is a draft or pre-release"));
    }
    let tag = json["tag_name"]
        .as_str()
        .ok_or_else(|| bad("no `tag_name`"))?;
    let version = tag.trim_start_matches('v');
    if parse(version).is_none() {
        return Err(bad(&format!(
            "`tag_name` {:?} is not vX.Y.Z",
            tag.chars().take(40).collect::<String>()
        )));
    }
    let page = json["html_url"]
        .as_str()
        .filter(|u| u.starts_with("https://") && u.len() < 300 && !u.contains(char::is_whitespace))
        .map_or_else(
            || format!("https://github.com/{REPOSITORY}/releases/tag/v{version}"),
            ToOwned::to_owned,
        );
    Ok(Release {
        version: version.to_owned(),
        url: page,
    })
}

/// Why the newest release is unknown.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum UpdateError {
    /// The feed could not be read.
    #[error("cannot read the releases feed {url}: {reason}")]
    #[diagnostic(
        code(aibox::updates::unreachable),
        help("check the network; AIBOX_GITHUB_API names another forge API base")
    )]
    Unreachable {
        /// The feed.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The feed answered with something that is not a release.
    #[error("the releases feed {url} did not describe a release: {reason}")]
    #[diagnostic(
        code(aibox::updates::bad_feed),
        help("see https://github.com/projectious-work/aibox/releases")
    )]
    BadFeed {
        /// The feed.
        url: String,
        /// What was wrong.
        reason: String,
    },
    /// A version is not `X.Y.Z`.
    #[error("`{version}` is not a version (X.Y.Z)")]
    #[diagnostic(code(aibox::updates::bad_version))]
    BadVersion {
        /// The version, shortened.
        version: String,
    },
}

impl UpdateError {
    /// Who can fix it.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Environment
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(v: &str) -> Release {
        Release {
            version: v.to_owned(),
            url: format!("https://example.invalid/v{v}"),
        }
    }

    #[test]
    fn the_running_version_is_placed_against_the_newest_line() {
        assert_eq!(
            assess("0.2.1", rel("0.2.1")).unwrap(),
            UpdateStatus::Current
        );
        assert!(matches!(
            assess("0.2.1", rel("0.2.3")).unwrap(),
            UpdateStatus::PatchAvailable { .. }
        ));
        let old = assess("0.2.9", rel("0.3.0")).unwrap();
        assert!(matches!(old, UpdateStatus::Unsupported { .. }));
        let msg = old.message("0.2.9");
        assert!(
            msg.contains("your 0.2 line (0.2.9) gets no more fixes"),
            "{msg}"
        );
        assert!(msg.contains("only the newest minor line (0.3)"), "{msg}");
        assert!(matches!(
            assess("1.0.0", rel("0.9.12")).unwrap(),
            UpdateStatus::Ahead { .. }
        ));
        // 0.10 is newer than 0.9 (numbers, not text).
        assert!(assess("0.9.0", rel("0.10.0")).unwrap().update_due());
        assert!(!assess("0.10.0", rel("0.9.0")).unwrap().update_due());
        assert!(assess("0.2.1-dev", rel("0.2.1")).is_ok());
        assert!(assess("x.y", rel("0.2.1")).is_err());
    }

    #[test]
    fn ci_and_the_opt_out_keep_unasked_checks_offline() {
        let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(when_to_ask(&env(&[("HOME", "/h")])).is_ok());
        assert!(
            when_to_ask(&env(&[("CI", "true")]))
                .unwrap_err()
                .contains("CI")
        );
        assert!(when_to_ask(&env(&[("CI", "")])).is_ok());
        assert!(when_to_ask(&env(&[("AIBOX_NO_UPDATE_CHECK", "1")])).is_err());
        assert_eq!(
            feed_url(&env(&[("AIBOX_GITHUB_API", "http://127.0.0.1:9/")])),
            "http://127.0.0.1:9/repos/projectious-work/aibox/releases/latest"
        );
        assert!(feed_url(&[]).starts_with("https://api.github.com/repos/"));
    }

    #[test]
    fn feeds_that_are_not_a_release_are_refused() {
        let ok = parse_feed(
            "u",
            br#"{"tag_name":"v0.3.0","html_url":"https://github.com/x/y/releases/tag/v0.3.0","draft":false,"prerelease":false,"assets":[]}"#,
        )
        .unwrap();
        assert_eq!(ok.version, "0.3.0");
        assert!(ok.url.ends_with("/v0.3.0"));
        // A hostile page URL is replaced by the canonical one.
        let r = parse_feed("u", br#"{"tag_name":"v0.3.0","html_url":"javascript:x"}"#).unwrap();
        assert!(
            r.url
                .starts_with("https://github.com/projectious-work/aibox/")
        );
        for body in [
            &b"<html>rate limited</html>"[..],
            br#"{"message":"Not Found"}"#,
            br#"{"tag_name":"nightly"}"#,
            br#"{"tag_name":"v0.4.0","prerelease":true}"#,
        ] {
            assert!(
                matches!(parse_feed("u", body), Err(UpdateError::BadFeed { .. })),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
