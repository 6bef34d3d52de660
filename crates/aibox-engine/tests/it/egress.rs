//! `[network] egress`: what `apply` writes (proxy files, lock, personal additions kept out
//! of committed files), what the policy gate refuses (overrides that route the agent
//! around the proxy), `aibox network list`, and retirement when egress is open again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use aibox_engine::{EngineError, apply};
use common::{apply_opts, code, empty_project, removed};

const TEAM: &str = "[container]\nname = \"eg\"\nengine = \"podman\"\n\n[context]\nmode = \"harness-only\"\n\n\
                    [ai]\nharnesses = [\"claude\"]\n\n[network]\negress = \"allowlist\"\n\
                    allow = [\"pypi.org\", \"*.pythonhosted.org\"]\n";
const LOCAL: &str = "[network]\nallow = [\"wiki.corp.example\", \"pypi.org\"]\n\
                     upstream_proxy = \"proxy.corp.example:3128\"\n";

const FILTER: &str = ".devcontainer/aibox-egress/egress.filter";
const LOCAL_FILTER: &str = ".devcontainer/aibox-egress/egress.local.filter";
const LOCAL_CONF: &str = ".devcontainer/aibox-egress/egress.local.conf";
const OVERRIDE: &str = ".devcontainer/docker-compose.override.yml";

fn project(team: &str) -> (tempfile::TempDir, camino::Utf8PathBuf) {
    let (dir, root) = empty_project();
    fs_err::write(root.join("aibox.toml"), team).unwrap();
    fs_err::write(root.join(".aibox-local.toml"), LOCAL).unwrap();
    (dir, root)
}

/// The options of an apply after the owner changed the configuration to reach more:
/// approved, as `aibox apply --approve-reach`.
fn owner_approves() -> aibox_engine::ApplyOptions {
    aibox_engine::ApplyOptions {
        approve_reach: true,
        ..apply_opts(None)
    }
}

fn read(root: &camino::Utf8Path, rel: &str) -> String {
    fs_err::read_to_string(root.join(rel)).unwrap()
}

#[test]
fn allowlist_writes_the_proxy_and_keeps_personal_hosts_out_of_committed_files() {
    let (_t, root) = project(TEAM);
    apply(&root, &apply_opts(None)).unwrap();
    let filter = read(&root, FILTER);
    for line in [
        "^api\\.anthropic\\.com$",
        "^pypi\\.org$",
        "^([a-z0-9-]+\\.)+pythonhosted\\.org$",
    ] {
        assert!(
            filter.lines().any(|l| l == line),
            "{line} missing:\n{filter}"
        );
    }
    assert!(
        !filter.contains("corp"),
        "personal host committed:\n{filter}"
    );
    let local_filter = read(&root, LOCAL_FILTER);
    assert!(
        local_filter.contains("^wiki\\.corp\\.example$"),
        "{local_filter}"
    );
    // Already the team's: not repeated in the personal file.
    assert!(!local_filter.contains("pypi"), "{local_filter}");
    assert_eq!(
        read(&root, LOCAL_CONF).lines().last(),
        Some("Upstream http proxy.corp.example:3128")
    );
    let gitignore = read(&root, ".gitignore");
    assert!(gitignore.contains(LOCAL_FILTER) && gitignore.contains(LOCAL_CONF));

    let lock = read(&root, "aibox.lock");
    assert!(lock.contains("[network]\negress = \"allowlist\""), "{lock}");
    assert!(
        lock.contains("\"api.anthropic.com\" = [\"tool claude-code 2.1.197\"]"),
        "{lock}"
    );
    assert!(
        lock.contains("\"pypi.org\" = [\"aibox.toml [network] allow\"]"),
        "{lock}"
    );
    assert!(!lock.contains("corp"), "personal host in the lock:\n{lock}");
    build_registries_stay_apart(&root, &filter, &lock);

    let list = aibox_engine::network_list::network_list(&root).unwrap();
    assert_eq!(list.egress, "allowlist");
    let wiki = list
        .hosts
        .iter()
        .find(|h| h.host == "wiki.corp.example")
        .unwrap();
    assert!(wiki.personal);
    assert_eq!(wiki.origins, [".aibox-local.toml [network] allow"]);
    let pypi = list.hosts.iter().find(|h| h.host == "pypi.org").unwrap();
    assert!(!pypi.personal);
    assert_eq!(
        pypi.origins,
        [
            "aibox.toml [network] allow",
            ".aibox-local.toml [network] allow"
        ]
    );
    assert_eq!(
        list.upstream_proxy.as_deref(),
        Some("proxy.corp.example:3128")
    );

    // A second apply changes nothing.
    let again = apply(&root, &apply_opts(None)).unwrap();
    assert!(removed(&again).is_empty());
    assert_eq!(read(&root, FILTER), filter);

    // Open again: the proxy's files and the lock's list go.
    fs_err::write(
        root.join("aibox.toml"),
        TEAM.replace("egress = \"allowlist\"", "egress = \"open\""),
    )
    .unwrap();
    let report = apply(&root, &owner_approves()).unwrap();
    let gone = removed(&report);
    for path in [
        FILTER,
        ".devcontainer/aibox-egress/egress.conf",
        ".devcontainer/aibox-egress/Dockerfile",
    ] {
        assert!(gone.contains(&path), "{path} not removed: {gone:?}");
    }
    assert!(!read(&root, "aibox.lock").contains("[network]"));
    assert!(!read(&root, ".devcontainer/docker-compose.yml").contains("aibox-internal"));
    assert_eq!(
        aibox_engine::network_list::network_list(&root)
            .unwrap()
            .egress,
        "open"
    );
}

