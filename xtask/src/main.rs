//! `cargo xtask`: maintainer tasks.

fn main() {}
