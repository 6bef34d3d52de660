//! `aibox-test-support`: shared helpers for aibox tests.
//!
//! Each module belongs to one area: `schema` validates generated files against the
//! vendored JSON schemas, `podman` prepares a real container engine and a locally built
//! base image, `http` serves releases on loopback, `fixtures` builds project trees.

pub mod fixtures;
pub mod http;
pub mod podman;
pub mod schema;

/// Path of the read-only `shared/` folder beside the repository (`../shared`), or
/// `AIBOX_SHARED_DIR` when set.
pub fn shared_dir() -> camino::Utf8PathBuf {
    if let Ok(dir) = std::env::var("AIBOX_SHARED_DIR") {
        return dir.into();
    }
    workspace_root()
        .parent()
        .map_or_else(|| "shared".into(), |p| p.join("shared"))
}

/// The workspace root (the folder with the top-level `Cargo.toml`).
pub fn workspace_root() -> camino::Utf8PathBuf {
    let here = camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .and_then(|p| p.parent())
        .map_or_else(|| here.to_owned(), ToOwned::to_owned)
}
