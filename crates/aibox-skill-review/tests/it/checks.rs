//! Each static check on a copy of the clean fixture with one thing changed, and every way
//! a review itself can fail.

// Helpers outside `#[test]` functions panic on purpose: a failed helper is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aibox_skill_review::{Outcome, Review, ReviewContext, ReviewError, review_skill};
use camino::{Utf8Path, Utf8PathBuf};
use miette::Diagnostic;

/// A scratch copy of the clean fixture, named `demo`.
struct Scratch {
    _tmp: tempfile::TempDir,
    dir: Utf8PathBuf,
}

impl Scratch {
    fn clean() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Utf8PathBuf::from_path_buf(tmp.path().join("demo")).unwrap();
        let src = Utf8PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clean-skill");
        copy_dir(&src, &dir);
        // Same skill under its new directory name.
        let s = Self { _tmp: tmp, dir };
        s.replace("SKILL.md", "clean-skill", "demo");
        s.replace("mcp/mcp-config.json", "clean-skill", "demo");
        s
    }

    fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> &Self {
        let path = self.dir.join(rel);
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(path, contents).unwrap();
        self
    }

    fn replace(&self, rel: &str, from: &str, to: &str) -> &Self {
        let path = self.dir.join(rel);
        let text = fs_err::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{rel} does not contain {from:?}");
        fs_err::write(path, text.replace(from, to)).unwrap();
        self
    }

    /// Appends Python code to the server, before the `__main__` block.
    fn server_code(&self, code: &str) -> &Self {
        self.replace(
            "mcp/server.py",
            "\nif __name__",
            &format!("\n{code}\n\nif __name__"),
        )
    }

    /// Adds `httpx` to the server's inline dependencies.
    fn depend_on_httpx(&self) -> &Self {
        self.replace(
            "mcp/server.py",
            "\"mcp[cli]==1.9.4\"",
            "\"mcp[cli]==1.9.4\", \"httpx==0.27.0\"",
        )
    }

    fn review(&self) -> Review {
        self.review_with(&pinned())
    }

    fn review_with(&self, ctx: &ReviewContext) -> Review {
        review_skill(&self.dir, ctx).unwrap()
    }
}

fn copy_dir(from: &Utf8Path, to: &Utf8Path) {
    fs_err::create_dir_all(to).unwrap();
    for entry in fs_err::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&from.join(&name), &to.join(&name));
        } else {
            fs_err::copy(from.join(&name), to.join(&name)).unwrap();
        }
    }
}

fn pinned() -> ReviewContext {
    ReviewContext::verified_release(
        "https://releases.example.invalid/x",
        "v1.0.0",
        "cd".repeat(32),
    )
}

/// The pinned context with one declared network host.
fn declaring(host: &str) -> ReviewContext {
    ReviewContext {
        declared_hosts: vec![host.to_owned()],
        ..pinned()
    }
}

/// Asserts that exactly `failed` points fail and that each expected piece of evidence is
/// present. An expectation reads `"<level> <point> <file>[:<line>] <message fragment>"`, e.g.
/// `"fail 2 scripts/sync.sh:3 runs `rsync`"`: point `<point>` has evidence at `<level>` in
/// `<file>` (at `<line>` when given) whose message contains the fragment.
#[track_caller]
fn expect(r: &Review, failed: &[u8], evidence: &[&str]) {
    assert_eq!(r.failed_points(), failed, "{}", r.render_human());
    for spec in evidence {
        let mut parts = spec.splitn(4, ' ');
        let mut next = || {
            parts
                .next()
                .unwrap_or_else(|| panic!("bad expectation {spec:?}"))
        };
        let level = match next() {
            "fail" => Outcome::Fail,
            "warn" => Outcome::Warn,
            "pass" => Outcome::Pass,
            other => panic!("unknown level {other:?} in {spec:?}"),
        };
        let point: u8 = next().parse().unwrap();
        let location = next();
        let (file, line) = match location.rsplit_once(':') {
            Some((file, line)) => (file, Some(line.parse::<u32>().unwrap())),
            None => (location, None),
        };
        let needle = next();
        let p = r.point(point).unwrap();
        assert!(
            p.evidence.iter().any(|e| e.level == level
                && e.file == file
                && (line.is_none() || e.line == line)
                && e.message.contains(needle)),
            "no {level:?} evidence {file}:{line:?} containing {needle:?} in point {point}:\n{}",
            r.render_human()
        );
    }
}

/// Asserts the stable diagnostic code of a review error.
#[track_caller]
fn assert_code(err: &ReviewError, code: &str) {
    assert_eq!(err.code().unwrap().to_string(), code);
}

