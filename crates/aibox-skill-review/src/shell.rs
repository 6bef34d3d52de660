//! Reading command lines: argv lists from `subprocess` calls and shell strings from
//! `os.system`, `sh -c` or shell scripts, classified as network tools or runtime installs.

/// Programs that talk to the network on their own.
const NETWORK_TOOLS: [&str; 13] = [
    "curl", "wget", "nc", "ncat", "netcat", "ssh", "scp", "sftp", "rsync", "gh", "telnet", "ftp",
    "socat",
];
/// `git` sub-commands that contact a remote.
const GIT_NETWORK: [&str; 7] = [
    "push",
    "remote",
    "fetch",
    "pull",
    "clone",
    "ls-remote",
    "submodule",
];
const SHELLS: [&str; 5] = ["sh", "bash", "zsh", "dash", "ksh"];
/// Words that run the next word as the command.
const WRAPPERS: [&str; 8] = [
    "sudo", "env", "exec", "nohup", "command", "time", "timeout", "xargs",
];

/// One simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    /// Words, quotes removed; non-literal parts are `<expr>`.
    pub argv: Vec<String>,
    /// Whether its input is piped from the previous command.
    pub piped: bool,
}

/// Splits a shell string into simple commands (on `|`, `;`, `&&`, `||`, newlines).
pub(crate) fn shell_commands(s: &str) -> Vec<Command> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut piped = false;
    let mut chars = s.chars().peekable();
    let mut quote: Option<char> = None;
    let flush = |current: &mut String, piped: bool, out: &mut Vec<Command>| {
        let argv = words(current);
        if !argv.is_empty() {
            out.push(Command { argv, piped });
        }
        current.clear();
    };
    // Command substitutions (`$(...)`, backticks) run their own commands, even inside
    // double quotes or an assignment (`x=$(curl -s "https://$H/p")`): each is split off
    // as a command of its own; the stack remembers the quote state around it.
    let mut substitutions: Vec<Option<char>> = Vec::new();
    while let Some(c) = chars.next() {
        if c == '$' && quote != Some('\'') && chars.peek() == Some(&'(') {
            chars.next();
            if chars.peek() == Some(&'(') {
                // `$((...))` is arithmetic, not a command.
                chars.next();
                current.push_str("$((");
                continue;
            }
            flush(&mut current, piped, &mut out);
            piped = false;
            substitutions.push(quote.take());
            continue;
        }
        if c == '`' && quote != Some('\'') {
            flush(&mut current, piped, &mut out);
            piped = false;
            continue;
        }
        if c == ')' && quote.is_none() && !substitutions.is_empty() {
            flush(&mut current, piped, &mut out);
            piped = false;
            quote = substitutions.pop().flatten();
            continue;
        }
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            current.push(c);
            continue;
        }
        match c {
            '\'' | '"' => {
                quote = Some(c);
                current.push(c);
            }
            '|' | ';' | '&' | '\n' => {
                let double = chars.peek() == Some(&c);
                if double {
                    chars.next();
                }
                // A single `&` backgrounds a command; treat it as a separator too.
                flush(&mut current, piped, &mut out);
                piped = c == '|' && !double;
            }
            _ => current.push(c),
        }
    }
    flush(&mut current, piped, &mut out);
    out
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace()
        .map(|w| {
            w.trim_matches(|c| c == '\'' || c == '"' || c == '(' || c == ')')
                .to_owned()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// The words of `argv` from the real command on (skips `VAR=value`, `sudo`, `env`, ...).
fn effective(argv: &[String]) -> &[String] {
    let mut i = 0;
    let mut after_wrapper = false;
    while let Some(w) = argv.get(i) {
        let wrapper = WRAPPERS.contains(&basename(w));
        let assignment = w.contains('=') && !w.starts_with('-');
        let wrapper_arg =
            after_wrapper && (w.starts_with('-') || w.chars().all(|c| c.is_ascii_digit()));
        if !(wrapper || assignment || wrapper_arg) {
            break;
        }
        after_wrapper |= wrapper;
        i += 1;
    }
    &argv[i.min(argv.len())..]
}

/// The git sub-command: the first word that is not an option (or an option's value).
fn git_subcommand<'a>(rest: &[&'a str]) -> &'a str {
    let mut i = 0;
    while let Some(w) = rest.get(i) {
        if matches!(
            *w,
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace"
        ) {
            i += 2;
        } else if w.starts_with('-') {
            i += 1;
        } else {
            return w;
        }
    }
    ""
}

