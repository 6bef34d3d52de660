//! `aibox skill ...`: reviewing a skill by path or by installed name, and editing the
//! `[skills]` selection of `aibox.toml` without losing comments.

use aibox_config::edit::ConfigFile;
use aibox_provenance::lock::{LOCK_FILE, Lock};
use aibox_provenance::source::Verification;
use aibox_skill_review::SkillTree;
use std::collections::{BTreeMap, BTreeSet};

use camino::{Utf8Path, Utf8PathBuf};

use crate::config_edit::{ConfigEditError, config_set};
use crate::error::EngineError;
pub use crate::error::SkillError;
use crate::skill_review::{Outcome, Review, ReviewContext, SkillOrigin, review};

/// Reviews `target`: an existing directory is reviewed as a local path; anything else is
/// the name of a skill installed under `context/skills/<category>/<name>` of the project
/// at `root`, reviewed with the provenance recorded in `aibox.lock`.
pub fn review_target(root: Option<&Utf8Path>, target: &str) -> Result<Review, EngineError> {
    let as_path = Utf8Path::new(target);
    if as_path.is_dir() {
        let ctx = ReviewContext {
            origin: SkillOrigin::LocalPath {
                path: target.to_owned(),
            },
            ..ReviewContext::default()
        };
        return review(as_path, &ctx);
    }
    let Some(root) = root else {
        return Err(EngineError::from(SkillError::NoProject {
            target: target.to_owned(),
        }));
    };
    let dir = find_installed(root, target)?;
    let lock = match fs_err::read_to_string(root.join(LOCK_FILE)) {
        Ok(text) => Some(Lock::parse(&text, Utf8Path::new(LOCK_FILE))?),
        Err(_) => None,
    };
    let config = aibox_config::load_project(root).ok().map(|p| p.config);
    let basis = TrustBasis::read(root, config.as_ref());
    let rel = dir.strip_prefix(root).unwrap_or(&dir).to_string();
    review(
        &dir,
        &review_context(basis.of(root, &rel), lock.as_ref(), &rel),
    )
}

pub use aibox_skill_review::consent_snippet;

/// The content digest of the skill folder `dir` that a `[[skills.review_exceptions]]`
/// consent records.
///
/// # Errors
/// The folder or one of its files cannot be read.
pub fn content_sha256(dir: &Utf8Path) -> Result<String, EngineError> {
    aibox_skill_review::content_sha256(dir).map_err(EngineError::from)
}

/// Where a skill's files came from, by provenance only (never by its own metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trust {
    /// Installed from a verified release of a trusted source, and unchanged since.
    FirstParty,
    /// Anything else: a release from an untrusted source or an unverified one, a release
    /// skill edited in place, or a folder the release did not ship.
    ThirdParty,
}

/// The trust of one installed skill and why, with what `aibox apply` does with it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillTrust {
    /// First- or third-party.
    pub trust: Trust,
    /// Why, in one sentence.
    pub why: String,
    /// The content digest a `[[skills.review_exceptions]]` consent records.
    pub sha256: String,
    /// The sources whose verified releases are first-party (`[processkit]
    /// trusted_sources` and the official repository).
    pub trusted_sources: Vec<String>,
    /// It declares an MCP server.
    pub mcp_server: bool,
    /// The verdict `skill list` and `doctor` show for it.
    pub gate: SkillGate,
}

/// The trust of the installed skill `name` (`None` when no such skill is installed or
/// the project's configuration cannot be read): the same [`SkillInfo`] `skill list`
/// computes, for this one skill only.
pub fn trust_of_installed(root: &Utf8Path, name: &str) -> Option<SkillTrust> {
    let project = aibox_config::load_project(root).ok()?;
    let skill = installed(root).into_iter().find(|s| s.name == name)?;
    let info = Lister::new(root, &project).ok()?.info(skill).ok()?;
    Some(SkillTrust {
        trust: info.origin,
        why: info.origin_reason,
        sha256: info.sha256,
        trusted_sources: aibox_provenance::trust::trusted_sources(&project.config.processkit),
        mcp_server: info.mcp_server,
        gate: info.gate,
    })
}

