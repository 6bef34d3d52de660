//! The container's reach, and the owner's approval of it.
//!
//! The agent in the container can write the project, and the project holds what shapes
//! the next container: `aibox.toml`, `.aibox-local.toml`, hand-added skill folders. An
//! agent that adds a host to the allowlist, a mount of a host folder or a host variable
//! would get it at the next `aibox apply` and `up`, which the owner runs on the host.
//! So every writing apply compares the reach its plan gives the container with the reach
//! the owner last approved for this checkout, recorded outside the project (under
//! `$XDG_STATE_HOME/aibox/reach/`, which the container does not see), and refuses more
//! without an approval ([`ApplyOptions::approve_reach`](crate::ApplyOptions)). Less never
//! needs one. A checkout without a record (its first apply) records what it has: before
//! the first `up` no agent has run in it. Except the team's mounts of host credential
//! folders (`~/.ssh`, `~/.aws`, …): whoever committed `aibox.toml` chose them, and cloning
//! a repository is no consent to hand them to its container.
//!
//! The reach is what the container gets from outside itself: the egress mode and, with
//! `allowlist`, its hosts and upstream proxy; the host folders mounted; the host
//! variables passed in; the seccomp and gate relaxations the owner consented to.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aibox_config::{AiboxToml, CodexSandbox, EgressMode, LocalToml};
use camino::Utf8Path;
use serde::{Deserialize, Serialize};

use crate::error::EngineError;

/// Where the team's settings come from, as messages name it.
const TEAM: &str = "aibox.toml";
/// Where the personal settings come from.
const PERSONAL: &str = ".aibox-local.toml";

/// What a plan lets the container reach beyond itself. Each entry names where it comes
/// from (for the message that asks for an approval); entries compare by key only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reach {
    /// The egress mode.
    pub egress: EgressMode,
    /// With `allowlist`: each allowed host, with where it comes from.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, String>,
    /// With `allowlist`: the upstream proxy every allowed connection goes through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_proxy: Option<String>,
    /// Each host folder mounted, keyed `SOURCE -> TARGET` as the configuration writes it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mounts: BTreeMap<String, Mount>,
    /// Each host environment variable the container gets (`${NAME}` values), with the
    /// container variable that takes it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub host_env: BTreeMap<String, String>,
    /// Each relaxation of the container's confinement the owner consented to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub relaxations: BTreeMap<String, String>,
    /// With `allowlist`: the image the egress proxy is built on (`container.base_image`),
    /// whose programs enforce the allowlist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_image: Option<String>,
    /// The SHA-256 of each dev container configuration that editors start without aibox
    /// and that lies where the agent can write (`.devcontainer.json` at the root).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub configurations: BTreeMap<String, String>,
}

/// One host folder mount of a [`Reach`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// Mounted read-only.
    pub read_only: bool,
    /// Where it comes from.
    pub from: String,
}

