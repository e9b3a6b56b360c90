"""Cheating probes (issue 24, item 7): the empty trial's state with what an agent would
plant to be scored without solving the task. A verifier that scores any of them above
the empty trial makes its task not eligible, with the probe's name in the evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain_arena.gates import gate_collection
from posttrain_arena.gates.cheats import CHEATS, make_cheat
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.trial.state import SavedState

from .kit import failing_script, make_package

# Gameable: it runs the agent's program and trusts its exit status.
EXIT_STATUS_VERIFIER = '''\
import os, pathlib, subprocess, sys
ws = pathlib.Path(os.environ["BENCHFLOW_WORKSPACE"])
expected = (pathlib.Path(__file__).parent / "expected.txt").read_text()
prog = ws / "solution.py"
ok = prog.exists() and subprocess.run(
    [sys.executable, str(prog), expected], cwd=str(ws)).returncode == 0
out = pathlib.Path(os.environ["BENCHFLOW_REWARD_TEXT"])
out.write_text("1.0\\n" if ok else "0.0\\n")
'''
SOLVE_PY = ("#!/bin/bash\ncat > \"$BENCHFLOW_WORKSPACE/solution.py\" <<'EOF'\n"
            "import sys\nsys.exit(0 if sys.argv[1] else 1)\nEOF\n")


def _kind(name: str):  # type: ignore[no-untyped-def]
    return next(k for k in CHEATS if k.name == name)


def test_cheats_plant_at_the_oracles_outputs_in_the_empty_state(tmp_path: Path) -> None:
    empty_root, oracle_root = tmp_path / "empty", tmp_path / "oracle"
    empty_root.mkdir()
    (empty_root / "input.txt").write_text("question\n")
    (oracle_root / "pkg").mkdir(parents=True)
    (oracle_root / "pkg" / "solution.py").write_text("print(1)\n")
    (oracle_root / "answer.txt").write_text("42\n")
    empty = SavedState(hosts={"/root": empty_root}, changed=[])
    oracle = SavedState(hosts={"/root": oracle_root},
                        changed=["/root/pkg/solution.py", "/root/answer.txt"])
    exits = make_cheat(empty, oracle, _kind("exit-0-modules"), tmp_path / "p1")
    assert exits.perturbed == ["/root/pkg/solution.py"]
    planted = exits.state.hosts["/root"] / "pkg" / "solution.py"
    assert "os._exit(0)" in planted.read_text()
    assert (exits.state.hosts["/root"] / "input.txt").read_text() == "question\n"
    assert not (exits.state.hosts["/root"] / "answer.txt").exists()  # the empty state
    writers = make_cheat(empty, oracle, _kind("reward-writers"), tmp_path / "p2")
    assert writers.perturbed == ["/root/answer.txt", "/root/pkg/solution.py"]
    config = make_cheat(empty, oracle, _kind("pytest-config"), tmp_path / "p3")
    assert "/root/conftest.py" in config.perturbed
    assert "/root/pkg/pytest.ini" in config.perturbed
    # a directory of the empty state that is a link is never planted through
    (tmp_path / "outside").mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "pkg").symlink_to(tmp_path / "outside")
    through = make_cheat(SavedState(hosts={"/root": linked}, changed=[]), oracle,
                         _kind("exit-0-modules"), tmp_path / "p4")
    assert through.perturbed == [] and not list((tmp_path / "outside").iterdir())


@pytest.mark.bwrap
def test_a_verifier_trusting_an_exit_status_is_not_eligible(tmp_path: Path, runners) -> None:
    root = tmp_path / "envs"
    make_package(root, "exit-status", verifier=EXIT_STATUS_VERIFIER, solve=SOLVE_PY)
    make_package(root, "strict")
    runner, _ = runners("local")
    report = gate_collection(root, runner, ScriptedModel(failing_script()), model_spec="m",
                             k=2, reruns=1, jobs=1, records_root=tmp_path / "records")
    ev = {e.task: e for e in report.evidence}
    probes = {c.gate.value: c for c in ev["exit-status"].verdict.gates}["probes"]
    assert probes.status.value == "fail" and "exit-0-modules" in (probes.reason or "")
    strict = {c.gate.value: c for c in ev["strict"].verdict.gates}["probes"]
    assert strict.status.value == "pass", strict.reason
    ran = [p for p in ev["strict"].probes if p.start == "empty" and p.trial is not None]
    assert {p.kind for p in ran} >= {"reward-writers", "reward-links", "pytest-config"}
