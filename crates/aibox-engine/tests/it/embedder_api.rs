//! The engine's entry points as an embedder that depends on `aibox-engine` and
//! `aibox-config` alone calls them: every type they take or return is named here through
//! `aibox_engine` (QA28 r12). A type left out of the engine's re-exports fails the build of
//! this file; `this_file_names_no_other_aibox_crate` keeps it to those two crates.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Display;

use aibox_engine::EngineError;
use camino::Utf8Path;

use crate::common::{Fixture, apply_opts};

/// `base_image_pin::pin` with the options the CLI uses, made through the engine; a
/// reference that is not one is refused before the registry is asked.
#[test]
fn base_image_pin_takes_options_made_through_the_engine() {
    let f = Fixture::new();
    let opts: aibox_engine::HttpOptions = aibox_engine::base_image_pin::default_options();
    assert_eq!(opts.max_redirects, 0, "a registry question, not a download");
    let download: aibox_engine::base_image_pin::HttpOptions =
        aibox_engine::base_image_pin::HttpOptions::default();
    assert!(download.max_bytes > opts.max_bytes);
    let err = aibox_engine::base_image_pin::pin(&f.root, Some("not a ref"), true, &opts)
        .expect_err("not a reference");
    let aibox_engine::base_image_pin::PinError::Registry(registry) = &err else {
        panic!("{err:?}");
    };
    let _: &aibox_engine::RegistryError = registry;
    let _: &aibox_engine::base_image_pin::RegistryError = registry;
}

/// `doctor` with its engine detection set and its findings read by severity, the way the
/// CLI's `doctor -q` reads them.
#[test]
fn doctor_options_and_findings_through_the_engine() {
    let f = Fixture::new();
    let options = aibox_engine::doctor::DoctorOptions {
        detect: aibox_engine::DetectEnv::from_process(),
        skip_engine: true,
        update_check: aibox_engine::updates::UpdateCheck::Never,
        ..aibox_engine::doctor::DoctorOptions::default()
    };
    let _: &aibox_engine::doctor::DetectEnv = &options.detect;
    let report = aibox_engine::doctor::doctor(&f.root, &options).unwrap();
    let all: Vec<&aibox_engine::Finding> = report.findings.iter().collect();
    let mut by_severity = 0;
    for severity in [
        aibox_engine::Severity::Error,
        aibox_engine::doctor::Severity::Warning,
        aibox_engine::Severity::Info,
    ] {
        for finding in report.by_severity(severity) {
            let _: &aibox_engine::doctor::Finding = finding;
            assert_eq!(finding.severity, severity);
            by_severity += 1;
        }
    }
    assert!(by_severity <= all.len());
}

/// `resolve` for a chosen engine (what `up` passes after detecting one), its seccomp
/// decision and the lock the plan records.
#[test]
fn plan_options_engine_and_what_resolve_and_plan_return() {
    let f = Fixture::new();
    let options = aibox_engine::PlanOptions {
        engine: Some(aibox_engine::TargetEngine::Podman),
        ..apply_opts(None).plan
    };
    let resolved = aibox_engine::resolve(&f.root, &options).unwrap();
    assert_eq!(
        resolved.security.engine,
        Some(aibox_engine::TargetEngine::Podman)
    );
    let decision: Result<&aibox_engine::SecurityDecision, aibox_engine::PolicyError> =
        resolved.security.check();
    assert!(decision.is_ok(), "{decision:?}");
    let _: aibox_engine::SeccompPosture = resolved.security.posture();
    let previous: Option<&aibox_engine::Lock> = resolved.previous_lock.as_ref();
    assert!(previous.is_none());
    let plan = aibox_engine::plan(&resolved).unwrap();
    let lock: &aibox_engine::Lock = &plan.lock;
    let text = lock.render().unwrap();
    let parsed: Result<aibox_engine::Lock, aibox_engine::LockError> =
        aibox_engine::Lock::parse(&text, Utf8Path::new("aibox.lock"));
    assert_eq!(parsed.unwrap().render().unwrap(), text);
}

/// `mcp list`'s rows and their origin.
#[test]
fn mcp_list_rows_through_the_engine() {
    let f = Fixture::with(
        "[container]\nname = \"demo\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\n\
         harnesses = [\"claude\"]\n\n[[ai.mcp.servers]]\nname = \"docs\"\n\
         url = \"https://mcp.example.invalid/mcp\"\n",
    );
    let list = aibox_engine::mcp_list(&f.root).unwrap();
    let docs: &aibox_engine::EffectiveServer = list
        .servers
        .iter()
        .find(|s| s.name == "docs")
        .unwrap_or_else(|| panic!("{list:?}"));
    assert_eq!(docs.origin, aibox_engine::Origin::Team);
}

