"""Benchmark: the post-training pipeline on the micro challenge, on this machine.

Prints each stage's wall-clock time, and GRPO rollout throughput (rollouts per minute,
share of episode time in the model vs in the sandbox) beside the same run's baseline
evaluation (trials per minute and the same shares), which is the baseline: both run
the same agent on the same sandboxes, GRPO with the policy being trained.

    .venv/bin/python benchmarks/bench_train.py [--workdir DIR] [--seed N] [--small]

`--small` shrinks the challenge (fewer instances per family) for a quick look.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from posttrain_arena.train.pipeline import run_recipe
from posttrain_arena.train.recipe import load_recipe
from posttrain_arena.train.stages import StageEvent


def _journal_shares(path: Path) -> dict[str, float]:
    """Trials/min and model vs sandbox shares from an evaluation's trial journal."""
    model = env = total = 0.0
    n = 0
    for line in path.read_text().splitlines():
        r = json.loads(line)
        info = r.get("agent_info") or {}
        model += float(info.get("model_sec", 0.0) or 0.0)
        env += float(info.get("env_sec", 0.0) or 0.0)
        total += float((r.get("timings") or {}).get("total", 0.0) or 0.0)
        n += 1
    outside_model = max(0.0, total - model)  # build, sandbox start, commands, verifier
    return {"trials": n, "model_share": model / total if total else 0.0,
            "sandbox_share": outside_model / total if total else 0.0,
            "command_sec": env, "trial_sec": total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=None, help="Where to build the challenge")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--small", action="store_true", help="Fewer instances per family")
    args = ap.parse_args()

    from posttrain_arena.challenges.micro.build import MicroSizes, build_micro

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-train-"))
    sizes = MicroSizes(suite_per_family=2, collection_per_family=6) if args.small else None
    t0 = time.monotonic()
    with contextlib.redirect_stdout(sys.stderr):
        ch = build_micro(workdir, seed=args.seed, sizes=sizes)
    build_sec = time.monotonic() - t0
    recipe = load_recipe(ch.recipes["micro-relevant"])
    run_dir = workdir / "runs" / f"bench-{int(time.time())}"

    starts: dict[str, float] = {}
    timings: dict[str, float] = {}

    def progress(e: StageEvent) -> None:
        if e.status == "start":
            starts[e.stage] = time.monotonic()
        elif e.status == "done":
            timings[e.stage] = time.monotonic() - starts[e.stage]
            print(f"  {e.stage:9} {timings[e.stage]:7.1f} s", file=sys.stderr)

    t0 = time.monotonic()
    with contextlib.redirect_stdout(sys.stderr):
        score = run_recipe(recipe, run_dir=run_dir, resume=False, progress=progress)
    total = time.monotonic() - t0

    base = json.loads((run_dir / "stages" / "baseline" / "done.json").read_text())["summary"]
    shares = _journal_shares(run_dir / "stages" / "baseline" / "journal.jsonl")
    g: dict[str, Any] = score.grpo
    base_rate = shares["trials"] / (base["wall_sec"] / 60) if base.get("wall_sec") else 0.0

    print(f"\nmicro challenge, seed {args.seed}: {ch.sizes.model_dump()}"
          f"  (build {build_sec:.1f} s)")
    print(f"{'stage':10}{'seconds':>10}")
    for name, sec in timings.items():
        print(f"{name:10}{sec:10.1f}")
    print(f"{'total':10}{total:10.1f}")
    print("\nthroughput            rollouts/min   model share   sandbox share")
    print(f"baseline eval (base)  {base_rate:12.1f}   {shares['model_share']:11.0%}"
          f"   {shares['sandbox_share']:13.0%}")
    if g.get("rollouts_per_min"):
        print(f"GRPO rollouts         {g['rollouts_per_min']:12.1f}   "
              f"{g['model_share']:11.0%}   {g['sandbox_share']:13.0%}")
    else:
        print(f"GRPO rollouts         (skipped: {g.get('skipped', 'no rollouts')})")
    if score.change is not None and score.base is not None and score.final is not None:
        print(f"\nheld-out pass rate {score.base.pass_rate:.1%} -> {score.final.pass_rate:.1%}"
              f"  change {score.change.delta_pp:+.1f} pp "
              f"[{score.change.ci95_low_pp:+.1f}, {score.change.ci95_high_pp:+.1f}]"
              f"  p={score.change.p_value:.3g}")


if __name__ == "__main__":
    main()
