//! Install records: the lock's `[processkit]` section and the live marker
//! `context/.processkit-provenance.toml`, which also carries the per-file manifest
//! (project path → SHA-256) of everything installed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::digest::Sha256;
use crate::error::{ProvenanceError, Result};
use crate::source::Verification;
use crate::table::{PathTable, SharedPathTable};

/// Project path of the live marker.
pub const MARKER_PATH: &str = "context/.processkit-provenance.toml";
/// Project directory of the per-version snapshots.
pub const SNAPSHOT_DIR: &str = "context/templates/processkit";
/// The intent record of an apply in progress ([`Intent`]), root-relative: while it exists
/// an apply was interrupted (or is running), and the install is half done until the next
/// `aibox apply` finishes it. Its one home; the engine, which writes it, names it from here.
pub const INTENT_PATH: &str = ".aibox/pending-processkit.toml";
/// The marker schema this crate writes.
pub const MARKER_SCHEMA: u32 = 1;

/// `aibox.lock [processkit]`: what is installed, with a concrete version and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcesskitLock {
    /// Source as configured.
    pub source: String,
    /// Concrete version; never `latest`.
    pub version: String,
    /// Content path inside the source, when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_path: Option<String>,
    /// Digest of the release archive (or directory listing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_asset_sha256: Option<Sha256>,
    /// How the digest was established at install time.
    #[serde(default = "unverified")]
    pub verification: Verification,
    /// RFC 3339 time of the install; unchanged while nothing else changes.
    pub installed_at: String,
    /// The reference-compatible `v2:` fingerprint (spec §14).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processkit_install_hash: Option<String>,
}

fn unverified() -> Verification {
    Verification::Unverified
}

impl ProcesskitLock {
    /// Reads `[processkit]` from an `aibox.lock` file; `Ok(None)` when the file or the
    /// section is absent or the version is `unset`.
    pub fn read_from_lock_file(path: &Path) -> Result<Option<Self>> {
        let text = match fs_err::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ProvenanceError::io("read", path, e)),
        };
        let bad = |reason: String| ProvenanceError::Record {
            path: path.display().to_string(),
            reason,
        };
        let mut table: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let Some(section) = table.remove("processkit") else {
            return Ok(None);
        };
        let lock: Self = section
            .try_into()
            .map_err(|e: toml::de::Error| bad(e.to_string()))?;
        Ok((lock.version != "unset").then_some(lock))
    }
}

thread_local! {
    static MARKER_PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many install markers this thread has parsed ([`Marker::parse`]). A command reads
/// the marker a fixed number of times whatever the size of the release; the engine's
/// tests hold `skill list` and `doctor` to that (reading it once per skill made both
/// quadratic in the number of skills).
pub fn marker_parses() -> usize {
    MARKER_PARSES.with(std::cell::Cell::get)
}

/// `[install]` of the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerInstall {
    /// Installed version.
    pub processkit_version: String,
    /// Source as configured.
    pub processkit_source: String,
    /// RFC 3339 install time.
    pub installed_at: String,
    /// aibox version that installed it.
    pub cli_version: String,
    /// Selected skills, dependencies included.
    #[serde(default)]
    pub skills: Vec<String>,
    /// Skills installed only because selected skills `use` them: name → those skills
    /// (what `aibox skill list` shows as "dependency of").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dependencies: BTreeMap<String, Vec<String>>,
}

/// `[manifest]` of the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerManifest {
    /// Skills in `context/skills/processkit/` of the release.
    pub skill_count: usize,
    /// Files directly in `context/schemas/`.
    pub schema_count: usize,
    /// Files directly in `context/processes/`.
    pub process_count: usize,
    /// Files directly in `context/state-machines/`.
    pub state_machine_count: usize,
    /// Digest of the release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_asset_sha256: Option<Sha256>,
    /// How it was verified.
    pub verification: Verification,
    /// `v2:` fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_hash: Option<String>,
    /// Digest of the snapshot `context/templates/processkit/<version>/`: the SHA-256 of
    /// the `sha256sum`-style listing of every release file (`source::tree_digest`), so
    /// the integrity check sees an edit there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_sha256: Option<Sha256>,
}

/// The live marker with the per-file manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// Always [`MARKER_SCHEMA`].
    pub schema_version: u32,
    /// Install identity.
    pub install: MarkerInstall,
    /// Counts and digests.
    pub manifest: MarkerManifest,
    /// Installer-owned files: project path → SHA-256 as installed (compact: one entry
    /// per installed file, see [`PathTable`]).
    #[serde(default)]
    pub files: PathTable<Sha256>,
    /// User-owned files (agent-mutable settings, seed `AGENTS.md`): tracked, never
    /// overwritten, never reported as modified.
    #[serde(default)]
    pub user_files: PathTable<Sha256>,
}

impl Marker {
    /// Renders the marker (deterministic: sorted tables).
    pub fn render(&self) -> String {
        fn table(t: &PathTable<Sha256>) -> impl Iterator<Item = (&str, Sha256)> + Clone {
            t.iter().map(|(path, digest)| (path, *digest))
        }
        render_marker(
            self.schema_version,
            &self.install,
            &self.manifest,
            &table(&self.files),
            &table(&self.user_files),
        )
    }

    /// Reads the marker of a project; `None` when missing, unparseable or of an unknown
    /// schema (it is rewritten on the next apply, never an error).
    pub fn read(project_root: &Path) -> Option<Self> {
        Self::read_file(&project_root.join(MARKER_PATH), None)
            .ok()
            .flatten()
    }

