//! `cargo xtask bench egress`: what the egress proxy of `[network] egress = "allowlist"`
//! costs, on a real Podman.
//!
//! The project allows one host, `bench.test`: a test host of the bench's own (a few
//! lines of Perl answering HTTP, `aibox_test_support::podman::TEST_HOST`) on the proxy's
//! outside network, so no request leaves the machine. Measured, once per run:
//! - the time of `--rounds` plain HTTP requests (one connection each) from the agent
//!   container through the proxy (its loopback relay, the proxy's socket, tinyproxy), and
//!   the same requests from a container of the same
//!   image on the outside network, direct: mean, median and 95th percentile, and the
//!   added latency (proxied minus direct, median and mean);
//! - the same number of requests through a `CONNECT` tunnel (as HTTPS goes);
//! - tinyproxy's resident memory at rest and its peak (`VmRSS`, `VmHWM` of every
//!   tinyproxy process) after the requests, and the relays' (`socat` in the proxy and
//!   in the agent).
//!
//! A measurement, not a gate: the numbers are printed (and written as JSON with `--json`).
//! Everything it creates (containers, images, networks, the project under
//! `target/bench-egress/`) is removed unless `--keep`.

use std::process::Command;

use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Podman, TEST_HOST, local_toml_with_host_ca};
use camino::Utf8PathBuf;

use crate::bench_up::timed;
use crate::say;

/// Requests per measured side unless `--rounds` says otherwise.
const ROUNDS: usize = 200;

/// `cargo xtask bench egress [--rounds N] [--bin PATH] [--keep] [--json FILE]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let mut common = crate::bench::Common::default();
    let mut rounds = ROUNDS;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if common.take(a, &mut it)? {
            continue;
        }
        match a.as_str() {
            "--rounds" => {
                rounds = it
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or("--rounds needs a positive number")?;
            }
            _ => return Err(format!("unknown argument `{a}`")),
        }
    }
    let crate::bench::Common { bin, keep, json } = common;
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let bin = crate::bench::release_aibox(bin)?;
    let bin = bin.to_string_lossy().into_owned();
    say("==> bench egress: Podman and the local base image");
    let podman = Podman::ready();
    let name = format!("aibox-bench-egress-{}", std::process::id());
    let root = Utf8PathBuf::from_path_buf(cwd.join("target/bench-egress").join(&name))
        .map_err(|p| format!("non-UTF-8 path {}", p.display()))?;
    fs_err::create_dir_all(&root).map_err(|e| e.to_string())?;
    fs_err::write(
        root.join("aibox.toml"),
        format!(
            "[container]\nname = \"{name}\"\nbase_image = \"{BASE_IMAGE}\"\n\n\
             [context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = []\n\n\
             [network]\negress = \"allowlist\"\nallow = [\"bench.test\"]\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    fs_err::write(root.join(".aibox-local.toml"), local_toml_with_host_ca())
        .map_err(|e| e.to_string())?;
    let aibox = |args: &[&str]| {
        let mut cmd = podman.aibox(&bin, &root);
        cmd.args(args);
        cmd
    };
    let n = match Names::of(&aibox) {
        Ok(n) => n,
        Err(e) => {
            let _ = fs_err::remove_dir_all(&root);
            return Err(e);
        }
    };
    let result = measure(&podman, &aibox, &n, rounds);
    // Always leave the machine as found (unless asked to keep the project).
    let _ = podman.run(&["rm", "-f", &n.host()]);
    let _ = aibox(&["down"]).output();
    if !keep {
        // Removed when dropped, right here: both images and the project's networks.
        Cleanup::new(&podman)
            .image(&n.image)
            .egress(&n.project, &n.image)
            .network(&format!("{}_default", n.project));
        let _ = fs_err::remove_dir_all(&root);
    }
    let report = result?;
    say(&render(&report));
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        fs_err::write(&path, text + "\n").map_err(|e| e.to_string())?;
        say(&format!("bench egress: wrote {}", path.display()));
    }
    Ok(())
}

/// The names `apply` gave the project (`aibox status`).
struct Names {
    project: String,
    container: String,
    image: String,
}

impl Names {
    /// The bench's test host container.
    fn host(&self) -> String {
        format!("{}-bench-host", self.container)
    }

    fn of(aibox: &dyn Fn(&[&str]) -> Command) -> Result<Self, String> {
        timed(&mut aibox(&["apply", "--quiet"]), "apply")?;
        let (status, _) = timed(&mut aibox(&["status", "--output", "json"]), "status")?;
        let status: serde_json::Value = serde_json::from_str(&status).map_err(|e| e.to_string())?;
        let text = |k: &str| status[k].as_str().unwrap_or_default().to_owned();
        Ok(Self {
            project: text("project"),
            container: text("container"),
            image: text("image"),
        })
    }
}

