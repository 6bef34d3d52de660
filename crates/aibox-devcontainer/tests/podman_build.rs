//! Builds a generated Dockerfile with real Podman from the locally built Debian minbase
//! image and checks the result: the user (here reusing IDs the base image already
//! has), the version marker agreeing with the labels, the inlined `Dockerfile.local`,
//! and the final `USER`/`WORKDIR`.

use std::process::Stdio;

use aibox_config::{AiboxToml, LocalToml};
use aibox_devcontainer::{Inputs, render};
use aibox_test_support::podman::{BASE_IMAGE, Cleanup, Podman};

const DOCKERFILE_LOCAL: &str = "RUN echo from-local > /etc/local-step\nUSER root\n";

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
    let files = render(&inputs).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dockerfile = files
        .iter()
        .find(|f| f.path == ".devcontainer/Dockerfile")
        .unwrap();
    fs_err::write(dir.path().join("Dockerfile"), &dockerfile.contents).unwrap();

    let image = format!(
        "localhost/aibox-devcontainer-buildcheck:{}",
        std::process::id()
    );
    let mut cleanup = Cleanup::new(&podman);
    cleanup.image(&image);
    let ctx = dir.path().to_str().unwrap();
    let build = podman
        .command()
        .args([
            "build",
            "--network=none",
            "-t",
            &image,
            "-f",
            "Dockerfile",
            ctx,
        ])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
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
