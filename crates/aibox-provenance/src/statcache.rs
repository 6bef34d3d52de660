//! A stat cache of installed files, so planning need not re-hash unchanged files.
//!
//! Each entry keeps a file's digest with its size, mtime, ctime and inode as stat-ed
//! after the apply that wrote the cache. A file whose stat still matches is taken to
//! have that digest. As in git's index, an entry is "racily clean" when the file's mtime
//! is not older than the cache file itself (the file could have changed again within
//! the same timestamp tick): such entries are re-hashed, and the cache is rewritten so
//! they settle. Editing a file changes its mtime and ctime (which no user can set), and
//! replacing it changes the inode. Only planning trusts the cache; `integrity` (doctor
//! `--integrity`) re-hashes every byte. The same rule, in a memo of one file, remembers a
//! local release archive's digest (`Cache::local_archive_digest`).

use std::path::Path;
use std::sync::Arc;

use crate::digest::Sha256;
use crate::table::PathTable;

/// First line of the cache file.
const HEADER: &str = "# aibox processkit stat cache v1";

/// What identifies one version of a file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatKey {
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    ino: u64,
}

impl StatKey {
    /// The key of a file's metadata (`None` off Unix).
    #[cfg(unix)]
    #[allow(clippy::unnecessary_wraps)] // `None` on other platforms
    pub fn of(meta: &std::fs::Metadata) -> Option<Self> {
        use std::os::unix::fs::MetadataExt as _;
        Some(Self {
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
        })
    }

    /// The key of a file's metadata (`None` off Unix).
    #[cfg(not(unix))]
    pub fn of(_meta: &std::fs::Metadata) -> Option<Self> {
        None
    }
}

/// The parsed cache with the mtime of the cache file (for racily clean entries). Its
/// entries are a [`PathTable`]: one per installed file, in the file's (sorted) order.
#[derive(Debug, Default)]
pub struct StatCache {
    entries: PathTable<(StatKey, Sha256)>,
    written: (i64, i64),
}

impl StatCache {
    /// Parses the cache text; `written` is the cache file's mtime. Damaged lines are
    /// skipped (they only cost a re-hash).
    pub fn parse(text: &str, written: &std::fs::Metadata) -> Self {
        let written = StatKey::of(written).map_or((0, 0), |k| k.mtime);
        let mut entries = PathTable::new();
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Self::default();
        }
        for line in lines {
            let mut parts = line.splitn(6, ' ');
            let mut next = || parts.next();
            let (Some(digest), Some(size), Some(mtime), Some(ctime), Some(ino), Some(path)) =
                (next(), next(), next(), next(), next(), next())
            else {
                continue;
            };
            let time = |t: &str| {
                let (s, ns) = t.split_once('.')?;
                Some((s.parse().ok()?, ns.parse().ok()?))
            };
            let (Ok(digest), Ok(size), Some(mtime), Some(ctime), Ok(ino)) = (
                Sha256::parse(digest, "stat cache"),
                size.parse(),
                time(mtime),
                time(ctime),
                ino.parse(),
            ) else {
                continue;
            };
            let key = StatKey {
                size,
                mtime,
                ctime,
                ino,
            };
            // Rendered in path order, so appended; a line out of order is placed.
            if !entries.push(path, (key, digest)) {
                entries.insert(path, (key, digest));
            }
        }
        entries.shrink_to_fit();
        Self { entries, written }
    }

    /// The cached digest of `path` when its stat is unchanged and not racily clean.
    pub fn lookup(&self, path: &str, meta: &std::fs::Metadata) -> Option<Sha256> {
        let key = StatKey::of(meta)?;
        let (cached, digest) = self.entries.get(path)?;
        (*cached == key && key.mtime < self.written).then_some(*digest)
    }

    /// Writes a cache for the files in `digests` (project path → digest they hold) as
    /// they are now under `root` into `out`, a line at a time (the text has a line per
    /// installed file, 1.8 MB at 10x processkit, so it is not held whole); files that are
    /// missing or not regular are left out.
    pub fn write_to(
        root: &Path,
        digests: &[(Arc<str>, Sha256)],
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        // The time line makes every rewrite change the file, so its mtime (the racy
        // threshold) moves on even when no entry changed.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        writeln!(out, "{HEADER}\nwritten {now}")?;
        for (path, digest) in digests {
            let path = &**path;
            let Ok(meta) = fs_err::symlink_metadata(root.join(path)) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            let Some(k) = StatKey::of(&meta) else {
                continue;
            };
            write_entry(out, path, k, digest)?;
        }
        Ok(())
    }

    /// The digest the memo file `memo` (its text from [`Self::memo_text`]) holds for the one
    /// file `name` whose metadata is `meta`: `None` unless its stat is unchanged and not
    /// racily clean.
    pub(crate) fn recall(memo: &Path, name: &str, meta: &std::fs::Metadata) -> Option<Sha256> {
        use std::io::Read as _;
        let mut file = fs_err::File::open(memo).ok()?;
        let written = file.metadata().ok()?;
        let mut text = String::new();
        file.read_to_string(&mut text).ok()?;
        Self::parse(&text, &written).lookup(name, meta)
    }

    /// The text of a memo file (read back by [`Self::recall`]): the file `name`, whose
    /// metadata was `meta` when its reading began, holds `digest`. The stat from before the
    /// read, so a file that changed while it was hashed no longer matches. `None` off Unix.
    pub(crate) fn memo_text(
        name: &str,
        meta: &std::fs::Metadata,
        digest: &Sha256,
    ) -> Option<String> {
        let key = StatKey::of(meta)?;
        let mut text = format!("{HEADER}\n").into_bytes();
        write_entry(&mut text, name, key, digest).ok()?;
        String::from_utf8(text).ok()
    }
}

