//! Reading an image build's output: which step runs, which tool it installs, and why
//! the build failed.
//!
//! The engines print a header per Dockerfile instruction: Podman/buildah
//! `STEP 7/15: RUN ...`, Docker's legacy builder (docker-compose 1.29) `Step 7/15 : RUN ...`,
//! `BuildKit` `#9 [stage-0 7/15] RUN ...`. The generated tool steps carry
//! `aibox: <tool> <version> ...` in their script, which names the tool being installed.
//! Nothing here trusts the build command's exit status: podman-compose 1.0 exits 0 after
//! a failed build, so its own `exit code: N` line is read as well.

use std::collections::BTreeMap;
use std::fmt;

/// How many trailing output lines a build error shows.
const ERROR_TAIL_LINES: usize = 15;
/// How many characters of an output line a build error shows.
const LONG_LINE: usize = 200;
/// How many characters of an instruction a progress line shows.
const SHORT_INSTRUCTION: usize = 60;

/// One instruction of the image build, as the engine announced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildStep {
    /// Its 1-based number.
    pub index: u32,
    /// How many steps the build (or its stage) has.
    pub total: u32,
    /// The instruction as the engine printed it (`RUN set -eu; ...`).
    pub instruction: String,
    /// The catalog tool this step installs (`claude-code 2.1.197`), when it is one.
    pub tool: Option<String>,
}

impl BuildStep {
    /// What the step does, short: `installing claude-code 2.1.197` or the start of the
    /// instruction.
    pub fn summary(&self) -> String {
        if let Some(tool) = &self.tool {
            return format!("installing {tool}");
        }
        cut(&normalize(&self.instruction), SHORT_INSTRUCTION)
    }
}

impl fmt::Display for BuildStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}/{}: {}", self.index, self.total, self.summary())
    }
}

/// A step header in one engine's format: the step and, for `BuildKit`, its `#N` id.
fn parse_step(line: &str) -> Option<(Option<u32>, BuildStep)> {
    let line = line.trim();
    // buildah prefixes the stage in multi-stage builds: `[1/2] STEP 3/5: ...`.
    if let Some((stage, rest)) = line.split_once("] STEP ")
        && stage.starts_with('[')
    {
        return parse_step(&format!("STEP {rest}"));
    }
    let (id, counter, instruction) = if let Some(rest) = line.strip_prefix("STEP ") {
        let (counter, instruction) = rest.split_once(": ")?;
        (None, counter, instruction)
    } else if let Some(rest) = line.strip_prefix("Step ") {
        let (counter, instruction) = rest.split_once(" : ")?;
        (None, counter, instruction)
    } else {
        // BuildKit: `#9 [stage-0 7/15] RUN ...` (the stage name is optional).
        let rest = line.strip_prefix('#')?;
        let (id, rest) = rest.split_once(" [")?;
        let (bracket, instruction) = rest.split_once("] ")?;
        let counter = bracket.rsplit(' ').next()?;
        (Some(id.parse().ok()?), counter, instruction)
    };
    let (index, total) = counter.split_once('/')?;
    let step = BuildStep {
        index: index.parse().ok()?,
        total: total.parse().ok()?,
        instruction: instruction.trim().to_owned(),
        tool: tool_of(instruction),
    };
    Some((id, step))
}

/// The tool a generated step installs, from the first of its messages (`aibox: <name>
/// <version> has no download`, `...: download of`, `...: checksum mismatch`) that names
/// one: a tool with one download for every architecture has no "no download" message.
fn tool_of(instruction: &str) -> Option<String> {
    instruction.split("aibox: ").skip(1).find_map(|rest| {
        let end = [" has no download", ": download of", ": checksum mismatch"]
            .iter()
            .filter_map(|m| rest.find(m))
            .min()?;
        let label = rest[..end].trim();
        (!label.is_empty() && label.split(' ').count() == 2).then(|| label.to_owned())
    })
}