    /// The version the marker of a project records as installed, read from the marker's
    /// head alone (the lines before its per-file tables) for callers that need nothing
    /// else; `None` like [`Self::read`].
    pub fn installed_version(project_root: &Path) -> Option<String> {
        use std::io::BufRead as _;
        #[derive(Deserialize)]
        struct Head {
            schema_version: u32,
            install: Install,
        }
        #[derive(Deserialize)]
        struct Install {
            processkit_version: String,
        }
        let file = fs_err::File::open(project_root.join(MARKER_PATH)).ok()?;
        let mut head = String::new();
        for line in lines_of(file).lines() {
            let line = line.ok()?;
            if matches!(line.trim(), "[files]" | "[user_files]") {
                break;
            }
            head.push_str(&line);
            head.push('\n');
        }
        match toml::from_str::<Head>(&head) {
            Ok(h) => (h.schema_version == MARKER_SCHEMA).then_some(h.install.processkit_version),
            // Another shape (tables first, dotted keys): the whole marker decides.
            Err(_) => Self::read(project_root).map(|m| m.install.processkit_version),
        }
    }

    /// The marker file at `path`, read a line at a time (its text is never held whole
    /// when it has the plain shape), and the SHA-256 of its bytes; the marker is `None`
    /// when unparseable or of an unknown schema.
    ///
    /// # Errors
    /// The file cannot be read, or is not UTF-8.
    pub fn read_digested(path: &Path) -> std::io::Result<(Sha256, Option<Self>)> {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        let marker = Self::read_file(path, Some(&mut hasher))?;
        Ok((Sha256::from_bytes(hasher.finalize().into()), marker))
    }

    /// [`Self::read_digested`], hashing only into `hasher` when there is one.
    fn read_file(
        path: &Path,
        mut hasher: Option<&mut sha2::Sha256>,
    ) -> std::io::Result<Option<Self>> {
        use sha2::Digest as _;
        let mut reader = lines_of(fs_err::File::open(path)?);
        let split = split_tables_read(&mut reader, hasher.as_deref_mut())?;
        if let Some(plain) = split.and_then(Self::from_split) {
            MARKER_PARSES.with(|n| n.set(n.get() + 1));
            return Ok(plain.filter(|m| m.schema_version == MARKER_SCHEMA));
        }
        // Another shape: the whole text, through the TOML parser.
        let text = fs_err::read_to_string(path)?;
        if let Some(hasher) = hasher {
            *hasher = sha2::Sha256::new_with_prefix(text.as_bytes());
        }
        Ok(Self::parse(&text))
    }

    /// Parses a marker text; `None` when unparseable or of an unknown schema. The two
    /// per-file tables are read line by line when they have the plain shape
    /// [`Self::render`] gives them (see `split_tables`); anything else is parsed as
    /// TOML, with the same result.
    pub fn parse(text: &str) -> Option<Self> {
        MARKER_PARSES.with(|n| n.set(n.get() + 1));
        let marker = match split_tables(text).and_then(Self::from_split) {
            Some(plain) => plain?,
            None => Self::parse_toml(text)?,
        };
        (marker.schema_version == MARKER_SCHEMA).then_some(marker)
    }

    /// The marker of a plain split: `Some(None)` when its head does not parse, `None`
    /// when the head defines the tables too (dotted keys, a sub-table), which the TOML
    /// parser decides the meaning of, from the whole text.
    #[allow(clippy::option_option)] // the callers read the whole text on `None` only
    fn from_split(split: SplitMarker) -> Option<Option<Self>> {
        let Ok(head) = toml::from_str::<MarkerHead>(&split.head) else {
            return Some(None);
        };
        if head.files.is_some() || head.user_files.is_some() {
            return None;
        }
        Some(Some(Self {
            schema_version: head.schema_version,
            install: head.install,
            manifest: head.manifest,
            files: split.files,
            user_files: split.user_files,
        }))
    }

    /// The whole text through the TOML parser.
    fn parse_toml(text: &str) -> Option<Self> {
        toml::from_str(text).ok()
    }
}

/// First line of the marker.
const MARKER_HEADER: &str = "# aibox-managed install marker; do not edit\n";