#[test]
fn the_scratch_copy_is_clean() {
    let r = Scratch::clean().review();
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.render_human());
    assert_eq!(r.skill, "demo");
}

// ---- errors of the review itself ----

#[test]
fn missing_directory_is_an_error() {
    let err = review_skill(Utf8Path::new("/nonexistent/aibox/skill"), &pinned()).unwrap_err();
    assert!(matches!(err, ReviewError::NotFound { .. }));
    assert_code(&err, "aibox::skill_review::not_found");
    assert!(err.help().unwrap().to_string().contains("SKILL.md"));
}

#[test]
fn a_file_is_not_a_skill() {
    let s = Scratch::clean();
    let err = review_skill(&s.dir.join("SKILL.md"), &pinned()).unwrap_err();
    assert!(matches!(err, ReviewError::NotADirectory { .. }));
    assert_code(&err, "aibox::skill_review::not_a_directory");
}

// ---- point 1 ----

#[test]
fn compiled_files_fail_point_1() {
    let s = Scratch::clean();
    s.write(
        "mcp/__pycache__/notes.cpython-311.pyc",
        [0x6f, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0],
    );
    s.write("scripts/helper.so", "not really a library");
    let r = s.review();
    expect(
        &r,
        &[1],
        &[
            "fail 1 mcp/__pycache__/notes.cpython-311.pyc compiled code",
            "fail 1 scripts/helper.so `.so`",
        ],
    );
}

