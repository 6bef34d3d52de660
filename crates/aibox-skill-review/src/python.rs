//! A token-level reader of Python source, enough for static review without running Python.
//!
//! It tokenises (strings of every prefix and quoting, comments, brackets, continuation
//! lines), splits logical lines, and extracts imports with their aliases, calls with their
//! argument tokens, decorators and the function each decorates. It does not build a full
//! syntax tree: the checks only need names, literals and call shapes.

use std::collections::BTreeMap;
use std::ops::Range;

/// Kind of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Identifier or keyword.
    Name,
    /// String literal (adjacent literals are merged); `fstring` marks interpolation.
    Str { fstring: bool },
    /// Numeric literal.
    Num,
    /// Operator or bracket.
    Op,
    /// End of a logical line.
    Newline,
}

/// One token.
#[derive(Debug, Clone)]
pub(crate) struct Tok {
    pub kind: Kind,
    /// Identifier, operator, number text, or the string's contents (simple escapes decoded).
    pub text: String,
    /// 1-based line where the token starts.
    pub line: u32,
}

impl Tok {
    pub(crate) fn is_op(&self, s: &str) -> bool {
        self.kind == Kind::Op && self.text == s
    }
    pub(crate) fn is_name(&self, s: &str) -> bool {
        self.kind == Kind::Name && self.text == s
    }
    pub(crate) fn is_plain_str(&self) -> bool {
        self.kind == Kind::Str { fstring: false }
    }
    pub(crate) fn is_str(&self) -> bool {
        matches!(self.kind, Kind::Str { .. })
    }
}

/// Why a file does not tokenise: line and message.
#[derive(Debug, Clone)]
pub(crate) struct ParseError {
    pub line: u32,
    pub message: String,
}

const OPS3: [&str; 5] = ["**=", "//=", ">>=", "<<=", "..."];
const OPS2: [&str; 19] = [
    "**", "//", "==", "!=", "<=", ">=", "->", ":=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
    "@=", "<<", ">>",
];
const OPS1: &str = "+-*/%@&|^~<>=.,:;!";
const STRING_PREFIXES: [&str; 8] = ["r", "u", "f", "b", "br", "rb", "fr", "rf"];

/// Tokenises Python source.
#[allow(clippy::too_many_lines)] // one state machine reads best in one place
pub(crate) fn tokenize(src: &str) -> Result<Vec<Tok>, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks: Vec<Tok> = Vec::new();
    let mut brackets: Vec<(char, u32)> = Vec::new();
    let mut line: u32 = 1;
    let mut i = 0;
    let push_newline = |toks: &mut Vec<Tok>, line: u32| {
        if toks.last().is_some_and(|t| t.kind != Kind::Newline) {
            toks.push(Tok {
                kind: Kind::Newline,
                text: String::new(),
                line,
            });
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                if brackets.is_empty() {
                    push_newline(&mut toks, line);
                }
                line += 1;
                i += 1;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\\' if matches!(chars.get(i + 1), Some('\n')) => {
                line += 1;
                i += 2;
            }
            '\\' if matches!(chars.get(i + 1), Some('\r'))
                && matches!(chars.get(i + 2), Some('\n')) =>
            {
                line += 1;
                i += 3;
            }
            // A byte-order mark is allowed at the start of a file.
            c if c.is_whitespace() || c == '\u{feff}' => i += 1,
            '\'' | '"' => {
                let (tok, next, lines) = read_string(&chars, i, "", line)?;
                toks.push(tok);
                line += lines;
                i = next;
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let lower = word.to_ascii_lowercase();
                if matches!(chars.get(i), Some('\'' | '"'))
                    && STRING_PREFIXES.contains(&lower.as_str())
                {
                    let (tok, next, lines) = read_string(&chars, i, &lower, line)?;
                    toks.push(tok);
                    line += lines;
                    i = next;
                } else {
                    toks.push(Tok {
                        kind: Kind::Name,
                        text: word,
                        line,
                    });
                }
            }
            c if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                let start = i;
                while i < chars.len() {
                    let d = chars[i];
                    let plain = d.is_ascii_alphanumeric() || d == '_' || d == '.';
                    let exponent_sign = (d == '+' || d == '-')
                        && matches!(chars[i - 1], 'e' | 'E')
                        && !chars[start..i].iter().any(|x| matches!(x, 'x' | 'X'));
                    if plain || exponent_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
                toks.push(Tok {
                    kind: Kind::Num,
                    text: chars[start..i].iter().collect(),
                    line,
                });
            }
            '(' | '[' | '{' => {
                brackets.push((c, line));
                toks.push(Tok {
                    kind: Kind::Op,
                    text: c.to_string(),
                    line,
                });
                i += 1;
            }
            ')' | ']' | '}' => {
                let want = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                match brackets.pop() {
                    Some((open, _)) if open == want => {}
                    Some((open, at)) => {
                        return Err(ParseError {
                            line,
                            message: format!("`{c}` does not match `{open}` opened on line {at}"),
                        });
                    }
                    None => {
                        return Err(ParseError {
                            line,
                            message: format!("unmatched `{c}`"),
                        });
                    }
                }
                toks.push(Tok {
                    kind: Kind::Op,
                    text: c.to_string(),
                    line,
                });
                i += 1;
            }
            _ => {
                let rest3: String = chars[i..chars.len().min(i + 3)].iter().collect();
                let op = OPS3
                    .iter()
                    .find(|o| rest3.starts_with(**o))
                    .or_else(|| OPS2.iter().find(|o| rest3.starts_with(**o)))
                    .map(|o| (*o).to_owned())
                    .or_else(|| OPS1.contains(c).then(|| c.to_string()));
                let Some(op) = op else {
                    return Err(ParseError {
                        line,
                        message: format!("unexpected character `{}`", c.escape_default()),
                    });
                };
                i += op.chars().count();
                if op == ";" && brackets.is_empty() {
                    push_newline(&mut toks, line);
                } else {
                    toks.push(Tok {
                        kind: Kind::Op,
                        text: op,
                        line,
                    });
                }
            }
        }
    }
    if let Some((open, at)) = brackets.pop() {
        return Err(ParseError {
            line: at,
            message: format!("`{open}` is never closed"),
        });
    }
    push_newline(&mut toks, line);
    Ok(merge_adjacent_strings(toks))
}

