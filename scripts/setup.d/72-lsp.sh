#!/usr/bin/env bash
# Language servers for the trellis-lsp tests: rust-analyzer (a rustup component; the bare
# rustup proxy in ~/.cargo/bin does not run without it). A test whose server is missing
# says SKIPPED and passes, so a failure here is reported but does not stop the setup.
set -uo pipefail
if rust-analyzer --version >/dev/null 2>&1; then
  echo "lsp: rust-analyzer present ($(rust-analyzer --version))"
  exit 0
fi
if command -v rustup >/dev/null 2>&1 && rustup component add rust-analyzer >/dev/null 2>&1; then
  echo "lsp: rust-analyzer installed ($(rust-analyzer --version))"
else
  echo "lsp: rust-analyzer could not be installed (rustup component add rust-analyzer); its tests will be SKIPPED" >&2
fi
exit 0
