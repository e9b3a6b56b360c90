"""Tiny real task packages written into a temporary directory."""

from __future__ import annotations

from pathlib import Path

VERIFIER = """\
import json, os, pathlib
out = pathlib.Path("{workdir}/{filename}")
ok = out.is_file() and out.read_text().strip() == "{word}"
pathlib.Path("/logs/verifier").mkdir(parents=True, exist_ok=True)
pathlib.Path("/logs/verifier/reward.txt").write_text("1.0" if ok else "0.0")
"""


def write_task(root: Path, name: str, *, word: str = "hello", domain: str = "software-engineering",
               filename: str = "out.txt", timeout: float = 60, extra_agent: str = "") -> Path:
    """A task: write `word` to `filename` in the workspace. Oracle solves it."""
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "verifier").mkdir()
    (task / "oracle").mkdir()
    (task / "task.md").write_text(
        "---\nversion: \"1.0\"\nmetadata:\n  author_name: Test\n  author_email: t@example.com\n"
        f"  category: {domain}\n  difficulty: easy\nagent:\n  timeout_sec: {timeout}\n"
        f"{extra_agent}verifier:\n  timeout_sec: 60\n---\n\n## prompt\n\n"
        f"Write the word {word} into the file {filename} in the current directory.\n"
    )
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /root\n")
    (task / "verifier" / "verifier.py").write_text(
        VERIFIER.format(workdir="/root", filename=filename, word=word))
    (task / "oracle" / "solve.sh").write_text(f"#!/bin/bash\necho {word} > {filename}\n")
    return task
