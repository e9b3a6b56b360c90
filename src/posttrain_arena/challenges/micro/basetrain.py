"""The micro base model's pretraining loop (the corpus is `pretrain_corpus.py`'s, the model
`tinymodel.py`'s and the tokenizer `tokenizer.py`'s; `basebuild.py` runs it)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

StepCallback = Callable[[int, int], None]
"""Called with (steps done, steps in all) as pretraining goes."""


class PretrainSpec(Protocol):
    """What the loop reads of a `tinymodel.TinyModelSpec`."""

    @property
    def seed(self) -> int: ...
    @property
    def pretrain_epochs(self) -> float: ...
    @property
    def pretrain_learning_rate(self) -> float: ...
    @property
    def pretrain_batch_size(self) -> int: ...


def pretrain_base(init: Path, rows: list[dict[str, Any]], spec: PretrainSpec,
                  work: Path, on_step: StepCallback | None = None,
                  device: str = "cpu") -> dict[str, Any]:
    """Causal-LM training of the base on the generic episodes, loss on the assistant's
    tokens only (masked as the project's SFT masks them); the model lands in
    `work/policy`.

    A plain loop rather than the SFT trainer: one episode per row, padded, never packed
    (in a packed row the model can copy a name from a neighbouring episode, and measured
    with packing no copying formed in 600 steps); AdamW with beta2 0.98, a short linear
    warm-up, the peak rate held for 70% of the steps (copying forms abruptly, and not
    under an already decayed rate), then a cosine decay to a tenth of it.
    On this 2-core machine 1,000 steps took 668 s against the SFT trainer's 1,118 s
    (challenges/micro/README.md has the figures).
    """
    import torch

    start = time.monotonic()
    # One thread on the CPU: a rebuild on any machine then sums every product in the same
    # order (the thread count splits reductions differently), and on a shared machine one
    # thread loses less to waiting for a descheduled partner than two.
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        return _pretrain_loop(init, rows, spec, work, on_step, device, start)
    finally:
        torch.set_num_threads(threads)


def _pretrain_loop(init: Path, rows: list[dict[str, Any]], spec: PretrainSpec, work: Path,
                   on_step: StepCallback | None, device: str, start: float) -> dict[str, Any]:
    import math

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posttrain_arena.train.sft import tokenize_with_mask

    torch.manual_seed(spec.seed)
    tokenizer = AutoTokenizer.from_pretrained(init)
    model: Any = AutoModelForCausalLM.from_pretrained(init, dtype=torch.float32)
    model.to(device)
    pad = tokenizer.pad_token_id
    encoded = [tokenize_with_mask(tokenizer, r["messages"], r["tools"], max_length=512)
               for r in rows]
    batch = spec.pretrain_batch_size
    steps = max(1, math.ceil(len(encoded) * spec.pretrain_epochs / batch))
    warmup = max(1, steps // 20)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.pretrain_learning_rate,
                            weight_decay=0.0, betas=(0.9, 0.98))
    hold = int(0.7 * steps)

    def lr_factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if step < hold:
            return 1.0
        return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - hold) / max(1, steps - hold)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    gen = torch.Generator().manual_seed(spec.seed)
    order: list[int] = []
    losses: list[float] = []
    tokens = 0
    model.train()
    for _ in range(steps):
        if len(order) < batch:
            order += torch.randperm(len(encoded), generator=gen).tolist()
        picked = [encoded[i] for i in order[:batch]]
        del order[:batch]
        width = max(len(e["input_ids"]) for e in picked)
        ids = torch.full((len(picked), width), pad)
        labels = torch.full((len(picked), width), -100)
        attn = torch.zeros((len(picked), width), dtype=torch.long)
        for k, e in enumerate(picked):
            row = torch.tensor(e["input_ids"])
            n = len(row)
            ids[k, :n], attn[k, :n] = row, 1
            labels[k, :n] = torch.where(torch.tensor(e["assistant_masks"]) == 1, row, -100)
        tokens += int(attn.sum())
        loss = model(input_ids=ids.to(device), attention_mask=attn.to(device),
                     labels=labels.to(device)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if on_step is not None and (len(losses) % 10 == 0 or len(losses) == steps):
            on_step(len(losses), steps)
        if len(losses) % 50 == 0:
            log.info("pretraining step %d/%d: loss %.3f", len(losses), steps,
                     sum(losses[-50:]) / 50)
    policy = work / "policy"
    policy.mkdir(parents=True)
    model.to("cpu").save_pretrained(policy, safe_serialization=True)
    tokenizer.save_pretrained(policy)
    tail = losses[-20:]
    return {"seconds": round(time.monotonic() - start, 1), "steps": steps,
            "threads": torch.get_num_threads(),
            "first_loss": round(losses[0], 4), "last_loss": round(sum(tail) / len(tail), 4),
            "tokens": tokens}