impl Reach {
    /// The reach of `config` and `local`, with `hosts` the effective allowlist (host and
    /// where it comes from; read only in `allowlist` mode) and `configurations` the text
    /// of each dev container configuration outside aibox's files (path and text).
    pub fn of<'t>(
        config: &AiboxToml,
        local: &LocalToml,
        hosts: impl IntoIterator<Item = (String, String)>,
        configurations: impl IntoIterator<Item = (&'t str, &'t str)>,
    ) -> Self {
        let egress = config.network.egress;
        let allowlist = egress == EgressMode::Allowlist;
        let mut mounts = BTreeMap::new();
        for (file, list) in [
            (TEAM, &config.container.extra_volumes),
            (PERSONAL, &local.container.extra_volumes),
        ] {
            for v in list {
                mounts.insert(
                    format!("{} -> {}", v.source, v.target),
                    Mount {
                        read_only: v.read_only,
                        from: format!("{file} [container] extra_volumes"),
                    },
                );
            }
        }
        let host_env = config
            .container
            .environment
            .iter()
            .filter_map(|(key, value)| {
                let name = aibox_devcontainer::host_reference(value)?;
                Some((
                    name.to_owned(),
                    format!("{TEAM} [container.environment] {key}"),
                ))
            })
            .collect();
        let security = &config.security;
        let mut relaxations = BTreeMap::new();
        let sandbox = match security.codex_sandbox {
            CodexSandbox::SeccompProfile => Some("a seccomp profile that allows user namespaces"),
            CodexSandbox::Unconfined => Some("seccomp=unconfined"),
            CodexSandbox::EngineDefault | CodexSandbox::Landlock => None,
        };
        if let Some(what) = sandbox {
            relaxations.insert(what.to_owned(), format!("{TEAM} [security] codex_sandbox"));
        }
        for exception in &security.exceptions {
            relaxations.insert(
                format!("the gate exception `{}`", exception.option),
                format!("{TEAM} [[security.exceptions]]"),
            );
        }
        Self {
            egress,
            hosts: if allowlist {
                hosts.into_iter().collect()
            } else {
                BTreeMap::new()
            },
            upstream_proxy: local.network.upstream_proxy.clone().filter(|_| allowlist),
            mounts,
            host_env,
            relaxations,
            proxy_image: allowlist.then(|| config.container.base_image.clone()),
            configurations: configurations
                .into_iter()
                .map(|(path, text)| {
                    (
                        path.to_owned(),
                        aibox_provenance::lock::sha256_hex(text.as_bytes()),
                    )
                })
                .collect(),
        }
    }

    /// The team's mounts of host credential folders (`~/.ssh`, `~/.aws`, …), one line
    /// each: the ones a clone's owner did not choose.
    fn credential_mounts(&self) -> Vec<String> {
        self.mounts
            .iter()
            .filter(|(mount, m)| {
                let source = mount.split_once(" -> ").map_or(mount.as_str(), |(s, _)| s);
                m.from.starts_with(TEAM) && aibox_policy::gate::is_credential_source(source)
            })
            .map(|(mount, m)| {
                let how = if m.read_only {
                    "read-only"
                } else {
                    "read-write"
                };
                format!(
                    "{how} mount `{mount}` of a host credential folder, from {} (asked for \
                     at a checkout's first apply too: it came with the files)",
                    m.from
                )
            })
            .collect()
    }

    /// What this reach has that `approved` does not, one line each (empty when it has
    /// nothing more).
    pub fn beyond(&self, approved: &Self) -> Vec<String> {
        let mut more = Vec::new();
        if rank(self.egress) > rank(approved.egress) {
            more.push(format!(
                "egress `{}` (approved: `{}`), from {TEAM} [network] egress",
                self.egress.as_str(),
                approved.egress.as_str()
            ));
        }
        // With `open` approved, every host was.
        if approved.egress != EgressMode::Open {
            for (host, from) in &self.hosts {
                if !covered(host, &approved.hosts) {
                    more.push(format!("host `{host}`, from {from}"));
                }
            }
            if let Some(image) = &self.proxy_image
                && approved.proxy_image.as_ref() != Some(image)
            {
                more.push(format!(
                    "the egress proxy built on `{image}`, whose programs enforce the \
                     allowlist, from {TEAM} [container] base_image"
                ));
            }
            if let Some(proxy) = &self.upstream_proxy
                && approved.upstream_proxy.as_ref() != Some(proxy)
            {
                more.push(format!(
                    "upstream proxy `{proxy}`, from {PERSONAL} [network] upstream_proxy"
                ));
            }
        }
        for (mount, m) in &self.mounts {
            let wider = match approved.mounts.get(mount) {
                None => true,
                Some(a) => a.read_only && !m.read_only,
            };
            if wider {
                let how = if m.read_only {
                    "read-only"
                } else {
                    "read-write"
                };
                more.push(format!("{how} mount `{mount}`, from {}", m.from));
            }
        }
        for (name, from) in &self.host_env {
            if !approved.host_env.contains_key(name) {
                more.push(format!("the host variable `{name}`, from {from}"));
            }
        }
        for (what, from) in &self.relaxations {
            if !approved.relaxations.contains_key(what) {
                more.push(format!("{what}, from {from}"));
            }
        }
        for (path, digest) in &self.configurations {
            if approved.configurations.get(path) != Some(digest) {
                more.push(format!(
                    "the dev container configuration `{path}` (new or changed), which \
                     editors such as VS Code start without aibox"
                ));
            }
        }
        more
    }
}

/// Whether `host` is among `approved`, or under an approved `*.` wildcard (which allows
/// every name below its domain, not the domain itself).
pub(crate) fn covered<V>(host: &str, approved: &BTreeMap<String, V>) -> bool {
    approved.contains_key(host)
        || approved.keys().any(|a| {
            a.strip_prefix("*.")
                .is_some_and(|domain| host.ends_with(&format!(".{domain}")))
        })
}

