//! Locking what team MCP servers started with `uvx` run: the resolve-time half of
//! [`aibox_provenance::uvxdeps`], beside [`crate::mcp_npm`] for `npx`.
//!
//! `uvx pkg==1.2.3` pins the package but not its dependencies: a floating `mcp>=1.0`
//! resolves at every start to the newest release, and a server written against 1.x dies
//! on 2.x. Every enabled team stdio server whose command is `uvx` (or `uv tool run`) with
//! one exactly pinned package gets a locked environment instead, resolved as of the day
//! that version was uploaded (the package index's `upload-time`, [`aibox_provenance::
//! uvxdeps::release_facts`]): what its authors ran. The environment is an ordinary
//! `[mcp.environments]` entry (see [`crate::mcp_envs`]): the image installs it with its
//! hashes, and the server starts as the environment's own executable, with no resolver
//! and no network.
//!
//! The index is asked once per locked release: the previous `aibox.lock` keeps the date. A
//! version the index does not have, or whose dependencies cannot be resolved, is recorded
//! and its servers are not registered: they could not start. Such a verdict may be the
//! index's of that day, so a run that can ask and resolve asks again (a run that cannot
//! keeps it); so does every apply for a release the image's Python cannot install, which
//! depends on the base image and is not recorded. Without `uv`, the index or the network
//! the servers are registered as configured and reported as unlocked. A range or no
//! version is not locked (the registration asks to pin it).

use std::collections::BTreeMap;

use aibox_config::McpServer;
use aibox_provenance::pydeps::{self, EnvSpec, McpLock};
use aibox_provenance::uvxdeps::{self, Uvx, UvxRun};

use crate::mcp_envs::{McpEnvs, Resolving};

/// What resolve decided for the team servers started with `uvx`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UvxEnvs {
    /// Their environments (the lock's `[mcp.environments]` entries and hashes), which
    /// servers use which, and the servers not locked or not registered, with why.
    pub envs: McpEnvs,
    /// Locked servers: name → the environment's executable and the server's arguments.
    pub commands: BTreeMap<String, (String, Vec<String>)>,
    /// Said once, when the index was asked: releases their authors yanked.
    pub notes: Vec<String>,
}

impl UvxEnvs {
    /// The warnings `apply` shows (one per cause, naming the servers).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = self.notes.clone();
        for (name, why) in &self.envs.broken {
            out.push(format!(
                "MCP server `{name}` is not registered: {}. Fix its package or version in \
                 aibox.toml [[ai.mcp.servers]], then run `aibox apply` again",
                why.trim_end_matches('.')
            ));
        }
        let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, why) in &self.envs.unlocked {
            by_reason.entry(why).or_default().push(name);
        }
        for (why, names) in by_reason {
            out.push(format!(
                "{} uvx MCP server(s) are not locked ({}): {}; uvx resolves their \
                 dependencies at first start, to whatever is newest then",
                names.len(),
                names.join(", "),
                why.trim_end_matches('.')
            ));
        }
        out
    }
}

/// Where the index question goes and how (the project's extra CA included).
pub(crate) struct Index {
    /// The simple-API base URL, ending in `/`.
    pub url: String,
    /// HTTP limits and trust.
    pub http: aibox_provenance::HttpOptions,
}

impl Index {
    /// The index `uv` itself uses (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`, else `PyPI`), asked
    /// through `http`.
    pub(crate) fn from_env(http: aibox_provenance::HttpOptions) -> Self {
        Self {
            url: uvxdeps::index_url(|k| std::env::var(k).ok()),
            http,
        }
    }
}

