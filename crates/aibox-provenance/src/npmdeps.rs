//! Locked npm package trees for team MCP servers started with `npx`.
//!
//! `npx -y @scope/server@1.2.3` pins the server's own version but nothing below it: at
//! every cold start npx downloads whatever the server's dependency ranges resolve to that
//! day, and nothing checks it against anything the team reviewed. So aibox resolves each
//! exactly pinned package once with the real npm (`--package-lock-only`), records every
//! package of the tree with its integrity in `aibox.lock` (`[mcp.npm.<id>]`), and the image
//! installs exactly that tree with `npm ci`, which checks every tarball's integrity. The
//! server is then registered as the installed bin, so it starts with no network.
//!
//! This module is pure: reading a server's `npx` command line, naming a tree, reading
//! npm's `package-lock.json` into a lock entry, and rendering the `package.json` and
//! `package-lock.json` the image build installs from. Running npm is the engine's job.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::digest::Sha256;

/// Where the generated Dockerfile installs the tree `id`.
pub fn install_dir(id: &str) -> String {
    format!("{}/{id}", aibox_config::container::MCP_NPM_DIR)
}

/// The installed executable `bin` of the tree `id`: what a locked server is started with.
pub fn bin_path(id: &str, bin: &str) -> String {
    format!("{}/node_modules/.bin/{bin}", install_dir(id))
}

/// What a server's command line asks npx to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Npx {
    /// The command is not `npx`: nothing to lock.
    NotNpx,
    /// An exactly pinned package aibox can lock.
    Run(NpxRun),
    /// No exact version (`pkg`, `pkg@latest`, `pkg@^1`): registered as configured (the
    /// registration already asks to pin it).
    Unpinned(String),
    /// An `npx` form aibox does not lock, and why (one sentence).
    NotLockable(String),
}

/// A lockable `npx` command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpxRun {
    /// The package and its exact version.
    pub spec: NpmSpec,
    /// The executable named after `--package` (`npx -p pkg@1.2.3 <bin> …`); `None` runs
    /// the package's own bin, as npx picks it.
    pub command: Option<String>,
    /// The arguments after the package (or after the executable).
    pub args: Vec<String>,
}

/// Reads `command args` as npx would: options `-y`/`--yes`, at most one
/// `-p`/`--package` (`--package=…`), an optional `--`, then the package (or, with
/// `--package`, the executable) and the server's own arguments.
pub fn parse_npx(command: &str, args: &[String]) -> Npx {
    let program = command.rsplit('/').next().unwrap_or(command);
    if program != "npx" {
        return Npx::NotNpx;
    }
    let mut package: Option<String> = None;
    let mut rest = args.iter();
    let first = loop {
        let Some(arg) = rest.next() else {
            return Npx::NotLockable("its `npx` command names no package".to_owned());
        };
        let value = match arg.as_str() {
            "-y" | "--yes" => continue,
            "--" => match rest.next() {
                Some(next) => break next,
                None => {
                    return Npx::NotLockable("its `npx` command names no package".to_owned());
                }
            },
            "-p" | "--package" => match rest.next() {
                Some(v) => v.clone(),
                None => {
                    return Npx::NotLockable(format!("`{arg}` is not followed by a package"));
                }
            },
            a if a.starts_with("--package=") => a["--package=".len()..].to_owned(),
            a if a.starts_with('-') => {
                return Npx::NotLockable(format!(
                    "aibox locks `npx [-y] <package>@<version>` and `npx -p \
                     <package>@<version> <bin>`, not the npx option `{a}`"
                ));
            }
            _ => break arg,
        };
        if package.replace(value).is_some() {
            return Npx::NotLockable(
                "it names several `--package`s; aibox locks one package per server".to_owned(),
            );
        }
    };
    let (spec_text, command) = match package {
        Some(p) => (p, Some(first.clone())),
        None => (first.clone(), None),
    };
    if let Some(bin) = &command
        && !valid_bin(bin)
    {
        return Npx::NotLockable(format!("`{bin}` is not the name of a package's bin"));
    }
    let (name, version) = split_spec(&spec_text);
    if !valid_name(name) {
        return Npx::NotLockable(format!(
            "`{spec_text}` is not a registry package (`name@1.2.3` or `@scope/name@1.2.3`)"
        ));
    }
    let version = match version {
        None => return Npx::Unpinned(spec_text),
        Some(v) if v.is_empty() || v == "latest" || v.starts_with(['^', '~', '>', '<', '*']) => {
            return Npx::Unpinned(spec_text);
        }
        Some(v) if !exact_version(v) => {
            return Npx::NotLockable(format!(
                "`{spec_text}` does not name one exact version (`{name}@1.2.3`)"
            ));
        }
        Some(v) => v,
    };
    Npx::Run(NpxRun {
        spec: NpmSpec {
            package: name.to_owned(),
            version: version.to_owned(),
        },
        command,
        args: rest.cloned().collect(),
    })
}

