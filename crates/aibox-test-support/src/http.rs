//! Test helpers: http (see the crate docs).
