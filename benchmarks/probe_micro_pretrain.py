"""Probe of the micro pretraining: does in-context copying form?

Pretrains a tiny base on `pretraining_corpus` (packed sequences, AdamW, assistant tokens
only) and every `--eval-every` steps greedily decodes the 40 held-out suite prompts (run
in a temp dir and checked against the expectation), generic prompts and copy-task
prompts, printing exact/pass counts. Experimental; figures in challenges/micro/README.md.
Usage: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/probe_micro_pretrain.py --steps 600
"""

import argparse
import os
import random
import re
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from posttrain_arena.agents.model import TOOLS, initial_messages
from posttrain_arena.challenges.micro import pretrain as pt
from posttrain_arena.challenges.micro import tinymodel as tm
from posttrain_arena.challenges.micro.build import MicroSizes, plan_instances
from posttrain_arena.train.sft import tokenize_with_mask

torch.set_num_threads(1)
ap = argparse.ArgumentParser()
ap.add_argument("--episodes", type=int, default=6000)
ap.add_argument("--copy-frac", type=float, default=0.5)
ap.add_argument("--steps", type=int, default=600)
ap.add_argument("--layers", type=int, default=2)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--d", type=int, default=128)
ap.add_argument("--lr", type=float, default=3e-3)
ap.add_argument("--bs", type=int, default=8)
ap.add_argument("--seqlen", type=int, default=512)
ap.add_argument("--eval-every", type=int, default=200)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--std", type=float, default=0.02)
ap.add_argument("--vocab", type=int, default=2048)
ap.add_argument("--save", default="")
args = ap.parse_args()
print(vars(args), flush=True)

rows = pt.pretraining_corpus(args.seed, args.episodes, args.copy_frac)
texts = pt.corpus_texts(rows)
print("held-out values in corpus:", pt.held_out_values_in(texts))
tok = tm.build_tokenizer(list(tm.tokenizer_corpus(args.seed)) + texts, args.vocab)
spec = tm.TinyModelSpec(
    hidden_size=args.d,
    intermediate_size=3 * args.d,
    num_layers=args.layers,
    num_heads=args.heads,
    init_std=args.std,
    seed=args.seed,
    vocab_size=args.vocab,
)
model = tm.build_model(tok, spec)
print("params", sum(p.numel() for p in model.parameters()))
# pack
enc = [tokenize_with_mask(tok, r["messages"], r["tools"]) for r in rows]
ids, mask = [], []
for e in enc:
    ids += e["input_ids"]
    mask += e["assistant_masks"]
print("tokens", len(ids), "assistant tokens", sum(mask), flush=True)
ids = torch.tensor(ids)
mask = torch.tensor(mask)
L = args.seqlen
nseq = len(ids) // L
X = ids[: nseq * L].view(nseq, L)
M = mask[: nseq * L].view(nseq, L)

suite = plan_instances(args.seed, MicroSizes())["suite"]
eos = tok.convert_tokens_to_ids(tm.IM_END)


def gen_commands(prompts, max_new=48):
    model.eval()
    outs = []
    tok.padding_side = "left"
    for i in range(0, len(prompts), 20):
        batch = [
            tok.apply_chat_template(
                [m.model_dump(exclude_none=True) for m in initial_messages(p, 120.0)],
                tools=TOOLS,
                tokenize=False,
                add_generation_prompt=True,
            )
            for p in prompts[i : i + 20]
        ]
        b = tok(batch, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            g = model.generate(
                **b,
                max_new_tokens=max_new,
                do_sample=False,
                eos_token_id=eos,
                pad_token_id=tok.pad_token_id,
            )
        for row in g[:, b["input_ids"].shape[1] :]:
            t = tok.decode(row, skip_special_tokens=True)
            m = re.search(r'"command": "(.*?)"\}\}', t)
            outs.append(m.group(1) if m else "<<" + t[:60])
    model.train()
    return outs


def run_ok(inst, cmd):
    with tempfile.TemporaryDirectory() as d:
        for p, body in inst.files.items():
            os.makedirs(os.path.dirname(os.path.join(d, p)) or d, exist_ok=True)
            Path(d, p).write_text(body)
        try:
            subprocess.run(["bash", "-c", cmd], cwd=d, timeout=5, capture_output=True)
        except Exception:
            return False
        e = inst.expect
        def norm(s):
            return " ".join(s.split())
        for p, want in e.files.items():
            fp = os.path.join(d, p)
            if not os.path.isfile(fp) or norm(Path(fp).read_text()) != norm(want):
                return False
        for p in e.absent:
            if os.path.exists(os.path.join(d, p)):
                return False
        for p in e.dirs:
            if not os.path.isdir(os.path.join(d, p)):
                return False
        return all(os.access(os.path.join(d, p), os.X_OK) for p in e.executable)


rng_eval = random.Random("probe-eval")
gen_eval = [g.sample(rng_eval) for g in (pt.GENERIC * 2)]
copy_eval = [g.sample(rng_eval) for g in (pt.COPY * 3)]


def evaluate(step):
    t = time.time()
    cs = gen_commands([i.prompt for i in suite])
    exact = sum(c == i.command for c, i in zip(cs, suite, strict=False))
    passed = sum(run_ok(i, c) for c, i in zip(cs, suite, strict=False))
    gc = gen_commands([p for p, _ in gen_eval])
    gexact = sum(c == w for c, (_, w) in zip(gc, gen_eval, strict=False))
    cc = gen_commands([p for p, _ in copy_eval]) if copy_eval else []
    cexact = sum(c == w for c, (_, w) in zip(cc, copy_eval, strict=False))
    print(
        f"[eval step {step}] suite pass {passed}/{len(suite)} exact {exact}; "
        f"generic exact {gexact}/{len(gen_eval)}; copy exact {cexact}/{len(copy_eval)} "
        f"({time.time() - t:.0f}s)",
        flush=True,
    )
    for c, i in list(zip(cs, suite, strict=False))[::5]:
        print("   ", i.command, "|", c)
    for c, (_p, w) in list(zip(cc, copy_eval, strict=False))[:4]:
        print("   C", w, "|", c)
    for c, (_p, w) in list(zip(gc, gen_eval, strict=False))[:4]:
        print("   G", w, "|", c)
    return passed


opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.98))
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda s: min(1.0, (s + 1) / 30) * max(0.05, 1 - s / args.steps)
)
g = torch.Generator().manual_seed(args.seed)
t0 = time.time()
model.train()
for step in range(1, args.steps + 1):
    idx = torch.randint(0, nseq, (args.bs,), generator=g)
    x = X[idx]
    m = M[idx]
    labels = x.clone()
    labels[m == 0] = -100
    out = model(input_ids=x, labels=labels)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    opt.zero_grad()
    if step % 25 == 0:
        print(f"step {step} loss {out.loss.item():.3f} {time.time() - t0:.0f}s", flush=True)
    if step % args.eval_every == 0 or step == args.steps:
        evaluate(step)
print("train seconds", time.time() - t0)
if args.save:
    model.save_pretrained(args.save)
    tok.save_pretrained(args.save)
