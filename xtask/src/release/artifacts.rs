//! Release binaries: portable Linux builds through cargo-zigbuild, each named for the target
//! it really is, with its glibc floor checked from the binary's own symbol versions.
//!
//! The release targets are listed here. A target whose standard library is not installed
//! (`rustup target list --installed`) is not built and is recorded in the evidence as such,
//! with the reason; nothing is ever copied under another target's name.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A release target.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The Rust target triple (the artifact's name suffix).
    pub triple: &'static str,
    /// The newest glibc version the binary may require (`None` for static targets).
    pub glibc_floor: Option<&'static str>,
}

/// Every target aibox releases for.
pub const TARGETS: &[Target] = &[
    Target {
        triple: "x86_64-unknown-linux-gnu",
        glibc_floor: Some("2.28"),
    },
    Target {
        triple: "aarch64-unknown-linux-gnu",
        glibc_floor: Some("2.28"),
    },
    Target {
        triple: "x86_64-unknown-linux-musl",
        glibc_floor: None,
    },
    Target {
        triple: "aarch64-unknown-linux-musl",
        glibc_floor: None,
    },
];

impl Target {
    /// The file name of this target's artifact.
    pub fn artifact_name(&self) -> String {
        format!("aibox-{}", self.triple)
    }

    /// cargo-zigbuild's target spelling (`triple.glibc` pins the glibc floor).
    pub fn zig_target(&self) -> String {
        self.glibc_floor.map_or_else(
            || self.triple.to_owned(),
            |g| format!("{}.{g}", self.triple),
        )
    }
}

/// The outcome for one target.
#[derive(Debug)]
pub enum Built {
    /// Built and checked; the path of the binary in `target/`.
    Yes {
        /// The target.
        target: Target,
        /// The binary cargo produced.
        path: PathBuf,
        /// The highest `GLIBC_x.y` the binary references (`None` when it references none).
        max_glibc: Option<String>,
    },
    /// Not built, with the reason.
    No {
        /// The target.
        target: Target,
        /// Why.
        reason: String,
    },
}

/// Targets whose standard library rustup has installed.
pub fn installed_targets() -> Result<Vec<String>, String> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("cannot run rustup: {e}"))?;
    if !out.status.success() {
        return Err("`rustup target list --installed` failed".to_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect())
}

/// Targets aibox does not release at all, with the reason.
pub const NOT_RELEASED: &[(&str, &str)] = &[
    (
        "x86_64-apple-darwin",
        "macOS binaries are linked against Apple's SDK, which the Linux release machine does \
         not have; on a Mac, build from source (`cargo install --locked --git`)",
    ),
    (
        "aarch64-apple-darwin",
        "macOS binaries are linked against Apple's SDK, which the Linux release machine does \
         not have; on a Mac, build from source (`cargo install --locked --git`)",
    ),
    (
        "x86_64-pc-windows-msvc",
        "aibox drives Linux containers from a Unix shell; on Windows it runs inside WSL2, \
         where the Linux artifacts apply",
    ),
];

/// Why `target` cannot be built with the `installed` standard libraries, if it cannot.
fn not_installed(target: &Target, installed: &[String]) -> Option<String> {
    (!installed.iter().any(|t| t == target.triple)).then(|| {
        format!(
            "the Rust standard library for {} is not installed in this toolchain \
             (`rustup target list --installed` lists only {}; add it with \
             `rustup target add {}`)",
            target.triple,
            installed.join(", "),
            target.triple
        )
    })
}

/// What a release made on this machine would hold: `(triple, built, why)` for every
/// release target and every target never released.
pub fn target_plan(installed: &[String]) -> Vec<(String, bool, String)> {
    let mut plan: Vec<(String, bool, String)> = TARGETS
        .iter()
        .map(|t| match not_installed(t, installed) {
            Some(why) => (t.triple.to_owned(), false, why),
            None => (
                t.triple.to_owned(),
                true,
                t.glibc_floor.map_or_else(
                    || "static (musl), built with cargo-zigbuild".to_owned(),
                    |g| format!("glibc {g} floor, built with cargo-zigbuild"),
                ),
            ),
        })
        .collect();
    plan.extend(NOT_RELEASED.iter().map(|(t, why)| {
        (
            (*t).to_owned(),
            false,
            format!("not a release target: {why}"),
        )
    }));
    plan
}

