//! Point 3: no credential access beyond purpose.
//!
//! Credential path literals (`~/.ssh`, `.config/gh`, `.aibox-local.toml`, ...), reads of
//! secret-like environment variables, and access to the whole environment. The review has
//! no record of declared purposes, so every finding fails; a recorded consent in
//! `aibox.toml` is how a reviewer accepts it.

use super::{Skill, is_secret_name};
use crate::python::{Kind, PyFile};
use crate::report::Findings;

/// Credential locations, as `/`-separated path component sequences.
const CREDENTIAL_PATHS: [&str; 22] = [
    ".ssh",
    // Every variable of a process, the secret ones included (`/proc/self/environ`).
    "proc/*/environ",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    ".aws",
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
    ".config/gh",
    ".git-credentials",
    ".netrc",
    ".docker/config.json",
    ".kube/config",
    ".aibox-home",
    ".aibox-local.*",
    // The personal environment file, below `.devcontainer/`.
    "aibox-local.env",
    ".env",
    ".env.*",
    "run/secrets",
    ".gnupg",
];

/// Functions and attributes that read one variable: (qualified callee, index of the name).
const ENV_GETTERS: [&str; 6] = [
    "os.getenv",
    "os.environ.get",
    "os.environ.pop",
    "os.environ.setdefault",
    "os.getenvb",
    "os.environb.get",
];

pub(crate) fn check(skill: &Skill<'_>) -> Findings {
    let mut f = Findings::default();
    for (entry, file) in skill.parsed() {
        let rel = entry.rel.as_str();
        for t in file.toks.iter().filter(|t| t.is_str()) {
            if let Some(path) = credential_path(&t.text) {
                f.fail(
                    rel,
                    Some(t.line),
                    format!("refers to credential location `{path}`"),
                );
            }
        }
        env_access(rel, file, &mut f);
    }
    for (entry, text) in skill.shell_scripts() {
        for (i, l) in text.lines().enumerate() {
            let line = u32::try_from(i + 1).ok();
            if l.trim_start().starts_with('#') {
                continue;
            }
            for word in l.split(|c: char| {
                c.is_whitespace() || matches!(c, '"' | '\'' | '=' | '<' | '>' | '(' | ')')
            }) {
                if let Some(path) = credential_path(word) {
                    f.fail(
                        &entry.rel,
                        line,
                        format!("refers to credential location `{path}`"),
                    );
                }
            }
            for var in shell_vars(l) {
                if is_secret_name(&var) {
                    f.fail(
                        &entry.rel,
                        line,
                        format!("reads secret-like variable `{var}`"),
                    );
                }
            }
            let first = l.split_whitespace().next().unwrap_or("");
            if first == "env" && l.split_whitespace().count() == 1 || first == "printenv" {
                f.fail(&entry.rel, line, "dumps the whole environment");
            }
        }
    }
    credential_text(skill, &mut f);
    f
}

/// The credential location a string refers to, if any (matched on whole path components).
pub(crate) fn credential_path(s: &str) -> Option<&'static str> {
    let components: Vec<&str> = s
        .split(['/', '\\'])
        .map(|c| c.trim_start_matches('~'))
        .collect();
    CREDENTIAL_PATHS.into_iter().find(|cred| {
        let want: Vec<&str> = cred.split('/').collect();
        components.windows(want.len()).any(|w| {
            w.iter()
                .zip(&want)
                .all(|(have, want)| match want.strip_suffix('*') {
                    // `.env.*` covers `.env.local`; other names match exactly.
                    Some(prefix) => have.starts_with(prefix) && have.len() > prefix.len(),
                    None => have == want,
                })
        })
    })
}

fn env_access(rel: &str, file: &PyFile, f: &mut Findings) {
    for call in &file.calls {
        if !ENV_GETTERS.contains(&call.callee.as_str()) {
            continue;
        }
        let first = file.positional(call.args.clone()).into_iter().next();
        match first.as_ref().and_then(|a| file.literal(a)) {
            Some(name) if is_secret_name(name) => {
                f.fail(
                    rel,
                    Some(call.line),
                    format!("reads secret-like environment variable `{name}`"),
                );
            }
            Some(_) => {}
            None => f.warn(
                rel,
                Some(call.line),
                format!(
                    "`{}` with a computed name; check which variables it reads",
                    call.callee
                ),
            ),
        }
    }
    // `os.environ` used as a mapping: subscript, membership, iteration or copying.
    let toks = &file.toks;
    for i in 0..toks.len() {
        if i > 0 && toks[i - 1].is_op(".") {
            continue;
        }
        let Some((dotted, next)) = file.dotted_at(i) else {
            continue;
        };
        let q = file.qualify(&dotted);
        let line = toks[i].line;
        let method = q
            .strip_prefix("os.environ.")
            .or_else(|| q.strip_prefix("os.environb."));
        if let Some(method) = method {
            // Any method that reads, but the one-variable getters told above by their
            // literal name, reads what the review cannot name: `__getitem__`, `__iter__`,
            // `items`, ... (QA29 r7). Setting variables reads none.
            if !matches!(
                method,
                "get" | "pop" | "setdefault" | "update" | "clear" | "__setitem__" | "__delitem__"
            ) {
                f.fail(
                    rel,
                    Some(line),
                    format!("accesses the whole environment (`{dotted}`)"),
                );
            }
            continue;
        }
        if q != "os.environ" && q != "os.environb" {
            continue;
        }
        let after = toks.get(next);
        if after.is_some_and(|t| t.is_op("[")) {
            let key = toks
                .get(next + 1)
                .filter(|t| t.is_plain_str() && toks.get(next + 2).is_some_and(|c| c.is_op("]")));
            match key {
                Some(k) if is_secret_name(&k.text) => {
                    f.fail(
                        rel,
                        Some(line),
                        format!("reads secret-like environment variable `{}`", k.text),
                    );
                }
                Some(_) => {}
                None => f.warn(
                    rel,
                    Some(line),
                    "`os.environ[...]` with a computed name; check which variables it reads",
                ),
            }
            continue;
        }
        // `"NAME" in os.environ`: a membership test of one literal name.
        if i >= 2 && toks[i - 1].is_name("in") && toks[i - 2].is_plain_str() {
            let name = &toks[i - 2].text;
            if is_secret_name(name) {
                f.fail(
                    rel,
                    Some(line),
                    format!("checks for secret-like environment variable `{name}`"),
                );
            }
            continue;
        }
        let is_import = (0..i)
            .rev()
            .take_while(|&j| toks[j].kind != Kind::Newline)
            .any(|j| toks[j].is_name("import"));
        if !is_import {
            f.fail(
                rel,
                Some(line),
                format!(
                    "accesses the whole environment (`{dotted}` iterated, copied or passed on)"
                ),
            );
        }
    }
}

