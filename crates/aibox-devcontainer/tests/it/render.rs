//! Snapshot, schema and real-Compose tests of the generated dev container files.
//!
//! Every case renders twice (determinism), snapshots every file, validates the Compose
//! and devcontainer files against the vendored schemas, and has Debian's
//! `docker-compose` 1.29 and `podman-compose` parse the files as a project on disk.

// Helper functions outside `#[test]` fail the test by panicking, like the tests do.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

use aibox_config::{AiboxToml, LocalToml, Ownership, PlannedFile};
use aibox_devcontainer::{GENERATED_HEADER_MARKER, Inputs, render};
use aibox_test_support::podman::require_program;
use aibox_test_support::schema::{validate_compose_yaml, validate_devcontainer_json};

const VERSION: &str = "0.1.0";
const COMPOSE_HINT: &str = "install Compose: `apt-get install -y docker-compose podman-compose`";

fn team(text: &str) -> AiboxToml {
    toml::from_str(text).unwrap()
}

fn local(text: &str) -> LocalToml {
    toml::from_str(text).unwrap()
}

const MINIMAL: &str = "[container]\nname = \"demo\"\n";

const FULL: &str = r#"
[aibox]
project_name = "Full.Project"
profile = "human-dev"

[container]
name = "full-dev"
hostname = "fullhost"
user = "dev"
uid = 1001
gid = 1002
base_image = "docker.io/library/debian:bookworm-slim"
timezone = "Europe/Berlin"

[container.environment]
LANG = "C.UTF-8"
PRICE = "costs $5 or ${AMOUNT}"
QUOTED = "say \"hi\" and 'bye'"
COMMENTISH = "a: b # c"
MULTILINE = "one\ntwo"
OVERRIDDEN = "team value"
YES = "yes"
FROM_HOST = "${AIBOX_TEST_FROM_HOST}"

[[container.extra_volumes]]
source = "./data"
target = "/data"

[[container.extra_volumes]]
source = "~/.gitconfig"
target = "/home/dev/.gitconfig"
read_only = true

[[container.extra_volumes]]
source = "/srv/shared cache"
target = "/cache"

[container.lifecycle]
post_create_command = "make setup && echo \"done\""
post_start_command = "git status"

[ai]
harnesses = ["vscode", "claude", "codex", "gemini", "opencode", "cursor", "claude"]
"#;

const FULL_LOCAL: &str = r#"
[container.environment]
GITHUB_TOKEN = "ghp_FAKEFAKEFAKEFAKEFAKE"
OVERRIDDEN = "personal value"
GREETING = "hello world = a#1"
WIN_PATH = 'C:\Users\x\n'
MIXED = '''say "hi" it's	done'''

[[container.extra_volumes]]
source = "~/notes"
target = "/notes"
read_only = true
"#;

const HARNESS_ONLY: &str = r#"
[aibox]
profile = "headless-runner"

[container]
name = "runner"
user = "agent"
uid = 2000

[context]
mode = "harness-only"

[ai]
harnesses = ["codex", "cursor"]
"#;

const ROOT: &str =
    "[container]\nname = \"rooty\"\nuser = \"root\"\nuid = 0\n\n[ai]\nharnesses = [\"claude\"]\n";

/// Egress through the proxy: harness hosts from the catalog, the team's additions (one a
/// duplicate of a harness host, one a wildcard), personal ones in the overlay.
const EGRESS: &str = r#"
[container]
name = "egress-dev"
environment = { HTTPS_PROXY = "http://team-proxy.invalid:8080", LANG = "C.UTF-8" }

[context]
mode = "harness-only"

[ai]
harnesses = ["claude", "codex"]

[network]
egress = "allowlist"
allow = ["pypi.org", "*.pythonhosted.org", "api.anthropic.com"]
"#;

const EGRESS_LOCAL: &str = r#"
[network]
allow = ["internal.corp.example", "pypi.org"]
upstream_proxy = "proxy.corp.example:3128"
"#;

const DOCKERFILE_LOCAL: &str = "# my additions\nRUN echo \"local step\" > /etc/local-step\n";

