//! Registration across every enabled harness: which server goes to which file, the
//! merged file texts, the updated ledger, and the report behind `aibox mcp list`.
//!
//! Target files and their scope (harness-mcp-formats §13):
//!
//! Project files are committed, so a fresh clone sees the team and processkit servers
//! without running aibox. Personal servers never reach a committed file: they go to the
//! container-scoped user config where the harness has one, and are otherwise skipped
//! with a reason that says where to add them by hand.
//!
//! | Harness | File | Scope | Personal servers |
//! |---|---|---|---|
//! | Claude Code | `.mcp.json` | committed | skipped, reported (`claude mcp add --scope local`) |
//! | Claude Code | `.claude/settings.json` (team/processkit approvals + rules) | committed | never |
//! | Claude Code | `.claude/settings.local.json` (personal rules) | gitignored | yes |
//! | Codex | `.codex/config.toml` | committed | never |
//! | Codex | `.aibox-home/.codex/config.toml` (project trust + personal servers) | container-scoped | yes |
//! | Gemini CLI | `.gemini/settings.json` | committed | never |
//! | Gemini CLI | `.aibox-home/.gemini/settings.json` (personal servers) | container-scoped | yes |
//! | `OpenCode` | `opencode.json` | committed | skipped, reported |
//! | Cursor | `.cursor/mcp.json` | committed | skipped, reported |
//! | VS Code | `.vscode/mcp.json` | committed | skipped, reported |
//! | Codex | `.codex/hooks.json` (processkit hooks) | committed | never |
//! | Cursor | `.cursor/hooks.json` (processkit hooks) | committed | never |
//!
//! processkit's hooks and pre-authorisation ([`crate::hooks`]) go to `.claude/settings.json`
//! (`hooks`, `permissions.allow`), `.codex/hooks.json` and `.cursor/hooks.json`.

use std::collections::BTreeSet;

use aibox_config::{Harness, Permissions};
use serde::Serialize;
use serde_json::Value;

use crate::McpError;
use crate::harness::{self, Rendered};
use crate::hooks::{HookFile, ProcesskitWiring};
use crate::jsonfile::JsonDoc;
use crate::ledger::{LEDGER_PATH, Ledger, previously_owned};
use crate::spec::{Origin, ServerSpec, Transport};
use crate::tomlfile::TomlDoc;
use crate::tools::ToolPolicy;

// The harness files are rows of the file table, spelled there once.
use aibox_config::layout::{
    CLAUDE_MCP_JSON, CLAUDE_SETTINGS, CLAUDE_SETTINGS_LOCAL, CODEX_CONFIG, CODEX_HOME_CONFIG,
    CODEX_HOOKS, CURSOR_HOOKS, CURSOR_MCP, GEMINI_HOME_SETTINGS, GEMINI_SETTINGS, OPENCODE_CONFIG,
    VSCODE_MCP,
};

/// Whether a target file is shared through git.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileScope {
    /// Committed: never holds a personal server, trust, or a literal secret.
    Committed,
    /// Gitignored project file.
    Gitignored,
    /// Under `.aibox-home/`: the container user's home, never committed.
    ContainerScoped,
}

/// Every file aibox may merge into, with its harness and scope.
pub const TARGETS: [(Harness, &str, FileScope); 12] = [
    (Harness::Claude, CLAUDE_MCP_JSON, FileScope::Committed),
    (Harness::Claude, CLAUDE_SETTINGS, FileScope::Committed),
    (
        Harness::Claude,
        CLAUDE_SETTINGS_LOCAL,
        FileScope::Gitignored,
    ),
    (Harness::Codex, CODEX_CONFIG, FileScope::Committed),
    (
        Harness::Codex,
        CODEX_HOME_CONFIG,
        FileScope::ContainerScoped,
    ),
    (Harness::Gemini, GEMINI_SETTINGS, FileScope::Committed),
    (
        Harness::Gemini,
        GEMINI_HOME_SETTINGS,
        FileScope::ContainerScoped,
    ),
    (Harness::Opencode, OPENCODE_CONFIG, FileScope::Committed),
    (Harness::Cursor, CURSOR_MCP, FileScope::Committed),
    (Harness::Vscode, VSCODE_MCP, FileScope::Committed),
    (Harness::Codex, CODEX_HOOKS, FileScope::Committed),
    (Harness::Cursor, CURSOR_HOOKS, FileScope::Committed),
];

/// Inputs besides the servers.
#[derive(Debug, Clone, Copy)]
pub struct RegisterOptions<'a> {
    /// Enabled harnesses (`[ai] harnesses`); files of other harnesses are only pruned.
    pub harnesses: &'a [Harness],
    /// `[ai.mcp.permissions]`.
    pub permissions: &'a Permissions,
    /// The project's path inside the container (normally [`aibox_config::container::WORKSPACE_DIR`]): Codex
    /// script paths are made absolute under it and Codex trust is seeded for it.
    pub workspace: &'a str,
}

