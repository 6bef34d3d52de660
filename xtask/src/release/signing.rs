//! Release signatures: the SSH-signed tag (through git) and the SSH signatures of
//! `SHA256SUMS` and `evidence.json` (`ssh-keygen -Y sign`, namespace [`FILE_NAMESPACE`]),
//! all verified against the committed `release/allowed_signers` file.
//!
//! Both are made with the maintainer's configured key (`gpg.format=ssh`,
//! `user.signingkey`) and then verified against the allowed-signers file given to the gate,
//! never against the signer's own configuration, so a signature by a key outside that file
//! fails. The file signatures are what `scripts/install.sh` checks before it trusts a
//! checksum.

use std::path::Path;
use std::process::Command;

/// The committed allowed-signers file (OpenSSH `allowed_signers` format).
pub const ALLOWED_SIGNERS: &str = "release/allowed_signers";

/// The `ssh-keygen -Y` namespace of release file signatures (`scripts/install.sh` verifies
/// with the same one), so a signature made for another purpose never passes as a release's.
pub const FILE_NAMESPACE: &str = "aibox-release";

/// Where a maintainer reads how to add or rotate a key; every refusal about keys names it.
pub const KEYS_DOC: &str = "see \"Maintainer keys\" in docs-site/src/release.md: \
                            `cargo xtask release-key add <email> <key.pub>`";

fn git(repo: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(repo);
    c
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(text.trim().to_owned())
    }
}

/// Refuses to sign unless git is configured for SSH signing with a key.
pub fn check_signing_config(repo: &Path) -> Result<(), String> {
    let format = run(git(repo).args(["config", "--get", "gpg.format"])).unwrap_or_default();
    let key = run(git(repo).args(["config", "--get", "user.signingkey"])).unwrap_or_default();
    if format.trim() != "ssh" || key.trim().is_empty() {
        return Err(format!(
            "releases are signed with SSH: run `git config gpg.format ssh` and \
             `git config user.signingkey ~/.ssh/<key>.pub` (the key's public half must be in \
             release/allowed_signers; {KEYS_DOC})"
        ));
    }
    Ok(())
}

/// The configured signing key's path (`user.signingkey`, `~` expanded by git).
pub fn signing_key(repo: &Path) -> Result<std::path::PathBuf, String> {
    check_signing_config(repo)?;
    let key = run(git(repo).args(["config", "--get", "--path", "user.signingkey"]))?;
    let key = key.trim();
    if key.starts_with("key::") || key.starts_with("ssh-") {
        return Err(format!(
            "user.signingkey holds a literal key; the release files are signed with \
             `ssh-keygen -Y sign -f FILE`, so set it to the key's file ({KEYS_DOC})"
        ));
    }
    Ok(std::path::PathBuf::from(key))
}

/// Signs `file` with `key` (a private key, or a public key whose private half is in
/// ssh-agent) into `file.sig`; returns the signature's path.
pub fn sign_file(key: &Path, file: &Path) -> Result<std::path::PathBuf, String> {
    let sig = std::path::PathBuf::from(format!("{}.sig", file.display()));
    let _ = fs_err::remove_file(&sig);
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-Y", "sign", "-q", "-n", FILE_NAMESPACE, "-f"])
        .arg(key)
        .arg(file);
    run(&mut cmd).map_err(|e| format!("signing {} failed: {e}", file.display()))?;
    Ok(sig)
}

