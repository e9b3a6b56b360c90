#!/usr/bin/env bash
# GPU check for a machine with one H100-class GPU and no network, whose python already
# has torch (CUDA), transformers, peft and accelerate. It installs what the tree carries
# (wheels/gpu/*.whl from scripts/gpu-wheels.sh: trl, datasets and their deps, the
# project's own deps; debs/bubblewrap*.deb for the trials' sandbox), then runs
# scripts/gpu_check.py: a few-hundred-million-parameter model built locally (bf16, random
# init), the project's pipeline on a generated micro challenge (baseline evaluation,
# oracle teacher, SFT, a few GRPO steps with in-process generation, final evaluation).
# Prints tokens/s, rollouts/min, peak GPU memory and seconds per stage; exits non-zero
# on any failure. Budget: 8 minutes (`timeout`).
#   scripts/gpu-check.sh [extra gpu_check.py args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
start=$(date +%s)
stage() { echo "gpu-check: [$(( $(date +%s) - start ))s] $*" >&2; }

stage "python: $($PY -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())')"
if ! command -v bwrap >/dev/null; then
  deb=$(ls debs/bubblewrap*.deb 2>/dev/null | head -1 || true)
  [[ -n $deb ]] || { echo "gpu-check: FAIL: no bwrap and no debs/bubblewrap*.deb" >&2; exit 1; }
  stage "installing $deb"
  if [[ $(id -u) == 0 ]]; then dpkg -i "$deb" >/dev/null
  else dpkg -x "$deb" "$HOME/.local/bwrap" && export PATH="$HOME/.local/bwrap/usr/bin:$PATH"; fi
fi
$PY -c "import scipy" 2>/dev/null || tar -tJf wheels/gpu.tar.xz | grep -q '^./scipy-' || {
  echo "gpu-check: FAIL: scipy is needed (the score's sign test) and neither this python" \
       "nor wheels/gpu.tar.xz has it" >&2; exit 1; }
stage "installing carried wheels (no index)"
whl=$(mktemp -d)
tar -xJf wheels/gpu.tar.xz -C "$whl"
$PY - "$whl" <<'PYEOF'
import os, sys, zipfile
root = sys.argv[1]
for name in os.listdir(root):  # each folder is one unpacked wheel: zip it back up
    src = os.path.join(root, name)  # named like the wheel file it came from
    with zipfile.ZipFile(src + ".zip", "w", zipfile.ZIP_STORED) as z:
        for d, _, files in os.walk(src):
            for f in files:
                full = os.path.join(d, f)
                z.write(full, os.path.relpath(full, src))
PYEOF
for z in "$whl"/*.whl.zip; do rm -rf "${z%.zip}"; mv "$z" "${z%.zip}"; done  # dir -> .whl
$PY -m pip install -q --no-index --find-links "$whl" "$whl"/*.whl
rm -rf "$whl"
$PY -m pip install -q --no-index --no-deps --no-build-isolation -e . 
$PY -c "import trl, datasets, peft, accelerate, posttrain_arena" 
stage "running the pipeline"
timeout --signal=TERM 420 $PY scripts/gpu_check.py "$@"
stage "done"
