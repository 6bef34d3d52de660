//! Finding and strictly loading a project's configuration files.
//!
//! Loading runs in stages, each reporting every problem it finds with spans:
//! 1. TOML syntax (`toml_edit`'s span-preserving parser);
//! 2. structure against the generated JSON Schema (unknown keys, types, enum values,
//!    required keys), see `shape`;
//! 3. serde into the typed model;
//! 4. semantic checks the schema cannot express, see `validate`.

use camino::{Utf8Path, Utf8PathBuf};
use miette::{Diagnostic, SourceSpan};
use serde::de::DeserializeOwned;
use toml_edit::Document;

use crate::diag::{ConfigProblems, Problem, ProblemKind, Source, source};
use crate::model::{AiboxToml, LocalToml};
use crate::validate::{Checker, check_local, check_team};

/// File name of the committed configuration.
pub const AIBOX_TOML: &str = "aibox.toml";
/// File name of the personal, gitignored overlay.
pub const LOCAL_TOML: &str = ".aibox-local.toml";

/// A loaded project: its root and both configuration files.
#[derive(Debug, Clone)]
pub struct Project {
    /// Directory that holds `aibox.toml`.
    pub root: Utf8PathBuf,
    /// The committed configuration.
    pub config: AiboxToml,
    /// The personal overlay (empty when the file does not exist).
    pub local: LocalToml,
}

/// Errors of this crate.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum ConfigError {
    /// No `aibox.toml` between the start directory and the search boundary (the root of
    /// the git repository holding it, or the file system root); both are the project
    /// folder when it was named (`--project`, or an embedder's root) and holds none.
    #[error("{}", not_found_message(start, boundary))]
    #[diagnostic(
        code(aibox::config::not_found),
        help(
            "run `aibox init` to create one, or pass `--project DIR`; the search stops at the \
             root of the git repository so that it never writes into an enclosing project"
        )
    )]
    NotFound {
        /// Where the search started.
        start: Utf8PathBuf,
        /// Where it stopped (the repository root, or `/`).
        boundary: Utf8PathBuf,
    },
    /// A folder is where a configuration file should be (a folder named `aibox.toml`).
    #[error("{path} is a folder, where aibox's configuration file should be")]
    #[diagnostic(
        code(aibox::config::not_a_file),
        help("it must be a file: move or remove that folder (`mv {path} {path}.old`); {then}")
    )]
    NotAFile {
        /// The folder.
        path: Utf8PathBuf,
        /// What makes the file after that.
        then: &'static str,
    },
    /// A file could not be read.
    #[error("cannot read {path}")]
    #[diagnostic(
        code(aibox::config::io),
        help("check that the file exists and that you may read it")
    )]
    Io {
        /// The file.
        path: Utf8PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// One or more problems in the configuration files, each with its own code.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Invalid(ConfigProblems),
    /// A key path given to `get`/`set` is malformed or does not fit the document.
    #[error("invalid key path `{key}`: {reason}")]
    #[diagnostic(
        code(aibox::config::key_path),
        help("write a dotted path such as `container.name` or `ai.mcp.gateway.port`")
    )]
    KeyPath {
        /// The key path as given.
        key: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// `mcp add` of a name the file already has.
    #[error("{file} already has an MCP server named `{name}`")]
    #[diagnostic(
        code(aibox::config::duplicate_server),
        help("remove it first (`aibox mcp remove {name}`), or choose another name")
    )]
    DuplicateServer {
        /// The file.
        file: String,
        /// The server's name.
        name: String,
    },
}

impl ConfigError {
    /// [`ConfigError::NotAFile`] for the folder at `path`, with the way to make the file
    /// it stands in for: `aibox init` for `aibox.toml`, which never makes the personal
    /// file (`aibox config set --local` does).
    pub fn not_a_file(path: Utf8PathBuf) -> Self {
        let then = if path.file_name() == Some(crate::LOCAL_TOML) {
            "`aibox config set --local KEY VALUE` creates .aibox-local.toml afresh, or remove \
             the folder and go on without personal settings"
        } else {
            "for a new aibox.toml run `aibox init` after that"
        };
        Self::NotAFile { path, then }
    }

    /// Who can fix it: an unreadable file is the environment, everything else the user.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            Self::Io { .. } => crate::ErrorKind::Environment,
            Self::NotFound { .. }
            | Self::NotAFile { .. }
            | Self::Invalid(_)
            | Self::KeyPath { .. }
            | Self::DuplicateServer { .. } => crate::ErrorKind::User,
        }
    }

    /// Every configuration problem carried by this error (empty for other kinds).
    pub fn problems(&self) -> &[Problem] {
        match self {
            Self::Invalid(p) => p.problems(),
            _ => &[],
        }
    }
}

