#!/usr/bin/env bash
# Downloads, here (with network), what scripts/gpu-check.sh installs there (no network):
# trl and datasets with the dependencies that a python holding torch, transformers, peft
# and accelerate lacks, and the project's own dependencies; plus Debian's bubblewrap
# .deb for the trials' sandbox. What travels with the tree is limited to 64 MiB in all,
# and the wheels alone are 106 MiB (pyarrow 53, scipy 34, pandas 12), so they travel
# unpacked in one xz archive (wheels/gpu.tar.xz, about 50 MiB without scipy), which
# gpu-check.sh turns back into wheels there. scipy (the sign test of the score) comes
# along only if it still fits; otherwise the GPU machine's python must have it, and
# gpu-check.sh says so before anything runs.
#   scripts/gpu-wheels.sh [PYTHON_VERSION=3.11]      then carry: wheels, debs
set -euo pipefail
cd "$(dirname "$0")/.."
pyver=${1:-3.11}
limit=$((64 * 1048576))
cache=${ARENA_CACHE_DIR:-$HOME/.cache/posttrain-arena}/gpu-wheels/py$pyver
mkdir -p "$cache" wheels debs
pkgs=(
  "trl>=0.24" "datasets>=3.0" "pyarrow" "dill" "multiprocess" "xxhash" "fsspec"
  "pandas" "python-dateutil" "pytz" "tzdata" "six"
  "pydantic>=2.7" "pydantic-core" "annotated-types" "typing-inspection"
  "typer>=0.12" "rich>=13.7" "click" "shellingham" "markdown-it-py" "mdurl" "pygments"
  "httpx>=0.27" "httpcore" "h11" "anyio" "sniffio" "certifi" "idna" "docker>=7.1"
)
dl() {
  python3 -m pip download -q --only-binary=:all: --no-deps --python-version "$pyver" \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 -d "$cache" "$@" 2>&1 | grep -v '^WARNING: Location' >&2 || true
}
dl "${pkgs[@]}"
dl "scipy>=1.11"
if command -v apt-get >/dev/null && ! ls debs/bubblewrap*.deb >/dev/null 2>&1; then
  (cd debs && apt-get download bubblewrap >/dev/null 2>&1) || echo "note: no bubblewrap .deb" >&2
fi
pack() {  # pack wheel files $@ unpacked into wheels/gpu.tar.xz; echo its size
  local tmp; tmp=$(mktemp -d)
  for w in "$@"; do mkdir -p "$tmp/$(basename "$w")" && (cd "$tmp/$(basename "$w")" && unzip -q "$w"); done
  (cd "$tmp" && tar -cf - . | xz -T0 -9 > "$OLDPWD/wheels/gpu.tar.xz")
  rm -rf "$tmp"
}
mapfile -t all < <(ls "$cache"/*.whl)
mapfile -t core < <(printf '%s\n' "${all[@]}" | grep -v '/scipy-')
debs=$(du -cb debs | tail -1 | cut -f1)
pack "${all[@]}"
size=$(( $(stat -c %s wheels/gpu.tar.xz) + debs ))
if (( size > limit )); then
  echo "gpu-wheels: with scipy $((size / 1048576)) MiB: over 64 MiB; packing without it" >&2
  pack "${core[@]}"
  size=$(( $(stat -c %s wheels/gpu.tar.xz) + debs ))
fi
echo "gpu-wheels: wheels/gpu.tar.xz + debs = $((size / 1048576)) MiB (limit 64)" >&2
(( size <= limit )) || { echo "gpu-wheels: FAIL: over 64 MiB" >&2; exit 1; }
