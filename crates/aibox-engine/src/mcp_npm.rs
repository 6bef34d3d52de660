//! Locking what team MCP servers started with `npx` run: the resolve-time half of
//! [`aibox_provenance::npmdeps`], beside [`crate::mcp_envs`] for Python.
//!
//! Every enabled team stdio server (`aibox.toml [[ai.mcp.servers]]`) whose command is
//! `npx` with one exactly pinned package gets a locked npm tree. Servers running the same
//! package share one. A tree comes, in this order, from
//! - the previous `aibox.lock`, when package and version are unchanged (never resolved
//!   again);
//! - the resolution cache (`mcp-npm/<id>.json` in the download cache), so another project on
//!   the same package reuses it without npm;
//! - `npm install --package-lock-only --ignore-scripts` in a temporary folder whose
//!   `package.json` depends on exactly that version.
//!
//! A package or version npm says does not exist (`E404`, `ETARGET`) is recorded and its
//! servers are not registered: they could not start. Without npm or the registry the
//! servers are registered as configured and reported as unlocked, so `apply` works
//! offline and says what it could not pin. A range or `latest` is not locked (the
//! registration already asks to pin it); an `npx` form aibox does not read is unlocked,
//! with the reason.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use aibox_config::McpServer;
use aibox_provenance::npmdeps::{self, NpmLock, NpmSpec, Npx, NpxRun};

use crate::mcp_resolver::{Failure, Resolver, locate};

/// Environment variable naming the `npm` binary `apply` resolves with; `none` turns
/// resolving off (servers not yet in the lock stay unlocked).
pub const NPM_ENV: &str = "AIBOX_NPM";

/// Longest a resolution may take (npm fetches only the packuments, but a cold cache
/// behind a slow proxy needs tens of seconds for a large tree).
const RESOLVE_TIMEOUT: Duration = Duration::from_mins(5);

/// What resolve decided for the team servers started with `npx`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NpmEnvs {
    /// The trees in use, by id: the lock's `[mcp.npm]`.
    pub lock: BTreeMap<String, NpmLock>,
    /// Locked servers: name → the installed bin and its arguments.
    pub commands: BTreeMap<String, (String, Vec<String>)>,
    /// Servers whose package or version does not exist: not registered. Name → why.
    pub broken: BTreeMap<String, String>,
    /// Servers registered as configured, their tree not pinned. Name → why.
    pub unlocked: BTreeMap<String, String>,
    /// Servers with no exact version (warned by the registration). Name → the package.
    pub unpinned: BTreeMap<String, String>,
}

impl NpmEnvs {
    /// The warnings `apply` shows (one per cause, naming the servers).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (name, why) in &self.broken {
            let why = why.trim_end_matches('.');
            out.push(format!(
                "MCP server `{name}` is not registered: {why}. Fix its package or version in \
                 aibox.toml [[ai.mcp.servers]], then run `aibox apply` again"
            ));
        }
        let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, why) in &self.unlocked {
            by_reason.entry(why).or_default().push(name);
        }
        for (why, names) in by_reason {
            out.push(format!(
                "{} npx MCP server(s) are not locked ({}): {why}; npx fetches their \
                 dependency tree unverified at first start",
                names.len(),
                names.join(", ")
            ));
        }
        out
    }
}

/// The enabled team stdio servers started with `npx`, by tree id; the ones aibox does
/// not lock go into `out` with the reason.
fn group(servers: &[McpServer], out: &mut NpmEnvs) -> Groups {
    let mut groups = Groups::new();
    for server in servers.iter().filter(|s| s.enabled && s.url.is_none()) {
        let Some(command) = &server.command else {
            continue;
        };
        let name = server.name.clone();
        match npmdeps::parse_npx(command, &server.args) {
            Npx::NotNpx => {}
            Npx::Unpinned(package) => {
                out.unpinned.insert(name, package);
            }
            Npx::NotLockable(why) => {
                out.unlocked.insert(name, format!("not lockable: {why}"));
            }
            Npx::Run(run) => {
                groups
                    .entry(run.spec.id())
                    .or_insert_with(|| (run.spec.clone(), Vec::new()))
                    .1
                    .push((name, run));
            }
        }
    }
    groups
}