/// What trust is decided from, read once per command: the install marker (per-file
/// manifest and verification) and the trusted source that vouches for the configured
/// release, if any.
struct TrustBasis {
    marker: Option<aibox_provenance::Marker>,
    trusted_by: Option<String>,
    source: Option<String>,
}

impl TrustBasis {
    fn read(root: &Utf8Path, config: Option<&aibox_config::AiboxToml>) -> Self {
        let marker = aibox_provenance::Marker::read(root.as_std_path());
        // The installed release must be verified and come from a trusted source: the
        // source it was installed from, as its marker records it, judged against the
        // configured trusted sources. Not the configured source: a version pinned in
        // `aibox.toml` but not applied yet (another archive path) says nothing about the
        // files installed, and `apply` judges the new release itself when it installs it.
        let trusted_by = config.and_then(|c| {
            let installed = marker.as_ref()?;
            if installed.manifest.verification == Verification::Unverified {
                return None;
            }
            let section = aibox_config::ProcesskitSection {
                source: Some(installed.install.processkit_source.clone()),
                ..c.processkit.clone()
            };
            aibox_provenance::trust::trusted_by(&section, root.as_std_path())
        });
        Self {
            trusted_by,
            source: marker.as_ref().map(|m| m.install.processkit_source.clone()),
            marker,
        }
    }

    /// The trust of the skill folder `dir` (root-relative).
    fn of(&self, root: &Utf8Path, dir: &str) -> Trust {
        self.explain(root, dir, &BTreeMap::new()).0
    }

    /// The trust of the skill folder `dir` (root-relative) and why; `known` holds the
    /// digests of files just hashed (root-relative), which are not read again.
    fn explain(
        &self,
        root: &Utf8Path,
        dir: &str,
        known: &BTreeMap<String, aibox_provenance::Sha256>,
    ) -> (Trust, String) {
        let third = |why: String| (Trust::ThirdParty, why);
        let Some(marker) = self
            .marker
            .as_ref()
            .filter(|m| aibox_provenance::trust::installed_by_release(m, dir))
        else {
            return third("the installed release did not ship this folder".to_owned());
        };
        let source = self.source.as_deref().unwrap_or_default();
        let Some(by) = &self.trusted_by else {
            return third(
                if marker.manifest.verification == Verification::Unverified {
                    format!("installed from `{source}` without verification")
                } else {
                    format!(
                        "installed from `{source}`, which is not a trusted source (add it to \
                     [processkit] trusted_sources if you trust it)"
                    )
                },
            );
        };
        let changes = aibox_provenance::trust::skill_changes_known(
            root.as_std_path(),
            marker,
            None,
            dir,
            |path| known.get(path).copied(),
        );
        if changes.is_empty() {
            (
                Trust::FirstParty,
                format!(
                    "installed from the verified release of trusted source `{by}`, unchanged \
                     since"
                ),
            )
        } else {
            third(format!(
                "differs from the verified release: {}",
                changes.describe(dir)
            ))
        }
    }
}

/// The per-file digests of the skill folder `dir` (root-relative) by root-relative path,
/// for [`TrustBasis::explain`].
fn known(
    dir: &str,
    digests: &aibox_skill_review::SkillDigests,
) -> BTreeMap<String, aibox_provenance::Sha256> {
    digests
        .files
        .iter()
        .map(|(rel, d)| {
            (
                format!("{dir}/{rel}"),
                aibox_provenance::Sha256::from_bytes(*d),
            )
        })
        .collect()
}

fn review_context(trust: Trust, lock: Option<&Lock>, dir: &str) -> ReviewContext {
    let origin = match (trust, lock.and_then(|l| l.processkit.as_ref())) {
        (Trust::FirstParty, Some(pk)) => SkillOrigin::Release {
            source: pk.source.clone(),
            version: pk.version.clone(),
            sha256: pk.release_asset_sha256.as_ref().map(ToString::to_string),
            verified: pk.verification != Verification::Unverified,
        },
        _ => SkillOrigin::LocalPath {
            path: dir.to_owned(),
        },
    };
    ReviewContext {
        origin,
        ..ReviewContext::default()
    }
}

