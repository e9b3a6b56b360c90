"""The local transformers client records exactly what a forward pass of the model gives."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from posttrain_arena.agents.base import AgentContext
from posttrain_arena.agents.model import (
    TOOLS,
    AgentSettings,
    ModelAgent,
    bash_call_message,
    initial_messages,
    tool_result_message,
)
from posttrain_arena.models import SamplingParams, load_model
from posttrain_arena.models.toolcalls import parse_tool_calls

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from posttrain_arena.models.transformers_local import TransformersChatModel  # noqa: E402

from .tinyqwen import build_model, build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def client() -> TransformersChatModel:
    tokenizer = build_tokenizer()
    return TransformersChatModel(build_model(tokenizer), tokenizer, name="tiny")


def _forward_logprobs(model: Any, ids: list[int], temperature: float) -> Any:
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float() / temperature
    return torch.log_softmax(logits, dim=-1)


def _conversation() -> list[dict[str, Any]]:
    msgs = initial_messages("Write hello to out.txt", 60)
    msgs += [bash_call_message("echo hello > out.txt", 0),
             tool_result_message("[exit code 0]", 55, "call_0_0")]
    return [m.model_dump() for m in msgs]


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_recorded_tokens_match_forward_pass(client: TransformersChatModel,
                                            temperature: float) -> None:
    messages = _conversation()
    resp = client.chat(messages, tools=TOOLS,
                       sampling=SamplingParams(temperature=temperature, max_new_tokens=12, seed=3))
    assert resp.prompt_token_ids == client.encode(client.render(messages, TOOLS))
    assert resp.has_tokens and resp.completion_token_ids
    ids = resp.prompt_token_ids + resp.completion_token_ids
    lp = _forward_logprobs(client.model, ids, temperature or 1.0)
    n = len(resp.prompt_token_ids)
    for i, (tok, recorded) in enumerate(zip(resp.completion_token_ids,
                                            resp.completion_logprobs or [], strict=True)):
        assert recorded == pytest.approx(float(lp[n + i - 1, tok]), abs=1e-4)
        if temperature == 0.0:
            assert tok == int(lp[n + i - 1].argmax())
    assert resp.usage.completion_tokens == len(resp.completion_token_ids)


def test_same_seed_same_sample(client: TransformersChatModel) -> None:
    sampling = SamplingParams(temperature=1.0, max_new_tokens=8, seed=11)
    a = client.chat(_conversation(), tools=TOOLS, sampling=sampling)
    b = client.chat(_conversation(), tools=TOOLS, sampling=sampling)
    assert a.completion_token_ids == b.completion_token_ids


def test_template_tool_calls_parse_back(client: TransformersChatModel) -> None:
    messages = _conversation()[:3]
    text = client.render(messages, TOOLS, add_generation_prompt=False)
    head = "<|im_start|>assistant\n"
    assistant = text[text.rindex(head) + len(head): text.rindex("<|im_end|>")]
    content, calls = parse_tool_calls(assistant)
    assert content == ""
    assert [(c.name, c.arguments) for c in calls] == [
        ("bash", {"command": "echo hello > out.txt"})]


class _NoShell:
    """The random model never produces a valid call; nothing may run."""

    workdir = "/root"

    def exec(self, command: str, **_: Any) -> Any:
        raise AssertionError(f"unexpected command {command!r}")

    def copy_in(self, src: Path, dest: str) -> None:
        raise AssertionError("unexpected copy")


def test_episode_is_one_exact_token_sequence(client: TransformersChatModel) -> None:
    """Several turns continue each other's exact ids; the mask marks model tokens and a
    forward pass over the whole episode reproduces every recorded logprob."""
    settings = AgentSettings(max_turns=3, max_new_tokens=6, temperature=0.9, max_idle_turns=3)
    agent = ModelAgent(client, settings)
    ctx = AgentContext(task_name="t", prompt="Say hi", deadline=time.monotonic() + 300, seed=5)
    run = agent.run(_NoShell(), ctx)
    assert run.error is None
    tr = run.transcript
    assert run.info["token_episode"] == "exact"
    assert len(tr.turns) == 3
    assert len(tr.token_ids) == len(tr.token_mask) == len(tr.token_logprobs)
    last = tr.turns[-1]
    assert tr.token_ids == last.prompt_ids + last.completion_ids
    for earlier in tr.turns[:-1]:  # every prompt extends the previous turn exactly
        assert last.prompt_ids[: len(earlier.prompt_ids)] == earlier.prompt_ids
    model_positions = [i for i, m in enumerate(tr.token_mask) if m == 1]
    assert len(model_positions) == sum(len(t.completion_ids) for t in tr.turns)
    lp = _forward_logprobs(client.model, tr.token_ids, 0.9)
    for pos in model_positions:
        assert tr.token_logprobs[pos] == pytest.approx(
            float(lp[pos - 1, tr.token_ids[pos]]), abs=1e-4)
    assert all(tr.token_logprobs[i] == 0.0 for i, m in enumerate(tr.token_mask) if m == 0)


def test_load_model_from_directory(tmp_path: Path, client: TransformersChatModel) -> None:
    client.model.save_pretrained(tmp_path)
    client.tokenizer.save_pretrained(tmp_path)
    loaded = load_model(f"hf:{tmp_path}", device="cpu")
    resp = loaded.chat(_conversation(), tools=TOOLS,
                       sampling=SamplingParams(temperature=0, max_new_tokens=4))
    ref = client.chat(_conversation(), tools=TOOLS,
                      sampling=SamplingParams(temperature=0, max_new_tokens=4))
    assert resp.completion_token_ids == ref.completion_token_ids


def test_conversation_tokens_match_the_agent_format(client: TransformersChatModel) -> None:
    """Training targets written from a finished conversation are the ids the agent
    would record: the text decodes to the template's rendering, and mask 1 covers
    exactly the assistant bodies and their end tokens."""
    from posttrain_arena.agents.model import submit_call_message

    messages = [*_conversation(), submit_call_message(1).model_dump()]
    ids, mask = client.conversation_tokens(messages, TOOLS)
    tok = client.tokenizer
    rendered = client.render(messages, TOOLS, add_generation_prompt=False)
    assert tok.decode(ids) == rendered[: rendered.rindex("<|im_end|>") + len("<|im_end|>")]
    spans, current = [], []
    for i, m in zip(ids, mask, strict=True):
        if m:
            current.append(i)
        elif current:
            spans.append(current)
            current = []
    spans.append(current)
    texts = [tok.decode(s) for s in spans]
    assert len(texts) == 2 and all(t.endswith("<|im_end|>") for t in texts)
    assert '"command": "echo hello > out.txt"' in texts[0] and '"submit"' in texts[1]
    # The prompt of the second turn is what the live client builds from the first's ids.
    first_end = len(spans[0]) + mask.index(1)
    prompt = client.prompt_ids(messages[:-1], TOOLS, prefix_ids=ids[:first_end])
    assert ids[: len(prompt)] == prompt and mask[len(prompt)] == 1


def test_generation_stops_at_the_deadline(client: TransformersChatModel) -> None:
    """A local model cut by the deadline ends its turn early; the agent then stops."""
    settings = AgentSettings(max_new_tokens=1500, temperature=1.0)
    ctx = AgentContext(task_name="t", prompt="Say hi", deadline=time.monotonic() + 0.5)
    run = ModelAgent(client, settings).run(_NoShell(), ctx)
    assert run.error is None and run.info["exit"] == "deadline"
    assert 0 < run.info["completion_tokens"] < 1500
