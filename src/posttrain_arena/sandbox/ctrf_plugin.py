"""A pytest plugin that adds `--ctrf FILE`: a CTRF JSON report of the test run.

Existing PostTrain-style verifiers run `pytest --ctrf /logs/verifier/ctrf.json` (with the
`pytest-json-ctrf` package downloaded at verify time). This module gives the same option
offline. It is standalone on purpose (stdlib and pytest only, imports nothing of ours) so
it can be copied into an image (`arena images bootstrap` installs it, with a `pytest11`
entry point, into `posttrain-arena/python:bookworm`) or loaded with
`python3 -m pytest -p ctrf_plugin` after putting this file's directory on PYTHONPATH.

CTRF: https://ctrf.io — {"results": {"tool", "summary", "tests"}}.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any

import pytest

_KEY = "_arena_ctrf_reporter"


def pytest_addoption(parser: Any) -> None:
    """Register `--ctrf FILE` unless another CTRF plugin already did."""
    group = parser.getgroup("ctrf", "CTRF JSON report")
    with contextlib.suppress(ValueError):  # already registered by pytest-json-ctrf
        group.addoption(
            "--ctrf",
            action="store",
            dest="ctrf",
            metavar="FILE",
            default=None,
            help="Write a CTRF JSON report of the run to FILE.",
        )


def pytest_configure(config: Any) -> None:
    """Attach the reporter when `--ctrf` was given."""
    path = config.getoption("ctrf", default=None)
    if path and not hasattr(config, _KEY):
        reporter = _Reporter(str(path))
        setattr(config, _KEY, reporter)
        config.pluginmanager.register(reporter, "arena-ctrf-reporter")


class _Reporter:
    def __init__(self, path: str) -> None:
        self.path = path
        self.start_ms = int(time.time() * 1000)
        self.tests: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        entry = self.tests.setdefault(
            report.nodeid,
            {"name": report.nodeid, "status": "passed", "duration": 0},
        )
        entry["duration"] += int(getattr(report, "duration", 0.0) * 1000)
        if report.when == "call" or report.outcome != "passed":
            if report.skipped:
                status = "skipped"
            elif report.failed:
                status = "failed"
            else:
                status = "passed" if report.when == "call" else entry["status"]
            if entry["status"] != "failed":  # a failed setup/teardown wins
                entry["status"] = status
            if report.failed or report.skipped:
                text = getattr(report, "longreprtext", "") or ""
                entry.setdefault("message", text.strip().splitlines()[-1] if text else "")
                entry.setdefault("trace", text[-8000:])
        if hasattr(report, "wasxfail"):
            entry["status"] = "skipped" if report.skipped else "passed"

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            text = getattr(report, "longreprtext", "") or ""
            self.tests[report.nodeid or "collection"] = {
                "name": report.nodeid or "collection",
                "status": "failed",
                "duration": 0,
                "message": "collection error",
                "trace": text[-8000:],
            }

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        tests = list(self.tests.values())
        summary = {
            "tests": len(tests),
            "passed": sum(t["status"] == "passed" for t in tests),
            "failed": sum(t["status"] == "failed" for t in tests),
            "skipped": sum(t["status"] == "skipped" for t in tests),
            "pending": 0,
            "other": sum(t["status"] not in ("passed", "failed", "skipped") for t in tests),
            "start": self.start_ms,
            "stop": int(time.time() * 1000),
        }
        doc = {
            "results": {
                "tool": {"name": "pytest", "version": pytest.__version__},
                "summary": summary,
                "tests": tests,
                "environment": {"exitStatus": int(exitstatus)},
            }
        }
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        with open(self.path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
