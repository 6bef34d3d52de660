//! The typed model of `aibox.toml` and `.aibox-local.toml`.
//!
//! Every table rejects unknown keys (`deny_unknown_fields`), every field has a
//! documented default, and the same types produce the JSON Schema (`schemars`), so the
//! schema, the loader and the docs cannot disagree.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The whole of `aibox.toml`: the committed, team-wide desired state of a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "aibox.toml")]
pub struct AiboxToml {
    /// Project identity.
    #[serde(default)]
    pub aibox: AiboxSection,
    /// The dev container.
    pub container: ContainerSection,
    /// Where the agents' context comes from.
    #[serde(default)]
    pub context: ContextSection,
    /// The pinned processkit content release (context mode `processkit`).
    #[serde(default)]
    pub processkit: ProcesskitSection,
    /// Skill selection on top of the package tiers.
    #[serde(default)]
    pub skills: SkillsSection,
    /// AI harnesses and MCP servers.
    #[serde(default)]
    pub ai: AiSection,
    /// Security consents. Never written by aibox on the owner's behalf.
    #[serde(default)]
    pub security: SecuritySection,
    /// Extra tools from aibox's catalog installed into the image.
    #[serde(default, skip_serializing_if = "AddonsSection::is_empty")]
    pub addons: AddonsSection,
    /// Where the container may connect to.
    #[serde(default, skip_serializing_if = "NetworkSection::is_default")]
    pub network: NetworkSection,
}

/// `[network]`: where the agent container may connect to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkSection {
    /// `open` (default): the engine's usual network. `allowlist`: the container sits on a
    /// network with no route out, and reaches only the allowed host names, through the
    /// egress proxy beside it. `none`: no route out at all.
    #[serde(default)]
    pub egress: EgressMode,
    /// Host names the team allows on top of the enabled harnesses' own (`allowlist`
    /// only): `api.example.com`, or `*.example.com` for every name below it. No
    /// addresses: the proxy judges names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

impl NetworkSection {
    /// Whether nothing is set.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// `[network] egress`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum EgressMode {
    /// The engine's default network: the container reaches anything its host reaches.
    #[default]
    Open,
    /// Only allowed host names, through the egress proxy.
    Allowlist,
    /// No connection out of the container.
    None,
}

impl EgressMode {
    /// The value as written in `aibox.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Allowlist => "allowlist",
            Self::None => "none",
        }
    }
}

/// `[addons]`: tools from aibox's catalog (`aibox addon list`) added to the image, on top
/// of what the enabled harnesses and the context mode install.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddonsSection {
    /// Catalog tool names, e.g. `["python", "ripgrep"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

impl AddonsSection {
    /// Whether no addon is chosen.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// `[aibox]`: project identity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AiboxSection {
    /// Project name; defaults to `container.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_name: Option<String>,
    /// Who uses the container: drives warnings only.
    #[serde(default)]
    pub profile: Profile,
    /// URL of the project's source repository, recorded in the image label
    /// `org.opencontainers.image.source`; when unset the label names aibox's own repository,
    /// which generated the Dockerfile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
}

/// Who the container is for.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// A person works in the container (default).
    #[default]
    HumanDev,
    /// Agents run unattended in the container.
    HeadlessRunner,
}

impl Profile {
    /// The name used in `aibox.toml` and image labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HumanDev => "human-dev",
            Self::HeadlessRunner => "headless-runner",
        }
    }
}

