//! Rendered diagnostics of every error kind, as the user sees them.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aibox_config::{ConfigError, parse_aibox_toml, parse_local_toml, render_plain};

const MINIMAL: &str = "[container]\nname = \"demo\"\n";

fn team_err(text: &str) -> ConfigError {
    parse_aibox_toml(text, "aibox.toml").expect_err("the text must be rejected")
}

fn render(err: &ConfigError) -> String {
    render_plain(err, 100)
}

fn codes(err: &ConfigError) -> Vec<&'static str> {
    err.problems()
        .iter()
        .map(aibox_config::Problem::code)
        .collect()
}

#[test]
fn minimal_file_loads() {
    let cfg = parse_aibox_toml(MINIMAL, "aibox.toml").unwrap();
    assert_eq!(cfg.container.name, "demo");
}

#[test]
fn syntax_error() {
    let err = team_err("[container]\nname = \"demo\n");
    assert_eq!(codes(&err), ["aibox::config::syntax"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn duplicate_table_is_a_syntax_error() {
    let err = team_err("[container]\nname = \"demo\"\n\n[container]\nuser = \"me\"\n");
    assert_eq!(codes(&err), ["aibox::config::syntax"]);
    insta::assert_snapshot!(render(&err));
}

/// A merge left git's conflict markers: said so, at the first marker, with how to get
/// out (the QA got "key with no value, expected `=`").
#[test]
fn merge_conflict_markers_are_named() {
    let text = "[container]\nname = \"demo\"\n\n[[ai.mcp.servers]]\n<<<<<<< HEAD\n\
                name = \"a\"\ncommand = \"a-mcp\"\n=======\nname = \"b\"\n\
                command = \"b-mcp\"\n>>>>>>> other\n";
    let err = team_err(text);
    assert_eq!(codes(&err), ["aibox::config::syntax"]);
    let shown = render(&err);
    assert!(shown.contains("unresolved merge conflict"), "{shown}");
    assert!(shown.contains("aibox.toml:5:1"), "{shown}");
    assert!(shown.contains("git checkout --theirs FILE"), "{shown}");
    // A line of `=` alone is no conflict.
    let err = team_err("[container]\nname = \"demo\n=======\n");
    assert!(!render(&err).contains("merge conflict"));
}

#[test]
fn unknown_key_with_suggestion() {
    let err = team_err("[container]\nname = \"demo\"\nbase_imgae = \"debian:12\"\n");
    assert_eq!(codes(&err), ["aibox::config::unknown_key"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn unknown_key_in_wrong_table() {
    let err = team_err("[container]\nname = \"demo\"\nharnesses = [\"claude\"]\n");
    assert_eq!(codes(&err), ["aibox::config::unknown_key"]);
    insta::assert_snapshot!(render(&err));
}

/// A top-level table's key written under another table is sent to the top level first,
/// even where a nested table has a key of the same name (`[ai.execution] network`).
#[test]
fn a_top_level_key_under_another_table() {
    let err = team_err(
        "[container]\nname = \"demo\"\n\n[security]\nnetwork = { egress = \"allowlist\" }\n",
    );
    assert_eq!(codes(&err), ["aibox::config::unknown_key"]);
    let text = render(&err);
    assert!(
        text.contains("`network` is a top-level setting (`[network]`)"),
        "{text}"
    );
}

#[test]
fn unknown_top_level_table() {
    let err = team_err("[container]\nname = \"demo\"\n\n[plugins]\npython = true\n");
    assert_eq!(codes(&err), ["aibox::config::unknown_key"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn wrong_type() {
    let err = team_err("[container]\nname = \"demo\"\nuid = \"1000\"\n");
    assert_eq!(codes(&err), ["aibox::config::wrong_type"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn invalid_enum_value() {
    let err = team_err("[container]\nname = \"demo\"\n\n[context]\nmode = \"processkitt\"\n");
    assert_eq!(codes(&err), ["aibox::config::invalid_value"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn unknown_harness() {
    let err =
        team_err("[container]\nname = \"demo\"\n\n[ai]\nharnesses = [\"claude\", \"openai\"]\n");
    assert_eq!(codes(&err), ["aibox::config::unknown_harness"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn missing_key() {
    let err = team_err("[container]\nuser = \"dev\"\n");
    assert_eq!(codes(&err), ["aibox::config::missing_key"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn missing_container_table() {
    let err = team_err("[ai]\nharnesses = [\"claude\"]\n");
    assert_eq!(codes(&err), ["aibox::config::missing_key"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn conflict_include_exclude() {
    let err = team_err(
        "[container]\nname = \"demo\"\n\n[skills]\ninclude = [\"pdf\", \"git\"]\nexclude = [\"git\"]\n",
    );
    assert_eq!(codes(&err), ["aibox::config::conflict"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn conflict_command_and_url() {
    let err = team_err(
        "[container]\nname = \"demo\"\n\n[[ai.mcp.servers]]\nname = \"issues\"\ncommand = \"npx\"\nurl = \"https://mcp.example.com/mcp\"\n",
    );
    assert_eq!(codes(&err), ["aibox::config::conflict"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn several_problems_reported_at_once() {
    let err = team_err(
        "[container]\nname = \"demo\"\nuid = \"1000\"\nshell = \"zsh\"\n\n[ai]\nharnesses = [\"claud\"]\n",
    );
    assert_eq!(
        codes(&err),
        [
            "aibox::config::wrong_type",
            "aibox::config::unknown_key",
            "aibox::config::unknown_harness"
        ]
    );
    insta::assert_snapshot!(render(&err));
}

#[test]
fn semantic_problems_reported_at_once() {
    let err = team_err(
        "[container]\nname = \"-demo\"\nbase_image = \"debian:latest\"\n\n\
         [[container.extra_volumes]]\nsource = \"~/data\"\ntarget = \"/home/aibox/.claude/x\"\n\n\
         [processkit]\nsha256 = \"ABC\"\n\n[ai.mcp.gateway]\nhost = \"0.0.0.0\"\n",
    );
    assert_eq!(
        codes(&err),
        [
            "aibox::config::invalid_value",
            "aibox::config::invalid_value",
            "aibox::config::conflict",
            "aibox::config::invalid_value",
            "aibox::config::invalid_value",
        ]
    );
    insta::assert_snapshot!(render(&err));
}

#[test]
fn local_unknown_section() {
    let err = parse_local_toml(
        "[container.environment]\nTOKEN = \"x\"\n\n[ai]\nharnesses = []\n",
        ".aibox-local.toml",
    )
    .expect_err("unknown section");
    assert_eq!(codes(&err), ["aibox::config::unknown_key"]);
    insta::assert_snapshot!(render(&err));
}

/// A team key in the overlay's `[container]` is named as a team setting, with the overlay
/// key that exists for the same wish, not likened to an overlay key it only resembles.
#[test]
fn local_team_keys_point_to_aibox_toml() {
    for (key, also) in [
        ("name = \"x\"", Some("`container_name`")),
        ("engine = \"podman\"", None),
    ] {
        let err =
            parse_local_toml(&format!("[container]\n{key}\n"), ".aibox-local.toml").expect_err(key);
        let text = render(&err);
        let name = key.split(' ').next().unwrap();
        assert!(
            text.contains(&format!(
                "`container.{name}` is a team setting: set it in aibox.toml"
            )),
            "{text}"
        );
        assert!(
            !text.contains("mcp.servers") && !text.contains("did you mean"),
            "{text}"
        );
        if let Some(also) = also {
            assert!(text.contains(also), "{text}");
        }
    }
}

/// QA: a personal key in the committed file (`extra_ca_certificates` without `--local`)
/// got "remove it; valid keys in `[container]`: …". It is named as a personal setting,
/// with the `--local` command.
#[test]
fn team_file_personal_keys_point_to_the_local_file() {
    for (table, key) in [
        ("container", "extra_ca_certificates = \"/etc/ca.pem\""),
        ("container", "container_name = \"mine\""),
        ("network", "upstream_proxy = \"proxy.example:3128\""),
    ] {
        let text = if table == "container" {
            format!("[container]\nname = \"x\"\n{key}\n")
        } else {
            format!("[container]\nname = \"x\"\n\n[{table}]\n{key}\n")
        };
        let err = parse_aibox_toml(&text, "aibox.toml").expect_err(key);
        assert_eq!(codes(&err), ["aibox::config::unknown_key"], "{key}");
        let text = render(&err)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let name = key.split(' ').next().unwrap();
        assert!(
            text.contains(&format!(
                "`{table}.{name}` is a personal setting: it goes in .aibox-local.toml (`aibox \
                 config set --local {table}.{name} VALUE`)"
            )),
            "{text}"
        );
    }
}

#[test]
fn local_bad_env_name() {
    let err = parse_local_toml(
        "[container.environment]\n\"MY-TOKEN\" = \"x\"\n",
        ".aibox-local.toml",
    )
    .expect_err("bad env name");
    assert_eq!(codes(&err), ["aibox::config::invalid_value"]);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn local_bad_container_name_pin() {
    // Compose lowercases or refuses these, so the pin would not name the container.
    for bad in ["My Box", "-box", "Box", "a/b", ""] {
        let err = parse_local_toml(
            &format!("[container]\ncontainer_name = {bad:?}\n"),
            ".aibox-local.toml",
        )
        .expect_err(bad);
        assert_eq!(codes(&err), ["aibox::config::invalid_value"], "{bad}");
    }
    let err = parse_local_toml(
        "[container]\ncontainer_name = \"My Box\"\n",
        ".aibox-local.toml",
    )
    .unwrap_err();
    insta::assert_snapshot!(render(&err));
    parse_local_toml(
        "[container]\ncontainer_name = \"my-box_2\"\n",
        ".aibox-local.toml",
    )
    .expect("a valid pin");
}

#[test]
fn problems_as_json() {
    let err = team_err("[container]\nname = \"demo\"\nuid = \"1000\"\n");
    let ConfigError::Invalid(problems) = &err else {
        panic!("expected Invalid")
    };
    insta::assert_json_snapshot!(problems.to_json(), @r#"
    [
      {
        "code": "aibox::config::wrong_type",
        "file": "aibox.toml",
        "line": 3,
        "column": 7,
        "message": "`container.uid` must be an integer, not a string",
        "help": "write an integer, for example `1000` (without quotes)",
        "labels": [
          {
            "label": "expected an integer",
            "offset": 32,
            "len": 6
          }
        ]
      }
    ]
    "#);
}

/// A typo of a required key is reported first: the missing key it causes comes second.
#[test]
fn a_typo_leads_the_missing_key_it_causes() {
    let err = team_err("[container]\nnmae = \"demo\"\n");
    assert_eq!(
        codes(&err),
        ["aibox::config::unknown_key", "aibox::config::missing_key"]
    );
    let text = render(&err);
    let typo = text.find("unknown key `container.nmae`").unwrap();
    let missing = text.find("`container.name` is missing").unwrap();
    assert!(typo < missing, "{text}");
    assert!(text.contains("did you mean `name`?"), "{text}");
}

#[test]
fn personal_environment_values_are_masked_in_snippets_whatever_their_names() {
    let text = "[container]\nenvironment = { CORP_PROXY_PASS_B64 = \"VHIwdWI0ZG9yCg\\n\", \
                PLAIN = \"ok-value\" }\n";
    let err = parse_local_toml(text, ".aibox-local.toml").expect_err("a line break is refused");
    let shown = render(&err);
    assert!(shown.contains("CORP_PROXY_PASS_B64"), "{shown}");
    assert!(!shown.contains("VHIwdWI0ZG9yCg"), "{shown}");
    assert!(!shown.contains("ok-value"), "{shown}");
    // Also in a problem of another key on the same line.
    let text = "[container]\nenvironment = { NOTE = \"plain-personal-value\" }\nnope = 1\n";
    let shown = render(&parse_local_toml(text, ".aibox-local.toml").unwrap_err());
    assert!(!shown.contains("plain-personal-value"), "{shown}");
    let text = "[container.environment]\nNOTE = \"plain-personal-value\"\nBAD = \"a\\nb\"\n";
    let shown = render(&parse_local_toml(text, ".aibox-local.toml").unwrap_err());
    assert!(shown.contains("BAD"), "{shown}");
    assert!(!shown.contains("plain-personal-value"), "{shown}");
}
