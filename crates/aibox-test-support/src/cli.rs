//! Whole-interaction snapshots of the `aibox` binary, in the style of uv's `uv_snapshot!`.
//!
//! [`CliContext`] gives each test a fresh project folder, a private download cache and a
//! clean environment; [`aibox_snapshot!`](crate::aibox_snapshot) runs a command and
//! snapshots its exit code, stdout and stderr together after [`CliContext::filters`]
//! replaced what differs between runs (temporary paths, the version, loopback ports,
//! timings). A change in any of the three shows up in one reviewable diff.

// Test set-up that cannot proceed should stop the test loudly.
#![allow(clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

use camino::{Utf8Path, Utf8PathBuf};

/// A fresh folder to run `aibox` in, and the filters that make its output stable.
pub struct CliContext {
    bin: PathBuf,
    _temp: tempfile::TempDir,
    /// The temporary folder holding `project/` and `cache/`.
    pub temp: Utf8PathBuf,
    /// The project folder (empty at first; commands run here).
    pub dir: Utf8PathBuf,
    filters: Vec<(String, String)>,
}

impl CliContext {
    /// A context for the binary at `bin` (pass `env!("CARGO_BIN_EXE_aibox")`).
    pub fn new(bin: impl Into<PathBuf>) -> Self {
        let temp_dir = tempfile::tempdir().expect("create a temporary folder");
        let temp = Utf8PathBuf::from_path_buf(temp_dir.path().to_owned())
            .expect("the temporary folder is UTF-8");
        let dir = temp.join("project");
        fs_err::create_dir_all(&dir).expect("create the project folder");
        let mut filters = Vec::new();
        // The canonical spelling first: it may be longer than the one we hold.
        if let Ok(canonical) = temp.canonicalize_utf8()
            && canonical != temp
        {
            filters.push((escape(canonical.as_str()), "[TEMP]".to_owned()));
        }
        filters.push((escape(temp.as_str()), "[TEMP]".to_owned()));
        filters.extend([
            (escape(env!("CARGO_PKG_VERSION")), "[VERSION]".to_owned()),
            (
                r"(127\.0\.0\.1|localhost):\d+".to_owned(),
                "$1:[PORT]".to_owned(),
            ),
            (
                r"\b\d+(\.\d+)?\s?(ms|s|µs)\b".to_owned(),
                "[TIME]".to_owned(),
            ),
        ]);
        Self {
            bin: bin.into(),
            _temp: temp_dir,
            temp,
            dir,
            filters,
        }
    }

    /// `aibox ARGS` in the project folder: no colour, no inherited `AIBOX_PROJECT`, a
    /// private download cache, and a `PATH` without container engines (so commands that
    /// need one fail the same way on every machine).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.current_dir(&self.dir)
            .env("NO_COLOR", "1")
            .env("XDG_CACHE_HOME", self.temp.join("cache"))
            .env("PATH", self.empty_path())
            .env_remove("AIBOX_PROJECT")
            .env_remove("AIBOX_ENGINE")
            .env_remove("CONTAINER_HOST")
            .env_remove("DOCKER_HOST")
            .args(args);
        cmd
    }

    /// A folder with no programs in it, used as `PATH`.
    fn empty_path(&self) -> Utf8PathBuf {
        let bin = self.temp.join("empty-bin");
        let _ = fs_err::create_dir_all(&bin);
        bin
    }

    /// Writes `text` to `name` in the project folder (parents created).
    pub fn write(&self, name: &str, text: &str) -> &Self {
        let path = self.dir.join(name);
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent).expect("create parent folder");
        }
        fs_err::write(&path, text).expect("write fixture file");
        self
    }

    /// The project folder's path.
    pub fn dir(&self) -> &Utf8Path {
        &self.dir
    }

    /// Adds a filter (a regular expression and its replacement).
    #[must_use]
    pub fn with_filter(mut self, regex: &str, replacement: &str) -> Self {
        self.filters
            .push((regex.to_owned(), replacement.to_owned()));
        self
    }

    /// The filters, in the order they apply.
    pub fn filters(&self) -> &[(String, String)] {
        &self.filters
    }
}

/// Runs `cmd` and formats the whole interaction: success, exit code, stdout, stderr.
pub fn run_and_format(cmd: &mut Command) -> (String, Output) {
    let output = cmd.output().expect("run aibox");
    let text = format!(
        "success: {}\nexit_code: {}\n----- stdout -----\n{}\n----- stderr -----\n{}",
        output.status.success(),
        output
            .status
            .code()
            .map_or_else(|| "signal".to_owned(), |c| c.to_string()),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    (text, output)
}

/// Insta settings applying `filters`.
pub fn settings(filters: &[(String, String)]) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    for (regex, replacement) in filters {
        settings.add_filter(regex, replacement.as_str());
    }
    settings.set_omit_expression(true);
    settings
}

/// Escapes the regular-expression metacharacters of a literal.
fn escape(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len());
    for c in literal.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Runs an `aibox` command and snapshots exit code, stdout and stderr together after the
/// context's filters; evaluates to the [`Output`] for further assertions.
///
/// `aibox_snapshot!(context.filters(), context.command(&["apply"]))` names the snapshot
/// after the test (`name`, `name-2`, ...); `aibox_snapshot!(filters, cmd, "name")`
/// names it explicitly.
#[macro_export]
macro_rules! aibox_snapshot {
    ($filters:expr, $cmd:expr) => {{
        let (snapshot, output) = $crate::cli::run_and_format(&mut $cmd);
        $crate::cli::settings($filters).bind(|| {
            $crate::insta::assert_snapshot!(snapshot);
        });
        output
    }};
    ($filters:expr, $cmd:expr, $name:expr) => {{
        let (snapshot, output) = $crate::cli::run_and_format(&mut $cmd);
        $crate::cli::settings($filters).bind(|| {
            $crate::insta::assert_snapshot!($name, snapshot);
        });
        output
    }};
}
