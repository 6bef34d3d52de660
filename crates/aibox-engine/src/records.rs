//! The engine's own records under `.aibox/` (gitignored local state): their paths and
//! the helpers that read them, in one place, so `apply` (which writes them), `resolve`
//! and `snapshot` (which read them) and `migrate` (which takes the project lock) all
//! import from here and not from each other.
//!
//! - [`PENDING_LOCK`]: the digests of the apply in progress (the would-be `aibox.lock`).
//!   Written by `apply` before its first file and removed after `aibox.lock`; read by the
//!   next `apply` (`read_pending`) so files a killed run wrote count as aibox's own.
//! - [`PENDING_PROCESSKIT`]: the processkit install intent of the apply in progress
//!   ([`aibox_provenance::Intent`]). Written and removed by `apply` beside the pending
//!   lock; captured by the snapshot and read by `resolve` (`read_intent`), so the next
//!   plan completes exactly the interrupted install.
//! - [`STAT_CACHE`]: size and modification time of the installed processkit files
//!   ([`aibox_provenance::StatCache`]). Written by `apply` after the lock when the plan
//!   found it stale; read by `resolve` (`read_stat_cache`) straight from the disk, not
//!   captured by the snapshot (its text has a line per installed file, 2 MB at ten
//!   times processkit's size, and the plan needs only the parsed entries): it trusts it
//!   for unchanged files instead of re-hashing.
//! - [`APPLY_LOCK`]: the project lock file (`ProjectLock`), held by `apply` and
//!   `migrate resolve` while they write; never read for its contents.
//! - [`CONTAINER_LOCK`]: the container lock file (`ContainerLock`), held by `up` and
//!   `down` while they drive the engine; never read for its contents.
//! - [`BACKUP_DIR`]: where `apply --force` keeps the files it replaces
//!   (`backup_path`); written by `apply` only, read by people.
//!
//! The MCP ownership ledger (`.aibox/mcp-ledger.json`) belongs to
//! `aibox-mcp-registration` ([`aibox_mcp_registration::LEDGER_PATH`]); `PLAN_READS`
//! names it beside the two records above that a plan reads.

use std::time::{Duration, Instant};

use aibox_provenance::lock::Lock;
use camino::{Utf8Path, Utf8PathBuf};

use crate::error::EngineError;
use crate::writer::{ProjectRoot, WriteError, Writer};

/// Digests of the apply in progress (the would-be lock), under `.aibox/`.
pub const PENDING_LOCK: &str = ".aibox/pending.lock";
/// The processkit install intent of the apply in progress (see
/// [`aibox_provenance::Intent`]).
pub const PENDING_PROCESSKIT: &str = aibox_provenance::record::INTENT_PATH;
/// The stat cache of the installed processkit files (see
/// [`aibox_provenance::StatCache`]).
pub const STAT_CACHE: &str = ".aibox/processkit-stat-cache";
/// The project lock file held while applying.
pub const APPLY_LOCK: &str = ".aibox/apply.lock";
/// The container lock file held by `up` and `down`.
pub const CONTAINER_LOCK: &str = ".aibox/container.lock";
/// Where `--force` keeps the files it replaces: `.aibox/backups/<path>.<n>`.
pub const BACKUP_DIR: &str = ".aibox/backups";

/// The engine's own records a plan reads (beside the file table's rows), which the
/// snapshot captures. Not [`STAT_CACHE`]: only a hint for the scan, read by it.
pub(crate) const PLAN_READS: [&str; 2] = [aibox_mcp_registration::LEDGER_PATH, PENDING_PROCESSKIT];

/// The pending lock of an interrupted apply, if any.
pub(crate) fn read_pending(root: &ProjectRoot) -> Result<Option<Lock>, EngineError> {
    let rel = Utf8Path::new(PENDING_LOCK);
    let Some(bytes) = root.read(rel)? else {
        return Ok(None);
    };
    // A damaged record only costs recognition of half-written runs; never fail on it.
    Ok(Lock::parse(&String::from_utf8_lossy(&bytes), &root.path().join(rel)).ok())
}

/// The record an unfinished apply left behind (interrupted, or running now), if any:
/// until the next `apply` finishes the work, the project is half of one state and half
/// of another, so what is derived from it (drift, trust, sync) says nothing about the
/// user's own changes.
pub(crate) fn unfinished_apply(root: &ProjectRoot) -> Option<&'static str> {
    [PENDING_PROCESSKIT, PENDING_LOCK]
        .into_iter()
        .find(|rel| root.is_file(Utf8Path::new(rel)).unwrap_or(false))
}

/// The record of an unfinished apply in the project at `root` (the processkit intent
/// record or the pending lock), if one is there; `None` as well when the project cannot
/// be opened. `skill list` and `skill review` warn about it before they show a
/// half-written tree's state.
pub fn unfinished_apply_at(root: &camino::Utf8Path) -> Option<&'static str> {
    ProjectRoot::open(root)
        .ok()
        .and_then(|r| unfinished_apply(&r))
}

