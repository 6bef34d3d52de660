//! `aibox processkit versions` and `aibox init --processkit-version latest`: the releases
//! a processkit source has published (`aibox_provenance::releases`), asked with the API
//! address and token of the environment. The chosen version is written as an exact tag;
//! nothing here decides trust or installs anything.

use camino::Utf8Path;

use aibox_provenance::releases::{self, PublishedRelease, ReleaseList, Token};
use aibox_provenance::{HttpOptions, ProvenanceError};

use crate::error::EngineError;

/// The source to list: `source` when given, else the project's `[processkit] source`
/// (the official repository when unset; also without a project).
pub fn source_for(root: Option<&Utf8Path>, source: Option<&str>) -> Result<String, EngineError> {
    if let Some(s) = source {
        return Ok(s.to_owned());
    }
    let section = match root {
        Some(root) => aibox_config::load_project(root)?.config.processkit,
        None => aibox_config::ProcesskitSection::default(),
    };
    Ok(section.effective_source().to_owned())
}

/// The personal extra CA of the project at `root` (`.aibox-local.toml`
/// `container.extra_ca_certificates`), which the requests of commands run in it trust as
/// `apply`'s do; `None` outside a project (or one that does not load), or when unset.
///
/// # Errors
/// The file is set but cannot be used (`aibox::apply::extra_ca`), as `apply` refuses it.
pub fn extra_ca_of(root: Option<&Utf8Path>) -> Result<Option<std::sync::Arc<str>>, EngineError> {
    let Some(root) = root else {
        return Ok(None);
    };
    let Ok(project) = aibox_config::load_project(root) else {
        return Ok(None);
    };
    crate::config_check::http_extra_ca_checked(root, &project.local)
}

/// Every published release of `source`, newest version first. The API base comes from
/// `AIBOX_GITHUB_API` when set, the token from `GITHUB_TOKEN` / `GH_TOKEN`; `extra_ca`
/// is trusted beside the system's roots ([`extra_ca_of`]).
pub fn list(
    source: &str,
    extra_ca: Option<std::sync::Arc<str>>,
) -> Result<ReleaseList, EngineError> {
    let api_base = std::env::var(releases::API_URL_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty());
    let opts = HttpOptions {
        extra_ca_pem: extra_ca,
        ..HttpOptions::default()
    };
    Ok(releases::list_releases(
        source,
        api_base.as_deref(),
        Token::from_env().as_ref(),
        &opts,
    )?)
}

/// The newest published release of `source` (pre-releases only when `prereleases`).
pub fn newest(
    source: &str,
    prereleases: bool,
    extra_ca: Option<std::sync::Arc<str>>,
) -> Result<PublishedRelease, EngineError> {
    let list = list(source, extra_ca)?;
    list.newest(prereleases).cloned().ok_or_else(|| {
        let only_pre: Vec<&str> = list
            .releases
            .iter()
            .take(5)
            .map(|r| r.version.as_str())
            .collect();
        let reason = if only_pre.is_empty() {
            "it has published no release with a version tag".to_owned()
        } else {
            format!(
                "it has published only pre-releases ({}); name one as the version",
                only_pre.join(", ")
            )
        };
        EngineError::from(ProvenanceError::ReleasesApi {
            url: list.api_url.clone(),
            reason,
        })
    })
}
