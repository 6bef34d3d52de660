//! Command-line arguments (clap derive). The reference docs are generated from these
//! definitions, so every flag's help text is user documentation.

use camino::Utf8PathBuf;
use clap::{Args, Parser, Subcommand, ValueEnum};

/// aibox: a secure, reproducible dev container and AI-harness wiring from one `aibox.toml`.
#[derive(Debug, Parser)]
#[command(
    name = "aibox",
    version,
    about,
    long_about = None,
    propagate_version = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command accepts.
#[derive(Debug, Args)]
pub struct Global {
    /// Project directory (default: the nearest parent directory holding `aibox.toml`).
    #[arg(long, global = true, value_name = "DIR", env = "AIBOX_PROJECT")]
    pub project: Option<Utf8PathBuf>,
    /// Output format; `json` prints every result and every error as JSON on stdout.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Output::Human)]
    pub output: Output,
    /// Answer "yes" to confirmations. Never counts as security consent.
    #[arg(long, short = 'y', global = true)]
    pub yes: bool,
    /// When to use colours (`NO_COLOR` is respected in `auto`).
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    /// More detail: `-v` shows every line the engine and Compose print (`up`, `apply
    /// --build`, `down`) instead of one progress line per build step, and a line per file
    /// in `apply`'s plan (every generated file, and each processkit file it writes or
    /// removes; unchanged processkit files are not listed, `aibox doctor --integrity`
    /// checks each) instead of a summary; `-vv` currently shows the same.
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Only errors and warnings: no progress or status lines; `doctor` prints only its
    /// errors and warnings (not the checks that passed, nor notes), `doctor --integrity`
    /// only the files that are wrong, `mcp list` only the servers not registered. What
    /// you asked for (`config get`, `--output json`) is still printed.
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Text for people.
    Human,
    /// JSON for scripts.
    Json,
}

/// Colour choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    /// Colour on a terminal unless `NO_COLOR` is set to a non-empty value.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

/// A harness id on the command line: the values are `aibox_config::Harness::ALL`, so the
/// list cannot drift from the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HarnessArg(pub aibox_config::Harness);

impl ValueEnum for HarnessArg {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [HarnessArg; aibox_config::Harness::ALL.len()] = {
            let h = aibox_config::Harness::ALL;
            [
                HarnessArg(h[0]),
                HarnessArg(h[1]),
                HarnessArg(h[2]),
                HarnessArg(h[3]),
                HarnessArg(h[4]),
                HarnessArg(h[5]),
            ]
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.as_str()))
    }
}

/// A context mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextModeArg(pub aibox_config::ContextMode);

impl ValueEnum for ContextModeArg {
    fn value_variants<'a>() -> &'a [Self] {
        &[
            ContextModeArg(aibox_config::ContextMode::Processkit),
            ContextModeArg(aibox_config::ContextMode::HarnessOnly),
        ]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.as_str()))
    }
}