/// Locks the enabled team stdio servers of `servers` (see the module docs); `offline`
/// never runs npm.
pub(crate) fn lock(
    servers: &[McpServer],
    previous: Option<&BTreeMap<String, NpmLock>>,
    resolver: &Resolver,
    offline: bool,
    cache: Option<&aibox_provenance::Cache>,
    (notice, extra_ca): (Option<&crate::mcp_resolver::Notice>, Option<&str>),
) -> NpmEnvs {
    let mut out = NpmEnvs::default();
    let groups = group(servers, &mut out);
    let mut npm: Option<Result<Npm, String>> = None;
    for (id, (spec, mut runs)) in groups {
        runs.sort_by(|a, b| a.0.cmp(&b.0));
        let found = previous
            .and_then(|l| l.get(&id))
            .filter(|l| l.spec() == spec)
            .and_then(reuse)
            .or_else(|| {
                cache
                    .and_then(|c| c.npm_resolution(&id))
                    .and_then(|t| read_cached(&t, &spec))
                    .map(Ok)
            });
        let mut resolver_name = String::new();
        let outcome = match found {
            Some(found) => found,
            None if offline => Err(Failure::Unavailable(
                "not locked yet, and this command never resolves; `aibox apply` does".to_owned(),
            )),
            None => match npm.get_or_insert_with(|| Npm::find(resolver)) {
                Err(why) => Err(Failure::Unavailable(why.clone())),
                Ok(npm) => {
                    resolver_name.clone_from(&npm.version);
                    if let Some(notice) = notice {
                        notice(&format!(
                            "locking MCP server dependencies: {}@{} with {} ...",
                            spec.package, spec.version, npm.version
                        ));
                    }
                    npm.resolve(&spec, extra_ca).inspect(|entry| {
                        if let Some(cache) = cache {
                            write_cached(cache, &id, entry);
                        }
                    })
                }
            },
        };
        match outcome {
            Ok(mut entry) => {
                entry.servers.clear();
                for (name, run) in runs {
                    match entry.choose_bin(run.command.as_deref()) {
                        Ok(bin) => {
                            out.commands
                                .insert(name.clone(), (npmdeps::bin_path(&id, &bin), run.args));
                            entry.servers.push(name);
                        }
                        Err(why) => {
                            out.unlocked.insert(name, format!("not lockable: {why}"));
                        }
                    }
                }
                if !entry.servers.is_empty() {
                    out.lock.insert(id, entry);
                }
            }
            Err(Failure::NoSolution(why)) => {
                let names: Vec<String> = runs.into_iter().map(|(n, _)| n).collect();
                for name in &names {
                    out.broken.insert(name.clone(), why.clone());
                }
                // Recorded, so an unchanged configuration does not ask again.
                let resolver = previous
                    .and_then(|l| l.get(&id))
                    .map_or(resolver_name, |e| e.resolver.clone());
                out.lock.insert(
                    id,
                    NpmLock {
                        package: spec.package.clone(),
                        version: spec.version.clone(),
                        resolver,
                        servers: names,
                        packages: BTreeMap::new(),
                        unresolvable: Some(why),
                    },
                );
            }
            Err(Failure::Unavailable(why)) => {
                for (name, _) in runs {
                    out.unlocked.insert(name, why.clone());
                }
            }
        }
    }
    out
}

/// Servers by tree id: the spec and each server's command line.
type Groups = BTreeMap<String, (NpmSpec, Vec<(String, NpxRun)>)>;

/// The previous lock's entry, when it is usable as is (a damaged one is resolved again).
fn reuse(entry: &NpmLock) -> Option<Result<NpmLock, Failure>> {
    if let Some(why) = &entry.unresolvable {
        return Some(Err(Failure::NoSolution(why.clone())));
    }
    entry.check().ok()?;
    Some(Ok(entry.clone()))
}

/// A cached resolution of `spec`; a damaged or foreign entry is simply resolved again.
fn read_cached(text: &str, spec: &NpmSpec) -> Option<NpmLock> {
    let entry: NpmLock = serde_json::from_str(text).ok()?;
    (entry.spec() == *spec && entry.unresolvable.is_none() && entry.check().is_ok())
        .then_some(entry)
}

/// Stores a resolution (without its servers) for the next project.
fn write_cached(cache: &aibox_provenance::Cache, id: &str, entry: &NpmLock) {
    let entry = NpmLock {
        servers: Vec::new(),
        ..entry.clone()
    };
    if let Ok(text) = serde_json::to_string_pretty(&entry) {
        cache.store_npm_resolution(id, &text);
    }
}

/// An `npm` binary and its version (`npm 11.6.2`).
struct Npm {
    path: PathBuf,
    version: String,
}

impl Npm {
    fn find(resolver: &Resolver) -> Result<Self, String> {
        let (path, text) = locate(resolver, "npm", NPM_ENV, "install Node.js and npm")?;
        let looks_like_version = text.split('.').count() == 3
            && text
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !looks_like_version {
            return Err(format!(
                "`{}` is not npm (`--version` says `{text}`)",
                path.display()
            ));
        }
        Ok(Self {
            path,
            version: format!("npm {text}"),
        })
    }

