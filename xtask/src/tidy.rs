//! The tidy check (in the manner of rust-analyzer's `tidy`): source rules no compiler or
//! linter enforces, run by `cargo xtask tidy` (also by `cargo xtask ci` and by
//! `cargo test -p xtask`, `tests/it/tidy.rs`).
//!
//! - Stubs: an ignored test or a `todo!` is never "done".
//! - One writer: product code writes files only through `aibox_fs` (the
//!   writer, checked against the file table); any other file-writing call fails.
//! - One file table: a string literal that is a `.devcontainer/` path appears only in
//!   `aibox_config::layout`.
//! - Pure planning: the plan (`aibox-engine/src/plan.rs` and `src/sources/`) makes no
//!   file-system call; it reads the project only through the snapshot `resolve` took.
//! - Test harnesses: integration tests live in a harness folder of their crate
//!   (`tests/it/`, `tests/e2e/`), one test binary each, and every file or folder there is a
//!   `mod` of its `main.rs` (a file the harness does not declare is never compiled, so its
//!   tests would silently not run).
//! - Doc paths: a repository path a Markdown file names in backticks (`scripts/…`,
//!   `crates/…`, …) exists.
//!
//! Tests (`tests/`, `benches/`, `examples/`, `#[cfg(test)]` modules at the end of a file),
//! `xtask` and `aibox-test-support` are exempt from the last two rules.

use std::path::Path;

/// Assembled with `concat!` so that this file does not match its own scan (nor any other
/// grep for stubs).
const PATTERNS: &[&str] = &[
    concat!("#[ig", "nore"),
    concat!("to", "do!("),
    concat!("unimple", "mented!("),
];

/// File-writing calls, in `fs_err` or `std::fs` form (matched after `fs::` or alone).
const WRITE_CALLS: &[&str] = &[
    "fs::write(",
    "fs::rename(",
    "fs::remove_file(",
    "fs::remove_dir(",
    "fs::remove_dir_all(",
    "fs::create_dir(",
    "fs::create_dir_all(",
    "fs::hard_link(",
    "fs::copy(",
    "fs::set_permissions(",
    "File::create(",
    "File::create_new(",
    "File::options(",
    "unix::fs::symlink(",
    "OpenOptions",
    "NamedTempFile",
    ".tempfile_in(",
    ".tempdir_in(",
    ".persist(",
];

/// The writer: the only product code allowed to write project files.
const WRITER: &str = "crates/aibox-fs/src/lib.rs";

/// The file table: the only product code allowed to spell a `.devcontainer/` path.
const LAYOUT: &str = "crates/aibox-config/src/layout.rs";

/// Product files that may write files outside the writer, each with the reason.
const WRITE_ALLOWLIST: &[(&str, &str)] = &[
    // `doctor --bundle FILE` writes the report where the user asks (usually outside the
    // project, mode 0600); not a project file.
    (
        "crates/aibox-engine/src/doctor/bundle.rs",
        "bundle at a user-named path",
    ),
    // The download cache lives in the user's cache directory, not the project: verified
    // archives, downloads streamed to disk, and the unpacked store (`unpacked/<digest>/`,
    // built in a staging folder renamed into place; every byte is re-verified when it is
    // copied into a project, through the writer).
    (
        "crates/aibox-provenance/src/cache.rs",
        "download cache and unpacked store outside the project",
    ),
    // `unpack_archive` streams a verified archive into the unpacked store's staging folder
    // (or a temporary folder without a cache); `write_tree` copies payload files into a
    // temporary staging folder (skill review copies). Never into a project.
    (
        "crates/aibox-provenance/src/extract.rs",
        "unpacking into the cache's staging or a temporary folder",
    ),
    // npm resolves only from a `package.json` in a folder (no stdin, unlike uv): the
    // rendered one goes into a temporary folder of its own, removed after resolving.
    (
        "crates/aibox-engine/src/mcp_npm.rs",
        "npm's package.json in a temporary folder while resolving",
    ),
    // uv reads a CA bundle only from a file (`SSL_CERT_FILE`): with a personal extra CA,
    // the trusted roots go into a temporary file of their own, removed after resolving.
    (
        "crates/aibox-engine/src/mcp_envs.rs",
        "uv's CA bundle in a temporary file while resolving",
    ),
    // `doctor --processkit` on the host installs pk-doctor's locked requirements into a
    // virtual environment in the download cache (`pk-doctor/<id>/`), never the project.
    (
        "crates/aibox-engine/src/pk_doctor.rs",
        "pk-doctor's host environment in the download cache",
    ),
    // doctor's unasked update check records the feed's answer once a day in the user's
    // cache directory (`update-check.json`), never in the project.
    (
        "crates/aibox-engine/src/updates.rs",
        "the daily update-check record in the user's cache directory",
    ),
    // The approved reach of each checkout is recorded in the user's state directory
    // (`reach/<digest>.json`), outside every project: the container must not see it.
    (
        "crates/aibox-engine/src/reach.rs",
        "the approved-reach records in the user's state directory",
    ),
];

