//! The release catalog: skills found by scanning every `SKILL.md` (category-aware), the
//! package tiers of `.processkit/packages/`, and the skill selection of a project, closed
//! over the skills each selected skill `uses:`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{ProvenanceError, Result};
use crate::extract::Payload;

/// One skill of a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Directory name (the name used in tiers and `[skills]`).
    pub name: String,
    /// Category directory.
    pub category: String,
    /// Release path of the skill directory, `context/skills/<category>/<name>`.
    pub dir: String,
    /// Core skills are always installed.
    pub core: bool,
    /// Skills it depends on (`metadata.processkit.uses[].skill`), in the order declared.
    pub uses: Vec<String>,
    /// Whether its front matter has a non-null `metadata.processkit.hosts`: only such a
    /// `SKILL.md` is read again for the hosts it declares (the egress allowlist).
    pub declares_hosts: bool,
}

/// One package tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tier {
    /// Tier name.
    pub name: String,
    /// Tiers it extends.
    pub extends: Vec<String>,
    /// Skills it adds.
    pub skills: Vec<String>,
}

/// Skills and tiers of a release.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    /// Skills by name.
    pub skills: BTreeMap<String, Skill>,
    /// Tiers by name.
    pub tiers: BTreeMap<String, Tier>,
}

#[derive(Deserialize)]
struct Frontmatter {
    name: Option<String>,
    #[serde(default)]
    metadata: Option<FmMetadata>,
}
#[derive(Deserialize)]
struct FmMetadata {
    #[serde(default)]
    processkit: Option<FmProcesskit>,
}
#[derive(Deserialize)]
struct FmProcesskit {
    #[serde(default)]
    core: bool,
    #[serde(default)]
    uses: Option<Vec<FmUse>>,
    /// Read by the egress allowlist, which only needs to know here that it is there.
    #[serde(default)]
    hosts: Option<serde::de::IgnoredAny>,
}
/// One `uses:` entry. processkit writes `{skill: NAME, purpose: TEXT}` (v0.28 and v1.0);
/// a bare name is read too.
#[derive(Deserialize)]
#[serde(untagged)]
enum FmUse {
    Skill { skill: String },
    Name(String),
}

#[derive(Deserialize)]
struct PackageDoc {
    #[serde(default)]
    metadata: Option<PackageMeta>,
    #[serde(default)]
    spec: Option<PackageSpec>,
}
#[derive(Deserialize)]
struct PackageMeta {
    name: Option<String>,
}
#[derive(Deserialize)]
struct PackageSpec {
    #[serde(default)]
    extends: Vec<String>,
    #[serde(default)]
    includes: Option<PackageIncludes>,
}
#[derive(Deserialize)]
struct PackageIncludes {
    #[serde(default)]
    skills: Vec<String>,
}

/// The YAML front matter of a Markdown file (between the first two `---` lines).
pub(crate) fn front_matter(text: &str) -> Option<&str> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let end = rest.find("\n---")?;
    Some(&rest[..=end])
}

/// If `path` lies inside a skill directory `context/skills/<category>/<skill>/…`, returns
/// `(category, skill)`. `_lib` is not a category.
pub fn skill_of(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("context/skills/")?;
    let mut it = rest.splitn(3, '/');
    let category = it.next()?;
    let skill = it.next()?;
    it.next()?;
    if category.starts_with('_') {
        return None;
    }
    Some((category, skill))
}

/// The key of a catalog remembered in its release's unpacked store (the store is named
/// by the release's digest); the version changes with the memo's shape.
const MEMO_KEY: &str = "catalog-v1";

/// A catalog as remembered: one line of JSON. A skill's folder is not stored but derived
/// from its category and name, as the scan derives it.
#[derive(Serialize, Deserialize)]
struct Memo {
    skills: Vec<MemoSkill>,
    tiers: Vec<MemoTier>,
}

#[derive(Serialize, Deserialize)]
struct MemoSkill {
    name: String,
    category: String,
    core: bool,
    uses: Vec<String>,
    hosts: bool,
}

#[derive(Serialize, Deserialize)]
struct MemoTier {
    name: String,
    extends: Vec<String>,
    skills: Vec<String>,
}

/// Whether release path `path` is a skill's `SKILL.md`: `(category, name)`.
fn skill_md(path: &str) -> Option<(&str, &str)> {
    let (category, name) = skill_of(path)?;
    (path.len() == "context/skills///SKILL.md".len() + category.len() + name.len()
        && path.ends_with("/SKILL.md"))
    .then_some((category, name))
}