struct Case {
    name: &'static str,
    team: AiboxToml,
    local: LocalToml,
    dockerfile_local: Option<String>,
    override_exists: bool,
    scaffold: bool,
    security_opt: Vec<String>,
    python_envs: Vec<aibox_devcontainer::PythonEnv>,
    npm_envs: Vec<aibox_devcontainer::NpmEnv>,
    skill_hosts: Vec<aibox_devcontainer::egress::SkillHosts>,
    /// The checkout's canonical path, as the engine hands it in.
    checkout: String,
}

impl Case {
    fn new(name: &'static str, team_text: &str) -> Self {
        Self {
            name,
            team: team(team_text),
            local: LocalToml::default(),
            dockerfile_local: None,
            override_exists: false,
            scaffold: true,
            security_opt: Vec::new(),
            python_envs: Vec::new(),
            npm_envs: Vec::new(),
            skill_hosts: Vec::new(),
            checkout: format!("/home/tester/src/{name}"),
        }
    }

    fn inputs(&self) -> Inputs<'_> {
        let mut inputs = Inputs::new(&self.team, &self.local, VERSION);
        inputs.dockerfile_local = self.dockerfile_local.as_deref();
        inputs.override_exists = self.override_exists;
        inputs.scaffold_user_files = self.scaffold;
        inputs.security_opt = &self.security_opt;
        inputs.python_envs = &self.python_envs;
        inputs.npm_envs = &self.npm_envs;
        inputs.checkout = Some(&self.checkout);
        inputs.skill_hosts = &self.skill_hosts;
        inputs
    }
}

fn cases() -> Vec<Case> {
    let mut full = Case::new("full", FULL);
    full.local = local(FULL_LOCAL);
    // A real path may hold spaces, `$` and non-ASCII letters; Compose must not touch them.
    "/home/tester/my $HOME/Prøject A".clone_into(&mut full.checkout);
    // Two locked MCP server environments (requirements as the engine renders them).
    full.python_envs = ["0a1b2c3d4e5f", "f5e4d3c2b1a0"]
        .into_iter()
        .map(|id| aibox_devcontainer::PythonEnv {
            id: id.to_owned(),
            servers: vec!["processkit-a".to_owned(), "processkit-b".to_owned()],
            requirements: format!("mcp==1.28.1 \\\n    --hash=sha256:{}\n", "1".repeat(64)),
        })
        .collect();
    // One locked npm tree of a team npx server (files as the engine renders them).
    full.npm_envs = vec![aibox_devcontainer::NpmEnv {
        id: "1a2b3c4d5e6f".to_owned(),
        servers: vec!["memory".to_owned()],
        package_json: "{\n  \"//\": \"generated by aibox; …\",\n  \"private\": true\n}\n"
            .to_owned(),
        package_lock: "{\n  \"//\": \"generated by aibox; …\",\n  \"lockfileVersion\": 3\n}\n"
            .to_owned(),
    }];
    let mut no_scaffold = Case::new("minimal_no_scaffold", MINIMAL);
    no_scaffold.scaffold = false;
    let mut with_local = Case::new("local_and_override", MINIMAL);
    with_local.scaffold = false;
    with_local.dockerfile_local = Some(DOCKERFILE_LOCAL.to_owned());
    with_local.override_exists = true;
    let mut seccomp = Case::new(
        "security_opt",
        "[container]\nname = \"sec\"\n[ai]\nharnesses = [\"codex\"]\n",
    );
    seccomp.security_opt = vec![
        "seccomp=unconfined".to_owned(),
        "no-new-privileges:true".to_owned(),
    ];
    let mut egress = Case::new("egress_allowlist", EGRESS);
    egress.local = local(EGRESS_LOCAL);
    egress.skill_hosts = vec![aibox_devcontainer::egress::SkillHosts {
        skill: "web-search".to_owned(),
        hosts: vec!["api.search.example".to_owned(), "not a host".to_owned()],
    }];
    vec![
        Case::new("minimal", MINIMAL),
        no_scaffold,
        egress,
        Case::new(
            "egress_none",
            "[container]\nname = \"sealed\"\n\n[network]\negress = \"none\"\n",
        ),
        full,
        Case::new("harness_only", HARNESS_ONLY),
        with_local,
        seccomp,
        Case::new("root_user", ROOT),
    ]
}