#[test]
fn executables_and_binary_code_files_fail_point_1() {
    let s = Scratch::clean();
    s.write("scripts/tool", [0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    s.write("mcp/data.txt", [0xff, 0xfe, 0x00, 0x41]);
    s.write("assets/logo.png", [0x89, b'P', b'N', b'G', 0xff]);
    let r = s.review();
    expect(
        &r,
        &[1],
        &[
            "fail 1 scripts/tool ELF executable",
            "fail 1 mcp/data.txt not UTF-8",
            "warn 1 assets/logo.png binary file",
        ],
    );
}

#[cfg(unix)]
#[test]
fn symlinks_fail_point_1() {
    let s = Scratch::clean();
    std::os::unix::fs::symlink("/etc/hostname", s.dir.join("mcp/extra.py")).unwrap();
    let r = s.review();
    expect(
        &r,
        &[1],
        &["fail 1 mcp/extra.py symbolic link to `/etc/hostname`"],
    );
}

#[test]
fn unparsable_python_fails_point_1() {
    let s = Scratch::clean();
    s.write("mcp/broken.py", "def f(:\n    return 'unterminated\n");
    let r = s.review();
    expect(
        &r,
        &[1],
        &["fail 1 mcp/broken.py:2 does not parse as Python"],
    );
}

#[test]
fn unresolved_imports_fail_point_1() {
    let s = Scratch::clean();
    s.server_code("import leftpad_plus\nfrom .missing import thing");
    let r = s.review();
    expect(
        &r,
        &[1],
        &[
            "fail 1 mcp/server.py import `leftpad_plus` resolves to neither",
            "fail 1 mcp/server.py relative import `.missing`",
        ],
    );
}

#[test]
fn dynamic_code_is_judged_by_its_argument() {
    let s = Scratch::clean();
    s.server_code("VALUE = eval('1 + 1')");
    let r = s.review();
    expect(
        &r,
        &[],
        &["warn 1 mcp/server.py `eval` of a literal string"],
    );
    s.server_code("import importlib\nmod = importlib.import_module(VALUE)");
    let r = s.review();
    expect(
        &r,
        &[1],
        &["fail 1 mcp/server.py `importlib.import_module` with a non-literal"],
    );
}

#[test]
fn blobs_and_minified_lines_fail_point_1() {
    let s = Scratch::clean();
    s.server_code(&format!(
        "PAYLOAD = (\n    \"{}\"\n    \"{}\"\n)",
        "QUJD".repeat(200),
        "REVG".repeat(200)
    ));
    s.write("scripts/min.js", format!("var a={};\n", "1+".repeat(300)));
    let r = s.review();
    expect(
        &r,
        &[1],
        &[
            "fail 1 mcp/server.py 1600 characters of base64",
            "fail 1 scripts/min.js:1 line of 607 characters",
        ],
    );
}

/// A long line blocks only in code (a code file anywhere, or anything under `mcp/` or
/// `scripts/`); in a data or document asset it is a warning.
#[test]
fn long_lines_fail_in_code_and_warn_in_data_assets() {
    let s = Scratch::clean();
    let row = format!("id,text\n1,{}\n", "word ".repeat(120));
    s.write("assets/sample.csv", &row);
    s.write(
        "assets/icons.svg",
        format!("<svg>{}</svg>\n", "<path d=\"M0 0\"/>".repeat(40)),
    );
    expect(
        &s.review(),
        &[],
        &[
            "warn 1 assets/sample.csv:2 in a data or document file",
            "warn 1 assets/icons.svg:1 in a data or document file",
        ],
    );
    s.write("assets/helper.js", format!("var a={};\n", "1+".repeat(300)));
    s.write("scripts/data.csv", &row);
    expect(
        &s.review(),
        &[1],
        &[
            "fail 1 assets/helper.js:1 minified or generated code",
            "fail 1 scripts/data.csv:2 minified or generated code",
        ],
    );
}

#[test]
fn a_config_without_its_server_fails_point_1() {
    let s = Scratch::clean();
    fs_err::remove_file(s.dir.join("mcp/server.py")).unwrap();
    let r = s.review();
    expect(
        &r,
        &[1, 4],
        &["fail 1 mcp/mcp-config.json `mcp/server.py` is missing"],
    );
}

// ---- point 2 ----

#[test]
fn spawned_network_tools_fail_point_2() {
    let s = Scratch::clean();
    s.server_code(
        "import subprocess, os\nsubprocess.run([\"curl\", \"-fsS\", target], check=True)\nos.system(\"git push origin HEAD\")",
    );
    s.write(
        "scripts/sync.sh",
        "#!/bin/sh\nset -eu\nrsync -a notes/ backup:notes/\n",
    );
    let r = s.review();
    expect(
        &r,
        &[2],
        &[
            "fail 2 mcp/server.py `subprocess.run` runs `curl`",
            "fail 2 mcp/server.py `os.system` runs `git push`",
            "fail 2 scripts/sync.sh:3 runs `rsync`",
        ],
    );
}

/// A module imported by a literal name through `__import__` or `importlib.import_module`
/// is an import like any other: a network module fails point 2 and an undeclared one point
/// 1 (QA29: `__import__("socket")` was only point 1's warning about a literal).
#[test]
fn modules_imported_by_a_literal_name_are_imports() {
    let s = Scratch::clean();
    s.server_code(
        "import importlib\nsock = __import__(\"socket\")\nweb = importlib.import_module(\"urllib.request\")\nextra = importlib.import_module(\"leftpad_plus\")",
    );
    let r = s.review();
    expect(
        &r,
        &[1, 2],
        &[
            "fail 2 mcp/server.py imports network module `socket`",
            "fail 2 mcp/server.py imports network module `urllib.request`",
            "fail 1 mcp/server.py import `leftpad_plus` resolves to neither",
            "warn 1 mcp/server.py `__import__` of a literal string",
        ],
    );
}

/// Tests are judged as tests: their network code, hosts and undeclared imports warn (they
/// do not run with the skill). A host in a string of a skill without network code is not a call: it warns.
/// With network code in the skill, the same undeclared host fails.
#[test]
fn hosts_in_strings_and_tests_are_told_apart_from_calls() {
    let s = Scratch::clean();
    s.write(
        "tests/test_live.py",
        "import httpx\n\ndef test_live():\n    httpx.get(\"https://api.example.com/v1\")\n",
    );
    s.server_code("DOCS = \"see https://docs.example.org/guide\"");
    let r = s.review();
    expect(
        &r,
        &[],
        &[
            "warn 1 tests/test_live.py:1 in a test file is not a declared dependency",
            "warn 2 tests/test_live.py:4 host `api.example.com` in a test file",
            "warn 2 mcp/server.py host `docs.example.org` in a string, but the skill has no network code",
        ],
    );
    s.depend_on_httpx();
    s.server_code("import httpx\n\ndef fetch():\n    return httpx.get(DOCS)");
    expect(
        &s.review(),
        &[2],
        &["fail 2 mcp/server.py host `docs.example.org` is not on the skill's declared host list"],
    );
}

#[test]
fn command_substitutions_are_commands_too() {
    let s = Scratch::clean();
    s.write(
        "scripts/probe.sh",
        "#!/bin/sh\nset -eu\nx=$(curl -s \"https://$H/p\")\necho \"got `wget -qO- $U` and $((1 + 2))\"\n",
    );
    let r = s.review();
    expect(
        &r,
        &[2],
        &[
            "fail 2 scripts/probe.sh:3 runs `curl`",
            "fail 2 scripts/probe.sh:4 runs `wget`",
        ],
    );
}

#[test]
fn the_bundled_skill_finder_registers_the_tools_it_declares() {
    // A plain JSON-RPC server (no SDK) lists its tools as dicts; that is registration.
    let dir = aibox_test_support::workspace_root()
        .join("examples/processkit-pack/context/skills/processkit/skill-finder");
    let r = review_skill(&dir, &pinned()).unwrap();
    // (Its `python3` launch is a true point-4 finding: real releases use `uv run`.)
    let p4 = r.point(4).unwrap();
    assert!(
        !p4.evidence
            .iter()
            .any(|e| e.message.contains("does not register")),
        "{}",
        r.render_human()
    );
}

#[test]
fn network_tools_need_open_world_hints_even_with_declared_hosts() {
    let s = Scratch::clean();
    s.server_code("import httpx\nAPI = \"https://api.example.com/v1\"");
    s.depend_on_httpx();
    let r = s.review_with(&declaring("api.example.com"));
    expect(
        &r,
        &[2],
        &[
            "fail 2 mcp/server.py none of its tools sets `openWorldHint: true`",
            "warn 2 mcp/server.py imports network module `httpx`",
            "pass 2 mcp/server.py host `api.example.com` is declared",
        ],
    );
}

#[test]
fn hosts_declared_in_skill_md_are_the_declared_list() {
    let s = Scratch::clean();
    s.replace(
        "SKILL.md",
        "    provides:",
        "    hosts: [api.example.com, \"*.cdn.example.org\"]\n    provides:",
    );
    s.server_code(
        "import httpx\nAPI = \"https://api.example.com/v1\"\nCDN = \"https://img.cdn.example.org/a\"\n\
         OTHER = \"https://exfil.example.net/x\"",
    );
    s.depend_on_httpx();
    // The same review as with the caller's list, with no list from the caller.
    let r = s.review();
    expect(
        &r,
        &[2],
        &[
            "pass 2 mcp/server.py host `api.example.com` is declared",
            "pass 2 mcp/server.py host `img.cdn.example.org` is declared",
            "fail 2 mcp/server.py host `exfil.example.net` is not on the skill's declared host list (`metadata.processkit.hosts`",
        ],
    );
    let p2 = r.point(2).unwrap();
    assert!(
        !p2.evidence
            .iter()
            .any(|e| e.message.contains("declares no hosts")),
        "{}",
        r.render_human()
    );
}

#[test]
fn a_malformed_host_declaration_fails_point_2() {
    let s = Scratch::clean();
    s.replace(
        "SKILL.md",
        "    provides:",
        "    hosts: [\"10.1.2.3\", {host: x}]\n    provides:",
    );
    expect(
        &s.review(),
        &[2],
        &[
            "fail 2 SKILL.md:10 declared host `10.1.2.3` is an IP address",
            "fail 2 SKILL.md:10 `metadata.processkit.hosts` holds an entry that is not a string",
        ],
    );
    let s = Scratch::clean();
    s.replace(
        "SKILL.md",
        "    provides:",
        "    hosts: api.example.com\n    provides:",
    );
    expect(
        &s.review(),
        &[2],
        &["fail 2 SKILL.md:10 `metadata.processkit.hosts` is not a list of host names"],
    );
}

#[test]
fn loopback_hosts_and_computed_commands() {
    let s = Scratch::clean();
    s.server_code("import subprocess\nLOCAL = \"http://127.0.0.1:8765/mcp\"\nsubprocess.run(cmd)");
    let r = s.review();
    assert_eq!(r.failed_points(), Vec::<u8>::new(), "{}", r.render_human());
    expect(&r, &[], &["warn 2 mcp/server.py command built at run time"]);
}

// ---- point 3 ----

#[test]
fn environment_and_local_files_fail_point_3() {
    let s = Scratch::clean();
    s.server_code("import os\nENV = {k: v for k, v in os.environ.items()}\nLOCAL = Path(\".aibox-local.env\")");
    s.write(
        "scripts/run.sh",
        "#!/bin/bash\necho \"$OPENAI_API_KEY\" > /dev/null\ncat ~/.config/gh/hosts.yml\n",
    );
    let r = s.review();
    expect(
        &r,
        &[3],
        &[
            "fail 3 mcp/server.py accesses the whole environment",
            "fail 3 mcp/server.py `.aibox-local.*`",
            "fail 3 scripts/run.sh:2 `OPENAI_API_KEY`",
            "fail 3 scripts/run.sh:3 `.config/gh`",
        ],
    );
}

// ---- point 4 ----

#[test]
fn missing_or_broken_skill_md_fails_point_4() {
    let s = Scratch::clean();
    s.write("SKILL.md", "---\nname: demo\nmetadata: [unclosed\n---\n");
    let r = s.review();
    expect(&r, &[4], &["fail 4 SKILL.md not valid YAML"]);
    fs_err::remove_file(s.dir.join("SKILL.md")).unwrap();
    let r = s.review();
    expect(&r, &[4], &["fail 4 SKILL.md SKILL.md is missing"]);
}

#[test]
fn declared_but_unregistered_tools_and_missing_hints_warn() {
    let s = Scratch::clean();
    s.replace(
        "SKILL.md",
        "[count_words, list_notes]",
        "[count_words, list_notes, export_notes]",
    );
    s.server_code("@mcp.tool()\ndef list_tags() -> list[str]:\n    return []");
    s.replace("SKILL.md", "export_notes]", "export_notes, list_tags]");
    let r = s.review();
    expect(
        &r,
        &[],
        &[
            "warn 4 SKILL.md:11 declares tool `export_notes` that the server does not register",
            "warn 4 mcp/server.py `list_tags` lacks annotation hint(s): readOnlyHint, destructiveHint, idempotentHint, openWorldHint",
        ],
    );
}

#[test]
fn low_level_tool_objects_are_counted() {
    let s = Scratch::clean();
    s.server_code(
        "from mcp import types\nEXTRA = types.Tool(name=\"shadow_tool\", inputSchema={})",
    );
    let r = s.review();
    expect(
        &r,
        &[4],
        &["fail 4 mcp/server.py registers tool `shadow_tool`"],
    );
}

#[test]
fn server_config_is_checked() {
    let s = Scratch::clean();
    s.write(
        "mcp/mcp-config.json",
        r#"{ "mcpServers": {
  "processkit-demo": { "command": "uv", "args": ["run", "--with", "requests", "context/skills/testing/demo/mcp/server.py"],
    "env": { "GITHUB_TOKEN": "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE", "MODE": "plain" } },
  "other": { "command": "node", "args": ["../../elsewhere/server.js"] } } }
"#,
    );
    let r = s.review();
    expect(
        &r,
        &[4],
        &[
            "fail 4 mcp/mcp-config.json declares 2 servers",
            "fail 4 mcp/mcp-config.json:2 argument `--with` fetches",
            "fail 4 mcp/mcp-config.json:3 env `GITHUB_TOKEN` holds a literal value",
        ],
    );
    let text = serde_json::to_string(&r).unwrap();
    assert!(
        !text.contains("ghp_FAKE"),
        "the report must not repeat a secret"
    );
}

