#!/usr/bin/env bash
# Xvfb (a virtual X server), xwd and netpbm, for the desktop client's window smoke test: the real
# `trellis-desktop` binary opens its window on Xvfb and a screenshot is taken with xwd
# (docs/desktop.md). The iced_test simulator tests need none of this.
set -euo pipefail
missing=()
command -v Xvfb >/dev/null 2>&1 || missing+=(xvfb)
command -v xwd >/dev/null 2>&1 || missing+=(x11-apps)
command -v xwdtopnm >/dev/null 2>&1 || missing+=(netpbm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "xvfb, xwd, netpbm: present"
  exit 0
fi
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
command -v Xvfb >/dev/null 2>&1 || { echo "xvfb: installed, but no Xvfb on PATH" >&2; exit 1; }
echo "xvfb, xwd, netpbm: installed (${missing[*]})"
