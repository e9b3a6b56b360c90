"""Probe of the micro base model: what does pretraining teach it?

Builds the micro base model with the project's own code (`write_tiny_model`: tokenizer,
random init, pretraining through `run_sft` on `pretraining_corpus`), or loads one with
`--model DIR`, then greedily decodes three prompt sets and prints how many commands it
gets right:

- the 40 held-out suite prompts of `--seed` (each command run in a temp dir and checked
  against the instance's expected final state: what the baseline evaluation measures,
  without the sandbox);
- generic pretraining tasks and copy tasks with fresh names (exact command).

Usage:
  .venv/bin/python benchmarks/probe_micro_pretrain.py --episodes 16000 --epochs 2
  .venv/bin/python benchmarks/probe_micro_pretrain.py --model /tmp/work/model
Figures are in challenges/micro/README.md.
"""

import argparse
import logging
import os
import random
import re
import subprocess
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from posttrain_arena.agents.model import TOOLS, initial_messages
from posttrain_arena.challenges.micro.basebuild import write_tiny_model
from posttrain_arena.challenges.micro.build import MicroSizes, plan_instances
from posttrain_arena.challenges.micro.generic_tasks import COPY, GENERIC
from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec
from posttrain_arena.challenges.micro.tokenizer import IM_END

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="", help="Evaluate this model directory (no build)")
ap.add_argument("--episodes", type=int, default=TinyModelSpec().pretrain_episodes)
ap.add_argument("--epochs", type=float, default=TinyModelSpec().pretrain_epochs)
ap.add_argument("--lr", type=float, default=TinyModelSpec().pretrain_learning_rate)
ap.add_argument("--layers", type=int, default=TinyModelSpec().num_layers)
ap.add_argument("--std", type=float, default=TinyModelSpec().init_std)
ap.add_argument("--seed", type=int, default=0, help="Challenge seed (suite and model)")
ap.add_argument("--save", default="", help="Keep the built model here")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--samples", type=int, default=0,
                help="Also sample each suite prompt this many times (at --temperature)")
ap.add_argument("--temperature", type=float, default=0.7)
args = ap.parse_args()
torch.set_num_threads(args.threads)
print(vars(args), flush=True)
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

suite = plan_instances(args.seed, MicroSizes())["suite"]
if args.model:
    model_dir = Path(args.model)
else:
    spec = TinyModelSpec(seed=args.seed, pretrain_episodes=args.episodes,
                         pretrain_epochs=args.epochs, pretrain_learning_rate=args.lr,
                         num_layers=args.layers, init_std=args.std)
    model_dir = Path(args.save or tempfile.mkdtemp(prefix="micro-probe-")) / "model"
    t0 = time.time()
    write_tiny_model(model_dir, spec, cache=False,
                     forbidden=[t for i in suite for t in (i.prompt, i.command)])
    print(f"built in {time.time() - t0:.0f}s: {(model_dir / 'pretraining.json').read_text()}",
          flush=True)
tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
eos = tok.convert_tokens_to_ids(IM_END)


def gen_commands(prompts: list[str], max_new: int = 48, sample: bool = False) -> list[str]:
    outs = []
    tok.padding_side = "left"
    for i in range(0, len(prompts), 20):
        batch = [tok.apply_chat_template(
            [m.model_dump(exclude_none=True) for m in initial_messages(p, 120.0)],
            tools=TOOLS, tokenize=False, add_generation_prompt=True)
            for p in prompts[i: i + 20]]
        b = tok(batch, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            extra = {"do_sample": True, "temperature": args.temperature} if sample else {
                "do_sample": False}
            g = model.generate(**b, max_new_tokens=max_new, eos_token_id=eos,
                               pad_token_id=tok.pad_token_id, **extra)
        for row in g[:, b["input_ids"].shape[1]:]:
            t = tok.decode(row, skip_special_tokens=True)
            m = re.search(r'"command": "(.*?)"\}\}', t)
            outs.append(m.group(1) if m else "<<" + t[:60])
    return outs


def run_ok(inst, cmd: str) -> bool:
    """Does `cmd`, run on the instance's seed files, leave the expected final state?"""
    with tempfile.TemporaryDirectory() as d:
        for p, body in inst.files.items():
            os.makedirs(os.path.dirname(os.path.join(d, p)) or d, exist_ok=True)
            Path(d, p).write_text(body)
        try:
            subprocess.run(["bash", "-c", cmd], cwd=d, timeout=5, capture_output=True)
        except Exception:
            return False
        e = inst.expect

        def norm(s: str) -> str:
            return " ".join(s.split())
        for p, want in e.files.items():
            fp = os.path.join(d, p)
            if not os.path.isfile(fp) or norm(Path(fp).read_text()) != norm(want):
                return False
        if any(os.path.exists(os.path.join(d, p)) for p in e.absent):
            return False
        if not all(os.path.isdir(os.path.join(d, p)) for p in e.dirs):
            return False
        return all(os.access(os.path.join(d, p), os.X_OK) for p in e.executable)


rng_eval = random.Random("probe-eval")
gen_eval = [g.sample(rng_eval) for g in (GENERIC * 2)]
copy_eval = [g.sample(rng_eval) for g in (COPY * 3)]
t = time.time()
cs = gen_commands([i.prompt for i in suite])
exact = sum(c == i.command for c, i in zip(cs, suite, strict=True))
passed = [i.family for c, i in zip(cs, suite, strict=True) if run_ok(i, c)]
gc = gen_commands([p for p, _ in gen_eval])
gexact = sum(c == w for c, (_, w) in zip(gc, gen_eval, strict=True))
cc = gen_commands([p for p, _ in copy_eval])
cexact = sum(c == w for c, (_, w) in zip(cc, copy_eval, strict=True))
print(f"suite pass {len(passed)}/{len(suite)} (exact {exact}; families "
      f"{sorted(set(passed))}); generic exact {gexact}/{len(gen_eval)}; "
      f"copy exact {cexact}/{len(copy_eval)} ({time.time() - t:.0f}s)")
if args.samples:
    torch.manual_seed(0)
    many = [i for i in suite for _ in range(args.samples)]
    sampled = gen_commands([i.prompt for i in many], sample=True)
    ok = sum(run_ok(i, c) for c, i in zip(sampled, many, strict=True))
    print(f"suite sampled (k={args.samples}, T={args.temperature}): {ok}/{len(many)} pass "
          f"(first command only)")
for c, i in list(zip(cs, suite, strict=True))[::5]:
    print("   S", i.command, "|", c)
for c, (_p, w) in list(zip(cc, copy_eval, strict=True))[:4]:
    print("   C", w, "|", c)
for c, (_p, w) in list(zip(gc, gen_eval, strict=True))[:4]:
    print("   G", w, "|", c)
