#!/usr/bin/env bash
# PyPI `mcp-server-git` for the trellis-mcp client tests (crates/mcp/tests/suite/git.rs), pinned
# with the packages that decide its behaviour, in the venv ~/.cache/trellis/mcp-git-venv. A test
# whose server is missing says SKIPPED and passes, so a failure here is reported but does not
# stop the setup.
set -uo pipefail
venv="${XDG_CACHE_HOME:-$HOME/.cache}/trellis/mcp-git-venv"
pins="mcp-server-git==2026.10.19 mcp==2.3.0 GitPython==3.2.1"
if [ -x "$venv/bin/mcp-server-git" ] && [ "$(cat "$venv/.trellis-pins" 2>/dev/null)" = "$pins" ]; then
  echo "mcp-server-git: present ($venv)"
  exit 0
fi
# shellcheck disable=SC2086 # $pins is a list of requirement specifiers
if { python3 -m venv "$venv" >/dev/null 2>&1 \
      || { ${SUDO:-} apt-get install -y -qq python3-venv >/dev/null 2>&1 && python3 -m venv "$venv" >/dev/null 2>&1; }; } \
   && "$venv/bin/pip" install -q --disable-pip-version-check $pins >/dev/null 2>&1; then
  echo "$pins" > "$venv/.trellis-pins"
  echo "mcp-server-git: installed in $venv ($pins)"
else
  echo "mcp-server-git: could not be installed (python3 -m venv + pip install $pins); its tests will be SKIPPED" >&2
fi
exit 0
