//! Credentials recognised by their shape rather than a vendor prefix.
//!
//! Structural formats (JWT, `Basic` credentials, connection-string secrets, Telegram bot
//! tokens) are precise enough for every line of every file and join [`find_credential`].
//! The random-token rule and the secret-named flag rule are not (a lock file is full of
//! digests, prose is full of `--token-file`), so they run only over values aibox writes
//! into committed files, through [`judge_value`].

use super::{Needle, TokenHit, find_credential, find_in, is_secret_key, strip_references};
use base64::Engine as _;

pub(super) static JWT: Needle = Needle::new(|| memchr::memmem::Finder::new("eyJ"));
pub(super) static BASIC: Needle = Needle::new(|| memchr::memmem::Finder::new("basic "));

/// Shannon entropy of `s` in bits per character.
pub fn entropy(s: &str) -> f64 {
    let mut counts = std::collections::BTreeMap::new();
    let mut total = 0_u32;
    for c in s.chars() {
        *counts.entry(c).or_insert(0_u32) += 1;
        total += 1;
    }
    if total == 0 {
        return 0.0;
    }
    let total = f64::from(total);
    counts
        .values()
        .map(|&n| {
            let p = f64::from(n) / total;
            -p * p.log2()
        })
        .sum()
}

/// The character before byte `at` is not part of a token (so a match starts a word).
fn starts_word(s: &str, at: usize) -> bool {
    !s[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn b64url(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// A JSON Web Token: `eyJ…` header, payload and signature, dot-separated base64url (an
/// unsigned token has an empty signature).
pub(super) fn find_jwt(s: &str) -> Option<TokenHit> {
    let mut from = 0;
    while let Some(pos) = find_in(&JWT, s, from) {
        let start = from + pos;
        from = start + 3;
        if !starts_word(s, start) {
            continue;
        }
        let run: usize = s[start..]
            .chars()
            .take_while(|c| b64url(*c) || *c == '.')
            .count();
        let token = &s[start..start + run];
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() == 3
            && parts[0].len() >= 10
            && parts[1].len() >= 8
            && (parts[2].is_empty() || parts[2].len() >= 16)
        {
            return Some(TokenHit {
                kind: "JSON Web Token",
                start,
                end: start + run,
            });
        }
    }
    None
}

/// `Basic <base64 of user:password>` (HTTP basic credentials, as in an `Authorization`
/// header or a `curl -H`). The value must decode to printable `user:password`, so prose
/// such as "Basic usage" never counts.
pub(super) fn find_basic(s: &str) -> Option<TokenHit> {
    let lower = s.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = find_in(&BASIC, &lower, from) {
        let start = from + pos;
        from = start + "basic ".len();
        let token: String = s[from..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "+/=".contains(*c))
            .collect();
        let Some(decoded) = base64::engine::general_purpose::STANDARD_PAD_INDIFFERENT
            .decode(&token)
            .ok()
            .filter(|_| token.len() >= 8)
        else {
            continue;
        };
        let printable = decoded.iter().all(|b| (0x20..0x7f).contains(b));
        if printable
            && let Ok(text) = std::str::from_utf8(&decoded)
            && let Some((_, password)) = text.split_once(':')
            && !password.is_empty()
        {
            return Some(TokenHit {
                kind: "literal Basic credentials",
                start,
                end: from + token.len(),
            });
        }
    }
    None
}

/// Connection-string keys whose value is a secret, and whether the key alone is specific
/// enough (the generic `Password=` counts only inside a `;`-separated string).
pub(super) const CONNECTION_KEYS: [(&str, bool); 6] = [
    ("accountkey=", true),
    ("sharedaccesskey=", true),
    ("sharedaccesssignature=", true),
    ("sharedsecret=", true),
    ("password=", false),
    ("pwd=", false),
];

/// A searcher per [`CONNECTION_KEYS`] key, built once (see `PREFIX_FINDERS` for why).
pub(super) static CONNECTION_FINDERS: std::sync::LazyLock<Vec<memchr::memmem::Finder<'static>>> =
    std::sync::LazyLock::new(|| {
        CONNECTION_KEYS
            .iter()
            .map(|(key, _)| memchr::memmem::Finder::new(key))
            .collect()
    });

/// A secret inside a connection string: Azure `AccountKey=`/`SharedAccessKey=`/
/// `SharedAccessSignature=`, or `Password=`/`Pwd=` in a `key=value;` string.
pub(super) fn find_connection_secret(s: &str) -> Option<TokenHit> {
    let lower = s.to_ascii_lowercase();
    let mut best: Option<TokenHit> = None;
    for ((key, specific), finder) in CONNECTION_KEYS.iter().zip(&*CONNECTION_FINDERS) {
        let (key, specific) = (*key, *specific);
        let mut from = 0;
        while let Some(pos) = finder.find(&lower.as_bytes()[from..]) {
            let start = from + pos;
            from = start + key.len();
            let prev = s[..start].chars().next_back();
            if prev.is_some_and(|c| !(c == ';' || c.is_whitespace() || "\"'`".contains(c))) {
                continue;
            }
            let value: &str = s[from..]
                .split([';', '"', '\'', '`', '\n'])
                .next()
                .unwrap_or("");
            let literal = strip_references(value.trim());
            let placeholder = literal.starts_with('<')
                || literal.chars().all(|c| matches!(c, '*' | '.' | 'x' | 'X'));
            let in_string = prev == Some(';') || s[from + value.len()..].starts_with(';');
            let long_enough = !specific || literal.len() >= 8;
            if !placeholder && long_enough && (specific || in_string) {
                let hit = TokenHit {
                    kind: "connection-string secret",
                    start,
                    end: from + value.len(),
                };
                if best.is_none_or(|b| hit.start < b.start) {
                    best = Some(hit);
                }
                break;
            }
        }
    }
    best
}

/// Whether some `:` of `bytes` has at least 8 digits right before it, which a Telegram
/// bot token in any piece of `bytes` needs.
pub(super) fn telegram_possible(bytes: &[u8]) -> bool {
    memchr::memchr_iter(b':', bytes).any(|colon| {
        bytes[..colon]
            .iter()
            .rev()
            .take(8)
            .take_while(|b| b.is_ascii_digit())
            .count()
            == 8
    })
}

/// A Telegram bot token: 8 to 10 digits, `:`, then 35 base64url characters.
pub(super) fn find_telegram(s: &str) -> Option<TokenHit> {
    let bytes = s.as_bytes();
    let mut from = 0;
    while let Some(pos) = s[from..].find(':') {
        let colon = from + pos;
        from = colon + 1;
        let digits = bytes[..colon]
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let start = colon - digits;
        if !(8..=10).contains(&digits) || !starts_word(s, start) {
            continue;
        }
        let tail = s[colon + 1..].chars().take_while(|c| b64url(*c)).count();
        if tail == 35 {
            return Some(TokenHit {
                kind: "Telegram bot token",
                start,
                end: colon + 1 + tail,
            });
        }
    }
    None
}

/// Whether one word looks like a random credential: at least 20 characters of a token
/// alphabet (letters, digits, `+ / _ -`), not a path, not hexadecimal (digests, commit
/// ids and UUIDs are hex and are not secrets by shape), and random in three measures:
/// - mixed character classes: upper, lower and digits, at least two of each; or, for 24
///   characters and more, one letter case and at least three digits;
/// - Shannon entropy of at least 3.5 bits per character (3.7 for one letter case);
/// - short runs: split into runs of one class (a capital starts a word with the lower-case
///   letters after it), the mean run is at most 3 characters (4 for one letter case).
///   Random text changes class every two characters or so; names made of words
///   (`MyServer2Config3Name`, `ThisIsMyProjectName2024`) have longer runs.
///
/// Measured on random tokens of 24 to 40 characters, the run rule keeps about 99 % of
/// mixed-case ones and 95 % of one-case ones.
pub fn is_random_token(word: &str) -> bool {
    let n = word.chars().count();
    if !(20..=1024).contains(&n)
        || !word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+/=_-".contains(c))
        || word.starts_with('/')
        || word.contains("//")
    {
        return false;
    }
    let alnum: Vec<char> = word.chars().filter(char::is_ascii_alphanumeric).collect();
    if alnum.iter().all(char::is_ascii_hexdigit) {
        return false;
    }
    // A name joined by `-` or `_` whose parts are each a word, a number or a word with a
    // number (`py3-none-manylinux_2_17_x86_64`) is a name, not a token.
    let parts: Vec<Vec<char>> = word
        .split(['-', '_'])
        .map(|p| p.chars().filter(char::is_ascii_alphanumeric).collect())
        .collect();
    if parts.len() > 1 && parts.iter().all(|p| p.len() <= 3 || class_runs(p) <= 2) {
        return false;
    }
    let upper = alnum.iter().filter(|c| c.is_ascii_uppercase()).count();
    let lower = alnum.iter().filter(|c| c.is_ascii_lowercase()).count();
    let digit = alnum.iter().filter(|c| c.is_ascii_digit()).count();
    let bits = entropy(word);
    let (three, two) = (
        upper >= 2 && lower >= 2 && digit >= 2 && bits >= 3.5,
        n >= 24 && digit >= 3 && (upper + lower) >= 3 && (upper == 0 || lower == 0) && bits >= 3.7,
    );
    let runs = class_runs(&alnum);
    #[allow(clippy::cast_precision_loss)] // lengths are far below 2^52
    let mean_run = alnum.len() as f64 / runs.max(1) as f64;
    (three && mean_run <= 3.0) || (two && mean_run <= 4.0)
}

/// How many runs of one character class `chars` has; a capital followed by lower-case
/// letters is one run (one word of a `CamelCase` name).
fn class_runs(chars: &[char]) -> usize {
    let mut runs = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let mut j = i + 1;
        let same: fn(&char) -> bool = if c.is_ascii_uppercase() {
            if chars.get(j).is_some_and(char::is_ascii_lowercase) {
                char::is_ascii_lowercase
            } else {
                char::is_ascii_uppercase
            }
        } else if c.is_ascii_lowercase() {
            char::is_ascii_lowercase
        } else {
            char::is_ascii_digit
        };
        while chars.get(j).is_some_and(same) {
            j += 1;
        }
        runs += 1;
        i = j;
    }
    runs
}

/// The words of `s` the random-token rule judges: runs of the token alphabet, and each
/// `/`-separated segment of a run on its own. A run with `/` is judged as a whole too
/// (base64 has `/` in it) unless one of its segments is a plain word, as in every URL
/// or file path (`releases/3f2a…/mcp`).
fn token_words(s: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices().chain(std::iter::once((s.len(), ' '))) {
        let token = c.is_ascii_alphanumeric() || "+/_-".contains(c);
        match (token, start) {
            (true, None) => start = Some(i),
            (false, Some(st)) => {
                let word = &s[st..i];
                let plain = |seg: &str| {
                    seg.len() >= 3
                        && seg
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c == '-' || c == '_')
                };
                if !word.split('/').any(plain) {
                    out.push((st, word));
                }
                if word.contains('/') {
                    let mut at = st;
                    for seg in word.split('/') {
                        out.push((at, seg));
                        at += seg.len() + 1;
                    }
                }
                start = None;
            }
            _ => {}
        }
    }
    out.into_iter()
}

/// The kind [`find_random_token`] and [`judge_value`] give a random-looking token.
pub const RANDOM_TOKEN: &str = "random-looking token (high entropy)";

/// The first random-looking word of `s` ([`is_random_token`]); references are left out,
/// their literal fallbacks judged.
pub fn find_random_token(s: &str) -> Option<TokenHit> {
    let literal = strip_references(s);
    token_words(&literal)
        .find(|(_, w)| is_random_token(w))
        .map(|(start, w)| TokenHit {
            kind: RANDOM_TOKEN,
            start,
            end: start + w.len(),
        })
}

/// Index of the word of a command line (or an MCP `args` list) that is the literal value
/// of a secret-named flag: `--api-key=VALUE` or `--api-key VALUE`. A reference is fine;
/// its literal fallback is not.
pub fn secret_flag_value<S: AsRef<str>>(words: &[S]) -> Option<usize> {
    let flag = |w: &str| {
        let name = w.trim_start_matches('-');
        w.starts_with('-') && !name.is_empty() && is_secret_key(name)
    };
    let literal = |v: &str| {
        let v = v.trim_matches(['"', '\'']);
        let lit = strip_references(v);
        !lit.is_empty() && !lit.starts_with('-') && !lit.starts_with('<')
    };
    words.iter().enumerate().find_map(|(i, w)| {
        let w = w.as_ref();
        let hit = match w.split_once('=') {
            Some((k, v)) if k.starts_with('-') => flag(k) && literal(v),
            Some(_) => false,
            None => {
                i > 0
                    && flag(words[i - 1].as_ref())
                    && !words[i - 1].as_ref().contains('=')
                    && !w.starts_with('-')
                    && literal(w)
            }
        };
        hit.then_some(i)
    })
}

/// Index of the word of an MCP `args` list that is an HTTP header with a literal
/// credential, as stdio bridges take them (`--header "X-API-Key: VALUE"`,
/// `--header=Authorization: Token VALUE`): a secret-named header with any literal value,
/// or an `Authorization` header with anything but a scheme word and a reference
/// (`Bearer ${TOKEN}`). A literal fallback of a reference is a literal; a `<placeholder>`
/// is not.
pub fn secret_header_value<S: AsRef<str>>(words: &[S]) -> Option<usize> {
    words.iter().position(|w| {
        let w = w.as_ref();
        // The value of an `--option=` word.
        let w = match w.split_once('=') {
            Some((flag, v)) if flag.starts_with('-') => v,
            _ => w,
        };
        let Some((name, value)) = w.split_once(':') else {
            return false;
        };
        let name = name.trim();
        let header = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
        let auth = name.eq_ignore_ascii_case("authorization")
            || name.eq_ignore_ascii_case("proxy-authorization");
        if !header || !(auth || is_secret_key(name)) {
            return false;
        }
        let value = value.trim();
        let literal = strip_references(value);
        let literal = literal.trim();
        if literal.is_empty() || literal.starts_with('<') {
            return false;
        }
        // `Bearer ${TOKEN}`: the scheme word is all that is literal.
        let scheme_only =
            literal.len() < value.len() && literal.chars().all(|c| c.is_ascii_alphabetic());
        !(auth && scheme_only)
    })
}

/// A secret-named query parameter (or a signature) with a literal value in a URL.
fn find_query_secret(s: &str) -> Option<&'static str> {
    for url in s.split_whitespace().filter(|w| w.contains("://")) {
        let Some((_, query)) = url.split_once('?') else {
            continue;
        };
        let query = query.split('#').next().unwrap_or("");
        for (k, v) in query.split('&').filter_map(|p| p.split_once('=')) {
            let signature = matches!(
                k.to_ascii_lowercase().as_str(),
                "sig" | "signature" | "x-amz-signature" | "x-goog-signature"
            );
            if (is_secret_key(k) || signature) && !strip_references(v).is_empty() {
                return Some("credential in a URL query parameter");
            }
        }
    }
    None
}

