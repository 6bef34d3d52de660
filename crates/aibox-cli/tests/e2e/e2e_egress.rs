//! End-to-end: `[network] egress = "allowlist"` on real engines (rootless Podman with
//! podman-compose, and the tests' own `dockerd` with docker-compose 1.29).
//!
//! `apply` → `up` starts the agent alone on an internal network and the egress proxy on
//! an outside one, reached through its socket; two test hosts of the test's own
//! (`allowed.test`, `denied.test`: a few lines of Perl answering HTTP on 80 and 443 and
//! counting UDP datagrams on 53) join the proxy's outside network. From inside the agent
//! container: the allowed host answers through the proxy (plain HTTP and a `CONNECT`
//! tunnel), the denied one is refused by name (403, both ways), its literal address is
//! refused, a direct connection without the proxy fails, UDP to a test host never
//! arrives, the agent's resolver knows neither the test hosts nor an outside name the
//! proxy's network resolves, and no DNS server answers a query sent straight to it (a
//! DNS tunnel). The proxy logs each refusal, and `aibox doctor` shows it as
//! `blocked: <host>`. No traffic leaves the machine but the probes' DNS queries, which
//! must find no server.
//!
//! On Podman also: a skill's declared hosts (`metadata.processkit.hosts`) are allowed
//! with the skill as their origin, and its MCP server, run in the agent container as the
//! harness runs it, reaches its declared host and not an undeclared one (which the review
//! flags); and `egress = "none"`: nothing leaves (by name, literal address, TCP, UDP)
//! while the harness CLI still starts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

use aibox_test_support::docker::Docker;
use aibox_test_support::http::release::SyntheticRelease;
use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Engine, Podman, TEST_HOST};
use aibox_test_support::show_output as show;
use camino::Utf8PathBuf;

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?} failed: {}", show(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Looks names up as the agent's programs do, the resolver waiting 2 s for an answer,
/// once (`RES_OPTIONS`), not glibc's 5 s twice per query: on Docker's internal network no
/// server answers, and the default waits took 60 s of one test; a resolver that works
/// answers in milliseconds.
const RESOLVE: &str = "RES_OPTIONS='timeout:2 attempts:1' getent hosts";

/// One engine under test: how to run its CLI and aibox against it.
pub(crate) struct Bench<'a> {
    pub(crate) engine: &'a dyn Fn(&[&str]) -> Output,
    pub(crate) aibox: &'a dyn Fn() -> Command,
}

