//! The tool catalog (`catalog/tools.toml`, embedded at build time): which tools aibox
//! can install into the image, at which exact version, and how each download is checked.
//!
//! [`Catalog::parse`] refuses an entry that floats (`latest`, ranges), has no or two
//! verifications, or a download that is not an https URL or an exact npm spec. A tool
//! can only be downloaded to a file, checked, unpacked and linked; the catalog has no
//! field for a shell command, so `curl | sh` cannot be written down.

use base64::Engine as _;
use std::collections::BTreeMap;

use serde::Deserialize;

/// The catalog shipped with this aibox.
pub const CATALOG_TOML: &str = include_str!("../catalog/tools.toml");

/// Tools every image gets: certificates, the downloader and git.
pub const BASE_TOOLS: [&str; 3] = ["ca-certificates", "curl", "git"];

/// Tools processkit mode needs: its MCP servers run with `uv` on Python.
pub const PROCESSKIT_TOOLS: [&str; 2] = ["python", "uv"];

/// Architectures the image build knows (Debian names).
pub const ARCHES: [&str; 2] = ["amd64", "arm64"];

/// How a tool's download is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verification {
    /// npm's `integrity` (sha512) of every tarball.
    NpmIntegrity,
    /// A published SHA-256 of every download.
    Sha256,
    /// Debian packages from the signed apt repository of the base image.
    AptSigned,
    /// Not verified; the tool carries a written exception.
    Exception,
}

impl Verification {
    /// The name used in the catalog.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NpmIntegrity => "npm-integrity",
            Self::Sha256 => "sha256",
            Self::AptSigned => "apt-signed",
            Self::Exception => "exception",
        }
    }
}

/// One download of a tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    /// Debian architecture; `None` when the same file serves every architecture.
    #[serde(default)]
    pub arch: Option<String>,
    /// npm tarball as `name@exact-version`.
    #[serde(default)]
    pub npm: Option<String>,
    /// Package name to install the npm tarball under (an npm alias), default its name.
    #[serde(default)]
    pub install_as: Option<String>,
    /// https URL of a download (wheel or archive).
    #[serde(default)]
    pub url: Option<String>,
    /// npm `integrity` (`sha512-<base64>`).
    #[serde(default)]
    pub integrity: Option<String>,
    /// Lowercase hex SHA-256.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Command name → path inside the unpacked artifact.
    #[serde(default)]
    pub bin: BTreeMap<String, String>,
}

/// One catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// Set from the table key.
    #[serde(skip)]
    pub name: String,
    /// Exact version (for apt tools: the Debian release).
    pub version: String,
    /// One line on what it is.
    pub summary: String,
    /// How downloads are checked.
    pub verification: Verification,
    /// Why the tool is not verified (only with `verification = "exception"`).
    #[serde(default)]
    pub exception: Option<String>,
    /// Other catalog tools this one needs.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Debian packages (apt-signed tools).
    #[serde(default)]
    pub apt: Vec<String>,
    /// Downloads (every other tool).
    #[serde(default)]
    pub artifact: Vec<Artifact>,
    /// Host names the tool connects to at run time (a harness's API and sign-in hosts):
    /// allowed through the egress proxy when the tool is in the image and `[network]
    /// egress = "allowlist"`. Reviewed with the version, since a new version may move.
    #[serde(default)]
    pub hosts: Vec<String>,
}

impl Tool {
    /// Whether the version is a floating input (an apt tool follows its Debian release).
    pub fn is_floating(&self) -> bool {
        self.verification == Verification::AptSigned
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogFile {
    tool: BTreeMap<String, Tool>,
}

/// The parsed, checked catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    tools: BTreeMap<String, Tool>,
}

/// A catalog entry that breaks the catalog's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool catalog: {tool}: {problem}")]
pub struct CatalogError {
    /// The entry (or `<file>` for a syntax error).
    pub tool: String,
    /// What is wrong.
    pub problem: String,
}

fn err(tool: &str, problem: impl Into<String>) -> CatalogError {
    CatalogError {
        tool: tool.to_owned(),
        problem: problem.into(),
    }
}

/// Refuses `latest`, ranges and wildcards: a version is digits, letters, `.`, `-`, `+`,
/// `~` inside (Debian style), starting with an alphanumeric.
fn exact_version(tool: &str, v: &str) -> Result<(), CatalogError> {
    let lower = v.to_ascii_lowercase();
    let floating = lower.is_empty()
        || lower == "latest"
        || lower == "next"
        || lower == "*"
        || lower.contains(".x")
        || lower.starts_with(['^', '~', '<', '>', '='])
        || v.contains([' ', '|', '*', '^', '<', '>'])
        || !v.starts_with(|c: char| c.is_ascii_alphanumeric());
    if floating {
        return Err(err(
            tool,
            format!("version `{v}` is not exact (latest, ranges and wildcards are refused)"),
        ));
    }
    if !v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".-+~:_".contains(c))
    {
        return Err(err(
            tool,
            format!("version `{v}` has characters a version cannot have"),
        ));
    }
    Ok(())
}

