//! Every input the generators refuse, with the error each one gets, plus the naming
//! helpers the runtime relies on.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may fail loudly

use aibox_config::{AiboxToml, LocalToml};
use aibox_devcontainer::{DevcontainerError, Inputs, image_name, project_name, render};
use miette::Diagnostic;

fn team(extra: &str) -> AiboxToml {
    toml::from_str(&format!("[container]\nname = \"demo\"\n{extra}")).unwrap()
}

fn err_with<'a>(
    config: &'a AiboxToml,
    local: &'a LocalToml,
    tweak: impl Fn(&mut Inputs<'a>),
) -> String {
    let mut inputs = Inputs::new(config, local, "0.1.0");
    tweak(&mut inputs);
    let err = render(&inputs).expect_err("input should be refused");
    let code = err.code().map(|c| c.to_string()).unwrap_or_default();
    assert!(
        code.starts_with("aibox::devcontainer::"),
        "no stable code: {err:?}"
    );
    assert!(err.help().is_some(), "no help: {err:?}");
    format!("{code}: {err}")
}

fn err(extra: &str) -> String {
    err_with(&team(extra), &LocalToml::default(), |_| {})
}

#[test]
fn bad_container_values_are_refused_with_the_key_named() {
    let cases = [
        ("hostname = \"bad host\"\n", "container.hostname"),
        ("hostname = \"-dash\"\n", "container.hostname"),
        ("user = \"Dev\"\n", "container.user"),
        ("user = \"root\"\n", "container.uid"),
        ("uid = 0\n", "container.uid"),
        (
            "base_image = \"debian:12\\nRUN evil\"\n",
            "container.base_image",
        ),
        ("base_image = \"\"\n", "container.base_image"),
        ("timezone = \"Europe/ Berlin\"\n", "container.timezone"),
    ];
    for (container_extra, key) in cases {
        let msg = err(container_extra);
        assert!(
            msg.contains("invalid_value") && msg.contains(key),
            "{container_extra}: {msg}"
        );
    }
    let bad_name: AiboxToml = toml::from_str("[container]\nname = \"-demo\"\n").unwrap();
    let msg = err_with(&bad_name, &LocalToml::default(), |_| {});
    assert!(msg.contains("container.name"), "{msg}");
    let bad_name: AiboxToml = toml::from_str("[container]\nname = \"my project\"\n").unwrap();
    assert!(err_with(&bad_name, &LocalToml::default(), |_| {}).contains("container.name"));
}

#[test]
fn bad_version_and_image_source_are_refused() {
    let config = team("");
    let local = LocalToml::default();
    let msg = err_with(&config, &local, |i| i.aibox_version = "1.0 beta");
    assert!(msg.contains("aibox version"), "{msg}");
    let msg = err_with(&config, &local, |i| i.aibox_version = "");
    assert!(msg.contains("aibox version"), "{msg}");
    let msg = err_with(&config, &local, |i| i.image_source = Some("https://x\ny"));
    assert!(msg.contains("image source"), "{msg}");
}

#[test]
fn bad_environment_names_are_refused() {
    let msg = err("[container.environment]\n\"BAD-KEY\" = \"v\"\n");
    assert!(msg.contains("env_key") && msg.contains("BAD-KEY") && msg.contains("aibox.toml"));
    let local: LocalToml = toml::from_str("[container.environment]\n\"9LIVES\" = \"v\"\n").unwrap();
    let msg = err_with(&team(""), &local, |_| {});
    assert!(
        msg.contains("env_key") && msg.contains(".aibox-local.toml"),
        "{msg}"
    );
}

#[test]
fn personal_values_with_newlines_are_refused_without_leaking_them() {
    let local: LocalToml =
        toml::from_str("[container.environment]\nGH_TOKEN = \"ghp_FAKEFAKEFAKE\\nsecond-line\"\n")
            .unwrap();
    let msg = err_with(&team(""), &local, |_| {});
    assert!(
        msg.contains("local_env_value") && msg.contains("GH_TOKEN"),
        "{msg}"
    );
    assert!(msg.contains("line break"), "{msg}");
    assert!(
        !msg.contains("ghp_FAKE") && !msg.contains("second-line"),
        "value leaked: {msg}"
    );
}

#[test]
fn bad_volumes_are_refused_with_file_and_position() {
    let volume = |source: &str, target: &str| {
        format!(
            "[[container.extra_volumes]]\nsource = \"/ok\"\ntarget = \"/ok\"\n\
                 [[container.extra_volumes]]\nsource = \"{source}\"\ntarget = \"{target}\"\n"
        )
    };
    for (source, target, expect) in [
        ("/a:b", "/t", "source"),
        ("", "/t", "source"),
        ("~other/x", "/t", "only `~`"),
        ("/src", "relative", "target"),
        ("/src", "/a/../b", "target"),
        ("/src", "/", "target"),
        ("/src", "/t:ro", "target"),
    ] {
        let msg = err(&volume(source, target));
        assert!(
            msg.contains("aibox::devcontainer::volume")
                && msg.contains("aibox.toml")
                && msg.contains("#2"),
            "{source} -> {target}: {msg}"
        );
        assert!(msg.contains(expect), "{source} -> {target}: {msg}");
    }
    let local: LocalToml =
        toml::from_str("[[container.extra_volumes]]\nsource = \"x:y\"\ntarget = \"/t\"\n").unwrap();
    let msg = err_with(&team(""), &local, |_| {});
    assert!(
        msg.contains(".aibox-local.toml") && msg.contains("#1"),
        "{msg}"
    );
}

