//! The CLI as users run it: the real `aibox` binary on fixture trees.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may fail loudly

use std::process::{Command, Output};

use camino::Utf8Path;

fn aibox(dir: &Utf8Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aibox"))
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("AIBOX_PROJECT")
        .args(args)
        .output()
        .expect("run aibox")
}

/// [`aibox`] with extra environment variables.
fn aibox_with(dir: &Utf8Path, envs: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aibox"))
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("AIBOX_PROJECT")
        .envs(envs.iter().copied())
        .args(args)
        .output()
        .expect("run aibox")
}

fn text(out: &Output) -> String {
    format!(
        "status: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn tempdir() -> (tempfile::TempDir, camino::Utf8PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = camino::Utf8PathBuf::from_path_buf(dir.path().to_owned()).expect("utf8");
    (dir, path)
}

/// A fresh harness-only project named `name` for `harness`, made by `aibox init --yes`.
fn init_project(name: &str, harness: &str) -> (tempfile::TempDir, camino::Utf8PathBuf) {
    let (t, dir) = tempdir();
    let out = aibox(
        &dir,
        &[
            "init",
            name,
            "--harness",
            harness,
            "--context-mode",
            "harness-only",
            "--yes",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    (t, dir)
}

#[test]
fn version_is_the_workspace_version() {
    let (_t, dir) = tempdir();
    let out = aibox(&dir, &["--version"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("aibox {}", env!("CARGO_PKG_VERSION"))
    );
}

/// Every shell's script completes the commands `aibox --help` lists and not the hidden
/// `aibox docs` (`clap_complete` offers hidden commands unless they are left out).
#[test]
fn completion_scripts_leave_hidden_commands_out() {
    let (_t, dir) = tempdir();
    // How each script would offer `docs` as a command.
    for (shell, offers_docs) in [
        ("bash", "aibox__subcmd__docs"),
        ("elvish", "cand docs "),
        ("fish", "-a \"docs\""),
        ("powershell", "new('docs'"),
        ("zsh", "'docs:"),
    ] {
        let out = aibox(&dir, &["completion", shell]);
        assert!(out.status.success(), "{}", text(&out));
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains("doctor"), "{shell}: {script}");
        assert!(
            !script.contains(offers_docs),
            "{shell} offers `docs`: {script}"
        );
    }
    let help = aibox(&dir, &["--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        // A command's line, not its wrapped description's.
        .filter_map(|l| l.strip_prefix("  ").filter(|l| !l.starts_with(' ')))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(listed.contains(&"doctor"), "{help}");
    assert_eq!(bash_complete(&dir, "do"), ["doctor", "down"]);
    let mut all = bash_complete(&dir, "");
    all.retain(|w| !w.starts_with('-'));
    let mut listed = listed;
    listed.sort_unstable();
    assert_eq!(all, listed);
}

/// What bash's completion of `aibox WORD<TAB>` offers, sorted.
fn bash_complete(dir: &Utf8Path, word: &str) -> Vec<String> {
    let out = Command::new("bash")
        .current_dir(dir)
        .args([
            "-c",
            r#"source <("$0" completion bash) && COMP_WORDS=(aibox "$1") && COMP_CWORD=1 \
               && _aibox aibox "$1" aibox && printf '%s\n' "${COMPREPLY[@]}""#,
            env!("CARGO_BIN_EXE_aibox"),
            word,
        ])
        .output()
        .expect("run bash");
    assert!(out.status.success(), "{}", text(&out));
    let mut words: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(ToOwned::to_owned)
        .collect();
    words.sort_unstable();
    words
}

#[test]
fn usage_errors_exit_2() {
    let (_t, dir) = tempdir();
    let out = aibox(&dir, &["apply", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// `--project aibox.toml` is a usage mistake (exit 2, naming the folder to give), not a
/// read error of `aibox.toml/aibox.toml` (exit 3); `init` refuses it the same way.
#[test]
fn project_flag_naming_a_file_is_a_user_error() {
    let (_t, dir) = init_project("demo", "claude");
    for args in [
        &["--project", "aibox.toml", "config", "get", "container.name"][..],
        &["--project", "aibox.toml", "doctor"],
        &["--project", "aibox.toml", "init", "--yes"],
    ] {
        let out = aibox(&dir, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("`--project` must be the project folder, not a file")
                && err.contains("did you mean `--project .`?"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn no_project_is_a_user_error_with_a_hint() {
    let (_t, dir) = tempdir();
    let out = aibox(&dir, &["config", "validate"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("aibox init"), "{err}");
}

/// QA28 r6: a folder without `aibox.toml` named by `--project` (or `AIBOX_PROJECT`) is
/// the same user error as none found from the working directory (exit 2, "run `aibox
/// init`"), not an unreadable file (exit 3); `config set` there makes no project (r13).
#[test]
fn a_named_folder_without_aibox_toml_is_a_user_error() {
    let (_t, dir) = tempdir();
    let run = |envs: &[(&str, &str)], args: &[&str]| {
        let out = aibox_with(&dir, envs, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["code"], "aibox::config::not_found", "{json}");
    };
    let folder = dir.as_str();
    run(&[], &["-o", "json", "--project", folder, "apply"]);
    run(&[("AIBOX_PROJECT", folder)], &["-o", "json", "mcp", "list"]);
    run(
        &[],
        &[
            "-o",
            "json",
            "--project",
            folder,
            "config",
            "get",
            "container.name",
        ],
    );
    run(
        &[],
        &[
            "-o",
            "json",
            "--project",
            folder,
            "config",
            "set",
            "container.name",
            "x",
        ],
    );
    run(
        &[],
        &[
            "-o",
            "json",
            "--project",
            folder,
            "config",
            "set",
            "--local",
            "container.name",
            "x",
        ],
    );
    assert_eq!(
        fs_err::read_dir(&dir).unwrap().count(),
        0,
        "nothing written"
    );
}

/// QA28 r8: what `config set --local` writes is read back by `config get --local`; the
/// team file's `get` points a personal key there.
#[test]
fn config_get_local_reads_the_personal_file() {
    let (_t, dir) = init_project("demo", "claude");
    let set = aibox(
        &dir,
        &[
            "config",
            "set",
            "--local",
            "network.upstream_proxy",
            "proxy.corp:3128",
        ],
    );
    assert!(set.status.success(), "{}", text(&set));
    let out = aibox(
        &dir,
        &["config", "get", "--local", "network.upstream_proxy"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "proxy.corp:3128\n");
    let out = aibox(&dir, &["config", "get", "network.upstream_proxy"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("config get --local network.upstream_proxy"),
        "{}",
        text(&out)
    );
}

/// QA28 r1: `mcp list -o json` has what the text shows: the servers added by hand too.
#[test]
fn mcp_list_json_has_the_servers_added_by_hand() {
    let (_t, dir) = init_project("demo", "claude");
    assert!(aibox(&dir, &["apply"]).status.success());
    fs_err::write(
        dir.join(".mcp.json"),
        r#"{ "mcpServers": { "mine": { "command": "my-server" } } }"#,
    )
    .unwrap();
    let out = aibox(&dir, &["-o", "json", "mcp", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["servers"], serde_json::json!([]), "{list}");
    assert_eq!(list["hand_added"][0]["name"], "mine", "{list}");
    assert!(list["not_resolved"].is_null(), "{list}");
}

#[test]
fn the_peak_memory_is_reported_only_when_asked() {
    let (_t, dir) = init_project("mem", "claude");
    let plain = aibox(&dir, &["--quiet", "apply"]);
    assert!(plain.status.success(), "{}", text(&plain));
    assert!(!text(&plain).contains("peak RSS"), "{}", text(&plain));
    // Asked for, it is the last line on stderr, even with --quiet and after a failure.
    for args in [
        &["--quiet", "apply"][..],
        &["config", "get", "no.such.key"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_aibox"))
            .current_dir(&dir)
            .env("NO_COLOR", "1")
            .env("AIBOX_PEAK_RSS", "1")
            .env_remove("AIBOX_PROJECT")
            .args(args)
            .output()
            .expect("run aibox");
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or_default();
        let kib: u64 = last
            .strip_prefix("aibox: peak RSS ")
            .and_then(|l| l.strip_suffix(" KiB"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{args:?}: {}", text(&out)));
        // A real figure: more than the binary's first page, less than a gigabyte.
        assert!((1_000..1_000_000).contains(&kib), "{kib} KiB");
    }
}

#[test]
fn init_then_validate_get_set_apply_check() {
    let (_t, dir) = init_project("demo", "claude");
    assert!(dir.join("aibox.toml").is_file());
    assert!(
        fs_err::read_to_string(dir.join(".gitignore"))
            .unwrap()
            .contains(".aibox-local.toml")
    );

    // A second init refuses and changes nothing.
    let before = fs_err::read_to_string(dir.join("aibox.toml")).unwrap();
    let out = aibox(&dir, &["init", "demo", "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        fs_err::read_to_string(dir.join("aibox.toml")).unwrap(),
        before
    );

    let out = aibox(&dir, &["config", "validate"]);
    assert!(out.status.success(), "{}", text(&out));

    let out = aibox(&dir, &["config", "get", "container.name"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("demo"));

    let out = aibox(&dir, &["config", "set", "container.user", "dev"]);
    assert!(out.status.success(), "{}", text(&out));
    let after = fs_err::read_to_string(dir.join("aibox.toml")).unwrap();
    assert!(after.contains("user = \"dev\""), "{after}");
    // Comments written by init survive the edit.
    let comments = |s: &str| {
        s.lines()
            .filter(|l| l.trim_start().starts_with('#'))
            .count()
    };
    assert_eq!(comments(&after), comments(&before));

    // An invalid edit is refused and the file is untouched.
    let out = aibox(
        &dir,
        &["config", "set", "container.uid", "\"not a number\""],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        fs_err::read_to_string(dir.join("aibox.toml")).unwrap(),
        after
    );

    // Out of date before apply, up to date after.
    let out = aibox(&dir, &["apply", "--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let out = aibox(&dir, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(dir.join(".devcontainer/docker-compose.yml").is_file());
    let out = aibox(&dir, &["apply", "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = aibox(&dir, &["--output", "json", "apply"]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        report["files"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["action"] != "created" && f["action"] != "updated")
    );
}

#[test]
fn invalid_config_exits_2_and_names_the_file() {
    let (_t, dir) = tempdir();
    fs_err::write(
        dir.join("aibox.toml"),
        "[container]\nname = \"x\"\nnmae = \"y\"\n",
    )
    .unwrap();
    let out = aibox(&dir, &["config", "validate"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("aibox.toml"), "{err}");
    assert!(err.contains("nmae"), "{err}");
}

/// `doctor` reports a configuration it cannot load as its failed `config` check and exits
/// 1, as for any failed check (`docs-site/src/doctor.md`); no project at all is a user
/// error, exit 2.
#[test]
fn doctor_exits_1_for_a_broken_config_and_2_without_a_project() {
    let (_t, dir) = tempdir();
    for broken in [
        "[container]\nname = \"x\"\nnmae = \"y\"\n",
        "[container\nname = \"x\"\n",
        "",
    ] {
        fs_err::write(dir.join("aibox.toml"), broken).unwrap();
        let out = aibox(&dir, &["doctor", "--no-update-check"]);
        assert_eq!(out.status.code(), Some(1), "{broken:?}: {}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout
                .lines()
                .any(|l| l.trim().starts_with("error") && l.contains("config")),
            "{broken:?}: {}",
            text(&out)
        );
    }
    let (_t, empty) = tempdir();
    let out = aibox(&empty, &["doctor"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// A broken configuration line is quoted in the error, but a secret on it is not: the
/// terminal (and any log of it) never shows the value.
#[test]
fn a_secret_on_a_broken_config_line_is_not_echoed() {
    let (_t, dir) = tempdir();
    for broken in [
        "[container.environment]\nAPI_TOKEN = \"fake-secret-value-123\" trailing\n",
        "[container.environment]\nDB_PASSWORD = fake-secret-value-123\n",
        "[container]\nname = \"x\"\nnmae = \"ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000\"\n",
    ] {
        fs_err::write(
            dir.join("aibox.toml"),
            format!("[container]\nname = \"x\"\n{broken}"),
        )
        .unwrap();
        let out = aibox(&dir, &["apply"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("aibox.toml"), "{err}");
        for secret in ["fake-secret-value-123", "ghp_FAKEFAKE"] {
            assert!(!err.contains(secret), "{secret} echoed:\n{err}");
        }
        // The JSON error is redacted too.
        let out = aibox(&dir, &["apply", "-o", "json"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let json = String::from_utf8_lossy(&out.stdout);
        assert!(json.contains("aibox.toml"), "{json}");
        for secret in ["fake-secret-value-123", "ghp_FAKEFAKE"] {
            assert!(!json.contains(secret), "{secret} echoed:\n{json}");
        }
    }
}

#[test]
fn schema_is_printed_as_json() {
    let (_t, dir) = tempdir();
    let out = aibox(&dir, &["config", "schema"]);
    assert!(out.status.success(), "{}", text(&out));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json schema");
    assert!(schema["properties"]["container"].is_object());
}

/// The documentation site's reference pages are generated; the committed copies must match.
/// Regenerate with `AIBOX_UPDATE_DOCS=1 cargo test -p aibox-cli --test it -- cli::reference_docs`.
#[test]
fn reference_docs_are_in_sync() {
    let (_t, dir) = tempdir();
    let root = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs-site/src/reference");
    for (page, file) in [("cli", "cli.md"), ("config", "configuration.md")] {
        let out = aibox(&dir, &["docs", page]);
        assert!(out.status.success(), "{}", text(&out));
        let generated = String::from_utf8(out.stdout).expect("utf8");
        let path = root.join(file);
        if std::env::var_os("AIBOX_UPDATE_DOCS").is_some() {
            fs_err::create_dir_all(&root).unwrap();
            fs_err::write(&path, &generated).unwrap();
        }
        let committed = fs_err::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{path} is out of date: run `AIBOX_UPDATE_DOCS=1 cargo test -p aibox-cli --test it -- cli::reference_docs` and commit it"
        );
        // The README carries the same exit-code table as the CLI reference.
        if page == "cli" {
            // Every command `aibox --help` lists has its section, `help` included.
            assert!(generated.contains("### `aibox help`\n"), "no `aibox help`");
            let table = generated
                .split("## Exit codes\n\n")
                .nth(1)
                .and_then(|rest| rest.split("\n\n").next())
                .expect("the CLI reference has an exit-code table");
            let readme = fs_err::read_to_string(root.join("../../../README.md")).unwrap();
            assert!(
                readme.contains(table),
                "README.md's exit-code table differs from `aibox docs cli`'s:\n{table}"
            );
        }
    }
}

/// Runs `aibox ARGS` under a pseudo-terminal (util-linux `script`), typing `input`.
fn aibox_tty(dir: &Utf8Path, args: &str, input: &str) -> Output {
    use std::io::Write as _;
    let script = ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| Utf8Path::new(p).is_file())
        .expect(
            "`script` (util-linux) is needed for the terminal tests: apt-get install util-linux",
        );
    let mut child = Command::new(script)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("AIBOX_PROJECT")
        .args([
            "-qec",
            &format!("{} {args}", env!("CARGO_BIN_EXE_aibox")),
            "/dev/null",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run script");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `skill review` gives one verdict for a failing skill, never two that disagree: a skill
/// folder with an MCP server would be gated (blocking); without one nothing of it is
/// registered (not blocking).
#[test]
fn skill_review_gives_one_verdict() {
    let (_t, dir) = init_project("t", "claude");
    let fixture = Utf8Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../aibox-skill-review/tests/fixtures/p2-network");
    let skill = dir.join("p2-network");
    aibox_test_support::copy_tree(&fixture, &skill).unwrap();
    let verdicts = |out: &Output| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| {
                l.starts_with("Verdict:")
                    || l.contains("will not register")
                    || l.contains("not blocking")
            })
            .map(ToOwned::to_owned)
            .collect::<Vec<_>>()
    };
    let out = aibox(&dir, &["skill", "review", skill.as_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let lines = verdicts(&out);
    assert_eq!(lines.len(), 1, "{}", text(&out));
    assert!(lines[0].starts_with("Verdict: blocking"), "{}", text(&out));

    // Without a server it still fails (a script fetches from an undeclared host), but
    // `apply` registers nothing of it.
    fs_err::remove_dir_all(skill.join("mcp")).unwrap();
    fs_err::write(
        skill.join("scripts/fetch.sh"),
        "#!/bin/sh\ncurl -fsS https://api.example.com/x\n",
    )
    .unwrap();
    let out = aibox(&dir, &["skill", "review", skill.as_str()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let lines = verdicts(&out);
    assert_eq!(lines.len(), 1, "{}", text(&out));
    assert!(
        lines[0].starts_with("Verdict: reported, not blocking"),
        "{}",
        text(&out)
    );
}

/// A consent key set by hand says what it relaxes (even with `--quiet`, and in JSON); an
/// ordinary key and a consent set to `false` say nothing of the kind.
#[test]
fn config_set_of_a_consent_key_prints_what_it_relaxes() {
    let (_t, dir) = init_project("t", "codex");
    let out = aibox(
        &dir,
        &[
            "--quiet",
            "config",
            "set",
            "security.acknowledge_seccomp_unconfined",
            "true",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warning:"), "{stderr}");
    assert!(stderr.contains("seccomp=unconfined"), "{stderr}");
    assert!(stderr.contains("no syscall filter"), "{stderr}");

    let out = aibox(
        &dir,
        &[
            "--output",
            "json",
            "config",
            "set",
            "security.acknowledge_seccomp_profile",
            "true",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        json["relaxes"]
            .as_str()
            .unwrap()
            .contains("user namespaces"),
        "{json}"
    );

    for (key, value) in [
        ("security.acknowledge_seccomp_unconfined", "false"),
        ("container.user", "dev"),
    ] {
        let out = aibox(&dir, &["config", "set", key, value]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("warning:"),
            "{}",
            text(&out)
        );
    }
}

/// At a terminal, a missing seccomp consent is explained and asked for (default No);
/// only an explicit "y" records it, and `--yes` never does.
#[test]
fn seccomp_consent_is_asked_at_a_terminal_and_never_implied() {
    let (_t, dir) = init_project("t", "codex");
    let out = aibox(
        &dir,
        &["config", "set", "security.codex_sandbox", "unconfined"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let consented = || {
        fs_err::read_to_string(dir.join("aibox.toml"))
            .unwrap()
            .lines()
            .any(|l| l.trim() == "acknowledge_seccomp_unconfined = true")
    };

    // Not a terminal: refused with the explanation, nothing written.
    let out = aibox(&dir, &["apply"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("aibox::policy::seccomp_consent"));
    assert!(!dir.join(".devcontainer").exists());

    // --yes at a terminal: still no consent, and no question.
    let out = aibox_tty(&dir, "--yes apply", "y\n");
    assert!(!out.status.success(), "{}", text(&out));
    assert!(!consented());

    // Enter (default No) and "n": refused, nothing recorded or written.
    for answer in ["\n", "n\n"] {
        let out = aibox_tty(&dir, "apply", answer);
        assert!(!out.status.success(), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Record your consent"),
            "{}",
            text(&out)
        );
        assert!(!consented());
        assert!(!dir.join(".devcontainer/docker-compose.yml").exists());
    }

    // "y": recorded with comments kept, and the apply goes through.
    let comments = |s: &str| {
        s.lines()
            .filter(|l| l.trim_start().starts_with('#'))
            .count()
    };
    let before = comments(&fs_err::read_to_string(dir.join("aibox.toml")).unwrap());
    let out = aibox_tty(&dir, "apply", "y\n");
    assert!(out.status.success(), "{}", text(&out));
    assert!(consented());
    assert_eq!(
        comments(&fs_err::read_to_string(dir.join("aibox.toml")).unwrap()),
        before
    );
    let compose = fs_err::read_to_string(dir.join(".devcontainer/docker-compose.yml")).unwrap();
    assert!(compose.contains("seccomp=unconfined"), "{compose}");
}

/// More reach for the container than the checkout's first apply recorded (here a host
/// an agent in the container could add to `.aibox-local.toml`): refused without a person
/// at the terminal (exit 2, nothing written), asked at one (Enter or `n` refuses, `--yes`
/// approves nothing), applied after a `y` or with `--approve-reach`.
#[test]
fn more_reach_for_the_container_is_refused_asked_or_approved() {
    let (_t, dir) = init_project("t", "claude");
    let out = aibox(&dir, &["config", "set", "network.egress", "\"allowlist\""]);
    assert!(out.status.success(), "{}", text(&out));
    let out = aibox(&dir, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    let filter = dir.join(".devcontainer/aibox-egress/egress.local.filter");
    let allowed = || fs_err::read_to_string(&filter).unwrap().contains("exfil");
    let local = |hosts: &str| {
        fs_err::write(
            dir.join(".aibox-local.toml"),
            format!("[network]\nallow = [{hosts}]\n"),
        )
        .unwrap();
    };
    local("\"exfil.example\"");

    let out = aibox(&dir, &["apply"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("aibox::apply::reach_not_approved"),
        "{stderr}"
    );
    assert!(
        stderr.contains("+ host `exfil.example`, from .aibox-local.toml [network] allow"),
        "{stderr}"
    );
    assert!(!allowed());

    let out = aibox_tty(&dir, "--yes apply", "y\n");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!allowed());
    for answer in ["\n", "n\n"] {
        let out = aibox_tty(&dir, "apply", answer);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(shown.contains("exfil.example"), "{shown}");
        assert!(shown.contains("Approve this for this checkout?"), "{shown}");
        assert!(!allowed());
    }
    let out = aibox_tty(&dir, "apply", "y\n");
    assert!(out.status.success(), "{}", text(&out));
    assert!(allowed());

    // In a script: the flag, and a warning that names what was approved.
    local("\"exfil.example\", \"two.example\"");
    let out = aibox(&dir, &["apply", "--approve-reach"]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("approved for this checkout"), "{stderr}");
    assert!(stderr.contains("+ host `two.example`"), "{stderr}");
    // Fewer hosts: nothing to approve.
    local("");
    let out = aibox(&dir, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// What the sources want the user to know reaches the terminal and the JSON report:
/// here, a team MCP server whose package is not pinned to an exact version.
#[test]
fn apply_shows_warnings() {
    let (_t, dir) = tempdir();
    fs_err::write(
        dir.join("aibox.toml"),
        "[container]\nname = \"w\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"claude\"]\n\n\
         [[ai.mcp.servers]]\nname = \"issues\"\ncommand = \"npx\"\nargs = [\"-y\", \"@acme/issues-mcp\"]\n",
    )
    .unwrap();
    let out = aibox(&dir, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: mcp:") && err.contains("issues"),
        "{err}"
    );
    let out = aibox(&dir, &["--output", "json", "apply", "--check"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        report["warnings"].to_string().contains("issues"),
        "{report}"
    );
}

/// Codex on Docker with the engine's default profile: Docker's default seccomp profile
/// refuses the user namespaces Codex's bubblewrap sandbox needs, so `apply` exits 2,
/// writes nothing and names both consent keys, the narrower first; `--yes` does not
/// consent, and a "y" at the prompt records the narrower key, which then applies.
#[test]
fn codex_on_docker_without_consent_is_refused_and_yes_never_consents() {
    let (_t, dir) = tempdir();
    let init = [
        "init",
        "t",
        "--harness",
        "codex",
        "--context-mode",
        "harness-only",
        "--yes",
    ];
    let out = aibox(&dir, &init);
    assert!(out.status.success(), "{}", text(&out));
    let out = aibox(&dir, &["config", "set", "container.engine", "docker"]);
    assert!(out.status.success(), "{}", text(&out));
    let toml = || fs_err::read_to_string(dir.join("aibox.toml")).unwrap();
    let before = toml();

    for args in [&["apply"][..], &["--yes", "apply"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_aibox"))
            .current_dir(&dir)
            .env("NO_COLOR", "1")
            .env_remove("AIBOX_PROJECT")
            .env_remove("AIBOX_ENGINE")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("aibox::policy::seccomp_consent"),
            "{stderr}"
        );
        let profile = stderr
            .find("acknowledge_seccomp_profile")
            .expect("profile key");
        let unconfined = stderr
            .find("acknowledge_seccomp_unconfined")
            .expect("unconfined key");
        assert!(
            profile < unconfined,
            "the narrower key comes first: {stderr}"
        );
        assert!(stderr.contains("docker"), "{stderr}");
        assert!(!dir.join(".devcontainer").exists(), "{args:?} wrote files");
        assert!(!dir.join("aibox.lock").exists());
        assert_eq!(toml(), before, "{args:?} changed aibox.toml");
    }

    // --yes at a terminal: no consent, no question.
    let out = aibox_tty(&dir, "--yes apply", "y\n");
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(toml(), before);

    // "y" at the prompt: the narrower key is recorded and the generated profile is used.
    let out = aibox_tty(&dir, "apply", "y\n");
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        toml()
            .lines()
            .any(|l| l.trim() == "acknowledge_seccomp_profile = true"),
        "{}",
        toml()
    );
    let compose = fs_err::read_to_string(dir.join(".devcontainer/docker-compose.yml")).unwrap();
    assert!(
        compose.contains("seccomp=.devcontainer/aibox-seccomp.json"),
        "{compose}"
    );
}

/// A folder that refuses writes is the environment, not the project: exit 3, and the
/// apply changes nothing (all or nothing).
#[test]
fn a_refused_write_exits_3_and_changes_nothing() {
    struct Immutable(camino::Utf8PathBuf);
    impl Drop for Immutable {
        fn drop(&mut self) {
            let _ = Command::new("chattr")
                .args(["-i", self.0.as_str()])
                .status();
        }
    }
    let (_t, dir) = tempdir();
    let toml = "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"claude\", \"vscode\"]\n\n[[ai.mcp.servers]]\nname = \"first\"\ncommand = \"npx\"\nargs = [\"-y\", \"first-mcp@1.0.0\"]\n";
    fs_err::write(dir.join("aibox.toml"), toml).unwrap();
    let out = aibox(&dir, &["apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    fs_err::write(
        dir.join("aibox.toml"),
        format!("{toml}\n[[ai.mcp.servers]]\nname = \"docs\"\ncommand = \"npx\"\nargs = [\"-y\", \"docs-mcp@1.0.0\"]\n"),
    )
    .unwrap();
    let mcp_before = fs_err::read_to_string(dir.join(".mcp.json")).unwrap();
    let vscode = dir.join(".vscode");
    let set = Command::new("chattr")
        .args(["+i", vscode.as_str()])
        .status()
        .expect("chattr");
    assert!(set.success());
    let guard = Immutable(vscode);
    let out = aibox(&dir, &["apply"]);
    drop(guard);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(
        fs_err::read_to_string(dir.join(".mcp.json")).unwrap(),
        mcp_before
    );
}

/// `config set` and `config validate` run the checks `apply` runs: a literal secret in
/// the committed `aibox.toml`, `version = "latest"` and a plain-http processkit source are
/// refused by all three, with the same code.
#[test]
fn config_set_validate_and_apply_share_one_set_of_checks() {
    let (_t, dir) = init_project("demo", "claude");
    let good = fs_err::read_to_string(dir.join("aibox.toml")).unwrap();
    let cases: [(&str, &str, &str); 4] = [
        (
            "container.environment.GITHUB_TOKEN",
            "\"ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE\"",
            "aibox::config::literal_secret",
        ),
        ("processkit.version", "\"latest\"", "aibox::provenance::"),
        (
            "processkit.source",
            "\"http://releases.example.invalid/processkit\"",
            "aibox::provenance::insecure_url",
        ),
        // A trusted source is trusted for what is downloaded from it: never plain http.
        (
            "processkit.trusted_sources",
            "[\"http://releases.example.invalid/fork\"]",
            "aibox::provenance::insecure_url",
        ),
    ];
    for (key, value, code) in cases {
        // Processkit checks apply in processkit mode with a source.
        let mut base = good.replace("mode = \"harness-only\"", "mode = \"processkit\"");
        if !key.starts_with("container") {
            // A harness-only `init` writes no `[processkit]` table.
            base.push_str(
                "\n[processkit]\nsource = \"https://releases.example.invalid/processkit\"\nversion = \"v1.0.0\"\n",
            );
        }
        fs_err::write(dir.join("aibox.toml"), &base).unwrap();
        let out = aibox(&dir, &["config", "set", key, value]);
        assert_eq!(out.status.code(), Some(2), "set {key}: {}", text(&out));
        assert!(text(&out).contains(code), "set {key}: {}", text(&out));
        assert_eq!(
            fs_err::read_to_string(dir.join("aibox.toml")).unwrap(),
            base
        );

        // The same value written by hand: validate and apply refuse it alike.
        let edited = match key {
            "processkit.version" => base.replace("version = \"v1.0.0\"", "version = \"latest\""),
            "processkit.source" => base.replace("https://releases", "http://releases"),
            "processkit.trusted_sources" => base.replace(
                "version = \"v1.0.0\"\n",
                &format!("version = \"v1.0.0\"\ntrusted_sources = {value}\n"),
            ),
            _ => format!("{base}\n[container.environment]\nGITHUB_TOKEN = {value}\n"),
        };
        assert_ne!(edited, base);
        fs_err::write(dir.join("aibox.toml"), &edited).unwrap();
        for args in [&["config", "validate"][..], &["apply"]] {
            let out = aibox(&dir, args);
            assert_eq!(out.status.code(), Some(2), "{args:?} {key}: {}", text(&out));
            assert!(text(&out).contains(code), "{args:?} {key}: {}", text(&out));
        }
    }
}

/// `init --context-mode harness-only` with processkit flags: the flags contradict the
/// mode (it pins no release), so it is refused (exit 2) and nothing is written, where
/// it used to drop them without a word.
#[test]
fn init_refuses_processkit_flags_beside_harness_only() {
    let (_t, dir) = tempdir();
    for flags in [
        &["--processkit-version", "v0.28.3"][..],
        &["--processkit-source", "https://example.invalid/pk"],
        &[
            "--processkit-version",
            "v0.28.3",
            "--processkit-source",
            "https://example.invalid/pk",
        ],
    ] {
        let mut args = vec!["init", "demo", "--yes", "--context-mode", "harness-only"];
        args.extend_from_slice(flags);
        let out = aibox(&dir, &args);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", text(&out));
        assert!(
            text(&out).contains("aibox::cli::init_flags_conflict") && text(&out).contains(flags[0]),
            "{flags:?}: {}",
            text(&out)
        );
        assert!(!dir.join("aibox.toml").exists());
    }
}

/// QA: a gate refusal in `--output json` carried its findings only in one `help` text,
/// with null file and line. Each finding is a `related` entry with its own code, file
/// and line; the human output is unchanged.
#[test]
fn gate_refusals_in_json_list_each_finding_with_its_file_and_line() {
    let (_t, dir) = init_project("demo", "claude");
    let out = aibox(&dir, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    let override_file = dir.join(".devcontainer/docker-compose.override.yml");
    let scaffold = fs_err::read_to_string(&override_file).unwrap();
    // The scaffold's service has no keys (`  demo: {}`): give it one.
    let text_now = scaffold.replace(": {}\n", ":\n    privileged: true\n");
    assert_ne!(text_now, scaffold);
    fs_err::write(&override_file, &text_now).unwrap();
    let line = text_now
        .lines()
        .position(|l| l.contains("privileged: true"))
        .unwrap()
        + 1;

    let out = aibox(&dir, &["-o", "json", "apply"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["code"], "aibox::policy::gate", "{json}");
    let related = json["related"].as_array().unwrap();
    let privileged = related
        .iter()
        .find(|r| r["code"] == "aibox::policy::privileged")
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(
        privileged["file"], ".devcontainer/docker-compose.override.yml",
        "{json}"
    );
    assert_eq!(privileged["line"], line, "{json}");
    assert!(privileged["help"].is_string(), "{json}");

    let human = aibox(&dir, &["apply"]);
    assert!(
        text(&human).contains("aibox::policy::gate"),
        "{}",
        text(&human)
    );
}

/// The settings `apply` refuses while it plans are refused by `config set` (exit 2, file
/// unchanged) and `config validate`, which names `.aibox-local.toml` when it checked it
/// too; a setting that needs a seccomp consent is saved with a warning naming it, and
/// `config validate` refuses it until the consent is recorded.
#[test]
fn config_set_and_validate_refuse_the_settings_apply_refuses() {
    let (_t, dir) = init_project("demo", "codex");
    let out = aibox(&dir, &["config", "validate"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("aibox.toml is valid"), "{}", text(&out));
    fs_err::write(dir.join(".aibox-local.toml"), "").unwrap();
    let out = aibox(&dir, &["config", "validate"]);
    assert!(
        text(&out).contains("aibox.toml and ")
            && text(&out).contains(".aibox-local.toml are valid"),
        "{}",
        text(&out)
    );

    let out = aibox(
        &dir,
        &["config", "set", "--local", "container.environment.Q", "a$b"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("aibox::devcontainer::local_env_value"),
        "{}",
        text(&out)
    );
    let out = aibox(
        &dir,
        &[
            "config",
            "set",
            "--local",
            "container.extra_ca_certificates",
            "/nonexistent.pem",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("aibox::apply::extra_ca"),
        "{}",
        text(&out)
    );
    assert_eq!(
        fs_err::read_to_string(dir.join(".aibox-local.toml")).unwrap(),
        ""
    );

    let out = aibox(
        &dir,
        &["config", "set", "security.codex_sandbox", "seccomp-profile"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("needs the consent `security.acknowledge_seccomp_profile = true`"),
        "{}",
        text(&out)
    );
    let out = aibox(&dir, &["-o", "json", "config", "validate"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["code"], "aibox::policy::seccomp_consent", "{json}");
    // With the consent recorded, setting it again says what it relaxes and nothing
    // about a consent (QA: it warned that apply refuses it).
    let out = aibox(
        &dir,
        &[
            "config",
            "set",
            "security.acknowledge_seccomp_profile",
            "true",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = aibox(
        &dir,
        &["config", "set", "security.codex_sandbox", "seccomp-profile"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("create user namespaces")
            && !text(&out).contains("needs the consent")
            && !text(&out).contains("refuses"),
        "{}",
        text(&out)
    );
}

/// `config get` prints the effective value (defaults included) raw, JSON values with
/// `--output json`, and suggests the right key on a typo.
#[test]
fn config_get_prints_effective_raw_values_and_suggests_keys() {
    let (_t, dir) = tempdir();
    fs_err::write(
        dir.join("aibox.toml"),
        "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n",
    )
    .unwrap();
    let out = aibox(&dir, &["config", "get", "container.name"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "demo\n");
    // Not in the file: the default aibox uses.
    let out = aibox(&dir, &["config", "get", "ai.mcp.gateway.port"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "8765\n");
    let out = aibox(&dir, &["--output", "json", "config", "get", "ai.harnesses"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["value"], serde_json::json!([]));
    let out = aibox(&dir, &["config", "get", "container.usr"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("did you mean `container.user`"),
        "{}",
        text(&out)
    );
    let out = aibox(&dir, &["config", "get", "processkit.version"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("not set"), "{}", text(&out));
}

/// `init`: a folder name that is not a project name suggests `aibox init NAME`; without a
/// terminal the chosen defaults are printed; a nested project is warned about; a floating
/// `--processkit-version` (a branch) is refused before anything is written.
#[test]
fn init_says_what_it_chose_and_refuses_what_apply_would() {
    let (_t, base) = tempdir();
    let odd = base.join("My Project!");
    fs_err::create_dir_all(&odd).unwrap();
    let out = aibox(&odd, &["init"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("aibox init my-project"),
        "{}",
        text(&out)
    );
    assert!(!odd.join("aibox.toml").exists());

    let out = aibox(&odd, &["init", "demo"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out)
            .contains("harnesses = [\"claude\"] (the default; --harness to choose), context mode = harness-only (what init picks unasked, as it needs no download; --context-mode to choose)"),
        "{}",
        text(&out)
    );

    let inner = odd.join("tools");
    fs_err::create_dir_all(&inner).unwrap();
    let out = aibox(
        &inner,
        &[
            "init",
            "tools",
            "--harness",
            "codex",
            "--context-mode",
            "harness-only",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("is already an aibox project"),
        "{}",
        text(&out)
    );

    let pinned = base.join("pinned");
    fs_err::create_dir_all(&pinned).unwrap();
    let out = aibox(
        &pinned,
        &[
            "init",
            "pinned",
            "--processkit-source",
            "https://example.invalid/pk",
            "--processkit-version",
            "main",
        ],
    );
    // A branch floats: refused (`latest` is resolved to a tag, see
    // `processkit_versions_lists_published_releases`).
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("main"), "{}", text(&out));
    assert!(!pinned.join("aibox.toml").exists());
    assert!(!pinned.join(".gitignore").exists());
}

/// `skill enable` in harness-only mode records the choice but says it has no effect.
#[test]
fn skill_enable_in_harness_only_mode_warns() {
    let (_t, dir) = tempdir();
    fs_err::write(
        dir.join("aibox.toml"),
        "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n",
    )
    .unwrap();
    let out = aibox(&dir, &["skill", "enable", "research"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("has no effect"), "{}", text(&out));
}

/// `apply --check` names each stale committed file and the fix, and ignores local files
/// that a fresh clone lacks.
#[test]
fn apply_check_names_stale_committed_files_only() {
    let (_t, dir) = tempdir();
    let toml = "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"claude\"]\n";
    fs_err::write(dir.join("aibox.toml"), toml).unwrap();
    let out = aibox(&dir, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    for local in [
        ".devcontainer/aibox-local.env",
        ".devcontainer/docker-compose.local.yml",
    ] {
        fs_err::remove_file(dir.join(local)).unwrap();
    }
    fs_err::remove_dir_all(dir.join(".aibox")).unwrap();
    let out = aibox(&dir, &["apply", "--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    fs_err::write(dir.join("aibox.toml"), toml.replace("demo", "demo2")).unwrap();
    let out = aibox(&dir, &["apply", "--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(
        t.contains("stale (updated)  .devcontainer/docker-compose.yml"),
        "{t}"
    );
    assert!(t.contains("run `aibox apply` and commit the result"), "{t}");
    assert!(!t.contains("aibox-local.env"), "{t}");
}

/// A copy of `examples/demo` with the content pack beside it, as `cargo xtask demo` makes:
/// (its temporary folder, that folder, the project).
/// QA: with npm installed, the example's `apply` asked the npm registry about its team
/// server's (made-up) package and left the server unregistered. Run as `cargo xtask demo`
/// runs it (`AIBOX_NPM=none`, `AIBOX_UV=none`, `AIBOX_NO_UPDATE_CHECK=1`), an npm on `PATH`
/// is never asked (this one fails the test if it is) and every MCP server is registered.
#[test]
fn the_bundled_demo_runs_offline_as_the_readme_says() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_t, dir, project) = demo_copy();
    let bin = dir.join("bin");
    fs_err::create_dir_all(&bin).unwrap();
    for tool in ["npm", "uv"] {
        let path = bin.join(tool);
        fs_err::write(
            &path,
            format!("#!/bin/sh\necho asked >> '{dir}/{tool}-was-run'\nexit 1\n"),
        )
        .unwrap();
        fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_aibox"))
        .current_dir(&project)
        .env_clear()
        .env("PATH", format!("{bin}:/usr/bin:/bin"))
        .env("HOME", dir.join("home"))
        .env("NO_COLOR", "1")
        .envs([
            ("AIBOX_NPM", "none"),
            ("AIBOX_UV", "none"),
            ("AIBOX_NO_UPDATE_CHECK", "1"),
        ])
        .arg("apply")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("is not registered"), "{}", text(&out));
    for tool in ["npm", "uv"] {
        assert!(
            !dir.join(format!("{tool}-was-run")).exists(),
            "{tool} was run"
        );
    }
    let mcp = fs_err::read_to_string(project.join(".mcp.json")).unwrap();
    assert!(mcp.contains("\"issues\""), "{mcp}");
}

fn demo_copy() -> (tempfile::TempDir, camino::Utf8PathBuf, camino::Utf8PathBuf) {
    let (t, dir) = tempdir();
    let examples = aibox_test_support::workspace_root().join("examples");
    let project = dir.join("demo");
    aibox_test_support::copy_tree(&examples.join("demo"), &project).unwrap();
    aibox_test_support::copy_tree(
        &examples.join("processkit-pack"),
        &dir.join("processkit-pack"),
    )
    .unwrap();
    (t, dir, project)
}

/// The README's first command (`cargo xtask demo`) on a machine with only Rust: the
/// bundled example applies, re-applies as a no-op and passes `doctor` with no container
/// engine (nor Compose, nor anything else) on `PATH`.
#[test]
fn the_bundled_demo_works_with_no_engine_on_path() {
    let (_t, dir, project) = demo_copy();
    let empty_path = dir.join("empty-path");
    fs_err::create_dir_all(&empty_path).unwrap();
    for args in [
        &["apply"][..],
        &["apply"],
        &["apply", "--check"],
        &["mcp", "list"],
        &["doctor"],
        &["doctor", "--integrity"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_aibox"))
            .current_dir(&project)
            .env_clear()
            .env("PATH", &empty_path)
            .env("HOME", dir.join("home"))
            .env("NO_COLOR", "1")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "aibox {args:?}: {}", text(&out));
    }
    assert!(project.join(".devcontainer/Dockerfile").is_file());
    assert!(project.join("aibox.lock").is_file());
}

/// `skill list`, `skill review` and `doctor` give `skill` the same verdict, `expected`
/// (`reported`, `blocking`, `consented` or `stale`).
fn verdicts_agree(project: &Utf8Path, skill: &str, expected: &str) {
    let out = aibox(project, &["skill", "list", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == skill)
        .unwrap();
    assert_eq!(row["gate"]["verdict"], expected, "skill list: {row}");
    let out = aibox(project, &["skill", "list"]);
    let line = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with(&format!("{skill} ")))
        .unwrap()
        .to_owned();
    let shown = if expected == "stale" {
        "blocking (stale consent)"
    } else {
        expected
    };
    assert!(line.contains(&format!(", {shown}")), "skill list: {line}");
    let out = aibox(project, &["skill", "review", skill]);
    let review = text(&out);
    let verdict = review
        .lines()
        .find(|l| l.starts_with("Verdict:"))
        .unwrap_or_default();
    let want = match expected {
        "reported" => "Verdict: reported, not blocking",
        "consented" => "Verdict: consented",
        "stale" => "Verdict: blocking: the consent recorded for it is stale",
        _ => "Verdict: blocking: `aibox apply` will not register",
    };
    assert!(verdict.starts_with(want), "skill review: {review}");
    let out = aibox(project, &["doctor", "-o", "json"]);
    let doctor: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let about =
        |code: &str| {
            doctor["findings"].as_array().unwrap().iter().any(|f| {
                f["code"] == code && f["message"].as_str().unwrap_or_default().contains(skill)
            })
        };
    let codes = [
        ("reported", "aibox::doctor::first_party_review"),
        ("blocking", "aibox::doctor::skill_review_failed"),
        ("stale", "aibox::doctor::stale_consent"),
    ];
    for (verdict, code) in codes {
        assert_eq!(about(code), verdict == expected, "doctor {code}: {doctor}");
    }
}

/// `aibox skill review NAME` says whether the installed skill is first- or third-party and
/// why, lists the trusted sources, and prints its content digest and, for a failing
/// skill, the consent entry to record; recording it lets an edited skill through, and one
/// more edit makes it stale.
#[test]
fn skill_review_prints_trust_and_the_consent_to_record() {
    let (_t, _dir, project) = demo_copy();
    let out = aibox(&project, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));

    // First-party: the pack is a listed trusted source and the files are as installed.
    let out = aibox(&project, &["skill", "review", "skill-finder"]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "it fails point 4: {shown}");
    assert!(
        shown.contains("Trust: first-party: installed from the verified release of trusted source `../processkit-pack`"),
        "{shown}"
    );
    assert!(
        shown.contains(
            "Trusted sources: https://github.com/projectious-work/processkit, ../processkit-pack"
        ),
        "{shown}"
    );
    let out = aibox(&project, &["skill", "review", "skill-finder", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sha = json["sha256"].as_str().unwrap().to_owned();
    assert_eq!(sha.len(), 64, "{json}");
    assert_eq!(json["trust"]["trust"], "first-party", "{json}");
    verdicts_agree(&project, "skill-finder", "reported");

    // Edited in place: third-party, gated, and the review prints the entry to record.
    let server = project.join("context/skills/processkit/skill-finder/mcp/server.py");
    let mut code = fs_err::read_to_string(&server).unwrap();
    code.push_str("\n# local tweak\n");
    fs_err::write(&server, &code).unwrap();
    let out = aibox(&project, &["skill", "review", "skill-finder"]);
    let shown = text(&out);
    assert!(
        shown.contains(
            "Trust: third-party: differs from the verified release: mcp/server.py edited"
        ),
        "{shown}"
    );
    let start = shown.find("[[skills.review_exceptions]]\nskill").unwrap();
    let entry = &shown[start..];
    assert!(
        !entry.contains(&sha),
        "the digest follows the content: {entry}"
    );
    let out = aibox(&project, &["apply"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("skill-finder (point 4"),
        "{}",
        text(&out)
    );
    verdicts_agree(&project, "skill-finder", "blocking");
    let consent = entry
        .lines()
        .take(6)
        .collect::<Vec<_>>()
        .join("\n")
        .replace("<your name>", "Test Reviewer")
        .replace(
            "<why failed point(s) 4 are acceptable>",
            "starts with python3 on purpose",
        );
    let toml = fs_err::read_to_string(project.join("aibox.toml")).unwrap();
    fs_err::write(project.join("aibox.toml"), format!("{toml}\n{consent}\n")).unwrap();
    let out = aibox(&project, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("skill `skill-finder` differs from the verified release"));
    verdicts_agree(&project, "skill-finder", "consented");

    // One more edit: the consent is stale, an error naming the skill.
    code.push_str("# another\n");
    fs_err::write(&server, &code).unwrap();
    let out = aibox(&project, &["apply", "-o", "json"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["code"], "aibox::skill_review::stale_consent", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("skill-finder (point 4: its content changed since the consent"),
        "{err}"
    );
    verdicts_agree(&project, "skill-finder", "stale");
}

/// `aibox base-image pin` in `dir`, with its exit code and `aibox.toml` afterwards.
fn pin(dir: &Utf8Path, args: &[&str]) -> (Output, String) {
    let mut all = vec!["base-image", "pin"];
    all.extend_from_slice(args);
    let out = aibox(dir, &all);
    let toml = fs_err::read_to_string(dir.join("aibox.toml")).unwrap();
    (out, toml)
}

#[test]
fn base_image_pin_follows_a_real_registry_and_changes_nothing_on_errors() {
    use aibox_test_support::registry::LoopbackRegistry;
    let reg = LoopbackRegistry::start().unwrap();
    let first = reg.push("x/y", "t", "one").unwrap();
    let (_t, dir) = init_project("pinned", "claude");
    let toml = dir.join("aibox.toml");
    let mut original = fs_err::read_to_string(&toml).unwrap();
    original.push_str("# a comment of mine\n");
    fs_err::write(&toml, &original).unwrap();
    let image = format!("{}/x/y:t", reg.address);

    // Pinning names the digest the registry serves on GET (header and body agree).
    let (out, after) = pin(&dir, &[&image, "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (header, body) = reg.served_digest("x/y", "t").unwrap();
    assert_eq!(
        (header.as_str(), body.as_str()),
        (first.as_str(), first.as_str())
    );
    assert_eq!(report["new"], format!("{image}@{first}"));
    assert_eq!(report["changed"], true);
    assert!(
        after.contains(&format!("base_image = \"{image}@{first}\"")),
        "{after}"
    );
    assert!(after.contains("# a comment of mine"), "{after}");

    // Pinning the configured reference again: nothing to do.
    let (out, same) = pin(&dir, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("already pinned to the current digest"),
        "{}",
        text(&out)
    );
    assert_eq!(same, after);

    // The tag moves: a dry run shows it and writes nothing, a pin follows it.
    let second = reg.push("x/y", "t", "two").unwrap();
    assert_ne!(first, second);
    let (out, same) = pin(&dir, &["--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("{image}@{first} -> {image}@{second}")),
        "{}",
        text(&out)
    );
    assert_eq!(same, after);
    let (out, moved) = pin(&dir, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(moved.contains(&format!("\"{image}@{second}\"")), "{moved}");
    assert_eq!(reg.served_digest("x/y", "t").unwrap().0, second);

    // An unknown tag (environment, 3) and a reference without a tag (user, 2).
    let (out, same) = pin(&dir, &[&format!("{}/x/y:nope", reg.address)]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("does not know"), "{}", text(&out));
    assert_eq!(same, moved);
    let (out, same) = pin(&dir, &[&format!("{}/x/y", reg.address), "-o", "json"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["code"], "aibox::base_image::no_tag");
    assert_eq!(same, moved);

    // A stopped registry: exit 3, the committed pin stays.
    reg.stop();
    let (out, same) = pin(&dir, &["-o", "json"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["code"], "aibox::base_image::unreachable");
    assert_eq!(err["kind"], "environment");
    assert!(
        err["help"]
            .as_str()
            .unwrap()
            .contains("committed pin stays valid"),
        "{err}"
    );
    assert_eq!(same, moved);
}

#[test]
fn base_image_pin_takes_an_anonymous_token_and_hashes_a_get_answer() {
    use aibox_test_support::http::{Route, Server};
    let server = Server::start().unwrap();
    let host = server.url("").trim_start_matches("http://").to_owned();
    let manifest = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
    let challenge = format!(
        r#"Bearer realm="{}",service="test",scope="repository:x/y:pull""#,
        server.url("/token")
    );
    // No Docker-Content-Digest on the answer: HEAD cannot tell, GET's body decides.
    let mut denied = Route::status(401);
    denied.headers.push(("WWW-Authenticate".into(), challenge));
    server.route(
        "/v2/x/y/manifests/t",
        denied.when_authorized("Bearer tok", Route::ok(manifest.to_vec())),
    );
    server.route("/token", Route::ok(br#"{"token":"tok"}"#.to_vec()));
    let (_t, dir) = init_project("token", "claude");
    let (out, after) = pin(&dir, &[&format!("{host}/x/y:t")]);
    assert!(out.status.success(), "{}", text(&out));
    let digest = format!("sha256:{}", aibox_provenance::Sha256::of(manifest));
    assert!(
        after.contains(&format!("\"{host}/x/y:t@{digest}\"")),
        "{after}"
    );
    assert!(
        server
            .hits()
            .contains(&"/token?scope=repository%3Ax%2Fy%3Apull&service=test".to_owned()),
        "{:?}",
        server.hits()
    );

    // A token endpoint that refuses: exit 3, nothing written.
    server.route("/token", Route::status(403));
    server.route(
        "/v2/x/y/manifests/u",
        Route::status(401).when_authorized("Bearer tok", Route::ok(manifest.to_vec())),
    );
    let (out, same) = pin(&dir, &[&format!("{host}/x/y:u")]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("no anonymous token"), "{}", text(&out));
    assert_eq!(same, after);
}

/// `aibox self check` against a loopback releases feed laid out like GitHub's API.
fn self_check(api: &str, json: bool) -> Output {
    let (_t, dir) = tempdir();
    let mut args = vec!["self", "check"];
    if json {
        args.splice(0..0, ["--output", "json"]);
    }
    Command::new(env!("CARGO_BIN_EXE_aibox"))
        .current_dir(&dir)
        .env("NO_COLOR", "1")
        .env("AIBOX_GITHUB_API", api)
        // `self check` asks even in CI.
        .env("CI", "true")
        .args(&args)
        .output()
        .expect("run aibox")
}

#[test]
fn self_check_reports_a_newer_release_and_the_support_policy() {
    use aibox_test_support::http::{Route, Server};
    let feed = "/repos/projectious-work/aibox/releases/latest";
    let server = Server::start().unwrap();
    server.route(
        feed,
        Route::ok(r#"{"tag_name":"v99.1.0","html_url":"https://github.com/projectious-work/aibox/releases/tag/v99.1.0","draft":false,"prerelease":false}"#),
    );
    let out = self_check(&server.url(""), false);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("aibox 99.1.0 is out"), "{}", text(&out));
    assert!(stdout.contains("gets no more fixes"), "{}", text(&out));
    assert!(stdout.contains("update: curl -fsSL"), "{}", text(&out));
    assert!(stdout.contains("support policy:"), "{}", text(&out));
    let out = self_check(&server.url(""), true);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], "unsupported", "{json}");
    assert_eq!(json["latest"]["version"], "99.1.0");
    assert_eq!(json["update_due"], true);
    assert_eq!(json["current"], env!("CARGO_PKG_VERSION"));

    let server = Server::start().unwrap();
    server.route(
        feed,
        Route::ok(format!(
            r#"{{"tag_name":"v{}","html_url":"https://github.com/projectious-work/aibox/releases"}}"#,
            env!("CARGO_PKG_VERSION")
        )),
    );
    let out = self_check(&server.url(""), false);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("is the newest release"));

    // Unreachable, or a feed that is not a release: an environment error (exit 3) that
    // names the feed.
    server.route(feed, Route::status(404));
    let out = self_check(&server.url(""), false);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("releases feed"),
        "{}",
        text(&out)
    );
    // Plain HTTP to anything but loopback is refused before any request.
    let out = self_check("http://example.invalid", false);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
}

/// Selecting pk-doctor (in no tier of the real release) installs what it `uses:`,
/// transitively, and `skill list` says which skills came in as dependencies and by whom,
/// in text and JSON.
#[test]
fn skill_list_shows_dependencies_pulled_in_by_a_selected_skill() {
    let (_t, dir) = tempdir();
    // A download cache of its own: what other runs resolved must not change the outcome.
    let cache = dir.join("cache");
    let aibox = |project: &Utf8Path, args: &[&str]| {
        aibox_with(project, &[("XDG_CACHE_HOME", cache.as_str())], args)
    };
    let release = dir.join("release");
    aibox_test_support::copy_tree(
        &aibox_test_support::processkit_uses("v1.0.0-alpha.1"),
        &release,
    )
    .unwrap();
    let project = dir.join("p");
    fs_err::create_dir_all(&project).unwrap();
    let sha = aibox_test_support::tree_sha256(&release);
    fs_err::write(
        project.join("aibox.toml"),
        format!(
            "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\npackages = [\"minimal\"]\n\n\
             [processkit]\nsource = \"{release}\"\nversion = \"v1.0.0-alpha.1\"\nsha256 = \"{sha}\"\n\n\
             [skills]\ninclude = [\"pk-doctor\"]\n\n[ai]\nharnesses = [\"claude\"]\n"
        ),
    )
    .unwrap();
    let out = aibox(&project, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        project
            .join("context/skills/processkit/migration-management/SKILL.md")
            .is_file()
    );

    let out = aibox(&project, &["skill", "list", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let of = |name: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {list}"))["dependency_of"]
            .clone()
    };
    assert_eq!(of("migration-management"), serde_json::json!(["pk-doctor"]));
    assert_eq!(
        of("decision-record"),
        serde_json::json!(["migration-management"])
    );
    assert_eq!(of("pk-doctor"), serde_json::json!([]));
    assert_eq!(
        of("event-log"),
        serde_json::json!([]),
        "selected by the tier"
    );

    let out = aibox(&project, &["skill", "list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name}: {stdout}"))
            .to_owned()
    };
    assert!(
        line("migration-management").contains("dependency of pk-doctor"),
        "{stdout}"
    );
    assert!(!line("pk-doctor").contains("dependency of"), "{stdout}");

    pk_doctor_is_not_run_unlocked(&project, &cache);

    // Excluding a dependency keeps it, with a warning that names who uses it.
    let toml = fs_err::read_to_string(project.join("aibox.toml")).unwrap();
    fs_err::write(
        project.join("aibox.toml"),
        toml.replace(
            "include = [\"pk-doctor\"]",
            "include = [\"pk-doctor\"]\nexclude = [\"migration-management\"]",
        ),
    )
    .unwrap();
    let out = aibox(&project, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("`migration-management`, which pk-doctor uses; it stays installed"),
        "{}",
        text(&out)
    );
    assert!(
        project
            .join("context/skills/processkit/migration-management/SKILL.md")
            .is_file()
    );
}

/// `aibox` with the releases API moved to `api` (a loopback server standing in for
/// api.github.com) and no token from the caller's environment unless `token` is given.
fn aibox_api(dir: &Utf8Path, api: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aibox"));
    cmd.current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("AIBOX_PROJECT")
        .env_remove("GITHUB_TOKEN")
        .env_remove("GH_TOKEN")
        .env("AIBOX_GITHUB_API", api)
        .args(args);
    if let Some(t) = token {
        cmd.env("GITHUB_TOKEN", t);
    }
    cmd.output().expect("run aibox")
}

/// A loopback server answering like GitHub's releases API for the official repository,
/// over two pages, with a draft and a pre-release.
fn releases_api() -> aibox_test_support::http::Server {
    use aibox_test_support::http::{Route, Server};
    let server = Server::start().unwrap();
    let rel = |tag: &str, draft: bool, pre: bool| {
        serde_json::json!({"tag_name": tag, "name": tag, "draft": draft, "prerelease": pre,
                           "published_at": "2026-07-23T19:21:58Z"})
    };
    let first = "/gh/repos/projectious-work/processkit/releases?per_page=100&page=1";
    let second = "/gh/repositories/7/releases?per_page=100&page=2";
    let mut page1 = Route::ok(
        serde_json::to_vec(&[
            rel("v1.0.0-alpha.1", false, true),
            rel("v1.0.0", true, false),
        ])
        .unwrap(),
    );
    page1.headers.push((
        "Link".into(),
        format!("<{}>; rel=\"next\"", server.url(second)),
    ));
    server.route(first, page1);
    server.route(
        second,
        Route::ok(
            serde_json::to_vec(&[rel("v0.28.3", false, false), rel("v0.28.2", false, false)])
                .unwrap(),
        ),
    );
    server
}

/// `aibox processkit versions` lists the official repository's releases (the default
/// source) newest first, drafts left out, and marks the pre-release and the latest.
#[test]
fn processkit_versions_lists_published_releases() {
    let server = releases_api();
    let (_t, dir) = tempdir();
    let api = server.url("/gh");
    let out = aibox_api(&dir, &api, None, &["processkit", "versions"]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("releases of https://github.com/projectious-work/processkit"),
        "{stdout}"
    );
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with('v')).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert!(rows[0].starts_with("v1.0.0-alpha.1") && rows[0].contains("pre-release"));
    assert!(rows[1].starts_with("v0.28.3") && rows[1].contains("latest"));
    assert!(
        !stdout.contains("v1.0.0 "),
        "the draft is left out: {stdout}"
    );

    let out = aibox_api(&dir, &api, None, &["processkit", "versions", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["latest"], "v0.28.3");
    assert_eq!(json["drafts_left_out"], 1);
    assert_eq!(json["releases"][0]["prerelease"], true);

    // `init --processkit-version latest` pins the newest release as its exact tag.
    let project = dir.join("p");
    fs_err::create_dir_all(&project).unwrap();
    let out = aibox_api(
        &project,
        &api,
        None,
        &["init", "p", "--yes", "--processkit-version", "latest"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let toml = fs_err::read_to_string(project.join("aibox.toml")).unwrap();
    assert!(toml.contains("version = \"v0.28.3\""), "{toml}");
    assert!(toml.contains("mode = \"processkit\""), "{toml}");
    assert!(
        toml.contains("# source = \"https://github.com/projectious-work/processkit\""),
        "{toml}"
    );
    assert!(!toml.contains("\"latest\""), "{toml}");
    assert!(text(&out).contains("v0.28.3"), "{}", text(&out));
}

/// A rate-limited API is a clear error (exit 3, when to retry, how to raise the limit),
/// and the token never appears in what aibox prints.
#[test]
fn processkit_versions_reports_a_rate_limit_without_the_token() {
    use aibox_test_support::http::{Route, Server};
    let server = Server::start().unwrap();
    let mut limited = Route::status(403);
    limited.headers = vec![
        ("x-ratelimit-remaining".into(), "0".into()),
        ("x-ratelimit-reset".into(), "1790000000".into()),
    ];
    server.route(
        "/gh/repos/projectious-work/processkit/releases?per_page=100&page=1",
        limited,
    );
    let (_t, dir) = tempdir();
    let token = "ghp_FAKEfakeFAKEfakeFAKEfakeFAKEfake0000";
    for args in [
        &["processkit", "versions"][..],
        &["init", "p", "--yes", "--processkit-version", "latest"],
    ] {
        let out = aibox_api(&dir, &server.url("/gh"), Some(token), args);
        let shown = text(&out);
        assert_eq!(out.status.code(), Some(3), "{shown}");
        assert!(shown.contains("rate limit"), "{shown}");
        assert!(shown.contains("2026-09-21T14:13:20Z"), "{shown}");
        assert!(!shown.contains("ghp_FAKE"), "{shown}");
    }
    assert!(!dir.join("aibox.toml").exists(), "init wrote nothing");
}

/// `doctor --processkit` on a project applied without a resolver (the suite's
/// `AIBOX_UV=none`): pk-doctor's dependencies are not locked, so it is not run, which doctor
/// says; without the flag nothing of it shows.
fn pk_doctor_is_not_run_unlocked(project: &Utf8Path, cache: &Utf8Path) {
    let aibox = |project: &Utf8Path, args: &[&str]| {
        aibox_with(project, &[("XDG_CACHE_HOME", cache.as_str())], args)
    };
    let out = aibox(project, &["doctor", "--processkit", "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "aibox::doctor::pk_doctor_unlocked"),
        "{report}"
    );
    assert!(
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "pk-doctor")
    );
    // Without the flag it does not run, and its script is never called an MCP server.
    let out = aibox(project, &["doctor", "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for f in report["findings"].as_array().unwrap() {
        let code = f["code"].as_str().unwrap_or_default();
        assert!(!code.contains("pk_doctor"), "{f}");
        assert!(
            !f["message"]
                .as_str()
                .unwrap_or_default()
                .contains("pk-doctor-script"),
            "{f}"
        );
    }
}

/// `network list` shows the runtime allowlist with origins, and the build's registries
/// apart, as a table a person reads.
#[test]
fn network_list_shows_runtime_hosts_and_build_registries_apart() {
    let (_t, dir) = init_project("netlist", "claude");
    let out = aibox(&dir, &["config", "set", "network.egress", "\"allowlist\""]);
    assert!(out.status.success(), "{}", text(&out));
    let out = aibox(&dir, &["network", "list"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    let (runtime, build) = shown
        .split_once("build time only")
        .unwrap_or_else(|| panic!("no build-time table: {shown}"));
    assert!(
        runtime
            .lines()
            .any(|l| l.starts_with("api.anthropic.com") && l.ends_with("tool claude-code 2.1.197")),
        "{shown}"
    );
    assert!(!runtime.contains("registry.npmjs.org"), "{shown}");
    assert!(
        build.lines().any(|l| l.starts_with("registry.npmjs.org")
            && l.contains("download: tool claude-code 2.1.197")),
        "{shown}"
    );
    assert!(
        build
            .lines()
            .any(|l| l.starts_with("deb.debian.org")
                && l.contains("apt: egress proxy tinyproxy-bin")),
        "{shown}"
    );
}

/// A byte that is not UTF-8 is the user's to fix (exit 2, a config syntax problem at its
/// line and column, in either file), not an unreadable file (exit 3).
#[test]
fn a_non_utf8_byte_is_a_config_error_at_its_position() {
    let (_t, dir) = init_project("bytes", "claude");
    let team = fs_err::read(dir.join("aibox.toml")).unwrap();
    let mut bad = team.clone();
    bad.extend_from_slice(b"# caf\xe9\n");
    let line = String::from_utf8_lossy(&bad).lines().count();
    fs_err::write(dir.join("aibox.toml"), &bad).unwrap();
    for args in [
        &["config", "validate"][..],
        &["config", "get", "container.name"],
        &["config", "set", "container.user", "dev"],
    ] {
        let out = aibox(&dir, args);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(2), "{all}");
        assert!(all.contains("aibox::config::syntax"), "{all}");
        assert!(
            all.contains(&format!(
                "not UTF-8 text: byte 0xE9 at line {line}, column 6"
            )),
            "{all}"
        );
    }
    fs_err::write(dir.join("aibox.toml"), &team).unwrap();
    fs_err::write(
        dir.join(".aibox-local.toml"),
        b"[container.environment]\nA = \"\xff\"\n",
    )
    .unwrap();
    let out = aibox(&dir, &["--output", "json", "config", "validate"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["kind"], "user", "{json}");
    assert_eq!(json["line"], 2, "{json}");
    assert_eq!(json["column"], 6, "{json}");
    assert!(
        json["file"]
            .as_str()
            .unwrap()
            .ends_with(".aibox-local.toml"),
        "{json}"
    );
}

/// `-q` keeps reports to what needs attention: `doctor` prints no summary, no passed
/// checks and no notes (only errors and warnings), `mcp list` only servers not registered,
/// `apply` only its warnings.
#[test]
fn quiet_reports_show_only_what_needs_attention() {
    let (_t, dir) = init_project("hush", "claude");
    let out = aibox(
        &dir,
        &[
            "mcp",
            "add",
            "issues",
            "--",
            "npx",
            "-y",
            "@acme/issues-mcp@2.1.0",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = aibox(&dir, &["-q", "mcp", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "{}",
        text(&out)
    );
    let out = aibox(&dir, &["-q", "doctor", "--no-update-check"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("aibox doctor:"), "{}", text(&out));
    assert!(!stdout.contains("  ok "), "{}", text(&out));
    assert!(!stdout.contains("note["), "{}", text(&out));
    // Not applied yet: the out-of-sync warnings are what needs attention.
    assert!(stdout.starts_with("warning["), "{}", text(&out));

    // `apply -q` drops its status lines, not its warnings.
    let out = aibox(&dir, &["config", "set", "ai.execution.network", "deny"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = aibox(&dir, &["-q", "apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: config: [ai.execution] network is not applied"),
        "{}",
        text(&out)
    );
    assert!(!stderr.contains("file(s)"), "{}", text(&out));
}

/// A folder named `aibox.toml` or `.aibox-local.toml` is named as the problem, with a fix,
/// by `init` and by the commands that load the project (not "run `aibox init`", which
/// then says it exists); `init` says so before it would ask anything.
#[test]
fn a_folder_where_a_config_file_should_be_is_named() {
    let (_t, dir) = tempdir();
    fs_err::create_dir(dir.join("aibox.toml")).unwrap();
    for args in [&["init", "--yes"][..], &["apply"], &["config", "validate"]] {
        let out = aibox(&dir, args);
        let all = text(&out);
        assert_eq!(out.status.code(), Some(2), "{all}");
        assert!(
            all.contains("is a folder, where aibox's configuration file should be"),
            "{all}"
        );
        assert!(!all.contains("no questions asked"), "{all}");
    }
    let (_t, dir) = init_project("folders", "claude");
    fs_err::create_dir(dir.join(".aibox-local.toml")).unwrap();
    let out = aibox(&dir, &["config", "validate"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(".aibox-local.toml is a folder"),
        "{}",
        text(&out)
    );
}

/// `init` in a project that has its file refuses first: no notes or questions before it.
/// A folder that does not exist is said to not exist.
#[test]
fn init_refuses_before_it_asks() {
    let (_t, dir) = init_project("twice", "claude");
    let out = aibox(&dir, &["init"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("already exists"), "{all}");
    assert!(!all.contains("no questions asked"), "{all}");
    let out = aibox(&dir, &["--project", "nonexist", "init"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("nonexist does not exist"),
        "{}",
        text(&out)
    );
}

/// `mcp remove NAME` of a server that is in the other file says where it is and the
/// command that removes it (exit 2, nothing changed), both ways round.
#[test]
fn mcp_remove_points_to_the_file_that_has_the_server() {
    let (_t, dir) = init_project("remove", "claude");
    let add = |args: &[&str]| {
        let out = aibox(&dir, args);
        assert!(out.status.success(), "{}", text(&out));
    };
    add(&[
        "mcp",
        "add",
        "--local",
        "mine",
        "--",
        "npx",
        "-y",
        "mine@1.0.0",
    ]);
    add(&["mcp", "add", "team", "--", "npx", "-y", "team@1.0.0"]);
    let out = aibox(&dir, &["mcp", "remove", "mine"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("it is in .aibox-local.toml"),
        "{}",
        text(&out)
    );
    assert!(
        text(&out).contains("`aibox mcp remove --local mine`"),
        "{}",
        text(&out)
    );
    let out = aibox(&dir, &["mcp", "remove", "--local", "team"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("it is in aibox.toml"), "{}", text(&out));
    // A name in neither file is still nothing to do.
    let out = aibox(&dir, &["mcp", "remove", "nobody"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = aibox(&dir, &["mcp", "remove", "--local", "mine"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// Smaller messages: `--project` of a folder that does not exist says so, and a number out
/// of range says the range rather than a Rust type.
#[test]
fn missing_project_folder_and_number_range_are_said_plainly() {
    let (_t, dir) = init_project("plain", "claude");
    let out = aibox(&dir, &["--project", "nonexist", "apply"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("the project folder nonexist does not exist"),
        "{}",
        text(&out)
    );
    let out = aibox(&dir, &["config", "set", "container.uid", "99999999999"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("use a whole number from 0 to 4294967295"),
        "{}",
        text(&out)
    );
}

/// An apply killed half-way leaves its intent record: the integrity check says so first,
/// with the command that finishes it, and exits 1.
#[test]
fn integrity_names_an_interrupted_apply_and_its_fix() {
    let (_t, dir) = tempdir();
    let toml = "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n";
    fs_err::write(dir.join("aibox.toml"), toml).unwrap();
    fs_err::create_dir_all(dir.join(".aibox")).unwrap();
    fs_err::write(dir.join(".aibox/pending-processkit.toml"), "").unwrap();
    let out = aibox(&dir, &["doctor", "--integrity"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("processkit integrity: interrupted-apply"), "{t}");
    assert!(
        t.contains("fix: run `aibox apply` to finish the interrupted apply"),
        "{t}"
    );
}

/// `mcp add` and `config validate` refuse what `apply` refuses about MCP servers (a
/// literal environment value, a name in both files), so nothing is accepted first and
/// refused later; the files stay as they were.
#[test]
fn mcp_add_and_validate_refuse_what_apply_refuses() {
    let (_t, dir) = init_project("servers", "claude");
    let team = fs_err::read_to_string(dir.join("aibox.toml")).unwrap();
    let out = aibox(&dir, &["mcp", "add", "s", "--env", "MODE=fast", "--", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("aibox::mcp::literal_secret"),
        "{}",
        text(&out)
    );
    assert_eq!(
        fs_err::read_to_string(dir.join("aibox.toml")).unwrap(),
        team
    );

    let out = aibox(&dir, &["mcp", "add", "t", "--", "x"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = aibox(&dir, &["mcp", "add", "t", "--local", "--", "y"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("aibox::mcp::duplicate_server"),
        "{}",
        text(&out)
    );
    assert!(
        !dir.join(".aibox-local.toml").exists() || {
            let local = fs_err::read_to_string(dir.join(".aibox-local.toml")).unwrap();
            !local.contains("\"t\"")
        }
    );

    // Written by hand: validate says what apply would.
    let mut text_now = fs_err::read_to_string(dir.join("aibox.toml")).unwrap();
    text_now.push_str(
        "\n[[ai.mcp.servers]]\nname = \"u\"\ncommand = \"x\"\nenv = { MODE = \"fast\" }\n",
    );
    fs_err::write(dir.join("aibox.toml"), text_now).unwrap();
    for args in [&["config", "validate"][..], &["apply"][..]] {
        let out = aibox(&dir, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            text(&out).contains("aibox::mcp::literal_secret"),
            "{}",
            text(&out)
        );
    }
}

/// A problem already in aibox.toml is reported as the file's, at its own line, when an
/// edit is asked for: not blamed on the edit at a line the edit shifted.
#[test]
fn an_edit_of_a_broken_file_names_the_files_own_problem_and_line() {
    let (_t, dir) = init_project("broken", "claude");
    let mut team = fs_err::read_to_string(dir.join("aibox.toml")).unwrap();
    team.push_str("bogus = 1\n");
    let line = team.lines().count();
    fs_err::write(dir.join("aibox.toml"), &team).unwrap();
    for args in [
        &["config", "set", "container.user", "dev"][..],
        &["mcp", "add", "x", "--", "y"][..],
    ] {
        let out = aibox(&dir, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let t = text(&out);
        assert!(t.contains(&format!("aibox.toml:{line}:1")), "{args:?}: {t}");
        assert!(!t.contains("the edit below is refused"), "{t}");
        assert_eq!(
            fs_err::read_to_string(dir.join("aibox.toml")).unwrap(),
            team
        );
    }
    let out = aibox(&dir, &["config", "set", "container.user", "dev"]);
    assert!(
        text(&out).contains("it already has the problem below"),
        "{}",
        text(&out)
    );
}

/// A linked aibox.toml is named with where it leads and advice that works for an edit (it
/// said "the edit below is refused" with no edit, and to run `aibox init` again).
#[test]
fn an_edit_of_a_linked_config_file_says_where_it_leads() {
    let (_t, dir) = init_project("linked", "claude");
    let real = dir.join("real.toml");
    fs_err::rename(dir.join("aibox.toml"), &real).unwrap();
    std::os::unix::fs::symlink(&real, dir.join("aibox.toml")).unwrap();
    let out = aibox(&dir, &["config", "set", "container.user", "dev"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("aibox::config::linked_file"), "{t}");
    assert!(t.contains(&format!("(to {real})")), "{t}");
    assert!(t.contains("it is a symbolic link"), "{t}");
    assert!(
        !t.contains("aibox init") && !t.contains("the edit below"),
        "{t}"
    );
    // Reading through the link still works.
    let out = aibox(&dir, &["config", "get", "container.name"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// `mcp list` shows the servers added by hand to a harness file, which that harness loads
/// (it said "no MCP servers are configured" while Codex had one to start).
#[test]
fn mcp_list_shows_servers_added_by_hand() {
    let (_t, dir) = init_project("hand", "codex");
    fs_err::create_dir_all(dir.join(".codex")).unwrap();
    fs_err::write(
        dir.join(".codex/config.toml"),
        "[mcp_servers.mine]\ncommand = \"m\"\n",
    )
    .unwrap();
    let out = aibox(&dir, &["apply"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = aibox(&dir, &["mcp", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("added by hand"), "{t}");
    assert!(t.contains("codex mine (.codex/config.toml)"), "{t}");
}

/// `skill list` and `skill review` say first that an apply was interrupted: what they show
/// is the half-written state until `aibox apply` finishes it (as `doctor` says).
#[test]
fn skill_commands_warn_about_an_interrupted_apply() {
    let (_t, dir) = init_project("skills", "claude");
    fs_err::create_dir_all(dir.join(".aibox")).unwrap();
    fs_err::write(dir.join(".aibox/pending-processkit.toml"), "").unwrap();
    let out = aibox(&dir, &["skill", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("an apply was interrupted") && err.contains("run `aibox apply` to finish it"),
        "{err}"
    );
    fs_err::remove_file(dir.join(".aibox/pending-processkit.toml")).unwrap();
    let out = aibox(&dir, &["skill", "list"]);
    assert!(!text(&out).contains("interrupted"), "{}", text(&out));
}

/// A JSON result has the same keys on every run: what is absent is `null` or `[]`, not
/// left out, so a script written against a quiet run reads one with warnings.
#[test]
fn json_results_keep_their_keys() {
    let (_t, dir) = init_project("keys", "claude");
    let json = |args: &[&str]| -> serde_json::Value {
        let out = aibox(&dir, args);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
    };
    let apply = json(&["-o", "json", "apply"]);
    for key in [
        "warnings",
        "upgrade",
        "pending_migrations",
        "removed_temp_files",
    ] {
        assert!(apply.get(key).is_some(), "apply has no `{key}`: {apply}");
    }
    assert_eq!(apply["warnings"], serde_json::json!([]), "{apply}");
    assert!(apply["upgrade"].is_null(), "{apply}");
    let network = json(&["-o", "json", "network", "list"]);
    for key in ["proxy", "upstream_proxy", "not_resolved", "warnings"] {
        assert!(
            network.get(key).is_some(),
            "network list has no `{key}`: {network}"
        );
    }
    let doctor = json(&["-o", "json", "doctor", "--no-update-check"]);
    for check in doctor["checks"].as_array().unwrap() {
        assert!(check.get("skipped_because").is_some(), "{check}");
    }
    for key in ["seccomp_posture", "codex_sandbox"] {
        assert!(doctor.get(key).is_some(), "doctor has no `{key}`: {doctor}");
    }
}

/// `--output json` covers help and version too: one JSON object on stdout, exit 0.
#[test]
fn help_and_version_answer_in_json_when_asked() {
    let (_t, dir) = tempdir();
    let json = |args: &[&str]| -> serde_json::Value {
        let out = aibox(&dir, args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
    };
    let version = json(&["-o", "json", "--version"]);
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"), "{version}");
    for args in [
        &["-o", "json", "help", "config"][..],
        &["-o", "json", "config", "get", "--help"],
        &["--help", "--output", "json"],
    ] {
        let help = json(args);
        assert!(
            help["help"].as_str().unwrap().contains("Usage:"),
            "{args:?}: {help}"
        );
    }
    // Without JSON, clap's text as before.
    let out = aibox(&dir, &["--version"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("aibox "));
}

/// A literal secret refused by `config set` has its place in the JSON error's `file` and
/// `line` (it was only in the message), and the value is nowhere in the output.
#[test]
fn a_refused_secret_is_placed_in_the_json_error() {
    let (_t, dir) = init_project("placed", "claude");
    let token = format!("ghp_{}", "x".repeat(36));
    let out = aibox(
        &dir,
        &[
            "-o",
            "json",
            "config",
            "set",
            "container.environment.GH_TOKEN",
            &format!("\"{token}\""),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["code"], "aibox::config::literal_secret", "{json}");
    assert_eq!(json["file"], "aibox.toml", "{json}");
    assert!(json["line"].as_u64().is_some_and(|l| l > 0), "{json}");
    assert!(!text(&out).contains(&token), "{}", text(&out));
}