fn check_npm_spec(tool: &str, spec: &str) -> Result<(), CatalogError> {
    let Some((name, version)) = split_npm(spec) else {
        return Err(err(tool, format!("npm `{spec}` is not `name@version`")));
    };
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "@/._-".contains(c))
    {
        return Err(err(tool, format!("npm package name `{name}` is not valid")));
    }
    exact_version(tool, version)
}

/// Splits `name@version` (the name may start with `@scope/`).
pub fn split_npm(spec: &str) -> Option<(&str, &str)> {
    let at = spec.get(1..)?.find('@')? + 1;
    let (name, version) = (&spec[..at], &spec[at + 1..]);
    (!name.is_empty() && !version.is_empty()).then_some((name, version))
}

fn safe_rel_path(tool: &str, p: &str) -> Result<(), CatalogError> {
    let ok = !p.is_empty()
        && !p.starts_with('/')
        && p.split('/').all(|seg| !seg.is_empty() && seg != "..")
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/@+".contains(c));
    if ok {
        Ok(())
    } else {
        Err(err(
            tool,
            format!("path `{p}` must be a plain relative path"),
        ))
    }
}

fn check_artifact(tool: &Tool, a: &Artifact) -> Result<(), CatalogError> {
    let name = tool.name.as_str();
    if let Some(arch) = &a.arch
        && !ARCHES.contains(&arch.as_str())
    {
        return Err(err(
            name,
            format!("unknown arch `{arch}` (known: amd64, arm64)"),
        ));
    }
    match (&a.npm, &a.url) {
        (Some(spec), None) => check_npm_spec(name, spec)?,
        (None, Some(url)) => {
            let plain = url.starts_with("https://")
                && url
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._~:/%+".contains(c));
            if !plain {
                return Err(err(name, format!("url `{url}` must be a plain https URL")));
            }
            if archive_kind(url).is_none() {
                return Err(err(
                    name,
                    format!("url `{url}` must end in .whl, .zip, .tar.gz or .tgz"),
                ));
            }
        }
        _ => {
            return Err(err(
                name,
                "each artifact needs exactly one of `npm` or `url`",
            ));
        }
    }
    if let Some(alias) = &a.install_as {
        if a.npm.is_none() {
            return Err(err(name, "`install_as` only applies to npm artifacts"));
        }
        safe_rel_path(name, alias)?;
    }
    for (cmd, path) in &a.bin {
        if cmd.is_empty()
            || !cmd
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(err(name, format!("command name `{cmd}` is not valid")));
        }
        safe_rel_path(name, path)?;
    }
    check_digest(tool, a)
}

fn check_digest(tool: &Tool, a: &Artifact) -> Result<(), CatalogError> {
    let name = tool.name.as_str();
    let digests = (a.integrity.is_some(), a.sha256.is_some());
    match tool.verification {
        Verification::NpmIntegrity => {
            let Some(integrity) = &a.integrity else {
                return Err(err(
                    name,
                    "npm-integrity needs `integrity` on every artifact",
                ));
            };
            if digests.1 || a.npm.is_none() {
                return Err(err(
                    name,
                    "npm-integrity artifacts are npm tarballs with only `integrity`",
                ));
            }
            sha512_hex(integrity).ok_or_else(|| {
                err(
                    name,
                    format!("integrity `{integrity}` is not `sha512-<base64 of 64 bytes>`"),
                )
            })?;
        }
        Verification::Sha256 => {
            let Some(sum) = &a.sha256 else {
                return Err(err(name, "sha256 needs `sha256` on every artifact"));
            };
            if digests.0 {
                return Err(err(
                    name,
                    "give exactly one verification: `sha256` or `integrity`",
                ));
            }
            if sum.len() != 64
                || !sum
                    .chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
            {
                return Err(err(
                    name,
                    format!("sha256 `{sum}` is not 64 lowercase hex digits"),
                ));
            }
        }
        Verification::Exception => {
            if digests.0 || digests.1 {
                return Err(err(
                    name,
                    "an exception entry has no digest; use its verification kind",
                ));
            }
        }
        Verification::AptSigned => {
            return Err(err(
                name,
                "apt-signed tools list `apt` packages, not artifacts",
            ));
        }
    }
    Ok(())
}

