#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian machine: system packages, a virtual environment
# with the CPU build of torch, and the project with all extras. Safe to run again.
#   scripts/setup.sh            python environment only
#   scripts/setup.sh --sandbox  also what the local sandbox needs (bubblewrap, Debian's
#                               python3 with pytest): enough for `arena demo`
#   scripts/setup.sh --system   also Docker, debootstrap, PostgreSQL, Chromium and vLLM's
#                               own environment (scripts/vllm-env.sh; the tests)
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
if [[ "$mode" == "--system" || "$mode" == "--sandbox" ]]; then
  need=()
  command -v bwrap >/dev/null || need+=(bubblewrap)
  # each sandbox session's files live on a loop-mounted ext4 of the task's storage size
  command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
  /usr/bin/python3 -c "import pytest" 2>/dev/null || need+=(python3 python3-pytest)
  # the verifier's supervisor is compiled here, statically (trial/supervise.c)
  echo 'int main(void){return 0;}' | cc -static -x c -o /dev/null - 2>/dev/null \
    || need+=(gcc libc6-dev)
  if [[ "$mode" == "--system" ]]; then
    command -v dockerd >/dev/null || need+=(docker.io)
    command -v debootstrap >/dev/null || need+=(debootstrap)
    command -v mkfs.xfs >/dev/null || need+=(xfsprogs)  # dockerd's data root (services.sh)
    ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
    command -v chromium >/dev/null || need+=(chromium)
    command -v wrk >/dev/null || need+=(wrk)  # benchmarks/bench_service.py's load generator
    command -v ps >/dev/null || need+=(procps)  # docker top (the sandbox's kill_all waits on it) runs ps on this host
    command -v busybox >/dev/null || need+=(busybox-static)  # a busybox-only test image
  fi
  if ((${#need[@]})); then
    echo "setup: installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi

PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.arena-installed
# Installs from requirements.lock (every resolved package, pinned), so two machines set up
# the same code get the same libraries; the stamp covers both files.
want=$(cat pyproject.toml requirements.lock | sha256sum | cut -c1-16)
if [[ ! -f $stamp || "$(cat "$stamp")" != "$want" ]]; then
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  # The CPU build first: a bare `torch` requirement would pull a CUDA build of several GB.
  .venv/bin/python -m pip install -q "torch==2.13.0" 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -m pip install -q -c requirements.lock -e ".[all]" 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -c "import posttrain_arena, torch, trl, fastapi" 
  echo "$want" > "$stamp"
fi
if [[ "$mode" == "--system" ]]; then
  # vLLM (CPU build) in its own environment, cached outside the clone keyed on its pin:
  # about 7 minutes and 3.4 GB the first time, nothing after.
  scripts/vllm-env.sh >/dev/null
fi
