#!/usr/bin/env bash
# The whole loop on the embedded defaults: installs what it needs, then `arena demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --sandbox
exec .venv/bin/arena demo "$@"
