"""Red team, agent phase: an agent that wrecks its own sandbox gets a scored 0, on both
backends, never `infra_error`; with the model agent, which keeps issuing commands
after the wreck, and with a script agent. State transfers are bounded: an inode bomb
or many files just under the size cap end as a scored 0 with the reason, quickly."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from posttrain_arena.agents.empty import EmptyAgent
from posttrain_arena.agents.model import AgentSettings, ModelAgent
from posttrain_arena.agents.script import ScriptAgent
from posttrain_arena.agents.transcript import Transcript
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.trial.result import Outcome, TrialResult
from posttrain_arena.trial.runner import TrialRunner
from posttrain_arena.trial.state import MAX_STATE_ENTRIES

from .taskkit import make_task

Factory = Callable[..., TrialRunner]

WRECKS: dict[str, list[str]] = {
    "kill-pid-1": ["kill 1; kill -9 1; kill -TERM -1; sleep 1; echo still-here"],
    "delete-workdir": ["cd / && rm -rf /root; ls /root"],
    "exhaust-memory": [
        "python3 -c 'a = []\nwhile True: a.append(bytearray(1 << 24))'",
        "(python3 -c 'a = [bytearray(1 << 26) for _ in range(64)]' >/dev/null 2>&1 &); sleep 2",
    ],
}
AFTER = ["echo after > /root/answer.txt", "ls -la /", "cat /root/answer.txt"]


def _scored_zero(result: TrialResult) -> None:
    assert result.outcome is Outcome.SCORED, (result.outcome, result.reason)
    assert result.reward == 0.0


@pytest.mark.parametrize("isolation", ["fresh", "shared"])
@pytest.mark.parametrize("wreck", sorted(WRECKS))
def test_model_agent_wrecking_its_sandbox_scores_zero(
    backend_name: str, runner_factory: Factory, tmp_path: Path, wreck: str, isolation: str
) -> None:
    task = make_task(tmp_path / "task", isolation=isolation, pids_limit=64)
    calls = [{"bash": c} for c in WRECKS[wreck] + AFTER] + [{"submit": True}]
    agent = ModelAgent(ScriptedModel(calls), AgentSettings(command_timeout_sec=20),
                       name=f"model:wreck-{wreck}")
    result = runner_factory(backend_name).run(task, agent)
    _scored_zero(result)
    assert result.agent_info["commands"] == len(calls) - 1  # it went on after the wreck
    transcript = Transcript.model_validate_json(
        (Path(result.record_dir or "") / "transcript.json").read_text())
    tools = [m.content for m in transcript.messages if m.role == "tool"]
    assert len(tools) == len(calls)
    assert "[submitted]" in tools[-1]


@pytest.mark.parametrize("wreck", sorted(WRECKS))
def test_script_agent_wrecking_its_sandbox_scores_zero(
    backend_name: str, runner_factory: Factory, tmp_path: Path, wreck: str
) -> None:
    task = make_task(tmp_path / "task", pids_limit=64)
    script = tmp_path / "wreck.sh"
    script.write_text("\n".join(WRECKS[wreck] + AFTER) + "\n")
    _scored_zero(runner_factory(backend_name).run(task, ScriptAgent(script), agent_timeout=60))


def test_inode_bomb_is_a_scored_zero(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    task = make_task(tmp_path / "task", storage_mb=1024)
    script = tmp_path / "bomb.sh"
    count = MAX_STATE_ENTRIES + 5_000
    script.write_text(
        "python3 - <<'PY'\nimport os\nos.makedirs('/root/bomb', exist_ok=True)\n"
        f"for i in range({count}):\n    open(f'/root/bomb/{{i}}', 'w').close()\nPY\n"
        "echo made\n")
    runner = runner_factory(backend_name)
    result = runner.run(task, ScriptAgent(script), agent_timeout=240)
    _scored_zero(result)
    # whichever bound the transfer passes first: the entry count or its deadline
    reason = result.reason or ""
    assert "files and directories" in reason or "deadline" in reason, reason
    assert runner.run(task, EmptyAgent()).outcome is Outcome.SCORED


def test_many_files_under_the_size_cap_are_a_scored_zero(
    backend_name: str, runner_factory: Factory, tmp_path: Path
) -> None:
    task = make_task(tmp_path / "task", storage_mb=64)
    script = tmp_path / "big.sh"
    # each file is just under the per-file cap (storage_mb), sparse so that the test
    # writes nothing: together they hold five times the task's storage
    script.write_text("for i in 1 2 3 4 5; do truncate -s 63M /root/big$i; done; ls -la /root\n")
    result = runner_factory(backend_name).run(task, ScriptAgent(script), agent_timeout=60)
    _scored_zero(result)
    assert "MiB" in (result.reason or ""), result.reason
