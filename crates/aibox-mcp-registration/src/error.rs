//! Errors of MCP registration, each with a stable `aibox::mcp::*` code.

use miette::{Diagnostic, NamedSource, SourceSpan};

/// Everything that can stop a registration. No variant ever carries a secret value:
/// values are described by their key and file only.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum McpError {
    /// An existing harness file is not valid JSON/TOML; it is left untouched.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Parse(Box<ParseError>),

    /// An existing file parses but has the wrong shape where aibox needs to merge.
    #[error("cannot merge MCP servers into `{path}`: `{key}` is {found}, expected {expected}")]
    #[diagnostic(
        code(aibox::mcp::unexpected_shape),
        help(
            "edit `{path}` so that `{key}` is {expected}, or delete the file; it was left untouched"
        )
    )]
    Shape {
        /// Root-relative path of the file.
        path: String,
        /// Dotted key path.
        key: String,
        /// What was found (for example "an array").
        found: &'static str,
        /// What aibox needs.
        expected: &'static str,
    },

    /// A harness file holds a server aibox did not write (the ledger does not list it)
    /// under the name of a server the configuration now defines: replacing it would lose
    /// the hand-written entry (its `env`, arguments).
    #[error(
        "a server `{server}` added by hand (aibox did not write it) is in `{path}`, and \
         {origin} now defines a server of the same name"
    )]
    #[diagnostic(
        code(aibox::mcp::hand_entry_clash),
        help(
            "rename one of them: the hand-written entries, or the server in {origin}; or delete \
             the hand-written entries if the configured server replaces them. Nothing was written"
        )
    )]
    HandEntryClash {
        /// Root-relative path of the harness file (every file with that entry, joined by
        /// "`, `").
        path: String,
        /// Server name.
        server: String,
        /// Where the configured server comes from (`aibox.toml [[ai.mcp.servers]]`, …).
        origin: String,
    },

    /// A server definition is invalid.
    #[error("MCP server `{server}` ({origin}): {message}")]
    #[diagnostic(code(aibox::mcp::invalid_server), help("{help}"))]
    InvalidServer {
        /// Server name.
        server: String,
        /// Where it was defined (processkit, team or personal).
        origin: String,
        /// What is wrong.
        message: String,
        /// How to fix it.
        help: String,
    },

    /// A literal (non-reference) value where only a variable reference is allowed, or a
    /// value that looks like a secret.
    #[error("MCP server `{server}` ({origin}): {field} `{key}` holds a literal value; {reason}")]
    #[diagnostic(
        code(aibox::mcp::literal_secret),
        help(
            "write a variable reference instead, for example `{key} = \"${{{suggest}}}\"`, and put the value in `.aibox-local.toml [container.environment]` (it reaches the container through the gitignored `.devcontainer/aibox-local.env`)"
        )
    )]
    LiteralValue {
        /// Server name.
        server: String,
        /// Where it was defined.
        origin: &'static str,
        /// `env`, `headers`, `args`, `command` or `url`.
        field: &'static str,
        /// The key (or argument index) holding the value.
        key: String,
        /// Why it is refused.
        reason: &'static str,
        /// A variable name to suggest.
        suggest: String,
    },

    /// Two servers share a name.
    #[error("MCP server name `{name}` is defined twice ({first} and {second})")]
    #[diagnostic(
        code(aibox::mcp::duplicate_server),
        help(
            "server names are unique across processkit, `aibox.toml [[ai.mcp.servers]]` and `.aibox-local.toml [[mcp.servers]]`; rename one of them"
        )
    )]
    DuplicateServer {
        /// The name.
        name: String,
        /// Origin of the first definition.
        first: String,
        /// Origin of the second definition.
        second: String,
    },

    /// The ledger `.aibox/mcp-ledger.json` is unreadable.
    #[error("the MCP ownership ledger `{path}` is corrupt: {message}")]
    #[diagnostic(
        code(aibox::mcp::corrupt_ledger),
        help(
            "delete `{path}` and run `aibox apply` again; without a ledger only `processkit-*` entries are pruned, so remove stale team or personal servers by hand"
        )
    )]
    Ledger {
        /// Root-relative path of the ledger.
        path: String,
        /// Parser message.
        message: String,
    },

    /// The release's pre-authorisation spec (`skill-gate/assets/preauth.json`) cannot be
    /// read: nothing of it is merged.
    #[error("the processkit release's pre-authorisation spec `{path}` is unusable: {message}")]
    #[diagnostic(
        code(aibox::mcp::preauth),
        help(
            "the file comes from the pinned processkit release; pin a release whose `{path}` is a JSON object with `version: 1` and string lists under `permissions.allow` and `enabledMcpjsonServers`, or report it to the release's maintainers"
        )
    )]
    Preauth {
        /// Project path of the spec.
        path: String,
        /// What is wrong.
        message: String,
    },

    /// Reading an existing target file failed.
    #[error("cannot read `{path}` to merge MCP servers into it")]
    #[diagnostic(code(aibox::mcp::read), help("check the file's permissions"))]
    Read {
        /// Root-relative path.
        path: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },

    /// A deny pattern that an enabled harness cannot enforce: registering the server
    /// there would silently allow the tools.
    #[error(
        "MCP server `{server}`: {harness} cannot enforce the deny pattern(s) {patterns} \
         (registering it there would allow those tools)"
    )]
    #[diagnostic(
        code(aibox::mcp::unenforceable_deny),
        help(
            "name exact tools instead of patterns (Claude also takes `*` for a whole server), \
             remove {harness} from [ai] harnesses, or drop the pattern from \
             [ai.mcp.permissions] deny_patterns; `aibox mcp list` shows what each harness \
             can project"
        )
    )]
    UnenforceableDeny {
        /// Server name.
        server: String,
        /// Harness id.
        harness: String,
        /// The patterns, quoted and comma-separated.
        patterns: String,
    },

    /// Serialising a merged file failed (an internal error).
    #[error("cannot render `{path}`: {message}")]
    #[diagnostic(code(aibox::mcp::render))]
    Render {
        /// Root-relative path.
        path: String,
        /// Cause.
        message: String,
    },
}

