//! Secrets by shape (issue #27): every case of `fixtures/secret-corpus.tsv` is put where
//! aibox writes committed values (an MCP argument, an argument after a flag, a URL, a
//! header, an MCP server's `env`, `container.environment`, `post_create_command`, the
//! extra CA bundle), and a
//! real `apply` must refuse exactly the secrets and accept everything else. The second
//! test measures false positives on aibox's own outputs: the real-shaped processkit
//! release and the bundled example project, scanned after apply, must have none.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers may fail loudly

use crate::common;

use aibox_engine::{ApplyOptions, apply};
use aibox_policy::{TextKind, scan_secrets};
use aibox_test_support::http::Server;
use aibox_test_support::http::release::SyntheticRelease;
use camino::{Utf8Path, Utf8PathBuf};

/// One line of the corpus.
struct Case {
    secret: bool,
    place: String,
    value: String,
    note: String,
    key: Option<String>,
}

fn corpus() -> Vec<Case> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/secret-corpus.tsv"
    );
    fs_err::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            assert!(
                matches!(f[0], "secret" | "clean") && f.len() >= 4,
                "bad line {line}"
            );
            Case {
                secret: f[0] == "secret",
                place: f[1].to_owned(),
                value: f[2].to_owned(),
                note: f[3].to_owned(),
                key: f.get(4).map(|k| (*k).to_owned()),
            }
        })
        .collect()
}

/// A TOML basic string (JSON's escaping is valid TOML for these values).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

const BASE: &str = "[container]\nname = \"demo\"\nengine = \"podman\"\n\n[context]\nmode = \"harness-only\"\n\n[ai]\nharnesses = [\"claude\", \"codex\", \"opencode\"]\n";

/// The project files that put `case.value` in its place.
fn project_for(case: &Case, root: &Utf8Path) -> String {
    let v = &case.value;
    let server = |body: String| format!("{BASE}\n[[ai.mcp.servers]]\nname = \"tool\"\n{body}");
    match case.place.as_str() {
        "arg" => server(format!("command = \"tool\"\nargs = [{}]\n", quoted(v))),
        "arg-after-flag" => {
            let args: Vec<String> = v.split(' ').map(quoted).collect();
            server(format!(
                "command = \"tool\"\nargs = [{}]\n",
                args.join(", ")
            ))
        }
        "url" => server(format!("url = {}\n", quoted(v))),
        "mcp-env" => server(format!(
            "command = \"tool\"\nenv = {{ {} = {} }}\n",
            case.key.as_deref().unwrap_or("SETTING"),
            quoted(v)
        )),
        "header" => server(format!(
            "url = \"https://mcp.example.invalid/mcp\"\nheaders = {{ X-Custom = {} }}\n",
            quoted(v)
        )),
        "env" => {
            let key = case.key.as_deref().unwrap_or("SETTING");
            BASE.replacen(
                "engine = \"podman\"\n",
                &format!(
                    "engine = \"podman\"\nenvironment = {{ {key} = {} }}\n",
                    quoted(v)
                ),
                1,
            )
        }
        "command" => format!(
            "{BASE}\n[container.lifecycle]\npost_create_command = {}\n",
            quoted(v)
        ),
        "ca" => {
            // The corpus's certificate bodies are placeholders; aibox reads a CA file's
            // certificates, so each becomes a real one.
            let pem = aibox_test_support::http::test_ca_pem();
            let body = pem
                .lines()
                .filter(|l| !l.starts_with("-----"))
                .collect::<Vec<_>>()
                .join("|");
            let v = v.replace("MIIBfake", &body).replace("MIICfake", &body);
            fs_err::write(root.join("ca.crt"), v.replace('|', "\n") + "\n").unwrap();
            fs_err::write(
                root.join(".aibox-local.toml"),
                "[container]\nextra_ca_certificates = \"ca.crt\"\n",
            )
            .unwrap();
            BASE.to_owned()
        }
        other => panic!("unknown place {other}"),
    }
}

/// Codes that mean "refused as a secret".
fn is_secret_refusal(code: &str) -> bool {
    code.starts_with("aibox::policy::secret")
        || code == "aibox::mcp::literal_secret"
        || code == "aibox::config::literal_secret"
        || code == "aibox::apply::extra_ca"
}