/// Reads a string literal starting at the quote `chars[start]`. Returns the token, the index
/// after it and the number of newlines it spans.
fn read_string(
    chars: &[char],
    start: usize,
    prefix: &str,
    line: u32,
) -> Result<(Tok, usize, u32), ParseError> {
    let q = chars[start];
    let triple = chars.get(start + 1) == Some(&q) && chars.get(start + 2) == Some(&q);
    let raw = prefix.contains('r');
    let mut i = if triple { start + 3 } else { start + 1 };
    let mut value = String::new();
    let mut lines = 0;
    loop {
        let Some(&c) = chars.get(i) else {
            return Err(ParseError {
                line,
                message: "string literal is never closed".to_owned(),
            });
        };
        if c == '\\' {
            let Some(&n) = chars.get(i + 1) else {
                return Err(ParseError {
                    line,
                    message: "string literal is never closed".to_owned(),
                });
            };
            if n == '\n' {
                lines += 1;
            }
            if raw {
                value.push(c);
                value.push(n);
            } else {
                match n {
                    'n' => value.push('\n'),
                    't' => value.push('\t'),
                    '\n' => {}
                    other => value.push(other),
                }
            }
            i += 2;
            continue;
        }
        if c == q {
            if !triple {
                i += 1;
                break;
            }
            if chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q) {
                i += 3;
                break;
            }
        }
        if c == '\n' {
            if !triple {
                return Err(ParseError {
                    line,
                    message: "string literal is never closed".to_owned(),
                });
            }
            lines += 1;
        }
        value.push(c);
        i += 1;
    }
    let fstring = prefix.contains('f');
    Ok((
        Tok {
            kind: Kind::Str { fstring },
            text: value,
            line,
        },
        i,
        lines,
    ))
}

fn merge_adjacent_strings(toks: Vec<Tok>) -> Vec<Tok> {
    let mut out: Vec<Tok> = Vec::with_capacity(toks.len());
    for t in toks {
        if let (Kind::Str { fstring: f2 }, Some(prev)) = (t.kind, out.last_mut())
            && let Kind::Str { fstring: f1 } = prev.kind
        {
            prev.text.push_str(&t.text);
            prev.kind = Kind::Str { fstring: f1 || f2 };
            continue;
        }
        out.push(t);
    }
    out
}

