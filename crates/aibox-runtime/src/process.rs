//! Running external programs with a deadline, streaming their output line by line.
//!
//! Every command the runtime spawns goes through here so that nothing can hang forever:
//! a command that outlives its deadline is killed and reported as a timeout.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::RuntimeError;

/// How often a running child is polled.
const TICK: Duration = Duration::from_millis(25);
/// How long to keep reading output after the child exited: a daemon it started may hold
/// the pipe open forever, so the rest of its output is abandoned after this.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// How many trailing output lines an error message keeps.
const TAIL_LINES: usize = 25;

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// The result of a finished command.
#[derive(Debug)]
pub(crate) struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// Both streams interleaved in arrival order, last lines only.
    pub tail: Vec<String>,
}

impl Finished {
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

/// Describes an exit status in words (`1`, `signal 9`).
pub(crate) fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => code.to_string(),
        (None, Some(sig)) => format!("signal {sig}"),
        (None, None) => "unknown".to_owned(),
    }
}

/// The exit code a shell would report for this status (`128 + N` for signal N).
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// A command line rendered for messages.
pub(crate) fn render(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program())
        .file_name()
        .map_or_else(
            || cmd.get_program().to_string_lossy(),
            OsStr::to_string_lossy,
        )
        .into_owned();
    let mut out = program;
    for arg in cmd.get_args() {
        out.push(' ');
        out.push_str(&arg.to_string_lossy());
    }
    out
}