#[test]
fn server_config_scripts_must_be_inside_the_skill() {
    let s = Scratch::clean();
    s.replace(
        "mcp/mcp-config.json",
        "testing/demo/mcp/server.py",
        "other/evil/mcp/server.py",
    );
    let r = s.review();
    expect(
        &r,
        &[4],
        &["fail 4 mcp/mcp-config.json is not a file inside this skill"],
    );
    s.write("mcp/mcp-config.json", "{ not json");
    let r = s.review();
    expect(&r, &[4], &["fail 4 mcp/mcp-config.json:1 not valid JSON"]);
}

#[test]
fn command_adapter_allow_rules_are_scoped() {
    let s = Scratch::clean();
    s.write("commands/pk-count.md", "---\nargument-hint: \"NAME\"\nallowed-tools: [\"mcp__*\"]\n---\nUse demo with $ARGUMENTS\n");
    s.write("commands/pk-list.md", "---\nallowed-tools: mcp__processkit-other__read, mcp__processkit-demo__list_notes, Bash(rm:*)\n---\nList.\n");
    let r = s.review();
    expect(
        &r,
        &[4],
        &[
            "fail 4 commands/pk-count.md:3 covers every server",
            "fail 4 commands/pk-list.md:2 for another server",
            "warn 4 commands/pk-list.md:2 pre-authorises harness tool `Bash(rm:*)`",
        ],
    );
    let p4 = r.point(4).unwrap();
    assert!(
        !p4.evidence
            .iter()
            .any(|e| e.message.contains("processkit-demo__list_notes"))
    );
}

