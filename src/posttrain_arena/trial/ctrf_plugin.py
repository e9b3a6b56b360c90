"""A tiny pytest plugin that writes a CTRF JSON report: `pytest --ctrf FILE`.

It stands in for the `pytest-json-ctrf` plugin that existing verifiers' test.sh expects,
so that verifiers run offline. The harness copies this file into the verifier's session
and loads it explicitly; it imports only the standard library and pytest.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any

_KEY = "arena_ctrf_tests"


def pytest_addoption(parser: Any) -> None:
    """Register `--ctrf FILE` (unless another CTRF plugin already did)."""
    with contextlib.suppress(ValueError):  # another plugin owns --ctrf and writes it
        parser.addoption(
            "--ctrf", action="store", default=None, metavar="FILE",
            help="write a CTRF JSON report of the test results to FILE",
        )


def pytest_configure(config: Any) -> None:
    """Start collecting results when `--ctrf` was given."""
    config.stash_ctrf = {"start": int(time.time() * 1000), "tests": {}}


def pytest_runtest_logreport(report: Any) -> None:
    """Fold setup/call/teardown reports into one status per test."""
    store = _store(None)
    if store is None:
        return
    tests: dict[str, dict[str, Any]] = store["tests"]
    entry = tests.setdefault(
        report.nodeid, {"name": report.nodeid, "status": "passed", "duration": 0}
    )
    entry["duration"] += int(getattr(report, "duration", 0.0) * 1000)
    if report.when == "call" and report.outcome == "passed" and entry["status"] == "passed":
        return
    if report.outcome == "skipped" and entry["status"] == "passed":
        entry["status"] = "skipped"
    elif report.outcome == "failed":
        entry["status"] = "failed"
        text = getattr(report, "longreprtext", "") or ""
        entry["message"] = text[-2000:]


_CONFIG: list[Any] = []


def pytest_sessionstart(session: Any) -> None:
    """Remember the config: logreport hooks on old pytests carry no config."""
    _CONFIG[:] = [session.config]


def _store(config: Any) -> dict[str, Any] | None:
    config = config or (_CONFIG[0] if _CONFIG else None)
    if config is None:
        return None
    store = getattr(config, "stash_ctrf", None)
    return store if isinstance(store, dict) else None


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Write the report."""
    config = session.config
    try:
        path = config.getoption("ctrf")
    except ValueError:
        return
    store = _store(config)
    if not path or store is None:
        return
    tests = list(store["tests"].values())
    summary = {
        "tests": len(tests),
        "passed": sum(t["status"] == "passed" for t in tests),
        "failed": sum(t["status"] == "failed" for t in tests),
        "skipped": sum(t["status"] == "skipped" for t in tests),
        "pending": 0,
        "other": 0,
        "start": store["start"],
        "stop": int(time.time() * 1000),
    }
    report = {"results": {"tool": {"name": "pytest"}, "summary": summary, "tests": tests}}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1)
