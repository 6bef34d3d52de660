//! Proves an MCP server starts: the stdio handshake a harness performs, with a deadline.
//!
//! [`probe_mcp_server`] spawns a prepared [`Command`] (a host process, or `podman exec -i
//! ...` built by [`crate::Runtime::exec_command`]), sends `initialize` as newline-delimited
//! JSON-RPC 2.0, waits for the answer with the matching id, sends
//! `notifications/initialized`, lists the tools (following `nextCursor`, bounded), then
//! closes stdin and kills and reaps the child. Servers log to stdout more often than they
//! should, so stdout lines that are not JSON-RPC responses are skipped; requests from the
//! server are answered (`ping`) or refused (everything else), never left hanging.
//!
//! Every read is bounded (line length, total stdout bytes, the stderr tail), both streams
//! are read on their own threads so a chatty server cannot deadlock the probe, and the
//! child never outlives the call.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use crate::process;

/// The MCP protocol revision the probe asks for.
pub const MCP_PROTOCOL_VERSION: &str = "2025-06-18";

/// How many trailing stderr lines a probe keeps.
pub const STDERR_TAIL_LINES: usize = 20;

/// Longest stdout line read (a `tools/list` page with large schemas fits easily).
const MAX_LINE: usize = 8 * 1024 * 1024;
/// Most stdout bytes read in one probe.
const MAX_STDOUT: usize = 64 * 1024 * 1024;
/// Longest stderr line kept (the rest of the line is dropped).
const MAX_STDERR_LINE: usize = 1000;
/// Most `tools/list` pages followed.
const MAX_PAGES: usize = 50;
/// Most tool names kept.
const MAX_TOOLS: usize = 10_000;
/// How often the child is polled while no output arrives.
const TICK: Duration = Duration::from_millis(25);
/// How long a server may take to exit once its stdin is closed before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long the stderr reader may still deliver lines after the child is gone (a
/// grandchild may hold the pipe open forever).
const STDERR_GRACE: Duration = Duration::from_millis(500);

/// Why a probe failed, as a kind (JSON consumers match on it; the words are in
/// [`McpProbe::reason`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeFailure {
    /// The program could not be started at all.
    Spawn,
    /// The server exited before it answered.
    Exited,
    /// The deadline passed; the server was killed.
    Timeout,
    /// The server answered with a JSON-RPC error.
    ErrorResponse,
    /// The server's answer was not a valid MCP response (or its output too large).
    Malformed,
}

/// The outcome of [`probe_mcp_server`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpProbe {
    /// The server answered `initialize` (and `tools/list`, when it offers tools).
    pub ok: bool,
    /// What went wrong, as a kind; `None` when `ok`.
    pub failure: Option<ProbeFailure>,
    /// What went wrong, one line (`exited with code 1 before answering initialize`).
    pub reason: Option<String>,
    /// `serverInfo.name` of the `initialize` answer.
    pub server_name: Option<String>,
    /// `serverInfo.version` of the `initialize` answer.
    pub server_version: Option<String>,
    /// The protocol version the server chose.
    pub protocol_version: Option<String>,
    /// Names of the tools `tools/list` returned, in its order.
    pub tools: Vec<String>,
    /// Milliseconds from the start of the process to the `initialize` answer.
    pub initialize_ms: Option<u64>,
    /// The last lines the server wrote to stderr (colour escapes removed).
    pub stderr_tail: Vec<String>,
}

impl McpProbe {
    fn new() -> Self {
        Self {
            ok: false,
            failure: None,
            reason: None,
            server_name: None,
            server_version: None,
            protocol_version: None,
            tools: Vec::new(),
            initialize_ms: None,
            stderr_tail: Vec::new(),
        }
    }

    /// The time to the `initialize` answer.
    pub fn initialize_time(&self) -> Option<Duration> {
        self.initialize_ms.map(Duration::from_millis)
    }
}