impl Bench<'_> {
    pub(crate) fn engine_ok(&self, args: &[&str]) -> String {
        let out = (self.engine)(args);
        assert!(out.status.success(), "{args:?}: {}", show(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Removes a test host's container at once: `rm -f` alone waits Podman's 10 s stop
    /// timeout first (the host ignores SIGTERM), 51 s of the suite's time for five hosts;
    /// `stop -t 0` kills it on both engines (Docker's `rm` has no `-t`).
    pub(crate) fn remove_host(&self, name: &str) {
        self.engine_ok(&["stop", "-t", "0", name]);
        self.engine_ok(&["rm", "-f", name]);
    }

    /// [`RESOLVE`] `NAMES` in the agent container: the exit code and output.
    pub(crate) fn resolve_in_agent(&self, container: &str, names: &str) -> (i32, String) {
        self.in_agent(container, &format!("{RESOLVE} {names}"))
    }

    /// `sh -c SCRIPT` in the agent container as its user; the output and exit code.
    pub(crate) fn in_agent(&self, container: &str, script: &str) -> (i32, String) {
        let out = (self.engine)(&["exec", container, "bash", "-c", script]);
        (out.status.code().unwrap_or(-1), show(&out))
    }
}

fn project(stem: &str, engine: &str) -> (tempfile::TempDir, Utf8PathBuf) {
    project_with(
        stem,
        engine,
        "[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = []\n\n\
         [network]\negress = \"allowlist\"\nallow = [\"allowed.test\"]\n",
    )
}

/// A project whose `aibox.toml` is its `[container]` table followed by `rest`.
fn project_with(stem: &str, engine: &str, rest: &str) -> (tempfile::TempDir, Utf8PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("aibox-egress-{stem}-{}", std::process::id());
    let root = Utf8PathBuf::from_path_buf(tmp.path().join(&name)).unwrap();
    fs_err::create_dir_all(&root).unwrap();
    fs_err::write(
        root.join("aibox.toml"),
        format!(
            "[container]\nname = \"{name}\"\nbase_image = \"{BASE_IMAGE}\"\nengine = \"{engine}\"\n\n{rest}"
        ),
    )
    .unwrap();
    fs_err::write(
        root.join(".aibox-local.toml"),
        aibox_test_support::podman::local_toml_with_host_ca(),
    )
    .unwrap();
    (tmp, root)
}

/// The journey on one engine; `cleanup` already names the project's container, image and
/// networks.
fn journey(bench: &Bench<'_>, cleanup: &mut Cleanup, project: &str, container: &str) {
    let listed = ok((bench.aibox)().args(["network", "list", "--output", "json"]));
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["egress"], "allowlist", "{listed}");
    assert_eq!(listed["hosts"][0]["host"], "allowed.test", "{listed}");
    assert_eq!(
        listed["hosts"][0]["origins"][0], "aibox.toml [network] allow",
        "{listed}"
    );
    // The build's registries are listed apart and are not on the runtime list; the build
    // below (agent and proxy images, apt packages from the Debian mirror) still reaches
    // them.
    assert_eq!(listed["build"][0]["host"], "deb.debian.org", "{listed}");
    assert_eq!(listed["hosts"].as_array().unwrap().len(), 1, "{listed}");

    let up = (bench.aibox)().arg("up").output().unwrap();
    assert!(up.status.success(), "{}", show(&up));

    // The test hosts join the proxy's outside network under their names.
    let outside = format!("{project}_{}", aibox_config::container::EGRESS_NETWORKS[1]);
    for host in ["allowed", "denied"] {
        test_host(
            bench,
            cleanup,
            &format!("{project}-{host}"),
            &outside,
            &format!("{host}.test"),
        );
    }
    let address = address_on(bench, &format!("{project}-allowed"), &outside);

    // The proxy variables are set; the allowed host answers through the proxy.
    let (code, out) = bench.in_agent(container, "curl -sS -m 10 http://allowed.test/");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("hello from allowed"), "{out}");
    let (code, out) = bench.in_agent(container, "curl -sS -m 10 -p http://allowed.test:443/");
    assert_eq!(code, 0, "CONNECT to an allowed host: {out}");
    assert!(out.contains("hello from allowed"), "{out}");

    // A host not on the list is refused by name, plain and tunnelled.
    let (_, out) = bench.in_agent(
        container,
        "curl -s -m 10 -o /dev/null -w '%{http_code}' http://denied.test/",
    );
    assert!(out.contains("403"), "plain HTTP to a denied host: {out}");
    let (code, out) = bench.in_agent(container, "curl -sS -m 10 -p http://denied.test:443/");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("403"), "CONNECT to a denied host: {out}");
    // A literal address, even of the allowed host, is not a name on the list.
    let (_, out) = bench.in_agent(
        container,
        &format!("curl -s -m 10 -o /dev/null -w '%{{http_code}}' http://{address}/"),
    );
    assert!(out.contains("403"), "literal address: {out}");
    // Without the proxy there is no route: TCP fails, UDP never arrives.
    let (code, out) = bench.in_agent(
        container,
        &format!("curl -sS -m 5 --noproxy '*' http://{address}/"),
    );
    assert_ne!(code, 0, "direct TCP must fail: {out}");
    // Podman refuses the send (no route); Docker's internal network drops the datagram on
    // the bridge. Either way none may arrive (checked in the host's log below).
    let _ = bench.in_agent(
        container,
        &format!("echo probe > /dev/udp/{address}/53; echo probe > /dev/udp/{address}/53"),
    );
    // The agent's resolver does not know the outside network's hosts, nor a name the
    // proxy's side resolves; no DNS server it could address answers it (no tunnel).
    let (code, out) = bench.resolve_in_agent(container, "allowed.test denied.test");
    assert_ne!(
        code, 0,
        "outside names must not resolve in the agent: {out}"
    );
    let proxy = format!(
        "{project}_{}_1",
        aibox_config::container::EGRESS_PROXY_SERVICE
    );
    let control = bench.engine_ok(&["exec", &proxy, "getent", "hosts", OUTSIDE_NAME]);
    assert!(control.contains(OUTSIDE_NAME), "{control}");
    let (code, out) = bench.resolve_in_agent(container, OUTSIDE_NAME);
    assert_ne!(code, 0, "an outside name resolved in the agent: {out}");
    let gateway = gateway_on(bench, &format!("{project}-allowed"), &outside);
    no_dns_answers(bench, container, &[&gateway]);

    std::thread::sleep(std::time::Duration::from_millis(500));
    let denied_log = bench.engine_ok(&["logs", &format!("{project}-denied")]);
    assert!(
        !denied_log.contains("tcp:"),
        "the denied host was reached: {denied_log}"
    );
    let allowed_log = bench.engine_ok(&["logs", &format!("{project}-allowed")]);
    assert!(!allowed_log.contains("udp"), "UDP arrived: {allowed_log}");
    // The two checks through the proxy, nothing else.
    assert_eq!(
        allowed_log.matches("tcp: GET / ").count(),
        2,
        "{allowed_log}"
    );

    doctor_names_the_refusals(bench, &address, container);
    the_agent_cannot_change_its_container(bench, container);
    doctor_compares_what_the_proxy_enforces(bench, &proxy);
    a_stopped_proxy_is_reported_and_started(bench, &proxy, container);

    // The test hosts leave the project's network first, or Compose cannot remove it.
    for host in ["allowed", "denied"] {
        bench.remove_host(&format!("{project}-{host}"));
    }
    down_removes_the_socket_volume(bench, project);
}

