//! Resolve, then plan: everything a plan needs from outside the configuration files.
//!
//! [`resolve`] is the one step that may touch the network or write temporary files. It
//! loads the configuration once (`aibox.toml` + `.aibox-local.toml`, with the checks of
//! `config validate`), reads `aibox.lock`, takes the seccomp decision (and, when the
//! engine's default profile is kept, judges the engine Codex's sandbox will run on),
//! fetches and verifies the pinned processkit release (from the download cache, or by
//! downloading it when [`PlanOptions::offline`] is false), and runs the skill review of
//! the skills the release or the project would register (release skills are read in the
//! release's own verified folder, with no temporary copy), locks the dependencies of the MCP servers it would register
//! ([`crate::mcp_envs`], [`crate::mcp_npm`]), and captures the current bytes of every
//! project file the plan reads ([`Snapshot`], see [`crate::snapshot`] for which and why),
//! the bytes of an unverified release's files that the policy gate scans, and the clock
//! (the install record's time). [`crate::plan()`], `doctor`, `mcp list`, `up` and the
//! consent prompt all work from the [`Resolved`] value; none of them downloads on its
//! own, and the plan reads no file and no clock at all.
//!
//! This module points at no plan code: its options ([`PlanOptions`]) are defined here,
//! and `plan` and the plan sources import from it, never the other way.
//!
//! `doctor` and `mcp list` resolve with `offline = true`: a release that is not in the
//! cache is [`ProcesskitState::NotResolved`] and they say so instead of downloading it.

use std::collections::{BTreeMap, BTreeSet};

use aibox_config::{AiboxToml, ContextMode, GatewayMode, Project, ReviewScope};
use aibox_provenance::lock::Lock;
use aibox_provenance::source::{FetchOptions, SourceKind, fetch_release, source_kind};
use aibox_provenance::{Cache, Sha256, VerifiedRelease};
use aibox_skill_review::{GateError, RefusedSkill};
use camino::{Utf8Path, Utf8PathBuf};

use crate::error::EngineError;
use crate::mcp_resolver::Notice;
use crate::records;
use crate::skill_review::{ReviewContext, SkillOrigin};
use crate::skills::HandAdded;
use crate::snapshot::Snapshot;
use crate::writer::ProjectRoot;

/// The project's seccomp decision (its home is below `config_check`, which takes it too).
pub use crate::security::Security;

/// The processkit content the plan installs.
#[derive(Debug)]
pub enum ProcesskitState {
    /// Context mode `harness-only`, or no `[processkit] source`: nothing to install.
    NotConfigured,
    /// Resolved offline and the release is not in the download cache (never downloaded
    /// by `doctor` or `mcp list`); `aibox apply` fetches it.
    NotResolved {
        /// Why, in one sentence.
        reason: String,
    },
    /// The verified release and its reviewed skills.
    Resolved(Box<ResolvedRelease>),
}

/// A verified processkit release with the outcome of the skill review.
#[derive(Debug)]
pub struct ResolvedRelease {
    /// The verified release (a manifest; the bytes stay in the unpacked store).
    pub release: VerifiedRelease,
    /// The live state the install plan is computed from (installed files, marker,
    /// snapshots, the pending intent), scanned here so that planning reads no file.
    pub scan: aibox_provenance::LiveScan,
    /// Its skill catalog.
    pub catalog: aibox_provenance::catalog::Catalog,
    /// Skill folders under `context/skills/` the release did not ship that declare an
    /// MCP server (third-party, gated), with the servers they declare.
    pub(crate) hand_added: Vec<(HandAdded, Vec<aibox_provenance::ProcesskitServer>)>,
    /// The gate's refusal: failing gated skills without a recorded consent.
    pub(crate) refused: Option<(Vec<RefusedSkill>, String)>,
    /// The trusted source that vouches for the release; `None` when it comes from an
    /// untrusted source or is unverified (its skills are third-party).
    pub trusted_by: Option<String>,
    /// Release skills with an MCP server whose installed files differ from the release:
    /// third-party, reviewed on their live files.
    pub edited: Vec<EditedSkill>,
    /// The locked Python environments of the servers the plan would register.
    pub mcp_envs: crate::mcp_envs::McpEnvs,
    /// The hosts the installed skills declare (the egress allowlist's skill entries).
    pub skill_hosts: crate::network::SkillsHosts,
    /// The release's hook scripts and pre-authorisation spec (read here, so planning
    /// reads no release file for them).
    pub wiring: aibox_mcp_registration::ProcesskitWiring,
    /// The bytes of an unverified release's files, which the policy gate's secret scan
    /// reads (read here, so planning reads no release file for them).
    pub(crate) gated_copies: GatedCopies,
    /// The time of this resolve (RFC 3339), which the install plan stamps on the marker
    /// and migration records: taken here, so planning reads no clock either.
    pub now: String,
}

/// The files of an unverified release as the policy gate scans them, read once by
/// [`resolve`]: the plan plans them as copies from the unpacked release and the gate,
/// which skips verified content only, needs their bytes. Empty for a verified release.
#[derive(Default)]
pub(crate) struct GatedCopies(
    std::collections::BTreeMap<std::path::PathBuf, Result<Vec<u8>, String>>,
);

impl GatedCopies {
    /// Reads every file of `release`'s unpacked payload when the release is unverified,
    /// each checked against its verified size and digest (a failure is kept, as the
    /// phrase [`aibox_config::CopyFrom::read_verified`] gives, for the plan to report).
    fn read(release: &VerifiedRelease) -> Self {
        if release.verification != aibox_provenance::Verification::Unverified {
            return Self::default();
        }
        let payload = &release.payload;
        Self(
            payload
                .files
                .keys()
                .filter_map(|rel| payload.copy_from(rel))
                .map(|from| {
                    let bytes = from.read_verified();
                    (from.path(), bytes)
                })
                .collect(),
        )
    }

