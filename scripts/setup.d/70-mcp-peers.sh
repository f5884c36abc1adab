#!/usr/bin/env bash
# Real MCP servers for the trellis-mcp tests (npm, pinned by crates/mcp/tests/peers/
# package-lock.json): @modelcontextprotocol/server-everything and server-filesystem. Skipped
# when node_modules already follows the lock file.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=crates/mcp/tests/peers
if ! command -v npm >/dev/null 2>&1; then
  echo "mcp peers: npm is needed (Node.js 20 or later)" >&2
  exit 1
fi
lock=$(sha256sum "$dir/package-lock.json" | cut -c1-16)
if [ -f "$dir/node_modules/.lock-stamp" ] && [ "$(cat "$dir/node_modules/.lock-stamp")" = "$lock" ]; then
  echo "mcp peers: installed"
  exit 0
fi
echo "mcp peers: npm ci (server-everything, server-filesystem)…"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
echo "$lock" > "$dir/node_modules/.lock-stamp"
echo "mcp peers: installed"
