#!/usr/bin/env bash
# Installs the release tools at pinned versions into ${AIBOX_TOOLS_DIR:-$HOME/.aibox-tools}.
# Usage: scripts/install-release-tools.sh [cargo-deny] [cargo-zigbuild]
#        (default: all; mdBook is none of them: xtask builds the docs site with its library)
# `cargo xtask release-state` reads the pins below (NAME_VERSION=…, and the PyPI hashes);
# keep one assignment per line.
set -euo pipefail
root="${AIBOX_TOOLS_DIR:-$HOME/.aibox-tools}"
CARGO_DENY_VERSION=0.20.2
# cargo-zigbuild and the Zig toolchain it drives, from PyPI, each pinned by the SHA-256 of
# its x86_64 Linux wheel (pip --require-hashes refuses anything else).
CARGO_ZIGBUILD_VERSION=0.24.1
CARGO_ZIGBUILD_SHA256=238a1ab54a95053a4eadc34775c81f795a8ad75f80bfed63f3f445f518102375
ZIGLANG_VERSION=0.15.2
ZIGLANG_SHA256=806316453d1ede7174ed3fefb8e5348154629089c3bb5fe812dfd0e172fac130
want=("$@"); [ ${#want[@]} -gt 0 ] || want=(cargo-deny cargo-zigbuild)
for tool in "${want[@]}"; do
  case "$tool" in
    cargo-deny) version=$CARGO_DENY_VERSION; bin=cargo-deny; features=() ;;
    cargo-zigbuild)
      venv="$root/zigbuild"
      if [ -x "$venv/bin/cargo-zigbuild" ] && "$venv/bin/cargo-zigbuild" --version 2>/dev/null | grep -q "$CARGO_ZIGBUILD_VERSION" \
        && "$venv/bin/python3" -m ziglang version 2>/dev/null | grep -qx "$ZIGLANG_VERSION"; then
        continue
      fi
      echo "installing cargo-zigbuild $CARGO_ZIGBUILD_VERSION and ziglang $ZIGLANG_VERSION into $venv"
      python3 -m venv --clear "$venv"
      reqs="$(mktemp)"
      trap 'rm -f "$reqs"' EXIT
      printf 'cargo-zigbuild==%s --hash=sha256:%s\nziglang==%s --hash=sha256:%s\n' \
        "$CARGO_ZIGBUILD_VERSION" "$CARGO_ZIGBUILD_SHA256" "$ZIGLANG_VERSION" "$ZIGLANG_SHA256" >"$reqs"
      "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --require-hashes -r "$reqs"
      continue ;;
    *) echo "unknown tool: $tool" >&2; exit 2 ;;
  esac
  if [ -x "$root/bin/$bin" ] && "$root/bin/$bin" --version 2>/dev/null | grep -q "$version"; then
    continue
  fi
  echo "installing $tool $version into $root"
  cargo install --locked --quiet --root "$root" --version "$version" "${features[@]}" "$tool"
done