/// `aibox down` removes the containers and the socket volume it made (one per checkout
/// was left behind).
fn down_removes_the_socket_volume(bench: &Bench<'_>, project: &str) {
    let volume = format!(
        "{project}_{}",
        aibox_config::container::EGRESS_SOCKET_VOLUME
    );
    assert!(
        bench
            .engine_ok(&["volume", "ls", "-q"])
            .lines()
            .any(|v| v == volume),
        "no socket volume {volume} before `down`"
    );
    let down = (bench.aibox)().arg("down").output().unwrap();
    assert!(down.status.success(), "{}", show(&down));
    // `down` removes the socket volume it made: one per checkout was left behind.
    let volumes = bench.engine_ok(&["volume", "ls", "-q"]);
    assert!(!volumes.lines().any(|v| v == volume), "{volumes}");
}

/// `.devcontainer/` (the Compose files, the proxy's filter and configuration, which any
/// later start of the proxy reads) is read-only inside the agent, even for its root: it
/// cannot widen its own allowlist, nor move the folder aside and put another in its
/// place. The rest of the workspace stays writable (root, so the check does not depend
/// on who owns the test's folder), the configuration too: a host it adds to the
/// allowlist is refused by the next `apply` on the host until the owner approves it.
fn the_agent_cannot_change_its_container(bench: &Bench<'_>, container: &str) {
    let as_root = |script: &str| {
        let out = (bench.engine)(&["exec", "-u", "0", container, "bash", "-c", script]);
        (out.status.code().unwrap_or(-1), show(&out))
    };
    for (script, error) in [
        (
            "echo '.*' >> /workspace/.devcontainer/aibox-egress/egress.local.filter",
            "Read-only file system",
        ),
        (
            "echo 'FilterDefaultDeny No' >> /workspace/.devcontainer/aibox-egress/egress.local.conf",
            "Read-only file system",
        ),
        (
            "rm /workspace/.devcontainer/aibox-egress/egress.filter",
            "Read-only file system",
        ),
        (
            "echo '# x' >> /workspace/.devcontainer/docker-compose.yml",
            "Read-only file system",
        ),
        (
            "mv /workspace/.devcontainer/aibox-egress /workspace/.devcontainer/moved",
            "Read-only file system",
        ),
        // A mount point cannot be renamed.
        (
            "mv /workspace/.devcontainer /workspace/.devcontainer-moved",
            "busy",
        ),
    ] {
        let (code, out) = as_root(script);
        assert_ne!(code, 0, "the agent changed its container: {script}: {out}");
        assert!(out.contains(error), "{script}: {out}");
    }
    let (code, out) =
        as_root("touch /workspace/written-by-agent && rm /workspace/written-by-agent");
    assert_eq!(code, 0, "{out}");
    // The configuration is the agent's to write, but what it adds to its reach is not
    // applied on the host without the owner's approval.
    let (code, out) = as_root(
        "cp /workspace/.aibox-local.toml /tmp/local.toml && \
         printf '\\n[network]\\nallow = [\"exfil.test\"]\\n' >> /workspace/.aibox-local.toml",
    );
    assert_eq!(code, 0, "{out}");
    let refused = (bench.aibox)().arg("apply").output().unwrap();
    let text = show(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(
        text.contains("+ host `exfil.test`, from .aibox-local.toml [network] allow"),
        "{text}"
    );
    let (code, out) = as_root("cp /tmp/local.toml /workspace/.aibox-local.toml");
    assert_eq!(code, 0, "{out}");
    ok((bench.aibox)().arg("apply"));
}

/// `doctor` reads the filter the running proxy joined at its start: one that differs
/// from the files (here changed in the proxy's own `/tmp`) is an error, though the files
/// are clean. The next test restarts the proxy, which joins the files again.
fn doctor_compares_what_the_proxy_enforces(bench: &Bench<'_>, proxy: &str) {
    let doctor = (bench.aibox)().arg("doctor").output().unwrap();
    let text = show(&doctor);
    assert!(!text.contains("egress_enforced"), "{text}");
    bench.engine_ok(&[
        "exec",
        proxy,
        "sh",
        "-c",
        "echo '.*' >> /tmp/aibox-egress/filter",
    ]);
    let doctor = (bench.aibox)().arg("doctor").output().unwrap();
    let text = show(&doctor);
    assert!(!doctor.status.success(), "{text}");
    assert!(text.contains("aibox::doctor::egress_enforced"), "{text}");
}

/// A stopped proxy leaves the agent without a way out: `status` and `doctor` say so, and
/// `up` (with the agent still running) starts it again.
fn a_stopped_proxy_is_reported_and_started(bench: &Bench<'_>, proxy: &str, container: &str) {
    bench.engine_ok(&["stop", "-t", "0", proxy]);
    let status = || -> serde_json::Value {
        serde_json::from_str(&ok((bench.aibox)().args(["status", "--output", "json"]))).unwrap()
    };
    let stopped = status();
    assert_eq!(stopped["state"], "running", "{stopped}");
    assert_eq!(stopped["proxy"]["state"], "stopped", "{stopped}");
    assert_eq!(stopped["proxy"]["container"], proxy, "{stopped}");
    let doctor = (bench.aibox)().arg("doctor").output().unwrap();
    let text = show(&doctor);
    assert!(!doctor.status.success(), "{text}");
    assert!(text.contains("aibox::doctor::egress_proxy"), "{text}");
    ok((bench.aibox)().arg("up"));
    let started = status();
    assert_eq!(started["proxy"]["state"], "running", "{started}");
    let (code, out) = bench.in_agent(container, "curl -sS -m 10 http://allowed.test/");
    assert_eq!(code, 0, "{out}");
}

/// Starts the test host container `name` on `network` under the name `alias` (removed
/// by `cleanup`) and waits until it listens.
fn test_host(bench: &Bench<'_>, cleanup: &mut Cleanup, name: &str, network: &str, alias: &str) {
    cleanup.container(name);
    let label = alias.strip_suffix(".test").unwrap_or(alias);
    bench.engine_ok(&[
        "run",
        "-d",
        "--name",
        name,
        "--network",
        network,
        "--network-alias",
        alias,
        BASE_IMAGE,
        "perl",
        "-e",
        TEST_HOST,
        label,
    ]);
    for _ in 0..50 {
        if bench.engine_ok(&["logs", name]).contains("ready") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!(
        "test host {name} did not start: {}",
        bench.engine_ok(&["logs", name])
    );
}

/// The address of container `name` on `network`.
fn address_on(bench: &Bench<'_>, name: &str, network: &str) -> String {
    network_field(bench, name, network, "IPAddress")
}

/// The gateway of `network` as container `name` sees it (where the engine's DNS server
/// for that network listens on Podman).
fn gateway_on(bench: &Bench<'_>, name: &str, network: &str) -> String {
    network_field(bench, name, network, "Gateway")
}

fn network_field(bench: &Bench<'_>, name: &str, network: &str, field: &str) -> String {
    let inspect = bench.engine_ok(&["container", "inspect", name]);
    let inspect: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    let value = inspect[0]["NetworkSettings"]["Networks"][network][field]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!value.is_empty(), "no {field}: {inspect}");
    value
}

/// A name every machine that runs these tests resolves (the image builds reach it), for
/// the DNS probes: the proxy's side resolves it, the agent must not.
pub(crate) const OUTSIDE_NAME: &str = "deb.debian.org";

/// A DNS query (`A` record of [`OUTSIDE_NAME`]) sent straight over UDP, as a tunnelling
/// agent would without `resolv.conf`, to every server it could address: those its
/// `resolv.conf` names, the first address of its own network (where Podman puts a
/// network's gateway and DNS server), and `extra`. Each line: the server and the reply's
/// bytes (none when nothing answers).
const DNS_PROBE: &str = r#"q='\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03deb\x06debian\x03org\x00\x00\x01\x00\x01'
sub=$(awk 'NR>1 && $1!="lo" && $2!="00000000" {print $2; exit}' /proc/net/route)
first=""
[ -n "$sub" ] && first=$(printf '%d.%d.%d.%d' 0x${sub:6:2} 0x${sub:4:2} 0x${sub:2:2} $((0x${sub:0:2}+1)))
for ns in $(awk '/^nameserver/{print $2}' /etc/resolv.conf) $first "$@"; do
  reply=$( (exec 3<>/dev/udp/$ns/53 && printf "$q" >&3 && timeout 3 dd bs=512 count=1 status=none <&3 | od -An -tu1 -v) 2>/dev/null | tr -s ' \n' ' ')
  echo "$ns:$reply"
done"#;

/// Runs [`DNS_PROBE`] in the agent and asserts that no server answered: no reply at all,
/// except from Docker's resolver inside the container (`127.0.0.11`), which may refuse
/// but must give no address (it forwards nothing from an internal network).
pub(crate) fn no_dns_answers(bench: &Bench<'_>, container: &str, extra: &[&str]) {
    let mut args = vec!["exec", container, "bash", "-c", DNS_PROBE, "probe"];
    args.extend_from_slice(extra);
    let out = bench.engine_ok(&args);
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(':')).collect();
    assert!(lines.len() > extra.len(), "no server probed: {out}");
    for line in lines {
        let (server, reply) = line.split_once(':').unwrap();
        let bytes: Vec<u32> = reply
            .split_whitespace()
            .map(|b| b.parse().unwrap())
            .collect();
        if server == "127.0.0.11" && bytes.len() >= 8 {
            assert_eq!(
                bytes[6..8],
                [0, 0],
                "Docker's resolver gave an address: {out}"
            );
        } else {
            assert!(bytes.is_empty(), "{server} answered a DNS query: {out}");
        }
    }
}