/// Locks the enabled team stdio servers of `servers` (see the module docs); `offline`
/// asks neither the index nor the resolver. `image_python` is the Python the image
/// installs environments with, when aibox knows it ([`distro_python`]).
pub(crate) fn lock(
    servers: &[McpServer],
    index: &Index,
    image_python: Option<ImagePython>,
    how: Resolving<'_>,
) -> UvxEnvs {
    let mut out = UvxEnvs::default();
    let mut runs: Vec<(String, UvxRun)> = Vec::new();
    for server in servers.iter().filter(|s| s.enabled && s.url.is_none()) {
        let Some(command) = &server.command else {
            continue;
        };
        match uvxdeps::parse_uvx(command, &server.args) {
            Uvx::NotUvx | Uvx::Unpinned(_) => {}
            Uvx::NotLockable(why) => {
                out.envs
                    .unlocked
                    .insert(server.name.clone(), format!("not lockable: {why}"));
            }
            Uvx::Run(run) => runs.push((server.name.clone(), run)),
        }
    }
    if runs.is_empty() {
        return out;
    }
    let off = crate::mcp_resolver::turned_off(how.resolver, crate::mcp_envs::UV_ENV);
    // A recorded "no such release" or "no solution" may have come from the index in use
    // then (a mirror not yet synced): asked again whenever this run may ask, and kept
    // only when it cannot.
    let online = !how.offline && off.is_none();
    let mut specs = Vec::new();
    let mut asked: BTreeMap<String, Result<Option<uvxdeps::ReleaseFacts>, String>> =
        BTreeMap::new();
    for (name, run) in &runs {
        let mut recorded_missing = None;
        match how.previous.and_then(|l| locked(l, name, &run.requirement)) {
            Some(Ok(spec)) => {
                specs.push((name.clone(), spec));
                continue;
            }
            Some(Err(why)) if !online => {
                missing(&mut out, name, run, why);
                continue;
            }
            Some(Err(why)) => recorded_missing = Some(why),
            None => {}
        }
        let answer = if how.offline {
            Err("not locked yet, and this command never resolves; `aibox apply` does".to_owned())
        } else if let Some(why) = &off {
            Err(why.clone())
        } else {
            let fresh = !asked.contains_key(&run.requirement);
            let answer = asked
                .entry(run.requirement.clone())
                .or_insert_with(|| ask(index, run, how.notice))
                .clone();
            if fresh && let Ok(Some(facts)) = &answer {
                out.notes
                    .extend(facts.yanked.as_ref().map(|reason| yanked(run, reason)));
            }
            answer
        };
        match answer {
            Ok(Some(facts)) => specs.push((name.clone(), spec_of(run, facts))),
            Ok(None) => {
                let why = format!(
                    "the package index ({}) has no release `{}`",
                    uvxdeps::redact(&index.url),
                    run.requirement
                );
                missing(&mut out, name, run, why);
            }
            Err(why) => match recorded_missing {
                Some(recorded) => missing(&mut out, name, run, recorded),
                None => {
                    out.envs.unlocked.insert(name.clone(), why);
                }
            },
        }
    }
    // A release the image's Python cannot install would fail the image build: left out,
    // whatever the lock says (the base image may have changed since).
    if let Some(python) = image_python {
        specs.retain(
            |(name, spec)| match python.refuses(spec.requires_python.as_deref()) {
                Some(why) => {
                    out.envs.broken.insert(name.clone(), why);
                    false
                }
                None => true,
            },
        );
    }
    let locked = lock_retrying(specs, how, online);
    for (name, run) in runs {
        if let Some(id) = locked.server_env.get(&name) {
            let bin = format!("{}/bin/{}", pydeps::env_dir(id), run.command);
            out.commands.insert(name, (bin, run.args));
        }
    }
    out.envs.broken.extend(locked.broken);
    out.envs.unlocked.extend(locked.unlocked);
    out.envs.server_env = locked.server_env;
    out.envs.lock.add_environments(&locked.lock);
    out
}

