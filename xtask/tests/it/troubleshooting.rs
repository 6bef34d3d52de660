//! The troubleshooting page (`docs-site/src/troubleshooting.md`) has an entry for every
//! error code aibox's product code can report (`aibox::AREA::NAME`, in `code(...)`
//! attributes and in the codes of doctor and policy findings), under its area, with the
//! fixed help text of the diagnostic where the source has one. The list is generated from
//! the source: a new code without an entry fails here; regenerate the page's generated
//! part with `AIBOX_UPDATE_DOCS=1 cargo test -p xtask --test it -- troubleshooting::` and
//! review the diff (the hand-written part above it is kept).
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail loudly

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use aibox_test_support::files_with_extension;

const PAGE: &str = "docs-site/src/troubleshooting.md";
const BEGIN: &str =
    "<!-- generated from the source: every error code (xtask/tests/it/troubleshooting.rs) -->";
const END: &str = "<!-- end of the generated part -->";

/// Every area of the codes, in page order, with what to try first for any of its codes.
const AREAS: &[(&str, &str, &str)] = &[
    (
        "cli",
        "Command line",
        "The arguments or the terminal: `aibox help COMMAND` shows the usage (exit 2).",
    ),
    (
        "config",
        "Configuration (`aibox.toml`, `.aibox-local.toml`)",
        "The message points at the file, line and column. `aibox config validate` checks both \
         files without writing anything; `aibox config get KEY` shows the value aibox uses.",
    ),
    (
        "init",
        "`aibox init`",
        "`init` only creates a new `aibox.toml`; change an existing one with `aibox config set` \
         or by hand.",
    ),
    (
        "apply",
        "Writing files (`aibox apply`)",
        "Nothing is half-written: a refused file stops `apply` before the write, and an \
         interrupted one is completed by the next `apply`. A file you edited by hand is never \
         overwritten: move the change into `aibox.toml` or the user-owned `Dockerfile.local` / \
         `docker-compose.override.yml`, or `aibox apply --force` (keeps a backup in \
         `.aibox/backups/`).",
    ),
    (
        "migrate",
        "Finishing a processkit upgrade (`aibox migrate`)",
        "`aibox migrate list` shows what is waiting and `aibox migrate show ID` the three \
         versions of each conflicting file. Every refusal leaves the files as they were. The \
         base version is read from the download cache; once the cache no longer holds the \
         previous release it cannot be shown or taken (exit 3): take ours or theirs instead.",
    ),
    (
        "lock",
        "The lock file (`aibox.lock`)",
        "`aibox.lock` is written by `apply` only. Restore it from git (`git checkout -- \
         aibox.lock`) and run `aibox apply`.",
    ),
    (
        "devcontainer",
        "Generating the dev container files",
        "A value in `[container]` or `.aibox-local.toml` cannot be written safely into the \
         Dockerfile, the Compose files or `.devcontainer/aibox-local.env`; the message names the key.",
    ),
    (
        "base_image",
        "The base image (`aibox base-image pin`)",
        "Pinning asks the registry for the tag's digest; check the reference (it needs a tag) \
         and that the registry is reachable.",
    ),
    (
        "addon",
        "Add-on tools (`aibox addon`)",
        "`aibox addon list` shows the tools the catalog offers.",
    ),
    (
        "policy",
        "The policy gate",
        "The gate refuses a container option that weakens isolation, or a secret in a committed \
         file, before anything is written or started. Remove the setting, or, if you mean it, \
         record the consent the message names in `aibox.toml` (`[[security.exceptions]]` with \
         a reason, or the `[security]` key); see the security model. A secret belongs in \
         `.aibox-local.toml`.",
    ),
    (
        "provenance",
        "processkit releases (download and verification)",
        "A release is used only when its SHA-256 matches the pin. A failed download is an \
         environment error (exit 3): check the network or proxy and run again; a digest \
         mismatch means the bytes are not the pinned release, so check `[processkit]` and never \
         just update the digest without knowing why it changed.",
    ),
    (
        "processkit",
        "processkit content",
        "`aibox doctor --integrity` checks every installed file against its manifest; \
         `aibox apply` repairs what it reports.",
    ),
    (
        "skill",
        "Skills (`aibox skill`)",
        "`aibox skill list` shows the skills of the installed release.",
    ),
    (
        "skill_review",
        "The skill review",
        "`aibox skill review PATH` shows the six points and which one failed; fix the skill or \
         record a consent for it.",
    ),
    (
        "mcp",
        "MCP servers",
        "`aibox mcp list` shows the effective servers per harness; `aibox mcp check` starts \
         each in the running container. Literal secrets are refused in committed server \
         definitions: use a `${NAME}` reference, or put the server in `.aibox-local.toml`.",
    ),
    (
        "runtime",
        "Running the container (`up`, `down`, `status`, `exec`)",
        "Check that Podman or Docker and a Compose provider are installed and answer \
         (`podman info`, `docker info`); `aibox up -v` shows every line the engine prints. A \
         failed build names its step: a `Dockerfile.local` step, a download that did not trust \
         a TLS-inspecting proxy (set `extra_ca_certificates` in `.aibox-local.toml`), or a \
         checksum.",
    ),
    (
        "lifecycle",
        "Lifecycle commands",
        "`post_create_command` and `post_start_command` run through `sh -c` as the container \
         user in `/workspace`; the message carries the command's exit status and output.",
    ),
    (
        "doctor",
        "`aibox doctor` findings",
        "Each finding carries its own fix, printed under it (`--output json`: `help`).",
    ),
    (
        "updates",
        "Update check",
        "Only the newest minor release line gets fixes; `aibox self check` says whether yours \
         does. The check is skipped offline and with `AIBOX_NO_UPDATE_CHECK=1`.",
    ),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Product source: `crates/*/src` without test support, each file cut at its unit tests.
fn product_sources(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut crates: Vec<PathBuf> = fs_err::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("aibox-test-support"))
        .collect();
    crates.sort();
    for krate in crates {
        if krate.join("src").is_dir() {
            files.extend(files_with_extension(&krate.join("src"), "rs"));
        }
    }
    files
        .iter()
        .map(|f| {
            let text = fs_err::read_to_string(f).unwrap();
            match text.find("\n#[cfg(test)]") {
                Some(at) => text[..at].to_owned(),
                None => text,
            }
        })
        .collect()
}

