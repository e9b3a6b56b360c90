"""A purpose-made task package for the trial tests (written under tmp_path)."""

from __future__ import annotations

import secrets
from pathlib import Path

from posttrain_arena.task_format.package import TaskPackage, load_task

BASE = "posttrain-arena/python:bookworm"

VERIFIER_PY = '''\
import os
import pathlib

expected = (pathlib.Path(__file__).parent / "expected.txt").read_text().strip()
answer = pathlib.Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root")) / "answer.txt"
try:
    ok = answer.read_text().strip() == expected
except OSError:
    ok = False
out = pathlib.Path(os.environ.get("BENCHFLOW_REWARD_TEXT", "/logs/verifier/reward.txt"))
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("1.0\\n" if ok else "0.0\\n")
'''

TEST_OUTPUTS = '''\
import os
import pathlib


def test_answer_matches():
    expected = (pathlib.Path(__file__).parent / "expected.txt").read_text().strip()
    answer = pathlib.Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root")) / "answer.txt"
    assert answer.read_text().strip() == expected


def test_input_untouched():
    path = pathlib.Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root")) / "input.txt"
    assert path.read_text().strip() == "question"
'''

TASK_MD = """\
---
version: "1.0"
metadata:
  author_name: Trial tests
  author_email: trials@example.org
  category: software-engineering
  difficulty: easy
agent:
  timeout_sec: {agent_timeout}
verifier:
  timeout_sec: 60
  isolation: {isolation}
environment:
  build_timeout_sec: 120
  cpus: 1
  memory_mb: 512
  storage_mb: {storage_mb}
  pids_limit: {pids_limit}
  workdir: /root
---

# Echo the secret

## prompt

Write the secret into /root/answer.txt.
"""


def make_task(
    root: Path,
    *,
    verifier: str = "py",
    isolation: str = "fresh",
    agent_timeout: float = 60,
    storage_mb: int = 256,
    pids_limit: int = 64,
    dockerfile: str | None = None,
    verifier_py: str | None = None,
) -> TaskPackage:
    """A tiny task: the verifier holds a random secret that only the oracle knows;
    `verifier` is "py" (verifier.py), "pytest" (test_outputs.py) or "sh" (test.sh)."""
    root.mkdir(parents=True)
    secret = secrets.token_hex(16)
    (root / "task.md").write_text(TASK_MD.format(
        agent_timeout=agent_timeout, isolation=isolation, storage_mb=storage_mb,
        pids_limit=pids_limit))
    env = root / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text(dockerfile or (
        f"FROM {BASE}\nWORKDIR /root\nCOPY input.txt /root/input.txt\n"))
    (env / "input.txt").write_text("question\n")
    vdir = root / "verifier"
    vdir.mkdir()
    (vdir / "expected.txt").write_text(secret + "\n")
    if verifier == "py":
        (vdir / "verifier.py").write_text(verifier_py or VERIFIER_PY)
    else:
        (vdir / "test_outputs.py").write_text(TEST_OUTPUTS)
    if verifier == "sh":
        (vdir / "test.sh").write_text(
            '#!/bin/bash\n"$BENCHFLOW_PYTEST_BIN" --ctrf "$BENCHFLOW_CTRF_JSON" '
            '"$BENCHFLOW_VERIFIER_DIR/test_outputs.py" -rA\n'
            'if [ $? -eq 0 ]; then r=1.0; else r=0.0; fi\n'
            'echo "$r" > "$BENCHFLOW_REWARD_TEXT"\n'
        )
    (root / "oracle").mkdir()
    (root / "oracle" / "solve.sh").write_text(
        f"#!/bin/bash\nset -e\necho {secret} > \"$BENCHFLOW_WORKSPACE/answer.txt\"\n")
    return load_task(root)
