//! The Dockerfile's download helper (`fetch`), run by `sh` against a stand-in `curl`:
//! a download that fails twice (a reset connection, a cut stream) still installs, a third
//! failure stops the build naming the tool, and the digest is checked after the retries.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use aibox_devcontainer::catalog::Catalog;

/// The `fetch() { … };` definition of the first download step of the catalog's `uv`, as
/// plain shell (the Dockerfile's line continuations removed).
fn fetch_definition() -> String {
    let catalog = Catalog::builtin().unwrap();
    let tools = catalog.resolve(&["uv"]).unwrap();
    let text = aibox_devcontainer::tools::render_downloads(&tools);
    let start = text.find("fetch() {").expect("a fetch helper");
    let end = start + text[start..].find("\n    }; \\").expect("its end") + "\n    };".len();
    text[start..end].replace(" \\\n", "\n")
}

/// Runs `fetch URL sha256sum DIGEST` with a `curl` that fails its first `failures` calls
/// (exit 56, as a reset connection does) and then writes `payload`.
fn run_fetch(failures: u32, payload: &str, digest: &str) -> (bool, String, u32) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    fs_err::create_dir_all(&bin).unwrap();
    let count = dir.path().join("calls");
    let curl = bin.join("curl");
    fs_err::write(
        &curl,
        format!(
            "#!/bin/sh\nn=$(cat '{count}' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '{count}'\n\
             [ $n -le {failures} ] && exit 56\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n\
             printf '%s' '{payload}' > \"$out\"\n",
            count = count.display()
        ),
    )
    .unwrap();
    fs_err::set_permissions(&curl, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // The download folder is this test's own, so tests running side by side do not share it.
    let script = format!(
        "set -eu; {}\nfetch https://example.invalid/uv.tgz sha256sum {digest}; echo fetched",
        fetch_definition().replace("/tmp/aibox-download", &dir.path().display().to_string())
    );
    // `sleep` is shortened: the stand-in is not a network.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("sleep() {{ :; }}; {script}"))
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    let calls = fs_err::read_to_string(&count).map_or(0, |s| s.trim().parse().unwrap());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.success() && text.contains("fetched"),
        text,
        calls,
    )
}

/// sha256 of `x`.
const X_DIGEST: &str = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";

#[test]
fn two_failed_downloads_are_retried_and_a_third_stops_the_build() {
    let (ok, text, calls) = run_fetch(2, "x", X_DIGEST);
    assert!(ok, "two failures then a download: {text}");
    assert_eq!(calls, 3);

    let (ok, text, calls) = run_fetch(3, "x", X_DIGEST);
    assert!(!ok, "three failures must stop the build: {text}");
    assert_eq!(calls, 3, "no fourth try");
    assert!(
        text.contains("aibox: uv ") && text.contains("failed 3 times"),
        "{text}"
    );
}

#[test]
fn the_digest_is_still_checked_after_a_retry() {
    let (ok, text, _) = run_fetch(1, "y", X_DIGEST);
    assert!(!ok, "a wrong payload must fail: {text}");
    assert!(text.contains("checksum mismatch"), "{text}");
}