/// One imported module (or name from a module).
#[derive(Debug, Clone)]
pub(crate) struct Import {
    /// Dotted module path as written (without leading dots).
    pub module: String,
    /// Number of leading dots of a relative import (0 for absolute).
    pub level: usize,
    /// For `from m import a, b`: the names; empty for `import m`.
    pub names: Vec<String>,
    pub line: u32,
}

/// One call: `callee(args)`.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    /// Callee with its first segment resolved through the import aliases.
    pub callee: String,
    /// Token indices strictly inside the parentheses.
    pub args: Range<usize>,
    pub line: u32,
}

/// A decorator and the function it decorates.
#[derive(Debug, Clone)]
pub(crate) struct Decorated {
    /// Decorator name, resolved through the aliases (without the call).
    pub decorator: String,
    /// Argument tokens when the decorator is called.
    pub args: Option<Range<usize>>,
    /// Name of the decorated function.
    pub function: String,
    pub line: u32,
}

/// A function definition and its body.
#[derive(Debug, Clone)]
pub(crate) struct FunctionDef {
    pub name: String,
    /// Tokens of the body (the indented block, or the rest of a one-line definition).
    pub body: Range<usize>,
}

/// The analysed form of one Python file.
#[derive(Debug, Default)]
pub(crate) struct PyFile {
    /// Leading whitespace width of each physical line (index 0 is line 1).
    pub indents: Vec<usize>,
    pub defs: Vec<FunctionDef>,
    pub toks: Vec<Tok>,
    pub imports: Vec<Import>,
    /// Local name → qualified name (from `import x as y` and `from m import n`).
    pub aliases: BTreeMap<String, String>,
    pub calls: Vec<Call>,
    pub decorated: Vec<Decorated>,
}

/// Calls that import the module named by their first argument.
const LITERAL_IMPORTERS: [&str; 4] = [
    "__import__",
    "builtins.__import__",
    "importlib.import_module",
    "importlib.__import__",
];

const NOT_CALLEES: [&str; 16] = [
    "def", "class", "if", "elif", "while", "for", "in", "and", "or", "not", "return", "lambda",
    "yield", "await", "assert", "with",
];

impl PyFile {
    /// Tokenises and analyses `src`.
    pub(crate) fn parse(src: &str) -> Result<Self, ParseError> {
        let toks = tokenize(src)?;
        let indents = src
            .split('\n')
            .map(|l| l.chars().take_while(|c| *c == ' ' || *c == '\t').count())
            .collect();
        let mut file = Self {
            indents,
            toks,
            ..Self::default()
        };
        file.collect_defs();
        file.collect_imports();
        file.collect_calls();
        file.collect_literal_imports();
        file.collect_decorators();
        Ok(file)
    }

