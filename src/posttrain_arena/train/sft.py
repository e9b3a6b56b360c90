"""SFT: TRL SFTTrainer + PEFT LoRA on whole teacher trajectories.

Each trajectory is a conversation with tools, in the model agent's message format. It is
rendered with the tokenizer's chat template, and the loss mask is built from that same
rendering: a token counts when it lies inside an assistant message (the text that
rendering `messages[:i+1]` adds to rendering `messages[:i]` with a generation prompt).
So the mask never depends on `{% generation %}` markers in the template, and
`assistant_spans` lets tests decode the masked tokens and compare them with the
assistant messages.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from posttrain_arena.train.recipe import ModelSection, SftSection


def template_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Agent transcript messages as the local chat client renders them (arguments as
    dicts), so SFT sees exactly the text the model agent's prompts are made of."""
    from posttrain_arena.models.transformers_local import hf_message

    return [hf_message(dict(m)) for m in messages]


def _render(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
            generation_prompt: bool) -> str:
    text = tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                         add_generation_prompt=generation_prompt)
    return str(text)


def assistant_char_spans(tokenizer: Any, messages: list[dict[str, Any]],
                         tools: list[dict[str, Any]] | None) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans of its assistant messages."""
    full = _render(tokenizer, messages, tools, False)
    spans: list[tuple[int, int]] = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        before = _render(tokenizer, messages[:i], tools, True) if i else ""
        upto = _render(tokenizer, messages[: i + 1], tools, False)
        start = _common_prefix(before, upto)
        end = _common_prefix(upto, full)
        if end > start:
            spans.append((start, end))
    return full, spans


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def tokenize_with_mask(tokenizer: Any, messages: Sequence[dict[str, Any]],
                       tools: list[dict[str, Any]] | None,
                       max_length: int | None = None) -> dict[str, list[int]]:
    """`input_ids` and `assistant_masks` (1 on assistant-message tokens) of one conversation."""
    msgs = template_messages(messages)
    full, spans = assistant_char_spans(tokenizer, msgs, tools)
    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    ids: list[int] = list(enc["input_ids"])
    mask = [0] * len(ids)
    for t, (a, b) in enumerate(enc["offset_mapping"]):
        if b > a and any(s <= a < e for s, e in spans):
            mask[t] = 1
    if max_length is not None:
        ids, mask = ids[:max_length], mask[:max_length]
    return {"input_ids": ids, "assistant_masks": mask}


def read_trajectories(path: Path) -> list[dict[str, Any]]:
    """Trajectories JSONL: one {task, messages, tools, reward} per line."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_sft(
    *,
    model_location: str,
    revision: str | None,
    model_section: ModelSection,
    cfg: SftSection,
    trajectories: list[dict[str, Any]],
    work_dir: Path,
    device: str,
    seed: int,
    on_step: Callable[[int, int], None] | None = None,
    on_checkpoint: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train on the trajectories; writes `policy/` (merged model) and `adapter/`.

    Resumes from the newest checkpoint under `work_dir/checkpoints` when one exists.
    Returns the metrics that go into score.json.
    """
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from posttrain_arena.train import modeling

    tokenizer = modeling.load_tokenizer(model_location, revision)
    rows = [tokenize_with_mask(tokenizer, t["messages"], t.get("tools"), cfg.max_length)
            for t in trajectories]
    rows = [r for r in rows if any(r["assistant_masks"])]
    if not rows:
        raise RuntimeError("SFT has no trajectory with assistant tokens to learn from; "
                           "check the teacher stage's coverage")
    model = modeling.load_causal_lm(model_location, model_section, device, revision)
    peft_config = modeling.lora_config(cfg.lora) if cfg.method == "lora" else None

    per_step = cfg.per_device_batch_size * cfg.gradient_accumulation_steps
    total_steps = cfg.max_steps or max(1, math.ceil(len(rows) * cfg.epochs / per_step))
    ckpt_dir = work_dir / "checkpoints"
    args = SFTConfig(
        output_dir=str(ckpt_dir),
        max_steps=total_steps,
        learning_rate=cfg.learning_rate,
        per_device_train_batch_size=cfg.per_device_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        warmup_steps=int(cfg.warmup_ratio * total_steps),
        lr_scheduler_type="linear",
        max_length=cfg.max_length,
        packing=False,
        **modeling.trainer_settings(seed=seed, device=device, section=model_section,
                                    save_steps=cfg.save_steps),
    )

    losses: list[float] = []

    class _Report(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))
            if on_step is not None:
                on_step(int(state.global_step), total_steps)

        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if on_checkpoint is not None:
                on_checkpoint(f"checkpoint at step {state.global_step}")

    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=tokenizer, peft_config=peft_config,
                         callbacks=[_Report()])
    before = modeling.trainable_snapshot(trainer.model)
    resume = modeling.latest_checkpoint(ckpt_dir)
    if resume is not None:
        # The snapshot must be of the *initial* weights: reload them from the first save.
        initial = work_dir / "initial_trainable.pt"
        if initial.is_file():
            import torch

            before = torch.load(initial)
    else:
        import torch

        torch.save(before, work_dir / "initial_trainable.pt")
    result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    change = modeling.delta_norm(before, trainer.model)
    modeling.save_policy(trainer.model, tokenizer, work_dir / "policy",
                         adapter_dir=work_dir / "adapter" if peft_config is not None else None)
    _cleanup(work_dir)
    return {
        "method": cfg.method,
        "trajectories": len(rows),
        "assistant_tokens": sum(sum(r["assistant_masks"]) for r in rows),
        "tokens": sum(len(r["input_ids"]) for r in rows),
        "steps": int(result.global_step),
        "resumed_from": resume.name if resume else None,
        "train_loss": float(result.training_loss),
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        **change,
    }


def _cleanup(work_dir: Path) -> None:
    import shutil

    shutil.rmtree(work_dir / "checkpoints", ignore_errors=True)
    (work_dir / "initial_trainable.pt").unlink(missing_ok=True)
