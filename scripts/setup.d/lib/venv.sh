# Sourced by the PyPI steps (not run by scripts/setup: it is not in setup.d/ itself).

# py_venv VENV WHAT PINS: a venv at VENV with exactly PINS (requirement specifiers, one
# string) installed, unless VENV already records those pins; WHAT names it in the progress
# lines.
py_venv() {
  local venv=$1 what=$2 pins=$3
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.trellis-pins" 2>/dev/null)" = "$pins" ]; then
    echo "$what: present ($venv)"
    return 0
  fi
  python3 -m venv "$venv" >/dev/null 2>&1 ||
    { ${SUDO:-} apt-get install -y -qq python3-venv >/dev/null && python3 -m venv "$venv"; }
  # shellcheck disable=SC2086 # $pins is a list of requirement specifiers
  "$venv/bin/pip" install -q --disable-pip-version-check $pins
  echo "$pins" > "$venv/.trellis-pins"
  echo "$what: installed in $venv ($pins)"
}
