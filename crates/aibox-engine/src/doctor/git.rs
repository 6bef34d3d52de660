//! The one way doctor runs `git`: with a deadline. A `git` that hangs (a credential
//! helper waiting for input, a stuck network file system) is killed, and the check says
//! it could not run instead of hanging `aibox doctor`.

use std::process::{Command, Output};
use std::time::Duration;

use camino::Utf8Path;

/// How long one `git` call may take.
pub(crate) const GIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `git -C root args...` with no input and waits at most `timeout`; `None` when it
/// cannot be started, fails to be waited for, or runs past the deadline (it is killed).
pub(crate) fn git(root: &Utf8Path, args: &[&str], timeout: Duration) -> Option<Output> {
    let mut cmd = Command::new("git");
    // Never ask for credentials: there is nobody to answer.
    cmd.arg("-C")
        .arg(root.as_str())
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0");
    crate::process::run_with_deadline(cmd, timeout)
}
