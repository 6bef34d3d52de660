//! Comment- and order-preserving edits, refused when the result would be invalid.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aibox_config::edit::{ConfigFile, get, set, set_in};

const FILE: &str = r#"# Team configuration for demo.

[container]
# The Compose service name.
name = "demo"
uid = 1000 # match the host
environment = { LANG = "C.UTF-8" }

# Harnesses we use.
[ai]
harnesses = ["claude"]

[[ai.mcp.servers]]
name = "issues"   # team tracker
command = "npx"
"#;

#[test]
fn get_reads_values_and_tables() {
    assert_eq!(
        get(FILE, "container.name").unwrap().as_deref(),
        Some("\"demo\"")
    );
    assert_eq!(get(FILE, "container.uid").unwrap().as_deref(), Some("1000"));
    assert_eq!(
        get(FILE, "ai.harnesses").unwrap().as_deref(),
        Some("[\"claude\"]")
    );
    assert_eq!(
        get(FILE, "container.environment.LANG").unwrap().as_deref(),
        Some("\"C.UTF-8\"")
    );
    assert_eq!(
        get(FILE, "ai.mcp.servers.0.name").unwrap().as_deref(),
        Some("\"issues\"")
    );
    assert_eq!(
        get(FILE, "ai.harnesses.0").unwrap().as_deref(),
        Some("\"claude\"")
    );
    insta::assert_snapshot!(get(FILE, "container").unwrap().unwrap(), @r#"
    name = "demo"
    uid = 1000 # match the host
    environment = { LANG = "C.UTF-8" }
    "#);
}

#[test]
fn get_missing_key_is_none() {
    assert_eq!(get(FILE, "container.user").unwrap(), None);
    assert_eq!(get(FILE, "processkit.version").unwrap(), None);
    assert_eq!(get(FILE, "ai.mcp.servers.5.name").unwrap(), None);
}

#[test]
fn get_through_a_scalar_is_an_error() {
    let err = get(FILE, "container.name.first").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid key path `container.name.first`: `container.name` is a string, not a table"
    );
    let err = get(FILE, "ai.harnesses.first").unwrap_err();
    assert!(err.to_string().contains("use an index such as 0"), "{err}");
    assert!(get(FILE, "").is_err());
    assert!(get(FILE, "a..b").is_err());
}

#[test]
fn set_replaces_value_keeping_comments_and_order() {
    let out = set(FILE, "container.uid", "1001").unwrap();
    assert_eq!(
        out,
        FILE.replace("uid = 1000 # match the host", "uid = 1001 # match the host")
    );
    let out = set(FILE, "container.name", "other").unwrap();
    assert_eq!(out, FILE.replace("name = \"demo\"", "name = \"other\""));
    let out = set(FILE, "ai.mcp.servers.0.command", "uvx").unwrap();
    assert_eq!(out, FILE.replace("command = \"npx\"", "command = \"uvx\""));
}

