//! `aibox doctor`: the checks on real project trees (real `git`, a real apply), and the
//! redacted report bundle.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

use aibox_engine::doctor::{CheckStatus, DoctorOptions, DoctorReport, doctor, write_report};
use aibox_engine::updates::UpdateCheck;
use aibox_engine::{ApplyOptions, PlanOptions, apply};
use aibox_policy::Severity;
use aibox_runtime::DetectEnv;
use camino::{Utf8Path, Utf8PathBuf};

const BASE_TOML: &str =
    "[container]\nname = \"demo\"\nengine = \"podman\"\n\n[context]\nmode = \"harness-only\"\n";

struct Project {
    _dir: tempfile::TempDir,
    root: Utf8PathBuf,
    /// A PATH holding a stand-in `podman`, so engine detection is deterministic.
    bin: Utf8PathBuf,
}

impl Project {
    fn new(toml: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
        let root = base.join("project");
        let bin = base.join("bin");
        fs_err::create_dir_all(&root).unwrap();
        fs_err::create_dir_all(&bin).unwrap();
        let podman = bin.join("podman");
        // Like Podman without the project's container: `container inspect` says so.
        fs_err::write(
            &podman,
            "#!/bin/sh\nif [ \"$1 $2\" = \"container inspect\" ]; then\n  \
             echo \"Error: no such container $3\" >&2\n  exit 125\nfi\nexit 0\n",
        )
        .unwrap();
        fs_err::set_permissions(&podman, std::fs::Permissions::from_mode(0o755)).unwrap();
        fs_err::write(root.join("aibox.toml"), toml).unwrap();
        Self {
            _dir: dir,
            root,
            bin,
        }
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.root.join(rel);
        fs_err::create_dir_all(p.parent().unwrap()).unwrap();
        fs_err::write(p, text).unwrap();
    }

    fn apply(&self) {
        apply(&self.root, &ApplyOptions::default()).unwrap();
    }

    fn git(&self, args: &[&str]) {
        let status = Command::new("git")
            .arg("-C")
            .arg(self.root.as_str())
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    fn options(&self) -> DoctorOptions {
        DoctorOptions {
            cli_version: env!("CARGO_PKG_VERSION").to_owned(),
            detect: DetectEnv {
                path: Some(self.bin.as_str().into()),
                ..DetectEnv::default()
            },
            skip_engine: false,
            environment: vec![("LANG".to_owned(), "C.UTF-8".to_owned())],
            users: vec!["fakeuser".to_owned()],
            hosts: vec!["fakehost".to_owned()],
            cache_dir: None,
            update_check: UpdateCheck::Never,
            processkit: false,
            uv: aibox_engine::mcp_resolver::Resolver::Off,
        }
    }

    fn doctor(&self) -> DoctorReport {
        doctor(&self.root, &self.options()).unwrap()
    }
}

fn codes(report: &DoctorReport, severity: Severity) -> Vec<String> {
    report
        .by_severity(severity)
        .map(|f| f.code.clone())
        .collect()
}

fn status(report: &DoctorReport, check: &str) -> CheckStatus {
    report
        .checks
        .iter()
        .find(|c| c.name == check)
        .unwrap()
        .status
}

#[test]
fn a_freshly_applied_git_project_is_healthy() {
    let p = Project::new(BASE_TOML);
    p.git(&["init", "-q"]);
    p.apply();
    let report = p.doctor();
    assert_eq!(
        codes(&report, Severity::Error),
        Vec::<String>::new(),
        "{}",
        report.render_human()
    );
    assert_eq!(
        codes(&report, Severity::Warning),
        Vec::<String>::new(),
        "{}",
        report.render_human()
    );
    for check in [
        "config",
        "engine",
        "sync",
        "local-state",
        "container-policy",
        "secrets",
        "version",
    ] {
        assert_eq!(status(&report, check), CheckStatus::Ok, "{check}");
    }
    assert_eq!(report.exit_code(), 0);
    assert!(report.redacted);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["redacted"], true);
    let human = report.render_human().replace(p.bin.as_str(), "[BIN]");
    insta::assert_snapshot!("healthy_human", human);
}

#[test]
fn out_of_sync_and_missing_lock_are_reported() {
    let p = Project::new(BASE_TOML);
    let report = p.doctor();
    assert!(codes(&report, Severity::Warning).contains(&"aibox::doctor::out_of_sync".to_owned()));
    assert!(codes(&report, Severity::Info).contains(&"aibox::doctor::no_lock".to_owned()));
    assert_eq!(status(&report, "local-state"), CheckStatus::Skipped);
}

/// A host added to the allowlist after the checkout's last apply (as an agent in the
/// container could add one) is a warning until an apply approves it.
#[test]
fn more_reach_than_approved_is_a_warning() {
    let p = Project::new(&format!(
        "{BASE_TOML}\n[network]\negress = \"allowlist\"\nallow = [\"pypi.org\"]\n"
    ));
    p.apply();
    let pending = |report: &DoctorReport| {
        report
            .by_severity(Severity::Warning)
            .find(|f| f.code == "aibox::doctor::reach_not_approved")
            .map(|f| f.message.clone())
    };
    assert_eq!(pending(&p.doctor()), None);
    p.write(
        ".aibox-local.toml",
        "[network]\nallow = [\"exfil.example\"]\n",
    );
    let message = pending(&p.doctor()).expect("a warning");
    assert!(
        message.contains("host `exfil.example`, from .aibox-local.toml [network] allow"),
        "{message}"
    );
    apply(
        &p.root,
        &ApplyOptions {
            approve_reach: true,
            ..ApplyOptions::default()
        },
    )
    .unwrap();
    assert_eq!(pending(&p.doctor()), None);
}

