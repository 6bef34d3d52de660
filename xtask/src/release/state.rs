//! `release-state`: every input a release depends on, how it is pinned, and what the
//! registries offer today.
//!
//! Inputs are collected from where they are defined (`Cargo.lock`, the release-tool
//! installer, the npm test tools, the base-image reference, the processkit pins, the addon
//! catalog, the apt lists of the setup script). Each is `pinned`, `floating` or an
//! `exception`; a pinned input whose registry offers a newer version is drift. Drift must be
//! updated or deferred, and a deferral is valid only with a processkit `WorkItem` committed in
//! this repository (`context/workitems/`). Security advisories are never deferrable: an
//! ignored advisory in `deny.toml` or a deferral naming one fails the gate.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::cargo;

/// The addon catalog the generated Dockerfiles install from.
pub const CATALOG: &str = "crates/aibox-devcontainer/catalog/tools.toml";
/// Committed deferrals of non-security drift.
pub const DEFERRALS: &str = "release/deferrals.toml";
/// Where processkit keeps `WorkItem` files (its schema's `default_directory`).
pub const WORKITEMS: &str = "context/workitems";
/// The committed default base image (`name`, `tag`, `digest`), the one file that names it
/// (see `xtask/src/image.rs`); reported "not defined" if it is ever missing.
pub const BASE_IMAGE_REF: &str = crate::image::DATA_FILE;
/// The marker that declares a provenance exception on an installer line (a script or an
/// image recipe line); the text after it is the reason.
pub const EXCEPTION_MARKER: &str = "provenance-exception:";

/// How an input is held still.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// An exact version with a verified digest or lock entry.
    Pinned,
    /// Follows its upstream by design (Debian stable updates, a local path).
    Floating,
    /// Installed without verification, with a written reason next to its installer.
    Exception,
}

impl Class {
    fn as_str(self) -> &'static str {
        match self {
            Self::Pinned => "pinned",
            Self::Floating => "floating",
            Self::Exception => "exception",
        }
    }
}

/// What the registry said about an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Newest {
    /// The pinned version is the newest the registry offers.
    Current,
    /// A newer version exists.
    Newer(String),
    /// Not asked, with the reason (no registry, or one this machine cannot reach).
    NotAsked(String),
    /// The registry should have answered and did not.
    Failed(String),
    /// To be asked (all registry questions run in parallel at the end of [`collect`]).
    Ask(Registry, String),
}

/// A registry release-state asks, through the machine's own clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registry {
    /// `npm view NAME version`.
    Npm,
    /// `PyPI`'s JSON API (curl).
    PyPi,
    /// The crates.io index (`cargo info`).
    CratesIo,
}

/// One input of a release.
#[derive(Debug, Clone)]
pub struct Input {
    /// Stable id, used by deferrals (`crate:serde`, `npm:harnesses/@openai/codex`, …).
    pub id: String,
    /// Where it is defined.
    pub source: String,
    /// Pinned, floating or exception.
    pub class: Class,
    /// The version (or reference) in use.
    pub current: String,
    /// What the registry offers.
    pub newest: Newest,
    /// A note (the exception's reason, why it floats).
    pub note: String,
}

impl Input {
    fn new(id: String, source: &str, class: Class, current: &str, newest: Newest) -> Self {
        Self {
            id,
            source: source.to_owned(),
            class,
            current: current.to_owned(),
            newest,
            note: String::new(),
        }
    }
    fn note(mut self, note: &str) -> Self {
        note.clone_into(&mut self.note);
        self
    }
}

/// A committed deferral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferral {
    /// Input ids; a trailing `*` matches a prefix.
    pub inputs: Vec<String>,
    /// The processkit `WorkItem` id (`BACK-…`).
    pub workitem: Option<String>,
    /// Why.
    pub reason: String,
}

impl Deferral {
    fn covers(&self, id: &str) -> bool {
        self.inputs.iter().any(|p| {
            p.strip_suffix('*')
                .map_or(p == id, |prefix| id.starts_with(prefix))
        })
    }
}

/// The whole report.
#[derive(Debug, Clone)]
pub struct Report {
    /// Every input.
    pub inputs: Vec<Input>,
    /// The committed deferrals.
    pub deferrals: Vec<Deferral>,
    /// Advisories ignored in `deny.toml` (never allowed).
    pub ignored_advisories: Vec<String>,
    /// Every target: `(triple, built here, why)` (see `artifacts::target_plan`).
    pub targets: Vec<(String, bool, String)>,
}

/// Collects every input of the repository at `root` (the current directory for the gate).
pub fn collect(root: &Path) -> Result<Report, String> {
    let mut inputs = Vec::new();
    inputs.extend(crates(root)?);
    inputs.extend(release_tools(root)?);
    inputs.extend(npm_test_tools(root)?);
    inputs.extend(base_image(root)?);
    inputs.extend(processkit(root)?);
    inputs.extend(catalog(root)?);
    inputs.extend(apt_pins(root)?);
    inputs.extend(marked_exceptions(root)?);
    ask_registries(&mut inputs);
    let deferrals = match fs_err::read_to_string(root.join(DEFERRALS)) {
        Ok(text) => parse_deferrals(&text)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e.to_string()),
    };
    let deny = fs_err::read_to_string(root.join("deny.toml")).map_err(|e| e.to_string())?;
    let installed = super::artifacts::installed_targets().unwrap_or_default();
    Ok(Report {
        inputs,
        deferrals,
        ignored_advisories: ignored_advisories(&deny)?,
        targets: super::artifacts::target_plan(&installed),
    })
}

