//! The gate's traversal (`gate_inputs`) and its judgement (`judge_plan`): the judgement
//! sees the project only through what the traversal read, and a read it did not make is
//! an internal error, never a silent answer. Run over every project of the bypass and
//! benign corpora and over messy projects built on disk (nested and cyclic includes,
//! `extends` chains and cycles, missing and linked files, local features, several
//! `dockerComposeFile` entries, named configurations, files over the size limit and
//! not UTF-8), read the way the engine reads them.
#![cfg(unix)]
// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use crate::corpus;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use aibox_config::hostpath::{HostPath, resolve_host_path, subfolders};
use aibox_config::{AiboxToml, ExtraVolume, LocalToml, Ownership, PlannedFile};
use aibox_policy::{
    ComposeSources, Consent, Finding, GateInputs, PolicyError, check_compose_setup, check_plan,
    gate_inputs, judge_plan,
};

const UNTRAVERSED: &str = "aibox::policy::untraversed";

/// Largest file the engine hands the gate (its snapshot's limit).
const MAX_TEXT: u64 = 1 << 20;

/// A project on disk read the way the engine's snapshot reads it: regular files only (a
/// link is absent), at most 1 MiB, bytes decoded lossily; every answer counted.
struct Disk {
    root: PathBuf,
    home: PathBuf,
    asked: RefCell<BTreeSet<String>>,
}

impl Disk {
    fn new(root: &Path, home: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            home: home.to_path_buf(),
            asked: RefCell::new(BTreeSet::new()),
        }
    }
}

impl ComposeSources for Disk {
    fn read(&self, path: &str) -> Option<String> {
        self.asked.borrow_mut().insert(format!("read {path}"));
        let full = self.root.join(path);
        let meta = fs_err::symlink_metadata(&full).ok()?;
        if !meta.is_file() || meta.len() > MAX_TEXT {
            return None;
        }
        Some(String::from_utf8_lossy(&fs_err::read(&full).ok()?).into_owned())
    }

    fn host_path(&self, path: &str) -> HostPath {
        self.asked.borrow_mut().insert(format!("link {path}"));
        resolve_host_path(&self.root, Some(&self.home), path)
    }

    fn subdirs(&self, dir: &str) -> Vec<String> {
        self.asked.borrow_mut().insert(format!("list {dir}"));
        subfolders(&self.root, dir)
    }
}

/// Every question `inputs` holds an answer for, in [`Disk`]'s spelling.
fn listed(inputs: &GateInputs) -> BTreeSet<String> {
    inputs
        .texts()
        .map(|(p, _)| format!("read {p}"))
        .chain(inputs.host_paths().map(|(p, _)| format!("link {p}")))
        .chain(inputs.folders().map(|(d, _)| format!("list {d}")))
        .collect()
}

fn write(root: &Path, rel: &str, text: impl AsRef<[u8]>) {
    let path = root.join(rel);
    fs_err::create_dir_all(path.parent().unwrap()).unwrap();
    fs_err::write(path, text).unwrap();
}

/// The messy projects: each a name and a builder over (project root, home).
type Build = fn(&Path, &Path);

const MESSY: [(&str, Build); 6] = [
    ("nested and cyclic includes", includes),
    ("extends chains and cycles", extends),
    ("links everywhere", links),
    (
        "configurations, features, several compose files",
        configurations,
    ),
    ("over the size limit and not UTF-8", odd_files),
    ("all of them", everything),
];

fn includes(root: &Path, _home: &Path) {
    write(
        root,
        ".devcontainer/docker-compose.override.yml",
        "include:\n  - a.yml\n  - path: [sub/b.yml, missing.yml]\n    project_directory: sub\n  - ${INC:-c.yml}\n  - /etc/compose.yml\nservices:\n  demo: {}\n",
    );
    write(
        root,
        ".devcontainer/a.yml",
        "include:\n  - sub/b.yml\nservices:\n  a:\n    image: busybox\n    volumes:\n      - ./data:/data\n",
    );
    write(
        root,
        ".devcontainer/sub/b.yml",
        "include:\n  - ../a.yml\n  - path: deeper/d.yml\n    project_directory: ../../outside\nservices:\n  b:\n    image: busybox\n    env_file: [../.env.b]\n",
    );
    write(
        root,
        ".devcontainer/sub/deeper/d.yml",
        "services:\n  d:\n    image: busybox\n    volumes:\n      - ../x:/x\n",
    );
    write(root, ".devcontainer/.env", "INC=a.yml\n");
}

