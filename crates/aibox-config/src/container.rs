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
/// The Compose networks of `[network] egress` other than `open`: the internal one (the
/// agent alone, no route out, and on Podman no DNS server) and the proxy's outside one.
/// Compose prefixes them with the project name.
pub const EGRESS_NETWORKS: [&str; 2] = ["aibox-internal", "aibox-egress"];
/// The Compose volume holding the egress proxy's Unix socket, shared by the proxy and
/// the agent (which relays `127.0.0.1` to it); Compose prefixes it with the project name.
pub const EGRESS_SOCKET_VOLUME: &str = "aibox-egress-socket";

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
