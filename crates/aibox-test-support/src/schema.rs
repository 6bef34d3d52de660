//! Test helpers: schema (see the crate docs).
