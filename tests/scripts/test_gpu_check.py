"""scripts/gpu_check.py's CPU smoke, as its docstring documents it: the GPU check cannot
break silently again between the rare runs on a GPU machine (it once pretrained its
310M-parameter base on the CPU for hours before the check began)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.bwrap]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"


def test_the_cpu_smoke_runs_the_pipeline_and_prints_both_throughputs(
        tmp_path: Path, arena_cache_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--layers", "2", "--hidden", "64",
         "--sft-epochs", "1", "--grpo-steps", "1", "--work", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=1200, check=False)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "gpu-check: OK" in out
    pipeline = re.search(r"evaluation tokens/s ([\d.]+)", out)
    bare = re.search(r"bare generate tokens/s ([\d.]+) .* reaches ([\d.]+) of it", out)
    assert pipeline and bare, out
    assert float(pipeline.group(1)) > 0 and float(bare.group(1)) > 0
    # Not pretrained: the check measures throughput on a random base of its own size.
    report = json.loads((tmp_path / "work" / "model" / "pretraining.json").read_text())
    assert report["episodes"] == 0
