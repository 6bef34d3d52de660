//! The one classification every aibox error carries: whose move it is.
//!
//! Each crate's error type has a `kind()` returning [`ErrorKind`]; the command-line
//! interface maps the kind to an exit code in one place. It lives in the bottom layer so
//! every crate can name it without depending on another.

use serde::Serialize;

/// Who can fix an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// The user: bad arguments, an invalid configuration, a refused operation, a file in
    /// the project that aibox will not overwrite.
    User,
    /// The environment: a failed download or verification, a disk or permission error, a
    /// missing or failing container engine.
    Environment,
    /// aibox itself (a bug).
    Internal,
    /// Nobody: the user interrupted it (Ctrl-C, `SIGINT`), which ended a step midway.
    Interrupted,
}

impl ErrorKind {
    /// The lowercase name (`user`, `environment`, `internal`, `interrupted`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Environment => "environment",
            Self::Internal => "internal",
            Self::Interrupted => "interrupted",
        }
    }
}
