//! What a secret is, defined once for every part of aibox that looks for one.
//!
//! The policy gate's secret scan and redaction (`aibox-policy`), MCP registration's
//! literal-secret check (`aibox-mcp-registration`) and the skill review's credential
//! findings (`aibox-skill-review`) all call these functions. They differ in what they do
//! with a hit (refuse, mask, warn), never in what counts as one.
//!
//! Two kinds of rule: formats ([`find_credential`]: token prefixes, PEM keys, JWTs,
//! `Bearer`/`Basic` credentials, `user:pass@` URLs, connection-string secrets), precise
//! enough to run over every line of every file; and shape ([`judge_value`]: the formats
//! plus random-looking tokens, secret-named flags and query parameters), for values
//! aibox writes into committed files (arguments, URLs, commands, environment, headers).

mod shape;

pub use shape::{
    RANDOM_TOKEN, entropy, find_random_token, is_random_token, judge_value, secret_flag_value,
    secret_header_value,
};

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
/// and `AUTH` are; `AUTHOR`, `Authorization` and `TOKENIZER_MODE` are not, and neither
/// is a name whose last word says where the secret is (`TOKEN_FILE`, `AUTH_MODE`).
pub fn is_secret_key(key: &str) -> bool {
    let words = words(key);
    let secret = words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
        || words
            .windows(2)
            .any(|p| SECRET_PAIRS.iter().any(|q| p[0] == q[0] && p[1] == q[1]));
    secret
        && !words
            .last()
            .is_some_and(|w| NOT_A_SECRET_VALUE.contains(&w.as_str()))
}

/// Last words that make a secret-like name say where a secret is or how it is used,
/// not hold it: `TOKEN_FILE`, `API_KEY_ENV`, `AUTH_MODE`, `SSH_AUTH_SOCK`,
/// `--password-stdin`.
const NOT_A_SECRET_VALUE: [&str; 19] = [
    "FILE", "PATH", "DIR", "ENV", "VAR", "VARIABLE", "NAME", "TYPE", "MODE", "URL", "URI", "STDIN",
    "HELPER", "COMMAND", "SOCK", "SOCKET", "HOST", "ENDPOINT", "METHOD",
];

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

/// The kind of a PEM private key block.
pub const PEM_PRIVATE_KEY: &str = "PEM private key";

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
fn alnum_slash(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '/'
}
fn alnum_slash_dash(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '/' || c == '-' || c == '_'
}
fn alnum_dash_dot(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
}

/// A fixed needle's searcher, built on first use (see [`PREFIX_FINDERS`] for why).
pub(super) type Needle = std::sync::LazyLock<memchr::memmem::Finder<'static>>;

/// Where `needle` first occurs in `s` at or after byte `from`, as an offset from `from`
/// (what `s[from..].find(..)` returns).
pub(super) fn find_in(needle: &Needle, s: &str, from: usize) -> Option<usize> {
    needle.find(&s.as_bytes()[from..])
}

static PEM_BEGIN: Needle = Needle::new(|| memchr::memmem::Finder::new("-----BEGIN"));
static BEARER: Needle = Needle::new(|| memchr::memmem::Finder::new("bearer "));
static SCHEME: Needle = Needle::new(|| memchr::memmem::Finder::new("://"));

/// A searcher per [`PATTERNS`] prefix, built once: `str::find` prepares its searcher on
/// every call, which cost more than the search on the short lines this runs on (most
/// of `skill list`'s time went there).
static PREFIX_FINDERS: std::sync::LazyLock<Vec<memchr::memmem::Finder<'static>>> =
    std::sync::LazyLock::new(|| {
        PATTERNS
            .iter()
            .map(|p| memchr::memmem::Finder::new(p.prefix))
            .collect()
    });

/// Needles found in one pass over a text (an Aho-Corasick automaton), answering which of
/// them occur: [`CredentialScan::for_text`] searched each of its 45 needles on its own,
/// 45 passes over every installed skill file (a fifth of `skill list`'s and `doctor`'s
/// time at 10x processkit); the one pass takes a third of that time.
struct NeedleSet {
    /// The automaton; `None` only if it could not be built, and then each needle is
    /// searched on its own (it cannot fail for a few dozen short needles).
    search: Option<aho_corasick::AhoCorasick>,
    needles: Vec<&'static [u8]>,
    /// A bit per needle: the answer once every needle was found.
    all: u64,
}