/// The gate's rule over a report: every failure, or `Ok` with the deferred drift listed.
pub fn verdict(report: &Report, root: &Path) -> Result<Vec<String>, Vec<String>> {
    let mut errors = Vec::new();
    let mut deferred = Vec::new();
    for a in &report.ignored_advisories {
        errors.push(format!(
            "deny.toml ignores advisory {a}: a security advisory is never deferrable \
             (update the crate or replace it)"
        ));
    }
    for d in &report.deferrals {
        let label = d.inputs.join(", ");
        if let Some(adv) = d
            .inputs
            .iter()
            .find(|i| i.starts_with("RUSTSEC-") || i.starts_with("advisory:"))
        {
            errors.push(format!(
                "{DEFERRALS}: deferral of {adv}: a security advisory is never deferrable"
            ));
            continue;
        }
        match &d.workitem {
            None => errors.push(format!(
                "{DEFERRALS}: deferral of [{label}] names no WorkItem: drift may be deferred \
                 only into a processkit WorkItem committed under {WORKITEMS}/ \
                 (`workitem = \"BACK-…\"`)"
            )),
            Some(id) => {
                if let Err(e) = check_workitem(root, id) {
                    errors.push(format!("{DEFERRALS}: deferral of [{label}]: {e}"));
                }
            }
        }
    }
    for input in &report.inputs {
        match &input.newest {
            Newest::Failed(why) => errors.push(format!(
                "{} ({}): could not ask its registry: {why}",
                input.id, input.source
            )),
            Newest::Newer(v) if input.class == Class::Pinned => {
                match report.deferrals.iter().find(|d| d.covers(&input.id)) {
                    Some(d) if d.workitem.is_some() => deferred.push(format!(
                        "{} {} -> {v} deferred into {}",
                        input.id,
                        input.current,
                        d.workitem.as_deref().unwrap_or_default()
                    )),
                    Some(_) => {}
                    None => errors.push(format!(
                        "{} ({}) is pinned at {} and {v} is available: update it, or defer it \
                         in {DEFERRALS} with a processkit WorkItem",
                        input.id, input.source, input.current
                    )),
                }
            }
            _ => {}
        }
        if input.class == Class::Exception && input.note.trim().is_empty() {
            errors.push(format!(
                "{} ({}) is a provenance exception without a written reason",
                input.id, input.source
            ));
        }
    }
    if errors.is_empty() {
        Ok(deferred)
    } else {
        Err(errors)
    }
}

/// Checks that `id` names a committed processkit `WorkItem` that is still open.
pub fn check_workitem(root: &Path, id: &str) -> Result<(), String> {
    let dir = root.join(WORKITEMS);
    let files = files_ending(&dir, ".md")?;
    let file = files
        .iter()
        .find(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.strip_suffix(".md") == Some(id))
        })
        .ok_or_else(|| format!("WorkItem {id} is not committed under {WORKITEMS}/ ({id}.md)"))?;
    let text = fs_err::read_to_string(file).map_err(|e| e.to_string())?;
    let front = frontmatter(&text).ok_or_else(|| {
        format!(
            "{}: no YAML frontmatter between `---` lines",
            file.display()
        )
    })?;
    let doc: serde_norway::Value =
        serde_norway::from_str(front).map_err(|e| format!("{}: {e}", file.display()))?;
    let field = |path: &[&str]| {
        path.iter()
            .try_fold(&doc, |v, k| v.get(*k))
            .and_then(serde_norway::Value::as_str)
            .map(str::to_owned)
    };
    if field(&["kind"]).as_deref() != Some("WorkItem") {
        return Err(format!("{}: `kind` is not WorkItem", file.display()));
    }
    if !field(&["apiVersion"]).is_some_and(|v| v.starts_with("processkit.projectious.work/")) {
        return Err(format!(
            "{}: `apiVersion` is not processkit.projectious.work/…",
            file.display()
        ));
    }
    if field(&["metadata", "id"]).as_deref() != Some(id) {
        return Err(format!("{}: `metadata.id` is not {id}", file.display()));
    }
    if field(&["spec", "title"]).is_none_or(|t| t.trim().is_empty()) {
        return Err(format!("{}: `spec.title` is missing", file.display()));
    }
    let state = field(&["spec", "state"])
        .ok_or_else(|| format!("{}: `spec.state` is missing", file.display()))?;
    if matches!(
        state.as_str(),
        "done" | "cancelled" | "canceled" | "rejected"
    ) {
        return Err(format!(
            "{}: WorkItem {id} is {state}; a deferral needs an open WorkItem",
            file.display()
        ));
    }
    Ok(())
}

/// The first YAML document of a processkit entity file (framed by `---` lines).
fn frontmatter(text: &str) -> Option<&str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some(&rest[..offset]);
        }
        offset += line.len();
    }
    None
}

