#!/usr/bin/env bash
# python3: the bundled example repository (examples/inventory) and the end-to-end tests of
# `trellis run` use its unittest runner as the project's test command.
set -euo pipefail
if command -v python3 >/dev/null 2>&1; then
  echo "python3: present ($(python3 --version 2>&1))"
  exit 0
fi
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq python3 >/dev/null
echo "python3: installed ($(python3 --version 2>&1))"
