//! Locking what MCP servers run: the resolve-time half of [`aibox_provenance::pydeps`].
//!
//! Every registered processkit server (and every hand-added skill's) whose script
//! declares PEP 723 dependencies gets a locked environment. Servers with the same
//! declaration share one. An environment comes, in this order, from
//! - the previous `aibox.lock`, when its spec is unchanged (an unchanged release is never
//!   resolved again);
//! - the resolution cache (`<download cache>/mcp-envs/<id>.txt`): the spec fixes the
//!   answer (declared ranges, `requires-python` and the release's date as the upload
//!   cutoff), so another project on the same release reuses it without a resolver;
//! - `uv pip compile --universal --generate-hashes --exclude-newer <release date>`.
//!
//! A server whose declaration cannot be resolved (no solution, a package that does not
//! exist, a malformed block) is not registered: it could not start. A server that could
//! not be locked for want of a resolver or the network is registered as it ships and
//! reported as unlocked, so `apply` works offline and says what it could not pin.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use aibox_provenance::pydeps::{self, EnvLock, EnvSpec, McpLock, ScriptDeps};

use crate::mcp_resolver::{Failure, Resolver, locate};

/// Environment variable naming the `uv` binary `apply` resolves with; `none` turns
/// resolving off (servers not yet in the lock stay unlocked).
pub const UV_ENV: &str = "AIBOX_UV";

/// The name `aibox.lock` records for the pk-doctor script among an environment's users
/// ([`crate::pk_doctor::ENV_NAME`]): not a server, so reported on its own.
pub const PK_DOCTOR_ENV: &str = "pk-doctor-script";

/// Longest a resolution may take (a cold uv cache behind a slow proxy needs tens of
/// seconds for a processkit-sized declaration).
const RESOLVE_TIMEOUT: Duration = Duration::from_mins(5);

/// What resolve decided for the servers' dependencies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpEnvs {
    /// The environments in use and their hashes: the lock's `[mcp]`.
    pub lock: McpLock,
    /// Server name → environment id.
    pub server_env: BTreeMap<String, String>,
    /// Servers that cannot start (their dependencies cannot be installed): not
    /// registered. Name → why.
    pub broken: BTreeMap<String, String>,
    /// Servers registered as they ship, their dependencies not pinned. Name → why.
    pub unlocked: BTreeMap<String, String>,
    /// Why pk-doctor's script (locked under [`PK_DOCTOR_ENV`], not a
    /// server) has no locked environment, when it has none.
    pub pk_doctor_unlocked: Option<String>,
}

impl McpEnvs {
    /// The warnings `apply` shows (one per cause, naming the servers).
    pub fn warnings(&self) -> Vec<String> {
        self.warnings_except(&[])
    }

    /// [`Self::warnings`] about every server but those in `gone` (registered nowhere for
    /// another reason, which is said on its own: a script deleted by hand, QA26).
    pub fn warnings_except(&self, gone: &[&str]) -> Vec<String> {
        let here = |name: &&String| !gone.contains(&name.as_str());
        let mut out = Vec::new();
        if let Some(why) = &self.pk_doctor_unlocked {
            out.push(format!(
                "pk-doctor's dependencies are not locked ({}); `aibox doctor --processkit` \
                 runs it only once they are",
                why.trim_end_matches('.')
            ));
        }
        for (name, why) in self.broken.iter().filter(|(n, _)| here(n)) {
            let why = why.trim_end_matches('.');
            out.push(format!(
                "MCP server `{name}` is not registered: {why}. Fix the skill's PEP 723 \
                 `dependencies` (or ask its authors to), then run `aibox apply` again"
            ));
        }
        let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, why) in self.unlocked.iter().filter(|(n, _)| here(n)) {
            by_reason.entry(why).or_default().push(name);
        }
        for (why, names) in by_reason {
            out.push(format!(
                "{} MCP server(s) have unlocked dependencies ({}): {why}; they fetch \
                 whatever their ranges resolve to at first start",
                names.len(),
                names.join(", ")
            ));
        }
        out
    }
}

