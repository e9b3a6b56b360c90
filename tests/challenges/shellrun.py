"""Run a shell command in a micro task's seed files and score it with the task's own
verifier, in-process: the cheap harness the split and control tests replay thousands of
commands with (the real sandbox is exercised by test_micro_trials)."""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
from pathlib import Path


def reward_of(task_root: Path, command: str, work: Path) -> float:
    """Run `command` in a fresh copy of the task's seed files; the task's own verifier's
    reward for what it left behind."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    env_dir = task_root / "environment"
    for f in env_dir.iterdir():
        if f.name != "Dockerfile":
            shutil.copy(f, work / f.name)
    subprocess.run(["bash", "-c", command], cwd=work, capture_output=True, timeout=30,
                   check=False)
    out = work.parent / f"{work.name}.reward"
    env = {"BENCHFLOW_WORKSPACE": str(work), "BENCHFLOW_REWARD_TEXT": str(out),
           "BENCHFLOW_REWARD_JSON": str(out) + ".json"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        runpy.run_path(str(task_root / "verifier" / "verifier.py"), run_name="__main__")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return float(out.read_text())


def command_of(task_root: Path) -> str:
    """The one command of a micro task's oracle."""
    return (task_root / "oracle" / "solve.sh").read_text().split("\n", 1)[1].strip()
