//! `aibox-devcontainer`: pure generators of the dev container files.
