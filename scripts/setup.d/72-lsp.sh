#!/usr/bin/env bash
# Language servers for the trellis-lsp tests: rust-analyzer (a rustup component; the bare
# rustup proxy in ~/.cargo/bin does not run without it), pyright (PyPI, pinned, in the
# venv ~/.cache/trellis/lsp-venv; it bundles its JavaScript and runs on the system node) and
# typescript-language-server with typescript (npm, pinned by crates/lsp/tests/peers/
# package-lock.json, in ~/.cache/trellis/lsp-node). trellis-lsp finds the last two there when
# they are not on PATH. A test whose server is missing says SKIPPED and passes, so a failure
# here is reported but does not stop the setup.
set -uo pipefail
cd "$(dirname "$0")/../.."
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
node_dir="${XDG_CACHE_HOME:-$HOME/.cache}/trellis/lsp-node"
. scripts/setup.d/lib/npm.sh
# The pins are copied next to node_modules (only when they changed: npm_peers' stamp is the lock's hash).
copy_pins() {
  local f
  mkdir -p "$node_dir" || return 1
  for f in package.json package-lock.json; do
    cmp -s "crates/lsp/tests/peers/$f" "$node_dir/$f" || cp "crates/lsp/tests/peers/$f" "$node_dir/$f" || return 1
  done
}
if ! { copy_pins && npm_peers "$node_dir" "lsp: typescript-language-server 6.0.2, typescript 6.0.3 ($node_dir)"; }; then
  echo "lsp: typescript-language-server could not be installed (npm ci in $node_dir); its tests will be SKIPPED" >&2
fi
exit 0