    /// The bytes of copy source `from` as resolve read them; `None` when resolve did not
    /// read it.
    pub(crate) fn get(&self, from: &aibox_config::CopyFrom) -> Option<Result<&[u8], &str>> {
        self.0
            .get(&from.path())
            .map(|r| r.as_ref().map(Vec::as_slice).map_err(String::as_str))
    }
}

impl std::fmt::Debug for GatedCopies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Counts, not contents: a release may hold thousands of files.
        f.debug_struct("GatedCopies")
            .field("files", &self.0.len())
            .field(
                "bytes",
                &self.0.values().flatten().map(Vec::len).sum::<usize>(),
            )
            .finish()
    }
}

impl ResolvedRelease {
    /// The skill review gate's outcome: `Ok` when every gated skill passed or was
    /// consented to.
    ///
    /// # Errors
    /// `aibox::skill_review::refused` naming the failing skills.
    pub fn gate(&self) -> Result<(), EngineError> {
        match &self.refused {
            None => Ok(()),
            Some((skills, help)) => Err(EngineError::from(aibox_skill_review::refusal(
                skills.clone(),
                help.clone(),
            ))),
        }
    }
}

/// A download progress sink: bytes received so far and the announced total. The CLI
/// draws a progress line from it on a terminal; the engine itself never prints.
pub type DownloadProgress = std::sync::Arc<dyn Fn(u64, Option<u64>) + Send + Sync>;

/// Options of [`resolve`] (and so of the plan built from it).
#[derive(Clone)]
pub struct PlanOptions {
    /// Version recorded in generated files' labels and in `aibox.lock`.
    pub aibox_version: String,
    /// Where verified downloads are cached (default: `$XDG_CACHE_HOME/aibox`, else
    /// `~/.cache/aibox`).
    pub cache_dir: Option<Utf8PathBuf>,
    /// Called while a processkit release downloads.
    pub download_progress: Option<DownloadProgress>,
    /// The engine the Codex seccomp gate judges; `None` resolves it from this process's
    /// environment (see [`crate::codex_sandbox::target_engine`]) when the gate needs it.
    pub engine: Option<aibox_policy::TargetEngine>,
    /// Never download: a processkit release that is not in the download cache is
    /// [`crate::resolve::ProcesskitState::NotResolved`] (`doctor` and `mcp list` resolve this way).
    pub offline: bool,
    /// How MCP servers' Python dependencies that `aibox.lock` does not hold yet are
    /// resolved (see [`crate::mcp_envs`]).
    pub python_resolver: crate::mcp_resolver::Resolver,
    /// Told before a resolver runs (it may take tens of seconds on a cold cache).
    pub notice: Option<Notice>,
    /// How team MCP servers' npm trees that `aibox.lock` does not hold yet are resolved
    /// (see [`crate::mcp_npm`]).
    pub npm_resolver: crate::mcp_resolver::Resolver,
    /// Planned for `apply --check` (set by [`crate::apply()`]): with no container engine
    /// found, the engine-aware seccomp refusal is a warning, not an error. It guards
    /// running the container, and the files do not depend on the engine, so a CI runner
    /// without one can still tell whether they are current.
    pub check_only: bool,
    /// Planned for `apply --force` (set by [`crate::apply()`]): a file aibox writes whole
    /// (the devcontainer's and the seccomp profiles) that still holds git's conflict
    /// markers is not refused here; the apply backs it up and writes it again, as it does
    /// a hand-edited one. The lock and the harness files, which hold what no
    /// configuration says, are refused all the same.
    pub replace_conflicted: bool,
}

impl std::fmt::Debug for PlanOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanOptions")
            .field("aibox_version", &self.aibox_version)
            .field("cache_dir", &self.cache_dir)
            .field("download_progress", &self.download_progress.is_some())
            .field("engine", &self.engine)
            .field("offline", &self.offline)
            .field("python_resolver", &self.python_resolver)
            .field("notice", &self.notice.is_some())
            .field("npm_resolver", &self.npm_resolver)
            .field("check_only", &self.check_only)
            .field("replace_conflicted", &self.replace_conflicted)
            .finish()
    }
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            aibox_version: env!("CARGO_PKG_VERSION").to_owned(),
            cache_dir: None,
            download_progress: None,
            engine: None,
            offline: false,
            python_resolver: crate::mcp_resolver::Resolver::default(),
            notice: None,
            npm_resolver: crate::mcp_resolver::Resolver::default(),
            check_only: false,
            replace_conflicted: false,
        }
    }
}

/// The install settings of the configuration (for the live scan here and the install
/// plan of the processkit source).
pub(crate) fn install_options<'a>(
    config: &'a AiboxToml,
    now: &'a str,
    cli_version: &'a str,
) -> aibox_provenance::PlanOptions<'a> {
    aibox_provenance::PlanOptions {
        packages: &config.context.packages,
        include: &config.skills.include,
        exclude: &config.skills.exclude,
        prefer_gateway: config.ai.mcp.gateway.mode == GatewayMode::Auto,
        src_path: config.processkit.src_path.as_deref(),
        now,
        cli_version,
    }
}

/// Everything a plan needs besides the project's own files: see the module docs.
#[derive(Debug)]
pub struct Resolved {
    root: ProjectRoot,
    /// The loaded configuration (checked like `config validate`).
    pub project: Project,
    /// The lock written by the previous apply, if any.
    pub previous_lock: Option<Lock>,
    /// The seccomp decision.
    pub security: Security,
    /// The processkit release to install.
    pub processkit: ProcesskitState,
    /// The locked npm trees of the team servers started with `npx`.
    pub mcp_npm: crate::mcp_npm::NpmEnvs,
    /// The locked environments of the team servers started with `uvx`.
    pub mcp_uvx: crate::mcp_uvx::UvxEnvs,
    /// The project files the plan reads, as they were when resolved.
    pub files: Snapshot,
    pub(crate) options: PlanOptions,
}