/// [`ConfigError::NotFound`]'s message: a search up the tree, or a named folder.
fn not_found_message(start: &Utf8Path, boundary: &Utf8Path) -> String {
    if start == boundary {
        format!("no aibox.toml in {start}: it is not an aibox project")
    } else {
        format!("no aibox.toml found in {start} or any parent directory up to {boundary}")
    }
}

/// Walks up from `start` to the nearest directory holding `aibox.toml`.
pub fn find_project_root(start: &Utf8Path) -> Result<Utf8PathBuf, ConfigError> {
    let mut dir = Some(start);
    let mut boundary = start;
    while let Some(d) = dir {
        boundary = d;
        let candidate = d.join(AIBOX_TOML);
        if candidate.is_file() {
            return Ok(d.to_owned());
        }
        // A folder of that name is a mistake to name, not a reason to search on (which
        // ends in "run `aibox init`", and init then finds it in the way).
        if candidate.is_dir() {
            return Err(ConfigError::not_a_file(candidate));
        }
        // The root of a git repository (`.git` directory, or file for worktrees and
        // submodules) ends the search: a project above it belongs to someone else.
        if d.join(".git").exists() {
            break;
        }
        dir = d.parent();
    }
    Err(ConfigError::NotFound {
        start: start.to_owned(),
        boundary: boundary.to_owned(),
    })
}

/// Loads `aibox.toml` and, when present, `.aibox-local.toml` from `root`.
///
/// Problems of both files are reported together; the overlay is also checked against
/// the team file (duplicate MCP server names, overlapping volumes).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let root = camino::Utf8Path::from_path(dir.path()).unwrap();
/// fs_err::write(root.join("aibox.toml"), "[container]\nname = \"demo\"\n").unwrap();
/// let project = aibox_config::load_project(root)?;
/// assert_eq!(project.config.container.name, "demo");
/// # Ok::<(), aibox_config::ConfigError>(())
/// ```
pub fn load_project(root: &Utf8Path) -> Result<Project, ConfigError> {
    load_project_with_text(root).map(|(project, _)| project)
}

/// Like [`load_project`], also handing back the text of `aibox.toml` as it was read, for
/// checks that scan the text (the line of a literal secret) without reading it again.
///
/// # Errors
/// As [`load_project`].
pub fn load_project_with_text(root: &Utf8Path) -> Result<(Project, String), ConfigError> {
    let path = root.join(AIBOX_TOML);
    TEAM_READS.with(|n| n.set(n.get() + 1));
    let text = read_team(root)?;
    let team = parse_team(&text, path.as_str());
    let local_path = root.join(LOCAL_TOML);
    if local_path.is_dir() {
        return Err(ConfigError::not_a_file(local_path));
    }
    let local = if local_path.is_file() {
        let local_text = read(&local_path)?;
        parse_local(&local_text, local_path.as_str(), team.as_ref().ok())
    } else {
        Ok(LocalToml::default())
    };
    match (team, local) {
        (Ok(config), Ok(local)) => Ok((
            Project {
                root: root.to_owned(),
                config,
                local,
            },
            text,
        )),
        (Err(a), Err(b)) => Err(ConfigError::Invalid(a.merge(b))),
        (Err(a), Ok(_)) | (Ok(_), Err(a)) => Err(ConfigError::Invalid(a)),
    }
}

thread_local! {
    /// How many times this thread read `aibox.toml` through the loader.
    static TEAM_READS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Test hook: how many times the calling thread has read `aibox.toml` through
/// [`load_project`] (or [`load_project_with_text`]). Per thread, so tests running in
/// parallel do not see each other's reads; the engine's tests hold `aibox apply` to one.
#[doc(hidden)]
pub fn team_config_reads() -> usize {
    TEAM_READS.with(std::cell::Cell::get)
}

/// The text of the project's `aibox.toml` at `root`.
///
/// # Errors
/// [`ConfigError::NotFound`] when the folder holds none (a named folder that is not a
/// project is the user's to fix, as when the search up from the working directory finds
/// none, not a file that failed to read); else as [`read_config_file`].
pub(crate) fn read_team(root: &Utf8Path) -> Result<String, ConfigError> {
    let path = root.join(AIBOX_TOML);
    if path
        .symlink_metadata()
        .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        return Err(ConfigError::NotFound {
            start: root.to_owned(),
            boundary: root.to_owned(),
        });
    }
    read(&path)
}

fn read(path: &Utf8Path) -> Result<String, ConfigError> {
    read_config_file(path, path.as_str())
}

