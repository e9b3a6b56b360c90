#!/usr/bin/env bash
# Reference solution. Runs inside the task image, in the workspace, like an agent would.
set -euo pipefail
cd "${BENCHFLOW_WORKSPACE:-/root}"
python3 -c 'import sys; print(sum(int(x) for x in sys.stdin if x.strip()))' \
  < input.txt > answer.txt
