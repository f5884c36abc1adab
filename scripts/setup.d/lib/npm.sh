# Sourced by the npm steps (not run by scripts/setup: it is not in setup.d/ itself).

# npm_peers DIR WHAT [NPM ARGS…]: installs DIR's packages from its package-lock.json (`npm ci`,
# or the npm command given) unless node_modules already follows the lock (a stamp of the lock
# file's hash in node_modules); WHAT names it in the progress lines.
npm_peers() {
  local dir=$1 what=$2 lock
  shift 2
  [ $# -gt 0 ] || set -- ci
  if ! command -v npm >/dev/null 2>&1; then
    echo "$what: npm is needed (Node.js 20 or later)" >&2
    return 1
  fi
  lock=$(sha256sum "$dir/package-lock.json" | cut -c1-16)
  if [ -f "$dir/node_modules/.lock-stamp" ] && [ "$(cat "$dir/node_modules/.lock-stamp")" = "$lock" ]; then
    echo "$what: installed"
    return 0
  fi
  echo "$what: npm $1 (the lock's versions, from the npm registry)…"
  (cd "$dir" && npm "$@" --no-audit --no-fund --loglevel=error) || return 1
  echo "$lock" > "$dir/node_modules/.lock-stamp"
  echo "$what: installed"
}
