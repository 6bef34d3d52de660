//! `.devcontainer/Dockerfile`: base image, catalog tools (see `tools`), labels, the container user, the version
//! marker, the inlined `Dockerfile.local`, then `USER` and `WORKDIR`.
//!
//! The user step needs only what a Debian minbase root file system has (`getent`,
//! `groupadd`/`groupmod`, `useradd`/`usermod`, `cut`, `mkdir`, `chown`): no network, no
//! packages, no sudo.

use std::fmt::Write as _;

use crate::quote::{dockerfile as dq, shell};
use crate::{DEFAULT_IMAGE_SOURCE, GENERATED_HEADER, Inputs};
use aibox_config::Harness;
use aibox_config::container::{
    BUILD_DIGEST_ARG, BUILD_DIGEST_LABEL, GID_ARG, MCP_ENVS_DIR, MCP_NPM_DIR, MCP_REQUIREMENTS_DIR,
    UID_ARG, WORKSPACE_DIR,
};

/// Marker lines around the inlined `Dockerfile.local`.
pub(crate) const LOCAL_BEGIN: &str =
    "# ---- begin .devcontainer/Dockerfile.local (inlined verbatim; edit that file) ----";
pub(crate) const LOCAL_END: &str = "# ---- end .devcontainer/Dockerfile.local ----";

pub(crate) fn render(inputs: &Inputs<'_>, tools: &[&crate::catalog::Tool]) -> String {
    let c = &inputs.config.container;
    let version = inputs.aibox_version;
    let project = crate::project_name(inputs.config);
    let source = inputs
        .image_source
        .or(inputs.config.aibox.repository.as_deref())
        .unwrap_or(DEFAULT_IMAGE_SOURCE);
    let mut out = String::new();
    let _ = writeln!(out, "# {GENERATED_HEADER}");
    out.push_str("# Image additions belong in Dockerfile.local, inlined near the end.\n");
    let _ = writeln!(out, "FROM {}", c.base_image);
    // Base images may end with a non-root `USER` (aibox's own does); the steps below
    // install packages and create the user, so they run as root until the final `USER`.
    out.push_str("USER root\n\n");
    // Tools come before anything project-specific, so projects on one base image share
    // these layers in the engine's build cache.
    crate::tools::render(&mut out, tools);
    if inputs.config.network.egress == aibox_config::EgressMode::Allowlist {
        // The agent's main process relays its loopback port to the egress proxy's socket.
        out.push_str(
            "# The egress relay of `[network] egress = \"allowlist\"` (the container's command).\n",
        );
        crate::egress::apt_pinned_step(
            &mut out,
            "the egress relay",
            &[(crate::egress::RELAY_PACKAGE, crate::egress::RELAY_VERSION)],
        );
        out.push('\n');
    }
    python_envs_step(&mut out, inputs);
    npm_envs_step(&mut out, inputs);

    let labels = [
        ("org.opencontainers.image.source", source),
        ("org.opencontainers.image.version", version),
        ("org.opencontainers.image.title", project.as_str()),
        ("aibox.version", version),
        ("aibox.profile", inputs.config.aibox.profile.as_str()),
    ];
    for (i, (key, value)) in labels.iter().enumerate() {
        let lead = if i == 0 { "LABEL " } else { "      " };
        let tail = if i + 1 == labels.len() { "" } else { " \\" };
        let _ = writeln!(out, "{lead}{key}={}{tail}", dq(value));
    }
    out.push('\n');

    user_step(&mut out, inputs);

    out.push_str("# Version marker; agrees with the aibox.version label.\n");
    let _ = writeln!(
        out,
        "RUN printf '%s\\n' {} > /etc/aibox-version\n",
        shell(version)
    );

    if let Some(local) = inputs.effective_dockerfile_local() {
        let _ = writeln!(out, "{LOCAL_BEGIN}");
        out.push_str(local);
        if !local.is_empty() && !local.ends_with('\n') {
            out.push('\n');
        }
        let _ = writeln!(out, "{LOCAL_END}\n");
    }

    let _ = writeln!(out, "USER {}", c.user);
    let _ = writeln!(out, "WORKDIR {WORKSPACE_DIR}");
    // Last, so that a new value rebuilds this one step and nothing before it.
    out.push_str(
        "\n# Fingerprint of the files this image is built from: `aibox up` passes it and\n\
         # compares it later to rebuild a stale image (empty when another tool builds).\n",
    );
    let _ = writeln!(out, "ARG {BUILD_DIGEST_ARG}=");
    let _ = writeln!(
        out,
        "LABEL {BUILD_DIGEST_LABEL}=\"${{{BUILD_DIGEST_ARG}}}\""
    );
    out
}