/// One server to lock: its name and what its script declares (`Err`: the block is
/// malformed, in one sentence).
pub(crate) type ServerDeps = (String, Result<Option<ScriptDeps>, String>);

/// Where resolutions come from and what may be run for them: the previous lock, the
/// resolver, whether this command may resolve at all (`offline` runs nothing), the
/// resolution cache, and who is told before a slow resolution.
#[derive(Clone, Copy)]
pub(crate) struct Resolving<'a> {
    pub previous: Option<&'a McpLock>,
    pub resolver: &'a Resolver,
    pub offline: bool,
    pub cache: Option<&'a aibox_provenance::Cache>,
    pub notice: Option<&'a crate::mcp_resolver::Notice>,
    /// The personal extra CA (PEM), which `uv` is given with the trusted roots: it goes
    /// through the same TLS-inspecting proxy as aibox's own downloads.
    pub extra_ca: Option<&'a str>,
}

/// Locks `servers` (see the module docs). `exclude_newer` is the release's date.
pub(crate) fn lock(
    servers: Vec<ServerDeps>,
    exclude_newer: Option<&str>,
    how: Resolving<'_>,
) -> McpEnvs {
    let mut broken = BTreeMap::new();
    let mut specs = Vec::new();
    for (name, deps) in servers {
        match deps {
            Err(why) => {
                broken.insert(
                    name,
                    format!("its script's dependencies cannot be read: {why}"),
                );
            }
            Ok(None) => {}
            Ok(Some(deps)) => specs.push((name, EnvSpec::new(&deps, exclude_newer))),
        }
    }
    let mut out = lock_specs(specs, how);
    out.broken.extend(broken);
    // pk-doctor's script is not a server: reported on its own, never as one.
    let pk = PK_DOCTOR_ENV;
    out.pk_doctor_unlocked = out.broken.remove(pk).or_else(|| out.unlocked.remove(pk));
    out.server_env.remove(pk);
    out
}

/// Locks one environment per distinct spec of `servers` (name, spec): from the previous
/// lock, the resolution cache or `uv` (see the module docs). Shared by the release's
/// servers and the team's `uvx` ones ([`crate::mcp_uvx`]), which differ only in where
/// the spec comes from.
pub(crate) fn lock_specs(servers: Vec<(String, EnvSpec)>, how: Resolving<'_>) -> McpEnvs {
    let mut out = McpEnvs::default();
    let mut groups: BTreeMap<String, (EnvSpec, Vec<String>)> = BTreeMap::new();
    for (name, spec) in servers {
        groups
            .entry(spec.id())
            .or_insert_with(|| (spec, Vec::new()))
            .1
            .push(name);
    }
    let mut finder = Finder { how, uv: None };
    for (id, (spec, mut names)) in groups {
        names.sort();
        let (outcome, resolver_name) = finder.find(&id, &spec);
        let entry =
            |resolver: String, requirements: Vec<String>, unresolvable: Option<String>| EnvLock {
                requires_python: spec.requires_python.clone(),
                dependencies: spec.dependencies.clone(),
                exclude_newer: spec.exclude_newer.clone(),
                resolver,
                servers: names.clone(),
                requirements,
                unresolvable,
            };
        match outcome {
            Ok((resolver, resolution)) => {
                for name in &names {
                    out.server_env.insert(name.clone(), id.clone());
                }
                for req in &resolution.requirements {
                    let key = pydeps::requirement_key(req).to_owned();
                    if let Some(h) = resolution.hashes.get(&key) {
                        out.lock.hashes.insert(key, h.clone());
                    }
                }
                let env = entry(resolver, resolution.requirements, None);
                out.lock.environments.insert(id, env);
            }
            Err(Failure::NoSolution(why)) => {
                for name in &names {
                    out.broken.insert(name.clone(), why.clone());
                }
                // Recorded, so an unchanged release does not ask again.
                let resolver = how
                    .previous
                    .and_then(|l| l.environments.get(&id))
                    .map_or(resolver_name, |e| e.resolver.clone());
                let env = entry(resolver, Vec::new(), Some(why));
                out.lock.environments.insert(id, env);
            }
            Err(Failure::Unavailable(why)) => {
                for name in names {
                    out.unlocked.insert(name, why.clone());
                }
            }
        }
    }
    out
}

