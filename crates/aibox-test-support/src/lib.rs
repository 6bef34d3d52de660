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

/// The `uv` the MCP locking tests resolve with: [`find_uv`]; panics with the set-up
/// command when there is none.
#[allow(clippy::panic)] // failing the calling test is the point
pub fn uv() -> camino::Utf8PathBuf {
    find_uv().unwrap_or_else(|| {
        panic!(
            "no uv for the MCP locking tests: run `bash scripts/setup-test-deps.sh` (it \
             installs the pinned uv with pip) or set AIBOX_TEST_UV"
        )
    })
}

/// `AIBOX_TEST_UV`, else the `uv` the `uv` package installed for `python3`
/// (`scripts/setup-test-deps.sh` pins it to the tool catalog's version), else `uv` on
/// `PATH`; `None` when there is none.
pub fn find_uv() -> Option<camino::Utf8PathBuf> {
    if let Some(path) = std::env::var_os("AIBOX_TEST_UV") {
        return Some(camino::Utf8PathBuf::from(
            path.to_string_lossy().into_owned(),
        ));
    }
    let from_python = std::process::Command::new("python3")
        .args(["-c", "import sys, uv; sys.stdout.write(uv.find_uv_bin())"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if let Some(path) = from_python.filter(|p| camino::Utf8Path::new(p).is_file()) {
        return Some(camino::Utf8PathBuf::from(path));
    }
    on_path("uv").map(|path| camino::Utf8PathBuf::from(path.to_string_lossy().into_owned()))
}

/// The `npm` the MCP locking tests resolve npx servers with: `AIBOX_TEST_NPM`, else `npm`
/// on `PATH` (`scripts/setup-test-deps.sh` installs Node.js and npm); panics with the
/// set-up command when none.
#[allow(clippy::panic)] // failing the calling test is the point
pub fn npm() -> camino::Utf8PathBuf {
    if let Some(path) = std::env::var_os("AIBOX_TEST_NPM") {
        return camino::Utf8PathBuf::from(path.to_string_lossy().into_owned());
    }
    let Some(path) = on_path("npm") else {
        panic!(
            "no npm for the MCP locking tests: run `bash scripts/setup-test-deps.sh` (it \
             installs Node.js and npm) or set AIBOX_TEST_NPM"
        );
    };
    camino::Utf8PathBuf::from(path.to_string_lossy().into_owned())
}

/// The first file `name` in the directories of `PATH`.
fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|c| c.is_file())
    })
}

/// Starts `cmd` (an MCP server over stdio, directly or through `aibox exec`), sends MCP
/// `initialize`, closes its input and returns the first line it answers as JSON; panics
/// with its output when it answers nothing, or nothing within two minutes.
#[allow(clippy::panic, clippy::expect_used)] // failing the calling test is the point
pub fn mcp_initialize(mut cmd: std::process::Command) -> serde_json::Value {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "aibox-test", "version": "0"}}});
    let mut stdin = child.stdin.take().expect("piped stdin");
    writeln!(stdin, "{request}").expect("the server reads its input");
    drop(stdin);
    let out = within("an MCP server's initialize", move || {
        child
            .wait_with_output()
            .expect("the server can be waited for")
    });
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .next()
        .unwrap_or_else(|| panic!("the server answered nothing: {}", show_output(&out)));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"))
}

/// The MCP fixture pack (`fixtures/mcp-pack`): a processkit-format release whose servers
/// declare floating ranges the way the published ones do (see its README).
pub fn mcp_pack() -> camino::Utf8PathBuf {
    camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp-pack")
}

/// Real processkit `skill-gate` files (`fixtures/processkit-skill-gate`, see its README):
/// the hook scripts, their sample payloads, the contract and the pre-authorisation spec.
pub fn processkit_skill_gate() -> camino::Utf8PathBuf {
    camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/processkit-skill-gate")
}

/// Real front matter and tiers of a published processkit release
/// (`fixtures/processkit-uses/<version>`, `v0.28.3` or `v1.0.0-alpha.1`; see its README):
/// a release folder whose skills declare `uses:` as processkit ships it.
pub fn processkit_uses(version: &str) -> camino::Utf8PathBuf {
    camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/processkit-uses")
        .join(version)
}

