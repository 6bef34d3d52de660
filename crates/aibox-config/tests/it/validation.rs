//! Every semantic check: one bad input each, with its code and message.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aibox_config::validate::{image_pin_problem, is_container_name, is_env_name, is_user_name};
use aibox_config::{
    ConfigError, find_project_root, load_project, parse_aibox_toml, parse_local_toml,
    parse_local_toml_with_team,
};
use camino::Utf8PathBuf;

const HEAD: &str = "[container]\nname = \"demo\"\n";

/// Asserts that `body` (appended to a minimal valid file) is rejected with exactly one
/// problem of `code` whose message contains `needle`.
#[track_caller]
fn rejects(body: &str, code: &str, needle: &str) {
    let text = if body.starts_with("[container]") {
        body.to_owned()
    } else {
        format!("{HEAD}{body}")
    };
    let err = parse_aibox_toml(&text, "aibox.toml").expect_err(body);
    let problems = err.problems();
    assert_eq!(
        problems.len(),
        1,
        "{body}: {:?}",
        problems
            .iter()
            .map(aibox_config::Problem::message)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        problems[0].code(),
        code,
        "{body}: {}",
        problems[0].message()
    );
    assert!(
        problems[0].message().contains(needle),
        "{body}: {}",
        problems[0].message()
    );
    assert!(
        problems[0].help_text().is_some(),
        "{body}: every problem needs help"
    );
}

#[track_caller]
fn accepts(body: &str) {
    let text = if body.starts_with("[container]") {
        body.to_owned()
    } else {
        format!("{HEAD}{body}")
    };
    if let Err(e) = parse_aibox_toml(&text, "aibox.toml") {
        panic!("{body} rejected:\n{}", aibox_config::render_plain(&e, 100));
    }
}

const INVALID: &str = "aibox::config::invalid_value";
const CONFLICT: &str = "aibox::config::conflict";
const MISSING: &str = "aibox::config::missing_key";

#[test]
fn identifiers() {
    rejects(
        "[container]\nname = \"my app\"\n",
        INVALID,
        "not a safe identifier",
    );
    rejects(
        "[container]\nname = \"\"\n",
        INVALID,
        "not a safe identifier",
    );
    rejects(
        "[container]\nname = \".hidden\"\n",
        INVALID,
        "not a safe identifier",
    );
    accepts("[container]\nname = \"a1.b_c-d\"\n");
    rejects("hostname = \"bad_host\"\n", INVALID, "not a valid DNS name");
    rejects(
        "user = \"Root User\"\n",
        INVALID,
        "not a valid Linux user name",
    );
    rejects("user = \"1abc\"\n", INVALID, "not a valid Linux user name");
    accepts("user = \"dev_1\"\nhostname = \"dev-box.local\"\n");
    rejects(
        "timezone = \"Europe/Berlin\\nX=1\"\n",
        INVALID,
        "not a time zone name",
    );
    assert!(is_container_name("x") && !is_container_name("-x") && !is_container_name("a/b"));
    assert!(is_user_name("_svc") && !is_user_name("a".repeat(33).as_str()));
    assert!(is_env_name("_A1") && !is_env_name("1A") && !is_env_name("A-B") && !is_env_name(""));
}

#[test]
fn environment() {
    rejects(
        "environment = { \"BAD-NAME\" = \"x\" }\n",
        INVALID,
        "not a valid environment variable name",
    );
    rejects(
        "environment = { GOOD = \"a\\nb\" }\n",
        INVALID,
        "line break",
    );
    accepts("environment = { LANG = \"C.UTF-8\", _X1 = \"\" }\n");
}

#[test]
fn base_image() {
    rejects("base_image = \"debian\"\n", INVALID, "has no tag");
    rejects("base_image = \"debian:latest\"\n", INVALID, "`latest`");
    rejects(
        "base_image = \"registry:5000/debian\"\n",
        INVALID,
        "has no tag",
    );
    rejects("base_image = \"debian:\"\n", INVALID, "empty tag");
    rejects(
        "base_image = \"debian@sha256:abc\"\n",
        INVALID,
        "malformed digest",
    );
    rejects("base_image = \"\"\n", INVALID, "empty");
    accepts("base_image = \"registry:5000/team/debian:12\"\n");
    accepts(&format!(
        "base_image = \"debian@sha256:{}\"\n",
        "a".repeat(64)
    ));
    assert_eq!(
        image_pin_problem("docker.io/library/debian:bookworm-slim"),
        None
    );
}

