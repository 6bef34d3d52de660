//! Redaction of diagnostics (security model SEC-DATA-5).
//!
//! Everything `doctor` shows or writes into a report passes through [`redact`]: known
//! credential formats, PEM private keys, `Authorization` values, URL credentials, values
//! of secret-like variables, high-entropy values of environment variables, explicitly
//! listed secret values, home paths (`/home/<user>`, `/Users/<user>`) and the given user
//! and host names are replaced by `***` or a placeholder.

use crate::secrets::{high_entropy, suspicious_key, token_spans};
use crate::text::has_reference;

/// What, beyond the built-in patterns, must not survive redaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Login names (the current user, the container user); replaced by `<user>`.
    pub users: Vec<String>,
    /// Host names; replaced by `<host>`.
    pub hosts: Vec<String>,
    /// Literal secret values known to the caller (for example the values of
    /// `.aibox-local.toml [container.environment]`); replaced by `***`.
    pub values: Vec<String>,
}

/// Placeholder for a removed secret.
pub const MASK: &str = "***";

/// Redacts `text`. Idempotent: redacting twice gives the same result.
pub fn redact(text: &str, redactor: &Redactor) -> String {
    let mut values: Vec<&str> = redactor
        .values
        .iter()
        .map(|v| v.trim())
        .filter(|v| v.len() >= 4)
        .collect();
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    let mut s = text.to_owned();
    for v in values {
        s = s.replace(v, MASK);
    }
    s = mask_spans(&s);
    let mut out = String::with_capacity(s.len());
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&redact_homes(&redact_flags(&redact_assignments(line))));
    }
    for user in &redactor.users {
        out = replace_word(&out, user, "<user>");
    }
    for host in &redactor.hosts {
        out = replace_word(&out, host, "<host>");
    }
    out
}