/// One server as one harness sees it: the data behind `aibox mcp list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EffectiveServer {
    /// The harness.
    pub harness: Harness,
    /// Server name.
    pub name: String,
    /// processkit, team or personal.
    pub origin: Origin,
    /// `stdio` or `remote`.
    pub transport: &'static str,
    /// File that holds the entry; `None` when skipped.
    pub target_file: Option<String>,
    /// Scope of that file.
    pub file_scope: Option<FileScope>,
    /// Who must approve or trust the server, and where that is stored.
    pub trust_scope: String,
    /// Allowed tools after deny-wins resolution (`*` = all).
    pub allowed_tools: Vec<String>,
    /// Denied tool patterns.
    pub denied_tools: Vec<String>,
    /// Where the allow/deny projection was written; `None` when the harness has no
    /// faithful mechanism (see `notes`).
    pub permissions_target: Option<String>,
    /// Limits and caveats (unprojectable patterns, dropped defaults, ...).
    pub notes: Vec<String>,
    /// Deny patterns this harness cannot enforce for a registered server (`apply`
    /// refuses them: see [`McpError::UnenforceableDeny`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unenforced_deny: Vec<String>,
    /// Why the server is not registered in this harness.
    pub skipped: Option<String>,
}

/// One merged file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetFile {
    /// Root-relative path.
    pub path: String,
    /// New full text.
    pub contents: String,
    /// Committed, gitignored or container-scoped.
    pub scope: FileScope,
    /// Whether `contents` differs from the current file.
    pub changed: bool,
}

/// The result of [`register`].
#[derive(Debug, Clone)]
pub struct Registration {
    /// Merged harness files (unchanged files of enabled harnesses included).
    pub files: Vec<TargetFile>,
    /// The ledger to store at [`LEDGER_PATH`].
    pub ledger: Ledger,
    /// Whether the ledger must be written: entries owned now, a ledger existed, or
    /// entries were found without one and kept as not aibox's (the ledger, empty or not,
    /// records that judgement, so the notice about it is given once).
    pub write_ledger: bool,
    /// Per-harness report.
    pub servers: Vec<EffectiveServer>,
    /// Messages for the user (approval commands, missing ledger, ...).
    pub notices: Vec<String>,
}

#[derive(Default)]
struct Computed {
    claude: Vec<(String, Value)>,
    claude_names: [Vec<String>; 2],
    claude_allow: [Vec<String>; 2],
    claude_deny: [Vec<String>; 2],
    codex: Vec<(String, toml_edit::Table)>,
    codex_personal: Vec<(String, toml_edit::Table)>,
    gemini: Vec<(String, Value)>,
    gemini_personal: Vec<(String, Value)>,
    opencode: Vec<(String, Value)>,
    cursor: Vec<(String, Value)>,
    vscode: Vec<(String, Value)>,
    report: Vec<EffectiveServer>,
    /// A server a harness cannot take as configured, said at every apply (a personal
    /// server where the harness has no personal place is by design: `mcp list` says it).
    skips: Vec<String>,
}

impl Computed {
    /// Renders `s` for harness `h`, records the entry, and returns the target file and
    /// notes, or the reason the harness cannot take the server.
    fn render(
        &mut self,
        h: Harness,
        s: &ServerSpec,
        policy: &ToolPolicy,
        row: &mut EffectiveServer,
        workspace: &str,
    ) -> Result<(&'static str, Vec<String>), String> {
        let personal = s.origin == Origin::Personal;
        let c = self;
        match h {
            Harness::Claude | Harness::Cursor | Harness::Opencode | Harness::Vscode if personal => {
                Err(personal_skip(h, s))
            }
            Harness::Claude => harness::claude_entry(s).map(|Rendered { value, notes }| {
                c.claude.push((s.name.clone(), value));
                let idx = usize::from(personal);
                c.claude_names[idx].push(s.name.clone());
                let rules = harness::claude_rules(s, policy);
                let (allow, deny) = rules.value;
                if !allow.is_empty() || !deny.is_empty() {
                    row.permissions_target = Some(
                        if personal {
                            CLAUDE_SETTINGS_LOCAL
                        } else {
                            CLAUDE_SETTINGS
                        }
                        .to_owned(),
                    );
                }
                c.claude_allow[idx].extend(allow);
                c.claude_deny[idx].extend(deny);
                (CLAUDE_MCP_JSON, [notes, rules.notes].concat())
            }),
            Harness::Codex => harness::codex_entry(s, policy, workspace).map(|r| {
                let file = if personal {
                    CODEX_HOME_CONFIG
                } else {
                    CODEX_CONFIG
                };
                if r.value.contains_key("enabled_tools") || r.value.contains_key("disabled_tools") {
                    row.permissions_target = Some(file.to_owned());
                }
                let list = if personal {
                    &mut c.codex_personal
                } else {
                    &mut c.codex
                };
                list.push((s.name.clone(), r.value));
                (file, r.notes)
            }),
            Harness::Gemini => harness::gemini_entry(s, policy).map(|r| {
                let file = if personal {
                    GEMINI_HOME_SETTINGS
                } else {
                    GEMINI_SETTINGS
                };
                if r.value.get("includeTools").is_some() || r.value.get("excludeTools").is_some() {
                    row.permissions_target = Some(file.to_owned());
                }
                let list = if personal {
                    &mut c.gemini_personal
                } else {
                    &mut c.gemini
                };
                list.push((s.name.clone(), r.value));
                (file, r.notes)
            }),
            Harness::Opencode => harness::opencode_entry(s).map(|r| {
                c.opencode.push((s.name.clone(), r.value));
                (OPENCODE_CONFIG, r.notes)
            }),
            Harness::Cursor => harness::cursor_entry(s).map(|r| {
                c.cursor.push((s.name.clone(), r.value));
                (CURSOR_MCP, r.notes)
            }),
            Harness::Vscode => harness::vscode_entry(s).map(|r| {
                c.vscode.push((s.name.clone(), r.value));
                (VSCODE_MCP, r.notes)
            }),
        }
    }
}

