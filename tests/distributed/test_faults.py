"""Faults on a real multi-node Ray cluster (`ray.cluster_utils.Cluster`, one machine).

A worker node is killed while its trials run: with retries they finish elsewhere; with
none they end as infra_error carrying Ray's reason, never as a reward. A trial that
outlives its deadline is cancelled and its sandbox reaped. Whatever happens, the
driver's journal holds one entry per trial identity.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest

from agents.tasks import write_task
from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.distributed.ray_executor import RayExecutor
from posttrain_arena.evaluate.runner import evaluate
from posttrain_arena.evaluate.suite import Suite, load_suite
from posttrain_arena.sandbox.localfs import SESSION_PREFIX, sessions_dir
from posttrain_arena.trial.executor import TrialJob
from posttrain_arena.trial.journal import Journal

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

WAIT_SEC = 180.0  # generous: the machine is shared; only a broken executor gets here


def _suite(tmp_path: Path, n: int) -> tuple[Suite, Path]:
    """n tasks that all want 'alpha' in out.txt (distinct by their time limit, so their
    checksums differ), and an agent script that takes a while, then solves them."""
    for i in range(n):
        write_task(tmp_path / "suite", f"t{i}", word="alpha", timeout=300 + i)
    script = tmp_path / "slow.sh"
    script.write_text("sleep 6\necho alpha > out.txt\n")
    return load_suite(tmp_path / "suite"), script


def _descendants_named(pid: int, name: str) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == name]
    except psutil.NoSuchProcess:
        return []


def _raylet_pid(node: Any) -> int:
    from ray._private import ray_constants

    return int(node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid)


def _kill_when_busy(cluster: Any, node: Any) -> threading.Thread:
    """Remove `node` from the cluster as soon as a sandbox runs under its raylet."""
    raylet = _raylet_pid(node)
    seen: dict[str, bool] = {}

    def watch() -> None:
        end = time.monotonic() + WAIT_SEC
        while time.monotonic() < end:
            if _descendants_named(raylet, "bwrap"):
                seen["busy"] = True
                cluster.remove_node(node, allow_graceful=False)
                return
            time.sleep(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.seen = seen  # type: ignore[attr-defined]
    thread.start()
    return thread


def _journal_ids(path: Path) -> Counter[str]:
    return Counter(json.loads(line)["trial_id"] for line in path.read_text().splitlines())


@pytest.mark.parametrize("retries", [2, 0])
def test_a_node_killed_mid_evaluation(three_nodes: tuple[Any, list[Any]], tmp_path: Path,
                                      retries: int) -> None:
    cluster, (doomed, _survivor) = three_nodes
    suite, script = _suite(tmp_path, 4)
    ex = RayExecutor(backend="local", max_retries=retries)
    assert ex.slots == 4
    watcher = _kill_when_busy(cluster, doomed)
    journal = tmp_path / "journal.jsonl"
    try:
        report = evaluate(suite, lambda t: AgentSpec(kind="script", script=str(script)),
                          k=2, executor=ex, journal=Journal(journal))
    finally:
        ex.close()
    watcher.join(timeout=5)
    assert watcher.seen.get("busy"), "the node was never seen running a trial"  # type: ignore[attr-defined]
    outcomes = Counter(t.outcome for t in report.trials)
    assert len(report.trials) == 8
    # Never a reward for a lost trial: every scored trial solved its task, every other
    # one is an infrastructure error with Ray's reason and no reward.
    for t in report.trials:
        assert (t.outcome, t.reward) in {("scored", 1.0), ("infra_error", None)}, t
        if t.outcome == "infra_error":
            assert t.reason and t.reason.startswith("ray: "), t.reason
    if retries:
        assert outcomes == {"scored": 8}
    else:
        assert outcomes["infra_error"] >= 1 and outcomes["scored"] >= 1
    # One final entry per trial identity, written by the driver.
    assert _journal_ids(journal) == {t.trial_id: 1 for t in report.trials}


def test_a_trial_past_its_deadline_is_cancelled_and_reaped(local_ray: None,
                                                          tmp_path: Path) -> None:
    write_task(tmp_path / "suite", "hang", word="alpha", timeout=900)
    script = tmp_path / "hang.sh"
    script.write_text("sleep 613\n")
    task = load_suite(tmp_path / "suite").tasks[0]
    ex = RayExecutor(backend="local", hard_deadline_sec=30)
    out: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: out.setdefault(
        "r", ex.run(TrialJob(task, AgentSpec(kind="script", script=str(script))))))
    runner.start()
    try:
        end = time.monotonic() + WAIT_SEC
        while not _sleepers() and time.monotonic() < end:
            time.sleep(0.2)
        assert _sleepers(), "the agent's process never started"
        workers = {p.pid for s in _sleepers() for p in s.parents()
                   if p.name().startswith("ray::")}
        assert workers, "the agent's process does not run under a Ray worker"
        runner.join(timeout=WAIT_SEC)
        result = out["r"].result
    finally:
        ex.close()
    assert result.outcome == "infra_error" and result.reward is None
    assert result.reason.startswith("cancelled: the trial outlived its deadline")
    # The worker was killed and its sandbox is gone: no agent process, and no session
    # directory owned by it (other sessions may be live: the machine is shared).
    assert not [pid for pid in workers if psutil.pid_exists(pid)]
    assert not _sleepers()
    assert not [d for d in sessions_dir().iterdir() if d.name.startswith(SESSION_PREFIX)
                and _owner(d) in workers]


def _sleepers() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if cmd[:2] == ["sleep", "613"]:
            found.append(p)
    return found


def _owner(session: Path) -> int | None:
    """The pid that started a local session (its `owner` file), if readable."""
    try:
        return int((session / "owner").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
