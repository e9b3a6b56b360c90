"""The Ray executor gives the thread executor's results for the same jobs and seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.tasks import write_task
from posttrain_arena.agents.model import AgentSettings
from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.distributed.ray_executor import RayExecutor
from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.evaluate.runner import evaluate
from posttrain_arena.evaluate.suite import load_suite
from posttrain_arena.trial.executor import ExecutorError, ThreadExecutor, TrialJob
from posttrain_arena.trial.journal import Journal
from posttrain_arena.trial.runner import TrialRunner

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

SCRIPT = """\
scripts:
  - match: 'alpha'
    responses: [{bash: 'echo alpha > out.txt'}, {submit: true}]
default: [{bash: 'echo wrong > out.txt'}, {submit: true}]
"""


def _suite(tmp_path: Path) -> Path:
    for name, word, domain in [("a", "alpha", "software-engineering"),
                               ("b", "beta", "cybersecurity"),
                               ("c", "gamma", "cybersecurity")]:
        write_task(tmp_path / "suite", name, word=word, domain=domain)
    (tmp_path / "script.yaml").write_text(SCRIPT)
    return tmp_path


def _facts(report: EvalReport) -> list[tuple[object, ...]]:
    """What must not depend on where a trial ran (not timings, paths or start times)."""
    return sorted((t.trial_id, t.task_name, t.seed, t.outcome, t.reward, t.passed,
                   t.prompt_tokens, t.completion_tokens) for t in report.trials)


@pytest.mark.usefixtures("local_ray")
def test_ray_matches_thread_executor(tmp_path: Path) -> None:
    root = _suite(tmp_path)
    suite = load_suite(root / "suite")
    spec = AgentSpec(kind="model", model=f"scripted:{root / 'script.yaml'}",
                     name="model:scripted", settings=AgentSettings(max_turns=4))
    factory = lambda task: spec  # noqa: E731
    thread = evaluate(suite, factory, k=2, executor=ThreadExecutor(TrialRunner("local"),
                                                                    slots=2))
    ray_exec = RayExecutor(backend="local")
    try:
        assert ray_exec.slots == 2
        remote = evaluate(suite, factory, k=2, executor=ray_exec)
    finally:
        ray_exec.close()
    assert _facts(remote) == _facts(thread)
    # Not vacuous: both passes and failures, tokens counted, every trial ran remotely.
    assert {t.passed for t in remote.trials} == {True, False}
    assert remote.overall.pass_rate == pytest.approx(1 / 3)
    assert remote.completion_tokens == thread.completion_tokens > 0


@pytest.mark.usefixtures("local_ray")
def test_ray_journal_is_written_by_the_driver_and_resumes(tmp_path: Path) -> None:
    root = _suite(tmp_path)
    suite = load_suite(root / "suite")
    journal_path = tmp_path / "j.jsonl"
    ex = RayExecutor(backend="local")
    try:
        first = evaluate(suite, lambda t: AgentSpec(kind="oracle"), k=1, executor=ex,
                         journal=Journal(journal_path))
        lines = journal_path.read_text().splitlines()
        assert len(lines) == 3 and first.overall.pass_rate == 1.0
        # A resumed evaluation reads every trial back: nothing new is run or written.
        again = evaluate(suite, lambda t: AgentSpec(kind="oracle"), k=1, executor=ex,
                         journal=Journal(journal_path))
    finally:
        ex.close()
    assert journal_path.read_text().splitlines() == lines
    assert _facts(again) == _facts(first)


@pytest.mark.usefixtures("local_ray")
def test_a_captured_run_comes_back_from_the_node(tmp_path: Path) -> None:
    """The teacher and GRPO learn from the agent's transcript: it must travel back."""
    root = _suite(tmp_path)
    task = load_suite(root / "suite").tasks[0]
    job = TrialJob(task, AgentSpec(kind="oracle-teacher"), capture=True)
    ex = RayExecutor(backend="local")
    try:
        remote = ex.run(job)
        plain = ex.run(TrialJob(task, AgentSpec(kind="oracle-teacher"), seed=1))
    finally:
        ex.close()
    local = ThreadExecutor(TrialRunner("local")).run(job)
    assert remote.result.passed and remote.node is not None
    assert remote.run is not None and local.run is not None
    # The same conversation (messages also carry the time left, which differs).
    assert [(m.role, m.tool_calls) for m in remote.run.transcript.messages] == \
        [(m.role, m.tool_calls) for m in local.run.transcript.messages]
    assert remote.run.transcript.messages[-1].tool_calls  # ends with the submit call
    assert plain.run is None  # nothing is shipped back unless asked for


@pytest.mark.usefixtures("local_ray")
def test_live_agents_are_refused_not_run(tmp_path: Path) -> None:
    from posttrain_arena.agents.oracle import OracleAgent

    root = _suite(tmp_path)
    suite = load_suite(root / "suite")
    ex = RayExecutor(backend="local")
    try:
        with pytest.raises(ExecutorError, match="live agent"):
            ex.run(TrialJob(suite.tasks[0], OracleAgent()))
        with pytest.raises(ExecutorError, match="live agent"):
            evaluate(suite, lambda t: OracleAgent(), executor=ex)
    finally:
        ex.close()


def test_a_cluster_without_sandbox_slots_is_refused(arena_cache_dir: Path) -> None:
    import ray

    ray.init(address="local", num_cpus=1, object_store_memory=100 * 1024 * 1024,
             include_dashboard=False,
             log_to_driver=False)
    try:
        with pytest.raises(ExecutorError, match="arena_sandbox_slot"):
            RayExecutor()
    finally:
        ray.shutdown()


def test_arena_eval_with_the_ray_executor(tmp_path: Path, arena_cache_dir: Path) -> None:
    """`arena eval --executor ray` (a one-machine Ray of --jobs slots, stopped after)
    writes the report the thread executor writes."""
    from typer.testing import CliRunner

    from posttrain_arena.cli.main import app

    root = _suite(tmp_path)
    reports = {}
    for executor in ("thread", "ray"):
        out = tmp_path / f"{executor}.json"
        res = CliRunner().invoke(app, [
            "eval", str(root / "suite"), "-m", f"scripted:{root / 'script.yaml'}", "-k", "2",
            "-j", "2", "--backend", "local", "-o", str(out), "--executor", executor,
            "--json"])
        assert res.exit_code == 0, res.output
        reports[executor] = EvalReport.load(out)
    assert _facts(reports["ray"]) == _facts(reports["thread"])
    assert reports["ray"].overall.pass_rate == pytest.approx(1 / 3)
    import ray

    assert not ray.is_initialized()  # the command stopped the Ray it started