/// Product files that may spell a `.devcontainer/` path literal, each with the reason.
const LAYOUT_ALLOWLIST: &[(&str, &str)] = &[];

/// The plan: pure code that reads the project only through `resolve`'s snapshot (a path
/// ending in `/` covers a folder).
const PURE: &[&str] = &[
    "crates/aibox-engine/src/builder.rs",
    "crates/aibox-engine/src/plan.rs",
    "crates/aibox-engine/src/sources/",
];

/// File-system access refused in [`PURE`] files: the file-system modules, directory
/// listings and metadata, and the project root's own readers.
const IO_CALLS: &[&str] = &[
    "fs_err::",
    "std::fs",
    "fs::read",
    "fs::metadata(",
    "File::open(",
    "read_dir(",
    "symlink_metadata(",
    "canonicalize(",
    "ProjectRoot",
    "project_root()",
    "root.read(",
    "root.is_file(",
];

/// Scans `crates/` and `xtask/` for stub markers, and product code for writes outside
/// the writer and `.devcontainer/` path literals outside the file table.
pub fn check() -> Result<(), String> {
    let mut hits = Vec::new();
    for root in ["crates", "xtask/src", "xtask/tests"] {
        scan(Path::new(root), &mut hits)?;
    }
    hits.extend(harness_rules(Path::new("."))?);
    hits.extend(doc_path_rules(Path::new("."))?);
    if hits.is_empty() {
        crate::say(
            "tidy: ok (stubs, one writer, one file table, pure plan, test harnesses, doc paths)",
        );
        Ok(())
    } else {
        for h in &hits {
            crate::say(&format!("tidy: {h}"));
        }
        Err(format!("{} tidy problem(s) found", hits.len()))
    }
}

fn scan(dir: &Path, hits: &mut Vec<String>) -> Result<(), String> {
    let entries = fs_err::read_dir(dir).map_err(|e| e.to_string())?;
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        let path = entry.path();
        // Symbolic links are not followed: the policy corpus links to `/` on purpose.
        let kind = entry.file_type().map_err(|e| e.to_string())?;
        if kind.is_symlink() {
            continue;
        }
        if kind.is_dir() {
            scan(&path, hits)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = fs_err::read_to_string(&path).map_err(|e| e.to_string())?;
            let name = path.to_string_lossy().replace('\\', "/");
            for (i, line) in text.lines().enumerate() {
                if PATTERNS.iter().any(|p| line.contains(p)) {
                    hits.push(format!("{name}:{}: stub: {}", i + 1, line.trim()));
                }
            }
            if is_product(&name) {
                hits.extend(product_rules(&name, &text));
            }
        }
    }
    Ok(())
}

/// The test-harness rules over every package's `tests/` folder under `root`
/// (`crates/*/tests`, `xtask/tests`).
fn harness_rules(root: &Path) -> Result<Vec<String>, String> {
    let mut tests_dirs = vec![root.join("xtask/tests")];
    let crates = root.join("crates");
    if crates.is_dir() {
        for entry in fs_err::read_dir(&crates).map_err(|e| e.to_string())? {
            tests_dirs.push(entry.map_err(|e| e.to_string())?.path().join("tests"));
        }
    }
    tests_dirs.sort();
    let shown = |p: &Path| {
        p.strip_prefix(root)
            .unwrap_or(p)
            .to_string_lossy()
            .replace('\\', "/")
    };
    let mut hits = Vec::new();
    for dir in tests_dirs.iter().filter(|d| d.is_dir()) {
        for path in sorted_entries(dir)? {
            if path.extension().is_some_and(|e| e == "rs") {
                hits.push(format!(
                    "{}: an integration test outside a harness (a test binary of its own); \
                     move it to `tests/it/` (or `tests/e2e/` if it needs a container engine \
                     or real tools) and declare it in that folder's `main.rs`",
                    shown(&path)
                ));
                continue;
            }
            let main = path.join("main.rs");
            if !main.is_file() {
                continue;
            }
            let text = fs_err::read_to_string(&main).map_err(|e| e.to_string())?;
            for module in sorted_entries(&path)? {
                let name = if module.join("mod.rs").is_file() {
                    module.file_name()
                } else if module.extension().is_some_and(|e| e == "rs") {
                    module.file_stem()
                } else {
                    None
                };
                let Some(name) = name.map(|n| n.to_string_lossy().into_owned()) else {
                    continue;
                };
                if name != "main" && !declares(&text, &name) {
                    hits.push(format!(
                        "{}: not declared in {}, so its tests never run; add `mod {name};`",
                        shown(&module),
                        shown(&main)
                    ));
                }
            }
        }
    }
    Ok(hits)
}

