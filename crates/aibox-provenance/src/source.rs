//! Resolving `[processkit]` into a verified release: where it comes from, which concrete
//! version it is, which digest proves it, and the validated [`Payload`].
//!
//! Verification order: a digest pinned in the configuration or the lock must match; with
//! no pin, an HTTP or local archive needs its `.sha256` sidecar; a directory needs a pin.
//! With none of these the fetch fails unless `allow_unverified` is set, which is recorded
//! as [`Verification::Unverified`]. Nothing is cached unless verified.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use aibox_config::ProcesskitSection;
use serde::{Deserialize, Serialize};

use crate::cache::Cache;
use crate::digest::{Sha256, parse_sidecar};
use crate::error::{ProvenanceError, Result};
use crate::extract::{ExtractLimits, Payload, read_dir, unpack_to_temp};
use crate::fetch::{HttpOptions, ProgressFn, download, download_to};
use crate::record::ProcesskitLock;

/// The default URL template of release assets.
pub const DEFAULT_URL_TEMPLATE: &str =
    "{source}/releases/download/{version}/{name}-{version}.tar.gz";

/// Where a release comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceKind {
    /// An `https://` (or loopback `http://`) base URL plus the asset URL template.
    Http {
        /// Source URL without a trailing `.git` or `/`.
        base: String,
        /// URL template.
        template: String,
    },
    /// A local `.tar.gz` release archive.
    Archive(PathBuf),
    /// A local directory holding the release payload (with `PROVENANCE.toml` inside).
    Directory(PathBuf),
}

/// How the digest of a release was established.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verification {
    /// Matched `[processkit] sha256`.
    Pinned,
    /// Matched the digest recorded in `aibox.lock` (trust on first use).
    Locked,
    /// Matched the release's `.sha256` sidecar.
    Sidecar,
    /// Not verified: the named opt-out `allow_unverified` was used. A provenance exception.
    Unverified,
}

/// Knobs of a fetch; `Default` is right for production apart from the cache.
#[derive(Default)]
pub struct FetchOptions<'a> {
    /// Digest-keyed archive cache and unpacked store; `None` disables caching (the
    /// release is then unpacked into a temporary folder the payload owns).
    pub cache: Option<Cache>,
    /// HTTP limits.
    pub http: HttpOptions,
    /// Extraction limits.
    pub limits: ExtractLimits,
    /// Download progress callback.
    pub progress: Option<ProgressFn<'a>>,
}

/// A verified, validated release.
#[derive(Debug, Clone)]
pub struct VerifiedRelease {
    /// The source as configured (URL or path as written).
    pub source: String,
    /// The concrete version (tag).
    pub version: String,
    /// SHA-256 of the archive, or of the tree listing for directory sources.
    pub digest: Sha256,
    /// How the digest was established.
    pub verification: Verification,
    /// The validated files (a manifest; the bytes stay on disk).
    pub payload: Payload,
    /// Non-fatal findings (for example a `generated_for_tag` mismatch).
    pub warnings: Vec<String>,
}

/// Checks that a version is a concrete tag (`v1.2.3`, optionally `-pre`): never `latest`,
/// `unset`, empty or a branch name.
pub fn check_version(value: &str) -> Result<()> {
    let err = |reason: &str| ProvenanceError::Version {
        value: value.to_owned(),
        reason: reason.to_owned(),
    };
    if value.is_empty() || value == "latest" || value == "unset" {
        return Err(err("not a concrete release"));
    }
    let core = value.strip_prefix('v').unwrap_or(value);
    let (core, pre) = match core.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (core, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(err("expected MAJOR.MINOR.PATCH such as `v0.28.3`"));
    }
    if pre.is_some_and(|p| {
        p.is_empty()
            || !p
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    }) {
        return Err(err("invalid pre-release suffix"));
    }
    Ok(())
}

