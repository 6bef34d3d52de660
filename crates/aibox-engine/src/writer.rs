//! The single guarded writer, as the engine uses it.
//!
//! The primitives live in `aibox_config::write`, next to the file table they enforce, so
//! the processkit installer (`aibox-provenance`, which cannot depend on the engine) writes
//! through the very same code. This module re-exports them and turns their errors into
//! [`EngineError`]s with the same codes.

pub use aibox_config::write::{
    PERIMETER, ProjectRoot, WriteError, WriteOutcome, Writer, check_relative, in_perimeter,
};

use crate::EngineError;

impl From<WriteError> for EngineError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::InvalidPath { path, reason } => Self::InvalidPath { path, reason },
            WriteError::OutsidePerimeter { path } => Self::OutsidePerimeter { path },
            WriteError::Symlink { path, link } => Self::Symlink { path, link },
            WriteError::WrongKind { path, expected } => Self::WrongKind { path, expected },
            WriteError::Exists { path } => Self::WrongKind {
                path,
                expected: "file aibox creates (it already exists)",
            },
            WriteError::Root { path, reason } => Self::Root { path, reason },
            WriteError::Io { op, path, source } => Self::Io { op, path, source },
        }
    }
}
