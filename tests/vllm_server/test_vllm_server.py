"""The policy served by vLLM (CPU build), against the same model in process.

One server for the module, on the micro challenge's tiny from-scratch model (random
weights: its answers are nonsense, but deterministic, which is what these tests need:
the server and the in-process model must agree token for token). Marked `vllm`: CI
installs vLLM's own environment with scripts/vllm-env.sh and runs them.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import pytest

from posttrain_arena.agents.model import BASH_TOOL, SUBMIT_TOOL, TOOLS, initial_messages
from posttrain_arena.challenges.micro.basebuild import write_tiny_model
from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec
from posttrain_arena.models.base import SamplingParams
from posttrain_arena.models.openai import OpenAIChatModel
from posttrain_arena.models.transformers_local import TransformersChatModel
from posttrain_arena.models.vllm_server import VllmServer, check_served

# One worker runs the module: its server (a module fixture) starts once, not on
# every worker that draws one of its tests (scripts/test.sh: --dist loadgroup).
pytestmark = [pytest.mark.vllm, pytest.mark.slow,
              pytest.mark.xdist_group("vllm-server-blank")]

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=24)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "model",
                            TinyModelSpec(seed=3, pretrain_episodes=0))


def test_the_server_answers_to_its_weights_and_states_its_context(
        server: VllmServer, remote: OpenAIChatModel, model_dir: Path) -> None:
    """vLLM serves the folder under its fingerprinted name (what a pipeline stage checks
    before it evaluates) and lists max_model_len (the agent's context limit)."""
    assert check_served(server.base_url, model_dir) == server.model_name
    assert server.model_name.startswith(f"{model_dir.name}@sha256:")
    assert remote.context_limit == 2048  # VllmServer's --max-model-len


def _messages() -> list[dict[str, object]]:
    return [m.model_dump(exclude_none=True)
            for m in initial_messages("Count the lines of notes.txt into count.txt.", 60.0)]


def test_prompt_ids_are_the_chat_template_ids(local: TransformersChatModel,
                                              remote: OpenAIChatModel) -> None:
    msgs = _messages()
    response = remote.chat(msgs, tools=TOOLS, sampling=GREEDY)
    assert response.prompt_token_ids == local.prompt_ids(msgs, TOOLS)
    assert response.completion_token_ids  # the server sent its ids back


def test_logprobs_match_a_transformers_forward_pass(local: TransformersChatModel,
                                                    remote: OpenAIChatModel) -> None:
    import torch

    response = remote.chat(_messages(), tools=TOOLS,
                           sampling=SamplingParams(temperature=1.0, max_new_tokens=16,
                                                   seed=7))
    prompt = response.prompt_token_ids or []
    completion = response.completion_token_ids or []
    served = response.completion_logprobs or []
    assert completion and len(served) == len(completion)
    with torch.no_grad():
        logits = local.model(torch.tensor([prompt + completion])).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    mine = [float(logp[len(prompt) - 1 + i, tok]) for i, tok in enumerate(completion)]
    for i, (a, b) in enumerate(zip(served, mine, strict=True)):
        assert math.isclose(a, b, abs_tol=2e-3), (i, a, b)


def test_greedy_turns_agree_with_the_in_process_model(local: TransformersChatModel,
                                                     remote: OpenAIChatModel) -> None:
    msgs = _messages()
    served = remote.chat(msgs, tools=TOOLS, sampling=GREEDY)
    mine = local.chat(msgs, tools=TOOLS, sampling=GREEDY)
    assert served.completion_token_ids == mine.completion_token_ids
    assert served.raw_text == mine.raw_text or served.content == mine.content


def _bounded_bash(max_length: int) -> dict[str, object]:
    """The agent's bash tool with its command bounded to a few plain characters. A random
    model never ends a string on its own (the bound is where the grammar closes it), and
    left free it writes `</tool_call>` into the string, where vLLM's Hermes parser, which
    cuts at the first end tag, loses the call (measured: the reply came back as text)."""
    tool = copy.deepcopy(BASH_TOOL)
    command = tool["function"]["parameters"]["properties"]["command"]
    command["maxLength"] = max_length
    command["pattern"] = f"^[a-z0-9 ._-]{{1,{max_length}}}$"
    return tool


def _follows(arguments: dict[str, object], schema: dict[str, object]) -> list[str]:
    """What in `arguments` breaks the (flat, string-valued) object `schema`."""
    props = schema.get("properties") or {}
    assert isinstance(props, dict)
    errors = [f"missing {k}" for k in schema.get("required") or [] if k not in arguments]
    for key, value in arguments.items():
        spec = props.get(key)
        if spec is None:
            errors.append(f"unexpected {key}")
        elif spec.get("type") == "string" and not isinstance(value, str):
            errors.append(f"{key} is {type(value).__name__}, not a string")
        elif "maxLength" in spec and len(str(value)) > spec["maxLength"]:
            errors.append(f"{key} longer than {spec['maxLength']}")
        elif "pattern" in spec and not re.fullmatch(spec["pattern"], str(value)):
            errors.append(f"{key} does not match {spec['pattern']}")
    return errors


def test_a_forced_tool_call_parses_into_a_tool_call(server: VllmServer) -> None:
    """tool_choice naming a tool: the reply is a call of that tool whose arguments follow
    its schema, parsed into the project's ToolCall, for several sampled seeds (the random
    model would otherwise write no call at all)."""
    bash = _bounded_bash(24)
    tools = [bash, SUBMIT_TOOL]
    forced = {name: OpenAIChatModel(server.model_name, base_url=server.base_url,
                                    api_key="none", tool_choice=name)
              for name in ("bash", "submit")}
    try:
        for seed in range(3):
            sampling = SamplingParams(temperature=1.0, max_new_tokens=200, seed=seed)
            response = forced["bash"].chat(_messages(), tools=tools, sampling=sampling)
            assert [c.name for c in response.tool_calls] == ["bash"], response
            call = response.tool_calls[0]
            assert call.raw_arguments is None, call  # valid JSON, decoded
            assert not _follows(call.arguments, bash["function"]["parameters"]), call
            assert json.loads(call.to_openai()["function"]["arguments"]) == call.arguments
            assert response.has_tokens
            response = forced["submit"].chat(_messages(), tools=tools, sampling=sampling)
            assert [(c.name, c.arguments) for c in response.tool_calls] == [("submit", {})]
    finally:
        for client in forced.values():
            client.close()