/// The text of a marker with these parts, its two per-file tables given as sorted
/// `(path, digest)` entries: what [`Marker::render`] writes, without a [`Marker`] (a
/// plan renders its tables from its decisions, not from maps copied out of them). The
/// tables are written line by line straight into the text when every path is a plain
/// quoted key (`plain_key`); only the small rest goes through the TOML serializer,
/// whose working copy of a 17,000-entry table (a 10x install) was several MB more than
/// the text. The bytes are the serializer's either way (tests hold them equal).
pub fn render_marker<'a>(
    schema_version: u32,
    install: &MarkerInstall,
    manifest: &MarkerManifest,
    files: &(impl Iterator<Item = (&'a str, Sha256)> + Clone),
    user_files: &(impl Iterator<Item = (&'a str, Sha256)> + Clone),
) -> String {
    let parts = Head {
        schema_version,
        install,
        manifest,
    };
    let Some(head) = parts.plain(files, user_files) else {
        return parts.serialized(files, user_files);
    };
    // `"path" = "<64 hex>"` and a line end: 72 bytes besides the path; sized once, so
    // the text never holds a doubled buffer.
    let entries: usize = files
        .clone()
        .chain(user_files.clone())
        .map(|(k, _)| k.len() + 72)
        .sum();
    let mut out = Vec::with_capacity(head.len() + entries + 32);
    // Writing into a `Vec` cannot fail.
    let _ = write_tables(&mut out, &head, &mut files.clone(), &mut user_files.clone());
    String::from_utf8(out).unwrap_or_default()
}

/// Everything of a marker but its two per-file tables.
#[derive(Serialize)]
struct Head<'h> {
    schema_version: u32,
    install: &'h MarkerInstall,
    manifest: &'h MarkerManifest,
}

impl Head<'_> {
    /// The marker's header and head, rendered by the TOML serializer, when its tables
    /// can be written line by line (every path a [`plain_key`]); `None` when the whole
    /// marker must go through the serializer.
    fn plain<'a>(
        &self,
        files: &(impl Iterator<Item = (&'a str, Sha256)> + Clone),
        user_files: &(impl Iterator<Item = (&'a str, Sha256)> + Clone),
    ) -> Option<String> {
        let plain = files
            .clone()
            .chain(user_files.clone())
            .all(|(k, _)| plain_key(k));
        let head = toml::to_string(self).ok()?;
        plain.then(|| format!("{MARKER_HEADER}{head}"))
    }

    /// The whole marker through the TOML serializer (some path is not a [`plain_key`]).
    fn serialized<'a>(
        &self,
        files: &(impl Iterator<Item = (&'a str, Sha256)> + Clone),
        user_files: &(impl Iterator<Item = (&'a str, Sha256)> + Clone),
    ) -> String {
        let marker = Marker {
            schema_version: self.schema_version,
            install: self.install.clone(),
            manifest: self.manifest.clone(),
            files: files.clone().collect(),
            user_files: user_files.clone().collect(),
        };
        with_header(MARKER_HEADER, &marker)
    }
}

/// Writes a marker whose head is `head` (from [`Head::plain`]) and whose tables are
/// `files` and `user_files`, a line per entry.
fn write_tables<'a, 't>(
    out: &mut dyn std::io::Write,
    head: &str,
    files: &'t mut dyn Iterator<Item = (&'a str, Sha256)>,
    user_files: &'t mut dyn Iterator<Item = (&'a str, Sha256)>,
) -> std::io::Result<()> {
    out.write_all(head.as_bytes())?;
    let tables: [(&str, &'t mut dyn Iterator<Item = (&'a str, Sha256)>); 2] =
        [("files", files), ("user_files", user_files)];
    for (name, table) in tables {
        write!(out, "\n[{name}]\n")?;
        for (path, digest) in table {
            write_entry(out, path, digest)?;
        }
    }
    Ok(())
}

/// Writes one `"path" = "<64 hex>"` line of a per-file table.
fn write_entry(out: &mut dyn std::io::Write, path: &str, digest: Sha256) -> std::io::Result<()> {
    out.write_all(b"\"")?;
    out.write_all(path.as_bytes())?;
    out.write_all(b"\" = \"")?;
    out.write_all(&digest.hex_digits())?;
    out.write_all(b"\"\n")
}

/// The install marker a plan writes, held as its parts: the head as text, the two
/// tables as the decisions' own (shared) paths and digests. The text has a line per
/// installed file (1.25 MB at ten times processkit's size, held until the apply's end
/// when it was a planned file's bytes); here it is written straight into the file
/// (`Render::write_to`), and its digest and size are known up front, from one pass
/// through a hasher.
#[derive(Clone, PartialEq, Eq)]
pub struct MarkerText {
    body: MarkerBody,
    sha256: Sha256,
    size: u64,
}

/// A marker table's entry: a project path (shared with the plan's) and its digest.
pub(crate) type Recorded = (Arc<str>, Sha256);

#[derive(Clone, PartialEq, Eq)]
enum MarkerBody {
    /// Head and tables (every path a plain key).
    Tables {
        head: String,
        files: Vec<(Arc<str>, Sha256)>,
        user_files: Vec<(Arc<str>, Sha256)>,
    },
    /// The serializer's whole text (some path needs quoting or escapes: never seen).
    Whole(String),
}

impl Default for MarkerText {
    /// An empty text.
    fn default() -> Self {
        Self {
            body: MarkerBody::Whole(String::new()),
            sha256: Sha256::of(b""),
            size: 0,
        }
    }
}

impl std::fmt::Debug for MarkerText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MarkerText")
            .field("sha256", &self.sha256)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl MarkerText {
    /// The marker with these parts; `files` and `user_files` sorted by path.
    #[must_use]
    pub fn new(
        schema_version: u32,
        install: &MarkerInstall,
        manifest: &MarkerManifest,
        files: Vec<(Arc<str>, Sha256)>,
        user_files: Vec<(Arc<str>, Sha256)>,
    ) -> Self {
        fn entries(t: &[(Arc<str>, Sha256)]) -> impl Iterator<Item = (&str, Sha256)> + Clone {
            t.iter().map(|(p, d)| (&**p, *d))
        }
        let parts = Head {
            schema_version,
            install,
            manifest,
        };
        let head = parts.plain(&entries(&files), &entries(&user_files));
        let body = match head {
            Some(head) => MarkerBody::Tables {
                head,
                files,
                user_files,
            },
            None => MarkerBody::Whole(parts.serialized(&entries(&files), &entries(&user_files))),
        };
        let mut text = Self {
            body,
            sha256: Sha256::from_bytes([0; 32]),
            size: 0,
        };
        let mut sink = DigestSink::default();
        // Hashing cannot fail.
        let _ = aibox_config::Render::write_to(&text, &mut sink);
        let digest = sha2::Digest::finalize(sink.hasher);
        (text.sha256, text.size) = (Sha256::from_bytes(digest.into()), sink.size);
        text
    }

    /// SHA-256 of the text.
    #[must_use]
    pub fn sha256(&self) -> Sha256 {
        self.sha256
    }

    /// The `[files]` and `[user_files]` tables it is written from (sorted by path), when
    /// it is (every path a plain key).
    pub(crate) fn tables(&self) -> Option<[&[Recorded]; 2]> {
        match &self.body {
            MarkerBody::Tables {
                files, user_files, ..
            } => Some([files, user_files]),
            MarkerBody::Whole(_) => None,
        }
    }
}

/// Written, sized and rendered whole through [`aibox_config::Render`].
impl aibox_config::Render for MarkerText {
    fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        match &self.body {
            MarkerBody::Whole(text) => out.write_all(text.as_bytes()),
            MarkerBody::Tables {
                head,
                files,
                user_files,
            } => write_tables(
                out,
                head,
                &mut files.iter().map(|(p, d)| (&**p, *d)),
                &mut user_files.iter().map(|(p, d)| (&**p, *d)),
            ),
        }
    }

    fn sha256(&self) -> [u8; 32] {
        *self.sha256.as_bytes()
    }

    fn size(&self) -> u64 {
        self.size
    }
}

/// A writer that only hashes and counts what it is given.
#[derive(Default)]
struct DigestSink {
    hasher: sha2::Sha256,
    size: u64,
}

impl std::io::Write for DigestSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use sha2::Digest as _;
        self.hasher.update(buf);
        self.size += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Whether the TOML serializer writes `key` as a plain double-quoted key with no escape:
/// not a bare key (ASCII letters, digits, `_`, `-` only), and nothing it would escape or
/// quote differently (quotes, backslashes, control characters); beyond ASCII only
/// letters and digits, to be safe. Every path aibox installs is one.
fn plain_key(key: &str) -> bool {
    let bare = key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    !key.is_empty()
        && !bare
        && key.chars().all(|c| {
            if c.is_ascii() {
                (c.is_ascii_graphic() || c == ' ') && !matches!(c, '"' | '\\' | '\'')
            } else {
                c.is_alphanumeric()
            }
        })
}

/// `value` as TOML after the comment line `header`. The header goes in place: a record
/// of a 10x install is over 1 MB, and a second buffer for it showed in a plan's peak.
fn with_header(header: &str, value: &impl Serialize) -> String {
    let mut text = toml::to_string(value).unwrap_or_default();
    text.insert_str(0, header);
    text
}

/// The marker without its per-file tables, for [`split_tables`]'s rest.
#[derive(Deserialize)]
struct MarkerHead {
    schema_version: u32,
    install: MarkerInstall,
    manifest: MarkerManifest,
    /// Present when the rest defines `files` itself (then the plain reading is not used).
    #[serde(default)]
    files: Option<toml::Value>,
    #[serde(default)]
    user_files: Option<toml::Value>,
}

/// A marker text split into its two per-file tables and the rest.
#[derive(Debug, PartialEq, Eq)]
struct SplitMarker {
    head: String,
    files: PathTable<Sha256>,
    user_files: PathTable<Sha256>,
}

/// Reads the marker's `[files]` and `[user_files]` tables line by line
/// ([`split_plain_tables`]), each value a digest. Why: the TOML parser first turns the
/// whole text into tokens, about seven times the text's size, and holds them with a
/// spanned tree of every entry: at 17,000 installed files (a 10x release) 12 MB more
/// memory for a 1.3 MB file, and every command that reads the marker (`apply`, `doctor`,
/// `skill list`, `mcp list`) paid it. `None` (parse it all as TOML instead) when the text
/// leaves the plain shape, a value is not a digest, or a path is given twice.
fn split_tables(text: &str) -> Option<SplitMarker> {
    let (head, [files, user_files]) = split_plain_tables(text, ["files", "user_files"])?;
    let table = |entries: Vec<(&str, &str)>| {
        let text = entries.iter().map(|(p, _)| p.len()).sum();
        let mut table = PathTable::with_capacity(entries.len(), text);
        for (path, hex) in entries {
            add_recorded(&mut table, path, hex)?;
        }
        Some(table)
    };
    Some(SplitMarker {
        head,
        files: table(files)?,
        user_files: table(user_files)?,
    })
}

/// Adds a plain table entry of the marker; `None` (read it all as TOML instead) when its
/// value is not a digest or its path was given before.
fn add_recorded(table: &mut PathTable<Sha256>, path: &str, hex: &str) -> Option<()> {
    let digest = Sha256::parse(hex, "the install marker").ok()?;
    // In order (as rendered) it is appended; a repeated path refuses the plain reading.
    if !table.push(path, digest) && table.insert(path, digest).is_some() {
        return None;
    }
    Some(())
}

/// [`split_tables`] from a reader, a line at a time, hashing every byte read into
/// `hasher` when there is one: the marker's text (3.8 MB at 30x processkit) is never held
/// beside its tables. `None` as soon as the text leaves the plain shape (the caller reads
/// it whole then); an error when a line is not UTF-8 or the reading fails.
fn split_tables_read(
    reader: &mut dyn std::io::BufRead,
    mut hasher: Option<&mut sha2::Sha256>,
) -> std::io::Result<Option<SplitMarker>> {
    use sha2::Digest as _;
    let mut lines = PlainLines::new(["files", "user_files"]);
    let mut tables = [PathTable::new(), PathTable::new()];
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if let Some(hasher) = hasher.as_deref_mut() {
            hasher.update(&line);
        }
        let text = std::str::from_utf8(&line)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        // As `str::lines` ends a line.
        let text = text.strip_suffix('\n').unwrap_or(text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let plain = match lines.line(text) {
            None => false,
            Some(None) => true,
            Some(Some((i, path, hex))) => add_recorded(&mut tables[i], path, hex).is_some(),
        };
        if !plain {
            return Ok(None);
        }
    }
    let [mut files, mut user_files] = tables;
    files.shrink_to_fit();
    user_files.shrink_to_fit();
    Ok(Some(SplitMarker {
        head: lines.head,
        files,
        user_files,
    }))
}

/// A record file (the marker, the stat cache) to read a line at a time, in large reads:
/// a 10x marker is 1.3 MB, which reads of 8 KiB took a few hundred calls for.
pub(crate) fn lines_of(file: fs_err::File) -> std::io::BufReader<fs_err::File> {
    std::io::BufReader::with_capacity(64 * 1024, file)
}

/// The plain `(key, value)` entries of each of N tables, borrowed from the text.
type PlainTables<'t, const N: usize> = [Vec<(&'t str, &'t str)>; N];

/// Splits a TOML text into the plain entries of the tables `names` and every other line
/// (the head, for the TOML parser), so that a large table of `"key" = "value"` lines (the
/// marker's per-file tables, a release's `PROVENANCE.toml` `[files]`) is read without the
/// TOML parser's tokens. `None` (parse it all as TOML instead) when the text leaves that
/// plain shape anywhere: a multi-line string, an array of tables, a table header seen
/// twice, or an entry line with escapes, a bare or literal key, a comment after the
/// value, or anything but a plain basic string as the value. Repeated keys are the
/// caller's to refuse.
pub(crate) fn split_plain_tables<'t, const N: usize>(
    text: &'t str,
    names: [&str; N],
) -> Option<(String, PlainTables<'t, N>)> {
    let mut lines = PlainLines::new(names);
    let mut tables: [Vec<(&str, &str)>; N] = std::array::from_fn(|_| Vec::new());
    // `lines` takes `\r\n` as a line end; a lone `\r` is the TOML parser's to judge.
    for line in text.lines() {
        if let Some((i, key, value)) = lines.line(line)? {
            tables[i].push((key, value));
        }
    }
    Some((lines.head, tables))
}

/// The reading of [`split_plain_tables`], a line at a time: which lines are the head
/// (kept, for the TOML parser) and which are entries of the tables `names`.
struct PlainLines<'n, const N: usize> {
    names: [&'n str; N],
    seen: [bool; N],
    /// The table the lines are in (`None`: the head).
    section: Option<usize>,
    /// Every line that is not one of the tables'.
    head: String,
}

impl<'n, const N: usize> PlainLines<'n, N> {
    fn new(names: [&'n str; N]) -> Self {
        Self {
            names,
            seen: [false; N],
            section: None,
            head: String::new(),
        }
    }

    /// Reads `line` (without its line end): `Some(Some((table, key, value)))` for an
    /// entry, `Some(None)` for a line of the head or a blank or comment line of a table,
    /// `None` when the text leaves the plain shape there.
    #[allow(clippy::option_option)] // three outcomes, read as such at both callers
    fn line<'l>(&mut self, line: &'l str) -> Option<Option<(usize, &'l str, &'l str)>> {
        // A multi-line string's delimiter, a lone `\r`, or an array of tables.
        if line.contains("\"\"\"") || line.contains("'''") || line.contains('\r') {
            return None;
        }
        let t = line.trim();
        if t.starts_with("[[") {
            return None;
        }
        if t.starts_with('[') {
            let table_index = self
                .names
                .iter()
                .position(|n| t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) == Some(*n));
            if let Some(i) = table_index {
                if std::mem::replace(&mut self.seen[i], true) {
                    return None;
                }
                self.section = Some(i);
                return Some(None);
            }
            self.section = None;
        }
        let Some(i) = self.section else {
            self.head.push_str(line);
            self.head.push('\n');
            return Some(None);
        };
        if t.is_empty() || t.starts_with('#') {
            return Some(None);
        }
        let (key, value) = plain_pair(t)?;
        Some(Some((i, key, value)))
    }
}

/// `"key" = "value"` (spaces around `=` allowed), neither with an escape, a quote or a
/// control character; `None` for any other shape.
fn plain_pair(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('"')?;
    let end = rest.find('"')?;
    let key = &rest[..end];
    let value = rest[end + 1..].trim_start().strip_prefix('=')?.trim();
    let value = value.strip_prefix('"')?.strip_suffix('"')?;
    let plain = |s: &str| !s.chars().any(|c| c == '\\' || c == '"' || c.is_control());
    (plain(key) && plain(value)).then_some((key, value))
}

/// One file an interrupted plan was about to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentWrite {
    /// Digest of the contents the plan writes.
    pub new: Sha256,
    /// Digest of the live file the plan saw (`None`: it was missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Sha256>,
}