/// Whether release path `path` is a package tier file: its stem.
fn package_file(path: &str) -> Option<&str> {
    let stem = path
        .strip_prefix(".processkit/packages/")?
        .strip_suffix(".yaml")?;
    (!stem.contains('/')).then_some(stem)
}

impl Catalog {
    /// The catalog of a payload: remembered in the unpacked store of a cached release
    /// (see [`crate::Cache::unpacked`]), where the first command that scans it records it,
    /// so later commands neither read nor parse every `SKILL.md` again; scanned otherwise.
    /// A memo that does not fit the payload's files is ignored and written again.
    pub fn from_payload(payload: &Payload) -> Result<Self> {
        let store = payload.store();
        if let Some(catalog) = store.and_then(|s| Self::recall(s, payload)) {
            return Ok(catalog);
        }
        let catalog = Self::scan(payload)?;
        if let Some(store) = store {
            crate::cache::memo_write(store, MEMO_KEY, &catalog.memo());
        }
        Ok(catalog)
    }

    /// The catalog remembered in `store`, when there is one and it fits the payload: the
    /// same number of `SKILL.md` files and package files, each remembered skill's
    /// `SKILL.md` among them.
    fn recall(store: &std::path::Path, payload: &Payload) -> Option<Self> {
        let memo: Memo = serde_json::from_str(&crate::cache::memo_read(store, MEMO_KEY)?).ok()?;
        let (mut skill_files, mut package_files) = (0, 0);
        for p in payload.files.keys() {
            skill_files += usize::from(skill_md(p).is_some());
            package_files += usize::from(package_file(p).is_some());
        }
        if memo.skills.len() != skill_files || memo.tiers.len() > package_files {
            return None;
        }
        let mut catalog = Self::default();
        for s in memo.skills {
            let dir = format!("context/skills/{}/{}", s.category, s.name);
            let md = format!("{dir}/SKILL.md");
            let fits = payload.files.contains_key(md.as_str())
                && skill_md(&md) == Some((&s.category, &s.name));
            if !fits || catalog.skills.contains_key(&s.name) {
                return None;
            }
            catalog.skills.insert(
                s.name.clone(),
                Skill {
                    name: s.name,
                    category: s.category,
                    dir,
                    core: s.core,
                    uses: s.uses,
                    declares_hosts: s.hosts,
                },
            );
        }
        for t in memo.tiers {
            catalog.tiers.insert(
                t.name.clone(),
                Tier {
                    name: t.name,
                    extends: t.extends,
                    skills: t.skills,
                },
            );
        }
        Some(catalog)
    }

    /// The catalog as one line of JSON, for [`Self::recall`].
    fn memo(&self) -> String {
        let memo = Memo {
            skills: self
                .skills
                .values()
                .map(|s| MemoSkill {
                    name: s.name.clone(),
                    category: s.category.clone(),
                    core: s.core,
                    uses: s.uses.clone(),
                    hosts: s.declares_hosts,
                })
                .collect(),
            tiers: self
                .tiers
                .values()
                .map(|t| MemoTier {
                    name: t.name.clone(),
                    extends: t.extends.clone(),
                    skills: t.skills.clone(),
                })
                .collect(),
        };
        serde_json::to_string(&memo).unwrap_or_default()
    }

