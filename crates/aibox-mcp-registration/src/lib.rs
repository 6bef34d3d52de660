//! `aibox-mcp-registration`: registers MCP servers into each AI harness's own config
//! file, so that the harness, unmodified, loads exactly the configured servers.
//!
//! - [`spec`]: the provider-neutral [`ServerSpec`] (processkit, team, personal) and
//!   [`collect_servers`], which validates names and secret handling.
//! - [`register()`]: merges the servers into every enabled harness's files (pure: the
//!   current texts come in through a callback, new texts go out), prunes what the
//!   [`Ledger`] says aibox wrote before, and reports [`EffectiveServer`]s.
//! - [`register_wired`]: the same, plus processkit's hooks and pre-authorisation
//!   ([`hooks`]) from the installed release.
//! - [`effective_servers`]: the same report without reading files (`aibox mcp list`).
//!
//! Invariants: a user-added entry, comment or unrelated key is never dropped; personal
//! servers only reach gitignored or container-scoped files; secrets only appear as
//! each harness's variable reference syntax; no key a harness does not read is written;
//! a file that does not parse is an error and is left untouched; output is
//! deterministic and a second apply is byte-identical.

mod edits;
mod error;
mod harness;
pub mod hooks;
mod jsonfile;
pub mod ledger;
pub mod refs;
pub mod register;
pub mod spec;
mod tomlfile;
pub mod tools;

pub use edits::is_kept_notice;
pub use error::{McpError, ParseError};
pub use hooks::{Preauth, ProcesskitWiring};
pub use ledger::{LEDGER_PATH, Ledger};
pub use register::{
    EffectiveServer, FileScope, HandAdded, RegisterOptions, Registration, TARGETS, TargetFile,
    check_denies_enforceable, effective_servers, effective_servers_wired, hand_added,
    holds_nothing, register, register_wired,
};
pub use spec::{Origin, ServerSpec, Transport, collect_servers};
pub use tools::ToolPolicy;