/// The writes of an [`Intent`]: project path → [`IntentWrite`], in path order. A first
/// install writes every file of the release, and the record is held through planning's
/// memory peak: each path is the plan's own (shared with the release's file list, not a
/// copy), and the digest of a replaced live file is kept only for the writes that have
/// one (none in a first install). 48 bytes a write, where a [`PathTable`] of
/// [`IntentWrite`]s spent 134 (1.2 MB at 10x processkit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntentWrites {
    /// Each write's new digest.
    news: SharedPathTable<Sha256>,
    /// The live file's digest of the writes that replace one.
    befores: SharedPathTable<Sha256>,
}

impl IntentWrites {
    /// Number of writes.
    pub fn len(&self) -> usize {
        self.news.len()
    }

    /// Whether there is no write.
    pub fn is_empty(&self) -> bool {
        self.news.is_empty()
    }

    /// The write of `path`.
    pub fn get(&self, path: &str) -> Option<IntentWrite> {
        Some(IntentWrite {
            new: *self.news.get(path)?,
            before: self.befores.get(path).copied(),
        })
    }

    /// Every write in path order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, IntentWrite)> + '_ {
        self.news.iter().map(|(path, &new)| {
            let before = self.befores.get(path).copied();
            (path, IntentWrite { new, before })
        })
    }

    /// Every path in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.news.keys()
    }

    /// Appends the write of `path` when it sorts after every other one; `false`
    /// (nothing added) when it does not.
    pub fn push(&mut self, path: Arc<str>, write: IntentWrite) -> bool {
        if !self.news.push(Arc::clone(&path), write.new) {
            return false;
        }
        // After every write, so after every write's `before` too.
        if let Some(before) = write.before {
            self.befores.push(path, before);
        }
        true
    }

    /// Adds the write of `path` anywhere, or replaces the one there (reading a record,
    /// and tests; a plan appends in order with [`Self::push`]).
    pub fn insert(&mut self, path: &str, write: IntentWrite) {
        self.news.insert(path, write.new);
        match write.before {
            Some(before) => self.befores.insert(path, before),
            None => self.befores.remove(path),
        };
    }

    /// Gives back the spare room of a list built by pushing.
    pub fn shrink_to_fit(&mut self) {
        self.news.shrink_to_fit();
        self.befores.shrink_to_fit();
    }
}