#[test]
fn volumes() {
    let vol = |s: &str, t: &str| {
        format!("[[container.extra_volumes]]\nsource = \"{s}\"\ntarget = \"{t}\"\n")
    };
    rejects(&vol("~/d", "data"), INVALID, "not an absolute path");
    rejects(&vol("~/d", "/mnt/../etc"), INVALID, "contains `..`");
    rejects(&vol("../sibling", "/mnt/s"), INVALID, "contains `..`");
    rejects(&vol("", "/mnt/s"), INVALID, "source is empty");
    rejects(&vol("~/d", "/mnt/a:ro"), INVALID, "contains `:`");
    rejects(&vol("~/d", "/workspace"), CONFLICT, "overlaps `/workspace`");
    rejects(
        &vol("~/d", "/workspace/sub"),
        CONFLICT,
        "overlaps `/workspace`",
    );
    rejects(&vol("~/d", "/"), CONFLICT, "overlaps `/workspace`");
    rejects(
        &vol("~/d", "/home/aibox/.codex"),
        CONFLICT,
        "/home/aibox/.codex",
    );
    rejects(&vol("~/d", "/home/aibox"), CONFLICT, "which aibox manages");
    rejects(
        &vol("~/d", "/home/aibox/.config/nvim/"),
        CONFLICT,
        "/home/aibox/.config",
    );
    // The home follows the configured user.
    rejects(
        &format!("user = \"dev\"\n{}", vol("~/d", "/home/dev/.gemini")),
        CONFLICT,
        "/home/dev/.gemini",
    );
    accepts(&vol("~/d", "/home/aibox/projects"));
    let two = format!("{}{}", vol("~/a", "/mnt/data"), vol("~/b", "/mnt/data/sub"));
    rejects(&two, CONFLICT, "overlaps another extra volume");
}

#[test]
fn context_and_processkit() {
    rejects(
        "[context]\npackages = []\n",
        INVALID,
        "empty in processkit mode",
    );
    accepts("[context]\nmode = \"harness-only\"\npackages = []\n");
    rejects(
        "[processkit]\nsha256 = \"abc\"\n",
        INVALID,
        "not a SHA-256 digest",
    );
    rejects(
        &format!("[processkit]\nsha256 = \"{}\"\n", "A".repeat(64)),
        INVALID,
        "not a SHA-256",
    );
    accepts(&format!("[processkit]\nsha256 = \"{}\"\n", "0f".repeat(32)));
}

#[test]
fn skills_and_harnesses() {
    rejects(
        "[skills]\ninclude = [\"a\"]\nexclude = [\"a\"]\n",
        CONFLICT,
        "both included and excluded",
    );
    accepts("[skills]\ninclude = [\"a\"]\nexclude = [\"b\"]\n");
    rejects(
        "[ai]\nharnesses = [\"claude\", \"claude\"]\n",
        INVALID,
        "listed twice",
    );
}

#[test]
fn mcp_servers() {
    let srv = |body: &str| format!("[[ai.mcp.servers]]\n{body}");
    rejects(
        &srv("name = \"a b\"\ncommand = \"x\"\n"),
        INVALID,
        "not a safe identifier",
    );
    rejects(
        &srv("name = \"a\"\ncommand = \"x\"\nurl = \"https://x\"\n"),
        CONFLICT,
        "both `command` and `url`",
    );
    rejects(
        &srv("name = \"a\"\n"),
        MISSING,
        "neither `command` nor `url`",
    );
    rejects(
        &srv("name = \"a\"\nurl = \"ftp://x\"\n"),
        INVALID,
        "not an http(s) URL",
    );
    rejects(
        &srv("name = \"a\"\nurl = \"https://x\"\nargs = [\"-v\"]\n"),
        CONFLICT,
        "only applies to stdio",
    );
    rejects(
        &srv("name = \"a\"\nurl = \"https://x\"\nenv = { A = \"b\" }\n"),
        CONFLICT,
        "only applies to stdio",
    );
    rejects(
        &srv("name = \"a\"\ncommand = \"x\"\nheaders = { A = \"b\" }\n"),
        CONFLICT,
        "only apply to remote",
    );
    rejects(
        &srv("name = \"a\"\ncommand = \" \"\n"),
        INVALID,
        "command is empty",
    );
    rejects(
        &srv("name = \"a\"\ncommand = \"x\"\nenv = { \"A B\" = \"c\" }\n"),
        INVALID,
        "environment variable name",
    );
    rejects(
        &srv("name = \"a\"\nurl = \"https://x\"\nheaders = { \"Bad Header\" = \"c\" }\n"),
        INVALID,
        "HTTP header",
    );
    let dup = format!(
        "{}{}",
        srv("name = \"a\"\ncommand = \"x\"\n"),
        srv("name = \"a\"\ncommand = \"y\"\n")
    );
    rejects(&dup, CONFLICT, "defined twice");
    accepts(&srv(
        "name = \"a_b-1\"\nurl = \"https://x/mcp\"\nheaders = { Authorization = \"Bearer ${T}\" }\n",
    ));
}