/// Where an environment's resolution comes from, in order (see the module docs).
struct Finder<'a> {
    how: Resolving<'a>,
    /// The resolver, looked up at the first environment that needs it.
    uv: Option<Result<Uv, String>>,
}

impl Finder<'_> {
    /// The resolution of `spec`, and the name of the resolver that was run (empty when
    /// none was).
    fn find(&mut self, id: &str, spec: &EnvSpec) -> (Result<Found, Failure>, String) {
        let found = self
            .how
            .previous
            .and_then(|l| reuse(l, id, spec))
            .or_else(|| {
                self.how
                    .cache
                    .and_then(|c| c.resolution(id))
                    .and_then(|t| read_cached(&t))
                    .map(Ok)
            });
        if let Some(found) = found {
            return (found, String::new());
        }
        if self.how.offline {
            let why = "not locked yet, and this command never resolves; `aibox apply` does";
            return (Err(Failure::Unavailable(why.to_owned())), String::new());
        }
        let resolver = self.how.resolver;
        let uv = match self.uv.get_or_insert_with(|| Uv::find(resolver)) {
            Err(why) => return (Err(Failure::Unavailable(why.clone())), String::new()),
            Ok(uv) => uv,
        };
        if let Some(notice) = self.how.notice {
            let cutoff = spec
                .exclude_newer
                .as_deref()
                .map_or_else(String::new, |d| format!(", as of {d}"));
            notice(&format!(
                "locking MCP server dependencies: {} with {}{cutoff} ...",
                spec.dependencies.join(", "),
                uv.version
            ));
        }
        let outcome = uv
            .compile(spec, self.how.extra_ca)
            .and_then(|(resolver, text)| {
                let resolution = pydeps::parse_requirements(&text).map_err(|e| {
                    Failure::Unavailable(format!("{} printed an unusable lock: {e}", uv.version))
                })?;
                if let Some(cache) = self.how.cache {
                    cache.store_resolution(id, &format!("{CACHE_HEADER}{resolver}\n{text}"));
                }
                Ok((resolver, resolution))
            });
        (outcome, uv.version.clone())
    }
}

/// The previous lock's entry for `id`, when it was resolved from the same spec and holds
/// a hash for every requirement.
fn reuse(lock: &McpLock, id: &str, spec: &EnvSpec) -> Option<Result<Found, Failure>> {
    let env = lock.environments.get(id).filter(|e| e.spec() == *spec)?;
    if let Some(why) = &env.unresolvable {
        return Some(Err(Failure::NoSolution(why.clone())));
    }
    let mut hashes = BTreeMap::new();
    for req in &env.requirements {
        let key = pydeps::requirement_key(req);
        let list = lock.hashes.get(key).filter(|l| !l.is_empty())?;
        hashes.insert(key.to_owned(), list.clone());
    }
    Some(Ok((
        env.resolver.clone(),
        pydeps::Resolution {
            requirements: env.requirements.clone(),
            hashes,
        },
    )))
}

/// A resolution and the resolver that made it.
type Found = (String, pydeps::Resolution);

/// First line of a cached resolution: which resolver produced it.
const CACHE_HEADER: &str = "# resolver: ";

/// A cached resolution (stored under the spec's digest); a damaged entry is simply
/// resolved again.
fn read_cached(text: &str) -> Option<(String, pydeps::Resolution)> {
    let (first, rest) = text.split_once('\n')?;
    let resolver = first.strip_prefix(CACHE_HEADER)?.to_owned();
    let resolution = pydeps::parse_requirements(rest).ok()?;
    Some((resolver, resolution))
}

/// A `uv` binary and its version (`uv 0.13.9`).
struct Uv {
    path: PathBuf,
    version: String,
}

