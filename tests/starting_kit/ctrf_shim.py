"""A minimal pytest plugin accepting `--ctrf FILE`, standing in for pytest-json-ctrf.

Used only by the host replay tests to run verifier/test.sh as the harness does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_results: list[dict[str, Any]] = []


def pytest_addoption(parser: Any) -> None:
    parser.addoption("--ctrf", default=None, help="write a CTRF JSON report to this file")


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _results.append({"name": report.nodeid, "status": report.outcome,
                         "duration": int(report.duration * 1000)})


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    target = session.config.getoption("--ctrf")
    if not target:
        return
    summary = {"tests": len(_results),
               "passed": sum(r["status"] == "passed" for r in _results),
               "failed": sum(r["status"] == "failed" for r in _results)}
    report = {"results": {"tool": {"name": "pytest"}, "summary": summary, "tests": _results}}
    Path(target).write_text(json.dumps(report, indent=2))
