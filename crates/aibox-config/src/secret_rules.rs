//! What a secret is, defined once for every part of aibox that looks for one.
//!
//! The policy gate's secret scan and redaction (`aibox-policy`), MCP registration's
//! literal-secret check (`aibox-mcp-registration`) and the skill review's credential
//! findings (`aibox-skill-review`) all call these functions. They differ in what they do
//! with a hit (refuse, mask, warn), never in what counts as one.

/// Words that make a key or variable name secret-like, as whole words.
const SECRET_WORDS: [&str; 9] = [
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "APIKEY",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
];

/// Adjacent word pairs that make a name secret-like.
const SECRET_PAIRS: [[&str; 2]; 4] = [
    ["API", "KEY"],
    ["ACCESS", "KEY"],
    ["PRIVATE", "KEY"],
    ["CLIENT", "SECRET"],
];

/// The words of a key name: split at every non-alphanumeric character and at each
/// lower-to-upper `camelCase` step, uppercased (`dbPassword` → `DB`, `PASSWORD`).
fn words(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if (!c.is_ascii_alphanumeric() || (c.is_ascii_uppercase() && prev_lower))
            && !word.is_empty()
        {
            out.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_uppercase());
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Whether a key or variable name suggests a secret (security model §3): one of the
/// secret words as a whole word, or a pair such as `API` `KEY`, with `_`, `-`, `.` and
/// `camelCase` steps as word breaks. `GITHUB_TOKEN`, `apiKey`, `x-api-key`, `dbPassword`
/// and `AUTH` are; `AUTHOR`, `Authorization` and `TOKENIZER_MODE` are not.
pub fn is_secret_key(key: &str) -> bool {
    let words = words(key);
    words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
        || words
            .windows(2)
            .any(|p| SECRET_PAIRS.iter().any(|q| p[0] == q[0] && p[1] == q[1]))
}

/// One credential found in a text (byte offsets; the value itself is never kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenHit {
    /// What it looks like, for example `GitHub token`.
    pub kind: &'static str,
    /// Start of the span.
    pub start: usize,
    /// End of the span.
    pub end: usize,
}

/// Whether literal text holds a credential ([`find_credential`]).
pub fn looks_like_secret(text: &str) -> bool {
    find_credential(text).is_some()
}

/// Spans of every credential in `s`, in order (for masking).
pub fn credential_spans(s: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while from < s.len() {
        let Some(hit) = find_credential(&s[from..]) else {
            break;
        };
        let (start, end) = (from + hit.start, from + hit.end.max(hit.start + 1));
        spans.push((start, end));
        from = end;
    }
    spans
}

struct Pattern {
    prefix: &'static str,
    kind: &'static str,
    min: usize,
    exact: bool,
    charset: fn(char) -> bool,
}

fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}
fn alnum_dash(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}
fn alnum_us(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}
fn upper_digit(c: char) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit()
}

const PATTERNS: [Pattern; 13] = [
    Pattern {
        prefix: "sk-ant-",
        kind: "Anthropic API key",
        min: 16,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "github_pat_",
        kind: "GitHub token",
        min: 20,
        exact: false,
        charset: alnum_us,
    },
    Pattern {
        prefix: "ghp_",
        kind: "GitHub token",
        min: 20,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "gho_",
        kind: "GitHub token",
        min: 20,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "ghu_",
        kind: "GitHub token",
        min: 20,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "ghs_",
        kind: "GitHub token",
        min: 20,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "ghr_",
        kind: "GitHub token",
        min: 20,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "glpat-",
        kind: "GitLab token",
        min: 20,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "xoxb-",
        kind: "Slack token",
        min: 10,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "xoxp-",
        kind: "Slack token",
        min: 10,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "sk-",
        kind: "OpenAI-style API key",
        min: 20,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "AKIA",
        kind: "AWS access key ID",
        min: 16,
        exact: true,
        charset: upper_digit,
    },
    Pattern {
        prefix: "AIza",
        kind: "Google API key",
        min: 35,
        exact: true,
        charset: alnum_dash,
    },
];

/// The earliest credential-looking span in `s`: a known token format, a PEM private
/// key, a literal `Bearer` token or a URL with a password. References never count.
pub fn find_credential(s: &str) -> Option<TokenHit> {
    let mut hits: Vec<TokenHit> = Vec::new();
    if let Some(start) = s.find("-----BEGIN")
        && s[start..].contains("PRIVATE KEY")
    {
        // The block ends after the END marker's closing dashes, or at the end of the text.
        let end = s[start..]
            .find("-----END")
            .and_then(|e| {
                let after = start + e + "-----END".len();
                s[after..].find("-----").map(|d| after + d + "-----".len())
            })
            .unwrap_or(s.len());
        hits.push(TokenHit {
            kind: "PEM private key",
            start,
            end,
        });
    }
    for p in &PATTERNS {
        let mut from = 0;
        while let Some(pos) = s[from..].find(p.prefix) {
            let start = from + pos;
            from = start + p.prefix.len();
            if s[..start]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric())
            {
                continue;
            }
            // Look only as far as the decision needs (linear over many candidates); the
            // full span is measured once, for the hit.
            let seen = s[from..]
                .chars()
                .take(p.min + 1)
                .take_while(|c| (p.charset)(*c))
                .count();
            let ok = if p.exact {
                seen == p.min
            } else {
                seen >= p.min
            };
            if ok {
                let body: usize = s[from..].chars().take_while(|c| (p.charset)(*c)).count();
                hits.push(TokenHit {
                    kind: p.kind,
                    start,
                    end: from + body,
                });
                break;
            }
        }
    }
    hits.extend(find_bearer(s));
    hits.extend(find_url_credentials(s));
    // Earliest first; on a tie the longer span (`sk-ant-` over `sk-`).
    hits.into_iter()
        .min_by_key(|h| (h.start, std::cmp::Reverse(h.end)))
}