/// `name` and the text after its version `@` (`@scope/name@1.2.3` → `@scope/name`, `1.2.3`).
fn split_spec(spec: &str) -> (&str, Option<&str>) {
    let scoped = usize::from(spec.starts_with('@'));
    match spec[scoped..].find('@') {
        Some(at) => (&spec[..scoped + at], Some(&spec[scoped + at + 1..])),
        None => (spec, None),
    }
}

/// A registry package name as npm accepts new ones (lowercase, URL-safe, optional scope).
fn valid_name(name: &str) -> bool {
    let part = |s: &str| {
        !s.is_empty()
            && s.len() <= 214
            && !s.starts_with(['.', '_'])
            && s.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'-' | b'.' | b'_' | b'~')
            })
    };
    match name.strip_prefix('@') {
        Some(scoped) => scoped
            .split_once('/')
            .is_some_and(|(scope, n)| part(scope) && part(n)),
        None => part(name),
    }
}

/// An executable name (`.bin/<name>`): no path, no shell characters.
fn valid_bin(bin: &str) -> bool {
    !bin.is_empty()
        && !bin.starts_with(['.', '-'])
        && bin
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'@'))
}

/// `MAJOR.MINOR.PATCH` with an optional `-prerelease` and `+build`: one exact version.
fn exact_version(v: &str) -> bool {
    let (core, build) = v.split_once('+').unwrap_or((v, ""));
    let (core, pre) = core.split_once('-').unwrap_or((core, ""));
    let nums: Vec<&str> = core.split('.').collect();
    let tag_ok = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
    };
    nums.len() == 3
        && nums
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        && tag_ok(pre)
        && tag_ok(build)
        && !v.ends_with(['-', '+'])
}

/// What a tree is resolved from: one package at one exact version. Servers running the
/// same package share one tree; the spec's digest names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NpmSpec {
    /// The package name (`@scope/name`).
    pub package: String,
    /// Its exact version.
    pub version: String,
}

impl NpmSpec {
    /// The tree's name: 12 hex digits of the SHA-256 of `npm <package>@<version>`.
    pub fn id(&self) -> String {
        let text = format!("npm {}@{}\n", self.package, self.version);
        Sha256::of(text.as_bytes()).to_hex()[..12].to_owned()
    }
}

impl std::fmt::Display for NpmSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.package, self.version)
    }
}

/// One locked npm tree: `[mcp.npm.<id>]` of `aibox.lock`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NpmLock {
    /// The package the servers run.
    pub package: String,
    /// Its exact version.
    pub version: String,
    /// The resolver that produced it (`npm 11.6.2`).
    pub resolver: String,
    /// The servers started from it (sorted).
    pub servers: Vec<String>,
    /// Every package of the tree, by its install path (`node_modules/a/node_modules/b`):
    /// npm's `package-lock.json` entry as one line of JSON (`version`, `resolved`,
    /// `integrity` first, then the rest with sorted keys).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packages: BTreeMap<String, String>,
    /// Set when npm says the package or version does not exist: its servers are not
    /// registered, and the same spec is not resolved again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresolvable: Option<String>,
}