/// Runs the MCP stdio handshake against `cmd` and reports what happened. Never fails:
/// a program that cannot be started is a failed probe ([`ProbeFailure::Spawn`]). The
/// whole exchange is bounded by `timeout`; the child is killed and reaped before this
/// returns, whatever happened.
///
/// ```
/// use std::process::Command;
/// use std::time::Duration;
/// let mut cmd = Command::new("sh");
/// cmd.args(["-c", "echo 'No module named mcp' >&2; exit 1"]);
/// let probe = aibox_runtime::probe_mcp_server(cmd, Duration::from_secs(10));
/// assert!(!probe.ok);
/// assert_eq!(probe.reason.as_deref(), Some("exited with code 1 before answering initialize"));
/// assert_eq!(probe.stderr_tail, ["No module named mcp"]);
/// ```
pub fn probe_mcp_server(mut cmd: Command, timeout: Duration) -> McpProbe {
    let mut probe = McpProbe::new();
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            probe.failure = Some(ProbeFailure::Spawn);
            probe.reason = Some(format!(
                "could not start `{}`: {e}",
                cmd.get_program().to_string_lossy()
            ));
            return probe;
        }
    };
    let tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_LINES)));
    let (stderr_done_tx, stderr_done) = mpsc::channel::<()>();
    if let Some(err) = child.stderr.take() {
        let tail = Arc::clone(&tail);
        std::thread::spawn(move || read_stderr(err, &tail, &stderr_done_tx));
    }
    let (tx, rx) = mpsc::channel::<Out>();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || read_stdout(out, &tx));
    }
    let mut session = Session {
        child: &mut child,
        stdin: None,
        rx,
        deadline: started + timeout,
        timeout,
        next_id: 1,
        read: 0,
        eof: false,
        exited: None,
        exited_at: None,
    };
    session.stdin = session.child.stdin.take();

    match session.handshake(&mut probe, started) {
        Ok(()) => probe.ok = true,
        Err((failure, reason)) => {
            probe.failure = Some(failure);
            probe.reason = Some(reason);
        }
    }
    session.finish();
    // The stderr reader ends at EOF, which follows the kill unless a grandchild keeps
    // the pipe: wait briefly for the last lines, then take what arrived.
    let _ = stderr_done.recv_timeout(STDERR_GRACE);
    probe.stderr_tail = tail
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .cloned()
        .collect();
    probe
}

/// What the stdout reader hands over.
enum Out {
    /// One line without its end; `true` when it was longer than [`MAX_LINE`] and cut.
    Line(Vec<u8>, bool),
    /// End of stream (or a read error, which means the same here).
    Eof,
}

type Failed = (ProbeFailure, String);

/// One JSON-RPC conversation with the child.
struct Session<'a> {
    child: &'a mut Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Out>,
    deadline: Instant,
    timeout: Duration,
    next_id: u64,
    /// Stdout bytes read so far.
    read: usize,
    eof: bool,
    exited: Option<ExitStatus>,
    /// When the probe first saw the child gone.
    exited_at: Option<Instant>,
}

