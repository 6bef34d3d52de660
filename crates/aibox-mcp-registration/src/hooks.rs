//! processkit's enforcement hooks and pre-authorisation, merged into each harness's own
//! hook and permission files (context mode `processkit` only; the engine hands in an empty
//! [`ProcesskitWiring`] otherwise, which prunes everything aibox wrote).
//!
//! processkit ships its hooks as scripts in `skill-gate/scripts/` with the wiring written
//! as prose in that folder's `README.md`: no release (v0.28.x, v1.0.0-alpha.1) carries a
//! machine-readable hook manifest. So which script runs on which event is the table
//! below, taken from that README; a hook is wired only while the installed release ships
//! its script, so a release that drops a script prunes its hook.
//!
//! | Harness | File | Contract (`emit_compliance_contract.py`) | Guard (`check_route_task_called.py`) |
//! |---|---|---|---|
//! | Claude Code | `.claude/settings.json` | `SessionStart`, `UserPromptSubmit` | `PreToolUse` |
//! | Codex | `.codex/hooks.json` | `SessionStart`, `UserPromptSubmit` | not wired: Codex edits files through `apply_patch`, which the guard cannot read |
//! | Cursor | `.cursor/hooks.json` | `sessionStart` | `preToolUse` (`Write`) |
//!
//! Commands are anchored at the project root, so they work from any folder the harness
//! starts them in: Claude sets `CLAUDE_PROJECT_DIR`; Codex sets nothing and runs hooks in
//! the session's folder, where git names the top level (Codex loads a project's
//! `.codex/` only from the folders up to the git root); Cursor sets `CURSOR_PROJECT_DIR`
//! and runs project hooks from the project root.
//!
//! Ownership: the ledger records each hook by its command under the slot
//! `hooks.<Event>`; the next apply removes the entries it owns that are no longer wanted
//! and never touches another entry. Without a ledger, entries whose command runs a
//! script of `skill-gate/scripts/` count as owned. No marker key is written into a hook
//! entry: Claude's schema and Codex's parser refuse unknown keys there.

use std::collections::BTreeSet;

use aibox_config::layout::{CODEX_HOOKS, CURSOR_HOOKS};
use serde_json::{Value, json};

use crate::McpError;
use crate::jsonfile::JsonDoc;
use crate::ledger::{Ledger, previously_owned};

/// Where processkit's hook scripts live in an installed project.
pub const SKILL_GATE_SCRIPTS: &str = "context/skills/processkit/skill-gate/scripts/";
/// Emits the compliance contract into the session (session start, every prompt).
pub const CONTRACT_SCRIPT: &str =
    "context/skills/processkit/skill-gate/scripts/emit_compliance_contract.py";
/// Blocks writes to `context/` and write-side processkit tools until the contract is
/// acknowledged (exit 2 blocks).
pub const GUARD_SCRIPT: &str =
    "context/skills/processkit/skill-gate/scripts/check_route_task_called.py";
/// The release's pre-authorisation spec.
pub const PREAUTH_PATH: &str = "context/skills/processkit/skill-gate/assets/preauth.json";

/// The Claude `PreToolUse` matcher of the guard, as processkit's README wires it.
const GUARD_MATCHER: &str = "Write|Edit|MultiEdit|create_workitem|transition_workitem|record_decision|link_entities|open_discussion|create_artifact|log_event|create_note";

/// What the installed release contributes besides its servers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcesskitWiring {
    /// Hook scripts the installed release ships (project paths).
    pub scripts: BTreeSet<String>,
    /// Its pre-authorisation spec, when it ships one.
    pub preauth: Option<Preauth>,
}

/// processkit's `preauth.json`: Claude permission patterns and servers to approve.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preauth {
    /// `permissions.allow`.
    pub allow: Vec<String>,
    /// `enabledMcpjsonServers`. Checked for shape only: registration already approves
    /// every processkit server it registers, and one it does not register must not be
    /// approved.
    pub servers: Vec<String>,
}