#[test]
fn gateway_and_security() {
    rejects(
        "[ai.mcp.gateway]\nhost = \"0.0.0.0\"\n",
        INVALID,
        "not a loopback address",
    );
    rejects(
        "[ai.mcp.gateway]\nhost = \"example.com\"\n",
        INVALID,
        "not a loopback address",
    );
    rejects("[ai.mcp.gateway]\nport = 0\n", INVALID, "port 0");
    accepts("[ai.mcp.gateway]\nhost = \"::1\"\n");
    accepts("[ai.mcp.gateway]\nhost = \"localhost\"\n");
    accepts("[ai.mcp.gateway]\nhost = \"127.0.0.2\"\n");
    rejects(
        "[[security.exceptions]]\noption = \"cap_add:NET_ADMIN\"\nreason = \" \"\n",
        INVALID,
        "`reason` is empty",
    );
}

#[test]
fn structural_kinds() {
    rejects("[ai.mcp.gateway]\nport = 70000\n", INVALID, "out of range");
    rejects("uid = -1\n", INVALID, "out of range");
    rejects(
        "uid = 1.5\n",
        "aibox::config::wrong_type",
        "must be an integer",
    );
    rejects(
        "[[container.extra_volumes]]\nsource = \"~/x\"\n",
        MISSING,
        "extra_volumes[0].target",
    );
    rejects(
        "[[ai.mcp.servers]]\ncomand = \"x\"\nname = \"a\"\n",
        "aibox::config::unknown_key",
        "comand",
    );
    rejects(
        "[ai]\nharnesses = [1]\n",
        "aibox::config::wrong_type",
        "must be a string",
    );
    rejects(
        "[ai]\nharnesses = \"claude\"\n",
        "aibox::config::wrong_type",
        "must be an array",
    );
    rejects(
        "environment = { A = 1 }\n",
        "aibox::config::wrong_type",
        "environment.A",
    );
    rejects(
        "[container.lifecycle]\npost_create = \"x\"\n",
        "aibox::config::unknown_key",
        "post_create",
    );
    rejects(
        "[ai.execution]\nnetwork = \"open\"\n",
        INVALID,
        "does not accept \"open\"",
    );
}

#[test]
fn problem_positions() {
    let err =
        parse_aibox_toml("[container]\nname = \"demo\"\nuid = \"x\"\n", "aibox.toml").unwrap_err();
    let p = &err.problems()[0];
    assert_eq!(p.line_col(), (3, 7));
    assert_eq!(p.file(), "aibox.toml");
}

