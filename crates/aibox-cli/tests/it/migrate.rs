//! `aibox migrate` through the real binary: an upgrade with conflicts is summarised by
//! `apply`, reported by `apply --check` and `doctor`, listed, shown (the three versions,
//! one of them printed alone), settled and marked done, after which `doctor` and
//! `migrate list` are clean; exit codes as documented (2 for a refused request, 3 for a
//! base version the download cache does not hold).

#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may fail loudly

use std::process::Output;

use aibox_test_support::cli::CliContext;
use aibox_test_support::http::release::SyntheticRelease;

fn config(ctx: &CliContext, release: &SyntheticRelease) -> String {
    let dir = ctx.dir().parent().unwrap().join("releases");
    fs_err::create_dir_all(&dir).unwrap();
    release.local_project_config(&dir).unwrap()
}

fn run(ctx: &CliContext, args: &[&str]) -> Output {
    ctx.command(args).output().unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON value")
}

fn codes(doctor: &serde_json::Value) -> Vec<String> {
    doctor["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
#[allow(clippy::too_many_lines)] // one walk through the whole workflow
fn an_upgrade_with_conflicts_is_seen_and_finished() {
    let ctx = CliContext::new(env!("CARGO_BIN_EXE_aibox"));
    let v1 = SyntheticRelease::generate("v0.28.3", false);
    let v2 = SyntheticRelease::generate("v0.29.0", true);
    ctx.write("aibox.toml", &config(&ctx, &v1));
    assert_eq!(run(&ctx, &["apply"]).status.code(), Some(0));
    // A skill file the next release changes, edited here.
    let skill = v2.changed_plain_skill(&v1, ctx.dir()).unwrap();
    ctx.write(&skill, "my notes\n");
    ctx.write("aibox.toml", &config(&ctx, &v2));

    // A dry run says what the upgrade would do, conflicts included, and writes nothing.
    let out = run(&ctx, &["apply", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("processkit would upgrade v0.28.3 → v0.29.0: "),
        "{err}"
    );
    assert!(
        err.contains(&format!("warning: conflict: {skill} (yours kept")),
        "{err}"
    );
    assert!(!ctx.dir().join("context/migrations").exists());

    let out = run(&ctx, &["apply"]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("processkit upgraded v0.28.3 → v0.29.0: "),
        "{err}"
    );
    assert!(
        err.contains(&format!("warning: conflict: {skill} (yours kept")),
        "{err}"
    );
    assert!(
        err.contains("  migration document: context/migrations/pending/MIG-"),
        "{err}"
    );
    assert!(!err.contains("pending migration"), "{err}");

    // `apply --check` (nothing stale: exit 0) and doctor (a warning: exit 0) report it.
    let out = run(&ctx, &["apply", "--check"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pending migration MIG-"));
    let out = run(&ctx, &["doctor", "-o", "json", "--no-update-check"]);
    assert!(codes(&json(&out)).contains(&"aibox::doctor::pending_migration".to_owned()));

    let list = json(&run(&ctx, &["migrate", "list", "-o", "json"]));
    let id = list["migrations"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        list["migrations"][0]["conflicts"][1]["path"],
        skill.as_str()
    );

    // The three versions, and one printed alone.
    let out = run(&ctx, &["migrate", "show", &id]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("conflict: {skill}")), "{text}");
    assert!(
        text.contains("  theirs context/migrations/pending/"),
        "{text}"
    );
    assert!(
        text.contains("  base   release v0.28.3 in the download cache\n"),
        "{text}"
    );
    let out = run(&ctx, &["migrate", "show", &id, &skill, "--print", "base"]);
    assert_eq!(out.stdout, v1.files[&skill].0);
    // Without the previous release in the cache: an environment error.
    let mut cmd = ctx.command(&[
        "migrate", "show", &id, &skill, "--print", "base", "-o", "json",
    ]);
    let out = cmd
        .env(
            "XDG_CACHE_HOME",
            ctx.dir().parent().unwrap().join("empty-cache"),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(json(&out)["code"], "aibox::migrate::base_unavailable");

    // Refusals are user errors.
    let out = run(
        &ctx,
        &["migrate", "show", "MIG-19990101T000000", "-o", "json"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["code"], "aibox::migrate::unknown_id");
    let out = run(&ctx, &["migrate", "resolve", &id, "-o", "json"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json(&out)["code"], "aibox::migrate::conflicts_open");
    let out = run(
        &ctx,
        &["migrate", "resolve", &id, "--take", "theirs", "--edited"],
    );
    assert_eq!(out.status.code(), Some(2));
    let out = run(&ctx, &["migrate", "show", &id, "--print", "base"]);
    assert_eq!(out.status.code(), Some(2), "--print needs a path");

    // Settle both conflicts; the migration is done.
    let out = run(
        &ctx,
        &["migrate", "resolve", &id, &skill, "--take", "theirs"],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        fs_err::read(ctx.dir().join(&skill)).unwrap(),
        v2.files[&skill].0
    );
    let out = run(
        &ctx,
        &["migrate", "resolve", &id, "--take", "ours", "-o", "json"],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        json(&out)["applied"],
        format!("context/migrations/applied/{id}.md")
    );
    let out = run(&ctx, &["migrate", "list"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "no pending migrations\n"
    );
    let out = run(&ctx, &["doctor", "-o", "json", "--no-update-check"]);
    assert!(!codes(&json(&out)).iter().any(|c| c.contains("migration")));
    let out = run(&ctx, &["apply"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("migration"));
}
