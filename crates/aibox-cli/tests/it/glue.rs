//! The CLI stays glue: exit codes are picked from an error's kind in `src/exit.rs` alone,
//! and no code matches a diagnostic code string to decide what to do.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may fail loudly

use camino::{Utf8Path, Utf8PathBuf};

fn sources(dir: &Utf8Path, out: &mut Vec<Utf8PathBuf>) {
    for entry in fs_err::read_dir(dir).unwrap() {
        let path = Utf8PathBuf::from_path_buf(entry.unwrap().path()).unwrap();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension() == Some("rs") {
            out.push(path);
        }
    }
}

#[test]
fn exit_codes_come_from_the_error_kind_in_one_place() {
    let src = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 5, "{files:?}");
    for file in files {
        let text = fs_err::read_to_string(&file).unwrap();
        let name = file.strip_prefix(&src).unwrap();
        if name != "exit.rs" {
            for variant in ["Exit::User", "Exit::Environment", "Exit::Internal"] {
                // `main.rs` may end a usage error (clap's, which has no kind) as a user error.
                let allowed = name == "main.rs" && variant == "Exit::User";
                assert!(
                    allowed || !text.contains(variant),
                    "{name} picks `{variant}` itself; return a typed error with a kind() and let \
                     `exit.rs` map it"
                );
            }
        }
        for pattern in ["== \"aibox::", "Some(\"aibox::", "Diagnostic::code("] {
            assert!(
                !text.contains(pattern),
                "{name} matches a diagnostic code string (`{pattern}`); match the typed error"
            );
        }
    }
}

#[test]
fn the_consent_prompt_reads_the_key_from_the_error() {
    let consent = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../aibox-engine/src/consent.rs");
    let text = fs_err::read_to_string(consent).unwrap();
    assert!(
        !text.contains("load_project"),
        "consent.rs reloads the project; the policy error already carries the key"
    );
}
