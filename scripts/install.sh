#!/bin/sh
# Installs aibox from a signed release: the release's SHA256SUMS must carry a signature by a
# maintainer key (ssh-keygen -Y verify, namespace "aibox-release") before any checksum in it
# is trusted, must name the version asked for, and the artifact must match its line.
#
#   curl -fsSL https://raw.githubusercontent.com/projectious-work/aibox/main/scripts/install.sh \
#     | sh -s -- --version X.Y.Z
#
# Options:
#   --version X.Y.Z      the release to install (default: the newest; pin it to rule out an
#                        older signed release being served in its place)
#   --from URL|DIR       the releases base (default $AIBOX_RELEASE_BASE, else
#                        https://github.com/projectious-work/aibox/releases; assets are read
#                        from URL/download/vX.Y.Z/ or URL/latest/download/), or a folder
#                        holding the assets (target/release-gate/)
#   --to DIR             where `aibox` goes (default ~/.local/bin)
#   --allowed-signers F  verify against F instead of the keys embedded below
#   --allow-downgrade    replace a newer installed aibox with an older release
# AIBOX_TARGET overrides the detected target triple (aibox-<triple> is the asset fetched).
#
# Nothing is installed unless every check passes: the artifact is copied beside the
# destination, checked, run once (`--version` must print the signed version), then renamed
# into place. Only https:// is fetched, and http:// to a loopback address (for tests).
set -eu

# The maintainer keys, kept equal to release/allowed_signers by `cargo xtask release-key`.
# BEGIN allowed_signers
ALLOWED_SIGNERS='
'
# END allowed_signers
NAMESPACE=aibox-release
KEYS_DOC="https://github.com/projectious-work/aibox/blob/main/docs-site/src/release.md#maintainer-keys"

die() { echo "install.sh: $*; nothing was installed" >&2; exit 1; }

version="${AIBOX_VERSION:-}"
from="${AIBOX_RELEASE_BASE:-https://github.com/projectious-work/aibox/releases}"
dest_dir="$HOME/.local/bin"
signers_file=""
allow_downgrade=""
while [ $# -gt 0 ]; do
  case "$1" in
    --version) [ $# -ge 2 ] || die "--version needs X.Y.Z"; version=${2#v}; shift 2 ;;
    --from) [ $# -ge 2 ] || die "--from needs a URL or folder"; from=$2; shift 2 ;;
    --to) [ $# -ge 2 ] || die "--to needs a folder"; dest_dir=$2; shift 2 ;;
    --allowed-signers) [ $# -ge 2 ] || die "--allowed-signers needs a file"; signers_file=$2; shift 2 ;;
    --allow-downgrade) allow_downgrade=1; shift ;;
    *) die "unknown argument '$1' (see the header of this script)" ;;
  esac
done
case "$version" in
  "" | [0-9]*.[0-9]*.[0-9]*) ;;
  *) die "--version '$version' is not X.Y.Z" ;;
esac
case "$version" in *[!0-9A-Za-z.-]*) die "--version '$version' is not X.Y.Z" ;; esac

if [ -n "${AIBOX_TARGET:-}" ]; then
  target=$AIBOX_TARGET
else
  # glibc systems get the glibc build (floor 2.28), musl systems (Alpine) the static one.
  libc=gnu
  if ldd --version 2>&1 | grep -qi musl; then libc=musl; fi
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) target=x86_64-unknown-linux-$libc ;;
    Linux-aarch64 | Linux-arm64) target=aarch64-unknown-linux-$libc ;;
    *) die "no aibox release artifact for $(uname -s) $(uname -m) (build from source: cargo install --locked --git https://github.com/projectious-work/aibox aibox-cli)" ;;
  esac
fi
name="aibox-$target"

work=$(mktemp -d)
tmp=""
trap 'rm -rf "$work"; [ -z "$tmp" ] || rm -f "$tmp"' EXIT

# fetch ASSET: copies or downloads one release asset into $work; fails quietly.
case "$from" in
  https://*) proto="=https" ;;
  http://127.0.0.1:* | http://127.0.0.1/* | http://localhost:* | http://localhost/* | http://\[::1\]*) proto="=http" ;;
  http://* | *://*) die "refusing $from: only https:// (or http:// to a loopback address) is fetched" ;;
  *) proto="" ;;