/// A skill folder under `context/skills/` that the pinned release did not ship.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HandAdded {
    /// Directory name.
    pub name: String,
    /// Root-relative directory.
    pub dir: String,
}

/// Skill folders under `context/skills/<category>/` that are not among `shipped` (release
/// skill directories) and declare an MCP server: third-party, whatever they claim. A
/// folder an earlier install put there (recorded in the install marker, for example a
/// skill removed upstream whose edited files were kept) is not hand-added. `recorded` is
/// the project's install marker, as the caller parsed it.
pub(crate) fn hand_added(
    root: &Utf8Path,
    shipped: &BTreeSet<&str>,
    recorded: Option<&aibox_provenance::Marker>,
) -> Vec<HandAdded> {
    let from_release =
        |dir: &str| recorded.is_some_and(|m| aibox_provenance::trust::installed_by_release(m, dir));
    installed(root)
        .into_iter()
        .filter_map(|s| {
            let dir = format!("{SKILLS_DIR}/{}/{}", s.category, s.name);
            (!shipped.contains(dir.as_str())
                && !from_release(&dir)
                && s.dir.join("mcp/mcp-config.json").is_file())
            .then_some(HandAdded { name: s.name, dir })
        })
        .collect()
}

fn find_installed(root: &Utf8Path, name: &str) -> Result<Utf8PathBuf, EngineError> {
    installed(root)
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| s.dir)
        .ok_or_else(|| {
            EngineError::from(SkillError::NotInstalled {
                name: name.to_owned(),
                skills: root.join(SKILLS_DIR),
            })
        })
}

/// Where processkit installs skills: `<category>/<name>/SKILL.md` below it.
const SKILLS_DIR: &str = "context/skills";

/// One skill directory found on disk.
struct Installed {
    category: String,
    name: String,
    dir: Utf8PathBuf,
}