fn file<'a>(files: &'a [PlannedFile], path: &str) -> &'a str {
    let f = files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("{path} not planned"));
    std::str::from_utf8(&f.contents).unwrap()
}

fn summary(files: &[PlannedFile]) -> String {
    files.iter().fold(String::new(), |mut out, f| {
        let _ = writeln!(
            out,
            "{} {:?} {:?} {} bytes",
            f.path,
            f.ownership,
            f.mode,
            f.contents.len()
        );
        out
    })
}

#[test]
fn every_case_is_deterministic_snapshotted_and_schema_valid() {
    for case in cases() {
        let files = render(&case.inputs()).unwrap();
        assert_eq!(
            files,
            render(&case.inputs()).unwrap(),
            "{}: not deterministic",
            case.name
        );
        let n = case.name;
        insta::assert_snapshot!(format!("{n}__files"), summary(&files));
        for (suffix, path) in [
            ("dockerfile", ".devcontainer/Dockerfile"),
            ("compose", ".devcontainer/docker-compose.yml"),
            ("devcontainer_json", ".devcontainer/devcontainer.json"),
            ("local_env", aibox_config::layout::LOCAL_ENV),
        ] {
            insta::assert_snapshot!(format!("{n}__{suffix}"), file(&files, path));
        }
        if case.team.network.egress == aibox_config::EgressMode::Allowlist {
            for (suffix, path) in [
                (
                    "egress_dockerfile",
                    aibox_devcontainer::EGRESS_DOCKERFILE_PATH,
                ),
                ("egress_conf", aibox_devcontainer::EGRESS_CONF_PATH),
                ("egress_filter", aibox_devcontainer::EGRESS_FILTER_PATH),
                (
                    "egress_local_conf",
                    aibox_devcontainer::EGRESS_LOCAL_CONF_PATH,
                ),
                (
                    "egress_local_filter",
                    aibox_devcontainer::EGRESS_LOCAL_FILTER_PATH,
                ),
            ] {
                insta::assert_snapshot!(format!("{n}__{suffix}"), file(&files, path));
            }
        }
        let compose = file(&files, ".devcontainer/docker-compose.yml");
        validate_compose_yaml(compose).unwrap_or_else(|e| panic!("{n}: compose invalid: {e:#?}"));
        let json = file(&files, ".devcontainer/devcontainer.json");
        validate_devcontainer_json(json)
            .unwrap_or_else(|e| panic!("{n}: devcontainer.json invalid: {e:#?}"));
        for f in &files {
            let text = std::str::from_utf8(&f.contents).unwrap();
            match f.ownership {
                Ownership::Generated => {
                    let head: String = text.lines().take(2).collect();
                    assert!(
                        head.contains(GENERATED_HEADER_MARKER),
                        "{n}: {} lacks header",
                        f.path
                    );
                }
                Ownership::ScaffoldOnce => {
                    assert!(
                        !text.contains(GENERATED_HEADER_MARKER),
                        "{}: scaffold has marker",
                        f.path
                    );
                }
                _ => {}
            }
            assert!(
                !text.contains("privileged") && !text.contains("cap_add"),
                "{}",
                f.path
            );
            assert!(!text.contains("runArgs"), "{}", f.path);
            // `initializeCommand` only makes the agent's internal network, and only when
            // there is one; the gate accepts exactly that command.
            let sealed = case.team.network.egress != aibox_config::EgressMode::Open;
            assert_eq!(
                text.contains("initializeCommand"),
                sealed && f.path == ".devcontainer/devcontainer.json",
                "{}",
                f.path
            );
        }
    }
}