/// What a build printed so far, read line by line as it streams.
#[derive(Debug, Default)]
pub(crate) struct BuildLog {
    /// The step announced last (the failing one in a sequential build).
    last: Option<BuildStep>,
    /// `BuildKit` steps by `#N` id: it runs steps in parallel and names the failing id.
    by_id: BTreeMap<u32, BuildStep>,
    /// The `BuildKit` id of the step that reported `ERROR`.
    failed_id: Option<u32>,
    /// podman-compose's `exit code: N` after the build command.
    compose_exit: Option<i32>,
}

impl BuildLog {
    /// Reads one line; returns the step it announces, when it announces a new one.
    pub(crate) fn line(&mut self, line: &str) -> Option<BuildStep> {
        if let Some(code) = line.trim().strip_prefix("exit code: ") {
            self.compose_exit = code.trim().parse().ok();
            return None;
        }
        if let Some((id, rest)) = line.strip_prefix('#').and_then(|l| l.split_once(' '))
            && rest.starts_with("ERROR")
        {
            self.failed_id = id.parse().ok();
            return None;
        }
        let (id, step) = parse_step(line)?;
        if let Some(id) = id {
            // BuildKit repeats a step's header when it resumes printing its output.
            if self.by_id.insert(id, step.clone()).as_ref() == Some(&step) {
                return None;
            }
        }
        self.last = Some(step.clone());
        Some(step)
    }

    /// Whether the output itself says the build failed (podman-compose 1.0 exits 0 after
    /// a failed `podman build`, but prints the real exit code).
    pub(crate) fn says_failed(&self) -> bool {
        self.compose_exit.is_some_and(|c| c != 0) || self.failed_id.is_some()
    }

    /// The step that failed: the one `BuildKit` marked, else the last one announced.
    pub(crate) fn failing_step(&self) -> Option<&BuildStep> {
        self.failed_id
            .and_then(|id| self.by_id.get(&id))
            .or(self.last.as_ref())
    }
}

/// Whether the build stopped in a step without any error line after it: what Podman
/// does on Ctrl-C (it catches `SIGINT` and exits 1 in silence, podman-compose adds only
/// its `exit code: 1`), while a step that fails is always followed by the engine's
/// `Error: building at STEP ...: exit status N` (Docker: `ERROR`).
///
/// The engine's error line counts wherever it is in the tail: stdout (the step headers)
/// and stderr (the error) are read apart, so it may land before the header it follows.
pub(crate) fn stopped_silently(tail: &[String]) -> bool {
    let Some(last_step) = tail.iter().rposition(|l| parse_step(l).is_some()) else {
        return false;
    };
    let engine_error = |l: &str| {
        let l = l.trim_start();
        l.starts_with("Error: building at STEP") || l.starts_with("ERROR")
    };
    !tail.iter().any(|l| engine_error(l))
        && tail[last_step + 1..].iter().all(|l| {
            let l = l.trim();
            l.is_empty() || l.starts_with("exit code: ")
        })
}

/// Whether a failed build's `tail` shows Podman losing an image it was weighing as a
/// cache (`Error: checking if cached image exists from a previous build: getting top
/// layer info: layer not known`): another process removed that image while the build
/// read the store. Nothing is wrong with the build; the same build run again no longer
/// sees the removed image.
pub(crate) fn store_changed_under(tail: &[String]) -> bool {
    tail.iter().any(|l| {
        let l = l.trim_start();
        l.starts_with("Error: checking if cached image exists")
            && (l.ends_with("layer not known") || l.ends_with("image not known"))
    })
}

/// The instructions of a `Dockerfile.local`, continuation lines joined and whitespace
/// collapsed, comments left out (the form engines print them in).
pub(crate) fn instructions(dockerfile: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in dockerfile.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        let (text, continued) = match trimmed.strip_suffix('\\') {
            Some(text) => (text, true),
            None => (trimmed, false),
        };
        current.push(' ');
        current.push_str(text);
        if !continued {
            out.push(normalize(&current));
            current.clear();
        }
    }
    if !current.trim().is_empty() {
        out.push(normalize(&current));
    }
    out
}

