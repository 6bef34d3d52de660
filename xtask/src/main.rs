//! `cargo xtask`: maintainer tasks.
//!
//! - `bench`: the processkit install path (first install, no-op, upgrade, integrity,
//!   `doctor`, `skill list`, `mcp list`, peak RSS) at 1x and 10x content beside `cp -r`
//!   and `sha256sum`, optionally beside a previous aibox (`--baseline`) and on a loaded
//!   machine (`--loaded`) (see `bench.rs`).
//! - `bench mcp`: on a real Podman, what locking MCP servers' dependencies costs (apply,
//!   image layer size) and the first `initialize` of every server (see `bench_mcp.rs`).
//! - `bench up`: how long `up` takes on Podman and Docker, cold (private storage with
//!   nothing cached), warm and running, with the image size, beside `devcontainer up` of
//!   the same files (see `bench_up.rs`).
//! - `bench egress`: on a real Podman, the egress proxy's added latency per request
//!   (through it versus direct, to a test host of its own) and its memory (see
//!   `bench_egress.rs`).
//! - `ci`: everything a normal change can break (formatting, clippy with warnings denied,
//!   layering, licences, tidy, the whole test suite with the doc examples: one build, then unit,
//!   `tests/it` and doc examples, fastest first, with the end-to-end tests and the base
//!   image test beside them in the background; and the embedder example `crates/aibox-engine/examples/embed.rs` on
//!   the bundled example project). This is the README's test command and what `.ci/run`
//!   executes (see `ci.rs`).
//! - `demo`: aibox's main job on the bundled example project (`examples/demo`, copied to
//!   `target/aibox-demo` so the repository stays clean): `apply`, a second no-op `apply`,
//!   `apply --check` and `doctor`.
//! - `image`: aibox's base image: build, publish, verify (see `image.rs`).
//! - `layering`: checks the dependency arrows between crates and between the engine's
//!   modules (see `ARCHITECTURE.md`, `layering.rs`).
//! - `licenses`: every crate built for the release's Linux targets has a licence
//!   expression `deny.toml` allows, as the release gate's cargo-deny requires (see
//!   `licenses.rs`).
//! - `docs`: builds the documentation site (`docs-site/`) with the pinned mdBook library.
//! - `release-gate`: every check a release needs (runnable from a fresh clone), then the
//!   release binaries, `release-state.json`, `SHA256SUMS`, `evidence.json` and, with
//!   `--tag`, an SSH-signed, verified tag; outputs under `target/release-gate/` (see
//!   `release.rs`).
//! - `release-key add|remove`: maintainer keys in `release/allowed_signers`, mirrored into
//!   the installer (see `release/keys.rs`).
//! - `release-state`: every release input (pinned, floating, exception), available updates,
//!   and the deferral rule (see `release/state.rs`).
//! - `tidy` (formerly `stubs`): source rules no compiler or linter enforces: no ignored
//!   tests or `todo!`/`unimplemented!`, file writes in product code only in the writer
//!   (`aibox_fs`), `.devcontainer/` path literals only in the file table
//!   (`aibox_config::layout`), no file-system call in the plan, and every integration test
//!   in a declared module of a harness (`tests/it/`, `tests/e2e/`); see `tidy.rs`. Also
//!   run by `cargo test -p xtask` (`tests/it/tidy.rs`).

