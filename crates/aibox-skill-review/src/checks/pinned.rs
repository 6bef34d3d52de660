//! Point 6: an immutable, pinned source.
//!
//! A release archive with a verified SHA-256 and a concrete version, or git pinned to a
//! 40-hex commit, passes; branches, tags, `latest`, ranges and unverified archives fail;
//! a local directory reviewed as is warns. The skill's `mcp-config.json` must match the
//! manifest's `per_skill` digest when the caller knows it.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::Skill;
use crate::context::{ReviewContext, SkillOrigin};
use crate::report::Findings;

const FLOATING: [&str; 6] = ["main", "master", "head", "latest", "trunk", "develop"];

pub(crate) fn check(skill: &Skill<'_>, ctx: &ReviewContext) -> Findings {
    let mut f = Findings::default();
    match &ctx.origin {
        SkillOrigin::Release {
            source,
            version,
            sha256,
            verified,
        } => {
            let lower = version.to_ascii_lowercase();
            if FLOATING.contains(&lower.as_str()) || is_range(version) {
                f.fail("", None, format!("release `{version}` from `{source}` is a floating reference, not a concrete version"));
            }
            match sha256 {
                Some(d) if is_hex(d, 64) && *verified => {
                    f.note("", None, format!("release {version} from `{source}` with verified SHA-256 {d}"));
                }
                Some(d) if is_hex(d, 64) => f.fail("", None, format!("release {version} from `{source}`: SHA-256 {d} is recorded but was not verified")),
                Some(d) => f.fail("", None, format!("release {version} from `{source}`: `{d}` is not a SHA-256 digest")),
                None => f.fail("", None, format!("release {version} from `{source}` has no locked SHA-256")),
            }
        }
        SkillOrigin::Git { url, reference } => {
            if is_hex(reference, 40) {
                f.note(
                    "",
                    None,
                    format!("git `{url}` pinned to commit {reference}"),
                );
            } else {
                f.fail(
                    "",
                    None,
                    format!(
                        "git `{url}` at `{reference}` is a movable reference; pin a 40-hex commit"
                    ),
                );
            }
        }
        SkillOrigin::LocalPath { path } => {
            f.warn(
                "",
                None,
                format!("local directory `{path}` reviewed as it is; nothing pins its content"),
            );
        }
        SkillOrigin::Unknown => f.fail(
            "",
            None,
            "the skill's origin is unknown, so nothing pins its content",
        ),
    }
    if let Some(expected) = &ctx.expected_config_sha256 {
        const FILE: &str = "mcp/mcp-config.json";
        match skill
            .entry(FILE)
            .and_then(|e| e.text())
            .map(serde_json::from_str::<Value>)
        {
            Some(Ok(doc)) => {
                let digest = hex::encode(Sha256::digest(canonical_json(&doc).as_bytes()));
                if digest.eq_ignore_ascii_case(expected) {
                    f.note(FILE, None, "matches the manifest's per-skill digest");
                } else {
                    f.fail(
                        FILE,
                        None,
                        format!("canonical digest {digest} differs from the manifest's {expected}"),
                    );
                }
            }
            Some(Err(_)) => f.fail(
                FILE,
                None,
                "cannot be compared with the manifest: not valid JSON",
            ),
            None => f.fail(
                FILE,
                None,
                "the manifest lists a per-skill digest but the file is missing",
            ),
        }
    }
    f
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.chars().all(|c| c.is_ascii_hexdigit())
}

fn is_range(v: &str) -> bool {
    v.contains(['^', '~', '*', '>', '<', ' ', ','])
        || v.split('.').any(|p| p.eq_ignore_ascii_case("x"))
}

/// JSON with keys sorted, no whitespace, non-ASCII as raw UTF-8 (the manifest's hash input).
pub(crate) use aibox_config::jsonc::canonical_json;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form() {
        let v: Value =
            serde_json::from_str("{ \"b\": [1, {\"z\": 1, \"a\": \"é\"}], \"a\": null }").unwrap();
        assert_eq!(
            canonical_json(&v),
            "{\"a\":null,\"b\":[1,{\"a\":\"é\",\"z\":1}]}"
        );
    }

    #[test]
    fn ranges() {
        assert!(is_range("^1.2") && is_range("1.x") && is_range(">=1") && !is_range("v0.28.3"));
    }
}
