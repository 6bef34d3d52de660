#!/usr/bin/env bash
# Installs aibox from a release folder, refusing any artifact that does not match SHA256SUMS.
#
# Usage: scripts/install.sh RELEASE_DIR [DEST_DIR]
#   RELEASE_DIR  holds SHA256SUMS and aibox-<target> files (what `cargo xtask release-gate`
#                writes to target/release-gate/, or the assets of a release)
#   DEST_DIR     where `aibox` goes (default: ~/.local/bin)
# AIBOX_TARGET overrides the detected target triple (x86_64/aarch64, glibc Linux).
#
# The artifact is copied to a temporary file beside the destination first; the copy is
# hashed and compared with its SHA256SUMS line, and only a matching copy is renamed into
# place. SHA256SUMS itself is bound to the release by evidence.json, whose digest the signed
# release tag carries (see docs-site "Release process").
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: scripts/install.sh RELEASE_DIR [DEST_DIR]"
release_dir=$1
dest_dir=${2:-"$HOME/.local/bin"}

if [ -n "${AIBOX_TARGET:-}" ]; then
  target=$AIBOX_TARGET
else
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) target=x86_64-unknown-linux-gnu ;;
    Linux-aarch64 | Linux-arm64) target=aarch64-unknown-linux-gnu ;;
    *) die "no aibox release artifact for $(uname -s) $(uname -m)" ;;
  esac
fi
name="aibox-$target"
artifact="$release_dir/$name"
sums="$release_dir/SHA256SUMS"

[ -f "$sums" ] || die "$sums not found: refusing to install an artifact that cannot be checked"
[ -f "$artifact" ] || die "$artifact not found (this release has: $(cd "$release_dir" && ls aibox-* 2>/dev/null | tr '\n' ' '))"

# Exactly one line for this artifact, in sha256sum's format (text or binary marker).
lines=$(awk -v n="$name" '$2 == n || $2 == "*" n' "$sums")
count=$(printf '%s' "$lines" | grep -c . || true)
[ "$count" -eq 1 ] || die "SHA256SUMS has $count lines for $name (expected exactly one)"
expected=${lines%% *}
[[ "$expected" =~ ^[0-9a-f]{64}$ ]] || die "SHA256SUMS line for $name has no SHA-256 digest"

mkdir -p "$dest_dir"
tmp=$(mktemp "$dest_dir/.aibox.install.XXXXXX")
trap 'rm -f "$tmp"' EXIT
cp "$artifact" "$tmp"
actual=$(sha256sum "$tmp" | cut -d' ' -f1)
if [ "$actual" != "$expected" ]; then
  die "checksum mismatch for $name: SHA256SUMS says $expected, the file is $actual; nothing was installed"
fi
chmod 0755 "$tmp"
mv -f "$tmp" "$dest_dir/aibox"
trap - EXIT
echo "install.sh: installed $name ($actual) as $dest_dir/aibox"