#[test]
fn invalid_configuration_is_an_error_and_dependent_checks_skip() {
    let p = Project::new("[container]\nname = \"demo\"\nnot_a_key = 1\n");
    let report = p.doctor();
    assert_eq!(
        codes(&report, Severity::Error),
        ["aibox::doctor::config_invalid"]
    );
    assert_eq!(status(&report, "sync"), CheckStatus::Skipped);
    assert_eq!(report.exit_code(), 1);
}

#[test]
fn tracked_or_unignored_local_state_is_an_error() {
    let p = Project::new(BASE_TOML);
    p.git(&["init", "-q"]);
    p.write(
        ".aibox-local.toml",
        "[container.environment]\nLANG = \"C\"\n",
    );
    p.git(&["add", ".aibox-local.toml"]);
    let report = p.doctor();
    let errors = codes(&report, Severity::Error);
    assert!(
        errors.contains(&"aibox::doctor::local_state_tracked".to_owned()),
        "{errors:?}"
    );
    assert!(
        errors.contains(&"aibox::doctor::local_state_not_ignored".to_owned()),
        "{errors:?}"
    );
}

/// One `git check-ignore` and one `git ls-files` answer for every local-state path:
/// each path is judged on its own (ignored ones pass, the others are named), and a file
/// tracked below a directory entry is reported under that entry, a look-alike sibling
/// not at all.
#[test]
fn local_state_is_judged_per_path_from_one_git_answer() {
    let p = Project::new(BASE_TOML);
    p.git(&["init", "-q"]);
    let paths: Vec<&str> = aibox_config::LOCAL_STATE_PATHS
        .iter()
        .copied()
        .filter(|l| !l.contains('*'))
        .collect();
    // Every path ignored except the first and `.aibox-home/`.
    let unignored = [paths[0], ".aibox-home/"];
    let ignore: Vec<String> = paths
        .iter()
        .filter(|l| !unignored.contains(l))
        .map(|l| format!("/{l}"))
        .collect();
    let ignore = ignore.join("\n") + "\n";
    p.write(".gitignore", &ignore);
    p.write(".aibox-home/cache/state.db", "x");
    p.write(".aibox-homes/keep.txt", "not local state");
    p.git(&[
        "add",
        "-f",
        ".aibox-home/cache/state.db",
        ".aibox-homes/keep.txt",
    ]);
    let report = p.doctor();
    let messages = |code: &str| -> Vec<String> {
        report
            .by_severity(Severity::Error)
            .filter(|f| f.code == code)
            .map(|f| f.message.clone())
            .collect()
    };
    let not_ignored = messages("aibox::doctor::local_state_not_ignored");
    assert_eq!(not_ignored.len(), 2, "{not_ignored:?}");
    for path in unignored {
        assert!(
            not_ignored.iter().any(|m| m.contains(&format!("`{path}`"))),
            "{path}: {not_ignored:?}"
        );
    }
    let tracked = messages("aibox::doctor::local_state_tracked");
    assert_eq!(tracked.len(), 1, "{tracked:?}");
    assert!(tracked[0].contains("`.aibox-home/`"), "{tracked:?}");
}

/// Private notes at any depth of `context/` (`context/**/private/`) are local state: a
/// tracked one is named by its own path (once, also where a plain entry covers it), and
/// a look-alike folder is not.
#[test]
fn tracked_private_notes_at_any_depth_are_reported() {
    let p = Project::new(BASE_TOML);
    p.git(&["init", "-q"]);
    let files = [
        "context/team/private/notes.md",
        "context/a/b/private/c/d.md",
        "context/private/top.md",
        "context/team/privateer/notes.md",
        "context/team/private.md",
    ];
    for f in files {
        p.write(f, "x");
    }
    let mut add = vec!["add", "-f"];
    add.extend(files);
    p.git(&add);
    let report = p.doctor();
    let mut tracked: Vec<String> = report
        .by_severity(Severity::Error)
        .filter(|f| f.code == "aibox::doctor::local_state_tracked")
        .map(|f| f.message.clone())
        .collect();
    tracked.sort();
    assert_eq!(tracked.len(), 3, "{tracked:?}");
    assert!(
        tracked[0].contains("`context/a/b/private/c/d.md`"),
        "{tracked:?}"
    );
    assert!(tracked[1].contains("`context/private/`"), "{tracked:?}");
    assert!(
        tracked[2].contains("`context/team/private/notes.md`"),
        "{tracked:?}"
    );
}

