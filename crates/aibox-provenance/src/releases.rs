//! Which releases a source has published: the forge's releases API (GitHub's REST
//! `GET /repos/{owner}/{repo}/releases`, which GitHub Enterprise serves under `/api/v3`),
//! read page by page through the `Link` header, drafts left out, pre-releases marked, and
//! the newest release picked by version order (`aibox processkit versions`, `aibox init
//! --processkit-version latest`).
//!
//! Why this cannot weaken trust: the answer only names versions. A chosen version is
//! pinned as an exact tag and then fetched from the configured source and verified by
//! digest like any other; which sources are trusted is decided by `trust`, never here.
//! The API address follows from the source, or from the `AIBOX_GITHUB_API`
//! environment variable (personal, never read from a committed file, so a repository
//! cannot point a teammate's token at another server). The token goes only to the API's
//! own origin (redirects and `Link` pages elsewhere are refused) and never into a
//! message.

use std::cmp::Ordering;
use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::error::{ProvenanceError, Result};
use crate::fetch::{HttpOptions, agent, check_url, describe};
use crate::source::check_version;

/// Environment variable that replaces the forge API base ([`GITHUB_API`] for `github.com`
/// sources): for a mirror, a proxy or a test server. aibox's own update check reads the
/// same one, so one setting points every forge question at the same place.
pub const API_URL_ENV: &str = "AIBOX_GITHUB_API";
/// GitHub's API base.
pub const GITHUB_API: &str = "https://api.github.com";
/// Environment variables a token is read from, in order.
pub const TOKEN_ENVS: [&str; 2] = ["GITHUB_TOKEN", "GH_TOKEN"];

/// Releases asked for per page (GitHub's maximum).
const PER_PAGE: u32 = 100;
/// Most pages followed (10,000 releases).
const MAX_PAGES: usize = 100;
/// Largest accepted page.
const MAX_PAGE_BYTES: u64 = 16 * 1024 * 1024;

/// A bearer token for the API; shown nowhere (its `Debug` is redacted).
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// The first non-empty token of [`TOKEN_ENVS`] in the environment.
    pub fn from_env() -> Option<Self> {
        TOKEN_ENVS
            .iter()
            .filter_map(|name| std::env::var(name).ok())
            .map(|t| t.trim().to_owned())
            .find(|t| !t.is_empty())
            .map(Self)
    }

    /// A token given by the caller.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// One published release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublishedRelease {
    /// Its tag: the version aibox pins.
    pub version: String,
    /// Its title, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When it was published (RFC 3339, as the forge says).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_at: Option<String>,
    /// Marked as a pre-release by the forge, or a version with a `-suffix`.
    pub prerelease: bool,
}

/// What the API listed: the releases newest first, and what was left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseList {
    /// The releases URL asked (first page).
    pub api_url: String,
    /// Published releases with a concrete version tag, newest version first.
    pub releases: Vec<PublishedRelease>,
    /// Drafts left out (only a token with write access sees them).
    pub drafts: usize,
    /// Tags that are not a concrete version (`v1.2.3[-pre]`), left out.
    pub other_tags: Vec<String>,
    /// Pages read.
    pub pages: usize,
}

impl ReleaseList {
    /// The newest release, a pre-release only when `prereleases` is set.
    pub fn newest(&self, prereleases: bool) -> Option<&PublishedRelease> {
        self.releases.iter().find(|r| prereleases || !r.prerelease)
    }
}

#[derive(Deserialize)]
struct ApiRelease {
    tag_name: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    draft: bool,
    #[serde(default)]
    prerelease: bool,
    #[serde(default)]
    published_at: Option<String>,
}

