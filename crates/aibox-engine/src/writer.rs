//! The single guarded writer, as the engine uses it.
//!
//! The primitives live in `aibox_fs` (over aibox-config's file table), so
//! the processkit installer (`aibox-provenance`, which cannot depend on the engine) writes
//! through the very same code. This module re-exports them; their errors reach users
//! unchanged inside [`EngineError::Write`].

pub use aibox_fs::{
    PERIMETER, ProjectRoot, WriteError, WriteOutcome, Writer, check_relative, in_perimeter, mode_of,
};

use crate::error::EngineError;

impl From<WriteError> for EngineError {
    /// Every writer error, disk failures included: the engine's own I/O errors are
    /// [`WriteError::Io`] too (`EngineError::io`).
    fn from(e: WriteError) -> Self {
        Self::Write(Box::new(e))
    }
}
