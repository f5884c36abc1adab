#!/usr/bin/env bash
# The web UI (web/): `npm ci` and `npm run build` (type check + Vite) into web/dist, which
# trellis-server embeds at compile time. `npm ci` also installs the browser tests' tools
# (Playwright, axe: devDependencies; the browser is Debian's, 65-chromium.sh). Skipped when
# the sources, the lock file and the build tools are unchanged since the last build (a stamp
# in web/dist).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f web/package.json ] || { echo "web: no web/ sources"; exit 0; }
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "web: node and npm (>= 20) are needed to build the UI: install Node.js 20 or later" >&2
  exit 1
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "web: node $(node --version) is too old; the UI build needs node >= 20" >&2
  exit 1
fi
# node_modules follows the lock file even when web/dist is current (the tests need it).
lock=$(sha256sum web/package-lock.json | cut -c1-16)
if [ ! -f web/node_modules/.lock-stamp ] || [ "$(cat web/node_modules/.lock-stamp)" != "$lock" ]; then
  echo "web: npm ci (from the npm registry)…"
  (cd web && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock" > web/node_modules/.lock-stamp
fi
stamp=$( (cd web && find src scripts index.html package.json package-lock.json tsconfig.json vite.config.ts public \
            -type f 2>/dev/null | LC_ALL=C sort | xargs sha256sum; node --version) | sha256sum | cut -c1-16)
if [ -f web/dist/.stamp ] && [ "$(cat web/dist/.stamp)" = "$stamp" ] && [ -f web/dist/index.html ]; then
  echo "web: built (web/dist is current)"
  exit 0
fi
t0=$(date +%s)
echo "web: building the UI (tsc + vite)…"
(cd web && npm run --silent build >/dev/null)
echo "$stamp" > web/dist/.stamp
echo "web: built web/dist in $(( $(date +%s) - t0 )) s ($(du -sh web/dist | cut -f1))"
