#!/usr/bin/env bash
# PostgreSQL's server binaries from Debian, for the store's PostgreSQL backend and its tests:
# the tests start throwaway clusters on loopback themselves (crates/test-pg). No cluster of
# the package's own is created or started (create_main_cluster = false).
set -euo pipefail
present() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }
if present; then
  echo "postgresql: present ($(ls -d /usr/lib/postgresql/*/bin | tail -1))"
  exit 0
fi
conf=/etc/postgresql-common/createcluster.conf
if ! grep -qs '^create_main_cluster *= *false' "$conf"; then
  ${SUDO:-} mkdir -p "$(dirname "$conf")"
  echo "create_main_cluster = false" | ${SUDO:-} tee -a "$conf" >/dev/null
fi
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq postgresql >/dev/null
present || { echo "postgresql: installed, but no initdb under /usr/lib/postgresql/*/bin" >&2; exit 1; }
echo "postgresql: installed ($(ls -d /usr/lib/postgresql/*/bin | tail -1))"
