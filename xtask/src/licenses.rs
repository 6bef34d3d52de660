//! `cargo xtask licenses`: every crate built for the release's Linux targets carries a
//! licence expression that `deny.toml`'s `[licenses]` allow list (or that crate's own
//! exception there) satisfies: the rule the release gate's cargo-deny check enforces.
//!
//! Why a check of our own beside cargo-deny: cargo-deny runs only in the release gate
//! (installing it costs a CI run about ten minutes of compiling), so a dependency with a
//! licence outside the list was found at release time, not when it came in (mdBook's
//! HTML renderer brought Font Awesome's CC-BY-4.0 into xtask that way). This runs on every
//! `cargo xtask ci`. It reads the expressions as cargo-deny does (the `spdx` crate, lax
//! parsing for crates' `license` fields), but not licence files: a crate without a
//! `license` field is reported, for the gate's cargo-deny to judge its file.

use serde_json::Value;

/// The release's targets (`cargo xtask release-gate` builds Linux binaries only).
const PLATFORMS: [&str; 2] = ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"];

/// `deny.toml`'s `[licenses]`: the allowed licences, and per crate the extra ones allowed
/// for it alone.
struct Policy {
    allow: Vec<spdx::Licensee>,
    exceptions: Vec<(String, Vec<spdx::Licensee>)>,
}

/// Reads the allow list and the exceptions of `deny.toml`'s text.
fn policy(deny_toml: &str) -> Result<Policy, String> {
    let doc: toml::Value = toml::from_str(deny_toml).map_err(|e| format!("deny.toml: {e}"))?;
    let licenses = doc
        .get("licenses")
        .ok_or("deny.toml has no [licenses] table")?;
    let list = |v: Option<&toml::Value>| -> Result<Vec<spdx::Licensee>, String> {
        v.and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .map(|l| {
                let text = l
                    .as_str()
                    .ok_or("deny.toml: a licence that is not a string")?;
                spdx::Licensee::parse(text).map_err(|e| format!("deny.toml: `{text}`: {e}"))
            })
            .collect()
    };
    let mut exceptions = Vec::new();
    for e in licenses
        .get("exceptions")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = e
            .get("crate")
            .or_else(|| e.get("name"))
            .and_then(toml::Value::as_str)
            .ok_or("deny.toml: a [licenses] exception without `crate`")?;
        exceptions.push((name.to_owned(), list(e.get("allow"))?));
    }
    Ok(Policy {
        allow: list(licenses.get("allow"))?,
        exceptions,
    })
}

/// A crate as `cargo metadata` lists it: name, version, licence expression.
struct Package {
    name: String,
    version: String,
    license: Option<String>,
}

/// Why each package the policy does not allow is refused (empty: all allowed).
fn violations(policy: &Policy, packages: &[Package]) -> Vec<String> {
    packages
        .iter()
        .filter_map(|p| Some(format!("{} {}: {}", p.name, p.version, refusal(policy, p)?)))
        .collect()
}

/// Why the policy refuses `p`; `None` when it allows it.
fn refusal(policy: &Policy, p: &Package) -> Option<String> {
    let Some(text) = p.license.as_deref() else {
        return Some(
            "no `license` field (the release gate's cargo-deny reads its licence file; add a \
             [licenses.clarify] entry to deny.toml if it cannot)"
                .to_owned(),
        );
    };
    let expr = match spdx::Expression::parse_mode(text, spdx::ParseMode::LAX) {
        Ok(expr) => expr,
        Err(e) => return Some(format!("licence `{text}` does not parse: {e}")),
    };
    let extra = policy
        .exceptions
        .iter()
        .filter(|(name, _)| *name == p.name)
        .flat_map(|(_, allow)| allow);
    let allowed: Vec<&spdx::Licensee> = policy.allow.iter().chain(extra).collect();
    (!expr.evaluate(|req| allowed.iter().any(|l| l.satisfies(req)))).then(|| {
        format!(
            "licence `{text}` is not allowed by deny.toml's [licenses] (allow it there, for \
             this crate alone under `exceptions` if it is build tooling, or drop the \
             dependency)"
        )
    })
}

