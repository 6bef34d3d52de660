//! Small text helpers shared by the gates: locating lines, JSONC parsing, references.

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

/// A parse failure of a JSONC text: message and 1-based line.
pub(crate) struct JsoncError {
    pub message: String,
    pub line: usize,
}

/// Parses JSONC (`//` and `/* */` comments, trailing commas) with `jsonc-parser`.
pub(crate) fn parse_jsonc(text: &str) -> Result<serde_json::Value, JsoncError> {
    let options = aibox_config::jsonc::parse_options();
    jsonc_parser::parse_to_serde_value(text, &options).map_err(|e| JsoncError {
        message: e.kind().to_string(),
        line: e.line_display(),
    })
}

/// True for a variable name such as `GH_TOKEN`.
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(crate) use aibox_config::secret_rules::has_reference;

/// Shannon entropy of `s` in bits per character (the shared rule).
pub(crate) use aibox_config::secret_rules::entropy;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonc_comments_and_trailing_commas_are_accepted() {
        let text = "{\n  // c\n  \"a\": \"x//y\", /* b\n */\n  \"b\": [1, 2,],\n}\n";
        let v = parse_jsonc(text).ok().unwrap();
        assert_eq!(v["a"], "x//y");
        assert_eq!(v["b"], serde_json::json!([1, 2]));
        let err = parse_jsonc("{\n  \"a\": 1,,\n}").err().unwrap();
        assert_eq!(err.line, 2, "{}", err.message);
    }

    #[test]
    fn entropy_orders_random_above_repetitive() {
        assert!(entropy("aaaaaaaaaaaaaaaaaaaa") < 1.0);
        assert!(entropy("Q7vX2mL9pR4tZ8wK1nB6") > 4.0);
    }
}