/// The refusals are in the proxy's log, and doctor names them (and not the allowed host).
/// Then the command doctor offers for the team allows the host: after `apply` and `up`
/// the same request answers.
fn doctor_names_the_refusals(bench: &Bench<'_>, address: &str, container: &str) {
    let doctor = (bench.aibox)().arg("doctor").output().unwrap();
    let text = show(&doctor);
    assert!(text.contains("blocked: denied.test"), "{text}");
    assert!(text.contains(&format!("blocked: {address}")), "{text}");
    assert!(!text.contains("blocked: allowed.test"), "{text}");
    let start = "`aibox config set network.allow '";
    let list = text
        .split(start)
        .nth(1)
        .and_then(|rest| rest.split("'`").next())
        .unwrap_or_else(|| panic!("no command offered: {text}"));
    assert_eq!(list, r#"["allowed.test", "denied.test"]"#, "{text}");
    ok((bench.aibox)().args(["config", "set", "network.allow", list]));
    // More reach than the checkout's first apply recorded: refused without a person at
    // the terminal, until the owner approves it.
    let refused = (bench.aibox)().arg("apply").output().unwrap();
    let text = show(&refused);
    assert_eq!(refused.status.code(), Some(2), "{text}");
    assert!(text.contains("aibox::apply::reach_not_approved"), "{text}");
    assert!(
        text.contains("+ host `denied.test`, from aibox.toml [network] allow"),
        "{text}"
    );
    ok((bench.aibox)().args(["apply", "--approve-reach"]));
    ok((bench.aibox)().arg("up"));
    let (code, out) = bench.in_agent(container, "curl -sS -m 10 http://denied.test/");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("hello from denied"), "{out}");
}