/// `[container]`: the dev container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainerSection {
    /// Compose service and project name. Required. Each checkout's container is named
    /// after it plus a hash of the checkout's path (`.aibox-local.toml` can pin a name).
    /// Letters, digits, `.`, `_`, `-`; starts with a letter or digit.
    pub name: String,
    /// Host name inside the container; defaults to `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The unprivileged user the container runs as.
    #[serde(default = "default_user")]
    pub user: String,
    /// UID of that user (match your host UID so bind mounts stay writable).
    #[serde(default = "default_uid")]
    pub uid: u32,
    /// GID of that user; defaults to `uid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
    /// Base image of the generated Dockerfile. Must carry a concrete tag or digest.
    #[serde(default = "default_base_image")]
    pub base_image: String,
    /// Time zone (`TZ`) inside the container; omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// Non-secret environment variables (committed). Secrets go to `.aibox-local.toml`.
    /// A value that is exactly `${NAME}` takes the host's `NAME` when the container is
    /// created (empty when unset); any other `$` is kept literally.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: BTreeMap<String, String>,
    /// Additional bind mounts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_volumes: Vec<ExtraVolume>,
    /// devcontainer lifecycle commands.
    #[serde(default)]
    pub lifecycle: Lifecycle,
    /// Which container engine to use.
    #[serde(default)]
    pub engine: EngineChoice,
}

fn default_user() -> String {
    crate::container::DEFAULT_USER.to_owned()
}
fn default_uid() -> u32 {
    1000
}
/// Text of the committed data file naming the default base image (`data/base-image.toml`).
pub const BASE_IMAGE_DATA: &str = include_str!("../data/base-image.toml");

/// An image reference split into name, tag and digest (`name:tag@sha256:...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRef {
    /// Registry and repository, such as `ghcr.io/projectious-work/aibox-base`.
    pub name: String,
    /// The tag, when the reference has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// `sha256:<hex>`, when the reference pins a digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl ImageRef {
    /// Splits `reference`; the tag is after the last `:` of the last path component (a
    /// registry port such as `host:5000/` is not a tag).
    pub fn parse(reference: &str) -> Self {
        let (rest, digest) = match reference.split_once('@') {
            Some((r, d)) => (r, Some(d.to_owned())),
            None => (reference, None),
        };
        let slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[slash..].rsplit_once(':') {
            Some((_, t)) => (&rest[..rest.len() - t.len() - 1], Some(t.to_owned())),
            None => (rest, None),
        };
        Self {
            name: name.to_owned(),
            tag,
            digest,
        }
    }

    /// The reference text: `name[:tag][@digest]`.
    pub fn reference(&self) -> String {
        let mut out = self.name.clone();
        if let Some(t) = &self.tag {
            out.push(':');
            out.push_str(t);
        }
        if let Some(d) = &self.digest {
            out.push('@');
            out.push_str(d);
        }
        out
    }
}

/// One entry of [`BASE_IMAGE_DATA`]: a reference and, for the default, where its digest
/// was taken from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseImageEntry {
    /// Registry and repository.
    pub name: String,
    /// The tag.
    pub tag: String,
    /// `sha256:<hex>` of the image index (or manifest) the tag named when it was pinned.
    pub digest: String,
    /// Where the digest was read (a registry answer or a published record of one).
    #[serde(default)]
    pub digest_source: Option<String>,
    /// The day it was pinned.
    #[serde(default)]
    pub pinned_on: Option<String>,
}

impl BaseImageEntry {
    /// The entry as an [`ImageRef`].
    pub fn image_ref(&self) -> ImageRef {
        ImageRef {
            name: self.name.clone(),
            tag: Some(self.tag.clone()),
            digest: Some(self.digest.clone()),
        }
    }
}

/// The parsed [`BASE_IMAGE_DATA`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseImages {
    /// The default of `container.base_image`: an official Debian image that exists on a
    /// public registry.
    pub default: BaseImageEntry,
    /// aibox's own base image (`images/base/`), for teams that publish it.
    pub aibox: BaseImageEntry,
}

/// [`BASE_IMAGE_DATA`], parsed once; `None` only if the committed file were broken (a test
/// checks it is not).
pub fn base_images() -> Option<&'static BaseImages> {
    static PARSED: std::sync::LazyLock<Option<BaseImages>> =
        std::sync::LazyLock::new(|| toml::from_str(BASE_IMAGE_DATA).ok());
    PARSED.as_ref()
}

