//! Point 1: the source is auditable.
//!
//! Every file is readable text (no compiled code, archives, executables or oversized
//! blobs), every Python file parses, every import resolves to the standard library,
//! processkit's `_lib`, a file inside the skill or a declared dependency, and nothing
//! builds code at run time (`exec`/`eval` of non-literals, decode-then-execute, long
//! base64/hex literals, minified lines).

use std::collections::BTreeSet;

use super::{PySource, Skill};
use crate::deps::normalise;
use crate::files::{Entry, EntryKind, MAX_FILE_BYTES};
use crate::python::{Kind, PyFile};
use crate::report::Findings;

const BINARY_EXTENSIONS: [&str; 22] = [
    "pyc", "pyo", "pyd", "so", "dylib", "dll", "exe", "bin", "o", "a", "whl", "egg", "zip", "tar",
    "gz", "tgz", "bz2", "xz", "zst", "7z", "jar", "rar",
];
const MAX_LINE: usize = 500;
const MAX_BLOB: usize = 1024;
/// Calls that run a file as code by its path: the review cannot tie the path to a
/// reviewed file (and `config/`, outside the content digest, may hold it), so each fails
/// (QA29 r4).
const FILE_AS_CODE: [&str; 8] = [
    "runpy.run_path",
    "runpy.run_module",
    "importlib.machinery.SourceFileLoader",
    "importlib.machinery.SourcelessFileLoader",
    "importlib.util.spec_from_file_location",
    "importlib.util.spec_from_loader",
    "zipimport.zipimporter",
    "imp.load_source",
];
const DYNAMIC_CODE: [&str; 8] = [
    "exec",
    "eval",
    "compile",
    "__import__",
    "builtins.exec",
    "builtins.eval",
    "importlib.import_module",
    "importlib.__import__",
];
const DECODERS: [&str; 12] = [
    "b64decode",
    "b32decode",
    "b16decode",
    "a85decode",
    "b85decode",
    "urlsafe_b64decode",
    "decompress",
    "loads",
    "unhexlify",
    "fromhex",
    "decode",
    "rot13",
];

/// Distribution names whose import name differs from the normalised distribution name.
const IMPORT_NAMES: [(&str, &str); 14] = [
    ("pyyaml", "yaml"),
    ("beautifulsoup4", "bs4"),
    ("python_dateutil", "dateutil"),
    ("pillow", "PIL"),
    ("scikit_learn", "sklearn"),
    ("opencv_python", "cv2"),
    ("python_dotenv", "dotenv"),
    ("pyjwt", "jwt"),
    ("attrs", "attr"),
    ("protobuf", "google"),
    ("typing_extensions", "typing_extensions"),
    ("python_frontmatter", "frontmatter"),
    ("ruamel_yaml", "ruamel"),
    ("gitpython", "git"),
];

pub(crate) fn check(skill: &Skill<'_>) -> Findings {
    let mut f = Findings::default();
    for e in skill.entries {
        check_entry(e, &mut f);
    }
    check_server_present(skill, &mut f);
    let declared = declared_modules(skill);
    for src in &skill.python {
        check_python(skill, src, &declared, &mut f);
    }
    f
}

fn in_code_dir(rel: &str) -> bool {
    rel.starts_with("mcp/") || rel.starts_with("scripts/")
}

