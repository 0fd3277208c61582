#!/usr/bin/env bash
# Fetches NVRTC 12 (Debian trixie's non-free libnvrtc12 and its builtins)
# into DIR without installing it, so that `make test-sm90a` can compile the
# sm_90a (wgmma) kernels, which Debian bookworm's NVRTC 11.8 cannot target.
# The packages are unpacked with dpkg -x; nothing on the system changes.
# Idempotent: does nothing when DIR already has the library.
#   tools/nvrtc12.sh DIR
set -euo pipefail
dir=${1:?usage: tools/nvrtc12.sh DIR}
if [ -e "$dir/libnvrtc.so.12" ]; then
  exit 0
fi
mkdir -p "$dir"
work=$(mktemp -d)
chmod 755 "$work" # apt downloads as its own user
trap 'rm -rf "$work"' EXIT
cat >"$work/trixie.sources" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
mkdir -p "$work/lists/partial"
apt=(-o "Dir::Etc::sourcelist=$work/trixie.sources" -o Dir::Etc::sourceparts=/dev/null -o "Dir::State::Lists=$work/lists")
apt-get "${apt[@]}" update -qq 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
# awk reads to the end: an early exit would kill apt-cache with SIGPIPE,
# which pipefail turns into the script's failure (exit 141).
builtins=$(apt-cache "${apt[@]}" depends libnvrtc12 | awk '/Depends: libnvrtc-builtins/ && b == "" {b = $2} END {print b}')
(cd "$work" && apt-get "${apt[@]}" download libnvrtc12 "${builtins:-libnvrtc-builtins12.4}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
for deb in "$work"/*.deb; do
  dpkg -x "$deb" "$work/x"
done
cp -a "$work"/x/usr/lib/*/libnvrtc* "$dir/"
ls "$dir/libnvrtc.so.12" >/dev/null
libs=("$dir"/libnvrtc.so.12.*)
echo "NVRTC 12 in $dir: ${libs[0]##*/}"
