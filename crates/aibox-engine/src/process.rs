//! Running a helper program (`git`, `uv`) with a deadline: a program that hangs (a
//! credential helper waiting for input, a stuck network file system) is killed, and the
//! caller reports that it could not run instead of hanging the command.

use std::io::Read as _;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Spawns `cmd` (stdin closed, output captured) and waits for it until `timeout`; kills
/// it past the deadline.
pub(crate) fn run_with_deadline(cmd: Command, timeout: Duration) -> Option<Output> {
    run_with_input(cmd, &[], timeout)
}

/// [`run_with_deadline`] with `input` on the child's standard input (written on a thread
/// of its own, then closed).
pub(crate) fn run_with_input(mut cmd: Command, input: &[u8], timeout: Duration) -> Option<Output> {
    cmd.stdin(if input.is_empty() {
        Stdio::null()
    } else {
        Stdio::piped()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().ok()?;
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_vec();
        std::thread::spawn(move || {
            // A child that exits without reading it all is not our error.
            let _ = std::io::Write::write_all(&mut stdin, &input);
        });
    }
    // Drain the pipes on their own threads so a chatty child never blocks on a full pipe.
    let mut stdout = child.stdout.take()?;
    let mut stderr = child.stderr.take()?;
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    Some(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// A command line a shell reads back as the same words.
pub(crate) fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            let plain = !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+".contains(c));
            if plain {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::time::{Duration, Instant};

    #[test]
    fn a_command_past_its_deadline_is_killed() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let start = Instant::now();
        assert!(super::run_with_deadline(cmd, Duration::from_millis(200)).is_none());
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_quick_command_returns_its_output() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let output = super::run_with_deadline(cmd, Duration::from_secs(10)).unwrap();
        assert_eq!(output.status.code(), Some(3));
        assert_eq!(output.stdout, b"out\n");
        assert_eq!(output.stderr, b"err\n");
    }

    #[test]
    fn shell_words_quote_what_a_shell_would_split() {
        let words = ["python3", "-c", "import sys; sys.exit(1)", "it's"].map(str::to_owned);
        assert_eq!(
            super::shell_words(&words),
            r"python3 -c 'import sys; sys.exit(1)' 'it'\''s'"
        );
    }
}