fn basename(w: &str) -> &str {
    w.rsplit('/').next().unwrap_or(w)
}

/// What a command does that the review cares about.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Classified {
    /// A network tool, e.g. `curl` or `git push`.
    pub network: Vec<String>,
    /// A runtime installation, e.g. `pip install` or `curl … | sh`.
    pub install: Vec<String>,
}

/// Classifies a list of commands (a shell string split by [`shell_commands`], or one argv).
pub(crate) fn classify(commands: &[Command]) -> Classified {
    let mut out = Classified::default();
    let mut prev_fetch = false;
    for cmd in commands {
        let argv = effective(&cmd.argv);
        let Some(first) = argv.first() else { continue };
        let prog = basename(first);
        // `sh -c "..."`: classify the inner script.
        if SHELLS.contains(&prog) {
            if cmd.piped && prev_fetch {
                out.install.push(format!("a download piped into `{prog}`"));
            }
            if let Some(pos) = argv.iter().position(|w| w == "-c")
                && let Some(script) = argv.get(pos + 1)
            {
                let inner = classify(&shell_commands(script));
                out.network.extend(inner.network);
                out.install.extend(inner.install);
            }
            prev_fetch = false;
            continue;
        }
        let rest: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
        let sub = rest
            .iter()
            .find(|w| !w.starts_with('-'))
            .copied()
            .unwrap_or("");
        if NETWORK_TOOLS.contains(&prog) {
            out.network.push(format!("`{prog}`"));
        }
        let git_sub = git_subcommand(&rest);
        if prog == "git" && GIT_NETWORK.contains(&git_sub) {
            out.network.push(format!("`git {git_sub}`"));
        }
        let is_python = prog.starts_with("python") || prog == "<expr>";
        let pip_module = is_python && rest.windows(2).any(|w| w == ["-m", "pip"]);
        if matches!(prog, "pip" | "pip3" | "pipx") && matches!(sub, "install" | "download")
            || pip_module && rest.contains(&"install")
        {
            out.install.push("`pip install`".to_owned());
        }
        if prog == "uv"
            && (sub == "add"
                || sub == "pip" && rest.contains(&"install")
                || sub == "tool" && rest.contains(&"install"))
        {
            out.install.push(format!("`uv {sub}`"));
        }
        if matches!(prog, "npm" | "pnpm" | "yarn" | "bun") && matches!(sub, "install" | "i" | "add")
        {
            out.install.push(format!("`{prog} {sub}`"));
        }
        if matches!(prog, "apt" | "apt-get" | "apk" | "dnf" | "yum") && sub == "install" {
            out.install.push(format!("`{prog} install`"));
        }
        prev_fetch = matches!(prog, "curl" | "wget");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<Command> {
        vec![Command {
            argv: words.iter().map(|w| (*w).to_owned()).collect(),
            piped: false,
        }]
    }

    #[test]
    fn finds_network_tools_and_installs() {
        let c = classify(&shell_commands(
            "FOO=1 curl -fsSL https://x.invalid/i.sh | sh",
        ));
        assert_eq!(c.network, vec!["`curl`"]);
        assert_eq!(c.install, vec!["a download piped into `sh`"]);
        let c = classify(&argv(&["git", "-C", "repo", "push"]));
        assert_eq!(c.network, vec!["`git push`"]);
        let c = classify(&argv(&["git", "commit", "-m", "push"]));
        assert!(c.network.is_empty());
        let c = classify(&argv(&["git", "push", "origin"]));
        assert_eq!(c.network, vec!["`git push`"]);
        let c = classify(&argv(&["<expr>", "-m", "pip", "install", "x"]));
        assert_eq!(c.install, vec!["`pip install`"]);
        let c = classify(&argv(&["bash", "-c", "uv pip install foo && gh api /user"]));
        assert_eq!(c.install, vec!["`uv pip`"]);
        assert_eq!(c.network, vec!["`gh`"]);
        let c = classify(&argv(&["grep", "ssh", "file"]));
        assert_eq!(c, Classified::default());
    }
}
