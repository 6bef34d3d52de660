//! The container table: facts about the inside of aibox's container, defined once.
//!
//! [`crate::layout`] is the table of host paths (the project's files); this module is its
//! counterpart on the other side of the mounts: where the project is mounted, the
//! container user's home and the entries of it aibox manages, where the image installs
//! tools and MCP server environments, and the labels and build inputs by which `up`
//! recognises the images and containers it made. The generators write these values into
//! the Dockerfile and Compose files, the runtime reads the labels back from the engine,
//! MCP registration writes the paths into harness configs and validation keeps users'
//! volumes off them: all of them read them here, none spells one out.

use crate::model::Harness;

/// Where the project folder is mounted, and the working directory of every session.
pub const WORKSPACE_DIR: &str = "/workspace";

/// The container user when `[container] user` is not set.
pub const DEFAULT_USER: &str = "aibox";

/// The home folder of the container user `user`: `/root` for root, else `/home/<user>`.
pub fn home(user: &str) -> String {
    if user == "root" {
        "/root".to_owned()
    } else {
        format!("/home/{user}")
    }
}

/// Entries of the container user's home that aibox manages: the harness state folders
/// mounted from [`crate::layout::AIBOX_HOME`] (see [`harness_home_dir`]) and the
/// folders the tools and shells keep there.
///
/// An extra volume may not target one of these, a parent of one, or a path inside one.
pub const MANAGED_HOME_ENTRIES: &[&str] = &[
    ".aibox",
    ".cache",
    ".claude",
    ".claude.json",
    ".codex",
    ".config",
    ".gemini",
    ".local",
    ".tmux",
    ".vim",
];

/// A harness's state folder under the container user's home, if it has one: mounted
/// from the same path under [`crate::layout::AIBOX_HOME`], so logins and tokens survive
/// a rebuild and never reach git.
pub fn harness_home_dir(harness: Harness) -> Option<&'static str> {
    match harness {
        Harness::Claude => Some(".claude"),
        Harness::Codex => Some(".codex"),
        Harness::Gemini => Some(".gemini"),
        Harness::Opencode => Some(".local/share/opencode"),
        Harness::Cursor | Harness::Vscode => None,
    }
}

/// Where the image unpacks downloaded catalog tools (`<dir>/<tool>`).
pub const TOOLS_DIR: &str = "/opt/aibox";
/// Where the image installs the locked MCP server environments (`<dir>/<id>`, started as
/// `<dir>/<id>/bin/python`).
pub const MCP_ENVS_DIR: &str = "/opt/aibox/mcp";
/// Where the image keeps the requirements files it installed those environments from.
pub const MCP_REQUIREMENTS_DIR: &str = "/opt/aibox/mcp-requirements";
/// Where the image installs the locked npm trees of MCP servers (`<dir>/<id>`, started
/// as `<dir>/<id>/node_modules/.bin/<bin>`).
pub const MCP_NPM_DIR: &str = "/opt/aibox/mcp-npm";

/// Container label holding the project's name (committed Compose file).
pub const PROJECT_LABEL: &str = "aibox.project";
/// Container label holding the canonical path of the checkout the container belongs to
/// (written only to the gitignored personal Compose file).
pub const CHECKOUT_LABEL: &str = "aibox.checkout";
/// Image label holding the digest of the files the image was built from (set by `up`).
pub const BUILD_DIGEST_LABEL: &str = "aibox.build-digest";
/// Container label holding the digest of the files the container was created from.
pub const CONFIG_DIGEST_LABEL: &str = "aibox.config-digest";

/// Build argument the generated Dockerfile turns into [`BUILD_DIGEST_LABEL`].
pub const BUILD_DIGEST_ARG: &str = "AIBOX_BUILD_DIGEST";
/// Build argument with the container user's UID (`up` passes the project owner's).
pub const UID_ARG: &str = "AIBOX_UID";
/// Build argument with the container user's GID.
pub const GID_ARG: &str = "AIBOX_GID";
/// Variable the generated Compose file interpolates into [`CONFIG_DIGEST_LABEL`].
pub const CONFIG_DIGEST_VAR: &str = "AIBOX_CONFIG_DIGEST";

/// The egress proxy's Compose service.
pub const EGRESS_PROXY_SERVICE: &str = "aibox-egress";
/// Label on the egress proxy's service (value `proxy`), so the runtime finds its container
/// under any Compose provider's naming.
pub const EGRESS_PROXY_LABEL: &str = "aibox.egress";

/// Labels Compose providers put on the containers, networks and volumes they create:
/// the Compose project's name (Docker Compose's, then podman-compose's).
pub const COMPOSE_PROJECT_LABELS: [&str; 2] =
    ["com.docker.compose.project", "io.podman.compose.project"];