/// `line`, at most [`LONG_LINE`] characters: its start and its end, the middle replaced
/// by `...`. Engines quote a whole failing script in one line, which would bury the rest
/// of an error message, and an error chain (`pinging container registry ...: Get
/// "https://...": dial tcp: lookup ...: no such host`) names the cause last.
pub(crate) fn shorten(line: &str) -> String {
    let count = line.chars().count();
    if count <= LONG_LINE {
        return line.to_owned();
    }
    let at = |n: usize| line.char_indices().nth(n).map_or(line.len(), |(i, _)| i);
    let head = LONG_LINE / 2;
    format!(
        "{}...{}",
        &line[..at(head)],
        &line[at(count - (LONG_LINE - head))..]
    )
}

/// `text` cut after `chars` characters, marked with `...`.
fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}

/// Whitespace collapsed to single spaces, for comparing instructions.
pub(crate) fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The lines of `tail` that tell why the build failed: from the failing step's header
/// on, when it is among them, and at most [`ERROR_TAIL_LINES`].
pub(crate) fn failure_output<'t>(tail: &'t [String], step: Option<&BuildStep>) -> &'t [String] {
    let from_step = step
        .and_then(|step| {
            tail.iter()
                .rposition(|l| parse_step(l).is_some_and(|(_, s)| s == *step))
        })
        .unwrap_or(0);
    &tail[from_step.max(tail.len().saturating_sub(ERROR_TAIL_LINES))..]
}

/// Rootless Podman's network helper failed (a build says only `failed to read from
/// slirp4netns sync pipe: EOF`; a start names `open("/dev/net/tun"): Permission
/// denied`): a limit of the machine, seen where `/dev/net/tun` is 0600.
pub(crate) const TUN_HINT: &str = "rootless Podman's network helper (slirp4netns) could not \
    start, so neither a build step nor the container can reach the network: it opens \
    /dev/net/tun, which your user must be able to use (`ls -l /dev/net/tun`; most systems \
    have it mode 0666: `sudo chmod 0666 /dev/net/tun` until the next boot, a udev rule to \
    keep it), then run `aibox up` again";

