//! The container's reach: an apply that would let the container reach more than the
//! owner last approved for the checkout (what an agent could write into the project's
//! configuration from inside the container) is refused before anything is written,
//! passes with the approval, and less never needs one.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use aibox_engine::{ApplyOptions, EngineError, apply};
use camino::{Utf8Path, Utf8PathBuf};
use common::{apply_opts, code, empty_project};

const TEAM: &str = "[container]\nname = \"reach\"\nengine = \"podman\"\n\n[context]\n\
                    mode = \"harness-only\"\n\n[ai]\nharnesses = [\"claude\"]\n\n[network]\n\
                    egress = \"allowlist\"\nallow = [\"pypi.org\"]\n";
const LOCAL_FILTER: &str = ".devcontainer/aibox-egress/egress.local.filter";
const COMPOSE: &str = ".devcontainer/docker-compose.yml";

/// A project with [`TEAM`] and a folder of its own for the approval records.
struct Checkout {
    _dir: tempfile::TempDir,
    root: Utf8PathBuf,
    _records: tempfile::TempDir,
    records: Utf8PathBuf,
}

impl Checkout {
    fn new(team: &str) -> Self {
        let (dir, root) = empty_project();
        fs_err::write(root.join("aibox.toml"), team).unwrap();
        fs_err::write(root.join(".aibox-local.toml"), "").unwrap();
        let records = tempfile::tempdir().unwrap();
        let path = Utf8PathBuf::from_path_buf(records.path().join("reach")).unwrap();
        Self {
            _dir: dir,
            root,
            _records: records,
            records: path,
        }
    }

    fn options(&self, approve: bool) -> ApplyOptions {
        ApplyOptions {
            approve_reach: approve,
            reach_dir: Some(self.records.clone()),
            ..apply_opts(None)
        }
    }

    fn apply(&self) -> Result<aibox_engine::ApplyReport, EngineError> {
        apply(&self.root, &self.options(false))
    }

    fn write(&self, rel: &str, text: &str) {
        fs_err::write(self.root.join(rel), text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        fs_err::read_to_string(self.root.join(rel)).unwrap()
    }

    /// A dry run writes nothing and warns with every one of `needles` in one warning.
    fn dry_run_warns(&self, needles: &[&str]) {
        let options = ApplyOptions {
            dry_run: true,
            ..self.options(false)
        };
        let dry = apply(&self.root, &options).unwrap();
        assert!(
            dry.warnings
                .iter()
                .any(|w| needles.iter().all(|n| w.contains(n))),
            "{needles:?}: {:?}",
            dry.warnings
        );
    }

    fn record_count(&self) -> usize {
        fs_err::read_dir(&self.records).map_or(0, Iterator::count)
    }
}

fn refused(err: &EngineError) -> String {
    assert_eq!(code(err), "aibox::apply::reach_not_approved", "{err:?}");
    err.to_string()
}

#[test]
fn a_host_added_to_the_personal_file_is_refused_until_the_owner_approves_it() {
    let c = Checkout::new(TEAM);
    // The first apply records what the checkout has: no agent ran in it yet.
    c.apply().unwrap();
    assert_eq!(c.record_count(), 1);
    let filter = c.read(LOCAL_FILTER);
    let compose = c.read(COMPOSE);

    // What an agent could write from inside the container.
    c.write(
        ".aibox-local.toml",
        "[network]\nallow = [\"exfil.example\"]\n",
    );
    let err = c.apply().unwrap_err();
    let text = refused(&err);
    assert!(
        text.contains("+ host `exfil.example`, from .aibox-local.toml [network] allow"),
        "{text}"
    );
    assert_eq!(err.kind(), aibox_config::ErrorKind::User);
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(help.contains("--approve-reach"), "{help}");
    assert!(help.contains(c.records.as_str()), "{help}");
    // Refused before anything was written.
    assert_eq!(c.read(LOCAL_FILTER), filter);
    assert_eq!(c.read(COMPOSE), compose);

    // A dry run shows what the apply will ask for, and writes nothing.
    c.dry_run_warns(&["--approve-reach", "exfil.example"]);
    // `--check` judges files, not who may reach what.
    apply(
        &c.root,
        &ApplyOptions {
            check: true,
            ..c.options(false)
        },
    )
    .unwrap();
    assert_eq!(c.read(LOCAL_FILTER), filter);

    // The owner approves: written, and named once more in a warning.
    let report = apply(&c.root, &c.options(true)).unwrap();
    assert!(
        c.read(LOCAL_FILTER).contains("exfil"),
        "{}",
        c.read(LOCAL_FILTER)
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.starts_with("approved for this checkout") && w.contains("exfil.example")),
        "{:?}",
        report.warnings
    );
    // Approved once is approved: the next apply neither asks nor warns.
    let again = c.apply().unwrap();
    assert!(
        !again.warnings.iter().any(|w| w.contains("exfil")),
        "{:?}",
        again.warnings
    );

