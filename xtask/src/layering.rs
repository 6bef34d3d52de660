//! The layering check: which crate may depend on which.
//!
//! The rules mirror `ARCHITECTURE.md`. They are checked against `cargo metadata`, so a
//! new dependency that breaks a layer fails CI with the rule it broke.

use std::process::Command;

use serde_json::Value;

/// Internal crates each product crate may depend on (normal dependencies).
const ALLOWED_INTERNAL: &[(&str, &[&str])] = &[
    ("aibox-config", &[]),
    ("aibox-devcontainer", &["aibox-config"]),
    ("aibox-mcp-registration", &["aibox-config"]),
    ("aibox-provenance", &["aibox-config"]),
    ("aibox-policy", &["aibox-config"]),
    ("aibox-skill-review", &["aibox-config"]),
    ("aibox-runtime", &["aibox-config", "aibox-devcontainer"]),
    (
        "aibox-engine",
        &[
            "aibox-config",
            "aibox-devcontainer",
            "aibox-mcp-registration",
            "aibox-provenance",
            "aibox-policy",
            "aibox-runtime",
            "aibox-skill-review",
        ],
    ),
    (
        "aibox-cli",
        &[
            "aibox-config",
            "aibox-engine",
            "aibox-runtime",
            "aibox-policy",
            "aibox-provenance",
            "aibox-mcp-registration",
        ],
    ),
    ("aibox-test-support", &["aibox-config"]),
];

/// Third-party crates a product crate must never depend on directly.
const FORBIDDEN_EXTERNAL: &[(&str, &[&str])] = &[
    (
        "aibox-config",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    (
        "aibox-policy",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    (
        "aibox-skill-review",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    (
        "aibox-devcontainer",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    (
        "aibox-mcp-registration",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    (
        "aibox-runtime",
        &["ureq", "tar", "flate2", "clap", "reqwest"],
    ),
    ("aibox-provenance", &["clap", "reqwest"]),
    ("aibox-engine", &["clap", "reqwest"]),
];

/// Runs the check.
pub fn check() -> Result<(), String> {
    let out = Command::new(crate::cargo())
        .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let meta: Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("bad cargo metadata: {e}"))?;
    let problems = violations(&meta);
    if problems.is_empty() {
        crate::say("layering: ok");
        Ok(())
    } else {
        for p in &problems {
            crate::say(&format!("layering: {p}"));
        }
        Err(format!("{} layering violation(s)", problems.len()))
    }
}

fn violations(meta: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let packages = meta["packages"].as_array().cloned().unwrap_or_default();
    for pkg in &packages {
        let Some(name) = pkg["name"].as_str() else {
            continue;
        };
        if name == "xtask" {
            continue;
        }
        let Some((_, allowed)) = ALLOWED_INTERNAL.iter().find(|(n, _)| *n == name) else {
            problems.push(format!(
                "{name} is not listed in the layering rules (xtask/src/layering.rs)"
            ));
            continue;
        };
        let forbidden = FORBIDDEN_EXTERNAL
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(&[][..], |(_, f)| *f);
        for dep in pkg["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            let is_dev = dep["kind"].as_str() == Some("dev");
            if dep_name.starts_with("aibox-") {
                if dep_name == "aibox-test-support" {
                    if !is_dev {
                        problems.push(format!(
                            "{name} uses aibox-test-support outside dev-dependencies"
                        ));
                    }
                } else if !is_dev && !allowed.contains(&dep_name) {
                    problems.push(format!("{name} must not depend on {dep_name}"));
                }
            } else if !is_dev && forbidden.contains(&dep_name) {
                problems.push(format!("{name} must not depend on {dep_name}"));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn meta(deps: &[(&str, &str, Option<&str>)]) -> serde_json::Value {
        let mut packages: Vec<serde_json::Value> = Vec::new();
        for (pkg, dep, kind) in deps {
            packages.push(json!({
                "name": pkg,
                "dependencies": [{ "name": dep, "kind": kind }],
            }));
        }
        json!({ "packages": packages })
    }

    #[test]
    fn allowed_arrows_pass() {
        let m = meta(&[
            ("aibox-engine", "aibox-config", None),
            ("aibox-config", "insta", Some("dev")),
            ("aibox-provenance", "ureq", None),
            ("aibox-cli", "clap", None),
        ]);
        assert!(super::violations(&m).is_empty());
    }

    #[test]
    fn forbidden_arrows_are_named() {
        let m = meta(&[
            ("aibox-config", "ureq", None),
            ("aibox-policy", "clap", None),
            ("aibox-config", "aibox-engine", None),
            ("aibox-engine", "aibox-test-support", None),
            ("aibox-newcrate", "serde", None),
        ]);
        let problems = super::violations(&m);
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(
            problems
                .iter()
                .any(|p| p == "aibox-config must not depend on ureq")
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("aibox-newcrate is not listed"))
        );
    }
}