/// The default base image of generated Dockerfiles, from [`BASE_IMAGE_DATA`]: Debian's
/// official image, pinned by tag and index digest. Should the committed data file ever not
/// parse, the empty reference [`default_base_image`] then returns is refused by validation.
pub fn default_base_image_ref() -> Option<ImageRef> {
    base_images().map(|b| b.default.image_ref())
}

/// [`default_base_image_ref`] as reference text (`name:tag@sha256:...`).
pub fn default_base_image() -> String {
    default_base_image_ref()
        .map(|r| r.reference())
        .unwrap_or_default()
}

impl ContainerSection {
    /// Effective host name.
    pub fn hostname(&self) -> &str {
        self.hostname.as_deref().unwrap_or(&self.name)
    }
    /// Effective GID.
    pub fn gid(&self) -> u32 {
        self.gid.unwrap_or(self.uid)
    }
    /// Home directory of the container user.
    pub fn home(&self) -> String {
        crate::container::home(&self.user)
    }
}

/// One `[[container.extra_volumes]]` bind mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtraVolume {
    /// Host path; `~` expands to the host home, relative paths are relative to the project.
    pub source: String,
    /// Absolute path inside the container; no `..`.
    pub target: String,
    /// Mount read-only.
    #[serde(default)]
    pub read_only: bool,
}

/// `[container.lifecycle]`: devcontainer lifecycle commands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lifecycle {
    /// devcontainer `postCreateCommand`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_create_command: Option<String>,
    /// devcontainer `postStartCommand`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_start_command: Option<String>,
}

/// Container engine selection. `AIBOX_ENGINE` overrides it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum EngineChoice {
    /// Docker when its daemon answers, else Podman.
    #[default]
    Auto,
    /// Always Docker.
    Docker,
    /// Always Podman.
    Podman,
}

/// `[context]`: where the agents' context comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextSection {
    /// `processkit` installs a pinned content release; `harness-only` installs none.
    #[serde(default)]
    pub mode: ContextMode,
    /// processkit package tiers to install (processkit mode only).
    #[serde(default = "default_packages")]
    pub packages: Vec<String>,
}

impl Default for ContextSection {
    fn default() -> Self {
        Self {
            mode: ContextMode::default(),
            packages: default_packages(),
        }
    }
}

fn default_packages() -> Vec<String> {
    vec!["product".to_owned()]
}

/// Context mode.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ContextMode {
    /// Install processkit content and register its servers (default).
    #[default]
    Processkit,
    /// No processkit content, hooks, allow rules or gateway.
    HarnessOnly,
}

impl ContextMode {
    /// The name used in `aibox.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Processkit => "processkit",
            Self::HarnessOnly => "harness-only",
        }
    }
}

/// The official processkit repository: the default `[processkit] source`, always trusted.
pub const OFFICIAL_PROCESSKIT_SOURCE: &str = "https://github.com/projectious-work/processkit";

/// `[processkit]`: the pinned content release.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcesskitSection {
    /// Where releases come from: an `https://` or `http://` base URL, a local `.tar.gz`,
    /// or a local directory (relative paths are relative to the project root). Unset: the
    /// official repository, `https://github.com/projectious-work/processkit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Exact release version (for example `v0.28.3`). `latest` is resolved, never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Expected SHA-256 of the release archive (64 lowercase hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// URL template of the release asset: `{source}`, `{version}`, `{name}` (the last
    /// segment of the source URL's path, the repository) and `{org}` (the one before it)
    /// are substituted. Default: `{source}/releases/download/{version}/{name}-{version}.tar.gz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_asset_url_template: Option<String>,
    /// Path of the content inside the archive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_path: Option<String>,
    /// Named opt-out of digest verification. A provenance exception that `aibox doctor`
    /// always reports.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("default" = false))]
    pub allow_unverified: bool,
    /// Which skills the skill review gates at `apply`. `third-party` (default): skills
    /// the verified, pinned release shipped are first-party (reviewed and reported, never
    /// blocking); everything else must pass or carry a consent. `all`: first-party
    /// skills must pass or carry a consent too.
    #[serde(default, skip_serializing_if = "ReviewScope::is_default")]
    #[schemars(extend("default" = "third-party"))]
    pub review: ReviewScope,
    /// Release sources whose verified releases are first-party, besides the official
    /// `https://github.com/projectious-work/processkit` (always trusted). Each entry is a
    /// repository base URL (its releases and nothing else: a fork is another URL) or a
    /// local path (relative to the project root) of a release archive or of a folder
    /// holding release archives or directories. Skills of a release from any other source
    /// are third-party: reviewed and gated at `apply`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_sources: Vec<String>,
}

