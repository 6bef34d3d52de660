//! Fixture helpers shared by the engine's integration tests.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};

use aibox_engine::{ApplyOptions, PlanOptions};

use camino::{Utf8Path, Utf8PathBuf};

/// A small but complete configuration: two harnesses, environment, personal overlay.
pub const AIBOX_TOML: &str = r#"[container]
name = "demo"
environment = { LANG = "C.UTF-8" }

[context]
mode = "harness-only"

[ai]
harnesses = ["claude", "codex"]
"#;

/// A personal overlay with an obviously fake token.
pub const LOCAL_TOML: &str = r#"[container.environment]
GITHUB_TOKEN = "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE"
"#;

/// A temp project holding `aibox.toml` and `.aibox-local.toml`.
pub struct Fixture {
    _dir: tempfile::TempDir,
    /// The project root.
    pub root: Utf8PathBuf,
}

impl Fixture {
    pub fn new() -> Self {
        Self::with(AIBOX_TOML)
    }

    pub fn with(toml: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
        fs_err::write(root.join("aibox.toml"), toml).unwrap();
        fs_err::write(root.join(".aibox-local.toml"), LOCAL_TOML).unwrap();
        Self { _dir: dir, root }
    }

    pub fn path(&self, rel: &str) -> Utf8PathBuf {
        self.root.join(rel)
    }

    pub fn read(&self, rel: &str) -> String {
        fs_err::read_to_string(self.path(rel)).unwrap()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        fs_err::create_dir_all(p.parent().unwrap()).unwrap();
        fs_err::write(p, text).unwrap();
    }

    /// Every regular file below the root with its contents, except the project lock
    /// file (an OS lock handle whose bytes never matter). The personal Compose file's
    /// per-checkout values (the container's name and the checkout's path) read as
    /// placeholders, so two fixtures' snapshots compare.
    pub fn snapshot(&self) -> BTreeMap<String, String> {
        walk(&self.root)
            .into_iter()
            .filter(|p| p != ".aibox/apply.lock")
            .map(|p| {
                let bytes = fs_err::read(self.root.join(&p)).unwrap();
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let text = mask_checkout(&p, text);
                (p, text)
            })
            .collect()
    }

    /// (inode, mtime in ns, mode) of every regular file below the root.
    pub fn stamps(&self) -> BTreeMap<String, (u64, i128, u32)> {
        walk(&self.root)
            .into_iter()
            .map(|p| {
                let m = fs_err::metadata(self.root.join(&p)).unwrap();
                let mtime = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
                (p, (m.ino(), mtime, m.mode()))
            })
            .collect()
    }
}

/// Root-relative paths of every regular file below `root`, sorted.
pub fn walk(root: &Utf8Path) -> Vec<String> {
    fn rec(root: &Utf8Path, dir: &Utf8Path, out: &mut Vec<String>) {
        for entry in fs_err::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = Utf8PathBuf::from_path_buf(entry.path()).unwrap();
            let ty = entry.file_type().unwrap();
            if ty.is_dir() {
                rec(root, &path, out);
            } else if ty.is_file() {
                out.push(path.strip_prefix(root).unwrap().to_string());
            }
        }
    }
    let mut out = Vec::new();
    rec(root, root, &mut out);
    out.sort();
    out
}

/// Root-relative paths below `root`, sorted: every entry that is not a folder (files,
/// symlinks, anything else, so a stray entry is seen) and every folder.
pub fn walk_all(root: &Utf8Path) -> (Vec<String>, Vec<String>) {
    let (mut entries, mut dirs) = (Vec::new(), Vec::new());
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = Utf8PathBuf::from_path_buf(entry.path()).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_string();
            // The entry's own type: a symlink to a folder is not walked into.
            if entry.file_type().unwrap().is_dir() {
                dirs.push(rel);
                stack.push(path);
            } else {
                entries.push(rel);
            }
        }
    }
    entries.sort();
    dirs.sort();
    (entries, dirs)
}

/// Root-relative paths of the writer's temp files (`.aibox-tmp.`) left below `root`.
pub fn temp_files(root: &Utf8Path) -> Vec<String> {
    walk(root)
        .into_iter()
        .filter(|p| p.contains(".aibox-tmp."))
        .collect()
}

