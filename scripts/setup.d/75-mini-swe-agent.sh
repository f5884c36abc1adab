#!/usr/bin/env bash
# The task harness's anchor (`trellis eval run --agents trellis,mini-swe-agent`, docs/eval.md):
# PyPI `mini-swe-agent` 2.4.6 with the litellm that carries its requests, pinned, in the venv
# ~/.cache/trellis/mini-swe-agent-venv (its `mini` is the harness's default `--mini`).
set -euo pipefail
venv="${XDG_CACHE_HOME:-$HOME/.cache}/trellis/mini-swe-agent-venv"
pins="mini-swe-agent==2.4.6 litellm==1.110.2"
if [ -x "$venv/bin/mini" ] && [ "$(cat "$venv/.trellis-pins" 2>/dev/null)" = "$pins" ]; then
  echo "mini-swe-agent (PyPI): present ($venv)"
  exit 0
fi
python3 -m venv "$venv" >/dev/null 2>&1 ||
  { ${SUDO:-} apt-get install -y -qq python3-venv >/dev/null && python3 -m venv "$venv"; }
echo "mini-swe-agent (PyPI): installing into $venv (about a minute)…"
# shellcheck disable=SC2086 # $pins is a list of requirement specifiers
"$venv/bin/pip" install -q --disable-pip-version-check $pins
echo "$pins" > "$venv/.trellis-pins"
echo "mini-swe-agent (PyPI): installed in $venv ($pins)"