fn check_entry(e: &Entry, f: &mut Findings) {
    let rel = e.rel.as_str();
    match &e.kind {
        EntryKind::Symlink { target } => {
            f.fail(
                rel,
                None,
                format!(
                    "symbolic link to `{target}`: its content is not part of the reviewed files"
                ),
            );
            return;
        }
        EntryKind::Special => {
            f.fail(rel, None, "not a regular file (socket, FIFO or device)");
            return;
        }
        EntryKind::File { bytes: None, .. } => {
            f.fail(
                rel,
                None,
                format!(
                    "larger than {} MiB; too large to audit",
                    MAX_FILE_BYTES / (1024 * 1024)
                ),
            );
            return;
        }
        EntryKind::File { .. } => {}
    }
    if rel.split('/').any(|c| c == "__pycache__")
        || BINARY_EXTENSIONS.contains(&e.extension().as_str())
    {
        f.fail(
            rel,
            None,
            format!(
                "compiled code or archive (`.{}`): ship the source instead",
                e.extension()
            ),
        );
        return;
    }
    let EntryKind::File {
        bytes: Some(bytes),
        executable,
    } = &e.kind
    else {
        return;
    };
    if let Some(kind) = executable_format(bytes) {
        f.fail(
            rel,
            None,
            format!("{kind} executable: ship the source instead"),
        );
        return;
    }
    let Some(text) = e.text() else {
        not_text(e, f);
        return;
    };
    if *executable && in_code_dir(rel) && !text.starts_with("#!") && !text.is_empty() {
        f.warn(
            rel,
            None,
            "executable bit set on a file without a `#!` line",
        );
    }
    let ext = e.extension();
    if matches!(ext.as_str(), "md" | "markdown") {
        return;
    }
    check_unread_code(rel, &ext, text, f);
    // A long line blocks only where it can run: in code. A data or document asset
    // (a CSV sample, JSON Lines cases, an SVG sprite, a report template) is read, not
    // run, so its long lines are only worth a look.
    let code =
        in_code_dir(rel) || CODE_EXTENSIONS.contains(&ext.as_str()) || text.starts_with("#!");
    for (i, l) in text.lines().enumerate() {
        let n = l.chars().count();
        if n <= MAX_LINE {
            continue;
        }
        if code {
            f.fail(rel, line(i), format!("line of {n} characters (over {MAX_LINE}): minified or generated code cannot be reviewed"));
        } else {
            f.warn(rel, line(i), format!("line of {n} characters (over {MAX_LINE}) in a data or document file; it is not code, but check that nothing loads it as code"));
        }
    }
}

/// A file that is not UTF-8 text: code (by its folder or its name) cannot be reviewed;
/// anything else is only worth a look.
fn not_text(e: &Entry, f: &mut Findings) {
    let rel = e.rel.as_str();
    if in_code_dir(rel) {
        f.fail(
            rel,
            None,
            "not UTF-8 text; every file under mcp/ and scripts/ must be readable source",
        );
    } else if CODE_EXTENSIONS.contains(&e.extension().as_str()) {
        // Code by its name is loaded as code wherever it sits (Python reads a
        // `coding:` line and imports it), so it must be read like code (QA29 r5).
        f.fail(
            rel,
            None,
            format!(
                "`.{}` code that is not UTF-8 text cannot be reviewed; save it as UTF-8",
                e.extension()
            ),
        );
    } else {
        f.warn(
            rel,
            None,
            "binary file (not UTF-8); make sure no code loads or runs it",
        );
    }
}

/// Code the review would pass without reading it: another language, or Python that
/// Python decodes differently from the text reviewed.
fn check_unread_code(rel: &str, ext: &str, text: &str, f: &mut Findings) {
    // Points 2 and 3 read Python and shell; code in another language would run
    // unread, so it is not passed on trust (QA29 r6).
    if UNREAD_CODE.contains(&ext) {
        f.fail(
            rel,
            None,
            format!(
                "`.{ext}` code is not read by the review (only Python and shell are), so \
                 its network and credential use are unknown; remove it, or read it and \
                 record a consent"
            ),
        );
    }
    if matches!(ext, "py" | "pyw")
        && let Some((line, coding)) = foreign_coding(text)
    {
        f.fail(
            rel,
            Some(line),
            format!(
                "declares the source encoding `{coding}`: Python decodes the file with it, so \
                 the code that runs is not the UTF-8 text reviewed; only UTF-8 source is \
                 reviewed"
            ),
        );
    }
}

/// Extensions of code the review does not analyse (see [`CODE_EXTENSIONS`]).
const UNREAD_CODE: [&str; 10] = [
    "js", "mjs", "cjs", "ts", "rb", "pl", "php", "lua", "ps1", "zsh",
];