/// Reads a configuration file as text; `name` labels diagnostics.
///
/// # Errors
/// [`ConfigError::Io`] when it cannot be read; a syntax problem at the first invalid
/// byte when it is not UTF-8 (see [`config_text`]).
pub fn read_config_file(path: &Utf8Path, name: &str) -> Result<String, ConfigError> {
    if path.is_dir() {
        return Err(ConfigError::not_a_file(path.to_owned()));
    }
    let bytes = fs_err::read(path).map_err(|source| ConfigError::Io {
        path: path.to_owned(),
        source,
    })?;
    config_text(bytes, name)
}

/// The text of a configuration file read as `bytes`; `name` labels diagnostics.
///
/// TOML is UTF-8: a file that is not is the user's to fix (often a Latin-1 character
/// typed by an editor), so it is a syntax problem at the first invalid byte, with its
/// line and column, not an unreadable file.
///
/// # Errors
/// [`ConfigError::Invalid`] with one `aibox::config::syntax` problem.
pub fn config_text(bytes: Vec<u8>, name: &str) -> Result<String, ConfigError> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let byte = bytes.get(at).copied().unwrap_or_default();
        let before = &bytes[..at];
        let line = memchr::memchr_iter(b'\n', before).count() + 1;
        let column = at
            - before
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        // The valid prefix is the same in the lossy text; the bad byte is one U+FFFD there.
        let text = String::from_utf8_lossy(bytes);
        let src = source(name, &text);
        let problem = Problem::new(
            ProblemKind::Syntax,
            &src,
            SourceSpan::from(at..at + '\u{FFFD}'.len_utf8()),
            format!(
                "{name} is not UTF-8 text: byte 0x{byte:02X} at line {line}, column {column} \
                 (byte offset {at})"
            ),
            "not UTF-8",
        )
        .help(
            "TOML files must be UTF-8: retype the character, or convert the file \
             (`iconv -f latin1 -t utf-8`) and save it as UTF-8",
        );
        ConfigError::Invalid(ConfigProblems::single(problem))
    })
}

/// Parses and validates the text of an `aibox.toml`; `name` labels diagnostics.
pub fn parse_aibox_toml(text: &str, name: &str) -> Result<AiboxToml, ConfigError> {
    parse_team(text, name).map_err(ConfigError::Invalid)
}

/// Parses and validates the text of a `.aibox-local.toml`; `name` labels diagnostics.
///
/// Checks that need the team file (duplicate server names) run in [`load_project`] and
/// [`parse_local_toml_with_team`].
pub fn parse_local_toml(text: &str, name: &str) -> Result<LocalToml, ConfigError> {
    parse_local(text, name, None).map_err(ConfigError::Invalid)
}

/// Like [`parse_local_toml`], also checking the overlay against the team configuration.
pub fn parse_local_toml_with_team(
    text: &str,
    name: &str,
    team: Option<&AiboxToml>,
) -> Result<LocalToml, ConfigError> {
    parse_local(text, name, team).map_err(ConfigError::Invalid)
}

const LOCAL_HINT: &str = "the personal overlay holds `[container]` `environment`, \
    `extra_volumes`, `extra_ca_certificates` and `container_name`, `[network]` `allow` and \
    `upstream_proxy`, and `[[mcp.servers]]`; team settings belong in aibox.toml";

fn parse_team(text: &str, name: &str) -> Result<AiboxToml, ConfigProblems> {
    let src = source(name, text);
    let doc = structure(text, &src, &crate::schema::AIBOX_SCHEMA, None)?;
    let cfg: AiboxToml = deserialize(text, &src)?;
    let mut checker = Checker::new(doc.as_item(), &src);
    check_team(&cfg, &mut checker);
    ConfigProblems::from_vec(checker.problems).map_or(Ok(cfg), Err)
}

fn parse_local(
    text: &str,
    name: &str,
    team: Option<&AiboxToml>,
) -> Result<LocalToml, ConfigProblems> {
    let doc = Document::parse(text)
        .map_err(|e| ConfigProblems::single(syntax(&e, &source(name, text))))?;
    // Diagnostics quote lines of the file: personal environment values (tokens, whatever
    // their names) are masked in the text they quote.
    let src = source(name, &mask_personal_env(text, doc.as_item()));
    let problems = crate::shape::check(
        &crate::schema::LOCAL_SCHEMA,
        doc.as_item(),
        &src,
        Some(LOCAL_HINT),
    );
    if let Some(problems) = ConfigProblems::from_vec(problems) {
        return Err(problems);
    }
    let local: LocalToml = deserialize(text, &src)?;
    let mut checker = Checker::new(doc.as_item(), &src);
    check_local(&local, team, &mut checker);
    ConfigProblems::from_vec(checker.problems).map_or(Ok(local), Err)
}