/// The build's registries: recorded apart in the lock and `network list`, never on the
/// agent's allowlist.
fn build_registries_stay_apart(root: &camino::Utf8Path, filter: &str, lock: &str) {
    let build = lock
        .split("[network.build]\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{lock}"));
    assert!(
        build.contains("\"deb.debian.org\" = [\"apt: tool ca-certificates bookworm\""),
        "{lock}"
    );
    assert!(
        build.contains("apt: egress proxy tinyproxy-bin 1.11.1-2.1+deb12u1"),
        "{lock}"
    );
    assert!(
        build.contains("apt: egress relay socat 1.7.4.4-2"),
        "{lock}"
    );
    assert!(
        build.contains("\"registry.npmjs.org\" = [\"download: tool claude-code 2.1.197\"]"),
        "{lock}"
    );
    assert!(
        !filter.contains("debian") && !filter.contains("npmjs"),
        "a build registry on the runtime allowlist:\n{filter}"
    );
    let list = aibox_engine::network_list::network_list(root).unwrap();
    assert!(
        list.hosts.iter().all(|h| h.host != "registry.npmjs.org"),
        "{list:?}"
    );
    let npm = list.build.iter().find(|h| h.host == "registry.npmjs.org");
    assert_eq!(
        npm.map(|h| h.origins.clone()),
        Some(vec!["download: tool claude-code 2.1.197".to_owned()]),
        "{list:?}"
    );
}

