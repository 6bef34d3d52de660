//! Listing published releases from a loopback server that answers like GitHub's REST API:
//! pages through `Link`, drafts, pre-releases and odd tags, rate-limit answers (403 with
//! `x-ratelimit-remaining: 0`, 429 with `retry-after`), refusals, redirects and tokens.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use aibox_provenance::releases::{Token, list_releases};
use aibox_provenance::{HttpOptions, ProvenanceError};
use aibox_test_support::http::{Route, Server};
use miette::Diagnostic;

const FIRST: &str = "/api/v3/repos/org/processkit/releases?per_page=100&page=1";
const SECOND: &str = "/repositories/42/releases?per_page=100&page=2";

fn release(tag: &str, draft: bool, prerelease: bool) -> serde_json::Value {
    // The fields GitHub sends that aibox reads, among some it does not.
    serde_json::json!({
        "url": format!("https://api.github.com/repos/org/processkit/releases/{tag}"),
        "id": 1,
        "tag_name": tag,
        "target_commitish": "main",
        "name": if draft { String::new() } else { format!("processkit {tag}") },
        "draft": draft,
        "prerelease": prerelease,
        "created_at": "2026-05-01T10:00:00Z",
        "published_at": if draft { serde_json::Value::Null } else { "2026-05-02T10:00:00Z".into() },
        "assets": [{"name": format!("processkit-{tag}.tar.gz"), "size": 1_300_000}],
        "body": "## Changes\n- many\n"
    })
}

fn page(items: &[serde_json::Value], next: Option<&str>, server: &Server) -> Route {
    let mut route = Route::ok(serde_json::to_vec(items).unwrap());
    route
        .headers
        .push(("Content-Type".into(), "application/json".into()));
    if let Some(next) = next {
        route.headers.push((
            "Link".into(),
            format!(
                "<{}>; rel=\"next\", <{}>; rel=\"last\"",
                server.url(next),
                server.url(next)
            ),
        ));
    }
    route
}

fn source(server: &Server) -> String {
    server.url("/org/processkit.git")
}

/// The releases of the server's repository, asked with `token`.
fn releases_of(
    server: &Server,
    token: Option<&Token>,
) -> Result<aibox_provenance::releases::ReleaseList, ProvenanceError> {
    list_releases(&source(server), None, token, &HttpOptions::default())
}

#[test]
fn pages_are_followed_drafts_left_out_and_versions_ordered() {
    let server = Server::start().unwrap();
    server.route(
        FIRST,
        page(
            &[
                release("v0.28.2", false, false),
                release("v1.1.0", true, false),
                release("v1.0.0-alpha.1", false, true),
                release("nightly", false, true),
            ],
            Some(SECOND),
            &server,
        ),
    );
    server.route(
        SECOND,
        page(
            &[
                release("v0.28.3", false, false),
                release("v0.9.0", false, false),
            ],
            None,
            &server,
        ),
    );
    let list = releases_of(&server, None).unwrap();
    let versions: Vec<&str> = list.releases.iter().map(|r| r.version.as_str()).collect();
    assert_eq!(versions, ["v1.0.0-alpha.1", "v0.28.3", "v0.28.2", "v0.9.0"]);
    assert_eq!(list.pages, 2);
    assert_eq!(list.drafts, 1);
    assert_eq!(list.other_tags, ["nightly"]);
    assert!(list.releases[0].prerelease);
    assert_eq!(list.newest(false).unwrap().version, "v0.28.3");
    assert_eq!(list.newest(true).unwrap().version, "v1.0.0-alpha.1");
    assert_eq!(
        list.releases[1].published_at.as_deref(),
        Some("2026-05-02T10:00:00Z")
    );
    assert_eq!(server.hits(), [FIRST, SECOND]);
}

