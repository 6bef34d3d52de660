//! The JSON shape of `aibox status --output json`: a contract for scripts, so it is
//! pinned with snapshots.

use aibox_runtime::{ComposeKind, ContainerState, Engine, ProxyStatus, Status};

fn status(state: ContainerState) -> Status {
    let exists = state != ContainerState::Missing;
    Status {
        project: "demo".to_owned(),
        container: "demo".to_owned(),
        devcontainer_cli: false,
        state,
        engine_status: exists.then(|| "running".to_owned()),
        container_id: exists.then(|| "0123456789abcdef".to_owned()),
        image: "localhost/demo-aibox:local".to_owned(),
        image_present: exists,
        image_stale: false,
        container_stale: false,
        former_containers: Vec::new(),
        engine: Engine::Podman,
        compose: ComposeKind::PodmanCompose,
        proxy: None,
    }
}

#[test]
fn running_status_json() {
    insta::assert_json_snapshot!(status(ContainerState::Running));
}

/// With `[network] egress = "allowlist"` the proxy's container is reported too: a stopped
/// one leaves the agent without a way out.
#[test]
fn status_with_a_stopped_proxy_json() {
    let mut status = status(ContainerState::Running);
    status.proxy = Some(ProxyStatus {
        container: "demo_aibox-egress_1".to_owned(),
        state: ContainerState::Stopped,
        engine_status: Some("exited".to_owned()),
    });
    insta::assert_json_snapshot!(status);
}

#[test]
fn missing_status_json() {
    insta::assert_json_snapshot!(status(ContainerState::Missing));
}

#[test]
fn every_compose_kind_serialises_as_its_command() {
    let names: Vec<String> = ComposeKind::ALL
        .iter()
        .map(|k| {
            serde_json::to_value(k)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let expected: Vec<&str> = ComposeKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(names, expected);
    assert_eq!(
        expected,
        [
            "docker compose",
            "podman compose",
            "podman-compose",
            "docker-compose"
        ]
    );
}