impl NpmLock {
    /// The spec it was resolved from.
    pub fn spec(&self) -> NpmSpec {
        NpmSpec {
            package: self.package.clone(),
            version: self.version.clone(),
        }
    }

    /// The package's own entry (`node_modules/<package>`), parsed.
    fn root_entry(&self) -> Option<Map<String, Value>> {
        let text = self
            .packages
            .get(&format!("node_modules/{}", self.package))?;
        match serde_json::from_str(text).ok()? {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The bins of the package (`bin` of its entry: name → file).
    pub fn bins(&self) -> BTreeMap<String, String> {
        self.root_entry()
            .and_then(|e| e.get("bin").cloned())
            .and_then(|b| match b {
                Value::Object(m) => Some(
                    m.into_iter()
                        .filter_map(|(k, v)| Some((k, v.as_str()?.to_owned())))
                        .collect(),
                ),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The executable a server runs: `command` when named (it must be one of the
    /// package's bins), else the one npx picks (the only bin, or the one named after the
    /// package).
    ///
    /// # Errors
    /// No such bin, or no way to pick one (one sentence).
    pub fn choose_bin(&self, command: Option<&str>) -> Result<String, String> {
        let bins = self.bins();
        let names = || bins.keys().cloned().collect::<Vec<_>>().join(", ");
        if bins.is_empty() {
            return Err(format!("{} has no executable (`bin`)", self.spec()));
        }
        let chosen = match command {
            Some(c) => bins.contains_key(c).then(|| c.to_owned()).ok_or_else(|| {
                format!(
                    "{} has no executable `{c}` (it has {})",
                    self.spec(),
                    names()
                )
            })?,
            None if bins.len() == 1 => bins.keys().next().cloned().unwrap_or_default(),
            None => {
                let own = self.package.rsplit('/').next().unwrap_or(&self.package);
                bins.contains_key(own)
                    .then(|| own.to_owned())
                    .ok_or_else(|| {
                        format!(
                            "{} has several executables ({}) and none named `{own}`; name one \
                         with `npx -p {} <bin>`",
                            self.spec(),
                            names(),
                            self.spec()
                        )
                    })?
            }
        };
        if valid_bin(&chosen) {
            Ok(chosen)
        } else {
            Err(format!(
                "{}'s executable `{chosen}` has an unsafe name",
                self.spec()
            ))
        }
    }

    /// Checks what `npm ci` relies on: every entry is a JSON object from the registry (or
    /// an https tarball) with an SRI `integrity` (a bundled one is covered by its parent's
    /// tarball), and the package itself is at the locked version.
    ///
    /// # Errors
    /// The first entry that fails, in one sentence.
    pub fn check(&self) -> Result<(), String> {
        let root = format!("node_modules/{}", self.package);
        if self.packages.is_empty() {
            return Err("the lock holds no package".to_owned());
        }
        for (path, text) in &self.packages {
            if !path.starts_with("node_modules/") || path.contains("..") {
                return Err(format!("`{path}` is not an install path"));
            }
            let Ok(Value::Object(entry)) = serde_json::from_str::<Value>(text) else {
                return Err(format!("the entry of `{path}` is not a JSON object"));
            };
            let flag = |k: &str| entry.get(k).and_then(Value::as_bool) == Some(true);
            if flag("link") {
                return Err(format!("`{path}` is a link to a local folder"));
            }
            if flag("inBundle") {
                continue;
            }
            let integrity = entry.get("integrity").and_then(Value::as_str).unwrap_or("");
            if !["sha512-", "sha384-", "sha256-", "sha1-"]
                .iter()
                .any(|p| integrity.starts_with(p) && integrity.len() > p.len())
            {
                return Err(format!("`{path}` has no integrity"));
            }
            // Registry packages carry no `resolved` (the engine resolves with
            // `omit-lockfile-registry-resolved`); anything else must be an https tarball.
            if let Some(resolved) = entry.get("resolved")
                && !resolved.as_str().is_some_and(|r| r.starts_with("https://"))
            {
                return Err(format!("`{path}` does not come from a registry over https"));
            }
            if *path == root && entry.get("version").and_then(Value::as_str) != Some(&self.version)
            {
                return Err(format!("`{path}` is not at version {}", self.version));
            }
        }
        if !self.packages.contains_key(&root) {
            return Err(format!("the lock does not hold `{root}`"));
        }
        Ok(())
    }
}

/// Reads npm's `package-lock.json` (lockfile version 2 or 3) for `spec` into the
/// entries of [`NpmLock::packages`].
///
/// # Errors
/// Not JSON, not lockfile version 2 or 3, or an entry [`NpmLock::check`] refuses.
pub fn parse_package_lock(text: &str, spec: &NpmSpec) -> Result<BTreeMap<String, String>, String> {
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| format!("its package-lock.json is not JSON: {e}"))?;
    let version = doc.get("lockfileVersion").and_then(Value::as_u64);
    if !matches!(version, Some(2 | 3)) {
        return Err(format!(
            "its package-lock.json has lockfileVersion {}, not 3",
            version.map_or_else(|| "none".to_owned(), |v| v.to_string())
        ));
    }
    let Some(Value::Object(packages)) = doc.get("packages") else {
        return Err("its package-lock.json has no `packages`".to_owned());
    };
    let mut out = BTreeMap::new();
    for (path, entry) in packages {
        if path.is_empty() {
            continue;
        }
        out.insert(path.clone(), canonical_entry(entry));
    }
    let lock = NpmLock {
        package: spec.package.clone(),
        version: spec.version.clone(),
        packages: out,
        ..NpmLock::default()
    };
    lock.check()?;
    Ok(lock.packages)
}

/// One entry as one line: `version`, `resolved` and `integrity` first (what a reviewer
/// reads), the rest with every object's keys sorted, so the same tree is the same bytes.
fn canonical_entry(entry: &Value) -> String {
    let Value::Object(map) = entry else {
        return entry.to_string();
    };
    let mut out = Map::new();
    for key in ["version", "resolved", "integrity"] {
        if let Some(v) = map.get(key) {
            out.insert(key.to_owned(), sorted(v));
        }
    }
    let mut rest: Vec<(&String, &Value)> = map
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "version" | "resolved" | "integrity"))
        .collect();
    rest.sort_by(|a, b| a.0.cmp(b.0));
    for (k, v) in rest {
        out.insert(k.clone(), sorted(v));
    }
    Value::Object(out).to_string()
}

fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sorted(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The `"//"` key both files start with (npm ignores it; JSON has no comments): the
/// generated-file header, which says where they come from.
fn header(id: &str) -> Value {
    Value::String(format!(
        "generated by aibox; rendered from aibox.lock [mcp.npm.{id}]: edit aibox.toml and \
         run `aibox apply` (changes here are overwritten)"
    ))
}

/// The project name of the generated `package.json` of tree `id`.
fn project_name(id: &str) -> String {
    format!("aibox-mcp-npm-{id}")
}

/// The `package.json` the image build installs the tree `id` from: private, depending
/// on exactly the locked version.
pub fn render_package_json(id: &str, lock: &NpmLock) -> String {
    let mut deps = Map::new();
    deps.insert(lock.package.clone(), Value::String(lock.version.clone()));
    let mut doc = Map::new();
    doc.insert("//".to_owned(), header(id));
    doc.insert("name".to_owned(), Value::String(project_name(id)));
    doc.insert("private".to_owned(), Value::Bool(true));
    doc.insert("dependencies".to_owned(), Value::Object(deps));
    pretty(&Value::Object(doc))
}

/// The `package-lock.json` (lockfile version 3) `npm ci` installs the tree `id` from,
/// rendered from the lock entry (checked with [`NpmLock::check`] when it was read): the
/// same entry gives the same bytes. An entry that is not JSON is left out (`npm ci` then
/// refuses the lock, naming the package).
pub fn render_package_lock(id: &str, lock: &NpmLock) -> String {
    let mut deps = Map::new();
    deps.insert(lock.package.clone(), Value::String(lock.version.clone()));
    let mut root = Map::new();
    root.insert("name".to_owned(), Value::String(project_name(id)));
    root.insert("dependencies".to_owned(), Value::Object(deps));
    let mut packages = Map::new();
    packages.insert(String::new(), Value::Object(root));
    for (path, text) in &lock.packages {
        if let Ok(entry) = serde_json::from_str::<Value>(text) {
            packages.insert(path.clone(), entry);
        }
    }
    let mut doc = Map::new();
    doc.insert("//".to_owned(), header(id));
    doc.insert("name".to_owned(), Value::String(project_name(id)));
    doc.insert("lockfileVersion".to_owned(), Value::from(3));
    doc.insert("requires".to_owned(), Value::Bool(true));
    doc.insert("packages".to_owned(), Value::Object(packages));
    pretty(&Value::Object(doc))
}

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn run(package: &str, version: &str, command: Option<&str>, rest: &[&str]) -> Npx {
        Npx::Run(NpxRun {
            spec: NpmSpec {
                package: package.to_owned(),
                version: version.to_owned(),
            },
            command: command.map(str::to_owned),
            args: args(rest),
        })
    }

    #[test]
    fn reads_the_npx_forms_aibox_locks() {
        let memory = "@modelcontextprotocol/server-memory";
        for (cmd, a, want) in [
            (
                "npx",
                &["-y", "@modelcontextprotocol/server-memory@2026.8.31", "/w"][..],
                run(memory, "2026.8.31", None, &["/w"]),
            ),
            (
                "/usr/local/bin/npx",
                &["--yes", "--", "left-pad@1.3.0-rc.1+b2"][..],
                run("left-pad", "1.3.0-rc.1+b2", None, &[]),
            ),
            (
                "npx",
                &[
                    "-y",
                    "-p",
                    "@modelcontextprotocol/server-memory@2026.8.31",
                    "mcp-server-memory",
                    "--x",
                ][..],
                run(memory, "2026.8.31", Some("mcp-server-memory"), &["--x"]),
            ),
            (
                "npx",
                &["--package=tool@1.0.0", "-y", "tool-cli"][..],
                run("tool", "1.0.0", Some("tool-cli"), &[]),
            ),
            ("node", &["x@1.0.0"][..], Npx::NotNpx),
            (
                "npx",
                &["-y", "@scope/pkg"][..],
                Npx::Unpinned("@scope/pkg".to_owned()),
            ),
            (
                "npx",
                &["pkg@latest"][..],
                Npx::Unpinned("pkg@latest".to_owned()),
            ),
            (
                "npx",
                &["pkg@^1.2.0"][..],
                Npx::Unpinned("pkg@^1.2.0".to_owned()),
            ),
        ] {
            assert_eq!(parse_npx(cmd, &args(a)), want, "{cmd} {a:?}");
        }
        for (a, why) in [
            (&["-y"][..], "names no package"),
            (
                &["--registry", "https://x", "pkg@1.0.0"][..],
                "`--registry`",
            ),
            (&["-p", "a@1.0.0", "-p", "b@1.0.0", "a"][..], "several"),
            (&["pkg@1.2"][..], "one exact version"),
            (&["pkg@next"][..], "one exact version"),
            (&["github:owner/repo"][..], "not a registry package"),
            (&["./local"][..], "not a registry package"),
            (&["-p", "pkg@1.0.0", "../bin"][..], "not the name"),
        ] {
            match parse_npx("npx", &args(a)) {
                Npx::NotLockable(w) => assert!(w.contains(why), "{a:?}: {w}"),
                other => panic!("{a:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_id_names_package_and_version() {
        let a = NpmSpec {
            package: "a".to_owned(),
            version: "1.0.0".to_owned(),
        };
        let b = NpmSpec {
            version: "1.0.1".to_owned(),
            ..a.clone()
        };
        assert_eq!(a.id().len(), 12);
        assert_ne!(a.id(), b.id());
    }

    const LOCK: &str = r#"{
  "name": "x", "lockfileVersion": 3, "requires": true,
  "packages": {
    "": {"dependencies": {"srv": "1.0.0"}},
    "node_modules/srv": {"version": "1.0.0", "license": "MIT",
      "integrity": "sha512-AAAA", "resolved": "https://registry.npmjs.org/srv/-/srv-1.0.0.tgz",
      "bin": {"srv": "dist/index.js"}, "dependencies": {"zod": "^3", "dep": "^2"}},
    "node_modules/dep": {"version": "2.1.0", "resolved": "https://registry.npmjs.org/dep/-/dep-2.1.0.tgz", "integrity": "sha512-BBBB"},
    "node_modules/dep/node_modules/inner": {"version": "0.1.0", "inBundle": true}
  }
}"#;

    fn spec() -> NpmSpec {
        NpmSpec {
            package: "srv".to_owned(),
            version: "1.0.0".to_owned(),
        }
    }

    #[test]
    fn package_lock_round_trips_through_the_lock() {
        let packages = parse_package_lock(LOCK, &spec()).unwrap();
        assert_eq!(
            packages["node_modules/srv"],
            r#"{"version":"1.0.0","resolved":"https://registry.npmjs.org/srv/-/srv-1.0.0.tgz","integrity":"sha512-AAAA","bin":{"srv":"dist/index.js"},"dependencies":{"dep":"^2","zod":"^3"},"license":"MIT"}"#
        );
        let lock = NpmLock {
            package: "srv".to_owned(),
            version: "1.0.0".to_owned(),
            resolver: "npm 11.0.0".to_owned(),
            servers: vec!["s".to_owned()],
            packages,
            unresolvable: None,
        };
        assert_eq!(lock.choose_bin(None).unwrap(), "srv");
        assert!(
            lock.choose_bin(Some("other"))
                .unwrap_err()
                .contains("no executable `other`")
        );
        let id = spec().id();
        let rendered = render_package_lock(&id, &lock);
        // npm's own lock, read back from the rendering, is the same entry.
        assert_eq!(
            parse_package_lock(&rendered, &spec()).unwrap(),
            lock.packages
        );
        assert!(rendered.contains("\"lockfileVersion\": 3"));
        let json: Value = serde_json::from_str(&render_package_json(&id, &lock)).unwrap();
        assert_eq!(json["dependencies"]["srv"], "1.0.0");
        assert_eq!(json["private"], true);
    }

    #[test]
    fn a_tree_without_integrity_is_refused() {
        for (from, to, why) in [
            (
                "\"integrity\": \"sha512-BBBB\"",
                "\"x\": 1",
                "`node_modules/dep` has no integrity",
            ),
            (
                "https://registry.npmjs.org/dep",
                "git+ssh://x/dep",
                "over https",
            ),
            (
                "\"lockfileVersion\": 3",
                "\"lockfileVersion\": 1",
                "lockfileVersion 1",
            ),
            (
                "\"version\": \"1.0.0\", \"license\"",
                "\"version\": \"1.0.1\", \"license\"",
                "not at version 1.0.0",
            ),
        ] {
            let text = LOCK.replace(from, to);
            assert_ne!(text, LOCK);
            let err = parse_package_lock(&text, &spec()).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn bins_are_picked_as_npx_does() {
        let entry = |bins: &str| NpmLock {
            package: "@s/tool".to_owned(),
            version: "1.0.0".to_owned(),
            packages: BTreeMap::from([(
                "node_modules/@s/tool".to_owned(),
                format!(r#"{{"version":"1.0.0","bin":{bins}}}"#),
            )]),
            ..NpmLock::default()
        };
        assert_eq!(entry(r#"{"a":"x.js"}"#).choose_bin(None).unwrap(), "a");
        assert_eq!(
            entry(r#"{"a":"x.js","tool":"y.js"}"#)
                .choose_bin(None)
                .unwrap(),
            "tool"
        );
        assert!(
            entry(r#"{"a":"x.js","b":"y.js"}"#)
                .choose_bin(None)
                .unwrap_err()
                .contains("none named `tool`")
        );
        assert_eq!(
            entry(r#"{"a":"x.js","b":"y.js"}"#)
                .choose_bin(Some("b"))
                .unwrap(),
            "b"
        );
    }
}