#[test]
fn set_parses_toml_values() {
    let out = set(FILE, "ai.harnesses", r#"["claude", "codex"]"#).unwrap();
    assert_eq!(
        out,
        FILE.replace(
            r#"harnesses = ["claude"]"#,
            r#"harnesses = ["claude", "codex"]"#
        )
    );
    let out = set(FILE, "container.environment.TERM", "xterm").unwrap();
    assert!(
        out.contains(r#"environment = { LANG = "C.UTF-8", TERM = "xterm" }"#),
        "{out}"
    );
}

#[test]
fn set_creates_missing_tables() {
    let out = set(FILE, "ai.mcp.gateway.port", "9000").unwrap();
    assert!(
        out.starts_with(FILE),
        "existing text must be untouched:\n{out}"
    );
    insta::assert_snapshot!(out[FILE.len()..].trim(), @r"
    [ai.mcp.gateway]
    port = 9000
    ");
    let out = set(FILE, "processkit.version", "v0.28.3").unwrap();
    assert!(out.starts_with(FILE), "{out}");
    assert!(
        out.ends_with("\n[processkit]\nversion = \"v0.28.3\"\n"),
        "{out}"
    );
    let out = set(FILE, "container.user", "dev").unwrap();
    assert!(
        out.contains("environment = { LANG = \"C.UTF-8\" }\nuser = \"dev\"\n"),
        "{out}"
    );
}

#[test]
fn set_refuses_invalid_results() {
    let err = set(FILE, "container.uid", "\"many\"").unwrap_err();
    assert_eq!(err.problems()[0].code(), "aibox::config::wrong_type");
    let err = set(FILE, "container.nmae", "x").unwrap_err();
    assert_eq!(err.problems()[0].code(), "aibox::config::unknown_key");
    let err = set(FILE, "ai.harnesses", r#"["claude", "copilot"]"#).unwrap_err();
    assert_eq!(err.problems()[0].code(), "aibox::config::unknown_harness");
    let err = set(FILE, "container.base_image", "debian:latest").unwrap_err();
    assert_eq!(err.problems()[0].code(), "aibox::config::invalid_value");
    let err = set(FILE, "container.name.first", "x").unwrap_err();
    assert!(
        err.to_string().contains("is a string, not a table"),
        "{err}"
    );
    let err = set(FILE, "ai.mcp.servers.3.name", "x").unwrap_err();
    assert!(err.to_string().contains("has 1 entries, not 4"), "{err}");
}

#[test]
fn set_refuses_broken_input() {
    let err = set("[container\nname = 1", "container.name", "x").unwrap_err();
    assert_eq!(err.problems()[0].code(), "aibox::config::syntax");
}

#[test]
fn consent_is_only_set_explicitly() {
    let out = set(FILE, "security.acknowledge_seccomp_unconfined", "true").unwrap();
    assert!(
        out.ends_with("[security]\nacknowledge_seccomp_unconfined = true\n"),
        "{out}"
    );
}

#[test]
fn set_in_local_file_validates_as_overlay() {
    let out = set_in(
        ConfigFile::Local,
        "",
        "container.environment.API_TOKEN",
        "ghp_FAKEFAKEFAKE",
    )
    .unwrap();
    assert_eq!(
        out,
        "[container.environment]\nAPI_TOKEN = \"ghp_FAKEFAKEFAKE\"\n"
    );
    let err = set_in(ConfigFile::Local, "", "ai.harnesses", "[]").unwrap_err();
    assert_eq!(err.problems()[0].code(), "aibox::config::unknown_key");
    assert_eq!(err.problems()[0].file(), ".aibox-local.toml");
}

#[test]
fn get_effective_fills_in_defaults() {
    use aibox_config::edit::get_effective;
    assert_eq!(
        get_effective(FILE, "container.user").unwrap().as_deref(),
        Some("\"aibox\"")
    );
    assert_eq!(
        get_effective(FILE, "container.uid").unwrap().as_deref(),
        Some("1000")
    );
    assert_eq!(
        get_effective(FILE, "ai.mcp.gateway.port")
            .unwrap()
            .as_deref(),
        Some("8765")
    );
    assert_eq!(get_effective(FILE, "processkit.version").unwrap(), None);
    assert!(get_effective("[container]\n", "container.user").is_err());
}

/// `mcp add` appends a table to either file and `mcp remove` restores every byte.
#[test]
fn mcp_servers_are_added_and_removed_byte_for_byte() {
    use aibox_config::edit::{ConfigFile, add_mcp_server, remove_mcp_server};
    let server = aibox_config::McpServer {
        name: "mine".into(),
        command: Some("python3".into()),
        args: vec!["tools/server.py".into()],
        env: [("TOKEN".to_owned(), "fake-personal-token".to_owned())].into(),
        url: None,
        headers: std::collections::BTreeMap::new(),
        allowed_tools: Vec::new(),
        startup_timeout_sec: None,
        enabled: true,
    };
    let local = "# my settings\n[container.environment]\nLANG = \"C\"\n";
    let added = add_mcp_server(ConfigFile::Local, local, &server).unwrap();
    assert!(added.starts_with(local), "{added}");
    assert!(
        added.contains("[[mcp.servers]]\nname = \"mine\""),
        "{added}"
    );
    let removed = remove_mcp_server(ConfigFile::Local, &added, "mine").unwrap();
    assert_eq!(removed.as_deref(), Some(local));
    assert_eq!(
        remove_mcp_server(ConfigFile::Local, local, "mine").unwrap(),
        None
    );
    // In the team file too; a second server of that name is refused. (A literal secret
    // is refused by the engine's checks, as for `config set`: see the CLI tests.)
    let team = "[container]\nname = \"demo\"\n";
    let once = add_mcp_server(ConfigFile::Team, team, &server).unwrap();
    assert!(
        once.contains("[[ai.mcp.servers]]\nname = \"mine\""),
        "{once}"
    );
    let twice = add_mcp_server(ConfigFile::Team, &once, &server).unwrap_err();
    assert!(
        twice
            .to_string()
            .contains("already has an MCP server named `mine`")
    );
}

/// Comment lines right after a table's last line are that table's (often commented-out
/// examples): a new table or key goes below them, so uncommenting an example keeps it in
/// the table it was written for.
#[test]
fn set_inserts_below_the_comments_that_follow_a_table() {
    let file = "[container]\nname = \"demo\"\n# timezone = \"UTC\"\n# user = \"aibox\"\n\n\
                # About [ai].\n[ai]\nharnesses = [\"claude\"]\n\n[security]\n\
                # Consents: only the owner sets these.\n# acknowledge_seccomp_profile = true\n";
    let out = set(file, "container.environment.LANG", "C.UTF-8").unwrap();
    let out = set(&out, "network.egress", "allowlist").unwrap();
    insta::assert_snapshot!(out, @r#"
    [container]
    name = "demo"
    # timezone = "UTC"
    # user = "aibox"

    [container.environment]
    LANG = "C.UTF-8"

    # About [ai].
    [ai]
    harnesses = ["claude"]

    [security]
    # Consents: only the owner sets these.
    # acknowledge_seccomp_profile = true

    [network]
    egress = "allowlist"
    "#);
    let uncommented = out.replace("# timezone = \"UTC\"", "timezone = \"UTC\"");
    assert_eq!(
        aibox_config::edit::get(&uncommented, "container.timezone")
            .unwrap()
            .as_deref(),
        Some("\"UTC\"")
    );
    // A new key of the table goes below them too; an edit elsewhere leaves them alone.
    let out = set(file, "container.user", "dev").unwrap();
    assert!(
        out.contains("# user = \"aibox\"\nuser = \"dev\"\n\n# About [ai]."),
        "{out}"
    );
    let out = set(file, "ai.harnesses", "[\"codex\"]").unwrap();
    assert_eq!(out, file.replace("[\"claude\"]", "[\"codex\"]"));
}

/// QA: `config set` on a file with CRLF line endings wrote it back with LF (a
/// whole-file diff on a Windows checkout). The edit keeps the file's line endings, and
/// its final line break.
#[test]
fn an_edit_keeps_crlf_line_endings_and_the_final_line_break() {
    let text = "# c\r\n[container]\r\nname = \"e2\"\r\n\r\n[ai]\r\nharnesses = [\"claude\"]\r\n";
    let out = set(text, "container.user", "dev").unwrap();
    assert!(out.contains("user = \"dev\"\r\n"), "{out:?}");
    assert!(
        !out.replace("\r\n", "").contains('\n'),
        "a bare LF: {out:?}"
    );
    assert!(out.starts_with("# c\r\n[container]\r\n"), "{out:?}");
    let out = set("[container]\nname = \"e2\"\n", "container.user", "dev").unwrap();
    assert!(!out.contains('\r') && out.ends_with('\n'), "{out:?}");
}

/// A table written with a header is never replaced by a value: that dropped its comments
/// and layout and moved it to the top of the file (QA28 r5). A new top-level table from
/// an inline value gets its own header at the end instead.
#[test]
fn set_refuses_a_whole_table_and_adds_a_new_one_with_a_header() {
    for (key, value) in [
        ("container", r#"{name = "proj"}"#),
        ("ai", r#"{harnesses = ["claude"]}"#),
        ("ai.mcp.servers", r#"[{name = "x", command = "y"}]"#),
    ] {
        let err = set(FILE, key, value).unwrap_err().to_string();
        assert!(
            err.contains("set its keys one by one") || err.contains("set a field of one entry"),
            "{key}: {err}"
        );
    }
    let err = set(FILE, "ai.mcp.servers", "[]").unwrap_err().to_string();
    assert!(err.contains("aibox mcp add"), "{err}");
    let out = set(FILE, "skills", r#"{include = ["x"]}"#).unwrap();
    assert!(out.starts_with(FILE), "{out}");
    assert!(out.ends_with("\n[skills]\ninclude = [\"x\"]\n"), "{out}");
}