fn names(aibox: &dyn Fn() -> Command) -> (String, String, String) {
    let status: serde_json::Value =
        serde_json::from_str(&ok(aibox().args(["status", "--output", "json"]))).unwrap();
    let text = |k: &str| status[k].as_str().unwrap().to_owned();
    (text("project"), text("container"), text("image"))
}

fn cleanup_for(engine: Cleanup, project: &str, container: &str, image: &str) -> Cleanup {
    let mut cleanup = engine;
    cleanup
        .container(container)
        .image(image)
        .egress(project, image)
        .network(&format!("{project}_default"));
    cleanup
}

/// `apply`, then the journey, on one engine: `engine` runs its CLI, `aibox_at` makes an
/// `aibox --project ROOT` command against it.
fn on_engine<E: Engine + Clone + 'static>(
    handle: &E,
    kind: &str,
    engine: &dyn Fn(&[&str]) -> Output,
    aibox_at: &dyn Fn(&Utf8PathBuf) -> Command,
) {
    let (_tmp, root) = project(kind, kind);
    let aibox = || aibox_at(&root);
    ok(aibox().arg("apply"));
    let (project, container, image) = names(&aibox);
    let mut cleanup = cleanup_for(Cleanup::new(handle), &project, &container, &image);
    journey(
        &Bench {
            engine,
            aibox: &aibox,
        },
        &mut cleanup,
        &project,
        &container,
    );
}

