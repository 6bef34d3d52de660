//! Every pinned download of the tool catalog is still served, with the digest it is pinned
//! to, for every architecture: the check the generated Dockerfile makes (`curl -fsSL`,
//! then `sha512sum` or `sha256sum` against the catalog), without building an image.
//!
//! The end-to-end image builds reuse cached layers for up to a week (see
//! `aibox-test-support`'s `podman::layers`), so a cached build no longer fetches its
//! tools. A download that disappears or changes upstream is caught here, on every run,
//! and so is an arm64 download, which no build on an amd64 machine fetches at all.

#![allow(clippy::unwrap_used)] // test helpers fail loudly

use std::process::{Command, Stdio};

use aibox_devcontainer::catalog::{Catalog, Verification};
use aibox_devcontainer::tools::{download_url, expected_digest};

/// What `curl -fsSL URL | DIGEST_COMMAND` prints for the bytes the registry serves now:
/// the hex digest, or why there is none.
fn served_digest(url: &str, command: &str) -> Result<String, String> {
    let mut curl = Command::new("curl")
        .args(["-fsSL", "--retry", "3", url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run curl: {e}"))?;
    let digest = Command::new(command)
        .stdin(Stdio::from(curl.stdout.take().unwrap()))
        .output()
        .map_err(|e| format!("cannot run {command}: {e}"))?;
    let fetched = curl.wait_with_output().unwrap();
    if !fetched.status.success() {
        return Err(format!(
            "curl failed ({}): {}",
            fetched.status,
            String::from_utf8_lossy(&fetched.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&digest.stdout);
    match text.split_whitespace().next() {
        Some(hex) if digest.status.success() => Ok(hex.to_owned()),
        _ => Err(format!("{command} failed: {}", digest.status)),
    }
}

#[test]
fn every_catalog_download_is_still_served_with_its_pinned_digest() {
    let catalog = Catalog::builtin().unwrap();
    let mut downloads = Vec::new();
    for tool in catalog.tools() {
        if !matches!(
            tool.verification,
            Verification::NpmIntegrity | Verification::Sha256
        ) {
            continue;
        }
        for artifact in &tool.artifact {
            let (command, expected) = expected_digest(artifact)
                .unwrap_or_else(|| panic!("{}: an artifact without a digest", tool.name));
            let arch = artifact.arch.clone().unwrap_or_else(|| "any".to_owned());
            downloads.push((
                format!("{} {} ({arch})", tool.name, tool.version),
                download_url(artifact),
                command,
                expected,
            ));
        }
    }
    // Every kind of pin is covered: the npm tarballs and the direct (PyPI) downloads.
    assert!(
        downloads.iter().any(|d| d.2 == "sha512sum"),
        "{downloads:?}"
    );
    assert!(
        downloads.iter().any(|d| d.2 == "sha256sum"),
        "{downloads:?}"
    );
    // Side by side: the downloads wait on the network, not on this machine.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let checks: Vec<_> = downloads
            .iter()
            .map(|(what, url, command, expected)| {
                scope.spawn(move || match served_digest(url, command) {
                    Ok(actual) if actual == *expected => None,
                    Ok(actual) => Some(format!(
                        "{what}: {url} now serves {command} {actual}, the catalog pins {expected}"
                    )),
                    Err(e) => Some(format!("{what}: {url}: {e}")),
                })
            })
            .collect();
        checks
            .into_iter()
            .filter_map(|check| check.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} pinned downloads fail the image build's check:\n{}",
        failures.len(),
        downloads.len(),
        failures.join("\n")
    );
}