impl Resolved {
    /// The project root.
    pub fn root(&self) -> &Utf8Path {
        self.root.path()
    }

    pub(crate) fn project_root(&self) -> &ProjectRoot {
        &self.root
    }

    /// The options it was resolved with.
    pub fn options(&self) -> &PlanOptions {
        &self.options
    }

    /// Frees the per-file state only planning reads, once the plan is made: the
    /// processkit scan (live states, the parsed marker, snapshot listings) and the
    /// release manifest. The apply that follows reads neither (the plan's copies carry
    /// their source, size and digest; the payload's folder stays), and at ten times
    /// processkit's size they were several MB of its peak memory.
    pub(crate) fn free_planning_state(&mut self) {
        if let ProcesskitState::Resolved(r) = &mut self.processkit {
            r.scan.files = aibox_provenance::SharedPathTable::new();
            r.scan.parsed_marker = None;
            r.scan.snapshot_files = Vec::new();
            r.scan.stale_snapshots = std::collections::BTreeSet::new();
            r.release.payload.files = std::sync::Arc::default();
        }
    }

    /// Whether the processkit release could not be resolved offline.
    pub fn not_resolved(&self) -> Option<&str> {
        match &self.processkit {
            ProcesskitState::NotResolved { reason } => Some(reason),
            _ => None,
        }
    }
}

/// Resolves the project at `root` (see the module docs).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let root = camino::Utf8Path::from_path(dir.path()).unwrap();
/// # fs_err::write(root.join("aibox.toml"), "[container]\nname = \"demo\"\n").unwrap();
/// let options = aibox_engine::PlanOptions { offline: true, ..Default::default() };
/// let resolved = aibox_engine::resolve(root, &options)?;
/// assert_eq!(resolved.project.config.container.name, "demo");
/// # Ok::<(), aibox_engine::EngineError>(())
/// ```
///
/// # Errors
/// An invalid configuration or lock, a release that cannot be fetched or verified, an
/// unreadable skill, a project file the plan reads that is a symlink, a folder or
/// unreadable.
pub fn resolve(root: &Utf8Path, options: &PlanOptions) -> Result<Resolved, EngineError> {
    let root = ProjectRoot::open(root)?;
    // The same checks as `config validate` and `config set`.
    let project = crate::config_check::check_project(root.path())?;
    resolve_in(root, project, options)
}

/// Like [`resolve`], with a configuration the caller already loaded (and checked with
/// [`crate::config_check::check_project`]).
///
/// # Errors
/// As [`resolve`], without the configuration errors.
pub fn resolve_project(
    root: &Utf8Path,
    project: Project,
    options: &PlanOptions,
) -> Result<Resolved, EngineError> {
    resolve_in(ProjectRoot::open(root)?, project, options)
}

/// [`resolve_project`] for a configuration loaded without the team-file checks
/// ([`aibox_config::load_project`]): runs them first, as `plan` always did.
pub(crate) fn resolve_checked(
    root: &ProjectRoot,
    project: Project,
    options: &PlanOptions,
) -> Result<Resolved, EngineError> {
    crate::config_check::check_loaded(root.path(), &project)?;
    resolve_in(root.clone(), project, options)
}

pub(crate) fn resolve_in(
    root: ProjectRoot,
    project: Project,
    options: &PlanOptions,
) -> Result<Resolved, EngineError> {
    crate::snapshot::check_merge_conflicts(&root, options.replace_conflicted)?;
    let previous_lock = crate::snapshot::read_lock(&root)?;
    let security = Security::judged(&project.config, options.engine, options.check_only);
    let files = Snapshot::capture(&root, &project, previous_lock.as_ref())?;
    // Read and checked once: the release download, the lockers and the index question
    // all trust it. A run that may ask the network (`up`'s resolve among them) refuses an
    // unusable file first; an offline one never asks, and doctor reports the file.
    let extra_ca = if options.offline {
        crate::config_check::http_extra_ca(root.path(), &project.local)
    } else {
        crate::config_check::http_extra_ca_checked(root.path(), &project.local)?
    };
    let processkit = resolve_processkit(
        &root,
        &project,
        previous_lock.as_ref(),
        &files,
        (options, extra_ca.as_ref()),
    )?;
    let mcp_npm = crate::mcp_npm::lock(
        &project.config.ai.mcp.servers,
        previous_lock
            .as_ref()
            .and_then(|l| l.mcp.as_ref())
            .map(|m| &m.npm),
        &options.npm_resolver,
        options.offline,
        mcp_cache(options).as_ref(),
        (options.notice.as_ref(), extra_ca.as_deref()),
    );
    let index = crate::mcp_uvx::Index::from_env(aibox_provenance::HttpOptions {
        extra_ca_pem: extra_ca.clone(),
        ..aibox_provenance::HttpOptions::default()
    });
    let cache = mcp_cache(options);
    let mcp_uvx = crate::mcp_uvx::lock(
        &project.config.ai.mcp.servers,
        &index,
        crate::mcp_uvx::distro_python(&project.config.container.base_image),
        crate::mcp_envs::Resolving {
            previous: previous_lock.as_ref().and_then(|l| l.mcp.as_ref()),
            resolver: &options.python_resolver,
            offline: options.offline,
            cache: cache.as_ref(),
            notice: options.notice.as_ref(),
            extra_ca: extra_ca.as_deref(),
        },
    );
    Ok(Resolved {
        root,
        project,
        previous_lock,
        security,
        processkit,
        mcp_npm,
        mcp_uvx,
        files,
        options: options.clone(),
    })
}