/// `text` with every value of `[container.environment]` replaced by `*`, byte for byte
/// (line breaks kept), so every span of `doc` still points at the same place.
fn mask_personal_env(text: &str, doc: &toml_edit::Item) -> String {
    let Some(env) = doc.get("container").and_then(|c| c.get("environment")) else {
        return text.to_owned();
    };
    let spans: Vec<std::ops::Range<usize>> = match env.as_table_like() {
        Some(table) => table.iter().filter_map(|(_, v)| v.span()).collect(),
        None => env.span().into_iter().collect(),
    };
    let mut bytes = text.as_bytes().to_vec();
    for span in spans {
        for b in bytes.get_mut(span).into_iter().flatten() {
            if !matches!(*b, b'\n' | b'\r') {
                *b = b'*';
            }
        }
    }
    // Whole UTF-8 sequences were replaced by ASCII, so the text is still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_owned())
}

/// Stages 1 and 2: TOML syntax, then the shape against the schema.
fn structure<'t>(
    text: &'t str,
    src: &Source,
    schema: &serde_json::Value,
    hint: Option<&str>,
) -> Result<Document<&'t str>, ConfigProblems> {
    let doc = Document::parse(text).map_err(|e| ConfigProblems::single(syntax(&e, src)))?;
    let problems = crate::shape::check(schema, doc.as_item(), src, hint);
    ConfigProblems::from_vec(problems).map_or(Ok(doc), Err)
}

fn deserialize<T: DeserializeOwned>(text: &str, src: &Source) -> Result<T, ConfigProblems> {
    // The schema walk has already accepted the structure, so a serde error here is a
    // value the schema could not express; report it as an invalid value.
    toml::from_str(text).map_err(|e| {
        let span = e.span().map_or(SourceSpan::from(0..0), Into::into);
        let message = e.message().trim();
        // serde names Rust integer types; say the range a person can act on.
        let help = [
            ("u16", u64::from(u16::MAX)),
            ("u32", u64::from(u32::MAX)),
            ("u64", u64::MAX),
        ]
        .into_iter()
        .find(|(ty, _)| message.ends_with(&format!("expected {ty}")))
        .map_or_else(
            || "fix the value so it matches the documented format".to_owned(),
            |(_, max)| format!("use a whole number from 0 to {max}"),
        );
        ConfigProblems::single(
            Problem::new(
                ProblemKind::InvalidValue,
                src,
                span,
                message.to_owned(),
                "here",
            )
            .help(help),
        )
    })
}

/// The byte range of the first `<<<<<<<` line of `text`, when a `>>>>>>>` line follows:
/// git's conflict markers (a line of `=` alone may be text in a multi-line string).
pub fn conflict_marker(text: &str) -> Option<std::ops::Range<usize>> {
    let is = |line: &str, m: &str| {
        let bare = line.trim_end_matches(['\n', '\r']);
        bare == m || bare.strip_prefix(m).is_some_and(|r| r.starts_with(' '))
    };
    let mut at = 0;
    let mut start = None;
    for line in text.split_inclusive('\n') {
        if start.is_none() && is(line, "<<<<<<<") {
            start = Some(at..at + line.trim_end_matches(['\n', '\r']).len());
        } else if start.is_some() && is(line, ">>>>>>>") {
            return start;
        }
        at += line.len();
    }
    None
}

pub(crate) fn syntax(e: &toml_edit::TomlError, src: &Source) -> Problem {
    if let Some(marker) = conflict_marker(src.inner()) {
        return Problem::new(
            ProblemKind::Syntax,
            src,
            SourceSpan::from(marker),
            "unresolved merge conflict: the file still holds git's conflict markers",
            "conflict marker",
        )
        .help(
            "resolve the conflict here (keep the lines you want, delete the `<<<<<<<`, \
             `=======` and `>>>>>>>` lines), then run `aibox apply`: it regenerates the files \
             it generates and aibox.lock, so for those take either side \
             (`git checkout --theirs FILE`) and let the apply write them again",
        );
    }
    let span = e.span().map_or(SourceSpan::from(0..0), Into::into);
    let message = e.message().trim();
    let first = message.lines().next().unwrap_or("invalid TOML");
    let quoted = e
        .span()
        .and_then(|r| src.inner().get(r))
        .filter(|t| !t.is_empty());
    let first = match quoted {
        Some(key) if first == "duplicate key" => format!("duplicate key `{key}`"),
        _ => first.to_owned(),
    };
    let first = first.as_str();
    let help = if first.contains("duplicate") {
        "a key or table header may appear only once; merge the two definitions"
    } else {
        "check quotes, brackets and `=` near the marked spot; strings need double quotes"
    };
    Problem::new(
        ProblemKind::Syntax,
        src,
        span,
        format!("invalid TOML: {first}"),
        first,
    )
    .help(help)
}