fn check_tool(tool: &Tool, all: &BTreeMap<String, Tool>) -> Result<(), CatalogError> {
    let name = tool.name.as_str();
    exact_version(name, &tool.version)?;
    for host in &tool.hosts {
        if let Some(why) = aibox_config::validate::egress_host_problem(host) {
            return Err(err(name, format!("host `{host}` {why}")));
        }
    }
    match (tool.verification, &tool.exception) {
        (Verification::Exception, Some(text)) if !text.trim().is_empty() => {}
        (Verification::Exception, _) => {
            return Err(err(
                name,
                "verification `exception` needs a written `exception`",
            ));
        }
        (_, Some(_)) => {
            return Err(err(
                name,
                "`exception` is only allowed with verification = \"exception\"",
            ));
        }
        _ => {}
    }
    if tool.verification == Verification::AptSigned {
        if tool.apt.is_empty() || !tool.artifact.is_empty() {
            return Err(err(
                name,
                "apt-signed tools list `apt` packages and no artifacts",
            ));
        }
        for p in &tool.apt {
            if p.is_empty()
                || !p
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
            {
                return Err(err(name, format!("`{p}` is not a Debian package name")));
            }
        }
    } else {
        if !tool.apt.is_empty() {
            return Err(err(
                name,
                "`apt` packages need verification = \"apt-signed\"",
            ));
        }
        if tool.artifact.is_empty() {
            return Err(err(name, "no artifact to download"));
        }
        for a in &tool.artifact {
            check_artifact(tool, a)?;
        }
        // Zip files (wheels) are unpacked with Python's `zipfile` module.
        let zips = tool
            .artifact
            .iter()
            .any(|a| a.url.as_deref().and_then(archive_kind) == Some(Archive::Zip));
        if zips && !tool.requires.iter().any(|r| r == "python") {
            return Err(err(
                name,
                "zip downloads need `requires = [\"python\"]` to unpack",
            ));
        }
    }
    for r in &tool.requires {
        if !all.contains_key(r) || r == name {
            return Err(err(name, format!("requires unknown tool `{r}`")));
        }
    }
    Ok(())
}

impl Catalog {
    /// The catalog shipped with this aibox.
    pub fn builtin() -> Result<Self, CatalogError> {
        Self::parse(CATALOG_TOML)
    }

    /// Parses and checks a catalog text.
    pub fn parse(text: &str) -> Result<Self, CatalogError> {
        let file: CatalogFile = toml::from_str(text).map_err(|e| err("<file>", e.to_string()))?;
        let mut tools = file.tool;
        for (name, tool) in &mut tools {
            tool.name.clone_from(name);
        }
        for tool in tools.values() {
            check_tool(tool, &tools)?;
        }
        Ok(Self { tools })
    }

    /// A tool by name.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }

    /// Every tool, by name.
    pub fn tools(&self) -> impl Iterator<Item = &Tool> {
        self.tools.values()
    }

    /// Mutable access, for tests that tamper with a digest.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Tool> {
        self.tools.get_mut(name)
    }

    /// The closure of `wanted` under `requires`, in install order: apt tools first, then
    /// downloads with every requirement before its dependents (ties by name). Unknown
    /// names are returned as the error.
    pub fn resolve<'a>(&'a self, wanted: &[&str]) -> Result<Vec<&'a Tool>, String> {
        let mut set = std::collections::BTreeSet::new();
        let mut stack: Vec<String> = wanted.iter().map(|s| (*s).to_owned()).collect();
        while let Some(n) = stack.pop() {
            let tool = self.tools.get(&n).ok_or_else(|| n.clone())?;
            if set.insert(n) {
                stack.extend(tool.requires.iter().cloned());
            }
        }
        let mut order: Vec<&Tool> = Vec::new();
        let mut pending: Vec<&Tool> = set.iter().filter_map(|n| self.tools.get(n)).collect();
        pending.sort_by_key(|t| (t.verification != Verification::AptSigned, t.name.clone()));
        while !pending.is_empty() {
            let pos = pending
                .iter()
                .position(|t| {
                    t.requires
                        .iter()
                        .all(|r| order.iter().any(|o| &o.name == r))
                })
                .unwrap_or(0);
            order.push(pending.remove(pos));
        }
        Ok(order)
    }
}

/// How a downloaded file is unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archive {
    /// A zip file (wheels too), unpacked with Python's `zipfile`.
    Zip,
    /// A gzip-compressed tar file.
    TarGz,
}

/// The archive kind of a download URL, by its (case-insensitive) suffix.
pub fn archive_kind(url: &str) -> Option<Archive> {
    let lower = url.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or_default();
    match name.rsplit_once('.') {
        Some((_, "whl" | "zip")) => Some(Archive::Zip),
        Some((stem, "gz")) if stem.rsplit_once('.').is_some_and(|(_, e)| e == "tar") => {
            Some(Archive::TarGz)
        }
        Some((_, "tgz")) => Some(Archive::TarGz),
        _ => None,
    }
}

/// The tool installed for a harness, if aibox installs one (editors bring their own).
pub fn harness_tool(h: aibox_config::Harness) -> Option<&'static str> {
    use aibox_config::Harness;
    match h {
        Harness::Claude => Some("claude-code"),
        Harness::Codex => Some("codex"),
        Harness::Gemini => Some("gemini-cli"),
        Harness::Opencode => Some("opencode"),
        Harness::Cursor | Harness::Vscode => None,
    }
}

/// Hex of the sha512 in an npm `integrity` string, or `None` if it is not one.
pub fn sha512_hex(integrity: &str) -> Option<String> {
    let b64 = integrity.strip_prefix("sha512-")?;
    let bytes = base64::engine::general_purpose::STANDARD_PAD_INDIFFERENT
        .decode(b64)
        .ok()?;
    (bytes.len() == 64).then(|| hex::encode(bytes))
}