fn resolve_processkit(
    root: &ProjectRoot,
    project: &Project,
    previous_lock: Option<&Lock>,
    files: &Snapshot,
    (options, extra_ca): (&PlanOptions, Option<&std::sync::Arc<str>>),
) -> Result<ProcesskitState, EngineError> {
    let config = &project.config;
    // Neither a source nor a version: nothing is pinned, so nothing is installed (a
    // version alone means the official repository).
    let pk = &config.processkit;
    if config.context.mode != ContextMode::Processkit
        || (pk.source.is_none() && pk.version.is_none())
    {
        return Ok(ProcesskitState::NotConfigured);
    }
    let previous = previous_lock.and_then(|l| l.processkit.as_ref());
    let cache = Cache::at_or_default(options.cache_dir.as_deref().map(Utf8Path::as_std_path));
    if options.offline
        && let Some(reason) = not_cached(root, project, previous, cache.as_ref())?
    {
        return Ok(ProcesskitState::NotResolved { reason });
    }
    let mut report = |p: aibox_provenance::Progress| {
        if let Some(sink) = &options.download_progress {
            sink(p.received, p.total);
        }
    };
    let mut fetch = FetchOptions {
        cache,
        http: aibox_provenance::HttpOptions {
            extra_ca_pem: extra_ca.cloned(),
            ..aibox_provenance::HttpOptions::default()
        },
        progress: Some(&mut report),
        ..FetchOptions::default()
    };
    let release = fetch_release(
        &config.processkit,
        root.path().as_std_path(),
        previous,
        &mut fetch,
    )
    .map_err(EngineError::from)?;
    let catalog = aibox_provenance::catalog::Catalog::from_payload(&release.payload)
        .map_err(EngineError::from)?;
    check_skill_folders(root.path(), &catalog, previous.map(|p| p.version.as_str()))?;
    let now = aibox_provenance::time::now_rfc3339();
    let scan = scan_live(root, project, files, &release, &catalog, &now, options)?;
    // The configuration's skills with their dependencies: for the review, pk-doctor and
    // the declared hosts.
    let selected = selected_skills(config, &catalog)?;
    let plan_opts = install_options(&project.config, &now, &options.aibox_version);
    let reviewed = review_skills(
        root.path(),
        project,
        (&release, &catalog, &plan_opts),
        &selected,
        &scan,
    )?;
    // pk-doctor's script, when its skill is selected: locked like a server, so `doctor
    // --processkit` runs it on pinned dependencies.
    let pk_doctor = catalog
        .skills
        .get("pk-doctor")
        .filter(|_| selected.contains("pk-doctor"))
        .map(|s| format!("{}/scripts/doctor.py", s.dir))
        .filter(|p| release.payload.files.contains_key(p.as_str()));
    let cache = mcp_cache(options);
    let mcp_envs = lock_server_envs(
        root,
        &release,
        &scan,
        &reviewed.hand_added,
        pk_doctor.as_deref(),
        crate::mcp_envs::Resolving {
            previous: previous_lock.and_then(|l| l.mcp.as_ref()),
            resolver: &options.python_resolver,
            offline: options.offline,
            cache: cache.as_ref(),
            notice: options.notice.as_ref(),
            extra_ca: fetch.http.extra_ca_pem.as_deref(),
        },
    );
    let wiring = release_wiring(&release)?;
    let gated_copies = GatedCopies::read(&release);
    let skill_hosts = crate::network::declared_by_skills(
        root.path(),
        &release,
        &catalog,
        &selected,
        reviewed.hand_added.iter().map(|(skill, _)| skill),
    );
    Ok(ProcesskitState::Resolved(Box::new(ResolvedRelease {
        release,
        scan,
        catalog,
        hand_added: reviewed.hand_added,
        refused: reviewed.refused,
        trusted_by: reviewed.trusted_by,
        edited: reviewed.edited,
        mcp_envs,
        skill_hosts,
        wiring,
        gated_copies,
        now,
    })))
}

/// The hook scripts `release` ships and its parsed pre-authorisation spec.
fn release_wiring(
    release: &VerifiedRelease,
) -> Result<aibox_mcp_registration::ProcesskitWiring, EngineError> {
    use aibox_mcp_registration::hooks::{CONTRACT_SCRIPT, GUARD_SCRIPT, PREAUTH_PATH};
    let files = &release.payload.files;
    let preauth = if files.contains_key(PREAUTH_PATH) {
        let bytes = release
            .payload
            .read(PREAUTH_PATH)
            .map_err(EngineError::from)?;
        let text = String::from_utf8_lossy(&bytes);
        Some(aibox_mcp_registration::Preauth::parse(&text).map_err(EngineError::from)?)
    } else {
        None
    };
    Ok(aibox_mcp_registration::ProcesskitWiring {
        scripts: [CONTRACT_SCRIPT, GUARD_SCRIPT]
            .into_iter()
            .filter(|p| files.contains_key(*p))
            .map(str::to_owned)
            .collect(),
        preauth,
    })
}

/// Refuses a file, symlink or special file where `context/skills`, a skill category or a
/// skill folder of the release must be a folder: nothing could be installed below it, and
/// its servers would be registered pointing at scripts that cannot exist.
fn check_skill_folders(
    root: &Utf8Path,
    catalog: &aibox_provenance::catalog::Catalog,
    installed: Option<&str>,
) -> Result<(), EngineError> {
    let mut dirs = BTreeSet::new();
    for skill in catalog.skills.values() {
        let mut dir = Utf8PathBuf::new();
        for part in Utf8Path::new(&skill.dir).components() {
            dir.push(part);
            if dir.as_str().starts_with("context/skills") {
                dirs.insert(dir.clone());
            }
        }
    }
    for dir in dirs {
        let Ok(meta) = fs_err::symlink_metadata(root.join(&dir)) else {
            continue;
        };
        let t = meta.file_type();
        let found = if t.is_dir() {
            continue;
        } else if t.is_symlink() {
            "symlink"
        } else if t.is_file() {
            "file"
        } else {
            "special file"
        };
        let snapshot = installed.map_or_else(
            || "the snapshot of an installed release (none is installed yet)".to_owned(),
            |v| {
                format!(
                    "the snapshot of the installed release, `{}/{v}/{dir}`",
                    aibox_provenance::record::SNAPSHOT_DIR
                )
            },
        );
        return Err(EngineError::NotAFolder {
            path: dir,
            found,
            snapshot,
        });
    }
    Ok(())
}