/// Builds `aibox` for every buildable target with cargo-zigbuild (on `path`, the tools'
/// PATH) and checks each binary's glibc floor.
pub fn build_all(path_env: &str) -> Result<Vec<Built>, String> {
    let installed = installed_targets()?;
    let mut results = Vec::new();
    for target in TARGETS {
        if let Some(reason) = not_installed(target, &installed) {
            results.push(Built::No {
                target: *target,
                reason,
            });
            continue;
        }
        crate::say(&format!(
            "==> release build: cargo zigbuild --release --locked --package aibox-cli --target {}",
            target.zig_target()
        ));
        let started = std::time::Instant::now();
        let status = crate::cargo_command()
            .env("PATH", path_env)
            .args([
                "zigbuild",
                "--release",
                "--locked",
                "--package",
                "aibox-cli",
            ])
            .args(["--target", &target.zig_target()])
            .status()
            .map_err(|e| format!("cannot run cargo zigbuild: {e}"))?;
        crate::say(&format!(
            "<== release build {}: {:.1}s",
            target.triple,
            started.elapsed().as_secs_f64()
        ));
        if !status.success() {
            return Err(format!(
                "cargo zigbuild for {} failed ({status})",
                target.triple
            ));
        }
        let path = target_dir()
            .join(target.triple)
            .join("release")
            .join("aibox");
        let max_glibc = check_glibc_floor(&path, target.glibc_floor)?;
        results.push(Built::Yes {
            target: *target,
            path,
            max_glibc,
        });
    }
    Ok(results)
}

/// cargo's target directory (`CARGO_TARGET_DIR`, else `target`).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| PathBuf::from("target"), PathBuf::from)
}

/// Reads the binary's dynamic symbol versions with `objdump -T` and refuses one that needs
/// a glibc newer than `floor`; a static target (`floor` `None`) must be a static binary.
/// Returns the highest version found.
pub fn check_glibc_floor(bin: &Path, floor: Option<&str>) -> Result<Option<String>, String> {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(bin)
        .output()
        .map_err(|e| format!("cannot run objdump: {e}"))?;
    judge_linkage(
        bin,
        out.status.success(),
        &String::from_utf8_lossy(&out.stdout),
        &String::from_utf8_lossy(&out.stderr),
        floor,
    )
}

/// The verdict on one `objdump -T` run (split out so both linkages are tested on
/// objdump's real wording: a static binary is "not a dynamic object").
fn judge_linkage(
    bin: &Path,
    ok: bool,
    stdout: &str,
    stderr: &str,
    floor: Option<&str>,
) -> Result<Option<String>, String> {
    let static_binary = !ok && stderr.contains("not a dynamic object");
    match (floor, static_binary) {
        (None, true) => return Ok(None),
        (None, false) if ok => {
            return Err(format!(
                "{} is dynamically linked, but its target is a static (musl) one",
                bin.display()
            ));
        }
        (Some(_), true) => {
            return Err(format!(
                "{} is static, but its target is a glibc one",
                bin.display()
            ));
        }
        _ if !ok => {
            return Err(format!(
                "objdump -T {} failed: {}",
                bin.display(),
                stderr.trim()
            ));
        }
        _ => {}
    }
    let max = max_glibc(stdout);
    if let (Some(floor), Some(found)) = (floor, &max)
        && version_key(found) > version_key(floor)
    {
        return Err(format!(
            "{} needs GLIBC_{found}, above its stated floor {floor}",
            bin.display()
        ));
    }
    Ok(max)
}

/// The highest `GLIBC_x.y[.z]` symbol version in `objdump -T` output.
pub fn max_glibc(objdump: &str) -> Option<String> {
    objdump
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .max_by_key(|v| version_key(v))
        .map(str::to_owned)
}

