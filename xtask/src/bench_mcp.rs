//! `cargo xtask bench mcp`: what locking MCP servers' dependencies costs and buys, on a
//! real Podman, with the release-built `aibox`.
//!
//! The project is the MCP fixture pack (`aibox-test-support/fixtures/mcp-pack`: servers
//! declaring `mcp[cli]>=1.0` as processkit's do) with Claude Code, on the tests' local
//! base image and the host's CA (as the e2e tests run). Measured, once per run:
//! - `apply` that locks the servers (uv resolving against `PyPI` with empty aibox and uv
//!   caches) and the no-op `apply` after it;
//! - the image: total size, and the size of the one layer holding the locked
//!   environments (from `podman history`), with the time of the `up` that built it (the
//!   engine's layer cache is used as it is: a first build on a fresh machine is longer);
//! - time to the first `initialize` answer of every registered server in a freshly
//!   started container (`aibox mcp check`, which starts each as its harness would);
//! - `up` of an already running container, and `down` + `up` (start time).
//!
//! A measurement, not a gate: the numbers are printed (and written as JSON with `--json`).

use std::fmt::Write as _;
use std::process::Command;

use aibox_test_support::podman::{BASE_IMAGE, Podman, local_toml_with_host_ca};
use camino::{Utf8Path, Utf8PathBuf};

use crate::bench_up::timed;
use crate::say;

/// `cargo xtask bench mcp [--bin PATH] [--keep] [--json FILE]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut common = crate::bench::Common::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if !common.take(a, &mut it)? {
            return Err(format!("unknown argument `{a}`"));
        }
    }
    let crate::bench::Common {
        bin: given_bin,
        keep,
        json: json_out,
    } = common;
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let bin = crate::bench::release_aibox(given_bin)?;
    let bin = bin.to_string_lossy().into_owned();
    say("==> bench mcp: Podman and the local base image");
    let podman = Podman::ready();
    let uv = aibox_test_support::uv();
    let name = format!("aibox-bench-mcp-{}", std::process::id());
    let root = Utf8PathBuf::from_path_buf(cwd.join("target/bench-mcp").join(&name))
        .map_err(|p| format!("non-UTF-8 path {}", p.display()))?;
    fs_err::create_dir_all(&root).map_err(|e| e.to_string())?;
    // An empty cache for aibox and uv alike: the locking `apply` resolves for real.
    let cache = root.with_file_name(format!("{name}-cache"));
    let aibox = |args: &[&str]| {
        let mut cmd = podman.aibox(&bin, &root);
        cmd.env("AIBOX_UV", uv.as_str())
            .env("XDG_CACHE_HOME", cache.as_str())
            .args(args);
        cmd
    };
    let pack = aibox_test_support::mcp_pack();
    let sha = aibox_test_support::tree_sha256(&pack);
    fs_err::write(root.join("aibox.toml"), project_toml(&name, &pack, &sha))
        .map_err(|e| e.to_string())?;
    fs_err::write(root.join(".aibox-local.toml"), local_toml_with_host_ca())
        .map_err(|e| e.to_string())?;

    let result = measure(&podman, &root, &aibox);
    // Always leave the machine as found (unless asked to keep the project).
    let _ = aibox(&["down"]).output();
    if !keep {
        let _ = podman.run(&["rmi", "-f", &format!("localhost/{name}-aibox:local")]);
        let _ = fs_err::remove_dir_all(&root);
        let _ = fs_err::remove_dir_all(&cache);
    }
    let report = result?;
    say(&render(&report));
    if let Some(path) = json_out {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        fs_err::write(&path, text + "\n").map_err(|e| e.to_string())?;
        say(&format!("bench mcp: wrote {}", path.display()));
    }
    Ok(())
}

fn project_toml(name: &str, pack: &Utf8Path, sha: &str) -> String {
    format!(
        "[container]\nname = \"{name}\"\nbase_image = \"{BASE_IMAGE}\"\n\n\
         [context]\nmode = \"processkit\"\npackages = [\"minimal\"]\n\n\
         [processkit]\nsource = \"{pack}\"\nversion = \"v0.9.0\"\nsha256 = \"{sha}\"\n\n\
         [ai]\nharnesses = [\"claude\"]\n"
    )
}