#[test]
fn scaffolds_are_valid_and_snapshotted() {
    let case = Case::new("minimal", MINIMAL);
    let files = render(&case.inputs()).unwrap();
    let override_text = file(&files, ".devcontainer/docker-compose.override.yml");
    validate_compose_yaml(override_text).unwrap();
    insta::assert_snapshot!("scaffold__compose_override", override_text);
    insta::assert_snapshot!(
        "scaffold__dockerfile_local",
        file(&files, ".devcontainer/Dockerfile.local")
    );
    // The scaffolded Dockerfile.local is what the Dockerfile already inlines, so creating
    // it changes nothing on the next run.
    let mut next = Case::new("minimal", MINIMAL);
    next.scaffold = false;
    next.dockerfile_local = Some(file(&files, ".devcontainer/Dockerfile.local").to_owned());
    next.override_exists = true;
    let again = render(&next.inputs()).unwrap();
    assert_eq!(
        again[..3],
        files[..3],
        "generated files changed once the scaffolds exist"
    );
}

/// Writes a rendered project into a temporary folder, as the engine would.
fn write_project(case: &Case, files: &[PlannedFile]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut files = files.to_vec();
    let planned = |files: &[PlannedFile], p: &str| files.iter().any(|f| f.path == p);
    if case.override_exists && !planned(&files, ".devcontainer/docker-compose.override.yml") {
        // The user's existing override: the scaffold aibox would have written.
        let mut scaffolding = Inputs::new(&case.team, &case.local, VERSION);
        scaffolding.scaffold_user_files = true;
        let scaffolded = render(&scaffolding).unwrap();
        let f = scaffolded
            .into_iter()
            .find(|f| f.path == ".devcontainer/docker-compose.override.yml");
        files.push(f.unwrap());
    }
    for f in &files {
        let path = dir.path().join(f.path.as_str());
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(&path, &f.contents).unwrap();
    }
    dir
}

/// The files `devcontainer.json` lists (committed only), then the personal overlay the
/// runtime adds with `-f` when it exists.
fn compose_args(files: &[PlannedFile]) -> Vec<&'static str> {
    let mut args = committed_compose_args(files);
    args.extend(["-f", "docker-compose.local.yml"]);
    args
}

/// The Compose files `devcontainer.json` lists: never a gitignored one.
fn committed_compose_args(files: &[PlannedFile]) -> Vec<&'static str> {
    let mut args = vec!["-f", "docker-compose.yml"];
    let json = file(files, ".devcontainer/devcontainer.json");
    if json.contains("docker-compose.override.yml") {
        args.extend(["-f", "docker-compose.override.yml"]);
    }
    assert!(!json.contains("docker-compose.local.yml"), "{json}");
    for f in ["docker-compose.yml", "docker-compose.override.yml"] {
        assert!(
            !file(files, ".devcontainer/docker-compose.yml").contains(".aibox-local"),
            "{f}"
        );
    }
    args
}

/// A fresh clone has only the committed files: no `.devcontainer/aibox-local.env`, no
/// `docker-compose.local.yml`. Both Compose implementations must accept that project.
#[test]
fn committed_files_alone_are_a_valid_compose_project() {
    require_program("docker-compose", COMPOSE_HINT);
    require_program("podman-compose", COMPOSE_HINT);
    let _turn = PODMAN_COMPOSE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for case in cases() {
        let files = render(&case.inputs()).unwrap();
        let dir = write_project(&case, &files);
        for local in [
            aibox_config::layout::LOCAL_ENV,
            ".devcontainer/docker-compose.local.yml",
        ] {
            fs_err::remove_file(dir.path().join(local)).unwrap();
        }
        let project = aibox_devcontainer::project_name(&case.team);
        let out = run_ok(
            Command::new("docker-compose")
                .current_dir(dir.path().join(".devcontainer"))
                .env("HOME", "/home/tester")
                .args(["-p", &project])
                .args(committed_compose_args(&files))
                .arg("config"),
        );
        let program = agent_command(&case).split(' ').next().unwrap();
        assert!(
            out.contains(&format!("- {program}\n")),
            "{}: {out}",
            case.name
        );
        let out = run_ok(
            Command::new("podman-compose")
                .current_dir(dir.path().join(".devcontainer"))
                .env("HOME", "/home/tester")
                .args(["--dry-run", "-p", &project])
                .args(committed_compose_args(&files))
                .args(["up", "-d"]),
        );
        remove_dry_run_leftovers(&project);
        assert!(out.contains("podman run "), "{}: {out}", case.name);
        assert!(!out.contains("--env-file"), "{}: {out}", case.name);
    }
}