/// Locks the Python environments of every server the plan may register: the release's
/// (of the selected skills) and the hand-added skills'. Scripts are read from the
/// verified release, or from the project for hand-added skills; the release's
/// `PROVENANCE.toml` date is the resolver's upload cutoff.
fn lock_server_envs(
    root: &ProjectRoot,
    release: &VerifiedRelease,
    scan: &aibox_provenance::LiveScan,
    hand_added: &[(HandAdded, Vec<aibox_provenance::ProcesskitServer>)],
    pk_doctor: Option<&str>,
    how: crate::mcp_envs::Resolving<'_>,
) -> crate::mcp_envs::McpEnvs {
    let servers = scan
        .servers
        .iter()
        .chain(hand_added.iter().flat_map(|(_, s)| s.iter()));
    let mut deps = Vec::new();
    for server in servers {
        let Some(script) = server.script() else {
            continue;
        };
        let text = if release.payload.files.contains_key(script) {
            release.payload.read(script).map_err(|e| e.to_string())
        } else {
            fs_err::read(root.path().join(script)).map_err(|e| e.to_string())
        };
        let declared = text.and_then(|bytes| {
            aibox_provenance::pydeps::script_deps(&String::from_utf8_lossy(&bytes))
        });
        deps.push((server.name.clone(), declared));
    }
    if let Some(script) = pk_doctor {
        let declared = release
            .payload
            .read(script)
            .map_err(|e| e.to_string())
            .and_then(|b| aibox_provenance::pydeps::script_deps(&String::from_utf8_lossy(&b)));
        deps.push((crate::pk_doctor::ENV_NAME.to_owned(), declared));
    }
    let cutoff = release_date(release);
    crate::mcp_envs::lock(deps, cutoff.as_deref(), how)
}

/// The download cache, which keeps the resolutions of MCP server dependencies.
fn mcp_cache(options: &PlanOptions) -> Option<Cache> {
    Cache::at_or_default(options.cache_dir.as_deref().map(Utf8Path::as_std_path))
}

/// `[source] generated_at` of the release's `PROVENANCE.toml`, when it is an RFC 3339
/// UTC time: when the release was made.
fn release_date(release: &VerifiedRelease) -> Option<String> {
    let bytes = release.payload.read("PROVENANCE.toml").ok()?;
    let text = String::from_utf8_lossy(&bytes);
    // The `[source]` table alone when it can be cut out plainly: the whole file also
    // lists every release file, and the TOML parser holds all of its tokens at once
    // (about 7 MB at 8,600 files, for one date). The release's `PROVENANCE.toml` parsed
    // as a whole when it was verified, so the cut-out table parses the same.
    let generated_at = |doc: &toml_edit::DocumentMut| {
        doc.get("source")?
            .get("generated_at")?
            .as_str()
            .map(str::to_owned)
    };
    // A cut that parses ended at a real table header (a cut inside a multi-line array
    // leaves it open), so it holds all of `[source]`: a date missing there is missing.
    let at = match source_table(&text).map(|t| t.parse::<toml_edit::DocumentMut>()) {
        Some(Ok(doc)) => generated_at(&doc)?,
        _ => generated_at(&text.parse().ok()?)?,
    };
    let plausible = at.len() == 20
        && at.ends_with('Z')
        && at.as_bytes()[10] == b'T'
        && at
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b':' | b'T' | b'Z'));
    plausible.then_some(at)
}

/// The lines of the `[source]` table of a `PROVENANCE.toml` (its header up to the next
/// table header), when the text has no multi-line strings that could hide a header.
fn source_table(text: &str) -> Option<String> {
    if text.contains("\"\"\"") || text.contains("'''") {
        return None;
    }
    let mut lines = text.lines().skip_while(|l| l.trim() != "[source]");
    let header = lines.next()?;
    let mut table = format!("{header}\n");
    for line in lines.take_while(|l| !l.trim_start().starts_with('[')) {
        table.push_str(line);
        table.push('\n');
    }
    Some(table)
}

/// Scans the live processkit install (see [`aibox_provenance::scan`]): every file the
/// plan classifies (trusting the stat cache for unchanged ones), the marker, the
/// snapshot folders and the intent record of an interrupted apply. The intent record
/// comes from `files` (captured already), not from a second read; the stat cache is read
/// here and dropped after the scan.
fn scan_live(
    root: &ProjectRoot,
    project: &Project,
    files: &Snapshot,
    release: &VerifiedRelease,
    catalog: &aibox_provenance::catalog::Catalog,
    now: &str,
    options: &PlanOptions,
) -> Result<aibox_provenance::LiveScan, EngineError> {
    let opts = install_options(&project.config, now, &options.aibox_version);
    // The record of an interrupted apply, if any: resuming it completes exactly what
    // that run intended (see `aibox_provenance::Intent`).
    let interrupted = records::read_intent(files.get(Utf8Path::new(records::PENDING_PROCESSKIT))?);
    let stat_cache = records::read_stat_cache(root);
    // The release an interrupted run was installing: this one (only the selection
    // changed since), or another, read from the download cache if it is there (never
    // downloaded for this).
    let cached = interrupted
        .as_ref()
        .filter(|i| i.release_asset_sha256 != release.digest)
        .and_then(|i| {
            mcp_cache(options).and_then(|c| c.unpacked(&i.release_asset_sha256).ok().flatten())
        });
    let abandoned_release = match &interrupted {
        Some(i) if i.release_asset_sha256 == release.digest => Some(&release.payload),
        _ => cached.as_ref(),
    };
    let hints = aibox_provenance::Hints {
        interrupted: interrupted.as_ref(),
        stat_cache: stat_cache.as_ref(),
        abandoned_release,
    };
    aibox_provenance::scan(root.path().as_std_path(), release, catalog, &opts, hints)
        .map_err(EngineError::from)
}