/// Parses `release/deferrals.toml`.
pub fn parse_deferrals(text: &str) -> Result<Vec<Deferral>, String> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| format!("{DEFERRALS}: {e}"))?;
    let entries = match doc.get("deferral") {
        None => return Ok(Vec::new()),
        Some(v) => v
            .as_array()
            .ok_or_else(|| format!("{DEFERRALS}: `deferral` must be an array of tables"))?,
    };
    entries
        .iter()
        .map(|e| {
            let inputs = e
                .get("inputs")
                .and_then(toml::Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect::<Vec<_>>()
                })
                .filter(|a| !a.is_empty())
                .ok_or_else(|| format!("{DEFERRALS}: a deferral needs `inputs = [\"…\"]`"))?;
            let mut inputs = inputs;
            if let Some(adv) = e.get("advisory").and_then(toml::Value::as_str) {
                inputs.push(format!("advisory:{adv}"));
            }
            Ok(Deferral {
                inputs,
                workitem: e
                    .get("workitem")
                    .and_then(toml::Value::as_str)
                    .map(str::trim)
                    .filter(|w| !w.is_empty())
                    .map(str::to_owned),
                reason: e
                    .get("reason")
                    .and_then(toml::Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            })
        })
        .collect()
}

/// `[advisories] ignore` entries of `deny.toml`.
fn ignored_advisories(deny: &str) -> Result<Vec<String>, String> {
    let doc: toml::Table = toml::from_str(deny).map_err(|e| format!("deny.toml: {e}"))?;
    Ok(doc
        .get("advisories")
        .and_then(|a| a.get("ignore"))
        .and_then(toml::Value::as_array)
        .map(|a| {
            a.iter()
                .map(|v| match v {
                    toml::Value::String(s) => s.clone(),
                    other => other
                        .get("id")
                        .or_else(|| other.get("crate"))
                        .and_then(toml::Value::as_str)
                        .unwrap_or("(entry)")
                        .to_owned(),
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Every registry crate of `Cargo.lock`, with `cargo update --dry-run --verbose`'s offers.
fn crates(root: &Path) -> Result<Vec<Input>, String> {
    let lock: toml::Table = toml::from_str(
        &fs_err::read_to_string(root.join("Cargo.lock")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("Cargo.lock: {e}"))?;
    let out = Command::new(cargo())
        .args(["update", "--dry-run", "--verbose"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo update: {e}"))?;
    let text = String::from_utf8_lossy(&out.stderr);
    let offers = if out.status.success() {
        Ok(parse_cargo_update(&text))
    } else {
        Err(format!(
            "cargo update --dry-run failed: {}",
            text.lines().last().unwrap_or_default()
        ))
    };
    let mut inputs = Vec::new();
    for p in lock
        .get("package")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(source) = p.get("source").and_then(toml::Value::as_str) else {
            continue; // a workspace member
        };
        let name = p
            .get("name")
            .and_then(toml::Value::as_str)
            .unwrap_or_default();
        let version = p
            .get("version")
            .and_then(toml::Value::as_str)
            .unwrap_or_default();
        let class = if source.starts_with("registry+") && p.get("checksum").is_some() {
            Class::Pinned
        } else {
            Class::Exception
        };
        let newest = match &offers {
            Err(e) => Newest::Failed(e.clone()),
            Ok(map) => map
                .get(&(name.to_owned(), version.to_owned()))
                .map_or(Newest::Current, |v| Newest::Newer(v.clone())),
        };
        let input = Input::new(
            format!("crate:{name}@{version}"),
            "Cargo.lock",
            class,
            version,
            newest,
        );
        inputs.push(if class == Class::Exception {
            input.note("not a checksummed registry crate")
        } else {
            input
        });
    }
    Ok(inputs)
}

/// `(name, version) -> offered version` from `cargo update --dry-run --verbose` output
/// (`Updating a v1 -> v2` and `Unchanged a v1 (available: v2)` lines).
pub fn parse_cargo_update(text: &str) -> BTreeMap<(String, String), String> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Updating", name, from, "->", to, ..] => {
                map.insert(
                    ((*name).to_owned(), from.trim_start_matches('v').to_owned()),
                    to.trim_start_matches('v').to_owned(),
                );
            }
            ["Unchanged", name, from, "(available:", to, ..] => {
                map.insert(
                    ((*name).to_owned(), from.trim_start_matches('v').to_owned()),
                    to.trim_start_matches('v').trim_end_matches(')').to_owned(),
                );
            }
            _ => {}
        }
    }
    map
}

/// The pins of `scripts/install-release-tools.sh` (`NAME_VERSION=…` lines).
fn release_tools(root: &Path) -> Result<Vec<Input>, String> {
    const SCRIPT: &str = "scripts/install-release-tools.sh";
    let text = fs_err::read_to_string(root.join(SCRIPT)).map_err(|e| e.to_string())?;
    let mut inputs = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let Some(upper) = key.strip_suffix("_VERSION") else {
            continue;
        };
        if upper.contains(' ') || upper.is_empty() {
            continue;
        }
        let name = upper.to_lowercase().replace('_', "-");
        let (note, registry) = if text.contains(&format!("{upper}_SHA256=")) {
            ("PyPI, wheel pinned by SHA-256", Registry::PyPi)
        } else {
            ("crates.io, cargo install --locked", Registry::CratesIo)
        };
        inputs.push(
            Input::new(
                format!("release-tool:{name}"),
                SCRIPT,
                Class::Pinned,
                value.trim(),
                Newest::Ask(registry, name.clone()),
            )
            .note(note),
        );
    }
    Ok(inputs)
}

/// The direct dependencies of each `test-tools/*/package.json` (the lock pins the rest).
fn npm_test_tools(root: &Path) -> Result<Vec<Input>, String> {
    let mut inputs = Vec::new();
    let dir = root.join("test-tools");
    let mut dirs: Vec<PathBuf> = fs_err::read_dir(&dir)
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("package.json").is_file())
        .collect();
    dirs.sort();
    for d in dirs {
        let tool = d.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let source = format!("test-tools/{tool}/package.json");
        let json: serde_json::Value = serde_json::from_str(
            &fs_err::read_to_string(d.join("package.json")).map_err(|e| e.to_string())?,
        )
        .map_err(|e| format!("{source}: {e}"))?;
        let locked = d.join("package-lock.json").is_file();
        for section in ["dependencies", "devDependencies"] {
            for (name, v) in json[section].as_object().into_iter().flatten() {
                let v = v.as_str().unwrap_or_default();
                let exact = !v.starts_with(['^', '~', '>', '<', '*']) && v != "latest";
                let class = if exact && locked {
                    Class::Pinned
                } else {
                    Class::Floating
                };
                let input = Input::new(
                    format!("npm:{tool}/{name}"),
                    &source,
                    class,
                    v,
                    Newest::Ask(Registry::Npm, name.clone()),
                );
                inputs.push(if class == Class::Floating {
                    input.note("not an exact version under a package-lock.json")
                } else {
                    input
                });
            }
        }
    }
    Ok(inputs)
}

/// The committed default base-image reference and the recipe's floating input (the
/// Debian packages of the build), read with `image.rs`'s own readers.
fn base_image(root: &Path) -> Result<Vec<Input>, String> {
    use crate::image::{BaseImageRef, RECIPE_FILE, Recipe};
    let unreachable =
        || Newest::NotAsked("no container registry is reachable from here".to_owned());
    if !root.join(BASE_IMAGE_REF).is_file() {
        return Ok(vec![
            Input::new(
                "base-image".to_owned(),
                BASE_IMAGE_REF,
                Class::Floating,
                "not defined",
                Newest::NotAsked(format!("{BASE_IMAGE_REF} does not exist yet")),
            )
            .note(
                "no committed base-image reference; generated Dockerfiles use the configured image",
            ),
        ]);
    }
    let r = BaseImageRef::read(root)?;
    let digest = r.digest.unwrap_or_default();
    let mut inputs = vec![Input::new(
        "base-image".to_owned(),
        BASE_IMAGE_REF,
        if digest.starts_with("sha256:") {
            Class::Pinned
        } else {
            Class::Floating
        },
        format!("{}:{} {digest}", r.name, r.tag).trim(),
        unreachable(),
    )];
    if root.join(RECIPE_FILE).is_file() {
        let recipe = Recipe::load_from(root)?;
        inputs.push(
            Input::new(
                "base-image:debian-packages".to_owned(),
                RECIPE_FILE,
                Class::Floating,
                &format!("{} from {}", recipe.suite, recipe.mirror),
                Newest::NotAsked("Debian packages are resolved when the image is built".to_owned()),
            )
            .note(&format!(
                "the recipe installs catalog tools {}; their Debian packages come from the \
                 signed suite as of the build (versions not pinned)",
                recipe.tools.join(", ")
            )),
        );
    }
    Ok(inputs)
}

/// The processkit releases the repository names: every committed `aibox.toml` and the
/// example in `aibox init`'s template.
fn processkit(root: &Path) -> Result<Vec<Input>, String> {
    let mut inputs = Vec::new();
    for file in files_named(root, "aibox.toml")? {
        let rel = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let Ok(doc) = toml::from_str::<toml::Table>(
            &fs_err::read_to_string(&file).map_err(|e| e.to_string())?,
        ) else {
            continue; // deliberately broken fixtures are not inputs
        };
        let Some(pk) = doc.get("processkit") else {
            continue;
        };
        let get = |k: &str| pk.get(k).and_then(toml::Value::as_str).unwrap_or_default();
        let pinned = !get("sha256").is_empty() || !get("release_asset_sha256").is_empty();
        inputs.push(
            Input::new(
                format!("processkit:{rel}"),
                &rel,
                if pinned {
                    Class::Pinned
                } else {
                    Class::Floating
                },
                &format!("{} {}", get("source"), get("version")),
                Newest::NotAsked(
                    "processkit releases live on GitHub, which is not reachable from here"
                        .to_owned(),
                ),
            )
            .note(if pinned {
                "pinned by SHA-256"
            } else {
                "no digest in the file; aibox.lock records it at first install"
            }),
        );
    }
    let init = "crates/aibox-config/src/init.rs";
    if let Ok(text) = fs_err::read_to_string(root.join(init))
        && let Some(v) = text.lines().find_map(|l| {
            let start = l
                .find("# version = \\\"v")
                .or_else(|| l.find("# version = \"v"))?;
            let rest = &l[start..];
            let v = rest.split('v').nth(2)?;
            let end = v.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
            Some(format!("v{}", &v[..end]))
        })
    {
        inputs.push(
            Input::new(
                "processkit:init-example".to_owned(),
                init,
                Class::Floating,
                &v,
                Newest::NotAsked(
                    "processkit releases live on GitHub, which is not reachable from here"
                        .to_owned(),
                ),
            )
            .note("the commented example `aibox init` writes; aibox has no default release"),
        );
    }
    Ok(inputs)
}

/// Every addon catalog entry.
fn catalog(root: &Path) -> Result<Vec<Input>, String> {
    let text = fs_err::read_to_string(root.join(CATALOG)).map_err(|e| e.to_string())?;
    let doc: toml::Table = toml::from_str(&text).map_err(|e| format!("{CATALOG}: {e}"))?;
    let mut inputs = Vec::new();
    for (name, t) in doc
        .get("tool")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flatten()
    {
        let s = |k: &str| t.get(k).and_then(toml::Value::as_str).unwrap_or_default();
        let version = s("version");
        let first = t
            .get("artifact")
            .and_then(toml::Value::as_array)
            .and_then(|a| a.first());
        let npm = first
            .and_then(|a| a.get("npm"))
            .and_then(toml::Value::as_str)
            .map(npm_name);
        let pypi = first
            .and_then(|a| a.get("url"))
            .and_then(toml::Value::as_str)
            .filter(|u| u.contains("pythonhosted.org"))
            .and_then(|u| u.rsplit('/').next())
            .and_then(|f| f.split('-').next())
            .map(str::to_owned);
        let apt: Vec<&str> = t
            .get("apt")
            .and_then(toml::Value::as_array)
            .map(|a| a.iter().filter_map(toml::Value::as_str).collect())
            .unwrap_or_default();
        let (class, newest, note) = match s("verification") {
            "apt-signed" => (
                Class::Floating,
                Newest::NotAsked("follows the Debian release's signed updates".to_owned()),
                format!("Debian packages {}", apt.join(", ")),
            ),
            "exception" => (
                Class::Exception,
                Newest::NotAsked("unverified".to_owned()),
                s("exception").to_owned(),
            ),
            other => {
                let newest = if let Some(n) = npm {
                    Newest::Ask(Registry::Npm, n)
                } else if let Some(p) = pypi {
                    Newest::Ask(Registry::PyPi, p)
                } else {
                    Newest::NotAsked("no registry named".to_owned())
                };
                (Class::Pinned, newest, other.to_owned())
            }
        };
        inputs.push(
            Input::new(format!("catalog:{name}"), CATALOG, class, version, newest).note(&note),
        );
    }
    Ok(inputs)
}

/// The Debian packages `scripts/setup-test-deps.sh` installs (floating: Debian's signed
/// stable updates; the candidate is what a fresh install gets).
fn apt_pins(root: &Path) -> Result<Vec<Input>, String> {
    const SCRIPT: &str = "scripts/setup-test-deps.sh";
    let text = fs_err::read_to_string(root.join(SCRIPT)).map_err(|e| e.to_string())?;
    let mut names = Vec::new();
    if let Some(start) = text.find("apt_packages=(") {
        // Bash allows comments inside the array; drop them before looking for its end.
        let rest: String = text[start + "apt_packages=(".len()..]
            .lines()
            .map(|l| l.split_once('#').map_or(l, |(code, _)| code))
            .collect::<Vec<_>>()
            .join("\n");
        let end = rest.find(')').unwrap_or(rest.len());
        names.extend(rest[..end].split_whitespace().map(str::to_owned));
    }
    for line in text.lines() {
        if let Some(pos) = line.find("missing+=(") {
            let rest = &line[pos + "missing+=(".len()..];
            let end = rest.find(')').unwrap_or(rest.len());
            names.extend(
                rest[..end]
                    .split_whitespace()
                    .filter(|w| !w.starts_with('"') && !w.starts_with('$'))
                    .map(str::to_owned),
            );
        }
    }
    let policy = apt_policy(&names);
    Ok(names
        .into_iter()
        .map(|name| {
            let (installed, candidate) = policy.get(&name).cloned().unwrap_or_default();
            let newest = match (&installed, &candidate) {
                (Some(i), Some(c)) if i != c => Newest::Newer(c.clone()),
                (_, Some(_)) => Newest::Current,
                _ => Newest::NotAsked("apt-cache has no candidate".to_owned()),
            };
            Input::new(
                format!("apt:{name}"),
                SCRIPT,
                Class::Floating,
                installed.as_deref().unwrap_or("(not installed)"),
                newest,
            )
            .note("Debian stable with signed updates; versions follow the release")
        })
        .collect())
}

/// Installer lines carrying `provenance-exception: <reason>` in `scripts/` and `images/`.
fn marked_exceptions(root: &Path) -> Result<Vec<Input>, String> {
    let mut inputs = Vec::new();
    for dir in ["scripts", "images"] {
        for file in files_ending(&root.join(dir), "")? {
            let Ok(text) = fs_err::read_to_string(&file) else {
                continue;
            };
            let rel = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            for (i, line) in text.lines().enumerate() {
                if let Some(pos) = line.find(EXCEPTION_MARKER) {
                    let reason = line[pos + EXCEPTION_MARKER.len()..].trim();
                    inputs.push(
                        Input::new(
                            format!("exception:{rel}:{}", i + 1),
                            &format!("{rel}:{}", i + 1),
                            Class::Exception,
                            "-",
                            Newest::NotAsked("unverified".to_owned()),
                        )
                        .note(reason),
                    );
                }
            }
        }
    }
    Ok(inputs)
}

fn npm_name(spec: &str) -> String {
    let at = spec
        .get(1..)
        .and_then(|s| s.find('@'))
        .map_or(spec.len(), |i| i + 1);
    spec[..at].to_owned()
}

/// Resolves every `Newest::Ask` at once, one thread per question.
fn ask_registries(inputs: &mut [Input]) {
    std::thread::scope(|s| {
        for input in inputs.iter_mut() {
            if let Newest::Ask(registry, name) = input.newest.clone() {
                s.spawn(move || {
                    let answer = match registry {
                        Registry::Npm => npm_newest(&name),
                        Registry::PyPi => pypi_newest(&name),
                        Registry::CratesIo => crates_io_newest(&name),
                    };
                    input.newest = compare(&input.current, answer);
                });
            }
        }
    });
}

fn compare(current: &str, newest: Result<String, String>) -> Newest {
    match newest {
        Err(e) => Newest::Failed(e),
        Ok(n) if n.trim_start_matches('v') == current.trim_start_matches('v') => Newest::Current,
        Ok(n) => Newest::Newer(n),
    }
}

fn stdout_of(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no output");
        Err(format!("{cmd:?} failed: {first}"))
    }
}

fn npm_newest(name: &str) -> Result<String, String> {
    stdout_of(Command::new("npm").args(["view", name, "version"])).map(|s| s.trim().to_owned())
}

fn pypi_newest(name: &str) -> Result<String, String> {
    let url = format!("https://pypi.org/pypi/{name}/json");
    let body = stdout_of(Command::new("curl").args(["-fsSL", "--max-time", "30", &url]))?;
    let json: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
    json["info"]["version"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{url}: no info.version"))
}

/// The newest version in the crates.io index, through `cargo info` run outside the
/// workspace (so the workspace's lock does not select a version).
fn crates_io_newest(name: &str) -> Result<String, String> {
    let text = stdout_of(
        Command::new(cargo())
            .args(["info", name])
            .current_dir(std::env::temp_dir()),
    )?;
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix("version:")?.trim();
            let latest = rest
                .split_once("(latest ")
                .map_or(rest, |(_, l)| l.trim_end_matches(')'));
            latest.split_whitespace().next().map(str::to_owned)
        })
        .ok_or_else(|| format!("`cargo info {name}` printed no version"))
}

