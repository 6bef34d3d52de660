//! `aibox-runtime`: container engine detection and the Compose lifecycle.
//!
//! This is the only aibox crate that spawns processes. [`Runtime::detect`] picks Podman
//! or Docker and a Compose provider ([`detect`]); a [`Target`] names one project's
//! container, image and Compose file; [`Runtime`] then builds, starts, stops, inspects
//! and runs commands in it. Every external command has a deadline, long steps report
//! [`Event`]s to a callback instead of printing, and a container that belongs to another
//! project is refused, never adopted or removed. [`probe_mcp_server`] proves an MCP
//! server starts (the stdio handshake, bounded), in the container through
//! [`Runtime::exec_command`] or anywhere else.

mod build_leftovers;
mod build_log;
pub mod detect;
mod error;
pub mod fingerprint;
pub mod interrupt;
mod lifecycle;
pub mod mcp_probe;
mod process;

pub use build_log::BuildStep;
pub use detect::{
    COMPOSE_ENV, ComposeCli, ComposeKind, DetectEnv, Detected, ENGINE_ENV, Engine, EngineCli,
};
pub use error::RuntimeError;
pub use fingerprint::Fingerprints;
pub use lifecycle::{
    COMPOSE_PROJECT_LABELS, ContainerState, Event, ExecRequest, FoundContainer, PipedExec,
    Progress, ProxyStatus, Runtime, Status, Target, Timeouts, USERNS_PROBE, UpOptions, UpOutcome,
    UsernsProbe,
};
pub use mcp_probe::{MCP_PROTOCOL_VERSION, McpProbe, ProbeFailure, probe_mcp_server};
pub use process::find_program;
