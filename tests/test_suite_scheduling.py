"""The suite's scheduling holds: scripts/test.sh runs pytest with `--dist loadgroup`, and
tests marked with one `xdist_group` must run on one worker, so that a module fixture that
starts a server (tests/vllm_server) starts it once. A pytest that xdist cannot group for
(9.2 renamed the node id xdist rewrites) spreads them silently; this test says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GROUPED = """
import os, time, pytest
pytestmark = [pytest.mark.xdist_group("one-server")]

@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    time.sleep(0.1)
    with open("workers.txt", "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""

SPREAD = """
import time, pytest

@pytest.mark.parametrize("i", range(6))
def test_spread(i):
    time.sleep(0.1)
"""


def test_tests_of_one_xdist_group_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_spread.py").write_text(SPREAD)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the rootdir: no project conftest
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup",
                          "-p", "no:cacheprovider", "-q"], cwd=tmp_path,
                         capture_output=True, text=True, check=False, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 6
    assert len(set(workers)) == 1, f"one group ran on {sorted(set(workers))}"