/// podman-compose creates the networks and volumes even in a dry run: they go again.
/// The two tests that dry-run the same projects take turns ([`PODMAN_COMPOSE`]), or one
/// finds the network the other just made ("network already exists").
static PODMAN_COMPOSE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn remove_dry_run_leftovers(project: &str) {
    let networks = ["default", "aibox-internal", "aibox-egress"]
        .map(|net| format!("{project}_{net}"))
        .into_iter()
        .chain([format!("{project}-aibox-internal")]);
    for net in networks {
        let _ = Command::new("podman")
            .args(["network", "rm", "-f", &net])
            .output();
    }
    let _ = Command::new("podman")
        .args([
            "volume",
            "rm",
            "-f",
            &format!("{project}_aibox-egress-socket"),
        ])
        .output();
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The agent's main process as the start of its command line: the egress relay in
/// `allowlist` mode, `sleep infinity` otherwise.
fn agent_command(case: &Case) -> &'static str {
    if case.team.network.egress == aibox_config::EgressMode::Allowlist {
        "socat TCP-LISTEN:3128,bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:/run/aibox-egress/proxy.sock"
    } else {
        "sleep infinity"
    }
}

/// The text values among `items`.
fn strings<'a>(items: impl Iterator<Item = &'a serde_norway::Value>) -> Vec<String> {
    items
        .filter_map(|x| x.as_str().map(str::to_owned))
        .collect()
}

/// What `docker-compose config` makes of an `allowlist` case: the proxy variables (they
/// win over the team's own `HTTPS_PROXY`, so they join `expected`) name the agent's own
/// loopback, where its command relays to the proxy's socket (read-only in the agent);
/// the agent alone on the internal network, the proxy only on the outside one, with
/// nothing but what it needs.
fn egress_as_compose_reads_it(
    parsed: &serde_norway::Value,
    service: &serde_norway::Value,
    expected: &mut BTreeMap<String, String>,
) {
    for (key, value) in [
        ("HTTPS_PROXY", "http://127.0.0.1:3128"),
        ("HTTP_PROXY", "http://127.0.0.1:3128"),
        ("NO_PROXY", "localhost,127.0.0.1,::1"),
        ("https_proxy", "http://127.0.0.1:3128"),
        ("http_proxy", "http://127.0.0.1:3128"),
        ("no_proxy", "localhost,127.0.0.1,::1"),
    ] {
        expected.insert(key.into(), value.into());
    }
    let names = |v: &serde_norway::Value| {
        strings(
            v.as_mapping()
                .into_iter()
                .flat_map(serde_norway::Mapping::keys),
        )
    };
    let text = |v: &serde_norway::Value| strings(v.as_sequence().into_iter().flatten());
    assert_eq!(
        names(&service["networks"]),
        ["aibox-internal"],
        "{service:?}"
    );
    assert_eq!(
        text(&service["command"]).join(" "),
        "socat TCP-LISTEN:3128,bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:/run/aibox-egress/proxy.sock"
    );
    assert!(
        text(&service["volumes"]).contains(&"aibox-egress-socket:/run/aibox-egress:ro".to_owned()),
        "{service:?}"
    );
    let proxy = &parsed["services"]["aibox-egress"];
    assert_eq!(proxy["cap_drop"][0].as_str(), Some("ALL"), "{proxy:?}");
    assert!(proxy.get("cap_add").is_none(), "{proxy:?}");
    assert_eq!(proxy["read_only"], serde_norway::Value::Bool(true));
    assert_eq!(names(&proxy["networks"]), ["aibox-egress"], "{proxy:?}");
    assert!(
        text(&proxy["volumes"]).contains(&"aibox-egress-socket:/run/aibox-egress:rw".to_owned()),
        "{proxy:?}"
    );
    assert_eq!(
        parsed["networks"]["aibox-internal"]["internal"],
        serde_norway::Value::Bool(true)
    );
    assert!(
        parsed["volumes"].get("aibox-egress-socket").is_some(),
        "{parsed:?}"
    );
}