fn sorted_entries(dir: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let mut paths = Vec::new();
    for entry in fs_err::read_dir(dir).map_err(|e| e.to_string())? {
        paths.push(entry.map_err(|e| e.to_string())?.path());
    }
    paths.sort();
    Ok(paths)
}

/// Whether a harness's `main.rs` declares module `name` (`mod name;`, `pub mod name;`,
/// with attributes on lines of their own).
fn declares(main: &str, name: &str) -> bool {
    main.lines().any(|l| {
        let l = l.trim();
        let l = l.strip_prefix("pub ").unwrap_or(l);
        l.strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
            .is_some_and(|m| m.trim() == name)
    })
}

/// Top-level folders whose paths, written in backticks in Markdown, must exist: a doc that
/// names a script, crate file or page that is not there sends the reader nowhere.
const DOC_PATH_ROOTS: &[&str] = &[
    "crates/",
    "docs-site/",
    "images/",
    "scripts/",
    "test-tools/",
    "xtask/",
];

/// Folders whose Markdown files are checked (besides the top-level `*.md`).
const DOC_DIRS: &[&str] = &[
    "crates",
    "docs-site",
    "examples",
    "images",
    "release",
    "scripts",
];

/// Repository paths named in Markdown (in backticks, starting with a [`DOC_PATH_ROOTS`]
/// folder) that do not exist under `root`.
fn doc_path_rules(root: &Path) -> Result<Vec<String>, String> {
    let mut docs: Vec<std::path::PathBuf> = sorted_entries(root)?
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    for dir in DOC_DIRS {
        markdown_files(&root.join(dir), &mut docs)?;
    }
    let mut hits = Vec::new();
    for doc in docs {
        let text = fs_err::read_to_string(&doc).map_err(|e| e.to_string())?;
        let shown = doc.strip_prefix(root).unwrap_or(&doc).to_string_lossy();
        for (i, line) in text.lines().enumerate() {
            for path in named_paths(line) {
                if !root.join(path).exists() {
                    hits.push(format!(
                        "{shown}:{}: names `{path}`, which does not exist",
                        i + 1
                    ));
                }
            }
        }
    }
    Ok(hits)
}

fn markdown_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<(), String> {
    if !dir.is_dir() {
        return Ok(());
    }
    for path in sorted_entries(dir)? {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if fs_err::symlink_metadata(&path)
            .map_err(|e| e.to_string())?
            .is_symlink()
            || name == "node_modules"
            || name == "target"
            // Fixtures are copies of other projects' trees: their paths are theirs.
            || name == "fixtures"
        {
            continue;
        }
        if path.is_dir() {
            markdown_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    Ok(())
}

/// The repository paths a Markdown line names in backticks: a span starting with a
/// [`DOC_PATH_ROOTS`] folder, without placeholders (`*`, `<…>`, `{…}`, `…`, spaces), and
/// with a `:line` suffix and a trailing `/` or `.` dropped.
fn named_paths(line: &str) -> Vec<&str> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| DOC_PATH_ROOTS.iter().any(|r| span.starts_with(r)))
        .filter(|span| !span.contains(['*', '<', '{', ' ', '…', '$']))
        .map(|span| {
            let span = span.trim_end_matches(['/', '.']);
            match span.rsplit_once(':') {
                Some((path, n)) if n.chars().all(|c| c.is_ascii_digit()) => path,
                _ => span,
            }
        })
        .collect()
}

/// Whether `path` (with `/`) is product code: `crates/*/src`, not test support.
fn is_product(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("crates/") else {
        return false;
    };
    let Some((krate, inner)) = rest.split_once('/') else {
        return false;
    };
    krate != "aibox-test-support" && inner.starts_with("src/")
}

fn allowed(list: &[(&str, &str)], path: &str) -> bool {
    list.iter().any(|(p, _)| {
        if p.ends_with('/') {
            path.starts_with(p)
        } else {
            path == *p
        }
    })
}