/// Copies the folder `from` to `to` (created), files and sub-folders.
pub fn copy_tree(from: &camino::Utf8Path, to: &camino::Utf8Path) -> std::io::Result<()> {
    fs_err::create_dir_all(to)?;
    for entry in fs_err::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name().to_string_lossy().as_ref());
        let path = camino::Utf8PathBuf::from_path_buf(entry.path())
            .map_err(|p| std::io::Error::other(format!("not UTF-8: {}", p.display())))?;
        if entry.file_type()?.is_dir() {
            copy_tree(&path, &dest)?;
        } else {
            fs_err::copy(&path, &dest)?;
        }
    }
    Ok(())
}

/// A folder's digest as aibox pins a directory source: the SHA-256 of its `sha256sum`
/// listing, sorted by path.
pub fn tree_sha256(dir: &camino::Utf8Path) -> String {
    use sha2::Digest as _;
    fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<String>) {
        let mut entries: Vec<_> = fs_err::read_dir(dir)
            .map(|rd| rd.flatten().collect())
            .unwrap_or_default();
        entries.sort_by_key(fs_err::DirEntry::file_name);
        for e in entries {
            let path = e.path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if let Ok(rel) = path.strip_prefix(base) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut files = Vec::new();
    walk(dir.as_std_path(), dir.as_std_path(), &mut files);
    files.sort();
    let mut listing = String::new();
    for f in &files {
        let bytes = fs_err::read(dir.join(f)).unwrap_or_default();
        listing.push_str(&hex::encode(sha2::Sha256::digest(&bytes)));
        listing.push_str("  ");
        listing.push_str(f);
        listing.push('\n');
    }
    hex::encode(sha2::Sha256::digest(listing.as_bytes()))
}

/// Copies the folder `from` (files and folders, recursively) to `to`, creating it.
///
/// # Panics
/// When a file cannot be read or written: a failed helper is a failed test.
#[allow(clippy::expect_used)] // failing the calling test is the point
pub fn copy_dir(from: &camino::Utf8Path, to: &camino::Utf8Path) {
    fs_err::create_dir_all(to).expect("create the copy's folder");
    for entry in fs_err::read_dir(from).expect("list the folder to copy") {
        let entry = entry.expect("read a folder entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().expect("inspect an entry").is_dir() {
            copy_dir(&from.join(&name), &to.join(&name));
        } else {
            fs_err::copy(from.join(&name), to.join(&name)).expect("copy a file");
        }
    }
}

/// Every file under `dir` (recursively, links followed) whose name ends in `.{ext}`,
/// sorted by path: the docs and source walks of the documentation tests.
///
/// # Panics
/// When a folder cannot be listed: a failed helper is a failed test.
#[allow(clippy::expect_used)] // failing the calling test is the point
pub fn files_with_extension(dir: &std::path::Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in fs_err::read_dir(dir).expect("list a folder") {
        let path = entry.expect("read a folder entry").path();
        if path.is_dir() {
            out.extend(files_with_extension(&path, ext));
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// `chattr +i` on a folder for as long as the guard lives: even root cannot create a
/// file in it, which is how a test makes a write fail part-way for real (permissions
/// do not stop root). Needs `chattr` (e2fsprogs) and a file system with the flag
/// (ext4, tmpfs since Linux 6.0).
pub struct Immutable(camino::Utf8PathBuf);

impl Immutable {
    /// Sets the flag on `dir`; panics when `chattr` cannot.
    #[allow(clippy::expect_used)] // failing the calling test is the point
    pub fn set(dir: camino::Utf8PathBuf) -> Self {
        let status = std::process::Command::new("chattr")
            .args(["+i", dir.as_str()])
            .status()
            .expect("chattr (e2fsprogs) must be installed");
        assert!(
            status.success(),
            "chattr +i {dir} failed (needs ext4 or similar)"
        );
        Self(dir)
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .args(["-i", self.0.as_str()])
            .status();
    }
}

/// Overwrites the bytes of `path` from `offset` with `bytes` (the file keeps its
/// length unless they reach past its end), as damage to one file of an unpacked store's
/// pack; returns the bytes that were there.
///
/// # Panics
/// When the file cannot be read or written.
#[allow(clippy::expect_used)] // failing the calling test is the point
pub fn overwrite_at(path: &std::path::Path, offset: u64, bytes: &[u8]) -> Vec<u8> {
    use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
    let mut file = fs_err::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open the file to damage");
    let mut before = vec![0u8; bytes.len()];
    file.seek(SeekFrom::Start(offset)).expect("seek");
    file.read_exact(&mut before).expect("read what is there");
    file.seek(SeekFrom::Start(offset)).expect("seek");
    file.write_all(bytes).expect("overwrite");
    before
}