/// Classifies the configured source; relative paths are resolved against `project_root`.
pub fn source_kind(section: &ProcesskitSection, project_root: &Path) -> Result<SourceKind> {
    let source = section.effective_source();
    if source.contains("://") {
        let base = source.trim_end_matches('/');
        let base = base.strip_suffix(".git").unwrap_or(base).to_owned();
        let template = section
            .release_asset_url_template
            .clone()
            .unwrap_or_else(|| DEFAULT_URL_TEMPLATE.to_owned());
        return Ok(SourceKind::Http { base, template });
    }
    let path = project_root.join(source);
    let meta = fs_err::metadata(&path).map_err(|e| ProvenanceError::Config {
        key: "source",
        reason: format!("`{source}` cannot be read: {e}"),
        help: "use an https:// URL, or a path (relative to the project root) of a release `.tar.gz` or directory".to_owned(),
    })?;
    let refuse = |reason: String| ProvenanceError::Config {
        key: "source",
        reason,
        help: "use an https:// URL, or a path (relative to the project root) of a release \
               `.tar.gz` or directory"
            .to_owned(),
    };
    // Kernel pseudo-files report no size and may never end (`/dev/zero`, `/proc/kmsg`).
    let canonical = fs_err::canonicalize(&path).unwrap_or_else(|_| path.clone());
    if let Some(fs) = crate::extract::pseudo_filesystem(&canonical) {
        return Err(refuse(format!(
            "`{source}` is inside {fs}, a kernel pseudo-file system, not a release"
        )));
    }
    if meta.is_dir() {
        Ok(SourceKind::Directory(path))
    } else if meta.is_file() {
        Ok(SourceKind::Archive(path))
    } else {
        Err(refuse(format!(
            "`{source}` is a special file (device, FIFO or socket), not a release archive or \
             directory"
        )))
    }
}

/// Fills the URL template for `version`: `{name}` is the last segment of the base's path
/// (the repository, without `.git`) and `{org}` the one before it, so a mirror below a
/// path prefix (`https://host/mirror/org/processkit`) names the same asset as the
/// repository itself.
pub fn asset_url(base: &str, template: &str, version: &str) -> String {
    let path = base.split_once("://").map_or(base, |(_, rest)| rest);
    // The host first, then the path's segments; from the end.
    let mut segs = path
        .split_once('/')
        .map_or("", |(_, p)| p)
        .rsplit('/')
        .filter(|s| !s.is_empty());
    let name = segs
        .next()
        .map_or("processkit", |n| n.strip_suffix(".git").unwrap_or(n));
    let org = segs.next().unwrap_or_default();
    template
        .replace("{source}", base)
        .replace("{org}", org)
        .replace("{name}", name)
        .replace("{version}", version)
}

/// Digest of a directory payload: SHA-256 of the `sha256sum`-style listing
/// `<hex>  <path>\n` of every file sorted by path. Reproducible with
/// `find . -type f -printf '%P\n' | LC_ALL=C sort | xargs sha256sum | sha256sum`.
/// The listing is hashed as it is made, line by line (held whole it was 2 MB at a 10x
/// release, at the peak of every plan).
pub fn tree_digest(payload: &Payload) -> Sha256 {
    tree_digest_of(
        payload
            .files
            .iter()
            .map(|(path, file)| (&**path, file.sha256)),
    )
}

/// [`tree_digest`] of a listing of `(path, digest)`, sorted by path.
pub(crate) fn tree_digest_of<'a>(files: impl Iterator<Item = (&'a str, Sha256)>) -> Sha256 {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    let mut hex = [0_u8; 64];
    for (path, sha256) in files {
        // 64 hex digits always fit.
        let _ = hex::encode_to_slice(sha256.as_bytes(), &mut hex);
        h.update(hex);
        h.update(b"  ");
        h.update(path.as_bytes());
        h.update(b"\n");
    }
    Sha256::from_bytes(h.finalize().into())
}

struct Pins {
    pin: Option<Sha256>,
    locked: Option<(Sha256, Verification)>,
}

impl Pins {
    fn expected(&self) -> Option<Sha256> {
        self.pin.or(self.locked.map(|(d, _)| d))
    }

    /// Checks `actual` against every pin; returns how it was verified.
    fn verify(&self, what: &str, actual: Sha256) -> Result<Option<Verification>> {
        let mismatch = |expected: Sha256| ProvenanceError::DigestMismatch {
            what: what.to_owned(),
            expected: expected.to_hex(),
            actual: actual.to_hex(),
        };
        if let Some(p) = self.pin
            && p != actual
        {
            return Err(mismatch(p));
        }
        if let Some((l, _)) = self.locked
            && l != actual
        {
            return Err(mismatch(l));
        }
        Ok(match (self.pin, self.locked) {
            (Some(_), _) => Some(Verification::Pinned),
            // The lock carries how the digest was first established (pin, sidecar or the
            // unverified opt-out); keeping it makes re-runs byte-identical.
            (None, Some((_, how))) => Some(how),
            (None, None) => None,
        })
    }
}