mod bench;
mod bench_egress;
mod bench_mcp;
mod bench_up;
mod ci;
mod image;
mod layering;
mod licenses;
mod pk_doctor;
mod release;
mod scratch;
mod tidy;

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = args.first().map_or("help", String::as_str);
    let result = match task {
        "bench" if args.get(1).map(String::as_str) == Some("mcp") => bench_mcp::run(&args[2..]),
        "bench" if args.get(1).map(String::as_str) == Some("up") => bench_up::run(&args[2..]),
        "bench" if args.get(1).map(String::as_str) == Some("egress") => {
            bench_egress::run(&args[2..])
        }
        "bench" => bench::run(&args[1..]),
        "ci" => ci::run(),
        "demo" => demo(),
        "pk-doctor" => pk_doctor::run().map(|_| ()),
        "docs" => release::docs(),
        "image" => image::run(&args[1..]),
        "release-gate" => release::gate(&args[1..]),
        "release-state" => release::state(),
        "release-key" => release::release_key(&args[1..]),
        "layering" => layering::check(),
        "licenses" => licenses::check(),
        // `stubs` is the old name, kept for muscle memory.
        "tidy" | "stubs" => tidy::check(),
        _ => {
            say(
                "usage: cargo xtask <bench [--factors 1,10] [--runs N] [--runs-large N] [--baseline PATH] [--loaded] [--bin PATH] [--keep] [--json FILE]|bench mcp [--bin PATH] [--keep] [--json FILE]|bench up [--engines podman,docker] [--bin PATH] [--keep] [--json FILE]|bench egress [--rounds N] [--bin PATH] [--keep] [--json FILE]|ci|demo|pk-doctor|docs|image <build|publish|verify|release> --tag vX.Y.Z|layering|licenses|tidy|release-gate [--tag vX.Y.Z] [--allow-dirty] [--advisory-db DIR] [--allowed-signers FILE] [--skip ci|pk-doctor|image|binaries]|release-state|release-key <add EMAIL KEY.pub|remove KEY.pub>>",
            );
            return if task == "help" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            say(&format!("xtask {task}: FAILED: {msg}"));
            ExitCode::FAILURE
        }
    }
}

/// Prints a progress line (xtask is a maintainer tool; printing is its job).
#[allow(clippy::print_stderr)]
pub(crate) fn say(msg: &str) {
    eprintln!("{msg}");
}

/// What `cargo xtask demo` tells aibox so that it runs offline (each one documented).
pub(crate) const DEMO_ENV: &[(&str, &str)] = &[
    ("AIBOX_NPM", "none"),
    ("AIBOX_UV", "none"),
    ("AIBOX_NO_UPDATE_CHECK", "1"),
];

fn demo() -> Result<(), String> {
    step(
        "build aibox",
        &["build", "--locked", "--quiet", "--package", "aibox-cli"],
    )?;
    let target = std::path::Path::new(prepare_demo("target/aibox-demo")?);
    let bin = std::path::Path::new("target/debug/aibox");
    for args in [
        &["apply"][..],
        &["apply"],
        &["apply", "--check"],
        &["mcp", "list"],
        &["doctor"],
        &["doctor", "--integrity"],
    ] {
        say(&format!(
            "==> aibox --project target/aibox-demo {}",
            args.join(" ")
        ));
        // Offline, as the README says: no npm or uv resolution (the example's team server
        // is a fictional npm package, which the registry would not find, so `apply` would
        // leave it unregistered) and no question for a newer aibox.
        let status = Command::new(bin)
            .arg("--project")
            .arg(target)
            .args(args)
            .envs(DEMO_ENV.iter().copied())
            .status()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        if !status.success() {
            return Err(format!("aibox {} failed ({status})", args.join(" ")));
        }
    }
    say("demo: generated files are in target/aibox-demo");
    Ok(())
}

/// A fresh copy of the bundled example project at `target` (below `target/`), with the
/// content pack it pins beside it at `target/processkit-pack`.
pub(crate) fn prepare_demo(target: &str) -> Result<&str, String> {
    let dest = std::path::Path::new(target);
    if dest.exists() {
        fs_err::remove_dir_all(dest).map_err(|e| e.to_string())?;
    }
    copy_dir(std::path::Path::new("examples/demo"), dest)?;
    let pack = std::path::Path::new("target/processkit-pack");
    if pack.exists() {
        fs_err::remove_dir_all(pack).map_err(|e| e.to_string())?;
    }
    copy_dir(std::path::Path::new("examples/processkit-pack"), pack)?;
    Ok(target)
}

