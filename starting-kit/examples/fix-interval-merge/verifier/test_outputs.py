"""Checks the final state of /root/project/intervals.py: merge_intervals behaves as documented.

The agent's module runs in a separate, isolated interpreter (so nothing it does at
import time can end or fool this pytest run); it is called on hidden cases and on
seeded random cases compared with a brute-force reference, so a partial fix fails.
"""

import json
import os
import random
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

WORKSPACE = Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
MODULE_PATH = WORKSPACE / "project" / "intervals.py"

# Runs in the child: load the module by path, call merge_intervals on every case.
DRIVER = r"""
import importlib.util, json, sys
path, marker = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("intervals_under_test", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
out = {"interface": [callable(getattr(module, n, None)) for n in ("merge_intervals", "total_busy")]}
for name, case in json.load(sys.stdin).items():
    given = [tuple(pair) for pair in case]
    snapshot = list(given)
    result = module.merge_intervals(given)
    out[name] = {"result": [list(pair) for pair in result], "mutated": given != snapshot}
print(marker + json.dumps(out))
"""

CASES = {
    "unsorted": [(8, 10), (1, 3), (2, 4)],
    "touching": [(1, 3), (3, 5)],
    "adjacent": [(3, 4), (1, 2)],
    "contained": [(1, 10), (2, 3), (4, 6)],
    "empty": [],
    "point": [(5, 5)],
    "points_and_spans": [(5, 5), (5, 7), (9, 9)],
    "not_mutated": [(6, 9), (1, 2), (2, 4)],
}


def _random_cases():
    rng = random.Random(20260301)
    cases = {}
    for n in range(300):
        intervals = []
        for _ in range(rng.randint(0, 9)):
            start = rng.randint(0, 40)
            intervals.append((start, start + rng.randint(0, 6)))
        cases[f"random_{n}"] = intervals
    return cases


RANDOM_CASES = _random_cases()


def _reference(intervals):
    """Brute force on doubled coordinates: covered points, then maximal runs."""
    covered = set()
    for start, end in intervals:
        covered.update(range(2 * start, 2 * end + 1))
    runs = []
    for p in sorted(covered):
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return [(a // 2, b // 2) for a, b in runs]


@pytest.fixture(scope="module")
def outcome():
    assert MODULE_PATH.is_file(), f"{MODULE_PATH} is missing"
    marker = f"@@{secrets.token_hex(8)}@@"
    run = subprocess.run(
        [sys.executable, "-I", "-c", DRIVER, str(MODULE_PATH), marker],
        input=json.dumps({**CASES, **RANDOM_CASES}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith(marker)]
    assert run.returncode == 0 and lines, f"intervals.py failed to run:\n{run.stderr[-2000:]}"
    return json.loads(lines[-1][len(marker) :])


def _pairs(outcome, name):
    return [tuple(pair) for pair in outcome[name]["result"]]


def test_module_keeps_its_interface(outcome):
    """intervals.py still imports and exposes merge_intervals and total_busy."""
    assert outcome["interface"] == [True, True]


def test_unsorted_input_is_sorted_and_merged(outcome):
    """Intervals given out of order are sorted by start before merging."""
    assert _pairs(outcome, "unsorted") == [(1, 4), (8, 10)]


def test_touching_intervals_merge(outcome):
    """Closed intervals sharing an endpoint, (1, 3) and (3, 5), become (1, 5)."""
    assert _pairs(outcome, "touching") == [(1, 5)]


def test_adjacent_integers_stay_separate(outcome):
    """(1, 2) and (3, 4) share no point, so they stay two intervals."""
    assert _pairs(outcome, "adjacent") == [(1, 2), (3, 4)]


def test_contained_interval_keeps_outer_end(outcome):
    """An interval inside another, (2, 3) in (1, 10), must not shorten it."""
    assert _pairs(outcome, "contained") == [(1, 10)]


def test_empty_and_point_intervals(outcome):
    """An empty list gives an empty list; zero-length intervals behave as points."""
    assert _pairs(outcome, "empty") == []
    assert _pairs(outcome, "point") == [(5, 5)]
    assert _pairs(outcome, "points_and_spans") == [(5, 7), (9, 9)]


def test_input_list_is_not_modified(outcome):
    """The caller's list (and its order) is unchanged after the call."""
    assert _pairs(outcome, "not_mutated") == [(1, 4), (6, 9)]
    assert not outcome["not_mutated"]["mutated"]


def test_random_cases_match_reference(outcome):
    """300 seeded random inputs agree with a brute-force coverage reference."""
    for name, intervals in RANDOM_CASES.items():
        assert _pairs(outcome, name) == _reference(intervals), intervals