/// `package -> (installed, candidate)` from one `apt-cache policy` run.
fn apt_policy(pkgs: &[String]) -> BTreeMap<String, (Option<String>, Option<String>)> {
    let mut map = BTreeMap::new();
    if pkgs.is_empty() {
        return map;
    }
    let Ok(text) = stdout_of(Command::new("apt-cache").arg("policy").args(pkgs)) else {
        return map;
    };
    let mut current: Option<String> = None;
    for line in text.lines() {
        if !line.starts_with(' ') {
            current = line.strip_suffix(':').map(str::to_owned);
            continue;
        }
        let Some(pkg) = &current else { continue };
        let entry = map.entry(pkg.clone()).or_insert((None, None));
        let value = |key: &str| {
            line.trim()
                .strip_prefix(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| v != "(none)")
        };
        if let Some(v) = value("Installed:") {
            entry.0 = Some(v);
        } else if let Some(v) = value("Candidate:") {
            entry.1 = Some(v);
        }
    }
    map
}

fn files_named(dir: &Path, name: &str) -> Result<Vec<PathBuf>, String> {
    Ok(files_ending(dir, "")?
        .into_iter()
        .filter(|p| p.file_name().and_then(|n| n.to_str()) == Some(name))
        .collect())
}

/// Every file below `dir` whose name ends with `suffix`, skipping build and VCS folders.
fn files_ending(dir: &Path, suffix: &str) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    if !dir.is_dir() {
        return Ok(found);
    }
    for entry in fs_err::read_dir(dir).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        // Symbolic links are not followed: the policy corpus links to `/` on purpose.
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        let path = entry.path();
        let file_name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if matches!(file_name, "target" | "node_modules" | ".git") {
                continue;
            }
            found.extend(files_ending(&path, suffix)?);
        } else if file_name.ends_with(suffix) {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// The report as JSON (the digest the evidence binds is over these bytes).
pub fn to_json(report: &Report, verdict: &Result<Vec<String>, Vec<String>>) -> String {
    let inputs: Vec<serde_json::Value> = report
        .inputs
        .iter()
        .map(|i| {
            let (status, newest) = match &i.newest {
                Newest::Current => ("current", i.current.clone()),
                Newest::Newer(v) => ("update-available", v.clone()),
                Newest::NotAsked(why) => ("not-asked", why.clone()),
                Newest::Failed(why) => ("registry-failed", why.clone()),
                Newest::Ask(_, name) => ("not-asked", format!("{name} was not asked")),
            };
            json!({
                "id": i.id, "source": i.source, "class": i.class.as_str(),
                "current": i.current, "status": status, "newest": newest, "note": i.note,
            })
        })
        .collect();
    let deferrals: Vec<serde_json::Value> = report
        .deferrals
        .iter()
        .map(|d| json!({ "inputs": d.inputs, "workitem": d.workitem, "reason": d.reason }))
        .collect();
    let (ok, lines) = match verdict {
        Ok(deferred) => (true, deferred.clone()),
        Err(errors) => (false, errors.clone()),
    };
    let value = json!({
        "schema": "aibox-release-state/1",
        "passed": ok,
        "findings": lines,
        "ignored_advisories": report.ignored_advisories,
        "deferrals": deferrals,
        "inputs": inputs,
        "targets": report.targets.iter().map(|(t, built, why)| {
            json!({ "target": t, "built": built, "why": why })
        }).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
}

/// The report as Markdown for people.
pub fn to_markdown(report: &Report, verdict: &Result<Vec<String>, Vec<String>>) -> String {
    let mut md = String::from("# aibox release state\n\n");
    match verdict {
        Ok(deferred) => {
            md.push_str("Verdict: **passed**\n\n");
            for d in deferred {
                let _ = writeln!(md, "- deferred: {d}");
            }
        }
        Err(errors) => {
            md.push_str("Verdict: **failed**\n\n");
            for e in errors {
                let _ = writeln!(md, "- {e}");
            }
        }
    }
    let crates = report
        .inputs
        .iter()
        .filter(|i| i.id.starts_with("crate:"))
        .count();
    let _ = writeln!(
        md,
        "\n{crates} crates are locked in Cargo.lock; only those with an offer are listed.\n"
    );
    md.push_str(
        "| input | source | class | in use | registry | note |\n|---|---|---|---|---|---|\n",
    );
    for i in &report.inputs {
        if i.id.starts_with("crate:") && i.newest == Newest::Current {
            continue;
        }
        let registry = match &i.newest {
            Newest::Current => "current".to_owned(),
            Newest::Newer(v) => format!("**{v} available**"),
            Newest::NotAsked(why) => format!("not asked: {why}"),
            Newest::Failed(why) => format!("FAILED: {why}"),
            Newest::Ask(_, name) => format!("not asked: {name}"),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {registry} | {} |",
            i.id,
            i.source,
            i.class.as_str(),
            i.current,
            i.note.replace('|', "/")
        );
    }
    md.push_str("\n## Release targets\n\n| target | built | why |\n|---|---|---|\n");
    for (t, built, why) in &report.targets {
        let built = if *built { "yes" } else { "**no**" };
        let _ = writeln!(md, "| {t} | {built} | {} |", why.replace('|', "/"));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/release-state")
    }

    #[test]
    fn apt_packages_after_a_comment_inside_the_array_are_listed() {
        let dir = std::env::temp_dir().join(format!("aibox-xtask-apt-{}", std::process::id()));
        fs_err::create_dir_all(dir.join("scripts")).unwrap();
        fs_err::write(
            dir.join("scripts/setup-test-deps.sh"),
            "apt_packages=(podman runc\n  # a comment (with parentheses)\n  curl binutils)\n",
        )
        .unwrap();
        let ids: Vec<String> = apt_pins(&dir).unwrap().into_iter().map(|i| i.id).collect();
        let _ = fs_err::remove_dir_all(&dir);
        assert_eq!(ids, ["apt:podman", "apt:runc", "apt:curl", "apt:binutils"]);
    }

    fn pinned(id: &str, newest: Newest) -> Input {
        Input::new(id.to_owned(), "x", Class::Pinned, "1.0.0", newest)
    }

    fn report(inputs: Vec<Input>, deferrals: &str) -> Report {
        Report {
            inputs,
            deferrals: parse_deferrals(deferrals).unwrap(),
            ignored_advisories: Vec::new(),
            targets: super::super::artifacts::target_plan(&["x86_64-unknown-linux-gnu".to_owned()]),
        }
    }

    #[test]
    fn the_report_says_which_targets_are_built_and_why_not() {
        let r = report(Vec::new(), "");
        let md = to_markdown(&r, &Ok(Vec::new()));
        assert!(
            md.contains("| x86_64-unknown-linux-gnu | yes | glibc 2.28 floor"),
            "{md}"
        );
        assert!(
            md.contains("| aarch64-unknown-linux-musl | **no** | the Rust standard library"),
            "{md}"
        );
        assert!(
            md.contains("| aarch64-apple-darwin | **no** | not a release target"),
            "{md}"
        );
        let json: serde_json::Value = serde_json::from_str(&to_json(&r, &Ok(Vec::new()))).unwrap();
        let targets = json["targets"].as_array().unwrap();
        assert_eq!(targets.len(), 7);
        assert_eq!(targets[0]["target"], "x86_64-unknown-linux-gnu");
        assert_eq!(targets[0]["built"], true);
        assert_eq!(targets[2]["built"], false);
    }

    #[test]
    fn cargo_update_offers_are_read_from_both_line_shapes() {
        let text = "    Updating crates.io index\n     Locking 1 package to latest Rust 1.95 compatible version\n    Updating clap_complete v4.6.11 -> v4.6.12\n   Unchanged sha2 v0.10.9 (available: v0.11.1)\nnote: to see how you depend on a package\n";
        let map = parse_cargo_update(text);
        assert_eq!(map.len(), 2);
        assert_eq!(
            map[&("clap_complete".to_owned(), "4.6.11".to_owned())],
            "4.6.12"
        );
        assert_eq!(map[&("sha2".to_owned(), "0.10.9".to_owned())], "0.11.1");
    }

    #[test]
    fn undeferred_drift_fails_and_a_workitem_deferral_passes() {
        let root = fixture_root();
        let drift = || vec![pinned("crate:sha2@0.10.9", Newest::Newer("0.11.1".into()))];
        let errors = verdict(&report(drift(), ""), &root).unwrap_err();
        assert!(errors[0].contains("crate:sha2@0.10.9"), "{errors:?}");
        let ok = verdict(
            &report(
                drift(),
                "[[deferral]]\ninputs = [\"crate:*\"]\nworkitem = \"BACK-20261130_2130-SteadyLedger-routine-dependency-drift\"\nreason = \"routine\"\n",
            ),
            &root,
        )
        .unwrap();
        assert_eq!(ok.len(), 1);
        assert!(ok[0].contains("deferred into BACK-20261130_2130"), "{ok:?}");
    }

    #[test]
    fn a_deferral_without_a_committed_open_workitem_fails_the_gate() {
        let root = fixture_root();
        let drift = || vec![pinned("npm:harnesses/x", Newest::Newer("2.0.0".into()))];
        for (deferrals, want) in [
            (
                "[[deferral]]\ninputs = [\"npm:*\"]\nreason = \"later\"\n",
                "names no WorkItem",
            ),
            (
                "[[deferral]]\ninputs = [\"npm:*\"]\nworkitem = \"BACK-20990101_0000-Nowhere-missing\"\n",
                "is not committed",
            ),
            (
                "[[deferral]]\ninputs = [\"npm:*\"]\nworkitem = \"BACK-20261101_0900-QuietDone-finished-item\"\n",
                "is done",
            ),
            (
                "[[deferral]]\ninputs = [\"npm:*\"]\nworkitem = \"BACK-20261102_1000-OddKind-not-a-workitem\"\n",
                "`kind` is not WorkItem",
            ),
        ] {
            let errors = verdict(&report(drift(), deferrals), &root).unwrap_err();
            assert!(
                errors.iter().any(|e| e.contains(want)),
                "{deferrals}: {errors:?}"
            );
        }
    }

    #[test]
    fn a_security_advisory_is_never_deferrable() {
        let root = fixture_root();
        let errors = verdict(
            &report(
                Vec::new(),
                "[[deferral]]\ninputs = [\"crate:time@0.1.0\"]\nadvisory = \"RUSTSEC-2020-0071\"\nworkitem = \"BACK-20261130_2130-SteadyLedger-routine-dependency-drift\"\n",
            ),
            &root,
        )
        .unwrap_err();
        assert!(errors[0].contains("never deferrable"), "{errors:?}");
        let mut r = report(Vec::new(), "");
        r.ignored_advisories =
            ignored_advisories("[advisories]\nignore = [\"RUSTSEC-2020-0071\"]\n").unwrap();
        let errors = verdict(&r, &root).unwrap_err();
        assert!(errors[0].contains("deny.toml ignores advisory RUSTSEC-2020-0071"));
    }

    #[test]
    fn registry_failures_and_unexplained_exceptions_fail() {
        let root = fixture_root();
        let mut exc = Input::new(
            "catalog:x".into(),
            "c",
            Class::Exception,
            "1",
            Newest::Current,
        );
        exc.note = " ".into();
        let errors = verdict(
            &report(
                vec![pinned("npm:t/y", Newest::Failed("offline".into())), exc],
                "",
            ),
            &root,
        )
        .unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        // Floating inputs with newer versions are listed, not failed.
        let floating = Input::new(
            "apt:git".into(),
            "s",
            Class::Floating,
            "1",
            Newest::Newer("2".into()),
        );
        assert!(verdict(&report(vec![floating], ""), &root).is_ok());
    }

    #[test]
    fn the_committed_deferrals_name_committed_open_workitems() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = fs_err::read_to_string(root.join(DEFERRALS)).unwrap();
        let deferrals = parse_deferrals(&text).unwrap();
        assert!(!deferrals.is_empty());
        for d in deferrals {
            check_workitem(&root, d.workitem.as_deref().unwrap()).unwrap();
        }
    }

    #[test]
    fn the_base_image_reference_is_pinned_and_its_recipe_floats() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let inputs = base_image(&root).unwrap();
        let ids: Vec<(&str, Class)> = inputs.iter().map(|i| (i.id.as_str(), i.class)).collect();
        assert_eq!(
            ids,
            [
                ("base-image", Class::Pinned),
                ("base-image:debian-packages", Class::Floating)
            ]
        );
        assert!(inputs[0].current.contains("@sha256:") || inputs[0].current.contains(" sha256:"));
        assert!(
            inputs[1].current.starts_with("bookworm from "),
            "{}",
            inputs[1].current
        );
    }

    #[test]
    fn exceptions_are_collected_from_the_installer_lines_that_carry_them() {
        let dir = std::env::temp_dir().join(format!("aibox-xtask-exc-{}", std::process::id()));
        fs_err::create_dir_all(dir.join("images")).unwrap();
        fs_err::write(
            dir.join("images/Containerfile"),
            "FROM x\nRUN curl -fsSL https://example.invalid/tool -o /usr/local/bin/tool # provenance-exception: upstream publishes no checksum\n",
        )
        .unwrap();
        let found = marked_exceptions(&dir).unwrap();
        fs_err::remove_dir_all(&dir).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].source, "images/Containerfile:2");
        assert_eq!(found[0].note, "upstream publishes no checksum");
    }
}