/// Offline: why the release cannot be had without downloading, or `None` when it can
/// (a local archive or folder, or a URL whose pinned digest is in the cache: the fetch
/// then reads the cache and never opens a connection).
fn not_cached(
    root: &ProjectRoot,
    project: &Project,
    previous: Option<&aibox_provenance::record::ProcesskitLock>,
    cache: Option<&Cache>,
) -> Result<Option<String>, EngineError> {
    let section = &project.config.processkit;
    let kind = source_kind(section, root.path().as_std_path()).map_err(EngineError::from)?;
    if !matches!(kind, SourceKind::Http { .. }) {
        return Ok(None);
    }
    let source = section.effective_source().to_owned();
    let version = section.version.clone();
    // The digest the fetch would look up in the cache: the pin, else the lock's.
    let pin = section
        .sha256
        .as_deref()
        .map(|s| Sha256::parse(s, "`[processkit] sha256`"))
        .transpose()
        .map_err(EngineError::from)?;
    let locked = previous
        .filter(|l| l.source == source && version.as_deref().is_none_or(|v| v == l.version))
        .and_then(|l| l.release_asset_sha256);
    let what = format!(
        "processkit {} from {source}",
        version.as_deref().unwrap_or("(no version)")
    );
    let Some(expected) = pin.or(locked) else {
        return Ok(Some(format!(
            "{what} has no recorded digest yet, so it cannot be looked up in the download \
             cache; `aibox apply` downloads and verifies it"
        )));
    };
    let cached = match cache {
        Some(cache) => cache.contains(&expected).map_err(EngineError::from)?,
        None => false,
    };
    Ok((!cached).then(|| {
        format!(
            "{what} is not in the download cache (this command never downloads); `aibox apply` \
             downloads and verifies it"
        )
    }))
}

/// What the review of the gated skills found.
pub(crate) struct Reviewed {
    /// Hand-added skills with their servers.
    hand_added: Vec<(HandAdded, Vec<aibox_provenance::ProcesskitServer>)>,
    /// The gate's refusal, if any.
    refused: Option<(Vec<RefusedSkill>, String)>,
    /// The trusted source that vouches for the release (`None`: third-party).
    trusted_by: Option<String>,
    /// Release skills with a server whose installed files differ from the release.
    edited: Vec<EditedSkill>,
}

/// An installed release skill whose files differ from what the release installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditedSkill {
    /// Skill name.
    pub name: String,
    /// Root-relative folder.
    pub dir: String,
    /// What differs, relative to the folder.
    pub changes: String,
}

/// The skills the configuration selects from `catalog` (dependencies included).
fn selected_skills(
    config: &aibox_config::AiboxToml,
    catalog: &aibox_provenance::catalog::Catalog,
) -> Result<BTreeSet<String>, EngineError> {
    Ok(catalog
        .select(
            &config.context.packages,
            &config.skills.include,
            &config.skills.exclude,
        )
        .map_err(EngineError::from)?
        .skills)
}