/// What a value aibox writes into a committed file is, if it is a credential: a known
/// format ([`find_credential`]), a secret-named flag with a literal value, a secret-named
/// URL query parameter, or a random-looking token. References never count; the literal
/// fallback of one does. Returns the kind, never the value.
pub fn judge_value(value: &str) -> Option<&'static str> {
    if let Some(hit) = find_credential(value) {
        return Some(hit.kind);
    }
    let words: Vec<&str> = value.split_whitespace().collect();
    if secret_flag_value(&words).is_some() {
        return Some("literal value of a secret-named flag");
    }
    find_query_secret(value).or_else(|| find_random_token(value).map(|h| h.kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structural_formats() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmYWtlIn0.FAKEsignatureFAKEsignature";
        assert!(find_jwt(jwt).is_some());
        assert!(find_jwt("eyJhbGciOiJub25lIn0.eyJzdWIiOiJmYWtlIn0.").is_some());
        assert!(find_jwt("eyJhbGciOiJIUzI1NiJ9 alone").is_none());
        // `fakeuser:fake-pass` in base64; prose never decodes to `user:password`.
        assert!(find_basic("Authorization: Basic ZmFrZXVzZXI6ZmFrZS1wYXNz").is_some());
        assert!(find_basic("Basic usage of the tool").is_none());
        assert!(find_basic("Basic ${CREDENTIALS}").is_none());
        assert!(find_connection_secret("AccountName=a;AccountKey=FAKEFAKEFAKE==;").is_some());
        assert!(find_connection_secret("Server=db;Password=fake-pw;").is_some());
        assert!(find_connection_secret("Server=db;Password=${DB_PASSWORD};").is_none());
        assert!(find_connection_secret("Password=<your password>;Server=db").is_none());
        assert!(find_connection_secret("set --db-password=x").is_none());
        assert!(find_connection_secret("the Password= field").is_none());
        let telegram = format!("1234567890:AA{}", "FAKE".repeat(8) + "X");
        assert!(find_telegram(&telegram).is_some());
        assert!(find_telegram("12:30 and 2025-01-01T10:00:00").is_none());
    }

    #[test]
    fn random_tokens_by_shape() {
        for token in [
            "FAKEq7Vx2mL9pR4tZ8wK1nB6sD3fG5hJ0k",
            "fakez96zbac8j1nuoonklgoecv49h439spjj",
            "FAKE/K7MDENG/bPxRfiCY3xQ9+aB2cD4eF6g",
        ] {
            assert!(is_random_token(token), "{token}");
        }
        for word in [
            "ThisIsMyProjectName2024Version",
            "MyServer2Config3Name",
            "3f2a9c1e4b5d6f708192a3b4c5d6e7f8091a2b3c",
            "123e4567-e89b-12d3-a456-426614174000",
            "py3-none-manylinux_2_17_x86_64",
            "claude-sonnet-4-5-20250929",
            "/workspace/context/skills/processkit/x/mcp/server.py",
            "short1A",
        ] {
            assert!(!is_random_token(word), "{word}");
        }
        // A URL path is judged by its segments, not as one word.
        assert!(find_random_token("https://h.invalid/releases/3f2a9c1e4b5d6f70/mcp").is_none());
        assert!(
            find_random_token("https://h.invalid/v1/FAKEq7Vx2mL9pR4tZ8wK1nB6sD3f/events").is_some()
        );
        // References are names; their literal fallbacks are values.
        assert!(find_random_token("${MY_VERY_LONG_VARIABLE_NAME_2024_X9}").is_none());
        assert!(find_random_token("${X:-FAKEq7Vx2mL9pR4tZ8wK1nB6sD3fG5hJ0k}").is_some());
    }

    #[test]
    fn secret_flags_and_query_parameters() {
        assert_eq!(secret_flag_value(&["--token", "fake-value"]), Some(1));
        assert_eq!(secret_flag_value(&["--api-key=fake-value"]), Some(0));
        assert_eq!(secret_flag_value(&["--api-key=${API_KEY:-fake}"]), Some(0));
        assert_eq!(secret_flag_value(&["--token", "${TOKEN}"]), None);
        assert_eq!(secret_flag_value(&["--token-file", "/run/secrets/t"]), None);
        assert_eq!(secret_flag_value(&["--token", "--verbose"]), None);
        assert_eq!(secret_flag_value(&["--password-stdin"]), None);
        assert!(judge_value("https://h.invalid/x?api_key=fake").is_some());
        assert!(judge_value("https://h.invalid/x?sig=FAKE&sv=1").is_some());
        assert!(judge_value("https://h.invalid/x?api_key=${KEY}").is_none());
        assert!(judge_value("https://h.invalid/x?region=eu-central-1").is_none());
        assert!(judge_value("deploy --password fake-pass").is_some());
        assert!(judge_value("echo ready").is_none());
    }

    /// The QA's shapes: a hex or short key behind a secret-named header, any literal
    /// `Authorization` scheme; references, placeholders and other headers pass.
    #[test]
    fn secret_headers_in_arguments() {
        let hex = "3f9c2a7e41b8d05c6e2f9a13b7d4c8e0";
        let refused = [
            format!("X-API-Key: {hex}"),
            format!("X-Auth-Token: {hex}"),
            format!("Authorization: Token {hex}"),
            "Authorization: Basic ZmFrZTpmYWtl".to_owned(),
            "X-API-Key:k8Jd2LmQ9wPzk8Jd".to_owned(),
            "--header=X-API-Key: fake".to_owned(),
            "X-API-Key: ${KEY:-fake}".to_owned(),
            "proxy-authorization: fake".to_owned(),
        ];
        for arg in &refused {
            let args = ["-y", "mcp-remote", "https://a.invalid/mcp", "--header", arg];
            assert_eq!(secret_header_value(&args), Some(4), "{arg}");
        }
        let allowed = [
            "X-API-Key: ${API_KEY}",
            "Authorization: Bearer ${TOKEN}",
            "Authorization: Token ${env:TOKEN}",
            "X-API-Key: <your key>",
            "X-Team: acme",
            "Accept: application/json",
            "https://a.invalid/mcp",
            "Authorization:",
            "note: keep the token in an env var",
        ];
        for arg in allowed {
            assert_eq!(secret_header_value(&["--header", arg]), None, "{arg}");
        }
    }
}
