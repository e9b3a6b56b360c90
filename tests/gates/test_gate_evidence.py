"""Evidence records: reused while package and harness are unchanged, measured again
when either changes or when the record could not be measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain_arena.gates import EvidenceStore, gate_collection, harness_version
from posttrain_arena.gates.run import GateReport
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.trial.runner import TrialRunner

from .kit import failing_script, make_package

pytestmark = pytest.mark.bwrap


def _gate(root: Path, runner: TrialRunner, tmp_path: Path, **kw: object) -> GateReport:
    args: dict = {"model_spec": "scripted-fail", "k": 2, "reruns": 2, "jobs": 2,
                  "records_root": tmp_path / "records", **kw}
    return gate_collection(root, runner, ScriptedModel(failing_script()), **args)


def test_an_unchanged_collection_is_not_measured_twice(tmp_path: Path, runners) -> None:
    root = tmp_path / "envs"
    for name in ("one", "two", "three"):
        make_package(root, name)
    runner, backend = runners("local")
    first = _gate(root, runner, tmp_path)
    assert first.trials_run > 0 and backend.starts >= first.trials_run and not first.reused

    runner2, backend2 = runners("local")  # a new process would have an empty image cache
    second = _gate(root, runner2, tmp_path)
    assert (second.trials_run, backend2.starts, backend2.builds) == (0, 0, 0)
    assert sorted(second.reused) == ["one", "three", "two"]
    assert [e.model_dump() for e in second.evidence] == [e.model_dump() for e in first.evidence]

    # a changed package is measured again, and only that one
    (root / "two" / "verifier" / "expected.txt").write_text("a new code 12\n")
    runner3, backend3 = runners("local")
    third = _gate(root, runner3, tmp_path)
    assert sorted(third.reused) == ["one", "three"] and third.trials_run > 0
    # fresh isolation: an agent and a verifier session per trial
    assert backend3.builds == 1 and backend3.starts == 2 * third.trials_run
    changed = next(e for e in third.evidence if e.task == "two")
    assert changed.task_checksum != next(e for e in first.evidence if e.task == "two").task_checksum
    assert not changed.eligible  # the oracle still writes the old code

    # a new harness version measures everything again
    runner4, backend4 = runners("local")
    fourth = _gate(root, runner4, tmp_path, harness=harness_version() + "-next")
    assert not fourth.reused and backend4.builds == 1  # the three share one environment
    assert backend4.starts >= 3 * (2 + 1)  # at least each package's oracle reruns + empty
    assert {e.harness_version for e in fourth.evidence} == {harness_version() + "-next"}

    # so does a different set-up (more oracle reruns)
    runner5, _ = runners("local")
    assert not _gate(root, runner5, tmp_path, reruns=3).reused


def test_a_record_that_could_not_be_measured_is_measured_again(tmp_path: Path,
                                                               runners) -> None:
    root = tmp_path / "envs"
    make_package(root, "only")
    runner, _ = runners("local")
    ev = _gate(root, runner, tmp_path).evidence[0]
    store = EvidenceStore(tmp_path / "records")
    path = store.path(ev.key)
    data = json.loads(path.read_text())
    data["verdict"]["gates"][1] = {"gate": "oracle", "status": "error",
                                   "reason": "sandbox failure: engine went away"}
    path.write_text(json.dumps(data))
    runner2, backend2 = runners("local")
    again = _gate(root, runner2, tmp_path)
    assert not again.reused and again.trials_run > 0 and backend2.starts > 0
    assert store.get(ev.key) is not None
    assert store.get(ev.key).verdict.gates[1].status.value != "error"  # type: ignore[union-attr]


def test_a_damaged_record_is_ignored_not_trusted(tmp_path: Path) -> None:
    store = EvidenceStore(tmp_path)
    store.dir.mkdir(parents=True)
    store.path("k1").write_text("{not json")
    store.path("k2").write_text(json.dumps({"key": "other"}))
    assert store.get("k1") is None and store.get("k2") is None and store.get("k3") is None
