//! `aibox-test-support`: shared helpers for aibox tests.
//!
//! Each module belongs to one area: `schema` validates generated files against the
//! vendored JSON schemas, `podman` prepares a real container engine and a locally built
//! base image, `http` serves releases on loopback, `fixtures` builds project trees.

pub mod fixtures;
pub mod http;
pub mod podman;
pub mod schema;

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
