"""The offline `--ctrf FILE` pytest plugin that base images and the trial layer use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import posttrain_arena.sandbox.ctrf_plugin as plugin


def test_ctrf_report_lists_each_test(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "def test_ok():\n    assert True\n"
        "def test_bad():\n    assert 1 == 2\n"
        "@pytest.mark.skip(reason='no')\ndef test_skip():\n    pass\n"
    )
    report = tmp_path / "logs" / "ctrf.json"
    env = {**os.environ, "PYTHONPATH": str(Path(plugin.__file__).parent)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "ctrf_plugin",
            "-p",
            "no:cacheprovider",
            "--ctrf",
            str(report),
            "-q",
            "test_x.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(report.read_text())["results"]
    status = {t["name"].split("::")[-1]: t["status"] for t in doc["tests"]}
    assert status == {"test_ok": "passed", "test_bad": "failed", "test_skip": "skipped"}
    assert doc["summary"]["tests"] == 3 and doc["summary"]["failed"] == 1
    assert doc["tool"]["name"] == "pytest"
