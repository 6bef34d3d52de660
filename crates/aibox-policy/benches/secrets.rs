//! The secret scan over large values: 100 KB and 400 KB values in `aibox.toml`, as plain
//! text, as text full of `${` and `$NAME` references, and as a run of token-like
//! prefixes (`-AIza-AIza…`, `sk-…`). The scan must grow linearly with the value (the
//! 400 KB case about 4x the 100 KB case). Run with `cargo bench -p aibox-policy --bench
//! secrets` on an otherwise idle machine.

#![allow(missing_docs, clippy::unwrap_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use aibox_policy::{TextKind, scan_secrets};

fn value(shape: &str, len: usize) -> String {
    let unit = match shape {
        "plain" => "lorem ipsum dolor sit amet ",
        "references" => "${A} $B ${C:-x} {env:D} ",
        "token_prefixes" => "-AIza-sk-ghp_AKIA",
        _ => "x",
    };
    unit.repeat(len / unit.len() + 1)[..len].to_owned()
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("secret_scan");
    group.sample_size(10);
    for shape in ["plain", "references", "token_prefixes"] {
        for kb in [100, 400] {
            let text = format!(
                "[container.environment]\nBIG = \"{}\"\n",
                value(shape, kb * 1024)
            );
            group.throughput(Throughput::Bytes(text.len() as u64));
            group.bench_function(format!("{shape}_{kb}kb"), |b| {
                b.iter(|| scan_secrets("aibox.toml", &text, TextKind::Toml));
            });
        }
    }
    // The same value as `apply` meets it again: in the generated Compose file.
    for kb in [100, 400] {
        let text = format!(
            "services:\n  dev:\n    environment:\n      BIG: \"{}\"\n",
            value("plain", kb * 1024)
        );
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(format!("compose_plain_{kb}kb"), |b| {
            b.iter(|| scan_secrets(".devcontainer/docker-compose.yml", &text, TextKind::Yaml));
        });
    }
    group.finish();
}

criterion_group!(secret_scan, benches);
criterion_main!(secret_scan);
