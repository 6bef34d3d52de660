//! Egress facts below the plan: the hosts the installed skills declare
//! (`metadata.processkit.hosts` of their `SKILL.md`), which resolve reads; the lock's
//! `[network]`; and the built-in tool catalog the generator and the egress lists share.
//! The allowlist itself is `aibox_devcontainer::egress::allowlist`, called by the
//! devcontainer source and by `aibox network list` ([`crate::network_list`]).

use std::collections::BTreeMap;

use aibox_config::{AiboxToml, EgressMode};
use aibox_devcontainer::catalog::Catalog;
use aibox_devcontainer::egress::{self, Allowlist, SkillHosts};
use aibox_provenance::lock::NetworkLock;
use camino::Utf8Path;

use crate::error::EngineError;

/// The hosts the skills a plan installs declare, and what is wrong with their
/// declarations (one warning per skill).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillsHosts {
    /// Each skill that declares a valid host, by skill name.
    pub skills: Vec<SkillHosts>,
    /// One sentence per skill whose declaration has problems.
    pub warnings: Vec<String>,
}

impl SkillsHosts {
    /// Adds the declaration of skill `name` read from the `SKILL.md` text at `path`.
    pub(crate) fn add(&mut self, name: &str, path: &str, text: &str) {
        let declared = aibox_skill_review::declared_hosts(text);
        if !declared.problems.is_empty() {
            let problems: Vec<String> = declared
                .problems
                .iter()
                .map(|(line, m)| match line {
                    Some(line) => format!("line {line}: {m}"),
                    None => m.clone(),
                })
                .collect();
            self.warnings.push(format!(
                "egress: skill `{name}` ({path}): {}; those entries are not allowed through the \
                 egress proxy",
                problems.join("; ")
            ));
        }
        if !declared.hosts.is_empty() {
            self.skills.push(SkillHosts {
                skill: name.to_owned(),
                hosts: declared.hosts,
            });
        }
    }
}

/// The hosts declared by the skills the plan installs: each selected skill of the release
/// (its `SKILL.md` as the release ships it: an edit in place adds no host) and each
/// hand-added skill folder with an MCP server (its `SKILL.md` on disk, reviewed as it
/// is). A `SKILL.md` that cannot be read declares nothing, with a warning.
pub(crate) fn declared_by_skills<'a>(
    root: &Utf8Path,
    release: &aibox_provenance::VerifiedRelease,
    catalog: &aibox_provenance::catalog::Catalog,
    selected: &std::collections::BTreeSet<String>,
    hand_added: impl Iterator<Item = &'a crate::skills::HandAdded>,
) -> SkillsHosts {
    let mut out = SkillsHosts::default();
    let mut read = |name: &str, path: &str, text: Result<String, String>| match text {
        Ok(text) => out.add(name, path, &text),
        Err(why) => out.warnings.push(format!(
            "egress: skill `{name}`: {path} {why}; its declared hosts are not allowed"
        )),
    };
    // A `SKILL.md` without the key declares nothing: the catalog's parse already said so,
    // and the file is not read twice.
    for skill in catalog
        .skills
        .values()
        .filter(|s| s.declares_hosts && selected.contains(&s.name))
    {
        let path = format!("{}/SKILL.md", skill.dir);
        let Some(from) = release.payload.copy_from(&path) else {
            continue;
        };
        let text = from
            .read_verified()
            .and_then(|b| String::from_utf8(b).map_err(|_| "is not UTF-8".to_owned()));
        read(&skill.name, &path, text);
    }
    for skill in hand_added {
        let path = format!("{}/SKILL.md", skill.dir);
        match fs_err::read_to_string(root.join(&path)) {
            Ok(text) => read(&skill.name, &path, Ok(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => read(&skill.name, &path, Err(format!("cannot be read: {e}"))),
        }
    }
    out
}

/// The built-in tool catalog, its error as the engine's. Parsed once per plan (and once
/// per `network list`): the generator, the tool locks and the egress lists share it.
///
/// # Errors
/// A broken built-in catalog.
pub(crate) fn builtin_catalog() -> Result<Catalog, EngineError> {
    Catalog::builtin().map_err(|e| {
        EngineError::from(aibox_devcontainer::DevcontainerError::Catalog {
            message: e.to_string(),
        })
    })
}

/// The proxy as `network list` and the lock name it: `tinyproxy-bin <version>`.
pub(crate) fn proxy_name() -> String {
    format!("{} {}", egress::PROXY_PACKAGE, egress::PROXY_VERSION)
}

/// The lock's `[network]`: the team's hosts and their origins, and the build-time
/// registries, in `allowlist` mode.
pub(crate) fn lock(
    config: &AiboxToml,
    list: &Allowlist,
    build: BTreeMap<String, Vec<String>>,
) -> Option<NetworkLock> {
    (config.network.egress == EgressMode::Allowlist).then(|| NetworkLock {
        build,
        egress: EgressMode::Allowlist.as_str().to_owned(),
        proxy: proxy_name(),
        allow: list
            .entries
            .iter()
            .filter(|(_, origins)| origins.iter().any(|o| !o.is_personal()))
            .map(|(host, origins)| {
                let team = origins.iter().filter(|o| !o.is_personal());
                (host.clone(), team.map(egress::Origin::describe).collect())
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use aibox_provenance::Payload;
    use aibox_provenance::catalog::Catalog;

    /// The catalog's `declares_hosts` is true exactly when reading the `SKILL.md` for its
    /// hosts finds something (a host or a problem), so skipping the others loses nothing.
    #[test]
    fn only_a_skill_md_without_a_hosts_declaration_is_skipped() {
        let cases = [
            ("listed", "    hosts:\n      - api.example.com\n"),
            ("bad-host", "    hosts:\n      - \"not a host!\"\n"),
            ("scalar", "    hosts: api.example.com\n"),
            ("empty-list", "    hosts: []\n"),
            ("null", "    hosts: ~\n"),
            ("absent", "    core: false\n"),
        ];
        let mut files: Vec<(String, Vec<u8>, bool)> = cases
            .iter()
            .map(|(name, processkit)| {
                let text =
                    format!("---\nname: {name}\nmetadata:\n  processkit:\n{processkit}---\n# x\n");
                (
                    format!("context/skills/cat/{name}/SKILL.md"),
                    text.into_bytes(),
                    false,
                )
            })
            .collect();
        files.push((
            "context/skills/cat/bare/SKILL.md".to_owned(),
            b"---\nname: bare\n---\n# x\n".to_vec(),
            false,
        ));
        let catalog = Catalog::from_payload(&Payload::from_memory(files.clone())).unwrap();
        for (path, bytes, _) in &files {
            let name = path.split('/').nth(3).unwrap();
            let declared = aibox_skill_review::declared_hosts(std::str::from_utf8(bytes).unwrap());
            let finds = !declared.hosts.is_empty() || !declared.problems.is_empty();
            let skill = &catalog.skills[name];
            assert!(
                !finds || skill.declares_hosts,
                "{name}: the hosts reader finds {declared:?}, the catalog says none"
            );
        }
        let declaring: Vec<&str> = catalog
            .skills
            .values()
            .filter(|s| s.declares_hosts)
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(declaring, ["bad-host", "empty-list", "listed", "scalar"]);
    }
}
