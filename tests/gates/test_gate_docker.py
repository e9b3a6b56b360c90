"""The gates on Docker, where sessions, users and copies differ from the local sandbox:
the probes must perturb the same files and the verdicts must agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain_arena.gates import gate_collection
from posttrain_arena.models.scripted import ScriptedModel

from .kit import BASE, EXISTS_VERIFIER, failing_script, make_package

pytestmark = pytest.mark.docker


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
        for probe in ev[name].probes:
            assert sorted(probe.perturbed) == ["/root/answer.txt", "/root/solve.log"]
    assert status["weak"]["probes"] == "fail"
    assert {p.kind: p.trial.reward for p in ev["weak"].probes if p.trial} == {
        "truncate": 1.0, "wrong": 1.0, "remove": 0.0}
    assert status["broken"]["build"] == "fail" and status["broken"]["oracle"] == "skipped"