impl ProcesskitSection {
    /// `source`, or the official repository when it is unset or blank.
    pub fn effective_source(&self) -> &str {
        self.source
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or(OFFICIAL_PROCESSKIT_SOURCE)
    }
}

/// `[processkit] review`: which skills the review gates at `apply`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ReviewScope {
    /// Gate skills that did not come from the verified, pinned release (default).
    #[default]
    ThirdParty,
    /// Gate every skill with an MCP server, first-party ones included.
    All,
}

impl ReviewScope {
    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes `&T`
    fn is_default(&self) -> bool {
        *self == Self::ThirdParty
    }

    /// The name used in `aibox.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ThirdParty => "third-party",
            Self::All => "all",
        }
    }
}

/// `[skills]`: selection on top of the package tiers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillsSection {
    /// Skills to add to the tier selection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// Skills to remove from the selection (core skills stay; `doctor` warns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Per-skill consent to register a skill that fails `aibox skill review`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub review_exceptions: Vec<SkillReviewException>,
}

/// One recorded consent for a skill that fails review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillReviewException {
    /// Skill name.
    pub skill: String,
    /// Who reviewed it.
    pub reviewer: String,
    /// Why the failed points are acceptable.
    pub reason: String,
    /// The SHA-256 of the skill's content this consent was given for, as `aibox skill
    /// review NAME` prints it. A consent for other content is stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The failed review points this consent accepts. A skill failing any other point is
    /// refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<u8>,
}

/// `[ai]`: harnesses and MCP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AiSection {
    /// Enabled harnesses, in display order.
    #[serde(default)]
    pub harnesses: Vec<Harness>,
    /// MCP servers, gateway and permissions.
    #[serde(default)]
    pub mcp: McpSection,
    /// Execution posture. Not yet written into any harness file: `apply` and `doctor` warn
    /// while it is set, so it never looks applied.
    #[serde(default)]
    pub execution: Execution,
}

/// An AI coding harness aibox can configure.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Harness {
    /// Claude Code.
    Claude,
    /// The Codex CLI.
    Codex,
    /// Gemini CLI.
    Gemini,
    /// The opencode CLI.
    Opencode,
    /// Cursor.
    Cursor,
    /// VS Code (GitHub Copilot agent mode).
    Vscode,
}

impl Harness {
    /// Every harness, in canonical order.
    pub const ALL: [Self; 6] = [
        Self::Claude,
        Self::Codex,
        Self::Gemini,
        Self::Opencode,
        Self::Cursor,
        Self::Vscode,
    ];

    /// The id used in `aibox.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
            Self::Opencode => "opencode",
            Self::Cursor => "cursor",
            Self::Vscode => "vscode",
        }
    }

    /// Parses an id as written in `aibox.toml` or on the command line.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == s)
    }
}

impl std::str::FromStr for Harness {
    type Err = crate::diag::UnknownHarness;

    /// Parses an id, with a suggestion (typo or the original tool's alias) on failure.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| crate::diag::UnknownHarness {
            given: s.to_owned(),
            suggestion: crate::shape::harness_suggestion(s),
        })
    }
}