/// The likely cause of a failed build and how to fix it, from the output lines that
/// follow the failing step and the step itself (`in_local`: it comes from
/// `Dockerfile.local`).
#[allow(clippy::too_many_lines)] // one ordered list of causes: the first that matches wins
pub(crate) fn hint(output: &[String], step: Option<&BuildStep>, in_local: bool) -> String {
    // Step headers and the engines' error lines (`Error: building at STEP "..."`) quote
    // the scripts, whose own messages would match below; a message the script really
    // printed has its `$1`/`$actual` filled in.
    let printed: Vec<&str> = output
        .iter()
        .map(String::as_str)
        .filter(|l| {
            parse_step(l).is_none() && !l.contains("got $actual") && !l.contains("of $2 did not")
        })
        .collect();
    let lower = printed.join("\n").to_ascii_lowercase();
    // Nothing in the build ran yet: the engine could not pull the base image (Podman:
    // `pinging container registry ...`; Docker: `Get "https://.../v2/": ...`). A `FROM`
    // of the user's own `Dockerfile.local` gets the hint about that file below.
    let from = step.is_some_and(|s| {
        s.instruction
            .get(..5)
            .is_some_and(|i| i.eq_ignore_ascii_case("FROM "))
    });
    if (from || lower.contains("pinging container registry")) && !in_local {
        return "the engine could not pull the base image (its registry could not be reached \
                or refused it; the engine's message is below): check the network and the \
                engine's proxy settings, or point the project at a copy you can pull (a \
                registry mirror, or an image already in the engine's store) with `aibox \
                config set container.base_image IMAGE`, then run `aibox up --build`"
            .to_owned();
    }
    if lower.contains("slirp4netns") {
        return TUN_HINT.to_owned();
    }
    if lower.contains("curl: (60)")
        || lower.contains("certificate verify failed")
        || lower.contains("unable to get local issuer certificate")
        || lower.contains("self-signed certificate")
    {
        return "a download did not trust the server's TLS certificate (a TLS-inspecting \
                proxy?): put your proxy's CA bundle in `.aibox-local.toml` as `[container] \
                extra_ca_certificates = \"/path/to/ca.crt\"`, then run `aibox up --build`"
            .to_owned();
    }
    if lower.contains("checksum mismatch") {
        let tool = step
            .and_then(|s| s.tool.as_deref())
            .map_or_else(String::new, |t| format!(" of {t}"));
        return format!(
            "the download{tool} did not match the checksum pinned in the tool catalog (a \
             changed release or a proxy rewriting it); nothing was installed. Check the \
             download URL from another network, or report it if the release changed"
        );
    }
    if lower.contains("hash mismatch") {
        return "a locked MCP server dependency did not install as `aibox.lock` pins it (its \
                hash did not match: a changed file on the index, a proxy rewriting it, or an \
                edited lock); nothing was installed. Restore `aibox.lock` from git and run \
                `aibox apply`, then `aibox up --build`"
            .to_owned();
    }
    if lower.contains("eintegrity") {
        return "a locked MCP server npm package did not install as `aibox.lock` pins it (its \
                integrity did not match: a changed tarball on the registry, a proxy rewriting \
                it, or an edited lock); nothing was installed. Restore `aibox.lock` from git \
                and run `aibox apply`, then `aibox up --build`"
            .to_owned();
    }
    if in_local {
        return "the failing step is yours, from `.devcontainer/Dockerfile.local`: fix it \
                there, then run `aibox up --build`"
            .to_owned();
    }
    let unreachable = [
        "could not resolve host",
        "curl: (6)",
        "curl: (7)",
        "curl: (28)",
        "temporary failure resolving",
        "network is unreachable",
        "connection refused",
        "connection timed out",
        "enotfound",
        "econnrefused",
        "eai_again",
        "etimedout",
        "no such host",
        "i/o timeout",
        "tls handshake timeout",
        // uv (reqwest): `client error (Connect)`, `operation timed out`, `dns error`.
        "client error (connect)",
        "operation timed out",
        "dns error",
    ];
    if unreachable.iter().any(|m| lower.contains(m)) {
        return "a server could not be reached from the build: check the network and proxy \
                settings (`HTTP_PROXY`/`HTTPS_PROXY`), then run `aibox up --build`"
            .to_owned();
    }
    // After the network causes: uv's `Failed to fetch` of an unreachable index is no
    // fault of the lock.
    if lower.contains("locked dependencies of") {
        return "a locked MCP server dependency did not install (uv's message is below); \
                `aibox.lock` [mcp.environments] names its servers. Fix the cause, or restore \
                `aibox.lock` from git and run `aibox apply`, then `aibox up --build`"
            .to_owned();
    }
    if lower.contains("locked npm package of") {
        return "a locked MCP server npm package did not install (npm's message is below); \
                `aibox.lock` [mcp.npm] names its servers. Fix the cause, or restore \
                `aibox.lock` from git and run `aibox apply`, then `aibox up --build`"
            .to_owned();
    }
    "fix the cause shown in the output below, then run `aibox up --build`; `-v` shows \
     every line of the build"
        .to_owned()
}

#[cfg(test)]
mod tests {
    /// The line Podman 4.3 printed when a concurrent removal took an image its cache
    /// check was reading (seen in CI); an ordinary failed step is not that.
    #[test]
    fn a_store_changed_under_the_build_is_told_apart() {
        let tail = |lines: &[&str]| lines.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>();
        assert!(store_changed_under(&tail(&[
            "STEP 9/17: LABEL org.opencontainers.image.source=\"x\"",
            "Error: checking if cached image exists from a previous build: getting top layer \
             info: layer not known",
            "exit code: 125",
        ])));
        assert!(!store_changed_under(&tail(&[
            "STEP 3/17: RUN false",
            "Error: building at STEP \"RUN false\": while running runtime: exit status 1",
        ])));
    }

    use super::*;

    const CLAUDE: &str = "RUN set -eu;     arch=\"$(dpkg --print-architecture)\";     case \
        \"$arch\" in amd64|arm64) ;;         *) echo \"aibox: claude-code 2.1.197 has no \
        download for $arch\" >&2; exit 1 ;;     esac;     mkdir -p /tmp/aibox-download;";
    // As generated: one download for every architecture, so the first message is the
    // failed download's (the fixture once skipped it, and so did the label).
    const GEMINI: &str = "RUN set -eu;     arch=\"$(dpkg --print-architecture)\";     mkdir -p \
        /tmp/aibox-download;     fetch() {         n=0; until curl -fsSL --retry 3 -o \
        /tmp/aibox-download/file \"$1\"; do             n=$((n + 1)); if [ \"$n\" -ge 3 ]; \
        then echo \"aibox: gemini-cli 0.61.0: download of $1 failed 3 times\" >&2; exit 1; fi; \
        sleep \"$n\";         done;         if [ \"$actual\" != \"$3\" ]; then             echo \
        \"aibox: gemini-cli 0.61.0: checksum mismatch for $1: expected $2 $3, got $actual\" >&2;";