impl NeedleSet {
    fn new(needles: Vec<&'static [u8]>) -> Self {
        debug_assert!(needles.len() <= 64, "a bit per needle");
        // A contiguous NFA searches as fast as a DFA here (the packed prefilter does the
        // work) and builds in less than half the time, which every command that scans
        // a few files pays.
        let search = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
            .build(&needles)
            .ok();
        let all = (0..needles.len()).fold(0, |all, i| all | 1 << i);
        Self {
            search,
            needles,
            all,
        }
    }

    /// [`Self::present`] by a search for each needle on its own.
    fn each_alone(&self, text: &[u8]) -> u64 {
        (self.needles.iter().enumerate())
            .filter(|(_, n)| memchr::memmem::find(text, n).is_some())
            .fold(0, |found, (i, _)| found | 1 << i)
    }

    /// Bit `i` set when needle `i` occurs in `text` (at most 64 needles). A leftmost
    /// search reports no two overlapping matches, so an occurrence starting inside a
    /// reported match (`sk-` inside `sk-ant-`) is not reported itself: every needle is
    /// tried at each position of each reported match, which finds those. An occurrence
    /// starting anywhere else is reported, as the leftmost match from where the search
    /// went on.
    fn present(&self, text: &[u8]) -> u64 {
        let Some(search) = &self.search else {
            return self.each_alone(text);
        };
        let mut found = 0;
        for m in search.find_iter(text) {
            for start in m.start()..m.end() {
                for (i, needle) in self.needles.iter().enumerate() {
                    if text[start..].starts_with(needle) {
                        found |= 1 << i;
                    }
                }
            }
            if found == self.all {
                break;
            }
        }
        found
    }
}

/// `text` with its ASCII letters lowercased (what `to_ascii_lowercase` returns), eight
/// bytes at a time: this crate is built for size in release, where the byte loop is not
/// vectorised, and lowercasing every installed skill file byte by byte was 8 % of
/// `skill list`'s time at 10x processkit.
fn ascii_lowercase(text: &[u8]) -> Vec<u8> {
    const LOW_SEVEN: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut out = text.to_vec();
    let (words, tail) = out.as_chunks_mut::<8>();
    for chunk in words {
        let w = u64::from_le_bytes(*chunk);
        // Per byte, with its top bit cleared (no carry leaves a byte): bit 7 of `+ 0x3f`
        // is set from `A` (0x41) on, and of `+ 0x25` from past `Z` (0x5b) on; a byte
        // whose own top bit is set is not ASCII and stays as it is.
        let low = w & LOW_SEVEN;
        let from_a = low + 0x3f3f_3f3f_3f3f_3f3f;
        let past_z = low + 0x2525_2525_2525_2525;
        let upper = from_a & !past_z & !w & HIGH;
        *chunk = (w | upper >> 2).to_le_bytes();
    }
    tail.make_ascii_lowercase();
    out
}

/// Where [`EXACT_NEEDLES`] has each needle of [`CredentialScan::for_text`] that is not a
/// [`PATTERNS`] prefix (those come first, in their order).
const PEM_AT: usize = PATTERNS.len();
const SCHEME_AT: usize = PEM_AT + 1;
const JWT_AT: usize = PEM_AT + 2;

/// The needles searched in the text as it is: every [`PATTERNS`] prefix, then
/// `-----BEGIN`, `://` and `eyJ` (see the `*_AT` positions).
static EXACT_NEEDLES: std::sync::LazyLock<NeedleSet> = std::sync::LazyLock::new(|| {
    let mut needles: Vec<&'static [u8]> = PATTERNS.iter().map(|p| p.prefix.as_bytes()).collect();
    needles.extend([PEM_BEGIN.needle(), SCHEME.needle(), shape::JWT.needle()]);
    NeedleSet::new(needles)
});

