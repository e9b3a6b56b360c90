"""The policy served by vLLM (CPU build), against the same model in process.

One server for the module, on the micro challenge's tiny from-scratch model (random
weights: its answers are nonsense, but deterministic, which is what these tests need:
the server and the in-process model must agree token for token). Marked `vllm`: CI
installs vLLM's own environment with scripts/vllm-env.sh and runs them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from posttrain_arena.agents.model import TOOLS, AgentSettings, initial_messages
from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec, write_tiny_model
from posttrain_arena.models.base import SamplingParams
from posttrain_arena.models.openai import OpenAIChatModel
from posttrain_arena.models.transformers_local import TransformersChatModel
from posttrain_arena.models.vllm_server import VllmServer, vllm_python

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=24)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "model", TinyModelSpec(seed=3))


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[VllmServer]:
    with VllmServer(model_dir, python=vllm_python(), kv_cache_gb=0.5) as srv:
        yield srv


@pytest.fixture(scope="module")
def local(model_dir: Path) -> TransformersChatModel:
    return TransformersChatModel.from_pretrained(model_dir, device="cpu")


@pytest.fixture
def remote(server: VllmServer) -> Iterator[OpenAIChatModel]:
    client = OpenAIChatModel(server.model_name, base_url=server.base_url, api_key="none")
    yield client
    client.close()


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


def test_a_forced_tool_call_parses(server: VllmServer) -> None:
    body = {"model": server.model_name, "messages": _messages(), "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "bash"}},
            "max_tokens": 64, "temperature": 0.0}
    data = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=300).json()
    calls = data["choices"][0]["message"]["tool_calls"]
    assert len(calls) == 1 and calls[0]["function"]["name"] == "bash"
    assert isinstance(json.loads(calls[0]["function"]["arguments"]), dict)


def test_greedy_turns_agree_with_the_in_process_model(local: TransformersChatModel,
                                                     remote: OpenAIChatModel) -> None:
    msgs = _messages()
    served = remote.chat(msgs, tools=TOOLS, sampling=GREEDY)
    mine = local.chat(msgs, tools=TOOLS, sampling=GREEDY)
    assert served.completion_token_ids == mine.completion_token_ids
    assert served.raw_text == mine.raw_text or served.content == mine.content


@pytest.mark.bwrap
def test_a_model_agent_episode_has_a_consistent_token_view(
        remote: OpenAIChatModel, local: TransformersChatModel, tmp_path: Path) -> None:
    from agents.tasks import write_task
    from posttrain_arena.agents.model import ModelAgent
    from posttrain_arena.spec.package import load_task
    from posttrain_arena.trial.executor import ThreadExecutor, TrialJob
    from posttrain_arena.trial.runner import TrialRunner

    task = load_task(write_task(tmp_path, "t", word="alpha"))
    agent = ModelAgent(remote, AgentSettings(max_turns=2, max_new_tokens=24, temperature=0.0))
    with TrialRunner("local") as runner:
        out = ThreadExecutor(runner).run(TrialJob(task, agent, capture=True))
    assert out.run is not None
    t = out.run.transcript
    assert t.turns and t.token_ids, "the episode has no exact token view"
    assert len(t.token_ids) == len(t.token_mask) == len(t.token_logprobs)
    for turn in t.turns:  # every prompt extends the view, every completion is in it
        n = len(turn.prompt_ids)
        assert t.token_ids[:n] == turn.prompt_ids
        assert t.token_ids[n:n + len(turn.completion_ids)] == turn.completion_ids
        assert all(t.token_mask[n:n + len(turn.completion_ids)])