/// The personal file is where tokens go: `config set --local` writes it 0600 (also over
/// a file someone made 0644), and doctor warns about one others can read.
#[test]
fn personal_files_readable_by_others_are_reported_and_config_set_makes_them_private() {
    let p = Project::new(BASE_TOML);
    p.write(
        ".aibox-local.toml",
        "[container.environment]\nLANG = \"C\"\n",
    );
    let local = p.root.join(".aibox-local.toml");
    fs_err::set_permissions(&local, std::fs::Permissions::from_mode(0o644)).unwrap();
    let report = p.doctor();
    let finding = report
        .findings
        .iter()
        .find(|f| f.code == "aibox::doctor::personal_file_readable")
        .unwrap_or_else(|| panic!("{:#?}", report.findings));
    assert_eq!(finding.severity, Severity::Warning);
    assert!(finding.message.contains("(mode 0644)"), "{finding:?}");
    assert!(
        finding.remedy.contains("chmod 600 .aibox-local.toml"),
        "{finding:?}"
    );

    aibox_engine::config_edit::config_set(
        &p.root,
        aibox_config::edit::ConfigFile::Local,
        "container.environment.LANG",
        "C.UTF-8",
    )
    .unwrap();
    let mode = fs_err::metadata(&local).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let report = p.doctor();
    assert!(
        !report
            .findings
            .iter()
            .any(|f| f.code == "aibox::doctor::personal_file_readable"),
        "{:#?}",
        report.findings
    );
    // A new personal file is created private too.
    fs_err::remove_file(&local).unwrap();
    aibox_engine::config_edit::config_set(
        &p.root,
        aibox_config::edit::ConfigFile::Local,
        "container.environment.LANG",
        "C",
    )
    .unwrap();
    let mode = fs_err::metadata(&local).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn override_relaxations_need_consent_in_doctor_too() {
    let override_text = "services:\n  demo:\n    security_opt:\n      - seccomp=unconfined\n    cap_add: [SYS_ADMIN]\n";
    let p = Project::new(BASE_TOML);
    p.apply();
    p.write(".devcontainer/docker-compose.override.yml", override_text);
    let report = p.doctor();
    let found: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.file == ".devcontainer/docker-compose.override.yml")
        .map(|f| (f.code.as_str(), f.severity))
        .collect();
    assert_eq!(
        found,
        [
            ("aibox::policy::cap_add", Severity::Error),
            ("aibox::policy::seccomp_unconfined", Severity::Error)
        ]
    );

    let consented = format!(
        "{BASE_TOML}\n[ai]\nharnesses = [\"codex\"]\n\n[security]\ncodex_sandbox = \"unconfined\"\nacknowledge_seccomp_unconfined = true\n\n[[security.exceptions]]\noption = \"cap_add:SYS_ADMIN\"\nreason = \"fixture\"\n"
    );
    let p = Project::new(&consented);
    p.apply();
    p.write(".devcontainer/docker-compose.override.yml", override_text);
    let report = p.doctor();
    assert!(!report.has_errors(), "{}", report.render_human());
    assert_eq!(report.seccomp_posture.as_deref(), Some("unconfined"));
    let options: Vec<&str> = report
        .exceptions
        .iter()
        .map(|e| e.option.as_str())
        .collect();
    assert_eq!(
        options,
        ["acknowledge_seccomp_unconfined", "cap_add:SYS_ADMIN"]
    );
    assert!(codes(&report, Severity::Info).contains(&"aibox::doctor::exception".to_owned()));
    assert!(
        report
            .render_human()
            .contains("Active security exceptions:")
    );
}

#[test]
fn missing_seccomp_consent_is_reported() {
    let toml = format!(
        "{BASE_TOML}\n[ai]\nharnesses = [\"codex\"]\n\n[security]\ncodex_sandbox = \"unconfined\"\n"
    );
    let p = Project::new(&toml);
    let report = p.doctor();
    assert!(codes(&report, Severity::Error).contains(&"aibox::doctor::seccomp_consent".to_owned()));
}

#[test]
fn version_skew_warns() {
    let p = Project::new(BASE_TOML);
    let options = ApplyOptions {
        plan: PlanOptions {
            aibox_version: "9.9.0".to_owned(),
            ..PlanOptions::default()
        },
        ..ApplyOptions::default()
    };
    apply(&p.root, &options).unwrap();
    let report = p.doctor();
    let skew: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.code == "aibox::doctor::version_skew")
        .collect();
    assert_eq!(skew.len(), 1);
    assert!(skew[0].message.contains("9.9.0"));
}

#[test]
fn committed_secrets_are_errors() {
    let p = Project::new(BASE_TOML);
    p.apply();
    p.write(
        ".devcontainer/docker-compose.override.yml",
        "services:\n  demo:\n    environment:\n      - GH_TOKEN=ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000\n",
    );
    let report = p.doctor();
    let secret = secret_findings(&report);
    assert_eq!(secret.len(), 1);
    assert_eq!(secret[0].severity, Severity::Error);
    assert_eq!(secret[0].line, Some(4));
}

/// A Compose file listed only by another dev container configuration is committed like
/// the override: doctor reports a literal token there (it said ok while the same line in
/// the override was an error).
#[test]
fn a_secret_in_a_compose_file_of_another_configuration_is_an_error() {
    let p = Project::new(BASE_TOML);
    p.apply();
    p.write(
        ".devcontainer/alt/devcontainer.json",
        r#"{"dockerComposeFile": ["alt.yml"], "service": "eb1"}"#,
    );
    let token = format!("ghp_{}", "x".repeat(36));
    p.write(
        ".devcontainer/alt/alt.yml",
        &format!("services:\n  eb1:\n    image: debian:bookworm\n    environment:\n      - GH_TOKEN={token}\n"),
    );
    let report = p.doctor();
    let secret = secret_findings(&report);
    assert_eq!(secret.len(), 1, "{secret:#?}");
    assert_eq!(secret[0].file, ".devcontainer/alt/alt.yml");
    assert_eq!(secret[0].severity, Severity::Error);
    assert_eq!(secret[0].line, Some(5));
    assert_eq!(status(&report, "container-policy"), CheckStatus::Error);
}

/// A literal token in an entry added by hand to a committed harness file is found by
/// doctor's secret scan too (it said "ok secrets" while apply refused the file).
#[test]
fn a_secret_in_a_hand_added_harness_entry_is_an_error() {
    let p = Project::new(&format!("{BASE_TOML}\n[ai]\nharnesses = [\"claude\"]\n"));
    p.apply();
    p.write(
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"hand\": {\n      \"command\": \"h\",\n      \"env\": \
         { \"GH_TOKEN\": \"ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000\" }\n    }\n  }\n}\n",
    );
    let report = p.doctor();
    let secret: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.code.starts_with("aibox::policy::secret") && f.file == ".mcp.json")
        .collect();
    assert_eq!(secret.len(), 1, "{}", report.render_human());
    assert_eq!(secret[0].severity, Severity::Error);
    assert!(!report.render_human().contains("ghp_FAKE"));
}