fn measure(
    podman: &Podman,
    root: &Utf8Path,
    aibox: &dyn Fn(&[&str]) -> Command,
) -> Result<serde_json::Value, String> {
    say("==> bench mcp: apply (locks the servers' dependencies)");
    let (_, apply_lock) = timed(&mut aibox(&["apply"]), "apply")?;
    let (_, apply_noop) = timed(&mut aibox(&["apply"]), "apply (no-op)")?;
    let lock: toml::Table = toml::from_str(
        &fs_err::read_to_string(root.join("aibox.lock")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let environments = lock
        .get("mcp")
        .and_then(|m| m.get("environments"))
        .and_then(toml::Value::as_table)
        .map_or(0, |t| {
            t.values()
                .filter(|e| e.get("unresolvable").is_none())
                .count()
        });
    say("==> bench mcp: up (builds the image)");
    let (_, up_build) = timed(&mut aibox(&["up"]), "up")?;
    let status: serde_json::Value =
        serde_json::from_str(&timed(&mut aibox(&["status", "--output", "json"]), "status")?.0)
            .map_err(|e| e.to_string())?;
    let image = status["image"].as_str().unwrap_or_default().to_owned();
    let (image_bytes, layer_bytes) = image_sizes(podman, &image)?;
    say("==> bench mcp: mcp check (first initialize of every server)");
    let (check, check_secs) = timed(&mut aibox(&["mcp", "check", "-o", "json"]), "mcp check")?;
    let check: serde_json::Value = serde_json::from_str(&check).map_err(|e| e.to_string())?;
    let servers: Vec<serde_json::Value> = check["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            serde_json::json!({
                "name": s["name"],
                "status": s["status"],
                "initialize_ms": s["probe"]["initialize_ms"],
                "tools": s["probe"]["tools"].as_array().map_or(0, Vec::len),
            })
        })
        .collect();
    let (_, up_running) = timed(&mut aibox(&["up"]), "up (running)")?;
    let (_, down) = timed(&mut aibox(&["down"]), "down")?;
    let (_, up_start) = timed(&mut aibox(&["up"]), "up (start)")?;
    Ok(serde_json::json!({
        "environments": environments,
        "apply_lock_secs": apply_lock,
        "apply_noop_secs": apply_noop,
        "up_build_secs": up_build,
        "image": image,
        "image_bytes": image_bytes,
        "mcp_layer_bytes": layer_bytes,
        "mcp_check_secs": check_secs,
        "servers": servers,
        "up_running_secs": up_running,
        "down_secs": down,
        "up_start_secs": up_start,
    }))
}

/// The image's size and the size of its layer that installs the locked environments.
fn image_sizes(podman: &Podman, image: &str) -> Result<(u64, u64), String> {
    let out = podman.run(&["image", "inspect", "--format", "{{.Size}}", image]);
    let total = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    let out = podman.run(&["history", "--no-trunc", "--format", "json", image]);
    let history: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("podman history of {image}: {e}"))?;
    let layer = history
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| {
            h["CreatedBy"]
                .as_str()
                .or_else(|| h["createdBy"].as_str())
                .is_some_and(|c| c.contains("installing the locked MCP environment"))
        })
        .filter_map(|h| h["Size"].as_u64().or_else(|| h["size"].as_u64()))
        .sum();
    Ok((total, layer))
}

#[allow(clippy::cast_precision_loss)] // byte counts far below 2^52
fn render(r: &serde_json::Value) -> String {
    let mib = |k: &str| r[k].as_u64().unwrap_or(0) as f64 / (1024.0 * 1024.0);
    let secs = |k: &str| r[k].as_f64().unwrap_or(0.0);
    let mut out = format!(
        "bench mcp (Podman, MCP fixture pack, {} locked environment(s))\n\
         apply that locks: {:.2} s; no-op apply: {:.3} s\n\
         up that builds the image: {:.1} s; image {:.0} MiB, of which the locked MCP \
         environments' layer {:.1} MiB\n\
         mcp check of every server: {:.2} s\n",
        r["environments"],
        secs("apply_lock_secs"),
        secs("apply_noop_secs"),
        secs("up_build_secs"),
        mib("image_bytes"),
        mib("mcp_layer_bytes"),
        secs("mcp_check_secs"),
    );
    for s in r["servers"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "  {:<28} {:<4} first initialize {} ms, {} tools",
            s["name"].as_str().unwrap_or_default(),
            s["status"].as_str().unwrap_or_default(),
            s["initialize_ms"],
            s["tools"]
        );
    }
    let _ = write!(
        out,
        "up when running: {:.2} s; down: {:.2} s; up after down (start): {:.2} s",
        secs("up_running_secs"),
        secs("down_secs"),
        secs("up_start_secs"),
    );
    out
}