/// The skill review of every gated skill the plan would register.
///
/// Trust comes from provenance, never from a skill's own metadata (`core: true` decides
/// only that a skill is always installed). A skill is first-party while two things hold:
/// its release is verified and comes from a trusted source (the official processkit
/// repository, or one listed in `[processkit] trusted_sources`), and its installed files
/// are byte-identical to what that release installed. First-party skills are reviewed on
/// demand (`aibox skill review` / `skill list` / `doctor`) and do not block `apply` unless
/// `[processkit] review = "all"`. Everything else is gated: the skills of a release from
/// an untrusted source or an unverified release (reviewed in the release's own verified
/// folder, before they are installed or registered), a release skill
/// that differs from the release once the apply is done (reviewed as the apply leaves
/// it, see [`aibox_provenance::after_apply`]: those are the files that run), and skill folders
/// under `context/skills/` that the release did not ship but that declare an MCP server.
/// A failing gated skill stops the apply until `aibox.toml` records a current
/// `[[skills.review_exceptions]]` consent for its content and failed points.
fn review_skills(
    root: &Utf8Path,
    project: &Project,
    (release, catalog, plan_opts): (
        &VerifiedRelease,
        &aibox_provenance::catalog::Catalog,
        &aibox_provenance::PlanOptions<'_>,
    ),
    selected: &BTreeSet<String>,
    scan: &aibox_provenance::LiveScan,
) -> Result<Reviewed, EngineError> {
    let marker = scan.parsed_marker.as_ref();
    let config = &project.config;
    let verified = release.verification != aibox_provenance::Verification::Unverified;
    let trusted_by = verified
        .then(|| aibox_provenance::trust::trusted_by(&config.processkit, root.as_std_path()))
        .flatten();
    let gate_release = trusted_by.is_none() || config.processkit.review == ReviewScope::All;
    let review_ctx = ReviewContext {
        origin: SkillOrigin::Release {
            source: release.source.clone(),
            version: release.version.clone(),
            sha256: verified.then(|| release.digest.to_string()),
            verified,
        },
        ..ReviewContext::default()
    };
    // The marker as the scan parsed it: a second parse held every installed path twice.
    let mut to_review = Vec::new();
    // The release's skill folders copied for the review, removed once it is done.
    let mut copies = Vec::new();
    let mut edited = Vec::new();
    // The `__pycache__` folders of skills whose only change is Python bytecode.
    let mut bytecode: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // Every selected skill that ships an MCP server, whether it is registered on its own
    // or served through the gateway (which exposes its tools too). Core skills are no
    // exception: `core: true` is not a trust decision. A range lookup each: a scan of
    // every release path per skill was quadratic.
    let gated: Vec<&aibox_provenance::catalog::Skill> = catalog
        .skills
        .values()
        .filter(|s| selected.contains(&s.name))
        .filter(|s| release.payload.holds_below(&format!("{}/mcp/", s.dir)))
        .collect();
    // Each judged as the apply will leave it (QA: judged as it was before, an upgrade's
    // new server script, or a file the install kept because one was there already, was
    // registered without review, and the next apply refused it).
    let dirs: BTreeSet<&str> = gated.iter().map(|s| s.dir.as_str()).collect();
    let after = aibox_provenance::after_apply(release, catalog, plan_opts, scan, &dirs)
        .map_err(EngineError::from)?;
    let none = BTreeMap::new();
    for skill in gated {
        let after = after.get(&skill.dir).unwrap_or(&none);
        let changes = changes_after(root, release, &skill.dir, after);
        if !changes.is_empty() {
            // Deleted by hand: kept deleted and not registered (the plan says so). So is a
            // skill whose every server script was deleted by hand: it registers nothing,
            // so there is nothing to gate (the plan warns that it is registered nowhere).
            let anything_left = after
                .values()
                .any(|a| *a != aibox_provenance::After::Absent)
                || !changes.added.is_empty();
            if anything_left && !servers_deleted(scan, &skill.name, &changes) {
                if let Some(dirs) = bytecode_only(&changes) {
                    bytecode.insert(skill.name.clone(), dirs);
                }
                edited.push(EditedSkill {
                    name: skill.name.clone(),
                    dir: skill.dir.clone(),
                    changes: changes.describe(&skill.dir),
                });
                let view = release
                    .payload
                    .folder_after(&skill.dir, root.as_std_path(), after)?;
                let dir = utf8_dir(view.path())?;
                copies.push(view);
                to_review.push((skill.name.clone(), dir, as_it_is(&skill.dir)));
            }
            continue;
        }
        if !gate_release {
            continue;
        }
        // A local release folder is read in place; an unpacked archive's skill folder is
        // a private copy, every byte checked against the manifest as it is copied, so the
        // review sees the bytes the install copies (which re-checks them again).
        let folder = release.payload.folder(&skill.dir)?;
        let dir = utf8_dir(folder.path())?;
        copies.push(folder);
        to_review.push((skill.name.clone(), dir, review_ctx.clone()));
    }
    // Skill folders the release did not ship: third-party whatever they claim.
    let shipped: BTreeSet<&str> = catalog.skills.values().map(|s| s.dir.as_str()).collect();
    let foreign = crate::skills::hand_added(root, &shipped, marker);
    for skill in &foreign {
        to_review.push((
            skill.name.clone(),
            root.join(&skill.dir),
            as_it_is(&skill.dir),
        ));
    }
    let refused = match aibox_skill_review::gate(project, &to_review) {
        Ok(_) => None,
        Err(GateError::Refused { skills, help } | GateError::StaleConsent { skills, help }) => {
            let help = bytecode_help(&skills, &bytecode).unwrap_or(help);
            let names: Vec<&str> = skills.iter().map(|s| s.skill.as_str()).collect();
            let registered = crate::skills::still_registered_note(root, &names);
            let help = if registered.is_empty() {
                help
            } else {
                format!("{registered}.\n{help}")
            };
            Some((skills, help))
        }
        Err(e) => return Err(EngineError::from(e)),
    };
    drop(copies);
    let mut hand_added = Vec::with_capacity(foreign.len());
    for skill in foreign {
        let servers = hand_added_servers(root, &skill)?;
        hand_added.push((skill, servers));
    }
    Ok(Reviewed {
        hand_added,
        refused,
        trusted_by,
        edited,
    })
}

/// The `__pycache__` folders of a skill whose only difference from the release is
/// Python bytecode in them (`None` when anything else differs).
fn bytecode_only(changes: &aibox_provenance::trust::SkillChanges) -> Option<BTreeSet<String>> {
    if !changes.modified.is_empty() || !changes.missing.is_empty() {
        return None;
    }
    changes
        .added
        .iter()
        .map(|p| crate::skills::bytecode_dir(p).map(str::to_owned))
        .collect::<Option<BTreeSet<_>>>()
        .filter(|dirs| !dirs.is_empty())
}

/// The refusal's help when the refused skills differ from the release only by Python
/// bytecode: their code ran where Python writes bytecode beside it (the image aibox
/// generates sets `PYTHONPYCACHEPREFIX`). A consent to bytecode makes no sense, and a
/// `.pyc` there is code a Python without the prefix would load: delete it. `None` when a
/// refused skill has other changes (the review's own help then applies).
fn bytecode_help(
    refused: &[RefusedSkill],
    bytecode: &BTreeMap<String, BTreeSet<String>>,
) -> Option<String> {
    let mut dirs = Vec::new();
    for skill in refused {
        dirs.extend(bytecode.get(&skill.skill)?.iter().cloned());
    }
    Some(format!(
        "the skills differ from the release only by Python bytecode (`__pycache__`), \
         written when their scripts ran on the host, or in a container built before aibox \
         set PYTHONPYCACHEPREFIX (which keeps bytecode out of the workspace; the next \
         `aibox up` rebuilds it). Python may load bytecode instead of the reviewed \
         scripts, so it is not consented to: delete it, then run the command again:\n  \
         rm -rf {}",
        crate::process::shell_words(&dirs)
    ))
}