/// The one-writer and one-file-table rules over one product file.
fn product_rules(path: &str, text: &str) -> Vec<String> {
    let mut hits = Vec::new();
    let code = strip_comments_and_tests(text);
    let check_writes = path != WRITER && !allowed(WRITE_ALLOWLIST, path);
    let check_layout = path != LAYOUT && !allowed(LAYOUT_ALLOWLIST, path);
    let check_pure = PURE
        .iter()
        .any(|p| path == *p || (p.ends_with('/') && path.starts_with(p)));
    for (i, (line, strings)) in code.iter().enumerate() {
        let fs_err_form = |c: &&&str| {
            c.strip_prefix("fs::")
                .is_some_and(|f| line.contains(&format!("fs_err::{f}")))
        };
        if check_writes
            && let Some(call) = WRITE_CALLS
                .iter()
                .find(|c| line.contains(**c) || fs_err_form(c))
        {
            hits.push(format!(
                "{path}:{}: writes a file (`{call}`) outside the writer; use \
                 `aibox_fs::Writer`",
                i + 1
            ));
        }
        if check_pure && let Some(call) = IO_CALLS.iter().find(|c| line.contains(**c)) {
            hits.push(format!(
                "{path}:{}: file-system access (`{call}`) in the plan; read the project in \
                 `resolve` (`aibox_engine::snapshot`) and take it from the `PlanContext`",
                i + 1
            ));
        }
        if check_layout
            && strings
                .iter()
                .any(|s| s.starts_with(".devcontainer/") || s.starts_with("/.devcontainer/"))
        {
            hits.push(format!(
                "{path}:{}: `.devcontainer/` path literal outside the file table; use a \
                 constant of `aibox_config::layout`",
                i + 1
            ));
        }
    }
    hits
}

