//! Team MCP servers started with `uvx` (or `uv tool run`): which package and exact version
//! a command line runs ([`parse_uvx`]), and what the package index says of that release
//! ([`release_facts`]: when its files were uploaded, which Python it requires).
//!
//! The release's upload time is the resolver's cutoff: `uvx pkg==1.2.3` alone pins only
//! the package, and its floating dependencies (`mcp>=1.0`) resolve to whatever is newest
//! at start, which is how a server published against one major version dies on the next.
//! Resolved as of its own upload, it gets what its authors ran. The engine's `mcp_uvx`
//! turns that into a locked environment like a processkit server's (see [`crate::pydeps`]).

use serde::Deserialize;

use crate::error::{ProvenanceError, Result};
use crate::fetch::{HttpOptions, download_accepting};

/// The index asked when neither `UV_DEFAULT_INDEX` nor `UV_INDEX_URL` names another.
pub const DEFAULT_INDEX: &str = "https://pypi.org/simple/";

/// The JSON form of the simple API (PEP 691).
pub const ACCEPT: &str = "application/vnd.pypi.simple.v1+json";

/// What a server's command line asks uvx to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uvx {
    /// The command is neither `uvx` nor `uv tool run`: nothing to lock here.
    NotUvx,
    /// An exactly pinned package aibox can lock.
    Run(UvxRun),
    /// No exact version (`pkg`, `pkg@latest`, `pkg>=1`): registered as configured (the
    /// registration already asks to pin it).
    Unpinned(String),
    /// A `uvx` form aibox does not lock, and why (one sentence).
    NotLockable(String),
}

/// A lockable `uvx` command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UvxRun {
    /// The project name as written (`mcp-server-time`).
    pub package: String,
    /// The exact version (`2025.9.25`).
    pub version: String,
    /// The requirement the environment is resolved from: `name[extras]==version`.
    pub requirement: String,
    /// The executable uvx starts: the command after `--from`, else the package's name.
    pub command: String,
    /// The server's own arguments.
    pub args: Vec<String>,
}

/// Reads `command args` as uvx would: options `-q`/`--quiet`, at most one `--from`
/// (`--from=…`), then the command (the package, or with `--from` the executable) and the
/// server's own arguments. `uv tool run …` reads the same.
pub fn parse_uvx(command: &str, args: &[String]) -> Uvx {
    let program = command.rsplit('/').next().unwrap_or(command);
    let args = match program {
        "uvx" => args,
        "uv" if args.len() >= 2 && args[0] == "tool" && args[1] == "run" => &args[2..],
        _ => return Uvx::NotUvx,
    };
    let none = || Uvx::NotLockable("its `uvx` command names no package".to_owned());
    let mut from: Option<String> = None;
    let mut rest = args.iter();
    let first = loop {
        let Some(arg) = rest.next() else {
            return none();
        };
        let value = match arg.as_str() {
            "-q" | "--quiet" => continue,
            "--from" => match rest.next() {
                Some(v) => v.clone(),
                None => return Uvx::NotLockable("`--from` is not followed by a package".into()),
            },
            a if a.starts_with("--from=") => a["--from=".len()..].to_owned(),
            a if a.starts_with('-') => {
                return Uvx::NotLockable(format!(
                    "aibox locks `uvx <package>==<version>` and `uvx --from \
                     <package>==<version> <command>`, not the uvx option `{a}`"
                ));
            }
            _ => break arg,
        };
        if from.replace(value).is_some() {
            return Uvx::NotLockable("it names `--from` twice".to_owned());
        }
    };
    let (spec, command) = match from {
        Some(spec) => (spec, Some(first.clone())),
        None => (first.clone(), None),
    };
    let Some((name, extras, version)) = split_spec(&spec) else {
        return Uvx::NotLockable(format!(
            "`{spec}` is not an index package (`name==1.2.3` or `name@1.2.3`)"
        ));
    };
    let Pin::Exact(version) = version else {
        return Uvx::Unpinned(spec);
    };
    let command = command.unwrap_or_else(|| name.to_owned());
    if !valid_name(&command) {
        return Uvx::NotLockable(format!("`{command}` is not the name of an executable"));
    }
    Uvx::Run(UvxRun {
        package: name.to_owned(),
        version: version.to_owned(),
        requirement: format!("{name}{extras}=={version}"),
        command,
        args: rest.cloned().collect(),
    })
}

/// The version part of a package spec.
enum Pin<'a> {
    /// None, `@latest`, or a range.
    Floating,
    /// One exact version.
    Exact(&'a str),
}