fn is_word(c: char) -> bool {
    c.is_ascii_lowercase() || c == '_'
}

/// Every `aibox::AREA::NAME` in `text`, with its byte range.
fn codes(text: &str) -> Vec<(usize, usize, &str)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("aibox::") {
        if text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &text[at + "aibox::".len()..];
        let area_len = rest.chars().take_while(|c| is_word(*c)).count();
        let Some(after_area) = rest[area_len..].strip_prefix("::") else {
            continue;
        };
        let name_len = after_area.chars().take_while(|c| is_word(*c)).count();
        let next = after_area[name_len..].chars().next();
        if area_len == 0 || name_len == 0 || next.is_some_and(|c| c.is_alphanumeric() || c == ':') {
            continue;
        }
        let end = at + "aibox::".len() + area_len + 2 + name_len;
        out.push((at, end, &text[at..end]));
    }
    out
}

/// The string literal at the start of `s` (after whitespace), unescaped, with `\` line
/// continuations joined as Rust does.
fn string_literal(s: &str) -> Option<String> {
    let mut chars = s.trim_start().strip_prefix('"')?.chars().peekable();
    let mut out = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                '\n' => {
                    while chars.peek().is_some_and(|c| c.is_whitespace()) {
                        chars.next();
                    }
                }
                'n' => out.push('\n'),
                other => out.push(other),
            },
            _ => out.push(c),
        }
    }
    None
}

/// A help text as prose: each format argument (`{path}`, `{}`) becomes `…`, `{{`/`}}`
/// single braces; `None` when nothing but arguments is left (the help is all case).
fn prose(help: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = help.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                for n in chars.by_ref() {
                    if n == '}' {
                        break;
                    }
                }
                out.push('…');
            }
            '\n' => out.push(' '),
            _ => out.push(c),
        }
    }
    out.chars()
        .any(char::is_alphabetic)
        .then(|| out.trim().to_owned())
}

/// Every code with the fixed help of its `#[diagnostic(code(..), help(".."))]`, if any.
fn collect(root: &Path) -> BTreeMap<String, Option<String>> {
    let mut found: BTreeMap<String, Option<String>> = BTreeMap::new();
    for text in product_sources(root) {
        for (start, end, code) in codes(&text) {
            let in_attribute = text[..start].ends_with("code(");
            let help = in_attribute
                .then(|| {
                    let attribute =
                        &text[end..text[end..].find(")]").map_or(text.len(), |i| end + i)];
                    let at = attribute.find("help(")?;
                    string_literal(&attribute[at + "help(".len()..])
                })
                .flatten()
                .and_then(|h| prose(&h));
            let entry = found.entry(code.to_owned()).or_default();
            if entry.is_none() {
                *entry = help;
            }
        }
    }
    found
}