fn find_bearer(s: &str) -> Option<TokenHit> {
    let lower = s.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find("bearer ") {
        let start = from + pos;
        from = start + "bearer ".len();
        let token: String = s[from..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !"\"',;".contains(*c))
            .collect();
        if token.len() >= 8 && !has_reference(&token) && !token.starts_with('<') {
            return Some(TokenHit {
                kind: "literal Bearer token",
                start,
                end: from + token.len(),
            });
        }
    }
    None
}

fn find_url_credentials(s: &str) -> Option<TokenHit> {
    let mut from = 0;
    while let Some(pos) = s[from..].find("://") {
        let start = from + pos + 3;
        from = start;
        let authority: String = s[start..]
            .chars()
            .take_while(|c| !"/?# \"'<>".contains(*c))
            .collect();
        let Some((userinfo, _)) = authority.rsplit_once('@') else {
            continue;
        };
        if let Some((_, password)) = userinfo.split_once(':')
            && !password.is_empty()
            && !has_reference(password)
        {
            return Some(TokenHit {
                kind: "URL with an embedded password",
                start,
                end: start + userinfo.len(),
            });
        }
    }
    None
}

/// True for a variable name such as `GH_TOKEN`.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Removes every variable reference (`${VAR}`, `${VAR:-default}`, `$VAR`, `{env:VAR}`,
/// `${env:VAR}`, `${input:id}`, `${localEnv:VAR}`, `${containerEnv:VAR}`, …) from `s`.
///
/// Linear in the length of `s`: every byte is looked at a bounded number of times (once
/// no `}` follows, no later `${` can close either).
pub fn strip_references(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut no_close = false;
    while i < bytes.len() {
        let c = bytes[i];
        let braced = c == b'$' && bytes.get(i + 1) == Some(&b'{')
            || c == b'{' && s[i..].starts_with("{env:");
        if braced && !no_close {
            match s[i..].find('}') {
                Some(end) => {
                    i += end + 1;
                    continue;
                }
                None => no_close = true,
            }
        } else if c == b'$' {
            let len = bytes[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            if len > 0 && is_identifier(&s[i + 1..i + 1 + len]) {
                i += 1 + len;
                continue;
            }
        }
        let Some(ch) = s[i..].chars().next() else {
            break;
        };
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// True when `s` contains at least one variable reference.
pub fn has_reference(s: &str) -> bool {
    strip_references(s) != s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_names() {
        for k in [
            "GITHUB_TOKEN",
            "apiKey",
            "x-api-key",
            "client_secret",
            "DB_PASSWORD",
            "dbPassword",
            "auth",
            "X_AUTH",
            "AWS_SECRET_ACCESS_KEY",
            "credentials",
        ] {
            assert!(is_secret_key(k), "{k}");
        }
        for k in [
            "AUTHOR",
            "LANG",
            "authorization_url",
            "Authorization",
            "path",
            "TOKENIZER_MODE",
        ] {
            assert!(!is_secret_key(k), "{k}");
        }
    }

    #[test]
    fn token_formats() {
        assert!(find_credential("sk-ant-FAKEFAKEFAKEFAKEFAKE").is_some());
        assert!(find_credential("AKIAFAKEFAKEFAKEFAKE").is_some());
        assert!(find_credential("AKIAFAKEFAKEFAKEFAKEX").is_none());
        assert!(find_credential("task-runner-for-the-whole-team-here").is_none());
        assert!(find_credential("Bearer ${TOKEN}").is_none());
        assert!(find_credential("https://user:${PASS}@host/x").is_none());
        assert!(find_credential("https://user:hunter2@host/x").is_some());
        assert!(find_credential("https://example.com/a@b").is_none());
    }

    #[test]
    fn references_are_stripped() {
        assert_eq!(strip_references("Bearer ${TOKEN}"), "Bearer ");
        assert_eq!(strip_references("$TOKEN"), "");
        assert_eq!(strip_references("{env:X}"), "");
        assert_eq!(strip_references("${VAR:-default}"), "");
        assert_eq!(strip_references("${input:gh}"), "");
        assert_eq!(strip_references("price $5"), "price $5");
        assert!(!has_reference("plain"));
        assert_eq!(strip_references("a ${open $B"), "a ${open ");
        assert_eq!(strip_references("é${X}ü$9"), "éü$9");
        assert_eq!(strip_references("{env:Y"), "{env:Y");
    }
}