impl Serialize for IntentWrites {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (path, write) in self.iter() {
            map.serialize_entry(path, &write)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for IntentWrites {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let entries = BTreeMap::<String, IntentWrite>::deserialize(deserializer)?;
        let mut writes = Self::default();
        for (path, write) in entries {
            writes.push(Arc::from(path), write);
        }
        Ok(writes)
    }
}

/// What an install plan is about to do, recorded (under `.aibox/`) before its first
/// write and dropped after the lock is written. The marker is written only after every
/// content file is durable, so after a kill the marker still names the base the plan
/// started from; with this record the next run re-plans exactly the interrupted plan
/// (same classification, same migration document, same timestamps) instead of mistaking
/// the files it already wrote for local edits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// Release being installed.
    pub version: String,
    /// Its digest.
    pub release_asset_sha256: Sha256,
    /// Digest of the marker text the plan started from (`None`: no marker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_marker_sha256: Option<Sha256>,
    /// Selected skills.
    pub skills: Vec<String>,
    /// The plan's time (install time, migration id).
    pub now: String,
    /// Every content file the plan writes: project path → digests (compact, see
    /// [`IntentWrites`]: a first install writes every file of the release).
    #[serde(default)]
    pub writes: IntentWrites,
    /// Every file the plan removes: project path → digest of the removed file.
    #[serde(default)]
    pub removals: PathTable<Sha256>,
    /// The record of the unfinished run this plan undoes (and, in it, of the one that
    /// run undid). Kept beside this plan's own: killed in turn, the next run still knows
    /// the first run's work that this one had not undone yet; with this plan's record
    /// alone, those files looked like local edits and stayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undoes: Option<Box<Intent>>,
}

