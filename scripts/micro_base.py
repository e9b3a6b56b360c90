"""Build the micro base model that ships with the package, or rebuild it and compare.

    python scripts/micro_base.py build [--out DIR] [--spec JSON]
    python scripts/micro_base.py check [--against DIR] [--spec JSON]

`build` makes the base from nothing with the project's own code (tokenizer, random init,
pretraining on the generic shell corpus, on the CPU) into DIR, by default the package's
`challenges/micro/base/` (what `arena demo` copies instead of pretraining). `check`
builds it again into a temporary directory and compares it with DIR (default: the
shipped base): "identical" when every tensor is equal bit for bit; otherwise it prints
each differing tensor's largest difference and a probe (the greedy first command of 16
generic requests, and the largest logit difference over their prompts) and passes only
when every probe command is the same and no logit differs by more than 1e-3. It exits 1
when the bases differ beyond that, 2 when DIR's key is not the rebuild's (the corpus,
spec or procedure changed since it was built: run `build` and check the result in).

`--spec` takes a TinyModelSpec as JSON (e.g. '{"num_layers": 1, "pretrain_episodes":
64}'): a reduced base, for the test suite's cheap version of this check. The default
build takes 15-25 minutes on two CPU cores.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

LOGIT_TOLERANCE = 1e-3
PROBES = 16


def _spec(text: str | None):  # type: ignore[no-untyped-def]
    from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec

    return TinyModelSpec.model_validate_json(text) if text else TinyModelSpec()


def build(out: Path, spec_json: str | None) -> int:
    from posttrain_arena.challenges.micro.basebuild import write_tiny_model

    start = time.monotonic()
    last = [start]

    def step(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 30 or done == total:
            last[0] = now
            eta = (now - start) / done * (total - done)
            print(f"micro-base: pretraining step {done}/{total}, {now - start:.0f} s, "
                  f"about {eta:.0f} s left", flush=True)

    write_tiny_model(out, _spec(spec_json), cache=False, on_step=step)
    report = json.loads((out / "pretraining.json").read_text())
    print(f"micro-base: built {report['key']} in {time.monotonic() - start:.0f} s -> {out}")
    return 0


def _probe_prompts() -> list[str]:
    from posttrain_arena.challenges.micro.generic_tasks import GENERIC

    rng = random.Random("micro-base-probe")
    return [GENERIC[i % len(GENERIC)].sample(rng)[0] for i in range(PROBES)]


def _probe(model_dir: Path) -> tuple[list[str], list[object]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posttrain_arena.agents.model import SYSTEM_PROMPT, TOOLS

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    texts, logits = [], []
    for prompt in _probe_prompts():
        msgs = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
        ids = tok.apply_chat_template(msgs, tools=TOOLS, add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)["input_ids"]
        with torch.no_grad():
            logits.append(model(ids).logits[0])
            out = model.generate(ids, max_new_tokens=48, do_sample=False)
        texts.append(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
    return texts, logits


def compare(a: Path, b: Path) -> tuple[bool, str]:
    """(within tolerance, what differs) of two base model directories."""
    from safetensors.torch import load_file

    ta, tb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    if ta.keys() != tb.keys():
        return False, f"different tensors: {sorted(ta.keys() ^ tb.keys())}"
    differ = {k: float((ta[k] - tb[k]).abs().max()) for k in ta if not ta[k].equal(tb[k])}
    tok_same = (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    if not differ and tok_same:
        return True, "identical: every tensor and the tokenizer are equal bit for bit"
    if not tok_same:
        return False, "the tokenizers differ"
    lines = [f"{len(differ)} of {len(ta)} tensors differ; largest difference "
             f"{max(differ.values()):.3g} ({max(differ, key=differ.__getitem__)})"]
    texts_a, logits_a = _probe(a)
    texts_b, logits_b = _probe(b)
    same = sum(x == y for x, y in zip(texts_a, texts_b, strict=True))
    worst = max(float((x - y).abs().max()) for x, y in zip(logits_a, logits_b, strict=True))  # type: ignore[operator]
    lines.append(f"probe: {same}/{PROBES} greedy commands the same, largest logit "
                 f"difference {worst:.3g} (tolerance {LOGIT_TOLERANCE})")
    return same == PROBES and worst <= LOGIT_TOLERANCE, "; ".join(lines)


def check(against: Path, spec_json: str | None) -> int:
    with tempfile.TemporaryDirectory(prefix="micro-base-check-") as tmp:
        out = Path(tmp) / "rebuilt"
        build(out, spec_json)
        key_new = json.loads((out / "pretraining.json").read_text())["key"]
        key_old = json.loads((against / "pretraining.json").read_text())["key"]
        if key_new != key_old:
            print(f"micro-base: {against} was built from key {key_old}, the code now makes "
                  f"{key_new}: run `python scripts/micro_base.py build` and check it in",
                  file=sys.stderr)
            return 2
        ok, what = compare(against, out)
    print(f"micro-base: {'PASS' if ok else 'FAIL'}: {what}")
    return 0 if ok else 1


def main() -> int:
    from posttrain_arena.challenges.micro.shipped import shipped_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the base from nothing")
    b.add_argument("--out", type=Path, default=shipped_dir())
    b.add_argument("--spec", help="a TinyModelSpec as JSON (default: the default spec)")
    c = sub.add_parser("check", help="rebuild the base and compare it with DIR")
    c.add_argument("--against", type=Path, default=shipped_dir())
    c.add_argument("--spec", help="a TinyModelSpec as JSON (default: the default spec)")
    args = ap.parse_args()
    if args.cmd == "build":
        return build(args.out, args.spec)
    return check(args.against, args.spec)


if __name__ == "__main__":
    sys.exit(main())