#[test]
fn allowlist_on_podman() {
    let podman = Podman::ready();
    on_engine(&podman, "podman", &|args| podman.run(args), &|root| {
        podman.aibox(env!("CARGO_BIN_EXE_aibox"), root)
    });
}

#[test]
fn allowlist_on_docker() {
    let docker = Docker::ready();
    on_engine(&docker, "docker", &|args| docker.run(args), &|root| {
        docker.aibox(env!("CARGO_BIN_EXE_aibox"), root)
    });
}

/// `up` of an applied project on Podman: its project, container and image names, and the
/// cleanup that removes them and its networks.
fn up_on_podman(podman: &Podman, aibox: &dyn Fn() -> Command) -> (String, String, String, Cleanup) {
    let (project, container, image) = names(aibox);
    let cleanup = cleanup_for(Cleanup::new(podman), &project, &container, &image);
    ok(aibox().arg("up"));
    (project, container, image, cleanup)
}

/// The consent `aibox skill review NAME` prints for a failing skill, filled in as a
/// reviewer would.
fn consent_from_review(text: &str) -> String {
    let start = text
        .find("\n[[skills.review_exceptions]]\nskill = ")
        .unwrap_or_else(|| panic!("no consent offered: {text}"));
    let entry = &text[start..];
    let end = entry.find("reason = ").unwrap();
    format!(
        "\n{}reason = \"reviewed: the undeclared host is the test's refusal probe\"\n",
        entry[..end].replace("<your name>", "Test Reviewer")
    )
}

/// Runs the MCP server `name` of `.mcp.json` in `container` as a harness does (its
/// command and arguments, the workspace as working directory, the container's
/// environment), calls `tools` in turn and returns each call's result.
fn call_tools(
    podman: &Podman,
    root: &Utf8PathBuf,
    container: &str,
    name: &str,
    tools: &[&str],
) -> Vec<serde_json::Value> {
    use std::io::Write as _;
    use std::process::Stdio;
    let mcp: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(root.join(".mcp.json")).unwrap()).unwrap();
    let server = &mcp["mcpServers"][name];
    let mut cmd = podman.command();
    cmd.args(["exec", "-i", "-w", "/workspace", container]);
    cmd.arg(
        server["command"]
            .as_str()
            .unwrap_or_else(|| panic!("{mcp}")),
    );
    for arg in server["args"].as_array().unwrap() {
        cmd.arg(arg.as_str().unwrap());
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut requests = vec![
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "aibox-test", "version": "0"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    for (i, tool) in tools.iter().enumerate() {
        requests.push(
            serde_json::json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}}),
        );
    }
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
    }
    drop(stdin);
    let out = aibox_test_support::within("the skill's MCP server", move || {
        child.wait_with_output().unwrap()
    });
    let replies: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (1..=tools.len())
        .map(|id| {
            replies
                .iter()
                .find(|r| r["id"] == id)
                .unwrap_or_else(|| panic!("no answer to call {id}: {}", show(&out)))["result"]
                .clone()
        })
        .collect()
}

