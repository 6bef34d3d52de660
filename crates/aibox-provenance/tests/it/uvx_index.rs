//! The package-index question behind locking team `uvx` servers, against real answers of
//! `PyPI`'s JSON simple API (`tests/fixtures/pypi-simple/`, see its README) served by a
//! loopback server, faults included.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::Duration;

use aibox_provenance::HttpOptions;
use aibox_provenance::uvxdeps::{ACCEPT, ReleaseFacts, parse_project, release_facts};
use aibox_test_support::http::{Route, Server};

fn fixture(name: &str) -> Vec<u8> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pypi-simple");
    fs_err::read(dir.join(name)).unwrap()
}

fn facts(cutoff: &str, requires_python: Option<&str>) -> ReleaseFacts {
    ReleaseFacts {
        cutoff: cutoff.to_owned(),
        requires_python: requires_python.map(str::to_owned),
        yanked: None,
    }
}

#[test]
fn a_release_is_dated_by_the_last_of_its_files() {
    let time = fixture("mcp-server-time.json");
    // Wheel at 21:25:55.29, sdist at 21:25:57.07: uv keeps only files uploaded strictly
    // before the cutoff, so it is the next whole second after the later one.
    assert_eq!(
        parse_project(&time, "2025.9.25").unwrap(),
        Some(facts("2025-09-25T21:25:58Z", Some(">=3.10")))
    );
    assert_eq!(
        parse_project(&time, "2025.09.25").unwrap(),
        parse_project(&time, "2025.9.25").unwrap()
    );
    assert_eq!(parse_project(&time, "1999.1.1").unwrap(), None);

    let yaml = fixture("pyyaml-trimmed.json");
    // Mixed-case file names, `.zip` and `.exe` files, no `requires-python`.
    assert_eq!(
        parse_project(&yaml, "3.10").unwrap(),
        Some(facts("2011-07-01T23:00:11Z", None)),
        "the .exe installers (uploaded later) are not installable and do not count"
    );
    // 5.1 is not 5.1.1 or 5.1.2.
    assert_eq!(
        parse_project(&yaml, "5.1").unwrap(),
        Some(facts("2019-03-13T16:35:51Z", None))
    );
    // 6.0.1 got a wheel six months after its release: it must still be in.
    assert_eq!(
        parse_project(&yaml, "6.0.1").unwrap(),
        Some(facts("2024-01-18T20:40:23Z", Some(">=3.6")))
    );
}

/// A release whose every file is yanked says so, with the reason when one was given; one
/// yanked file among others does not make the release yanked.
#[test]
fn a_yanked_release_is_named() {
    let answer = br#"{"files":[
        {"filename":"x-1.0.tar.gz","upload-time":"2025-01-01T00:00:00Z","yanked":true},
        {"filename":"x-1.0-py3-none-any.whl","upload-time":"2025-01-01T00:00:01Z","yanked":"broken wheel metadata"},
        {"filename":"x-2.0.tar.gz","upload-time":"2025-02-01T00:00:00Z","yanked":true},
        {"filename":"x-2.0-py3-none-any.whl","upload-time":"2025-02-01T00:00:01Z","yanked":false},
        {"filename":"x-3.0.tar.gz","upload-time":"2025-03-01T00:00:00Z","yanked":true}
    ]}"#;
    let yanked = |v: &str| parse_project(answer, v).unwrap().unwrap().yanked;
    assert_eq!(yanked("1.0").as_deref(), Some("broken wheel metadata"));
    assert_eq!(yanked("2.0"), None);
    assert_eq!(yanked("3.0").as_deref(), Some(""));
}

#[test]
fn answers_that_cannot_date_a_release_are_errors() {
    for (body, why) in [
        (
            &b"<html>simple index</html>"[..],
            "not the simple API's JSON",
        ),
        (
            br#"{"files":[{"filename":"x-1.0.tar.gz"}]}"#,
            "no upload time",
        ),
        (
            br#"{"files":[{"filename":"x-1.0.tar.gz","upload-time":"yesterday"}]}"#,
            "not a UTC time",
        ),
    ] {
        let err = parse_project(body, "1.0").unwrap_err();
        assert!(err.contains(why), "{err}");
    }
}

fn fast() -> HttpOptions {
    HttpOptions {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(2),
        overall_timeout: Duration::from_secs(5),
        ..HttpOptions::default()
    }
}

#[test]
fn the_index_is_asked_for_its_json_under_the_normalized_name() {
    let server = Server::start().unwrap();
    server.route(
        "/simple/mcp-server-time/",
        Route::ok(fixture("mcp-server-time.json")),
    );
    let index = server.url("/simple/");
    let got = release_facts(&index, "MCP_Server.Time", "2025.9.25", &fast()).unwrap();
    assert_eq!(got, Some(facts("2025-09-25T21:25:58Z", Some(">=3.10"))));
    assert_eq!(server.hits(), ["/simple/mcp-server-time/"]);
    assert!(ACCEPT.contains("vnd.pypi.simple.v1+json"));

    // No such project: a plain no, not a failure.
    assert_eq!(
        release_facts(&index, "no-such-project", "1.0", &fast()).unwrap(),
        None
    );
    // A failing index is a failure (the server stays unlocked, not broken).
    server.route("/simple/broken/", Route::status(503));
    let err = release_facts(&index, "broken", "1.0", &fast()).unwrap_err();
    assert!(err.to_string().contains("503"), "{err}");
}
