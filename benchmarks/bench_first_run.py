"""Benchmark: a new user's first `arena demo`, from an empty cache, then a second one.

Both run the demo's library call (`run_demo`, the relevant collection) in this process,
after the Python environment exists: the first with an empty `$ARENA_CACHE_DIR` and an
empty work directory (what a fresh machine has), the second with what the first left.
Each prints its stages' seconds: base (the tiny model: copied when the shipped base is
this code's, else pretrained), the rest of the build, then the pipeline's stages
(baseline, SFT, evaluation after SFT, GRPO, final evaluation; from score.json), beside
the targets of issue #29 (10 minutes for scripts/demo.sh with set-up, 5 for a second
demo). The second run is the baseline of the first: their difference is what the
caches buy.

    .venv/bin/python benchmarks/bench_first_run.py [--seed N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def one_run(label: str, workdir: Path, seed: int | None) -> float:
    from posttrain_arena.challenges.micro.demo import run_demo
    from posttrain_arena.train.stages import StageEvent

    marks: dict[str, float] = {}
    start = time.monotonic()

    def sink(ev: StageEvent) -> None:
        now = time.monotonic() - start
        if ev.stage == "pretrain" and "pretrain" not in marks:
            marks["pretrain"] = now
        if ev.stage == "build" and ev.status in ("start", "done"):
            marks[f"build-{ev.status}"] = now

    result = run_demo(workdir, seed=seed, progress=sink)
    total = time.monotonic() - start
    score = json.loads((Path(result.scores["micro-relevant"].run_dir) / "score.json").read_text())
    build = marks.get("build-done", 0.0) - marks.get("build-start", 0.0)
    report = json.loads((Path(workdir) / "model" / "pretraining.json").read_text())
    pretrained = "pretrain" in marks
    base = f"pretrained here ({report.get('seconds', 0):.0f} s)" if pretrained else "shipped"
    stages = ", ".join(f"{k} {v:.0f}" for k, v in score.get("stage_seconds", {}).items())
    s = result.scores["micro-relevant"]
    print(f"{label}: {total:.0f} s in all; base {base}; build {build:.0f} s; stages: {stages}")
    print(f"{label}: base {100 * s.base_rate:.1f}% -> final {100 * s.final_rate:.1f}%, "
          f"{s.delta_pp:+.1f} pp [{s.ci95_low_pp:+.1f}, {s.ci95_high_pp:+.1f}]")
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=None,
                    help="Challenge seed (default: the protocol's declared one, as arena demo)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the cache and work dir here")
    args = ap.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="bench-first-run-"))
    os.environ["ARENA_CACHE_DIR"] = str(root / "cache")  # empty: a fresh machine's
    cold = one_run("fresh cache", root / "work", args.seed)
    warm = one_run("second run ", root / "work", args.seed)
    print(f"first demo {cold / 60:.1f} min (target with set-up: 10), second {warm / 60:.1f} "
          f"min (target: 5); the caches saved {cold - warm:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