impl Intent {
    /// Writes the record into `out`. As with the marker ([`render_marker`]), the
    /// per-file tables are written line by line when every path is a plain key (a write
    /// as an inline table, `"path" = { new = "…", before = "…" }`, which the TOML parser
    /// reads as the serializer's `[writes."path"]` tables), so the text (1.3 MB for a 10x
    /// first install) is never held whole; only the small rest goes through the
    /// serializer.
    pub fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        const HEADER: &str = "# aibox: processkit install in progress; do not edit\n";
        let plain = self
            .chain()
            .all(|i| i.writes.keys().chain(i.removals.keys()).all(plain_key));
        if !plain {
            return out.write_all(with_header(HEADER, self).as_bytes());
        }
        out.write_all(HEADER.as_bytes())?;
        let mut table = String::new();
        for intent in self.chain() {
            intent.write_tables(&table, out)?;
            table.push_str(if table.is_empty() {
                "undoes"
            } else {
                ".undoes"
            });
        }
        Ok(())
    }

    /// This record, then the one it undoes, and so on.
    pub fn chain(&self) -> impl Iterator<Item = &Self> + '_ {
        std::iter::successors(Some(self), |i| i.undoes.as_deref())
    }

    /// The record's head and tables under the table `prefix` (empty: the top level).
    fn write_tables(&self, prefix: &str, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        #[derive(Serialize)]
        struct Head<'a> {
            version: &'a str,
            release_asset_sha256: Sha256,
            #[serde(skip_serializing_if = "Option::is_none")]
            base_marker_sha256: Option<Sha256>,
            skills: &'a [String],
            now: &'a str,
        }
        let head = toml::to_string(&Head {
            version: &self.version,
            release_asset_sha256: self.release_asset_sha256,
            base_marker_sha256: self.base_marker_sha256,
            skills: &self.skills,
            now: &self.now,
        })
        .map_err(std::io::Error::other)?;
        let dot = if prefix.is_empty() { "" } else { "." };
        if !prefix.is_empty() {
            writeln!(out, "\n[{prefix}]")?;
        }
        out.write_all(head.as_bytes())?;
        write!(out, "\n[{prefix}{dot}writes]\n")?;
        for (path, w) in self.writes.iter() {
            out.write_all(b"\"")?;
            out.write_all(path.as_bytes())?;
            out.write_all(b"\" = { new = \"")?;
            out.write_all(&w.new.hex_digits())?;
            if let Some(before) = w.before {
                out.write_all(b"\", before = \"")?;
                out.write_all(&before.hex_digits())?;
            }
            out.write_all(b"\" }\n")?;
        }
        write!(out, "\n[{prefix}{dot}removals]\n")?;
        for (path, digest) in &self.removals {
            write_entry(out, path, *digest)?;
        }
        Ok(())
    }

    /// The record as text ([`Self::write_to`]).
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Writing into memory cannot fail, and every part written is UTF-8.
        let _ = self.write_to(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Parses a record; `None` when damaged (the next run then re-plans from the marker).
    pub fn parse(text: &str) -> Option<Self> {
        toml::from_str(text).ok()
    }
}

#[cfg(test)]
mod tests {
    //! The plain reading of the marker's tables against the TOML parser.

    use super::*;

    const D1: &str = "0e679d4b1ff22cc44e9a311578b0933f1bc34d873c5d93ef7d6b0f0b88b1572d";
    const D2: &str = "ea8ac5199b77d046958369c120fb01f627c9edab8021d1ec5e2eb973e00b8ed8";

    fn head() -> String {
        format!(
            "# aibox-managed install marker; do not edit\nschema_version = 1\n\n[install]\n\
             processkit_version = \"v1.0.0\"\nprocesskit_source = \"https://example.invalid/pk\"\n\
             installed_at = \"2026-01-01T00:00:00Z\"\ncli_version = \"0.1.0\"\n\
             skills = [\n  \"a\",\n  \"b\",\n]\n\n[manifest]\nskill_count = 2\nschema_count = 0\n\
             process_count = 0\nstate_machine_count = 0\nrelease_asset_sha256 = \"{D1}\"\n\
             verification = \"pinned\"\n"
        )
    }