/// A generated reference page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DocsPage {
    /// The CLI reference.
    Cli,
    /// The configuration reference.
    Config,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create `aibox.toml` and `.gitignore` entries for a new project.
    Init(InitArgs),
    /// Generate every file the configuration implies (idempotent).
    Apply(ApplyArgs),
    /// Start the dev container (applies and builds first when needed).
    Up(UpArgs),
    /// Stop and remove the dev container; files and `.aibox-home/` are kept.
    Down,
    /// Show the container's state.
    Status,
    /// Run a command in the container as the configured user.
    Exec(ExecArgs),
    /// Print the help of aibox or of a command (`aibox help mcp check`).
    Help {
        /// The command (and subcommand) to explain.
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Diagnose the project: configuration, generated files, security posture.
    Doctor(DoctorArgs),
    /// aibox itself: whether a newer release exists.
    #[command(subcommand, name = "self")]
    Own(SelfCommand),
    /// Read and edit `aibox.toml` without losing comments.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// MCP servers.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// processkit skills: review, enable, disable.
    #[command(subcommand)]
    Skill(SkillCommand),
    /// processkit upgrades waiting for you: list them, show a conflicting file's three
    /// versions, settle it and mark the migration done.
    #[command(subcommand)]
    Migrate(MigrateCommand),
    /// processkit releases.
    #[command(subcommand)]
    Processkit(ProcesskitCommand),
    /// Tools from aibox's pinned, verified catalog installed into the image.
    #[command(subcommand)]
    Addon(AddonCommand),
    /// The dev container's base image (`container.base_image`).
    #[command(subcommand)]
    BaseImage(BaseImageCommand),
    /// Where the container may connect to (`[network] egress`).
    #[command(subcommand)]
    Network(NetworkCommand),
    /// Print a generated reference page (used to build the documentation site).
    #[command(hide = true)]
    Docs {
        /// Which page.
        #[arg(value_enum)]
        page: DocsPage,
    },
    /// Print a shell completion script.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `aibox init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Project (and container) name; default: the directory name.
    pub name: Option<String>,
    /// Enable a harness (repeatable).
    #[arg(long = "harness", value_name = "H", value_enum)]
    pub harnesses: Vec<HarnessArg>,
    /// Context mode.
    #[arg(long, value_name = "MODE", value_enum)]
    pub context_mode: Option<ContextModeArg>,
    /// processkit source (URL, `.tar.gz` or directory).
    #[arg(long, value_name = "S")]
    pub processkit_source: Option<String>,
    /// processkit version: an exact tag, or `latest` for the newest published release
    /// (asked from the source's releases API now and written as its exact tag).
    #[arg(long, value_name = "V")]
    pub processkit_version: Option<String>,
    /// Base image of the dev container (concrete tag or digest).
    #[arg(long, value_name = "IMAGE")]
    pub base_image: Option<String>,
}

/// `aibox apply`.
#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools)] // each bool is one independent command-line flag
pub struct ApplyArgs {
    /// Show a unified diff of what would change; write nothing.
    #[arg(long, conflicts_with = "check")]
    pub dry_run: bool,
    /// Write nothing; exit 1 when a committed output would change, naming each stale file
    /// (for CI; local, gitignored files are not judged: the next apply creates them).
    #[arg(long)]
    pub check: bool,
    /// Replace hand-written generated files, and ones a merge left with conflict markers (a
    /// backup is kept under `.aibox/backups/`).
    #[arg(long)]
    pub force: bool,
    /// Also build the container image.
    #[arg(long, conflicts_with_all = ["dry_run", "check"])]
    pub build: bool,
    /// Approve what the configuration now lets the container reach beyond what you last
    /// approved for this checkout (hosts, egress mode, host folders and variables,
    /// relaxations). Without it such an apply is refused, or asked at a terminal.
    #[arg(long, conflicts_with_all = ["dry_run", "check"])]
    pub approve_reach: bool,
}

/// `aibox up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Rebuild the image even when it exists.
    #[arg(long)]
    pub build: bool,
    /// Approve more reach for the container, as `aibox apply --approve-reach` does.
    #[arg(long)]
    pub approve_reach: bool,
}

/// `aibox exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Pass this host environment variable into the container for this command only
    /// (repeatable).
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
    /// The command and its arguments (everything after the command is its own, as with
    /// `docker exec`; a `--` before it is accepted too).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "CMD"
    )]
    pub cmd: Vec<String>,
}

/// `aibox doctor`.
#[allow(clippy::struct_excessive_bools)] // independent command-line switches
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Only the processkit per-file integrity check.
    #[arg(long)]
    pub integrity: bool,
    /// Also run the installed processkit release's own checker, pk-doctor (in the running
    /// container, else on the host with uv), and merge its findings (`pk-doctor::*`).
    #[arg(long, conflicts_with = "integrity")]
    pub processkit: bool,
    /// Write a redacted diagnostic bundle to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<Utf8PathBuf>,
    /// Ask the releases feed for a newer aibox even in CI or with `AIBOX_NO_UPDATE_CHECK`.
    #[arg(long, conflicts_with = "no_update_check")]
    pub check_updates: bool,
    /// Do not ask the releases feed for a newer aibox.
    #[arg(long)]
    pub no_update_check: bool,
}

/// `aibox self ...`.
#[derive(Debug, Subcommand)]
pub enum SelfCommand {
    /// Ask the releases feed whether a newer aibox exists (always asks, CI included); exit
    /// 1 when an update is due.
    Check,
}