#[test]
fn every_committed_value_is_judged_by_format_and_by_shape() {
    let cases = corpus();
    assert!(cases.len() >= 189, "the corpus has {} cases", cases.len());
    let (mut caught, mut positives, mut false_pos, mut negatives) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    for case in &cases {
        let (_t, root) = common::empty_project();
        let toml = project_for(case, &root);
        fs_err::write(root.join("aibox.toml"), &toml).unwrap();
        let result = apply(&root, &ApplyOptions::default());
        let refused = match &result {
            Ok(_) => false,
            Err(e) => {
                // The error and its help, as the CLI prints them (miette renders both).
                let help = miette::Diagnostic::help(e).map(|h| h.to_string());
                let text = format!("{e:?}\n{}", help.unwrap_or_default());
                let code = common::code(e);
                assert!(
                    is_secret_refusal(&code)
                        || code == "aibox::policy::gate" && text.contains("aibox::policy::secret"),
                    "{}: refused for another reason: {code}: {text}",
                    case.note
                );
                // The value never appears in the message; the remedy names a reference
                // (or, for a CA bundle, the key block to remove).
                if case.place != "ca" {
                    assert!(!text.contains(&case.value), "{}: value leaked", case.note);
                    assert!(
                        text.contains("${"),
                        "{}: no `${{NAME}}` remedy: {text}",
                        case.note
                    );
                }
                true
            }
        };
        if case.secret {
            positives += 1;
            caught += usize::from(refused);
        } else {
            negatives += 1;
            false_pos += usize::from(refused);
        }
        if refused != case.secret {
            wrong.push(format!("{} [{}]: {}", case.note, case.place, case.value));
        }
    }
    println!(
        "secret corpus: {caught}/{positives} secrets refused, {false_pos}/{negatives} clean values refused"
    );
    assert!(wrong.is_empty(), "misjudged:\n{}", wrong.join("\n"));
}

/// Every file aibox wrote into the project (its own outputs), without the installed
/// release content under `context/` (documentation that shows credentials on purpose).
fn aibox_outputs(root: &Utf8Path) -> Vec<Utf8PathBuf> {
    let (files, _) = common::walk_all(root);
    files
        .into_iter()
        .filter(|p| !p.starts_with("context/") && !p.starts_with(".aibox/"))
        .map(Utf8PathBuf::from)
        .collect()
}

/// How many string values the JSON and TOML outputs hold (what was judged).
fn string_values(path: &Utf8Path, text: &str) -> usize {
    fn count(v: &serde_json::Value) -> usize {
        match v {
            serde_json::Value::String(_) => 1,
            serde_json::Value::Array(a) => a.iter().map(count).sum(),
            serde_json::Value::Object(o) => o.values().map(count).sum(),
            _ => 0,
        }
    }
    let value = match path.extension() {
        Some("json") => serde_json::from_str(text).ok(),
        Some("toml" | "lock") => toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|t| serde_json::to_value(t).ok()),
        _ => None,
    };
    value.as_ref().map_or(0, count)
}

/// Scans every output file; returns (files, string values, findings as text).
fn scan_outputs(root: &Utf8Path) -> (usize, usize, Vec<String>) {
    let files = aibox_outputs(root);
    let mut values = 0;
    let mut findings = Vec::new();
    for rel in &files {
        let Ok(text) = fs_err::read_to_string(root.join(rel)) else {
            continue;
        };
        values += string_values(rel, &text);
        for f in scan_secrets(rel.as_str(), &text, TextKind::from_path(rel.as_str())) {
            findings.push(f.to_string());
        }
    }
    (files.len(), values, findings)
}

