//! SHA-256 digests: the validated [`Sha256`] value, hashing helpers and the lenient-shape,
//! strict-content parser of `.sha256` sidecars.

use std::fmt;
use std::io::Read;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256 as Hasher};

use crate::error::{ProvenanceError, Result};

/// Each byte's value as a lowercase hex digit; `0xFF` for every other byte.
const HEX: [u8; 256] = {
    let mut table = [0xFF; 256];
    let mut d = 0;
    while d < 10 {
        table[(b'0' + d) as usize] = d;
        d += 1;
    }
    let mut d = 0;
    while d < 6 {
        table[(b'a' + d) as usize] = 10 + d;
        d += 1;
    }
    table
};

/// A SHA-256 digest, always 64 lowercase hex digits when shown or serialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Sha256([u8; 32]);

impl Sha256 {
    /// Parses 64 lowercase hex digits; `origin` names where the value came from in errors.
    pub fn parse(value: &str, origin: &str) -> Result<Self> {
        let digits = value.as_bytes();
        let mut out = [0u8; 32];
        // One pass through a table: a no-op apply at 10x processkit parses about 50,000
        // digests (marker, stat cache, store index), and checking then decoding them with
        // `hex` was a tenth of its time.
        let mut invalid = digits.len() != 64;
        if !invalid {
            for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
                let (hi, lo) = (HEX[usize::from(pair[0])], HEX[usize::from(pair[1])]);
                invalid |= (hi | lo) > 15;
                *byte = (hi << 4) | (lo & 15);
            }
        }
        if invalid {
            return Err(ProvenanceError::InvalidDigest {
                origin: origin.to_owned(),
                value: value.chars().take(80).collect(),
            });
        }
        Ok(Self(out))
    }

    /// Digest of a byte slice.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Hasher::digest(bytes).into())
    }

    /// Digest of everything a reader yields.
    pub fn of_reader(reader: impl Read) -> std::io::Result<Self> {
        Self::of_reader_with(reader, &mut vec![0u8; 64 * 1024])
    }

    /// Digest of everything a reader yields, read through `buf` (a caller hashing many
    /// files keeps one buffer instead of allocating and zeroing one per file).
    pub fn of_reader_with(mut reader: impl Read, buf: &mut [u8]) -> std::io::Result<Self> {
        let mut hasher = Hasher::new();
        loop {
            let n = match reader.read(buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            hasher.update(&buf[..n]);
        }
        Ok(Self(hasher.finalize().into()))
    }

    /// Digest of a file's contents.
    pub fn of_file(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = fs_err::File::open(path).map_err(|e| ProvenanceError::io("open", path, e))?;
        Self::of_reader(file).map_err(|e| ProvenanceError::io("read", path, e))
    }

    /// The digest whose raw bytes are `bytes` (computed elsewhere, for example by the
    /// skill review's one pass over a skill).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex form.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The 64 lowercase hex digits as ASCII bytes, on the stack: for the records that
    /// write a digest per installed file (17,000 at 10x processkit) without a `String`
    /// each.
    pub fn hex_digits(&self) -> [u8; 64] {
        let mut hex = [0_u8; 64];
        // 32 bytes always fit in 64 digits.
        let _ = hex::encode_to_slice(self.0, &mut hex);
        hex
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(std::str::from_utf8(&self.hex_digits()).unwrap_or_default())
    }
}

impl From<Sha256> for String {
    fn from(d: Sha256) -> Self {
        d.to_hex()
    }
}

impl TryFrom<String> for Sha256 {
    type Error = ProvenanceError;
    fn try_from(value: String) -> Result<Self> {
        Self::parse(&value, "a serialised digest")
    }
}

/// A streaming hasher that also counts bytes.
#[derive(Default)]
pub(crate) struct Counter {
    hasher: Hasher,
    pub(crate) bytes: u64,
}

impl Counter {
    pub(crate) fn update(&mut self, data: &[u8]) {
        self.hasher.update(data);
        self.bytes += data.len() as u64;
    }
    pub(crate) fn finish(self) -> Sha256 {
        Sha256(self.hasher.finalize().into())
    }
}

