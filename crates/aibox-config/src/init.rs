//! The text of a new project's `aibox.toml`.
//!
//! Rendering is pure: the CLI gathers the answers (flags or prompts), the engine writes
//! the file. The result always passes the strict loader, explains each section in
//! comments, and never sets a `[security]` consent: consent is an act of the project's
//! owner, so the keys are only described.

use std::fmt::Write as _;

use crate::model::{ContextMode, Harness, default_base_image};

/// Every answer `aibox init` needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitOptions {
    /// Container and project name.
    pub name: String,
    /// Harnesses to enable, in display order.
    pub harnesses: Vec<Harness>,
    /// Context mode.
    pub context_mode: ContextMode,
    /// processkit release source (URL, archive or directory); commented out when `None`.
    pub processkit_source: Option<String>,
    /// processkit release version; commented out when `None`.
    pub processkit_version: Option<String>,
    /// Base image; [`default_base_image`] when `None`.
    pub base_image: Option<String>,
}

impl InitOptions {
    /// Defaults for a project called `name`, those `aibox init NAME --yes` takes: Claude,
    /// context mode `harness-only` (it needs no download; set `context_mode` and a
    /// `processkit_version` for processkit content), the default base image.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            harnesses: vec![Harness::Claude],
            context_mode: ContextMode::HarnessOnly,
            processkit_source: None,
            processkit_version: None,
            base_image: None,
        }
    }
}

/// A TOML string literal (quoted and escaped).
fn quote(s: &str) -> String {
    toml_edit::Value::from(s).to_string().trim().to_owned()
}

/// Renders a commented `aibox.toml` for `opts`. Same options, same bytes.
pub fn render_aibox_toml(opts: &InitOptions) -> String {
    let mut out = String::new();
    let default_image = default_base_image();
    let image = opts.base_image.as_deref().unwrap_or(&default_image);

    out.push_str(
        "# aibox.toml: the committed, team-wide description of this project's dev container.\n\
         # Change it by hand or with `aibox config set KEY VALUE`, then run `aibox apply`.\n\
         # Personal settings (secrets, private mounts, your own MCP servers) belong in\n\
         # .aibox-local.toml, which is gitignored and never committed.\n\
         # Unknown keys are errors; `aibox config validate` checks this file.\n\n",
    );

    out.push_str("[container]\n# Compose service, container and project name.\n");
    let _ = writeln!(out, "name = {}", quote(&opts.name));
    out.push_str(
        "# Base image of the generated Dockerfile: always a concrete tag or digest, never\n\
         # `latest`, so every rebuild starts from the same bytes.\n",
    );
    let _ = writeln!(out, "base_image = {}", quote(image));
    out.push_str(
        "# The unprivileged user in the container and its UID (match your host UID so files\n\
         # in bind mounts stay writable).\n\
         # user = \"aibox\"\n\
         # uid = 1000\n\
         # Time zone inside the container; omitted unless set.\n\
         # timezone = \"UTC\"\n\
         # Non-secret environment variables. Secrets go to .aibox-local.toml.\n\
         # environment = { LANG = \"C.UTF-8\" }\n\
         # Extra bind mounts: the target must be absolute and must not overlap /workspace\n\
         # or the home directories aibox manages.\n\
         # [[container.extra_volumes]]\n\
         # source = \"~/datasets\"\n\
         # target = \"/mnt/datasets\"\n\
         # read_only = true\n\n",
    );

    render_rest(&mut out, opts);
    out
}

fn render_rest(out: &mut String, opts: &InitOptions) {
    let harnesses: Vec<String> = opts.harnesses.iter().map(|h| quote(h.as_str())).collect();
    let all: Vec<&str> = Harness::ALL.iter().map(|h| h.as_str()).collect();
    out.push_str(
        "[context]\n\
         # \"processkit\" installs a pinned processkit content release (skills, processes,\n\
         # MCP servers); \"harness-only\" installs none and only configures the harnesses.\n",
    );
    let _ = writeln!(out, "mode = {}", quote(opts.context_mode.as_str()));
    if opts.context_mode == ContextMode::Processkit {
        out.push_str("# processkit package tiers to install.\npackages = [\"product\"]\n");
    }
    out.push('\n');

    if opts.context_mode == ContextMode::Processkit {
        render_processkit(out, opts);
    } else {
        out.push_str(
            "# Context mode \"processkit\" adds the [processkit] release and [skills] tables\n\
             # (`aibox config schema` lists their keys).\n\n",
        );
    }

    out.push_str("[ai]\n");
    let _ = writeln!(
        out,
        "# AI harnesses to configure, in display order: {}.",
        all.join(", ")
    );
    let _ = writeln!(out, "harnesses = [{}]", harnesses.join(", "));
    out.push_str(
        "\n# Team MCP servers (committed). Values in `env` and `headers` must be references\n\
         # such as \"${TOKEN}\", never the secret itself.\n\
         # [[ai.mcp.servers]]\n\
         # name = \"issues\"\n\
         # command = \"npx\"\n\
         # args = [\"-y\", \"@acme/issues-mcp@2.1.0\"]\n\
         # env = { ISSUES_TOKEN = \"${ISSUES_TOKEN}\" }\n\n",
    );

    out.push_str(
        "[security]\n\
         # Consents. aibox never sets these for you: each one records a decision that only\n\
         # the project's owner can make, knowing what it relaxes (described below).\n\
         # Codex's Linux sandbox is bubblewrap, which needs unprivileged user namespaces.\n\
         # Podman's default seccomp profile allows them; Docker's refuses them, so on Docker\n\
         # `aibox apply` stops until you choose one of these:\n\
         # - `acknowledge_seccomp_profile = true` with `codex_sandbox = \"seccomp-profile\"`\n\
         #   (preferred): Docker's default profile plus only the syscalls bubblewrap needs.\n\
         # - `acknowledge_seccomp_unconfined = true` with `codex_sandbox = \"unconfined\"`:\n\
         #   no seccomp filter at all.\n",
    );
    if opts.harnesses.contains(&Harness::Codex) {
        out.push_str(
            "# Codex is enabled with `codex_sandbox = \"engine-default\"` (the default): nothing\n\
             # is relaxed; `aibox up` and `aibox doctor` report whether its sandbox works.\n",
        );
    }
}

/// `[processkit]` and `[skills]`, in processkit mode only: a harness-only project has no
/// use for them.
fn render_processkit(out: &mut String, opts: &InitOptions) {
    out.push_str(
        "[processkit]\n\
         # The content release: `source` is an https:// base URL, a local .tar.gz or a local\n\
         # directory (unset: the official repository); `version` is an exact release such as\n\
         # \"v0.28.3\" (`aibox processkit versions` lists them). aibox verifies every\n\
         # download against a SHA-256 digest and records it in aibox.lock.\n",
    );
    match &opts.processkit_source {
        Some(s) => {
            let _ = writeln!(out, "source = {}", quote(s));
        }
        None => {
            let _ = writeln!(
                out,
                "# source = {}",
                quote(crate::OFFICIAL_PROCESSKIT_SOURCE)
            );
        }
    }
    match &opts.processkit_version {
        Some(v) => {
            let _ = writeln!(out, "version = {}", quote(v));
        }
        None => out.push_str("# version = \"v0.28.3\"\n"),
    }
    out.push_str(
        "# sha256 = \"<64 lowercase hex digits of the release archive>\"\n\n\
         [skills]\n\
         # Skills to add to or remove from the package tiers (never the same skill in both).\n\
         # include = [\"pdf-tools\"]\n\
         # exclude = [\"slides\"]\n\n",
    );
}
