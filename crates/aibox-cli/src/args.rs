//! Command-line arguments (clap derive). The reference docs are generated from these
//! definitions, so every flag's help text is user documentation.

use camino::Utf8PathBuf;
use clap::{Args, Parser, Subcommand, ValueEnum};

/// aibox: a secure, reproducible dev container and AI-harness wiring from one `aibox.toml`.
#[derive(Debug, Parser)]
#[command(name = "aibox", version, about, long_about = None, propagate_version = true)]
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
    /// Output format for commands with structured output.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Output::Human)]
    pub output: Output,
    /// Answer "yes" to confirmations. Never counts as security consent.
    #[arg(long, short = 'y', global = true)]
    pub yes: bool,
    /// When to use colours (`NO_COLOR` is respected in `auto`).
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    /// More detail (repeatable).
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Only errors.
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
    /// Colour on a terminal unless `NO_COLOR` is set.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
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
    /// Diagnose the project: configuration, generated files, security posture.
    Doctor(DoctorArgs),
    /// Read and edit `aibox.toml` without losing comments.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// MCP servers.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// processkit skills: review, enable, disable.
    #[command(subcommand)]
    Skill(SkillCommand),
    /// Print a generated reference page (used to build the documentation site).
    #[command(hide = true)]
    Docs {
        /// Which page.
        #[arg(value_parser = ["cli", "config"])]
        page: String,
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
    /// Enable a harness (repeatable): claude, codex, gemini, opencode, cursor, vscode.
    #[arg(long = "harness", value_name = "H")]
    pub harnesses: Vec<String>,
    /// Context mode.
    #[arg(long, value_name = "MODE", value_parser = ["processkit", "harness-only"])]
    pub context_mode: Option<String>,
    /// processkit source (URL, `.tar.gz` or directory).
    #[arg(long, value_name = "S")]
    pub processkit_source: Option<String>,
    /// processkit version (exact tag).
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
    /// Replace hand-written generated files (a backup is kept under `.aibox/backups/`).
    #[arg(long)]
    pub force: bool,
    /// Also build the container image.
    #[arg(long, conflicts_with_all = ["dry_run", "check"])]
    pub build: bool,
}

/// `aibox up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Rebuild the image even when it exists.
    #[arg(long)]
    pub build: bool,
}

/// `aibox exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Pass this host environment variable into the container for this command only
    /// (repeatable).
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

/// `aibox doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Only the processkit per-file integrity check.
    #[arg(long)]
    pub integrity: bool,
    /// Write a redacted diagnostic bundle to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<Utf8PathBuf>,
}

/// `aibox config ...`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective value at a dotted key path (defaults included): strings raw,
    /// other values as JSON; `--output json` prints `{"key", "value"}` with the JSON value.
    Get {
        /// For example `container.user`.
        key: String,
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

/// `aibox mcp ...`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// The effective servers per harness, with origin, target file and trust scope.
    List,
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
    /// Select a skill (edits `[skills]` in `aibox.toml`; the next `apply` installs it).
    Enable {
        /// Skill name.
        name: String,
    },
    /// Deselect a skill (the next `apply` removes its MCP entries and unchanged files).
    Disable {
        /// Skill name.
        name: String,
    },
}