/// The review judges the probe skill's URLs against its declared list; the team records
/// the consent it offers (the undeclared host is the test's refusal probe).
fn review_and_consent(aibox: &dyn Fn() -> Command, root: &Utf8PathBuf) {
    let review = aibox()
        .args(["skill", "review", "egress-probe"])
        .output()
        .unwrap();
    let text = show(&review);
    assert!(!review.status.success(), "{text}");
    assert!(
        text.contains("host `api.undeclared.example` is not on the skill's declared host list"),
        "{text}"
    );
    assert!(
        text.contains("host `api.declared.example` is declared"),
        "{text}"
    );
    let mut toml = fs_err::read_to_string(root.join("aibox.toml")).unwrap();
    toml.push_str(&consent_from_review(&text));
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
}

/// A skill's declared host is allowed with the skill as its origin (network list, lock);
/// the skill's MCP server, run in the agent container with the command `apply`
/// registered, reaches that host and is refused one it does not declare, which the
/// review flagged before the team consented to it.
#[test]
fn skill_declared_hosts_on_podman() {
    let podman = Podman::ready();
    let store = tempfile::tempdir().unwrap();
    let store = Utf8PathBuf::from_path_buf(store.path().to_owned()).unwrap();
    let release = SyntheticRelease::minimal("v1.0.0");
    let config = release.local_project_config(&store).unwrap();
    let pk = config[config.find("[context]").unwrap()..]
        .replace("packages = [\"product\"]", "packages = [\"minimal\"]");
    let (_tmp, root) = project_with(
        "skill",
        "podman",
        &format!("{pk}\n[ai]\nharnesses = [\"claude\"]\n\n[network]\negress = \"allowlist\"\n"),
    );
    fs_err::write(
        root.join(".aibox-local.toml"),
        aibox_test_support::podman::local_toml_with_host_ca(),
    )
    .unwrap();
    let fixture = Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/egress-probe");
    aibox_test_support::copy_tree(&fixture, &root.join("context/skills/research/egress-probe"))
        .unwrap();
    let aibox = || podman.aibox(env!("CARGO_BIN_EXE_aibox"), &root);

    review_and_consent(&aibox, &root);
    ok(aibox().arg("apply"));
    let listed: serde_json::Value =
        serde_json::from_str(&ok(aibox().args(["network", "list", "-o", "json"]))).unwrap();
    let declared = listed["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == "api.declared.example")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        declared["origins"],
        serde_json::json!(["skill egress-probe"])
    );
    assert!(
        !listed.to_string().contains("api.undeclared.example"),
        "{listed}"
    );
    let lock = fs_err::read_to_string(root.join("aibox.lock")).unwrap();
    assert!(
        lock.contains("\"api.declared.example\" = [\"skill egress-probe\"]"),
        "{lock}"
    );

    let (project, container, _image, mut cleanup) = up_on_podman(&podman, &aibox);
    let engine = |args: &[&str]| podman.run(args);
    let bench = Bench {
        engine: &engine,
        aibox: &aibox,
    };
    let outside = format!("{project}_{}", aibox_config::container::EGRESS_NETWORKS[1]);
    for host in ["declared", "undeclared"] {
        let name = format!("{project}-{host}");
        test_host(
            &bench,
            &mut cleanup,
            &name,
            &outside,
            &format!("api.{host}.example"),
        );
    }

    let results = call_tools(
        &podman,
        &root,
        &container,
        "processkit-egress-probe",
        &["fetch_declared", "fetch_undeclared"],
    );
    assert_eq!(results[0]["isError"], false, "{results:?}");
    assert!(
        results[0]
            .to_string()
            .contains("hello from api.declared.example"),
        "{results:?}"
    );
    assert_eq!(results[1]["isError"], true, "{results:?}");
    assert!(results[1].to_string().contains("403"), "{results:?}");
    let log = bench.engine_ok(&["logs", &format!("{project}-undeclared")]);
    assert!(
        !log.contains("tcp:"),
        "the undeclared host was reached: {log}"
    );

    for host in ["declared", "undeclared"] {
        bench.remove_host(&format!("{project}-{host}"));
    }
    ok(aibox().arg("down"));
}

