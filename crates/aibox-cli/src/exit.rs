//! Exit codes, and the one place an error's kind becomes an exit code.
//!
//! The table below is the documentation: `aibox docs cli` prints it into the CLI
//! reference, and a test keeps the README's copy identical.

use std::fmt::Write as _;

use aibox_config::ErrorKind;

/// How the process ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok,
    /// A check found problems.
    Problems,
    /// User error.
    User,
    /// Environment error.
    Environment,
    /// Internal error.
    Internal,
    /// Interrupted (`SIGINT`).
    Interrupted,
    /// The exit code of a command run in the container (`aibox exec`), passed through.
    Passthrough(u8),
}

/// Every documented exit code with its meaning, in order.
pub const EXIT_CODES: [(u8, &str); 6] = [
    (0, "success"),
    (
        1,
        "a check found problems (`apply --check` would change files; `doctor` found errors; \
         `skill review` found a failing point; `mcp check` found a server that does not start)",
    ),
    (
        2,
        "user error: bad arguments, invalid configuration, refused operation (a missing \
         consent, a file aibox will not overwrite; for `migrate`: an unknown migration id, a \
         path that is not an open conflict, open conflicts without `--take`/`--edited`, a file \
         changed since the upgrade without `--force`, an altered parked copy)",
    ),
    (
        3,
        "environment error: failed download or digest check, disk or permission error, no \
         container engine or an engine failure, a conflict's base version not in the download \
         cache (`migrate`)",
    ),
    (70, "internal error (a bug: please report it)"),
    (
        130,
        "interrupted: Ctrl-C (`SIGINT`) ended a step aibox was waiting for, such as the image \
         build",
    ),
];

impl Exit {
    /// The numeric code.
    pub fn code(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::Problems => 1,
            Self::User => 2,
            Self::Environment => 3,
            Self::Internal => 70,
            Self::Interrupted => 130,
            Self::Passthrough(code) => code,
        }
    }
}

/// The only mapping from an error's kind to the process exit code.
impl From<ErrorKind> for Exit {
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::User => Self::User,
            ErrorKind::Environment => Self::Environment,
            ErrorKind::Internal => Self::Internal,
            ErrorKind::Interrupted => Self::Interrupted,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

/// The exit-code table as Markdown (README and CLI reference).
pub fn markdown_table() -> String {
    let mut out = String::from("| code | meaning |\n| --- | --- |\n");
    for (code, meaning) in EXIT_CODES {
        let _ = writeln!(out, "| {code} | {meaning} |");
    }
    out
}
