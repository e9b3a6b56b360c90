"""Small task packages for the gate tests, written under tmp_path, and base models."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrain_arena.models.base import ChatResponse, SamplingParams
from posttrain_arena.models.scripted import ScriptedModel

BASE = "posttrain-arena/python:bookworm"

EXACT_VERIFIER = '''\
import os, pathlib
expected = (pathlib.Path(__file__).parent / "expected.txt").read_text()
answer = pathlib.Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root")) / "answer.txt"
try:
    ok = answer.read_text() == expected
except OSError:
    ok = False
out = pathlib.Path(os.environ["BENCHFLOW_REWARD_TEXT"])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("1.0\\n" if ok else "0.0\\n")
'''

EXISTS_VERIFIER = '''\
import os, pathlib
answer = pathlib.Path(os.environ.get("BENCHFLOW_WORKSPACE", "/root")) / "answer.txt"
out = pathlib.Path(os.environ["BENCHFLOW_REWARD_TEXT"])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("1.0\\n" if answer.exists() else "0.0\\n")
'''
"""Accepts any answer.txt at all: the probes must catch it."""

PARTIAL_EMPTY_VERIFIER = EXACT_VERIFIER.replace('"0.0\\n"', '"0.25\\n"')
"""Gives a quarter of the reward for anything, doing nothing included."""

CRASHING_VERIFIER = "raise SystemExit('verifier bug: division by zero')\n"

FLAKY_VERIFIER = EXACT_VERIFIER.replace(
    "    ok = answer.read_text() == expected",
    "    ok = answer.read_text() == expected and os.urandom(1)[0] % 2 == 0")
"""Agrees with itself only half the time."""

TASK_MD = """\
---
version: "1.0"
metadata:
  author_name: Gate tests
  author_email: gates@example.org
  category: software-engineering
  difficulty: easy
agent:
  timeout_sec: {agent_timeout}
verifier:
  timeout_sec: 60
  isolation: {isolation}
environment:
  build_timeout_sec: {build_timeout}
  cpus: 1
  memory_mb: 512
  storage_mb: 256
  workdir: /root
---

# Write the code

## prompt

Task {name}: write the secret code into /root/answer.txt.
"""


def make_package(
    root: Path, name: str, *, verifier: str = EXACT_VERIFIER, solve: str | None = None,
    dockerfile: str | None = None, agent_timeout: float = 60, build_timeout: float = 120,
    isolation: str = "fresh", secret: str | None = None,
) -> Path:
    """One package at root/name: the verifier holds a code with digits and letters that
    only the oracle writes (unless `solve` says otherwise)."""
    pkg = root / name
    pkg.mkdir(parents=True)
    code = secret or f"code-{secrets.randbelow(10**6):06d}-{secrets.token_hex(4)}\nline two\n"
    (pkg / "task.md").write_text(TASK_MD.format(
        agent_timeout=agent_timeout, build_timeout=build_timeout, isolation=isolation,
        name=name))
    env = pkg / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text(dockerfile or
                                    f"FROM {BASE}\nWORKDIR /root\nCOPY input.txt /root/\n")
    (env / "input.txt").write_text("question\n")
    vdir = pkg / "verifier"
    vdir.mkdir()
    (vdir / "expected.txt").write_text(code)
    (vdir / "verifier.py").write_text(verifier)
    (pkg / "oracle").mkdir()
    (pkg / "oracle" / "solve.sh").write_text(solve if solve is not None else (
        "#!/bin/bash\nset -e\ncat > \"$BENCHFLOW_WORKSPACE/answer.txt\" <<'EOF'\n"
        f"{code}EOF\necho solved > \"$BENCHFLOW_WORKSPACE/solve.log\"\n"))
    return pkg


def solving_script(pkg: Path) -> list[dict[str, Any]]:
    """Scripted responses that solve package `pkg` (they know its secret)."""
    code = (pkg / "verifier" / "expected.txt").read_text()
    return [{"bash": f"printf %s {_quote(code)} > /root/answer.txt"}, {"submit": True}]


def failing_script() -> list[dict[str, Any]]:
    return [{"bash": "echo wrong > /root/answer.txt"}, {"submit": True}]


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


class EveryOtherSeed:
    """A base model that solves a task on even trial seeds only: the scripted `solver`
    answers then, the scripted `failer` otherwise (the seed is recovered from the
    sampling seed the model agent derives from the trial's seed and the turn)."""

    context_limit = None  # scripts have no context window

    def __init__(self, solver: ScriptedModel, failer: ScriptedModel) -> None:
        self.name = "every-other-seed"
        self._solver, self._failer = solver, failer

    def chat(self, messages: Sequence[dict[str, Any]], *, tools: Any = None,
             sampling: SamplingParams | None = None, prefix_ids: Any = None) -> ChatResponse:
        assert sampling is not None and sampling.seed is not None
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        trial_seed = (sampling.seed - turn) // 1_000_003
        pick = self._solver if trial_seed % 2 == 0 else self._failer
        return pick.chat(messages, tools=tools, sampling=sampling, prefix_ids=prefix_ids)
