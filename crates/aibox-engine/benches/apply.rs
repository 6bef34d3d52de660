//! Benchmark of `apply` on the bundled example project: a first apply into an empty copy
//! and a no-op apply on an up-to-date copy. Run with `cargo bench -p aibox-engine`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use aibox_engine::{ApplyOptions, apply};
use camino::{Utf8Path, Utf8PathBuf};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

fn example_toml() -> String {
    let path = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/demo/aibox.toml");
    fs_err::read_to_string(path).unwrap()
}

fn fresh_project(toml: &str) -> (tempfile::TempDir, Utf8PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(dir.path().to_owned()).unwrap();
    fs_err::write(root.join("aibox.toml"), toml).unwrap();
    (dir, root)
}

fn bench_apply(c: &mut Criterion) {
    let toml = example_toml();
    let options = ApplyOptions::default();
    let mut group = c.benchmark_group("apply");
    group.bench_function("first", |b| {
        b.iter_batched(
            || fresh_project(&toml),
            |(dir, root)| {
                apply(&root, &options).unwrap();
                dir
            },
            BatchSize::PerIteration,
        );
    });
    let (_dir, root) = fresh_project(&toml);
    apply(&root, &options).unwrap();
    group.bench_function("no-op", |b| {
        b.iter(|| {
            let report = apply(&root, &options).unwrap();
            assert!(!report.changed());
        });
    });
    group.finish();
}

criterion_group!(benches, bench_apply);
criterion_main!(benches);
