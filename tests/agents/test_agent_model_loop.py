"""The model agent's real loop: scripted model, real local sandbox, real verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrain_arena.agents.model import (
    SYSTEM_PROMPT,
    TOOLS,
    AgentSettings,
    ModelAgent,
    format_output,
    initial_messages,
    tool_result_message,
    truncate,
)
from posttrain_arena.agents.transcript import Transcript
from posttrain_arena.models.openai import OpenAIChatModel
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial.result import Outcome
from posttrain_arena.trial.runner import TrialRunner

from .tasks import write_task


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner("local")


def test_message_builders() -> None:
    system, user = initial_messages("Do the thing.", 299.6)
    assert system.content == SYSTEM_PROMPT and "Do the thing." in user.content
    assert "[time left: 300s]" in user.content
    # Rendering is stable under small timing jitter (seeded runs reproduce).
    assert initial_messages("Do the thing.", 291.2)[1].content == user.content
    tool = tool_result_message("out", 12.0, "call_1_0")
    assert tool.role == "tool" and tool.tool_call_id == "call_1_0" and "20s" in tool.content
    assert "[time left: 0s]" in tool_result_message("out", -3.0).content
    assert [t["function"]["name"] for t in TOOLS] == ["bash", "submit"]


def test_output_is_cut_head_and_tail() -> None:
    text = "A" * 500 + "B" * 500
    cut = truncate(text, 100)
    assert cut.startswith("A" * 50) and cut.endswith("B" * 50) and "900 characters" in cut
    assert format_output(2, "x", "err", limit=100).endswith("[exit code 2]")
    assert "timed out" in format_output(-1, "", "", timed_out=True)


@pytest.mark.bwrap
def test_scripted_agent_passes_and_fails(tmp_path: Path, runner: TrialRunner) -> None:
    task = load_task(write_task(tmp_path, "hello"))
    good = ModelAgent(ScriptedModel([{"bash": "echo hello > out.txt"}, {"submit": True}]))
    result = runner.run(task, good)
    assert result.outcome is Outcome.SCORED and result.reward == 1.0
    assert result.agent_info["exit"] == "submit" and result.agent_info["commands"] == 1
    bad = ModelAgent(ScriptedModel([{"bash": "echo bye > out.txt"}, {"submit": True}]),
                     name="model:bad")
    assert runner.run(task, bad).reward == 0.0


@pytest.mark.bwrap
def test_transcript_shows_output_and_deadline(tmp_path: Path, runner: TrialRunner) -> None:
    task = load_task(write_task(tmp_path, "seq"))
    model = ScriptedModel([
        {"bash": "seq 1 5000"},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hello > out.txt"}},
                        {"name": "bash", "arguments": {"command": "rm out.txt"}}]},
        {"tool_calls": [{"name": "python", "arguments": {}}]},
        {"tool_calls": [{"name": "bash", "arguments": {}}]},
        {"submit": True},
    ])
    agent = ModelAgent(model, AgentSettings(output_chars=200))
    recorder = TrialRunner("local", records_root=tmp_path / "records")
    result = recorder.run(task, agent)
    assert result.record_dir is not None
    run = Transcript.model_validate_json((Path(result.record_dir) / "transcript.json").read_text())
    msgs = run.messages
    tools = [m for m in msgs if m.role == "tool"]
    assert tools[0].content.startswith("1\n2\n") and "5000" in tools[0].content
    assert "characters omitted" in tools[0].content and "[exit code 0]" in tools[0].content
    assert all("[time left: " in m.content for m in tools)
    # one command per turn: the second call of turn 1 is answered, not run
    assert "ignored" in tools[2].content and tools[1].tool_call_id != tools[2].tool_call_id
    assert result.reward == 1.0
    assert "unknown tool" in tools[3].content and "needs" in tools[4].content
    assert result.agent_info["exit"] == "submit" and result.agent_info["turns"] == 5


@pytest.mark.bwrap
def test_limits_from_task_md(tmp_path: Path, runner: TrialRunner) -> None:
    task = load_task(write_task(tmp_path, "lim", extra_agent="  max_turns: 2\n"))
    settings = AgentSettings().for_task(task.frontmatter.agent)
    assert settings.max_turns == 2
    model = ScriptedModel([{"bash": "true"}] * 5 + [{"bash": "echo hello > out.txt"}])
    result = runner.run(task, ModelAgent(model, settings))
    assert result.agent_info["exit"] == "max_turns" and result.agent_info["turns"] == 2
    assert result.outcome is Outcome.SCORED and result.reward == 0.0
    tokens = ModelAgent(model, AgentSettings(max_tokens=5), name="model:tok")
    assert runner.run(task, tokens).agent_info["exit"] == "max_tokens"


@pytest.mark.bwrap
def test_provider_failure_is_infrastructure(tmp_path: Path, runner: TrialRunner) -> None:
    task = load_task(write_task(tmp_path, "down"))
    dead = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="", max_retries=1,
                           sleep=lambda _: None)
    result = runner.run(task, ModelAgent(dead))
    assert result.outcome is Outcome.INFRA_ERROR and result.reward is None
    assert "127.0.0.1:9" in (result.reason or "")


@pytest.mark.bwrap
def test_scenes_are_handed_over_on_submit(tmp_path: Path) -> None:
    root = write_task(tmp_path, "scenes")
    text = (root / "task.md").read_text()
    head = text[: text.index("## prompt")]
    (root / "task.md").write_text(head + "## scene: first\n\nList the files.\n\n"
                                  "## scene: second\n\nNow write hello into out.txt.\n")
    task = load_task(root)
    model = ScriptedModel([{"bash": "ls"}, {"submit": True},
                           {"bash": "echo hello > out.txt"}, {"submit": True}])
    runner = TrialRunner("local", records_root=tmp_path / "records")
    result = runner.run(task, ModelAgent(model))
    assert result.reward == 1.0 and result.agent_info["scenes_done"] == 1
    transcript = Transcript.model_validate_json(
        (Path(result.record_dir or "") / "transcript.json").read_text())
    users = [m.content for m in transcript.messages if m.role == "user"]
    assert users[0].startswith("List the files.")
    assert users[1].startswith("Now write hello into out.txt.") and "[time left:" in users[1]
