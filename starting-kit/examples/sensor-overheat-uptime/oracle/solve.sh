#!/bin/bash
# Reference solution: group by machine, sort by time, scan for hot runs of length >= 3.
set -euo pipefail
cd "${BENCHFLOW_WORKSPACE:-/root}"
python3 - <<'PY'
import csv
import json
from collections import defaultdict

THRESHOLD, MIN_RUN = 85.0, 3
readings = defaultdict(list)
with open("line_sensors.csv", newline="") as handle:
    for row in csv.DictReader(handle):
        temp = float(row["temp_c"]) if row["temp_c"].strip() else None
        readings[row["machine"]].append((row["timestamp"], row["state"], temp))

report = {}
for machine in sorted(readings):
    rows = sorted(readings[machine])  # ISO timestamps sort as text
    events, run = [], []
    for stamp, _, temp in rows + [("", "", None)]:  # sentinel closes a final run
        if temp is not None and temp > THRESHOLD:
            run.append((stamp, temp))
            continue
        if len(run) >= MIN_RUN:
            events.append({"start": run[0][0], "end": run[-1][0],
                           "peak_c": max(t for _, t in run)})
        run = []
    uptime = 100 * sum(state == "RUN" for _, state, _ in rows) / len(rows)
    report[machine] = {"uptime_pct": round(uptime, 2), "overheat_events": events}

with open("report.json", "w") as out:
    json.dump(report, out, indent=2)
PY
cat report.json
