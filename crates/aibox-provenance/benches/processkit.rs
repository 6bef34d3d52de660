//! Benchmarks on the processkit-like synthetic release (146 skills, about 860 files and
//! 5 MB, the shape and size of processkit v0.28.3; `SyntheticRelease::processkit_like`):
//! first install, no-op apply, upgrade to the second version (archive already local, so
//! no download), and the full per-file integrity check, next to a `sha256sum` baseline
//! over the same installed files (the targets: no-op and integrity within 3x of it). The
//! whole CLI at 1x and 10x, against the targets: `cargo xtask bench`. Compile with
//! `cargo bench -p aibox-provenance --no-run`; run on an otherwise idle machine.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

// The integration tests' helpers; the benchmark uses only some of them.
#[path = "../tests/it/common/mod.rs"]
#[allow(dead_code)]
mod common;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

use aibox_test_support::http::release::SyntheticRelease;
use common::{Setup, install_section, plan_section, publish};

fn benches(c: &mut Criterion) {
    let store = tempfile::tempdir().unwrap();
    let v1 = SyntheticRelease::processkit_like("v0.28.3", false);
    let v2 = SyntheticRelease::processkit_like("v0.29.0", true);
    let setup = Setup::default();
    let s1 = publish(&v1, store.path());
    let s2 = publish(&v2, store.path());
    let mut group = c.benchmark_group("processkit");
    group.sample_size(10);

    group.bench_function("first_install", |b| {
        b.iter_batched(
            || tempfile::tempdir().unwrap(),
            |project| {
                install_section(project.path(), &s1, &setup);
                project // dropped (deleted) outside the measurement
            },
            BatchSize::PerIteration,
        );
    });

    let installed = tempfile::tempdir().unwrap();
    install_section(installed.path(), &s1, &setup);
    group.bench_function("noop_apply", |b| {
        b.iter(|| {
            let p = plan_section(installed.path(), &s1, &setup).unwrap();
            assert!(p.is_noop());
            aibox_provenance::apply_plan(installed.path(), &p).unwrap();
        });
    });

    // Baseline of the targets: one `sha256sum` process over the same installed files.
    let marker = aibox_provenance::Marker::read(installed.path()).unwrap();
    let files: Vec<&str> = marker
        .files
        .keys()
        .chain(marker.user_files.keys())
        .collect();
    group.bench_function("sha256sum_baseline", |b| {
        b.iter(|| {
            let out = std::process::Command::new("sha256sum")
                .args(&files)
                .current_dir(installed.path())
                .output()
                .expect("sha256sum (coreutils) is required for the baseline");
            assert!(out.status.success());
        });
    });

    group.bench_function("integrity", |b| {
        b.iter(|| aibox_provenance::integrity(installed.path()).unwrap());
    });

    group.bench_function("upgrade", |b| {
        b.iter_batched(
            || {
                let project = tempfile::tempdir().unwrap();
                install_section(project.path(), &s1, &setup);
                project
            },
            |project| {
                install_section(project.path(), &s2, &setup);
                project
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(processkit, benches);
criterion_main!(processkit);