/// Finds `name` in the directories of `path` (a `PATH`-style list): the first regular,
/// executable file wins.
pub fn find_program(name: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    let path = path?;
    std::env::split_paths(path)
        .filter(|d| !d.as_os_str().is_empty())
        .find_map(|dir| {
            let candidate = dir.join(name);
            let meta = fs_err::metadata(&candidate).ok()?;
            (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
        })
}

/// What podman-compose 1.0 prints about itself rather than what it ran, kept out of an
/// error's tail: its version probe and, given more than one compose file (aibox always
/// passes two or more), the merged file as JSON on stdout. Python flushes that when
/// podman-compose exits, so after the engine's error, which a one-service project's 35
/// lines of JSON pushed out of the tail (seen: a rootless `aibox up` whose base image
/// could not be pulled showed the JSON and not why).
#[derive(Default)]
struct ComposeChatter {
    /// Inside the merged file's JSON, which ends with a `}` of its own.
    in_merged: bool,
}

impl ComposeChatter {
    /// Whether `line` is chatter; reads the merged file's start and end.
    fn is_chatter(&mut self, stream: Stream, line: &str) -> bool {
        if stream != Stream::Stdout {
            return false;
        }
        if self.in_merged {
            self.in_merged = line != "}";
            return true;
        }
        if line.trim() == "** merged:" {
            self.in_merged = true;
            return true;
        }
        line.starts_with("['podman', '--version', ") || line.starts_with("using podman version: ")
    }
}

/// Starts `cmd`, again a few times while the kernel says its program is busy
/// (`ETXTBSY`): a program just written keeps a writer until every process that forked
/// meanwhile has exec'd (another thread starting a process, a package manager replacing
/// the CLI), and a probe started in that window would read as an engine that does not
/// answer.
fn spawn(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 20 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// Runs `cmd` with stdin closed, capturing both streams and handing every line to
/// `on_line` as it arrives. The child is killed when `timeout` passes.
pub(crate) fn run(
    mut cmd: Command,
    timeout: Duration,
    on_line: &mut dyn FnMut(Stream, &str),
) -> Result<Finished, RuntimeError> {
    let rendered = render(&cmd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = spawn(&mut cmd).map_err(|source| RuntimeError::Spawn {
        program: cmd.get_program().to_string_lossy().into_owned(),
        source,
    })?;

    let (tx, rx) = mpsc::channel::<(Stream, String)>();
    if let Some(out) = child.stdout.take() {
        spawn_reader(out, Stream::Stdout, tx.clone());
    }
    if let Some(err) = child.stderr.take() {
        spawn_reader(err, Stream::Stderr, tx.clone());
    }
    drop(tx);

    let deadline = Instant::now() + timeout;
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut tail: Vec<String> = Vec::new();
    let mut chatter = ComposeChatter::default();
    let mut handle = |stream: Stream, line: String| {
        on_line(stream, &line);
        let buf = match stream {
            Stream::Stdout => &mut stdout,
            Stream::Stderr => &mut stderr,
        };
        buf.push_str(&line);
        buf.push('\n');
        if chatter.is_chatter(stream, &line) {
            return;
        }
        if tail.len() == TAIL_LINES {
            tail.remove(0);
        }
        tail.push(line);
    };

    let mut disconnected = false;
    let mut exited: Option<(ExitStatus, Instant)> = None;
    let status = loop {
        if disconnected {
            std::thread::sleep(TICK);
        } else {
            match rx.recv_timeout(TICK) {
                Ok((stream, line)) => handle(stream, line),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => disconnected = true,
            }
        }
        if exited.is_none() {
            let polled = child.try_wait().map_err(|source| RuntimeError::Spawn {
                program: rendered.clone(),
                source,
            })?;
            exited = polled.map(|st| (st, Instant::now() + DRAIN_GRACE));
        }
        match exited {
            Some((st, grace)) if disconnected || Instant::now() >= grace => break st,
            None if Instant::now() >= deadline => {
                kill(&mut child);
                return Err(RuntimeError::Timeout {
                    command: rendered,
                    seconds: timeout.as_secs(),
                });
            }
            Some(_) | None => {}
        }
    };
    while let Ok((stream, line)) = rx.try_recv() {
        handle(stream, line);
    }
    Ok(Finished {
        status,
        stdout,
        stderr,
        tail,
    })
}

/// Runs `cmd` with the caller's stdin, stdout and stderr, optionally bounded by `timeout`.
pub(crate) fn run_inherited(
    mut cmd: Command,
    timeout: Option<Duration>,
) -> Result<ExitStatus, RuntimeError> {
    let rendered = render(&cmd);
    let mut child = spawn(&mut cmd).map_err(|source| RuntimeError::Spawn {
        program: cmd.get_program().to_string_lossy().into_owned(),
        source,
    })?;
    let io_err = |source| RuntimeError::Spawn {
        program: rendered.clone(),
        source,
    };
    let Some(timeout) = timeout else {
        return child.wait().map_err(io_err);
    };
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().map_err(io_err)? {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            kill(&mut child);
            return Err(RuntimeError::Timeout {
                command: rendered,
                seconds: timeout.as_secs(),
            });
        }
        std::thread::sleep(TICK);
    }
}

fn kill(child: &mut Child) {
    // Best effort: the child may have exited between the poll and the kill.
    let _ = child.kill();
    let _ = child.wait();
}

fn spawn_reader(
    stream: impl Read + Send + 'static,
    which: Stream,
    tx: mpsc::Sender<(Stream, String)>,
) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    // Engines colour their output even into a pipe (docker-compose 1.29
                    // wraps each character of a build step's stderr in its own escape):
                    // every caller reads, matches and shows plain text.
                    let plain = strip_ansi_escapes::strip(&buf);
                    let line = String::from_utf8_lossy(&plain);
                    let line = line.trim_end_matches(['\n', '\r']).to_owned();
                    if tx.send((which, line)).is_err() {
                        break;
                    }
                }
            }
        }
    });
}

