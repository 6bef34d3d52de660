//! End-to-end proof of Codex's sandbox in aibox's container: real Podman, the real pinned
//! Codex (`test-tools/harnesses`, `@openai/codex` 0.171.0) mounted read-only into the
//! container through the personal overlay, and Codex's own `codex sandbox` in
//! workspace-write mode run through `aibox exec`.
//!
//! For every `[security] codex_sandbox` strategy: `aibox up` reports "Codex sandbox:
//! works", a write inside `/workspace` succeeds, writes to `/etc` and to the home
//! directory are refused by the sandbox (read-only file system, although the user may
//! write its home outside the sandbox), and the sandbox has no network but loopback.
//!
//! Docker's situation is reproduced on Podman by making Docker's default seccomp profile
//! (the fixture in `tests/fixtures/docker-seccomp/`) Podman's default: with the engine's
//! default the probe reports "blocked" and names the fix, Codex's sandbox cannot start,
//! and with `seccomp-profile` it works again.

// Helpers outside `#[test]` functions are test code too: failing loudly is the point.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The measured rows go to the test log (`--nocapture`), as the record behind the docs' table.
#![allow(clippy::print_stderr)]

use std::process::Output;

use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Podman};
use camino::{Utf8Path, Utf8PathBuf};

/// Where the pinned Codex package is mounted in the container.
const CODEX_DIR: &str = "/opt/codex";
/// Codex's version, pinned in `test-tools/harnesses/package-lock.json`.
const CODEX_VERSION: &str = "0.171.0";

/// Runs inside Codex's sandbox: one write in the workspace, one in `/etc`, one in the
/// home directory, then the sandbox's network interfaces.
const SANDBOXED_SCRIPT: &str = "echo sandboxed > /workspace/codex-sandbox-probe && echo WS-OK; \
    (echo x > /etc/aibox-codex-probe) 2>&1; (echo x > \"$HOME/aibox-codex-probe\") 2>&1; \
    echo NET; tail -n +3 /proc/net/dev | cut -d: -f1; echo END";

