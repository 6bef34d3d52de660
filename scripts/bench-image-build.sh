#!/usr/bin/env bash
# Image build benchmark for the tool catalog (docs-site/src/tools.md, "Size and build time").
#
# Creates a claude + codex + gemini project in processkit mode with the bundled content
# pack on the locally built test base image (build it first by running any Podman test,
# e.g. `cargo test -p aibox-devcontainer --test e2e -- podman_build::`), trusts the host's CA bundle
# through `.aibox-local.toml`, then times a cold build (`--no-cache`) and a warm build, and
# prints the image size. Needs the package registries (npm, PyPI, Debian) and Podman.
#
# Usage: scripts/bench-image-build.sh [path/to/aibox]
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
aibox="${1:-$root/target/debug/aibox}"
base="localhost/aibox-test-base:bookworm"
ca="/etc/ssl/certs/ca-certificates.crt"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$root/target/aibox-podman/containers.conf}"

work="$(mktemp -d)"
trap 'rm -rf "$work"; podman rmi -f localhost/aibox-bench:cold localhost/aibox-bench:warm >/dev/null 2>&1 || true' EXIT
proj="$work/bench"
mkdir -p "$proj"
"$aibox" --project "$proj" init bench --harness claude --harness codex --harness gemini \
    --context-mode processkit --processkit-source "$root/examples/processkit-pack" \
    --processkit-version v0.1.0 --base-image "$base" --yes >/dev/null
"$aibox" --project "$proj" config set processkit.sha256 \
    85e26571936b8e418b23fb0ded82e31c63c0993fd567a1e6fa0914473d014af0 >/dev/null
"$aibox" --project "$proj" config set context.packages '["starter"]' >/dev/null
printf '[container]\nextra_ca_certificates = "%s"\n' "$ca" > "$proj/.aibox-local.toml"
"$aibox" --project "$proj" -q apply >/dev/null

build() {
    local start end
    start="$(date +%s%N)"
    podman build "$@" -f "$proj/.devcontainer/Dockerfile" "$proj/.devcontainer" >/dev/null 2>&1
    end="$(date +%s%N)"
    echo $(((end - start) / 1000000))
}

cold="$(build --no-cache -t localhost/aibox-bench:cold)"
warm="$(build -t localhost/aibox-bench:warm)"
size="$(podman image inspect --format '{{.Size}}' localhost/aibox-bench:warm)"
base_size="$(podman image inspect --format '{{.Size}}' "$base")"
printf 'cold build: %s ms\nwarm build: %s ms\nimage size: %s bytes (base image %s bytes)\n' \
    "$cold" "$warm" "$size" "$base_size"