/// Every planted value; none may appear in the bundle.
const PLANTED: &[&str] = &[
    "ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE1111",
    "sk-ant-api03-FAKEFAKEFAKEFAKEFAKE2222",
    "personal-FAKE-value-3333",
    "sk-proj-FAKEFAKEFAKEFAKEFAKE4444",
    "another-personal-FAKE-5555",
    "ghp_ENVFAKEENVFAKEENVFAKEENVFAKE6666",
    "FAKEPASS7777",
    "env-only-FAKE-8888",
    "AKIAFAKEFAKEFAKE9999",
    "fakeuser",
    "fakehost",
];

#[test]
fn planted_secrets_never_reach_the_report_bundle() {
    let toml = format!(
        "{BASE_TOML}\n[[ai.mcp.servers]]\nname = \"github\"\ncommand = \"github-mcp\"\nenv = {{ GITHUB_TOKEN = \"{}\" }}\n",
        PLANTED[0]
    );
    let p = Project::new(&toml);
    p.git(&["init", "-q"]);
    p.write(
        ".aibox-local.toml",
        &format!(
            "[container.environment]\nANTHROPIC_API_KEY = \"{}\"\nMY_PERSONAL = \"{}\"\n",
            PLANTED[1], PLANTED[2]
        ),
    );
    p.write(
        ".devcontainer/aibox-local.env",
        &format!("OPENAI_API_KEY={}\nPLAIN=\"{}\"\n", PLANTED[3], PLANTED[4]),
    );
    p.write(
        ".devcontainer/docker-compose.override.yml",
        &format!(
            "# written on fakehost by fakeuser\nservices:\n  demo:\n    volumes:\n      - /home/fakeuser/data:/data\n    environment:\n      - AWS_KEY={}\n",
            PLANTED[8]
        ),
    );
    let mut options = p.options();
    options.environment = vec![
        ("GH_TOKEN".to_owned(), PLANTED[5].to_owned()),
        (
            "DOCKER_HOST".to_owned(),
            format!("tcp://admin:{}@fakehost:2376", PLANTED[6]),
        ),
        ("MY_SERVICE_PASSWORD".to_owned(), PLANTED[7].to_owned()),
        ("HOME".to_owned(), "/home/fakeuser".to_owned()),
        ("USER".to_owned(), "fakeuser".to_owned()),
    ];
    let report = doctor(&p.root, &options).unwrap();
    // The secrets were found (and reported without their values).
    assert!(report.has_errors());
    let out = p.root.parent().unwrap().join("report.json");
    write_report(&p.root, &report, &out).unwrap();
    let bundle = fs_err::read_to_string(&out).unwrap();
    let human = report.render_human();
    let json = serde_json::to_string(&report).unwrap();
    for planted in PLANTED {
        assert!(
            !bundle.contains(planted),
            "{planted} survived in the bundle:\n{bundle}"
        );
        assert!(
            !human.contains(planted),
            "{planted} survived in the human output"
        );
        assert!(
            !json.contains(planted),
            "{planted} survived in the JSON output"
        );
    }
    let parsed: serde_json::Value = serde_json::from_str(&bundle).unwrap();
    assert_eq!(parsed["redacted"], true);
    assert_eq!(parsed["report"]["redacted"], true);
    // The bundle is useful: it has the files and environment names, redacted.
    assert!(
        parsed["files"]["aibox.toml"]
            .as_str()
            .unwrap()
            .contains("GITHUB_TOKEN = \"***\"")
    );
    assert!(
        parsed["files"][".devcontainer/aibox-local.env"]
            .as_str()
            .unwrap()
            .contains("OPENAI_API_KEY=***")
    );
    let names = parsed["environment"]["names"].as_array().unwrap();
    assert!(names.iter().any(|n| n == "GH_TOKEN"));
    assert!(bundle.contains("/home/<user>"));
    let mode = fs_err::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn a_missing_root_is_an_error() {
    let err = doctor(
        Utf8Path::new("/nonexistent/aibox-doctor-test"),
        &DoctorOptions::default(),
    );
    assert!(err.is_err());
}

#[test]
fn an_unwritable_report_path_is_a_clear_error() {
    let p = Project::new(BASE_TOML);
    let report = p.doctor();
    let err = write_report(
        &p.root,
        &report,
        Utf8Path::new("/nonexistent/dir/report.json"),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("/nonexistent/dir/report.json"), "{text}");
}

#[test]
fn a_corrupt_lock_is_an_error() {
    let p = Project::new(BASE_TOML);
    p.write("aibox.lock", "this is = not [a lock\n");
    let report = p.doctor();
    assert!(codes(&report, Severity::Error).contains(&"aibox::doctor::lock_invalid".to_owned()));
}

/// Codex on Docker with the engine's default profile: doctor reports the same refusal as
/// apply, and the sandbox probe says why it did not run (no container, here no Docker).
#[test]
fn codex_on_docker_is_reported_and_the_probe_says_not_checked() {
    let toml = BASE_TOML.replace("engine = \"podman\"", "engine = \"docker\"")
        + "\n[ai]\nharnesses = [\"codex\"]\n";
    let p = Project::new(&toml);
    let report = p.doctor();
    let errors = codes(&report, Severity::Error);
    assert!(
        errors.contains(&"aibox::doctor::seccomp_consent".to_owned()),
        "{}",
        report.render_human()
    );
    let text = report.render_human();
    assert!(text.contains("acknowledge_seccomp_profile"), "{text}");
    assert!(text.contains("acknowledge_seccomp_unconfined"), "{text}");
    assert!(
        codes(&report, Severity::Info)
            .contains(&"aibox::doctor::codex_sandbox_unchecked".to_owned()),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["codex_sandbox"]["status"], "not-checked", "{json}");
    assert_eq!(json["codex_sandbox"]["posture"], "engine-default", "{json}");
    assert_eq!(
        json["codex_sandbox"]["probe"],
        "unshare --user --map-root-user --mount true"
    );
    // On Podman the same project has no seccomp finding at all.
    let podman = Project::new(&format!("{BASE_TOML}\n[ai]\nharnesses = [\"codex\"]\n"));
    let report = podman.doctor();
    assert!(
        !codes(&report, Severity::Error).contains(&"aibox::doctor::seccomp_consent".to_owned()),
        "{}",
        report.render_human()
    );
    // Without Codex there is no probe: `codex_sandbox` is null in the JSON (the key stays,
    // so the shape is the same on every run).
    let plain = Project::new(BASE_TOML).doctor();
    assert!(
        serde_json::to_value(&plain)
            .unwrap()
            .get("codex_sandbox")
            .is_some_and(serde_json::Value::is_null)
    );
}

#[test]
fn landlock_is_a_deprecation_warning() {
    let toml = format!(
        "{BASE_TOML}\n[ai]\nharnesses = [\"codex\"]\n\n[security]\ncodex_sandbox = \"landlock\"\n"
    );
    let report = Project::new(&toml).doctor();
    assert!(
        codes(&report, Severity::Warning).contains(&"aibox::doctor::seccomp_deprecated".to_owned()),
        "{}",
        report.render_human()
    );
    assert_eq!(report.seccomp_posture.as_deref(), Some("engine-default"));
}

/// The engine the gate judges: `AIBOX_ENGINE` over the file; `podman`/`docker` as written
/// (nothing probed); `auto` by detection, `Unknown` when nothing is found.
#[test]
fn the_gate_judges_the_engine_the_runtime_would_pick() {
    use aibox_config::EngineChoice;
    use aibox_engine::codex_sandbox::target_engine;
    use aibox_policy::TargetEngine;
    let p = Project::new(BASE_TOML);
    let empty = tempfile::tempdir().unwrap();
    let env = |path: &Utf8Path, engine: Option<&str>| DetectEnv {
        path: Some(path.as_str().into()),
        engine_override: engine.map(ToOwned::to_owned),
        ..DetectEnv::default()
    };
    let nothing = Utf8Path::from_path(empty.path()).unwrap();
    assert_eq!(
        target_engine(EngineChoice::Docker, &env(nothing, None)),
        TargetEngine::Docker
    );
    assert_eq!(
        target_engine(EngineChoice::Podman, &env(nothing, None)),
        TargetEngine::Podman
    );
    assert_eq!(
        target_engine(EngineChoice::Auto, &env(nothing, None)),
        TargetEngine::Unknown
    );
    assert_eq!(
        target_engine(EngineChoice::Auto, &env(&p.bin, None)),
        TargetEngine::Podman
    );
    assert_eq!(
        target_engine(EngineChoice::Podman, &env(nothing, Some("docker"))),
        TargetEngine::Docker
    );
    assert_eq!(
        target_engine(EngineChoice::Docker, &env(nothing, Some("podman"))),
        TargetEngine::Podman
    );
}

/// A hand edit of a generated file is an error that names `--force` and its backup;
/// doctor never advises a plain `apply` that would overwrite the edit.
#[test]
fn a_hand_edited_generated_file_is_an_error_not_an_invitation_to_apply() {
    let p = Project::new(BASE_TOML);
    p.git(&["init", "-q"]);
    p.apply();
    let dockerfile = p.root.join(".devcontainer/Dockerfile");
    let edited = format!(
        "{}RUN echo my tweak\n",
        fs_err::read_to_string(&dockerfile).unwrap()
    );
    fs_err::write(&dockerfile, &edited).unwrap();
    let report = p.doctor();
    let finding = report
        .by_severity(Severity::Error)
        .find(|f| f.code == "aibox::doctor::plan_failed")
        .unwrap_or_else(|| panic!("{}", report.render_human()));
    assert!(
        finding.message.contains("aibox::apply::edited_file"),
        "{finding:?}"
    );
    assert!(finding.remedy.contains("--force"), "{finding:?}");
    assert_eq!(fs_err::read_to_string(&dockerfile).unwrap(), edited);
}

/// Settings that change nothing are a visible warning at `apply` and a doctor finding:
/// processkit mode without a source, skill selection in harness-only mode, and
/// `[ai.execution]`, which no harness file receives yet.
#[test]
fn settings_without_effect_are_apply_warnings_and_doctor_findings() {
    let cases = [
        (
            "[container]\nname = \"demo\"\nengine = \"podman\"\n\n[context]\nmode = \"processkit\"\n",
            "neither [processkit] `version` nor `source` is set",
        ),
        (
            "[container]\nname = \"demo\"\nengine = \"podman\"\n\n[context]\nmode = \"harness-only\"\n\n\
             [skills]\ninclude = [\"research\"]\n",
            "no effect in context mode `harness-only`",
        ),
        (
            "[container]\nname = \"demo\"\nengine = \"podman\"\n\n[context]\nmode = \"harness-only\"\n\n\
             [ai]\nharnesses = [\"codex\"]\n\n[ai.execution]\nfilesystem = \"workspace-write\"\n\
             approval = \"on-request\"\n",
            "[ai.execution] filesystem, approval is not applied",
        ),
    ];
    for (toml, needle) in cases {
        let p = Project::new(toml);
        p.git(&["init", "-q"]);
        let report = apply(&p.root, &ApplyOptions::default()).unwrap();
        assert!(
            report.warnings.iter().any(|w| w.contains(needle)),
            "{:?}",
            report.warnings
        );
        let doctor = p.doctor();
        assert!(
            doctor
                .by_severity(Severity::Warning)
                .any(|f| f.code == "aibox::doctor::apply_warning" && f.message.contains(needle)),
            "{}",
            doctor.render_human()
        );
        assert_ne!(
            status(&doctor, "sync"),
            CheckStatus::Ok,
            "{}",
            doctor.render_human()
        );
    }
}

/// A loopback releases feed answering GitHub's `releases/latest` with `tag`.
fn feed(tag: &str) -> aibox_test_support::http::Server {
    let server = aibox_test_support::http::Server::start().unwrap();
    server.route(
        FEED_PATH,
        aibox_test_support::http::Route::ok(format!(
            r#"{{"tag_name":"{tag}","html_url":"https://github.com/projectious-work/aibox/releases/tag/{tag}","draft":false,"prerelease":false,"assets":[{{"name":"aibox-x86_64-unknown-linux-gnu"}}]}}"#
        )),
    );
    server
}

const FEED_PATH: &str = "/repos/projectious-work/aibox/releases/latest";

/// A feed where nothing listens: port 1, which no test binds. A port taken from a
/// listener bound and dropped again was free for the next server any test started, and
/// the "offline" feed then answered now and then.
const CLOSED: &str = "http://127.0.0.1:1";

fn with_feed(p: &Project, api: &str, extra: &[(&str, &str)], check: UpdateCheck) -> DoctorReport {
    // A fresh cache directory each time: every unasked check here goes to the feed.
    let cache = tempfile::tempdir().unwrap();
    with_feed_cached(
        p,
        api,
        extra,
        check,
        &Utf8PathBuf::from_path_buf(cache.path().to_owned()).unwrap(),
    )
}

fn with_feed_cached(
    p: &Project,
    api: &str,
    extra: &[(&str, &str)],
    check: UpdateCheck,
    cache: &Utf8PathBuf,
) -> DoctorReport {
    let mut options = p.options();
    options.update_check = check;
    options.cache_dir = Some(cache.clone());
    options
        .environment
        .push(("AIBOX_GITHUB_API".to_owned(), api.to_owned()));
    for (k, v) in extra {
        options.environment.push(((*k).to_owned(), (*v).to_owned()));
    }
    doctor(&p.root, &options).unwrap()
}

/// The secret-scan findings of `report`.
fn secret_findings(report: &DoctorReport) -> Vec<&aibox_policy::Finding> {
    report
        .findings
        .iter()
        .filter(|f| f.code.starts_with("aibox::policy::secret"))
        .collect()
}

/// The update finding of `report`; without one, the report is the failure's message.
fn expect_update(report: &DoctorReport) -> &aibox_policy::Finding {
    update_finding(report).unwrap_or_else(|| panic!("{}", report.render_human()))
}

fn update_finding(report: &DoctorReport) -> Option<&aibox_policy::Finding> {
    report.findings.iter().find(|f| {
        f.code.starts_with("aibox::doctor::update") || f.code.ends_with("unsupported_version")
    })
}

#[test]
fn a_newer_release_line_is_reported_with_the_support_policy() {
    let p = Project::new(BASE_TOML);
    p.apply();
    let server = feed("v99.0.0");
    let report = with_feed(&p, &server.url(""), &[], UpdateCheck::Auto);
    let f = expect_update(&report);
    assert_eq!(f.code, "aibox::doctor::unsupported_version");
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.message.contains("aibox 99.0.0 is out"), "{}", f.message);
    assert!(f.message.contains("gets no more fixes"), "{}", f.message);
    assert!(f.remedy.contains("install.sh"), "{}", f.remedy);
    assert_eq!(status(&report, "updates"), CheckStatus::Warning);
    // A warning: doctor still exits 0.
    assert_eq!(report.exit_code(), 0);
    assert_eq!(server.hit_count(FEED_PATH), 1);

    // A newer patch on the running line: fixes this version lacks.
    let (major, rest) = env!("CARGO_PKG_VERSION").split_once('.').unwrap();
    let (minor, patch) = rest.split_once('.').unwrap();
    let next = format!("v{major}.{minor}.{}", patch.parse::<u64>().unwrap() + 1);
    let server = feed(&next);
    let report = with_feed(&p, &server.url(""), &[], UpdateCheck::Auto);
    let f = expect_update(&report);
    assert_eq!(f.code, "aibox::doctor::update_available");
    assert!(
        f.message.contains("carries fixes for your"),
        "{}",
        f.message
    );

    // The running version is the newest: the check passes quietly.
    let server = feed(&format!("v{}", env!("CARGO_PKG_VERSION")));
    let report = with_feed(&p, &server.url(""), &[], UpdateCheck::Auto);
    assert!(update_finding(&report).is_none());
    assert_eq!(status(&report, "updates"), CheckStatus::Ok);
}