#[test]
fn local_overlay_checks() {
    let err = parse_local_toml(
        "[[container.extra_volumes]]\nsource = \"~/x\"\ntarget = \"/workspace/x\"\n",
        ".aibox-local.toml",
    )
    .unwrap_err();
    assert_eq!(err.problems()[0].code(), CONFLICT);
    let err = parse_local_toml("[[mcp.servers]]\nname = \"n\"\n", ".aibox-local.toml").unwrap_err();
    assert_eq!(err.problems()[0].code(), MISSING);
    let team = parse_aibox_toml(
        &format!("{HEAD}[[container.extra_volumes]]\nsource = \"~/a\"\ntarget = \"/mnt/a\"\n\n[[ai.mcp.servers]]\nname = \"issues\"\ncommand = \"npx\"\n"),
        "aibox.toml",
    )
    .unwrap();
    let local = "[[container.extra_volumes]]\nsource = \"~/b\"\ntarget = \"/mnt/a\"\n\n[[mcp.servers]]\nname = \"issues\"\ncommand = \"mine\"\n";
    assert!(
        parse_local_toml(local, ".aibox-local.toml").is_ok(),
        "fine on its own"
    );
    let err = parse_local_toml_with_team(local, ".aibox-local.toml", Some(&team)).unwrap_err();
    let msgs: Vec<&str> = err
        .problems()
        .iter()
        .map(aibox_config::Problem::message)
        .collect();
    assert_eq!(err.problems().len(), 2, "{msgs:?}");
    assert!(
        msgs[0].contains("overlaps another extra volume"),
        "{msgs:?}"
    );
    assert!(msgs[1].contains("same name as a team server"), "{msgs:?}");
}

fn project(files: &[(&str, &str)]) -> (tempfile::TempDir, Utf8PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = Utf8PathBuf::from_path_buf(t.path().to_owned()).unwrap();
    for (name, text) in files {
        fs_err::write(root.join(name), text).unwrap();
    }
    (t, root)
}

#[test]
fn project_root_is_found_from_subdirectories() {
    let (_t, root) = project(&[("aibox.toml", HEAD)]);
    let sub = root.join("src/deep");
    fs_err::create_dir_all(&sub).unwrap();
    assert_eq!(find_project_root(&sub).unwrap(), root);
    let (_t2, empty) = project(&[]);
    let err = find_project_root(&empty).unwrap_err();
    assert!(matches!(err, ConfigError::NotFound { .. }));
}