    fn step(line: &str) -> BuildStep {
        parse_step(line)
            .unwrap_or_else(|| panic!("no step in {line:?}"))
            .1
    }

    #[test]
    fn podman_docker_and_buildkit_headers() {
        let podman = step("STEP 12/14: RUN echo boom >&2; exit 7");
        assert_eq!((podman.index, podman.total), (12, 14));
        assert_eq!(podman.instruction, "RUN echo boom >&2; exit 7");
        assert_eq!(podman.tool, None);
        assert_eq!(podman.to_string(), "step 12/14: RUN echo boom >&2; exit 7");

        let docker = step("Step 3/14 : COPY aibox-ca/ /usr/local/share/aibox-ca/");
        assert_eq!((docker.index, docker.total), (3, 14));
        assert_eq!(
            docker.instruction,
            "COPY aibox-ca/ /usr/local/share/aibox-ca/"
        );

        let (id, kit) = parse_step("#9 [stage-0 7/15] RUN echo hi").unwrap();
        assert_eq!(id, Some(9));
        assert_eq!(
            (kit.index, kit.total, kit.instruction.as_str()),
            (7, 15, "RUN echo hi")
        );
        let (_, plain) = parse_step("#4 [2/5] FROM docker.io/library/debian").unwrap();
        assert_eq!(
            step("[2/2] STEP 3/5: RUN make").index,
            3,
            "a buildah stage prefix"
        );
        assert_eq!((plain.index, plain.total), (2, 5));

        for not_a_step in [
            "#1 [internal] load build definition from Dockerfile",
            "#5 0.234 boom",
            "--> Using cache 1d2b0d4c1d64",
            "STEP x/y: RUN",
            "Step 1/2: missing the spaced colon",
            "exit code: 7",
            "",
        ] {
            assert!(parse_step(not_a_step).is_none(), "{not_a_step:?}");
        }
    }

    #[test]
    fn tool_steps_name_the_tool() {
        let claude = step(&format!("STEP 7/15: {CLAUDE}"));
        assert_eq!(claude.tool.as_deref(), Some("claude-code 2.1.197"));
        assert_eq!(
            claude.to_string(),
            "step 7/15: installing claude-code 2.1.197"
        );
        let gemini = step(&format!("Step 9/15 : {GEMINI}"));
        assert_eq!(gemini.tool.as_deref(), Some("gemini-cli 0.61.0"));
        assert_eq!(tool_of("RUN echo 'aibox: hello'"), None);
        let long = step(&format!("STEP 1/2: RUN {}", "x ".repeat(50)));
        assert!(long.summary().ends_with("..."), "{}", long.summary());
        assert_eq!(long.summary().chars().count(), SHORT_INSTRUCTION + 3);
    }

    #[test]
    fn the_log_finds_the_failing_step_and_the_real_exit_code() {
        let mut log = BuildLog::default();
        let shown: Vec<_> = [
            "podman build -t localhost/x-aibox:local -f ./Dockerfile .",
            "STEP 11/14: RUN echo hello-before",
            "hello-before",
            "STEP 12/14: RUN echo boom >&2; exit 7",
            "boom",
            "Error: building at STEP \"RUN echo boom >&2; exit 7\": exit status 7",
            "exit code: 7",
        ]
        .iter()
        .filter_map(|l| log.line(l))
        .map(|s| s.index)
        .collect();
        assert_eq!(shown, [11, 12]);
        assert!(log.says_failed(), "podman-compose's exit code is read");
        assert_eq!(log.failing_step().map(|s| s.index), Some(12));

        let mut ok = BuildLog::default();
        ok.line("STEP 1/1: FROM x");
        ok.line("exit code: 0");
        assert!(!ok.says_failed());
    }

