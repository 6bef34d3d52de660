//! Tool permissions: a server's allowed tools plus `[ai.mcp.permissions]`, resolved
//! once into a provider-neutral policy that each writer projects into its harness's
//! own mechanism (or reports as not projectable).

use aibox_config::{PermissionMode, Permissions};
use serde::Serialize;

use crate::spec::ServerSpec;

/// A tool pattern: `*`, an exact name, or a name with `*` wildcards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolPattern {
    /// Every tool.
    All,
    /// One tool.
    Exact(String),
    /// `prefix*`, `*suffix`, `*mid*` and similar.
    Glob(String),
}

impl ToolPattern {
    /// Classifies a pattern string.
    pub fn parse(p: &str) -> Self {
        if p.chars().all(|c| c == '*') {
            Self::All
        } else if p.contains('*') {
            Self::Glob(p.to_owned())
        } else {
            Self::Exact(p.to_owned())
        }
    }

    /// The text as configured.
    pub fn as_str(&self) -> &str {
        match self {
            Self::All => "*",
            Self::Exact(s) | Self::Glob(s) => s,
        }
    }

    /// Whether the pattern matches tool `name`.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Exact(s) => s == name,
            Self::Glob(g) => glob_match(g, name),
        }
    }

    /// Whether every tool this pattern matches is also matched by `other`.
    fn covered_by(&self, other: &Self) -> bool {
        match (self, other) {
            (_, Self::All) => true,
            (Self::Exact(n), o) => o.matches(n),
            (Self::Glob(a), Self::Glob(b)) => a == b,
            _ => false,
        }
    }
}

/// `*` matches any run of characters.
fn glob_match(pattern: &str, name: &str) -> bool {
    let pieces: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(i) => rest = &rest[i + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The resolved permissions of one server. Deny wins: allowed entries that a deny
/// pattern fully covers are dropped here, before any harness sees them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolPolicy {
    /// Tools called without asking (`*` = all). Exclusive when non-empty.
    pub allow: Vec<String>,
    /// Tools never called.
    pub deny: Vec<String>,
    /// What happens to a tool matched by neither list.
    pub default_mode: PermissionMode,
}

impl ToolPolicy {
    /// Resolves the policy of `server`: its own `allowed_tools` when set, else the
    /// permission defaults; `default_mode = allow` with no allow list means `*`.
    pub fn resolve(server: &ServerSpec, permissions: &Permissions) -> Self {
        let deny: Vec<ToolPattern> = permissions
            .deny_patterns
            .iter()
            .map(|p| ToolPattern::parse(p))
            .collect();
        let source = if server.allowed_tools.is_empty() {
            &permissions.allow_patterns
        } else {
            &server.allowed_tools
        };
        let mut allow: Vec<String> = source
            .iter()
            .map(|p| ToolPattern::parse(p))
            .filter(|p| !deny.iter().any(|d| p.covered_by(d)))
            .map(|p| p.as_str().to_owned())
            .collect();
        if allow.is_empty()
            && source.is_empty()
            && permissions.default_mode == PermissionMode::Allow
        {
            allow.push("*".to_owned());
        }
        dedup(&mut allow);
        let mut deny: Vec<String> = deny.iter().map(|d| d.as_str().to_owned()).collect();
        dedup(&mut deny);
        Self {
            allow,
            deny,
            default_mode: permissions.default_mode,
        }
    }

    /// Allowed patterns, classified.
    pub fn allow_patterns(&self) -> Vec<ToolPattern> {
        self.allow.iter().map(|p| ToolPattern::parse(p)).collect()
    }

    /// Denied patterns, classified.
    pub fn deny_patterns(&self) -> Vec<ToolPattern> {
        self.deny.iter().map(|p| ToolPattern::parse(p)).collect()
    }

    /// Whether there is nothing to project.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && self.default_mode == PermissionMode::Ask
    }
}

fn dedup(v: &mut Vec<String>) {
    let mut seen = std::collections::BTreeSet::new();
    v.retain(|s| seen.insert(s.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Origin, Transport};

    fn server(allowed: &[&str]) -> ServerSpec {
        ServerSpec {
            name: "s".into(),
            origin: Origin::Team,
            transport: Transport::Remote {
                url: "https://x.invalid".into(),
                headers: std::collections::BTreeMap::default(),
            },
            allowed_tools: allowed.iter().map(|s| (*s).to_owned()).collect(),
            startup_timeout_sec: None,
        }
    }

    #[test]
    fn glob_matching() {
        assert!(glob_match("get_*", "get_issue"));
        assert!(glob_match("*_issue", "get_issue"));
        assert!(glob_match("*iss*", "get_issue"));
        assert!(!glob_match("get_*", "list_issues"));
        assert!(!glob_match("a*a", "a"));
    }

    #[test]
    fn deny_wins_over_allow() {
        let perms = Permissions {
            default_mode: PermissionMode::Ask,
            allow_patterns: vec![],
            deny_patterns: vec!["delete_*".into(), "drop".into()],
        };
        let p = ToolPolicy::resolve(&server(&["read", "delete_all", "drop", "*"]), &perms);
        assert_eq!(p.allow, ["read", "*"]);
        assert_eq!(p.deny, ["delete_*", "drop"]);
    }

    #[test]
    fn default_allow_means_every_tool_unless_a_list_is_set() {
        let perms = Permissions {
            default_mode: PermissionMode::Allow,
            ..Permissions::default()
        };
        assert_eq!(ToolPolicy::resolve(&server(&[]), &perms).allow, ["*"]);
        assert_eq!(ToolPolicy::resolve(&server(&["a"]), &perms).allow, ["a"]);
        let ask = Permissions::default();
        assert!(ToolPolicy::resolve(&server(&[]), &ask).is_empty());
    }
}