#[test]
fn the_feed_is_not_asked_in_ci_or_when_opted_out_unless_asked_and_offline_is_silent() {
    let p = Project::new(BASE_TOML);
    p.apply();
    let server = feed("v99.0.0");
    for extra in [[("CI", "true")], [("AIBOX_NO_UPDATE_CHECK", "1")]] {
        let report = with_feed(&p, &server.url(""), &extra, UpdateCheck::Auto);
        assert_eq!(status(&report, "updates"), CheckStatus::Skipped);
        assert!(update_finding(&report).is_none());
    }
    let report = with_feed(&p, &server.url(""), &[], UpdateCheck::Never);
    assert_eq!(status(&report, "updates"), CheckStatus::Skipped);
    assert_eq!(server.hit_count(FEED_PATH), 0);
    // Asked explicitly, CI does not stop it.
    let report = with_feed(&p, &server.url(""), &[("CI", "true")], UpdateCheck::Always);
    expect_update(&report);
    assert_eq!(server.hit_count(FEED_PATH), 1);
    // Offline (nothing listens) or a feed that is not a release: a skip, never a finding.
    let closed = CLOSED.to_owned();
    let bad = aibox_test_support::http::Server::start().unwrap();
    bad.route(
        FEED_PATH,
        aibox_test_support::http::Route::ok("<html>rate limited</html>"),
    );
    for api in [closed, bad.url("")] {
        let report = with_feed(&p, &api, &[], UpdateCheck::Always);
        assert_eq!(status(&report, "updates"), CheckStatus::Skipped, "{api}");
        assert!(update_finding(&report).is_none());
        assert_eq!(report.summary.warnings, 0, "{}", report.render_human());
    }
}

