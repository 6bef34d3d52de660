//! The MCP handshake probe against real processes: the example pack's stdlib server, and
//! servers that fail the ways real ones do (a missing dependency, a hang, log lines on
//! stdout, an error answer). `python3` must be installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use std::process::Command;
use std::time::{Duration, Instant};

use aibox_runtime::{McpProbe, ProbeFailure, probe_mcp_server};

/// The bundled example pack, whose server answers `initialize` and `tools/list`.
fn pack() -> camino::Utf8PathBuf {
    aibox_test_support::workspace_root().join("examples/processkit-pack")
}

fn python3() -> Command {
    Command::new(aibox_test_support::podman::require_program(
        "python3",
        "install Python 3 (`apt-get install python3`)",
    ))
}

fn python(script: &str) -> Command {
    let mut cmd = python3();
    cmd.args(["-c", script]);
    cmd
}

/// No process whose command line holds `marker` is left running.
fn assert_gone(marker: &str) {
    let out = Command::new("pgrep").args(["-f", marker]).output().unwrap();
    assert!(
        out.stdout.is_empty(),
        "a process is left behind: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn failed(probe: &McpProbe, failure: ProbeFailure) -> &str {
    assert!(!probe.ok, "{probe:?}");
    assert_eq!(probe.failure, Some(failure), "{probe:?}");
    probe.reason.as_deref().unwrap()
}

#[test]
fn the_example_pack_server_answers_initialize_and_lists_its_tools() {
    let mut cmd = python3();
    cmd.arg("context/skills/processkit/skill-finder/mcp/server.py")
        .env_remove("PROCESSKIT_PROJECT_ROOT")
        .current_dir(pack());
    let probe = probe_mcp_server(cmd, Duration::from_secs(30));
    assert!(probe.ok, "{probe:?}");
    assert_eq!(probe.failure, None);
    assert_eq!(probe.reason, None);
    assert_eq!(
        probe.server_name.as_deref(),
        Some("processkit-skill-finder")
    );
    assert_eq!(probe.server_version.as_deref(), Some("0.1.0"));
    assert_eq!(probe.protocol_version.as_deref(), Some("2025-06-18"));
    assert_eq!(probe.tools, ["list_skills", "find_skill"]);
    let init = probe.initialize_time().unwrap();
    assert!(init < Duration::from_secs(30), "{init:?}");
    assert!(probe.stderr_tail.is_empty(), "{probe:?}");
    let json = serde_json::to_value(&probe).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["tools"][0], "list_skills");
    assert!(json["reason"].is_null(), "{json}");
}

/// What users see when a server's dependencies do not match: a traceback and exit 1.
#[test]
fn a_server_that_dies_at_start_reports_its_exit_code_and_stderr_tail() {
    let script = "import sys\n\
        sys.stderr.write('Traceback (most recent call last):\\n')\n\
        sys.stderr.write('  File \"server.py\", line 3, in <module>\\n')\n\
        sys.stderr.write(\"\\x1b[31mModuleNotFoundError: No module named 'mcp.server.fastmcp'\\x1b[0m\\n\")\n\
        sys.exit(1)";
    let probe = probe_mcp_server(python(script), Duration::from_secs(30));
    assert_eq!(
        failed(&probe, ProbeFailure::Exited),
        "exited with code 1 before answering initialize"
    );
    assert_eq!(
        probe.stderr_tail.last().map(String::as_str),
        Some("ModuleNotFoundError: No module named 'mcp.server.fastmcp'"),
        "colour escapes are removed, nothing else"
    );
    assert_eq!(probe.stderr_tail.len(), 3, "{probe:?}");
    assert_eq!(probe.initialize_ms, None);
}

#[test]
fn the_stderr_tail_keeps_the_last_twenty_lines() {
    let script = "import sys\nfor i in range(5000): sys.stderr.write(f'line {i}\\n')\nsys.exit(2)";
    let probe = probe_mcp_server(python(script), Duration::from_secs(30));
    assert_eq!(
        failed(&probe, ProbeFailure::Exited),
        "exited with code 2 before answering initialize"
    );
    assert_eq!(probe.stderr_tail.len(), 20);
    assert_eq!(probe.stderr_tail[0], "line 4980");
    assert_eq!(probe.stderr_tail[19], "line 4999");
}