/// The releases URL of `source` (a repository URL such as
/// `https://github.com/projectious-work/processkit`): `https://api.github.com/repos/…` for
/// github.com, `<scheme>://<host>/api/v3/repos/…` for another host (GitHub Enterprise), or
/// below `api_base` when given (see [`API_URL_ENV`]).
pub fn api_url(source: &str, api_base: Option<&str>) -> Result<String> {
    let not_forge = |reason: &str| ProvenanceError::Config {
        key: "source",
        reason: format!("`{source}` {reason}"),
        help: "versions are listed from a forge's releases API: use a repository URL such as \
               https://github.com/projectious-work/processkit as `[processkit] source`"
            .to_owned(),
    };
    let (scheme, rest) = source
        .split_once("://")
        .ok_or_else(|| not_forge("is a local path, not a repository URL"))?;
    let rest = rest.trim_end_matches('/');
    let rest = rest.strip_suffix(".git").unwrap_or(rest);
    let mut parts = rest.split('/');
    let host = parts.next().unwrap_or_default();
    let segs: Vec<&str> = parts.collect();
    let ok_seg = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    let [owner, repo] = segs[..] else {
        return Err(not_forge("is not `<scheme>://<host>/<owner>/<repository>`"));
    };
    if host.is_empty() || host.contains('@') || !ok_seg(owner) || !ok_seg(repo) {
        return Err(not_forge("is not `<scheme>://<host>/<owner>/<repository>`"));
    }
    let base = match api_base.map(|b| b.trim_end_matches('/')) {
        Some(b) => b.to_owned(),
        None if host.eq_ignore_ascii_case("github.com") => GITHUB_API.to_owned(),
        None => format!("{scheme}://{host}/api/v3"),
    };
    let url = format!("{base}/repos/{owner}/{repo}/releases");
    check_url(&url)?;
    Ok(url)
}

/// `scheme://authority` of a URL, lower-cased.
fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    format!("{scheme}://{authority}").to_ascii_lowercase()
}

/// The `rel="next"` target of a `Link` header.
fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        params
            .split(';')
            .any(|p| {
                let p = p.trim().replace(' ', "");
                p == "rel=\"next\"" || p == "rel=next"
            })
            .then(|| target.to_owned())
    })
}

/// One answer of the API: a page of releases and the next page's URL, or a redirect.
enum Answer {
    Page(Vec<ApiRelease>, Option<String>),
    Redirect(String),
}

/// Asks for one page. `home` is the API's origin (a relative redirect stays on it).
fn page(
    agent: &ureq::Agent,
    url: &str,
    home: &str,
    token: Option<&Token>,
    opts: &HttpOptions,
) -> Result<Answer> {
    let refuse = |reason: String| ProvenanceError::ReleasesApi {
        url: url.to_owned(),
        reason,
    };
    let mut request = agent
        .get(url)
        .header("Accept", "application/vnd.github+json")
        .header("X-GitHub-Api-Version", "2022-11-28");
    if let Some(Token(t)) = token {
        request = request.header("Authorization", &format!("Bearer {t}"));
    }
    let response = request.call().map_err(|e| ProvenanceError::Http {
        url: url.to_owned(),
        reason: describe(&e, opts),
    })?;
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    if (300..400).contains(&status) {
        let location =
            header("location").ok_or_else(|| refuse("a redirect without a Location".into()))?;
        return Ok(Answer::Redirect(if location.starts_with('/') {
            format!("{home}{location}")
        } else {
            location
        }));
    }
    let retry_after = header("retry-after");
    if matches!(status, 403 | 429)
        && (header("x-ratelimit-remaining").as_deref() == Some("0") || retry_after.is_some())
    {
        let wait = match (retry_after, header("x-ratelimit-reset")) {
            (Some(secs), _) => format!("retry after {} seconds", secs.trim()),
            (None, Some(reset)) => format!(
                "the limit resets at {} (Unix time {})",
                crate::time::rfc3339(reset.trim().parse().unwrap_or(0)),
                reset.trim()
            ),
            (None, None) => "try again later".to_owned(),
        };
        return Err(ProvenanceError::RateLimited {
            url: url.to_owned(),
            wait,
            token: token.is_some(),
        });
    }
    if status != 200 {
        return Err(ProvenanceError::http_status(url.to_owned(), status));
    }
    let next = header("link").as_deref().and_then(next_link);
    let mut body = Vec::new();
    response
        .into_body()
        .into_reader()
        .take(MAX_PAGE_BYTES + 1)
        .read_to_end(&mut body)
        .map_err(|e| ProvenanceError::Http {
            url: url.to_owned(),
            reason: describe(&ureq::Error::from(e), opts),
        })?;
    if body.len() as u64 > MAX_PAGE_BYTES {
        return Err(refuse(format!("a page larger than {MAX_PAGE_BYTES} bytes")));
    }
    let releases = serde_json::from_slice(&body).map_err(|e| {
        refuse(format!(
            "the answer is not a list of releases ({e}): {}",
            crate::error::show_name(&body)
        ))
    })?;
    Ok(Answer::Page(releases, next))
}