/// [`crate::mcp_envs::lock_specs`], with a recorded "no solution" of these specs resolved
/// again when `online`; when that cannot run (no `uv`), the recorded verdict stands, so a
/// machine without a resolver does not change the lock.
fn lock_retrying(specs: Vec<(String, EnvSpec)>, how: Resolving<'_>, online: bool) -> McpEnvs {
    // Server name → its environment's id.
    let names: Vec<(String, String)> = specs
        .iter()
        .map(|(name, spec)| (name.clone(), spec.id()))
        .collect();
    let verdicts: BTreeMap<String, pydeps::EnvLock> = how
        .previous
        .map(|l| {
            l.environments
                .iter()
                .filter(|(id, env)| {
                    env.unresolvable.is_some() && names.iter().any(|(_, of)| of == *id)
                })
                .map(|(id, env)| (id.clone(), env.clone()))
                .collect()
        })
        .unwrap_or_default();
    if !online || verdicts.is_empty() {
        return crate::mcp_envs::lock_specs(specs, how);
    }
    let mut previous = how.previous.cloned().unwrap_or_default();
    previous
        .environments
        .retain(|id, _| !verdicts.contains_key(id));
    let mut locked = crate::mcp_envs::lock_specs(
        specs,
        Resolving {
            previous: Some(&previous),
            ..how
        },
    );
    for (name, id) in names {
        if let (Some(env), true) = (verdicts.get(&id), locked.unlocked.contains_key(&name)) {
            locked.unlocked.remove(&name);
            let why = env.unresolvable.clone().unwrap_or_default();
            locked.broken.insert(name.clone(), why);
            // Kept as recorded, but for the servers configured now (a renamed one too).
            let kept = locked
                .lock
                .environments
                .entry(id)
                .or_insert_with(|| pydeps::EnvLock {
                    servers: Vec::new(),
                    ..env.clone()
                });
            kept.servers.push(name);
            kept.servers.sort();
        }
    }
    locked
}

/// Records `run`'s release as missing from the index (`why`): the server is not
/// registered, and the lock keeps the answer (an `[mcp.environments]` entry without a
/// date or requirements), so a run that cannot ask (`--offline`, no `uv`, `doctor`) gives
/// the same verdict and finds the files current; one that can ask asks again.
fn missing(out: &mut UvxEnvs, name: &str, run: &UvxRun, why: String) {
    let spec = EnvSpec {
        requires_python: None,
        dependencies: vec![run.requirement.clone()],
        exclude_newer: None,
    };
    let entry = out
        .envs
        .lock
        .environments
        .entry(spec.id())
        .or_insert_with(|| pydeps::EnvLock {
            dependencies: spec.dependencies.clone(),
            resolver: "package index".to_owned(),
            unresolvable: Some(why.clone()),
            ..pydeps::EnvLock::default()
        });
    entry.servers.push(name.to_owned());
    // In name order, as every environment's: the lock does not follow the config's order.
    entry.servers.sort();
    out.envs.broken.insert(name.to_owned(), why);
}

/// The environment spec of `run`'s release as the index described it.
fn spec_of(run: &UvxRun, facts: uvxdeps::ReleaseFacts) -> EnvSpec {
    let deps = pydeps::ScriptDeps {
        requires_python: facts.requires_python,
        dependencies: vec![run.requirement.clone()],
    };
    EnvSpec::new(&deps, Some(&facts.cutoff))
}

/// The notice for a release its authors withdrew.
fn yanked(run: &UvxRun, reason: &str) -> String {
    let why = if reason.is_empty() {
        String::new()
    } else {
        format!(" ({})", reason.trim_end_matches('.'))
    };
    format!(
        "`{}` is yanked on the package index{why}: it is locked and installed all the same, \
         as uv installs a pinned yanked release; pin another version in aibox.toml \
         [[ai.mcp.servers]] unless you need this one",
        run.requirement
    )
}

/// What `previous` recorded for `requirement`: the spec it locked it with, or why the
/// index has no such release. An entry of the server `name` first, then any entry of the
/// same requirement (a renamed server, or a second one on the same package): the index
/// is asked once per release, and an unreachable index never drops a locked server.
fn locked(previous: &McpLock, name: &str, requirement: &str) -> Option<Result<EnvSpec, String>> {
    let same = |env: &&pydeps::EnvLock| env.dependencies == [requirement];
    let mut candidates: Vec<&pydeps::EnvLock> =
        previous.environments.values().filter(same).collect();
    candidates.sort_by_key(|env| !env.servers.iter().any(|s| s == name));
    candidates
        .into_iter()
        .find_map(|env| match (&env.exclude_newer, &env.unresolvable) {
            (Some(_), _) => Some(Ok(env.spec())),
            (None, Some(why)) => Some(Err(why.clone())),
            (None, None) => None,
        })
}