/// Each override that routes the agent around the proxy is refused, names the option an
/// exception would take, and writes nothing; with the exception it is a warning.
#[test]
fn the_gate_refuses_overrides_that_bypass_the_proxy() {
    let cases = [
        (
            "services:\n  eg:\n    networks:\n      - default\n",
            "egress:network:default",
        ),
        (
            "services:\n  eg:\n    networks:\n      outside: {}\nnetworks:\n  outside: {}\n",
            "egress:network:outside",
        ),
        (
            "services:\n  eg:\n    network_mode: bridge\n",
            "egress:network_mode:bridge",
        ),
        (
            "networks:\n  aibox-internal:\n    internal: false\n",
            "egress:aibox-internal:internal",
        ),
        (
            "services:\n  relay:\n    image: alpine:3.20\n    networks:\n      - aibox-internal\n      - default\n",
            "egress:network:aibox-internal:relay",
        ),
        // The proxy reaches the agent only through its socket, never on its network.
        (
            "services:\n  aibox-egress:\n    networks:\n      - aibox-internal\n      - aibox-egress\n",
            "egress:network:aibox-internal:aibox-egress",
        ),
        // Another network under the internal one's name: one with a route, or a resolver.
        (
            "networks:\n  aibox-internal:\n    name: podman\n",
            "egress:aibox-internal:name",
        ),
        // The generated name's shape for another project, or the shared name without
        // the checkout's own under `aibox up`.
        (
            "networks:\n  aibox-internal:\n    name: \"${AIBOX_INTERNAL_NETWORK:-other-aibox-internal}\"\n",
            "egress:aibox-internal:name",
        ),
        (
            "networks:\n  aibox-internal:\n    name: eg-aibox-internal\n",
            "egress:aibox-internal:name",
        ),
        (
            "networks:\n  aibox-internal:\n    external: true\n",
            "egress:aibox-internal:external",
        ),
        (
            "networks:\n  aibox-internal:\n    driver_opts:\n      com.docker.network.bridge.name: br0\n",
            "egress:aibox-internal:driver_opts",
        ),
    ];
    for (text, option) in cases {
        let (_t, root) = project(TEAM);
        let err = apply_with_override(&root, text).unwrap_err();
        assert!(matches!(err, EngineError::Policy(_)), "{text}: {err:?}");
        let shown = format!("{err:?}");
        assert!(
            shown.contains("aibox::policy::egress_bypass"),
            "{text}: {shown}"
        );
        assert!(
            shown.contains(option),
            "{text}: {option} not named: {shown}"
        );
        assert!(
            !root.join(FILTER).exists(),
            "{text}: a refused plan wrote files"
        );
        assert_eq!(code(&err), "aibox::policy::gate", "{text}");

        let consented = format!(
            "{TEAM}\n[[security.exceptions]]\noption = \"{option}\"\nreason = \"test relay\"\n"
        );
        fs_err::write(root.join("aibox.toml"), consented).unwrap();
        let report = apply(&root, &apply_opts(None)).unwrap();
        assert!(
            report.warnings.iter().any(|w| w.contains("egress")),
            "{text}: {:?}",
            report.warnings
        );
    }

    // Labels on the internal network (and restating `internal: true` or the generated
    // name) change no route.
    let (_t, root) = project(TEAM);
    let report = apply_with_override(
        &root,
        "networks:\n  aibox-internal:\n    internal: true\n    \
         name: \"${AIBOX_INTERNAL_NETWORK:-eg-aibox-internal}\"\n    labels:\n      team: dev\n",
    )
    .unwrap();
    assert!(
        !report.warnings.iter().any(|w| w.contains("egress")),
        "{:?}",
        report.warnings
    );
}

/// A Compose file that another dev container configuration names is run by the editor
/// just like aibox's own: the same bypasses in it are refused with the same options.
#[test]
fn the_gate_refuses_bypasses_in_another_configurations_compose_file() {
    let cases = [
        (
            "services:\n  eg:\n    networks:\n      - aibox-egress\n",
            "egress:network:aibox-egress",
        ),
        (
            "services:\n  eg:\n    network_mode: bridge\n",
            "egress:network_mode:bridge",
        ),
        (
            "networks:\n  aibox-internal:\n    internal: false\n",
            "egress:aibox-internal:internal",
        ),
        (
            "services:\n  relay:\n    image: alpine:3.20\n    networks:\n      - aibox-internal\n      - aibox-egress\n",
            "egress:network:aibox-internal:relay",
        ),
    ];
    for (text, option) in cases {
        let (_t, root) = project(TEAM);
        fs_err::create_dir_all(root.join(".devcontainer/alt")).unwrap();
        fs_err::write(
            root.join(".devcontainer/alt/devcontainer.json"),
            "{\"dockerComposeFile\": [\"../docker-compose.yml\", \
             \"../docker-compose.override.yml\", \"alt.yml\"], \"service\": \"eg\"}\n",
        )
        .unwrap();
        fs_err::write(root.join(".devcontainer/alt/alt.yml"), text).unwrap();
        let err = apply(&root, &apply_opts(None)).unwrap_err();
        let shown = format!("{err:?}");
        assert!(
            shown.contains("aibox::policy::egress_bypass") && shown.contains(option),
            "{text}: {shown}"
        );
        assert!(
            shown.contains(".devcontainer/alt/alt.yml"),
            "{text}: the file is not named: {shown}"
        );
        assert!(
            !root.join(FILTER).exists(),
            "{text}: a refused plan wrote files"
        );
    }
}