/// `$NAME` and `${NAME...}` references in a shell line.
fn shell_vars(l: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = l;
    while let Some(i) = rest.find('$') {
        rest = &rest[i + 1..];
        let body = rest.strip_prefix('{').unwrap_or(rest);
        let name: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// Credential-looking text in any text file of the skill (documentation examples such as
/// `postgres://user:pass@host`, `Authorization: Bearer ...`, a PEM header, token
/// formats). A warning, never a failure: release content is covered by its digest and
/// such text is usually a placeholder, but a reviewer should see where it is. The value
/// itself is never repeated.
fn credential_text(skill: &Skill<'_>, f: &mut Findings) {
    for entry in skill.entries {
        let Some(text) = entry.text() else {
            continue;
        };
        // The rules whose needle the file holds, found once for the whole file: most
        // files hold none, and then no line is looked at.
        let scan = aibox_config::secret_rules::CredentialScan::for_text(text);
        if scan.is_empty() {
            continue;
        }
        for (i, l) in text.lines().enumerate() {
            if let Some(kind) = scan.find(l).map(|hit| hit.kind) {
                f.warn(
                    &entry.rel,
                    u32::try_from(i + 1).ok(),
                    format!("credential-looking text ({kind}); check that it is a placeholder"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_paths() {
        assert_eq!(credential_path("~/.ssh/id_ed25519"), Some(".ssh"));
        assert_eq!(
            credential_path("/proc/self/environ"),
            Some("proc/*/environ")
        );
        assert_eq!(credential_path("/proc/1/environ"), Some("proc/*/environ"));
        assert_eq!(credential_path("/proc/self/status"), None);
        assert_eq!(
            credential_path("/home/u/.config/gh/hosts.yml"),
            Some(".config/gh")
        );
        assert_eq!(credential_path(".env.local"), Some(".env.*"));
        assert_eq!(credential_path("x/.env"), Some(".env"));
        assert_eq!(credential_path(".aibox-local.toml"), Some(".aibox-local.*"));
        assert_eq!(
            credential_path("/workspace/.devcontainer/aibox-local.env"),
            Some("aibox-local.env")
        );
        assert_eq!(credential_path("/run/secrets/db"), Some("run/secrets"));
        assert_eq!(credential_path(".environment"), None);
        assert_eq!(credential_path("docs/ssh.md"), None);
        assert_eq!(credential_path("my.claude.notes"), None);
    }

    #[test]
    fn environment_access() {
        let file = PyFile::parse(
            "import os\nfrom os import environ as E, getenv\na = os.environ['GITHUB_TOKEN']\nb = getenv('HOME')\nc = dict(E)\nd = os.environ.get(name)\nif 'OPENAI_API_KEY' in os.environ: pass\n",
        )
        .unwrap();
        let mut f = Findings::default();
        env_access("s.py", &file, &mut f);
        let p = f.into_point(3);
        let lines: Vec<_> = p
            .evidence
            .iter()
            .map(|e| (e.line.unwrap(), e.level.as_str()))
            .collect();
        assert_eq!(
            lines,
            vec![(3, "fail"), (5, "fail"), (6, "warn"), (7, "fail")]
        );
    }

    #[test]
    fn credential_looking_text() {
        // What the check does for a file of that one line.
        let credential_kind = |line: &str| {
            aibox_config::secret_rules::CredentialScan::for_text(line)
                .find(line)
                .map(|hit| hit.kind)
        };
        assert_eq!(
            credential_kind("url: postgres://user:pass@db.example.com/app"),
            Some("URL with an embedded password")
        );
        assert_eq!(credential_kind("see https://example.com/a@b"), None);
        assert_eq!(
            credential_kind("Authorization: Bearer abc123example"),
            Some("literal Bearer token")
        );
        assert_eq!(
            credential_kind("-----BEGIN RSA PRIVATE KEY-----"),
            Some("PEM private key")
        );
        assert_eq!(credential_kind("-----BEGIN CERTIFICATE-----"), None);
        assert_eq!(
            credential_kind("token = ghp_FAKEFAKEFAKEFAKEFAKE"),
            Some("GitHub token")
        );
        assert_eq!(credential_kind("plain prose"), None);
    }
}
