//! The configuration checks that `apply`, `config validate` and `config set` share.
//!
//! Beyond the strict loader (types, unknown keys, cross-field rules), the committed
//! `aibox.toml` must hold no literal secret, a processkit pin must be a concrete release,
//! and a processkit URL must be `https://` (or loopback). Running the same function in all
//! three commands means `config set` and `config validate` never accept what `apply`
//! then refuses.
//!
//! [`check_settings`] adds what `apply` refuses of the settings of both files while it
//! plans: the seccomp consent (the policy's own decision), the personal extra CA file
//! (its check is the one the plan uses) and every value the dev container
//! generator takes (its own `render`, so the personal environment's values included).

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

/// [`check_project`], then [`check_settings`]: everything `config validate` checks.
///
/// # Errors
/// The first refusal `apply` would stop with for the configuration.
pub fn check_all(root: &Utf8Path) -> Result<aibox_config::Project, crate::error::EngineError> {
    let project = check_project(root)?;
    check_settings(root, &project.config, &project.local)?;
    Ok(project)
}

/// The checks `apply` makes of the settings while it plans, before it writes anything:
/// the seccomp consent the configuration needs (judged as `apply --check` judges it: the
/// engine-aware half only where an engine is found), the personal extra CA file, and
/// every value the dev container generator writes (environment values, volumes, the
/// container's user, add-ons). `root` is the project folder (a relative CA path starts
/// there).
///
/// # Errors
/// The refusal `apply` would report: `aibox::policy::seccomp_consent`,
/// `aibox::apply::extra_ca`, an `aibox::devcontainer::*` value error.
pub fn check_settings(
    root: &Utf8Path,
    config: &AiboxToml,
    local: &aibox_config::LocalToml,
) -> Result<(), crate::error::EngineError> {
    match settings_problems(root, config, local).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Every refusal of [`check_settings`], one per kind of check (the seccomp consent, the
/// CA file, the generator's values), in that order.
pub fn settings_problems(
    root: &Utf8Path,
    config: &AiboxToml,
    local: &aibox_config::LocalToml,
) -> Vec<crate::error::EngineError> {
    use crate::error::EngineError;
    let mut problems = Vec::new();
    // Judged as `apply --check` judges it: the engine-aware half only where an engine is
    // found.
    if let Err(e) = crate::security::Security::judged(config, None, true).check() {
        problems.push(EngineError::from(e));
    }
    let extra_ca = match read_extra_ca(root, local).map(|(path, text)| extra_ca_text(path, text)) {
        Some(Err(e)) => {
            problems.push(e);
            None
        }
        Some(Ok(text)) => Some(text),
        None => None,
    };
    let mut inputs = aibox_devcontainer::Inputs::new(config, local, env!("CARGO_PKG_VERSION"));
    inputs.extra_ca = extra_ca.as_deref();
    if let Err(e) = aibox_devcontainer::render(&inputs) {
        problems.push(EngineError::from(e));
    }
    problems
}

/// `.aibox-local.toml` `container.extra_ca_certificates` as (path as resolved, its text
/// or why it could not be read); `None` when unset. A personal path, so it may lie
/// outside the project; a relative one starts at the project root.
pub(crate) fn read_extra_ca(
    root: &Utf8Path,
    local: &aibox_config::LocalToml,
) -> Option<(camino::Utf8PathBuf, Result<String, String>)> {
    let path = root.join(local.container.extra_ca_certificates.as_deref()?);
    let text = fs_err::read_to_string(path.as_std_path()).map_err(|e| e.to_string());
    Some((path, text))
}

/// The extra CA bundle for aibox's own downloads (release archives, registry
/// questions), which pass the same TLS-inspecting proxy as the image build; `None` when
/// unset or unusable: for commands that only read (`doctor` reports why).
pub(crate) fn http_extra_ca(
    root: &Utf8Path,
    local: &aibox_config::LocalToml,
) -> Option<std::sync::Arc<str>> {
    http_extra_ca_checked(root, local).ok().flatten()
}

/// [`http_extra_ca`] for a command about to ask the network: an unusable file is its
/// error, said before the request. Dropped instead, the request failed later as an
/// untrusted certificate whose hint sent the user to the setting already made.
pub(crate) fn http_extra_ca_checked(
    root: &Utf8Path,
    local: &aibox_config::LocalToml,
) -> Result<Option<std::sync::Arc<str>>, crate::error::EngineError> {
    read_extra_ca(root, local)
        .map(|(path, text)| extra_ca_text(path, text).map(std::sync::Arc::from))
        .transpose()
}

/// The extra CA bundle as the image gets it (ending in a line break), or why it cannot
/// be used: unreadable, no PEM certificate in it, or a private key in it.
pub(crate) fn extra_ca_text(
    path: camino::Utf8PathBuf,
    text: Result<String, String>,
) -> Result<String, crate::error::EngineError> {
    use crate::error::EngineError;
    let mut text = text.map_err(|reason| EngineError::ExtraCa {
        path: path.clone(),
        reason,
    })?;
    if !text.contains("-----BEGIN CERTIFICATE-----") {
        return Err(EngineError::ExtraCa {
            path,
            reason: "the file holds no PEM certificate".to_owned(),
        });
    }
    // The bundle is copied into the image, where every process (and every layer of its
    // history) can read it: a private key has no business there.
    if aibox_config::secret_rules::find_credential(&text)
        .is_some_and(|hit| hit.kind == aibox_config::secret_rules::PEM_PRIVATE_KEY)
    {
        return Err(EngineError::ExtraCa {
            path,
            // Worded without a PEM key header: the output masker would take one in this
            // message for a key and hide the rest of the error.
            reason: "the file holds a private key (a PEM block whose header names a private \
                     key); a CA bundle needs only the certificates: remove the key block, or \
                     point at a file that holds only `BEGIN CERTIFICATE` blocks"
                .to_owned(),
        });
    }
    // Blocks that say CERTIFICATE but are not one (a damaged copy) would be trusted for
    // nothing, silently, and the refusal would then advise what the user already did.
    let (usable, damaged) = aibox_provenance::fetch::usable_certificates(&text);
    if usable == 0 {
        return Err(EngineError::ExtraCa {
            path,
            reason: format!(
                "none of its {damaged} certificate block(s) is a certificate (a damaged or \
                 cut copy?); export the CA again, in PEM"
            ),
        });
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
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

/// `[network]` settings the egress mode ignores, one warning per file: `allow` and
/// `upstream_proxy` count only with `egress = "allowlist"`. With `none` no host is let
/// out, and someone who listed hosts expects them to be reachable; with `open` (the
/// default) every host is, and someone who listed hosts expects the others to be
/// refused.
pub fn ignored_egress_settings(config: &AiboxToml, local: &aibox_config::LocalToml) -> Vec<String> {
    let mode = config.network.egress;
    if mode == aibox_config::EgressMode::Allowlist {
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
        let verb = if what.len() > 1 { "are" } else { "is" };
        let why = if mode == aibox_config::EgressMode::None {
            "`[network] egress = \"none\"` lets nothing out of the container; set `egress = \
             \"allowlist\"` to reach those hosts, or remove the entries"
                .to_owned()
        } else {
            // Open: the container uses the engine's network directly, with no proxy to
            // filter hosts or to forward through an upstream.
            let (effect, fix) = match (hosts > 0, upstream) {
                (true, true) => (
                    "the list restricts nothing and no proxy forwards through the upstream",
                    "to let only the allowed hosts through, by way of the upstream proxy",
                ),
                (true, false) => (
                    "the list restricts nothing",
                    "to let only the allowed hosts through",
                ),
                _ => (
                    "no proxy forwards through the upstream",
                    "for the egress proxy to forward through it",
                ),
            };
            format!(
                "`[network] egress = \"open\"` (the default) lets the container reach every \
                 host directly, so {effect}; set `egress = \"allowlist\"` in {} {fix}, or \
                 remove the entries",
                aibox_config::AIBOX_TOML
            )
        };
        out.push(format!(
            "config: {} in {file} {verb} ignored: {why}",
            what.join(" and ")
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
