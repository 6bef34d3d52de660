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

use crate::digest::Sha256;

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

/// The cache with the mtime of its file (for racily clean entries). Its lines are read
/// as they are asked for: a plan asks in path order, the order they are written in, so
/// only the line at hand is held (a table of every line was 4 MB at 30x processkit, held
/// through planning). A path asked for after a later one, or one on a damaged or
/// misplaced line, is a miss: the file is hashed, which is what the cache saves.
pub struct StatCache {
    lines: std::sync::Mutex<Lines>,
    written: (i64, i64),
}

impl std::fmt::Debug for StatCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatCache")
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl Default for StatCache {
    /// A cache with no entry.
    fn default() -> Self {
        Self {
            lines: std::sync::Mutex::new(Lines::at_end()),
            written: (0, 0),
        }
    }
}

/// The reading position in a cache's lines.
struct Lines {
    /// The rest of the text (`None` once read to its end).
    reader: Option<Box<dyn std::io::BufRead + Send>>,
    /// The line at hand.
    line: Vec<u8>,
    /// Its entry and where its path starts in `line` (`None` at the end).
    entry: Option<(StatKey, Sha256, usize)>,
}

impl Lines {
    fn at_end() -> Self {
        Self {
            reader: None,
            line: Vec::new(),
            entry: None,
        }
    }

    /// The lines of `reader` after its header (none when the header is not the cache's).
    fn new(mut reader: Box<dyn std::io::BufRead + Send>) -> Self {
        let mut header = Vec::new();
        let ok =
            reader.read_until(b'\n', &mut header).is_ok() && trim_end(&header) == HEADER.as_bytes();
        let mut lines = Self {
            reader: ok.then_some(reader),
            ..Self::at_end()
        };
        lines.advance();
        lines
    }

    /// The path of the line at hand.
    fn path(&self) -> &[u8] {
        let start = self.entry.map_or(0, |(_, _, start)| start);
        trim_end(&self.line[start..])
    }

    /// Moves to the next line with an entry, or to the end.
    fn advance(&mut self) {
        self.entry = None;
        while let Some(reader) = &mut self.reader {
            self.line.clear();
            match reader.read_until(b'\n', &mut self.line) {
                Ok(0) | Err(_) => self.reader = None,
                Ok(_) => {
                    // Damaged lines are skipped (they only cost a re-hash).
                    self.entry = entry(trim_end(&self.line));
                    if self.entry.is_some() {
                        return;
                    }
                }
            }
        }
    }

    /// The entry of `path`, when its line comes next (lines before it are passed).
    fn find(&mut self, path: &str) -> Option<(StatKey, Sha256)> {
        loop {
            let (key, digest, _) = self.entry?;
            match self.path().cmp(path.as_bytes()) {
                std::cmp::Ordering::Less => self.advance(),
                std::cmp::Ordering::Equal => return Some((key, digest)),
                std::cmp::Ordering::Greater => return None,
            }
        }
    }
}

/// `line` without its line end.
fn trim_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The entry of a cache line and where its path starts: `digest size mtime ctime inode
/// path` (the path last: it may hold spaces).
fn entry(line: &[u8]) -> Option<(StatKey, Sha256, usize)> {
    let text = std::str::from_utf8(line).ok()?;
    let mut parts = text.splitn(6, ' ');
    let mut next = || parts.next();
    let (digest, size, mtime, ctime, ino, path) =
        (next()?, next()?, next()?, next()?, next()?, next()?);
    let time = |t: &str| {
        let (s, ns) = t.split_once('.')?;
        Some((s.parse().ok()?, ns.parse().ok()?))
    };
    let key = StatKey {
        size: size.parse().ok()?,
        mtime: time(mtime)?,
        ctime: time(ctime)?,
        ino: ino.parse().ok()?,
    };
    let digest = Sha256::parse(digest, "stat cache").ok()?;
    Some((key, digest, text.len() - path.len()))
}

impl StatCache {
    /// The cache in `text`; `written` is the cache file's mtime.
    pub fn parse(text: &str, written: &std::fs::Metadata) -> Self {
        Self::read_from(std::io::Cursor::new(text.as_bytes().to_vec()), written)
    }

