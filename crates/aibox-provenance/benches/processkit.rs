//! Benchmarks on the synthetic release (about 150 skills, 900 files): first install,
//! no-op apply, upgrade to the second version (archive already local, so no download),
//! and the full per-file integrity check. Compile with
//! `cargo bench -p aibox-provenance --no-run`; run on an otherwise idle machine.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

use aibox_test_support::http::release::SyntheticRelease;
use common::{Setup, install, plan};

fn benches(c: &mut Criterion) {
    let store = tempfile::tempdir().unwrap();
    let v1 = SyntheticRelease::generate("v1.0.0", false);
    let v2 = SyntheticRelease::generate("v2.0.0", true);
    let setup = Setup::default();
    let mut group = c.benchmark_group("processkit");
    group.sample_size(10);

    group.bench_function("first_install", |b| {
        b.iter_batched(
            || tempfile::tempdir().unwrap(),
            |project| install(project.path(), store.path(), &v1, &setup),
            BatchSize::PerIteration,
        );
    });

    let installed = tempfile::tempdir().unwrap();
    install(installed.path(), store.path(), &v1, &setup);
    group.bench_function("noop_apply", |b| {
        b.iter(|| {
            let p = plan(installed.path(), store.path(), &v1, &setup).unwrap();
            assert!(p.is_noop());
            aibox_provenance::apply_plan(installed.path(), &p).unwrap();
        });
    });

    group.bench_function("integrity", |b| {
        b.iter(|| aibox_provenance::integrity(installed.path()).unwrap());
    });

    group.bench_function("upgrade", |b| {
        b.iter_batched(
            || {
                let project = tempfile::tempdir().unwrap();
                install(project.path(), store.path(), &v1, &setup);
                project
            },
            |project| install(project.path(), store.path(), &v2, &setup),
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

criterion_group!(processkit, benches);
criterion_main!(processkit);