fn extends(root: &Path, _home: &Path) {
    write(
        root,
        ".devcontainer/docker-compose.override.yml",
        "include: [two.yml]\nservices:\n  demo:\n    extends:\n      file: base/one.yml\n      service: one\n  loop:\n    extends: loop\n  deep:\n    extends:\n      file: deep.yml\n      service: s0\n",
    );
    write(
        root,
        ".devcontainer/base/one.yml",
        "services:\n  one:\n    extends:\n      file: ../two.yml\n      service: two\n    volumes: [\"./one:/one\"]\n",
    );
    write(
        root,
        ".devcontainer/two.yml",
        "services:\n  two:\n    extends:\n      file: base/one.yml\n      service: one\n    build:\n      context: ./ctx\n      dockerfile: Dockerfile.two\n      additional_contexts:\n        extra: ../extra\n  three:\n    extends:\n      file: gone.yml\n      service: x\n",
    );
    write(
        root,
        ".devcontainer/deep.yml",
        (0..20)
            .map(|i| format!("  s{i}:\n    extends: s{}\n", i + 1))
            .fold("services:\n".to_owned(), |acc, s| acc + &s),
    );
}

fn links(root: &Path, home: &Path) {
    write(
        root,
        ".devcontainer/docker-compose.override.yml",
        "include:\n  - linked.yml\n  - path: real.yml\n    project_directory: ../linkdir\nservices:\n  demo:\n    volumes:\n      - ../linkdir:/l\n      - ../linkdir/../up:/u\n      - ~/link-to-ssh:/s:ro\n      - /tmp/../etc:/e:ro\n    env_file: [../secrets.env]\n    security_opt:\n      - seccomp=.devcontainer/aibox-seccomp.json\nvolumes:\n  dev:\n    driver_opts:\n      device: ../linkdir\nconfigs:\n  c:\n    file: ../linkdir/conf\n",
    );
    write(root, ".devcontainer/real.yml", "services: {}\n");
    write(root, "elsewhere/conf", "x\n");
    fs_err::create_dir_all(home.join(".ssh")).unwrap();
    symlink(root.join("elsewhere"), root.join("linkdir")).unwrap();
    symlink(home.join(".ssh"), home.join("link-to-ssh")).unwrap();
    symlink("real.yml", root.join(".devcontainer/linked.yml")).unwrap();
    symlink(home.join(".aws"), root.join("secrets.env")).unwrap();
    symlink("/nowhere/at/all", root.join("dangling")).unwrap();
    symlink("loop-b", root.join("loop-a")).unwrap();
    symlink("loop-a", root.join("loop-b")).unwrap();
}

fn configurations(root: &Path, _home: &Path) {
    write(
        root,
        ".devcontainer/devcontainer.json",
        r#"{
  // JSONC, trailing commas
  "dockerComposeFile": ["docker-compose.yml", "one.yml", "sub/two.yml", "../outside.yml", "${X}.yml",],
  "service": "demo",
  "features": { "./feat": {}, "./feat-missing": {}, "../../far": {}, "ghcr.io/x/y:1": {} },
  "mounts": ["source=${localWorkspaceFolder}/data,target=/d,type=bind", {"source": "/var/run", "target": "/r", "type": "bind"}],
  "workspaceMount": "source=../linked-ws,target=/workspace,type=bind",
  "runArgs": ["-v", "./cache:/cache", "--mount=type=bind,src=~/.aws,dst=/aws", "--security-opt", "seccomp=aibox-seccomp.json"],
  "securityOpt": ["seccomp=.devcontainer/aibox-seccomp.json"],
  "build": { "context": "..", "dockerfile": "Dockerfile" },
}"#,
    );
    write(
        root,
        ".devcontainer/feat/devcontainer-feature.json",
        r#"{ "id": "feat", "mounts": [{"source": "${localWorkspaceFolder}/feat-data", "target": "/f", "type": "bind"}], "securityOpt": ["seccomp=unconfined"] }"#,
    );
    write(
        root,
        ".devcontainer/one.yml",
        "services:\n  one:\n    volumes: [\"./one:/one\"]\n",
    );
    write(
        root,
        ".devcontainer/sub/two.yml",
        "services:\n  two:\n    volumes: [\"../two:/two\"]\n",
    );
    write(
        root,
        ".devcontainer/other/devcontainer.json",
        r#"{ "dockerComposeFile": ["compose.yml", "more/compose.yml"], "features": { "./f2": {} } }"#,
    );
    write(
        root,
        ".devcontainer/other/compose.yml",
        "services:\n  other:\n    volumes: [\"./o:/o\"]\n",
    );
    write(root, ".devcontainer/other/.env", "A=1\n");
    write(
        root,
        ".devcontainer/other/more/compose.yml",
        "include: [../compose.yml]\n",
    );
    write(root, ".devcontainer/broken/devcontainer.json", "{ not json");
    write(
        root,
        ".devcontainer.json",
        r#"{ "runArgs": ["--volume=/etc:/etc"] }"#,
    );
    symlink("other", root.join(".devcontainer/linked-config")).unwrap();
}