    // Less needs no approval, and the record follows it: the same host added back is
    // asked for again.
    c.write(".aibox-local.toml", "");
    c.apply().unwrap();
    c.write(
        ".aibox-local.toml",
        "[network]\nallow = [\"exfil.example\"]\n",
    );
    refused(&c.apply().unwrap_err());
}

#[test]
fn wider_egress_host_folders_host_variables_and_relaxations_are_each_asked_for() {
    let c = Checkout::new(TEAM);
    c.apply().unwrap();
    let cases: [(&str, &str, &[&str]); 6] = [
        (
            "aibox.toml",
            &TEAM.replace("egress = \"allowlist\"", "egress = \"open\""),
            &["+ egress `open` (approved: `allowlist`), from aibox.toml [network] egress"],
        ),
        (
            ".aibox-local.toml",
            "[[container.extra_volumes]]\nsource = \"~/projects/other\"\ntarget = \"/srv/other\"\n",
            &[
                "+ read-write mount `~/projects/other -> /srv/other`, from .aibox-local.toml \
                 [container] extra_volumes",
            ],
        ),
        (
            "aibox.toml",
            &format!("{TEAM}\n[container.environment]\nTOKEN = \"${{HOST_TOKEN}}\"\n"),
            &[
                "+ the host variable `HOST_TOKEN`, from aibox.toml [container.environment] \
                 TOKEN",
            ],
        ),
        (
            ".aibox-local.toml",
            "[network]\nupstream_proxy = \"relay.example:8080\"\n",
            &[
                "+ upstream proxy `relay.example:8080`, from .aibox-local.toml [network] \
               upstream_proxy",
            ],
        ),
        (
            "aibox.toml",
            &format!(
                "{TEAM}\n[security]\ncodex_sandbox = \"unconfined\"\n\
                 acknowledge_seccomp_unconfined = true\n"
            ),
            &["+ seccomp=unconfined, from aibox.toml [security] codex_sandbox"],
        ),
        (
            "aibox.toml",
            &TEAM.replace(
                "name = \"reach\"\n",
                "name = \"reach\"\nbase_image = \"registry.example/other/debian:bookworm\"\n",
            ),
            &["+ the egress proxy built on `registry.example/other/debian:bookworm`"],
        ),
    ];
    for (file, text, expected) in cases {
        let before = c.read(file);
        c.write(file, text);
        let err = c.apply().unwrap_err();
        let shown = refused(&err);
        for line in expected {
            assert!(shown.contains(line), "{file}: {line} missing from {shown}");
        }
        // Put back: the approved reach applies without asking.
        c.write(file, &before);
        c.apply().unwrap();
    }
    // A dev container configuration at the root, which editors start without aibox: new
    // or changed, it is asked for; removed, it is not.
    c.write(
        ".devcontainer.json",
        "{ \"name\": \"x\", \"image\": \"debian:bookworm\" }\n",
    );
    let shown = refused(&c.apply().unwrap_err());
    assert!(
        shown.contains("+ the dev container configuration `.devcontainer.json` (new or changed)"),
        "{shown}"
    );
    fs_err::remove_file(c.root.join(".devcontainer.json")).unwrap();
    c.apply().unwrap();
}

/// A cloned repository's `aibox.toml` that mounts a host credential folder, even
/// read-only, is asked for at the checkout's first apply (the QA read the cloner's SSH
/// key from the container): refused with nothing written and no record made, listed by a
/// dry run, applied with the approval. Other mounts, and the owner's own credential
/// mounts in `.aibox-local.toml`, are recorded without asking as before.
#[test]
fn a_first_apply_asks_for_the_teams_mounts_of_host_credential_folders() {
    let team = format!(
        "{TEAM}\n[[container.extra_volumes]]\nsource = \"~/.ssh\"\ntarget = \"/mnt/ssh\"\n\
         read_only = true\n\n[[security.exceptions]]\noption = \"mount:~/.ssh\"\n\
         reason = \"deploy keys\"\n"
    );
    let c = Checkout::new(&team);
    let shown = refused(&c.apply().unwrap_err());
    assert!(
        shown.contains(
            "+ read-only mount `~/.ssh -> /mnt/ssh` of a host credential folder, from \
             aibox.toml [container] extra_volumes"
        ),
        "{shown}"
    );
    assert!(!c.root.join(COMPOSE).exists(), "nothing written");
    assert_eq!(c.record_count(), 0);
    c.dry_run_warns(&["--approve-reach", "`~/.ssh -> /mnt/ssh`"]);
    apply(&c.root, &c.options(true)).unwrap();
    assert!(c.read(COMPOSE).contains("/.ssh:/mnt/ssh:ro"));
    // Approved and recorded: the next apply does not ask.
    c.apply().unwrap();

    // Another folder of the team's, and the owner's own credential folder: as before.
    let datasets = format!(
        "{TEAM}\n[[container.extra_volumes]]\nsource = \"~/datasets\"\ntarget = \"/data\"\n\
         read_only = true\n"
    );
    let own = "[[container.extra_volumes]]\nsource = \"~/.aws\"\ntarget = \"/mnt/aws\"\n\
               read_only = true\n";
    for (team, local) in [(datasets.as_str(), ""), (TEAM, own)] {
        let c = Checkout::new(team);
        c.write(".aibox-local.toml", local);
        c.apply().unwrap();
        assert_eq!(c.record_count(), 1);
    }
}