/// Why a personal server is not registered for `h`, and where to add it by hand: the
/// harness's project file is committed and aibox has no container-scoped place for it.
fn personal_skip(h: Harness, s: &ServerSpec) -> String {
    let name = &s.name;
    let (file, user) = match h {
        Harness::Claude => (
            CLAUDE_MCP_JSON,
            match &s.transport {
                Transport::Remote { url, .. } => format!(
                    "inside the container run `claude mcp add --transport http --scope local {name} {url}` (Claude keeps it in ~/.claude/.claude.json, which aibox keeps across rebuilds)"
                ),
                Transport::Stdio { .. } => format!(
                    "inside the container run `claude mcp add --scope local {name} -- COMMAND` (Claude keeps it in ~/.claude/.claude.json, which aibox keeps across rebuilds)"
                ),
            },
        ),
        Harness::Cursor => (
            CURSOR_MCP,
            "add it to ~/.cursor/mcp.json yourself".to_owned(),
        ),
        Harness::Opencode => (
            OPENCODE_CONFIG,
            "add it to ~/.config/opencode/opencode.json yourself".to_owned(),
        ),
        _ => (
            VSCODE_MCP,
            "add it to your VS Code user profile (MCP: Open User Configuration) yourself"
                .to_owned(),
        ),
    };
    format!("personal servers never go to the committed {file}; {user}")
}

fn trust_scope(h: Harness, origin: Origin, workspace: &str) -> String {
    match (h, origin) {
        (Harness::Claude, _) => "approved in committed .claude/settings.json (enabledMcpjsonServers); Claude honours it only after you trust the folder".into(),
        (Harness::Codex, Origin::Personal) => format!("Codex loads servers of its user config, the container-scoped {CODEX_HOME_CONFIG}"),
        (Harness::Codex, _) => format!("Codex reads .codex/config.toml because aibox trusts {workspace} in the container-scoped {CODEX_HOME_CONFIG}"),
        (Harness::Gemini, _) => "Gemini connects only in a trusted folder (~/.gemini/trustedFolders.json or GEMINI_CLI_TRUST_WORKSPACE=true); aibox never sets `trust`".into(),
        (Harness::Opencode, _) => "none: OpenCode starts every server of the committed opencode.json when it opens the project, without asking (it has no approval step); the gate at apply is the only check".into(),
        (Harness::Cursor, _) => "approved in the Cursor IDE".into(),
        (Harness::Vscode, _) => "VS Code asks for trust when the server first starts".into(),
    }
}

/// Harness order for processing: canonical, deduplicated.
fn enabled_set(harnesses: &[Harness]) -> BTreeSet<Harness> {
    harnesses.iter().copied().collect()
}

fn compute(servers: &[ServerSpec], opts: &RegisterOptions) -> Computed {
    let mut c = Computed::default();
    let enabled = enabled_set(opts.harnesses);
    for h in Harness::ALL.into_iter().filter(|h| enabled.contains(h)) {
        for s in servers {
            let policy = ToolPolicy::resolve(s, opts.permissions);
            let mut row = EffectiveServer {
                harness: h,
                name: s.name.clone(),
                origin: s.origin,
                transport: match s.transport {
                    Transport::Stdio { .. } => "stdio",
                    Transport::Remote { .. } => "remote",
                },
                target_file: None,
                file_scope: None,
                trust_scope: trust_scope(h, s.origin, opts.workspace),
                allowed_tools: policy.allow.clone(),
                denied_tools: policy.deny.clone(),
                permissions_target: None,
                notes: Vec::new(),
                unenforced_deny: Vec::new(),
                skipped: None,
            };
            let outcome = c.render(h, s, &policy, &mut row, opts.workspace);
            match outcome {
                Ok((file, notes)) => {
                    row.unenforced_deny = unenforced_deny(h, &policy);
                    row.target_file = Some(file.to_owned());
                    row.file_scope = TARGETS.iter().find(|t| t.1 == file).map(|t| t.2);
                    row.notes = notes;
                    if row.permissions_target.is_none()
                        && !policy.is_empty()
                        && matches!(h, Harness::Opencode | Harness::Cursor | Harness::Vscode)
                    {
                        row.notes.push(format!(
                            "{h} has no per-tool allow-list in its MCP file; allowed/denied tools are not projected"
                        ));
                    }
                }
                Err(reason) => {
                    // Not registered: no file holds it, so nobody approves or trusts it.
                    "none: not registered in this harness".clone_into(&mut row.trust_scope);
                    let no_personal_place = s.origin == Origin::Personal
                        && matches!(
                            h,
                            Harness::Claude | Harness::Cursor | Harness::Opencode | Harness::Vscode
                        );
                    if !no_personal_place {
                        c.skips
                            .push(format!("`{}` is not registered for {h}: {reason}", s.name));
                    }
                    row.skipped = Some(reason);
                }
            }
            c.report.push(row);
        }
    }
    c
}