/// A PEP 263 encoding declaration (on line 1 or 2) naming anything but UTF-8 or ASCII,
/// with its line: `utf-7` or a custom codec turns comments into code.
fn foreign_coding(text: &str) -> Option<(u32, String)> {
    for (i, l) in text.lines().take(2).enumerate() {
        let l = l.trim_start();
        if !l.starts_with('#') {
            continue;
        }
        let Some(at) = l.find("coding") else {
            continue;
        };
        let rest = &l[at + "coding".len()..];
        let Some(rest) = rest.strip_prefix(':').or_else(|| rest.strip_prefix('=')) else {
            continue;
        };
        let name: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
            .collect();
        let plain = name.to_ascii_lowercase().replace('_', "-");
        if !matches!(plain.as_str(), "utf-8" | "utf8" | "ascii" | "us-ascii") {
            return Some((u32::try_from(i + 1).unwrap_or(1), name));
        }
    }
    None
}

/// Extensions of files that run (or are loaded as code) wherever they sit in a skill.
const CODE_EXTENSIONS: [&str; 14] = [
    "py", "pyw", "sh", "bash", "zsh", "js", "mjs", "cjs", "ts", "rb", "pl", "php", "lua", "ps1",
];

fn executable_format(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x7f, b'E', b'L', b'F', ..] => Some("ELF"),
        [b'M', b'Z', ..] => Some("Windows (PE)"),
        [0xcf | 0xce, 0xfa, 0xed, 0xfe, ..] | [0xca, 0xfe, 0xba, 0xbe, ..] => Some("Mach-O"),
        [0x00, b'a', b's', b'm', ..] => Some("WebAssembly"),
        _ => None,
    }
}

fn check_server_present(skill: &Skill<'_>, f: &mut Findings) {
    let has_config = skill.entry("mcp/mcp-config.json").is_some();
    if has_config && skill.entry("mcp/server.py").is_none() {
        f.fail("mcp/mcp-config.json", None, "declares a server but `mcp/server.py` is missing: the code that would run is not reviewable");
    }
}

fn line(index: usize) -> Option<u32> {
    u32::try_from(index + 1).ok()
}

/// Import names satisfied by declared dependencies.
fn declared_modules(skill: &Skill<'_>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in &skill.deps.requirements {
        if r.name.is_empty() {
            continue;
        }
        out.insert(r.name.clone());
        for (dist, module) in IMPORT_NAMES {
            if r.name == dist {
                out.insert(normalise(module));
            }
        }
    }
    out
}

fn check_python(
    skill: &Skill<'_>,
    src: &PySource<'_>,
    declared: &BTreeSet<String>,
    f: &mut Findings,
) {
    let rel = src.entry.rel.as_str();
    let file = match &src.parsed {
        Ok(file) => file,
        Err(err) => {
            f.fail(
                rel,
                Some(err.line),
                format!("does not parse as Python: {}", err.message),
            );
            return;
        }
    };
    check_imports(skill, rel, file, declared, f);
    check_dynamic_code(rel, file, f);
    check_rebinding(rel, file, f);
    for t in &file.toks {
        if t.is_str() && is_blob(&t.text) {
            f.fail(rel, Some(t.line), format!("string literal of {} characters of base64 or hex: an embedded payload cannot be reviewed", t.text.len()));
        }
    }
}