    /// Resolves `spec` into a lock entry (no servers yet).
    /// With `extra_ca`, npm trusts every root aibox trusts, the extra CA among them
    /// (`--cafile`, which outranks a `cafile` of the user's npmrc as Node's
    /// `NODE_EXTRA_CA_CERTS` does not): the registry is reached through the same proxy as
    /// aibox's downloads.
    fn resolve(&self, spec: &NpmSpec, extra_ca: Option<&str>) -> Result<NpmLock, Failure> {
        let unavailable = |why: String| Failure::Unavailable(why);
        let dir = tempfile::tempdir()
            .map_err(|e| unavailable(format!("cannot create a temporary folder: {e}")))?;
        let stub = NpmLock {
            package: spec.package.clone(),
            version: spec.version.clone(),
            ..NpmLock::default()
        };
        let manifest = dir.path().join("package.json");
        fs_err::write(&manifest, npmdeps::render_package_json(&spec.id(), &stub))
            .map_err(|e| unavailable(format!("cannot write {}: {e}", manifest.display())))?;
        let mut cmd = Command::new(&self.path);
        cmd.args(["install", "--package-lock-only", "--ignore-scripts"])
            .args(["--no-audit", "--no-fund", "--lockfile-version=3"])
            // Packages by name, version and integrity only, whatever the user's npm is
            // configured with: the same lock everywhere, installed from the image's
            // registry (or a mirror) and checked all the same.
            .arg("--omit-lockfile-registry-resolved=true")
            .args(["--loglevel=error", "--color=false"])
            .env("npm_config_update_notifier", "false")
            .current_dir(dir.path());
        if let Some(pem) = extra_ca {
            let file = dir.path().join("ca-bundle.pem");
            fs_err::write(
                &file,
                aibox_provenance::fetch::trusted_bundle_pem(Some(pem)),
            )
            .map_err(|e| unavailable(format!("cannot write {}: {e}", file.display())))?;
            cmd.arg(format!("--cafile={}", file.display()));
        }
        let out = crate::process::run_with_deadline(cmd, RESOLVE_TIMEOUT).ok_or_else(|| {
            unavailable(format!(
                "{} did not finish within {} s",
                self.version,
                RESOLVE_TIMEOUT.as_secs()
            ))
        })?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let message = summary(&stderr);
            let code = stderr
                .lines()
                .find_map(|l| l.trim().strip_prefix("npm error code "))
                .or_else(|| {
                    stderr
                        .lines()
                        .find_map(|l| l.trim().strip_prefix("npm ERR! code "))
                })
                .unwrap_or("")
                .trim();
            return Err(if matches!(code, "E404" | "ETARGET") {
                Failure::NoSolution(format!("npm cannot find {spec} ({code}): {message}"))
            } else {
                unavailable(format!("{} failed: {message}", self.version))
            });
        }
        let lock_file = dir.path().join("package-lock.json");
        let text = fs_err::read_to_string(&lock_file)
            .map_err(|e| unavailable(format!("{} wrote no lock: {e}", self.version)))?;
        let packages = npmdeps::parse_package_lock(&text, spec).map_err(|e| {
            unavailable(format!(
                "not lockable: {} gave a lock aibox cannot use: {e}",
                self.version
            ))
        })?;
        Ok(NpmLock {
            resolver: self.version.clone(),
            packages,
            ..stub
        })
    }
}