/// The deny patterns of `policy` that harness `h` cannot enforce: Claude rules take exact
/// tools or `*`; Codex and Gemini tool lists take exact names; `OpenCode`, Cursor and VS Code
/// have no per-tool list at all.
fn unenforced_deny(h: Harness, policy: &ToolPolicy) -> Vec<String> {
    use crate::tools::ToolPattern;
    policy
        .deny
        .iter()
        .filter(|p| {
            matches!(
                (h, ToolPattern::parse(p)),
                (Harness::Claude, ToolPattern::Glob(_))
                    | (
                        Harness::Codex | Harness::Gemini,
                        ToolPattern::Glob(_) | ToolPattern::All
                    )
                    | (Harness::Opencode | Harness::Cursor | Harness::Vscode, _)
            )
        })
        .cloned()
        .collect()
}

/// Refuses a registration in which a deny pattern cannot be enforced by a harness the
/// server is registered in.
pub fn check_denies_enforceable(servers: &[EffectiveServer]) -> Result<(), McpError> {
    match servers.iter().find(|s| !s.unenforced_deny.is_empty()) {
        None => Ok(()),
        Some(s) => Err(McpError::UnenforceableDeny {
            server: s.name.clone(),
            harness: s.harness.as_str().to_owned(),
            patterns: ticked(&s.unenforced_deny),
        }),
    }
}

/// The servers each enabled harness would load, with origin, target file, trust scope
/// and allowed tools: the data behind `aibox mcp list`. Pure; reads no file.
pub fn effective_servers(servers: &[ServerSpec], opts: &RegisterOptions) -> Vec<EffectiveServer> {
    compute(servers, opts).report
}

/// [`effective_servers`] with processkit's pre-authorisation merged as
/// [`register_wired`] merges it (its report shows the same): a processkit server's Claude
/// entry lists the tools the release's rules let Claude call without asking.
pub fn effective_servers_wired(
    servers: &[ServerSpec],
    opts: &RegisterOptions,
    wiring: &ProcesskitWiring,
) -> Vec<EffectiveServer> {
    let mut c = compute(servers, opts);
    let _ = preauth_rules(servers, opts, wiring, &mut c);
    c.report
}

/// Whether the merged `contents` of the harness file at `path` hold nothing anyone
/// wrote: only empty objects and lists (at any depth), `OpenCode`'s `$schema` or a
/// Cursor hooks file's `version`; for Codex's TOML, only blank and comment lines. Once
/// a harness is disabled and aibox pruned its entries, such a file is removed rather
/// than left committed (QA: `{"mcpServers": {}}`, `{"mcp": {}}` and an empty
/// `.codex/config.toml` stayed).
pub fn holds_nothing(path: &str, contents: &str) -> bool {
    fn empty(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.values().all(empty),
            Value::Array(a) => a.is_empty(),
            _ => false,
        }
    }
    if path == CODEX_CONFIG {
        return contents.lines().all(|l| {
            let l = l.trim();
            l.is_empty() || l.starts_with('#')
        });
    }
    let Ok(Value::Object(map)) = jsonc_parser::parse_to_serde_value::<Value>(
        contents,
        &aibox_config::jsonc::parse_options(),
    ) else {
        return false;
    };
    map.iter().all(|(k, v)| {
        (k == "$schema" && path == OPENCODE_CONFIG)
            || (k == "version" && path == CURSOR_HOOKS)
            || empty(v)
    })
}

fn is_processkit_name(k: &str) -> bool {
    k.starts_with("processkit-")
}
fn is_processkit_rule(k: &str) -> bool {
    k.starts_with("mcp__processkit-")
}

/// Merges `servers` into every enabled harness's files (and prunes what the ledger
/// says aibox wrote before). `read` returns a root-relative file's current text.
///
/// ```
/// use aibox_mcp_registration::{RegisterOptions, collect_servers, register};
/// let config = aibox_config::parse_aibox_toml(
///     "[container]\nname = \"demo\"\n[ai]\nharnesses = [\"claude\"]\n\
///      [[ai.mcp.servers]]\nname = \"docs\"\ncommand = \"npx\"\nargs = [\"docs-mcp@1.0.0\"]\n",
///     "aibox.toml",
/// )?;
/// let servers = collect_servers(&config, &aibox_config::LocalToml::default(), &[])?;
/// let opts = RegisterOptions {
///     harnesses: &config.ai.harnesses,
///     permissions: &config.ai.mcp.permissions,
///     workspace: aibox_config::container::WORKSPACE_DIR,
/// };
/// // No harness file exists yet: every read finds nothing.
/// let registration = register(&servers, &opts, None, &mut |_| Ok(None))?;
/// let mcp = registration.files.iter().find(|f| f.path == ".mcp.json").unwrap();
/// assert!(mcp.contents.contains("docs-mcp@1.0.0"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn register(
    servers: &[ServerSpec],
    opts: &RegisterOptions,
    ledger: Option<&Ledger>,
    read: &mut dyn FnMut(&str) -> Result<Option<String>, McpError>,
) -> Result<Registration, McpError> {
    register_wired(servers, opts, &ProcesskitWiring::default(), ledger, read)
}

