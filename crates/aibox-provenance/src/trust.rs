//! Which releases are first-party, and whether an installed skill still is.
//!
//! First-party means two things at once: the release came from a trusted source (the
//! official processkit repository, or one the owner lists in `[processkit]
//! trusted_sources`), and the skill's files are byte-identical to what that verified
//! release installed (the marker's per-file manifest). A fork is another source; a local
//! edit is other content. Both make a skill third-party.

use std::path::{Path, PathBuf};

use aibox_config::ProcesskitSection;

use crate::digest::Sha256;
use crate::record::{Intent, Marker};
use crate::source::{SourceKind, asset_url, source_kind};

/// The official processkit repository: always trusted.
pub const OFFICIAL_SOURCE: &str = aibox_config::OFFICIAL_PROCESSKIT_SOURCE;

/// The trusted sources of `section`: the official repository first, then the owner's
/// `trusted_sources` as written (duplicates of the official one left out).
pub fn trusted_sources(section: &ProcesskitSection) -> Vec<String> {
    let mut out = vec![OFFICIAL_SOURCE.to_owned()];
    for s in &section.trusted_sources {
        if !s.contains("://") || normalize_url(s) != OFFICIAL_SOURCE {
            out.push(s.clone());
        }
    }
    out
}

/// The trusted source that vouches for the configured `[processkit] source`, or `None`
/// when no entry does (relative paths are resolved against `project_root`).
///
/// A URL source is trusted when its base (without `.git` or a trailing `/`, scheme and
/// host compared case-insensitively) is a trusted URL and its asset URL template points
/// below that base, so a custom template cannot fetch the "trusted" release from
/// elsewhere. A local archive or directory is trusted when it is a listed path or lies
/// below one.
pub fn trusted_by(section: &ProcesskitSection, project_root: &Path) -> Option<String> {
    let kind = source_kind(section, project_root).ok()?;
    let trusted = trusted_sources(section);
    match kind {
        SourceKind::Http { base, template } => {
            let base = normalize_url(&base);
            let asset = asset_url(&base, &template, "v0.0.0");
            trusted.into_iter().filter(|t| t.contains("://")).find(|t| {
                let t = normalize_url(t);
                t == base
                    && normalize_url(&asset)
                        .strip_prefix(&format!("{t}/"))
                        .is_some_and(stays_below)
            })
        }
        SourceKind::Archive(path) | SourceKind::Directory(path) => {
            let source = canonical(&path);
            trusted
                .into_iter()
                .filter(|t| !t.contains("://"))
                .find(|t| source.starts_with(canonical(&project_root.join(t))))
        }
    }
}

/// Whether the part of an asset URL after a trusted base stays below that base on any
/// server: no `.` or `..` segment, and nothing a server may decode into one or into a
/// separator (a percent-encoded `.`, `/` or `\\`, a backslash). Servers differ in what
/// they decode (Python's `http.server` serves `%2e%2e` as `..`), so any such spelling
/// makes the release untrusted rather than being decoded here.
fn stays_below(rest: &str) -> bool {
    let path = rest.split(['?', '#']).next().unwrap_or_default();
    let lower = path.to_ascii_lowercase();
    !["%2e", "%2f", "%5c", "\\"]
        .iter()
        .any(|s| lower.contains(s))
        && path
            .split('/')
            .all(|segment| segment != "." && segment != "..")
}

/// A URL without `.git` or trailing slashes, with scheme and host in lower case.
fn normalize_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    let url = url
        .strip_suffix(".git")
        .unwrap_or(url)
        .trim_end_matches('/');
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (host, path) = rest.split_once('/').map_or((rest, ""), |(h, p)| (h, p));
            let sep = if path.is_empty() { "" } else { "/" };
            format!(
                "{}://{}{sep}{path}",
                scheme.to_ascii_lowercase(),
                host.to_ascii_lowercase()
            )
        }
        None => url.to_owned(),
    }
}

fn canonical(path: &Path) -> PathBuf {
    fs_err::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// How an installed skill folder differs from what the release installed there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillChanges {
    /// Installed files whose bytes differ (root-relative).
    pub modified: Vec<String>,
    /// Installed files that are gone.
    pub missing: Vec<String>,
    /// Files the release did not install there.
    pub added: Vec<String>,
}