impl Session<'_> {
    fn handshake(&mut self, probe: &mut McpProbe, started: Instant) -> Result<(), Failed> {
        let init = self.request(
            "initialize",
            &json!({
                "protocolVersion": MCP_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "aibox", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        probe.initialize_ms =
            Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
        let text = |v: &Value| v.as_str().map(ToOwned::to_owned);
        probe.server_name = init.pointer("/serverInfo/name").and_then(text);
        probe.server_version = init.pointer("/serverInfo/version").and_then(text);
        probe.protocol_version = init.get("protocolVersion").and_then(text);
        if probe.protocol_version.is_none() {
            return Err(malformed("the initialize answer has no `protocolVersion`"));
        }
        self.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            "reading notifications/initialized",
        )?;
        // A server without the tools capability has nothing to list.
        if init.pointer("/capabilities/tools").is_none() {
            return Ok(());
        }
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor
                .as_ref()
                .map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let page = self.request("tools/list", &params)?;
            let tools = page
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| malformed("the tools/list answer has no `tools` list"))?;
            for tool in tools {
                let name = tool
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("a tool in the tools/list answer has no `name`"))?;
                if probe.tools.len() < MAX_TOOLS {
                    probe.tools.push(name.to_owned());
                }
            }
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(ToOwned::to_owned);
            if cursor.is_none() {
                return Ok(());
            }
        }
        // Still paging after the limit: what was listed is enough to prove it starts.
        Ok(())
    }

    /// Sends a request and waits for its answer: the `result`, or the failure.
    fn request(&mut self, method: &str, params: &Value) -> Result<Value, Failed> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            &format!("answering {method}"),
        )?;
        loop {
            let line = self.next_line(method)?;
            let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
                continue; // a log line on stdout
            };
            if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
                continue;
            }
            if let Some(request) = msg.get("method").and_then(Value::as_str) {
                if let Some(their_id) = msg.get("id") {
                    self.answer(request, their_id)?;
                }
                continue; // a notification, or a request we answered
            }
            if msg.get("id") != Some(&json!(id)) {
                continue; // an answer to something else
            }
            if let Some(error) = msg.get("error") {
                let code = error
                    .get("code")
                    .map_or_else(String::new, |c| format!(" {c}"));
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("(no message)");
                return Err((
                    ProbeFailure::ErrorResponse,
                    format!(
                        "answered {method} with JSON-RPC error{code}: {}",
                        one_line(message)
                    ),
                ));
            }
            return match msg.get("result") {
                Some(result) if result.is_object() => Ok(result.clone()),
                Some(_) => Err(malformed(format!(
                    "the {method} answer's `result` is not an object"
                ))),
                None => Err(malformed(format!(
                    "the {method} answer has neither `result` nor `error`"
                ))),
            };
        }
    }

    /// Answers a request the server sent: `ping` gets its empty result, anything else
    /// "method not found" (the probe offers no client capabilities).
    fn answer(&mut self, method: &str, id: &Value) -> Result<(), Failed> {
        let reply = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id,
                   "error": {"code": -32601, "message": format!("method not found: {method}")}})
        };
        self.send(
            &reply,
            &format!("reading the answer to its {method} request"),
        )
    }

    /// Writes one message; when the server is gone, the failure says what it did not
    /// get to (`before {what}`).
    fn send(&mut self, msg: &Value, what: &str) -> Result<(), Failed> {
        let mut line = msg.to_string();
        line.push('\n');
        let written = self.stdin.as_mut().map(|stdin| {
            stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.flush())
        });
        if let Some(Ok(())) = written {
            Ok(())
        } else {
            // A broken pipe means the server is gone: its exit is the story.
            self.stdin = None;
            Err(self.gone_before(what))
        }
    }

    /// The next stdout line, or why none will come for `method`.
    fn next_line(&mut self, method: &str) -> Result<Vec<u8>, Failed> {
        loop {
            if self.eof {
                // Stdout closed: the server is exiting (or exited); report how.
                return Err(self.gone_before(&format!("answering {method}")));
            }
            let now = Instant::now();
            if now >= self.deadline {
                return Err((
                    ProbeFailure::Timeout,
                    format!(
                        "timed out after {} waiting for the {method} answer",
                        seconds(self.timeout)
                    ),
                ));
            }
            match self.rx.recv_timeout(TICK.min(self.deadline - now)) {
                Ok(Out::Line(line, cut)) => {
                    self.read = self.read.saturating_add(line.len() + 1);
                    if self.read > MAX_STDOUT {
                        return Err(malformed(format!(
                            "more than {} MiB on stdout",
                            MAX_STDOUT / 1024 / 1024
                        )));
                    }
                    if cut {
                        return Err(malformed(format!(
                            "a stdout line longer than {} MiB",
                            MAX_LINE / 1024 / 1024
                        )));
                    }
                    return Ok(line);
                }
                Ok(Out::Eof) | Err(mpsc::RecvTimeoutError::Disconnected) => self.eof = true,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // A daemon it started may hold stdout open after the server exited:
                    // lines still queued are read for a moment, then its exit counts.
                    if self.poll_exit().is_some() {
                        let since = *self.exited_at.get_or_insert(now);
                        if now.duration_since(since) >= EXIT_GRACE {
                            return Err(self.gone_before(&format!("answering {method}")));
                        }
                    }
                }
            }
        }
    }

    fn poll_exit(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// The failure for a server that stopped talking: its exit status when known.
    fn gone_before(&mut self, what: &str) -> Failed {
        // Its exit may trail the closed pipe by a moment.
        let grace = Instant::now() + EXIT_GRACE;
        while self.poll_exit().is_none() && Instant::now() < grace.min(self.deadline) {
            std::thread::sleep(TICK);
        }
        match self.poll_exit() {
            Some(status) => (
                ProbeFailure::Exited,
                match status.code() {
                    Some(code) => format!("exited with code {code} before {what}"),
                    None => format!(
                        "was killed ({}) before {what}",
                        process::describe_status(status)
                    ),
                },
            ),
            None => (
                ProbeFailure::Exited,
                format!("closed its output before {what}"),
            ),
        }
    }

    /// Closes stdin (a stdio server's cue to exit), gives it a moment, then kills and
    /// reaps it: nothing outlives the probe.
    fn finish(&mut self) {
        self.stdin = None;
        let grace = Instant::now() + EXIT_GRACE;
        while self.poll_exit().is_none() && Instant::now() < grace {
            std::thread::sleep(TICK);
        }
        if self.exited.is_none() {
            // Best effort: it may exit between the poll and the kill.
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn malformed(detail: impl std::fmt::Display) -> Failed {
    (
        ProbeFailure::Malformed,
        format!("malformed output: {detail}"),
    )
}

/// `1.5 s`, `60 s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// The first line of `text`, at most 200 characters.
fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_owned(),
    }
}

/// Reads one line of at most `cap` bytes into `buf` (without its end); the rest of a
/// longer line is read and dropped. `None` at end of stream; `Some(true)` when cut.
fn read_capped_line(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut cut = false;
    let mut any = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(any.then_some(cut));
        }
        any = true;
        let (chunk, used, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..i], i + 1, true),
            None => (available, available.len(), false),
        };
        let room = cap.saturating_sub(buf.len());
        if chunk.len() > room {
            cut = true;
        }
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        reader.consume(used);
        if done {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Some(cut));
        }
    }
}