/// `.devcontainer/.env` naming the internal network would move the agent of VS Code and
/// the Dev Containers CLI onto that network: refused, and allowed only by an exception.
#[test]
fn the_gate_refuses_an_env_file_naming_the_internal_network() {
    let (_t, root) = project(TEAM);
    fs_err::create_dir_all(root.join(".devcontainer")).unwrap();
    fs_err::write(
        root.join(".devcontainer/.env"),
        "# team settings\nTZ=UTC\n  export AIBOX_INTERNAL_NETWORK = podman\n",
    )
    .unwrap();
    let err = apply(&root, &apply_opts(None)).unwrap_err();
    let shown = format!("{err:?}");
    assert!(shown.contains("aibox::policy::egress_bypass"), "{shown}");
    assert!(shown.contains("AIBOX_INTERNAL_NETWORK"), "{shown}");
    assert!(!root.join(FILTER).exists(), "a refused plan wrote files");
    // A variable that only starts with the same letters is another variable.
    fs_err::write(
        root.join(".devcontainer/.env"),
        "AIBOX_INTERNAL_NETWORK_NOTE=x\n",
    )
    .unwrap();
    apply(&root, &apply_opts(None)).unwrap();
    let consented = format!(
        "{TEAM}\n[[security.exceptions]]\noption = \"egress:AIBOX_INTERNAL_NETWORK\"\nreason = \"test\"\n"
    );
    fs_err::write(root.join("aibox.toml"), consented).unwrap();
    fs_err::write(
        root.join(".devcontainer/.env"),
        "AIBOX_INTERNAL_NETWORK=podman\n",
    )
    .unwrap();
    let report = apply(&root, &owner_approves()).unwrap();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("AIBOX_INTERNAL_NETWORK")),
        "{:?}",
        report.warnings
    );
}

/// `apply` with `text` as the Compose override file.
fn apply_with_override(
    root: &camino::Utf8Path,
    text: &str,
) -> Result<aibox_engine::ApplyReport, EngineError> {
    fs_err::create_dir_all(root.join(".devcontainer")).unwrap();
    fs_err::write(root.join(OVERRIDE), text).unwrap();
    apply(root, &apply_opts(None))
}

/// In `none` mode the agent is sealed the same way, without a proxy.
#[test]
fn none_mode_has_no_proxy_and_the_same_gate() {
    let team = TEAM.replace("egress = \"allowlist\"", "egress = \"none\"");
    let (_t, root) = project(&team);
    apply(&root, &apply_opts(None)).unwrap();
    let compose = read(&root, ".devcontainer/docker-compose.yml");
    assert!(compose.contains("    internal: true"), "{compose}");
    assert!(!compose.contains("aibox-egress"), "{compose}");
    assert!(!compose.contains("HTTPS_PROXY"), "{compose}");
    assert!(!root.join(FILTER).exists());
    assert!(!read(&root, "aibox.lock").contains("[network]"));
    let err =
        apply_with_override(&root, "services:\n  eg:\n    network_mode: bridge\n").unwrap_err();
    assert!(
        format!("{err:?}").contains("egress:network_mode:bridge"),
        "{err:?}"
    );
}

/// `egress = "none"` lets nothing out, so `[network] allow` (team and personal) and the
/// personal upstream proxy do nothing: `apply`, `network list` and `doctor` say so.
#[test]
fn none_mode_warns_that_allowed_hosts_are_ignored() {
    let team = TEAM.replace("egress = \"allowlist\"", "egress = \"none\"");
    let (_t, root) = project(&team);
    let report = apply(&root, &apply_opts(None)).unwrap();
    let ignored: Vec<&String> = report
        .warnings
        .iter()
        .filter(|w| w.contains("ignored") && w.contains("egress = \"none\""))
        .collect();
    assert_eq!(ignored.len(), 2, "{:?}", report.warnings);
    assert!(
        ignored[0].contains("aibox.toml") && ignored[0].contains("2 host(s)"),
        "{ignored:?}"
    );
    assert!(
        ignored[1].contains(".aibox-local.toml") && ignored[1].contains("upstream_proxy"),
        "{ignored:?}"
    );
    let list = aibox_engine::network_list::network_list(&root).unwrap();
    assert_eq!(list.warnings.len(), 2, "{list:?}");
    let options = aibox_engine::doctor::DoctorOptions {
        skip_engine: true,
        update_check: aibox_engine::updates::UpdateCheck::Never,
        ..aibox_engine::doctor::DoctorOptions::default()
    };
    let doctor = aibox_engine::doctor::doctor(&root, &options).unwrap();
    assert!(
        doctor
            .findings
            .iter()
            .any(|f| f.code == "aibox::doctor::apply_warning" && f.message.contains("ignored")),
        "{}",
        doctor.render_human()
    );
    // Without entries, nothing to say.
    let (_t, bare) = project(&team.replace("allow = [\"pypi.org\", \"*.pythonhosted.org\"]\n", ""));
    fs_err::write(bare.join(".aibox-local.toml"), "").unwrap();
    let report = apply(&bare, &apply_opts(None)).unwrap();
    assert!(
        !report.warnings.iter().any(|w| w.contains("ignored")),
        "{:?}",
        report.warnings
    );
}