fn check_imports(
    skill: &Skill<'_>,
    rel: &str,
    file: &PyFile,
    declared: &BTreeSet<String>,
    f: &mut Findings,
) {
    let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
    for imp in &file.imports {
        if imp.level > 0 {
            // Relative import: the module (or each imported name) must exist next to the file.
            let mut base = dir.to_owned();
            for _ in 1..imp.level {
                base = base
                    .rsplit_once('/')
                    .map_or(String::new(), |(d, _)| d.to_owned());
            }
            let candidates: Vec<String> = if imp.module.is_empty() {
                imp.names.iter().filter(|n| *n != "*").cloned().collect()
            } else {
                vec![imp.module.clone()]
            };
            // `from . import name` may also import an attribute of the package itself.
            let package_init = if base.is_empty() {
                "__init__.py".to_owned()
            } else {
                format!("{base}/__init__.py")
            };
            let from_package = imp.module.is_empty() && skill.entry(&package_init).is_some();
            for c in candidates {
                if !from_package && !module_exists(skill, &base, &c) {
                    f.fail(
                        rel,
                        Some(imp.line),
                        format!(
                            "relative import `{}{c}` does not resolve to a file inside the skill",
                            ".".repeat(imp.level)
                        ),
                    );
                }
            }
            continue;
        }
        let top = imp.module.split('.').next().unwrap_or(&imp.module);
        if is_stdlib(top)
            || top == "processkit"
            || top == "_lib"
            || declared.contains(&normalise(top))
        {
            continue;
        }
        let local = [dir, "mcp", "scripts", ""]
            .iter()
            .any(|d| module_exists(skill, d, top));
        if !local && super::is_test_file(rel) {
            // Tests bring their own runner's dependencies (pytest, …); they do not run
            // with the skill.
            f.warn(
                rel,
                Some(imp.line),
                format!("import `{}` in a test file is not a declared dependency (tests do not run with the skill)", imp.module),
            );
        } else if !local {
            f.fail(
                rel,
                Some(imp.line),
                format!("import `{}` resolves to neither the standard library, processkit's `_lib`, a file inside the skill nor a declared dependency", imp.module),
            );
        }
    }
}

/// Whether `base/<dotted as path>.py` or a package directory of that name exists.
fn module_exists(skill: &Skill<'_>, base: &str, dotted: &str) -> bool {
    let path = dotted.replace('.', "/");
    let join = |p: &str| {
        if base.is_empty() {
            p.to_owned()
        } else {
            format!("{base}/{p}")
        }
    };
    let file = join(&format!("{path}.py"));
    let pkg = join(&format!("{path}/"));
    skill
        .entries
        .iter()
        .any(|e| e.rel == file || e.rel.starts_with(&pkg))
}

fn check_dynamic_code(rel: &str, file: &PyFile, f: &mut Findings) {
    for call in &file.calls {
        if call.callee == "marshal.loads" || call.callee == "marshal.load" {
            f.fail(
                rel,
                Some(call.line),
                format!("`{}` loads compiled code objects", call.callee),
            );
            continue;
        }
        if FILE_AS_CODE.contains(&call.callee.as_str()) {
            let message = format!(
                "`{}` runs a file as code by its path, which the review cannot tie to a \
                 reviewed file; import the module instead",
                call.callee
            );
            // A test loading the server it tests does not run with the skill.
            if super::is_test_file(rel) {
                f.warn(rel, Some(call.line), message);
            } else {
                f.fail(rel, Some(call.line), message);
            }
            continue;
        }
        if !DYNAMIC_CODE.contains(&call.callee.as_str()) {
            continue;
        }
        let positional = file.positional(call.args.clone());
        let literal = positional
            .first()
            .is_some_and(|a| file.literal(a).is_some());
        let decodes = file.toks[call.args.clone()].iter().any(|t| {
            t.kind == Kind::Name
                && (DECODERS.contains(&t.text.as_str())
                    || matches!(
                        t.text.as_str(),
                        "base64" | "zlib" | "marshal" | "codecs" | "bz2" | "lzma"
                    ))
        });
        if decodes {
            f.fail(
                rel,
                Some(call.line),
                format!("decode-then-execute: `{}` runs decoded data", call.callee),
            );
        } else if literal {
            f.warn(
                rel,
                Some(call.line),
                format!("`{}` of a literal string; prefer plain code", call.callee),
            );
        } else {
            f.fail(
                rel,
                Some(call.line),
                format!(
                    "`{}` with a non-literal argument runs code that is not in the reviewed files",
                    call.callee
                ),
            );
        }
    }
}

/// Whether the review reads the arguments of calls to `q` (what they run, fetch or read).
fn watched(q: &str) -> bool {
    DYNAMIC_CODE.contains(&q)
        || FILE_AS_CODE.contains(&q)
        || super::SPAWNERS.contains(&q)
        || matches!(q, "os.getenv" | "os.getenvb" | "os.environ" | "os.environb")
        || q.starts_with("os.environ.")
        || q.starts_with("os.environb.")
        || (q.contains('.') && super::network::is_network_module(q))
}