    #[test]
    fn buildkit_names_the_failing_step_among_parallel_ones() {
        let mut log = BuildLog::default();
        let mut shown = 0;
        for line in [
            "#5 [stage-0 2/4] RUN sleep 1; exit 3",
            "#6 [stage-0 3/4] RUN echo later",
            "#5 [stage-0 2/4] RUN sleep 1; exit 3",
            "#5 0.5 boom",
            "#5 ERROR: process \"/bin/sh -c sleep 1; exit 3\" did not complete successfully",
        ] {
            shown += usize::from(log.line(line).is_some());
        }
        assert_eq!(shown, 2, "a repeated header is not a new step");
        assert!(log.says_failed());
        assert_eq!(log.failing_step().map(|s| s.index), Some(2));
    }

    #[test]
    fn local_instructions_are_joined_like_engines_print_them() {
        let text = "# a comment\nRUN apt-get update \\\n &&  apt-get install -y rg\n\n\
                    RUN echo boom >&2; exit 7\nENV A=1 \\\n";
        assert_eq!(
            instructions(text),
            [
                "RUN apt-get update && apt-get install -y rg",
                "RUN echo boom >&2; exit 7",
                "ENV A=1"
            ]
        );
        assert_eq!(normalize("RUN  a   b"), "RUN a b");
        assert_eq!(
            shorten(&"é".repeat(LONG_LINE + 5)).chars().count(),
            LONG_LINE + 3
        );
        assert_eq!(shorten("short"), "short");
    }

    /// The engines' words when the base image cannot be pulled (here: no DNS answer for
    /// the registry, as Podman 4.3 and Docker 20.10 with docker-compose 1.29 print it): the
    /// cause at the end of a long line survives, and the hint is about the base image.
    #[test]
    fn a_base_image_that_cannot_be_pulled_keeps_its_cause_and_gets_its_hint() {
        let digest = "abd67ffcfa541b485a3dff59865ab629aa048a6c613e639d36e7456b0b229241";
        let from = format!("FROM docker.io/library/debian:bookworm-slim@sha256:{digest}");
        let cause = "Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup \
                     registry-1.docker.io on 10.255.255.53:53: no such host";
        let podman = [
            format!("STEP 1/16: {from}"),
            format!("Trying to pull docker.io/library/debian@sha256:{digest}..."),
            format!(
                "Error: creating build container: initializing source \
                 docker://debian@sha256:{digest}: pinging container registry \
                 registry-1.docker.io: {cause}"
            ),
        ];
        let shown = shorten(&podman[2]);
        assert!(shown.ends_with("no such host"), "{shown}");
        assert!(
            shown.starts_with("Error: creating build container"),
            "{shown}"
        );
        let docker = [
            format!("Step 1/16 : {from}"),
            cause.to_owned(),
            "Service 'j1' failed to build : Build failed".to_owned(),
        ];
        for (output, header) in [(&podman, &podman[0]), (&docker, &docker[0])] {
            let got = hint(output, Some(&step(header)), false);
            assert!(
                got.contains("could not pull the base image")
                    && got.contains("container.base_image"),
                "{got}"
            );
            // The failing step is not always known: Podman's words name the pull.
            if output == &podman {
                assert_eq!(hint(output, None, false), got);
            }
        }
        // A `FROM` of the user's own `Dockerfile.local` is theirs to fix there.
        let got = hint(&podman, Some(&step(&podman[0])), true);
        assert!(got.contains("Dockerfile.local"), "{got}");
        // The same lookup failure inside a later step is a download of the build.
        let got = hint(
            &[cause.to_owned()],
            Some(&step("STEP 5/16: RUN curl x")),
            false,
        );
        assert!(got.contains("could not be reached from the build"), "{got}");
    }

