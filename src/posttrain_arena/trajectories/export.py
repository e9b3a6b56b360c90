"""Episodes as TRL-ready SFT rows: JSONL, and a Hugging Face `datasets` dataset on disk.

Sources are what runs leave behind:

* a records folder (`arena eval --records DIR`, `arena task run --records DIR`, any
  `TrialRunner(records_root=...)`): one folder per trial with result.json and
  transcript.json;
* a teacher log (`attempts.jsonl` of a training run's teacher stage), one attempt a
  line with its messages, outcome and reward.

Each row is TRL's conversational format with tool calls: `messages` (user, assistant
with `tool_calls` whose `arguments` are objects, as chat templates expect, and `tool`
results), `tools` (the JSON schema of the bash tool the agent had), plus the episode's
identity and score (`task`, `trial_id`, `agent`, `outcome`, `reward`) so a consumer can
filter again. A row ends at the last assistant message: what follows it was not the
model's and teaches nothing. By default only passing episodes (scored, reward 1.0)
become rows; `include_all` keeps every scored or timed-out one. Infrastructure
failures never become rows: they say nothing about the model.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from posttrain_arena.agents.transcript import Transcript
from posttrain_arena.trial.records import read_result
from posttrain_arena.trial.result import Outcome

BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a bash command in the task's workspace; returns its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command"}},
            "required": ["command"],
        },
    },
}
"""The one tool agents here have (see agents/model.py), as TRL's `tools` column holds it."""


class ExportReport(BaseModel):
    """What an export read and wrote."""

    episodes: int = Field(description="Episodes found in the source")
    rows: int = Field(description="Rows written")
    skipped: dict[str, int] = Field(default_factory=dict, description="Why others were not")


class Episode(BaseModel):
    """One episode: identity, score and conversation."""

    task: str
    trial_id: str | None = None
    agent: str | None = None
    outcome: str
    reward: float | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)


def read_records(root: Path) -> Iterator[Episode]:
    """Episodes of a records folder (each subfolder with result.json and transcript.json)."""
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        if not (folder / "result.json").is_file() or not (folder / "transcript.json").is_file():
            continue
        try:
            result = read_result(folder)
            transcript = Transcript.model_validate_json(
                (folder / "transcript.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, ValidationError):
            continue
        yield Episode(task=result.task_name, trial_id=result.trial_id, agent=result.agent,
                      outcome=result.outcome.value, reward=result.reward,
                      messages=[m.model_dump() for m in transcript.messages])


def read_attempts(path: Path) -> Iterator[Episode]:
    """Episodes of a teacher log (attempts.jsonl)."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if not isinstance(data, dict) or "messages" not in data:
                continue
            yield Episode(task=str(data.get("task", "")), trial_id=data.get("trial_id"),
                          agent="teacher", outcome=str(data.get("outcome", "")),
                          reward=data.get("reward"), messages=list(data["messages"]))


def read_source(source: Path) -> Iterator[Episode]:
    """Episodes of a records folder or a teacher log; ValueError when it is neither."""
    if source.is_dir():
        return read_records(source)
    if source.is_file() and source.suffix == ".jsonl":
        return read_attempts(source)
    raise ValueError(f"{source}: not a records folder (one folder per trial) or a teacher "
                     "attempts.jsonl")


def sft_row(episode: Episode) -> dict[str, Any]:
    """The episode as one row of TRL's conversational SFT format with tool calls."""
    messages = [_message(m) for m in episode.messages]
    while messages and messages[-1]["role"] != "assistant":
        messages.pop()
    return {"messages": messages, "tools": [BASH_TOOL], "task": episode.task,
            "trial_id": episode.trial_id, "agent": episode.agent,
            "outcome": episode.outcome, "reward": episode.reward}


def _message(m: dict[str, Any]) -> dict[str, Any]:
    # Every message carries the same keys, so a `datasets` table has one schema.
    calls = []
    for call in m.get("tool_calls") or []:
        fn = call.get("function", {})
        args = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = {"command": args}
        calls.append({"id": str(call.get("id", "")), "type": "function",
                      "function": {"name": str(fn.get("name", "")),
                                   "arguments": {"command": str(args.get("command", ""))}}})
    return {"role": str(m.get("role", "")), "content": str(m.get("content") or ""),
            "tool_calls": calls, "tool_call_id": m.get("tool_call_id"),
            "name": "bash" if m.get("role") == "tool" else None}


def keep(episode: Episode, include_all: bool) -> str | None:
    """None to keep the episode, else why not."""
    if episode.outcome in (Outcome.INFRA_ERROR.value, Outcome.BUILD_FAILED.value):
        return "infrastructure failure"
    if not any(m.get("role") == "assistant" for m in episode.messages):
        return "no assistant turn"
    if include_all:
        return None
    if episode.outcome != Outcome.SCORED.value or (episode.reward or 0.0) < 1.0:
        return "not passed"
    return None


def export(episodes: Iterable[Episode], jsonl: Path | None, dataset_dir: Path | None,
           *, include_all: bool = False) -> ExportReport:
    """Write the kept episodes' rows as JSONL and/or a `datasets` dataset on disk."""
    rows: list[dict[str, Any]] = []
    skipped: dict[str, int] = {}
    total = 0
    for ep in episodes:
        total += 1
        why = keep(ep, include_all)
        if why is None:
            rows.append(sft_row(ep))
        else:
            skipped[why] = skipped.get(why, 0) + 1
    if jsonl is not None:
        jsonl.parent.mkdir(parents=True, exist_ok=True)
        with jsonl.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    if dataset_dir is not None:
        from datasets import Dataset  # heavy; only for this output

        Dataset.from_list(rows).save_to_disk(str(dataset_dir))
    return ExportReport(episodes=total, rows=len(rows), skipped=skipped)
