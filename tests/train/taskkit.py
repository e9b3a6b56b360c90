"""Tiny task packages for the train tests: write a given word into a file."""

from __future__ import annotations

from pathlib import Path

VERIFIER_PY = '''\
import os
import pathlib

expected = (pathlib.Path(__file__).parent / "expected.txt").read_text().strip()
answer = pathlib.Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root")) / "{out}"
try:
    ok = answer.read_text().strip() == expected
except OSError:
    ok = False
out = pathlib.Path(os.environ.get("BENCHFLOW_REWARD_TEXT", "/logs/verifier/reward.txt"))
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("1.0\\n" if ok else "0.0\\n")
'''

TASK_MD = """\
---
version: "1.0"
metadata:
  author_name: Train tests
  author_email: train@example.org
  category: {domain}
  difficulty: easy
agent:
  timeout_sec: 60
verifier:
  timeout_sec: 60
environment:
  build_timeout_sec: 120
  cpus: 1
  memory_mb: 512
  storage_mb: 256
  workdir: /root
---

# {title}

## prompt

{prompt}
"""


def make_word_task(root: Path, *, word: str, out: str = "answer.txt",
                   domain: str = "software-engineering", prompt: str | None = None,
                   title: str = "Write a word") -> Path:
    """A task whose verifier wants `word` in `out`; the oracle echoes it there."""
    root.mkdir(parents=True)
    text = prompt or f"Write the word {word} into the file {out} in the working directory."
    (root / "task.md").write_text(TASK_MD.format(domain=domain, title=title, prompt=text))
    env = root / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text("FROM posttrain-arena/python:bookworm\nWORKDIR /root\n")
    vdir = root / "verifier"
    vdir.mkdir()
    (vdir / "expected.txt").write_text(word + "\n")
    (vdir / "verifier.py").write_text(VERIFIER_PY.replace("{out}", out))
    (root / "oracle").mkdir()
    (root / "oracle" / "solve.sh").write_text(f"#!/bin/bash\necho {word} > {out}\n")
    return root