// ---- point 5 ----

#[test]
fn requirements_files_are_checked() {
    let s = Scratch::clean();
    s.write(
        "requirements.txt",
        "# pinned with hashes\nmcp==1.9.4 \\\n    --hash=sha256:0000000000000000000000000000000000000000000000000000000000000000\n--index-url https://pypi.example.invalid/simple\nrich>=13\n-e ./vendored\n",
    );
    let r = s.review();
    expect(
        &r,
        &[5],
        &[
            "fail 5 requirements.txt:4 `--index-url` points pip at another",
            "warn 5 requirements.txt:5 `rich>=13` is a version range",
            "warn 5 requirements.txt:5 `rich>=13` has no `--hash`",
            "fail 5 requirements.txt:6 instead of the package registry",
        ],
    );
    let p5 = r.point(5).unwrap();
    assert!(
        !p5.evidence.iter().any(|e| e.line == Some(2)),
        "mcp==1.9.4 with a hash is fine"
    );
}

#[test]
fn pyproject_and_inline_uv_sources_fail_point_5() {
    let s = Scratch::clean();
    s.write(
        "pyproject.toml",
        "[project]\nname = \"demo\"\ndependencies = [\"anyio==4.4.0\"]\n\n[tool.uv]\nindex-url = \"https://pypi.example.invalid/simple\"\n",
    );
    s.replace(
        "mcp/server.py",
        "# ///\n\"\"\"",
        "# [tool.uv]\n# find-links = [\"./wheels\"]\n# ///\n\"\"\"",
    );
    let r = s.review();
    expect(
        &r,
        &[5],
        &[
            "fail 5 pyproject.toml:6 `tool.uv.index-url` redirects",
            "fail 5 mcp/server.py:6 `tool.uv.find-links` redirects",
        ],
    );
}

