//! `aibox-test-support`: shared helpers for aibox tests.
//!
//! Each module belongs to one area: `schema` validates generated files against the
//! vendored JSON schemas, `podman` prepares a real container engine and a locally built
//! base image, `docker` starts a real Docker Engine for the tests, `http` serves releases
//! on loopback, `registry` runs a real OCI registry there, `cli` snapshots whole `aibox`
//! interactions.

pub mod cli;
pub mod docker;
pub mod http;
pub mod podman;
pub mod registry;
pub mod schema;

/// Re-exported for [`aibox_snapshot!`].
pub use insta;

/// Folder of the JSON schemas vendored into this crate (`schemas/`, see its README for
/// sources and licences). Inside the repository, so a clone of aibox alone passes its tests.
pub fn schemas_dir() -> camino::Utf8PathBuf {
    camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas")
}

/// The workspace root (the folder with the top-level `Cargo.toml`).
pub fn workspace_root() -> camino::Utf8PathBuf {
    let here = camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .and_then(|p| p.parent())
        .map_or_else(|| here.to_owned(), ToOwned::to_owned)
}

/// Path of a pinned harness CLI from `test-tools/harnesses` (`claude`, `codex`, `gemini`,
/// `opencode`); panics with the set-up command when it is missing.
///
/// `OpenCode` is pinned as its Linux x64 binary package, not the `opencode-ai` wrapper: the
/// wrapper lists one optional package per platform, and a lock file that records only the
/// ones a registry serves fails `npm ci`.
pub fn harness_cli(name: &str) -> camino::Utf8PathBuf {
    let modules = workspace_root().join("test-tools/harnesses/node_modules");
    let path = if name == "opencode" {
        modules.join("opencode-linux-x64/bin/opencode")
    } else {
        modules.join(".bin").join(name)
    };
    assert!(
        path.is_file(),
        "{path} is missing: run `npm ci --prefix test-tools/harnesses` (Node.js >= 20) before the tests"
    );
    path
}

/// A finished process's status, stdout and stderr, for assertion messages.
pub fn show_output(out: &std::process::Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `f` on a thread and fails the test when it has not finished after 20 s: for tests
/// that guard against a hang (a FIFO, a pseudo-file that never ends).
#[allow(clippy::panic)] // failing the calling test is the point
pub fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what}: still running after 20 s"))
}