/// How the release skill folder `dir` differs, once the apply is done (`after`, see
/// [`aibox_provenance::after_apply`]), from what the release ships there: its files the
/// apply keeps as they are (modified), its files that will be gone (missing), and files
/// it does not ship that stay (added: kept by the apply, or added by hand). Its `config/`
/// folder holds the user's settings and does not count.
fn changes_after(
    root: &Utf8Path,
    release: &VerifiedRelease,
    dir: &str,
    after: &BTreeMap<String, aibox_provenance::After>,
) -> aibox_provenance::trust::SkillChanges {
    use aibox_provenance::After;
    let config = format!("{dir}/config/");
    let mut changes = aibox_provenance::trust::SkillChanges::default();
    for (path, a) in after.iter().filter(|(p, _)| !p.starts_with(&config)) {
        let shipped = release.payload.files.contains_key(path.as_str());
        match (a, shipped) {
            (After::Live, true) => changes.modified.push(path.clone()),
            (After::Live, false) => changes.added.push(path.clone()),
            (After::Absent, true) => changes.missing.push(path.clone()),
            (After::Release(_), _) | (After::Absent, false) => {}
        }
    }
    aibox_provenance::integrity::walk_sorted(root.as_std_path(), dir, &mut |p| {
        if !after.contains_key(p) && !p.starts_with(&config) {
            changes.added.push(p.to_owned());
        }
    });
    changes.added.sort();
    changes
}

/// `path` as UTF-8, for the review.
fn utf8_dir(path: &std::path::Path) -> Result<Utf8PathBuf, EngineError> {
    Utf8PathBuf::from_path_buf(path.to_owned()).map_err(|p| {
        EngineError::io(
            "review",
            p.display().to_string(),
            std::io::Error::other("non-UTF-8 path"),
        )
    })
}

/// Whether every MCP server the release skill `name` would register has its script
/// deleted by hand (`changes.missing`): the plan keeps the deletion and registers none
/// of them, so the skill registers nothing the review gate could let through. A skill
/// served through the gateway has no servers of its own in the scan: still gated.
fn servers_deleted(
    scan: &aibox_provenance::LiveScan,
    name: &str,
    changes: &aibox_provenance::trust::SkillChanges,
) -> bool {
    let mut scripts = scan
        .servers
        .iter()
        .filter(|s| s.skill == name)
        .map(aibox_provenance::ProcesskitServer::script)
        .peekable();
    scripts.peek().is_some()
        && scripts.all(|script| script.is_some_and(|p| changes.missing.iter().any(|m| m == p)))
}

/// The review context of the skill folder `dir` reviewed as it is on disk.
fn as_it_is(dir: &str) -> ReviewContext {
    ReviewContext {
        origin: SkillOrigin::LocalPath {
            path: dir.to_owned(),
        },
        ..ReviewContext::default()
    }
}

/// The servers a hand-added skill declares in its `mcp/mcp-config.json`, with the same
/// checks as the release's (name prefix, script inside the skill folder).
fn hand_added_servers(
    root: &Utf8Path,
    skill: &HandAdded,
) -> Result<Vec<aibox_provenance::ProcesskitServer>, EngineError> {
    // Only the configuration the review judged (`<skill>/mcp/mcp-config.json`): another
    // one deeper in the folder, or under a `.git` folder the review does not read, would
    // register a server nobody reviewed (QA29 r1, r10).
    let reviewed = format!("{}/mcp/mcp-config.json", skill.dir);
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for rel in files_under(root, &skill.dir) {
        if rel == reviewed || rel.ends_with("/server.py") {
            let data = fs_err::read(root.join(&rel))
                .map_err(|e| EngineError::io("read", root.join(&rel), e))?;
            files.push((rel, data));
        }
    }
    aibox_provenance::servers::servers(files.iter().map(|(p, d)| (p.as_str(), d.as_slice())), false)
        .map_err(EngineError::from)
}

/// Every regular file below `dir` (root-relative, sorted).
fn files_under(root: &Utf8Path, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![Utf8PathBuf::from(dir)];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = fs_err::read_dir(root.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = rel.join(&name);
            match entry.file_type() {
                // As the review reads a skill: a `.git` folder is not part of it.
                Ok(t) if t.is_dir() && name != ".git" => stack.push(child),
                Ok(t) if t.is_file() => out.push(child.into_string()),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    //! Cutting `[source]` out of a `PROVENANCE.toml` reads what the whole file says.

    use super::source_table;

    fn whole(text: &str) -> Option<String> {
        let doc: toml_edit::DocumentMut = text.parse().ok()?;
        doc.get("source")?
            .get("generated_at")?
            .as_str()
            .map(str::to_owned)
    }

    /// As `release_date` reads it: the cut-out table when it parses, else the whole.
    fn cut(text: &str) -> Option<String> {
        match source_table(text).map(|t| t.parse::<toml_edit::DocumentMut>()) {
            Some(Ok(doc)) => doc
                .get("source")?
                .get("generated_at")?
                .as_str()
                .map(str::to_owned),
            _ => whole(text),
        }
    }

    #[test]
    fn the_source_table_alone_gives_the_same_date() {
        let at = "generated_at = \"2026-05-01T10:00:00Z\"";
        for text in [
            format!("[source]\ngenerated_for_tag = \"v1\"\n{at}\n\n[files]\n\"a\" = \"v1\"\n"),
            format!("# c\n[files]\n\"a\" = \"v1\"\n\n[source]\r\n{at}\r\n"),
            format!("[source]\ntags = [\n  \"x\",\n]\n{at}\n[source.more]\nk = 1\n"),
        ] {
            assert_eq!(cut(&text), whole(&text), "{text}");
            assert_eq!(
                cut(&text).as_deref(),
                Some("2026-05-01T10:00:00Z"),
                "{text}"
            );
        }
        // No date, or a cut that ends inside an array (not at a header): the same answer.
        for text in [
            "[source]\ngenerated_for_tag = \"v1\"\n[files]\n\"a\" = \"v1\"\n".to_owned(),
            format!("[source]\nx = [\n  [1, 2],\n]\n{at}\n"),
        ] {
            assert_eq!(cut(&text), whole(&text), "{text}");
        }
        // Not cut out plainly: multi-line strings, no `[source]` header (dotted keys);
        // the caller then parses the whole file.
        assert!(source_table(&format!("[source]\nnote = \"\"\"\n[x]\n\"\"\"\n{at}\n")).is_none());
        assert!(source_table(&format!("source.{at}\n")).is_none());
    }
}