fn odd_files(root: &Path, _home: &Path) {
    write(
        root,
        ".devcontainer/docker-compose.override.yml",
        "include:\n  - big.yml\n  - latin1.yml\n",
    );
    let mut big = "services:\n  big:\n    image: busybox\n".to_owned();
    while big.len() as u64 <= MAX_TEXT {
        big.push_str("# padding padding padding padding padding padding padding\n");
    }
    write(root, ".devcontainer/big.yml", big);
    write(
        root,
        ".devcontainer/latin1.yml",
        b"services:\n  caf\xe9:\n    volumes: [\"./d\xe9j\xe0:/x\"]\n",
    );
    write(root, ".devcontainer/.env", b"K=\xff\xfe\n");
}

fn everything(root: &Path, home: &Path) {
    configurations(root, home);
    links(root, home);
    // `links` wrote the override; the includes and extends join it under other names.
    includes(&root.join("inc"), home);
    extends(&root.join("ext"), home);
    let text = fs_err::read_to_string(root.join(".devcontainer/docker-compose.override.yml"))
        .unwrap()
        .replacen(
            "include:\n",
            "include:\n  - ../inc/.devcontainer/docker-compose.override.yml\n  - ../ext/.devcontainer/docker-compose.override.yml\n",
            1,
        );
    write(root, ".devcontainer/docker-compose.override.yml", text);
}

/// A configuration whose extra volumes reach through the project's links and the home.
fn config() -> AiboxToml {
    let mut config = aibox_config::parse_aibox_toml(
        "[container]\nname = \"demo\"\n\n[network]\negress = \"allowlist\"\n",
        "aibox.toml",
    )
    .unwrap();
    for source in ["./linkdir", "~/link-to-ssh", "./dangling/x", "/etc/../etc"] {
        config.container.extra_volumes.push(ExtraVolume {
            source: source.to_owned(),
            target: "/v".to_owned(),
            read_only: true,
        });
    }
    config
}

fn local() -> LocalToml {
    let mut local = LocalToml::default();
    local.container.extra_volumes.push(ExtraVolume {
        source: "./loop-a".to_owned(),
        target: "/l".to_owned(),
        read_only: false,
    });
    local
}

/// A plan that replaces the generated Compose file and `devcontainer.json`.
fn planned() -> Vec<PlannedFile> {
    vec![
        PlannedFile::new(
            aibox_config::layout::COMPOSE,
            "services:\n  demo:\n    image: demo\n    volumes:\n      - ../linkdir:/p\n      - ../.aibox-home/claude:/home/aibox/.claude\n",
            Ownership::Generated,
        ),
        PlannedFile::new(
            aibox_config::layout::DEVCONTAINER_JSON,
            r#"{ "dockerComposeFile": ["docker-compose.yml", "docker-compose.override.yml", "planned-extra.yml"] }"#,
            Ownership::Generated,
        ),
    ]
}

/// Every project of both corpora, and the messy ones built under `tmp`.
fn projects(tmp: &Path) -> Vec<(String, PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for kind in ["compose-bypass", "compose-benign"] {
        for case in corpus::fixtures(kind) {
            out.push((
                case.display().to_string(),
                case.clone(),
                tmp.join("no-home"),
            ));
        }
    }
    for (i, (name, build)) in MESSY.iter().enumerate() {
        let root = tmp.join(format!("messy-{i}/proj"));
        let home = tmp.join(format!("messy-{i}/home"));
        fs_err::create_dir_all(root.join(".devcontainer")).unwrap();
        fs_err::create_dir_all(&home).unwrap();
        build(&root, &home);
        out.push(((*name).to_owned(), root, home));
    }
    out
}

fn codes(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.code.as_str()).collect()
}