/// The platform folder of the pinned Codex package (`bin/codex` plus its bundled
/// `codex-resources/bwrap`), found under `test-tools/harnesses/node_modules/@openai`.
fn codex_package() -> Utf8PathBuf {
    let openai =
        aibox_test_support::workspace_root().join("test-tools/harnesses/node_modules/@openai");
    let hint = "run `npm ci --prefix test-tools/harnesses` (scripts/setup-test-deps.sh) first";
    let found = fs_err::read_dir(&openai)
        .unwrap_or_else(|e| panic!("{openai}: {e}; {hint}"))
        .filter_map(Result::ok)
        .filter_map(|pkg| fs_err::read_dir(pkg.path().join("vendor")).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|platform| Utf8PathBuf::from_path_buf(platform.path()).unwrap())
        .find(|platform| platform.join("bin/codex").is_file())
        .unwrap_or_else(|| panic!("no Codex binary under {openai}; {hint}"));
    let manifest = fs_err::read_to_string(found.join("codex-package.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(
        manifest["version"], CODEX_VERSION,
        "{found}: not the pinned Codex"
    );
    found
}

struct Project {
    // First field, so dropped first: the engine objects go before the folder.
    _cleanup: Cleanup,
    _tmp: tempfile::TempDir,
    root: Utf8PathBuf,
    /// This checkout's container.
    container: String,
    /// `CONTAINERS_CONF` for every aibox command (the harness's, or a variant of it).
    conf: Utf8PathBuf,
}

impl Project {
    /// `aibox init` with Codex, Podman named explicitly, and the pinned Codex package
    /// mounted read-only at [`CODEX_DIR`] through `.aibox-local.toml` (personal, never in
    /// a committed file).
    fn new(podman: &Podman, stem: &str, conf: Utf8PathBuf) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let name = format!("aibox-e2e-{stem}-{}", std::process::id());
        let root = Utf8PathBuf::from_path_buf(tmp.path().join(&name)).unwrap();
        fs_err::create_dir_all(&root).unwrap();
        let ok = |args: &[&str]| {
            let out = aibox(&root, &conf, args);
            assert!(
                out.status.success(),
                "aibox {args:?} failed: {}",
                show(&out)
            );
            out
        };
        ok(&[
            "init",
            &name,
            "--harness",
            "codex",
            "--context-mode",
            "harness-only",
            "--base-image",
            BASE_IMAGE,
            "--yes",
        ]);
        ok(&["config", "set", "container.engine", "podman"]);
        fs_err::write(
            root.join(".aibox-local.toml"),
            format!(
                "{}[[container.extra_volumes]]\nsource = \"{}\"\ntarget = \"{CODEX_DIR}\"\nread_only = true\n",
                aibox_test_support::podman::local_toml_with_host_ca(),
                codex_package()
            ),
        )
        .unwrap();
        // The developer owns the project folder; this test runs as root, so hand the
        // folder to the container user's IDs as a developer's checkout would be.
        let user = aibox_config::load_project(&root).unwrap().config.container;
        let owner = format!("{}:{}", user.uid, user.gid());
        aibox_test_support::podman::chown_tree(&root, &owner);
        let status = ok(&["status", "--output", "json"]);
        let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
        let project = status["project"].as_str().unwrap();
        let container = status["container"].as_str().unwrap().to_owned();
        let image = status["image"].as_str().unwrap();
        let mut cleanup = Cleanup::new(podman);
        cleanup
            .container(&container)
            .image(image)
            .network(&format!("{project}_default"));
        Self {
            _cleanup: cleanup,
            _tmp: tmp,
            root,
            container,
            conf,
        }
    }

    fn aibox(&self, args: &[&str]) -> Output {
        aibox(&self.root, &self.conf, args)
    }

    /// Runs `aibox ARGS`, which must succeed; returns stdout + stderr.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.aibox(args);
        assert!(
            out.status.success(),
            "aibox {args:?} failed: {}",
            show(&out)
        );
        show(&out)
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.aibox(&[args, &["--output", "json"]].concat());
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("aibox {args:?} printed no JSON ({e}): {}", show(&out)))
    }

    /// `aibox up` (which must succeed) and the "Codex sandbox: ..." line it printed.
    fn up(&self) -> String {
        // One `up` at a time in this file: the tests build the same Codex image, and a
        // build is a cached one only after the first has finished (both ran cold at once).
        static UPS: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let out = {
            let _one = UPS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // The tests change the strategy between `up`s as its owner (`set_strategy`),
            // so what it relaxes is approved as they go.
            self.ok(&["up", "--approve-reach"])
        };
        out.lines()
            .find(|l| l.starts_with("Codex sandbox: "))
            .unwrap_or_else(|| panic!("up did not report Codex's sandbox: {out}"))
            .to_owned()
    }

    /// `codex sandbox` (workspace-write) around [`SANDBOXED_SCRIPT`], through `aibox exec`.
    fn codex_sandbox(&self) -> Output {
        let codex = format!("{CODEX_DIR}/bin/codex");
        self.aibox(&[
            "exec",
            "--",
            &codex,
            "sandbox",
            "-c",
            "sandbox_mode=\"workspace-write\"",
            "--",
            "sh",
            "-c",
            SANDBOXED_SCRIPT,
        ])
    }

    /// Codex's sandbox works and confines: the workspace is writable, `/etc` and the
    /// home directory are not (the sandbox's read-only mounts, not file permissions: the
    /// user writes its home fine outside the sandbox), and only loopback exists.
    fn assert_confined(&self, strategy: &str) {
        let home_writable = self.aibox(&[
            "exec",
            "--",
            "sh",
            "-c",
            "touch \"$HOME/.w\" && rm \"$HOME/.w\"",
        ]);
        assert!(
            home_writable.status.success(),
            "{strategy}: {}",
            show(&home_writable)
        );
        let probe = self.root.join("codex-sandbox-probe");
        let _ = fs_err::remove_file(&probe);

        let out = self.codex_sandbox();
        let text = show(&out);
        // The measured row, for the CI log (`--nocapture`).
        eprintln!("[measured] {strategy}: codex sandbox (workspace-write):\n{text}");
        assert!(out.status.success(), "{strategy}: {text}");
        assert!(
            text.contains("WS-OK"),
            "{strategy}: workspace write: {text}"
        );
        assert_eq!(
            fs_err::read_to_string(&probe).unwrap(),
            "sandboxed\n",
            "{strategy}"
        );
        assert!(
            text.contains("/etc/aibox-codex-probe: Read-only file system"),
            "{strategy}: /etc write not refused by the sandbox: {text}"
        );
        assert!(
            text.contains("/aibox-codex-probe: Read-only file system")
                && text.matches("Read-only file system").count() >= 2,
            "{strategy}: home write not refused by the sandbox: {text}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let net: Vec<&str> = stdout
            .split("NET\n")
            .nth(1)
            .and_then(|rest| rest.split("END").next())
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(net, ["lo"], "{strategy}: the sandbox has network: {text}");
        let left = self.aibox(&[
            "exec",
            "--",
            "sh",
            "-c",
            "test ! -e /etc/aibox-codex-probe && test ! -e \"$HOME/aibox-codex-probe\"",
        ]);
        assert!(
            left.status.success(),
            "{strategy}: a refused write landed: {}",
            show(&left)
        );
        fs_err::remove_file(&probe).unwrap();
    }

    fn set_strategy(&self, strategy: &str, consent: Option<&str>) {
        self.ok(&["config", "set", "security.codex_sandbox", strategy]);
        for key in [
            "acknowledge_seccomp_profile",
            "acknowledge_seccomp_unconfined",
        ] {
            let on = consent == Some(key);
            self.ok(&[
                "config",
                "set",
                &format!("security.{key}"),
                if on { "true" } else { "false" },
            ]);
        }
    }
}

