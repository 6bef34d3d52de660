//! `doctor`'s `base-image` check: the lock, the configuration and the running container
//! agree on what the container was built from.
//!
//! Without the engine it compares `aibox.lock [base_image]` with `container.base_image`
//! (a stale lock means the Dockerfile on disk may start from another image) and says
//! when the base image is pinned by tag only. With a running container it reads the
//! container's labels (`aibox.version`, `aibox.profile`, `org.opencontainers.image.source`)
//! and its `/etc/aibox-version` marker and compares them with the lock's aibox version
//! and the configuration. Reads only; never writes.

use std::collections::BTreeMap;

use aibox_config::{AiboxToml, Project};
use aibox_policy::{Finding, Severity};
use aibox_provenance::lock::{LOCK_FILE, Lock};
use aibox_runtime::DetectEnv;
use camino::Utf8Path;

/// The marker file every aibox image carries.
pub const MARKER: &str = "/etc/aibox-version";

/// What the running container says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerFacts {
    /// The container's labels (the image's, as the engine reports them).
    pub labels: BTreeMap<String, String>,
    /// The trimmed text of [`MARKER`], `None` when it cannot be read.
    pub marker: Option<String>,
}

fn finding(code: &str, severity: Severity, file: &str, message: String, remedy: &str) -> Finding {
    Finding::new(
        &format!("aibox::doctor::{code}"),
        severity,
        file,
        message,
        remedy,
    )
}

/// The comparisons that need no engine: lock versus configuration.
pub fn lock_findings(config: &AiboxToml, lock: Option<&Lock>) -> Vec<Finding> {
    let configured = &config.container.base_image;
    let mut out = Vec::new();
    // No lock at all is the `version` check's finding; a lock without `[base_image]` was
    // written by an older aibox.
    match lock.map(|l| l.base_image.as_ref()) {
        Some(None) => out.push(finding(
            "base_image_unlocked",
            Severity::Warning,
            LOCK_FILE,
            "aibox.lock records no base image".to_owned(),
            "run `aibox apply` to record it",
        )),
        Some(Some(locked)) if locked.reference != *configured => out.push(finding(
            "base_image_lock_stale",
            Severity::Warning,
            LOCK_FILE,
            format!(
                "aibox.lock records base image `{}`, but aibox.toml names `{configured}`",
                locked.reference
            ),
            "run `aibox apply` so the Dockerfile and the lock follow the configuration",
        )),
        None | Some(Some(_)) => {}
    }
    if aibox_config::ImageRef::parse(configured).digest.is_none() {
        out.push(finding(
            "base_image_tag_only",
            Severity::Info,
            aibox_config::AIBOX_TOML,
            format!(
                "base image `{configured}` is pinned by tag only; a moved tag changes what the \
                 next build starts from"
            ),
            "append the digest (`name:tag@sha256:...`), as aibox's default image does",
        ));
    }
    out
}

