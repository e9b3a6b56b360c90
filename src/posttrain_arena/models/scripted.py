"""A scripted chat model: replays responses from a file. A product feature for demos,
tests and benchmarks: it drives the real agent loop with no model at all.

File formats (JSONL, one response a line; or YAML / JSON, a list of responses):

    {"bash": "ls -la"}                       # shorthand: one bash call
    {"submit": true}                         # shorthand: the submit call
    {"content": "text", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}

A YAML/JSON mapping may instead hold several scripts chosen by the task prompt:

    scripts:
      - match: "hello\\.txt"                 # regex searched in the first user message
        responses: [...]
    default: [...]                           # used when nothing matches

The n-th assistant turn of a conversation gets the n-th response, so one client is
safe to share between concurrent trials. Past the end it answers with plain text and
no call, which ends the agent's episode. It reports no token ids; its usage counts are
estimates (characters / 4).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from posttrain_arena.models.base import (
    ChatResponse,
    ModelError,
    SamplingParams,
    ToolCall,
    Usage,
)


class ScriptedModel:
    """Replays scripted responses, chosen per conversation by the first user message."""

    context_limit: int | None = None  # a script has no context window

    def __init__(
        self,
        responses: Sequence[dict[str, Any]] = (),
        *,
        scripts: Sequence[tuple[str, Sequence[dict[str, Any]]]] = (),
        name: str = "scripted",
    ) -> None:
        self.name = name
        self._default = [_normalise(r, f"response {i}") for i, r in enumerate(responses)]
        self._scripts = [
            (re.compile(pattern), [_normalise(r, f"script {pattern!r}") for r in rs])
            for pattern, rs in scripts
        ]

    @classmethod
    def from_file(cls, path: Path | str) -> ScriptedModel:
        """Load a JSONL, JSON or YAML script; ModelError says where it is malformed."""
        path = Path(path)
        if not path.is_file():
            raise ModelError(f"scripted model file {path} does not exist")
        text = path.read_text(encoding="utf-8")
        name = f"scripted:{path}"
        try:
            if path.suffix == ".jsonl":
                items = [json.loads(line) for line in text.splitlines() if line.strip()]
                return cls(items, name=name)
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as exc:
            kind = path.suffix.lstrip(".") or "YAML"
            raise ModelError(f"{path}: not valid {kind}: {exc}") from None
        if isinstance(data, list):
            return cls(data, name=name)
        if isinstance(data, dict) and ("scripts" in data or "default" in data):
            scripts = []
            for i, entry in enumerate(data.get("scripts") or []):
                if not isinstance(entry, dict) or "match" not in entry:
                    raise ModelError(f"{path}: scripts[{i}] needs 'match' and 'responses'")
                scripts.append((str(entry["match"]), list(entry.get("responses") or [])))
            return cls(list(data.get("default") or []), scripts=scripts, name=name)
        raise ModelError(f"{path}: expected a list of responses or a mapping with 'scripts'")

    def chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        sampling: SamplingParams | None = None,
        prefix_ids: Sequence[int] | None = None,
    ) -> ChatResponse:
        """The next scripted response for this conversation."""
        script = self._script_for(messages)
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn >= len(script):
            return ChatResponse(content="(script exhausted)", finish_reason="stop")
        entry = script[turn]
        calls = [
            ToolCall(id=f"call_{turn}_{i}", name=c["name"], arguments=c.get("arguments") or {})
            for i, c in enumerate(entry["tool_calls"])
        ]
        content = entry["content"]
        return ChatResponse(
            content=content,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else "stop",
            usage=Usage(
                prompt_tokens=sum(len(str(m.get("content") or "")) // 4 for m in messages),
                completion_tokens=max(1, len(json.dumps(entry)) // 4),
            ),
        )

    def _script_for(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        if self._scripts:
            first_user = next((m for m in messages if m.get("role") == "user"), None)
            text = str(first_user.get("content") or "") if first_user else ""
            for pattern, responses in self._scripts:
                if pattern.search(text):
                    return responses
        return self._default


def _normalise(entry: Any, where: str) -> dict[str, Any]:
    """One response in the long form {content, tool_calls: [{name, arguments}]}."""
    if not isinstance(entry, dict):
        raise ModelError(f"{where}: a response must be a mapping (got {type(entry).__name__})")
    if "bash" in entry:
        return {"content": str(entry.get("content", "")),
                "tool_calls": [{"name": "bash", "arguments": {"command": str(entry["bash"])}}]}
    if entry.get("submit"):
        return {"content": str(entry.get("content", "")),
                "tool_calls": [{"name": "submit", "arguments": {}}]}
    calls = entry.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) and "name" in c for c in calls):
        raise ModelError(f"{where}: tool_calls must be a list of {{name, arguments}}")
    return {"content": str(entry.get("content", "")),
            "tool_calls": [{"name": str(c["name"]), "arguments": dict(c.get("arguments") or {})}
                           for c in calls]}