    /// Reads and parses every `SKILL.md` and package file of the payload; a file the
    /// unpacking parsed already (see [`Parsed`]) is not read again.
    fn scan(payload: &Payload) -> Result<Self> {
        let mut catalog = Self::default();
        let early = payload.parsed();
        let skill_files: Vec<(&str, &str, &str)> = payload
            .files
            .keys()
            .filter_map(|p| skill_md(p).map(|(category, name)| (&**p, category, name)))
            .collect();
        // Reading and parsing every `SKILL.md` is most of a first scan: a large release's
        // are split between two threads, and the results are taken in path order, so the
        // first error is the one a single thread meets first.
        let parse = |files: &[(&str, &str, &str)]| -> Vec<Result<Skill>> {
            files
                .iter()
                .map(
                    |&(path, category, name)| match early.and_then(|e| e.skills.get(path)) {
                        Some(done) => done.clone().map_err(|reason| bad_file(path, reason)),
                        None => parse_skill(payload, path, category, name),
                    },
                )
                .collect()
        };
        let unparsed = skill_files
            .iter()
            .filter(|(path, _, _)| early.is_none_or(|e| !e.skills.contains_key(*path)))
            .count();
        let parsed = if unparsed >= PARALLEL_SKILLS {
            let (first, second) = skill_files.split_at(skill_files.len() / 2);
            std::thread::scope(|scope| {
                let helper = std::thread::Builder::new()
                    .name("aibox-catalog".to_owned())
                    .spawn_scoped(scope, || parse(second));
                let mut parsed = parse(first);
                match helper.map(std::thread::ScopedJoinHandle::join) {
                    Ok(Ok(rest)) => parsed.extend(rest),
                    // No thread, or it died: this one parses the rest.
                    _ => parsed.extend(parse(second)),
                }
                parsed
            })
        } else {
            parse(&skill_files)
        };
        for ((path, _, name), skill) in skill_files.iter().zip(parsed) {
            let skill = skill?;
            if let Some(other) = catalog.skills.insert((*name).to_owned(), skill) {
                return Err(ProvenanceError::Catalog {
                    path: (*path).to_owned(),
                    reason: format!(
                        "skill name `{name}` also exists in category `{}`",
                        other.category
                    ),
                });
            }
        }
        for path in payload.files.keys() {
            let Some(stem) = package_file(path) else {
                continue;
            };
            let tier = match early.and_then(|e| e.tiers.get(&**path)) {
                Some(done) => done.clone(),
                None => parse_tier(stem, &payload.read(path)?),
            }
            .map_err(|reason| bad_file(path, reason))?;
            catalog.tiers.insert(tier.name.clone(), tier);
        }
        Ok(catalog)
    }

    fn tier_skills(
        &self,
        tier: &str,
        stack: &mut Vec<String>,
        out: &mut BTreeSet<String>,
        warnings: &mut Vec<String>,
    ) -> Result<()> {
        if let Some(pos) = stack.iter().position(|t| t == tier) {
            let mut chain = stack[pos..].to_vec();
            chain.push(tier.to_owned());
            return Err(ProvenanceError::TierCycle {
                chain: chain.join(" -> "),
            });
        }
        let Some(t) = self.tiers.get(tier) else {
            // A tier's `extends` naming no tier is the release's slip, not the user's.
            warnings.push(format!("unknown package tier `{tier}` ignored"));
            return Ok(());
        };
        stack.push(tier.to_owned());
        for parent in &t.extends {
            self.tier_skills(parent, stack, out, warnings)?;
        }
        stack.pop();
        out.extend(t.skills.iter().cloned());
        Ok(())
    }

    /// Selection = tiers (with `extends`) + `include` − `exclude` + core skills, then
    /// every skill a selected skill `uses`, transitively (a cycle ends where it started;
    /// a dependency stays selected even when `[skills] exclude` names it, with a
    /// warning). Unknown skill and dependency names, a tier's `extends` naming no tier and
    /// a default `packages` the release lacks produce warnings; a tier cycle, and another
    /// name in `packages` that is no tier of the release (a typo would remove every skill
    /// only that tier selects), are errors.
    pub fn select(
        &self,
        packages: &[String],
        include: &[String],
        exclude: &[String],
    ) -> Result<Selection> {
        self.check_packages(packages)?;
        let mut warnings = Vec::new();
        let mut wanted = BTreeSet::new();
        for p in packages {
            self.tier_skills(p, &mut Vec::new(), &mut wanted, &mut warnings)?;
        }
        wanted.extend(include.iter().cloned());
        for e in exclude {
            if self.skills.get(e).is_some_and(|s| s.core) {
                warnings.push(format!(
                    "core skill `{e}` cannot be excluded; it stays installed"
                ));
            } else {
                wanted.remove(e);
            }
            if !self.skills.contains_key(e) {
                warnings.push(format!("`[skills] exclude` names unknown skill `{e}`"));
            }
        }
        let mut skills = BTreeSet::new();
        for name in wanted {
            if self.skills.contains_key(&name) {
                skills.insert(name);
            } else {
                // A name `[skills] include` does not give came from a tier of the
                // release: the release's slip, not the user's.
                warnings.push(if include.contains(&name) {
                    format!(
                        "unknown skill `{name}` ignored (not in this release): `[skills] \
                         include` names it"
                    )
                } else {
                    let tiers: Vec<&str> = self
                        .tiers
                        .values()
                        .filter(|t| t.skills.contains(&name))
                        .map(|t| t.name.as_str())
                        .collect();
                    format!(
                        "skill `{name}`, named by this release's package tier `{}` \
                         (`.processkit/packages/`), is not in the release and is ignored; \
                         nothing to change in aibox.toml (a slip of the release)",
                        tiers.join("`, `")
                    )
                });
            }
        }
        skills.extend(
            self.skills
                .values()
                .filter(|s| s.core)
                .map(|s| s.name.clone()),
        );
        let dependencies = self.close_over_uses(&mut skills, exclude, &mut warnings);
        warnings.sort();
        warnings.dedup();
        Ok(Selection {
            skills,
            dependencies,
            warnings,
        })
    }