impl SkillChanges {
    /// Nothing differs.
    pub fn is_empty(&self) -> bool {
        self.modified.is_empty() && self.missing.is_empty() && self.added.is_empty()
    }

    /// One line for messages: `mcp/server.py edited, SKILL.md deleted`, paths relative to
    /// the skill folder `dir`.
    pub fn describe(&self, dir: &str) -> String {
        let prefix = format!("{dir}/");
        let rel = |p: &String| p.strip_prefix(&prefix).unwrap_or(p).to_owned();
        let mut parts = Vec::new();
        for (list, what) in [
            (&self.modified, "edited"),
            (&self.missing, "deleted"),
            (&self.added, "added"),
        ] {
            if !list.is_empty() {
                let names: Vec<String> = list.iter().take(3).map(rel).collect();
                let more = if list.len() > 3 {
                    format!(" and {} more", list.len() - 3)
                } else {
                    String::new()
                };
                parts.push(format!("{}{more} {what}", names.join(", ")));
            }
        }
        parts.join("; ")
    }
}

/// Compares the skill folder `dir` (root-relative, for example
/// `context/skills/processkit/workitem-management`) with the installer-owned files the
/// marker records for it, re-hashing every byte. Its agent-mutable `config/` files
/// (the marker's user files) are data the skill may change and are left out. `pending`
/// is the record of an interrupted apply that still applies: a file it already wrote
/// (or removed) is that apply's work, not a local change.
pub fn skill_changes(
    root: &Path,
    marker: &Marker,
    pending: Option<&Intent>,
    dir: &str,
) -> SkillChanges {
    skill_changes_known(root, marker, pending, dir, |_| None)
}

/// [`skill_changes`] with the digests of regular files the caller already knows
/// (`known`: root-relative path to digest, `None` when unknown): those are not read
/// again, so a command that has just hashed a skill, or an apply whose scan has every
/// installed file's digest, hashes each file once.
pub fn skill_changes_known(
    root: &Path,
    marker: &Marker,
    pending: Option<&Intent>,
    dir: &str,
    known: impl Fn(&str) -> Option<Sha256>,
) -> SkillChanges {
    let live_digest = |path: &str| known(path).or_else(|| live_digest(&root.join(path)));
    let prefix = format!("{dir}/");
    let config = format!("{dir}/config/");
    let planned = |path: &str, live: Option<Sha256>| {
        pending.is_some_and(|i| match (i.writes.get(path), live) {
            (Some(w), Some(h)) => w.new == h,
            (None, None) => i.removals.contains_key(path),
            _ => false,
        })
    };
    let mut out = SkillChanges::default();
    for (path, expected) in marker.files.range_from(&prefix) {
        if !path.starts_with(&prefix) {
            break;
        }
        let live = live_digest(path);
        if planned(path, live) {
            continue;
        }
        match live {
            None => out.missing.push(path.to_owned()),
            Some(h) if h != *expected => out.modified.push(path.to_owned()),
            Some(_) => {}
        }
    }
    crate::integrity::walk_sorted(root, dir, &mut |p| {
        if !marker.files.contains_key(p)
            && !marker.user_files.contains_key(p)
            && !p.starts_with(&config)
            && !planned(p, live_digest(p))
        {
            out.added.push(p.to_owned());
        }
    });
    out
}

/// Whether the marker recorded any file of the skill folder `dir`.
pub fn installed_by_release(marker: &Marker, dir: &str) -> bool {
    let prefix = format!("{dir}/");
    // A range lookup, not a scan: called once per skill, a scan made listing the skills
    // quadratic in the release.
    let below = |files: &crate::table::PathTable<Sha256>| {
        files
            .range_from(&prefix)
            .next()
            .is_some_and(|(p, _)| p.starts_with(&prefix))
    };
    below(&marker.files) || below(&marker.user_files)
}

