//! Test helpers: podman (see the crate docs).