    #[test]
    fn failure_output_starts_at_the_failing_step() {
        let tail: Vec<String> = [
            "STEP 1/3: FROM x",
            "STEP 2/3: RUN false",
            "boom",
            "exit code: 1",
        ]
        .map(str::to_owned)
        .to_vec();
        let failing = step("STEP 2/3: RUN false");
        assert_eq!(failure_output(&tail, Some(&failing)), &tail[1..]);
        assert_eq!(failure_output(&tail, None), &tail[..]);
        let long: Vec<String> = (0..40).map(|n| format!("line {n}")).collect();
        assert_eq!(failure_output(&long, None).len(), ERROR_TAIL_LINES);
    }

    #[test]
    fn hints_name_the_cause() {
        let gemini = step(&format!("STEP 9/15: {GEMINI}"));
        // A step header quotes the script's own error text; it is not the output.
        let header = format!("STEP 9/15: {GEMINI}");
        assert!(!hint(&[header, "boom".into()], None, false).contains("checksum"));
        let quoted = format!("Error: building at STEP \"{GEMINI}\": exit status 6");
        let got = hint(
            &[quoted, "curl: (6) Could not resolve host: x".into()],
            None,
            false,
        );
        assert!(got.contains("could not be reached"), "{got}");
        // The MCP step's script, quoted by the engine, is not its output either.
        let mcp = "Error: building at STEP \"RUN install() { echo \"aibox: the locked dependencies of $2 did not install\"; }\": exit status 1";
        assert!(!hint(&[mcp.to_owned()], None, false).contains("aibox.lock"));
        for (output, step, local, needle) in [
            (
                // Rootless Podman 4.3 where /dev/net/tun is 0600 (seen here).
                "Error: building at STEP \"RUN echo hi\": failed to read from slirp4netns \
                 sync pipe: EOF",
                None,
                false,
                "chmod 0666 /dev/net/tun",
            ),
            (
                "curl: (60) SSL certificate problem",
                None,
                false,
                "extra_ca_certificates",
            ),
            (
                "aibox: gemini-cli 0.61.0: checksum mismatch for https://x",
                Some(&gemini),
                false,
                "of gemini-cli 0.61.0 did not match the checksum pinned in the tool catalog",
            ),
            ("boom", None, true, "Dockerfile.local"),
            (
                "  × Failed to download `pyyaml==6.0.3`\n  ╰─▶ Hash mismatch for `pyyaml==6.0.3`",
                None,
                false,
                "Restore `aibox.lock` from git",
            ),
            (
                "aibox: the locked dependencies of processkit-a did not install (aibox.lock, \
                 [mcp.environments.0a1b2c3d4e5f])",
                None,
                false,
                "[mcp.environments] names its servers",
            ),
            (
                // uv, when the index cannot be reached through the proxy (seen in CI).
                "aibox: installing the locked MCP environment d025cccab371 \
                 (processkit-note-keeper)\nerror: Request failed after 3 retries in 45.0s\n  \
                 cause: Failed to fetch: https://pypi.org/simple/pydantic-settings/\n  \
                 cause: error sending request for url \
                 (https://pypi.org/simple/pydantic-settings/)\n  cause: client error \
                 (Connect)\n  cause: operation timed out\naibox: the locked dependencies of \
                 processkit-note-keeper did not install (aibox.lock, \
                 [mcp.environments.d025cccab371])",
                None,
                false,
                "could not be reached",
            ),
            (
                "curl: (6) Could not resolve host: registry.npmjs.org",
                None,
                false,
                "reached",
            ),
            (
                "npm error code EINTEGRITY\nnpm error sha512-AAAA integrity checksum failed \
                 when using sha512: wanted sha512-AAAA but got sha512-BBBB. (1234 bytes)\n\
                 aibox: the locked npm package of memory did not install (aibox.lock, \
                 [mcp.npm.0a1b2c3d4e5f])",
                None,
                false,
                "integrity did not match",
            ),
            (
                "npm error code ENOTFOUND\naibox: the locked npm package of memory did not \
                 install (aibox.lock, [mcp.npm.0a1b2c3d4e5f])",
                None,
                false,
                "could not be reached",
            ),
            (
                "npm error code E403\naibox: the locked npm package of memory did not install",
                None,
                false,
                "[mcp.npm] names its servers",
            ),
            ("something else", None, false, "`-v`"),
        ] {
            let got = hint(&[output.to_owned()], step, local);
            assert!(got.contains(needle), "{output}: {got}");
        }
    }
}