/// The lower crates' errors an [`EngineError`] carries, each named through the engine.
fn carried(e: &EngineError) -> Option<String> {
    fn text<E: Display>(e: &E) -> String {
        e.to_string()
    }
    Some(match e {
        EngineError::Devcontainer(e) => text::<aibox_engine::DevcontainerError>(e),
        EngineError::Lock(e) => text::<aibox_engine::LockError>(e),
        EngineError::Policy(e) => text::<aibox_engine::PolicyError>(e),
        EngineError::Mcp(e) => text::<aibox_engine::McpError>(e),
        EngineError::Provenance(e) => text::<aibox_engine::ProvenanceError>(e),
        EngineError::Review(e) => text::<aibox_engine::ReviewError>(e),
        EngineError::SkillGate(e) => text::<aibox_engine::GateError>(e),
        EngineError::Write(e) => text::<aibox_engine::writer::WriteError>(e),
        _ => return None,
    })
}

/// An error of a lower crate reaches the embedder as its own type.
#[test]
fn engine_errors_carry_types_named_through_the_engine() {
    let f = Fixture::new();
    f.write(".mcp.json", "{\n  \"mcpServers\": {,\n}\n");
    let err = aibox_engine::apply(&f.root, &apply_opts(None)).unwrap_err();
    let text = carried(&err).unwrap_or_else(|| panic!("{err:?}"));
    assert!(text.contains(".mcp.json"), "{text}");
}

/// The signatures of the entry points that need a container engine or the network,
/// checked by the compiler only: the container's lifecycle, progress and state, `mcp
/// check`'s probe, the Codex sandbox probe and the published processkit releases.
#[test]
fn entry_points_that_need_an_engine_or_the_network_type_check() {
    type LifecycleResult<T> = Result<T, aibox_engine::lifecycle::LifecycleError>;
    type Container<'a> = (&'a aibox_engine::Runtime, &'a aibox_engine::Target);
    type Found<'a> = Option<&'a aibox_engine::FoundContainer>;
    type Sandbox = Option<aibox_engine::codex_sandbox::SandboxReport>;
    type Newest = Result<aibox_engine::PublishedRelease, EngineError>;
    type CaFile = Option<std::sync::Arc<str>>;
    let _: for<'a> fn(
        &Utf8Path,
        &aibox_engine::lifecycle::LifecycleOptions,
        aibox_engine::Progress<'a>,
    ) -> LifecycleResult<aibox_engine::Status> = aibox_engine::lifecycle::down;
    let _: fn(
        &Utf8Path,
        &aibox_engine::lifecycle::LifecycleOptions,
    ) -> LifecycleResult<aibox_engine::Status> = aibox_engine::lifecycle::status;
    let _: fn(
        &Utf8Path,
        &aibox_engine::lifecycle::LifecycleOptions,
    ) -> LifecycleResult<(aibox_engine::Runtime, aibox_engine::Target)> =
        aibox_engine::lifecycle::runtime_for;
    let _: fn(&aibox_config::AiboxToml, aibox_engine::SeccompPosture, Container, Found) -> Sandbox =
        aibox_engine::codex_sandbox::probe;
    let _: fn(aibox_engine::Engine) -> aibox_engine::TargetEngine =
        aibox_engine::codex_sandbox::from_engine;
    let _: fn(&str, CaFile) -> Result<aibox_engine::ReleaseList, EngineError> =
        aibox_engine::versions::list;
    let _: fn(&str, bool, CaFile) -> Newest = aibox_engine::versions::newest;
    let options = aibox_engine::lifecycle::LifecycleOptions {
        env: aibox_engine::DetectEnv::from_process(),
        timeouts: aibox_engine::Timeouts::default(),
        ..aibox_engine::lifecycle::LifecycleOptions::default()
    };
    let _: aibox_engine::McpCheckOptions = aibox_engine::McpCheckOptions {
        lifecycle: options,
        ..aibox_engine::McpCheckOptions::default()
    };
    let state = |s: &aibox_engine::Status| -> (
        aibox_engine::ContainerState,
        aibox_engine::Engine,
        aibox_engine::ComposeKind,
    ) { (s.state, s.engine, s.compose) };
    let probe: fn(&aibox_engine::ServerCheck) -> Option<&aibox_engine::McpProbe> =
        |c| c.probe.as_ref();
    let mut events = 0;
    let mut progress = |_: &aibox_engine::Event| events += 1;
    let _: aibox_engine::Progress<'_> = &mut progress;
    let _ = (state, probe);
    let _: fn(&aibox_engine::RuntimeError) -> String = ToString::to_string;
}

/// Only `aibox_engine` and `aibox_config` are named above: a path into another aibox
/// crate would compile here (the engine's tests see its dependencies), not for an embedder.
#[test]
fn this_file_names_no_other_aibox_crate() {
    let source = include_str!("embedder_api.rs");
    for krate in [
        "devcontainer",
        "fs",
        "mcp_registration",
        "policy",
        "provenance",
        "runtime",
        "skill_review",
    ] {
        let path = format!("aibox_{krate}::");
        assert!(!source.contains(&path), "names {path}");
    }
}