/// `egress = "none"`: the agent reaches nothing outside its container (a test host by
/// name, by literal address, over TCP and UDP; the engine's resolver knows no outside
/// name), while the harness CLI still starts. The test host answers on its own network,
/// so the refusals are the agent's.
#[test]
fn none_on_podman() {
    let podman = Podman::ready();
    let (_tmp, root) = project_with(
        "none",
        "podman",
        "[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"claude\"]\n\n\
         [network]\negress = \"none\"\n",
    );
    let aibox = || podman.aibox(env!("CARGO_BIN_EXE_aibox"), &root);
    ok(aibox().arg("apply"));
    let (project, container, image) = names(&aibox);
    let mut cleanup = cleanup_for(Cleanup::new(&podman), &project, &container, &image);
    let engine = |args: &[&str]| podman.run(args);
    let bench = Bench {
        engine: &engine,
        aibox: &aibox,
    };
    // The internal network as podman-compose 1.0 (or an earlier aibox) makes it, with a
    // DNS server that forwards outside names: `up` replaces it with one without.
    let internal = format!("{project}_{}", aibox_config::container::EGRESS_NETWORKS[0]);
    let compose_label = format!("io.podman.compose.project={project}");
    bench.engine_ok(&[
        "network",
        "create",
        "--internal",
        "--label",
        &compose_label,
        &internal,
    ]);
    ok(aibox().arg("up"));
    let inspect = bench.engine_ok(&["network", "inspect", &internal]);
    let inspect: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    assert_eq!(inspect[0]["dns_enabled"], false, "{inspect}");
    assert_eq!(inspect[0]["internal"], true, "{inspect}");
    no_dns_answers(&bench, &container, &[]);
    let (code, out) = bench.resolve_in_agent(&container, OUTSIDE_NAME);
    assert_ne!(code, 0, "an outside name resolved in the agent: {out}");

    let outside = format!("{project}-outside");
    cleanup.network(&outside);
    bench.engine_ok(&["network", "create", &outside]);
    let host = format!("{project}-host");
    test_host(&bench, &mut cleanup, &host, &outside, "host.test");
    let address = address_on(&bench, &host, &outside);
    // Control: from a container on the host's network, it answers.
    let control = bench.engine_ok(&[
        "run",
        "--rm",
        "--network",
        &outside,
        "--entrypoint",
        "bash",
        &image,
        "-c",
        "curl -sS -m 10 http://host.test/",
    ]);
    assert!(control.contains("hello from host"), "{control}");

    let (code, out) = bench.in_agent(&container, "env | grep -i _proxy=");
    assert_ne!(code, 0, "no proxy in none mode: {out}");
    for (what, script) in [
        ("by name", "curl -sS -m 5 http://host.test/".to_owned()),
        ("by address", format!("curl -sS -m 5 http://{address}/")),
        (
            "plain TCP",
            format!("timeout 5 bash -c 'exec 3<>/dev/tcp/{address}/443'"),
        ),
        ("the resolver", format!("{RESOLVE} host.test")),
    ] {
        let (code, out) = bench.in_agent(&container, &script);
        assert_ne!(code, 0, "{what} must fail: {out}");
    }
    let _ = bench.in_agent(
        &container,
        &format!("echo probe > /dev/udp/{address}/53; echo probe > /dev/udp/{address}/53"),
    );
    let (code, out) = bench.in_agent(&container, "claude --version");
    assert_eq!(code, 0, "the harness CLI starts: {out}");

    std::thread::sleep(std::time::Duration::from_millis(500));
    let log = bench.engine_ok(&["logs", &host]);
    assert_eq!(
        log.matches("tcp:").count(),
        1,
        "only the control request: {log}"
    );
    assert!(!log.contains("udp"), "UDP arrived: {log}");
    bench.remove_host(&host);
    ok(aibox().arg("down"));
    bench.engine_ok(&["network", "rm", &outside]);
}
