"""Evidence records are keyed on what produced them: the code (its content hash, not the
version string), the model and the settings its samples run under, besides the package
and the set-up that test_gate_evidence.py covers."""

from __future__ import annotations

from pathlib import Path

import pytest

import posttrain_arena
from posttrain_arena.agents.model import AgentSettings
from posttrain_arena.gates import evidence, gate_collection, harness_version
from posttrain_arena.gates.run import GateReport
from posttrain_arena.models.scripted import ScriptedModel

from .kit import failing_script, make_package

pytestmark = pytest.mark.bwrap


def test_the_harness_version_is_the_code_not_the_version_string(
        monkeypatch: pytest.MonkeyPatch) -> None:
    before = harness_version()
    assert before.startswith(posttrain_arena.__version__ + "+code.")
    monkeypatch.setattr(evidence, "code_hash", lambda: "sha256:" + "1" * 64)
    assert harness_version() != before  # same version string, other code


def test_a_change_of_code_model_or_agent_settings_measures_again(
        tmp_path: Path, runners, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "envs"
    make_package(root, "only")

    def gate(model_spec: str = "scripted-fail",
             settings: AgentSettings | None = None) -> GateReport:
        runner, _ = runners("local")
        return gate_collection(root, runner, ScriptedModel(failing_script()),
                               model_spec=model_spec, k=2, reruns=1, jobs=2,
                               records_root=tmp_path / "records", settings=settings)

    first = gate()
    assert first.trials_run > 0 and not first.reused
    assert gate().reused == ["only"]  # nothing changed: no trial runs
    assert not gate(model_spec="scripted-other").reused
    assert not gate(settings=AgentSettings(max_turns=3)).reused
    assert gate().reused == ["only"]
    monkeypatch.setattr(evidence, "code_hash", lambda: "sha256:" + "2" * 64)
    changed = gate()  # the code changed, the version string did not
    assert not changed.reused and changed.trials_run > 0
    assert changed.harness_version != first.harness_version