/// The Compose networks of `[network] egress` other than `open`: the internal one (the
/// agent alone, no route out, and on Podman no DNS server) and the proxy's outside one.
/// Compose prefixes the outside one with the project name; the internal one is named by
/// [`internal_network_name`].
pub const EGRESS_NETWORKS: [&str; 2] = ["aibox-internal", "aibox-egress"];
/// The Compose volume holding the egress proxy's Unix socket, shared by the proxy and
/// the agent (which relays `127.0.0.1` to it); Compose prefixes it with the project name.
pub const EGRESS_SOCKET_VOLUME: &str = "aibox-egress-socket";

/// The Compose project name: `aibox.project_name`, else `container.name`, lowercased,
/// with characters Compose does not allow replaced by `-`. The runtime passes it with
/// `-p`; the generated file carries it as the `aibox.project` label.
pub fn project_name(config: &crate::AiboxToml) -> String {
    let raw = config
        .aibox
        .project_name
        .as_deref()
        .unwrap_or(&config.container.name);
    let mapped: String = raw
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_start_matches(['-', '_']);
    if trimmed.is_empty() {
        "aibox".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// Variable the generated Compose file takes the internal egress network's name from.
/// `aibox up` sets it to `<compose project>_aibox-internal` (one network per checkout,
/// which it makes itself on Podman); VS Code and the Dev Containers CLI leave it unset,
/// so their Compose uses [`shared_internal_network`], which `devcontainer.json`'s
/// `initializeCommand` makes before Compose runs.
pub const EGRESS_NETWORK_VAR: &str = "AIBOX_INTERNAL_NETWORK";

/// The internal egress network's name when Compose runs without `aibox up`
/// (`<project>-aibox-internal`): fixed, so every Compose front end, under any Compose
/// project name, uses the network made for it.
pub fn shared_internal_network(project: &str) -> String {
    format!("{project}-{}", EGRESS_NETWORKS[0])
}

/// The `name:` the generated Compose file gives the internal egress network: the
/// [`EGRESS_NETWORK_VAR`] `aibox up` sets, else [`shared_internal_network`]. The egress
/// gate accepts exactly this value.
pub fn internal_network_name(project: &str) -> String {
    format!(
        "${{{EGRESS_NETWORK_VAR}:-{}}}",
        shared_internal_network(project)
    )
}

/// `devcontainer.json`'s `initializeCommand` when the agent is on the internal network:
/// on a host with `podman`, makes the network VS Code's or the Dev Containers CLI's
/// Compose will use ([`shared_internal_network`]) internal and
/// without a DNS server, before Compose runs; Compose would make it with Podman 4.3's
/// DNS server, which answers outside names (a tunnel). One of that name made otherwise
/// is replaced (`rm` fails while a container uses it, and so does the start). Without
/// `podman` it does nothing: Docker's internal networks resolve no outside names. Plain
/// `sh`, no aibox needed on the host; docker-compose 1.29 and podman-compose 1.0 take
/// the network as it is, and a Compose `down` removes it (made again on the next start).
/// The gate accepts exactly this command, for the project `devcontainer.json` names.
pub fn egress_initialize_command(project: &str) -> String {
    let network = shared_internal_network(project);
    let internal = EGRESS_NETWORKS[0];
    format!(
        "command -v podman >/dev/null 2>&1 || exit 0; n={network}; \
         if podman network exists $n; then \
         [ \"$(podman network inspect -f '{{{{.Internal}}}}{{{{.DNSEnabled}}}}' $n)\" = truefalse ] && exit 0; \
         podman network rm $n >/dev/null || exit 1; fi; \
         podman network create --internal --disable-dns \
         --label com.docker.compose.project={project} \
         --label com.docker.compose.network={internal} $n >/dev/null"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn homes() {
        assert_eq!(home("root"), "/root");
        assert_eq!(home(DEFAULT_USER), "/home/aibox");
    }

    /// Every harness state folder is managed, so no extra volume can hide a login.
    #[test]
    fn harness_folders_are_managed() {
        for h in Harness::ALL {
            if let Some(dir) = harness_home_dir(h) {
                let top = dir.split('/').next().unwrap_or(dir);
                assert!(MANAGED_HOME_ENTRIES.contains(&top), "{dir}");
            }
        }
    }

    #[test]
    fn install_folders_are_below_the_tools_folder() {
        for dir in [MCP_ENVS_DIR, MCP_REQUIREMENTS_DIR, MCP_NPM_DIR] {
            assert!(dir.starts_with(&format!("{TOOLS_DIR}/")), "{dir}");
            assert!(dir.starts_with('/') && !dir.ends_with('/'), "{dir}");
        }
    }
}
