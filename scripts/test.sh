#!/usr/bin/env bash
# The whole test suite, Docker-, bubblewrap-, PostgreSQL- and browser-marked tests
# included, on a fresh machine: installs what it needs, starts services, runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --system
eval "$(scripts/services.sh)"
export ARENA_REQUIRE_ALL_BACKENDS=${ARENA_REQUIRE_ALL_BACKENDS:-1}
.venv/bin/ruff check src tests
.venv/bin/mypy
# loadgroup: tests marked with one xdist_group run on one worker, in order (the micro
# protocol resumes the micro demo's run).
exec .venv/bin/python -m pytest -n 2 --dist loadgroup "$@"
