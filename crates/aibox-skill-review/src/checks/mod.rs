//! The six review points. Each module has `fn check(...) -> Findings`.
//!
//! [`Skill`] is the skill read once: its files, parsed Python modules, `SKILL.md` and
//! dependency declarations, shared by all points.

pub(crate) mod credentials;
pub(crate) mod network;
pub(crate) mod pinned;
pub(crate) mod source;
pub(crate) mod supply_chain;
pub(crate) mod tools;

use std::ops::Range;

use crate::deps::{self, DepScan};
use crate::files::Entry;
use crate::python::{ParseError, PyFile};
use crate::shell::{self, Command};
use crate::skill::{self, SkillMeta};

/// A Python file of the skill and its analysis.
pub(crate) struct PySource<'a> {
    pub entry: &'a Entry,
    pub parsed: Result<PyFile, ParseError>,
}

/// The skill, read once.
pub(crate) struct Skill<'a> {
    pub dir_name: String,
    pub entries: &'a [Entry],
    pub python: Vec<PySource<'a>>,
    pub meta: SkillMeta,
    pub deps: DepScan,
}

impl<'a> Skill<'a> {
    pub(crate) fn load(dir_name: String, entries: &'a [Entry]) -> Self {
        let python = entries
            .iter()
            .filter(|e| e.extension() == "py")
            .filter_map(|e| {
                e.text().map(|t| PySource {
                    entry: e,
                    parsed: PyFile::parse(t),
                })
            })
            .collect();
        let meta = skill::parse_skill_md(
            entries
                .iter()
                .find(|e| e.rel == "SKILL.md")
                .and_then(Entry::text),
        );
        let deps = deps::scan(entries);
        Self {
            dir_name,
            entries,
            python,
            meta,
            deps,
        }
    }

    /// The skill's name: `SKILL.md` `name`, else the directory name.
    pub(crate) fn name(&self) -> &str {
        self.meta.name.as_deref().unwrap_or(&self.dir_name)
    }

    /// The entry at a relative path.
    pub(crate) fn entry(&self, rel: &str) -> Option<&'a Entry> {
        self.entries.iter().find(|e| e.rel == rel)
    }

    /// Successfully parsed Python files.
    pub(crate) fn parsed(&self) -> impl Iterator<Item = (&'a Entry, &PyFile)> {
        self.python
            .iter()
            .filter_map(|p| p.parsed.as_ref().ok().map(|f| (p.entry, f)))
    }

    /// Shell scripts (`.sh`, `.bash`, or a `sh`/`bash` shebang) with their text.
    pub(crate) fn shell_scripts(&self) -> impl Iterator<Item = (&'a Entry, &'a str)> {
        self.entries.iter().filter_map(|e| {
            let text = e.text()?;
            let first = text.lines().next().unwrap_or("");
            let shebang =
                first.starts_with("#!") && (first.contains("sh") && !first.contains("python"));
            (matches!(e.extension().as_str(), "sh" | "bash") || shebang).then_some((e, text))
        })
    }
}

/// Process-spawning functions whose first argument is a command line or argv.
pub(crate) const SPAWNERS: [&str; 19] = [
    "subprocess.run",
    "subprocess.call",
    "subprocess.check_call",
    "subprocess.check_output",
    "subprocess.Popen",
    "subprocess.getoutput",
    "subprocess.getstatusoutput",
    "os.system",
    "os.popen",
    "os.execv",
    "os.execvp",
    "os.execl",
    "os.execlp",
    "os.spawnv",
    "os.spawnl",
    "os.posix_spawn",
    "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell",
    "pty.spawn",
];

/// A process spawn found in Python code.
pub(crate) struct Spawn {
    pub line: u32,
    pub callee: String,
    /// The command, when it is written as literals.
    pub commands: Option<Vec<Command>>,
}

/// Every process spawn in a Python file, with the command when it is literal.
pub(crate) fn spawns(file: &PyFile) -> Vec<Spawn> {
    let mut out = Vec::new();
    for call in &file.calls {
        if !SPAWNERS.contains(&call.callee.as_str()) {
            continue;
        }
        let positional = file.positional(call.args.clone());
        let commands = positional.first().and_then(|first| {
            // `exec`-style spawners take the argv as separate arguments.
            let exec_style = call.callee.ends_with("_exec")
                || call.callee.starts_with("os.exec")
                || call.callee.starts_with("os.spawn");
            if exec_style && file.literal(first).is_some() {
                let argv = positional.iter().map(|a| word_of(file, a)).collect();
                return Some(vec![Command { argv, piped: false }]);
            }
            if let Some(s) = file.literal(first) {
                return Some(shell::shell_commands(s));
            }
            list_argv(file, first).map(|argv| vec![Command { argv, piped: false }])
        });
        out.push(Spawn {
            line: call.line,
            callee: call.callee.clone(),
            commands,
        });
    }
    out
}

fn word_of(file: &PyFile, arg: &Range<usize>) -> String {
    file.literal(arg)
        .map_or_else(|| "<expr>".to_owned(), str::to_owned)
}

/// The argv of a `[...]` or `(...)` literal whose first element is a literal string.
fn list_argv(file: &PyFile, arg: &Range<usize>) -> Option<Vec<String>> {
    let open = &file.toks[arg.start];
    if !(open.is_op("[") || open.is_op("(")) || file.closing(arg.start) + 1 != arg.end {
        return None;
    }
    let items = file.split_args(arg.start + 1..arg.end - 1);
    let argv: Vec<String> = items.iter().map(|a| word_of(file, a)).collect();
    // `[sys.executable, "-m", "pip", ...]` still tells what runs.
    (!argv.is_empty() && argv.iter().any(|w| w != "<expr>")).then_some(argv)
}

/// Tests, judged as such: they are not run when the skill's server or scripts run, so
/// their network code and hosts are shown as warnings. `tests/` or `test/` anywhere in the
/// path, `test_*.py`, `*_test.py` and `conftest.py`.
pub(crate) fn is_test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let stem = name
        .rsplit_once('.')
        .filter(|(_, ext)| ext.eq_ignore_ascii_case("py"))
        .map(|(stem, _)| stem);
    rel.split('/').any(|c| c == "tests" || c == "test")
        || stem.is_some_and(|s| s == "conftest" || s.starts_with("test_") || s.ends_with("_test"))
}

/// Secret-like variable names: the shared rule of `aibox_config::secret_rules`.
pub(crate) fn is_secret_name(name: &str) -> bool {
    aibox_config::secret_rules::is_secret_key(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for yes in [
            "GITHUB_TOKEN",
            "my_api_key",
            "DB_PASSWORD",
            "AUTH",
            "X_AUTH_HEADER",
            "AWS_ACCESS_KEY_ID",
        ] {
            assert!(is_secret_name(yes), "{yes}");
        }
        for no in [
            "HOME",
            "AUTHOR",
            "PROCESSKIT_LIB_PATH",
            "TOKENIZER_PATH_X",
            "KEYBOARD",
        ] {
            assert!(!is_secret_name(no), "{no}");
        }
    }
}