/// `aibox --project ROOT ARGS` on Podman with `conf` as `CONTAINERS_CONF`, nothing
/// inherited that could change the outcome.
fn aibox(root: &Utf8Path, conf: &Utf8Path, args: &[&str]) -> Output {
    aibox_test_support::podman::aibox_command(env!("CARGO_BIN_EXE_aibox"), conf, root)
        .args(args)
        .output()
        .unwrap()
}

use aibox_test_support::show_output as show;

/// A `containers.conf` in `dir`: the harness's, with `profile` as Podman's default
/// seccomp profile (what a container gets when nothing else is asked for).
fn conf_with_default_profile(
    podman: &Podman,
    dir: &std::path::Path,
    profile: &Utf8Path,
) -> Utf8PathBuf {
    let conf = Utf8PathBuf::from_path_buf(dir.join("containers.conf")).unwrap();
    let base = fs_err::read_to_string(podman.containers_conf()).unwrap();
    assert!(base.contains("[containers]\n"), "{base}");
    fs_err::write(
        &conf,
        base.replacen(
            "[containers]\n",
            &format!("[containers]\nseccomp_profile = \"{profile}\"\n"),
            1,
        ),
    )
    .unwrap();
    conf
}

/// Every strategy on Podman: the sandbox works and confines Codex's commands.
#[test]
fn codex_sandbox_confines_commands_under_every_strategy() {
    let podman = Podman::ready();
    let p = Project::new(&podman, "codexsb", podman.containers_conf().to_owned());
    for (strategy, consent) in [
        ("engine-default", None),
        ("seccomp-profile", Some("acknowledge_seccomp_profile")),
        ("unconfined", Some("acknowledge_seccomp_unconfined")),
    ] {
        p.set_strategy(strategy, consent);
        let line = p.up();
        eprintln!("[measured] {line}");
        assert_eq!(line, format!("Codex sandbox: works ({strategy})"));
        p.assert_confined(strategy);
        let doctor = p.json(&["doctor"]);
        assert_eq!(
            doctor["codex_sandbox"]["status"], "works",
            "{strategy}: {doctor}"
        );
        assert_eq!(doctor["codex_sandbox"]["posture"], strategy, "{doctor}");
        p.ok(&["down"]);
        assert!(podman.inspect_container(&p.container).is_none());
    }
}