    /// Refuses a name in `packages` that is not a tier of the release, with the nearest
    /// tier name when one is close. The default (`["product"]`, what a project that never
    /// chose gets) stays a warning: a release without that tier installs its core skills.
    fn check_packages(&self, packages: &[String]) -> Result<()> {
        if packages == aibox_config::ContextSection::default().packages.as_slice() {
            return Ok(());
        }
        let Some(name) = packages.iter().find(|p| !self.tiers.contains_key(*p)) else {
            return Ok(());
        };
        let suggestion = aibox_config::closest(name, self.tiers.keys().map(String::as_str))
            .map_or_else(String::new, |t| format!("; did you mean `{t}`?"));
        let known: Vec<&str> = self.tiers.keys().map(String::as_str).collect();
        Err(ProvenanceError::UnknownPackage {
            name: name.clone(),
            suggestion,
            known: if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            },
        })
    }

    /// Adds to `skills` every skill they use, transitively; returns, for each skill added
    /// only that way, the selected skills that use it.
    fn close_over_uses(
        &self,
        skills: &mut BTreeSet<String>,
        exclude: &[String],
        warnings: &mut Vec<String>,
    ) -> BTreeMap<String, BTreeSet<String>> {
        let direct = skills.clone();
        let mut pulled: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        // Each skill is queued once (when it joins the set), so a cycle ends.
        let mut queue: Vec<String> = direct.iter().cloned().collect();
        while let Some(user) = queue.pop() {
            let Some(skill) = self.skills.get(&user) else {
                continue;
            };
            for dep in skill.uses.iter().filter(|d| **d != user) {
                if !self.skills.contains_key(dep) {
                    warnings.push(format!(
                        "skill `{user}` uses `{dep}`, which this release does not ship: \
                         `{user}` may not work fully"
                    ));
                    continue;
                }
                if !direct.contains(dep) {
                    pulled.entry(dep.clone()).or_default().insert(user.clone());
                }
                if skills.insert(dep.clone()) {
                    queue.push(dep.clone());
                }
            }
        }
        for e in exclude {
            if let Some(by) = pulled.get(e) {
                let by: Vec<&str> = by.iter().map(String::as_str).collect();
                warnings.push(format!(
                    "`[skills] exclude` names `{e}`, which {} uses; it stays installed",
                    by.join(", ")
                ));
            }
        }
        pulled
    }
}

/// The skills a project installs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Selected skill names, dependencies included.
    pub skills: BTreeSet<String>,
    /// Skills selected only because selected skills use them: name → the selected skills
    /// whose `uses:` names it.
    pub dependencies: BTreeMap<String, BTreeSet<String>>,
    /// Warnings about unknown names, missing dependencies and ignored exclusions.
    pub warnings: Vec<String>,
}

/// From this many skills on, [`Catalog::scan`] parses on two threads (below it, starting
/// a thread costs about what it saves).
const PARALLEL_SKILLS: usize = 64;

/// The skill whose `SKILL.md` is the release file `path`, in folder `category`/`name`.
fn parse_skill(payload: &Payload, path: &str, category: &str, name: &str) -> Result<Skill> {
    let bytes = payload.read(path)?;
    parse_skill_bytes(&bytes, category, name).map_err(|reason| bad_file(path, reason))
}

/// A catalog error in release file `path`.
fn bad_file(path: &str, reason: String) -> ProvenanceError {
    ProvenanceError::Catalog {
        path: path.to_owned(),
        reason,
    }
}