pub(crate) fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> Result<(), String> {
    fs_err::create_dir_all(to).map_err(|e| e.to_string())?;
    for entry in fs_err::read_dir(from).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let dest = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            fs_err::copy(entry.path(), dest).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

pub(crate) fn step(name: &str, args: &[&str]) -> Result<(), String> {
    say(&format!("==> {name}: cargo {}", args.join(" ")));
    run_timed(name, cargo_command().args(args))
}

/// Runs the cargo `cmd` to its end and says how long the step `name` took; fails when it
/// fails.
pub(crate) fn run_timed(name: &str, cmd: &mut Command) -> Result<(), String> {
    let started = std::time::Instant::now();
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    say(&format!(
        "<== {name}: {:.1}s",
        started.elapsed().as_secs_f64()
    ));
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} failed ({status})"))
    }
}

pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// `cargo metadata --format-version 1 --locked` with `args`, parsed.
pub(crate) fn cargo_metadata(args: &[&str]) -> Result<serde_json::Value, String> {
    let out = release::output_of(
        Command::new(cargo())
            .args(["metadata", "--format-version", "1", "--locked"])
            .args(args),
        "cargo metadata",
    )?;
    serde_json::from_slice(&out).map_err(|e| format!("bad cargo metadata: {e}"))
}

/// A `cargo` command for a build or test run, set up by [`started_by_xtask`].
pub(crate) fn cargo_command() -> Command {
    let mut cmd = Command::new(cargo());
    started_by_xtask(&mut cmd);
    cmd
}

/// What every cargo (and test run) xtask starts gets: no variables of [`cargo_run_env`],
/// `ci`'s temporary folder for the tests and `ci`'s lints, once chosen.
pub(crate) fn started_by_xtask(cmd: &mut Command) -> &mut Command {
    scratch::apply(ci::apply_lints(without_cargo_run_env(cmd)))
}

/// Removes [`cargo_run_env`] from what `cmd` inherits.
pub(crate) fn without_cargo_run_env(cmd: &mut Command) -> &mut Command {
    for name in cargo_run_env() {
        cmd.env_remove(name);
    }
    cmd
}

/// The variables `cargo run` set for xtask itself (`CARGO_PKG_*`, `CARGO_MANIFEST_*`, the
/// target's names), which a cargo started from a shell does not see. Build scripts watch
/// some of them (ring's `rerun-if-env-changed=CARGO_MANIFEST_DIR`): a cargo started by
/// xtask that inherited them would find them changed against the shell's `cargo xtask`
/// build and rebuild ring, rustls, ureq and every crate and test binary above them, and
/// the next `cargo xtask` would rebuild them back.
fn cargo_run_env() -> Vec<std::ffi::OsString> {
    std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| name.to_str().is_some_and(is_cargo_run_var))
        .collect()
}

/// Whether `cargo run` sets `name` for the program it runs (and a shell has none).
fn is_cargo_run_var(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_MANIFEST_")
        || matches!(
            name,
            "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE"
        )
}

#[cfg(test)]
mod tests {
    use super::is_cargo_run_var;

    #[test]
    fn the_variables_of_cargo_run_are_told_from_a_shells() {
        for name in [
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_NAME",
            "CARGO_PRIMARY_PACKAGE",
        ] {
            assert!(is_cargo_run_var(name), "{name}");
        }
        // The cargo to run, a user's cargo settings and the `[env]` of `.cargo/config.toml`.
        for name in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "RUSTFLAGS",
            "AIBOX_UV",
            "PATH",
        ] {
            assert!(!is_cargo_run_var(name), "{name}");
        }
    }

    /// Under `cargo test`, as under `cargo run`, this process has the package's variables:
    /// a cargo it starts does not inherit them.
    #[test]
    fn cargo_started_by_xtask_does_not_inherit_the_variables_of_cargo_run() {
        let cmd = super::cargo_command();
        let removed: Vec<_> = cmd
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name.to_owned())
            .collect();
        for (name, _) in std::env::vars_os() {
            let listed = name.to_str().is_some_and(is_cargo_run_var);
            assert_eq!(removed.contains(&name), listed, "{name:?}");
        }
        if std::env::var_os("CARGO_MANIFEST_DIR").is_some() {
            assert!(removed.iter().any(|r| r == "CARGO_PKG_NAME"), "{removed:?}");
        }
    }
}
