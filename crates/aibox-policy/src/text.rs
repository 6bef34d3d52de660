//! Small text helpers shared by the gates: locating lines, JSONC comments, references.

/// 1-based number of the first line that contains `needle`, searching from `from_line`
/// (1-based) onwards and then from the start.
pub(crate) fn line_of(text: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    text.lines().position(|l| l.contains(needle)).map(|i| i + 1)
}

/// 1-based line of the first line containing all of `needles`, falling back to the first
/// line containing the first needle.
pub(crate) fn line_of_all(text: &str, needles: &[&str]) -> Option<usize> {
    text.lines()
        .position(|l| needles.iter().all(|n| l.contains(n)))
        .map(|i| i + 1)
        .or_else(|| needles.first().and_then(|n| line_of(text, n)))
}

/// Removes `//` and `/* */` comments and trailing commas from JSONC, keeping line breaks
/// so that line numbers stay valid.
pub(crate) fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '/' if chars.peek() == Some(&'/') => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                    }
                    if prev == '*' && n == '/' {
                        break;
                    }
                    prev = n;
                }
            }
            _ => out.push(c),
        }
    }
    remove_trailing_commas(&out)
}

fn remove_trailing_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            if c == '\\' && i + 1 < chars.len() {
                out.push(chars[i + 1]);
                i += 1;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if !matches!(next, Some('}' | ']')) {
                out.push(c);
            }
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// True for a variable name such as `GH_TOKEN`.
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Removes every variable reference (`${VAR}`, `${VAR:-default}`, `$VAR`, `{env:VAR}`,
/// `${env:VAR}`, `${input:id}`, `${localEnv:VAR}`, `${containerEnv:VAR}`, …) from `s`.
///
/// Linear in the length of `s`: every byte is looked at a bounded number of times (once
/// no `}` follows, no later `${` can close either).
pub(crate) fn strip_references(s: &str) -> String {
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
pub(crate) fn has_reference(s: &str) -> bool {
    strip_references(s) != s
}

/// Shannon entropy of `s` in bits per character.
pub(crate) fn entropy(s: &str) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonc_comments_and_trailing_commas_are_removed_keeping_lines() {
        let text = "{\n  // c\n  \"a\": \"x//y\", /* b\n */\n  \"b\": [1, 2,],\n}\n";
        let clean = strip_jsonc(text);
        assert_eq!(clean.lines().count(), text.lines().count());
        let v: serde_json::Value = serde_json::from_str(&clean).unwrap();
        assert_eq!(v["a"], "x//y");
        assert_eq!(v["b"], serde_json::json!([1, 2]));
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

    #[test]
    fn entropy_orders_random_above_repetitive() {
        assert!(entropy("aaaaaaaaaaaaaaaaaaaa") < 1.0);
        assert!(entropy("Q7vX2mL9pR4tZ8wK1nB6") > 4.0);
    }
}
