"""Checks /root/report.json: per-machine uptime and overheat events of the seeded sensor log.

The expected report follows from the prompt's rules applied to line_sensors.csv
(see verifier.md for why each event is or is not one).
"""

import json
import os
from pathlib import Path

import pytest

WORKSPACE = Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root"))
REPORT = WORKSPACE / "report.json"

EXPECTED_UPTIME = {"EX-1": 93.75, "EX-2": 80.00, "EX-3": 96.25}
EXPECTED_EVENTS = {
    "EX-1": [
        ("2026-03-14T06:12:00", "2026-03-14T06:15:00", 91.4),
        ("2026-03-14T07:10:00", "2026-03-14T07:12:00", 85.3),
    ],
    "EX-2": [],
    "EX-3": [
        ("2026-03-14T06:25:00", "2026-03-14T06:27:00", 92.5),
        ("2026-03-14T06:55:00", "2026-03-14T06:59:00", 88.0),
    ],
}


@pytest.fixture(scope="module")
def report():
    assert REPORT.is_file(), f"{REPORT} was not written"
    data = json.loads(REPORT.read_text())
    assert isinstance(data, dict), "report.json must hold a JSON object"
    return data


def test_machines(report):
    """The report has exactly one entry per machine: EX-1, EX-2, EX-3."""
    assert sorted(report) == sorted(EXPECTED_UPTIME)


@pytest.mark.parametrize("machine", sorted(EXPECTED_UPTIME))
def test_uptime(report, machine):
    """uptime_pct is the share of RUN readings, in percent, to two decimals."""
    got = report[machine]["uptime_pct"]
    assert isinstance(got, int | float), f"{machine}: uptime_pct must be a number"
    assert abs(got - EXPECTED_UPTIME[machine]) <= 0.005 + 1e-9, f"{machine}: {got}"


@pytest.mark.parametrize("machine", sorted(EXPECTED_EVENTS))
def test_overheat_events(report, machine):
    """Events are the maximal runs of >= 3 time-consecutive readings above 85.0, in order."""
    events = report[machine]["overheat_events"]
    assert isinstance(events, list), f"{machine}: overheat_events must be a list"
    got = [(e["start"], e["end"], float(e["peak_c"])) for e in events]
    assert got == EXPECTED_EVENTS[machine], f"{machine}: {got}"