/// The skill whose `SKILL.md` holds `bytes`, in folder `category`/`name`; else why not.
fn parse_skill_bytes(
    bytes: &[u8],
    category: &str,
    name: &str,
) -> std::result::Result<Skill, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let fm = front_matter(text).ok_or_else(|| "no `---` front matter".to_owned())?;
    let fm: Frontmatter = serde_norway::from_str(fm).map_err(|e| format!("front matter: {e}"))?;
    if let Some(n) = &fm.name
        && n != name
    {
        return Err(format!(
            "`name: {n}` differs from the directory name `{name}`"
        ));
    }
    let pk = fm.metadata.and_then(|m| m.processkit);
    let core = pk.as_ref().is_some_and(|p| p.core);
    let declares_hosts = pk.as_ref().is_some_and(|p| p.hosts.is_some());
    let uses = pk
        .and_then(|p| p.uses)
        .unwrap_or_default()
        .into_iter()
        .map(|u| match u {
            FmUse::Skill { skill } | FmUse::Name(skill) => skill,
        })
        .collect();
    Ok(Skill {
        name: name.to_owned(),
        category: category.to_owned(),
        dir: format!("context/skills/{category}/{name}"),
        core,
        uses,
        declares_hosts,
    })
}

/// The tier of the package file with file stem `stem` holding `bytes`; else why not.
fn parse_tier(stem: &str, bytes: &[u8]) -> std::result::Result<Tier, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let doc: PackageDoc =
        crate::yaml::first_document(text)?.ok_or_else(|| "empty package file".to_owned())?;
    let name = doc
        .metadata
        .and_then(|m| m.name)
        .unwrap_or_else(|| stem.to_owned());
    let spec = doc.spec.unwrap_or(PackageSpec {
        extends: Vec::new(),
        includes: None,
    });
    Ok(Tier {
        name,
        extends: spec.extends,
        skills: spec.includes.map(|i| i.skills).unwrap_or_default(),
    })
}

/// The catalog's files parsed while an archive was unpacked, from the bytes the
/// manifest's digests were computed from: the unpacking's writer thread parses each as
/// it ends, beside the inflating, so a first install does not read and parse them
/// afterwards (a 1x release's 146 `SKILL.md`, about 3 ms). A file too large to keep
/// while it streams by is left out and read from the payload as usual.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    skills: BTreeMap<std::sync::Arc<str>, std::result::Result<Skill, String>>,
    tiers: BTreeMap<std::sync::Arc<str>, std::result::Result<Tier, String>>,
}

impl Parsed {
    /// Most bytes of one file kept to be parsed.
    pub(crate) const MAX_FILE: usize = 256 * 1024;

    /// Whether release file `path` is one the catalog parses.
    pub(crate) fn wants(path: &str) -> bool {
        skill_md(path).is_some() || package_file(path).is_some()
    }

    /// Parses the wanted release file `path` holding `bytes`.
    pub(crate) fn add(&mut self, path: std::sync::Arc<str>, bytes: &[u8]) {
        if let Some((category, name)) = skill_md(&path) {
            let skill = parse_skill_bytes(bytes, category, name);
            self.skills.insert(path, skill);
        } else if let Some(stem) = package_file(&path) {
            let tier = parse_tier(stem, bytes);
            self.tiers.insert(path, tier);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A release of `n` skills in one category, every other one core.
    fn skills(n: usize) -> Vec<(String, Vec<u8>, bool)> {
        (0..n)
            .map(|i| {
                let name = format!("s{i:03}");
                let md = format!(
                    "---\nname: {name}\nmetadata:\n  processkit:\n    core: {}\n---\nbody\n",
                    i % 2 == 0
                );
                (
                    format!("context/skills/cat/{name}/SKILL.md"),
                    md.into_bytes(),
                    false,
                )
            })
            .collect()
    }

    /// A release large enough to be parsed on two threads gives the catalog one thread
    /// gives, and names the first bad `SKILL.md` by path, whichever thread read it.
    #[test]
    fn a_large_release_parses_as_one_thread_would() {
        for n in [PARALLEL_SKILLS - 1, 100] {
            let catalog = Catalog::scan(&Payload::from_memory(skills(n))).unwrap();
            assert_eq!(catalog.skills.len(), n);
            assert!(catalog.skills["s000"].core);
            assert!(!catalog.skills["s001"].core);
        }
        let mut files = skills(100);
        files[90].1 = b"no front matter".to_vec();
        files[20].1 = b"---\nname: other\n---\n".to_vec();
        let err = Catalog::scan(&Payload::from_memory(files.clone()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("s020") && err.contains("`name: other`"),
            "{err}"
        );
        files[20] = skills(21).pop().unwrap();
        let err = Catalog::scan(&Payload::from_memory(files))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("s090") && err.contains("front matter"),
            "{err}"
        );
    }

    /// QA: a skill a release's own tier names but does not ship was reported as if
    /// `aibox.toml` named it, on every run, with nothing the user could fix.
    #[test]
    fn a_missing_skill_is_blamed_on_whoever_names_it() {
        let mut files = skills(2);
        files.push((
            ".processkit/packages/managed.yaml".to_owned(),
            b"metadata:\n  name: managed\nspec:\n  includes:\n    skills: [s000, ghost]\n".to_vec(),
            false,
        ));
        let catalog = Catalog::scan(&Payload::from_memory(files)).unwrap();
        let s = catalog
            .select(&["managed".to_owned()], &["typo".to_owned()], &[])
            .unwrap();
        assert!(
            s.warnings.iter().any(|w| w.contains("`ghost`")
                && w.contains("package tier `managed`")
                && w.contains("nothing to change in aibox.toml")),
            "{:?}",
            s.warnings
        );
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("`typo`") && w.contains("`[skills] include` names it")),
            "{:?}",
            s.warnings
        );
    }

