#!/usr/bin/env bash
# Language servers for the trellis-lsp tests: rust-analyzer (a rustup component; the bare
# rustup proxy in ~/.cargo/bin does not run without it) and pyright (PyPI, pinned, in the
# venv ~/.cache/trellis/lsp-venv; it bundles its JavaScript and runs on the system node). A
# test whose server is missing says SKIPPED and passes, so a failure here is reported but
# does not stop the setup.
set -uo pipefail
if rust-analyzer --version >/dev/null 2>&1; then
  echo "lsp: rust-analyzer present ($(rust-analyzer --version))"
elif command -v rustup >/dev/null 2>&1 && rustup component add rust-analyzer >/dev/null 2>&1; then
  echo "lsp: rust-analyzer installed ($(rust-analyzer --version))"
else
  echo "lsp: rust-analyzer could not be installed (rustup component add rust-analyzer); its tests will be SKIPPED" >&2
fi
venv="${XDG_CACHE_HOME:-$HOME/.cache}/trellis/lsp-venv"
pyright=1.1.414
if [ -x "$venv/bin/pyright-langserver" ] && grep -qx "$pyright" "$venv/.pyright-version" 2>/dev/null; then
  echo "lsp: pyright $pyright present"
elif { python3 -m venv "$venv" >/dev/null 2>&1 \
        || { ${SUDO:-} apt-get install -y -qq python3-venv >/dev/null 2>&1 && python3 -m venv "$venv" >/dev/null 2>&1; }; } \
     && "$venv/bin/pip" install -q "pyright==$pyright" >/dev/null 2>&1; then
  echo "$pyright" > "$venv/.pyright-version"
  echo "lsp: pyright $pyright installed in $venv"
else
  echo "lsp: pyright could not be installed (python3 -m venv + pip install pyright==$pyright); its tests will be SKIPPED" >&2
fi
exit 0