#[test]
fn a_server_that_never_answers_times_out_and_is_killed() {
    let marker = format!("aibox-probe-hang-{}", std::process::id());
    let script = format!(
        "import sys, time  # {marker}\nsys.stderr.write('starting\\n')\nsys.stderr.flush()\ntime.sleep(600)"
    );
    let started = Instant::now();
    let probe = probe_mcp_server(python(&script), Duration::from_millis(1500));
    assert_eq!(
        failed(&probe, ProbeFailure::Timeout),
        "timed out after 1.5 s waiting for the initialize answer"
    );
    assert_eq!(probe.stderr_tail, ["starting"]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_gone(&marker);
}

/// A server that ignores stdin's end after a good answer is still killed and reaped.
#[test]
fn a_server_that_ignores_the_end_of_stdin_is_killed_after_the_handshake() {
    let marker = format!("aibox-probe-linger-{}", std::process::id());
    let script = format!(
        "import json, sys, signal, time  # {marker}\n\
         signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
         req = json.loads(sys.stdin.readline())\n\
         print(json.dumps({{'jsonrpc': '2.0', 'id': req['id'], 'result': {{'protocolVersion': '2025-06-18', 'capabilities': {{}}, 'serverInfo': {{'name': 'linger', 'version': '1'}}}}}}), flush=True)\n\
         time.sleep(600)"
    );
    let probe = probe_mcp_server(python(&script), Duration::from_secs(30));
    assert!(probe.ok, "{probe:?}");
    assert!(
        probe.tools.is_empty(),
        "no tools capability, nothing listed"
    );
    assert_gone(&marker);
}

/// Servers log on stdout and send notifications and requests of their own before the
/// answer; the probe reads past them (and answers `ping`), then pages through the tools.
#[test]
fn log_lines_notifications_and_pages_are_handled() {
    let script = r#"
import json, sys
print("INFO: starting server on stdio", flush=True)
print("not json {", flush=True)
print(json.dumps({"some": "json, not JSON-RPC"}), flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    method = msg.get("method")
    if method == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}), flush=True)
        print(json.dumps({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}), flush=True)
        pong = json.loads(sys.stdin.readline())
        assert pong == {"jsonrpc": "2.0", "id": "srv-1", "result": {}}, pong
        print(json.dumps({"jsonrpc": "2.0", "id": 999, "result": {}}), flush=True)
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "chatty", "version": "2.3.4"}}}), flush=True)
    elif method == "notifications/initialized":
        sys.stderr.write("initialized\n")
    elif method == "tools/list":
        cursor = (msg.get("params") or {}).get("cursor")
        page = {None: (["a", "b"], "p2"), "p2": (["c"], "p3"), "p3": (["d"], None)}[cursor]
        result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in page[0]]}
        if page[1]:
            result["nextCursor"] = page[1]
        print("log: listing tools", flush=True)
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;
    let probe = probe_mcp_server(python(script), Duration::from_secs(30));
    assert!(probe.ok, "{probe:?}");
    assert_eq!(probe.server_name.as_deref(), Some("chatty"));
    assert_eq!(probe.server_version.as_deref(), Some("2.3.4"));
    assert_eq!(probe.tools, ["a", "b", "c", "d"]);
    assert_eq!(probe.stderr_tail, ["initialized"]);
}

#[test]
fn an_error_answer_to_initialize_is_reported() {
    let script = r#"
import json, sys
msg = json.loads(sys.stdin.readline())
print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32602, "message": "Unsupported protocol version\nsupported: 2024-11-05"}}), flush=True)
sys.stdin.read()
"#;
    let probe = probe_mcp_server(python(script), Duration::from_secs(30));
    assert_eq!(
        failed(&probe, ProbeFailure::ErrorResponse),
        "answered initialize with JSON-RPC error -32602: Unsupported protocol version"
    );
}

#[test]
fn an_answer_without_a_result_is_malformed() {
    let script = r#"
import json, sys
msg = json.loads(sys.stdin.readline())
print(json.dumps({"jsonrpc": "2.0", "id": msg["id"]}), flush=True)
sys.stdin.read()
"#;
    let probe = probe_mcp_server(python(script), Duration::from_secs(30));
    assert_eq!(
        failed(&probe, ProbeFailure::Malformed),
        "malformed output: the initialize answer has neither `result` nor `error`"
    );
}

/// Only garbage on stdout, then exit: the exit is the story, not the garbage.
#[test]
fn garbage_then_exit_is_an_exit() {
    let probe = probe_mcp_server(
        python("print('Usage: server [--port N]')\nraise SystemExit(64)"),
        Duration::from_secs(30),
    );
    assert_eq!(
        failed(&probe, ProbeFailure::Exited),
        "exited with code 64 before answering initialize"
    );
}

#[test]
fn a_program_that_cannot_start_is_a_spawn_failure() {
    let probe = probe_mcp_server(
        Command::new("/nonexistent/aibox-no-such-server"),
        Duration::from_secs(5),
    );
    let reason = failed(&probe, ProbeFailure::Spawn);
    assert!(
        reason.starts_with("could not start `/nonexistent/aibox-no-such-server`"),
        "{reason}"
    );
}
