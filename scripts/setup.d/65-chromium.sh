#!/usr/bin/env bash
# Chromium from Debian, for the web UI's browser tests (Playwright drives the system binary:
# Playwright's own browser download is not reachable).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "chromium: present ($(chromium --version 2>/dev/null | head -1))"
  exit 0
fi
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq chromium >/dev/null
echo "chromium: installed ($(chromium --version 2>/dev/null | head -1))"