/// Per line: the code outside comments and string literals, and the string literals that
/// start on that line. Scanning stops at the first `#[cfg(test)]` (unit tests sit at the
/// end of a file by convention).
pub(crate) fn strip_comments_and_tests(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = vec![(String::new(), Vec::new())];
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut string_line = 0;
    let mut string: Option<String> = None;
    let mut block_comment = 0usize;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if let Some(s) = string.as_mut() {
            match c {
                '\\' => {
                    if let Some(n) = next {
                        s.push(n);
                    }
                    i += 2;
                    continue;
                }
                '"' => {
                    let done = string.take().unwrap_or_default();
                    out[string_line].1.push(done);
                }
                '\n' => {
                    s.push('\n');
                    out.push((String::new(), Vec::new()));
                }
                _ => s.push(c),
            }
            i += 1;
            continue;
        }
        if block_comment > 0 {
            if c == '*' && next == Some('/') {
                block_comment -= 1;
                i += 2;
                continue;
            }
            if c == '/' && next == Some('*') {
                block_comment += 1;
                i += 2;
                continue;
            }
            if c == '\n' {
                out.push((String::new(), Vec::new()));
            }
            i += 1;
            continue;
        }
        match (c, next) {
            ('/', Some('/')) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            ('/', Some('*')) => {
                block_comment = 1;
                i += 2;
                continue;
            }
            ('"', _) => {
                string = Some(String::new());
                string_line = out.len() - 1;
            }
            // A char literal such as '"' or '\'' (a lifetime has no closing quote).
            ('\'', Some(n)) => {
                if n == '\\' && chars.get(i + 3) == Some(&'\'') {
                    i += 4;
                    continue;
                }
                if chars.get(i + 2) == Some(&'\'') {
                    i += 3;
                    continue;
                }
                if let Some(l) = out.last_mut() {
                    l.0.push(c);
                }
            }
            ('\n', _) => {
                if out.last().is_some_and(|l| l.0.trim() == "#[cfg(test)]") {
                    if let Some(l) = out.last_mut() {
                        l.0.clear();
                    }
                    return out;
                }
                out.push((String::new(), Vec::new()));
            }
            _ => {
                if let Some(l) = out.last_mut() {
                    l.0.push(c);
                }
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(path: &str, text: &str) -> Vec<String> {
        product_rules(path, text)
    }

    #[test]
    fn writes_outside_the_writer_are_refused() {
        let p = "crates/aibox-engine/src/init.rs";
        for sample in [
            "fn f() { fs_err::write(&p, b\"x\").unwrap(); }",
            "fn f() { std::fs::rename(a, b)?; }",
            "fn f() { let _ = fs_err::remove_file(&tmp); }",
            "fn f() { fs_err::create_dir_all(dir)?; }",
            "fn f() { let f = std::fs::File::create(p)?; }",
            "fn f() { fs_err::OpenOptions::new().write(true); }",
            "fn f() { tempfile::NamedTempFile::new_in(dir)?; }",
            "fn f() { std::fs::File::options().append(true).open(p)?; }",
        ] {
            assert_eq!(hits(p, sample).len(), 1, "{sample}");
        }
        // Reads, comments, strings and unit tests are fine.
        for sample in [
            "fn f() { fs_err::read_to_string(&p)?; }",
            "// fs_err::write(&p, x) would be wrong here\nfn f() {}",
            "/* std::fs::rename(a, b) */ fn f() {}",
            "fn f() { let s = \"fs::write(\"; }",
            "fn f() {}\n#[cfg(test)]\nmod tests { fn g() { fs_err::write(p, x).unwrap(); } }",
        ] {
            assert!(
                hits(p, sample).is_empty(),
                "{sample}: {:?}",
                hits(p, sample)
            );
        }
        // The writer itself and the commented allowlist are exempt.
        assert!(hits(WRITER, "fn f() { fs_err::rename(a, b)?; }").is_empty());
        assert!(
            hits(
                "crates/aibox-provenance/src/cache.rs",
                "fn f() { fs_err::rename(a, b)?; }"
            )
            .is_empty()
        );
    }

    #[test]
    fn devcontainer_path_literals_only_in_the_file_table() {
        let p = "crates/aibox-policy/src/gate.rs";
        let bad = "const X: &str = \".devcontainer/docker-compose.yml\";";
        assert_eq!(hits(p, bad).len(), 1);
        assert_eq!(
            hits(p, "let x = \"/.devcontainer/aibox-seccomp.json\";").len(),
            1
        );
        assert!(hits(LAYOUT, bad).is_empty());
        // Prose naming the folder, comments, char literals and lifetimes are fine.
        for sample in [
            "/// Writes `.devcontainer/Dockerfile`.\nfn f() {}",
            "let help = \"install it in `.devcontainer/Dockerfile.local` instead\";",
            "fn f<'a>(x: &'a str) -> char { let q = '\"'; q }\nconst Y: &str = \"ok\";",
        ] {
            assert!(
                hits(p, sample).is_empty(),
                "{sample}: {:?}",
                hits(p, sample)
            );
        }
        // A string after a char literal holding a quote is still seen.
        assert_eq!(
            hits(p, "let q = '\"'; let x = \".devcontainer/x\";").len(),
            1
        );
    }

    #[test]
    fn the_plan_does_no_file_system_access() {
        for p in [
            "crates/aibox-engine/src/plan.rs",
            "crates/aibox-engine/src/sources/gitignore.rs",
        ] {
            for sample in [
                "fn f() { let t = fs_err::read_to_string(&p)?; }",
                "fn f() { std::fs::metadata(&p)?; }",
                "fn f(root: &ProjectRoot) {}",
                "fn f() { let b = root.read(rel)?; }",
                "fn f() { let b = resolved.project_root(); }",
                "fn f() { for e in dir.read_dir()? {} }",
                "fn f() { let f = File::open(p)?; }",
            ] {
                assert_eq!(hits(p, sample).len(), 1, "{p}: {sample}");
            }
            // The snapshot through the context, comments and unit tests are fine.
            for sample in [
                "fn f() { let b = ctx.read(rel)?; let t = ctx.read_text(rel)?; }",
                "/// Reads nothing: `fs_err::read` happened in resolve.\nfn f() {}",
                "fn f() {}\n#[cfg(test)]\nmod tests { fn g() { fs_err::write(p, x).unwrap(); } }",
            ] {
                assert!(
                    hits(p, sample).is_empty(),
                    "{sample}: {:?}",
                    hits(p, sample)
                );
            }
        }
        // Outside the plan reads are fine; the processkit source is no exception any more
        // (its live-tree scan is in resolve).
        let read = "fn f() { let t = fs_err::read_to_string(&p)?; }";
        assert!(hits("crates/aibox-engine/src/resolve.rs", read).is_empty());
        assert_eq!(
            hits("crates/aibox-engine/src/sources/processkit.rs", read).len(),
            1
        );
    }

    #[test]
    fn product_code_is_crates_src_without_test_support() {
        assert!(is_product("crates/aibox-engine/src/apply.rs"));
        assert!(!is_product("crates/aibox-engine/tests/apply.rs"));
        assert!(!is_product("crates/aibox-policy/benches/secrets.rs"));
        assert!(!is_product("crates/aibox-test-support/src/podman.rs"));
        assert!(!is_product("xtask/src/main.rs"));
    }
}