    /// The cache in the file `file` (opened by the caller, who checked what it is), read
    /// as it is looked up; `written` is its metadata.
    pub fn read_file(file: fs_err::File, written: &std::fs::Metadata) -> Self {
        Self::read_from(crate::record::lines_of(file), written)
    }

    /// The cache read from `reader` as it is looked up (see [`StatCache`]); `written` is
    /// the cache file's metadata.
    pub fn read_from(
        reader: impl std::io::BufRead + Send + 'static,
        written: &std::fs::Metadata,
    ) -> Self {
        Self {
            lines: std::sync::Mutex::new(Lines::new(Box::new(reader))),
            written: StatKey::of(written).map_or((0, 0), |k| k.mtime),
        }
    }

    /// The cached digest of `path` when its stat is unchanged and not racily clean. Asked
    /// in path order (see [`StatCache`]).
    pub fn lookup(&self, path: &str, meta: &std::fs::Metadata) -> Option<Sha256> {
        let key = StatKey::of(meta)?;
        let (cached, digest) = self
            .lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .find(path)?;
        (cached == key && key.mtime < self.written).then_some(digest)
    }

    /// Writes a cache for the files in `digests` (project path → digest they hold) as
    /// they are now under `root` into `out`, a line at a time (the text has a line per
    /// installed file, 1.8 MB at 10x processkit, so it is not held whole); files that are
    /// missing or not regular are left out.
    pub fn write_to<'a>(
        root: &Path,
        digests: impl IntoIterator<Item = (&'a str, Sha256)>,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        // The time line makes every rewrite change the file, so its mtime (the racy
        // threshold) moves on even when no entry changed.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        writeln!(out, "{HEADER}\nwritten {now}")?;
        // The stats are most of the time (a path walk each): a long list's second half is
        // statted on a helper thread while this one stats the first.
        let listed: Vec<(&str, Sha256)> = digests.into_iter().collect();
        let keys = crate::halves::in_halves(&listed, PARALLEL_STATS, "aibox-stat", |part| {
            part.iter().map(|(path, _)| file_key(root, path)).collect()
        });
        for ((path, digest), key) in listed.iter().zip(keys) {
            if let Some(key) = key {
                write_entry(out, path, key, digest)?;
            }
        }
        Ok(())
    }