/// Where [`LOWER_NEEDLES`] has each needle.
const BEARER_AT: usize = 0;
const BASIC_AT: usize = 1;
const CONNECTION_AT: usize = 2;

/// The needles searched in the lowercased text: `bearer `, `basic `, then every
/// connection-string key.
static LOWER_NEEDLES: std::sync::LazyLock<NeedleSet> = std::sync::LazyLock::new(|| {
    let mut needles = vec![BEARER.needle(), shape::BASIC.needle()];
    needles.extend(shape::CONNECTION_KEYS.iter().map(|(key, _)| key.as_bytes()));
    NeedleSet::new(needles)
});

const PATTERNS: [Pattern; 36] = [
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
        prefix: "gldt-",
        kind: "GitLab token",
        min: 20,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "glptt-",
        kind: "GitLab token",
        min: 20,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "glrt-",
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
        prefix: "xoxa-",
        kind: "Slack token",
        min: 10,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "xoxr-",
        kind: "Slack token",
        min: 10,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "xoxs-",
        kind: "Slack token",
        min: 10,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "xapp-",
        kind: "Slack token",
        min: 10,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "hooks.slack.com/services/",
        kind: "Slack webhook URL",
        min: 20,
        exact: false,
        charset: alnum_slash,
    },
    Pattern {
        prefix: "discord.com/api/webhooks/",
        kind: "Discord webhook URL",
        min: 20,
        exact: false,
        charset: alnum_slash_dash,
    },
    Pattern {
        prefix: "sk-",
        kind: "OpenAI-style API key",
        min: 20,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "sk_live_",
        kind: "Stripe secret key",
        min: 16,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "rk_live_",
        kind: "Stripe restricted key",
        min: 16,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "sk_test_",
        kind: "Stripe test secret key",
        min: 16,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "rk_test_",
        kind: "Stripe test restricted key",
        min: 16,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "whsec_",
        kind: "webhook signing secret",
        min: 20,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "npm_",
        kind: "npm token",
        min: 36,
        exact: true,
        charset: alnum,
    },
    Pattern {
        prefix: "pypi-",
        kind: "PyPI token",
        min: 50,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "hf_",
        kind: "Hugging Face token",
        min: 30,
        exact: false,
        charset: alnum,
    },
    Pattern {
        prefix: "AKIA",
        kind: "AWS access key ID",
        min: 16,
        exact: true,
        charset: upper_digit,
    },
    Pattern {
        prefix: "ASIA",
        kind: "AWS temporary access key ID",
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
    Pattern {
        prefix: "ya29.",
        kind: "Google OAuth access token",
        min: 30,
        exact: false,
        charset: alnum_dash,
    },
    Pattern {
        prefix: "dop_v1_",
        kind: "DigitalOcean token",
        min: 64,
        exact: true,
        charset: alnum,
    },
    Pattern {
        prefix: "shpat_",
        kind: "Shopify token",
        min: 32,
        exact: true,
        charset: alnum,
    },
    Pattern {
        prefix: "SG.",
        kind: "SendGrid API key",
        min: 60,
        exact: false,
        charset: alnum_dash_dot,
    },
    Pattern {
        prefix: "AGE-SECRET-KEY-1",
        kind: "age secret key",
        min: 50,
        exact: false,
        charset: upper_digit,
    },
];

/// The earliest credential-looking span in `s`: a known token format, a PEM private
/// key, a literal `Bearer` or `Basic` credential, a URL with a password, a JWT, a
/// connection-string secret (`AccountKey=`, `Password=`, `SharedAccessSignature=`) or a
/// Telegram bot token. References never count; the literal fallback of one
/// (`${NAME:-literal}`) is literal text and counts.
pub fn find_credential(s: &str) -> Option<TokenHit> {
    CredentialScan::ALL.find(s)
}

/// [`find_credential`] for many pieces (lines) of one text: each rule runs only when the
/// needle it cannot match without (its prefix, `://`, `bearer `, …) occurs somewhere in
/// the whole text. Every piece of the text gives exactly what [`find_credential`] gives
/// (a needle in a piece is in the text), but a file without any needle costs one pass
/// per needle instead of one per line and needle: the skill review runs this over every
/// line of every installed skill, which was most of `skill list`'s and `doctor`'s time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialScan {
    prefixes: [bool; PATTERNS.len()],
    rules: [bool; RULES.len()],
}