#[test]
fn rate_limits_are_named_with_when_to_retry() {
    let server = Server::start().unwrap();
    let mut limited = Route::status(403);
    limited.body = br#"{"message":"API rate limit exceeded for 127.0.0.1."}"#.to_vec();
    limited.headers = vec![
        ("x-ratelimit-limit".into(), "60".into()),
        ("x-ratelimit-remaining".into(), "0".into()),
        ("x-ratelimit-reset".into(), "1790000000".into()),
    ];
    server.route(FIRST, limited);
    let err = releases_of(&server, None).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::RateLimited { token: false, .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains("2026-09-21T14:13:20Z"), "{text}");
    assert!(err.help().unwrap().to_string().contains("GITHUB_TOKEN"));

    // A secondary limit: 429 with `retry-after`, and a token that was sent.
    let mut secondary = Route::status(429);
    secondary.headers = vec![("retry-after".into(), "60".into())];
    server.route(FIRST, secondary);
    let token = Token::new("ghp_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000");
    let err = releases_of(&server, Some(&token)).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::RateLimited { token: true, .. }),
        "{err}"
    );
    let shown = format!("{err} {err:?} {}", err.help().unwrap());
    assert!(shown.contains("retry after 60 seconds"), "{shown}");
    assert!(!shown.contains("ghp_FAKE"), "the token leaked: {shown}");

    // A 403 that is not a rate limit (a private repository) is a plain refusal.
    server.route(FIRST, Route::status(403));
    let err = releases_of(&server, None).unwrap_err();
    assert!(
        matches!(err, ProvenanceError::HttpStatus { status: 403, .. }),
        "{err}"
    );
}

#[test]
fn the_token_reaches_the_api_and_nothing_else() {
    let server = Server::start().unwrap();
    let token = Token::new("ghp_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000");
    // Anonymous requests see nothing; the authorized one sees a release.
    server.route(
        FIRST,
        Route::status(404).when_authorized(
            "Bearer ghp_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000",
            page(&[release("v0.28.3", false, false)], None, &server),
        ),
    );
    let list = releases_of(&server, Some(&token)).unwrap();
    assert_eq!(list.releases.len(), 1);

    // A `Link` to another origin is refused before anything is sent there.
    let other = Server::start().unwrap();
    let mut route = page(&[release("v0.28.3", false, false)], None, &server);
    route.headers.push((
        "Link".into(),
        format!("<{}>; rel=\"next\"", other.url(SECOND)),
    ));
    server.route(FIRST, route);
    let err = releases_of(&server, Some(&token)).unwrap_err();
    assert!(matches!(err, ProvenanceError::ReleasesApi { .. }), "{err}");
    assert!(
        err.to_string().contains("points away from the API"),
        "{err}"
    );
    assert!(other.hits().is_empty());

    // A redirect on the API's origin is followed (a renamed repository).
    server.route(
        FIRST,
        Route::redirect("/api/v3/repos/org/renamed/releases?per_page=100&page=1"),
    );
    server.route(
        "/api/v3/repos/org/renamed/releases?per_page=100&page=1",
        page(&[release("v0.28.3", false, false)], None, &server),
    );
    let list = releases_of(&server, None).unwrap();
    assert_eq!(list.releases[0].version, "v0.28.3");
}

#[test]
fn unusable_answers_and_sources_are_clear_errors() {
    let server = Server::start().unwrap();
    server.route(FIRST, Route::ok("<html>Sign in</html>"));
    let err = releases_of(&server, None).unwrap_err();
    assert!(matches!(err, ProvenanceError::ReleasesApi { .. }), "{err}");
    assert!(err.to_string().contains("not a list of releases"), "{err}");

    // QA: a source without a releases API (a plain file server) got the help of a
    // missing release asset, naming `[processkit] version`, when no version was involved.
    server.route(FIRST, Route::status(404));
    let err = releases_of(&server, None).unwrap_err();
    assert!(matches!(err, ProvenanceError::ReleasesApi { .. }), "{err}");
    let shown = err.to_string();
    assert!(
        shown.contains("HTTP 404") && shown.contains("no GitHub-compatible releases API"),
        "{shown}"
    );
    assert!(!shown.contains("release asset does not exist"), "{shown}");

    // The API base can be replaced (a mirror, this test), below which the same paths hold.
    server.route(
        "/gh/repos/projectious-work/processkit/releases?per_page=100&page=1",
        page(&[release("v0.28.3", false, false)], None, &server),
    );
    let list = list_releases(
        aibox_config::OFFICIAL_PROCESSKIT_SOURCE,
        Some(&server.url("/gh")),
        None,
        &HttpOptions::default(),
    )
    .unwrap();
    assert_eq!(list.releases[0].version, "v0.28.3");

    // A local source has no releases API; a plain-http API off loopback is refused.
    let err = list_releases("vendor/processkit", None, None, &HttpOptions::default()).unwrap_err();
    assert!(err.to_string().contains("local path"), "{err}");
    let err = list_releases(
        "http://example.invalid/org/processkit",
        None,
        None,
        &HttpOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, ProvenanceError::InsecureUrl { .. }), "{err}");
}