/// Parses a `.sha256` sidecar: either a bare digest or a `sha256sum` line
/// (`<digest>  <name>`). When a file name follows it must equal `archive_name`
/// (a leading `*`, sha256sum's binary marker, is accepted).
pub fn parse_sidecar(text: &str, archive_name: &str, what: &str) -> Result<Sha256> {
    let err = |reason: String| ProvenanceError::Sidecar {
        what: what.to_owned(),
        reason,
    };
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let line = lines
        .next()
        .ok_or_else(|| err("the file is empty".to_owned()))?;
    if lines.next().is_some() {
        return Err(err("expected exactly one line".to_owned()));
    }
    let line = line.trim();
    let (digest, rest) = match line.find(char::is_whitespace) {
        Some(i) => (&line[..i], line[i..].trim()),
        None => (line, ""),
    };
    let digest = Sha256::parse(digest, what).map_err(|_| {
        err(format!(
            "first token `{}` is not 64 lowercase hex digits",
            digest.chars().take(80).collect::<String>()
        ))
    })?;
    let name = rest.strip_prefix('*').unwrap_or(rest);
    if !name.is_empty() && name != archive_name {
        return Err(err(format!("it names `{name}`, not `{archive_name}`")));
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "676b8c1e8a3a2b9f0e4c9d2c1b0a99887766554433221100ffeeddccbbaa0011";

    #[test]
    fn parses_and_shows_digests() {
        let d = Sha256::parse(D, "test").unwrap();
        assert_eq!(d.to_string(), D);
        assert!(Sha256::parse(&D.to_uppercase(), "t").is_err());
        assert!(Sha256::parse(&D[1..], "t").is_err());
        assert!(Sha256::parse(&format!("{}g", &D[1..]), "t").is_err());
        // Every byte value round-trips, in either digit of a pair.
        for first in [0u8, 32, 64, 96, 128, 160, 192, 224] {
            let bytes: [u8; 32] = std::array::from_fn(|i| first + u8::try_from(i).unwrap());
            let d = Sha256(bytes);
            assert_eq!(Sha256::parse(&d.to_hex(), "t").unwrap(), d);
        }
        // Any character but `0-9a-f`, at either end and in either digit of a pair, is
        // refused.
        for c in (0u8..128).map(char::from) {
            if c.is_ascii_digit() || ('a'..='f').contains(&c) {
                continue;
            }
            for at in [0, 1, 62, 63] {
                let mut v: Vec<char> = D.chars().collect();
                v[at] = c;
                let v: String = v.into_iter().collect();
                assert!(Sha256::parse(&v, "t").is_err(), "{v:?}");
            }
        }
        // Bytes past ASCII, at the right length (`é` is two bytes standing for two digits).
        for at in [0, 31, 62] {
            let v = format!("{}é{}", &D[..at], &D[at + 2..]);
            assert_eq!(v.len(), 64);
            assert!(Sha256::parse(&v, "t").is_err(), "{v:?}");
        }
        assert_eq!(
            Sha256::of(b"").to_hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn sidecar_shapes() {
        let name = "processkit-v1.0.0.tar.gz";
        assert_eq!(
            parse_sidecar(&format!("{D}\n"), name, "s")
                .unwrap()
                .to_hex(),
            D
        );
        assert_eq!(
            parse_sidecar(&format!("{D}  {name}\n"), name, "s")
                .unwrap()
                .to_hex(),
            D
        );
        assert_eq!(
            parse_sidecar(&format!("{D} *{name}"), name, "s")
                .unwrap()
                .to_hex(),
            D
        );
        for bad in [
            String::new(),
            format!("{D}  other.tar.gz\n"),
            format!("{}  {name}\n", D.to_uppercase()),
            format!("{D}\n{D}\n"),
            "deadbeef\n".to_owned(),
        ] {
            let e = parse_sidecar(&bad, name, "s").unwrap_err();
            assert!(matches!(e, ProvenanceError::Sidecar { .. }), "{bad:?}: {e}");
        }
    }
}