#[test]
fn aibox_outputs_for_the_real_shaped_release_and_the_examples_have_no_false_positives() {
    // The real-shaped processkit release, every harness.
    let release = SyntheticRelease::processkit_like("v0.28.3", false);
    let server = Server::start().unwrap();
    common::publish(&server, &release);
    let (_t, root) = common::empty_project();
    let (_c, cache) = common::empty_project();
    fs_err::write(
        root.join("aibox.toml"),
        format!(
            "[container]\nname = \"pk\"\n\n[context]\nmode = \"processkit\"\npackages = [\"product\"]\n\n\
             [processkit]\nsource = \"{url}\"\nversion = \"v0.28.3\"\n\
             trusted_sources = [\"{url}\"]\n\n\
             [ai]\nharnesses = [\"claude\", \"codex\", \"gemini\", \"opencode\", \"cursor\", \"vscode\"]\n\n\
             [ai.mcp.gateway]\nmode = \"separate\"\n",
            url = server.url("/org/processkit.git")
        ),
    )
    .unwrap();
    apply(&root, &common::apply_opts(Some(&cache))).unwrap();
    let (files, values, findings) = scan_outputs(&root);
    println!(
        "real-shaped release: {files} files, {values} values, {} findings",
        findings.len()
    );
    assert!(files > 10 && values > 500, "{files} files, {values} values");
    assert_eq!(findings, Vec::<String>::new());

    // The bundled example project with its content pack, as `cargo xtask demo` runs it.
    let (_d, dir) = common::empty_project();
    let examples = Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for (from, to) in [("demo", "demo"), ("processkit-pack", "processkit-pack")] {
        aibox_test_support::copy_tree(&examples.join(from), &dir.join(to)).unwrap();
    }
    let demo = dir.join("demo");
    apply(&demo, &common::apply_opts(None)).unwrap();
    let (files, values, findings) = scan_outputs(&demo);
    println!(
        "examples/demo: {files} files, {values} values, {} findings",
        findings.len()
    );
    assert!(files > 5 && values > 20, "{files} files, {values} values");
    assert_eq!(findings, Vec::<String>::new());
}

/// The skill review judges a file's lines with one `CredentialScan` made for the whole
/// file (each rule runs only when its needle is somewhere in the file). Every piece of the
/// file, each line and each piece cut from either end of one, must get exactly what `find_credential` says of
/// that piece alone: a needle test that misses a piece would hide a secret from the review.
/// The policy gate's line scan takes the same per-file scan, so it must flag exactly the
/// lines `find_credential` flags one by one.
#[test]
fn a_scan_made_for_the_whole_file_finds_what_each_piece_alone_finds() {
    use aibox_config::secret_rules::{CredentialScan, find_credential};
    // Prose that holds needles without being a credential: the rules must still run on
    // these lines and still say no.
    let prose = [
        "# Title",
        "see https://example.com/a@b for the ASIA page",
        "Basic usage: bearer of news, password= is documented below",
        "ids 123456789: ok, eyJ is a prefix, sk- is too",
        "-----BEGIN CERTIFICATE-----",
        "AccountKey=<your key>; Pwd=***",
    ];
    let cases = corpus();
    assert!(cases.len() > 200, "the corpus shrank: {}", cases.len());
    for (i, case) in cases.iter().enumerate() {
        let value = case.value.replace('|', "\n");
        let cut = value
            .char_indices()
            .nth(value.chars().count() / 2)
            .map_or(0, |(at, _)| at);
        let text = format!(
            "{}\n{value}\nkey: \"{value}\" # {}\n{}\n{}\n{}\n",
            prose[i % prose.len()],
            case.note,
            &value[..cut],
            &value[cut..],
            prose[(i + 1) % prose.len()],
        );
        let scan = CredentialScan::for_text(&text);
        for line in text.lines() {
            let bounds: Vec<usize> = line
                .char_indices()
                .map(|(at, _)| at)
                .chain([line.len()])
                .collect();
            // The line, and each piece cut at its start or its end.
            for piece in bounds
                .iter()
                .map(|&at| &line[at..])
                .chain(bounds.iter().map(|&at| &line[..at]))
            {
                assert_eq!(
                    scan.find(piece),
                    find_credential(piece),
                    "{}: {piece:?} of {text:?}",
                    case.note
                );
            }
        }
        let gate: Vec<usize> = scan_secrets("notes.txt", &text, TextKind::Plain)
            .iter()
            .filter_map(|f| f.line)
            .collect();
        let alone: Vec<usize> = (1..)
            .zip(text.lines())
            .filter(|(_, line)| find_credential(line).is_some())
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            gate, alone,
            "{}: lines the gate flags in {text:?}",
            case.note
        );
    }
    // A file without any needle skips every rule and every line.
    assert!(CredentialScan::for_text("# Notes\n\nPlain prose, no tokens here.\n").is_empty());
    assert!(!CredentialScan::for_text("x\nid: 12345678:abc\n").is_empty());
}
