//! Benchmark of `apply` on the bundled example project: a first apply into an empty copy
//! and a no-op apply on an up-to-date copy. Run with `cargo bench -p aibox-engine`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use aibox_engine::{ApplyOptions, apply};
use camino::{Utf8Path, Utf8PathBuf};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

/// The example's `aibox.toml`, with its processkit source (relative to the example) made
/// absolute so the copy in a temporary folder installs the same bundled content pack.
fn example_toml() -> String {
    let examples = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let text = fs_err::read_to_string(examples.join("demo/aibox.toml")).unwrap();
    let pack = examples
        .join("processkit-pack")
        .canonicalize_utf8()
        .unwrap();
    let patched = text.replace("\"../processkit-pack\"", &format!("\"{pack}\""));
    assert_ne!(
        patched, text,
        "the example's processkit source moved; update this bench"
    );
    patched
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
