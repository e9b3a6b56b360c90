"""The GPU check's Python part: the whole recipe on CUDA, at a size that fits 8 minutes.

Builds a micro challenge (generated suite and collection, real task packages) and a
model of a few hundred million parameters from nothing (the micro tokenizer, a
Qwen2-style config, random init, bf16), then runs the project's own pipeline on it:
baseline evaluation, oracle teacher, SFT, a few GRPO steps with in-process generation,
final evaluation, score. Prints tokens per second, rollouts per minute, peak GPU
memory and seconds per stage; exits non-zero when anything fails.

    python scripts/gpu_check.py [--device cuda] [--layers 24] [--hidden 1024] [--work DIR]

`--device cpu --layers 2 --hidden 64` is the CPU smoke of this script (it checks the
plumbing, not the GPU; tests/scripts/test_gpu_check.py runs it).

The base is not pretrained by default (`--pretrain-episodes 0`): the check measures
throughput and the pipeline's plumbing, not learning, and pretraining a model of this
size is hours of work. With episodes, the base is pretrained on `--device`. Beside the
pipeline's evaluation throughput it prints a bare `generate` loop's on the same model,
device and dtype (batch 8, the same completion length), so the pipeline's figure reads
as a share of what the model alone does.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--sft-epochs", type=int, default=3)
    ap.add_argument("--grpo-steps", type=int, default=3)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--pretrain-episodes", type=int, default=0,
                    help="generic shell episodes to pretrain the base on (default 0: a "
                    "random-weight base; the check measures throughput, not learning)")
    args = ap.parse_args()

    import torch

    from posttrain_arena.challenges.micro.build import RELEVANT, MicroSizes, build_micro
    from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec
    from posttrain_arena.train.pipeline import run_recipe
    from posttrain_arena.train.recipe import load_recipe

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu-check: FAIL: torch sees no CUDA device", file=sys.stderr)
        return 1
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    t0 = time.monotonic()
    spec = TinyModelSpec(hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
                         num_layers=args.layers, num_heads=max(1, args.hidden // 64), seed=0,
                         pretrain_episodes=args.pretrain_episodes)
    ch = build_micro(work, seed=0, model_spec=spec, device=args.device,
                     sizes=MicroSizes(suite_per_family=2, collection_per_family=4))
    build_sec = time.monotonic() - t0
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(ch.model)
    n_params = _params(cfg)
    base = load_recipe(ch.recipes[RELEVANT])
    recipe = base.model_copy(update={
        "model": base.model.model_copy(update={"dtype": "bfloat16" if args.device != "cpu"
                                               else "float32"}),
        "sft": base.sft.model_copy(update={"epochs": args.sft_epochs}),
        "grpo": base.grpo.model_copy(update={"steps": args.grpo_steps, "tasks_per_step": 2}),
        "runtime": base.runtime.model_copy(update={"device": "cpu" if args.device == "cpu"
                                                   else "cuda", "k": 1}),
    })
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    score = run_recipe(recipe, run_dir=work / "run", resume=False)
    stages = work / "run" / "stages"
    evals = [json.loads((stages / s / "eval.json").read_text()) for s in ("baseline", "final")]
    tokens = sum(e["completion_tokens"] for e in evals)
    gen_sec = sum(e["wall_sec"] for e in evals)
    grpo = json.loads((stages / "grpo" / "metrics.json").read_text())
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else 0.0
    print(f"gpu-check: model {n_params / 1e6:.1f}M parameters "
          f"({args.layers} layers, d={args.hidden}) on {args.device}")
    pipeline_tps = tokens / gen_sec if gen_sec else 0.0
    print(f"gpu-check: evaluation tokens/s {pipeline_tps:.1f} "
          f"({tokens} tokens over the baseline and final evaluations)")
    trials = sum(len(e.get("trials", [])) for e in evals)
    bare_tps = _bare_generate(Path(ch.model), args.device, recipe.model.dtype,
                              max(8, tokens // max(1, trials)))
    print(f"gpu-check: bare generate tokens/s {bare_tps:.1f} (same model, batch 8); the "
          f"pipeline's evaluation reaches {pipeline_tps / bare_tps if bare_tps else 0:.2f} "
          "of it")
    rpm = grpo.get("rollouts_per_min")
    print(f"gpu-check: GRPO rollouts/min {rpm if rpm is None else round(rpm, 1)} "
          f"({grpo.get('episodes')} episodes)")
    print(f"gpu-check: peak GPU memory {peak:.2f} GiB")
    print(f"gpu-check: seconds per stage: build {build_sec:.1f}, " + ", ".join(
        f"{k} {v:.1f}" for k, v in score.stage_seconds.items()))
    delta = score.change.delta_pp if score.change else None
    print(f"gpu-check: held-out change {delta} pp (not a learning target at this size "
          "and budget)")
    if score.status != "scored":
        print(f"gpu-check: FAIL: the run ended {score.status}", file=sys.stderr)
        return 1
    print("gpu-check: OK")
    return 0


def _bare_generate(model_dir: Path, device: str, dtype: str, new_tokens: int) -> float:
    """Tokens per second of `generate` alone on the base model: batch 8 of the agent's
    first prompt, `new_tokens` each (end-of-turn ignored, so every row is that long)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posttrain_arena.agents.model import SYSTEM_PROMPT, TOOLS

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype))
    model = model.to(device).eval()
    msgs = [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "Sort the lines of notes.txt and write them to out.txt."}]
    ids = tok.apply_chat_template(msgs, tools=TOOLS, add_generation_prompt=True,
                                  return_tensors="pt", return_dict=True)["input_ids"]
    batch = ids.repeat(8, 1).to(device)
    with torch.no_grad():
        model.generate(batch, max_new_tokens=4, do_sample=False)  # warm-up
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.monotonic()
        out = model.generate(batch, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=True, temperature=0.7)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    made = (out.shape[1] - batch.shape[1]) * out.shape[0]
    return made / (time.monotonic() - start)


def _params(cfg: object) -> int:
    """Parameters of a Qwen2-style config (embeddings tied)."""
    d = int(cfg.hidden_size)  # type: ignore[attr-defined]
    i = int(cfg.intermediate_size)  # type: ignore[attr-defined]
    layers = int(cfg.num_hidden_layers)  # type: ignore[attr-defined]
    vocab = int(cfg.vocab_size)  # type: ignore[attr-defined]
    return layers * (4 * d * d + 3 * d * i) + vocab * d


if __name__ == "__main__":
    sys.exit(main())
