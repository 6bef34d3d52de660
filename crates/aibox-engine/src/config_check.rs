//! The configuration checks that `apply`, `config validate` and `config set` share.
//!
//! Beyond the strict loader (types, unknown keys, cross-field rules), the committed
//! `aibox.toml` must hold no literal secret, a processkit pin must be a concrete release,
//! and a processkit URL must be `https://` (or loopback). Running the same function in all
//! three commands means `config set` and `config validate` never accept what `apply`
//! then refuses.

pub use crate::error::ConfigCheckError;
use aibox_config::AiboxToml;
use aibox_policy::{Severity, TextKind, scan_secrets};
use camino::Utf8Path;

/// Checks the team configuration `config` parsed from `text` (the committed
/// `aibox.toml`).
pub fn check_team_config(text: &str, config: &AiboxToml) -> Result<(), ConfigCheckError> {
    if let Some(f) = scan_secrets("aibox.toml", text, TextKind::Toml)
        .into_iter()
        .find(|f| f.severity == Severity::Error)
    {
        return Err(ConfigCheckError::Secret {
            line: f.line.unwrap_or(0),
            message: f.message,
            code: f.code,
            remedy: f.remedy,
        });
    }
    // Checked whenever set, in any context mode: a committed pin is never floating and a
    // committed source is never plain http, even while processkit is switched off.
    let pk = &config.processkit;
    if let Some(version) = &pk.version {
        aibox_provenance::source::check_version(version)?;
    }
    if let Some(url) = pk.source.as_deref().filter(|s| s.contains("://")) {
        aibox_provenance::fetch::check_url(url)?;
    }
    // A trusted source is trusted for what is downloaded from it: never plain http.
    for url in pk.trusted_sources.iter().filter(|s| s.contains("://")) {
        aibox_provenance::fetch::check_url(url)?;
    }
    Ok(())
}

/// The MCP servers of both files as registration takes them (every value judged, a name
/// in both files refused): the error `apply` would stop with.
pub fn check_servers(
    config: &AiboxToml,
    local: &aibox_config::LocalToml,
) -> Result<(), ConfigCheckError> {
    aibox_mcp_registration::collect_servers(config, local, &[])?;
    Ok(())
}

/// Loads the project at `root` strictly and runs [`check_team_config`] on it, on the text
/// the loader read (`aibox.toml` is read once).
pub fn check_project(root: &Utf8Path) -> Result<aibox_config::Project, crate::error::EngineError> {
    let (project, text) = aibox_config::load_project_with_text(root)?;
    check_team_config(&text, &project.config).map_err(crate::error::EngineError::from)?;
    check_servers(&project.config, &project.local).map_err(crate::error::EngineError::from)?;
    Ok(project)
}

/// Runs [`check_team_config`] on a project loaded with [`aibox_config::load_project`].
pub(crate) fn check_loaded(
    root: &Utf8Path,
    project: &aibox_config::Project,
) -> Result<(), crate::error::EngineError> {
    let path = root.join(aibox_config::AIBOX_TOML);
    let text = fs_err::read_to_string(&path)
        .map_err(|e| crate::error::EngineError::io("read", &path, e))?;
    check_team_config(&text, &project.config).map_err(crate::error::EngineError::from)?;
    check_servers(&project.config, &project.local).map_err(crate::error::EngineError::from)
}

/// Settings that are valid but change no file, as warnings for `apply` (and findings for
/// `doctor`): a setting that silently does nothing is worse than none.
pub fn unapplied_settings(config: &AiboxToml, local: &aibox_config::LocalToml) -> Vec<String> {
    let mut out = ignored_egress_settings(config, local);
    out.extend(unapplied_execution(config));
    out
}

/// `[network]` settings that `egress = "none"` ignores (no proxy, so no host is allowed
/// and no upstream is used), one warning per file: someone who listed hosts expects them
/// to be reachable.
pub fn ignored_egress_settings(config: &AiboxToml, local: &aibox_config::LocalToml) -> Vec<String> {
    if config.network.egress != aibox_config::EgressMode::None {
        return Vec::new();
    }
    let mut out = Vec::new();
    let lists = [
        (aibox_config::AIBOX_TOML, config.network.allow.len(), false),
        (
            aibox_config::LOCAL_TOML,
            local.network.allow.len(),
            local.network.upstream_proxy.is_some(),
        ),
    ];
    for (file, hosts, upstream) in lists {
        let mut what = Vec::new();
        if hosts > 0 {
            what.push(format!("`[network] allow` ({hosts} host(s))"));
        }
        if upstream {
            what.push("`[network] upstream_proxy`".to_owned());
        }
        if what.is_empty() {
            continue;
        }
        out.push(format!(
            "config: {} in {file} {} ignored: `[network] egress = \"none\"` lets nothing out \
             of the container; set `egress = \"allowlist\"` to reach those hosts, or remove the \
             entries",
            what.join(" and "),
            if what.len() > 1 { "are" } else { "is" }
        ));
    }
    out
}

fn unapplied_execution(config: &AiboxToml) -> Vec<String> {
    let e = &config.ai.execution;
    let mut keys = Vec::new();
    if e.filesystem.is_some() {
        keys.push("filesystem");
    }
    if e.approval.is_some() {
        keys.push("approval");
    }
    if e.network.is_some() {
        keys.push("network");
    }
    if keys.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "config: [ai.execution] {} is not applied: aibox writes it into no harness file yet; \
         set the harness's own keys instead (for example Codex `sandbox_mode` and \
         `approval_policy` in .codex/config.toml) and remove it from aibox.toml",
        keys.join(", ")
    )]
}