    /// Both readings of `text` agree; returns the result and whether the plain one was
    /// used.
    fn both(text: &str) -> (Option<Marker>, bool) {
        let plain = split_tables(text).is_some();
        let parsed = Marker::parse(text);
        let reference = Marker::parse_toml(text).filter(|m| m.schema_version == MARKER_SCHEMA);
        assert_eq!(parsed, reference, "{text}");
        // Read from a file a line at a time: the same marker, and the text's digest.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("marker");
        fs_err::write(&file, text).unwrap();
        let (digest, read) = Marker::read_digested(&file).unwrap();
        assert_eq!(read, parsed, "{text}");
        assert_eq!(digest, Sha256::of(text.as_bytes()));
        (parsed, plain)
    }

    /// A marker file that is not UTF-8 is an error to read (the scan takes it for no
    /// marker), wherever the bad byte is.
    #[test]
    fn a_marker_file_that_is_not_utf8_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(MARKER_PATH);
        fs_err::create_dir_all(file.parent().unwrap()).unwrap();
        let entry = format!("\" = \"{D1}\"\n");
        for text in [
            [
                head().as_bytes(),
                b"[files]\n\"a",
                b"\xff",
                entry.as_bytes(),
            ]
            .concat(),
            [b"\xff".as_slice(), head().as_bytes()].concat(),
        ] {
            fs_err::write(&file, &text).unwrap();
            assert!(Marker::read_digested(&file).is_err());
            assert_eq!(Marker::read(dir.path()), None);
        }
    }

    #[test]
    fn a_rendered_marker_is_read_plainly_and_round_trips() {
        let mut files = PathTable::new();
        files.insert("context/INDEX.md", Sha256::parse(D1, "t").unwrap());
        files.insert("context/skills/a b/ü.md", Sha256::parse(D2, "t").unwrap());
        let mut user_files = PathTable::new();
        user_files.insert("AGENTS.md", Sha256::parse(D2, "t").unwrap());
        let marker = Marker::parse_toml(&format!("{}[files]\n", head()))
            .map(|m| Marker {
                files,
                user_files,
                ..m
            })
            .unwrap();
        let text = marker.render();
        let (parsed, plain) = both(&text);
        assert!(plain, "{text}");
        assert_eq!(parsed, Some(marker));
    }

    /// The hand-written tables are byte for byte what the TOML serializer writes, for
    /// empty tables, messy but plain paths, dependencies in `[install]`; a path that is
    /// not a plain key goes to the serializer whole. A plan's [`MarkerText`] writes the
    /// same bytes, and knows their digest and size before writing them.
    #[test]
    fn the_marker_renders_as_the_toml_serializer_does() {
        let d = |s: &str| Sha256::parse(s, "t").unwrap();
        let base = Marker::parse_toml(&format!("{}[files]\n", head())).unwrap();
        let mut deps = BTreeMap::new();
        deps.insert("b".to_owned(), vec!["a".to_owned()]);
        let plain = [
            "context/INDEX.md",
            "context/skills/a b/ü.md",
            "context/skills/x/@scope=1+2,(3)[4]{5}#6$7%8&9!~`^.md",
            "AGENTS.md",
            "context/Ünïcödé/日本.md",
        ];
        let mut cases = vec![(base.clone(), true)];
        let mut full = base.clone();
        full.install.dependencies = deps;
        for (i, p) in plain.iter().enumerate() {
            let digest = d(if i % 2 == 0 { D1 } else { D2 });
            full.files.insert(p, digest);
            full.user_files.insert(&format!("{p}.user"), digest);
        }
        cases.push((full.clone(), true));
        for odd in [
            "LICENSE",
            "a\"b",
            "a\\b",
            "it's",
            "tab\there",
            "",
            "del\u{7f}",
            "x\u{2028}y",
        ] {
            let mut m = full.clone();
            m.files.insert(odd, d(D1));
            cases.push((m, false));
        }
        for (marker, expect_plain) in cases {
            let reference = with_header(MARKER_HEADER, &marker);
            let text = marker.render();
            assert_eq!(text, reference);
            // The plain rendering is sized once (a few bytes of slack), never doubled.
            if expect_plain {
                assert!(text.capacity() <= text.len() + 64, "{reference}");
            }
            assert_eq!(Marker::parse(&reference), Some(marker.clone()));
            let shared = |t: &PathTable<Sha256>| -> Vec<(Arc<str>, Sha256)> {
                t.iter().map(|(p, d)| (Arc::from(p), *d)).collect()
            };
            let streamed = MarkerText::new(
                marker.schema_version,
                &marker.install,
                &marker.manifest,
                shared(&marker.files),
                shared(&marker.user_files),
            );
            assert_eq!(
                aibox_config::Render::to_bytes(&streamed),
                reference.as_bytes()
            );
            assert_eq!(streamed.sha256(), Sha256::of(reference.as_bytes()));
            assert_eq!(
                aibox_config::Render::size(&streamed),
                reference.len() as u64
            );
            let mut out = Vec::new();
            aibox_config::Render::write_to(&streamed, &mut out).unwrap();
            assert_eq!(out, reference.as_bytes());
        }
    }

    /// The intent record reads back as it was, written line by line or by the
    /// serializer, with and without writes, removals and a base.
    #[test]
    fn the_intent_record_round_trips() {
        let d = |s: &str| Sha256::parse(s, "t").unwrap();
        let empty = Intent {
            version: "v1.0.0".to_owned(),
            release_asset_sha256: d(D1),
            base_marker_sha256: None,
            skills: vec!["a".to_owned(), "b c".to_owned()],
            now: "2026-01-01T00:00:00Z".to_owned(),
            writes: IntentWrites::default(),
            removals: PathTable::new(),
            undoes: None,
        };
        let mut full = empty.clone();
        full.base_marker_sha256 = Some(d(D2));
        for (i, p) in ["context/a.md", "context/ü b/c.md", "AGENTS.md"]
            .iter()
            .enumerate()
        {
            let before = (i % 2 == 0).then(|| d(D2));
            full.writes.insert(p, IntentWrite { new: d(D1), before });
            full.removals.insert(&format!("{p}.old"), d(D2));
        }
        let mut only_removals = full.clone();
        only_removals.writes = IntentWrites::default();
        let mut odd = full.clone();
        odd.writes.insert(
            "a\"b",
            IntentWrite {
                new: d(D1),
                before: None,
            },
        );
        // An undo's record holds the one it undoes, which may hold another.
        let mut chained = full.clone();
        let mut undone = only_removals.clone();
        undone.version = "v2.0.0".to_owned();
        undone.undoes = Some(Box::new(full.clone()));
        chained.undoes = Some(Box::new(undone));
        let mut chained_odd = full.clone();
        chained_odd.undoes = Some(Box::new(odd.clone()));
        for (intent, plain) in [
            (empty, true),
            (full, true),
            (only_removals, true),
            (odd, false),
            (chained, true),
            (chained_odd, false),
        ] {
            let text = intent.render();
            assert!(
                text.starts_with("# aibox: processkit install in progress"),
                "{text}"
            );
            assert_eq!(Intent::parse(&text), Some(intent.clone()), "{text}");
            // Plain paths are written a line each, others by the serializer.
            assert_eq!(text.contains("\n[writes]\n"), plain, "{text}");
            if plain && intent.chain().count() == 3 {
                assert!(text.contains("\n[undoes.undoes.removals]\n"), "{text}");
            }
        }
    }

    /// The writes keep path order and each write's own `before` whatever the order of
    /// insertion (a `before` follows its path when others are inserted ahead of it), a
    /// second insert replaces, and pushing in order builds the same list.
    #[test]
    fn intent_writes_keep_each_before_with_its_path() {
        let d = |s: &str| Sha256::parse(s, "t").unwrap();
        let w = |before: Option<&str>| IntentWrite {
            new: d(D1),
            before: before.map(d),
        };
        let mut inserted = IntentWrites::default();
        inserted.insert("c", w(Some(D2)));
        inserted.insert("e", w(None));
        inserted.insert("a", w(None));
        inserted.insert("b", w(Some(D1)));
        inserted.insert("d", w(Some(D2)));
        inserted.insert("e", w(Some(D1)));
        inserted.insert("c", w(None));
        let expected = [
            ("a", w(None)),
            ("b", w(Some(D1))),
            ("c", w(None)),
            ("d", w(Some(D2))),
            ("e", w(Some(D1))),
        ];
        assert_eq!(inserted.iter().collect::<Vec<_>>(), expected);
        assert_eq!(inserted.get("d"), Some(w(Some(D2))));
        assert_eq!(inserted.get("f"), None);
        let mut pushed = IntentWrites::default();
        for (p, write) in expected {
            assert!(pushed.push(Arc::from(p), write));
        }
        assert!(!pushed.push(Arc::from("e"), w(None)), "out of order");
        assert_eq!(pushed, inserted);
        assert_eq!(pushed.len(), 5);
    }

    #[test]
    fn messy_but_plain_text_reads_the_same() {
        for text in [
            // Tables before the other sections, blank lines, comments, spaces around `=`.
            head().replacen(
                "\n[install]",
                &format!("[files]\n\n# note\n\"a\"   =   \"{D1}\"\n[user_files]\n\"b\"=\"{D2}\"\n[install]"),
                1,
            ),
            // CRLF line ends.
            format!("{}[files]\n\"a\" = \"{D1}\"\n\"c\" = \"{D2}\"\n", head()).replace('\n', "\r\n"),
            // An unknown section after the tables goes to the TOML parser with the rest.
            format!("{}[files]\n\"a\" = \"{D1}\"\n[extra]\nkey = 1\n", head()),
        ] {
            let (parsed, plain) = both(&text);
            assert!(plain, "{text}");
            assert!(parsed.is_some(), "{text}");
        }
    }

    #[test]
    fn anything_else_is_left_to_the_toml_parser_with_the_same_result() {
        let cases = [
            // Escapes, literal and bare keys, a comment after the value.
            (
                format!("{}[files]\n\"a\\u0062\" = \"{D1}\"\n", head()),
                true,
            ),
            (format!("{}[files]\n'a' = \"{D1}\"\n", head()), true),
            (format!("{}[files]\nAGENTS = \"{D1}\"\n", head()), true),
            (
                format!("{}[files]\n\"a\" = \"{D1}\" # kept\n", head()),
                true,
            ),
            // A header with a comment; a sub-table; dotted keys in the head.
            (format!("{}[files] # all\n\"a\" = \"{D1}\"\n", head()), true),
            (format!("{}[files.more]\n\"a\" = \"{D1}\"\n", head()), false),
            (format!("files.\"a\" = \"{D1}\"\n{}", head()), true),
            // A lone carriage return (an error), multi-line strings, arrays of tables.
            (format!("{}[files]\r\r\n\"a\" = \"{D1}\"\n", head()), false),
            (
                format!("{}[files]\n\"a\" = \"{D1}\"\n", head())
                    .replace("\"v1.0.0\"", "\"\"\"v1.0.0\"\"\""),
                true,
            ),
            (format!("{}[[files]]\n", head()), false),
            // Errors stay errors: a repeated path, a repeated table, a short digest,
            // an unknown schema.
            (
                format!("{}[files]\n\"a\" = \"{D1}\"\n\"a\" = \"{D2}\"\n", head()),
                false,
            ),
            (
                format!(
                    "{}[files]\n\"a\" = \"{D1}\"\n[files]\n\"b\" = \"{D2}\"\n",
                    head()
                ),
                false,
            ),
            (format!("{}[files]\n\"a\" = \"abc\"\n", head()), false),
            (
                format!("{}[files]\n\"a\" = \"{D1}\"\n", head())
                    .replace("schema_version = 1", "schema_version = 2"),
                false,
            ),
        ];
        for (text, valid) in cases {
            let (parsed, _) = both(&text);
            assert_eq!(parsed.is_some(), valid, "{text}");
        }
        assert!(split_tables(&format!("{}[files]\n\"a\" = \"{D1}\" # c\n", head())).is_none());
    }
}