/// Verifies `file.sig` over `file` against `allowed_signers` the way the installer does
/// (`find-principals`, then `verify` in [`FILE_NAMESPACE`]); returns the signer.
pub fn verify_file(file: &Path, allowed_signers: &Path) -> Result<String, String> {
    let sig = format!("{}.sig", file.display());
    let refused = |why: &str| {
        format!(
            "{} does not verify against {}: {why} ({KEYS_DOC})",
            file.display(),
            allowed_signers.display()
        )
    };
    let principals = run(Command::new("ssh-keygen")
        .args(["-Y", "find-principals", "-s", &sig, "-f"])
        .arg(allowed_signers))
    .map_err(|e| refused(&format!("no allowed signer made {sig}: {e}")))?;
    let principal = principals
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    let body = fs_err::File::open(file).map_err(|e| e.to_string())?;
    let out = Command::new("ssh-keygen")
        .args([
            "-Y",
            "verify",
            "-n",
            FILE_NAMESPACE,
            "-I",
            &principal,
            "-s",
            &sig,
            "-f",
        ])
        .arg(allowed_signers)
        .stdin(body.into_parts().0)
        .output()
        .map_err(|e| format!("cannot run ssh-keygen: {e}"))?;
    if out.status.success() {
        Ok(principal)
    } else {
        Err(refused(String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// The release files the gate signs (beside the signed tag).
pub const SIGNED_FILES: &[&str] = &["SHA256SUMS", "evidence.json"];

/// Signs [`SIGNED_FILES`] in `out` with `repo`'s configured key and verifies each against
/// `allowed_signers`; on any failure no signature is left behind. Returns one report line
/// per file.
pub fn sign_release(
    repo: &Path,
    out: &Path,
    allowed_signers: &Path,
) -> Result<Vec<String>, String> {
    let key = signing_key(repo)?;
    let mut report = Vec::new();
    for name in SIGNED_FILES {
        let file = out.join(name);
        let signed = sign_file(&key, &file).and_then(|_| verify_file(&file, allowed_signers));
        match signed {
            Ok(by) => report.push(format!("{name}.sig: signed by {by} ({FILE_NAMESPACE})")),
            Err(e) => {
                for n in SIGNED_FILES {
                    let _ = fs_err::remove_file(out.join(format!("{n}.sig")));
                }
                return Err(e);
            }
        }
    }
    Ok(report)
}

/// Creates the signed annotated tag `tag` on HEAD with `message`.
pub fn sign_tag(repo: &Path, tag: &str, message: &str) -> Result<(), String> {
    check_signing_config(repo)?;
    run(git(repo).args(["tag", "-s", tag, "-m", message])).map(|_| ())
}

/// Verifies `tag`'s signature against `allowed_signers`; returns git's report.
pub fn verify_tag(repo: &Path, tag: &str, allowed_signers: &Path) -> Result<String, String> {
    let signers = allowed_signers
        .canonicalize()
        .map_err(|e| format!("{}: {e}", allowed_signers.display()))?;
    let mut cmd = git(repo);
    cmd.arg("-c")
        .arg(format!("gpg.ssh.allowedSignersFile={}", signers.display()))
        .args(["-c", "gpg.format=ssh", "verify-tag", "--raw", tag]);
    run(&mut cmd).map_err(|e| {
        format!(
            "tag {tag} does not verify against {}: {} ({KEYS_DOC})",
            allowed_signers.display(),
            if e.is_empty() { "no signature" } else { &e }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    struct Repo(PathBuf);
    impl Drop for Repo {
        fn drop(&mut self) {
            let _ = fs_err::remove_dir_all(&self.0);
        }
    }

    fn sh(dir: &Path, program: &str, args: &[&str]) {
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

    /// A repository with one commit, a throwaway signing key and an allowed-signers file
    /// naming it, plus a second key that is not in the file.
    fn repo(name: &str) -> Repo {
        let dir =
            std::env::temp_dir().join(format!("aibox-xtask-sign-{name}-{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&dir);
        fs_err::create_dir_all(&dir).unwrap();
        for key in ["maintainer", "stranger"] {
            sh(
                &dir,
                "ssh-keygen",
                &["-q", "-t", "ed25519", "-N", "", "-C", key, "-f", key],
            );
        }
        let public = fs_err::read_to_string(dir.join("maintainer.pub")).unwrap();
        fs_err::write(
            dir.join("allowed_signers"),
            format!(
                "# test signers\nmaintainer@example.invalid namespaces=\"git,aibox-release\" {public}"
            ),
        )
        .unwrap();
        let work = dir.join("work");
        fs_err::create_dir_all(&work).unwrap();
        sh(&work, "git", &["init", "-q"]);
        sh(&work, "git", &["config", "user.name", "Test Maintainer"]);
        sh(
            &work,
            "git",
            &["config", "user.email", "maintainer@example.invalid"],
        );
        sh(&work, "git", &["config", "commit.gpgsign", "false"]);
        fs_err::write(work.join("f"), "x").unwrap();
        sh(&work, "git", &["add", "f"]);
        sh(&work, "git", &["commit", "-q", "-m", "one"]);
        Repo(dir)
    }

    fn use_key(r: &Repo, key: &str) {
        let work = r.0.join("work");
        sh(&work, "git", &["config", "gpg.format", "ssh"]);
        let key = r.0.join(format!("{key}.pub"));
        sh(
            &work,
            "git",
            &["config", "user.signingkey", key.to_str().unwrap()],
        );
    }

    #[test]
    fn a_tag_signed_with_an_allowed_key_verifies() {
        let r = repo("good");
        let work = r.0.join("work");
        use_key(&r, "maintainer");
        sign_tag(
            &work,
            "v1.0.0",
            "aibox v1.0.0\n\nevidence.json sha256: 00\n",
        )
        .unwrap();
        let report = verify_tag(&work, "v1.0.0", &r.0.join("allowed_signers")).unwrap();
        assert!(report.contains("maintainer@example.invalid"), "{report}");
    }

    #[test]
    fn an_unsigned_tag_fails_verification() {
        let r = repo("unsigned");
        let work = r.0.join("work");
        sh(&work, "git", &["tag", "-a", "v1.0.0", "-m", "not signed"]);
        let err = verify_tag(&work, "v1.0.0", &r.0.join("allowed_signers")).unwrap_err();
        assert!(err.contains("does not verify"), "{err}");
    }

    #[test]
    fn a_tag_signed_by_a_key_outside_allowed_signers_fails_verification() {
        let r = repo("stranger");
        let work = r.0.join("work");
        use_key(&r, "stranger");
        sign_tag(&work, "v1.0.0", "aibox v1.0.0\n").unwrap();
        let err = verify_tag(&work, "v1.0.0", &r.0.join("allowed_signers")).unwrap_err();
        assert!(err.contains("does not verify"), "{err}");
        // The refusal names the procedure that fixes it.
        assert!(
            err.contains("\"Maintainer keys\" in docs-site/src/release.md"),
            "{err}"
        );
    }

    #[test]
    fn signing_without_ssh_configuration_is_refused() {
        let r = repo("noconf");
        let work = r.0.join("work");
        let err = sign_tag(&work, "v1.0.0", "m").unwrap_err();
        assert!(err.contains("gpg.format ssh"), "{err}");
    }

    /// `SHA256SUMS` and `evidence.json` in `work/out`.
    fn release_files(r: &Repo) -> PathBuf {
        let out = r.0.join("work/out");
        fs_err::create_dir_all(&out).unwrap();
        fs_err::write(out.join("SHA256SUMS"), "# aibox 1.0.0\nabc  aibox-x\n").unwrap();
        fs_err::write(out.join("evidence.json"), "{\"version\": \"1.0.0\"}\n").unwrap();
        out
    }

    #[test]
    fn release_files_signed_with_an_allowed_key_verify_until_altered() {
        let r = repo("files");
        use_key(&r, "maintainer");
        let out = release_files(&r);
        let signers = r.0.join("allowed_signers");
        let report = sign_release(&r.0.join("work"), &out, &signers).unwrap();
        assert_eq!(report.len(), 2);
        assert!(
            report[0].contains("maintainer@example.invalid"),
            "{report:?}"
        );
        assert!(out.join("evidence.json.sig").is_file());
        fs_err::write(out.join("SHA256SUMS"), "# aibox 1.0.0\nabd  aibox-x\n").unwrap();
        let err = verify_file(&out.join("SHA256SUMS"), &signers).unwrap_err();
        assert!(err.contains("does not verify"), "{err}");
        fs_err::remove_file(out.join("evidence.json.sig")).unwrap();
        let err = verify_file(&out.join("evidence.json"), &signers).unwrap_err();
        assert!(err.contains("no allowed signer"), "{err}");
    }

    /// The gate's outputs as the installer reads them: what `sums_file` and `sign_release`
    /// write is what `scripts/install.sh` accepts.
    #[test]
    fn the_installer_accepts_what_the_gate_signs() {
        let r = repo("contract");
        use_key(&r, "maintainer");
        let out = r.0.join("work/out");
        fs_err::create_dir_all(&out).unwrap();
        let artifact = "aibox-x86_64-unknown-linux-gnu";
        fs_err::write(out.join(artifact), "#!/bin/sh\necho 'aibox 1.0.0'\n").unwrap();
        fs_err::write(out.join("evidence.json"), "{}\n").unwrap();
        let digest = |n: &str| super::super::sha256_file(&out.join(n)).unwrap();
        let sums = super::super::sums_file(
            "1.0.0",
            &[
                (digest(artifact), artifact.to_owned()),
                (digest("evidence.json"), "evidence.json".to_owned()),
            ],
        );
        fs_err::write(out.join("SHA256SUMS"), sums).unwrap();
        sign_release(&r.0.join("work"), &out, &r.0.join("allowed_signers")).unwrap();
        let installed = Command::new("sh")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install.sh"))
            .args(["--version", "1.0.0", "--from"])
            .arg(&out)
            .arg("--to")
            .arg(r.0.join("bin"))
            .arg("--allowed-signers")
            .arg(r.0.join("allowed_signers"))
            .env("AIBOX_TARGET", "x86_64-unknown-linux-gnu")
            .output()
            .unwrap();
        assert!(
            installed.status.success(),
            "{}",
            String::from_utf8_lossy(&installed.stderr)
        );
        let version = Command::new(r.0.join("bin/aibox"))
            .arg("--version")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&version.stdout).trim(),
            "aibox 1.0.0"
        );
    }

    #[test]
    fn a_signature_in_another_namespace_or_by_a_stranger_is_refused() {
        let r = repo("files-ns");
        let out = release_files(&r);
        let signers = r.0.join("allowed_signers");
        // A valid signature by the maintainer, but made for git, not for a release.
        sh(
            &out,
            "ssh-keygen",
            &[
                "-Y",
                "sign",
                "-q",
                "-n",
                "git",
                "-f",
                r.0.join("maintainer").to_str().unwrap(),
                "SHA256SUMS",
            ],
        );
        let err = verify_file(&out.join("SHA256SUMS"), &signers).unwrap_err();
        assert!(err.contains("does not verify"), "{err}");
        use_key(&r, "stranger");
        let err = sign_release(&r.0.join("work"), &out, &signers).unwrap_err();
        assert!(err.contains("release-key add"), "{err}");
        assert!(!out.join("SHA256SUMS.sig").exists());
        assert!(!out.join("evidence.json.sig").exists());
    }

    #[test]
    fn the_committed_allowed_signers_file_holds_only_comments_or_valid_lines() {
        let text = fs_err::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(ALLOWED_SIGNERS),
        )
        .unwrap();
        for line in text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert!(fields.len() >= 3, "{line}");
            assert!(
                fields
                    .iter()
                    .any(|f| f.starts_with("ssh-") || f.starts_with("ecdsa-"))
            );
        }
    }
}