/// An unasked check goes to the feed at most once a day: the answer (or the failure) is
/// recorded in the user's cache directory and reused until it is a day old; a check asked
/// for (`--check-updates`) always goes to the feed.
#[test]
fn unasked_update_checks_ask_the_feed_once_a_day() {
    let p = Project::new(BASE_TOML);
    p.apply();
    let server = feed("v99.0.0");
    let dir = tempfile::tempdir().unwrap();
    let cache = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    let run = |api: &str, check| with_feed_cached(&p, api, &[], check, &cache);
    for _ in 0..3 {
        let report = run(&server.url(""), UpdateCheck::Auto);
        let f = expect_update(&report);
        assert_eq!(f.code, "aibox::doctor::unsupported_version");
    }
    assert_eq!(server.hit_count(FEED_PATH), 1);
    let record = cache.join(aibox_engine::updates::CHECK_RECORD);
    assert!(record.is_file());

    // A day later the record is stale: asked again.
    let text = fs_err::read_to_string(&record).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let day_ago = json["checked"].as_u64().unwrap() - 24 * 60 * 60;
    let mut older = json.clone();
    older["checked"] = day_ago.into();
    fs_err::write(&record, older.to_string()).unwrap();
    expect_update(&run(&server.url(""), UpdateCheck::Auto));
    assert_eq!(server.hit_count(FEED_PATH), 2);

    // Asked for, the feed is always asked.
    expect_update(&run(&server.url(""), UpdateCheck::Always));
    assert_eq!(server.hit_count(FEED_PATH), 3);

    // Another feed is not answered from this one's record; a damaged record is asked past.
    let other = feed("v98.0.0");
    let report = run(&other.url(""), UpdateCheck::Auto);
    assert!(update_finding(&report).unwrap().message.contains("98.0.0"));
    assert_eq!(other.hit_count(FEED_PATH), 1);
    fs_err::write(&record, "{not json").unwrap();
    expect_update(&run(&other.url(""), UpdateCheck::Auto));
    assert_eq!(other.hit_count(FEED_PATH), 2);

    // A failure is recorded too: an offline machine waits for the forge once a day.
    let first = run(CLOSED, UpdateCheck::Auto);
    assert_eq!(status(&first, "updates"), CheckStatus::Skipped);
    let again = run(CLOSED, UpdateCheck::Auto);
    let why = again
        .checks
        .iter()
        .find(|c| c.name == "updates")
        .and_then(|c| c.skipped_because.clone())
        .unwrap();
    assert!(why.contains("asked less than a day ago"), "{why}");
    // Said once, not once per layer of the recorded error.
    assert_eq!(
        why.matches("cannot read the releases feed").count(),
        1,
        "{why}"
    );
    assert_eq!(again.summary.warnings, 0, "{}", again.render_human());
}

