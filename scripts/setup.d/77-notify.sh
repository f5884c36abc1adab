#!/usr/bin/env bash
# For trellis-notify's desktop notification tests (crates/notify/tests/suite/desktop.rs):
# dbus-daemon (a private session bus per test) and dunst (Debian's notification daemon, on
# the Xvfb display that 66-xvfb.sh installs; read back with dunstctl).
set -euo pipefail
missing=()
command -v dbus-daemon >/dev/null 2>&1 || missing+=(dbus-daemon)
command -v dunst >/dev/null 2>&1 || missing+=(dunst)
if [ ${#missing[@]} -eq 0 ]; then
  echo "dbus-daemon, dunst: present"
  exit 0
fi
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for t in dbus-daemon dunst dunstctl; do
  command -v "$t" >/dev/null 2>&1 || { echo "$t: installed, but not on PATH" >&2; exit 1; }
done
echo "installed: ${missing[*]}"