/// Docker's default seccomp profile, reproduced on Podman: the probe says "blocked" and
/// names the fix, Codex's sandbox cannot start; the generated profile makes it work.
#[test]
fn docker_default_profile_blocks_the_sandbox_and_seccomp_profile_fixes_it() {
    let podman = Podman::ready();
    let fixture = Utf8Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/docker-seccomp/default.json");
    assert!(fixture.is_file(), "{fixture}");
    let conf_dir = tempfile::tempdir().unwrap();
    let conf = conf_with_default_profile(&podman, conf_dir.path(), &fixture);
    let p = Project::new(&podman, "codexdocker", conf);

    // The engine's default is now Docker's: blocked, with the fix named.
    let line = p.up();
    assert!(
        line.starts_with("Codex sandbox: blocked (engine-default)"),
        "{line}"
    );
    assert!(line.contains("acknowledge_seccomp_profile"), "{line}");
    assert!(line.contains("acknowledge_seccomp_unconfined"), "{line}");
    let doctor = p.json(&["doctor"]);
    let sandbox = &doctor["codex_sandbox"];
    assert_eq!(sandbox["status"], "blocked", "{doctor}");
    assert!(
        sandbox["fix"]
            .as_str()
            .unwrap()
            .contains("acknowledge_seccomp_profile"),
        "{doctor}"
    );
    assert!(
        sandbox["detail"]
            .as_str()
            .unwrap()
            .contains("Operation not permitted"),
        "{doctor}"
    );
    let out = p.codex_sandbox();
    let text = show(&out);
    eprintln!("[measured] Docker's default profile, engine-default: {line}\n{text}");
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("No permissions to create a new namespace"),
        "{text}"
    );
    assert!(!text.contains("WS-OK"), "{text}");
    assert!(!p.root.join("codex-sandbox-probe").exists());
    p.ok(&["down"]);

    // The generated profile (Docker's default plus bubblewrap's syscalls) fixes it.
    p.set_strategy("seccomp-profile", Some("acknowledge_seccomp_profile"));
    let line = p.up();
    assert_eq!(line, "Codex sandbox: works (seccomp-profile)");
    p.assert_confined("seccomp-profile on Docker's default");
    let doctor = p.json(&["doctor"]);
    assert_eq!(doctor["codex_sandbox"]["status"], "works", "{doctor}");
    p.ok(&["down"]);
}

/// The generated profile is the narrowest that works: with any one of the syscalls it adds
/// to Docker's default taken out again, Codex's sandbox fails to start.
#[test]
fn every_syscall_the_generated_profile_adds_is_needed() {
    let podman = Podman::ready();
    let dir = tempfile::tempdir().unwrap();
    let scratch = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    let mut p = Project::new(&podman, "codexmin", podman.containers_conf().to_owned());
    p.set_strategy("seccomp-profile", Some("acknowledge_seccomp_profile"));
    p.ok(&["apply", "--approve-reach"]);
    let text = fs_err::read_to_string(p.root.join(".devcontainer/aibox-seccomp.json")).unwrap();
    let generated: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rules = generated["syscalls"].as_array().unwrap();
    let added = rules
        .iter()
        .position(|r| {
            r["comment"]
                .as_str()
                .is_some_and(|c| c.starts_with("aibox:"))
        })
        .expect("the rule aibox adds");
    let names: Vec<String> = rules[added]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        ["clone", "mount", "pivot_root", "umount2", "unshare"]
    );

    // Each variant becomes Podman's default; the project keeps the engine's default.
    p.set_strategy("engine-default", None);
    for name in &names {
        let mut variant = generated.clone();
        variant["syscalls"][added]["names"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n != name.as_str());
        let path = scratch.join(format!("without-{name}.json"));
        fs_err::write(&path, serde_json::to_string_pretty(&variant).unwrap()).unwrap();
        p.conf = conf_with_default_profile(&podman, dir.path(), &path);
        let line = p.up();
        let out = p.codex_sandbox();
        let text = show(&out);
        eprintln!("[measured] generated profile without {name}: {line}\n{text}");
        // The probe sees the namespace and mount refusals; the others only Codex shows.
        if matches!(name.as_str(), "unshare" | "mount") {
            assert!(
                line.starts_with("Codex sandbox: blocked"),
                "without {name}: {line}"
            );
        }
        assert!(!out.status.success(), "without {name}: {text}");
        assert!(text.contains("bwrap: "), "without {name}: {text}");
        assert!(!text.contains("WS-OK"), "without {name}: {text}");
        p.ok(&["down"]);
    }
}