impl Uv {
    fn find(resolver: &Resolver) -> Result<Self, String> {
        let (path, text) = locate(resolver, "uv", UV_ENV, "install uv")?;
        let version = text
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        if !version.starts_with("uv ") {
            return Err(format!("`{}` is not uv (it says `{text}`)", path.display()));
        }
        Ok(Self { path, version })
    }

    /// Resolves `spec`: the resolver's name and its hash-pinned requirements text.
    /// uv reads every root aibox trusts from a bundle (`SSL_CERT_FILE`, which replaces
    /// its own Mozilla-only set): the system's store (where a company's proxy CA is, and
    /// which includes a bundle the user named in `SSL_CERT_FILE`), Mozilla's set and
    /// `extra_ca`. Without it, aibox would date a release through a proxy uv then fails.
    fn compile(&self, spec: &EnvSpec, extra_ca: Option<&str>) -> Result<(String, String), Failure> {
        let unavailable = |why: String| Failure::Unavailable(why);
        let mut input = spec.dependencies.join("\n");
        input.push('\n');
        let mut cmd = Command::new(&self.path);
        let bundle_failed =
            |e: std::io::Error| unavailable(format!("cannot write a CA bundle for uv: {e}"));
        let mut bundle = tempfile::NamedTempFile::new().map_err(bundle_failed)?;
        std::io::Write::write_all(
            &mut bundle,
            aibox_provenance::fetch::trusted_bundle_pem(extra_ca).as_bytes(),
        )
        .map_err(bundle_failed)?;
        cmd.env("SSL_CERT_FILE", bundle.path())
            .env_remove("SSL_CERT_DIR");
        cmd.args(["pip", "compile", "--universal", "--generate-hashes"])
            .args([
                "--no-header",
                "--no-annotate",
                "--quiet",
                "--color",
                "never",
            ])
            .args(["--python-version", &spec.python_floor()])
            .env("UV_PYTHON_DOWNLOADS", "never")
            .arg("-");
        if let Some(cutoff) = &spec.exclude_newer {
            cmd.args(["--exclude-newer", cutoff]);
        }
        let out = crate::process::run_with_input(cmd, input.as_bytes(), RESOLVE_TIMEOUT)
            .ok_or_else(|| {
                unavailable(format!(
                    "{} did not finish within {} s",
                    self.version,
                    RESOLVE_TIMEOUT.as_secs()
                ))
            })?;
        if out.status.success() {
            return Ok((
                self.version.clone(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            ));
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let message = summary(&stderr);
        if stderr.contains("No solution found") {
            Err(Failure::NoSolution(format!(
                "its dependencies ({}) have no solution: {message}",
                spec.dependencies.join(", ")
            )))
        } else if stderr.contains("UnknownIssuer") {
            Err(unavailable(format!(
                "{} failed: {message}: {}",
                self.version,
                aibox_provenance::fetch::UNTRUSTED_CA_HINT
            )))
        } else {
            Err(unavailable(format!("{} failed: {message}", self.version)))
        }
    }
}

/// The resolver's message in one line: its explanation, without its headline, labels
/// and tree drawing.
fn summary(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(|l| {
            let l = l
                .trim()
                .trim_start_matches(['×', '╰', '─', '▶', '|', ' '])
                .trim();
            let l = l.strip_prefix("error:").unwrap_or(l).trim();
            l.strip_prefix("cause:").unwrap_or(l).trim()
        })
        .filter(|l| !l.is_empty() && !l.starts_with("No solution found"))
        .collect();
    let joined = lines.join(" ");
    if joined.chars().count() > 400 {
        let cut: String = joined.chars().take(400).collect();
        format!("{cut}…")
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::unnecessary_wraps)] // shaped like `ServerDeps`' second half
    fn deps(list: &[&str]) -> Result<Option<ScriptDeps>, String> {
        Ok(Some(ScriptDeps {
            requires_python: Some(">=3.10".to_owned()),
            dependencies: list.iter().map(|s| (*s).to_owned()).collect(),
        }))
    }

    #[test]
    fn servers_share_environments_and_reuse_the_lock_without_a_resolver() {
        let text = "mcp==1.28.1 \\\n    --hash=sha256:1111111111111111111111111111111111111111111111111111111111111111\n";
        let spec = EnvSpec::new(
            &deps(&["mcp[cli]>=1.0"]).unwrap().unwrap(),
            Some("2026-07-23T15:43:27Z"),
        );
        let id = spec.id();
        let resolution = pydeps::parse_requirements(text).unwrap();
        let mut previous = McpLock::default();
        previous.hashes.clone_from(&resolution.hashes);
        previous.environments.insert(
            id.clone(),
            EnvLock {
                requires_python: spec.requires_python.clone(),
                dependencies: spec.dependencies.clone(),
                exclude_newer: spec.exclude_newer.clone(),
                resolver: "uv 0.13.9".to_owned(),
                servers: vec!["processkit-old".to_owned()],
                requirements: resolution.requirements,
                unresolvable: None,
            },
        );
        let servers = vec![
            ("processkit-a".to_owned(), deps(&["mcp[cli]>=1.0"])),
            ("processkit-b".to_owned(), deps(&[" mcp[cli]>=1.0 "])),
            ("processkit-c".to_owned(), Ok(None)),
            ("processkit-d".to_owned(), Err("bad block".to_owned())),
            ("processkit-e".to_owned(), deps(&["pyyaml>=6.0"])),
        ];
        let envs = lock(
            servers,
            Some("2026-07-23T15:43:27Z"),
            how(Some(&previous), &Resolver::Off),
        );
        assert_eq!(envs.server_env["processkit-a"], id);
        assert_eq!(envs.server_env["processkit-b"], id);
        assert!(!envs.server_env.contains_key("processkit-c"));
        assert_eq!(
            envs.lock.environments[&id].servers,
            ["processkit-a", "processkit-b"]
        );
        assert!(envs.broken["processkit-d"].contains("bad block"));
        assert!(envs.unlocked["processkit-e"].contains("turned off"));
        // Another release date is another environment: not reused.
        let later = lock(
            vec![("processkit-a".to_owned(), deps(&["mcp[cli]>=1.0"]))],
            Some("2026-09-01T00:00:00Z"),
            how(Some(&previous), &Resolver::Off),
        );
        assert!(later.server_env.is_empty());
        assert!(later.unlocked.contains_key("processkit-a"));
        let warnings = envs.warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("`processkit-d` is not registered"))
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("1 MCP server(s) have unlocked dependencies (processkit-e)"))
        );
        // A server registered nowhere for another reason (its script deleted by hand) is
        // not named again here (QA26).
        assert!(
            envs.warnings_except(&["processkit-d", "processkit-e"])
                .is_empty()
        );
    }

    /// Resolving with `resolver` only: no cache, no notice, not offline.
    fn how<'a>(previous: Option<&'a McpLock>, resolver: &'a Resolver) -> Resolving<'a> {
        Resolving {
            previous,
            resolver,
            offline: false,
            cache: None,
            notice: None,
            extra_ca: None,
        }
    }

    #[test]
    fn a_missing_or_foreign_resolver_is_a_reason_not_a_failure() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let not_uv = dir.path().join("uv");
        fs_err::write(&not_uv, "#!/bin/sh\necho 'something 1.0'\n").unwrap();
        fs_err::set_permissions(&not_uv, std::fs::Permissions::from_mode(0o755)).unwrap();
        let envs = lock(
            vec![("processkit-a".to_owned(), deps(&["mcp[cli]>=1.0"]))],
            None,
            how(None, &Resolver::Path(not_uv)),
        );
        assert!(
            envs.unlocked["processkit-a"].contains("is not uv"),
            "{envs:?}"
        );
        let missing = lock(
            vec![("processkit-a".to_owned(), deps(&["mcp[cli]>=1.0"]))],
            None,
            how(None, &Resolver::Path(dir.path().join("nope"))),
        );
        assert!(
            missing.unlocked["processkit-a"].contains("did not run"),
            "{missing:?}"
        );
    }
}