esac
fetch() {
  if [ -z "$proto" ]; then
    [ -f "$from/$1" ] && cp "$from/$1" "$work/$1"
  else
    if [ -n "$version" ]; then url="$from/download/v$version/$1"; else url="$from/latest/download/$1"; fi
    curl -fsSL --proto "$proto" --proto-redir "$proto" --max-filesize 268435456 -o "$work/$1" "$url"
  fi
}

fetch SHA256SUMS || die "SHA256SUMS not found at $from: refusing an artifact that cannot be checked"
fetch SHA256SUMS.sig || die "SHA256SUMS.sig not found at $from: refusing an unsigned release"

# 1. The signature, by a maintainer key, before anything in SHA256SUMS is believed.
if [ -n "$signers_file" ]; then
  cp "$signers_file" "$work/allowed_signers" || die "cannot read $signers_file"
else
  printf '%s' "$ALLOWED_SIGNERS" > "$work/allowed_signers"
fi
grep -q '^[^#[:space:]]' "$work/allowed_signers" \
  || die "no maintainer key is known to this installer (see $KEYS_DOC)"
principal=$(ssh-keygen -Y find-principals -s "$work/SHA256SUMS.sig" -f "$work/allowed_signers" 2>/dev/null | head -n 1) \
  || die "SHA256SUMS is not signed by a maintainer key in the allowed signers (see $KEYS_DOC)"
[ -n "$principal" ] || die "SHA256SUMS is not signed by a maintainer key in the allowed signers"
ssh-keygen -Y verify -f "$work/allowed_signers" -I "$principal" -n "$NAMESPACE" \
  -s "$work/SHA256SUMS.sig" < "$work/SHA256SUMS" > /dev/null 2>&1 \
  || die "the signature on SHA256SUMS does not verify (altered after signing, or not made for an aibox release)"

# 2. The signed sums name their version: an older release served in place of the one asked
#    for, or an older release over a newer installed aibox, is refused.
signed=$(sed -n '1s/^# aibox \([0-9][0-9A-Za-z.-]*\)$/\1/p' "$work/SHA256SUMS")
[ -n "$signed" ] || die "the signed SHA256SUMS does not name its version (first line '# aibox X.Y.Z')"
if [ -n "$version" ] && [ "$signed" != "$version" ]; then
  die "asked for aibox $version but the signed release is aibox $signed (a replayed or misplaced release)"
fi
if [ -x "$dest_dir/aibox" ] && [ -z "$allow_downgrade" ]; then
  installed=$("$dest_dir/aibox" --version 2>/dev/null | sed -n '1s/^aibox \([0-9][0-9A-Za-z.-]*\).*/\1/p') || installed=""
  if [ -n "$installed" ] && [ "$installed" != "$signed" ] \
    && [ "$(printf '%s\n%s\n' "$installed" "$signed" | sort -V | tail -n 1)" = "$installed" ]; then
    die "aibox $installed is installed and this release is the older $signed (pass --allow-downgrade to replace it)"
  fi
fi

# 3. The artifact against its one line in the signed sums.
lines=$(awk -v n="$name" '$2 == n || $2 == "*" n' "$work/SHA256SUMS")
count=$(printf '%s' "$lines" | grep -c . || true)
[ "$count" -eq 1 ] || die "SHA256SUMS has $count lines for $name (expected exactly one)"
expected=${lines%% *}
case "$expected" in
  *[!0-9a-f]*) die "SHA256SUMS line for $name has no SHA-256 digest" ;;
esac
[ ${#expected} -eq 64 ] || die "SHA256SUMS line for $name has no SHA-256 digest"
fetch "$name" || die "$name not found at $from"

mkdir -p "$dest_dir"
tmp=$(mktemp "$dest_dir/.aibox.install.XXXXXX")
cp "$work/$name" "$tmp"
actual=$(sha256sum "$tmp" | cut -d' ' -f1)
[ "$actual" = "$expected" ] \
  || die "checksum mismatch for $name: SHA256SUMS says $expected, the file is $actual"
chmod 0755 "$tmp"
said=$("$tmp" --version 2>/dev/null || true)
[ "$said" = "aibox $signed" ] || die "$name --version printed '$said', expected 'aibox $signed'"
mv -f "$tmp" "$dest_dir/aibox"
tmp=""
echo "install.sh: installed aibox $signed ($name, sha256 $actual, signed by $principal) as $dest_dir/aibox"
