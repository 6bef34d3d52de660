//! The `exceptions` check: active consents and security exceptions (listed on every run),
//! unverified catalog tools and an unverified processkit release.

use aibox_config::{AiboxToml, SecurityException};
use aibox_policy::{Finding, Severity};

/// The consent findings and the list the report shows.
pub(crate) fn findings(config: &AiboxToml) -> (Vec<Finding>, Vec<SecurityException>) {
    let mut list = Vec::new();
    let sec = &config.security;
    if sec.acknowledge_seccomp_unconfined {
        list.push(SecurityException {
            option: "acknowledge_seccomp_unconfined".to_owned(),
            reason: "seccomp=unconfined accepted for Codex's bubblewrap sandbox".to_owned(),
        });
    }
    if sec.acknowledge_seccomp_profile {
        list.push(SecurityException {
            option: "acknowledge_seccomp_profile".to_owned(),
            reason: "generated seccomp profile with user namespaces accepted".to_owned(),
        });
    }
    list.extend(sec.exceptions.iter().cloned());
    let mut findings: Vec<Finding> = list
        .iter()
        .map(|e| {
            Finding::new(
                "aibox::doctor::exception",
                Severity::Info,
                aibox_config::AIBOX_TOML,
                format!("active security exception `{}`: {}", e.option, e.reason),
                "remove it from [security] when it is no longer needed",
            )
        })
        .collect();
    if let Ok(catalog) = aibox_devcontainer::catalog::Catalog::builtin() {
        findings.extend(unverified_tool_findings(config, &catalog));
    }
    if config.processkit.allow_unverified {
        findings.push(Finding::new(
            "aibox::doctor::unverified_processkit",
            Severity::Warning,
            aibox_config::AIBOX_TOML,
            "`[processkit] allow_unverified = true`: processkit content is installed without a \
             verified digest",
            "set `[processkit] sha256` to the release archive's digest and remove the opt-out",
        ));
    }
    (findings, list)
}

/// Catalog tools this project's image installs without verification: always shown, with
/// the catalog's written reason.
fn unverified_tool_findings(
    config: &AiboxToml,
    catalog: &aibox_devcontainer::catalog::Catalog,
) -> Vec<Finding> {
    let Ok(tools) = aibox_devcontainer::selected_tools(config, catalog) else {
        return Vec::new();
    };
    tools
        .into_iter()
        .filter(|t| t.verification == aibox_devcontainer::catalog::Verification::Exception)
        .map(|t| {
            Finding::new(
                "aibox::doctor::unverified_tool",
                Severity::Warning,
                aibox_devcontainer::DOCKERFILE_PATH,
                format!(
                    "`{} {}` is installed without verification: {}",
                    t.name,
                    t.version,
                    t.exception.as_deref().unwrap_or_default()
                ),
                "prefer a verified catalog version; `aibox addon list` shows each tool's check",
            )
        })
        .collect()
}

#[cfg(test)]
mod tool_exception_tests {
    use aibox_devcontainer::catalog::Catalog;

    /// An unverified catalog entry the project installs is always reported, with its
    /// reason; one it does not install is not.
    #[test]
    fn an_installed_unverified_tool_is_reported_with_its_reason() {
        let catalog = Catalog::parse(
            "[tool.ca-certificates]\nversion = \"bookworm\"\nsummary = \"c\"\n\
             verification = \"apt-signed\"\napt = [\"ca-certificates\"]\n\
             [tool.curl]\nversion = \"bookworm\"\nsummary = \"c\"\n\
             verification = \"apt-signed\"\napt = [\"curl\"]\n\
             [tool.git]\nversion = \"bookworm\"\nsummary = \"g\"\n\
             verification = \"apt-signed\"\napt = [\"git\"]\n\
             [tool.odd]\nversion = \"1.0.0\"\nsummary = \"o\"\n\
             verification = \"exception\"\nexception = \"upstream publishes no digest\"\n\
             [[tool.odd.artifact]]\nurl = \"https://example.invalid/odd.tar.gz\"\n",
        )
        .unwrap();
        let config = |addons: &str| -> aibox_config::AiboxToml {
            aibox_config::parse_aibox_toml(
                &format!("[container]\nname = \"x\"\n[context]\nmode = \"harness-only\"\n{addons}"),
                "aibox.toml",
            )
            .unwrap()
        };
        assert!(super::unverified_tool_findings(&config(""), &catalog).is_empty());
        let findings =
            super::unverified_tool_findings(&config("[addons]\ntools = [\"odd\"]\n"), &catalog);
        assert_eq!(findings.len(), 1);
        let text = format!("{findings:?}");
        assert!(
            text.contains("odd 1.0.0") && text.contains("upstream publishes no digest"),
            "{text}"
        );
    }
}
