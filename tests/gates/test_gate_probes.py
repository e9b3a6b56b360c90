"""Probes are the oracle's kept final state, perturbed on the host and verified once
each: no second oracle run, no agent phase, never a write through the state's links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from posttrain_arena.gates import gate_collection
from posttrain_arena.gates.probes import PROBES, make_probe, outputs
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.sandbox.base import Limits
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial.records import read_result
from posttrain_arena.trial.state import SavedState

from .kit import BASE, failing_script, make_package


@pytest.mark.bwrap
def test_each_probe_is_one_verification_with_no_agent_phase(tmp_path: Path, runners) -> None:
    root = tmp_path / "envs"
    make_package(root, "strict")
    runner, backend = runners("local")
    report = gate_collection(root, runner, ScriptedModel(failing_script()), model_spec="m",
                             k=2, reruns=1, jobs=1, records_root=tmp_path / "records")
    (ev,) = report.evidence
    assert [p.trial.reward for p in ev.probes if p.trial] == [0.0] * len(
        [p for p in ev.probes if p.trial])
    cheats = [p for p in ev.probes if p.start == "empty" and p.applicable]
    assert report.verifications_run == len(PROBES) + len(cheats)
    # oracle, empty and the k samples: an agent's session and a verifier's each; a probe
    # starts only its verifier's session (the oracle is not run again for it).
    assert report.trials_run == 1 + 1 + 2
    assert backend.starts == 2 * report.trials_run + report.verifications_run
    for p in ev.probes:
        if not p.applicable:  # a cheat with nothing to plant (no Python output) runs nothing
            assert p.start == "empty" and p.trial is None
            continue
        assert p.trial is not None
        result = read_result(tmp_path / "records" / p.trial.trial_id)
        assert result.agent == f"probe:{p.kind}" and "agent" not in result.timings


@pytest.mark.bwrap
def test_shared_isolation_probes_need_a_state_that_replays(tmp_path: Path, runners) -> None:
    # The verifier also reads /tmp/flag, outside the state roots: the oracle passes in its
    # own session, but its kept state verified elsewhere does not, so every probe would
    # be "rejected" for the wrong reason. That is reported, never a pass.
    verifier = ("import os, pathlib\n"
                "ok = pathlib.Path('/root/answer.txt').exists() and "
                "pathlib.Path('/tmp/flag').exists()\n"
                "out = pathlib.Path(os.environ['BENCHFLOW_REWARD_TEXT'])\n"
                "out.parent.mkdir(parents=True, exist_ok=True)\n"
                "out.write_text('1.0' if ok else '0.0')\n")
    root = tmp_path / "envs"
    make_package(root, "outside", isolation="shared", verifier=verifier, solve=(
        "#!/bin/bash\necho 42 > /root/answer.txt\ntouch /tmp/flag\n"))
    make_package(root, "inside", isolation="shared")
    runner, _ = runners("local")
    report = gate_collection(root, runner, ScriptedModel(failing_script()), model_spec="m",
                             k=2, reruns=1, jobs=2, records_root=tmp_path / "records")
    ev = {e.task: e for e in report.evidence}
    status = {n: {c.gate.value: (c.status.value, c.reason) for c in e.verdict.gates}
              for n, e in ev.items()}
    assert status["outside"]["oracle"][0] == "pass"
    assert ev["outside"].replay is not None and not ev["outside"].replay.passed
    assert status["outside"]["probes"][0] == "error"
    assert "state_paths" in (status["outside"]["probes"][1] or "")
    assert ev["inside"].replay is not None and ev["inside"].replay.passed
    assert status["inside"]["probes"][0] == "pass"


def test_a_probe_never_writes_through_the_kept_states_links(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "f.txt").write_text("host file 7\n")
    (victim / "g.txt").write_text("host file 8\n")
    host = tmp_path / "kept" / "root-0"
    host.mkdir(parents=True)
    (host / "answer.txt").write_text("answer 41\n")
    os.chmod(host / "answer.txt", 0o751)
    (host / "untouched.txt").write_text("input 1\n")
    os.symlink(victim / "g.txt", host / "link.txt")  # a link the oracle left
    os.symlink(victim, host / "sub")  # and a directory link
    saved = SavedState(hosts={"/root": host}, changed=[
        "/root/answer.txt", "/root/link.txt", "/root/sub", "/root/sub/f.txt"])
    assert [p for p, _ in outputs(saved)] == ["/root/answer.txt"]
    expected = {"truncate": "answe", "wrong": "answer 42\n", "remove": None}
    for kind in PROBES:
        probe = make_probe(saved, kind, tmp_path / "probes" / kind.name, limit=1 << 20)
        assert probe.perturbed == ["/root/answer.txt"]
        answer = probe.state.hosts["/root"] / "answer.txt"
        got = answer.read_text() if answer.exists() else None
        assert got == expected[kind.name]
        if got is not None:
            assert answer.stat().st_mode & 0o777 == 0o751
        assert (probe.state.hosts["/root"] / "untouched.txt").read_text() == "input 1\n"
        assert (probe.state.hosts["/root"] / "link.txt").is_symlink()
    assert (victim / "f.txt").read_text() == "host file 7\n"
    assert (victim / "g.txt").read_text() == "host file 8\n"
    assert (host / "answer.txt").read_text() == "answer 41\n"  # the kept state is intact


@pytest.mark.bwrap
def test_a_local_session_reports_what_its_processes_changed(tmp_path: Path, runners) -> None:
    pkg = make_package(tmp_path, "files", dockerfile=(
        f"FROM {BASE}\nWORKDIR /root\nCOPY input.txt /root/\nCOPY input.txt /root/same.txt\n"
        "COPY input.txt /root/back.txt\n"))
    runner, backend = runners("local")
    image = runner.image_for(load_task(pkg))
    session = backend.start(image, limits=Limits())
    try:
        assert session.changed_paths() == []
        # back.txt: changed, then its time stamps set back (its ctime still moves)
        result = session.exec("echo x > /root/new.txt && rm /root/input.txt && "
                              "echo changed > /root/back.txt && touch -r same.txt back.txt")
        assert result.exit_code == 0, result.stderr
        changed = session.changed_paths()
    finally:
        session.stop()
    assert {"/root/new.txt", "/root/input.txt", "/root/back.txt"} <= set(changed)
    assert "/root/same.txt" not in changed


@pytest.mark.bwrap
def test_a_multi_step_tasks_probes_are_its_final_state_judged_by_its_last_step(
        tmp_path: Path, runners) -> None:
    from tests.interop.harbor_kit import write_multistep_task

    root = tmp_path / "envs"
    write_multistep_task(root / "strict")
    lax = write_multistep_task(root / "lax")  # its last step accepts any log.txt
    (lax / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "if [ -s /app/log.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n")
    runner, _ = runners("local")
    report = gate_collection(root, runner, ScriptedModel(failing_script()), model_spec="m",
                             k=2, reruns=1, jobs=2, records_root=tmp_path / "records")
    ev = {e.task.split("/")[-1]: e for e in report.evidence}
    assert set(ev) == {"strict", "lax"}, [e.task for e in report.evidence]
    status = {n: {c.gate.value: (c.status.value, c.reason) for c in e.verdict.gates}
              for n, e in ev.items()}
    for name in ("strict", "lax"):
        assert status[name]["oracle"][0] == "pass", status[name]
        assert ev[name].replay is not None and ev[name].replay.passed, ev[name].replay
        # every step's changes are outputs: the file the two steps wrote
        assert {p.kind: p.perturbed for p in ev[name].probes if p.start == "oracle"} == {
            k.name: ["/app/log.txt"] for k in PROBES}
    assert [p.trial.reward for p in ev["strict"].probes
            if p.trial and p.start == "oracle"] == [0.0, 0.0, 0.0]
    assert status["strict"]["probes"][0] == "pass"
    lax_rewards = {p.kind: p.trial.reward for p in ev["lax"].probes
                   if p.trial and p.start == "oracle"}
    assert lax_rewards == {"truncate": 1.0, "wrong": 1.0, "remove": 0.0}
    assert status["lax"]["probes"][0] == "fail"
    assert "truncate" in (status["lax"]["probes"][1] or "")