/// `egress = "open"` (the default) lets every host through, so `[network] allow` (team
/// and personal) restricts nothing and the personal upstream proxy is never used: `config
/// set` of a `[network]` key, `apply`, `network list` and `doctor` say so, naming
/// `egress = "allowlist"` as what makes them count. In `allowlist` mode they count.
#[test]
fn open_mode_warns_that_allowed_hosts_restrict_nothing() {
    use aibox_config::edit::ConfigFile;
    use aibox_engine::config_edit::config_set_report;
    let team = TEAM.replace("egress = \"allowlist\"\n", "");
    let (_t, root) = project(&team);
    let is_ignored = |w: &&String| {
        w.contains("ignored")
            && w.contains("egress = \"open\"")
            && w.contains("set `egress = \"allowlist\"`")
    };
    let report = apply(&root, &apply_opts(None)).unwrap();
    let ignored: Vec<&String> = report.warnings.iter().filter(is_ignored).collect();
    assert_eq!(ignored.len(), 2, "{:?}", report.warnings);
    assert!(
        ignored[0].contains("aibox.toml")
            && ignored[0].contains("2 host(s)")
            && ignored[0].contains("the list restricts nothing"),
        "{ignored:?}"
    );
    assert!(
        ignored[1].contains(".aibox-local.toml")
            && ignored[1].contains("2 host(s)")
            && ignored[1].contains("upstream_proxy"),
        "{ignored:?}"
    );
    let list = aibox_engine::network_list::network_list(&root).unwrap();
    assert_eq!(list.egress, "open");
    assert_eq!(
        list.warnings.iter().filter(is_ignored).count(),
        2,
        "{list:?}"
    );
    let options = aibox_engine::doctor::DoctorOptions {
        skip_engine: true,
        update_check: aibox_engine::updates::UpdateCheck::Never,
        ..aibox_engine::doctor::DoctorOptions::default()
    };
    let doctor = aibox_engine::doctor::doctor(&root, &options).unwrap();
    assert!(
        doctor
            .findings
            .iter()
            .any(|f| f.code == "aibox::doctor::apply_warning"
                && f.message.contains("ignored")
                && f.message.contains("egress = \"open\"")),
        "{}",
        doctor.render_human()
    );
    // `config set`: a `[network]` key of either file is answered with what is ignored
    // after the edit; another key is not.
    let set =
        config_set_report(&root, ConfigFile::Team, "network.allow", "[\"pypi.org\"]").unwrap();
    assert_eq!(set.warnings.iter().filter(is_ignored).count(), 2, "{set:?}");
    assert!(set.warnings[0].contains("(1 host(s))"), "{set:?}");
    let set = config_set_report(
        &root,
        ConfigFile::Local,
        "network.upstream_proxy",
        "\"proxy.corp.example:8080\"",
    )
    .unwrap();
    assert_eq!(set.warnings.iter().filter(is_ignored).count(), 2, "{set:?}");
    let set = config_set_report(&root, ConfigFile::Team, "container.user", "\"dev\"").unwrap();
    assert!(set.warnings.is_empty(), "{set:?}");
    // Made to count: `allowlist` ignores nothing, and `config set` says nothing more.
    let set =
        config_set_report(&root, ConfigFile::Team, "network.egress", "\"allowlist\"").unwrap();
    assert!(set.warnings.is_empty(), "{set:?}");
    let report = apply(&root, &owner_approves()).unwrap();
    assert!(
        !report.warnings.iter().any(|w| w.contains("ignored")),
        "{:?}",
        report.warnings
    );
    // Nothing listed, nothing to say.
    let (_t, bare) = project(&team.replace("allow = [\"pypi.org\", \"*.pythonhosted.org\"]\n", ""));
    fs_err::write(bare.join(".aibox-local.toml"), "").unwrap();
    let report = apply(&bare, &apply_opts(None)).unwrap();
    assert!(
        !report.warnings.iter().any(|w| w.contains("ignored")),
        "{:?}",
        report.warnings
    );
    assert!(
        aibox_engine::network_list::network_list(&bare)
            .unwrap()
            .warnings
            .is_empty()
    );
}