/// The Python of the image's distribution, which installs every locked environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ImagePython {
    /// The distribution release (`Debian bookworm`).
    pub distro: &'static str,
    /// Its `python3` version.
    pub version: (u32, u32, u32),
}

/// The `python3` of the base image's distribution, when the image is Debian's or
/// Ubuntu's own (`debian:bookworm-slim`, `docker.io/library/ubuntu:24.04`) at a release
/// aibox knows; `None` for any other image, whose Python may be anything
/// (`python:3.13-slim-bookworm` has its own 3.13).
pub(crate) fn distro_python(base_image: &str) -> Option<ImagePython> {
    type Release = (&'static str, &'static str, &'static str, (u32, u32, u32));
    const KNOWN: [Release; 7] = [
        ("debian", "bullseye", "Debian bullseye", (3, 9, 2)),
        ("debian", "bookworm", "Debian bookworm", (3, 11, 2)),
        ("debian", "trixie", "Debian trixie", (3, 13, 5)),
        ("ubuntu", "jammy", "Ubuntu 22.04", (3, 10, 12)),
        ("ubuntu", "22.04", "Ubuntu 22.04", (3, 10, 12)),
        ("ubuntu", "noble", "Ubuntu 24.04", (3, 12, 3)),
        ("ubuntu", "24.04", "Ubuntu 24.04", (3, 12, 3)),
    ];
    let name = base_image.split('@').next().unwrap_or(base_image);
    let last = name.rsplit('/').next().unwrap_or(name);
    let (repository, tag) = last.split_once(':')?;
    KNOWN
        .iter()
        .find(|(repo, release, _, _)| {
            repository == *repo
                && tag
                    .strip_prefix(release)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
        })
        .map(|&(_, _, distro, version)| ImagePython { distro, version })
}

impl ImagePython {
    /// Why `requires_python` leaves this Python out (the image build would refuse the
    /// environment), or `None` when it admits it or cannot be read.
    pub(crate) fn refuses(self, requires_python: Option<&str>) -> Option<String> {
        let requires = requires_python?;
        let admits = requires
            .split(',')
            .all(|clause| admits(clause.trim(), self.version));
        let (major, minor, patch) = self.version;
        (!admits).then(|| {
            format!(
                "it requires Python {requires}, and the image installs it with {}'s python3 \
                 {major}.{minor}.{patch}, where the image build would refuse it; pin a \
                 release for that Python, or use a base image with a newer one",
                self.distro
            )
        })
    }
}

/// Whether one `requires-python` clause (`>=3.12`, `<4`, `!=3.11.*`, `~=3.10`) admits
/// `version`, comparing release numbers as PEP 440 does (missing parts are zero); a
/// clause aibox does not read admits it.
fn admits(clause: &str, version: (u32, u32, u32)) -> bool {
    let ops = ["~=", "===", "==", "!=", ">=", "<=", ">", "<"];
    let Some(op) = ops.iter().find(|op| clause.starts_with(**op)) else {
        return true;
    };
    let text = clause[op.len()..].trim();
    let (text, wildcard) = text.strip_suffix(".*").map_or((text, false), |t| (t, true));
    let Ok(parts) = text
        .split('.')
        .map(str::parse)
        .collect::<Result<Vec<u32>, _>>()
    else {
        return true;
    };
    if parts.is_empty() || parts.len() > 3 {
        return true;
    }
    let have = [version.0, version.1, version.2];
    let mut want = [0; 3];
    want[..parts.len()].copy_from_slice(&parts);
    let order = have.cmp(&want);
    let prefix = have[..parts.len()] == parts[..];
    match *op {
        "==" | "===" if wildcard => prefix,
        "==" | "===" => order.is_eq(),
        "!=" if wildcard => !prefix,
        "!=" => !order.is_eq(),
        ">=" => order.is_ge(),
        "<=" => order.is_le(),
        ">" => order.is_gt(),
        "<" => order.is_lt(),
        // `~=3.10` is `>=3.10, ==3.*`.
        _ => {
            parts.len() >= 2 && order.is_ge() && have[..parts.len() - 1] == parts[..parts.len() - 1]
        }
    }
}

/// Asks the index when `run`'s release was uploaded, which Python it needs and whether
/// it was yanked; `Ok(None)` when the index has no such release, `Err` (why) when the
/// index could not be asked.
fn ask(
    index: &Index,
    run: &UvxRun,
    notice: Option<&crate::mcp_resolver::Notice>,
) -> Result<Option<uvxdeps::ReleaseFacts>, String> {
    if let Some(notice) = notice {
        notice(&format!(
            "dating {}=={} on the package index ...",
            run.package, run.version
        ));
    }
    // The index URL may carry credentials (a private index): never in a message.
    uvxdeps::release_facts(&index.url, &run.package, &run.version, &index.http).map_err(|e| {
        let why = uvxdeps::redact_in(&e.to_string(), &index.url);
        format!("the package index could not date the release: {why}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A private index given with its credentials, as uv takes it: they reach no warning.
    #[test]
    fn an_index_password_is_not_repeated() {
        let index = Index {
            url: "http://me:fake-index-password@127.0.0.1:9/simple/".to_owned(),
            http: aibox_provenance::HttpOptions::default(),
        };
        let server = McpServer {
            name: "time".to_owned(),
            command: Some("uvx".to_owned()),
            args: vec!["mcp-server-time==2025.9.25".to_owned()],
            env: std::collections::BTreeMap::new(),
            url: None,
            headers: std::collections::BTreeMap::new(),
            allowed_tools: Vec::new(),
            startup_timeout_sec: None,
            enabled: true,
        };
        let resolver = crate::mcp_resolver::Resolver::Path("/nonexistent/uv".into());
        let how = Resolving {
            previous: None,
            resolver: &resolver,
            offline: false,
            cache: None,
            notice: None,
            extra_ca: None,
        };
        let envs = lock(&[server], &index, None, how);
        let warnings = envs.warnings().join("\n");
        assert!(warnings.contains("could not date"), "{warnings}");
        assert!(warnings.contains("***@127.0.0.1:9"), "{warnings}");
        assert!(!warnings.contains("fake-index-password"), "{warnings}");
    }

    #[test]
    fn the_image_python_is_named_by_the_base_image() {
        let bookworm = distro_python(
            "docker.io/library/debian:bookworm-slim@sha256:abd67ffcfa541b485a3dff59865ab629aa048a6c613e639d36e7456b0b229241",
        )
        .unwrap();
        assert_eq!(
            (bookworm.distro, bookworm.version),
            ("Debian bookworm", (3, 11, 2))
        );
        assert_eq!(
            distro_python("mirror.example/library/debian:trixie-20251020").map(|p| p.distro),
            Some("Debian trixie")
        );
        assert_eq!(distro_python("ubuntu:24.04").map(|p| p.version.1), Some(12));
        for other in [
            "ghcr.io/acme/dev:latest",
            // Images built on a release, with a Python of their own or an unknown one.
            "python:3.13-slim-bookworm",
            "localhost/aibox-test-base:bookworm",
            "acme/dev:2024.04.15",
            "registry.example/bookworm/tools:1.0",
            "debian:bookwormish",
            "debian",
        ] {
            assert_eq!(distro_python(other), None, "{other}");
        }
    }

    #[test]
    fn requires_python_is_read_as_pep_440_reads_it() {
        let bookworm = distro_python("debian:bookworm").unwrap();
        for (requires, refused) in [
            (">=3.12", true),
            (">=3.10", false),
            (">=3.8.1,<4.0", false),
            ("<3.11", true),
            (">=3.11.3", true),
            ("<=3.11", true),
            ("<=3.11.2", false),
            (">3.11", false),
            (">3.11.2", true),
            ("!=3.11.*", true),
            ("==3.11.*", false),
            ("==3.12.*", true),
            ("~=3.10", false),
            ("~=3.10.1", true),
            ("something else", false),
        ] {
            assert_eq!(
                bookworm.refuses(Some(requires)).is_some(),
                refused,
                "{requires}"
            );
        }
        assert!(bookworm.refuses(None).is_none());
        let why = bookworm.refuses(Some(">=3.12")).unwrap();
        assert!(why.contains("Debian bookworm's python3 3.11.2"), "{why}");
    }
}
