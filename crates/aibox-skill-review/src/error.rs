//! Errors of the review itself (not findings: a skill that fails a point is a result).

use camino::Utf8PathBuf;
use miette::Diagnostic;

/// Why a skill could not be reviewed at all.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum ReviewError {
    /// The skill path does not exist.
    #[error("skill directory `{path}` does not exist")]
    #[diagnostic(
        code(aibox::skill_review::not_found),
        help(
            "pass the directory that holds the skill's SKILL.md, or the name of an installed skill"
        )
    )]
    NotFound {
        /// The path as given.
        path: Utf8PathBuf,
    },

    /// The skill path is not a directory.
    #[error("`{path}` is not a directory")]
    #[diagnostic(
        code(aibox::skill_review::not_a_directory),
        help("a skill is a directory (context/skills/<category>/<skill>/); pass that directory")
    )]
    NotADirectory {
        /// The path as given.
        path: Utf8PathBuf,
    },

    /// A file or directory name inside the skill is not valid UTF-8.
    #[error("a file name below `{dir}` is not valid UTF-8: {name}")]
    #[diagnostic(
        code(aibox::skill_review::non_utf8_name),
        help("rename the file; skills are reviewed and installed by UTF-8 path only")
    )]
    NonUtf8Name {
        /// Directory that holds the entry.
        dir: Utf8PathBuf,
        /// Lossy rendering of the name.
        name: String,
    },

    /// Reading a file or directory failed.
    #[error("cannot {op} `{path}`")]
    #[diagnostic(
        code(aibox::skill_review::io),
        help("check that the skill directory is readable by the current user")
    )]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The path.
        path: Utf8PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },

    /// The skill path lies in a kernel pseudo-file system (`/proc`, `/sys`, `/dev`).
    #[error("`{path}` is inside {fs}, a kernel pseudo-file system, not a skill")]
    #[diagnostic(
        code(aibox::skill_review::pseudo_filesystem),
        help("pass the directory that holds the skill's SKILL.md")
    )]
    PseudoFilesystem {
        /// The path as given.
        path: Utf8PathBuf,
        /// `/proc`, `/sys` or `/dev`.
        fs: &'static str,
    },

    /// The skill holds more files than a review will read.
    #[error("`{path}` holds more than {limit} files; refusing to review it")]
    #[diagnostic(
        code(aibox::skill_review::too_many_files),
        help(
            "a skill is a small directory; check that PATH points at one skill, not a tree of them"
        )
    )]
    TooManyFiles {
        /// The skill directory.
        path: Utf8PathBuf,
        /// The limit.
        limit: usize,
    },
}

impl ReviewError {
    /// Who can fix it: a file system failure is the environment, a bad target the user.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Io { .. } => aibox_config::ErrorKind::Environment,
            _ => aibox_config::ErrorKind::User,
        }
    }
}