fn read_stdout(stream: impl Read, tx: &mpsc::Sender<Out>) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    while let Ok(Some(cut)) = read_capped_line(&mut reader, &mut buf, MAX_LINE) {
        if tx.send(Out::Line(std::mem::take(&mut buf), cut)).is_err() {
            return;
        }
    }
    let _ = tx.send(Out::Eof);
}

fn read_stderr(stream: impl Read, tail: &Mutex<VecDeque<String>>, done: &mpsc::Sender<()>) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    // Read to the end even past the tail, so a chatty server never blocks on stderr.
    while let Ok(Some(_)) = read_capped_line(&mut reader, &mut buf, MAX_STDERR_LINE * 4) {
        let plain = strip_ansi_escapes::strip(&buf);
        let text = String::from_utf8_lossy(&plain);
        let line = match text.char_indices().nth(MAX_STDERR_LINE) {
            Some((cut, _)) => format!("{}...", &text[..cut]),
            None => text.into_owned(),
        };
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    let _ = done.send(());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_lines_are_cut_and_the_rest_dropped() {
        let mut input: &[u8] = b"short\r\n0123456789abcdef\nlast";
        let mut buf = Vec::new();
        assert_eq!(
            read_capped_line(&mut input, &mut buf, 8).unwrap(),
            Some(false)
        );
        assert_eq!(buf, b"short");
        assert_eq!(
            read_capped_line(&mut input, &mut buf, 8).unwrap(),
            Some(true)
        );
        assert_eq!(buf, b"01234567");
        assert_eq!(
            read_capped_line(&mut input, &mut buf, 8).unwrap(),
            Some(false)
        );
        assert_eq!(buf, b"last");
        assert_eq!(read_capped_line(&mut input, &mut buf, 8).unwrap(), None);
    }

    #[test]
    fn seconds_read_well() {
        assert_eq!(seconds(Duration::from_mins(1)), "60 s");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5 s");
    }
}
