//! Variable references in server values, and the literal-secret check.
//!
//! aibox's configuration writes references as `${VAR}` or `${VAR:-default}`. Each
//! harness has its own syntax (harness-mcp-formats §9), so a value is parsed into parts
//! once and rendered per harness; a harness without a faithful rendering gets `None`
//! and the server is skipped there with a reason instead of receiving a wrong value.

use aibox_config::validate::is_env_name;

/// One piece of a value: literal text or a variable reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Literal text.
    Lit(String),
    /// `${name}` or `${name:-default}`.
    Var {
        /// Variable name.
        name: String,
        /// Default used when the variable is unset.
        default: Option<String>,
    },
}

/// A parsed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template(pub Vec<Part>);

/// How a harness writes a reference to variable `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefSyntax {
    /// `${VAR}` and `${VAR:-default}` (Claude Code, Gemini CLI).
    Dollar,
    /// `${env:VAR}`, no defaults (Cursor, VS Code).
    DollarEnv,
    /// `{env:VAR}`, no defaults (`OpenCode`).
    BraceEnv,
}

impl Template {
    /// Parses `text`; `${` without a closing `}` or with an invalid name stays literal.
    pub fn parse(text: &str) -> Self {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            let parsed = after.find('}').and_then(|end| {
                let inner = &after[..end];
                let (name, default) = match inner.split_once(":-") {
                    Some((n, d)) => (n, Some(d.to_owned())),
                    None => (inner, None),
                };
                is_env_name(name).then(|| {
                    (
                        Part::Var {
                            name: name.to_owned(),
                            default,
                        },
                        end,
                    )
                })
            });
            if let Some((var, end)) = parsed {
                lit.push_str(&rest[..start]);
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(var);
                rest = &after[end + 1..];
            } else {
                lit.push_str(&rest[..start + 2]);
                rest = after;
            }
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        Self(parts)
    }

    /// The variable when the whole value is exactly one reference.
    pub fn single_var(&self) -> Option<(&str, Option<&str>)> {
        match self.0.as_slice() {
            [Part::Var { name, default }] => Some((name, default.as_deref())),
            _ => None,
        }
    }

    /// Whether the value contains at least one reference.
    pub fn has_var(&self) -> bool {
        self.0.iter().any(|p| matches!(p, Part::Var { .. }))
    }

    /// The literal text with references removed (what the secret scan looks at).
    pub fn literal_text(&self) -> String {
        self.0
            .iter()
            .filter_map(|p| match p {
                Part::Lit(l) => Some(l.as_str()),
                Part::Var { .. } => None,
            })
            .collect()
    }

    /// Renders the value in a harness's syntax; `None` when a default cannot be expressed.
    pub fn render(&self, syntax: RefSyntax) -> Option<String> {
        let mut out = String::new();
        for part in &self.0 {
            match (part, syntax) {
                (Part::Lit(l), _) => out.push_str(l),
                (
                    Part::Var {
                        name,
                        default: None,
                    },
                    RefSyntax::Dollar,
                ) => {
                    out.extend(["${", name, "}"]);
                }
                (
                    Part::Var {
                        name,
                        default: Some(d),
                    },
                    RefSyntax::Dollar,
                ) => {
                    out.extend(["${", name, ":-", d, "}"]);
                }
                (
                    Part::Var {
                        name,
                        default: None,
                    },
                    RefSyntax::DollarEnv,
                ) => {
                    out.extend(["${env:", name, "}"]);
                }
                (
                    Part::Var {
                        name,
                        default: None,
                    },
                    RefSyntax::BraceEnv,
                ) => {
                    out.extend(["{env:", name, "}"]);
                }
                (
                    Part::Var {
                        default: Some(_), ..
                    },
                    _,
                ) => return None,
            }
        }
        Some(out)
    }
}

/// What a secret is comes from `aibox_config::secret_rules`, shared with the policy gate
/// and the skill review; registration refuses a hit instead of writing it.
pub use aibox_config::secret_rules::{is_secret_key, looks_like_secret};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_renders_per_harness() {
        let t = Template::parse("Bearer ${TOKEN}");
        assert_eq!(t.render(RefSyntax::Dollar).unwrap(), "Bearer ${TOKEN}");
        assert_eq!(
            t.render(RefSyntax::DollarEnv).unwrap(),
            "Bearer ${env:TOKEN}"
        );
        assert_eq!(t.render(RefSyntax::BraceEnv).unwrap(), "Bearer {env:TOKEN}");
        assert_eq!(t.literal_text(), "Bearer ");
        let d = Template::parse("${A:-x}");
        assert_eq!(d.single_var(), Some(("A", Some("x"))));
        assert_eq!(d.render(RefSyntax::Dollar).unwrap(), "${A:-x}");
        assert_eq!(d.render(RefSyntax::BraceEnv), None);
    }

    #[test]
    fn malformed_references_stay_literal() {
        for text in ["${", "${1X}", "$TOKEN", "${A B}", "a${b"] {
            let t = Template::parse(text);
            assert!(!t.has_var(), "{text}");
            assert_eq!(t.literal_text(), text);
        }
    }

    #[test]
    fn secret_keys_and_values() {
        assert!(is_secret_key("GITHUB_TOKEN"));
        assert!(is_secret_key("x-api-key"));
        assert!(!is_secret_key("Authorization"));
        assert!(is_secret_key("AUTH"));
        assert!(!is_secret_key("TOKENIZER_MODE"));
        assert!(!is_secret_key("PROCESSKIT_MCP_MODE"));
        assert!(looks_like_secret("ghp_FAKEFAKEFAKEFAKEFAKEFAKE"));
        assert!(looks_like_secret("Bearer fakefakefake"));
        assert!(!looks_like_secret("Bearer "));
        assert!(looks_like_secret("https://me:pw@example.invalid/x"));
        assert!(!looks_like_secret("https://example.invalid/x"));
        assert!(looks_like_secret("--key=AKIAFAKEFAKEFAKEFAKE"));
        assert!(!looks_like_secret("gateway"));
    }
}