/// Every published release of `source`, newest version first. `token` is sent as a
/// bearer token to the API's origin only.
pub fn list_releases(
    source: &str,
    api_base: Option<&str>,
    token: Option<&Token>,
    opts: &HttpOptions,
) -> Result<ReleaseList> {
    let first = format!("{}?per_page={PER_PAGE}&page=1", api_url(source, api_base)?);
    let home = origin(&first);
    let agent = agent(opts, &first);
    let mut list = ReleaseList {
        api_url: first.clone(),
        releases: Vec::new(),
        drafts: 0,
        other_tags: Vec::new(),
        pages: 0,
    };
    let mut next = Some(first);
    let mut hops = 0u32;
    while let Some(url) = next.take() {
        let refuse = |reason: String| ProvenanceError::ReleasesApi {
            url: url.clone(),
            reason,
        };
        if origin(&url) != home {
            return Err(refuse(format!(
                "it points away from the API ({home}); aibox sends its request and token only there"
            )));
        }
        check_url(&url)?;
        if list.pages >= MAX_PAGES {
            return Err(refuse(format!("more than {MAX_PAGES} pages of releases")));
        }
        // A 404 here is the listing itself, not a release asset: the source has no
        // GitHub-compatible releases API at that address (QA: the asset's help was shown).
        let answer = page(&agent, &url, &home, token, opts).map_err(|e| match e {
            ProvenanceError::HttpStatus {
                status: status @ (404 | 410),
                ..
            } => refuse(format!(
                "HTTP {status}: no GitHub-compatible releases API answers there, so the \
                 versions cannot be listed; name an exact version instead (`[processkit] \
                 version`, or `--processkit-version vX.Y.Z` with `aibox init`)"
            )),
            e => e,
        })?;
        let (releases, link) = match answer {
            Answer::Redirect(to) => {
                hops += 1;
                if hops > opts.max_redirects {
                    return Err(ProvenanceError::Redirects {
                        url,
                        limit: opts.max_redirects,
                    });
                }
                next = Some(to);
                continue;
            }
            Answer::Page(releases, link) => (releases, link),
        };
        list.pages += 1;
        for r in releases {
            if r.draft {
                list.drafts += 1;
            } else if check_version(&r.tag_name).is_ok() {
                list.releases.push(PublishedRelease {
                    prerelease: r.prerelease || r.tag_name.contains('-'),
                    version: r.tag_name,
                    name: r.name.filter(|n| !n.trim().is_empty()),
                    published_at: r.published_at,
                });
            } else {
                list.other_tags
                    .push(crate::error::show_name(r.tag_name.as_bytes()));
            }
        }
        next = link;
    }
    list.releases
        .sort_by(|a, b| compare_versions(&b.version, &a.version));
    list.releases.dedup_by(|a, b| a.version == b.version);
    Ok(list)
}

/// Semantic-version order of two concrete versions (`v` optional): a release ranks above
/// its pre-releases; pre-release identifiers compare numerically when both are numbers.
pub fn compare_versions(left: &str, right: &str) -> Ordering {
    fn split(v: &str) -> (Vec<u64>, Option<Vec<&str>>) {
        let v = v.strip_prefix('v').unwrap_or(v);
        let (core, pre) = match v.split_once('-') {
            Some((c, p)) => (c, Some(p.split('.').collect())),
            None => (v, None),
        };
        (
            core.split('.').map(|n| n.parse().unwrap_or(0)).collect(),
            pre,
        )
    }
    fn identifier(mine: &str, theirs: &str) -> Ordering {
        match (mine.parse::<u64>(), theirs.parse::<u64>()) {
            (Ok(m), Ok(t)) => m.cmp(&t),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            (Err(_), Err(_)) => mine.cmp(theirs),
        }
    }
    let (core_l, pre_l) = split(left);
    let (core_r, pre_r) = split(right);
    core_l.cmp(&core_r).then_with(|| match (pre_l, pre_r) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(pl), Some(pr)) => pl
            .iter()
            .zip(&pr)
            .map(|(m, t)| identifier(m, t))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or_else(|| pl.len().cmp(&pr.len())),
    })
}