/// `name`, `[extras]` and the version of `name[extras]==1.2.3` / `name@1.2.3`; `None`
/// for anything that is not an index package (a path, a URL, a bad name).
fn split_spec(spec: &str) -> Option<(&str, &str, Pin<'_>)> {
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(spec.len());
    let (name, rest) = spec.split_at(end);
    if !valid_name(name) {
        return None;
    }
    let (extras, rest) = if rest.starts_with('[') {
        let close = rest.find(']')?;
        rest.split_at(close + 1)
    } else {
        ("", rest)
    };
    let pin = if rest.is_empty() || rest == "@latest" {
        Pin::Floating
    } else if let Some(v) = rest.strip_prefix("==").or_else(|| rest.strip_prefix('@')) {
        let v = v.trim();
        if v.is_empty() || !v.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let exact = v
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'!' | b'-' | b'_'));
        if exact { Pin::Exact(v) } else { Pin::Floating }
    } else if rest.starts_with(['>', '<', '~', '!', '=']) {
        Pin::Floating
    } else {
        return None;
    };
    Some((name, extras, pin))
}

/// A distribution or executable name: letters, digits, `.`, `-`, `_`, starting and ending
/// with a letter or digit.
fn valid_name(name: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    alnum(name.chars().next())
        && alnum(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A project name as the simple API spells it (PEP 503): lowercase, each run of `-`,
/// `_` and `.` one `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The index `uv` resolves from: `UV_DEFAULT_INDEX`, else `UV_INDEX_URL`, else `PyPI`; with
/// a trailing `/`.
pub fn index_url(env: impl Fn(&str) -> Option<String>) -> String {
    let url = ["UV_DEFAULT_INDEX", "UV_INDEX_URL"]
        .into_iter()
        .find_map(|k| env(k).filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| DEFAULT_INDEX.to_owned());
    let url = url.trim().trim_end_matches('/');
    format!("{url}/")
}

/// `url` with the credentials of its authority (`https://user:token@host/…`, as a
/// private index is often given to uv) written as `***`, for every message that names it.
pub fn redact(url: &str) -> String {
    aibox_config::validate::without_userinfo(url)
}

/// `text` with the credentials of `url` (its `user:password`) written as `***` wherever
/// they appear: an error names the URL that failed, which after a redirect is not `url`
/// itself but carries the same credentials.
pub fn redact_in(text: &str, url: &str) -> String {
    match aibox_config::validate::userinfo(url) {
        Some(info) if !info.is_empty() => text.replace(info, "***"),
        _ => text.to_owned(),
    }
}

/// What the index says of one release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseFacts {
    /// The resolver's cutoff (RFC 3339, whole seconds): one second after the last of the
    /// release's files was uploaded, so every one of them is in (uv keeps only what was
    /// uploaded strictly before it). The newest, not the first: wheels for newer Pythons
    /// often come months after the release, and a cutoff before them would build the
    /// package from its source instead.
    pub cutoff: String,
    /// Its `requires-python`, when its files say.
    pub requires_python: Option<String>,
    /// Why its authors withdrew it, when every one of its files is yanked (PEP 592; the
    /// reason may be empty). uv still installs a yanked release pinned with `==`.
    pub yanked: Option<String>,
}

#[derive(Deserialize)]
struct Project {
    files: Vec<File>,
}

#[derive(Deserialize)]
struct File {
    filename: String,
    #[serde(rename = "upload-time")]
    upload_time: Option<String>,
    #[serde(rename = "requires-python")]
    requires_python: Option<String>,
    /// `false`, `true` or the reason (PEP 592).
    #[serde(default)]
    yanked: serde_json::Value,
}

impl File {
    /// The reason it was yanked (empty when none was given); `None` when it was not.
    fn yanked(&self) -> Option<String> {
        match &self.yanked {
            serde_json::Value::Bool(true) => Some(String::new()),
            serde_json::Value::String(reason) => Some(reason.trim().to_owned()),
            _ => None,
        }
    }
}

/// The version in a distribution's file name: a wheel's second `-` field, an sdist's text
/// after its last `-`; `None` for other files (Windows installers, eggs).
fn file_version(filename: &str) -> Option<&str> {
    if let Some(stem) = filename.strip_suffix(".whl") {
        return stem.split('-').nth(1);
    }
    let stem = [".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar"]
        .iter()
        .find_map(|ext| filename.strip_suffix(ext))?;
    stem.rsplit_once('-').map(|(_, v)| v)
}

/// Two versions compared as PEP 440 compares them in `==`: lowercase, leading zeros of
/// numeric parts dropped (`2025.09.25` is `2025.9.25`), and trailing zero parts of the
/// release too (`2025.9.25.0` and `1.0` are `2025.9.25` and `1`).
fn same_version(a: &str, b: &str) -> bool {
    let norm = |v: &str| -> Vec<String> {
        let mut parts: Vec<String> = v
            .trim_start_matches(['v', 'V'])
            .split('.')
            .map(|p| {
                p.parse::<u64>()
                    .map_or_else(|_| p.to_ascii_lowercase(), |n| n.to_string())
            })
            .collect();
        while parts.len() > 1 && parts.last().is_some_and(|p| p == "0") {
            parts.pop();
        }
        parts
    };
    norm(a) == norm(b)
}

/// The facts of `version` in a simple-API JSON answer; `Ok(None)` when the index has no
/// file of it.
pub fn parse_project(
    json: &[u8],
    version: &str,
) -> std::result::Result<Option<ReleaseFacts>, String> {
    let project: Project = serde_json::from_slice(json)
        .map_err(|e| format!("the index's answer is not the simple API's JSON: {e}"))?;
    let files: Vec<&File> = project
        .files
        .iter()
        .filter(|f| file_version(&f.filename).is_some_and(|v| same_version(v, version)))
        .collect();
    if files.is_empty() {
        return Ok(None);
    }
    let mut newest = 0;
    for f in &files {
        let time = f.upload_time.as_deref().ok_or_else(|| {
            format!(
                "the index gives no upload time for `{}` (PEP 700), so the release \
                 cannot be dated",
                f.filename
            )
        })?;
        let secs = crate::time::parse_rfc3339(time).ok_or_else(|| {
            format!(
                "the index's upload time `{time}` of `{}` is not a UTC time",
                f.filename
            )
        })?;
        newest = newest.max(secs);
    }
    let requires_python = files
        .iter()
        .find_map(|f| {
            f.requires_python
                .as_deref()
                .filter(|r| !r.trim().is_empty())
        })
        .map(|r| r.trim().to_owned());
    let yanked = files
        .iter()
        .map(|f| f.yanked())
        .collect::<Option<Vec<String>>>()
        .map(|reasons| {
            reasons
                .into_iter()
                .find(|r| !r.is_empty())
                .unwrap_or_default()
        });
    Ok(Some(ReleaseFacts {
        cutoff: crate::time::rfc3339(newest + 1),
        requires_python,
        yanked,
    }))
}

/// Asks `index` (a simple-API base URL ending in `/`) about `package` `version`.
/// `Ok(None)`: the index has no such project (404) or no file of that version.
pub fn release_facts(
    index: &str,
    package: &str,
    version: &str,
    opts: &HttpOptions,
) -> Result<Option<ReleaseFacts>> {
    let url = format!("{index}{}/", normalize(package));
    let answer = match download_accepting(&url, ACCEPT, opts) {
        Ok(answer) => answer,
        Err(ProvenanceError::HttpStatus { status: 404, .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    parse_project(&answer.bytes, version).map_err(|reason| ProvenanceError::Http { url, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    fn run(command: &str, a: &[&str]) -> UvxRun {
        match parse_uvx(command, &args(a)) {
            Uvx::Run(r) => r,
            other => panic!("{command} {a:?}: {other:?}"),
        }
    }

    #[test]
    fn reads_the_forms_uvx_accepts() {
        let r = run(
            "uvx",
            &["mcp-server-time==2025.9.25", "--local-timezone=UTC"],
        );
        assert_eq!(
            (
                r.package.as_str(),
                r.version.as_str(),
                r.requirement.as_str()
            ),
            ("mcp-server-time", "2025.9.25", "mcp-server-time==2025.9.25")
        );
        assert_eq!(r.command, "mcp-server-time");
        assert_eq!(r.args, ["--local-timezone=UTC"]);
        let r = run("/usr/local/bin/uvx", &["-q", "mcp-server-fetch@2025.4.7"]);
        assert_eq!(
            (r.requirement.as_str(), r.args.len()),
            ("mcp-server-fetch==2025.4.7", 0)
        );
        let r = run(
            "uvx",
            &["--from", "Some_Pkg[cli]==1.0.0rc1", "some-cmd", "serve"],
        );
        assert_eq!(r.requirement, "Some_Pkg[cli]==1.0.0rc1");
        assert_eq!(
            (r.command.as_str(), r.args.as_slice()),
            ("some-cmd", &args(&["serve"])[..])
        );
        let r = run("uv", &["tool", "run", "--from=tool==2.0", "tool-mcp"]);
        assert_eq!(
            (r.requirement.as_str(), r.command.as_str()),
            ("tool==2.0", "tool-mcp")
        );
    }

    #[test]
    fn unpinned_and_unreadable_forms_are_named() {
        for (a, want) in [
            (&["pkg"][..], "pkg"),
            (&["pkg@latest"], "pkg@latest"),
            (&["pkg>=1.0"], "pkg>=1.0"),
            (&["pkg==1.*"], "pkg==1.*"),
            (&["--from", "pkg~=1.2", "cmd"], "pkg~=1.2"),
        ] {
            assert_eq!(
                parse_uvx("uvx", &args(a)),
                Uvx::Unpinned(want.to_owned()),
                "{a:?}"
            );
        }
        for (a, why) in [
            (&[][..], "names no package"),
            (&["--with", "x", "pkg==1"], "`--with`"),
            (&["--python", "3.12", "pkg==1"], "`--python`"),
            (&["--from"], "not followed"),
            (&["--from", "a==1", "--from", "b==1", "c"], "twice"),
            (
                &["git+https://example.invalid/x.git"],
                "not an index package",
            ),
            (&["./local-pkg"], "not an index package"),
            (
                &["--from", "pkg==1", "bad/cmd"],
                "not the name of an executable",
            ),
        ] {
            match parse_uvx("uvx", &args(a)) {
                Uvx::NotLockable(m) => assert!(m.contains(why), "{a:?}: {m}"),
                other => panic!("{a:?}: {other:?}"),
            }
        }
        assert_eq!(parse_uvx("npx", &args(&["pkg@1.0.0"])), Uvx::NotUvx);
        assert_eq!(parse_uvx("uv", &args(&["run", "x.py"])), Uvx::NotUvx);
    }

    #[test]
    fn names_and_indexes_as_uv_spells_them() {
        assert_eq!(normalize("Some_Pkg..Name"), "some-pkg-name");
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(index_url(env(&[])), DEFAULT_INDEX);
        assert_eq!(
            index_url(env(&[("UV_INDEX_URL", "https://mirror.example/simple")])),
            "https://mirror.example/simple/"
        );
        assert_eq!(
            index_url(env(&[
                ("UV_INDEX_URL", "https://old.example/simple"),
                ("UV_DEFAULT_INDEX", "https://new.example/pypi/simple/"),
            ])),
            "https://new.example/pypi/simple/"
        );
    }

    #[test]
    fn credentials_in_an_index_url_are_never_shown() {
        assert_eq!(
            redact("https://me:fake-token@pypi.corp.example/simple/mcp/"),
            "https://***@pypi.corp.example/simple/mcp/"
        );
        assert_eq!(
            redact("https://pypi.org/simple/"),
            "https://pypi.org/simple/"
        );
        assert_eq!(
            redact("https://pypi.org/simple/a@b/"),
            "https://pypi.org/simple/a@b/"
        );
        assert_eq!(redact("not a url"), "not a url");
        let index = "https://me:fake-token@pypi.corp.example/simple/";
        assert_eq!(
            redact_in(
                "download of https://me:fake-token@pypi.corp.example/pypi/simple/x/ failed",
                index
            ),
            "download of https://***@pypi.corp.example/pypi/simple/x/ failed"
        );
        assert_eq!(
            redact_in("nothing secret", "https://pypi.org/simple/"),
            "nothing secret"
        );
    }

    #[test]
    fn file_versions_of_real_file_names() {
        for (file, v) in [
            (
                "mcp_server_time-2025.9.25-py3-none-any.whl",
                Some("2025.9.25"),
            ),
            ("mcp_server_time-2025.9.25.tar.gz", Some("2025.9.25")),
            ("PyYAML-3.10.zip", Some("3.10")),
            ("PyYAML-5.1.1-cp27-cp27m-win32.whl", Some("5.1.1")),
            ("PyYAML-3.10.win32-py2.7.exe", None),
        ] {
            assert_eq!(file_version(file), v, "{file}");
        }
        assert!(same_version("2025.09.25", "2025.9.25"));
        assert!(same_version("2025.9.25.0", "2025.9.25"));
        assert!(same_version("1", "1.0.0"));
        assert!(!same_version("5.1", "5.1.1"));
        assert!(!same_version("1.0rc1", "1.0"));
    }
}
