//! Guards of the container commands. `aibox up`, `aibox down` and a build hold the project's
//! container lock while they drive the engine: a second one waits for the first (saying
//! so once) instead of racing it in Compose, and gives up with `aibox::lifecycle::busy`
//! after its deadline. An `aibox.toml` this aibox cannot read does not leave the
//! container stuck: `down`, `status` and `exec` name this checkout's containers and the
//! engine command that removes them. A stand-in `podman` answers like Podman without the
//! project's container, and lists one container by this checkout's label.

#![allow(clippy::unwrap_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use aibox_engine::lifecycle::{LifecycleOptions, down};
use aibox_runtime::{ContainerState, DetectEnv, Event, Timeouts};
use camino::Utf8PathBuf;

fn project() -> (tempfile::TempDir, Utf8PathBuf, Utf8PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let base = Utf8PathBuf::from_path_buf(dir.path().canonicalize().unwrap()).unwrap();
    let (root, bin) = (base.join("project"), base.join("bin"));
    fs_err::create_dir_all(&root).unwrap();
    fs_err::create_dir_all(&bin).unwrap();
    fs_err::write(
        bin.join("podman"),
        "#!/bin/sh\ncase \"$1 $2\" in\n  \"container inspect\"|\"image inspect\")\n    \
         echo \"Error: no such object $3\" >&2\n    exit 125;;\n  \"ps -a\")\n    \
         case \"$*\" in *{{.Names}}*aibox.checkout=*) echo demo-0c708bfa;; esac;;\nesac\nexit 0\n",
    )
    .unwrap();
    fs_err::set_permissions(bin.join("podman"), std::fs::Permissions::from_mode(0o755)).unwrap();
    fs_err::write(
        root.join("aibox.toml"),
        "[container]\nname = \"demo\"\nengine = \"podman\"\n\n[context]\nmode = \"harness-only\"\n",
    )
    .unwrap();
    (dir, root, bin)
}

fn options(bin: &Utf8PathBuf, lock_timeout: Duration) -> LifecycleOptions {
    LifecycleOptions {
        env: DetectEnv {
            path: Some(bin.as_str().into()),
            ..DetectEnv::default()
        },
        timeouts: Timeouts::default(),
        lock_timeout,
    }
}

/// Holds the container lock as another `up` would.
fn hold_lock(root: &Utf8PathBuf) -> fs_err::File {
    fs_err::create_dir_all(root.join(".aibox")).unwrap();
    let file = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join(aibox_engine::CONTAINER_LOCK))
        .unwrap();
    file.file().lock().unwrap();
    file
}

const WAITING: &str =
    "another `aibox up`, `aibox down` or `aibox apply --build` is running in this project";

#[test]
fn down_waits_for_another_up_and_gives_up_after_its_deadline() {
    let (_dir, root, bin) = project();
    let held = hold_lock(&root);

    let short = options(&bin, Duration::from_millis(300));
    // `apply --build` replaces the image an `up` may be starting from: it waits too.
    for err in [
        down(&root, &short, &mut |_| {}).unwrap_err(),
        aibox_engine::lifecycle::build(&root, &short, &mut |_| {}).unwrap_err(),
    ] {
        let code = miette::Diagnostic::code(&err).map(|c| c.to_string());
        assert_eq!(code.as_deref(), Some("aibox::lifecycle::busy"), "{err}");
        assert!(err.to_string().contains(WAITING), "{err}");
    }

    // Released while the second one waits: it goes on, after saying it waited.
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        drop(held);
    });
    let mut events = Vec::new();
    let status = down(&root, &options(&bin, Duration::from_secs(30)), &mut |e| {
        events.push(e.clone());
    })
    .unwrap();
    release.join().unwrap();
    assert_eq!(status.state, ContainerState::Missing);
    let said: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::Note { line } if line.starts_with(WAITING)))
        .collect();
    assert_eq!(said.len(), 1, "{events:?}");
}

#[test]
fn an_unreadable_config_names_the_containers_to_remove_with_the_engine() {
    let (_dir, root, bin) = project();
    fs_err::write(
        root.join("aibox.toml"),
        "[container]\nname = \"demo\"\nengine = \"podman\"\nfrom_a_newer_aibox = true\n",
    )
    .unwrap();
    let options = options(&bin, Duration::from_secs(1));
    let errors = [
        down(&root, &options, &mut |_| {}).unwrap_err(),
        aibox_engine::lifecycle::status(&root, &options).unwrap_err(),
        aibox_engine::lifecycle::exec(&root, &options, &["true".to_owned()], &[]).unwrap_err(),
    ];
    for err in errors {
        let code = miette::Diagnostic::code(&err).map(|c| c.to_string());
        assert_eq!(
            code.as_deref(),
            Some("aibox::lifecycle::config_unreadable"),
            "{err}"
        );
        let help = miette::Diagnostic::help(&err).unwrap().to_string();
        assert!(help.contains("`podman rm -f demo-0c708bfa`"), "{help}");
        // The configuration problem itself is kept, with its code and exit kind.
        let source = miette::Diagnostic::diagnostic_source(&err).unwrap();
        let inner = source.code().map(|c| c.to_string());
        assert_eq!(inner.as_deref(), Some("aibox::config::unknown_key"));
        assert_eq!(err.kind(), aibox_config::ErrorKind::User);
    }
}