/// `doctor` plans once: the sync check and the MCP-servers check share the plan. With an
/// engine but no running container the MCP check gets as far as starting the server (it
/// planned a second time for that); without an engine it is skipped before.
#[test]
fn doctor_plans_once_with_or_without_an_engine() {
    let p = Project::new(&format!(
        "{BASE_TOML}\n[ai]\nharnesses = [\"claude\"]\n\n[[ai.mcp.servers]]\nname = \"tool\"\n\
         command = \"tool-mcp\"\n"
    ));
    p.apply();
    for (skip_engine, why) in [
        (false, "no running container"),
        (true, "skipped by the caller"),
    ] {
        let options = DoctorOptions {
            skip_engine,
            ..p.options()
        };
        let before = aibox_engine::plans_made();
        let report = doctor(&p.root, &options).unwrap();
        assert_eq!(
            aibox_engine::plans_made() - before,
            1,
            "skip_engine {skip_engine}"
        );
        assert_eq!(
            status(&report, "sync"),
            CheckStatus::Ok,
            "{}",
            report.render_human()
        );
        let mcp = report
            .checks
            .iter()
            .find(|c| c.name == "mcp-servers")
            .unwrap();
        assert_eq!(mcp.status, CheckStatus::Skipped);
        let because = mcp.skipped_because.as_deref().unwrap_or_default();
        assert!(because.contains(why), "{because}");
    }
    // `mcp list` plans once too (the processkit servers are the plan's).
    let before = aibox_engine::plans_made();
    let list = aibox_engine::mcp_list(&p.root).unwrap();
    assert_eq!(aibox_engine::plans_made() - before, 1);
    assert!(list.servers.iter().any(|s| s.name == "tool"));
}

