#!/usr/bin/env bash
# bubblewrap, the OS sandbox every command an agent runs is wrapped in (crates/sandbox,
# docs/security.md). Without it Trellis falls back to Landlock + seccomp in-process, and
# refuses to run commands if neither can be set up (`[sandbox] mode`).
set -euo pipefail
if command -v bwrap >/dev/null 2>&1; then
  echo "bubblewrap: present ($(bwrap --version))"
  exit 0
fi
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq bubblewrap >/dev/null
command -v bwrap >/dev/null 2>&1 || { echo "bubblewrap: installed, but no bwrap on PATH" >&2; exit 1; }
echo "bubblewrap: installed ($(bwrap --version))"
