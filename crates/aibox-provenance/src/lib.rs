//! `aibox-provenance`: lock records, SHA-256 digests, verified downloads, safe archive
//! extraction, processkit install, lossless three-way upgrade and per-file integrity.
//!
//! The flow: [`fetch_release`] resolves `[processkit]` into a [`VerifiedRelease`]
//! (digest checked against the pin, the lock or the `.sha256` sidecar; archive validated
//! entry by entry while it is streamed into the download cache's unpacked store, so the
//! payload is a manifest and never held in memory), [`scan`] reads the live project
//! and [`plan_scanned`] compares base, release and live files purely before anything
//! is written ([`plan_install`] does both), [`apply_plan`] writes the plan atomically
//! (release files are streamed by the one writer and re-verified while copied), and
//! [`integrity()`] checks the installed files against the per-file manifest at any time.

pub mod cache;
pub mod catalog;
pub mod digest;
pub mod error;
pub mod extract;
pub mod fetch;
mod gzip;
mod halves;
pub mod install;
pub mod integrity;
pub mod lock;
pub mod migration;
pub mod npmdeps;
pub mod pydeps;
pub mod record;
pub mod registry;
pub mod releases;
pub mod servers;
pub mod source;
pub mod statcache;
pub mod table;
pub mod time;
pub mod trust;
pub mod uvxdeps;
pub mod yaml;

pub use cache::Cache;
pub use digest::{Sha256, parse_sidecar};
pub use error::{ProvenanceError, Result};
pub use extract::{ExtractLimits, Payload, PayloadFile};
pub use fetch::{HttpOptions, Progress};
pub use install::{
    Action, After, Class, FileDecision, Hints, InstallPlan, Live, LiveAfter, LiveScan, PlanOptions,
    WriteData, after_apply, apply_plan, plan_install, plan_resume, plan_scanned, scan,
};
pub use integrity::{
    IntegrityReport, IntegrityStatus, SNAPSHOT_NAMED, integrity, integrity_known,
    integrity_scanned, integrity_with,
};
pub use record::{Intent, Marker, MarkerText, ProcesskitLock};
pub use servers::ProcesskitServer;
pub use source::{FetchOptions, Verification, VerifiedRelease, fetch_release, tree_digest};
pub use statcache::StatCache;
pub use table::{PathTable, SharedPathTable};
