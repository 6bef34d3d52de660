//! `aibox-skill-review`: static review of third-party processkit skills.
//!
//! [`review_skill`] reads a skill directory (it never runs or imports the skill's code and
//! never touches the network) and answers the six points of the third-party skill
//! checklist, each pass / warn / fail with file-and-line evidence:
//!
//! 1. the source is auditable (no compiled or obfuscated payloads, imports resolve);
//! 2. no unexpected outbound network (HTTP clients, sockets, `curl`, URL and host literals);
//! 3. no credential access beyond purpose (credential paths, secret-like variables);
//! 4. the tool list is minimal (registered tools versus `SKILL.md`, `mcp-config.json`);
//! 5. the dependency supply chain (pins, hashes, indexes, runtime installs);
//! 6. an immutable, pinned source (from the [`ReviewContext`]).
//!
//! [`gate`] is what `aibox apply` calls: it refuses failing skills unless `aibox.toml`
//! records a `[[skills.review_exceptions]]` consent for them.

mod checks;
mod context;
mod deps;
mod error;
mod files;
mod gate;
mod python;
mod report;
mod shell;
mod skill;

use camino::Utf8Path;

pub use context::{ReviewContext, SkillOrigin};
pub use error::ReviewError;
pub use gate::{
    Consent, GateError, GateReport, RefusedSkill, StaleConsent, consent, consent_snippet, gate,
    gate_report, refusal,
};
pub use report::{Evidence, Outcome, POINT_TITLES, PointResult, Review, ReviewDiff};
pub use skill::{DeclaredHosts, HOSTS_KEY, declared_hosts};

/// The SHA-256 of the skill's content in `dir` (64 lowercase hex digits) that a
/// `[[skills.review_exceptions]]` consent records: of the listing `<sha256>  <path>` of
/// its files, sorted, its agent-mutable `config/` folder left out.
///
/// # Errors
/// The folder or one of its files cannot be read.
pub fn content_sha256(dir: &Utf8Path) -> Result<String, ReviewError> {
    files::content_sha256(dir)
}

/// Reviews the skill in `dir` (the directory holding its `SKILL.md`).
///
/// Findings are results, not errors: an error means the directory could not be read.
/// The same files and context always give the same report.
pub fn review_skill(dir: &Utf8Path, ctx: &ReviewContext) -> Result<Review, ReviewError> {
    Ok(SkillTree::read(dir)?.review(ctx))
}

/// A skill folder read once, for a command that both reviews it and needs its digests
/// (`aibox skill list`, `aibox doctor`): every file is read and hashed once.
#[derive(Debug)]
pub struct SkillTree {
    root: camino::Utf8PathBuf,
    dir_name: String,
    entries: Vec<files::Entry>,
}

/// The digests of a skill folder, from one pass over its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDigests {
    /// The content digest a `[[skills.review_exceptions]]` consent records (as
    /// [`content_sha256`] computes it).
    pub content_sha256: String,
    /// The SHA-256 of every regular file, by path relative to the skill folder
    /// (`config/` included; `.git` folders are left out, as the review leaves them).
    pub files: std::collections::BTreeMap<String, [u8; 32]>,
}

impl SkillTree {
    /// Reads every entry of the skill in `dir`.
    ///
    /// # Errors
    /// The folder is missing, not a directory, on a kernel pseudo-file system, or one of
    /// its entries cannot be read.
    pub fn read(dir: &Utf8Path) -> Result<Self, ReviewError> {
        let meta = fs_err::metadata(dir).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                ReviewError::NotFound {
                    path: dir.to_owned(),
                }
            } else {
                ReviewError::Io {
                    op: "inspect",
                    path: dir.to_owned(),
                    source,
                }
            }
        })?;
        if !meta.is_dir() {
            return Err(ReviewError::NotADirectory {
                path: dir.to_owned(),
            });
        }
        // Kernel pseudo-file systems are not skills: their files never end or block.
        if let Some(fs) = dir
            .canonicalize_utf8()
            .ok()
            .and_then(|c| files::pseudo_filesystem(&c))
        {
            return Err(ReviewError::PseudoFilesystem {
                path: dir.to_owned(),
                fs,
            });
        }
        let entries = files::read_tree(dir)?;
        let dir_name = dir
            .canonicalize_utf8()
            .ok()
            .and_then(|p| p.file_name().map(str::to_owned))
            .or_else(|| dir.file_name().map(str::to_owned))
            .unwrap_or_default();
        Ok(Self {
            root: dir.to_owned(),
            dir_name,
            entries,
        })
    }

    /// The digest of every file and the content digest, each file hashed once.
    ///
    /// # Errors
    /// A file too large to have been read with the tree cannot be read now.
    pub fn digests(&self) -> Result<SkillDigests, ReviewError> {
        files::digests(&self.root, &self.entries)
    }

    /// Reviews the skill (see [`review_skill`]).
    pub fn review(&self, ctx: &ReviewContext) -> Review {
        let skill = checks::Skill::load(self.dir_name.clone(), &self.entries);
        let points = vec![
            checks::source::check(&skill).into_point(1),
            checks::network::check(&skill, ctx).into_point(2),
            checks::credentials::check(&skill).into_point(3),
            checks::tools::check(&skill).into_point(4),
            checks::supply_chain::check(&skill, ctx).into_point(5),
            checks::pinned::check(&skill, ctx).into_point(6),
        ];
        let outcome = points.iter().map(|p| p.outcome).max().unwrap_or_default();
        Review {
            skill: skill.name().to_owned(),
            outcome,
            points,
        }
    }
}