/// Every `context/skills/<category>/<name>/` holding a `SKILL.md`, sorted by category and
/// name (so a name that exists in two categories resolves the same way every time).
fn installed(root: &Utf8Path) -> Vec<Installed> {
    let skills = root.join(SKILLS_DIR);
    let mut out = Vec::new();
    let Ok(categories) = fs_err::read_dir(&skills) else {
        return out;
    };
    for category in categories.flatten() {
        let category = category.file_name().to_string_lossy().into_owned();
        if category.starts_with('_') {
            continue;
        }
        let Ok(entries) = fs_err::read_dir(skills.join(&category)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let dir = skills.join(&category).join(&name);
            if dir.join("SKILL.md").is_file() || dir.join("mcp/mcp-config.json").is_file() {
                out.push(Installed {
                    category: category.clone(),
                    name,
                    dir,
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.category, &a.name).cmp(&(&b.category, &b.name)));
    out
}

/// What `enable` / `disable` changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The edited (or already right) `aibox.toml`.
    pub file: Utf8PathBuf,
    /// The project is `harness-only`: no processkit skill is installed, so the change has
    /// no effect until `[context] mode = "processkit"`.
    pub no_effect: bool,
    /// Set when `enable` or `disable` could not check the name: the configured release is not the
    /// installed one, or not in the download cache. Why, for a warning.
    pub unchecked: Option<String>,
}

/// Enables `name`: removes it from `[skills] exclude`, or adds it to `[skills] include`.
/// The next `aibox apply` installs it and registers its MCP server.
///
/// Refused, changing nothing, when an earlier install wrote the skill's folder and it was
/// deleted by hand since: `apply` keeps that deletion, so the promise would be false. The
/// error names the snapshot copy to restore it from.
///
/// A name the installed release does not have is refused too, with the closest skill
/// name as a suggestion, when that release is the configured one and is in the download
/// cache (`cache_dir`, else the default location); otherwise it is accepted and
/// [`Selection::unchecked`] says why it was not checked (this never downloads).
pub fn enable(
    root: &Utf8Path,
    name: &str,
    cache_dir: Option<&Utf8Path>,
) -> Result<Selection, ConfigEditError> {
    if let Some(refusal) = deleted_by_hand(root, name) {
        return Err(refusal);
    }
    let project = aibox_config::load_project(root)?;
    let catalog = installed_catalog(root, &project.config, cache_dir);
    let unchecked = check_name(catalog.as_ref(), name, "enable")?;
    let mut selection = toggle(root, name, true)?;
    selection.unchecked = unchecked;
    Ok(selection)
}

/// The catalog of the installed release ([`release_catalog`]) in processkit mode, where
/// `enable` and `disable` check names; `None` in harness-only mode.
fn installed_catalog(
    root: &Utf8Path,
    config: &aibox_config::AiboxToml,
    cache_dir: Option<&Utf8Path>,
) -> Option<Result<aibox_provenance::catalog::Catalog, String>> {
    (config.context.mode == aibox_config::ContextMode::Processkit)
        .then(|| release_catalog(root, config, cache_dir))
}

/// Refuses `name` when the installed release's `catalog` ([`installed_catalog`]) has no
/// skill of that name, suggesting the closest (`verb`: the `aibox skill` command to
/// suggest); `Some(why)` when it cannot tell offline, `None` when the name is known or
/// the project installs no processkit.
fn check_name(
    catalog: Option<&Result<aibox_provenance::catalog::Catalog, String>>,
    name: &str,
    verb: &str,
) -> Result<Option<String>, ConfigEditError> {
    match catalog {
        None => Ok(None),
        Some(Ok(catalog)) if catalog.skills.contains_key(name) => Ok(None),
        Some(Ok(catalog)) => Err(ConfigEditError::UnknownSkill {
            name: name.to_owned(),
            suggestion: aibox_config::closest(name, catalog.skills.keys().map(String::as_str))
                .map_or_else(
                    || "`aibox skill list` shows the installed skills".to_owned(),
                    |s| format!("did you mean `{s}`? (`aibox skill {verb} {s}`)"),
                ),
        }),
        Some(Err(why)) => Ok(Some(why.clone())),
    }
}

/// The catalog of the installed release, read offline from the download cache: only
/// when `aibox.lock` records the release `config` names (source and version), so a
/// release not applied yet is never judged by the previous one. Otherwise why not.
fn release_catalog(
    root: &Utf8Path,
    config: &aibox_config::AiboxToml,
    cache_dir: Option<&Utf8Path>,
) -> Result<aibox_provenance::catalog::Catalog, String> {
    let not_installed = "the configured processkit release is not installed yet (`aibox \
                         apply` installs it and warns about a name it does not have)";
    let lock = crate::writer::ProjectRoot::open(root)
        .ok()
        .and_then(|r| crate::snapshot::read_lock(&r).ok().flatten())
        .and_then(|l| l.processkit)
        .ok_or(not_installed)?;
    let pk = &config.processkit;
    if lock.source != pk.effective_source()
        || pk.version.as_ref().is_some_and(|v| *v != lock.version)
    {
        return Err(not_installed.to_owned());
    }
    let digest = lock.release_asset_sha256.ok_or(not_installed)?;
    let cache = aibox_provenance::Cache::at_or_default(cache_dir.map(Utf8Path::as_std_path));
    let not_cached = || {
        format!(
            "processkit {} is not in the download cache, so the name was not checked \
             (`aibox apply` warns about a name the release does not have)",
            lock.version
        )
    };
    let payload = cache
        .and_then(|c| c.unpacked(&digest).ok().flatten())
        .ok_or_else(not_cached)?;
    aibox_provenance::catalog::Catalog::from_payload(&payload).map_err(|e| e.to_string())
}

/// The refusal for `name` when the install marker records files of a skill folder of
/// that name and the folder is gone. A folder with some files left is not a deleted
/// skill: `apply` installs into it what it never installed.
fn deleted_by_hand(root: &Utf8Path, name: &str) -> Option<ConfigEditError> {
    let marker = aibox_provenance::Marker::read(root.as_std_path())?;
    let prefix = format!("{SKILLS_DIR}/");
    // Marker paths are sorted: only the paths below `context/skills/` are read.
    let find = |table: &aibox_provenance::table::PathTable<aibox_provenance::Sha256>| {
        table
            .range_from(&prefix)
            .map_while(|(path, _)| path.strip_prefix(&prefix))
            .find_map(|rest| {
                let mut parts = rest.splitn(3, '/');
                let (category, skill) = (parts.next()?, parts.next()?);
                (skill == name && parts.next().is_some())
                    .then(|| format!("{prefix}{category}/{skill}"))
            })
    };
    let dir = find(&marker.files).or_else(|| find(&marker.user_files))?;
    match fs_err::symlink_metadata(root.join(&dir)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        _ => return None,
    }
    let version = &marker.install.processkit_version;
    let parent = dir
        .rsplit_once('/')
        .map_or(SKILLS_DIR, |(p, _)| p)
        .to_owned();
    Some(ConfigEditError::SkillDeletedByHand {
        name: name.to_owned(),
        snapshot: format!("context/templates/processkit/{version}/{dir}"),
        parent,
        dir,
    })
}

/// Disables `name`: removes it from `[skills] include`, or adds it to `[skills] exclude`.
/// The next `aibox apply` removes its MCP entries and allow rules and, where unchanged
/// since install, its files.
///
/// A core skill of the installed release is refused, changing nothing, when that release
/// is the configured one and is in the download cache (`cache_dir`, else the default
/// location): `apply` would keep it whatever `[skills] exclude` says. So is a name that
/// release has no skill of (with the closest name), unless `[skills] include` holds it:
/// then taking it off is the cleanup asked for.
pub fn disable(
    root: &Utf8Path,
    name: &str,
    cache_dir: Option<&Utf8Path>,
) -> Result<Selection, ConfigEditError> {
    let project = aibox_config::load_project(root)?;
    let catalog = installed_catalog(root, &project.config, cache_dir);
    if let Some(Ok(c)) = &catalog
        && c.skills.get(name).is_some_and(|s| s.core)
    {
        return Err(ConfigEditError::CoreSkill {
            name: name.to_owned(),
        });
    }
    let unchecked = if project.config.skills.include.iter().any(|n| n == name) {
        None
    } else {
        check_name(catalog.as_ref(), name, "disable")?
    };
    let mut selection = toggle(root, name, false)?;
    selection.unchecked = unchecked;
    Ok(selection)
}

/// Takes `name` off the list that works against `enable`, else puts it on the list that
/// works for it; nothing to do when it is already there.
fn toggle(root: &Utf8Path, name: &str, enable: bool) -> Result<Selection, ConfigEditError> {
    let project = aibox_config::load_project(root)?;
    let no_effect = project.config.context.mode == aibox_config::ContextMode::HarnessOnly;
    let skills = &project.config.skills;
    let include = (&skills.include, "skills.include");
    let exclude = (&skills.exclude, "skills.exclude");
    let ((against, against_key), (towards, towards_key)) = if enable {
        (exclude, include)
    } else {
        (include, exclude)
    };
    let file = if against.iter().any(|s| s == name) {
        let rest: Vec<&String> = against.iter().filter(|s| *s != name).collect();
        config_set(root, ConfigFile::Team, against_key, &toml_list(&rest))?
    } else if towards.iter().any(|s| s == name) {
        root.join(aibox_config::AIBOX_TOML)
    } else {
        let mut all: Vec<&String> = towards.iter().collect();
        let owned = name.to_owned();
        all.push(&owned);
        config_set(root, ConfigFile::Team, towards_key, &toml_list(&all))?
    };
    Ok(Selection {
        file,
        no_effect,
        unchecked: None,
    })
}

fn toml_list(items: &[&String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| {
            toml_edit::Value::from(s.as_str())
                .to_string()
                .trim()
                .to_owned()
        })
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// One installed skill, for `aibox skill list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[allow(clippy::struct_excessive_bools)] // independent facts, serialised as they are
pub struct SkillInfo {
    /// Skill name (its directory name).
    pub name: String,
    /// Category directory.
    pub category: String,
    /// Root-relative directory.
    pub dir: String,
    /// A core skill: always installed, never excluded.
    pub core: bool,
    /// It declares an MCP server (`mcp/mcp-config.json`) that `aibox apply` may register:
    /// not when the release installed every server's script and it was deleted by hand
    /// (registered nowhere, so not gated).
    pub mcp_server: bool,
    /// Named in `[skills] include`.
    pub included: bool,
    /// Named in `[skills] exclude` (still installed until the next `apply`, or core).
    pub excluded: bool,
    /// Installed only because these selected skills `use` it (from the install marker;
    /// empty when the tiers, `[skills] include` or `core` selected it).
    pub dependency_of: Vec<String>,
    /// Where it came from: the verified release of a trusted source, unchanged
    /// (first-party), or not (third-party).
    pub origin: Trust,
    /// Why it has that origin.
    pub origin_reason: String,
    /// Its content digest, which a `[[skills.review_exceptions]]` consent records.
    pub sha256: String,
    /// The worst outcome of its review (`aibox skill review NAME` shows the evidence).
    pub verdict: Outcome,
    /// The review points it fails.
    pub failed_points: Vec<u8>,
    /// What `aibox apply` does with it: the one verdict `skill list`, `skill review` and
    /// `doctor` all show.
    pub gate: SkillGate,
}

/// What `aibox apply` does with an installed skill given its review, its trust, whether
/// it has an MCP server, `[processkit] review` and the recorded consents.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum SkillGate {
    /// It fails no review point.
    Passes,
    /// It fails points, but nothing of it is gated: it has no MCP server, or it is
    /// first-party and `[processkit] review` is not `"all"`.
    Reported,
    /// Gated and failing, and a consent recorded for this content and these points
    /// covers it: registered.
    Consented {
        /// Who recorded the consent.
        reviewer: String,
    },
    /// Gated and failing without a consent: `apply` refuses it.
    Blocking,
    /// Gated and failing, with a consent for other content or other points: `apply`
    /// refuses it.
    Stale {
        /// What changed since the consent.
        why: String,
    },
}

impl SkillGate {
    /// Whether `aibox apply` refuses the skill.
    pub fn blocks(&self) -> bool {
        matches!(self, Self::Blocking | Self::Stale { .. })
    }

    /// The verdict of a skill with `failed` points, trust `origin`, an MCP server or not.
    fn of(
        config: &aibox_config::AiboxToml,
        name: &str,
        sha256: &str,
        failed: &[u8],
        origin: Trust,
        mcp_server: bool,
    ) -> Self {
        if failed.is_empty() {
            return Self::Passes;
        }
        let gated = origin == Trust::ThirdParty
            || config.processkit.review == aibox_config::ReviewScope::All;
        if !(gated && mcp_server) {
            return Self::Reported;
        }
        match aibox_skill_review::consent(&config.skills.review_exceptions, name, sha256, failed) {
            aibox_skill_review::Consent::Valid(e) => Self::Consented {
                reviewer: e.reviewer.clone(),
            },
            aibox_skill_review::Consent::Missing => Self::Blocking,
            aibox_skill_review::Consent::Stale(stale) => Self::Stale {
                why: stale.describe(sha256, failed),
            },
        }
    }
}

/// The skills installed under `context/skills/<category>/<name>/`, with their selection
/// state from `[skills]`.
pub fn list(root: &Utf8Path) -> Result<Vec<SkillInfo>, EngineError> {
    list_for(root, &aibox_config::load_project(root)?)
}

/// [`list`] for a project whose configuration is already loaded.
pub(crate) fn list_for(
    root: &Utf8Path,
    project: &aibox_config::Project,
) -> Result<Vec<SkillInfo>, EngineError> {
    let lister = Lister::new(root, project)?;
    let mut out = lister.describe_all(installed(root))?;
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// What describing installed skills needs, read once per command: the lock, the trust
/// basis and the project's configuration.
struct Lister<'a> {
    root: &'a Utf8Path,
    project: &'a aibox_config::Project,
    lock: Option<Lock>,
    basis: TrustBasis,
    /// The installed release's gateway serves every skill's tools (its servers are not
    /// registered one by one).
    gateway: bool,
}

impl<'a> Lister<'a> {
    fn new(root: &'a Utf8Path, project: &'a aibox_config::Project) -> Result<Self, EngineError> {
        let lock = match fs_err::read_to_string(root.join(LOCK_FILE)) {
            Ok(text) => Some(Lock::parse(&text, Utf8Path::new(LOCK_FILE))?),
            Err(_) => None,
        };
        let basis = TrustBasis::read(root, Some(&project.config));
        let gateway_config = format!(
            "/{}/mcp/mcp-config.json",
            aibox_provenance::servers::GATEWAY_SKILL
        );
        let gateway = project.config.ai.mcp.gateway.mode == aibox_config::GatewayMode::Auto
            && basis
                .marker
                .as_ref()
                .is_some_and(|m| m.files.keys().any(|p| p.ends_with(&gateway_config)));
        Ok(Self {
            root,
            project,
            lock,
            basis,
            gateway,
        })
    }

    /// Whether the release skill in `dir` (root-relative) registers nothing because the
    /// script of every server its `mcp/mcp-config.json` declares was installed by the
    /// release and deleted by hand: `apply` keeps the deletion and registers those
    /// servers nowhere (as `resolve`'s review gate and the plan decide), so the skill is
    /// not gated. Not while the gateway serves the skills.
    fn scripts_deleted(&self, skill_dir: &Utf8Path) -> bool {
        let Some(marker) = self.basis.marker.as_ref().filter(|_| !self.gateway) else {
            return false;
        };
        let Some(scripts) = fs_err::read(skill_dir.join("mcp/mcp-config.json"))
            .ok()
            .and_then(|data| aibox_provenance::servers::declared_scripts(&data))
        else {
            return false;
        };
        !scripts.is_empty()
            && scripts.iter().all(|script| {
                script.as_deref().is_some_and(|p| {
                    marker.files.contains_key(p)
                        && fs_err::symlink_metadata(self.root.join(p)).is_err()
                })
            })
    }

    /// [`Self::info`] of each skill in order, the next skill's folder read on this thread
    /// while a helper hashes and reviews the one before (a third of the time is reading,
    /// two thirds hashing and reviewing: at 10x processkit, `skill list` and the skills
    /// check of `doctor` spent 200 ms on one thread). Every folder is read, and so
    /// allocated, here; at most two are held at once (one read ahead, one reviewed). Both
    /// are freed back to this thread's arena, so the helper's arena grows by the review's
    /// small allocations only: letting two threads each read and review a folder cost
    /// 3.5 MiB of peak memory at 10x, for a heap only 0.2 MB larger.
    fn describe_all(&self, skills: Vec<Installed>) -> Result<Vec<SkillInfo>, EngineError> {
        let one_thread =
            |skills: Vec<Installed>| skills.into_iter().map(|s| self.info(s)).collect();
        if skills.len() < 2
            || std::thread::available_parallelism().map_or(1, std::num::NonZero::get) < 2
        {
            return one_thread(skills);
        }
        std::thread::scope(|scope| {
            // A rendezvous: a read folder waits here until the helper takes it.
            let (to_helper, trees) = std::sync::mpsc::sync_channel::<(Installed, SkillTree)>(0);
            let helper = std::thread::Builder::new()
                .name("aibox-skills".to_owned())
                .spawn_scoped(scope, move || {
                    trees
                        .into_iter()
                        .map(|(s, tree)| self.describe(s, &tree))
                        .collect::<Result<Vec<_>, _>>()
                });
            let Ok(helper) = helper else {
                // No thread to be had: every skill on this one.
                return one_thread(skills);
            };
            let mut unread = Ok(());
            for s in skills {
                match SkillTree::read(&s.dir).map(|tree| (s, tree)) {
                    // Refused only once the helper stopped on an error: its result says so.
                    Ok(next) => {
                        if to_helper.send(next).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        unread = Err(EngineError::from(e));
                        break;
                    }
                }
            }
            drop(to_helper);
            let described = helper
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            // A folder that could not be read comes after every described one.
            unread.map(|()| described)
        })
    }

    /// One installed skill: its trust, review and verdict.
    fn info(&self, s: Installed) -> Result<SkillInfo, EngineError> {
        let tree = SkillTree::read(&s.dir)?;
        self.describe(s, &tree)
    }

    /// [`Self::info`] of a skill whose folder is read (`tree`).
    fn describe(&self, s: Installed, tree: &SkillTree) -> Result<SkillInfo, EngineError> {
        let config = &self.project.config;
        let text = fs_err::read_to_string(s.dir.join("SKILL.md")).unwrap_or_default();
        let front = text.split("\n---").next().unwrap_or_default();
        let dir = format!("{SKILLS_DIR}/{}/{}", s.category, s.name);
        // One read of the folder: each file is hashed once, for the trust check and the
        // content digest alike, and the review works on the same bytes.
        let digests = tree.digests()?;
        let (origin, origin_reason) = self.basis.explain(self.root, &dir, &known(&dir, &digests));
        let review = tree.review(&review_context(origin, self.lock.as_ref(), &dir));
        let mcp_server =
            s.dir.join("mcp/mcp-config.json").is_file() && !self.scripts_deleted(&s.dir);
        let sha256 = digests.content_sha256;
        let failed_points = review.failed_points();
        Ok(SkillInfo {
            core: front.lines().any(|l| l.trim() == "core: true"),
            mcp_server,
            included: config.skills.include.contains(&s.name),
            excluded: config.skills.exclude.contains(&s.name),
            dependency_of: self
                .basis
                .marker
                .as_ref()
                .and_then(|m| m.install.dependencies.get(&s.name).cloned())
                .unwrap_or_default(),
            origin,
            origin_reason,
            gate: SkillGate::of(config, &s.name, &sha256, &failed_points, origin, mcp_server),
            sha256,
            verdict: review.outcome,
            failed_points,
            dir,
            category: s.category,
            name: s.name,
        })
    }
}

/// Set on the Python that aibox itself starts in a container (`mcp check`, `doctor`,
/// `doctor --processkit`): an image built before aibox set `PYTHONPYCACHEPREFIX` would
/// otherwise write bytecode into installed skills, and the next `apply` refuse them.
pub(crate) const NO_BYTECODE: (&str, &str) = ("PYTHONDONTWRITEBYTECODE", "1");

/// The harness files that still hold the server of skill `skill` (named as the review
/// names it: `processkit-<skill>`, or the folder's own name when it has the prefix), by
/// the ledger of the last apply: a skill that now fails the review keeps the
/// registration an earlier apply gave it until an apply succeeds (QA29 r9).
pub(crate) fn still_registered(root: &Utf8Path, skill: &str) -> Vec<String> {
    let server = if skill.starts_with("processkit-") {
        skill.to_owned()
    } else {
        format!("processkit-{skill}")
    };
    let Some(ledger) = fs_err::read_to_string(root.join(aibox_mcp_registration::LEDGER_PATH))
        .ok()
        .and_then(|text| aibox_mcp_registration::Ledger::parse(&text).ok())
    else {
        return Vec::new();
    };
    ledger
        .files
        .iter()
        .filter(|(_, slots)| slots.values().any(|names| names.contains(&server)))
        .map(|(file, _)| file.clone())
        .collect()
}

/// What [`still_registered`] finds for the refused skills, as a clause (empty when none
/// is registered).
pub(crate) fn still_registered_note(root: &Utf8Path, skills: &[&str]) -> String {
    let held: Vec<String> = skills
        .iter()
        .filter_map(|s| {
            let files = still_registered(root, s);
            (!files.is_empty()).then(|| format!("`{s}` in {}", files.join(", ")))
        })
        .collect();
    if held.is_empty() {
        return String::new();
    }
    format!(
        "an earlier apply registered {}: the harnesses start its server as the files are \
         now until an apply succeeds, so fix or remove the skill (or record a consent), or \
         delete those entries by hand",
        held.join("; ")
    )
}

/// The `__pycache__` folder holding `path` when it is Python bytecode (a `.pyc` in such
/// a folder, as Python writes beside a module it imports unless `PYTHONPYCACHEPREFIX`
/// sends it elsewhere), else `None`.
pub(crate) fn bytecode_dir(path: &str) -> Option<&str> {
    const CACHE: &str = "/__pycache__/";
    let pyc = std::path::Path::new(path)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("pyc"));
    let at = path.rfind(CACHE).filter(|_| pyc)?;
    Some(&path[..at + CACHE.len() - 1])
}