/// `name = <watched callable>` (not a call): later calls through `name` would not be
/// read for what they run, fetch or read (`g = os.getenv; g("TOKEN")`, QA29 r7), so
/// the binding fails; calling it directly keeps the review able to read it.
fn check_rebinding(rel: &str, file: &PyFile, f: &mut Findings) {
    let toks = &file.toks;
    for i in 2..toks.len() {
        // A statement `name = dotted`: not a keyword argument (`data=os.environ[...]`).
        let starts = i == 2 || toks[i - 3].kind == Kind::Newline || toks[i - 3].is_op(";");
        if !starts || !toks[i - 1].is_op("=") || toks[i - 2].kind != Kind::Name {
            continue;
        }
        let Some((dotted, next)) = file.dotted_at(i) else {
            continue;
        };
        if toks
            .get(next)
            .is_some_and(|t| t.kind != Kind::Newline && !t.is_op(";"))
        {
            continue;
        }
        let q = file.qualify(&dotted);
        if watched(&q) {
            let message = format!(
                "binds `{q}` to the name `{}`: calls through it are not read for what they \
                 run, fetch or read; call `{q}` directly",
                toks[i - 2].text
            );
            // Tests keep originals to patch them back, and do not run with the skill.
            if super::is_test_file(rel) {
                f.warn(rel, Some(toks[i].line), message);
            } else {
                f.fail(rel, Some(toks[i].line), message);
            }
        }
    }
}

/// A long literal made only of base64 or hex characters (line breaks allowed, no spaces).
fn is_blob(s: &str) -> bool {
    if s.len() <= MAX_BLOB || s.contains(' ') {
        return false;
    }
    let compact: Vec<char> = s.chars().filter(|c| !c.is_whitespace()).collect();
    compact.len() > MAX_BLOB
        && compact
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '-' | '_'))
}

fn is_stdlib(top: &str) -> bool {
    STDLIB.binary_search(&top).is_ok()
}