/// In every mode the agent sees its own container's files read-only, and the folder of
/// its harness state mounts (which it must not swap for links), as Compose read them.
fn read_only_views(case: &str, volumes: &[&str]) {
    assert!(
        volumes
            .iter()
            .any(|v| v.ends_with("/.devcontainer:/workspace/.devcontainer:ro")),
        "{case}: {volumes:?}"
    );
    assert_eq!(
        volumes
            .iter()
            .any(|v| v.ends_with("/.aibox-home:/workspace/.aibox-home:ro")),
        volumes.iter().any(|v| v.contains("/.aibox-home/")),
        "{case}: {volumes:?}"
    );
}

#[test]
fn docker_compose_accepts_every_case_and_reads_values_back_unchanged() {
    require_program("docker-compose", COMPOSE_HINT);
    for case in cases() {
        let files = render(&case.inputs()).unwrap();
        let dir = write_project(&case, &files);
        let project = aibox_devcontainer::project_name(&case.team);
        let out = run_ok(
            Command::new("docker-compose")
                .current_dir(dir.path().join(".devcontainer"))
                .env("HOME", "/home/tester")
                .env("AIBOX_TEST_FROM_HOST", "from the host")
                .args(["-p", &project])
                .args(compose_args(&files))
                .arg("config"),
        );
        let parsed: serde_norway::Value = serde_norway::from_str(&out).unwrap();
        let service = &parsed["services"][aibox_devcontainer::service_name(&case.team)];
        // The personal file names this checkout's container and labels it with the path.
        assert_eq!(
            service["container_name"].as_str(),
            Some(
                aibox_devcontainer::container_name(&case.team, &case.local, &case.checkout)
                    .as_str()
            ),
            "{}",
            case.name
        );
        assert_eq!(
            service["labels"]["aibox.checkout"]
                .as_str()
                .map(|v| v.replace("$$", "$")),
            Some(case.checkout.clone()),
            "{}",
            case.name
        );
        assert_eq!(
            service["init"],
            serde_norway::Value::Bool(true),
            "{}",
            case.name
        );
        // `config` prints literal `$` as `$$`; undo that to compare with the input.
        let env: BTreeMap<String, String> = service["environment"]
            .as_mapping()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().unwrap().to_owned(),
                            v.as_str().unwrap().replace("$$", "$"),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut expected: BTreeMap<String, String> = case.team.container.environment.clone();
        if let Some(tz) = &case.team.container.timezone {
            expected.insert("TZ".into(), tz.clone());
        }
        expected.extend(case.local.container.environment.clone());
        if case.team.network.egress == aibox_config::EgressMode::Allowlist {
            egress_as_compose_reads_it(&parsed, service, &mut expected);
        }
        // A value that is exactly `${NAME}` is the host's NAME.
        for value in expected.values_mut() {
            if value == "${AIBOX_TEST_FROM_HOST}" {
                "from the host".clone_into(value);
            }
        }
        assert_eq!(env, expected, "{}: environment differs", case.name);
        let volumes: Vec<&str> = service["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(
            volumes.iter().any(|v| v.ends_with(":/workspace:rw")),
            "{volumes:?}"
        );
        read_only_views(case.name, &volumes);
        if case.name == "full" {
            assert!(
                volumes.contains(&"/home/tester/.gitconfig:/home/dev/.gitconfig:ro"),
                "{volumes:?}"
            );
            assert!(
                volumes.contains(&"/srv/shared cache:/cache:rw"),
                "{volumes:?}"
            );
        }
    }
}