/// How far a mode reaches: `none` below `allowlist` below `open`.
fn rank(mode: EgressMode) -> u8 {
    match mode {
        EgressMode::None => 0,
        EgressMode::Allowlist => 1,
        EgressMode::Open => 2,
    }
}

/// The approvals of one user: a record per checkout under a folder of theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approvals {
    dir: PathBuf,
}

/// A record as stored: the checkout it belongs to and the reach approved for it.
#[derive(Serialize, Deserialize)]
struct Record {
    checkout: String,
    reach: Reach,
}

impl Approvals {
    /// The records under `dir` (tests and embedders inject their own).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The default location: `$XDG_STATE_HOME/aibox/reach`, else
    /// `$HOME/.local/state/aibox/reach`; `None` without either variable.
    pub fn default_location() -> Option<Self> {
        aibox_config::hostpath::user_dir("XDG_STATE_HOME", ".local/state")
            .map(|dir| Self::new(dir.join("reach")))
    }

    /// The records at `dir` when one is given, else at the default location.
    pub fn at_or_default(dir: Option<&Path>) -> Option<Self> {
        dir.map_or_else(Self::default_location, |d| Some(Self::new(d)))
    }

    /// The record file of the checkout at `root`.
    pub fn path_of(&self, root: &Utf8Path) -> PathBuf {
        let digest = aibox_provenance::lock::sha256_hex(root.as_str().as_bytes());
        self.dir.join(format!("{}.json", &digest[..32]))
    }

    /// The reach last approved for the checkout at `root`, `None` before its first
    /// apply.
    ///
    /// # Errors
    /// [`EngineError::ReachRecord`] when the record cannot be read or is not one.
    pub fn approved(&self, root: &Utf8Path) -> Result<Option<Reach>, EngineError> {
        let path = self.path_of(root);
        let text = match fs_err::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(record_error(&path, e.to_string())),
        };
        let record: Record =
            serde_json::from_str(&text).map_err(|e| record_error(&path, e.to_string()))?;
        // A record of another checkout under the same name (a digest collision, or a
        // copied file) approves nothing here.
        Ok((record.checkout == root.as_str()).then_some(record.reach))
    }

    /// Records `reach` as approved for the checkout at `root`: written whole to a
    /// temporary file beside the record, then renamed over it.
    ///
    /// # Errors
    /// [`EngineError::ReachRecord`] when the folder or the file cannot be written.
    pub fn record(&self, root: &Utf8Path, reach: &Reach) -> Result<(), EngineError> {
        let path = self.path_of(root);
        let fail = |e: &dyn std::fmt::Display| record_error(&path, e.to_string());
        let record = Record {
            checkout: root.as_str().to_owned(),
            reach: reach.clone(),
        };
        let mut text = serde_json::to_string_pretty(&record).map_err(|e| fail(&e))?;
        text.push('\n');
        fs_err::create_dir_all(&self.dir).map_err(|e| fail(&e))?;
        let mut temp = tempfile::NamedTempFile::new_in(&self.dir).map_err(|e| fail(&e))?;
        std::io::Write::write_all(&mut temp, text.as_bytes()).map_err(|e| fail(&e))?;
        temp.persist(&path).map_err(|e| fail(&e.error))?;
        Ok(())
    }
}

fn record_error(path: &Path, reason: String) -> EngineError {
    EngineError::ReachRecord {
        path: path.display().to_string(),
        reason,
    }
}

/// An apply's judgement of its plan's reach ([`judge`]), kept until its files are
/// written.
#[derive(Debug, Default)]
pub(crate) struct Judgement {
    approvals: Option<Approvals>,
    /// Whether the record already holds the reach (nothing to write after the apply).
    recorded: bool,
    /// What to tell the user: more reach approved, or, in a dry run, to be asked for.
    pub notes: Vec<String>,
}

impl Judgement {
    /// Records the applied reach once the apply has written its files; a warning when
    /// it cannot (the apply itself succeeded).
    pub(crate) fn record(&self, root: &Utf8Path, reach: Option<&Reach>) -> Option<String> {
        let (Some(approvals), Some(reach), false) = (&self.approvals, reach, self.recorded) else {
            return None;
        };
        let e = approvals.record(root, reach).err()?;
        Some(format!(
            "{e}; the next apply compares with the reach approved before this one"
        ))
    }
}