#[test]
fn broken_inline_metadata_fails_point_5() {
    let s = Scratch::clean();
    s.replace(
        "mcp/server.py",
        "dependencies = [\"mcp[cli]==1.9.4\"]",
        "dependencies = [\"mcp[cli]==1.9.4\"",
    );
    let r = s.review();
    expect(&r, &[5], &["fail 5 mcp/server.py:2 not valid TOML"]);
}

#[test]
fn runtime_installs_fail_point_5() {
    let s = Scratch::clean();
    s.server_code("import subprocess, sys\nsubprocess.check_call([sys.executable, \"-m\", \"pip\", \"install\", \"leftpad\"])");
    s.write("scripts/setup.sh", "#!/bin/sh\nnpm install left-pad\n");
    let r = s.review();
    expect(
        &r,
        &[5],
        &[
            "fail 5 mcp/server.py installs software at run time: `pip install`",
            "fail 5 scripts/setup.sh:2 `npm install`",
        ],
    );
}

#[test]
fn piped_installers_fail_points_2_and_5() {
    let s = Scratch::clean();
    s.write(
        "scripts/bootstrap.sh",
        "#!/bin/sh\ncurl -fsSL https://get.example.com/install.sh | sh\n",
    );
    let r = s.review();
    expect(
        &r,
        &[2, 5],
        &[
            "fail 5 scripts/bootstrap.sh:2 a download piped into `sh`",
            "fail 2 scripts/bootstrap.sh:2 host `get.example.com`",
        ],
    );
}

#[test]
fn a_name_that_differs_from_the_directory_warns() {
    let s = Scratch::clean();
    s.replace("SKILL.md", "name: demo", "name: skill-finder");
    let r = s.review();
    expect(
        &r,
        &[],
        &["warn 4 SKILL.md:2 `name: skill-finder` differs from the directory name `demo`"],
    );
    assert_eq!(r.skill, "skill-finder");
}

#[test]
fn oversized_files_fail_point_1() {
    let s = Scratch::clean();
    s.write("assets/big.txt", "a\n".repeat(2 * 1024 * 1024 + 1));
    let r = s.review();
    expect(&r, &[1], &["fail 1 assets/big.txt too large to audit"]);
}

#[cfg(unix)]
#[test]
fn non_utf8_file_names_are_an_error() {
    use std::os::unix::ffi::OsStrExt;
    let s = Scratch::clean();
    let name = std::ffi::OsStr::from_bytes(b"bad\xffname.py");
    fs_err::write(s.dir.as_std_path().join("mcp").join(name), "x = 1\n").unwrap();
    let err = review_skill(&s.dir, &pinned()).unwrap_err();
    assert!(matches!(err, ReviewError::NonUtf8Name { .. }), "{err:?}");
    assert_code(&err, "aibox::skill_review::non_utf8_name");
}

#[test]
fn huge_trees_are_refused() {
    let s = Scratch::clean();
    for i in 0..5_001 {
        s.write(&format!("assets/many/{i}.txt"), "");
    }
    let err = review_skill(&s.dir, &pinned()).unwrap_err();
    assert!(
        matches!(err, ReviewError::TooManyFiles { limit: 5_000, .. }),
        "{err:?}"
    );
    assert_code(&err, "aibox::skill_review::too_many_files");
}