/// `<` outside code spans as `&lt;`, so a `<name>` in a help text is not read as HTML.
fn markdown(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 0 {
                part.replace('<', "&lt;")
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// The generated part of the page.
fn render(codes: &BTreeMap<String, Option<String>>) -> String {
    let mut out = format!("{BEGIN}\n");
    for (area, title, advice) in AREAS {
        let prefix = format!("aibox::{area}::");
        let mine: Vec<(&String, &Option<String>)> = codes
            .iter()
            .filter(|(c, _)| c.starts_with(&prefix))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let _ = write!(out, "\n### {title}\n\n{advice}\n\n");
        let mut bare = Vec::new();
        for (code, help) in mine {
            match help {
                Some(help) => {
                    let _ = writeln!(out, "- `{code}`: {}", markdown(help));
                }
                None => bare.push(format!("`{code}`")),
            }
        }
        if !bare.is_empty() {
            let _ = writeln!(
                out,
                "- The message of each of these carries the fix for the case at hand: {}.",
                bare.join(", ")
            );
        }
    }
    out.push('\n');
    out.push_str(END);
    out
}

#[test]
fn every_error_code_has_a_troubleshooting_entry() {
    let root = workspace();
    let codes = collect(&root);
    // The scan finds the codes it must (one of each kind), so a broken scan cannot pass.
    assert!(codes.len() > 100, "only {} codes found", codes.len());
    assert!(codes.get("aibox::apply::symlink").unwrap().is_some());
    assert!(codes.contains_key("aibox::policy::root_user"));
    assert!(codes.contains_key("aibox::doctor::stale_image"));
    let areas: Vec<&str> = AREAS.iter().map(|(a, _, _)| *a).collect();
    let unknown: Vec<&String> = codes
        .keys()
        .filter(|c| {
            !areas
                .iter()
                .any(|a| c.starts_with(&format!("aibox::{a}::")))
        })
        .collect();
    assert!(
        unknown.is_empty(),
        "codes of an area the troubleshooting page does not have yet (add it to AREAS in \
         xtask/tests/it/troubleshooting.rs): {unknown:?}"
    );

    let path = root.join(PAGE);
    let page = fs_err::read_to_string(&path).unwrap();
    let (Some(begin), Some(end)) = (page.find(BEGIN), page.find(END)) else {
        panic!("{PAGE} lacks the markers of its generated part");
    };
    let generated = render(&codes);
    let stop = end + END.len();
    let current = &page[begin..stop];
    if current == generated {
        return;
    }
    if std::env::var_os("AIBOX_UPDATE_DOCS").is_some() {
        let updated = format!("{}{generated}{}", &page[..begin], &page[stop..]);
        fs_err::write(&path, updated).unwrap();
        return;
    }
    let missing: Vec<&String> = codes
        .keys()
        .filter(|c| !current.contains(&format!("`{c}`")))
        .collect();
    panic!(
        "{PAGE} is out of date (codes without an entry: {missing:?}); run \
         `AIBOX_UPDATE_DOCS=1 cargo test -p xtask --test it -- troubleshooting::`, then read \
         the diff and commit it"
    );
}

#[test]
fn help_texts_read_as_prose() {
    assert_eq!(
        string_literal("  \"move `{path}` aside \\\n     and run {} again\" )").as_deref(),
        Some("move `{path}` aside and run {} again")
    );
    assert_eq!(
        prose("move `{path}` aside, {0} and {{x}} with {self.key:?}").as_deref(),
        Some("move `…` aside, … and {x} with …")
    );
    assert_eq!(prose("{help}"), None);
    assert_eq!(
        markdown("a <dir>/ and `<kept>`"),
        "a &lt;dir>/ and `<kept>`"
    );
    assert_eq!(prose(" {hint} {offline}"), None);
    let text = "code(aibox::apply::io), x aibox::doctor::no_lock; not myaibox::a::b nor \
                aibox::config::* nor aibox::runtime::Engine::x";
    let found: Vec<&str> = codes(text).into_iter().map(|(_, _, c)| c).collect();
    assert_eq!(found, ["aibox::apply::io", "aibox::doctor::no_lock"]);
}
