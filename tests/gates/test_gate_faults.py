"""The gate run on the local sandbox: every fault becomes evidence, and the run goes on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from posttrain_arena.gates import GateName, GatePolicy, TaskEvidence, gate_collection
from posttrain_arena.gates.run import GateReport
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.trial.runner import TrialRunner

from .kit import (
    BASE,
    CRASHING_VERIFIER,
    EXISTS_VERIFIER,
    FLAKY_VERIFIER,
    PARTIAL_EMPTY_VERIFIER,
    EveryOtherSeed,
    failing_script,
    make_package,
    solving_script,
)

pytestmark = pytest.mark.bwrap


def _gate(root: Path, runner: TrialRunner, model: object, tmp_path: Path, **kw: object
          ) -> GateReport:
    args: dict = {"model_spec": "test-model", "k": 2, "reruns": 2, "jobs": 2,
                  "records_root": tmp_path / "records", **kw}
    return gate_collection(root, runner, model, **args)  # type: ignore[arg-type]


def _status(ev: TaskEvidence) -> dict[str, str]:
    return {c.gate.value: c.status.value for c in ev.verdict.gates}


def _by_task(report: GateReport) -> dict[str, TaskEvidence]:
    return {e.task: e for e in report.evidence}


def test_each_fault_becomes_a_recorded_gate_failure_and_the_run_goes_on(
        tmp_path: Path, runners) -> None:
    root = tmp_path / "coll" / "envs"
    good = make_package(root, "a-good")
    make_package(root, "b-broken-build", dockerfile=f"FROM {BASE}\nRUN false\n")
    make_package(root, "c-hanging-oracle", solve="#!/bin/bash\nsleep 600\n", agent_timeout=3)
    make_package(root, "d-crashing-verifier", verifier=CRASHING_VERIFIER)
    make_package(root, "e-partial-empty", verifier=PARTIAL_EMPTY_VERIFIER)
    (root / "f-not-a-package").mkdir()
    (root / "f-not-a-package" / "task.md").write_text("no frontmatter\n")
    model = EveryOtherSeed(ScriptedModel(solving_script(good)), ScriptedModel(failing_script()))
    runner, _ = runners("local")
    report = _gate(root, runner, model, tmp_path, reruns=3)
    ev = _by_task(report)
    assert sorted(ev) == ["a-good", "b-broken-build", "c-hanging-oracle",
                          "d-crashing-verifier", "e-partial-empty", "f-not-a-package"]

    assert ev["a-good"].eligible, ev["a-good"].verdict.reasons
    assert set(_status(ev["a-good"]).values()) == {"pass"}
    assert ev["a-good"].flake_rate == 0.0 and len(ev["a-good"].oracle) == 3
    assert ev["a-good"].base is not None and ev["a-good"].base.solved == 1

    broken = ev["b-broken-build"]
    assert _status(broken) == {"build": "fail", "oracle": "skipped", "empty": "skipped",
                               "probes": "skipped", "learnable": "skipped"}
    assert "RUN" in broken.verdict.reasons[0] and not broken.oracle

    hang = ev["c-hanging-oracle"]
    assert _status(hang)["oracle"] == "fail"
    assert [t.outcome for t in hang.oracle] == ["agent_timeout"]  # not rerun three times
    assert "not rerun" in (hang.oracle_note or "")
    assert _status(hang)["empty"] == "pass"
    assert _status(hang)["probes"] == "skipped" and hang.base is None

    crash = ev["d-crashing-verifier"]
    assert _status(crash)["oracle"] == "fail"
    assert {t.outcome for t in crash.oracle} == {"verifier_error"} and len(crash.oracle) == 3
    assert "division by zero" in crash.verdict.reasons[0]

    partial = ev["e-partial-empty"]
    assert _status(partial)["empty"] == "fail" and partial.empty is not None
    assert partial.empty.reward == 0.25
    assert any("partial reward of 0.25" in r for r in partial.verdict.reasons)

    bad = ev["f-not-a-package"]
    assert bad.load_error and not bad.eligible
    assert set(_status(bad).values()) == {"skipped"}

    # one record per measured package, beside the trial records, read back as written
    files = sorted((tmp_path / "records" / "evidence").glob("*.json"))
    assert len(files) == 5
    stored = {TaskEvidence.model_validate(json.loads(f.read_text())).task for f in files}
    assert stored == set(ev) - {"f-not-a-package"}
    assert not report.ok and report.eligible == ["a-good"]


def test_probes_are_the_oracle_state_perturbed_and_a_weak_verifier_is_caught(
        tmp_path: Path, runners) -> None:
    # The verifier prints what it reads, so the record shows what each probe left.
    echo = ("import os, pathlib\n"
            "p = pathlib.Path('/root/answer.txt')\n"
            "print('ANSWER=' + repr(p.read_text() if p.exists() else None))\n")
    root = tmp_path / "envs"
    make_package(root, "strict", verifier=echo + _strict_tail(),
                 secret="value 41 of 7\nsecond line\n")
    make_package(root, "weak", verifier=echo + EXISTS_VERIFIER, secret="value 41 of 7\n")
    model = ScriptedModel(failing_script())
    runner, _ = runners("local")
    report = _gate(root, runner, model, tmp_path)
    ev = _by_task(report)
    probes = {p.kind: p for p in ev["strict"].probes if p.start == "oracle"}
    assert set(probes) == {"truncate", "wrong", "remove"}
    for p in probes.values():
        assert p.applicable and "/root/answer.txt" in p.perturbed
        assert "/root/input.txt" not in p.perturbed  # the oracle did not touch it
        assert p.trial is not None and p.trial.outcome == "scored" and p.trial.reward == 0.0
    seen = {kind: _printed_answer(tmp_path, p.trial.trial_id)
            for kind, p in probes.items() if p.trial is not None}
    full = "value 41 of 7\nsecond line\n"
    assert seen["truncate"] == repr(full[: len(full.encode()) // 2])
    assert seen["wrong"] == repr("value 42 of 8\nsecond line\n")
    assert seen["remove"] == "None"
    assert _status(ev["strict"])["probes"] == "pass"

    weak = ev["weak"]
    assert _status(weak)["probes"] == "fail"
    reason = next(r for r in weak.verdict.reasons if r.startswith("probes"))
    assert "truncate" in reason and "wrong" in reason and "remove" not in reason


def _strict_tail() -> str:
    return (
        "import pathlib as _p\n"
        "exp = (_p.Path(__file__).parent / 'expected.txt').read_text()\n"
        "ok = p.exists() and p.read_text() == exp\n"
        "out = _p.Path(os.environ['BENCHFLOW_REWARD_TEXT'])\n"
        "out.parent.mkdir(parents=True, exist_ok=True)\n"
        "out.write_text('1.0' if ok else '0.0')\n")


def _printed_answer(tmp_path: Path, trial_id: str) -> str:
    out = (tmp_path / "records" / trial_id / "verifier" / "stdout.txt").read_text()
    return next(line for line in out.splitlines() if line.startswith("ANSWER=")).split("=", 1)[1]


def test_an_oracle_whose_output_ends_without_a_newline_is_still_probed(
        tmp_path: Path, runners) -> None:
    root = tmp_path / "envs"
    make_package(root, "chatty", secret="42\n", solve=(
        "#!/bin/bash\necho 42 > \"$BENCHFLOW_WORKSPACE/answer.txt\"\nprintf 'no newline'\n"))
    runner, _ = runners("local")
    ev = _gate(root, runner, ScriptedModel(failing_script()), tmp_path).evidence[0]
    assert [(p.applicable, p.perturbed) for p in ev.probes if p.start == "oracle"] == [
        (True, ["/root/answer.txt"])] * 3
    assert _status(ev)["probes"] == "pass"


def test_a_probe_with_nothing_to_perturb_counts_for_nothing(tmp_path: Path, runners) -> None:
    root = tmp_path / "envs"
    make_package(root, "noop", solve="#!/bin/bash\ntrue\n", verifier=(
        "import os, pathlib\nout = pathlib.Path(os.environ['BENCHFLOW_REWARD_TEXT'])\n"
        "out.parent.mkdir(parents=True, exist_ok=True)\nout.write_text('1.0')\n"))
    runner, _ = runners("local")
    ev = _gate(root, runner, ScriptedModel(failing_script()), tmp_path).evidence[0]
    assert all(not p.applicable and not p.perturbed for p in ev.probes) and ev.probes
    st = _status(ev)
    assert st["probes"] == "pass" and st["empty"] == "fail"
    probes = next(c for c in ev.verdict.gates if c.gate is GateName.PROBES)
    assert "no probe applies" in (probes.reason or "")
    assert any("doing nothing scores 1.0" in r for r in ev.verdict.reasons)


def test_base_pass_at_k_marks_always_and_never_solved_tasks_not_learnable(
        tmp_path: Path, runners) -> None:
    root = tmp_path / "envs"
    always, sometimes = make_package(root, "always"), make_package(root, "sometimes")
    make_package(root, "never")
    solves = [("Task always:", solving_script(always)), ("Task sometimes:",
                                                          solving_script(sometimes))]
    model = EveryOtherSeed(
        ScriptedModel(failing_script(), scripts=solves),
        ScriptedModel(failing_script(), scripts=solves[:1]))
    runner, _ = runners("local")
    ev = _by_task(_gate(root, runner, model, tmp_path, k=4, reruns=1))
    assert [(ev[n].base.solved, ev[n].base.n) for n in ("always", "sometimes", "never")
            if ev[n].base is not None] == [(4, 4), (2, 4), (0, 4)]
    assert ev["sometimes"].eligible, ev["sometimes"].verdict.reasons
    for name, word in (("always", "always"), ("never", "never")):
        assert _status(ev[name])["learnable"] == "fail"
        assert any(r.startswith("learnable") and word in r for r in ev[name].verdict.reasons)
    assert ev["sometimes"].base is not None and ev["sometimes"].base.pass_at_k == 1.0
    assert ev["never"].base is not None and ev["never"].base.pass_at_k == 0.0


def test_a_verifier_that_disagrees_with_itself_has_its_flake_rate_recorded(
        tmp_path: Path, runners) -> None:
    # The verifier accepts the oracle's answer with probability 1/2; over 16 reruns the
    # chance that they all agree is 2 * 2**-16.
    root = tmp_path / "envs"
    make_package(root, "flaky", verifier=FLAKY_VERIFIER)
    runner, _ = runners("local")
    ev = _gate(root, runner, ScriptedModel(failing_script()), tmp_path, reruns=16).evidence[0]
    assert len(ev.oracle) == 16
    failed = sum(not t.passed for t in ev.oracle)
    assert 0 < failed < 16
    assert ev.flake_rate == round(failed / 16, 4)
    assert _status(ev)["oracle"] == "fail"
    assert any(f"flaky: {failed} of 16" in r for r in ev.verdict.reasons)


def test_k_of_one_cannot_tell_learnable_tasks_apart(tmp_path: Path, runners) -> None:
    root = tmp_path / "envs"
    make_package(root, "one")
    runner, _ = runners("local")
    with pytest.raises(ValueError, match="k of at least 2"):
        _gate(root, runner, ScriptedModel(failing_script()), tmp_path, k=1)
    # without the learnable gate, one sample is enough
    policy = GatePolicy(gates=[g for g in GateName if g is not GateName.LEARNABLE])
    ev = _gate(root, runner, ScriptedModel(failing_script()), tmp_path, k=1,
               policy=policy).evidence[0]
    assert ev.eligible and _status(ev)["learnable"] == "skipped"


def test_a_published_format_package_and_a_starting_kit_example_pass_their_gates(
        tmp_path: Path, runners) -> None:
    repo = Path(__file__).resolve().parents[2]
    root = tmp_path / "envs"
    root.mkdir()
    for src in (repo / "tests" / "fixtures" / "posttrain_format" / "sales-region-totals",
                repo / "starting-kit" / "examples" / "sudoku-solve"):
        shutil.copytree(src, root / src.name)
    runner, _ = runners("local")
    report = _gate(root, runner, ScriptedModel(failing_script()), tmp_path)
    for ev in report.evidence:
        assert _status(ev) == {"build": "pass", "oracle": "pass", "empty": "pass",
                               "probes": "pass", "learnable": "fail"}, ev.verdict
        assert all(p.applicable and p.perturbed for p in ev.probes if p.start == "oracle")
        # the cheats ran too, and none scored above the empty trial
        assert [p.trial for p in ev.probes if p.start == "empty" and p.trial]