/// Fetches, verifies and validates the configured release. `locked` is the lock's
/// `[processkit]` section as it was before this run; its digest counts as a pin when
/// source and version are unchanged.
pub fn fetch_release(
    section: &ProcesskitSection,
    project_root: &Path,
    locked: Option<&ProcesskitLock>,
    opts: &mut FetchOptions<'_>,
) -> Result<VerifiedRelease> {
    let kind = source_kind(section, project_root)?;
    let source = section.effective_source().to_owned();
    let version = section.version.clone();
    if let Some(v) = &version {
        check_version(v)?;
    }
    let pin = section
        .sha256
        .as_deref()
        .map(|s| Sha256::parse(s, "`[processkit] sha256`"))
        .transpose()?;
    let locked = locked
        .filter(|l| l.source == source && version.as_deref().is_none_or(|v| v == l.version))
        .and_then(|l| l.release_asset_sha256.map(|d| (d, l.verification)));
    let pins = Pins { pin, locked };
    let mut warnings = Vec::new();
    let (payload, digest, verification) = match &kind {
        SourceKind::Http { base, template } => {
            let version = version.as_deref().ok_or_else(|| ProvenanceError::Version {
                value: "(none)".to_owned(),
                reason: "URL sources need an exact version; `latest` cannot be resolved from an asset URL".to_owned(),
            })?;
            let url = asset_url(base, template, version);
            fetch_http(&url, version, section.allow_unverified, &pins, opts)?
        }
        SourceKind::Archive(path) => {
            let what = path.display().to_string();
            // A release archive is compressed; it cannot exceed the unpacked limit.
            let cap = opts.limits.max_total_bytes;
            let actual = archive_digest(path, cap, opts.cache.as_ref())?;
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut sidecar_path = path.clone().into_os_string();
            sidecar_path.push(".sha256");
            let sidecar_path = PathBuf::from(sidecar_path);
            let sidecar = match crate::extract::read_regular(&sidecar_path, 64 * 1024)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
            {
                Ok(text) => Some(parse_sidecar(
                    &text,
                    &name,
                    &format!("{}", PathBuf::from(&sidecar_path).display()),
                )?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(ProvenanceError::io("read", &sidecar_path, e)),
            };
            let verification = verify_all(&what, actual, &pins, sidecar, section.allow_unverified)?;
            let cache = opts
                .cache
                .as_ref()
                .filter(|_| verification != Verification::Unverified);
            let payload = unpacked(
                cache,
                &actual,
                || open_archive(path, cap),
                &what,
                version.as_deref(),
                &opts.limits,
            )?;
            (payload, actual, verification)
        }
        SourceKind::Directory(path) => {
            let what = path.display().to_string();
            let payload = read_dir(path, &opts.limits)?;
            let actual = tree_digest(&payload);
            let verification = verify_all(&what, actual, &pins, None, section.allow_unverified)?;
            // A verified copy in the cache, as an archive's: the directory is read in
            // place and moves on, and `migrate` needs this version as a base later.
            if let Some(cache) = opts
                .cache
                .as_ref()
                .filter(|_| verification != Verification::Unverified)
                && let Err(e) = cache.keep_payload(&actual, &payload)
            {
                warnings.push(format!(
                    "processkit: this release ({what}) could not be kept in the download \
                     cache, so `aibox migrate` cannot show it as a base version later: {e}"
                ));
            }
            (payload, actual, verification)
        }
    };
    let text = read_provenance(&payload)?;
    let provenance = text
        .as_deref()
        .map_err(Clone::clone)
        .and_then(parse_provenance);
    let stamped = provenance.as_ref().ok().and_then(|p| p.tag.clone());
    let version = resolve_version(version, &payload, stamped, &source, &mut warnings)?;
    validate_layout(&payload, provenance, &source, &version, &mut warnings)?;
    Ok(VerifiedRelease {
        source,
        version,
        digest,
        verification,
        payload,
        warnings,
    })
}

fn verify_all(
    what: &str,
    actual: Sha256,
    pins: &Pins,
    sidecar: Option<Sha256>,
    allow_unverified: bool,
) -> Result<Verification> {
    let by_pin = pins.verify(what, actual)?;
    if let Some(s) = sidecar
        && s != actual
    {
        return Err(ProvenanceError::DigestMismatch {
            what: what.to_owned(),
            expected: s.to_hex(),
            actual: actual.to_hex(),
        });
    }
    match (by_pin, sidecar) {
        // A sidecar that now exists upgrades an install first made without one.
        (Some(Verification::Unverified) | None, Some(_)) => Ok(Verification::Sidecar),
        (Some(v), _) => Ok(v),
        (None, None) if allow_unverified => Ok(Verification::Unverified),
        (None, None) => Err(ProvenanceError::NoDigest {
            what: what.to_owned(),
            computed: actual.to_hex(),
        }),
    }
}

/// Opens a local archive for streaming, refusing special files, kernel pseudo-files and
/// archives larger than `cap` bytes; the reader stops after `cap` bytes whatever the
/// file does.
fn open_archive(path: &Path, cap: u64) -> Result<std::io::Take<fs_err::File>> {
    use std::io::Read as _;
    let (file, len) =
        crate::extract::open_regular(path).map_err(|e| ProvenanceError::io("read", path, e))?;
    if len > cap {
        return Err(ProvenanceError::ArchiveLimit {
            reason: format!("`{}` is larger than {cap} bytes", path.display()),
        });
    }
    Ok(file.take(cap))
}

/// The SHA-256 of the local release archive at `path`: remembered in `cache` with the
/// archive's stat while that is unchanged (size, mtime, ctime and inode, as the stat cache
/// of installed files; editing or replacing the archive changes them), else hashed. What
/// the digest selects is still checked: the pins against it, and the bytes taken from the
/// store of that digest (or unpacked from the archive, which must hash to it).
fn archive_digest(path: &Path, cap: u64, cache: Option<&Cache>) -> Result<Sha256> {
    let archive = open_archive(path, cap)?;
    let remembered = cache.zip(archive.get_ref().metadata().ok());
    if let Some((cache, meta)) = &remembered
        && let Some(known) = cache.local_archive_digest(path, meta)
    {
        return Ok(known);
    }
    let digest = Sha256::of_reader(archive).map_err(|e| ProvenanceError::io("read", path, e))?;
    if let Some((cache, meta)) = &remembered {
        cache.remember_local_archive(path, meta, &digest);
    }
    Ok(digest)
}

/// The unpacked release with `digest`: from the cache's unpacked store when it is
/// there (the archive is not read at all), else streamed from `open()` into the store
/// (or, without a cache, into a temporary folder). The bytes read must hash to `digest`.
fn unpacked<R: std::io::Read>(
    cache: Option<&Cache>,
    digest: &Sha256,
    open: impl FnOnce() -> Result<R>,
    what: &str,
    expected_tag: Option<&str>,
    limits: &ExtractLimits,
) -> Result<Payload> {
    if let Some(cache) = cache {
        if let Some(p) = cache.unpacked(digest)? {
            check_tag(&p, what, expected_tag)?;
            return Ok(p);
        }
        return cache.unpack(digest, open()?, what, expected_tag, limits);
    }
    let (payload, actual) = unpack_to_temp(open()?, what, expected_tag, limits)?;
    if actual != *digest {
        return Err(ProvenanceError::DigestMismatch {
            what: what.to_owned(),
            expected: digest.to_hex(),
            actual: actual.to_hex(),
        });
    }
    Ok(payload)
}

/// A stored payload's top directory tag against the requested version.
fn check_tag(payload: &Payload, what: &str, expected_tag: Option<&str>) -> Result<()> {
    match payload.top_tag.as_deref() {
        Some(tag) => crate::extract::check_tag(tag, what, expected_tag),
        None => Ok(()),
    }
}

fn fetch_http(
    url: &str,
    version: &str,
    allow_unverified: bool,
    pins: &Pins,
    opts: &mut FetchOptions<'_>,
) -> Result<(Payload, Sha256, Verification)> {
    // A verified cache hit needs no network at all: the unpacked store, else the
    // cached archive.
    if let (Some(cache), Some(expected)) = (&opts.cache, pins.expected()) {
        let verification = pins.verify(url, expected)?.unwrap_or(Verification::Locked);
        if let Some(p) = cached(cache, &expected, url, version, &opts.limits)? {
            return Ok((p, expected, verification));
        }
    }
    let sidecar = if pins.expected().is_none() {
        let sidecar_url = format!("{url}.sha256");
        match download(&sidecar_url, &opts.http, None) {
            Ok(d) => {
                let text = String::from_utf8_lossy(&d.bytes);
                let name = url.rsplit('/').next().unwrap_or_default();
                Some(parse_sidecar(&text, name, &sidecar_url)?)
            }
            Err(ProvenanceError::HttpStatus { status: 404, .. }) => None,
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    // Without a pin, the sidecar names the digest: a release already cached under it
    // is not downloaded again (only the small sidecar was).
    if let (Some(cache), Some(digest)) = (&opts.cache, sidecar) {
        let verification = verify_all(url, digest, pins, sidecar, allow_unverified)?;
        if let Some(p) = cached(cache, &digest, url, version, &opts.limits)? {
            return Ok((p, digest, verification));
        }
    }
    if sidecar.is_none() && pins.expected().is_none() && !allow_unverified {
        // Without a sidecar: a version that was never published is a 404 of the asset
        // itself, not a question of digests.
        if !crate::fetch::exists(url, &opts.http) {
            return Err(ProvenanceError::http_status(url.to_owned(), 404));
        }
        return Err(ProvenanceError::NoDigest {
            what: format!("{url} (no `.sha256` sidecar published)"),
            computed: "<digest you checked>".to_owned(),
        });
    }
    let progress: Option<&mut dyn FnMut(crate::fetch::Progress)> = match &mut opts.progress {
        Some(p) => Some(&mut **p),
        None => None,
    };
    // Streamed to disk: into the cache's archive folder (renamed into place once
    // verified and unpacked), or a temporary file without a cache.
    let mut tmp = match &opts.cache {
        Some(cache) => cache.temp_archive()?,
        None => crate::cache::temp_download()?,
    };
    let (digest, _) = download_to(url, &opts.http, progress, tmp.as_file_mut())?;
    let verification = verify_all(url, digest, pins, sidecar, allow_unverified)?;
    let cache = opts
        .cache
        .as_ref()
        .filter(|_| verification != Verification::Unverified);
    let reopen = || {
        tmp.reopen()
            .map_err(|e| ProvenanceError::io("read", tmp.path(), e))
    };
    let payload = unpacked(cache, &digest, reopen, url, Some(version), &opts.limits)?;
    if let Some(cache) = cache {
        cache.keep_archive(&digest, tmp)?;
    }
    Ok((payload, digest, verification))
}

/// The release stored in `cache` under `digest`: the unpacked store, else the cached
/// archive, unpacked now (the unpack hashes what it reads, so the archive is read once).
/// Should that unpack fail, the archive is re-hashed: a damaged one is dropped and
/// `None` returned so it is downloaded again (a miss, never a decompression error); a
/// sound one's error is the release's own.
fn cached(
    cache: &Cache,
    digest: &Sha256,
    url: &str,
    version: &str,
    limits: &ExtractLimits,
) -> Result<Option<Payload>> {
    if let Some(p) = cache.unpacked(digest)? {
        check_tag(&p, url, Some(version))?;
        return Ok(Some(p));
    }
    let archive = cache.archive_path(digest);
    match fs_err::File::open(&archive) {
        Ok(file) => match cache.unpack(digest, file, url, Some(version), limits) {
            Ok(p) => Ok(Some(p)),
            Err(e) if cache.archive_sound(digest)? => Err(e),
            Err(_) => Ok(None),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ProvenanceError::io("read", &archive, e)),
    }
}

/// The payload's `PROVENANCE.toml` text, read once for the version stamp and the layout
/// check: `Err(reason)` when it is missing or not UTF-8.
fn read_provenance(payload: &Payload) -> Result<std::result::Result<String, String>> {
    if !payload.files.contains_key("PROVENANCE.toml") {
        return Ok(Err("`PROVENANCE.toml` is missing".to_owned()));
    }
    Ok(String::from_utf8(payload.read("PROVENANCE.toml")?)
        .map_err(|_| "`PROVENANCE.toml` is not UTF-8".to_owned()))
}

/// What the version stamp and the layout check need of `PROVENANCE.toml`.
struct Provenance<'t> {
    /// `[source] generated_for_tag`.
    tag: Option<String>,
    /// The keys of `[files]` (`None`: no such table), borrowed from the text when read
    /// plainly.
    files: Option<BTreeSet<Cow<'t, str>>>,
}

/// Parses `PROVENANCE.toml`: `[files]`, one line per release file, read line by line
/// when it has the plain `"path" = "tag"` shape (`record::split_plain_tables`) and the
/// rest by the TOML parser; any other shape, or a path listed twice, goes to the TOML
/// parser whole, which gives the same answer. The whole file through the parser held
/// 8.7 MB of tokens at a 10x release (17,000 files), on every command that resolves the
/// release. `Err(reason)` when it does not parse.
fn parse_provenance(text: &str) -> std::result::Result<Provenance<'_>, String> {
    let tag = |table: &toml::Table| {
        table
            .get("source")?
            .get("generated_for_tag")?
            .as_str()
            .map(str::to_owned)
    };
    if let Some((head, [files])) = crate::record::split_plain_tables(text, ["files"])
        && let Ok(head) = toml::from_str::<toml::Table>(&head)
        && !head.contains_key("files")
    {
        let mut listed = BTreeSet::new();
        let unique = files
            .iter()
            .all(|(path, _)| listed.insert(Cow::Borrowed(*path)));
        // A plain `[files]` line was seen, or the header alone: either way a table.
        let has_table = !files.is_empty() || text.lines().any(|l| l.trim() == "[files]");
        if unique {
            return Ok(Provenance {
                tag: tag(&head),
                files: has_table.then_some(listed),
            });
        }
    }
    let table: toml::Table =
        toml::from_str(text).map_err(|e| format!("`PROVENANCE.toml` does not parse: {e}"))?;
    let files = table
        .get("files")
        .and_then(toml::Value::as_table)
        .map(|t| t.keys().map(|k| Cow::Owned(k.clone())).collect());
    Ok(Provenance {
        tag: tag(&table),
        files,
    })
}

fn resolve_version(
    configured: Option<String>,
    payload: &Payload,
    stamped: Option<String>,
    source: &str,
    warnings: &mut Vec<String>,
) -> Result<String> {
    let version = configured
        .or_else(|| payload.top_tag.clone())
        .or_else(|| stamped.clone())
        .ok_or_else(|| ProvenanceError::Version {
            value: "(none)".to_owned(),
            reason: format!(
                "`{source}` does not say which version it is; set `[processkit] version`"
            ),
        })?;
    check_version(&version)?;
    if let Some(s) = stamped
        && s != version
    {
        warnings.push(format!(
            "PROVENANCE.toml says generated_for_tag = {s}, installing it as {version}"
        ));
    }
    Ok(version)
}

/// Required payload shape: `PROVENANCE.toml`, `context/`, and the strict file-set check
/// (the files are exactly those listed in `PROVENANCE.toml` plus itself, `LICENSE` and
/// `CHANGELOG.md`).
fn validate_layout(
    payload: &Payload,
    provenance: std::result::Result<Provenance<'_>, String>,
    source: &str,
    version: &str,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let layout = |reason: String| ProvenanceError::Layout {
        what: format!("{source} {version}"),
        reason,
    };
    // What a release older than the layout lacks: said so only for such a version.
    let old = |reason: String| layout(reason + crate::error::old_layout(Some(version)));
    let listed = provenance
        .map_err(old)?
        .files
        .ok_or_else(|| old("`PROVENANCE.toml` has no [files] table".to_owned()))?;
    if !payload.holds_below("context/") {
        return Err(old("there is no `context/` directory".to_owned()));
    }
    let extra: Vec<&str> = payload
        .files
        .keys()
        .map(AsRef::as_ref)
        .filter(|k| {
            !listed.contains(*k) && !matches!(*k, "PROVENANCE.toml" | "LICENSE" | "CHANGELOG.md")
        })
        .collect();
    let missing: Vec<&str> = listed
        .iter()
        .map(AsRef::as_ref)
        .filter(|k| !payload.files.contains_key(*k))
        .collect();
    let show = |v: &[&str]| {
        let mut s = v
            .iter()
            .take(10)
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if v.len() > 10 {
            let _ = write!(s, " and {} more", v.len() - 10);
        }
        s
    };
    if !extra.is_empty() {
        return Err(layout(format!(
            "files not listed in PROVENANCE.toml: {}",
            show(&extra)
        )));
    }
    if !missing.is_empty() {
        return Err(layout(format!(
            "files listed in PROVENANCE.toml but absent: {}",
            show(&missing)
        )));
    }
    let _ = warnings;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        for ok in ["v0.28.3", "0.1.0", "v1.0.0-alpha.1"] {
            check_version(ok).unwrap();
        }
        for bad in [
            "",
            "latest",
            "unset",
            "main",
            "v1.2",
            "v1.2.x",
            "v1.0.0-",
            "v1.0.0-a b",
        ] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    /// `PROVENANCE.toml` read line by line answers what the TOML parser answers (tag,
    /// `[files]` keys, or an error), for plain and messy texts alike.
    #[test]
    fn provenance_reads_the_same_plainly_and_parsed() {
        let reference =
            |text: &str| -> std::result::Result<(Option<String>, Option<Vec<String>>), ()> {
                let t: toml::Table = toml::from_str(text).map_err(|_| ())?;
                let tag = t
                    .get("source")
                    .and_then(|s| s.get("generated_for_tag"))
                    .and_then(|v| v.as_str())
                    .map(str::to_owned);
                let files = t
                    .get("files")
                    .and_then(toml::Value::as_table)
                    .map(|f| f.keys().cloned().collect());
                Ok((tag, files))
            };
        let head = "# PROVENANCE.toml\n[source]\nproject = \"processkit\"\ngenerated_for_tag = \"v1.0.0\"\n\n";
        let cases = [
            format!("{head}[files]\n\"a\" = \"v1\"\n# note\n\n\"b c/ü.md\"   =   \"v0.9.0\"\n"),
            format!("{head}[files]\n"),
            head.to_owned(),
            format!("[files]\n\"a\" = \"v1\"\n{head}"),
            format!("{head}[files]\n\"a\" = \"v1\"\n\"a\" = \"v2\"\n"),
            format!("{head}[files]\n\"a\\u0062\" = \"v1\"\n"),
            format!("{head}[files]\nbare = \"v1\"\n'lit' = \"v1\"\n"),
            format!("{head}[files]\n\"a\" = {{ tag = \"v1\" }}\n"),
            format!("{head}[files]\n\"a\" = \"v1\" # c\n"),
            format!("{head}files.\"x\" = \"v1\"\n[files]\n\"a\" = \"v1\"\n"),
            format!("{head}[files.sub]\n\"a\" = \"v1\"\n"),
            format!("{head}[files]\n\"a\" = \"v1\"\n[files]\n\"b\" = \"v1\"\n"),
            format!("{head}[files]\n\"a\" = \"v1\"\n[extra]\nk = [1,\n 2]\n"),
            format!("{head}[files]\r\n\"a\" = \"v1\"\r\n"),
            format!("{head}[files]\n\"a\" = \"v1\"\nbroken line\n"),
            format!("{head}[files]\n\"a\" = \"\"\"v1\"\"\"\n"),
            format!(
                "{}[files]\n\"a\" = \"v1\"\n",
                head.replace("project =", "project = = ")
            ),
        ];
        for text in cases {
            let ours = parse_provenance(&text).map(|p| {
                (
                    p.tag,
                    p.files.map(|f| {
                        f.into_iter()
                            .map(std::borrow::Cow::into_owned)
                            .collect::<Vec<_>>()
                    }),
                )
            });
            assert_eq!(ours.map_err(|_| ()), reference(&text), "{text}");
        }
    }

    #[test]
    fn url_template() {
        assert_eq!(
            asset_url(
                "https://github.com/projectious-work/processkit",
                DEFAULT_URL_TEMPLATE,
                "v0.28.3"
            ),
            "https://github.com/projectious-work/processkit/releases/download/v0.28.3/processkit-v0.28.3.tar.gz"
        );
        assert_eq!(
            asset_url(
                "http://127.0.0.1:9/o/n",
                "{source}/{org}/{name}/{version}",
                "v1.0.0"
            ),
            "http://127.0.0.1:9/o/n/o/n/v1.0.0"
        );
        // QA: a mirror below a path prefix asked for `org-v0.28.3.tar.gz`.
        assert_eq!(
            asset_url(
                "http://127.0.0.1:9/mirror/org/processkit",
                DEFAULT_URL_TEMPLATE,
                "v0.28.3"
            ),
            "http://127.0.0.1:9/mirror/org/processkit/releases/download/v0.28.3/processkit-v0.28.3.tar.gz"
        );
        assert_eq!(
            asset_url("https://git.example/a/b/pk.git", "{org}/{name}", "v1"),
            "b/pk"
        );
    }
}
