//! Quoting for the three languages the generators write: YAML (with Compose
//! interpolation on top), Dockerfile instructions and POSIX shell.
//!
//! Every function is total: any input string becomes a token that the reader turns
//! back into exactly that string.

use std::fmt::Write as _;

/// A YAML double-quoted scalar that any YAML 1.1 or 1.2 parser reads back as `s`.
///
/// Double quotes are the only YAML style that can carry every character, and they never
/// turn a value into a boolean, number or null (`"yes"`, `"1e3"`, `"~"` stay strings).
pub fn yaml(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // Other C0/C1 controls, DEL, and the Unicode line/paragraph separators and
            // BOM, which some parsers treat as line breaks or strip.
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A Compose value whose `$` is taken literally: Compose interpolates `${VAR}` and
/// `$VAR` in every string of the file, and `$$` is its escape for one `$`.
pub fn compose_literal(s: &str) -> String {
    s.replace('$', "$$")
}

/// `yaml(compose_literal(s))`: a string that reaches the container unchanged.
pub fn compose_yaml(s: &str) -> String {
    yaml(&compose_literal(s))
}

/// A double-quoted Dockerfile word (for `LABEL` values): the builder unescapes `\"`, `\\`
/// and `\$`, and would otherwise substitute `$VAR`. The caller rejects newlines.
pub fn dockerfile(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if matches!(c, '"' | '\\' | '$') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A single-quoted POSIX shell word.
pub fn shell(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_quoting_survives_hostile_values() {
        let hostile = [
            "",
            "plain",
            "with \"double\" and 'single' quotes",
            "key: value # not a comment",
            "#leading hash",
            "line one\nline two\r\n\ttabbed",
            "${HOME} and $USER",
            "back\\slash\\",
            "yes",
            "no",
            "on",
            "null",
            "~",
            "1e3",
            "0o17",
            "- dash",
            "[flow, seq]",
            "{flow: map}",
            "&anchor *alias !tag %directive @ `",
            "bell\u{7} del\u{7f} nbsp\u{a0} ls\u{2028} bom\u{feff} ümlaut 🚀",
            "   padded   ",
        ];
        for value in hostile {
            let doc = format!("k: {}\n", yaml(value));
            let parsed: serde_norway::Value = serde_norway::from_str(&doc).unwrap();
            assert_eq!(
                parsed["k"].as_str(),
                Some(value),
                "round trip of {value:?} via {doc}"
            );
        }
    }

    #[test]
    fn compose_literal_doubles_dollars() {
        assert_eq!(compose_literal("a$b${C}$$"), "a$$b$${C}$$$$");
        assert_eq!(compose_yaml("p$ss"), "\"p$$ss\"");
    }

    #[test]
    fn dockerfile_quoting_escapes_quotes_backslashes_and_dollars() {
        assert_eq!(dockerfile(r#"a "b" \c $D"#), r#""a \"b\" \\c \$D""#);
    }

    #[test]
    fn shell_quoting_handles_single_quotes() {
        assert_eq!(shell("it's"), r"'it'\''s'");
        assert_eq!(shell("$(rm -rf /)"), "'$(rm -rf /)'");
    }
}