/// Masks secrets only (credential formats, secret-like assignments and flags), leaving
/// paths, user and host names readable: for error messages shown on the terminal, which
/// may quote a line of a configuration file.
pub fn redact_secrets(text: &str) -> String {
    mask_spans(text)
        .split('\n')
        .map(|line| redact_flags(&redact_assignments(line)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn mask_spans(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for (start, end) in token_spans(s) {
        out.push_str(&s[last..start]);
        out.push_str(MASK);
        last = end;
    }
    out.push_str(&s[last..]);
    out
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// Masks values in `KEY=VALUE`, `KEY: VALUE`, `KEY = "VALUE"` and `"KEY": "VALUE"` forms
/// when the key is secret-like, an `Authorization` header, or an upper-case variable with a
/// random-looking value.
fn redact_assignments(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let (mut i, mut last) = (0, 0);
    while i < bytes.len() {
        if !(is_key_byte(bytes[i]) && (i == 0 || !is_key_byte(bytes[i - 1]))) {
            i += 1;
            continue;
        }
        let mut key_end = i;
        while key_end < bytes.len() && is_key_byte(bytes[key_end]) {
            key_end += 1;
        }
        let key = &line[i..key_end];
        let mut k = key_end;
        if k < bytes.len() && matches!(bytes[k], b'"' | b'\'') {
            k += 1;
        }
        while k < bytes.len() && bytes[k] == b' ' {
            k += 1;
        }
        if k >= bytes.len() || !matches!(bytes[k], b'=' | b':') || bytes.get(k + 1) == Some(&b'/') {
            i = key_end;
            continue;
        }
        k += 1;
        while k < bytes.len() && bytes[k] == b' ' {
            k += 1;
        }
        let auth = key.to_ascii_lowercase().ends_with("authorization");
        let (vs, ve) = value_span(bytes, k, auth);
        let value = &line[vs..ve];
        let upper_var = key
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_');
        let scalar = value.parse::<f64>().is_ok() || matches!(value, "true" | "false" | "null");
        let secret = !value.is_empty()
            && !scalar
            && value != MASK
            && !has_reference(value)
            && (suspicious_key(key) || auth || (upper_var && high_entropy(value)));
        if secret {
            out.push_str(&line[last..vs]);
            out.push_str(MASK);
            last = ve;
            i = ve.max(key_end);
        } else {
            i = key_end;
        }
    }
    out.push_str(&line[last..]);
    out
}

/// The span of the value starting at `k`: quoted (`"v"`, `'v'`, or the escaped `\"v\"` of
/// text embedded in a JSON string), or unquoted up to a separator. An `Authorization`
/// value runs to the end of the line or string (`Basic <credentials>`).
fn value_span(bytes: &[u8], k: usize, auth: bool) -> (usize, usize) {
    let at = |i: usize| bytes.get(i).copied();
    // A list value (`DB_PASSWORD = ["…"]`) is masked as a whole, brackets kept.
    if at(k) == Some(b'[') {
        let mut end = k + 1;
        while end < bytes.len() && bytes[end] != b']' {
            end += 1;
        }
        return (k + 1, end);
    }
    let (quote, start) = match (at(k), at(k + 1)) {
        (Some(q @ (b'"' | b'\'')), _) => (Some((q, false)), k + 1),
        (Some(b'\\'), Some(q @ (b'"' | b'\''))) => (Some((q, true)), k + 2),
        _ => (None, k),
    };
    let mut end = start;
    if let Some((q, escaped)) = quote {
        while end < bytes.len() {
            let c = bytes[end];
            if (escaped && c == b'\\' && at(end + 1) == Some(q)) || (!escaped && c == q) {
                break;
            }
            end += if !escaped && c == b'\\' { 2 } else { 1 };
        }
        return (start, end.min(bytes.len()));
    }
    // Braces of a reference (`${VAR}`, `{env:VAR}`) belong to the value.
    let mut depth = 0_u32;
    while end < bytes.len() {
        match bytes[end] {
            b'{' => depth += 1,
            b'}' if depth > 0 => depth -= 1,
            b'"' | b'\'' | b'\\' => break,
            b' ' | b'\t' | b',' | b'}' | b']' | b';' if !auth => break,
            _ => {}
        }
        end += 1;
    }
    (start, end)
}

/// Command-line flags that carry a secret (`--password X`, `--token=X`,
/// `"--api-key", "X"`) and `curl -u user:password` / `--user user:password`: the value
/// (the password part for `-u`) is masked.
fn redact_flags(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let (mut i, mut last) = (0, 0);
    while i < bytes.len() {
        let starts_flag = bytes[i] == b'-' && (i == 0 || !is_key_byte(bytes[i - 1]));
        if !starts_flag {
            i += 1;
            continue;
        }
        let mut name_end = i;
        while name_end < bytes.len() && (is_key_byte(bytes[name_end])) {
            name_end += 1;
        }
        let flag = &line[i..name_end];
        let name = flag.trim_start_matches('-');
        let user_flag = flag == "-u" || flag == "--user" || flag == "--proxy-user";
        if name.is_empty() || !(user_flag || flag.starts_with("--") && suspicious_key(name)) {
            i = name_end.max(i + 1);
            continue;
        }
        // A flag named in a message (`` `--password` ``): its closing backtick ends it,
        // no value follows.
        if bytes.get(name_end) == Some(&b'`') {
            i = name_end + 1;
            continue;
        }
        // The value: after `=`, or after separators (spaces, `",` of a JSON/TOML list).
        let mut k = name_end;
        if bytes.get(k) == Some(&b'=') {
            k += 1;
        } else {
            while k < bytes.len() && matches!(bytes[k], b' ' | b'"' | b'\'' | b',' | b'\\') {
                k += 1;
            }
        }
        let mut end = k;
        while end < bytes.len() && !matches!(bytes[end], b' ' | b'"' | b'\'' | b',' | b']' | b'\\')
        {
            end += 1;
        }
        let mut start = k;
        if user_flag {
            // `user:password`: the user name stays readable.
            let Some(colon) = line[k..end].find(':') else {
                i = end.max(i + 1);
                continue;
            };
            start = k + colon + 1;
        }
        let value = &line[start..end];
        if value.is_empty() || value == MASK || value.starts_with('-') || has_reference(value) {
            i = end.max(i + 1);
            continue;
        }
        out.push_str(&line[last..start]);
        out.push_str(MASK);
        last = end;
        i = end;
    }
    out.push_str(&line[last..]);
    out
}

fn redact_homes(line: &str) -> String {
    let mut s = line.to_owned();
    for base in ["/home/", "/Users/"] {
        let mut out = String::with_capacity(s.len());
        let mut rest = s.as_str();
        while let Some(pos) = rest.find(base) {
            out.push_str(&rest[..pos + base.len()]);
            let after = &rest[pos + base.len()..];
            let name_len = after
                .find(|c: char| c == '/' || c.is_whitespace() || "\"':,;)]}".contains(c))
                .unwrap_or(after.len());
            if name_len > 0 {
                out.push_str("<user>");
            }
            rest = &after[name_len..];
        }
        out.push_str(rest);
        s = out;
    }
    s
}

fn replace_word(text: &str, word: &str, with: &str) -> String {
    let word = word.trim();
    if word.len() < 3 || word == "root" {
        return text.to_owned();
    }
    let boundary = |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(word) {
        let before = rest[..pos].chars().next_back();
        let after = rest[pos + word.len()..].chars().next();
        out.push_str(&rest[..pos]);
        if boundary(before) && boundary(after) {
            out.push_str(with);
        } else {
            out.push_str(word);
        }
        rest = &rest[pos + word.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments() {
        assert_eq!(
            redact_assignments("GITHUB_TOKEN=abc123"),
            "GITHUB_TOKEN=***"
        );
        assert_eq!(
            redact_assignments("  \"api_key\": \"xyz\","),
            "  \"api_key\": \"***\","
        );
        assert_eq!(redact_assignments("password = 'p w'"), "password = '***'");
        assert_eq!(redact_assignments("TOKEN=${TOKEN}"), "TOKEN=${TOKEN}");
        assert_eq!(
            redact_assignments("Authorization: Basic dXNlcg=="),
            "Authorization: ***"
        );
        assert_eq!(redact_assignments("LANG=en_US.UTF-8"), "LANG=en_US.UTF-8");
        assert_eq!(redact_assignments("see https://x.org"), "see https://x.org");
        assert_eq!(
            redact_assignments("DB_PASSWORD = [\"a\", \"b\"]"),
            "DB_PASSWORD = [***]"
        );
    }

    #[test]
    fn flags() {
        assert_eq!(
            redact_flags("args = [\"--password\", \"hunter2\"]"),
            "args = [\"--password\", \"***\"]"
        );
        assert_eq!(redact_flags("run --token=abc --x"), "run --token=*** --x");
        // QA: a flag named in backticks lost its closing backtick to the mask.
        let named = "`args` passes a literal value to `--password`, probably a credential";
        assert_eq!(redact_flags(named), named);
        assert_eq!(
            redact_flags("curl -u alice:pw1 https://x"),
            "curl -u alice:*** https://x"
        );
        assert_eq!(
            redact_flags("curl --user bob:pw https://x"),
            "curl --user bob:*** https://x"
        );
        assert_eq!(redact_flags("ls -u file"), "ls -u file");
        assert_eq!(redact_flags("--password ${PW}"), "--password ${PW}");
    }

    #[test]
    fn homes_and_words() {
        assert_eq!(
            redact_homes("/home/alice/p and /Users/bob"),
            "/home/<user>/p and /Users/<user>"
        );
        assert_eq!(
            replace_word("alice@alicebox alice", "alice", "<user>"),
            "<user>@alicebox <user>"
        );
    }
}
