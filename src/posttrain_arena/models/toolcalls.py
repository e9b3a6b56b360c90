"""Tool calls written in the model's own text: Qwen/Hermes-style `<tool_call>` blocks.

A chat template renders an assistant tool call as

    <tool_call>
    {"name": "bash", "arguments": {"command": "ls"}}
    </tool_call>

and a model trained on such templates answers the same way. `parse_tool_calls` takes
them back out of generated text; malformed blocks are kept as calls with their raw
text so the agent can tell the model what was wrong instead of crashing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from posttrain_arena.models.base import ToolCall

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def parse_tool_calls(text: str, id_prefix: str = "call") -> tuple[str, list[ToolCall]]:
    """(content without the blocks, calls) from generated text."""
    calls: list[ToolCall] = []
    for i, match in enumerate(_BLOCK.finditer(text)):
        body = match.group(1).strip()
        call_id = f"{id_prefix}_{i}"
        try:
            data = json.loads(body)
        except json.JSONDecodeError:
            calls.append(ToolCall(id=call_id, name=_guess_name(body), raw_arguments=body))
            continue
        if not isinstance(data, dict):
            calls.append(ToolCall(id=call_id, name="", raw_arguments=body))
            continue
        name = str(data.get("name", ""))
        args = data.get("arguments", data.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                calls.append(ToolCall(id=call_id, name=name, raw_arguments=args))
                continue
        if not isinstance(args, dict):
            calls.append(ToolCall(id=call_id, name=name, raw_arguments=json.dumps(args)))
            continue
        calls.append(ToolCall(id=call_id, name=name, arguments=args))
    content = _BLOCK.sub("", text).strip() if calls else text.strip()
    return content, calls


def decode_arguments(arguments: Any) -> dict[str, Any] | None:
    """Arguments of an OpenAI tool call (a JSON string, or already a dict) as a dict."""
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None
    return None


def _guess_name(body: str) -> str:
    match = re.search(r'"name"\s*:\s*"([^"]*)"', body)
    return match.group(1) if match else ""
