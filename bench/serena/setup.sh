#!/usr/bin/env bash
# Creates (once) what the `trellis mcp` vs Serena benchmark needs, from PyPI only:
# - the venv $SERENA_VENV (default ~/.cache/trellis/serena-venv) with requirements.txt;
# - pyright in ~/.cache/trellis/lsp-venv (scripts/setup.d/72-lsp.sh), for both servers;
# - the real repositories of repos.txt, unpacked from their pinned wheels under
#   ~/.cache/trellis/bench-serena/NAME.
# Idempotent: stamps (the requirements' checksum, each wheel's hash) make a later call a no-op.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/trellis
venv=${SERENA_VENV:-$cache/serena-venv}
req=$here/requirements.txt
sum=$(sha256sum "$req" | cut -d' ' -f1)
stamp=$venv/.trellis-requirements.sha256
if [ -x "$venv/bin/serena" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ]; then
  echo "serena-venv: present ($venv)"
else
  command -v python3 >/dev/null 2>&1 || { echo "setup.sh: python3 (>= 3.11) is required" >&2; exit 1; }
  echo "serena-venv: installing serena-agent into $venv from PyPI (about a minute, once)…"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  echo "$sum" > "$stamp"
  echo "serena-venv: installed ($("$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null \
    | awk '$1 ~ /^(serena-agent|mcp)$/ {printf "%s %s, ", $1, $2}' | sed 's/, $//'))"
fi

bash "$here/../../scripts/setup.d/72-lsp.sh"
[ -x "$cache/lsp-venv/bin/pyright-langserver" ] || { echo "setup.sh: pyright is missing (see above)" >&2; exit 1; }

grep -v '^#' "$here/repos.txt" | while read -r name pin hash subdir; do
  [ -n "$name" ] || continue
  dest=$cache/bench-serena/$name
  if [ "$(cat "$dest/.wheel-sha256" 2>/dev/null)" = "$hash" ]; then
    echo "bench-serena: $name present ($dest)"
    continue
  fi
  echo "bench-serena: fetching $pin from PyPI…"
  tmp=$(mktemp -d)
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
    -d "$tmp" "$pin"
  whl=$(ls "$tmp"/*.whl)
  echo "$hash  $whl" | sha256sum -c --quiet -
  rm -rf "$dest" && mkdir -p "$dest"
  "$venv/bin/python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$tmp/x"
  cp -r "$tmp/x/$subdir" "$dest/"
  echo "$hash" > "$dest/.wheel-sha256"
  rm -rf "$tmp"
  echo "bench-serena: $name unpacked into $dest"
done