/// The judgement of every project reads nothing its traversal did not list: the plan's
/// judgement over the listed inputs is the whole gate's answer, the Compose setup check
/// (which runs the same two steps) never reports an untraversed read, and the traversal
/// asked the disk exactly what it lists.
#[test]
fn the_judgement_reads_only_what_the_traversal_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let projects = projects(tmp.path());
    assert!(projects.len() >= 140, "corpus shrank: {}", projects.len());
    let (config, local) = (config(), local());
    let mut messy_inputs = 0;
    for (name, root, home) in &projects {
        for files in [Vec::new(), planned()] {
            let disk = Disk::new(root, home);
            let inputs = gate_inputs(&config, &local, &files, None, &disk);
            assert_eq!(listed(&inputs), disk.asked.take(), "{name}");
            let judged = judge_plan(&config, &local, &files, None, &inputs);
            assert!(
                !matches!(judged, Err(PolicyError::Untraversed { .. })),
                "{name}: {judged:?}"
            );
            // The whole gate over the disk is the same two steps.
            let whole = check_plan(&config, &local, &files, None, &Disk::new(root, home));
            assert_eq!(format!("{judged:?}"), format!("{whole:?}"), "{name}");
            if name.contains(' ') {
                messy_inputs += inputs.texts().count() + inputs.host_paths().count();
            }
        }
        let setup = check_compose_setup(&Disk::new(root, home), &Consent::default());
        assert!(!codes(&setup).contains(&UNTRAVERSED), "{name}: {setup:#?}");
    }
    // The messy projects are followed deep (not judged as empty).
    assert!(messy_inputs > 150, "{messy_inputs}");
}

/// What the traversal of the messy projects follows: included, extended, feature and
/// listed Compose files, linked folders, the named configurations' folder listing.
#[test]
fn the_traversal_follows_every_kind_of_reference() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("proj");
    let home = tmp.path().join("home");
    fs_err::create_dir_all(&home).unwrap();
    everything(&root, &home);
    let inputs = gate_inputs(&config(), &local(), &[], None, &Disk::new(&root, &home));
    let texts: Vec<&str> = inputs.texts().map(|(p, _)| p).collect();
    for path in [
        "inc/.devcontainer/a.yml",
        "inc/.devcontainer/sub/b.yml",
        "inc/.devcontainer/sub/deeper/d.yml",
        "ext/.devcontainer/base/one.yml",
        "ext/.devcontainer/two.yml",
        "ext/.devcontainer/gone.yml",
        "ext/.devcontainer/deep.yml",
        ".devcontainer/feat/devcontainer-feature.json",
        ".devcontainer/one.yml",
        ".devcontainer/sub/two.yml",
        ".devcontainer/other/more/compose.yml",
        ".devcontainer/other/.env",
        ".devcontainer/real.yml",
        ".devcontainer/aibox-seccomp.json",
        "aibox.toml",
    ] {
        assert!(texts.contains(&path), "{path} not in {texts:#?}");
    }
    // A linked file is asked about, never read.
    assert!(!texts.contains(&".devcontainer/linked.yml"), "{texts:#?}");
    let links: Vec<&str> = inputs.host_paths().map(|(p, _)| p).collect();
    for path in [
        ".devcontainer/linked.yml",
        "linkdir",
        "~/link-to-ssh",
        "loop-a",
        "dangling/x",
        ".devcontainer/other/devcontainer.json",
    ] {
        assert!(links.contains(&path), "{path} not in {links:#?}");
    }
    let folders: Vec<&str> = inputs.folders().map(|(d, _)| d).collect();
    assert_eq!(folders, [".devcontainer"]);
}

/// A judgement that needs an answer its inputs do not hold fails as an internal error
/// naming it (a file, a host path, a folder), so a traversal that drifts from the rules
/// cannot pass unnoticed; the Compose setup check reports it as an error finding.
#[test]
fn a_read_past_the_inputs_is_an_internal_error() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("proj");
    let home = tmp.path().join("home");
    fs_err::create_dir_all(&home).unwrap();
    everything(&root, &home);
    let (config, local) = (config(), local());
    let inputs = gate_inputs(&config, &local, &[], None, &Disk::new(&root, &home));
    for missing in [
        "inc/.devcontainer/sub/deeper/d.yml",
        "ext/.devcontainer/two.yml",
        ".devcontainer/feat/devcontainer-feature.json",
        "linkdir",
        "~/link-to-ssh",
        ".devcontainer",
        "aibox.toml",
    ] {
        let err = judge_plan(&config, &local, &[], None, &inputs.without(missing)).unwrap_err();
        match &err {
            PolicyError::Untraversed { path } => assert_eq!(path, missing),
            other => panic!("{missing}: {other:?}"),
        }
        assert_eq!(err.kind(), aibox_config::ErrorKind::Internal);
        assert!(err.to_string().contains(missing), "{err}");
    }
}