fn live_digest(path: &Path) -> Option<Sha256> {
    let meta = fs_err::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() {
        return None;
    }
    Sha256::of_file(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(source: &str, trusted: &[&str], template: Option<&str>) -> ProcesskitSection {
        ProcesskitSection {
            source: Some(source.to_owned()),
            trusted_sources: trusted.iter().map(|s| (*s).to_owned()).collect(),
            release_asset_url_template: template.map(str::to_owned),
            ..ProcesskitSection::default()
        }
    }

    #[test]
    fn the_official_repository_is_trusted_in_any_spelling() {
        let root = Path::new("/");
        for source in [
            "https://github.com/projectious-work/processkit",
            "https://github.com/projectious-work/processkit.git",
            "https://GitHub.com/projectious-work/processkit/",
        ] {
            assert_eq!(
                trusted_by(&section(source, &[], None), root).as_deref(),
                Some(OFFICIAL_SOURCE),
                "{source}"
            );
        }
    }

    #[test]
    fn forks_lookalikes_and_foreign_templates_are_not_trusted() {
        let root = Path::new("/");
        for source in [
            "https://github.com/someone/processkit",
            "https://github.com/projectious-work/processkit-fork",
            "https://github.com/projectious-work",
            "https://github.com.evil.example/projectious-work/processkit",
        ] {
            assert_eq!(
                trusted_by(&section(source, &[], None), root),
                None,
                "{source}"
            );
        }
        // The official base, but the asset is fetched from somewhere else.
        for template in [
            "https://mirror.example/{org}/{name}/{version}.tar.gz",
            "{source}/../../someone/processkit/{version}.tar.gz",
            "{source}/..",
            // Spellings a server may decode into `..` or `/` (QA: `%2e%2e` left a trusted
            // base on Python's `http.server`).
            "{source}/%2e%2e/%2E%2E/someone/processkit/{version}.tar.gz",
            "{source}/.%2e/x/{version}.tar.gz",
            "{source}/%2e./x/{version}.tar.gz",
            "{source}/a%2f..%2f..%2fb/{version}.tar.gz",
            "{source}/a%5C..%5C..%5Cb/{version}.tar.gz",
            "{source}/a\\..\\..\\b/{version}.tar.gz",
        ] {
            let foreign = section(OFFICIAL_SOURCE, &[], Some(template));
            assert_eq!(trusted_by(&foreign, root), None, "{template}");
        }
        // A template that stays below the trusted base is fine.
        let below = section(
            OFFICIAL_SOURCE,
            &[],
            Some("{source}/releases/download/{version}/content.tar.gz"),
        );
        assert_eq!(trusted_by(&below, root).as_deref(), Some(OFFICIAL_SOURCE));
        // Dots inside a name, and a query, are not segments.
        let dotted = section(
            OFFICIAL_SOURCE,
            &[],
            Some("{source}/releases/download/{version}/processkit-{version}..tar.gz?x=../y"),
        );
        assert_eq!(trusted_by(&dotted, root).as_deref(), Some(OFFICIAL_SOURCE));
        // An owner-listed fork is trusted.
        let listed = section(
            "https://github.com/acme/processkit.git",
            &["https://github.com/acme/processkit"],
            None,
        );
        assert_eq!(
            trusted_by(&listed, root).as_deref(),
            Some("https://github.com/acme/processkit")
        );
    }

    #[test]
    fn local_sources_are_trusted_only_when_listed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs_err::create_dir_all(root.join("vendor/processkit/v1")).unwrap();
        fs_err::create_dir_all(root.join("elsewhere")).unwrap();
        let vendored = section("vendor/processkit/v1", &[], None);
        assert_eq!(trusted_by(&vendored, root), None);
        let listed = section("vendor/processkit/v1", &["vendor/processkit"], None);
        assert_eq!(
            trusted_by(&listed, root).as_deref(),
            Some("vendor/processkit")
        );
        let other = section("elsewhere", &["vendor/processkit"], None);
        assert_eq!(trusted_by(&other, root), None);
        // A URL entry never vouches for a path and the other way round.
        let url_entry = section("vendor/processkit/v1", &["https://example.com/x"], None);
        assert_eq!(trusted_by(&url_entry, root), None);
    }

    #[test]
    fn describe_names_files_relative_to_the_skill() {
        let c = SkillChanges {
            modified: vec!["context/skills/a/b/mcp/server.py".to_owned()],
            missing: vec!["context/skills/a/b/SKILL.md".to_owned()],
            added: Vec::new(),
        };
        assert_eq!(
            c.describe("context/skills/a/b"),
            "mcp/server.py edited; SKILL.md deleted"
        );
    }
}