/// npm's error in one line: its `npm error` lines without the code, the log's location
/// and repeated text.
fn summary(stderr: &str) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in stderr.lines() {
        let l = line.trim();
        let Some(rest) = l
            .strip_prefix("npm error")
            .or_else(|| l.strip_prefix("npm ERR!"))
        else {
            continue;
        };
        let rest = rest.trim();
        let rest = ["404", "notarget"]
            .iter()
            .find_map(|p| rest.strip_prefix(p))
            .unwrap_or(rest)
            .trim();
        if rest.is_empty()
            || rest.starts_with("code ")
            || rest.starts_with("A complete log")
            || rest.starts_with("Note that you can also")
            || rest.starts_with("tarball, folder")
            || rest.starts_with("In most cases you")
            || lines.contains(&rest)
        {
            continue;
        }
        lines.push(rest);
    }
    let joined = lines.join(" ");
    if joined.chars().count() > 400 {
        let cut: String = joined.chars().take(400).collect();
        format!("{cut}…")
    } else if joined.is_empty() {
        stderr.trim().chars().take(400).collect()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, command: &str, args: &[&str]) -> McpServer {
        McpServer {
            name: name.to_owned(),
            command: Some(command.to_owned()),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            allowed_tools: Vec::new(),
            startup_timeout_sec: None,
            enabled: true,
        }
    }

    #[test]
    fn servers_share_trees_and_reuse_the_lock_without_npm() {
        let spec = NpmSpec {
            package: "srv".to_owned(),
            version: "1.0.0".to_owned(),
        };
        let id = spec.id();
        let entry = NpmLock {
            package: "srv".to_owned(),
            version: "1.0.0".to_owned(),
            resolver: "npm 11.0.0".to_owned(),
            servers: vec!["old".to_owned()],
            packages: BTreeMap::from([(
                "node_modules/srv".to_owned(),
                r#"{"version":"1.0.0","resolved":"https://r.example/srv-1.0.0.tgz","integrity":"sha512-AA","bin":{"srv":"cli.js"}}"#
                    .to_owned(),
            )]),
            unresolvable: None,
        };
        let previous = BTreeMap::from([(id.clone(), entry)]);
        let mut disabled = server("off", "npx", &["srv@9.9.9"]);
        disabled.enabled = false;
        let servers = [
            server("a", "npx", &["-y", "srv@1.0.0", "/w"]),
            server("b", "npx", &["-p", "srv@1.0.0", "srv"]),
            server("c", "npx", &["-p", "srv@1.0.0", "nope"]),
            server("d", "npx", &["srv@latest"]),
            server("e", "npx", &["--registry=x", "srv@1.0.0"]),
            server("f", "node", &["x.js"]),
            server("g", "npx", &["other@2.0.0"]),
            disabled,
        ];
        let envs = lock(
            &servers,
            Some(&previous),
            &Resolver::Off,
            false,
            None,
            (None, None),
        );
        let bin = format!("/opt/aibox/mcp-npm/{id}/node_modules/.bin/srv");
        assert_eq!(envs.commands["a"], (bin.clone(), vec!["/w".to_owned()]));
        assert_eq!(envs.commands["b"], (bin, vec![]));
        assert_eq!(envs.lock[&id].servers, ["a", "b"]);
        assert!(
            envs.unlocked["c"].contains("no executable `nope`"),
            "{envs:?}"
        );
        assert_eq!(envs.unpinned["d"], "srv@latest");
        assert!(envs.unlocked["e"].contains("`--registry=x`"), "{envs:?}");
        assert!(!envs.unlocked.contains_key("f") && !envs.commands.contains_key("f"));
        assert!(envs.unlocked["g"].contains("turned off"), "{envs:?}");
        assert!(!envs.unlocked.contains_key("off"));
        let warnings = envs.warnings().join("\n");
        assert!(
            warnings.contains("1 npx MCP server(s) are not locked (g): resolving is turned off"),
            "{warnings}"
        );
        // Offline, nothing new is resolved and the lock still serves.
        let offline = lock(
            &servers,
            Some(&previous),
            &Resolver::Auto,
            true,
            None,
            (None, None),
        );
        assert!(offline.commands.contains_key("a"));
        assert!(offline.unlocked["g"].contains("never resolves"));
    }

    #[test]
    fn a_foreign_npm_is_a_reason_not_a_failure() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("npm");
        fs_err::write(&fake, "#!/bin/sh\necho 'something else'\n").unwrap();
        fs_err::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let servers = [server("a", "npx", &["srv@1.0.0"])];
        let envs = lock(
            &servers,
            None,
            &Resolver::Path(fake),
            false,
            None,
            (None, None),
        );
        assert!(envs.unlocked["a"].contains("is not npm"), "{envs:?}");
    }

    #[test]
    fn npm_errors_read_as_one_line() {
        let etarget = "npm error code ETARGET\nnpm error notarget No matching version found for x@9.9.9.\nnpm error notarget In most cases you or one of your dependencies are requesting\nnpm error A complete log of this run can be found in: /root/.npm/_logs/x.log\n";
        assert_eq!(summary(etarget), "No matching version found for x@9.9.9.");
        let e404 = "npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/@x%2fy - Not found\nnpm error 404\nnpm error 404  The requested resource '@x/y@1.0.0' could not be found or you do not have permission to access it.\nnpm error 404 Note that you can also install from a\nnpm error 404 tarball, folder, http url, or git url.\n";
        assert_eq!(
            summary(e404),
            "Not Found - GET https://registry.npmjs.org/@x%2fy - Not found The requested resource '@x/y@1.0.0' could not be found or you do not have permission to access it."
        );
    }
}