#[test]
fn podman_compose_turns_every_case_into_the_expected_podman_run() {
    require_program("podman-compose", COMPOSE_HINT);
    require_program("podman", COMPOSE_HINT);
    let _turn = PODMAN_COMPOSE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for case in cases() {
        let files = render(&case.inputs()).unwrap();
        let dir = write_project(&case, &files);
        let root = dir.path().to_str().unwrap();
        let project = aibox_devcontainer::project_name(&case.team);
        // podman-compose 1.0.3 has no `config`; `--dry-run up` prints the podman commands
        // it would run (it only inspects whether the image exists).
        let out = run_ok(
            Command::new("podman-compose")
                .current_dir(dir.path().join(".devcontainer"))
                .env("HOME", "/home/tester")
                .env("AIBOX_TEST_FROM_HOST", "from-the-host")
                .args(["--dry-run", "-p", &project])
                .args(compose_args(&files))
                .args(["up", "-d"]),
        );
        if case.name == "full" {
            assert!(out.contains("-e FROM_HOST=from-the-host "), "{out}");
        }
        // A multi-line value splits the printed command, so take the rest of the output.
        let n = case.name;
        let container = aibox_devcontainer::container_name(&case.team, &case.local, &case.checkout);
        remove_dry_run_leftovers(&project);
        // The agent's command (the egress proxy, when there is one, is started first).
        let agent = format!("podman run --name={container} ");
        let run = &out[out.find(&agent).unwrap_or_else(|| panic!("{out}"))..];
        for expected in [
            format!("--name={container} "),
            format!("--label aibox.checkout={} ", case.checkout),
            format!("--env-file {root}/.devcontainer/aibox-local.env "),
            format!("-v {root}:/workspace "),
            "-w /workspace ".to_owned(),
            "--init ".to_owned(),
            format!(
                " {} {}",
                aibox_devcontainer::image_name(&case.team),
                agent_command(&case)
            ),
            format!("--label aibox.project={project} "),
        ] {
            assert!(
                run.contains(&expected),
                "{n}: `{expected}` missing from {run}"
            );
        }
        assert!(
            !run.contains("--privileged") && !run.contains("--cap-add"),
            "{n}: {run}"
        );
        // In every mode the agent sees its own container's files read-only, so it cannot
        // change its network, the proxy's filter or the host-side `initializeCommand` for
        // the next start.
        let sealed_view = format!("-v {root}/.devcontainer:/workspace/.devcontainer:ro ");
        assert!(run.contains(&sealed_view), "{n}: {run}");
        for opt in &case.security_opt {
            assert!(run.contains(&format!("--security-opt {opt}")), "{n}: {run}");
        }
        if n == "full" {
            assert!(out.contains("-e PRICE=costs $5 or ${AMOUNT} "), "{out}");
            assert!(run.contains("-v /home/tester/notes:/notes:ro "), "{run}");
            assert!(run.contains(&format!("-v {root}/data:/data ")), "{run}");
            assert!(
                !run.contains("OVERRIDDEN=team"),
                "personal key leaked into compose: {run}"
            );
        }
    }
}

/// Personal bind mounts go only to the gitignored `docker-compose.local.yml`; the
/// committed Compose file never names them.
#[test]
fn personal_volumes_stay_out_of_the_committed_compose_file() {
    let mut case = Case::new("full", FULL);
    case.local = local(FULL_LOCAL);
    let files = render(&case.inputs()).unwrap();
    let committed = file(&files, ".devcontainer/docker-compose.yml");
    let personal = file(&files, ".devcontainer/docker-compose.local.yml");
    assert!(!committed.contains("/notes"), "{committed}");
    assert!(personal.contains("${HOME}/notes:/notes:ro"), "{personal}");
    validate_compose_yaml(personal).unwrap();
    insta::assert_snapshot!("full__compose_local", personal);
    let plain = render(&Case::new("minimal", MINIMAL).inputs()).unwrap();
    let empty = file(&plain, ".devcontainer/docker-compose.local.yml");
    validate_compose_yaml(empty).unwrap();
    // Its environment file lies beside it, below the folder every container made from
    // the committed file mounts read-only (a path from the workspace at large would be
    // writable in a container the Dev Containers tools started); no mount of its own.
    let sealed = "\".:/workspace/.devcontainer:ro\"";
    assert!(committed.contains(sealed), "{committed}");
    for text in [personal, empty] {
        assert!(
            text.contains("env_file:\n      - \"aibox-local.env\"\n"),
            "{text}"
        );
        assert!(!text.contains("/workspace/"), "{text}");
    }
    insta::assert_snapshot!("minimal__compose_local", empty);
}

