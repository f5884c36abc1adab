#!/usr/bin/env bash
# Real MCP servers for the trellis-mcp tests (npm, pinned by crates/mcp/tests/peers/
# package-lock.json): @modelcontextprotocol/server-everything, server-filesystem and the
# TypeScript SDK (tests/peers/dynamic.mjs).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/setup.d/lib/npm.sh
npm_peers crates/mcp/tests/peers "mcp peers (server-everything, SDK)"
