//! The layering check runs under `cargo test` too: the workspace's crates and the
//! engine's modules pass `cargo xtask layering` (the rules themselves are tested on
//! sample trees in `xtask/src/layering.rs`).
#![allow(clippy::unwrap_used)] // test helpers fail loudly

use std::path::Path;
use std::process::Command;

#[test]
fn the_workspace_is_layered() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("layering")
        .current_dir(workspace)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "`cargo xtask layering` found problems:\n{stderr}"
    );
    assert!(stderr.contains("engine modules"), "{stderr}");
}