fn version_key(v: &str) -> Vec<u32> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// Runs the binary's `--version` and compares it with the workspace version.
pub fn version_smoke(bin: &Path, version: &str) -> Result<(), String> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let got = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let want = format!("aibox {version}");
    crate::say(&format!("==> version smoke {}: {got}", bin.display()));
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "`{} --version` printed `{got}`, expected `{want}`",
            bin.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_glibc_version_is_read_from_objdump_output() {
        let text = "\
0000000000000000      DF *UND*\t0000000000000000 (GLIBC_2.2.5) write
0000000000000000      DF *UND*\t0000000000000000 (GLIBC_2.28) fcntl64
0000000000000000  w   DF *UND*\t0000000000000000 (GLIBC_2.18) __cxa_thread_atexit_impl
0000000000000000      DF *UND*\t0000000000000000  GLIBC_2.3.4 __sprintf_chk
0000000000000000      DO *UND*\t0000000000000000 (GLIBC_PRIVATE) _dl_x
";
        assert_eq!(max_glibc(text).as_deref(), Some("2.28"));
        assert_eq!(max_glibc("no versions here"), None);
    }

    #[test]
    fn a_real_binary_over_its_floor_is_refused() {
        // This test binary is linked against the build machine's glibc, so it references
        // versions far above 2.2.5: the check must read them from the real file.
        let me = std::env::current_exe().unwrap();
        let found = check_glibc_floor(&me, Some("99.0")).unwrap().unwrap();
        assert!(version_key(&found) > version_key("2.2.5"), "{found}");
        let err = check_glibc_floor(&me, Some("2.2.5")).unwrap_err();
        assert!(err.contains("above its stated floor 2.2.5"), "{err}");
        assert!(check_glibc_floor(&me, Some(&found)).is_ok());
        // A dynamic binary where a static (musl) one belongs is refused.
        let err = check_glibc_floor(&me, None).unwrap_err();
        assert!(err.contains("dynamically linked"), "{err}");
    }

    #[test]
    fn a_static_binary_passes_only_for_a_static_target() {
        // objdump 2.40's words for the static musl aibox built with cargo-zigbuild.
        let bin = Path::new("target/x86_64-unknown-linux-musl/release/aibox");
        let stderr =
            "objdump: target/x86_64-unknown-linux-musl/release/aibox: not a dynamic object\n";
        assert_eq!(judge_linkage(bin, false, "", stderr, None).unwrap(), None);
        let err = judge_linkage(bin, false, "", stderr, Some("2.28")).unwrap_err();
        assert!(
            err.contains("is static, but its target is a glibc one"),
            "{err}"
        );
        let err = judge_linkage(
            bin,
            false,
            "",
            "objdump: x: file format not recognized",
            None,
        )
        .unwrap_err();
        assert!(err.contains("objdump -T"), "{err}");
    }

    #[test]
    fn the_target_plan_says_what_is_built_and_why_not() {
        let plan = target_plan(&["x86_64-unknown-linux-gnu".to_owned()]);
        let get = |t: &str| plan.iter().find(|p| p.0 == t).unwrap();
        assert!(get("x86_64-unknown-linux-gnu").1);
        let musl = get("x86_64-unknown-linux-musl");
        assert!(!musl.1);
        assert!(
            musl.2
                .contains("rustup target add x86_64-unknown-linux-musl"),
            "{}",
            musl.2
        );
        let plan = target_plan(&["x86_64-unknown-linux-musl".to_owned()]);
        let musl = plan
            .iter()
            .find(|p| p.0 == "x86_64-unknown-linux-musl")
            .unwrap();
        assert!(musl.1 && musl.2.contains("static"), "{musl:?}");
        let mac = plan.iter().find(|p| p.0 == "aarch64-apple-darwin").unwrap();
        assert!(!mac.1 && mac.2.contains("Apple's SDK"), "{mac:?}");
    }

    #[test]
    fn artifacts_are_named_for_their_real_target() {
        let names: Vec<String> = TARGETS.iter().map(Target::artifact_name).collect();
        assert!(names.contains(&"aibox-x86_64-unknown-linux-gnu".to_owned()));
        assert!(names.contains(&"aibox-aarch64-unknown-linux-gnu".to_owned()));
        assert_eq!(TARGETS[0].zig_target(), "x86_64-unknown-linux-gnu.2.28");
        assert_eq!(TARGETS[2].zig_target(), "x86_64-unknown-linux-musl");
    }
}
