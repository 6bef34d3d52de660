//! `aibox addon add|remove` + `apply`: adding an addon changes exactly the lines it
//! should (snapshot of the diff), and removing it gives back every byte. Also the
//! personal extra CA setting: copied only into the gitignored build context, and a
//! missing or non-PEM file (or one holding a private key) is a clear error that writes
//! nothing, shown whole; a refused personal environment value names its variable.

#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};

use camino::{Utf8Path, Utf8PathBuf};

fn aibox(root: &Utf8Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aibox"))
        .env("NO_COLOR", "1")
        .env_remove("AIBOX_PROJECT")
        .arg("--project")
        .arg(root.as_str())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(root: &Utf8Path, args: &[&str]) -> String {
    let out = aibox(root, args);
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every file under `root`, by relative path.
fn files(root: &Utf8Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Utf8Path, dir: &Utf8Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in fs_err::read_dir(dir).unwrap() {
            let path = Utf8PathBuf::from_path_buf(entry.unwrap().path()).unwrap();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_string();
                out.insert(rel, fs_err::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn project() -> (tempfile::TempDir, Utf8PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(tmp.path().join("demo")).unwrap();
    fs_err::create_dir_all(&root).unwrap();
    ok(
        &root,
        &[
            "init",
            "demo",
            "--harness",
            "claude",
            "--context-mode",
            "harness-only",
            "--yes",
        ],
    );
    ok(&root, &["apply"]);
    (tmp, root)
}

#[test]
fn add_changes_only_the_expected_lines_and_remove_restores_every_byte() {
    let (_tmp, root) = project();
    let before = files(&root);

    ok(&root, &["addon", "add", "python"]);
    ok(&root, &["apply"]);
    let after = files(&root);
    let mut diff = String::new();
    for (path, new) in &after {
        let old = before.get(path).map(Vec::as_slice).unwrap_or_default();
        if old != new.as_slice() {
            let (old, new) = (String::from_utf8_lossy(old), String::from_utf8_lossy(new));
            let text = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
            diff.push_str(
                &text
                    .unified_diff()
                    .context_radius(0)
                    .header(path, path)
                    .to_string(),
            );
        }
    }
    assert!(
        before.keys().all(|k| after.contains_key(k)),
        "a file disappeared"
    );
    insta::assert_snapshot!(diff);

    let listed: serde_json::Value =
        serde_json::from_str(&ok(&root, &["addon", "list", "--output", "json"])).unwrap();
    let python = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "python")
        .unwrap();
    assert_eq!(python["installed"], "addon");

    ok(&root, &["addon", "remove", "python"]);
    ok(&root, &["apply"]);
    assert_eq!(
        files(&root),
        before,
        "remove + apply did not restore every byte"
    );
}

/// QA: `addon remove` of the last tool moved the comment above `[addons]` to the end of
/// the file (after an `[[ai.mcp.servers]]` written below it), without a final newline.
/// The comment stays where it was, above what followed the table.
#[test]
fn remove_keeps_the_comment_above_addons_in_its_place() {
    let (_tmp, root) = project();
    let toml = root.join("aibox.toml");
    let base = fs_err::read_to_string(&toml).unwrap();
    let text = format!(
        "{base}\n# comment before addons\n[addons]\ntools = [\"python\"]\n\n\
         [[ai.mcp.servers]]\nname = \"docs\"\nurl = \"https://mcp.example.invalid/mcp\"\n"
    );
    fs_err::write(&toml, &text).unwrap();
    ok(&root, &["addon", "remove", "python"]);
    let after = fs_err::read_to_string(&toml).unwrap();
    assert_eq!(
        after,
        format!(
            "{base}\n# comment before addons\n\n[[ai.mcp.servers]]\nname = \"docs\"\n\
             url = \"https://mcp.example.invalid/mcp\"\n"
        )
    );
}

/// QA28 r9: the comment written after a tool on its line goes with the tool (it moved
/// onto the `tools = [` line), and emptying a list the user commented keeps `tools = []`
/// with their comments (the table and its comment line were deleted).
#[test]
fn remove_keeps_the_users_comments_in_addons() {
    let (_tmp, root) = project();
    let toml = root.join("aibox.toml");
    let base = fs_err::read_to_string(&toml).unwrap();
    fs_err::write(
        &toml,
        format!(
            "{base}\n[addons]\n# ask Kim before removing\ntools = [\n  \"python\",  # data \
             scripts\n  # the agent's search\n  \"ripgrep\",\n]\n"
        ),
    )
    .unwrap();
    ok(&root, &["addon", "remove", "python"]);
    assert_eq!(
        fs_err::read_to_string(&toml).unwrap(),
        format!(
            "{base}\n[addons]\n# ask Kim before removing\ntools = [\n  # the agent's \
             search\n  \"ripgrep\",\n]\n"
        )
    );
    ok(&root, &["addon", "remove", "ripgrep"]);
    assert_eq!(
        fs_err::read_to_string(&toml).unwrap(),
        format!(
            "{base}\n[addons]\n# ask Kim before removing\ntools = [\n  # the agent's \
             search\n]\n"
        ),
        "a comment line above an entry may head a group of them: it stays"
    );
    ok(&root, &["addon", "add", "python"]);
    ok(&root, &["addon", "remove", "python"]);
    let emptied = fs_err::read_to_string(&toml).unwrap();
    assert!(
        emptied.ends_with("# ask Kim before removing\ntools = [\n  # the agent's search\n]\n"),
        "{emptied}"
    );
}

#[test]
fn an_unknown_addon_is_refused_and_nothing_changes() {
    let (_tmp, root) = project();
    let before = files(&root);
    let out = aibox(&root, &["addon", "add", "pyhton"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`pyhton` is not in aibox's tool catalog"),
        "{stderr}"
    );
    assert!(
        stderr.contains("python"),
        "the known names are listed: {stderr}"
    );
    assert_eq!(files(&root), before);
}

#[test]
fn the_personal_ca_reaches_only_the_gitignored_build_context() {
    let (_tmp, root) = project();
    let pem = aibox_test_support::http::test_ca_pem();
    let ca = root.join("my-ca.pem");
    fs_err::write(&ca, pem).unwrap();
    fs_err::write(
        root.join(".aibox-local.toml"),
        "[container]\nextra_ca_certificates = \"my-ca.pem\"\n",
    )
    .unwrap();
    let before = files(&root);
    ok(&root, &["apply"]);
    let after = files(&root);
    let changed: Vec<&String> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(changed, [".devcontainer/aibox-ca/extra-ca.crt"]);
    assert_eq!(after[".devcontainer/aibox-ca/extra-ca.crt"], pem.as_bytes());
    let gitignore = String::from_utf8_lossy(&after[".gitignore"]).into_owned();
    assert!(
        gitignore
            .lines()
            .any(|l| l == ".devcontainer/aibox-ca/extra-ca.crt"),
        "{gitignore}"
    );
}

#[test]
fn a_missing_or_non_pem_ca_file_is_refused_and_nothing_is_written() {
    let (_tmp, root) = project();
    for (setting, needle) in [
        (
            "/nonexistent/aibox-test-ca.pem",
            "/nonexistent/aibox-test-ca.pem",
        ),
        ("aibox.toml", "no PEM certificate"),
        // A damaged copy: it says CERTIFICATE, but no block is one.
        (
            "damaged.pem",
            "none of its 1 certificate block(s) is a certificate",
        ),
    ] {
        fs_err::write(
            root.join("damaged.pem"),
            "-----BEGIN CERTIFICATE-----\nMIIFAKEFAKEFAKE\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        fs_err::write(
            root.join(".aibox-local.toml"),
            format!("[container]\nextra_ca_certificates = \"{setting}\"\n"),
        )
        .unwrap();
        let before = files(&root);
        let out = aibox(&root, &["apply"]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{stderr}");
        assert!(stderr.contains("extra CA certificates"), "{stderr}");
        assert!(
            stderr.contains("extra_ca_certificates` in .aibox-local.toml"),
            "{stderr}"
        );
        assert_eq!(files(&root), before);
    }
}

#[test]
fn a_ca_file_with_a_private_key_is_refused_with_the_whole_message_and_valid_json() {
    let (_tmp, root) = project();
    let key = "-----BEGIN PRIVATE KEY-----\nMIIEFAKEFAKEFAKE\n-----END PRIVATE KEY-----\n";
    fs_err::write(
        root.join("withkey.pem"),
        format!("{}{key}", aibox_test_support::http::test_ca_pem()),
    )
    .unwrap();
    fs_err::write(
        root.join(".aibox-local.toml"),
        "[container]\nextra_ca_certificates = \"withkey.pem\"\n",
    )
    .unwrap();
    // The human message and its help survive the output masker.
    let out = aibox(&root, &["apply"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("holds only `BEGIN CERTIFICATE` blocks"),
        "{stderr}"
    );
    assert!(
        stderr.contains("extra_ca_certificates` in .aibox-local.toml"),
        "{stderr}"
    );
    assert!(!stderr.contains("***"), "{stderr}");
    // The JSON error is one valid object with the same message.
    let out = aibox(&root, &["-o", "json", "apply"]);
    assert_eq!(out.status.code(), Some(2));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(value["code"], "aibox::apply::extra_ca");
    let message = value["message"].as_str().unwrap();
    assert!(message.contains("remove the key block"), "{message}");
    assert!(value["help"].is_string(), "{value}");
}

#[test]
fn a_refused_personal_value_of_a_secret_named_variable_keeps_its_reason_readable() {
    let (_tmp, root) = project();
    fs_err::write(
        root.join(".aibox-local.toml"),
        "[container]\nenvironment = { DB_PASSWORD = \"pa$word\" }\n",
    )
    .unwrap();
    let out = aibox(&root, &["apply"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the value of `DB_PASSWORD` contains `$`"),
        "{stderr}"
    );
    assert!(!stderr.contains("pa$word"), "{stderr}");
}
