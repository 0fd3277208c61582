#!/usr/bin/env bash
# What `make test` needs besides Go, found or installed before any test
# runs, so that a missing piece stops `make test` in its first seconds with
# the command that installs it, never after minutes of tests:
#
#   PostgreSQL   DATABASE_URL, or the local server at 127.0.0.1:5432
#                (started here when it is installed but down)
#   NVRTC 11.8   Debian non-free libnvrtc11.2: the kernels are compiled for
#                sm_90 without a GPU (DESIGN.md §6)
#   OpenBLAS     Debian libopenblas0-pthread: the CPU backend's BLAS tests
#   Chromium     Debian chromium: the browser test of the Temporal UI
#
# As root on Debian it installs what is missing (apt-get, idempotent); as
# anyone else it lists what is missing and the one command that installs
# it, and fails. With everything present it changes nothing. `make test`
# then runs with DQNFLOW_REQUIRE_NVRTC=1 and DQNFLOW_REQUIRE_OPENBLAS=1, so
# a library that vanishes fails its tests instead of skipping them: a
# user's `make test` and CI's test the same things.
#
# --check: report only, install nothing (exit 1 when something is missing).
set -euo pipefail

check_only=0
[ "${1:-}" = "--check" ] && check_only=1

missing_pkgs=()
problems=()

# ldconfig lives in /sbin, which a user's PATH often leaves out.
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
has_lib() { "$LDCONFIG" -p 2>/dev/null | grep "$1" >/dev/null; } # no -q: under pipefail an early exit of grep fails ldconfig (SIGPIPE)

# PostgreSQL: the tests' DATABASE_URL, or the local server.
if [ -z "${DATABASE_URL:-}" ]; then
  if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -h 127.0.0.1 -p 5432 -q; then
    if [ "$check_only" = 0 ] && [ "$(id -u)" = 0 ] && command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
      for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
    fi
  fi
  if ! command -v pg_isready >/dev/null 2>&1; then
    problems+=("PostgreSQL: no server answers at 127.0.0.1:5432 and pg_isready is not installed; install PostgreSQL (Debian: apt-get install postgresql) or set DATABASE_URL")
  elif ! pg_isready -h 127.0.0.1 -p 5432 -q; then
    problems+=("PostgreSQL: no server answers at 127.0.0.1:5432; start it (Debian: pg_ctlcluster \$(ls /etc/postgresql) main start) or set DATABASE_URL")
  fi
fi

has_lib 'libnvrtc\.so\.11\.2 ' || missing_pkgs+=(libnvrtc11.2)
has_lib 'libopenblas\.so\.0 ' || missing_pkgs+=(libopenblas0-pthread)
if [ -z "${DQNFLOW_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1 &&
  ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then
  missing_pkgs+=(chromium)
fi

# enable_non_free adds Debian's non-free component (NVRTC lives there) to
# the Debian archive's sources, not to debian-security, which has no NVRTC.
enable_non_free() {
  local src=/etc/apt/sources.list.d/debian.sources
  if [ -f "$src" ]; then
    awk '
      /^$/ { debian = 0 }
      /^URIs:/ { debian = ($0 ~ /\/debian\/?$/) }
      /^Components:/ && debian && $0 !~ /(^|[ \t])non-free([ \t]|$)/ { $0 = $0 " non-free" }
      { print }
    ' "$src" >"$src.new" && mv "$src.new" "$src"
  elif [ -f /etc/apt/sources.list ]; then
    sed -i -E '/^deb .*\/debian\/? /{/ non-free( |$)/! s/$/ non-free/}' /etc/apt/sources.list
  fi
}

if [ "${#missing_pkgs[@]}" -gt 0 ]; then
  if [ "$check_only" = 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test-deps: installing ${missing_pkgs[*]} (Debian packages, once)"
    for p in "${missing_pkgs[@]}"; do [ "$p" = libnvrtc11.2 ] && enable_non_free; done
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_pkgs[@]}" >/dev/null
  else
    problems+=("missing Debian packages: ${missing_pkgs[*]}; install them with: sudo tools/test-deps.sh (it adds Debian's non-free component for libnvrtc11.2)")
  fi
fi

if [ "${#problems[@]}" -gt 0 ]; then
  echo "make test cannot run on this machine yet:" >&2
  for p in "${problems[@]}"; do echo "  - $p" >&2; done
  exit 1
fi
echo "test-deps: PostgreSQL, NVRTC 11.8, OpenBLAS and Chromium found"
