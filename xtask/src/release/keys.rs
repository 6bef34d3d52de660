//! `release-key`: adding and removing maintainer keys in `release/allowed_signers`, and
//! keeping the copy embedded in `scripts/install.sh` equal to it.
//!
//! The installer carries the keys itself (it runs piped from the network, with no
//! repository beside it), so the two copies must never drift: this is the only writer of
//! both, and a test compares the committed pair. Rotation is `add` of the new key, a release
//! signed with it, then `remove` of the old one.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use super::signing::{ALLOWED_SIGNERS, FILE_NAMESPACE, KEYS_DOC};

/// The installer whose embedded keys follow `release/allowed_signers`.
pub const INSTALLER: &str = "scripts/install.sh";
const BEGIN: &str = "# BEGIN allowed_signers\nALLOWED_SIGNERS='\n";
const END: &str = "'\n# END allowed_signers";

/// `cargo xtask release-key add <email> <key.pub>` or `remove <key.pub>`, in the
/// repository at `root`.
pub fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let usage = || {
        format!(
            "usage: cargo xtask release-key add <email> <key.pub> | remove <key.pub> ({KEYS_DOC})"
        )
    };
    let signers_path = root.join(ALLOWED_SIGNERS);
    let script_path = root.join(INSTALLER);
    let signers = fs_err::read_to_string(&signers_path).map_err(|e| e.to_string())?;
    let script = fs_err::read_to_string(&script_path).map_err(|e| e.to_string())?;
    let (updated, what) = match args {
        [cmd, email, key] if cmd == "add" => {
            let key = public_key(Path::new(key))?;
            (add(&signers, email, &key)?, format!("added {email}"))
        }
        [cmd, key] if cmd == "remove" => {
            let key = public_key(Path::new(key))?;
            (remove(&signers, &key)?, "removed the key".to_owned())
        }
        _ => return Err(usage()),
    };
    let script = embed(&script, &updated)?;
    fs_err::write(&signers_path, &updated).map_err(|e| e.to_string())?;
    fs_err::write(&script_path, script).map_err(|e| e.to_string())?;
    crate::say(&format!(
        "release-key: {what}; {ALLOWED_SIGNERS} and {INSTALLER} updated ({} key(s)); commit both",
        key_lines(&updated).len()
    ));
    Ok(())
}

/// The `<type> <base64>` of a public key file, checked by `ssh-keygen -l` (a private key or
/// anything else is refused).
fn public_key(path: &Path) -> Result<String, String> {
    let text = fs_err::read_to_string(path).map_err(|e| e.to_string())?;
    if text.contains("PRIVATE KEY") {
        return Err(format!(
            "{} is a private key: give the public half (`.pub`)",
            path.display()
        ));
    }
    let out = Command::new("ssh-keygen")
        .arg("-l")
        .arg("-f")
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run ssh-keygen: {e}"))?;
    let fields: Vec<&str> = text.split_whitespace().collect();
    if !out.status.success() || fields.len() < 2 || text.lines().count() != 1 {
        return Err(format!(
            "{} is not one OpenSSH public key (`ssh-keygen -l -f` refuses it)",
            path.display()
        ));
    }
    Ok(format!("{} {}", fields[0], fields[1]))
}

/// The key lines of an allowed-signers text (no comments or blank lines).
pub fn key_lines(signers: &str) -> Vec<&str> {
    signers
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect()
}

/// The `<type> <base64>` of one allowed-signers line.
fn blob(line: &str) -> Option<String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let i = fields
        .iter()
        .position(|f| f.starts_with("ssh-") || f.starts_with("ecdsa-") || f.starts_with("sk-"))?;
    Some(format!("{} {}", fields[i], fields.get(i + 1)?))
}

