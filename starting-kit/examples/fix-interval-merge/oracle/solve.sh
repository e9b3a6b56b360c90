#!/bin/bash
# Reference solution: sort a copy, merge when the next start is <= the current end,
# and keep the larger end.
set -euo pipefail
cd "${BENCHFLOW_WORKSPACE:-/root}/project"
python3 - <<'PY'
from pathlib import Path

path = Path("intervals.py")
source = path.read_text()
buggy = """    merged = []
    for start, end in intervals:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
"""
fixed = """    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
"""
assert buggy in source, "intervals.py is not the seeded version"
path.write_text(source.replace(buggy, fixed))
PY
python3 -m pytest -q -p no:cacheprovider test_intervals.py