impl std::fmt::Display for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[ai.mcp]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// Team MCP servers (committed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<McpServer>,
    /// The processkit gateway.
    #[serde(default)]
    pub gateway: Gateway,
    /// Tool permissions projected into each harness.
    #[serde(default)]
    pub permissions: Permissions,
}

/// One MCP server: stdio (`command`) or remote (`url`), exactly one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// Server name: letters, digits, `_` and `-`.
    pub name: String,
    /// Program to start (stdio servers). A team server started as `npx -y <pkg>@<version>`
    /// (one exact version) gets its npm tree locked in `aibox.lock` and installed in the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment: values must be variable references such as `${TOKEN}` in committed files.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// URL of a remote (streamable HTTP) server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers of a remote server; values must be variable references.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Tools the harness may call without asking; empty means the permission defaults apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// Start-up timeout for slow servers, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_sec: Option<u32>,
    /// Set to false to keep the entry but not register it.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub enabled: bool,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_true(b: &bool) -> bool {
    *b
}
fn yes() -> bool {
    true
}

/// `[ai.mcp.gateway]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gateway {
    /// `auto` uses the gateway when its skill is installed; `separate` registers each
    /// skill's server on its own.
    #[serde(default)]
    pub mode: GatewayMode,
    /// Address the gateway daemon binds to; loopback only.
    #[serde(default = "default_gateway_host")]
    pub host: String,
    /// Port of the gateway daemon.
    #[serde(default = "default_gateway_port")]
    pub port: u16,
}

impl Default for Gateway {
    fn default() -> Self {
        Self {
            mode: GatewayMode::default(),
            host: default_gateway_host(),
            port: default_gateway_port(),
        }
    }
}

fn default_gateway_host() -> String {
    "127.0.0.1".to_owned()
}
fn default_gateway_port() -> u16 {
    8765
}

/// Gateway mode.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum GatewayMode {
    /// Gateway when the gateway skill is installed, else per-skill servers.
    #[default]
    Auto,
    /// Per-skill servers always.
    Separate,
}

/// `[ai.mcp.permissions]`: deny wins; a non-empty allow list is exclusive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// What happens to a tool matched by neither list.
    #[serde(default)]
    pub default_mode: PermissionMode,
    /// Tool patterns allowed without asking (`*`, exact, `prefix*`, `*suffix`, `*mid*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_patterns: Vec<String>,
    /// Tool patterns always denied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_patterns: Vec<String>,
}

/// Default permission mode.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// Ask the user (default).
    #[default]
    Ask,
    /// Allow.
    Allow,
    /// Deny.
    Deny,
}

/// `[ai.execution]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Execution {
    /// File-system reach of the harness's own sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystem: Option<FilesystemMode>,
    /// When the harness asks before running a command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalMode>,
    /// Network reach of the harness's commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkMode>,
}

/// File-system mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FilesystemMode {
    /// Read-only.
    ReadOnly,
    /// Write inside the workspace.
    WorkspaceWrite,
    /// No nested sandbox: the container is the boundary.
    ContainerFull,
}

/// Approval mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Ask every time.
    Ask,
    /// Ask when the harness thinks it should.
    OnRequest,
    /// Never ask.
    Never,
}

/// Network mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// No network.
    Deny,
    /// Ask.
    Ask,
    /// Allow.
    Allow,
}

/// `[security]`: consents. aibox never sets these on the owner's behalf; `aibox config
/// set` of a consent key prints what it relaxes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecuritySection {
    /// The owner accepts `seccomp=unconfined` for Codex's bubblewrap sandbox.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("default" = false))]
    pub acknowledge_seccomp_unconfined: bool,
    /// How Codex's bubblewrap sandbox gets the user namespaces it needs in the container
    /// (`landlock` is deprecated and means `engine-default`).
    #[serde(default)]
    pub codex_sandbox: CodexSandbox,
    /// The owner accepts the generated seccomp profile that allows user namespaces.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("default" = false))]
    pub acknowledge_seccomp_profile: bool,
    /// Recorded exceptions for other relaxations, one per option.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exceptions: Vec<SecurityException>,
}