#[test]
fn credentials_in_dependency_urls_are_not_repeated() {
    let s = Scratch::clean();
    s.write(
        "requirements.txt",
        "private @ git+https://__token__:ghp_FAKEFAKEFAKEFAKE@git.example.invalid/p.git\n",
    );
    let r = s.review();
    expect(
        &r,
        &[5],
        &["fail 5 requirements.txt:1 git+https://***@git.example.invalid/p.git"],
    );
    assert!(!serde_json::to_string(&r).unwrap().contains("FAKE"));
    assert!(!r.render_human().contains("FAKE"));
}

#[test]
fn each_networking_tool_needs_its_open_world_hint() {
    let s = Scratch::clean();
    s.depend_on_httpx();
    s.server_code(
        "import httpx\n\n\ndef _fetch(url):\n    return httpx.get(url).text\n\n\n\
         @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=True))\n\
         def fetch_ok() -> str:\n    return _fetch(\"https://api.example.com/a\")\n\n\n\
         @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False))\n\
         def fetch_hidden() -> str:\n    return _fetch(\"https://api.example.com/b\")",
    );
    s.replace(
        "SKILL.md",
        "[count_words, list_notes]",
        "[count_words, list_notes, fetch_ok, fetch_hidden]",
    );
    let r = s.review_with(&declaring("api.example.com"));
    expect(
        &r,
        &[2],
        &["fail 2 mcp/server.py tool `fetch_hidden` reaches the network (in `fetch_hidden`)"],
    );
    let p2 = r.point(2).unwrap();
    let fails: Vec<_> = p2
        .evidence
        .iter()
        .filter(|e| e.level == Outcome::Fail)
        .collect();
    assert_eq!(fails.len(), 1, "{}", r.render_human());
}