#[test]
fn duplicate_mount_targets_are_refused() {
    let msg = err("[[container.extra_volumes]]\nsource = \".\"\ntarget = \"/workspace/\"\n");
    assert!(
        msg.contains("duplicate_mount") && msg.contains("/workspace"),
        "{msg}"
    );
    let msg = err(
        "[[container.extra_volumes]]\nsource = \"~/.claude\"\ntarget = \"/home/aibox/.claude\"\n\
         [ai]\nharnesses = [\"claude\"]\n",
    );
    assert!(
        msg.contains("duplicate_mount") && msg.contains("/home/aibox/.claude"),
        "{msg}"
    );
}

#[test]
fn malformed_security_options_are_refused() {
    let config = team("");
    let local = LocalToml::default();
    let twice = vec![
        "seccomp=unconfined".to_owned(),
        "seccomp=unconfined".to_owned(),
    ];
    let msg = err_with(&config, &local, |i| i.security_opt = &twice);
    assert!(
        msg.contains("security_opt") && msg.contains("twice"),
        "{msg}"
    );
    let empty = vec![String::new()];
    assert!(err_with(&config, &local, |i| i.security_opt = &empty).contains("security_opt"));
}

#[test]
fn dockerfile_local_that_would_break_the_dockerfile_is_refused() {
    let config = team("");
    let local = LocalToml::default();
    let msg = err_with(&config, &local, |i| {
        i.dockerfile_local = Some("RUN apt-get update && \\\n  apt-get install -y jq \\\n# done\n");
    });
    assert!(
        msg.contains("dockerfile_local") && msg.contains("continuation"),
        "{msg}"
    );
    let msg = err_with(&config, &local, |i| {
        i.dockerfile_local = Some("from debian:12\n");
    });
    assert!(
        msg.contains("dockerfile_local") && msg.contains("FROM"),
        "{msg}"
    );
    // An open heredoc would take the generated `USER` line as its text under BuildKit.
    for open in [
        "RUN <<EOT\necho hi\n",
        "RUN <<-EOT bash\necho hi\n  EOT\n",
        "COPY <<A <<\"B\" /x/\na\nA\nb\n",
        "run python3 <<'EOF'\nprint(1)\n",
    ] {
        let msg = err_with(&config, &local, |i| i.dockerfile_local = Some(open));
        assert!(
            msg.contains("dockerfile_local") && msg.contains("heredoc"),
            "{open:?}: {msg}"
        );
    }
    // A commented-out continuation or FROM is fine, and so are closed heredocs and a
    // shell here-string.
    let mut inputs = Inputs::new(&config, &local, "0.1.0");
    inputs.dockerfile_local = Some("# FROM x\n# RUN a \\\nRUN true\n");
    render(&inputs).unwrap();
    for closed in [
        "RUN <<EOT\necho hi\nEOT\n",
        "RUN <<-EOT\n\techo hi\n\tEOT\nRUN cat <<<word\n",
        "COPY <<A <<\"B\" /x/\na\nA\nb\nB\n",
        "# RUN <<EOT\nRUN echo '<<'\n",
    ] {
        let mut inputs = Inputs::new(&config, &local, "0.1.0");
        inputs.dockerfile_local = Some(closed);
        render(&inputs).unwrap_or_else(|e| panic!("{closed:?}: {e}"));
    }
}

#[test]
fn project_and_image_names_are_valid_for_every_engine() {
    let named = |name: &str, project: Option<&str>| {
        let mut c = team("");
        c.container.name = name.to_owned();
        c.aibox.project_name = project.map(str::to_owned);
        (project_name(&c), image_name(&c))
    };
    assert_eq!(
        named("demo", None),
        ("demo".into(), "localhost/demo-aibox:local".into())
    );
    assert_eq!(
        named("demo", Some("My.Project_")),
        (
            "my-project_".into(),
            "localhost/my-project-aibox:local".into()
        )
    );
    assert_eq!(
        named("x", Some("__")),
        ("aibox".into(), "localhost/aibox-aibox:local".into())
    );
    assert_eq!(named("Web.App", None).0, "web-app");
}

#[test]
fn errors_are_typed_values() {
    let e = DevcontainerError::DuplicateMount {
        target: "/x".into(),
    };
    assert_eq!(
        e.to_string(),
        "two bind mounts target `/x` in the container"
    );
}

/// The project's repository, when configured, is the image's source label.
#[test]
fn repository_becomes_the_image_source_label() {
    let config = team("\n[aibox]\nrepository = \"https://example.org/team/project\"\n");
    let local = LocalToml::default();
    let files = render(&Inputs::new(&config, &local, "0.1.0")).unwrap();
    let dockerfile = String::from_utf8(files[0].contents.to_vec()).unwrap();
    assert!(
        dockerfile.contains("org.opencontainers.image.source=\"https://example.org/team/project\""),
        "{dockerfile}"
    );
}
