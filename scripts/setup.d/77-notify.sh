#!/usr/bin/env bash
# dbus-daemon (Debian's package of that name), for trellis-notify's desktop notification test:
# crates/notify/tests/suite/desktop.rs starts a private session bus with it and serves
# org.freedesktop.Notifications on that bus itself, so no notification daemon is needed.
set -euo pipefail
if command -v dbus-daemon >/dev/null 2>&1; then
  echo "dbus-daemon: present"
  exit 0
fi
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq --no-install-recommends dbus-daemon >/dev/null
command -v dbus-daemon >/dev/null 2>&1 || { echo "dbus-daemon: installed, but not on PATH" >&2; exit 1; }
echo "dbus-daemon: installed"