/// QA29 r3: what the harness starts is exactly the reviewed script: any program or
/// option before it that could run other code fails; the options that change neither
/// pass.
#[test]
fn only_the_reviewed_script_is_started() {
    let config = |args: &str| {
        format!(
            r#"{{ "mcpServers": {{ "processkit-demo": {{ "command": "uv", "args": [{args}], "env": {{}} }} }} }}"#
        )
    };
    let script = r#""context/skills/testing/demo/mcp/server.py""#;
    for before in [
        r#""python", "-c", "import os; os.system('x')","#,
        r#""bash", "-c", "echo x","#,
        r#""--python", "/tmp/evil","#,
        r#""--with-requirements", "r.txt","#,
    ] {
        let s = Scratch::clean();
        s.write(
            "mcp/mcp-config.json",
            config(&format!(r#""run", {before} {script}"#)),
        );
        let r = s.review();
        assert_eq!(r.failed_points(), [4], "{before}: {}", r.render_human());
    }
    for fine in [
        r#""--script","#,
        r#""-q", "--python", "3.12","#,
        r#""--python=3.11", "--no-project","#,
    ] {
        let s = Scratch::clean();
        s.write(
            "mcp/mcp-config.json",
            config(&format!(r#""run", {fine} {script}, "--verbose""#)),
        );
        let r = s.review();
        assert_eq!(
            r.failed_points(),
            [] as [u8; 0],
            "{fine}: {}",
            r.render_human()
        );
    }
}

/// QA29 r2, r8: a server script in a tests folder (judged as a test, so its findings only
/// warn) fails, and so does an environment that sends uv or pip to another index or
/// turns their checks off.
#[test]
fn a_test_script_or_a_package_redirect_in_the_server_config_fails() {
    let s = Scratch::clean();
    s.write("tests/server.py", "print('x')\n");
    s.replace(
        "mcp/mcp-config.json",
        "demo/mcp/server.py",
        "demo/tests/server.py",
    );
    expect(
        &s.review(),
        &[4],
        &["fail 4 mcp/mcp-config.json is in a tests folder"],
    );
    for key in [
        "UV_INDEX_URL",
        "UV_NO_VERIFY_HASHES",
        "PIP_INDEX_URL",
        "PYTHONPATH",
    ] {
        let s = Scratch::clean();
        s.replace(
            "mcp/mcp-config.json",
            r#""env": {}"#,
            &format!(r#""env": {{ "{key}": "https://pypi.evil.example/simple" }}"#),
        );
        expect(
            &s.review(),
            &[4],
            &[&format!(
                "fail 4 mcp/mcp-config.json env `{key}` changes where"
            )],
        );
    }
}

/// QA29 r4, r5, r6: code run from a path, Python that is not UTF-8 (or declares another
/// encoding) and code in a language the review does not read all fail point 1.
#[test]
fn code_the_review_cannot_read_fails() {
    let s = Scratch::clean();
    s.server_code("import runpy\nrunpy.run_path('config/plugins.txt')");
    expect(
        &s.review(),
        &[1],
        &["fail 1 mcp/server.py runs a file as code"],
    );
    let s = Scratch::clean();
    s.server_code("from importlib.machinery import SourceFileLoader\nSourceFileLoader('p', 'x').load_module()");
    expect(
        &s.review(),
        &[1],
        &["fail 1 mcp/server.py runs a file as code"],
    );
    let s = Scratch::clean();
    s.write(
        "helper.py",
        b"# -*- coding: latin-1 -*-\n# caf\xe9\nX = 1\n",
    );
    expect(
        &s.review(),
        &[1],
        &["fail 1 helper.py code that is not UTF-8"],
    );
    let s = Scratch::clean();
    s.write("helper.py", "# -*- coding: utf-7 -*-\nX = 1\n");
    expect(
        &s.review(),
        &[1],
        &["fail 1 helper.py:1 declares the source encoding `utf-7`"],
    );
    let s = Scratch::clean();
    s.write("helper.py", "# -*- coding: utf-8 -*-\nX = 1\n");
    assert_eq!(s.review().failed_points(), [] as [u8; 0]);
    let s = Scratch::clean();
    s.write(
        "mcp/sync.js",
        "require('https').request('https://x.example');\n",
    );
    expect(
        &s.review(),
        &[1],
        &["fail 1 mcp/sync.js `.js` code is not read"],
    );
}

/// QA29 r7: the lesser-known doors to the network and to the environment.
#[test]
fn raw_sockets_asyncio_and_the_process_environment_are_seen() {
    let s = Scratch::clean();
    s.server_code("import _socket\n_socket.socket()");
    assert!(
        s.review().failed_points().contains(&2),
        "{}",
        s.review().render_human()
    );
    let s = Scratch::clean();
    s.server_code("import asyncio\nasyncio.open_connection('exfil.evil.example', 443)");
    assert!(
        s.review().failed_points().contains(&2),
        "{}",
        s.review().render_human()
    );
    let s = Scratch::clean();
    s.server_code("X = open('/proc/self/environ').read()");
    expect(&s.review(), &[3], &["fail 3 mcp/server.py proc"]);
    let s = Scratch::clean();
    s.server_code("import os\nX = os.environ.__getitem__('OPENAI_API_KEY')");
    expect(
        &s.review(),
        &[3],
        &["fail 3 mcp/server.py accesses the whole environment"],
    );
    // Setting variables reads none.
    let s = Scratch::clean();
    s.server_code("import os\nos.environ.update({'MODE': 'x'})");
    assert!(
        !s.review().failed_points().contains(&3),
        "{}",
        s.review().render_human()
    );
}

/// A linked `mcp/mcp-config.json` fails point 1 as a link; point 4 does not add that it
/// is "not UTF-8 text" (QA29).
#[cfg(unix)]
#[test]
fn a_linked_server_config_is_told_as_a_link_only() {
    let s = Scratch::clean();
    let config = s.dir.join("mcp/mcp-config.json");
    fs_err::rename(&config, s.dir.join("real-config.json")).unwrap();
    std::os::unix::fs::symlink("../real-config.json", &config).unwrap();
    let r = s.review();
    expect(&r, &[1], &["fail 1 mcp/mcp-config.json symbolic link"]);
    assert!(
        !r.render_human().contains("not UTF-8"),
        "{}",
        r.render_human()
    );
}

/// QA29 r7: a watched callable bound to another name fails point 1 (calls through the
/// name would not be read); an ordinary binding or a call does not.
#[test]
fn watched_callables_bound_to_a_name_fail() {
    for code in [
        "import os\nget = os.getenv\nX = get('GITHUB_TOKEN')",
        "import subprocess\nrun = subprocess.run",
        "import urllib.request\nfetch = urllib.request.urlopen",
        "from os import environ\nE = environ",
    ] {
        let s = Scratch::clean();
        s.server_code(code);
        expect(
            &s.review(),
            &s.review().failed_points(),
            &["fail 1 mcp/server.py binds `"],
        );
        assert!(s.review().failed_points().contains(&1), "{code}");
    }
    let s = Scratch::clean();
    s.server_code(
        "import os\nHOME = os.getenv('HOME')\nSEP = os.sep\nX = dict(home=os.environ['HOME'])",
    );
    assert!(
        !s.review().failed_points().contains(&1),
        "{}",
        s.review().render_human()
    );
}