impl Preauth {
    /// Parses the spec; anything but `version: 1` with string lists is an error.
    ///
    /// # Errors
    /// [`McpError::Preauth`] naming what is wrong.
    pub fn parse(text: &str) -> Result<Self, McpError> {
        let err = |message: String| McpError::Preauth {
            path: PREAUTH_PATH.to_owned(),
            message,
        };
        let value: Value = serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
        match value.get("version").and_then(Value::as_u64) {
            Some(1) => {}
            other => {
                return Err(err(format!(
                    "`version` is {}, aibox reads version 1",
                    other.map_or_else(|| "missing".to_owned(), |v| v.to_string())
                )));
            }
        }
        let list = |pointer: &str| -> Result<Vec<String>, McpError> {
            match value.pointer(pointer) {
                None => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| err(format!("`{pointer}` holds a non-string item: {v}")))
                    })
                    .collect(),
                Some(other) => Err(err(format!(
                    "`{pointer}` is {}, expected a list of strings",
                    crate::jsonfile::kind(other)
                ))),
            }
        };
        Ok(Self {
            allow: list("/permissions/allow")?,
            servers: list("/enabledMcpjsonServers")?,
        })
    }
}

/// The server a Claude MCP rule names (`mcp__<server>__<tool>`), if it is one.
pub(crate) fn rule_server(rule: &str) -> Option<&str> {
    let rest = rule.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then_some(server)
}

/// A file that holds hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookFile {
    /// `.claude/settings.json`.
    Claude,
    /// `.codex/hooks.json`.
    Codex,
    /// `.cursor/hooks.json`.
    Cursor,
}

/// File, event, script, matcher: the wiring of processkit's README.
const WIRING: [(HookFile, &str, &str, Option<&str>); 7] = [
    (HookFile::Claude, "SessionStart", CONTRACT_SCRIPT, Some("")),
    (
        HookFile::Claude,
        "UserPromptSubmit",
        CONTRACT_SCRIPT,
        Some(""),
    ),
    (
        HookFile::Claude,
        "PreToolUse",
        GUARD_SCRIPT,
        Some(GUARD_MATCHER),
    ),
    (HookFile::Codex, "SessionStart", CONTRACT_SCRIPT, None),
    (HookFile::Codex, "UserPromptSubmit", CONTRACT_SCRIPT, None),
    (HookFile::Cursor, "sessionStart", CONTRACT_SCRIPT, None),
    (HookFile::Cursor, "preToolUse", GUARD_SCRIPT, Some("Write")),
];

impl HookFile {
    /// The hook file at `path`, if it is one.
    pub(crate) fn of(path: &str) -> Option<Self> {
        match path {
            aibox_config::layout::CLAUDE_SETTINGS => Some(Self::Claude),
            CODEX_HOOKS => Some(Self::Codex),
            CURSOR_HOOKS => Some(Self::Cursor),
            _ => None,
        }
    }

    /// The command that runs `script` from wherever the harness starts it.
    pub(crate) fn command(self, script: &str) -> String {
        let root = match self {
            Self::Claude => "\"$CLAUDE_PROJECT_DIR\"",
            Self::Codex => "\"$(git rev-parse --show-toplevel 2>/dev/null || pwd)\"",
            Self::Cursor => "\"${CURSOR_PROJECT_DIR:-.}\"",
        };
        format!("python3 {root}/{script}")
    }

    /// One hook entry in this file's shape.
    fn entry(self, command: &str, matcher: Option<&str>) -> Value {
        match self {
            Self::Cursor => {
                let mut entry = json!({ "command": command });
                if let Some(m) = matcher {
                    entry["matcher"] = json!(m);
                }
                entry
            }
            Self::Claude | Self::Codex => {
                let mut entry = serde_json::Map::new();
                if let Some(m) = matcher {
                    entry.insert("matcher".into(), json!(m));
                }
                entry.insert(
                    "hooks".into(),
                    json!([{ "type": "command", "command": command }]),
                );
                Value::Object(entry)
            }
        }
    }

    /// The command an entry runs, when it runs exactly one.
    fn command_of(self, entry: &Value) -> Option<&str> {
        match self {
            Self::Cursor => entry.get("command")?.as_str(),
            Self::Claude | Self::Codex => match entry.get("hooks")?.as_array()?.as_slice() {
                [one] => one.get("command")?.as_str(),
                _ => None,
            },
        }
    }

    /// The entries `wiring` asks for, per event (events of the table in its order).
    pub(crate) fn desired(self, wiring: &ProcesskitWiring) -> Vec<(&'static str, Vec<Value>)> {
        WIRING
            .iter()
            .filter(|(file, ..)| *file == self)
            .map(|&(_, event, script, matcher)| {
                let entries = if wiring.scripts.contains(script) {
                    vec![self.entry(&self.command(script), matcher)]
                } else {
                    Vec::new()
                };
                (event, entries)
            })
            .collect()
    }
}

