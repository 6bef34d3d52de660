#!/usr/bin/env bash
# Installs the release tools at pinned versions into ${AIBOX_TOOLS_DIR:-$HOME/.aibox-tools}.
# Usage: scripts/install-release-tools.sh [mdbook] [cargo-deny]   (default: both)
set -euo pipefail
root="${AIBOX_TOOLS_DIR:-$HOME/.aibox-tools}"
MDBOOK_VERSION=0.5.4
CARGO_DENY_VERSION=0.20.2
want=("$@"); [ ${#want[@]} -gt 0 ] || want=(mdbook cargo-deny)
for tool in "${want[@]}"; do
  case "$tool" in
    mdbook) version=$MDBOOK_VERSION; bin=mdbook ;;
    cargo-deny) version=$CARGO_DENY_VERSION; bin=cargo-deny ;;
    *) echo "unknown tool: $tool" >&2; exit 2 ;;
  esac
  if [ -x "$root/bin/$bin" ] && "$root/bin/$bin" --version 2>/dev/null | grep -q "$version"; then
    continue
  fi
  echo "installing $tool $version into $root"
  cargo install --locked --quiet --root "$root" --version "$version" "$tool"
done