    /// The digest the memo file `memo` (its text from [`Self::memo_text`]) holds for the one
    /// file `name` whose metadata is `meta`: `None` unless its stat is unchanged and not
    /// racily clean.
    pub(crate) fn recall(memo: &Path, name: &str, meta: &std::fs::Metadata) -> Option<Sha256> {
        let file = fs_err::File::open(memo).ok()?;
        let written = file.metadata().ok()?;
        Self::read_from(std::io::BufReader::new(file), &written).lookup(name, meta)
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

/// From this many files on, their stats are worth a second thread: [`StatCache::write_to`]
/// takes them on two, as the scan does its lookups (`install::scan`).
pub(crate) const PARALLEL_STATS: usize = 256;

/// The key of the regular file `path` under `root`; `None` when it is missing or not a
/// regular file.
fn file_key(root: &Path, path: &str) -> Option<StatKey> {
    let meta = fs_err::symlink_metadata(root.join(path)).ok()?;
    if !meta.is_file() {
        return None;
    }
    StatKey::of(&meta)
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

    /// The cache of `listed` under `root`, written to `root/cache` a little after the
    /// files (entries as new as the cache file are not trusted: racily clean): its text
    /// and its path.
    fn written(root: &Path, listed: &[(&str, Sha256)]) -> (String, std::path::PathBuf) {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut text = Vec::new();
        StatCache::write_to(root, listed.iter().copied(), &mut text).unwrap();
        let cache_file = root.join("cache");
        fs_err::write(&cache_file, &text).unwrap();
        (String::from_utf8(text).unwrap(), cache_file)
    }

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
        let mut listed: Vec<(&str, Sha256)> = files
            .iter()
            .map(|(p, b)| (*p, Sha256::of(b.as_bytes())))
            .collect();
        for other in ["a/b/dir.md", "a/link.md", "a/missing.md"] {
            listed.push((other, Sha256::of(b"x")));
        }
        listed.sort();
        let (text, cache_file) = written(root, &listed);
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
        let cache = StatCache::parse(&text, &fs_err::metadata(&cache_file).unwrap());
        assert_eq!(cache.lookup("a/b/one.md", &meta), None);
    }

    /// Lines are read as paths are asked for, in order: a path asked for after a later
    /// one is a miss, and so is one on a damaged line (the lines around it still count);
    /// CRLF line ends read the same; a text that is not a cache has no entry.
    #[test]
    fn lookups_in_path_order_read_each_line_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for path in ["a.md", "b.md", "c d.md", "e.md"] {
            fs_err::write(root.join(path), path).unwrap();
        }
        let meta = |p: &str| fs_err::symlink_metadata(root.join(p)).unwrap();
        let listed = ["a.md", "b.md", "c d.md", "e.md"].map(|p| (p, Sha256::of(p.as_bytes())));
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut text = Vec::new();
        StatCache::write_to(root, listed.iter().copied(), &mut text).unwrap();
        let cache_file = root.join("cache");
        let text = String::from_utf8(text).unwrap();
        // The line of `b.md` damaged.
        let damaged: String = text
            .lines()
            .map(|l| {
                if l.ends_with(" b.md") {
                    format!("{}\r\n", l.replacen(' ', "  ", 1))
                } else {
                    format!("{l}\r\n")
                }
            })
            .collect();
        fs_err::write(&cache_file, &damaged).unwrap();
        let written = fs_err::metadata(&cache_file).unwrap();
        let hit = |p: &str| Some(Sha256::of(p.as_bytes()));
        let cache = StatCache::parse(&damaged, &written);
        assert_eq!(cache.lookup("a.md", &meta("a.md")), hit("a.md"));
        assert_eq!(cache.lookup("b.md", &meta("b.md")), None, "damaged line");
        assert_eq!(cache.lookup("c d.md", &meta("c d.md")), hit("c d.md"));
        assert_eq!(cache.lookup("a.md", &meta("a.md")), None, "out of order");
        assert_eq!(cache.lookup("e.md", &meta("e.md")), hit("e.md"));
        assert_eq!(cache.lookup("f.md", &meta("e.md")), None, "past the end");
        // Read from the file as planning reads it.
        let file = std::io::BufReader::new(fs_err::File::open(&cache_file).unwrap());
        let cache = StatCache::read_from(file, &written);
        assert_eq!(cache.lookup("e.md", &meta("e.md")), hit("e.md"));
        let other = StatCache::parse(&damaged.replacen("cache", "other", 1), &written);
        assert_eq!(other.lookup("a.md", &meta("a.md")), None, "not a cache");
    }

    /// A list long enough to be statted on two threads is written in order, a line per
    /// regular file, missing files left out in either half.
    #[test]
    fn a_long_list_is_written_in_order_from_both_halves() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let n = PARALLEL_STATS * 2 + 3;
        let names: Vec<String> = (0..n).map(|i| format!("f{i:04}.md")).collect();
        for (i, name) in names.iter().enumerate() {
            // Every seventh file is missing, in both halves.
            if i % 7 != 3 {
                fs_err::write(root.join(name), name).unwrap();
            }
        }
        let listed: Vec<(&str, Sha256)> = names
            .iter()
            .map(|n| (n.as_str(), Sha256::of(n.as_bytes())))
            .collect();
        let (text, cache_file) = written(root, &listed);
        let written: Vec<&str> = text
            .lines()
            .skip(2)
            .map(|l| l.rsplit(' ').next().unwrap())
            .collect();
        let expected: Vec<&str> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 7 != 3)
            .map(|(_, n)| n.as_str())
            .collect();
        assert_eq!(written, expected);
        let cache = StatCache::parse(&text, &fs_err::metadata(&cache_file).unwrap());
        for name in &expected {
            let meta = fs_err::symlink_metadata(root.join(name)).unwrap();
            assert_eq!(cache.lookup(name, &meta), Some(Sha256::of(name.as_bytes())));
        }
    }
}
