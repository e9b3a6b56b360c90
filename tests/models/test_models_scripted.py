"""The scripted client: file formats, per-prompt scripts, specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrain_arena.models import ModelError, load_model
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.models.toolcalls import parse_tool_calls


def _conv(prompt: str, assistant_turns: int) -> list[dict[str, object]]:
    msgs: list[dict[str, object]] = [{"role": "user", "content": prompt}]
    msgs += [{"role": "assistant", "content": ""}] * assistant_turns
    return msgs


def test_jsonl_replays_by_turn(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [
        {"bash": "ls"}, {"content": "done", "tool_calls": [{"name": "submit"}]}]))
    model = load_model(f"scripted:{path}")
    first = model.chat(_conv("x", 0))
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("bash", {"command": "ls"})]
    second = model.chat(_conv("x", 1))
    assert second.content == "done" and second.tool_calls[0].name == "submit"
    assert not model.chat(_conv("x", 2)).tool_calls  # exhausted: no call ends the episode


def test_yaml_scripts_chosen_by_prompt(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "scripts:\n"
        "  - match: 'hello'\n    responses: [{bash: 'echo hi'}]\n"
        "default: [{submit: true}]\n")
    model = ScriptedModel.from_file(path)
    assert model.chat(_conv("say hello", 0)).tool_calls[0].arguments == {"command": "echo hi"}
    assert model.chat(_conv("other", 0)).tool_calls[0].name == "submit"


@pytest.mark.parametrize("spec", ["nonsense", "gpt:x", "scripted:/does/not/exist"])
def test_bad_specs_say_what_to_do(spec: str) -> None:
    with pytest.raises(ModelError):
        load_model(spec)


def test_malformed_script(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- [1, 2]\n")
    with pytest.raises(ModelError, match="response 0"):
        ScriptedModel.from_file(path)


def test_parse_tool_calls_handles_bad_json() -> None:
    content, calls = parse_tool_calls('thinking <tool_call>\n{"name": "bash", "arguments": {'
                                      '"command": "ls"\n</tool_call>')
    assert content == "thinking"
    assert calls[0].name == "bash" and calls[0].raw_arguments is not None
    _, ok = parse_tool_calls('<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
    assert ok[0].name == "submit" and ok[0].arguments == {}