/// Installs every locked MCP server environment from its hash-pinned requirements file.
/// One layer: the environments share uv's cache through hard links, so a package that
/// several of them hold is stored once; byte-compiled, because the servers' user cannot
/// write `__pycache__` under `/opt` and every start would compile again.
fn python_envs_step(out: &mut String, inputs: &Inputs<'_>) {
    if inputs.python_envs.is_empty() {
        return;
    }
    out.push_str(
        "# MCP server environments locked in aibox.lock ([mcp]): each gets exactly its\n\
         # hash-pinned requirements, so the servers start offline with what was locked.\n",
    );
    let _ = writeln!(out, "COPY {MCP_ENVS_CONTEXT} {MCP_REQUIREMENTS_DIR}/");
    let _ = write!(
        out,
        "RUN set -eu; \\\n    \
         export UV_CACHE_DIR=/tmp/aibox-uv-cache UV_PYTHON_DOWNLOADS=never UV_LINK_MODE=hardlink; \\\n    \
         install() {{ \\\n        \
         echo \"aibox: installing the locked MCP environment $1 ($2)\"; \\\n        \
         uv venv --quiet --python python3 \"{MCP_ENVS_DIR}/$1\"; \\\n        \
         uv pip install --quiet --compile-bytecode --require-hashes --no-deps \\\n            \
         --python \"{MCP_ENVS_DIR}/$1/bin/python\" -r \"{MCP_REQUIREMENTS_DIR}/$1.txt\" \\\n        \
         || {{ echo \"aibox: the locked dependencies of $2 did not install (aibox.lock, [mcp.environments.$1])\" >&2; exit 1; }}; \\\n    \
         }}; \\\n"
    );
    install_calls(
        out,
        inputs
            .python_envs
            .iter()
            .map(|e| (e.id.as_str(), &e.servers[..])),
    );
    out.push_str("    rm -rf /tmp/aibox-uv-cache\n\n");
}

/// One `install <id> '<servers>'` line per locked environment of a step's shell function.
fn install_calls<'a>(out: &mut String, envs: impl Iterator<Item = (&'a str, &'a [String])>) {
    for (id, servers) in envs {
        let _ = writeln!(out, "    install {id} {}; \\", shell(&servers.join(", ")));
    }
}

/// Installs every locked npm tree of MCP servers with `npm ci` from its generated
/// `package.json` and `package-lock.json`: exactly the locked packages, each tarball
/// checked against its `integrity` (`EINTEGRITY` otherwise), no install scripts. One
/// layer for all trees; npm's cache is dropped with it (the CA layer's
/// `NODE_EXTRA_CA_CERTS` lets npm through a TLS-inspecting proxy).
fn npm_envs_step(out: &mut String, inputs: &Inputs<'_>) {
    if inputs.npm_envs.is_empty() {
        return;
    }
    out.push_str(
        "# MCP server npm packages locked in aibox.lock ([mcp.npm]): each gets exactly its\n\
         # locked tree, integrity-checked, so the servers start offline with what was locked.\n",
    );
    for env in inputs.npm_envs {
        let _ = writeln!(
            out,
            "COPY {MCP_ENVS_CONTEXT}npm-{id}/ {MCP_NPM_DIR}/{id}/",
            id = env.id
        );
    }
    let _ = write!(
        out,
        "RUN set -eu; \\\n    \
         export npm_config_cache=/tmp/aibox-npm-cache npm_config_update_notifier=false; \\\n    \
         install() {{ \\\n        \
         echo \"aibox: installing the locked MCP npm package $1 ($2)\"; \\\n        \
         npm ci --prefix \"{MCP_NPM_DIR}/$1\" --ignore-scripts --no-audit --no-fund --loglevel=error \\\n        \
         || {{ echo \"aibox: the locked npm package of $2 did not install (aibox.lock, [mcp.npm.$1])\" >&2; exit 1; }}; \\\n    \
         }}; \\\n"
    );
    install_calls(
        out,
        inputs
            .npm_envs
            .iter()
            .map(|e| (e.id.as_str(), &e.servers[..])),
    );
    out.push_str("    rm -rf /tmp/aibox-npm-cache\n\n");
}

