//! The tidy check runs under `cargo test` too (as rust-analyzer's `tidy.rs` does): the
//! workspace passes `cargo xtask tidy`, and a messy tree shows that each rule the harness
//! layout and the docs rely on fails where it should (a loose test file, an undeclared
//! module, a doc naming a script that does not exist).
#![allow(clippy::unwrap_used)] // test helpers fail loudly

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn xtask(task: &str, dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg(task)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn the_workspace_is_tidy() {
    let out = xtask("tidy", &workspace());
    assert!(
        out.status.success(),
        "`cargo xtask tidy` found problems:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Scratch(PathBuf);
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs_err::create_dir_all(path.parent().unwrap()).unwrap();
    fs_err::write(path, text).unwrap();
}

#[test]
fn loose_tests_undeclared_modules_and_stubs_are_refused() {
    let dir = std::env::temp_dir().join(format!("aibox-tidy-{}", std::process::id()));
    let _ = fs_err::remove_dir_all(&dir);
    let scratch = Scratch(dir);
    let root = &scratch.0;
    write(root, "xtask/src/main.rs", "fn main() {}\n");
    write(root, "crates/demo/src/lib.rs", "//! Demo.\n");
    // The old layout: a test file of its own beside the harnesses.
    write(root, "crates/demo/tests/loose.rs", "#[test]\nfn t() {}\n");
    // A harness declaring `a` (with attributes) and `helpers`, but not `b` nor `c/`.
    write(
        root,
        "crates/demo/tests/it/main.rs",
        "//! Harness.\n\n#[path = \"a.rs\"]\nmod a;\npub mod helpers;\n// mod b;\n",
    );
    write(root, "crates/demo/tests/it/a.rs", "#[test]\nfn a() {}\n");
    write(root, "crates/demo/tests/it/b.rs", "#[test]\nfn b() {}\n");
    write(
        root,
        "crates/demo/tests/it/helpers/mod.rs",
        "pub fn s() {}\n",
    );
    write(
        root,
        "crates/demo/tests/it/c/mod.rs",
        "#[test]\nfn c() {}\n",
    );
    // Fixtures and snapshots folders are no modules.
    write(
        root,
        "crates/demo/tests/it/snapshots/it__a__x.snap",
        "---\n",
    );
    write(
        root,
        "crates/demo/tests/fixtures/case.rs",
        "not rust at all {",
    );
    // A stub in a harness module is found like anywhere else.
    let stub = concat!("to", "do!()");
    write(
        root,
        "xtask/tests/it/main.rs",
        &format!("mod late;\nfn f() {{ {stub} }}\n"),
    );
    write(root, "xtask/tests/it/late.rs", "");
    // Docs: one path that is not there; existing ones, a line suffix and placeholders pass.
    write(root, "scripts/real.sh", "");
    write(
        root,
        "docs-site/README.md",
        "Pinned in `scripts/install-docs-tools.sh`, run by `scripts/real.sh`.\n\
         See `crates/demo/src/lib.rs:1`, `crates/*/tests` and `crates/<name>/`.\n",
    );

    // The old name still runs the same check.
    for task in ["tidy", "stubs"] {
        let out = xtask(task, root);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{task}: {err}");
        assert!(
            err.contains("crates/demo/tests/loose.rs: an integration test outside a harness"),
            "{err}"
        );
        assert!(
            err.contains(
                "crates/demo/tests/it/b.rs: not declared in crates/demo/tests/it/main.rs, so \
                 its tests never run; add `mod b;`"
            ),
            "{err}"
        );
        assert!(
            err.contains("crates/demo/tests/it/c: not declared"),
            "{err}"
        );
        assert!(err.contains("xtask/tests/it/main.rs:2: stub"), "{err}");
        assert!(
            err.contains(
                "docs-site/README.md:1: names `scripts/install-docs-tools.sh`, which does not \
                 exist"
            ),
            "{err}"
        );
        assert!(err.contains("5 tidy problem(s) found"), "{err}");
        for fine in [
            "it/a.rs",
            "helpers",
            "snapshots",
            "fixtures",
            "late",
            "real.sh",
            "lib.rs",
            "<name>",
        ] {
            assert!(!err.contains(fine), "{fine} was refused: {err}");
        }
    }
}