/// `signers` with a line for `key` (`<type> <base64>`) signed as `email`, allowed to sign
/// tags (`git`) and release files.
pub fn add(signers: &str, email: &str, key: &str) -> Result<String, String> {
    let plausible = email.contains('@')
        && !email.starts_with('@')
        && !email.ends_with('@')
        && !email.chars().any(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | ',' | '*' | '?' | '!')
        });
    if !plausible {
        return Err(format!(
            "`{email}` is not a plain email address (it names the signer in allowed_signers)"
        ));
    }
    if key_lines(signers)
        .iter()
        .any(|l| blob(l).as_deref() == Some(key))
    {
        return Err("this key is already in release/allowed_signers".to_owned());
    }
    let mut out = signers.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(out, "{email} namespaces=\"git,{FILE_NAMESPACE}\" {key}");
    Ok(out)
}

/// `signers` without the line for `key`; refuses to remove the last key (no release could
/// be signed or installed after that).
pub fn remove(signers: &str, key: &str) -> Result<String, String> {
    let lines = key_lines(signers);
    if !lines.iter().any(|l| blob(l).as_deref() == Some(key)) {
        return Err("this key is not in release/allowed_signers".to_owned());
    }
    if lines.len() == 1 {
        return Err(
            "refusing to remove the last maintainer key: add its successor first".to_owned(),
        );
    }
    let mut out = String::new();
    for l in signers.lines() {
        if blob(l).as_deref() != Some(key) || l.trim_start().starts_with('#') {
            out.push_str(l);
            out.push('\n');
        }
    }
    Ok(out)
}

/// The key lines embedded in the installer.
pub fn embedded(script: &str) -> Result<Vec<&str>, String> {
    let start = script
        .find(BEGIN)
        .ok_or_else(|| format!("{INSTALLER} has no `{}` block", BEGIN.trim_end()))?
        + BEGIN.len();
    let end = script[start..]
        .find(END)
        .ok_or_else(|| format!("{INSTALLER}'s allowed_signers block has no end"))?;
    Ok(key_lines(&script[start..start + end]))
}