/// The packages `cargo metadata` resolves for [`PLATFORMS`] (dependencies of every kind,
/// as cargo-deny counts them).
fn packages() -> Result<Vec<Package>, String> {
    let args: Vec<&str> = PLATFORMS
        .iter()
        .flat_map(|p| ["--filter-platform", p])
        .collect();
    let meta = crate::cargo_metadata(&args)?;
    let text = |p: &Value, key: &str| p[key].as_str().map(ToOwned::to_owned);
    Ok(meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| Package {
            name: text(p, "name").unwrap_or_default(),
            version: text(p, "version").unwrap_or_default(),
            license: text(p, "license"),
        })
        .collect())
}

/// The check `cargo xtask licenses` (and `cargo xtask ci`) runs in the workspace root.
pub fn check() -> Result<(), String> {
    let policy = policy(&fs_err::read_to_string("deny.toml").map_err(|e| e.to_string())?)?;
    let packages = packages()?;
    let bad = violations(&policy, &packages);
    if bad.is_empty() {
        crate::say(&format!(
            "licenses: ok ({} crates for {}, deny.toml's allow list)",
            packages.len(),
            PLATFORMS.join(" and ")
        ));
        return Ok(());
    }
    for b in &bad {
        crate::say(&format!("licenses: {b}"));
    }
    Err(format!(
        "{} crate(s) with a licence deny.toml does not allow",
        bad.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DENY: &str = r#"
[licenses]
allow = ["MIT", "Apache-2.0", "Apache-2.0 WITH LLVM-exception", "Unicode-3.0"]
exceptions = [{ crate = "font-awesome-as-a-crate", allow = ["CC-BY-4.0"] }]
"#;

    fn pkg(name: &str, license: Option<&str>) -> Package {
        Package {
            name: name.to_owned(),
            version: "1.0.0".to_owned(),
            license: license.map(ToOwned::to_owned),
        }
    }

    #[test]
    fn expressions_are_judged_as_cargo_deny_judges_them() {
        let p = policy(DENY).unwrap();
        let ok = [
            pkg("a", Some("MIT OR Apache-2.0")),
            pkg("b", Some("MIT/Apache-2.0")), // the old form crates still carry
            pkg("c", Some("(MIT OR Apache-2.0) AND Unicode-3.0")),
            pkg("d", Some("Apache-2.0 WITH LLVM-exception")),
            pkg("e", Some("GPL-3.0 OR MIT")),
            pkg("font-awesome-as-a-crate", Some("CC-BY-4.0 AND MIT")),
        ];
        assert!(violations(&p, &ok).is_empty(), "{:?}", violations(&p, &ok));
        let bad = [
            pkg("f", Some("GPL-3.0")),
            pkg("g", Some("MIT AND CC-BY-4.0")), // the exception is that crate's alone
            pkg("h", None),
            pkg("i", Some("MIT OR")),
        ];
        let found = violations(&p, &bad);
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(found[0].starts_with("f 1.0.0: licence `GPL-3.0` is not allowed"));
        assert!(found[1].starts_with("g 1.0.0:"));
        assert!(found[2].contains("no `license` field"));
        assert!(found[3].contains("does not parse"));
    }

    /// The repository's own deny.toml reads, and mdBook's renderer is allowed its icons'
    /// licence there (without the exception the release gate's cargo-deny fails).
    #[test]
    fn the_repository_policy_reads() {
        let text =
            fs_err::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deny.toml")).unwrap();
        let p = policy(&text).unwrap();
        assert!(p.allow.len() >= 5);
        let fa = [pkg("font-awesome-as-a-crate", Some("CC-BY-4.0 AND MIT"))];
        assert!(violations(&p, &fa).is_empty());
    }

    #[test]
    fn a_broken_policy_is_an_error() {
        assert!(policy("[graph]\n").is_err());
        assert!(policy("[licenses]\nallow = [\"Not A Licence(\"]\n").is_err());
        assert!(policy("[licenses]\nexceptions = [{ allow = [\"MIT\"] }]\n").is_err());
    }
}
