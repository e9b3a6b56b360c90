"""The gates on Docker, where sessions, users and copies differ from the local sandbox:
the probes must perturb the same files and the verdicts must agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain_arena.gates import gate_collection
from posttrain_arena.gates.cheats import CHEATS
from posttrain_arena.gates.probes import PROBES
from posttrain_arena.models.scripted import ScriptedModel

from .kit import BASE, EXISTS_VERIFIER, failing_script, make_package

pytestmark = pytest.mark.docker

OUTPUTS = ["/root/answer.txt", "/root/solve.log"]  # what the kit's oracle writes


def test_gates_on_docker_catch_the_weak_verifier_and_pass_the_strict_one(
        tmp_path: Path, runners) -> None:
    root = tmp_path / "envs"
    make_package(root, "strict")
    make_package(root, "weak", verifier=EXISTS_VERIFIER)
    make_package(root, "shared", isolation="shared")
    make_package(root, "broken", dockerfile=f"FROM {BASE}\nRUN exit 3\n")
    runner, _ = runners("docker")
    report = gate_collection(root, runner, ScriptedModel(failing_script()),
                             model_spec="fail", k=2, reruns=2, jobs=2,
                             records_root=tmp_path / "records")
    ev = {e.task: e for e in report.evidence}
    status = {name: {c.gate.value: c.status.value for c in e.verdict.gates}
              for name, e in ev.items()}
    for name in ("strict", "shared"):
        assert status[name] == {"build": "pass", "oracle": "pass", "empty": "pass",
                                "probes": "pass", "learnable": "fail"}, ev[name].verdict
        probes = {p.kind: p for p in ev[name].probes}
        assert list(probes) == [k.name for k in (*PROBES, *CHEATS)]
        # each known-bad probe perturbs every file the oracle wrote, as on the local sandbox
        for kind in PROBES:
            assert sorted(probes[kind.name].perturbed) == OUTPUTS, probes[kind.name]
        # the cheats plant where those files go; the oracle writes no Python module
        for kind in ("reward-writers", "reward-links"):
            assert sorted(probes[kind].perturbed) == OUTPUTS, probes[kind]
        for kind in ("exit-0-modules", "skip-modules"):
            assert not probes[kind].applicable and probes[kind].perturbed == []
        assert "/root/conftest.py" in probes["pytest-config"].perturbed
        assert [p.trial.reward for p in probes.values() if p.trial] == [0.0] * 6
    assert status["weak"]["probes"] == "fail"
    assert {p.kind: p.trial.reward for p in ev["weak"].probes if p.trial} == {
        "truncate": 1.0, "wrong": 1.0, "remove": 0.0,  # any answer.txt passes
        "reward-writers": 1.0, "reward-links": 1.0, "pytest-config": 0.0}
    assert status["broken"]["build"] == "fail" and status["broken"]["oracle"] == "skipped"