    /// `files` as a release archive, unpacked (its catalog files parsed on the way).
    fn unpacked(files: &[(String, Vec<u8>, bool)]) -> Payload {
        use aibox_test_support::http::release::{TarEntry, gzip, tar};
        let mut entries = vec![TarEntry::dir("processkit-v1.0.0/")];
        entries.extend(
            files
                .iter()
                .map(|(p, b, _)| TarEntry::file(&format!("processkit-v1.0.0/{p}"), b.clone())),
        );
        crate::extract::read_archive(
            &gzip(&tar(&entries)),
            "test",
            None,
            &crate::extract::ExtractLimits::default(),
        )
        .unwrap()
    }

    /// The catalog of an unpacked archive, parsed as its files went by, is the one a scan
    /// of the same files gives: every `SKILL.md` and package file but one too large to
    /// keep was parsed while unpacking, and that one is read from the payload.
    #[test]
    fn an_unpacked_release_gives_the_catalog_a_scan_gives() {
        let mut files = skills(PARALLEL_SKILLS + 6);
        files[3].1 = b"---\nname: s003\nmetadata:\n  processkit:\n    uses: [{skill: s001}, s002]\n    hosts: [a.example]\n---\n".to_vec();
        let mut big = b"---\nname: s004\nmetadata:\n  processkit:\n    core: true\n---\n".to_vec();
        big.resize(Parsed::MAX_FILE + 10, b'x');
        files[4].1 = big;
        files.push((
            ".processkit/packages/minimal.yaml".to_owned(),
            b"metadata:\n  name: minimal\nspec:\n  extends: [base]\n  includes:\n    skills: [s003]\n".to_vec(),
            false,
        ));
        files.push((
            "context/skills/cat/s001/notes.md".to_owned(),
            b"not parsed".to_vec(),
            false,
        ));
        let payload = unpacked(&files);
        let early = payload.parsed().unwrap();
        assert_eq!(early.skills.len(), files.len() - 3);
        assert!(
            !early
                .skills
                .contains_key("context/skills/cat/s004/SKILL.md")
        );
        assert_eq!(early.tiers.len(), 1);
        let expected = Catalog::scan(&Payload::from_memory(files)).unwrap();
        assert_eq!(Catalog::from_payload(&payload).unwrap(), expected);
        assert_eq!(expected.skills["s003"].uses, ["s001", "s002"]);
        assert!(expected.skills["s003"].declares_hosts && expected.skills["s004"].core);
        assert_eq!(expected.tiers["minimal"].skills, ["s003"]);
    }

    /// A bad `SKILL.md` or package file parsed while unpacking is the error the scan
    /// reports, naming the same file for the same reason.
    #[test]
    fn a_bad_file_parsed_while_unpacking_is_the_same_error() {
        let mut files = skills(5);
        files[2].1 = b"no front matter".to_vec();
        let scanned = Catalog::scan(&Payload::from_memory(files.clone())).unwrap_err();
        let early = Catalog::from_payload(&unpacked(&files)).unwrap_err();
        assert_eq!(early.to_string(), scanned.to_string());
        assert!(early.to_string().contains("s002"), "{early}");
        let mut files = skills(2);
        files.push((
            ".processkit/packages/bad.yaml".to_owned(),
            b"[unclosed".to_vec(),
            false,
        ));
        let scanned = Catalog::scan(&Payload::from_memory(files.clone())).unwrap_err();
        let early = Catalog::from_payload(&unpacked(&files)).unwrap_err();
        assert_eq!(early.to_string(), scanned.to_string());
        assert!(early.to_string().contains("bad.yaml"), "{early}");
    }
}