/// Judges the reach of a plan for the checkout at `root` before anything is written,
/// against the record under `dir` (default: [`Approvals::default_location`]): more
/// than the approved reach passes only with `approve` (and is only listed by a
/// `dry_run`). A checkout without a record passes (its first apply), and so does every
/// apply when there is nowhere to keep one.
///
/// # Errors
/// [`EngineError::ReachNotApproved`] for more reach without `approve`;
/// [`EngineError::ReachRecord`] for a record that cannot be read.
pub(crate) fn judge(
    reach: Option<&Reach>,
    root: &Utf8Path,
    dir: Option<&Path>,
    approve: bool,
    dry_run: bool,
) -> Result<Judgement, EngineError> {
    let approvals = Approvals::at_or_default(dir);
    let Some(reach) = reach else {
        return Ok(Judgement {
            approvals,
            recorded: true,
            notes: Vec::new(),
        });
    };
    let Some(found) = &approvals else {
        return Ok(Judgement {
            approvals,
            recorded: true,
            notes: vec![
                "the container's reach is not judged: neither XDG_STATE_HOME nor HOME is set, \
                 so there is no folder to keep what you approved in"
                    .to_owned(),
            ],
        });
    };
    let Some(approved) = found.approved(root)? else {
        // A checkout's first apply records what it has, but for the host's credential
        // folders: no agent has run in it yet, but whoever committed `aibox.toml` chose
        // them, and a clone's owner never implied consent to that.
        let asked = Asked {
            approved: "approved for this checkout, the container mounts host credential folders",
            dry_run: "`aibox apply` will ask you to approve mounts of host credential folders \
                      (run it with `--approve-reach` if you want them)",
        };
        let notes = asked.judge(&reach.credential_mounts(), (approve, dry_run), found, root)?;
        return Ok(Judgement {
            approvals,
            notes,
            ..Judgement::default()
        });
    };
    let asked = Asked {
        approved: "approved for this checkout, the container now reaches more",
        dry_run: "`aibox apply` will ask you to approve more reach for the container (run it \
                  with `--approve-reach` if you made these changes)",
    };
    let notes = asked.judge(&reach.beyond(&approved), (approve, dry_run), found, root)?;
    Ok(Judgement {
        recorded: approved == *reach,
        approvals,
        notes,
    })
}

/// What a judgement says of reach that needs an approval, when it has one and in a dry
/// run (without either, the apply is refused).
struct Asked {
    approved: &'static str,
    dry_run: &'static str,
}

impl Asked {
    /// The note on `more` (none when empty), or the refusal.
    fn judge(
        &self,
        more: &[String],
        (approve, dry_run): (bool, bool),
        found: &Approvals,
        root: &Utf8Path,
    ) -> Result<Vec<String>, EngineError> {
        if more.is_empty() {
            Ok(Vec::new())
        } else if approve {
            Ok(vec![format!("{}:{}", self.approved, listed(more))])
        } else if dry_run {
            Ok(vec![format!("{}:{}", self.dry_run, listed(more))])
        } else {
            Err(EngineError::ReachNotApproved {
                list: listed(more),
                record: found.path_of(root).display().to_string(),
            })
        }
    }
}