/// Top-level standard-library modules (`CPython` 3.11 `sys.stdlib_module_names`, plus
/// `__main__` and modules removed in later versions). Sorted for binary search.
const STDLIB: [&str; 306] = [
    "__future__",
    "__main__",
    "_abc",
    "_aix_support",
    "_ast",
    "_asyncio",
    "_bisect",
    "_blake2",
    "_bootsubprocess",
    "_bz2",
    "_codecs",
    "_codecs_cn",
    "_codecs_hk",
    "_codecs_iso2022",
    "_codecs_jp",
    "_codecs_kr",
    "_codecs_tw",
    "_collections",
    "_collections_abc",
    "_compat_pickle",
    "_compression",
    "_contextvars",
    "_crypt",
    "_csv",
    "_ctypes",
    "_curses",
    "_curses_panel",
    "_datetime",
    "_dbm",
    "_decimal",
    "_elementtree",
    "_frozen_importlib",
    "_frozen_importlib_external",
    "_functools",
    "_gdbm",
    "_hashlib",
    "_heapq",
    "_imp",
    "_io",
    "_json",
    "_locale",
    "_lsprof",
    "_lzma",
    "_markupbase",
    "_md5",
    "_msi",
    "_multibytecodec",
    "_multiprocessing",
    "_opcode",
    "_operator",
    "_osx_support",
    "_overlapped",
    "_pickle",
    "_posixshmem",
    "_posixsubprocess",
    "_py_abc",
    "_pydecimal",
    "_pyio",
    "_queue",
    "_random",
    "_scproxy",
    "_sha1",
    "_sha256",
    "_sha3",
    "_sha512",
    "_signal",
    "_sitebuiltins",
    "_socket",
    "_sqlite3",
    "_sre",
    "_ssl",
    "_stat",
    "_statistics",
    "_string",
    "_strptime",
    "_struct",
    "_symtable",
    "_thread",
    "_threading_local",
    "_tkinter",
    "_tokenize",
    "_tracemalloc",
    "_typing",
    "_uuid",
    "_warnings",
    "_weakref",
    "_weakrefset",
    "_winapi",
    "_zoneinfo",
    "abc",
    "aifc",
    "antigravity",
    "argparse",
    "array",
    "ast",
    "asynchat",
    "asyncio",
    "asyncore",
    "atexit",
    "audioop",
    "base64",
    "bdb",
    "binascii",
    "bisect",
    "builtins",
    "bz2",
    "cProfile",
    "calendar",
    "cgi",
    "cgitb",
    "chunk",
    "cmath",
    "cmd",
    "code",
    "codecs",
    "codeop",
    "collections",
    "colorsys",
    "compileall",
    "concurrent",
    "configparser",
    "contextlib",
    "contextvars",
    "copy",
    "copyreg",
    "crypt",
    "csv",
    "ctypes",
    "curses",
    "dataclasses",
    "datetime",
    "dbm",
    "decimal",
    "difflib",
    "dis",
    "distutils",
    "doctest",
    "email",
    "encodings",
    "ensurepip",
    "enum",
    "errno",
    "faulthandler",
    "fcntl",
    "filecmp",
    "fileinput",
    "fnmatch",
    "fractions",
    "ftplib",
    "functools",
    "gc",
    "genericpath",
    "getopt",
    "getpass",
    "gettext",
    "glob",
    "graphlib",
    "grp",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http",
    "idlelib",
    "imaplib",
    "imghdr",
    "imp",
    "importlib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "keyword",
    "lib2to3",
    "linecache",
    "locale",
    "logging",
    "lzma",
    "mailbox",
    "mailcap",
    "marshal",
    "math",
    "mimetypes",
    "mmap",
    "modulefinder",
    "msilib",
    "msvcrt",
    "multiprocessing",
    "netrc",
    "nis",
    "nntplib",
    "nt",
    "ntpath",
    "nturl2path",
    "numbers",
    "opcode",
    "operator",
    "optparse",
    "os",
    "ossaudiodev",
    "pathlib",
    "pdb",
    "pickle",
    "pickletools",
    "pipes",
    "pkgutil",
    "platform",
    "plistlib",
    "poplib",
    "posix",
    "posixpath",
    "pprint",
    "profile",
    "pstats",
    "pty",
    "pwd",
    "py_compile",
    "pyclbr",
    "pydoc",
    "pydoc_data",
    "pyexpat",
    "queue",
    "quopri",
    "random",
    "re",
    "readline",
    "reprlib",
    "resource",
    "rlcompleter",
    "runpy",
    "sched",
    "secrets",
    "select",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "site",
    "smtpd",
    "smtplib",
    "sndhdr",
    "socket",
    "socketserver",
    "spwd",
    "sqlite3",
    "sre_compile",
    "sre_constants",
    "sre_parse",
    "ssl",
    "stat",
    "statistics",
    "string",
    "stringprep",
    "struct",
    "subprocess",
    "sunau",
    "symtable",
    "sys",
    "sysconfig",
    "syslog",
    "tabnanny",
    "tarfile",
    "telnetlib",
    "tempfile",
    "termios",
    "textwrap",
    "this",
    "threading",
    "time",
    "timeit",
    "tkinter",
    "token",
    "tokenize",
    "tomllib",
    "trace",
    "traceback",
    "tracemalloc",
    "tty",
    "turtle",
    "turtledemo",
    "types",
    "typing",
    "unicodedata",
    "unittest",
    "urllib",
    "uu",
    "uuid",
    "venv",
    "warnings",
    "wave",
    "weakref",
    "webbrowser",
    "winreg",
    "winsound",
    "wsgiref",
    "xdrlib",
    "xml",
    "xmlrpc",
    "zipapp",
    "zipfile",
    "zipimport",
    "zlib",
    "zoneinfo",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdlib_list_is_sorted() {
        assert!(STDLIB.windows(2).all(|w| w[0] < w[1]));
        assert!(
            is_stdlib("os") && is_stdlib("json") && is_stdlib("tomllib") && !is_stdlib("requests")
        );
    }

    #[test]
    fn blobs() {
        assert!(is_blob(&"QUJD".repeat(300)));
        assert!(is_blob(&format!(
            "{}\n{}",
            "ab12".repeat(200),
            "cd34".repeat(200)
        )));
        assert!(!is_blob(&"word ".repeat(300)));
        assert!(!is_blob("QUJD"));
    }
}