/// Extra environment handed to every child process.
pub(crate) type ExtraEnv = Vec<(OsString, OsString)>;

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    #[test]
    fn captures_both_streams_in_order() {
        let mut seen = Vec::new();
        let done = run(
            sh("echo one; echo two >&2; echo three"),
            Duration::from_secs(10),
            &mut |s, l| {
                seen.push((s, l.to_owned()));
            },
        )
        .unwrap();
        assert!(done.success());
        assert_eq!(done.stdout, "one\nthree\n");
        assert_eq!(done.stderr, "two\n");
        assert_eq!(seen.len(), 3);
        assert_eq!(done.tail.len(), 3);
    }

    /// podman-compose 1.0.3's own lines, as a failed rootless build printed them (the
    /// engine's error on stderr first, then the merged compose file flushed at exit), stay
    /// out of the tail; the engine's error and the exit code stay in it.
    #[test]
    fn podman_composes_own_chatter_stays_out_of_the_tail() {
        let merged = (0..40)
            .map(|i| format!("  \\\"key{i}\\\": {{"))
            .collect::<Vec<_>>()
            .join("\\n");
        let script = format!(
            "echo 'Error: creating build container: no such host' >&2; sleep 0.2; \
             printf \"['podman', '--version', '']\\nusing podman version: 4.3.1\\n \
             ** merged:\\n {{\\n{merged}\\n  }}\\n}}\\npodman build -t x .\\nexit code: 125\\n\""
        );
        let done = run(sh(&script), Duration::from_secs(10), &mut |_, _| {}).unwrap();
        assert_eq!(
            done.tail,
            [
                "Error: creating build container: no such host",
                "podman build -t x .",
                "exit code: 125",
            ],
            "{}",
            done.stdout
        );
        assert!(
            done.stdout.contains("\"key39\""),
            "the output itself keeps it all"
        );
    }

    /// docker-compose 1.29's legacy builder, as captured from a real failed step: every
    /// character of the step's stderr in its own colour escape.
    #[test]
    fn colour_escapes_are_stripped_from_every_line() {
        let script = r"printf '\033[91mc\033[0m\033[91mu\033[0m\033[91mr\033[0m\033[91ml\033[0m\033[91m:\033[0m \033[91m(60)\033[0m\n' >&2; printf '\033[0m\033[91mMore details\n' >&2";
        let mut seen = Vec::new();
        let done = run(sh(script), Duration::from_secs(10), &mut |_, l| {
            seen.push(l.to_owned());
        })
        .unwrap();
        assert_eq!(seen, ["curl: (60)", "More details"]);
        assert_eq!(done.tail, seen);
        assert_eq!(done.stderr, "curl: (60)\nMore details\n");
    }

    #[test]
    fn times_out_and_kills() {
        let started = Instant::now();
        let err = run(
            sh("exec sleep 30"),
            Duration::from_millis(300),
            &mut |_, _| {},
        )
        .unwrap_err();
        assert!(matches!(err, RuntimeError::Timeout { .. }), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_daemon_holding_the_pipe_does_not_block() {
        // The background sleep inherits stdout and keeps it open after `sh` exits.
        let started = Instant::now();
        let done = run(
            sh("sleep 20 & echo started"),
            Duration::from_secs(15),
            &mut |_, _| {},
        )
        .unwrap();
        assert!(done.success());
        assert_eq!(done.stdout, "started\n");
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn reports_exit_codes_and_signals() {
        let done = run(sh("exit 3"), Duration::from_secs(10), &mut |_, _| {}).unwrap();
        assert_eq!(describe_status(done.status), "3");
        assert_eq!(exit_code(done.status), 3);
        let done = run(sh("kill -9 $$"), Duration::from_secs(10), &mut |_, _| {}).unwrap();
        assert_eq!(describe_status(done.status), "signal 9");
        assert_eq!(exit_code(done.status), 137);
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        let err = run(
            Command::new("/nonexistent/aibox-nope"),
            Duration::from_secs(1),
            &mut |_, _| {},
        )
        .unwrap_err();
        assert!(matches!(err, RuntimeError::Spawn { .. }), "{err:?}");
    }

    #[test]
    fn inherited_run_honours_timeout() {
        let status = run_inherited(sh("exit 4"), Some(Duration::from_secs(10))).unwrap();
        assert_eq!(status.code(), Some(4));
        let err = run_inherited(sh("exec sleep 30"), Some(Duration::from_millis(200))).unwrap_err();
        assert!(matches!(err, RuntimeError::Timeout { .. }), "{err:?}");
    }

    #[test]
    fn finds_programs_on_a_given_path() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tool");
        fs_err::write(&exe, "#!/bin/sh\n").unwrap();
        fs_err::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.path().join("plain");
        fs_err::write(&plain, "").unwrap();
        let path = std::env::join_paths(["/nonexistent", dir.path().to_str().unwrap()]).unwrap();
        assert_eq!(find_program("tool", Some(&path)), Some(exe));
        assert_eq!(find_program("plain", Some(&path)), None, "not executable");
        assert_eq!(find_program("missing", Some(&path)), None);
        assert_eq!(find_program("tool", None), None);
    }
}