/// One `\n  + ...` line per entry.
fn listed(more: &[String]) -> String {
    let mut out = String::new();
    for m in more {
        out.push_str("\n  + ");
        out.push_str(m);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AiboxToml {
        aibox_config::parse_aibox_toml("[container]\nname = \"p\"\n", "aibox.toml").unwrap()
    }

    fn reach(egress: EgressMode, hosts: &[&str]) -> Reach {
        let mut config = config();
        config.network.egress = egress;
        Reach::of(
            &config,
            &LocalToml::default(),
            hosts.iter().map(|h| ((*h).to_owned(), TEAM.to_owned())),
            [],
        )
    }

    #[test]
    fn less_is_never_more() {
        let wide = reach(EgressMode::Allowlist, &["a.example", "b.example"]);
        let narrow = reach(EgressMode::Allowlist, &["a.example"]);
        assert!(narrow.beyond(&wide).is_empty());
        assert!(reach(EgressMode::None, &[]).beyond(&wide).is_empty());
        assert!(wide.beyond(&reach(EgressMode::Open, &[])).is_empty());
        assert_eq!(wide.beyond(&narrow), ["host `b.example`, from aibox.toml"]);
    }

    #[test]
    fn a_host_under_an_approved_wildcard_is_not_more() {
        let approved = reach(EgressMode::Allowlist, &["*.pythonhosted.org"]);
        let below = reach(
            EgressMode::Allowlist,
            &["files.pythonhosted.org", "*.a.pythonhosted.org"],
        );
        assert!(below.beyond(&approved).is_empty());
        // The wildcard allows names below the domain, not the domain itself.
        let apex = reach(EgressMode::Allowlist, &["pythonhosted.org"]);
        assert_eq!(apex.beyond(&approved).len(), 1);
    }

    #[test]
    fn a_wider_mode_and_its_hosts_are_more() {
        let more =
            reach(EgressMode::Allowlist, &["a.example"]).beyond(&reach(EgressMode::None, &[]));
        // The mode, its host and the image its proxy is built on.
        assert_eq!(more.len(), 3, "{more:?}");
        assert!(more[0].starts_with("egress `allowlist` (approved: `none`)"));
        let open =
            reach(EgressMode::Open, &[]).beyond(&reach(EgressMode::Allowlist, &["a.example"]));
        assert_eq!(open.len(), 1, "{open:?}");
    }

    #[test]
    fn a_mount_made_writable_is_more() {
        let mut config = config();
        config
            .container
            .extra_volumes
            .push(aibox_config::ExtraVolume {
                source: "~/data".into(),
                target: "/data".into(),
                read_only: true,
            });
        let local = LocalToml::default();
        let ro = Reach::of(&config, &local, [], []);
        config.container.extra_volumes[0].read_only = false;
        let rw = Reach::of(&config, &local, [], []);
        assert!(ro.beyond(&rw).is_empty());
        assert_eq!(
            rw.beyond(&ro),
            ["read-write mount `~/data -> /data`, from aibox.toml [container] extra_volumes"]
        );
    }

    #[test]
    fn host_variables_and_relaxations_are_named() {
        let mut config = config();
        config
            .container
            .environment
            .insert("TOKEN".into(), "${HOST_TOKEN}".into());
        config
            .container
            .environment
            .insert("LITERAL".into(), "${not a name}".into());
        config.security.codex_sandbox = CodexSandbox::Unconfined;
        let more =
            Reach::of(&config, &LocalToml::default(), [], []).beyond(&reach(EgressMode::Open, &[]));
        assert_eq!(
            more,
            [
                "the host variable `HOST_TOKEN`, from aibox.toml [container.environment] TOKEN",
                "seccomp=unconfined, from aibox.toml [security] codex_sandbox",
            ]
        );
    }

    #[test]
    fn a_record_round_trips_and_belongs_to_its_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let approvals = Approvals::new(dir.path().join("reach"));
        let root = Utf8Path::new("/work/project");
        assert_eq!(approvals.approved(root).unwrap(), None);
        let r = reach(EgressMode::Allowlist, &["a.example"]);
        approvals.record(root, &r).unwrap();
        assert_eq!(approvals.approved(root).unwrap(), Some(r.clone()));
        // Another checkout's record copied over this one's approves nothing.
        fs_err::copy(
            approvals.path_of(root),
            approvals.path_of(Utf8Path::new("/work/other")),
        )
        .unwrap();
        assert_eq!(
            approvals.approved(Utf8Path::new("/work/other")).unwrap(),
            None
        );
        let dir = Some(dir.path().join("reach"));
        let judge = |reach: &Reach, approve: bool, dry_run: bool| {
            super::judge(Some(reach), root, dir.as_deref(), approve, dry_run)
        };
        assert!(judge(&r, false, false).unwrap().recorded);
        let narrow = judge(&reach(EgressMode::None, &[]), false, false).unwrap();
        assert!(narrow.notes.is_empty() && !narrow.recorded);
        let wide = reach(EgressMode::Allowlist, &["a.example", "b.example"]);
        let err = judge(&wide, false, false).unwrap_err();
        assert!(err.to_string().contains("+ host `b.example`"), "{err}");
        for (approve, dry_run, start) in [
            (true, false, "approved"),
            (false, true, "`aibox apply` will ask"),
        ] {
            let notes = judge(&wide, approve, dry_run).unwrap().notes;
            assert!(notes.len() == 1 && notes[0].starts_with(start), "{notes:?}");
        }
    }

    #[test]
    fn a_broken_record_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let approvals = Approvals::new(dir.path());
        let root = Utf8Path::new("/work/project");
        fs_err::write(approvals.path_of(root), "{ not json").unwrap();
        let err = approvals.approved(root).unwrap_err();
        assert!(matches!(err, EngineError::ReachRecord { .. }), "{err}");
        assert!(err.to_string().contains(".json"), "{err}");
    }
}