/// The container's name and checkout label are per checkout: in the personal file only,
/// from a hash of the path unless `.aibox-local.toml` pins a name; the committed files
/// name no container, so every clone (and the Dev Containers CLI) commits the same bytes.
#[test]
fn the_container_is_named_per_checkout_unless_pinned() {
    let team = team(MINIMAL);
    let unpinned = LocalToml::default();
    let a = aibox_devcontainer::container_name(&team, &unpinned, "/src/a/demo");
    let b = aibox_devcontainer::container_name(&team, &unpinned, "/src/b/demo");
    assert_ne!(a, b, "two checkouts of one project");
    for name in [&a, &b] {
        let (project, hash) = name.rsplit_once('-').unwrap();
        assert_eq!(project, aibox_devcontainer::project_name(&team));
        assert_eq!(hash.len(), 8, "{name}");
        assert!(
            aibox_config::validate::is_compose_project_name(name),
            "{name}"
        );
    }
    assert_eq!(
        a,
        aibox_devcontainer::container_name(&team, &unpinned, "/src/a/demo"),
        "stable for one path"
    );
    let pinned = local("[container]\ncontainer_name = \"shared-box\"\n");
    assert_eq!(
        aibox_devcontainer::container_name(&team, &pinned, "/src/a/demo"),
        "shared-box"
    );

    let mut case = Case::new("minimal", MINIMAL);
    "/src/a/demo".clone_into(&mut case.checkout);
    let files_a = render(&case.inputs()).unwrap();
    "/src/b/demo".clone_into(&mut case.checkout);
    let files_b = render(&case.inputs()).unwrap();
    for path in [
        ".devcontainer/docker-compose.yml",
        ".devcontainer/devcontainer.json",
        ".devcontainer/Dockerfile",
    ] {
        let text = file(&files_a, path);
        assert_eq!(
            text,
            file(&files_b, path),
            "{path} differs between checkouts"
        );
        assert!(!text.contains("container_name"), "{path}: {text}");
        assert!(!text.contains("/src/a"), "{path}: {text}");
    }
    let local_b = file(&files_b, ".devcontainer/docker-compose.local.yml");
    assert!(
        local_b.contains(&format!("container_name: \"{b}\"")),
        "{local_b}"
    );
    assert!(
        local_b.contains("\"aibox.checkout\": \"/src/b/demo\""),
        "{local_b}"
    );
    case.local = pinned;
    let files = render(&case.inputs()).unwrap();
    let local_pinned = file(&files, ".devcontainer/docker-compose.local.yml");
    assert!(
        local_pinned.contains("container_name: \"shared-box\""),
        "{local_pinned}"
    );
    // The path label stays: a pinned name shared by two checkouts is still told apart.
    assert!(local_pinned.contains("/src/b/demo"), "{local_pinned}");
}

/// The default image source label names aibox's real repository (the workspace manifest's
/// `repository`), the default `FROM` is digest-pinned, and no placeholder address reaches a
/// generated file.
#[test]
fn default_files_name_the_real_repository_and_a_pinned_base_image() {
    let config = team(MINIMAL);
    let local = local("");
    let files = render(&Inputs::new(&config, &local, VERSION)).unwrap();
    let source = aibox_devcontainer::DEFAULT_IMAGE_SOURCE;
    assert!(source.starts_with("https://"), "{source}");
    for placeholder in ["example.invalid", "example.com", "example.org"] {
        assert!(!source.contains(placeholder), "{source}");
        for f in &files {
            let text = String::from_utf8_lossy(&f.contents);
            assert!(
                !text.contains(placeholder),
                "{} names {placeholder}",
                f.path
            );
        }
    }
    let dockerfile = files
        .iter()
        .find(|f| f.path == aibox_devcontainer::DOCKERFILE_PATH)
        .unwrap();
    let text = String::from_utf8_lossy(&dockerfile.contents);
    assert!(
        text.contains(&format!("org.opencontainers.image.source=\"{source}\"")),
        "{text}"
    );
    let from = format!("FROM {}\n", aibox_config::default_base_image());
    assert!(text.contains(&from), "{text}");
    assert!(from.contains("@sha256:"), "{from}");
}