/// Whether `contents` of the hook file at `path` holds nothing but what a hooks file
/// needs to exist (`{}`, Cursor's `version`): once processkit's hooks are pruned from a
/// file that held nothing else, the file is removed rather than left empty.
pub fn is_empty_hook_file(path: &str, contents: &str) -> bool {
    if path != CODEX_HOOKS && path != CURSOR_HOOKS {
        return false;
    }
    let Ok(Value::Object(map)) = jsonc_parser::parse_to_serde_value::<Value>(
        contents,
        &aibox_config::jsonc::parse_options(),
    ) else {
        return false;
    };
    map.iter()
        .all(|(k, v)| (k == "version" && path == CURSOR_HOOKS) || (k == "hooks" && v == &json!({})))
}

/// Whether a hook command is one of processkit's (the fallback without a ledger).
fn is_processkit_hook(command: &str) -> bool {
    command.contains(SKILL_GATE_SCRIPTS)
}

/// Merges the hooks `file` should hold into `doc` (nothing when `on` is false), removes
/// those the ledger says aibox wrote and no longer wants, and records the owned ones.
pub(crate) fn merge_hooks(
    doc: &mut JsonDoc,
    path: &str,
    file: HookFile,
    wiring: &ProcesskitWiring,
    on: bool,
    ledger: Option<&Ledger>,
    out: &mut Ledger,
) -> Result<(), McpError> {
    let mut pruned_any = false;
    let mut wrote_any = false;
    for (event, entries) in file.desired(wiring) {
        let entries = if on { entries } else { Vec::new() };
        let keys = ["hooks", event];
        let slot = keys.join(".");
        let existing: Vec<String> = doc
            .items_at(&keys)
            .iter()
            .filter_map(|v| file.command_of(v).map(str::to_owned))
            .collect();
        let prev = previously_owned(
            ledger,
            path,
            &slot,
            existing.into_iter(),
            is_processkit_hook,
        );
        pruned_any |= !prev.is_empty();
        wrote_any |= !entries.is_empty();
        let owned = doc.merge_items(&keys, &entries, &prev, |v| file.command_of(v))?;
        out.set(path, &slot, owned);
    }
    if pruned_any {
        doc.drop_empty_object("hooks");
    }
    if wrote_any && file == HookFile::Cursor {
        // Cursor reads a hooks file only with its format version.
        doc.root.entry("version").or_insert(json!(1));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_real_shape_and_refuses_others() {
        let p = Preauth::parse(
            r#"{"version": 1, "description": "x", "permissions": {"allow": ["mcp__processkit-a__*"]},
               "enabledMcpjsonServers": ["processkit-a"], "codex": {"mcp": {"allowed_tools": []}}}"#,
        )
        .unwrap();
        assert_eq!(p.allow, ["mcp__processkit-a__*"]);
        assert_eq!(p.servers, ["processkit-a"]);
        for bad in [
            "{",
            r#"{"version": 2}"#,
            r#"{"permissions": {"allow": []}}"#,
            r#"{"version": 1, "permissions": {"allow": "mcp__x__*"}}"#,
            r#"{"version": 1, "enabledMcpjsonServers": [1]}"#,
        ] {
            assert!(
                matches!(Preauth::parse(bad), Err(McpError::Preauth { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn empty_hook_files() {
        assert!(is_empty_hook_file(CODEX_HOOKS, "{}\n"));
        assert!(is_empty_hook_file(CODEX_HOOKS, "{\"hooks\": {}}"));
        assert!(is_empty_hook_file(CURSOR_HOOKS, "{\n  \"version\": 1\n}\n"));
        assert!(!is_empty_hook_file(CODEX_HOOKS, "{\"version\": 1}"));
        assert!(!is_empty_hook_file(
            CURSOR_HOOKS,
            "{\"version\": 1, \"x\": 2}"
        ));
        assert!(!is_empty_hook_file(
            CODEX_HOOKS,
            "{\"hooks\": {\"Stop\": []}}"
        ));
        assert!(!is_empty_hook_file(".claude/settings.json", "{}"));
        assert!(!is_empty_hook_file(CODEX_HOOKS, "not json"));
    }

    #[test]
    fn rule_servers() {
        assert_eq!(rule_server("mcp__processkit-a__*"), Some("processkit-a"));
        assert_eq!(rule_server("mcp__docs__get_issue"), Some("docs"));
        for other in ["Bash(rm:*)", "mcp__", "mcp__x", "mcp____*", "mcp__x__"] {
            assert_eq!(rule_server(other), None, "{other}");
        }
    }
}
