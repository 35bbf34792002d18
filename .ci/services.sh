# shellcheck shell=bash
# Sourced by .ci/test (under `set -euo pipefail`, as root on a fresh Debian machine): makes sure the
# redis-server and PostgreSQL server binaries and a Java runtime (for PyFlink's local cluster in
# tests/test_flink.py) exist, installing the Debian packages only when they are missing, and prints
# where they are. It starts nothing: tests/services.py starts its own
# servers on loopback ports and stops them. Exports PYADK_PG_BINDIR (PostgreSQL's binaries live in
# /usr/lib/postgresql/<version>/bin, which is not on PATH).
# Safe to source under `set -euo pipefail`; it defines no variables or functions beyond that export.

# The directory holding initdb, postgres and pg_isready (what tests/services.py needs), if any:
# $PYADK_PG_BINDIR, then wherever initdb on PATH really lives, then the newest Debian version.
_pyadk_pg_bindir() {
  local dir best=""
  for dir in "${PYADK_PG_BINDIR:-}" \
    "$(dirname "$(readlink -f "$(command -v initdb || echo /nonexistent)")")"; do
    if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ] && [ -x "$dir/pg_isready" ]; then
      printf '%s\n' "$dir"
      return 0
    fi
  done
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ] && [ -x "$dir/pg_isready" ] || continue
    if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$best" "$dir" | sort -V | tail -n 1)" = "$dir" ]; then
      best="$dir"
    fi
  done
  [ -n "$best" ] && printf '%s\n' "$best"
  return 0
}

_pyadk_services() {
  local missing=() sudo=() pg_bindir
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  [ -n "$(_pyadk_pg_bindir)" ] || missing+=(postgresql)
  command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
  if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
      if command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
      else
        echo "services.sh: ${missing[*]} missing and not root (no sudo) to install them" >&2
        return 1
      fi
    fi
    echo "== installing ${missing[*]} (apt-get)"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq || return 1
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${missing[@]}" >/dev/null || return 1
  fi
  pg_bindir="$(_pyadk_pg_bindir)"
  if ! command -v redis-server >/dev/null 2>&1 || [ -z "$pg_bindir" ] \
    || ! command -v java >/dev/null 2>&1; then
    echo "services.sh: redis-server, PostgreSQL or Java still missing after apt-get install" >&2
    return 1
  fi
  export PYADK_PG_BINDIR="$pg_bindir"
  echo "== services: $(command -v redis-server) ($(redis-server --version | awk '{print $3}'))," \
    "PostgreSQL $("$pg_bindir/postgres" --version | awk '{print $3}') in $pg_bindir," \
    "$(java -version 2>&1 | head -n 1)"
}

if _pyadk_services; then
  unset -f _pyadk_services _pyadk_pg_bindir
else
  unset -f _pyadk_services _pyadk_pg_bindir
  # `return` when sourced (the caller's `set -e` then stops CI); `exit` when run directly.
  return 1 2>/dev/null || exit 1
fi