#[test]
fn a_record_that_is_not_one_stops_the_apply_and_names_itself() {
    let c = Checkout::new(TEAM);
    c.apply().unwrap();
    let record = fs_err::read_dir(&c.records)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    fs_err::write(&record, "{ not json").unwrap();
    c.write(
        ".aibox-local.toml",
        "[network]\nallow = [\"exfil.example\"]\n",
    );
    let err = c.apply().unwrap_err();
    assert_eq!(code(&err), "aibox::apply::reach_record", "{err:?}");
    assert!(
        err.to_string().contains(&record.display().to_string()),
        "{err}"
    );
    assert!(!c.read(LOCAL_FILTER).contains("exfil"));
    // Removed, as the help says: the next apply records afresh.
    fs_err::remove_file(&record).unwrap();
    c.apply().unwrap();
    assert!(c.read(LOCAL_FILTER).contains("exfil"));
}

#[test]
fn each_checkout_has_its_own_record() {
    let a = Checkout::new(TEAM);
    a.apply().unwrap();
    // A second checkout of the same project, sharing the records folder, records its own
    // reach at its first apply, whatever the first one approved.
    let (_dir, other) = empty_project();
    fs_err::write(other.join("aibox.toml"), TEAM).unwrap();
    fs_err::write(
        other.join(".aibox-local.toml"),
        "[network]\nallow = [\"wiki.corp.example\"]\n",
    )
    .unwrap();
    apply(&other, &a.options(false)).unwrap();
    assert_eq!(a.record_count(), 2);
    let record = |root: &Utf8Path| {
        aibox_engine::reach::Approvals::new(&a.records)
            .approved(&root.canonicalize_utf8().unwrap())
            .unwrap()
            .unwrap()
    };
    assert!(record(&other).hosts.contains_key("wiki.corp.example"));
    assert!(!record(&a.root).hosts.contains_key("wiki.corp.example"));
}

/// A writable mount of the project, of `.devcontainer/` or of a link to it would undo
/// the agent's read-only view of `.devcontainer/`: refused by the gate, before and after
/// an approval, however the source is spelled; read-only, it passes.
#[test]
fn no_mount_makes_devcontainer_writable_again() {
    let c = Checkout::new(TEAM);
    c.apply().unwrap();
    fs_err::create_dir(c.root.join("cache")).unwrap();
    let volume = |source: &str, read_only: bool| {
        c.write(
            ".aibox-local.toml",
            &format!(
                "[[container.extra_volumes]]\nsource = \"{source}\"\ntarget = \"/x\"\n\
                 read_only = {read_only}\n"
            ),
        );
    };
    for source in [".", "./", ".devcontainer", ".devcontainer/aibox-egress"] {
        volume(source, false);
        let err = apply(&c.root, &c.options(true)).unwrap_err();
        assert!(
            format!("{err:?}").contains("aibox::policy::devcontainer_writable"),
            "{source}: {err:?}"
        );
    }
    // The agent turns an approved writable folder into a link to `.devcontainer/`.
    volume("cache", false);
    apply(&c.root, &c.options(true)).unwrap();
    fs_err::remove_dir(c.root.join("cache")).unwrap();
    std::os::unix::fs::symlink(".devcontainer", c.root.join("cache")).unwrap();
    let err = c.apply().unwrap_err();
    assert!(
        format!("{err:?}").contains("aibox::policy::devcontainer_writable"),
        "{err:?}"
    );
    // Read-only, the project may be mounted again.
    volume(".", true);
    apply(&c.root, &c.options(true)).unwrap();
}