/// `aibox config ...`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective value at a dotted key path (defaults included): strings raw,
    /// other values as JSON; `--output json` prints `{"key", "value"}` with the JSON value.
    Get {
        /// For example `container.user`.
        key: String,
        /// Read the personal `.aibox-local.toml` (the value as written there) instead.
        #[arg(long)]
        local: bool,
    },
    /// Set a value, keeping comments and order; the result is validated before saving.
    Set {
        /// For example `container.user`.
        key: String,
        /// A TOML value (`true`, `3`, `["a"]`) or a plain string.
        value: String,
        /// Edit the personal `.aibox-local.toml` instead of `aibox.toml`.
        #[arg(long)]
        local: bool,
    },
    /// Validate `aibox.toml` and `.aibox-local.toml`.
    Validate,
    /// Print the JSON Schema of `aibox.toml` (`--local`: of `.aibox-local.toml`).
    Schema {
        /// The personal overlay's schema.
        #[arg(long)]
        local: bool,
    },
}

/// `aibox network ...`.
#[derive(Debug, Subcommand)]
pub enum NetworkCommand {
    /// The egress mode and, for `allowlist`, every allowed host with where it comes from.
    List,
}

/// `aibox mcp ...`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// The effective servers per harness, with origin, target file and trust scope, and
    /// the entries added by hand to the harnesses' files; `--output json` prints
    /// `{"servers", "hand_added", "not_resolved"}`.
    List,
    /// Start each stdio server in the running container, as its harness would, and check
    /// it answers the MCP handshake (`initialize`, `tools/list`). Exit 1 when one fails.
    Check(McpCheckArgs),
    /// Add a server to `aibox.toml` (`--local`: `.aibox-local.toml`), as `claude mcp add`
    /// does: `aibox mcp add issues --env ISSUES_TOKEN='${ISSUES_TOKEN}' -- npx -y
    /// @acme/issues-mcp@2.1.0`. Run `aibox apply` to register it.
    Add(McpAddArgs),
    /// Remove a server from `aibox.toml` (`--local`: `.aibox-local.toml`).
    Remove {
        /// The server's name.
        name: String,
        /// Remove it from the personal `.aibox-local.toml`.
        #[arg(long)]
        local: bool,
    },
}