/// The comparisons of a running container with the lock and the configuration.
pub fn container_findings(
    facts: &ContainerFacts,
    config: &AiboxToml,
    lock: Option<&Lock>,
) -> Vec<Finding> {
    const REBUILD: &str = "rebuild the container from the current files: `aibox down`, then \
                           `aibox up --build`";
    let mut out = Vec::new();
    let label = |k: &str| facts.labels.get(k).map(String::as_str);
    let version = label("aibox.version");
    let locked = lock
        .map(|l| l.aibox.cli_version.as_str())
        .filter(|v| !v.is_empty());
    match (version, locked) {
        (None, _) => out.push(finding(
            "container_unlabelled",
            Severity::Warning,
            "",
            "the running container has no `aibox.version` label: it was not built from an \
             aibox Dockerfile"
                .to_owned(),
            REBUILD,
        )),
        (Some(v), Some(l)) if v != l => out.push(finding(
            "container_version",
            Severity::Warning,
            LOCK_FILE,
            format!("the running container was built by aibox {v}; aibox.lock was written by {l}"),
            REBUILD,
        )),
        _ => {}
    }
    match (&facts.marker, version) {
        (None, _) => out.push(finding(
            "container_marker",
            Severity::Warning,
            "",
            format!("the running container has no readable {MARKER}"),
            REBUILD,
        )),
        (Some(m), Some(v)) if m != v => out.push(finding(
            "container_marker",
            Severity::Warning,
            "",
            format!("{MARKER} says `{m}` but the image label `aibox.version` says `{v}`"),
            REBUILD,
        )),
        _ => {}
    }
    let profile = config.aibox.profile.as_str();
    if let Some(p) = label("aibox.profile")
        && p != profile
    {
        out.push(finding(
            "container_profile",
            Severity::Warning,
            aibox_config::AIBOX_TOML,
            format!(
                "the running container was built for profile `{p}`; aibox.toml says `{profile}`"
            ),
            REBUILD,
        ));
    }
    let source = config
        .aibox
        .repository
        .as_deref()
        .unwrap_or(aibox_devcontainer::DEFAULT_IMAGE_SOURCE);
    if let Some(s) = label("org.opencontainers.image.source")
        && s != source
    {
        out.push(finding(
            "container_source",
            Severity::Warning,
            aibox_config::AIBOX_TOML,
            format!(
                "the running container's source label is `{s}`; the configuration gives `{source}`"
            ),
            REBUILD,
        ));
    }
    if out.is_empty() {
        out.push(finding(
            "container_matches",
            Severity::Info,
            "",
            format!(
                "the running container's version, profile and source labels match the \
                 configuration (aibox {}, profile {profile}, {MARKER} present; whether it was \
                 built from the current files is the container-state check's)",
                version.unwrap_or_default()
            ),
            "",
        ));
    }
    out
}

/// Reads the labels and marker of the project's container; `Ok(None)` when there is none.
///
/// # Errors
/// The engine cannot be asked (the message is the reason, shown as a skip).
pub fn read_container(root: &Utf8Path, env: &DetectEnv) -> Result<Option<ContainerFacts>, String> {
    let lifecycle = crate::lifecycle::LifecycleOptions {
        env: env.clone(),
        timeouts: aibox_runtime::Timeouts::default(),
        lock_timeout: crate::lifecycle::CONTAINER_LOCK_TIMEOUT,
    };
    let (runtime, target) =
        crate::lifecycle::runtime_for(root, &lifecycle).map_err(|e| e.to_string())?;
    container_facts(&runtime, &target)
}

/// [`read_container`] with the engine already found.
fn container_facts(
    runtime: &aibox_runtime::Runtime,
    target: &aibox_runtime::Target,
) -> Result<Option<ContainerFacts>, String> {
    match runtime.container(target).map_err(|e| e.to_string())? {
        Some(found) => facts_of(runtime, &found).map(Some),
        None => Ok(None),
    }
}

/// The labels and marker of the container already found.
fn facts_of(
    runtime: &aibox_runtime::Runtime,
    found: &aibox_runtime::FoundContainer,
) -> Result<ContainerFacts, String> {
    let value: serde_json::Value = serde_json::from_str(found.json()).map_err(|e| e.to_string())?;
    let item = value.get(0).unwrap_or(&value);
    let labels = item["Config"]["Labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let marker = if found.running() {
        match runtime.exec_output_in(found, "root", &["cat", MARKER]) {
            Ok((true, text)) => Some(text.trim().to_owned()),
            _ => None,
        }
    } else {
        return Err("the container is not running".to_owned());
    };
    Ok(ContainerFacts { labels, marker })
}

/// The whole check for `doctor`: `Err(reason)` means "skipped".
pub(crate) fn check(
    project: Option<&Project>,
    lock: Option<&Lock>,
    engine: &super::EngineAt,
    container: Option<&super::Container>,
) -> Result<Vec<Finding>, String> {
    let p = project.ok_or("no valid configuration")?;
    let mut out = lock_findings(&p.config, lock);
    // No engine, no container, or a stopped one: nothing running to compare (the
    // `container-state` check reports the engine's view).
    if let (Ok((runtime, _)), Some(Ok(Some(found)))) = (engine, container)
        && let Ok(facts) = facts_of(runtime, found)
    {
        out.extend(container_findings(&facts, &p.config, lock));
    }
    Ok(out)
}