/// A git repository inside an aibox project (a clone in a subfolder) is its own world:
/// the search stops at its root and names it, instead of writing into the outer project.
#[test]
fn project_search_stops_at_the_git_repository_root() {
    let (_t, outer) = project(&[("aibox.toml", HEAD)]);
    let repo = outer.join("vendor/other-repo");
    fs_err::create_dir_all(repo.join(".git")).unwrap();
    fs_err::create_dir_all(repo.join("src")).unwrap();
    let err = find_project_root(&repo.join("src")).unwrap_err();
    let ConfigError::NotFound { boundary, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(boundary, &repo);
    assert!(err.to_string().contains(repo.as_str()), "{err}");
    // A worktree or submodule marks its root with a `.git` file.
    fs_err::remove_dir_all(repo.join(".git")).unwrap();
    fs_err::write(repo.join(".git"), "gitdir: ../.git/modules/x\n").unwrap();
    assert!(find_project_root(&repo.join("src")).is_err());
    // The repository's own aibox.toml is found.
    fs_err::write(repo.join("aibox.toml"), HEAD).unwrap();
    assert_eq!(find_project_root(&repo.join("src")).unwrap(), repo);
}

#[test]
fn load_project_reports_both_files_together() {
    let (_t, root) = project(&[
        ("aibox.toml", "[container]\nname = \"demo\"\nuid = \"x\"\n"),
        (
            ".aibox-local.toml",
            "[container.environment]\n\"A-B\" = \"1\"\n",
        ),
    ]);
    let err = load_project(&root).unwrap_err();
    let files: Vec<&str> = err
        .problems()
        .iter()
        .map(aibox_config::Problem::file)
        .collect();
    assert_eq!(
        files,
        [
            root.join(".aibox-local.toml").as_str(),
            root.join("aibox.toml").as_str()
        ]
    );
    let rendered = aibox_config::render_plain(&err, 100);
    assert!(
        rendered.contains("\"A-B\" is not a valid environment variable name"),
        "{rendered}"
    );
    assert!(
        rendered.contains("`container.uid` must be an integer"),
        "{rendered}"
    );
}

#[test]
fn load_project_checks_overlay_against_team() {
    let (_t, root) = project(&[
        (
            "aibox.toml",
            "[container]\nname = \"demo\"\n\n[[ai.mcp.servers]]\nname = \"x\"\ncommand = \"a\"\n",
        ),
        (
            ".aibox-local.toml",
            "[[mcp.servers]]\nname = \"x\"\ncommand = \"b\"\n",
        ),
    ]);
    let err = load_project(&root).unwrap_err();
    assert_eq!(err.problems()[0].code(), CONFLICT);
    let (_t, root) = project(&[("aibox.toml", HEAD)]);
    let p = load_project(&root).unwrap();
    assert_eq!(p.local, aibox_config::LocalToml::default());
}

#[cfg(unix)]
#[test]
fn unreadable_file_is_an_io_error() {
    let (_t, root) = project(&[("aibox.toml", HEAD)]);
    fs_err::create_dir(root.join(".aibox-local.toml")).unwrap_or(());
    // A folder where the overlay should be is named, not ignored like a missing overlay.
    let err = load_project(&root).unwrap_err();
    assert!(matches!(err, ConfigError::NotAFile { .. }), "{err:?}");
    assert_eq!(err.kind(), aibox_config::ErrorKind::User);
    // `aibox init` makes no personal file (and refuses an existing project): not advised.
    let help = miette::Diagnostic::help(&err).unwrap().to_string();
    assert!(
        !help.contains("aibox init") && help.contains("aibox config set --local"),
        "{help}"
    );
    let (_t, root) = project(&[]);
    // A file that is not UTF-8 is read; it is the user's to fix, at its first bad byte.
    fs_err::write(root.join("aibox.toml"), b"[container]\nname = \"\xff\"\n").unwrap();
    let err = load_project(&root).unwrap_err();
    assert_eq!(err.kind(), aibox_config::ErrorKind::User, "{err:?}");
    assert_eq!(err.problems()[0].code(), "aibox::config::syntax");
    assert!(
        err.problems()[0]
            .message()
            .ends_with("is not UTF-8 text: byte 0xFF at line 2, column 9 (byte offset 20)"),
        "{err:?}"
    );
    // A folder without the file is not a project: the user's to fix, not the disk's.
    fs_err::remove_file(root.join("aibox.toml")).unwrap();
    let err = load_project(&root).unwrap_err();
    assert!(matches!(err, ConfigError::NotFound { .. }), "{err:?}");
}

#[test]
fn reference_spellings_get_a_rename_hint() {
    let err = parse_aibox_toml(
        &format!("{HEAD}\n[skills]\nenabled = [\"a\"]\n"),
        "aibox.toml",
    )
    .unwrap_err();
    assert_eq!(
        err.problems()[0].help_text(),
        Some("aibox calls this `include`; rename the key")
    );
    let err = parse_aibox_toml(
        &format!("{HEAD}\n[ai]\nharnesses = [{{ harness = \"claude\", enable = true }}]\n"),
        "aibox.toml",
    )
    .unwrap_err();
    assert_eq!(err.problems()[0].code(), "aibox::config::wrong_type");
    assert!(err.problems()[0].message().contains("must be a harness id"));
}

#[test]
fn single_brackets_for_an_array_of_tables() {
    let err = parse_aibox_toml(
        &format!("{HEAD}\n[container.extra_volumes]\nsource = \"~/a\"\ntarget = \"/mnt/a\"\n"),
        "aibox.toml",
    )
    .unwrap_err();
    let p = &err.problems()[0];
    assert_eq!(p.code(), "aibox::config::wrong_type");
    assert_eq!(
        p.help_text(),
        Some("write each entry under a `[[container.extra_volumes]]` header (double brackets)")
    );
}

#[test]
fn harness_ids_from_the_command_line() {
    use aibox_config::Harness;
    assert_eq!("codex".parse::<Harness>().unwrap(), Harness::Codex);
    let err = "openai".parse::<Harness>().unwrap_err();
    assert_eq!(err.suggestion, Some("codex"));
    let err = "gemni".parse::<Harness>().unwrap_err();
    assert_eq!(err.suggestion, Some("gemini"));
    let rendered = aibox_config::render_plain(&err, 100);
    assert!(
        rendered.contains("aibox::config::unknown_harness"),
        "{rendered}"
    );
    assert!(rendered.contains("did you mean \"gemini\"?"), "{rendered}");
    assert_eq!("zzz".parse::<Harness>().unwrap_err().suggestion, None);
}

#[test]
fn repository_url() {
    accepts("[aibox]\nrepository = \"https://example.org/team/project\"\n");
    for bad in [
        "ftp://example.org/x",
        "https://user:secret@example.org/x",
        "https://example.org/a b",
        "example.org/x",
    ] {
        rejects(
            &format!("[aibox]\nrepository = \"{bad}\"\n"),
            "aibox::config::invalid_value",
            "is not a plain http(s) URL",
        );
    }
}

/// The `[container]` rules `apply`'s generator uses too (`container_issues`): root needs
/// UID 0 and UID 0 needs root.
#[test]
fn root_user_and_uid_must_agree() {
    rejects(
        "user = \"root\"\nuid = 1000\n",
        INVALID,
        "UID 1000 does not fit user \"root\"",
    );
    rejects("uid = 0\n", INVALID, "UID 0 does not fit user");
    // A default UID has no span of its own: the user is underlined instead.
    rejects("user = \"root\"\n", INVALID, "UID 1000 does not fit");
    accepts("user = \"root\"\nuid = 0\n");
    let long = "a".repeat(64);
    rejects(
        &format!("[container]\nname = \"{long}\"\n"),
        INVALID,
        "longer than 63 characters",
    );
}

#[test]
fn network_egress() {
    accepts(
        "[network]\negress = \"allowlist\"\nallow = [\"api.example.com\", \"*.example.org\"]\n",
    );
    accepts("[network]\negress = \"none\"\n");
    // Below a registrable name, and exact names (even a suffix itself), are fine; so is an
    // unknown top-level domain.
    accepts(
        "[network]\negress = \"allowlist\"\nallow = [\"*.bbc.co.uk\", \"*.acme.github.io\", \
         \"co.uk\", \"*.pythonhosted.org\", \"*.corp.internal\"]\n",
    );
    rejects(
        "[network]\negress = \"firewall\"\n",
        "aibox::config::invalid_value",
        "firewall",
    );
    for (host, why) in [
        ("10.0.0.1", "IP address"),
        ("[::1]", "IP address"),
        ("*.", "empty"),
        ("API.example.com", "uppercase"),
        ("localhost", "single label"),
        ("https://api.example.com", "scheme"),
        ("api.example.com:443", "characters"),
        ("api..example.com", "empty label"),
        ("-api.example.com", "starts or ends"),
        ("host.123", "numeric"),
        ("a.*.example.com", "characters"),
        // Every site registered under a public suffix, like `*.com`.
        ("*.co.uk", "public suffix"),
        ("*.github.io", "public suffix"),
        ("*.com.au", "public suffix"),
    ] {
        rejects(
            &format!("[network]\negress = \"allowlist\"\nallow = [{host:?}]\n"),
            "aibox::config::invalid_value",
            why,
        );
    }
    rejects(
        "[network]\nallow = [\"a.example.com\", \"a.example.com\"]\n",
        "aibox::config::invalid_value",
        "listed twice",
    );
    rejects(
        "[network]\nallow = [\"a.example.com\"]\nupstream_proxy = \"p:1\"\n",
        "aibox::config::unknown_key",
        "upstream_proxy",
    );
}

/// A proxy address or allowed host written with `user:password@` (no scheme) is refused
/// for its credentials, and neither the message nor the file quoted under it shows them.
#[test]
fn credentials_without_a_scheme_are_refused_and_never_shown() {
    let password = "s3cr3tPassw0rd";
    for (body, key) in [
        (
            format!("[network]\nupstream_proxy = \"alice:{password}@proxy.corp.example:3128\"\n"),
            "upstream_proxy",
        ),
        (
            format!("[network]\nallow = [\"alice:{password}@proxy.corp.example\"]\n"),
            "allowed host",
        ),
        (
            format!("[network]\nallow = [\"https://alice:{password}@proxy.corp.example/\"]\n"),
            "allowed host",
        ),
    ] {
        let err = parse_local_toml(&body, ".aibox-local.toml").expect_err(&body);
        let problems = err.problems();
        assert_eq!(problems.len(), 1, "{body}");
        let message = problems[0].message();
        assert!(
            message.contains(key) && message.contains("user name or password"),
            "{body}: {message}"
        );
        let mut shown = String::new();
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
            .render_report(&mut shown, &problems[0])
            .unwrap();
        assert!(
            !shown.contains(password) && !shown.contains("alice"),
            "{body}: credentials shown: {shown}"
        );
        assert!(shown.contains("proxy.corp.example"), "{shown}");
    }
}

#[test]
fn personal_network() {
    let ok =
        "[network]\nallow = [\"mine.example.com\"]\nupstream_proxy = \"proxy.corp.example:3128\"\n";
    parse_local_toml(ok, ".aibox-local.toml").unwrap();
    parse_local_toml(
        "[network]\nupstream_proxy = \"10.1.2.3:8080\"\n",
        ".aibox-local.toml",
    )
    .unwrap();
    for (value, needle) in [
        ("proxy.corp.example", "no `:port`"),
        ("http://proxy.corp.example:3128", "is not `host:port`"),
        ("user:secret@proxy.example:3128", "user name or password"),
        ("proxy.example:0", "outside 1-65535"),
        ("proxy.example:99999", "outside 1-65535"),
        ("proxy.example:", "no valid port"),
        ("proxy example:80", "is not `host:port`"),
    ] {
        let err = parse_local_toml(
            &format!("[network]\nupstream_proxy = {value:?}\n"),
            ".aibox-local.toml",
        )
        .expect_err(value);
        let problems = err.problems();
        assert_eq!(problems.len(), 1, "{value}");
        assert!(
            problems[0].message().contains(needle),
            "{value}: {}",
            problems[0].message()
        );
        assert!(
            !problems[0].message().contains(value),
            "the value is never echoed (it may hold a password): {}",
            problems[0].message()
        );
    }
    let err = parse_local_toml(
        "[network]\nallow = [\"192.168.1.1\"]\n",
        ".aibox-local.toml",
    )
    .expect_err("ip");
    assert!(err.problems()[0].message().contains("IP address"));
}

/// A folder named as the project that holds no `aibox.toml` is the user's to fix
/// (`not_found`, exit 2), as when the search up from the working directory finds none,
/// not an unreadable file (QA28 r6).
#[test]
fn a_named_folder_without_aibox_toml_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let root = camino::Utf8Path::from_path(dir.path()).unwrap();
    let err = aibox_config::load_project(root).unwrap_err();
    assert!(
        matches!(&err, aibox_config::ConfigError::NotFound { .. }),
        "{err:?}"
    );
    assert_eq!(err.kind(), aibox_config::ErrorKind::User);
    assert_eq!(
        err.to_string(),
        format!("no aibox.toml in {root}: it is not an aibox project")
    );
    let get = aibox_config::get::get(root, "container.name").unwrap_err();
    assert_eq!(get.kind(), aibox_config::ErrorKind::User, "{get:?}");
    let local = aibox_config::get::get_local(root, "container.environment").unwrap_err();
    assert_eq!(local.kind(), aibox_config::ErrorKind::User, "{local:?}");
}