/// [`register`] plus processkit's hooks and pre-authorisation from the installed release
/// (`wiring`; the default, empty one prunes every hook and rule aibox wrote before).
#[allow(clippy::too_many_lines)] // one pass over the target files, each merged in turn
pub fn register_wired(
    servers: &[ServerSpec],
    opts: &RegisterOptions,
    wiring: &ProcesskitWiring,
    ledger: Option<&Ledger>,
    read: &mut dyn FnMut(&str) -> Result<Option<String>, McpError>,
) -> Result<Registration, McpError> {
    let mut c = compute(servers, opts);
    let mut notices = std::mem::take(&mut c.skips);
    notices.extend(preauth_rules(servers, opts, wiring, &mut c));
    let enabled = enabled_set(opts.harnesses);
    let mut out = Ledger::new();
    let mut files = Vec::new();
    // Server entries already in the files, to tell whether a missing ledger matters.
    let mut found: BTreeSet<String> = BTreeSet::new();
    // Whether the project's Codex file keeps a server after the merge, aibox's or one
    // added by hand: Codex reads that file only for a trusted folder (TARGETS has the
    // project file before the container-scoped one that holds the trust).
    let mut codex_project_servers = false;
    let mut codex_trust = false;
    let mut clashes = Vec::new();

    for (h, path, scope) in TARGETS {
        let on = enabled.contains(&h);
        let text = read(path)?;
        let owned_before = ledger.is_some_and(|l| l.files.contains_key(path));
        if !on && text.is_none() {
            continue;
        }
        if !on && ledger.is_some() && !owned_before {
            continue;
        }
        // A hand-entry clash in one file is collected, not returned at once: the error
        // names every file that has the entry, so fixing one does not just reveal the next.
        let mut merge = || -> Result<Option<String>, McpError> {
            Ok(match path {
                CODEX_CONFIG => {
                    let mut doc = TomlDoc::parse(path, text.as_deref())?;
                    found.extend(doc.keys_at("mcp_servers"));
                    let entries = if on { c.codex.clone() } else { Vec::new() };
                    let prev = previously_owned(
                        ledger,
                        path,
                        "mcp_servers",
                        doc.keys_at("mcp_servers").into_iter(),
                        is_processkit_name,
                    );
                    refuse_hand_entry_clash(
                        path,
                        ledger,
                        &c,
                        &prev,
                        entries
                            .iter()
                            .map(|(name, table)| (name, doc.differs("mcp_servers", name, table))),
                    )?;
                    let sorted = crate::edits::sort(
                        path,
                        "mcp_servers",
                        entries,
                        ledger,
                        |name| {
                            doc.table_at("mcp_servers", name)
                                .map(crate::edits::toml_digest)
                        },
                        crate::edits::toml_digest,
                    );
                    notices.extend(
                        sorted
                            .kept
                            .iter()
                            .map(|n| crate::edits::kept_notice(path, n)),
                    );
                    // A kept entry is neither rewritten nor removed: out of the merge, still owned.
                    let merged_prev: BTreeSet<String> =
                        prev.difference(&sorted.kept).cloned().collect();
                    let mut owned = doc.merge_tables("mcp_servers", sorted.write, &merged_prev)?;
                    owned.extend(sorted.kept);
                    out.set(path, "mcp_servers", owned);
                    out.set_entry_digests(path, "mcp_servers", sorted.digests);
                    codex_project_servers = !doc.keys_at("mcp_servers").is_empty();
                    doc.render()
                }
                CODEX_HOME_CONFIG => {
                    let mut doc = TomlDoc::parse(path, text.as_deref())?;
                    found.extend(doc.keys_at("mcp_servers"));
                    codex_trust = on && codex_project_servers;
                    merge_codex_home(
                        &mut doc,
                        on,
                        codex_trust,
                        &c,
                        ledger,
                        &mut out,
                        opts.workspace,
                    )?;
                    doc.render()
                }
                _ => {
                    let mut doc = JsonDoc::parse(path, text.as_deref())?;
                    if let Some(slot) = server_slot(path) {
                        found.extend(doc.keys_at(&[slot]));
                    }
                    merge_json(&mut doc, path, on, &c, ledger, &mut out, &mut notices)?;
                    if let Some(file) = HookFile::of(path) {
                        crate::hooks::merge_hooks(
                            &mut doc, path, file, wiring, on, ledger, &mut out,
                        )?;
                    }
                    doc.render()?
                }
            })
        };
        let new_text = match merge() {
            Ok(text) => text,
            Err(e @ McpError::HandEntryClash { .. }) => {
                clashes.push(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        if let Some(contents) = new_text {
            let changed = text.as_deref() != Some(contents.as_str());
            if on || changed {
                files.push(TargetFile {
                    path: path.to_owned(),
                    contents,
                    scope,
                    changed,
                });
            }
        }
    }

    if let Some(clash) = all_clashes(clashes) {
        return Err(clash);
    }

    // Said once, when the trust is written, not on every run.
    let trust_written = codex_trust
        && files
            .iter()
            .any(|f| f.path == CODEX_HOME_CONFIG && f.changed);
    let unexplained: Vec<String> = if ledger.is_none() {
        found
            .into_iter()
            .filter(|n| !is_processkit_name(n) && !servers.iter().any(|s| &s.name == n))
            .collect()
    } else {
        Vec::new()
    };
    notices.extend(user_notices(servers, opts, &c, trust_written, &unexplained));
    // Entries judged not aibox's are recorded by writing the ledger, empty if aibox owns
    // nothing: without it the next run would judge them, and say so, again.
    let write_ledger = ledger.is_some() || !out.files.is_empty() || !unexplained.is_empty();
    Ok(Registration {
        files,
        ledger: out,
        write_ledger,
        servers: c.report,
        notices,
    })
}

/// Adds the release's pre-authorisation to Claude's committed allow rules: a rule for a
/// processkit server that is registered and whose tools `[ai.mcp.permissions]` says
/// nothing about (the team's policy wins). Returns notices for what is left out.
fn preauth_rules(
    servers: &[ServerSpec],
    opts: &RegisterOptions,
    wiring: &ProcesskitWiring,
    c: &mut Computed,
) -> Vec<String> {
    let Some(preauth) = &wiring.preauth else {
        return Vec::new();
    };
    let mut notices = Vec::new();
    let mut team_policy = BTreeSet::new();
    let mut merged = Vec::new();
    for rule in &preauth.allow {
        let Some(name) = crate::hooks::rule_server(rule) else {
            notices.push(format!(
                "processkit pre-authorisation `{rule}` is not merged: aibox merges only MCP tool rules (`mcp__<server>__<tool>`) of the release's own servers"
            ));
            continue;
        };
        // A server the release ships but this project does not register (deselected,
        // gateway mode): no rule may outlive its server.
        let Some(server) = servers
            .iter()
            .find(|s| s.name == name && s.origin == Origin::Processkit)
        else {
            continue;
        };
        if !ToolPolicy::resolve(server, opts.permissions).is_empty() {
            team_policy.insert(name.to_owned());
            continue;
        }
        if !c.claude_allow[0].contains(rule) {
            c.claude_allow[0].push(rule.clone());
            merged.push(rule.as_str());
        }
    }
    show_preauth(&mut c.report, &merged);
    if !team_policy.is_empty() && opts.harnesses.contains(&Harness::Claude) {
        notices.push(format!(
            "processkit pre-authorisation not merged for {}: [ai.mcp.permissions] decides their tools",
            ticked(&team_policy)
        ));
    }
    notices
}

/// Shows the pre-authorisation rules `merged` in the report: a registered processkit
/// server's Claude entry lists the tools they allow (`*` for `mcp__<server>__*`), with a
/// note naming the rules and the file they are in.
fn show_preauth(report: &mut [EffectiveServer], merged: &[&str]) {
    for s in report {
        if s.harness != Harness::Claude || s.origin != Origin::Processkit || s.skipped.is_some() {
            continue;
        }
        let prefix = format!("mcp__{}__", s.name);
        let tools: Vec<&str> = merged
            .iter()
            .filter_map(|r| r.strip_prefix(&prefix))
            .collect();
        if tools.is_empty() {
            continue;
        }
        for tool in &tools {
            if !s.allowed_tools.iter().any(|t| t == tool) {
                s.allowed_tools.push((*tool).to_owned());
            }
        }
        s.notes.push(format!(
            "allowed by the processkit release's pre-authorisation ({}), merged into {CLAUDE_SETTINGS}",
            ticked(tools.iter().map(|t| format!("{prefix}{t}")))
        ));
    }
}

/// `items` as a list of code spans: `` `a`, `b` ``.
fn ticked<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The container-scoped Codex user config: personal servers and the `/workspace` trust.
fn merge_codex_home(
    doc: &mut TomlDoc,
    on: bool,
    trust: bool,
    c: &Computed,
    ledger: Option<&Ledger>,
    out: &mut Ledger,
    workspace: &str,
) -> Result<(), McpError> {
    let path = CODEX_HOME_CONFIG;
    let entries = if on {
        c.codex_personal.clone()
    } else {
        Vec::new()
    };
    let prev_servers = previously_owned(ledger, path, "mcp_servers", std::iter::empty(), |_| false);
    refuse_hand_entry_clash(
        path,
        ledger,
        c,
        &prev_servers,
        entries
            .iter()
            .map(|(name, table)| (name, doc.differs("mcp_servers", name, table))),
    )?;
    out.set(
        path,
        "mcp_servers",
        doc.merge_tables("mcp_servers", entries, &prev_servers)?,
    );
    let prev = previously_owned(ledger, path, "projects", std::iter::empty(), |_| false);
    // `trust`: only while Codex has project servers to load (the caller's judgement).
    for old in prev.iter().filter(|p| !trust || p.as_str() != workspace) {
        doc.set_nested("projects", old, "trust_level", None)?;
    }
    if trust {
        doc.set_nested("projects", workspace, "trust_level", Some("trusted"))?;
        out.set(path, "projects", BTreeSet::from([workspace.to_owned()]));
    }
    Ok(())
}

/// Messages for the user: missing ledger, approval commands, seeded trust, unpinned
/// team packages.
fn user_notices(
    servers: &[ServerSpec],
    opts: &RegisterOptions,
    c: &Computed,
    trust_written: bool,
    unexplained: &[String],
) -> Vec<String> {
    let enabled = enabled_set(opts.harnesses);
    let mut notices = Vec::new();
    // Without a ledger (a fresh clone, or files from before the ledger) entries of the
    // current configuration are simply rewritten; only others may be stale.
    if !unexplained.is_empty() {
        notices.push(format!(
            "no MCP ledger at {LEDGER_PATH}: kept {} as not aibox's; remove any that are stale by hand once",
            ticked(unexplained)
        ));
    }
    if enabled.contains(&Harness::Opencode) && !c.opencode.is_empty() {
        notices.push(format!(
            "OpenCode starts the {} server(s) of the committed {OPENCODE_CONFIG} without asking (it has no approval step): review changes to that file like code",
            c.opencode.len()
        ));
    }
    if trust_written {
        notices.push(format!(
            "Codex project trust for {} is seeded in the container-scoped {CODEX_HOME_CONFIG}",
            opts.workspace
        ));
    }
    // A default deny no enabled harness can enforce would look applied: said at apply,
    // as an unenforceable deny pattern is refused (here nothing is silently allowed: the
    // harness asks, or in the files without a per-tool list, offers every tool).
    if opts.permissions.default_mode == aibox_config::PermissionMode::Deny {
        let unenforced: BTreeSet<Harness> = c
            .report
            .iter()
            .filter(|r| r.skipped.is_none())
            .filter(|r| {
                matches!(
                    r.harness,
                    Harness::Opencode | Harness::Cursor | Harness::Vscode
                ) || r.notes.iter().any(|n| n.starts_with("default_mode `deny`"))
            })
            .map(|r| r.harness)
            .collect();
        if !unenforced.is_empty() {
            notices.push(format!(
                "[ai.mcp.permissions] default_mode = \"deny\" is not enforced for {}: a tool not \
                 allowed by name is asked for (OpenCode, Cursor and VS Code have no per-tool \
                 list: every tool is offered); name the allowed tools in `allow_patterns`, \
                 and see `aibox mcp list` per server",
                unenforced
                    .iter()
                    .map(|h| h.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    for s in servers.iter().filter(|s| s.origin == Origin::Team) {
        if let Some(package) = s.unpinned_package() {
            notices.push(format!(
                "team server `{}` runs `{package}` without an exact version; pin it (for example `{}@1.2.3`) so every teammate runs the same code",
                s.name,
                package.rsplit_once('@').filter(|(n, _)| !n.is_empty()).map_or(package.as_str(), |(n, _)| n)
            ));
        }
    }
    notices
}

/// The key holding server entries in a JSON target, if it has one.
fn server_slot(path: &str) -> Option<&'static str> {
    match path {
        CLAUDE_MCP_JSON | GEMINI_SETTINGS | GEMINI_HOME_SETTINGS | CURSOR_MCP => Some("mcpServers"),
        OPENCODE_CONFIG => Some("mcp"),
        VSCODE_MCP => Some("servers"),
        _ => None,
    }
}

/// A list aibox merges into: key path, desired items, fallback ownership test.
type ListSlot<'a> = (&'a [&'a str], &'a Vec<String>, fn(&str) -> bool);

fn merge_json(
    doc: &mut JsonDoc,
    path: &str,
    on: bool,
    c: &Computed,
    ledger: Option<&Ledger>,
    out: &mut Ledger,
    notices: &mut Vec<String>,
) -> Result<(), McpError> {
    let pick = |v: &Vec<(String, Value)>| if on { v.clone() } else { Vec::new() };
    let (slot, entries): (&[&str], Vec<(String, Value)>) = match path {
        CLAUDE_MCP_JSON => (&["mcpServers"], pick(&c.claude)),
        GEMINI_SETTINGS => (&["mcpServers"], pick(&c.gemini)),
        GEMINI_HOME_SETTINGS => (&["mcpServers"], pick(&c.gemini_personal)),
        OPENCODE_CONFIG => (&["mcp"], pick(&c.opencode)),
        CURSOR_MCP => (&["mcpServers"], pick(&c.cursor)),
        VSCODE_MCP => (&["servers"], pick(&c.vscode)),
        CLAUDE_SETTINGS | CLAUDE_SETTINGS_LOCAL => {
            let idx = usize::from(path == CLAUDE_SETTINGS_LOCAL);
            let lists: [ListSlot; 3] = [
                (
                    &["enabledMcpjsonServers"],
                    &c.claude_names[idx],
                    is_processkit_name,
                ),
                (
                    &["permissions", "allow"],
                    &c.claude_allow[idx],
                    is_processkit_rule,
                ),
                (
                    &["permissions", "deny"],
                    &c.claude_deny[idx],
                    is_processkit_rule,
                ),
            ];
            for (keys, items, fallback) in lists {
                let slot = keys.join(".");
                let prev =
                    previously_owned(ledger, path, &slot, doc.keys_at(keys).into_iter(), fallback);
                let desired: &[String] = if on { items } else { &[] };
                out.set(path, &slot, doc.merge_list(keys, desired, &prev)?);
            }
            return Ok(());
        }
        _ => return Ok(()),
    };
    let slot_name = slot.join(".");
    let prev = previously_owned(
        ledger,
        path,
        &slot_name,
        doc.keys_at(slot).into_iter(),
        is_processkit_name,
    );
    refuse_hand_entry_clash(
        path,
        ledger,
        c,
        &prev,
        entries
            .iter()
            .map(|(name, value)| (name, doc.entry(slot, name).is_some_and(|v| v != value))),
    )?;
    let sorted = crate::edits::sort(
        path,
        &slot_name,
        entries,
        ledger,
        |name| doc.entry(slot, name).map(crate::edits::json_digest),
        crate::edits::json_digest,
    );
    notices.extend(
        sorted
            .kept
            .iter()
            .map(|n| crate::edits::kept_notice(path, n)),
    );
    // A kept entry is neither rewritten nor removed: out of the merge, still owned.
    let merged_prev: BTreeSet<String> = prev.difference(&sorted.kept).cloned().collect();
    let mut owned = doc.merge_entries(slot, sorted.write, &merged_prev)?;
    owned.extend(sorted.kept);
    out.set(path, &slot_name, owned);
    out.set_entry_digests(path, &slot_name, sorted.digests);
    Ok(())
}

/// A server entry in an enabled harness's file that aibox did not write: the user's own,
/// which the harness loads and aibox leaves alone (`aibox mcp list` shows them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandAdded {
    /// The harness that reads the file.
    pub harness: Harness,
    /// Server name.
    pub name: String,
    /// Root-relative path of the file.
    pub file: String,
}

/// The hand-added server entries of the enabled harnesses' files: with a ledger, the
/// entries it does not list; without one (a fresh clone), those that are neither a
/// configured server nor processkit's.
///
/// # Errors
/// A file that does not parse, or a `read` failure.
pub fn hand_added(
    servers: &[ServerSpec],
    harnesses: &[Harness],
    ledger: Option<&Ledger>,
    read: &mut dyn FnMut(&str) -> Result<Option<String>, McpError>,
) -> Result<Vec<HandAdded>, McpError> {
    let enabled = enabled_set(harnesses);
    let mut out = Vec::new();
    for (h, path, _) in TARGETS {
        if !enabled.contains(&h) {
            continue;
        }
        let (slot, names) = match path {
            CODEX_CONFIG | CODEX_HOME_CONFIG => {
                let Some(text) = read(path)? else { continue };
                (
                    "mcp_servers",
                    TomlDoc::parse(path, Some(&text))?.keys_at("mcp_servers"),
                )
            }
            _ => {
                let Some(slot) = server_slot(path) else {
                    continue;
                };
                let Some(text) = read(path)? else { continue };
                (slot, JsonDoc::parse(path, Some(&text))?.keys_at(&[slot]))
            }
        };
        for name in names {
            let aibox_s = match ledger {
                Some(l) => l.owned(path, slot).is_some_and(|o| o.contains(&name)),
                None => is_processkit_name(&name) || servers.iter().any(|s| s.name == name),
            };
            if !aibox_s {
                out.push(HandAdded {
                    harness: h,
                    name,
                    file: path.to_owned(),
                });
            }
        }
    }
    Ok(out)
}

/// The first server's hand-entry clash, naming every file where that server clashes.
fn all_clashes(clashes: Vec<McpError>) -> Option<McpError> {
    let mut first: Option<(Vec<String>, String, String)> = None;
    for clash in clashes {
        let McpError::HandEntryClash {
            path,
            server,
            origin,
        } = clash
        else {
            continue;
        };
        match &mut first {
            None => first = Some((vec![path], server, origin)),
            Some((paths, s, _)) if *s == server => paths.push(path),
            Some(_) => {}
        }
    }
    first.map(|(paths, server, origin)| McpError::HandEntryClash {
        path: paths.join("`, `"),
        server,
        origin,
    })
}

/// With a ledger, an entry it does not list was written by hand: taking it over would drop
/// it silently, so a configured server of the same name whose entry differs is refused
/// (JSON and TOML harness files alike). Without a ledger — a fresh clone — same-named
/// entries are the team's own, written by a teammate's aibox, and are taken over.
/// `differs` yields each configured name and whether the file holds a different entry.
fn refuse_hand_entry_clash<'a>(
    path: &str,
    ledger: Option<&Ledger>,
    c: &Computed,
    prev: &BTreeSet<String>,
    differs: impl Iterator<Item = (&'a String, bool)>,
) -> Result<(), McpError> {
    if ledger.is_none() {
        return Ok(());
    }
    for (name, different) in differs {
        if different && !prev.contains(name) {
            let origin = c
                .report
                .iter()
                .find(|r| &r.name == name)
                .map_or("the configuration", |r| origin_source(r.origin));
            return Err(McpError::HandEntryClash {
                path: path.to_owned(),
                server: name.clone(),
                origin: origin.to_owned(),
            });
        }
    }
    Ok(())
}

/// Where a server of `origin` is defined, for messages.
fn origin_source(origin: crate::spec::Origin) -> &'static str {
    match origin {
        crate::spec::Origin::Processkit => "the processkit release",
        crate::spec::Origin::Team => "aibox.toml [[ai.mcp.servers]]",
        crate::spec::Origin::Personal => ".aibox-local.toml [[mcp.servers]]",
    }
}

#[cfg(test)]
mod tests {
    use super::holds_nothing;

    #[test]
    fn a_file_holds_nothing_when_only_empty_containers_remain() {
        for (path, text) in [
            (".gemini/settings.json", "{\"mcpServers\": {}}\n"),
            (
                "opencode.json",
                "{\"$schema\": \"https://opencode.ai/config.json\", \"mcp\": {}}",
            ),
            (
                ".claude/settings.json",
                "{\"permissions\": {\"allow\": []}}",
            ),
            (".codex/config.toml", ""),
            (".codex/config.toml", "# a comment\n\n"),
        ] {
            assert!(holds_nothing(path, text), "{path}: {text}");
        }
        for (path, text) in [
            (".gemini/settings.json", "{\"ui\": {\"theme\": \"x\"}}"),
            (".mcp.json", "{\"$schema\": \"x\"}"),
            (".mcp.json", "not json"),
            (".codex/config.toml", "model = \"x\"\n"),
        ] {
            assert!(!holds_nothing(path, text), "{path}: {text}");
        }
    }
}
