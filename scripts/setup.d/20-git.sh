#!/usr/bin/env bash
# git: the tools crate's worktrees, reviews and their tests drive the git command line.
set -euo pipefail
if command -v git >/dev/null 2>&1; then
  echo "git: present ($(git --version))"
  exit 0
fi
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq git >/dev/null
echo "git: installed ($(git --version))"
