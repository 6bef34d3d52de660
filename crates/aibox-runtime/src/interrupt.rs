//! Ctrl-C while aibox waits for an image build.
//!
//! A terminal's Ctrl-C reaches the whole foreground process group: aibox, the Compose
//! provider and the builder. Podman 4.3 then exits without removing its build's working
//! containers (one per step, each holding a layer), and aibox, dying of the same signal,
//! could not remove them either: every interrupted `up` left a dozen behind. With
//! [`install`] (the CLI calls it first), Ctrl-C keeps its default effect but while a
//! build runs (a `Hold`): then the first one is only recorded, the build ends (the
//! signal reached it too), and the caller cleans up and reports the interruption (exit
//! code 130). A second Ctrl-C during the hold ends aibox at once, as the first would have
//! without it.
//!
//! Embedders that do not call [`install`] keep their own handling, and so does a process
//! that ignores `SIGINT` (a shell starts background jobs that way): it keeps ignoring it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::SIGINT;

/// Whether the process asked for this handling ([`install`]).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// True while Ctrl-C is fatal: outside a hold, and within one once the first came.
/// Registered at the first hold, so a command that builds nothing handles no signal;
/// `None` when `SIGINT` is ignored or the handler could not be registered.
static FATAL: OnceLock<Option<Arc<AtomicBool>>> = OnceLock::new();

/// Makes Ctrl-C during an image build recorded instead of fatal (see the module docs).
/// Nothing is registered until a build starts; then nothing either when `SIGINT` is
/// ignored, or when that cannot be read (no `/proc`).
pub fn install() {
    ENABLED.store(true, Ordering::SeqCst);
}

/// The flag of the registered handler, registering it the first time.
fn registered() -> Option<&'static AtomicBool> {
    if !ENABLED.load(Ordering::SeqCst) {
        return None;
    }
    FATAL
        .get_or_init(|| {
            if !sigint_default() {
                return None;
            }
            let fatal = Arc::new(AtomicBool::new(true));
            // In this order, so one flag does both: a Ctrl-C that finds it set ends the
            // process (the default action), and any Ctrl-C sets it, so the next is fatal.
            signal_hook::flag::register_conditional_default(SIGINT, Arc::clone(&fatal)).ok()?;
            signal_hook::flag::register(SIGINT, Arc::clone(&fatal)).ok()?;
            Some(fatal)
        })
        .as_deref()
}

/// Whether `SIGINT` has its default action (not ignored), from `/proc/self/status`.
fn sigint_default() -> bool {
    fs_err::read_to_string("/proc/self/status").is_ok_and(|s| sigint_not_ignored(&s))
}

/// Whether the `SigIgn:` mask of a `/proc/PID/status` text leaves `SIGINT` out; false
/// when there is no readable mask.
fn sigint_not_ignored(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (SIGINT - 1)) == 0)
}

/// While alive, the first Ctrl-C is recorded, not fatal (see [`hold`]).
pub(crate) struct Hold {
    flag: Option<&'static AtomicBool>,
}

/// Starts a [`Hold`]; a no-op hold when [`install`] was not called (or the handler
/// could not be registered).
pub(crate) fn hold() -> Hold {
    let flag = registered();
    if let Some(f) = flag {
        f.store(false, Ordering::SeqCst);
    }
    Hold { flag }
}

impl Hold {
    /// Whether Ctrl-C came since the hold began.
    pub(crate) fn interrupted(&self) -> bool {
        self.flag.is_some_and(|f| f.load(Ordering::SeqCst))
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(f) = self.flag {
            f.store(true, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_without_install_records_nothing() {
        // The unit tests never install: their process's Ctrl-C stays the harness's.
        let hold = hold();
        assert!(!hold.interrupted());
    }

    #[test]
    fn an_ignored_sigint_is_read_from_the_mask() {
        // A background job of a shell: SIGINT (bit 1) and SIGQUIT (bit 2) ignored.
        assert!(!sigint_not_ignored(
            "Name:\taibox\nSigIgn:\t0000000000000006\n"
        ));
        assert!(sigint_not_ignored(
            "Name:\taibox\nSigIgn:\t0000000000001000\n"
        ));
        assert!(!sigint_not_ignored("Name:\taibox\n"));
        assert!(!sigint_not_ignored("SigIgn:\tnot-hex\n"));
        // This process's own mask is there to read.
        let own = fs_err::read_to_string("/proc/self/status").unwrap_or_default();
        assert!(own.lines().any(|l| l.starts_with("SigIgn:")), "{own}");
    }
}