/// A rule of [`find_credential`] other than the prefix patterns.
type Rule = fn(&str) -> Option<TokenHit>;

/// The rules beside [`PATTERNS`], in the order [`CredentialScan::for_text`] decides them.
const RULES: [Rule; 7] = [
    find_pem_private_key,
    find_bearer,
    find_url_credentials,
    shape::find_jwt,
    shape::find_basic,
    shape::find_connection_secret,
    shape::find_telegram,
];

impl CredentialScan {
    /// Every rule on: what [`find_credential`] runs.
    const ALL: Self = Self {
        prefixes: [true; PATTERNS.len()],
        rules: [true; RULES.len()],
    };

    /// The rules that can match some piece of `text`.
    pub fn for_text(text: &str) -> Self {
        let bytes = text.as_bytes();
        let exact = EXACT_NEEDLES.present(bytes);
        let lower = LOWER_NEEDLES.present(&ascii_lowercase(bytes));
        let has = |found: u64, i: usize| found & (1 << i) != 0;
        Self {
            prefixes: std::array::from_fn(|i| has(exact, i)),
            // The needle each rule of `RULES` cannot match without.
            rules: [
                has(exact, PEM_AT),
                has(lower, BEARER_AT),
                has(exact, SCHEME_AT),
                has(exact, JWT_AT),
                has(lower, BASIC_AT),
                lower >> CONNECTION_AT != 0,
                shape::telegram_possible(bytes),
            ],
        }
    }

    /// No rule can match any piece of the text.
    pub fn is_empty(&self) -> bool {
        !self.prefixes.iter().chain(&self.rules).any(|on| *on)
    }

    /// [`find_credential`] of `s`, a piece of the text this scan was made for.
    pub fn find(&self, s: &str) -> Option<TokenHit> {
        let finders = &*PREFIX_FINDERS;
        let prefixed = PATTERNS
            .iter()
            .zip(finders)
            .zip(&self.prefixes)
            .filter(|(_, on)| **on)
            .filter_map(|((p, finder), _)| find_prefixed(p, finder, s));
        let others = RULES
            .iter()
            .zip(&self.rules)
            .filter(|(_, on)| **on)
            .filter_map(|(rule, _)| rule(s));
        // Earliest first; on a tie the longer span (`sk-ant-` over `sk-`).
        prefixed
            .chain(others)
            .min_by_key(|h| (h.start, std::cmp::Reverse(h.end)))
    }
}

/// A PEM private key block: from its `-----BEGIN` to the END marker's closing dashes, or
/// to the end of the text.
fn find_pem_private_key(s: &str) -> Option<TokenHit> {
    let start = find_in(&PEM_BEGIN, s, 0)?;
    if !s[start..].contains("PRIVATE KEY") {
        return None;
    }
    let end = s[start..]
        .find("-----END")
        .and_then(|e| {
            let after = start + e + "-----END".len();
            s[after..].find("-----").map(|d| after + d + "-----".len())
        })
        .unwrap_or(s.len());
    Some(TokenHit {
        kind: PEM_PRIVATE_KEY,
        start,
        end,
    })
}

/// The first token of prefix pattern `p` in `s` (`finder` searches for its prefix).
fn find_prefixed(p: &Pattern, finder: &memchr::memmem::Finder<'_>, s: &str) -> Option<TokenHit> {
    let mut from = 0;
    while let Some(pos) = finder.find(&s.as_bytes()[from..]) {
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
            return Some(TokenHit {
                kind: p.kind,
                start,
                end: from + body,
            });
        }
    }
    None
}

