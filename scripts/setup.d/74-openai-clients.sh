#!/usr/bin/env bash
# The two real clients of `trellis models serve`'s tests (crates/llm-server/tests/suite/clients.rs):
# PyPI `openai`, pinned with the HTTP and model packages that decide its behaviour, in the venv
# ~/.cache/trellis/openai-py-venv; npm `openai` from crates/llm-server/tests/node's
# package-lock.json (6.49.0: the 7.x line needs node 22, the system node is 20). A client that
# is missing fails its test with this command, so a failure here stops the setup.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv="${XDG_CACHE_HOME:-$HOME/.cache}/trellis/openai-py-venv"
pins="openai==3.57.0 httpx2==2.16.2 httpcore2==2.16.2 pydantic==2.14.4"
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.trellis-pins" 2>/dev/null)" = "$pins" ]; then
  echo "openai (PyPI): present ($venv)"
else
  python3 -m venv "$venv" >/dev/null 2>&1 ||
    { ${SUDO:-} apt-get install -y -qq python3-venv >/dev/null && python3 -m venv "$venv"; }
  # shellcheck disable=SC2086 # $pins is a list of requirement specifiers
  "$venv/bin/pip" install -q --disable-pip-version-check $pins
  echo "$pins" > "$venv/.trellis-pins"
  echo "openai (PyPI): installed in $venv ($pins)"
fi

. scripts/setup.d/lib/npm.sh
npm_peers crates/llm-server/tests/node "openai (npm)"