/// A stand-in `podman` that logs every call to `calls.log` beside it; `container` is the
/// `container inspect` answer for the project's container (`None`: there is none).
fn logging_podman(p: &Project, container: Option<&str>) -> Utf8PathBuf {
    let log = p.bin.join("calls.log");
    let answer = match container {
        Some(json) => format!("  echo '{json}'\n  exit 0\n"),
        None => "  echo \"Error: no such container $3\" >&2\n  exit 125\n".to_owned(),
    };
    fs_err::write(
        p.bin.join("podman"),
        format!(
            "#!/bin/sh\necho \"$*\" >> '{log}'\n\
             if [ \"$1 $2\" = \"container inspect\" ]; then\n{answer}fi\n\
             if [ \"$1 $2\" = \"image inspect\" ]; then\n  \
             echo \"Error: no such image $3\" >&2\n  exit 125\nfi\nexit 0\n"
        ),
    )
    .unwrap();
    log
}

/// The `container inspect` answer for the project's own container (this checkout's
/// labels) in the engine state `status`.
fn own_container(p: &Project, status: &str) -> String {
    let project = aibox_config::load_project(&p.root).unwrap();
    let name = aibox_engine::lifecycle::target_for(&p.root, &project).container;
    let running = status == "running";
    format!(
        "[{{\"Id\":\"0123abcd\",\"Name\":\"{name}\",\"State\":{{\"Status\":\"{status}\",\
         \"Running\":{running}}},\"Config\":{{\"Image\":\"localhost/demo:latest\",\"Labels\":\
         {{\"aibox.project\":\"demo\",\"aibox.checkout\":\"{}\"}}}},\"Image\":\"sha256:42\"}}]",
        p.root
    )
}

/// The engine calls in `log` that start with `prefix`.
fn calls(log: &Utf8Path, prefix: &str) -> usize {
    fs_err::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(prefix))
        .count()
}

/// `doctor` asks the engine for the project's container once, for every check that reads
/// it (`container-state`, `base-image`): each engine call costs tens of milliseconds, and
/// it asked up to five times.
#[test]
fn doctor_looks_the_container_up_once() {
    let p = Project::new(BASE_TOML);
    p.apply();
    // No container: one `container inspect` by name, one `ps` by the Dev Containers
    // labels and one by the checkout label (a container under a former name).
    let log = logging_podman(&p, None);
    let report = p.doctor();
    assert_eq!(status(&report, "container-state"), CheckStatus::Skipped);
    assert_eq!(
        calls(&log, "container inspect"),
        1,
        "{}",
        report.render_human()
    );
    assert_eq!(calls(&log, "ps "), 2);

    // A stopped container of this checkout: inspected once, its image once.
    fs_err::remove_file(&log).unwrap();
    let json = own_container(&p, "exited");
    logging_podman(&p, Some(&json));
    let report = p.doctor();
    // Checked (the stand-in's container breaks rules), not skipped.
    assert_ne!(
        status(&report, "container-state"),
        CheckStatus::Skipped,
        "{}",
        report.render_human()
    );
    assert_eq!(calls(&log, "container inspect"), 1);
    assert_eq!(calls(&log, "ps "), 0);
    assert_eq!(calls(&log, "image inspect"), 1);
}

/// `mcp check` and doctor's `mcp-servers` check ask the engine for the project's
/// container once, however many servers they start in it: each lookup costs tens of
/// milliseconds, and they made one per server (two for a server retried). Doctor's Codex
/// sandbox probe runs in the container doctor found too.
#[test]
fn mcp_checks_look_the_container_up_once_for_every_server() {
    let servers = ["one", "two", "three"]
        .map(|n| format!("\n[[ai.mcp.servers]]\nname = \"{n}\"\ncommand = \"{n}-mcp\"\n"));
    let servers = servers.concat();
    let p = Project::new(&format!(
        "{BASE_TOML}\n[ai]\nharnesses = [\"claude\", \"codex\"]\n{servers}"
    ));
    p.apply();
    let json = own_container(&p, "running");
    // The stand-in's `exec` exits at once without a word: every server fails and is
    // asked a second time (held open under `sh`), so each makes two execs.
    let log = logging_podman(&p, Some(&json));
    let options = aibox_engine::McpCheckOptions {
        timeout: Some(std::time::Duration::from_secs(10)),
        lifecycle: aibox_engine::lifecycle::LifecycleOptions {
            env: p.options().detect,
            timeouts: aibox_runtime::Timeouts::default(),
            lock_timeout: aibox_engine::lifecycle::CONTAINER_LOCK_TIMEOUT,
        },
        ..aibox_engine::McpCheckOptions::default()
    };
    let report = aibox_engine::mcp_check(&p.root, &options, &mut |_| {}).unwrap();
    assert_eq!(report.servers.len(), 3);
    assert!(!report.all_ok());
    let execs = |log: &Utf8Path| calls(log, "exec -i --user");
    assert_eq!(execs(&log), 6, "{}", fs_err::read_to_string(&log).unwrap());
    assert_eq!(calls(&log, "container inspect"), 1);

    // doctor: its own lookup serves the probes too, the Codex sandbox's included.
    fs_err::remove_file(&log).unwrap();
    let report = p.doctor();
    assert_eq!(
        status(&report, "codex-sandbox"),
        CheckStatus::Ok,
        "{}",
        report.render_human()
    );
    assert_eq!(
        calls(
            &log,
            "exec --user aibox --workdir /workspace 0123abcd unshare"
        ),
        1
    );
    assert_eq!(
        status(&report, "mcp-servers"),
        CheckStatus::Error,
        "{}",
        report.render_human()
    );
    assert_eq!(execs(&log), 6, "{}", fs_err::read_to_string(&log).unwrap());
    assert_eq!(calls(&log, "container inspect"), 1);
}