fn find_bearer(s: &str) -> Option<TokenHit> {
    let lower = s.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = find_in(&BEARER, &lower, from) {
        let start = from + pos;
        from = start + "bearer ".len();
        let token: String = s[from..]
            .chars()
            .take_while(|c| !c.is_whitespace() && !"\"',;".contains(*c))
            .collect();
        let literal = strip_references(&token);
        if literal.len() >= 8 && !literal.starts_with('<') {
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
    while let Some(pos) = find_in(&SCHEME, s, from) {
        let start = from + pos + 3;
        from = start;
        let authority: String = s[start..]
            .chars()
            .take_while(|c| !"/?# \"'<>".contains(*c))
            .collect();
        let Some((userinfo, _)) = authority.rsplit_once('@') else {
            continue;
        };
        // References first: `{env:USER}` and `${env:USER}` hold a `:` of their own.
        if let Some((_, password)) = strip_references(userinfo).split_once(':')
            && !password.is_empty()
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

/// Removes every variable reference (`${VAR}`, `$VAR`, `{env:VAR}`, `${env:VAR}`,
/// `${input:id}`, `${localEnv:VAR}`, `${containerEnv:VAR}`, …) from `s`. A reference
/// with a literal fallback (`${VAR:-text}`, `${VAR-text}`) leaves its fallback: that text
/// is written into the file as it is, so it is judged as a literal.
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
        // Compose's `$$` is an escaped `$`: `$${NAME}` reaches the program as the text
        // `${NAME}`, a name and no value, so it counts as a reference.
        if c == b'$' && bytes.get(i + 1) == Some(&b'$') {
            i += 1;
            continue;
        }
        let braced = c == b'$' && bytes.get(i + 1) == Some(&b'{')
            || c == b'{' && s[i..].starts_with("{env:");
        if braced && !no_close {
            match s[i..].find('}') {
                Some(end) => {
                    if let Some(fallback) = fallback_of(&s[i..i + end]) {
                        out.push_str(fallback);
                    }
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

/// The literal fallback of `${NAME:-text}` or `${NAME-text}` (`reference` without its
/// closing brace), if any.
fn fallback_of(reference: &str) -> Option<&str> {
    let inner = reference.strip_prefix("${")?;
    let name_len = inner
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    if name_len == 0 || !is_identifier(&inner[..name_len]) {
        return None;
    }
    let rest = &inner[name_len..];
    rest.strip_prefix(":-")
        .or_else(|| rest.strip_prefix('-'))
        .filter(|f| !f.is_empty() && !f.starts_with('$'))
}

/// The non-empty literal fallbacks of the references in `s` (`${NAME:-text}`,
/// `${NAME-text}`), in order.
pub fn fallback_literals(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(pos) = s[from..].find("${") {
        let start = from + pos;
        let Some(end) = s[start..].find('}') else {
            break;
        };
        if let Some(f) = fallback_of(&s[start..start + end]) {
            out.push(f);
        }
        from = start + end + 1;
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
            "TOKEN_FILE",
            "GITHUB_TOKEN_PATH",
            "API_KEY_ENV",
            "AUTH_MODE",
            "SSH_AUTH_SOCK",
            "password-stdin",
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
        assert!(find_credential("ASIAFAKEFAKEFAKEFAKE").is_some());
        assert!(find_credential(&format!("npm_{}", "FAKE".repeat(9))).is_some());
        assert!(find_credential("sk_live_FAKEFAKEFAKEFAKEFAKE").is_some());
        assert!(find_credential("Bearer ${TOKEN:-fakefakefake}").is_some());
        assert!(find_credential("https://user:${PASS:-hunter2}@host/x").is_some());
    }

    #[test]
    fn references_are_stripped() {
        assert_eq!(strip_references("Bearer ${TOKEN}"), "Bearer ");
        assert_eq!(strip_references("$TOKEN"), "");
        assert_eq!(strip_references("{env:X}"), "");
        // Credentials in a URL as each harness spells the references: no literal password.
        for url in [
            "https://${U}:${P}@h.invalid/mcp",
            "https://{env:U}:{env:P}@h.invalid/mcp",
            "https://${env:U}:${env:P}@h.invalid/mcp",
            "https://{env:U}@h.invalid/mcp",
        ] {
            assert!(find_url_credentials(url).is_none(), "{url}");
        }
        for url in [
            "https://{env:U}:hunter22@h.invalid/mcp",
            "https://user:${P:-hunter22}@h.invalid/mcp",
            "https://user:hunter22@h.invalid/mcp",
        ] {
            assert!(find_url_credentials(url).is_some(), "{url}");
        }
        assert_eq!(strip_references("${VAR:-default}"), "default");
        assert_eq!(strip_references("${VAR-default}x"), "defaultx");
        assert_eq!(strip_references("${VAR:-}"), "");
        assert_eq!(strip_references("${VAR:?must be set}"), "");
        assert_eq!(fallback_literals("a ${A:-x} ${B} ${C-y}"), ["x", "y"]);
        assert_eq!(strip_references("${input:gh}"), "");
        assert_eq!(strip_references("price $5"), "price $5");
        assert_eq!(strip_references("a:$${PASS}@h"), "a:@h");
        assert!(!has_reference("plain"));
        assert_eq!(strip_references("a ${open $B"), "a ${open ");
        assert_eq!(strip_references("é${X}ü$9"), "éü$9");
        assert_eq!(strip_references("{env:Y"), "{env:Y");
    }

    /// Needles inside, overlapping and beside each other's matches are all found: a
    /// leftmost search reports `sk-ant-` and not the `sk-` it starts with, nor a `://`
    /// that starts inside `hooks.slack.com/services/`-like runs.
    #[test]
    fn every_needle_is_found_inside_overlapping_matches() {
        for text in [
            "sk-ant-x",
            "a task-list",
            "xsk-ant-sk_live_",
            "eyJ://eyJ",
            "-----BEGIN -----BEGIN",
            "ghp_gho_ghu_",
            "AGE-SECRET-KEY-1",
            "",
            "plain prose",
        ] {
            let bytes = text.as_bytes();
            assert_eq!(
                EXACT_NEEDLES.present(bytes),
                EXACT_NEEDLES.each_alone(bytes),
                "{text}"
            );
        }
        let lower = b"sharedaccesskey=x;password=y bearer basic pwd=";
        assert_eq!(
            LOWER_NEEDLES.present(lower),
            LOWER_NEEDLES.each_alone(lower)
        );
        assert_eq!(LOWER_NEEDLES.present(lower).count_ones(), 5);
        assert!(
            CredentialScan::for_text("x\nAuthorization: Bearer abc\n").rules[1],
            "`bearer ` is looked for in the lowercased text"
        );
    }

    /// Eight bytes at a time, every byte value at every position of a word and in the
    /// tail is lowercased as `to_ascii_lowercase` does.
    #[test]
    fn lowercasing_by_words_is_ascii_lowercasing() {
        let every: Vec<u8> = (0..=255).collect();
        for shift in 0..9 {
            let text = &every[shift..];
            assert_eq!(
                ascii_lowercase(text),
                text.to_ascii_lowercase(),
                "from {shift}"
            );
        }
        proptest::proptest!(|(text in proptest::collection::vec(proptest::num::u8::ANY, 0..64))| {
            proptest::prop_assert_eq!(ascii_lowercase(&text), text.to_ascii_lowercase());
        });
    }

    /// Texts made of needle pieces, whole needles and other bytes, run together so that
    /// needles overlap, nest and cross: the one pass finds exactly the needles that the
    /// separate searches find.
    #[test]
    fn one_pass_finds_what_separate_searches_find() {
        use proptest::prelude::*;
        let pieces: Vec<String> = (EXACT_NEEDLES.needles.iter())
            .chain(&LOWER_NEEDLES.needles)
            .flat_map(|n| {
                let n = String::from_utf8_lossy(n).into_owned();
                let half = n.len() / 2;
                [n.clone(), n[..half].to_owned(), n[half..].to_owned()]
            })
            .chain(["x", " ", "-", "_", "/", ":", "=", "a"].map(str::to_owned))
            .collect();
        let text = proptest::collection::vec(proptest::sample::select(pieces), 0..24)
            .prop_map(|parts| parts.concat());
        proptest!(ProptestConfig::with_cases(2000), |(text in text)| {
            for set in [&*EXACT_NEEDLES, &*LOWER_NEEDLES] {
                prop_assert_eq!(set.present(text.as_bytes()), set.each_alone(text.as_bytes()));
            }
        });
    }
}
