"""The trial lifecycle on both backends: outcomes, records, journal resume."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.agents.script import ScriptAgent
from posttrain_arena.task_format.package import TaskPackage, load_task
from posttrain_arena.trial.journal import Journal
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner, trial_id

from .taskkit import make_task

Factory = Callable[..., TrialRunner]


@pytest.mark.parametrize("verifier", ["py", "pytest", "sh"])
@pytest.mark.parametrize("isolation", ["fresh", "shared"])
def test_oracle_scores_one_and_empty_zero(
    backend_name: str, runner_factory: Factory, tmp_path: Path, verifier: str, isolation: str
) -> None:
    task = make_task(tmp_path / "task", verifier=verifier, isolation=isolation)
    runner = runner_factory(backend_name)
    oracle = runner.run(task, OracleAgent())
    assert oracle.outcome is Outcome.SCORED, oracle.reason
    assert oracle.reward == 1.0
    empty = runner.run(task, EmptyAgent())
    assert empty.outcome is Outcome.SCORED, empty.reason
    assert empty.reward == 0.0
    if verifier != "py":
        assert {d.status for d in oracle.details} == {"passed"}
        assert any(d.status == "failed" for d in empty.details)
    assert oracle.isolation == isolation and oracle.backend == backend_name


def test_records_hold_config_result_transcript_and_verifier_output(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    task = make_task(tmp_path / "task", verifier="pytest")
    result = runner_factory(backend_name).run(task, OracleAgent(), seed=3)
    assert result.record_dir is not None
    record = Path(result.record_dir)
    assert record.name == trial_id(task.checksum, "oracle", 3) == result.trial_id
    config = json.loads((record / "config.json").read_text())
    assert config["task_checksum"] == task.checksum and config["seed"] == 3
    saved = json.loads((record / "result.json").read_text())
    assert saved["outcome"] == "scored" and saved["reward"] == 1.0
    assert saved["image_id"] and {"build", "agent", "verify", "total"} <= set(saved["timings"])
    transcript = json.loads((record / "transcript.json").read_text())
    assert transcript["messages"][0]["content"].strip().startswith("Write the secret")
    assert (record / "verifier" / "ctrf.json").is_file()
    assert (record / "verifier" / "reward.txt").read_text().strip() == "1.0"
    assert "test_answer_matches" in (record / "verifier" / "stdout.txt").read_text()


@pytest.mark.parametrize(("script", "why"), [
    ('open(__import__("os").environ["BENCHFLOW_REWARD_TEXT"], "w").write("1.5")', "outside"),
    ('open(__import__("os").environ["BENCHFLOW_REWARD_TEXT"], "w").write("yes")', "not a number"),
    ("pass", "no reward"),
    ("raise SystemExit(3)", "status 3"),
])
def test_bad_verifier_is_a_verifier_error_not_a_reward(
    backend_name: str, runner_factory: Factory, tmp_path: Path, script: str, why: str
) -> None:
    task = make_task(tmp_path / "task", verifier_py=script + "\n")
    result = runner_factory(backend_name).run(task, OracleAgent())
    assert result.outcome is Outcome.VERIFIER_ERROR
    assert result.reward is None and result.score == 0.0
    assert why in (result.reason or "")


def test_agent_past_its_deadline_is_a_timeout(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    task = make_task(tmp_path / "task")
    script = tmp_path / "sleepy.sh"
    script.write_text("echo started\nsleep 600\n")
    result = runner_factory(backend_name).run(task, ScriptAgent(script), agent_timeout=2)
    assert result.outcome is Outcome.AGENT_TIMEOUT
    assert result.reward is None and "deadline" in (result.reason or "")
    assert result.timings["agent"] < 60


def test_build_failure_is_its_own_outcome(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    dockerfile = "FROM posttrain-arena/python:bookworm\nCOPY missing.txt /root/missing.txt\n"
    task = make_task(tmp_path / "task", dockerfile=dockerfile)
    runner = runner_factory(backend_name)
    result = runner.run(task, OracleAgent())
    assert result.outcome is Outcome.BUILD_FAILED
    assert result.reward is None and result.outcome.is_infrastructure
    again = runner.run(task, EmptyAgent())  # reported from the cache, not rebuilt
    assert again.outcome is Outcome.BUILD_FAILED


def test_journal_resumes_only_unfinished_trials(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    task = make_task(tmp_path / "task")
    journal_path = tmp_path / "journal.jsonl"
    first = runner_factory(backend_name, journal=Journal(journal_path)).run(task, OracleAgent())
    assert first.outcome is Outcome.SCORED
    with journal_path.open("a") as fh:
        fh.write('{"torn line')  # a crash mid-write must not break the resume
    journal = Journal(journal_path)
    assert journal.done(first.trial_id) == first
    again = runner_factory(backend_name, journal=journal).run(task, OracleAgent())
    assert again == first  # taken from the journal, not run again
    assert len(journal_path.read_text().splitlines()) == 2


def test_agent_never_sees_verifier_or_oracle(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    task = make_task(tmp_path / "task")
    secret = (task.verifier_dir / "expected.txt").read_text().strip()
    probe = tmp_path / "probe.sh"
    probe.write_text("ls -la / /verifier /oracle /logs 2>&1; "
                     "grep -rs . / --include=expected.txt 2>/dev/null | head; "
                     "grep -rl solve.sh /tmp /root /opt 2>/dev/null | head\n")
    result = runner_factory(backend_name).run(task, ScriptAgent(probe), agent_timeout=60)
    record = Path(result.record_dir or "")
    transcript = (record / "transcript.json").read_text()
    assert secret not in transcript
    assert result.outcome is Outcome.SCORED and result.reward == 0.0


@pytest.mark.parametrize("isolation", ["fresh", "shared"])
def test_agent_deleting_its_workspace_scores_zero_not_infra(
    backend_name: str, runner_factory: Factory, tmp_path: Path, isolation: str
) -> None:
    task = make_task(tmp_path / "task", isolation=isolation)
    script = tmp_path / "wipe.sh"
    script.write_text("cd /\nrm -rf /root/* /root/.[!.]* 2>/dev/null\nrm -rf /root 2>/dev/null\n"
                      "echo wiped\n")
    result = runner_factory(backend_name).run(task, ScriptAgent(script))
    assert result.outcome is Outcome.SCORED, result.reason
    assert result.reward == 0.0


@pytest.mark.bwrap
def test_warm_pool_stops_idle_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trial_cache: Path
) -> None:
    import time

    from posttrain_arena.sandbox import Limits, get_backend, janitor
    from posttrain_arena.trial.pool import SessionPool

    monkeypatch.setenv("ARENA_LOCAL_SESSIONS", str(tmp_path / "sessions"))
    root = tmp_path / "sessions" / "posttrain-arena-sessions"

    def live() -> list[Path]:  # a stopped session lingers until the janitor removes it
        return [p for p in root.iterdir() if not p.name.startswith(".")]

    backend = get_backend("local")
    image = backend.build(make_task(tmp_path / "task").environment_dir, timeout=120)
    pool = SessionPool(backend, idle_sec=0.5)
    pool.take(image, Limits(), {}).stop()  # taking one pre-starts the next
    time.sleep(1.5)  # the pre-started one appears, then expires unused
    for _ in range(100):
        if not live():
            break
        time.sleep(0.1)
    assert not live()
    again = SessionPool(backend)
    again.take(image, Limits(), {}).stop()
    again.close()
    assert janitor.wait()  # a stopped session's files go on the janitor's thread
    assert not live()


def _with_slow_oracle(task_root: Path, *, verifier_timeout: int, sleep: float) -> TaskPackage:
    """The task with a verifier time limit of `verifier_timeout` s and an oracle that
    takes `sleep` s before it answers."""
    md = task_root / "task.md"
    md.write_text(md.read_text().replace("verifier:\n  timeout_sec: 60\n",
                                         f"verifier:\n  timeout_sec: {verifier_timeout}\n", 1))
    solve = task_root / "oracle" / "solve.sh"
    solve.write_text(solve.read_text().replace("set -e\n", f"set -e\nsleep {sleep}\n", 1))
    return load_task(task_root)


def test_the_verifier_time_limit_counts_from_when_the_state_arrives(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    # fresh verification may start the verifier's exec while the agent works (docker):
    # an agent phase longer than the verifier's limit must not eat into that limit
    make_task(tmp_path / "task")
    task = _with_slow_oracle(tmp_path / "task", verifier_timeout=3, sleep=4.5)
    assert task.frontmatter.verifier.timeout_sec == 3
    result = runner_factory(backend_name).run(task, OracleAgent())
    assert (result.outcome, result.reward) == (Outcome.SCORED, 1.0), result.reason


def test_a_trial_that_ends_before_verification_leaves_no_session(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    task = make_task(tmp_path / "task")
    script = tmp_path / "sleepy.sh"
    script.write_text("sleep 600\n")
    runner = runner_factory(backend_name, warm_pool=False)  # sessions carry the trial id
    result = runner.run(task, ScriptAgent(script), agent_timeout=2)
    assert result.outcome is Outcome.AGENT_TIMEOUT
    if backend_name == "docker":
        import docker

        left = docker.from_env().containers.list(
            all=True, filters={"label": f"posttrain-arena.trial={result.trial_id}"})
        assert left == [], [c.name for c in left]


@pytest.mark.docker
def test_the_oracle_runs_in_an_image_without_tar(runner_factory: Factory,
                                                 tmp_path: Path) -> None:
    # docker brings the oracle in with the command's own exec, through the image's tar;
    # without one it falls back to the engine's copy, and the trial is the same
    from .taskkit import BASE

    task = make_task(tmp_path / "task", dockerfile=(
        f"FROM {BASE}\nRUN rm -f /bin/tar /usr/bin/tar\nWORKDIR /root\n"
        "COPY input.txt /root/input.txt\n"))
    oracle = runner_factory("docker").run(task, OracleAgent())
    assert oracle.outcome is Outcome.SCORED and oracle.reward == 1.0, oracle.reason