/// Writes `release` as a local archive into `dir` and returns an `aibox.toml` installing
/// it (pinned by digest, the `product` package), with `dir` listed as a trusted source.
pub fn release_config(
    dir: &Utf8Path,
    release: &aibox_test_support::http::release::SyntheticRelease,
) -> String {
    release.local_project_config(dir).unwrap()
}

/// Serves `release` on `server` where a GitHub release asset would be, with its `.sha256`
/// sidecar; returns the archive's digest.
pub fn publish(
    server: &aibox_test_support::http::Server,
    release: &aibox_test_support::http::release::SyntheticRelease,
) -> String {
    use aibox_test_support::http::Route;
    let archive = release.tar_gz();
    let path = format!(
        "/org/processkit/releases/download/{v}/processkit-{v}.tar.gz",
        v = release.version
    );
    server.route(&path, Route::ok(archive.clone()));
    server.route(
        &format!("{path}.sha256"),
        Route::ok(release.sidecar(&archive)),
    );
    aibox_test_support::http::release::sha256_hex(&archive)
}

/// An empty temp folder and its path, for tests that write their own `aibox.toml`.
pub fn empty_project() -> (tempfile::TempDir, Utf8PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    (dir, root)
}

/// The paths an apply removed, in report order.
pub fn removed(report: &aibox_engine::ApplyReport) -> Vec<&str> {
    report
        .files
        .iter()
        .filter(|f| f.action == aibox_engine::FileAction::Removed)
        .map(|f| f.path.as_str())
        .collect()
}

/// The stable `code(...)` of a diagnostic.
pub fn code(err: &dyn miette::Diagnostic) -> String {
    err.code().map(|c| c.to_string()).unwrap_or_default()
}

/// Apply options for tests: a fixed aibox version and, when given, a download cache.
pub fn apply_opts(cache: Option<&Utf8Path>) -> ApplyOptions {
    ApplyOptions {
        plan: PlanOptions {
            aibox_version: "0.1.0".into(),
            cache_dir: cache.map(Utf8Path::to_owned),
            ..PlanOptions::default()
        },
        ..ApplyOptions::default()
    }
}

/// The command running only this test binary's `child_entry_point` tests (one per crash
/// module, each idle unless its own variables are in `envs`), with `envs` and no output.
pub fn child_apply(envs: &[(&str, &str)]) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["child_entry_point", "--test-threads=1"])
        .envs(envs.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// Runs this test binary's `child_entry_point` test in a child process with `envs`, killed
/// by the engine's crash hook after write `n`; returns whether it finished instead.
pub fn apply_in_child_killed_at(envs: &[(&str, &str)], n: u32) -> bool {
    let status = child_apply(envs)
        .env("AIBOX_TEST_CRASH_AFTER_WRITES", n.to_string())
        .status()
        .unwrap();
    if status.success() {
        return true;
    }
    assert_eq!(
        status.signal(),
        Some(9),
        "child failed instead of being killed: {status:?}"
    );
    false
}

/// The `[[skills.review_exceptions]]` entry for `skill` that a gate refusal's help
/// prints, filled in as a reviewer would (the documented way to record a consent).
pub fn consent_from_refusal(err: &aibox_engine::EngineError, skill: &str) -> String {
    use miette::Diagnostic as _;
    let help = err.help().map(|h| h.to_string()).unwrap_or_default();
    let start = help
        .find(&format!(
            "[[skills.review_exceptions]]\nskill = \"{skill}\""
        ))
        .unwrap_or_else(|| panic!("no consent for {skill} in: {help}"));
    let entry = help[start..].split("\n\n").next().unwrap();
    let reason_at = entry.find("reason = ").unwrap();
    format!(
        "{}reason = \"reviewed by hand\"\n",
        entry[..reason_at].replace("<your name>", "Test Reviewer")
    )
}

/// `text` of the project file `rel` with the personal Compose file's per-checkout values
/// (the container's name and the checkout's path) as placeholders, so the trees of two
/// fixtures compare.
pub fn mask_checkout(rel: &str, text: String) -> String {
    if rel != ".devcontainer/docker-compose.local.yml" {
        return text;
    }
    // A copied project keeps the path of the folder it was applied in until its next
    // apply, so any path is masked, not only this root's.
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("container_name: ") {
                "    container_name: <per checkout>\n".to_owned()
            } else if l.trim_start().starts_with("\"aibox.checkout\": ") {
                "      \"aibox.checkout\": <checkout>\n".to_owned()
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}
