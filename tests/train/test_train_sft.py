"""SFT on a tiny model: LoRA weights move, and the loss covers exactly the assistant turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from posttrain_arena.agents.model import (
    TOOLS,
    bash_call_message,
    initial_messages,
    submit_call_message,
    tool_result_message,
)
from posttrain_arena.train.modeling import load_tokenizer
from posttrain_arena.train.recipe import LoraSpec, ModelSection, SftSection
from posttrain_arena.train.sft import run_sft, tokenize_with_mask


def masked_segments(ids: list[int], mask: list[int]) -> list[list[int]]:
    """Runs of consecutive masked token ids (one per assistant message)."""
    segs: list[list[int]] = []
    prev = 0
    for tok, bit in zip(ids, mask, strict=True):
        if bit and not prev:
            segs.append([])
        if bit:
            segs[-1].append(tok)
        prev = bit
    return segs


def _trajectory(word: str) -> list[dict[str, Any]]:
    msgs = [*initial_messages(f"Write {word} into out.txt.", 60),
            bash_call_message(f"echo {word} > out.txt", 0, content="I will write it."),
            tool_result_message("[exit code 0]", 58, "call_0_0"),
            submit_call_message(1, content="done")]
    return [m.model_dump(exclude_none=True) for m in msgs]


def test_loss_mask_is_exactly_the_assistant_messages(tiny_model: Path) -> None:
    tok = load_tokenizer(str(tiny_model))
    msgs = _trajectory("hello")
    row = tokenize_with_mask(tok, msgs, TOOLS)
    segments = [tok.decode(s) for s in masked_segments(row["input_ids"], row["assistant_masks"])]
    assistants = [m for m in msgs if m["role"] == "assistant"]
    assert len(segments) == len(assistants)
    for seg, msg in zip(segments, assistants, strict=True):
        call = msg["tool_calls"][0]["function"]
        args = json.loads(call["arguments"])
        expected = (f'{msg["content"]}<tool_call>{{"name": "{call["name"]}", "arguments": '
                    f'{json.dumps(args)}}}</tool_call>{tok.eos_token}\n')
        assert seg == expected
    # Everything outside the mask is prompt, tool output or template.
    unmasked = tok.decode([t for t, m in zip(row["input_ids"], row["assistant_masks"],
                                             strict=True) if not m])
    for m in msgs:
        if m["role"] != "assistant":
            assert m["content"] in unmasked
    assert "echo hello" not in unmasked


@pytest.mark.slow
def test_sft_moves_lora_weights_and_resumes_from_a_checkpoint(
        tiny_model: Path, tmp_path: Path) -> None:
    cfg = SftSection(max_steps=4, per_device_batch_size=2, gradient_accumulation_steps=1,
                     learning_rate=5e-3, save_steps=2, lora=LoraSpec(r=4, alpha=8))
    trajs = [{"messages": _trajectory(w), "tools": TOOLS} for w in ("hello", "apple")]

    class Killed(Exception):
        pass

    def kill_at_first_checkpoint(msg: str) -> None:
        raise Killed(msg)

    kwargs: dict[str, Any] = dict(model_location=str(tiny_model), revision=None,
                                  model_section=ModelSection(id=str(tiny_model)), cfg=cfg,
                                  trajectories=trajs, work_dir=tmp_path, device="cpu", seed=0)
    with pytest.raises(Killed):
        run_sft(**kwargs, on_checkpoint=kill_at_first_checkpoint)
    assert (tmp_path / "checkpoints" / "checkpoint-2").is_dir()
    metrics = run_sft(**kwargs)
    assert metrics["resumed_from"] == "checkpoint-2"
    assert metrics["steps"] == 4
    assert metrics["params_changed"] == metrics["params_tracked"] > 0
    assert metrics["param_delta_norm"] > 0
    assert metrics["assistant_tokens"] < metrics["tokens"]
    assert (tmp_path / "policy" / "config.json").is_file()
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    assert not (tmp_path / "checkpoints").exists()
