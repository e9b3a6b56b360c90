"""Checks the final state of /root/project/intervals.py: merge_intervals behaves as documented.

The module is imported from the workspace and called on hidden cases and on seeded
random cases compared with a brute-force reference, so a partial fix fails.
"""

import importlib.util
import os
import random
from pathlib import Path

import pytest

WORKSPACE = Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
MODULE_PATH = WORKSPACE / "project" / "intervals.py"


def _load():
    spec = importlib.util.spec_from_file_location("intervals_under_test", MODULE_PATH)
    assert spec is not None and spec.loader is not None, f"cannot import {MODULE_PATH}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def merge():
    assert MODULE_PATH.is_file(), f"{MODULE_PATH} is missing"
    return _load().merge_intervals


def _as_pairs(result):
    return [tuple(pair) for pair in result]


def _reference(intervals):
    """Brute force on doubled coordinates: covered points, then maximal runs."""
    covered = set()
    for start, end in intervals:
        covered.update(range(2 * start, 2 * end + 1))
    runs, points = [], sorted(covered)
    for p in points:
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return [(a // 2, b // 2) for a, b in runs]


def test_module_keeps_its_interface():
    """intervals.py still imports and exposes merge_intervals and total_busy."""
    module = _load()
    assert callable(module.merge_intervals)
    assert callable(module.total_busy)


def test_unsorted_input_is_sorted_and_merged(merge):
    """Intervals given out of order are sorted by start before merging."""
    assert _as_pairs(merge([(8, 10), (1, 3), (2, 4)])) == [(1, 4), (8, 10)]


def test_touching_intervals_merge(merge):
    """Closed intervals sharing an endpoint, (1, 3) and (3, 5), become (1, 5)."""
    assert _as_pairs(merge([(1, 3), (3, 5)])) == [(1, 5)]


def test_adjacent_integers_stay_separate(merge):
    """(1, 2) and (3, 4) share no point, so they stay two intervals."""
    assert _as_pairs(merge([(3, 4), (1, 2)])) == [(1, 2), (3, 4)]


def test_contained_interval_keeps_outer_end(merge):
    """An interval inside another, (2, 3) in (1, 10), must not shorten it."""
    assert _as_pairs(merge([(1, 10), (2, 3), (4, 6)])) == [(1, 10)]


def test_empty_and_point_intervals(merge):
    """An empty list gives an empty list; zero-length intervals behave as points."""
    assert _as_pairs(merge([])) == []
    assert _as_pairs(merge([(5, 5)])) == [(5, 5)]
    assert _as_pairs(merge([(5, 5), (5, 7), (9, 9)])) == [(5, 7), (9, 9)]


def test_input_list_is_not_modified(merge):
    """The caller's list (and its order) is unchanged after the call."""
    given = [(6, 9), (1, 2), (2, 4)]
    snapshot = list(given)
    merge(given)
    assert given == snapshot


def test_random_cases_match_reference(merge):
    """300 seeded random inputs agree with a brute-force coverage reference."""
    rng = random.Random(20260301)
    for _ in range(300):
        intervals = []
        for _ in range(rng.randint(0, 9)):
            start = rng.randint(0, 40)
            intervals.append((start, start + rng.randint(0, 6)))
        assert _as_pairs(merge(list(intervals))) == _reference(intervals), intervals