/// The requirements folder, relative to the build context (`.devcontainer/`).
const MCP_ENVS_CONTEXT: &str = "aibox-mcp/";

/// The step that creates (or renames) the container user and its harness folders.
fn user_step(out: &mut String, inputs: &Inputs<'_>) {
    let c = &inputs.config.container;
    let home = c.home();
    let mut dirs = vec![shell(&home)];
    dirs.extend(
        inputs
            .harness_home_dirs()
            .iter()
            .map(|d| shell(&format!("{home}/{d}"))),
    );
    let dirs = dirs.join(" ");
    if c.user == "root" {
        out.push_str(
            "# The container user is root: only the harness state directories are needed.\n",
        );
        let _ = writeln!(out, "RUN mkdir -p {dirs}\n");
    } else {
        let name = shell(&c.user);
        let (uid, gid) = (c.uid, c.gid());
        out.push_str(
            "# The container user. `aibox up` passes the IDs of the host user who owns the\n\
             # project, so the agent can write /workspace; aibox.toml's are the default.\n\
             # A group or user that already holds the IDs (for example `ubuntu` in Ubuntu\n\
             # images) is renamed instead of duplicated.\n",
        );
        let _ = writeln!(out, "ARG {UID_ARG}={uid}\nARG {GID_ARG}={gid}");
        let _ = write!(
            out,
            "RUN set -eu; \\\n    \
             name={name}; uid=\"${UID_ARG}\"; gid=\"${GID_ARG}\"; home={home_q}; \\\n    \
             if ! getent group \"$gid\" >/dev/null; then \\\n        \
             if getent group \"$name\" >/dev/null; then groupmod --gid \"$gid\" \"$name\"; \\\n        \
             else groupadd --gid \"$gid\" \"$name\"; fi; \\\n    \
             fi; \\\n    \
             current=\"$(getent passwd \"$uid\" | cut -d: -f1)\"; \\\n    \
             if [ -n \"$current\" ] && [ \"$current\" != \"$name\" ]; then \\\n        \
             if getent passwd \"$name\" >/dev/null; then \\\n            \
             echo \"aibox: UID $uid belongs to $current, and user $name also exists\" >&2; exit 1; \\\n        \
             fi; \\\n        \
             usermod --login \"$name\" --gid \"$gid\" --home \"$home\" --shell /bin/bash \"$current\"; \\\n    \
             elif [ -n \"$current\" ]; then \\\n        \
             usermod --gid \"$gid\" --home \"$home\" --shell /bin/bash \"$name\"; \\\n    \
             elif getent passwd \"$name\" >/dev/null; then \\\n        \
             usermod --uid \"$uid\" --gid \"$gid\" --home \"$home\" --shell /bin/bash \"$name\"; \\\n    \
             else \\\n        \
             useradd --no-log-init --uid \"$uid\" --gid \"$gid\" --home-dir \"$home\" \
             --shell /bin/bash \"$name\"; \\\n    \
             fi; \\\n    \
             mkdir -p {dirs}; \\\n    \
             chown -R \"$uid:$gid\" \"$home\"\n\n",
            home_q = shell(&home),
        );
    }
    if inputs.harnesses().contains(&Harness::Claude) {
        // Claude Code keeps its main file (`.claude.json`: personal MCP servers, project
        // trust, the account record) in the home itself, outside the mounted `~/.claude`,
        // so a recreated container lost it; with this variable it keeps it inside.
        let _ = writeln!(
            out,
            "# Claude Code keeps .claude.json in its mounted state folder, so it survives a\n\
             # rebuild.\nENV CLAUDE_CONFIG_DIR={}\n",
            dq(&format!("{home}/.claude"))
        );
    }
    // Python writes bytecode beside each module it imports: for processkit's MCP servers
    // and scripts that is a `__pycache__/` inside installed skill folders, which reads as
    // an edit of the release (drift, a failed skill review). Under a prefix it writes
    // and reads bytecode only there, so a `.pyc` left in the workspace is never loaded.
    let _ = writeln!(
        out,
        "# Python keeps bytecode under the home, not in __pycache__ folders beside the\n\
         # workspace's scripts (installed skills must stay as the release has them).\n\
         ENV PYTHONPYCACHEPREFIX={}\n",
        dq(&format!("{home}/.cache/pycache"))
    );
}