    /// Logical lines as token ranges (without the newline token).
    pub(crate) fn logical_lines(&self) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut start = 0;
        for (i, t) in self.toks.iter().enumerate() {
            if t.kind == Kind::Newline {
                if i > start {
                    out.push(start..i);
                }
                start = i + 1;
            }
        }
        if start < self.toks.len() {
            out.push(start..self.toks.len());
        }
        out
    }

    /// Resolves the first segment of a dotted name through the import aliases.
    pub(crate) fn qualify(&self, dotted: &str) -> String {
        let (head, rest) = dotted
            .split_once('.')
            .map_or((dotted, None), |(h, r)| (h, Some(r)));
        let head = self.aliases.get(head).map_or(head, String::as_str);
        match rest {
            Some(r) => format!("{head}.{r}"),
            None => head.to_owned(),
        }
    }

    /// Reads `Name(.Name)*` starting at `i`; returns the dotted text and the index after it.
    pub(crate) fn dotted_at(&self, mut i: usize) -> Option<(String, usize)> {
        let first = self.toks.get(i).filter(|t| t.kind == Kind::Name)?;
        let mut s = first.text.clone();
        i += 1;
        while self.toks.get(i).is_some_and(|t| t.is_op("."))
            && let Some(n) = self.toks.get(i + 1).filter(|t| t.kind == Kind::Name)
        {
            s.push('.');
            s.push_str(&n.text);
            i += 2;
        }
        Some((s, i))
    }

    /// Index of the bracket closing the one opened at `open`.
    pub(crate) fn closing(&self, open: usize) -> usize {
        let mut depth = 0usize;
        for (i, t) in self.toks.iter().enumerate().skip(open) {
            if t.kind == Kind::Op {
                match t.text.as_str() {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return i;
                        }
                    }
                    _ => {}
                }
            }
        }
        self.toks.len()
    }

    /// Splits an argument range at top-level commas.
    pub(crate) fn split_args(&self, args: Range<usize>) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut depth = 0usize;
        let mut start = args.start;
        for i in args.clone() {
            let t = &self.toks[i];
            if t.kind != Kind::Op {
                continue;
            }
            match t.text.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth = depth.saturating_sub(1),
                "," if depth == 0 => {
                    out.push(start..i);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if start < args.end {
            out.push(start..args.end);
        }
        out
    }

    /// Positional arguments (those not written `name=value` or `*x`/`**x`).
    pub(crate) fn positional(&self, args: Range<usize>) -> Vec<Range<usize>> {
        self.split_args(args)
            .into_iter()
            .filter(|a| {
                !self.is_keyword_arg(a)
                    && !self.toks[a.start].is_op("*")
                    && !self.toks[a.start].is_op("**")
            })
            .collect()
    }

    fn is_keyword_arg(&self, a: &Range<usize>) -> bool {
        a.len() >= 2 && self.toks[a.start].kind == Kind::Name && self.toks[a.start + 1].is_op("=")
    }

    /// The value range of keyword argument `name=...`.
    pub(crate) fn keyword(&self, args: Range<usize>, name: &str) -> Option<Range<usize>> {
        self.split_args(args)
            .into_iter()
            .find(|a| self.is_keyword_arg(a) && self.toks[a.start].text == name)
            .map(|a| a.start + 2..a.end)
    }

    /// The literal string when `range` is exactly one non-f string token.
    pub(crate) fn literal(&self, range: &Range<usize>) -> Option<&str> {
        (range.len() == 1 && self.toks[range.start].is_plain_str())
            .then(|| self.toks[range.start].text.as_str())
    }

    fn indent_at(&self, tok: usize) -> usize {
        let line = self.toks[tok].line as usize;
        self.indents
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0)
    }

    /// The `def` name token index when the logical line `range` defines a function.
    fn def_name_at(&self, range: &Range<usize>) -> Option<usize> {
        let first = &self.toks[range.start];
        let at = if first.is_name("def") {
            range.start + 1
        } else if first.is_name("async")
            && self
                .toks
                .get(range.start + 1)
                .is_some_and(|t| t.is_name("def"))
        {
            range.start + 2
        } else {
            return None;
        };
        self.toks
            .get(at)
            .filter(|t| t.kind == Kind::Name)
            .map(|_| at)
    }

    fn collect_defs(&mut self) {
        let lines = self.logical_lines();
        let mut defs = Vec::new();
        for (k, range) in lines.iter().enumerate() {
            let Some(at) = self.def_name_at(range) else {
                continue;
            };
            let indent = self.indent_at(range.start);
            let mut end = k;
            while let Some(next) = lines.get(end + 1) {
                if self.indent_at(next.start) <= indent {
                    break;
                }
                end += 1;
            }
            let body = if end == k {
                at..range.end
            } else {
                lines[k + 1].start..lines[end].end
            };
            defs.push(FunctionDef {
                name: self.toks[at].text.clone(),
                body,
            });
        }
        self.defs = defs;
    }

    fn collect_imports(&mut self) {
        for range in self.logical_lines() {
            let t = &self.toks[range.clone()];
            if t[0].is_name("import") {
                let mut i = range.start + 1;
                while let Some((module, next)) = self.dotted_at(i) {
                    i = next;
                    let first = module.split('.').next().unwrap_or(&module).to_owned();
                    if self.toks.get(i).is_some_and(|t| t.is_name("as"))
                        && let Some(alias) = self.toks.get(i + 1).filter(|t| t.kind == Kind::Name)
                    {
                        self.aliases.insert(alias.text.clone(), module.clone());
                        i += 2;
                    } else {
                        self.aliases.insert(first.clone(), first);
                    }
                    self.imports.push(Import {
                        module,
                        level: 0,
                        names: Vec::new(),
                        line: t[0].line,
                    });
                    if self.toks.get(i).is_some_and(|t| t.is_op(",")) {
                        i += 1;
                    } else {
                        break;
                    }
                }
            } else if t[0].is_name("from") {
                let mut i = range.start + 1;
                let mut level = 0;
                while let Some(tok) = self.toks.get(i).filter(|t| t.is_op(".") || t.is_op("...")) {
                    level += tok.text.len();
                    i += 1;
                }
                let module = match self.dotted_at(i) {
                    Some((m, next)) if m != "import" && !m.starts_with("import.") => {
                        i = next;
                        m
                    }
                    _ => String::new(),
                };
                if !self.toks.get(i).is_some_and(|t| t.is_name("import")) {
                    continue;
                }
                i += 1;
                let mut names = Vec::new();
                while i < range.end {
                    let tok = &self.toks[i];
                    if tok.kind == Kind::Name {
                        let name = tok.text.clone();
                        let mut local = name.clone();
                        if self.toks.get(i + 1).is_some_and(|t| t.is_name("as"))
                            && let Some(a) = self.toks.get(i + 2).filter(|t| t.kind == Kind::Name)
                        {
                            local.clone_from(&a.text);
                            i += 2;
                        }
                        let qualified = if module.is_empty() {
                            name.clone()
                        } else {
                            format!("{module}.{name}")
                        };
                        if level == 0 {
                            self.aliases.insert(local, qualified);
                        }
                        names.push(name);
                    } else if tok.is_op("*") {
                        names.push("*".to_owned());
                    }
                    i += 1;
                }
                self.imports.push(Import {
                    module,
                    level,
                    names,
                    line: t[0].line,
                });
            }
        }
    }

    fn collect_calls(&mut self) {
        let mut calls = Vec::new();
        for j in 1..self.toks.len() {
            if !self.toks[j].is_op("(") || self.toks[j - 1].kind != Kind::Name {
                continue;
            }
            // Walk back over `a.b.c`.
            let mut start = j - 1;
            while start >= 2
                && self.toks[start - 1].is_op(".")
                && self.toks[start - 2].kind == Kind::Name
            {
                start -= 2;
            }
            let Some((dotted, _)) = self.dotted_at(start) else {
                continue;
            };
            if NOT_CALLEES.contains(&dotted.as_str()) {
                continue;
            }
            if start >= 1
                && (self.toks[start - 1].is_name("def") || self.toks[start - 1].is_name("class"))
            {
                continue;
            }
            let chained = start >= 1 && self.toks[start - 1].is_op(".");
            let callee = if chained {
                format!("?.{dotted}")
            } else {
                self.qualify(&dotted)
            };
            let close = self.closing(j);
            calls.push(Call {
                callee,
                args: j + 1..close,
                line: self.toks[j].line,
            });
        }
        self.calls = calls;
    }

    /// `__import__("m")` and `importlib.import_module("m")` of a literal name import `m`
    /// as an `import` statement does: the checks of imports (resolution, network modules)
    /// read them too. Only point 1's dynamic-code check saw them before, as a warning,
    /// so `__import__("socket")` passed the network point unnoticed.
    fn collect_literal_imports(&mut self) {
        let mut found = Vec::new();
        for call in &self.calls {
            if !LITERAL_IMPORTERS.contains(&call.callee.as_str()) {
                continue;
            }
            let Some(first) = self.positional(call.args.clone()).into_iter().next() else {
                continue;
            };
            let Some(name) = self.literal(&first) else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            // `import_module(".x", package)`: relative, as `from . import x` is.
            let module = name.trim_start_matches('.');
            found.push(Import {
                module: module.to_owned(),
                level: name.len() - module.len(),
                names: Vec::new(),
                line: call.line,
            });
        }
        self.imports.extend(found);
    }

    fn collect_decorators(&mut self) {
        let lines = self.logical_lines();
        let mut pending: Vec<(String, Option<Range<usize>>, u32)> = Vec::new();
        for range in lines {
            let first = &self.toks[range.start];
            if first.is_op("@") {
                if let Some((name, next)) = self.dotted_at(range.start + 1) {
                    let args = self
                        .toks
                        .get(next)
                        .filter(|t| t.is_op("("))
                        .map(|_| next + 1..self.closing(next));
                    pending.push((self.qualify(&name), args, first.line));
                }
                continue;
            }
            let def_at = if first.is_name("def") {
                Some(range.start + 1)
            } else if first.is_name("async")
                && self
                    .toks
                    .get(range.start + 1)
                    .is_some_and(|t| t.is_name("def"))
            {
                Some(range.start + 2)
            } else {
                None
            };
            if let Some(at) = def_at
                && let Some(name) = self.toks.get(at).filter(|t| t.kind == Kind::Name)
            {
                for (decorator, args, line) in pending.drain(..) {
                    self.decorated.push(Decorated {
                        decorator,
                        args,
                        function: name.text.clone(),
                        line,
                    });
                }
            }
            pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenises_strings_comments_and_continuations() {
        let src = "x = rb'a\\'b' # c\ny = \"\"\"multi\nline\"\"\" \\\n  + f\"{x}\"\n";
        let toks = tokenize(src).unwrap();
        let strs: Vec<_> = toks
            .iter()
            .filter(|t| t.is_str())
            .map(|t| (t.text.clone(), t.line))
            .collect();
        assert_eq!(
            strs,
            vec![
                ("a\\'b".to_owned(), 1),
                ("multi\nline".to_owned(), 2),
                ("{x}".to_owned(), 4)
            ]
        );
    }

    #[test]
    fn accepts_bom_crlf_and_modern_syntax() {
        let src = "\u{feff}import os\r\nmatch os.name:\r\n    case 'posix':\r\n        x = f\"{os.sep!r:>3}\" @ y\r\n";
        let toks = tokenize(src).unwrap();
        assert_eq!(toks.iter().filter(|t| t.kind == Kind::Newline).count(), 4);
        assert_eq!(toks.last().unwrap().line, 4);
    }

    #[test]
    fn merges_adjacent_literals() {
        let toks = tokenize("x = ('ab'\n 'cd')\n").unwrap();
        assert!(toks.iter().any(|t| t.text == "abcd"));
    }

    #[test]
    fn reports_unclosed_things() {
        assert_eq!(tokenize("x = 'abc\n").unwrap_err().line, 1);
        assert!(
            tokenize("f(\n\n")
                .unwrap_err()
                .message
                .contains("never closed")
        );
        assert!(
            tokenize("x = )\n")
                .unwrap_err()
                .message
                .contains("unmatched")
        );
        assert!(tokenize("x = '''abc\n").is_err());
        assert!(tokenize("x = a ? b\n").is_err());
    }

    #[test]
    fn reads_imports_and_aliases() {
        let f = PyFile::parse(
            "import os, subprocess as sp\nfrom urllib.request import (\n  urlopen,\n  Request as R,\n)\nfrom . import helper\nfrom .pkg.mod import thing\n",
        )
        .unwrap();
        let mods: Vec<_> = f
            .imports
            .iter()
            .map(|i| (i.module.as_str(), i.level, i.line))
            .collect();
        assert_eq!(
            mods,
            vec![
                ("os", 0, 1),
                ("subprocess", 0, 1),
                ("urllib.request", 0, 2),
                ("", 1, 6),
                ("pkg.mod", 1, 7)
            ]
        );
        assert_eq!(f.qualify("sp.run"), "subprocess.run");
        assert_eq!(f.qualify("R"), "urllib.request.Request");
        assert_eq!(f.imports[2].names, vec!["urlopen", "Request"]);
    }

    #[test]
    fn finds_function_bodies() {
        let f = PyFile::parse(
            "def a():\n    x = 1\n\n    # c\n    def inner(): return 2\n    return x\nasync def b(): pass\ny = 3\n",
        )
        .unwrap();
        let shape: Vec<_> = f
            .defs
            .iter()
            .map(|d| {
                (
                    d.name.as_str(),
                    f.toks[d.body.clone()].iter().map(|t| t.line).max(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![("a", Some(6)), ("inner", Some(5)), ("b", Some(7))]
        );
    }

    #[test]
    fn finds_calls_and_decorated_functions() {
        let f = PyFile::parse(
            "import subprocess as sp\n@mcp.tool(name='x', annotations={'readOnlyHint': True})\nasync def go(a):\n    sp.run(['curl', a], check=True).stdout.decode()\n",
        )
        .unwrap();
        let callees: Vec<_> = f.calls.iter().map(|c| c.callee.as_str()).collect();
        assert_eq!(
            callees,
            vec!["mcp.tool", "subprocess.run", "?.stdout.decode"]
        );
        assert_eq!(f.decorated.len(), 1);
        assert_eq!(f.decorated[0].function, "go");
        let run = &f.calls[1];
        let pos = f.positional(run.args.clone());
        assert_eq!(pos.len(), 1);
        assert!(f.keyword(run.args.clone(), "check").is_some());
    }
}