/// `aibox mcp add`.
#[derive(Debug, Args)]
pub struct McpAddArgs {
    /// The server's name (letters, digits, `_` and `-`).
    pub name: String,
    /// A remote (streamable HTTP) server at this URL instead of a command.
    #[arg(long, conflicts_with = "command")]
    pub url: Option<String>,
    /// An environment variable of the server, `KEY='${KEY}'` (repeatable): in either file
    /// every value is a reference to a variable of the container, whose value goes in
    /// `.aibox-local.toml [container.environment]`; a literal is refused (it could be a
    /// secret, and it would be committed).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// An HTTP header of a remote server, `Name=VALUE` (repeatable): the value holds a
    /// reference, for example `Authorization='Bearer ${TOKEN}'`.
    #[arg(long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
    /// Add it to the personal `.aibox-local.toml` instead of the team's `aibox.toml`.
    #[arg(long)]
    pub local: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `aibox mcp check`.
#[derive(Debug, Args)]
pub struct McpCheckArgs {
    /// Servers to check (default: every server `aibox mcp list` shows).
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Seconds each server may take to answer (default: its `startup_timeout_sec`, 90 for
    /// `uv` servers, else 60).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: Option<u64>,
}

/// `aibox addon ...`.
#[derive(Debug, Subcommand)]
pub enum AddonCommand {
    /// The catalog: version, verification, and why this project's image has each tool.
    List,
    /// Add tools to `[addons] tools` in `aibox.toml` (the next `apply` changes the image).
    Add {
        /// Catalog names, e.g. `python`.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Remove tools from `[addons] tools` (an emptied `[addons]` table is removed).
    Remove {
        /// Catalog names.
        #[arg(required = true)]
        names: Vec<String>,
    },
}

/// `aibox base-image ...`.
#[derive(Debug, Subcommand)]
pub enum BaseImageCommand {
    /// Re-pin the tag of `container.base_image` to the digest its registry serves now
    /// (OCI distribution API, anonymous token when asked) and write `name:tag@digest` into
    /// `aibox.toml`, keeping comments. Offline or refused, nothing changes (exit 3).
    Pin {
        /// Pin this reference (`[host/]repository:tag`) instead of the configured one.
        reference: Option<String>,
        /// Print what would change; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `aibox processkit ...`.
#[derive(Debug, Subcommand)]
pub enum ProcesskitCommand {
    /// The releases the processkit source has published, newest first (the forge's
    /// releases API; `GITHUB_TOKEN` or `GH_TOKEN` raise the rate limit).
    Versions {
        /// Repository URL to ask instead of `[processkit] source` (default: the official
        /// repository).
        #[arg(long, value_name = "URL")]
        source: Option<String>,
    },
}

/// `aibox skill ...`.
#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// The installed skills, with core, MCP and selection state.
    List,
    /// Review a skill against the six-point third-party checklist; exit 1 when a point fails.
    Review {
        /// A skill directory, or the name of an installed skill.
        target: String,
    },
    /// Select a skill (edits `[skills]` in `aibox.toml`; the next `apply` installs it). A
    /// name the installed release does not have is refused, with a suggestion.
    Enable {
        /// Skill name.
        name: String,
    },
    /// Deselect a skill (the next `apply` removes its MCP entries and unchanged files). A
    /// name the installed release does not have is refused, with a suggestion.
    Disable {
        /// Skill name.
        name: String,
    },
}

/// `aibox migrate ...`.
#[derive(Debug, Subcommand)]
pub enum MigrateCommand {
    /// The pending migrations (`context/migrations/pending/`, `in-progress/`) with their
    /// open conflicts.
    List,
    /// A migration's open conflicts: where ours (the working file), theirs (the new
    /// release's version, parked beside the document) and base (the previous release's,
    /// from the download cache) are, and the diff from ours to theirs.
    Show {
        /// Migration id (`MIG-...`).
        id: String,
        /// Only this conflicting file.
        path: Option<String>,
        /// Print this version's bytes alone (to feed a merge tool); needs PATH.
        #[arg(long, value_enum, value_name = "VERSION", requires = "path")]
        print: Option<SideArg>,
    },
    /// Settle conflicts by taking one version (or keeping your hand-merged file) and,
    /// once none is open, mark the migration applied (moved to `applied/`). Without PATH,
    /// every open conflict of the migration. Refuses to overwrite a file you changed
    /// since the upgrade unless `--force`.
    Resolve {
        /// Migration id (`MIG-...`).
        id: String,
        /// The conflicting files to settle (default: all open ones).
        paths: Vec<String>,
        /// Which version to keep: `ours` (your file as it is), `theirs` (the new
        /// release's) or `base` (the previous release's).
        #[arg(long, value_enum, value_name = "VERSION", conflicts_with = "edited")]
        take: Option<SideArg>,
        /// You merged the versions into the working file by hand: keep it as it is now.
        #[arg(long)]
        edited: bool,
        /// Replace a working file that changed since the upgrade.
        #[arg(long)]
        force: bool,
    },
}

/// One of the three versions of a conflicting file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SideArg {
    /// Your working file.
    Ours,
    /// The new release's version.
    Theirs,
    /// The previous release's version.
    Base,
}

impl From<SideArg> for aibox_engine::migrate::Side {
    fn from(s: SideArg) -> Self {
        match s {
            SideArg::Ours => Self::Ours,
            SideArg::Theirs => Self::Theirs,
            SideArg::Base => Self::Base,
        }
    }
}

/// Whether a command line that failed to parse asked for `--output json` (so that even
/// its usage error is JSON).
pub fn wants_json(args: impl IntoIterator<Item = String>) -> bool {
    let args: Vec<String> = args.into_iter().collect();
    args.iter().enumerate().any(|(i, a)| {
        matches!(a.as_str(), "--output=json" | "-ojson" | "-o=json")
            || (matches!(a.as_str(), "--output" | "-o")
                && args.get(i + 1).is_some_and(|v| v == "json"))
    })
}
