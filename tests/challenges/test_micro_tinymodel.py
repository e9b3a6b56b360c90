"""The micro challenge's tiny model: a local tokenizer and chat template, random weights."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from posttrain_arena.agents.model import TOOLS, bash_call_message, initial_messages
from posttrain_arena.challenges.micro.basebuild import write_tiny_model
from posttrain_arena.challenges.micro.families import SUITE_FAMILIES
from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec
from posttrain_arena.models.toolcalls import parse_tool_calls

SMALL = TinyModelSpec(vocab_size=600, hidden_size=32, intermediate_size=64, num_layers=1,
                      num_heads=2, max_positions=512, seed=3, pretrain_episodes=0)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "model", SMALL)


def _messages(command: str) -> list[dict]:
    msgs = [m.model_dump(exclude_none=True) for m in initial_messages("Do it.", 60)]
    call = bash_call_message(command, 0).model_dump(exclude_none=True)
    return [*msgs, call]


def test_tokenizer_round_trips_and_template_renders_tool_calls(model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    inst = SUITE_FAMILIES[2].generate(random.Random(5))
    ids = tok(inst.command, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == inst.command
    text = tok.apply_chat_template(_messages(inst.command), tools=TOOLS, tokenize=False)
    assert "bash(command)" in text
    assistant = text.split("<|im_start|>assistant")[-1].split("<|im_end|>")[0]
    _, calls = parse_tool_calls(assistant)
    assert [c.name for c in calls] == ["bash"]
    assert calls[0].arguments == {"command": inst.command}
    prompt = tok.apply_chat_template(_messages("ls")[:2], tools=TOOLS, tokenize=False,
                                     add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    # Markup survives skip_special_tokens, as the local client decodes with it.
    markup = tok("<tool_call>\n{}\n</tool_call>", add_special_tokens=False)["input_ids"]
    assert "<tool_call>" in tok.decode(markup, skip_special_tokens=True)


def test_model_is_a_small_random_qwen2_that_loads_and_runs(model_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    assert model.config.model_type == "qwen2"
    assert model.config.num_hidden_layers == SMALL.num_layers
    assert model.config.vocab_size == len(tok)
    ids = torch.tensor([tok("seq 1 5 > numbers.txt")["input_ids"]])
    assert model(input_ids=ids).logits.shape == (1, ids.shape[1], len(tok))
    assert model.generation_config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")


def test_building_is_deterministic(model_dir: Path, tmp_path: Path) -> None:
    again = write_tiny_model(tmp_path / "again", SMALL)
    for name in ("tokenizer.json", "model.safetensors"):
        assert (again / name).read_bytes() == (model_dir / name).read_bytes()
