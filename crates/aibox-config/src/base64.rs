//! Standard base64 decoding, for the few places that read it (HTTP `Basic` credentials in
//! the secret rules, SRI digests in the tool catalog): too small a need for a dependency.

/// Standard base64, padded or not; `None` for anything else.
pub fn decode(s: &str) -> Option<Vec<u8>> {
    let digits = s.trim_end_matches('=');
    if s.len() - digits.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    let mut acc = 0_u32;
    let mut bits = 0;
    for b in digits.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_padded_and_unpadded_and_refuses_the_rest() {
        assert_eq!(decode("Zm9vOmJhcg==").unwrap(), b"foo:bar");
        assert_eq!(decode("Zm9vOmJhcg").unwrap(), b"foo:bar");
        assert_eq!(decode("").unwrap(), b"");
        assert!(decode("Zm9v!").is_none());
        assert!(decode("Zm9v===").is_none());
    }
}
