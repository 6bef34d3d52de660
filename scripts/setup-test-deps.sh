#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine (run as root, or with
# the packages already present). Called by `cargo xtask ci`; idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)

apt_packages=(podman runc catatonit debootstrap podman-compose docker-compose uidmap
  slirp4netns fuse-overlayfs git ca-certificates e2fsprogs
  # Docker Engine (dockerd): the Docker tests start their own daemon on a private socket.
  docker.io
  # aibox's base image (`cargo xtask image`): arm64 through qemu + binfmt_misc, and a
  # loopback registry to publish to and pull from.
  qemu-user-static binfmt-support docker-registry
  openssh-client binutils python3-venv curl time)
# openssh-client: ssh-keygen for the release tag signing tests; binutils: objdump for the
# glibc floor check; python3-venv: cargo-zigbuild's virtualenv; curl: PyPI questions of
# release-state; time: GNU /usr/bin/time, peak RSS in `cargo xtask bench`.
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js 20 or newer runs the pinned harness CLIs (gemini-cli needs 20).
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# uv, the resolver `aibox apply` locks MCP servers' Python dependencies with (the MCP
# locking tests find it through `python3 -c 'import uv'`). The version is the tool
# catalog's (crates/aibox-devcontainer/catalog/tools.toml), read from there.
uv_version=$(sed -n '/^\[tool.uv\]/,/^version/s/^version = "\(.*\)"/\1/p' crates/aibox-devcontainer/catalog/tools.toml)
if [ "$(python3 -c 'import uv, importlib.metadata as m; print(m.version("uv"))' 2>/dev/null)" != "$uv_version" ]; then
  echo "setup: pip install uv==$uv_version"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "uv==$uv_version"
fi

# Real harness and devcontainer CLIs, pinned by committed lock files.
for dir in test-tools/*/; do
  # Skip when node_modules is already newer than the lock file (a local re-run).
  if [ -f "$dir/package-lock.json" ] && ! [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    echo "setup: npm ci --prefix $dir"
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
  fi
done

echo "setup: setup took $(( $(date +%s) - started ))s"
