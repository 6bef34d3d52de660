//! JSONC as the harnesses and the Dev Containers CLI read it: `//` and `/* */` comments
//! and trailing commas, nothing looser. One definition, so the MCP writers and the policy
//! gate accept exactly the same files.

/// Parse options for `jsonc-parser` that match what the harnesses accept.
#[must_use]
pub fn parse_options() -> jsonc_parser::ParseOptions {
    jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}