/// How Codex's bubblewrap sandbox is made to work inside the container.
///
/// Codex (0.147 and later) always sandboxes with bubblewrap on Linux, which needs
/// unprivileged user namespaces; whether the container allows them depends on the
/// engine's default seccomp profile (Podman's does, Docker's does not).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum CodexSandbox {
    /// The engine's default seccomp profile, nothing relaxed (default). Works where the
    /// default allows user namespaces (Podman); on Docker `apply` asks for a consent key.
    #[default]
    EngineDefault,
    /// A generated seccomp profile: Docker's default plus only what bubblewrap needs.
    /// Needs `acknowledge_seccomp_profile`.
    SeccompProfile,
    /// `seccomp=unconfined`. Needs `acknowledge_seccomp_unconfined`.
    Unconfined,
    /// Deprecated: Codex has no Landlock sandbox any more; read as `engine-default`, with a
    /// warning.
    Landlock,
}

impl CodexSandbox {
    /// The value as written in `aibox.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EngineDefault => "engine-default",
            Self::SeccompProfile => "seccomp-profile",
            Self::Unconfined => "unconfined",
            Self::Landlock => "landlock",
        }
    }
}

/// One `[[security.exceptions]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecurityException {
    /// The option a refusal names, for example `cap_add:NET_ADMIN`, `devices:/dev/fuse`,
    /// `sysctls:net.core.somaxconn`, `label=type:spc_t` or `user:root`.
    pub option: String,
    /// Why it is needed.
    pub reason: String,
}

/// The whole of `.aibox-local.toml`: personal, gitignored settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = ".aibox-local.toml")]
pub struct LocalToml {
    /// Personal container settings.
    #[serde(default)]
    pub container: LocalContainer,
    /// Personal MCP servers.
    #[serde(default)]
    pub mcp: LocalMcp,
    /// Personal egress settings (`[network] egress = "allowlist"`).
    #[serde(default, skip_serializing_if = "LocalNetwork::is_default")]
    pub network: LocalNetwork,
}

/// `[network]` of the personal overlay: read only in `allowlist` mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalNetwork {
    /// Host names you allow for yourself, on top of the team's (same form as
    /// `aibox.toml`'s `[network] allow`). Written only to gitignored files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Your network's HTTP proxy, `host:port`: the egress proxy forwards every allowed
    /// connection through it (company networks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_proxy: Option<String>,
}

impl LocalNetwork {
    /// Whether nothing is set.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// `[container]` of the personal overlay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalContainer {
    /// Personal environment: written only to `.devcontainer/aibox-local.env` (mode 0600).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: BTreeMap<String, String>,
    /// Personal bind mounts, appended after the team's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_volumes: Vec<ExtraVolume>,
    /// A PEM file of extra CA certificates (e.g. a company TLS-inspecting proxy's) the
    /// image build and the container trust, and aibox's own downloads (processkit
    /// releases, registry questions) too. Absolute, or relative to the project folder.
    /// Its text is copied into the gitignored `.devcontainer/aibox-ca/`, never committed,
    /// and into the image: a file that holds a private key is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_ca_certificates: Option<String>,
    /// Pins this checkout's container (and Compose project) name. Without it the name is
    /// the project's name plus a short hash of the checkout's path, so two checkouts of one
    /// project never share a container. Lowercase letters, digits, `-` and `_`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
}

/// `[mcp]` of the personal overlay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalMcp {
    /// Personal MCP servers: only ever written to container-scoped or gitignored files, never
    /// to a committed one (skipped, with a reason, for harnesses that have no such place).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<McpServer>,
}
