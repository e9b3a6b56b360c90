"""Batch-invariant decoding (models/invariant.py) beside the plain batched path.

A random model of the micro challenge's shape (TinyModelSpec's defaults: width 128,
4 layers, 2,048 tokens) decodes the same requests through a `BatchedGenerator` with
rows computed as if alone and with the plain kernels, alternating the order each round
in the same process. It prints tokens per second of each and their ratio, for a
decode-heavy load (short prompts, long answers) and a prefill-heavy one (long prompts).

    .venv/bin/python benchmarks/bench_batching.py [--rows 8] [--rounds 3]
    .venv/bin/python benchmarks/bench_batching.py --model ~/.cache/posttrain-arena/micro-base/HASH

With `--model`, a real model folder (the micro base) decodes the model agent's first
turn of `--rows` different prompts at the micro recipe's sampling (48 new tokens,
temperature 0.7), one thread as the pipeline runs it.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from posttrain_arena.models.base import SamplingParams
from posttrain_arena.models.batching import BatchedGenerator


def model() -> Any:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=2048, hidden_size=128, intermediate_size=384,
                         num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=2048, attn_implementation="sdpa")
    return Qwen2ForCausalLM(config).eval()


def run(lm: Any, invariant: bool, prompts: list[list[int]], new: int,
        temperature: float = 1.0) -> float:
    """Tokens per second of every prompt decoded to `new` tokens (no end token)."""
    batcher = BatchedGenerator(lm, eos_ids=[-1], pad_id=0, max_batch=len(prompts),
                               gather_sec=0.2)
    batcher.invariant = invariant
    sampling = SamplingParams(temperature=temperature, max_new_tokens=new, seed=0)
    threads = [threading.Thread(target=batcher.generate, args=(p, sampling)) for p in prompts]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rate = len(prompts) * new / (time.perf_counter() - t0)
    while batcher._worker is not None:  # let the idle worker exit before the next run
        time.sleep(0.1)
    return rate


def real_prompts(folder: str, rows: int) -> tuple[Any, list[list[int]]]:
    from posttrain_arena.agents.model import TOOLS, initial_messages
    from posttrain_arena.models.transformers_local import TransformersChatModel

    chat = TransformersChatModel.from_pretrained(folder, device="cpu")
    prompts = []
    for i in range(rows):
        messages = [{"role": m.role, "content": m.content} for m in initial_messages(
            f"Print line {i + 3} of notes{i}.txt into answer.txt, nothing else.", 120)]
        prompts.append(chat.prompt_ids(messages, TOOLS))
    return chat.model, prompts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default=None, help="a model folder (the micro base)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # what the pipeline sets on CPU (runtime.torch_threads = 0)
    if args.model:
        lm, prompts = real_prompts(args.model, args.rows)
        rates: dict[bool, list[float]] = {True: [], False: []}
        for r in range(args.rounds):
            for invariant in ((True, False) if r % 2 == 0 else (False, True)):
                rates[invariant].append(run(lm, invariant, prompts, 48, temperature=0.7))
        inv, plain = statistics.median(rates[True]), statistics.median(rates[False])
        print(f"{args.model}: {args.rows} first turns, row-invariant {inv:,.0f} tok/s, "
              f"plain {plain:,.0f} tok/s, ratio {inv / plain:.2f}x (median of {args.rounds})")
        return
    lm = model()
    gen = torch.Generator().manual_seed(1)
    loads = {"decode (prompts 40-120, 128 new)": ([40 + 10 * i for i in range(args.rows)], 128),
             "prefill (prompts 400-900, 8 new)": ([400 + 60 * i for i in range(args.rows)], 8)}
    for label, (lengths, new) in loads.items():
        prompts = [torch.randint(1, 2048, (n,), generator=gen).tolist() for n in lengths]
        rates: dict[bool, list[float]] = {True: [], False: []}
        for r in range(args.rounds):
            for invariant in ((True, False) if r % 2 == 0 else (False, True)):
                rates[invariant].append(run(lm, invariant, prompts, new))
        inv, plain = statistics.median(rates[True]), statistics.median(rates[False])
        print(f"{label}: row-invariant {inv:,.0f} tok/s, plain {plain:,.0f} tok/s, "
              f"ratio {inv / plain:.2f}x ({args.rows} rows, median of {args.rounds})")


if __name__ == "__main__":
    main()
