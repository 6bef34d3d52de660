//! Reading a skill directory: every entry, sorted, without following symlinks.

use camino::{Utf8Path, Utf8PathBuf};

use crate::ReviewError;

/// Upper bound on entries read; a skill is a handful of files.
pub(crate) const MAX_FILES: usize = 5_000;
/// Files larger than this are not read (and fail point 1: too large to audit).
pub(crate) const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// What an entry is.
#[derive(Debug)]
pub(crate) enum EntryKind {
    /// A regular file and its bytes (`None` when it exceeds [`MAX_FILE_BYTES`]).
    File {
        bytes: Option<Vec<u8>>,
        executable: bool,
    },
    /// A symbolic link (never followed) and its target.
    Symlink { target: String },
    /// A socket, FIFO or device.
    Special,
}

/// One entry below the skill directory.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Path relative to the skill directory, `/`-separated.
    pub rel: String,
    /// What it is.
    pub kind: EntryKind,
}

impl Entry {
    /// The text of a regular UTF-8 file.
    pub(crate) fn text(&self) -> Option<&str> {
        match &self.kind {
            EntryKind::File { bytes: Some(b), .. } => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// File name (last component).
    pub(crate) fn name(&self) -> &str {
        self.rel.rsplit('/').next().unwrap_or(&self.rel)
    }

    /// File extension in lower case, without the dot.
    pub(crate) fn extension(&self) -> String {
        Utf8Path::new(self.name())
            .extension()
            .unwrap_or("")
            .to_ascii_lowercase()
    }
}

/// The kernel pseudo-file system a canonical path lies in, if any.
pub(crate) fn pseudo_filesystem(canonical: &Utf8Path) -> Option<&'static str> {
    ["/proc", "/sys", "/dev"]
        .into_iter()
        .find(|fs| canonical.starts_with(fs))
}

/// Reads at most [`MAX_FILE_BYTES`] (+1, to tell a larger file) whatever the metadata
/// says: some files report a size of 0 and stream without end.
fn read_capped(abs: &Utf8Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read as _;
    let file = fs_err::File::open(abs)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= MAX_FILE_BYTES).then_some(bytes))
}

/// Reads every entry below `root`, sorted by relative path. `.git` is skipped.
pub(crate) fn read_tree(root: &Utf8Path) -> Result<Vec<Entry>, ReviewError> {
    let mut out = Vec::new();
    let mut stack: Vec<Utf8PathBuf> = vec![Utf8PathBuf::new()];
    while let Some(rel_dir) = stack.pop() {
        let abs_dir = root.join(&rel_dir);
        let rd = fs_err::read_dir(&abs_dir).map_err(|source| ReviewError::Io {
            op: "list",
            path: abs_dir.clone(),
            source,
        })?;
        for item in rd {
            let item = item.map_err(|source| ReviewError::Io {
                op: "list",
                path: abs_dir.clone(),
                source,
            })?;
            let name = item
                .file_name()
                .into_string()
                .map_err(|n| ReviewError::NonUtf8Name {
                    dir: abs_dir.clone(),
                    name: n.to_string_lossy().into_owned(),
                })?;
            let rel = rel_dir.join(&name);
            let abs = root.join(&rel);
            let meta = fs_err::symlink_metadata(&abs).map_err(|source| ReviewError::Io {
                op: "inspect",
                path: abs.clone(),
                source,
            })?;
            let ft = meta.file_type();
            let kind = if ft.is_symlink() {
                let target = fs_err::read_link(&abs).map_err(|source| ReviewError::Io {
                    op: "read link",
                    path: abs.clone(),
                    source,
                })?;
                EntryKind::Symlink {
                    target: target.to_string_lossy().into_owned(),
                }
            } else if ft.is_dir() {
                if name != ".git" {
                    stack.push(rel);
                }
                continue;
            } else if ft.is_file() {
                let bytes = if meta.len() > MAX_FILE_BYTES {
                    None
                } else {
                    read_capped(&abs).map_err(|source| ReviewError::Io {
                        op: "read",
                        path: abs.clone(),
                        source,
                    })?
                };
                EntryKind::File {
                    bytes,
                    executable: is_executable(&meta),
                }
            } else {
                EntryKind::Special
            };
            out.push(Entry {
                rel: rel.as_str().replace('\\', "/"),
                kind,
            });
            if out.len() > MAX_FILES {
                return Err(ReviewError::TooManyFiles {
                    path: root.to_owned(),
                    limit: MAX_FILES,
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &std::fs::Metadata) -> bool {
    false
}

/// The SHA-256 (64 lowercase hex digits) of a skill's content: of the `sha256sum`-style
/// listing `<hex>  <path>\n` of every file below `root`, sorted by path, a symlink counted
/// by its target. The skill's agent-mutable `config/` folder is data and left out, so an
/// agent changing a setting does not make a review consent stale. Reproducible for a
/// skill without links with `find . -type f ! -path './config/*' -printf '%P\n' | LC_ALL=C
/// sort | xargs sha256sum | sha256sum`.
pub(crate) fn content_sha256(root: &Utf8Path) -> Result<String, ReviewError> {
    Ok(digests(root, &read_tree(root)?)?.content_sha256)
}

/// The digest of every regular file of `entries` (read from `root`) and the content
/// digest of [`content_sha256`], each file hashed once.
pub(crate) fn digests(
    root: &Utf8Path,
    entries: &[Entry],
) -> Result<crate::SkillDigests, ReviewError> {
    use sha2::Digest as _;
    let mut listing = String::new();
    let mut files = std::collections::BTreeMap::new();
    for entry in entries {
        let digest = || -> Result<[u8; 32], ReviewError> {
            Ok(match &entry.kind {
                EntryKind::File {
                    bytes: Some(bytes), ..
                } => sha2::Sha256::digest(bytes).into(),
                EntryKind::File { bytes: None, .. } => {
                    let abs = root.join(&entry.rel);
                    let mut h = sha2::Sha256::new();
                    let mut file = fs_err::File::open(&abs).map_err(|source| ReviewError::Io {
                        op: "read",
                        path: abs.clone(),
                        source,
                    })?;
                    std::io::copy(&mut file, &mut h).map_err(|source| ReviewError::Io {
                        op: "read",
                        path: abs.clone(),
                        source,
                    })?;
                    h.finalize().into()
                }
                EntryKind::Symlink { target } => {
                    sha2::Sha256::digest(format!("symlink:{target}")).into()
                }
                EntryKind::Special => sha2::Sha256::digest(b"special").into(),
            })
        };
        let is_file = matches!(entry.kind, EntryKind::File { .. });
        // `config/` is not part of the content digest: a file there that cannot be read
        // is only left out of the per-file digests (the trust check reads it itself).
        if entry.rel.starts_with("config/") {
            if is_file && let Ok(d) = digest() {
                files.insert(entry.rel.clone(), d);
            }
            continue;
        }
        let digest = digest()?;
        if is_file {
            files.insert(entry.rel.clone(), digest);
        }
        listing.push_str(&hex::encode(digest));
        listing.push_str("  ");
        listing.push_str(&entry.rel);
        listing.push('\n');
    }
    Ok(crate::SkillDigests {
        content_sha256: hex::encode(sha2::Sha256::digest(listing.as_bytes())),
        files,
    })
}