/// One entry line: digest, size, mtime, ctime, inode, path.
fn write_entry(
    out: &mut dyn std::io::Write,
    path: &str,
    k: StatKey,
    digest: &Sha256,
) -> std::io::Result<()> {
    out.write_all(&digest.hex_digits())?;
    writeln!(
        out,
        " {} {}.{} {}.{} {} {path}",
        k.size, k.mtime.0, k.mtime.1, k.ctime.0, k.ctime.1, k.ino
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache written for files in several folders vouches for each regular file as it
    /// is, and only for those: a symbolic link, a folder and a missing path get no line,
    /// and a file changed afterwards is not vouched for. (A key that never matches would
    /// fail nothing else: every apply would only re-hash.)
    #[test]
    fn a_written_cache_vouches_for_its_regular_files_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs_err::create_dir_all(root.join("a/b/c")).unwrap();
        fs_err::create_dir_all(root.join("a/b/dir.md")).unwrap();
        let files = [
            ("a/b/c/deep.md", "0"),
            ("a/b/one.md", "1"),
            ("a/b/two.md", "22"),
            ("a/top.md", "333"),
            ("root.md", "4444"),
        ];
        for (path, body) in files {
            fs_err::write(root.join(path), body).unwrap();
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("root.md"), root.join("a/link.md")).unwrap();
        let mut listed: Vec<(Arc<str>, Sha256)> = files
            .iter()
            .map(|(p, b)| (Arc::from(*p), Sha256::of(b.as_bytes())))
            .collect();
        for other in ["a/b/dir.md", "a/link.md", "a/missing.md"] {
            listed.push((Arc::from(other), Sha256::of(b"x")));
        }
        listed.sort();
        // Entries as new as the cache file are not trusted (racily clean): the cache is
        // written a little later than the files.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut text = Vec::new();
        StatCache::write_to(root, &listed, &mut text).unwrap();
        let cache_file = root.join("cache");
        fs_err::write(&cache_file, &text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert_eq!(text.lines().count(), 2 + files.len(), "{text}");
        let cache = StatCache::parse(&text, &fs_err::metadata(&cache_file).unwrap());
        for (path, body) in files {
            let meta = fs_err::symlink_metadata(root.join(path)).unwrap();
            assert_eq!(
                cache.lookup(path, &meta),
                Some(Sha256::of(body.as_bytes())),
                "{path}"
            );
        }
        fs_err::write(root.join("a/b/one.md"), "changed").unwrap();
        let meta = fs_err::symlink_metadata(root.join("a/b/one.md")).unwrap();
        assert_eq!(cache.lookup("a/b/one.md", &meta), None);
    }
}