/// `get_local` reads the personal file as written; a personal key asked of the team file
/// is pointed there (QA28 r8).
#[test]
fn personal_values_are_read_from_the_personal_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = camino::Utf8Path::from_path(dir.path()).unwrap();
    fs_err::write(root.join("aibox.toml"), "[container]\nname = \"demo\"\n").unwrap();
    let not_set = aibox_config::get::get_local(root, "network.upstream_proxy").unwrap_err();
    assert!(not_set.to_string().contains("is not set"), "{not_set}");
    fs_err::write(
        root.join(".aibox-local.toml"),
        "[network]\nupstream_proxy = \"proxy.corp:3128\"\nallow = [\"wiki.corp.example\"]\n",
    )
    .unwrap();
    assert_eq!(
        aibox_config::get::get_local(root, "network.upstream_proxy").unwrap(),
        serde_json::json!("proxy.corp:3128")
    );
    assert_eq!(
        aibox_config::get::get_local(root, "network.allow").unwrap(),
        serde_json::json!(["wiki.corp.example"])
    );
    let team = aibox_config::get::get(root, "network.upstream_proxy").unwrap_err();
    let help = miette::Diagnostic::help(&team).unwrap().to_string();
    assert!(
        help.contains("config get --local network.upstream_proxy"),
        "{help}"
    );
    let unknown = aibox_config::get::get_local(root, "network.upstream_proxi").unwrap_err();
    assert!(
        unknown
            .to_string()
            .contains("is not a key of .aibox-local.toml"),
        "{unknown}"
    );
}
