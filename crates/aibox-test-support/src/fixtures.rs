//! Test helpers: fixtures (see the crate docs).