fn measure(
    podman: &Podman,
    aibox: &dyn Fn(&[&str]) -> Command,
    n: &Names,
    rounds: usize,
) -> Result<serde_json::Value, String> {
    say("==> bench egress: up (agent and egress proxy)");
    timed(&mut aibox(&["up"]), "up")?;
    let outside = format!("{}_aibox-egress", n.project);
    let host = n.host();
    let engine = |args: &[&str]| -> Result<String, String> {
        timed(podman.command().args(args), &args.join(" ")).map(|(out, _)| out)
    };
    engine(&[
        "run",
        "-d",
        "--name",
        &host,
        "--network",
        &outside,
        "--network-alias",
        "bench.test",
        BASE_IMAGE,
        "perl",
        "-e",
        TEST_HOST,
        "bench",
    ])?;
    for _ in 0..100 {
        if engine(&["logs", &host])?.contains("ready") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let proxy = format!("{}_aibox-egress_1", n.project);
    let at_rest = memory(&engine, &proxy, "tinyproxy")?;
    let curl = |extra: &str| {
        format!(
            "for i in $(seq {rounds}); do curl -sf {extra} -o /dev/null -w '%{{time_total}}\\n' \
             http://bench.test{}/ || exit 1; done",
            if extra.is_empty() { "" } else { ":443" }
        )
    };
    say(&format!("==> bench egress: {rounds} requests each way"));
    let proxied = times(
        &engine(&["exec", &n.container, "bash", "-c", &curl("")])?,
        rounds,
    )?;
    let tunnel = times(
        &engine(&["exec", &n.container, "bash", "-c", &curl("-p")])?,
        rounds,
    )?;
    let direct = times(
        &engine(&[
            "run",
            "--rm",
            "--network",
            &outside,
            "--entrypoint",
            "bash",
            &n.image,
            "-c",
            &curl(""),
        ])?,
        rounds,
    )?;
    let after = memory(&engine, &proxy, "tinyproxy")?;
    let relay_proxy = memory(&engine, &proxy, "socat")?;
    let relay_agent = memory(&engine, &n.container, "socat")?;
    Ok(serde_json::json!({
        "rounds": rounds,
        "proxied_ms": stats(&proxied),
        "connect_tunnel_ms": stats(&tunnel),
        "direct_ms": stats(&direct),
        "added_median_ms": median(&proxied) - median(&direct),
        "added_mean_ms": mean(&proxied) - mean(&direct),
        "proxy_rss_kib_at_rest": at_rest.0,
        "proxy_rss_kib_after": after.0,
        "proxy_peak_rss_kib": after.1,
        "relay_rss_kib_proxy": relay_proxy.0,
        "relay_rss_kib_agent": relay_agent.0,
    }))
}

/// The resident and peak resident memory (KiB) of the processes named `comm` in
/// `container`, summed.
fn memory(
    engine: &dyn Fn(&[&str]) -> Result<String, String>,
    container: &str,
    comm: &str,
) -> Result<(u64, u64), String> {
    let out = engine(&[
        "exec",
        container,
        "sh",
        "-c",
        &format!(
            "for p in /proc/[0-9]*; do [ \"$(cat $p/comm)\" = {comm} ] && grep -E '^Vm(RSS|HWM)' \
             $p/status; done; true"
        ),
    ])?;
    let sum = |key: &str| {
        out.lines()
            .filter(|l| l.starts_with(key))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    };
    Ok((sum("VmRSS"), sum("VmHWM")))
}

/// The times curl printed (seconds), in milliseconds; exactly `rounds` of them.
fn times(text: &str, rounds: usize) -> Result<Vec<f64>, String> {
    let v: Vec<f64> = text
        .lines()
        .filter_map(|l| l.trim().parse::<f64>().ok())
        .map(|s| s * 1000.0)
        .collect();
    if v.len() == rounds {
        Ok(v)
    } else {
        Err(format!(
            "expected {rounds} timings, got {}: {text}",
            v.len()
        ))
    }
}

#[allow(clippy::cast_precision_loss)] // a few hundred samples
fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

fn median(v: &[f64]) -> f64 {
    sorted(v)[v.len() / 2]
}

fn stats(v: &[f64]) -> serde_json::Value {
    let s = sorted(v);
    serde_json::json!({
        "mean": mean(v),
        "median": s[s.len() / 2],
        "p95": s[(s.len() * 95 / 100).min(s.len() - 1)],
    })
}

fn render(r: &serde_json::Value) -> String {
    let row = |label: &str, k: &str| {
        format!(
            "  {label:<28} mean {:>6.2} ms, median {:>6.2} ms, p95 {:>6.2} ms\n",
            r[k]["mean"].as_f64().unwrap_or(0.0),
            r[k]["median"].as_f64().unwrap_or(0.0),
            r[k]["p95"].as_f64().unwrap_or(0.0),
        )
    };
    format!(
        "bench egress (Podman, {} plain HTTP requests per side, one connection each, to a \
         loopback test host)\n{}{}{}\
         added by the proxy: median {:.2} ms, mean {:.2} ms per request\n\
         tinyproxy resident memory: {} KiB at rest, {} KiB after the requests (peak {} KiB)\n\
         relay (socat) resident memory: {} KiB in the proxy, {} KiB in the agent",
        r["rounds"],
        row("through the proxy", "proxied_ms"),
        row("CONNECT tunnel (as HTTPS)", "connect_tunnel_ms"),
        row("direct, outside network", "direct_ms"),
        r["added_median_ms"].as_f64().unwrap_or(0.0),
        r["added_mean_ms"].as_f64().unwrap_or(0.0),
        r["proxy_rss_kib_at_rest"],
        r["proxy_rss_kib_after"],
        r["proxy_peak_rss_kib"],
        r["relay_rss_kib_proxy"],
        r["relay_rss_kib_agent"],
    )
}