/// [`compare_versions`] when both are versions (`v` optional, a numeric
/// `MAJOR.MINOR.PATCH`-style core, an optional `-pre-release`); `None` when either is not
/// (a branch name, a date), so the caller can say "changed" rather than guess an order.
pub fn version_order(left: &str, right: &str) -> Option<Ordering> {
    fn is_version(v: &str) -> bool {
        let v = v.strip_prefix('v').unwrap_or(v);
        let core = v.split_once('-').map_or(v, |(core, _)| core);
        !core.is_empty()
            && core
                .split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }
    (is_version(left) && is_version(right)).then(|| compare_versions(left, right))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_order_is_none_for_what_is_not_a_version() {
        assert_eq!(version_order("v0.2.0", "v0.1.0"), Some(Ordering::Greater));
        assert_eq!(version_order("v0.1.0", "0.2.0"), Some(Ordering::Less));
        assert_eq!(
            version_order("v1.0.0-alpha.1", "v0.28.3"),
            Some(Ordering::Greater)
        );
        assert_eq!(version_order("v0.1.0", "v0.1.0"), Some(Ordering::Equal));
        for other in ["main", "v", "", "v1..0", "latest-1", "v1.x"] {
            assert_eq!(version_order("v0.1.0", other), None, "{other}");
            assert_eq!(version_order(other, "v0.1.0"), None, "{other}");
        }
    }

    #[test]
    fn api_urls_follow_the_source() {
        assert_eq!(
            api_url("https://github.com/projectious-work/processkit.git/", None).unwrap(),
            "https://api.github.com/repos/projectious-work/processkit/releases"
        );
        assert_eq!(
            api_url("https://git.example.com/org/pk", None).unwrap(),
            "https://git.example.com/api/v3/repos/org/pk/releases"
        );
        assert_eq!(
            api_url("https://github.com/o/r", Some("http://127.0.0.1:9/gh/")).unwrap(),
            "http://127.0.0.1:9/gh/repos/o/r/releases"
        );
        for bad in [
            "vendor/processkit",
            "https://github.com/o",
            "https://github.com/o/r/releases",
            "https://github.com/o/..",
            "https://user@github.com/o/r",
        ] {
            assert!(api_url(bad, None).is_err(), "{bad}");
        }
        // A plain-http API elsewhere than loopback is refused like any download.
        assert!(api_url("https://github.com/o/r", Some("http://api.example.com")).is_err());
    }

    #[test]
    fn link_headers_and_version_order() {
        let h = "<https://api.github.com/repositories/1/releases?per_page=100&page=2>; rel=\"next\", \
                 <https://api.github.com/repositories/1/releases?per_page=100&page=9>; rel=\"last\"";
        assert_eq!(
            next_link(h).as_deref(),
            Some("https://api.github.com/repositories/1/releases?per_page=100&page=2")
        );
        assert_eq!(next_link("<x>; rel=\"prev\""), None);
        let mut v = vec![
            "v1.0.0-alpha.1",
            "v0.28.3",
            "v1.0.0",
            "v0.9.10",
            "v1.0.0-alpha.10",
            "v1.0.0-beta",
            "v0.28.10",
        ];
        v.sort_by(|a, b| compare_versions(b, a));
        assert_eq!(
            v,
            [
                "v1.0.0",
                "v1.0.0-beta",
                "v1.0.0-alpha.10",
                "v1.0.0-alpha.1",
                "v0.28.10",
                "v0.28.3",
                "v0.9.10"
            ]
        );
        assert_eq!(format!("{:?}", Token::new("ghp_fake")), "Token(<redacted>)");
    }
}