/// The processkit intent of an interrupted apply, from the bytes of
/// [`PENDING_PROCESSKIT`] as captured (a damaged one is no intent).
pub(crate) fn read_intent(bytes: Option<&[u8]>) -> Option<aibox_provenance::Intent> {
    bytes.and_then(|b| aibox_provenance::Intent::parse(&String::from_utf8_lossy(b)))
}

/// The stat cache of the last apply, read from [`STAT_CACHE`] (strictly, as the writer
/// reads: a symlink there is refused) with the record's own metadata, if any. Read a
/// line at a time as planning looks files up (see [`aibox_provenance::StatCache`]). A
/// damaged or unreadable one only costs re-hashing.
pub(crate) fn read_stat_cache(root: &ProjectRoot) -> Option<aibox_provenance::StatCache> {
    let (file, meta) = root.open_file(Utf8Path::new(STAT_CACHE)).ok()??;
    Some(aibox_provenance::StatCache::read_file(file, &meta))
}

/// First free `.aibox/backups/<path>.<n>`, counting from 1.
pub(crate) fn backup_path(root: &ProjectRoot, path: &Utf8Path) -> Result<Utf8PathBuf, EngineError> {
    for n in 1..=u32::MAX {
        let candidate = Utf8PathBuf::from(format!("{BACKUP_DIR}/{path}.{n}"));
        if !root.is_file(&candidate)? {
            return Ok(candidate);
        }
    }
    Err(WriteError::WrongKind {
        path: Utf8PathBuf::from(BACKUP_DIR),
        expected: "backup slot",
    }
    .into())
}

/// The project lock: an OS file lock on `.aibox/apply.lock`, released on drop (and by
/// the OS when the process dies, so a killed apply never leaves it stuck).
pub(crate) struct ProjectLock {
    _file: fs_err::File,
    waited: bool,
}

impl ProjectLock {
    pub(crate) fn acquire(root: &ProjectRoot, timeout: Duration) -> Result<Self, EngineError> {
        Self::wait_for(
            root,
            APPLY_LOCK,
            timeout,
            Duration::from_millis(50),
            &mut || {},
        )
        .map_err(|busy| match busy {
            Waited::Busy { lock, waited_secs } => EngineError::Busy { lock, waited_secs },
            Waited::Failed(e) => e,
        })
    }

    /// The container lock (`up`, `down`): two Compose runs on one project at once race
    /// on its network and container. Waits up to `timeout`, calling `on_wait` once when
    /// another holder makes it wait.
    pub(crate) fn acquire_container(
        root: &ProjectRoot,
        timeout: Duration,
        on_wait: &mut dyn FnMut(),
    ) -> Result<Self, EngineError> {
        Self::wait_for(
            root,
            CONTAINER_LOCK,
            timeout,
            Duration::from_millis(100),
            on_wait,
        )
        .map_err(|busy| match busy {
            Waited::Busy { lock, waited_secs } => EngineError::ContainerBusy { lock, waited_secs },
            Waited::Failed(e) => e,
        })
    }

    /// Takes the lock file `rel`, trying every `every` until `timeout`; `on_wait` is
    /// called once, when another holder first makes it wait.
    fn wait_for(
        root: &ProjectRoot,
        rel: &str,
        timeout: Duration,
        every: Duration,
        on_wait: &mut dyn FnMut(),
    ) -> Result<Self, Waited> {
        let rel = Utf8Path::new(rel);
        let file = Writer::new(root)
            .open_lock_file(rel)
            .map_err(|e| Waited::Failed(e.into()))?;
        let path = root.path().join(rel);
        let start = Instant::now();
        let mut waited = false;
        loop {
            match file.file().try_lock() {
                Ok(()) => {
                    return Ok(Self {
                        _file: file,
                        waited,
                    });
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    if !waited {
                        on_wait();
                    }
                    waited = true;
                    if start.elapsed() >= timeout {
                        return Err(Waited::Busy {
                            lock: path,
                            waited_secs: start.elapsed().as_secs(),
                        });
                    }
                    std::thread::sleep(every);
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(Waited::Failed(EngineError::io("lock", &path, e)));
                }
            }
        }
    }

    /// Whether another holder made this one wait: what was read before the lock (the
    /// configuration) may have changed meanwhile and must be read again under it.
    pub(crate) fn waited(&self) -> bool {
        self.waited
    }
}

/// Why [`ProjectLock::wait_for`] returned without the lock: another holder kept it past
/// the deadline (each lock names that in its own error), or the lock file failed.
enum Waited {
    Busy { lock: Utf8PathBuf, waited_secs: u64 },
    Failed(EngineError),
}