/// A remote MCP server whose host the allowlist does not let through is named at apply
/// (the QA's got only the proxy's 403 in the container, silently); one the list covers,
/// through a wildcard too, is not.
#[test]
fn a_remote_server_outside_the_allowlist_is_named() {
    let team = format!(
        "{TEAM}\n[[ai.mcp.servers]]\nname = \"docs\"\nurl = \"https://mcp.docs-vendor.example/mcp\"\n\n\
         [[ai.mcp.servers]]\nname = \"pkgs\"\nurl = \"https://api.pythonhosted.org:8443/mcp\"\n"
    );
    let (_t, root) = project(&team);
    let report = apply(&root, &apply_opts(None)).unwrap();
    let named: Vec<&String> = report
        .warnings
        .iter()
        .filter(|w| w.contains("the egress allowlist does not let through"))
        .collect();
    assert_eq!(named.len(), 1, "{:?}", report.warnings);
    assert!(
        named[0].contains("`docs` connects to `mcp.docs-vendor.example`")
            && named[0].contains("`[network] allow` in aibox.toml"),
        "{named:?}"
    );
}

/// A skill's `metadata.processkit.hosts` (here the release's core skill) joins the
/// allowlist with the skill as its origin: in the committed filter, the lock and
/// `network list`. An entry that is no host name is left out, with a warning naming the
/// skill and the line.
#[test]
fn hosts_a_skill_declares_join_the_allowlist() {
    use aibox_test_support::http::release::SyntheticRelease;
    let mut release = SyntheticRelease::minimal("v1.0.0");
    let skill_md = "context/skills/processkit/skill-gate/SKILL.md";
    let text = String::from_utf8(release.files[skill_md].0.clone()).unwrap().replace(
        "    core: true\n",
        "    core: true\n    hosts:\n      - api.gate.example\n      - \"*.cdn.gate.example\"\n      - 10.0.0.9\n",
    );
    release
        .files
        .insert(skill_md.to_owned(), (text.into_bytes(), 0o644));
    release.restamp();
    let (_t, root) = empty_project();
    let store = tempfile::tempdir().unwrap();
    let store = camino::Utf8Path::from_path(store.path()).unwrap();
    let config = common::release_config(store, &release)
        .replace("packages = [\"product\"]", "packages = [\"minimal\"]");
    fs_err::write(
        root.join("aibox.toml"),
        format!(
            "{config}\n[ai]\nharnesses = []\n\n[network]\negress = \"allowlist\"\n\
             allow = [\"api.gate.example\"]\n"
        ),
    )
    .unwrap();
    let report = apply(&root, &apply_opts(Some(&root.join(".cache-test")))).unwrap();
    let warning = report
        .warnings
        .iter()
        .find(|w| w.contains("egress: skill `skill-gate`"))
        .unwrap_or_else(|| panic!("{:?}", report.warnings));
    assert!(
        warning.contains("line 11: declared host `10.0.0.9` is an IP address"),
        "{warning}"
    );
    let filter = read(&root, FILTER);
    for line in [
        "^api\\.gate\\.example$",
        "^([a-z0-9-]+\\.)+cdn\\.gate\\.example$",
    ] {
        assert!(
            filter.lines().any(|l| l == line),
            "{line} missing:\n{filter}"
        );
    }
    assert!(!filter.contains("10\\.0"), "{filter}");
    let lock = read(&root, "aibox.lock");
    assert!(
        lock.contains(
            "\"api.gate.example\" = [\"skill skill-gate\", \"aibox.toml [network] allow\"]"
        ),
        "{lock}"
    );
    assert!(
        lock.contains("\"*.cdn.gate.example\" = [\"skill skill-gate\"]"),
        "{lock}"
    );
    let list = aibox_engine::network_list::network_list(&root).unwrap();
    let cdn = list
        .hosts
        .iter()
        .find(|h| h.host == "*.cdn.gate.example")
        .unwrap_or_else(|| panic!("{list:?}"));
    assert_eq!(cdn.origins, ["skill skill-gate"]);
    assert!(list.not_resolved.is_none(), "{list:?}");
}
