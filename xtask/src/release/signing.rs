//! The signed release tag: SSH signing through git, verified against the committed
//! `release/allowed_signers` file.
//!
//! The tag is signed with the maintainer's configured key (`gpg.format=ssh`,
//! `user.signingkey`) and then verified with `git verify-tag` against the allowed-signers
//! file given to the gate, never against the signer's own configuration, so a tag signed by
//! a key outside that file fails.

use std::path::Path;
use std::process::Command;

/// The committed allowed-signers file (OpenSSH `allowed_signers` format).
pub const ALLOWED_SIGNERS: &str = "release/allowed_signers";

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
        return Err(
            "release tags are signed with SSH through git: run `git config gpg.format ssh` and \
             `git config user.signingkey ~/.ssh/<key>.pub` (the key's public half must be in \
             release/allowed_signers)"
                .to_owned(),
        );
    }
    Ok(())
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
            "tag {tag} does not verify against {}: {}",
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
            format!("# test signers\nmaintainer@example.invalid namespaces=\"git\" {public}"),
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
    }

    #[test]
    fn signing_without_ssh_configuration_is_refused() {
        let r = repo("noconf");
        let work = r.0.join("work");
        let err = sign_tag(&work, "v1.0.0", "m").unwrap_err();
        assert!(err.contains("gpg.format ssh"), "{err}");
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
