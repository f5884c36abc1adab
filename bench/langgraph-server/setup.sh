#!/usr/bin/env bash
# Creates (once) the venv of the LangGraph API server anchor: `langgraph-cli[inmem]` with the
# versions pinned in requirements.txt, from PyPI only. Idempotent: a stamp file holding the
# requirements' checksum skips the install when nothing changed (well under a second).
# Venv: $LANGGRAPH_VENV, default $HOME/.cache/trellis/langgraph-venv.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${LANGGRAPH_VENV:-$HOME/.cache/trellis/langgraph-venv}
req=$here/requirements.txt
sum=$(sha256sum "$req" | cut -d' ' -f1)
stamp=$venv/.trellis-requirements.sha256
if [ -x "$venv/bin/langgraph" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ]; then
  echo "langgraph-venv: present ($venv)"
  exit 0
fi
command -v python3 >/dev/null 2>&1 || { echo "setup.sh: python3 (>= 3.11) is required" >&2; exit 1; }
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
echo "$sum" > "$stamp"
echo "langgraph-venv: installed into $venv ($("$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null \
  | awk '$1 ~ /^langgraph(-cli|-api|-runtime-inmem)?$/ {printf "%s %s, ", $1, $2}' | sed 's/, $//'))"