/// The installer with its embedded keys replaced by `signers`' key lines.
pub fn embed(script: &str, signers: &str) -> Result<String, String> {
    embedded(script)?;
    let start = script.find(BEGIN).unwrap_or_default() + BEGIN.len();
    let end = start + script[start..].find(END).unwrap_or_default();
    let lines: String = key_lines(signers)
        .iter()
        .map(|l| {
            if l.contains('\'') {
                Err("an allowed_signers line holds a single quote".to_owned())
            } else {
                Ok(format!("{l}\n"))
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(format!("{}{lines}{}", &script[..start], &script[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs_err::remove_dir_all(&self.0);
        }
    }

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    /// A copy of the committed allowed-signers file and installer, plus throwaway keys.
    fn scratch(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("aibox-xtask-keys-{name}-{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&dir);
        for sub in ["release", "scripts"] {
            fs_err::create_dir_all(dir.join(sub)).unwrap();
        }
        for f in [ALLOWED_SIGNERS, INSTALLER] {
            fs_err::copy(root().join(f), dir.join(f)).unwrap();
        }
        for key in ["old", "new"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", key, "-f", key])
                .current_dir(&dir)
                .output()
                .unwrap();
            assert!(out.status.success());
        }
        Scratch(dir)
    }

    fn sign_and_verify(s: &Scratch, key: &str) -> Result<String, String> {
        let file = s.0.join("SHA256SUMS");
        fs_err::write(&file, "# aibox 9.9.9\n").unwrap();
        super::super::signing::sign_file(&s.0.join(key), &file)?;
        super::super::signing::verify_file(&file, &s.0.join(ALLOWED_SIGNERS))
    }

    #[test]
    fn the_committed_installer_embeds_exactly_the_committed_keys() {
        let signers = fs_err::read_to_string(root().join(ALLOWED_SIGNERS)).unwrap();
        let script = fs_err::read_to_string(root().join(INSTALLER)).unwrap();
        assert_eq!(embedded(&script).unwrap(), key_lines(&signers));
        assert_eq!(embed(&script, &signers).unwrap(), script);
    }

    #[test]
    fn a_key_is_added_then_rotated_and_signatures_follow() {
        let s = scratch("rotate");
        let (old, new) = (s.0.join("old.pub"), s.0.join("new.pub"));
        assert!(sign_and_verify(&s, "old").is_err());
        run(
            &s.0,
            &args(&["add", "old@example.invalid", old.to_str().unwrap()]),
        )
        .unwrap();
        assert_eq!(sign_and_verify(&s, "old").unwrap(), "old@example.invalid");
        // Rotation: the successor first, then the old key goes.
        run(
            &s.0,
            &args(&["add", "new@example.invalid", new.to_str().unwrap()]),
        )
        .unwrap();
        run(&s.0, &args(&["remove", old.to_str().unwrap()])).unwrap();
        assert_eq!(sign_and_verify(&s, "new").unwrap(), "new@example.invalid");
        let err = sign_and_verify(&s, "old").unwrap_err();
        assert!(err.contains("release-key add"), "{err}");
        // The installer's embedded copy followed, and the file kept its comments.
        let signers = fs_err::read_to_string(s.0.join(ALLOWED_SIGNERS)).unwrap();
        let script = fs_err::read_to_string(s.0.join(INSTALLER)).unwrap();
        assert_eq!(embedded(&script).unwrap(), key_lines(&signers));
        assert_eq!(key_lines(&signers).len(), 1);
        assert!(signers.starts_with("# Keys allowed"), "{signers}");
        assert!(
            signers.contains("new@example.invalid namespaces=\"git,aibox-release\" ssh-ed25519 ")
        );
    }

    #[test]
    fn bad_keys_emails_and_removals_are_refused_and_nothing_is_written() {
        let s = scratch("bad");
        let before = (
            fs_err::read_to_string(s.0.join(ALLOWED_SIGNERS)).unwrap(),
            fs_err::read_to_string(s.0.join(INSTALLER)).unwrap(),
        );
        let private = s.0.join("old");
        let old = s.0.join("old.pub");
        let junk = s.0.join("junk.pub");
        fs_err::write(&junk, "ssh-ed25519 AAAAnot-base64 x\n").unwrap();
        for (a, needle) in [
            (
                args(&["add", "m@example.invalid", private.to_str().unwrap()]),
                "private key",
            ),
            (
                args(&["add", "m@example.invalid", junk.to_str().unwrap()]),
                "not one OpenSSH public key",
            ),
            (
                args(&["add", "m example\"@x", old.to_str().unwrap()]),
                "not a plain email",
            ),
            (args(&["remove", old.to_str().unwrap()]), "not in release"),
            (args(&["rotate"]), "usage"),
        ] {
            let err = run(&s.0, &a).unwrap_err();
            assert!(err.contains(needle), "{a:?}: {err}");
        }
        let after = (
            fs_err::read_to_string(s.0.join(ALLOWED_SIGNERS)).unwrap(),
            fs_err::read_to_string(s.0.join(INSTALLER)).unwrap(),
        );
        assert_eq!(before, after);
        run(
            &s.0,
            &args(&["add", "m@example.invalid", old.to_str().unwrap()]),
        )
        .unwrap();
        let err = run(
            &s.0,
            &args(&["add", "n@example.invalid", old.to_str().unwrap()]),
        )
        .unwrap_err();
        assert!(err.contains("already"), "{err}");
        let err = run(&s.0, &args(&["remove", old.to_str().unwrap()])).unwrap_err();
        assert!(err.contains("last maintainer key"), "{err}");
        // An installer whose block was edited away is refused rather than half-written.
        fs_err::write(s.0.join(INSTALLER), "#!/bin/sh\n").unwrap();
        let new = s.0.join("new.pub");
        let err = run(
            &s.0,
            &args(&["add", "n@example.invalid", new.to_str().unwrap()]),
        )
        .unwrap_err();
        assert!(err.contains("no `# BEGIN allowed_signers"), "{err}");
        assert_eq!(
            key_lines(&fs_err::read_to_string(s.0.join(ALLOWED_SIGNERS)).unwrap()).len(),
            1
        );
    }
}