/// An existing harness file that does not parse (boxed in [`McpError::Parse`]: it
/// carries the file text for the source snippet).
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error(
    "cannot merge MCP servers into `{path}`: it does not parse ({message}) at line {line}, column {column}"
)]
#[diagnostic(
    code(aibox::mcp::unparsable_target),
    help(
        "fix the syntax error in `{path}` (or delete the file) and run `aibox apply` again; aibox never overwrites a file it cannot read"
    )
)]
pub struct ParseError {
    /// Root-relative path of the file.
    pub path: String,
    /// Parser message.
    pub message: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The file text.
    #[source_code]
    pub src: NamedSource<String>,
    /// Where the parser stopped.
    #[label("here")]
    pub span: SourceSpan,
}

impl McpError {
    /// A parse error at a 1-based line and column of `text`.
    pub(crate) fn parse(
        path: &str,
        text: &str,
        message: String,
        line: usize,
        column: usize,
    ) -> Self {
        let offset = offset_of(text, line, column);
        Self::Parse(Box::new(ParseError {
            path: path.to_owned(),
            message,
            line,
            column,
            src: NamedSource::new(path, text.to_owned()),
            span: SourceSpan::from((offset, 0)),
        }))
    }
}

/// Byte offset of a 1-based line/column (column counted in characters).
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            let col_bytes: usize = l
                .chars()
                .take(column.saturating_sub(1))
                .map(char::len_utf8)
                .sum();
            return (offset + col_bytes).min(text.len());
        }
        offset += l.len();
    }
    text.len()
}

/// 1-based line and column of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl McpError {
    /// Who can fix it: an unreadable file is the environment, a render failure a bug,
    /// everything else is in the user's configuration or harness files.
    pub fn kind(&self) -> aibox_config::ErrorKind {
        match self {
            Self::Read { .. } => aibox_config::ErrorKind::Environment,
            Self::Render { .. } => aibox_config::ErrorKind::Internal,
            _ => aibox_config::ErrorKind::User,
        }
    }
}
