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
# Two workers on two cores oversubscribe them by design (SFT's two torch threads beside
# the other worker): torch's OpenMP threads then sleep when idle instead of spinning, which
# on two cores halved SFT's time next to another worker and changes no figure.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
# One worker more than cores: most tests wait on Docker, sandboxes, sockets and services
# more than they compute, and the micro demo's chain holds one worker for its whole length.
cores=$(nproc)
workers=${ARENA_TEST_WORKERS:-$(( cores < 8 ? cores + 1 : 8 ))}
# loadgroup: tests marked with one xdist_group run on one worker, in order (a module whose
# fixture starts a server starts it once; tests/test_suite_scheduling.py checks it holds).
exec .venv/bin/python -m pytest -n "$workers" --dist loadgroup "$@"
