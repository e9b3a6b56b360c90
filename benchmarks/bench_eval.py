"""Evaluation throughput: the scripted model agent beside a bare oracle replay.

Writes N trivial tasks (write a word to a file), then for -j 1, 2 and 4 evaluates them
with (a) the oracle agent, which just runs solve.sh, and (b) the model agent driven by
the scripted client (one bash call, then submit), on the same runner and sandbox
backend, in the same process. Prints wall-clock per configuration, the ratio
agent / oracle (target <= 1.2x) and the agent loop's own overhead per turn: the agent
phase's time minus the time spent in the model and in shell commands (target < 10 ms).

With `--micro-jobs J` it then evaluates the micro challenge's suite (its tiny pretrained
model, loaded in this process, with the micro recipe's agent settings) at J concurrent
trials, three ways per round, the order reversed every other round: turns batched across
trials (`BatchedGenerator`), the same batcher with a cache that never narrows (as it was
before it cut padding columns when rows leave), and turns generated one at a time under a
lock (the old path); it prints episodes per minute of each, their ratios, and how much of
the cache the batched passes read was padding.

    .venv/bin/python benchmarks/bench_eval.py [--tasks 100] [--backend local]
    .venv/bin/python benchmarks/bench_eval.py --jobs '' --micro-jobs 8
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from posttrain_arena.agents.model import AgentSettings
from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.evaluate.runner import Progress, evaluate, model_agents
from posttrain_arena.evaluate.suite import load_suite
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.trial.result import TrialResult
from posttrain_arena.trial.runner import TrialRunner

TASK_MD = """---
version: "1.0"
metadata:
  author_name: Bench
  author_email: bench@example.com
  category: {domain}
  difficulty: easy
agent:
  timeout_sec: 60
verifier:
  timeout_sec: 60
---

## prompt

Write the word {word} into the file out.txt in the current directory.
"""
VERIFIER = """import pathlib
out = pathlib.Path("/root/out.txt")
ok = out.is_file() and out.read_text().strip() == "{word}"
pathlib.Path("/logs/verifier").mkdir(parents=True, exist_ok=True)
pathlib.Path("/logs/verifier/reward.txt").write_text("1.0" if ok else "0.0")
"""
DOMAINS = ["software-engineering", "cybersecurity", "finance-economics", "office-white-collar",
           "media-content-production", "natural-science"]


def write_tasks(root: Path, n: int) -> None:
    for i in range(n):
        task = root / f"task-{i:03d}"
        word = f"word{i}"
        for sub in ("environment", "verifier", "oracle"):
            (task / sub).mkdir(parents=True)
        (task / "task.md").write_text(TASK_MD.format(domain=DOMAINS[i % len(DOMAINS)],
                                                     word=word))
        (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /root\n")
        (task / "verifier" / "verifier.py").write_text(VERIFIER.format(word=word))
        (task / "oracle" / "solve.sh").write_text(f"#!/bin/bash\necho {word} > out.txt\n")


def script(root: Path, n: int) -> Path:
    lines = ["scripts:"]
    for i in range(n):
        lines += [f"  - match: 'word{i} '",
                  f"    responses: [{{bash: 'echo word{i} > out.txt'}}, {{submit: true}}]"]
    path = root / "script.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--backend", default="local")
    parser.add_argument("--jobs", default="1,2,4")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per side (best kept)")
    parser.add_argument("--micro-jobs", type=int, default=0,
                        help="also compare batched and one-at-a-time generation on the micro "
                        "suite at this many concurrent trials (0: skip)")
    parser.add_argument("--micro-k", type=int, default=1, help="samples per micro task")
    parser.add_argument("--micro-tasks", type=int, default=0,
                        help="evaluate only the first N suite tasks (0: all)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-eval-"))
    write_tasks(root / "suite", args.tasks)
    suite = load_suite(root / "suite")
    model = ScriptedModel.from_file(script(root, args.tasks))
    runner = TrialRunner(args.backend)
    runner.run(suite.tasks[0], OracleAgent())  # build the (shared) image outside the timing

    print(f"{args.tasks} tasks, backend {runner.backend_name}, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'jobs':>4} {'oracle s':>9} {'agent s':>9} {'ratio':>6} {'pass o/a':>9} "
          f"{'loop ms/turn':>13}")
    ok = True
    for jobs in (int(j) for j in args.jobs.split(",") if j):
        # Alternate the two sides and keep each one's best time: other load on the
        # machine then inflates both alike instead of whichever ran during a spike.
        oracle_sec = agent_sec = float("inf")
        infos: list[dict[str, Any]] = []
        for round_ in range(args.repeat):
            # ABBA order: neither side always runs first (warm caches, load spikes).
            for side in ("oracle", "agent") if round_ % 2 == 0 else ("agent", "oracle"):
                t0 = time.perf_counter()
                if side == "oracle":
                    oracle = evaluate(suite, lambda _t: OracleAgent(), jobs=jobs, runner=runner)
                    oracle_sec = min(oracle_sec, time.perf_counter() - t0)
                else:
                    infos.clear()
                    agent = evaluate(suite, model_agents(model), jobs=jobs, runner=runner,
                                     progress=collector(infos))
                    agent_sec = min(agent_sec, time.perf_counter() - t0)
        overhead = loop_overhead_ms(infos)
        ratio = agent_sec / oracle_sec
        ok = ok and ratio <= 1.2 and overhead < 10
        print(f"{jobs:>4} {oracle_sec:>9.2f} {agent_sec:>9.2f} {ratio:>5.2f}x "
              f"{rate(oracle):>4}/{rate(agent):<4} {overhead:>13.3f}")
    if args.jobs:
        print("targets: ratio <= 1.2x, loop overhead < 10 ms/turn:", "met" if ok else "NOT met")
    if args.micro_jobs:
        micro_rows(root / "micro", runner, args.micro_jobs, args.micro_k, args.repeat,
                   args.micro_tasks)
    sys.exit(0)


def micro_rows(workdir: Path, runner: TrialRunner, jobs: int, k: int, repeat: int,
               tasks: int) -> None:
    """Episodes per minute on the micro suite: batched generation vs one at a time."""
    import torch

    from posttrain_arena.challenges.micro.build import build_micro
    from posttrain_arena.evaluate.suite import suite_from_tasks
    from posttrain_arena.models.transformers_local import TransformersChatModel

    torch.set_num_threads(1)  # what the pipeline sets on CPU (runtime.torch_threads = 0)
    built = build_micro(workdir, with_model=True)
    suite = load_suite(Path(built.suite))
    if tasks:
        suite = suite_from_tasks(suite.tasks[:tasks], source=f"micro-first-{tasks}")
    # The micro recipe's [agent] section, as the pipeline turns it into settings.
    settings = AgentSettings(max_turns=3, max_new_tokens=48, max_tokens=3 * 48,
                             temperature=0.7)
    models = {"batched": TransformersChatModel.from_pretrained(built.model, device="cpu"),
              "never narrowed": TransformersChatModel.from_pretrained(built.model,
                                                                      device="cpu"),
              "one-at-a-time": TransformersChatModel.from_pretrained(built.model, device="cpu",
                                                                     max_batch=None)}
    episodes = len(suite.tasks) * k
    best = dict.fromkeys(models, float("inf"))
    for round_ in range(repeat):
        for side in list(models) if round_ % 2 == 0 else list(models)[::-1]:
            t0 = time.perf_counter()
            with _cache_never_narrowed() if side == "never narrowed" else (
                    contextlib.nullcontext()):
                evaluate(suite, model_agents(models[side], settings), k=k, jobs=jobs,
                         runner=runner)
            best[side] = min(best[side], time.perf_counter() - t0)
            load = os.getloadavg()[0]
            print(f"  round {round_} {side:>13}: {time.perf_counter() - t0:6.1f} s "
                  f"(load {load:.1f})", flush=True)
    batcher = models["batched"].batcher
    print(f"micro suite: {episodes} episodes, jobs {jobs}, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (best of {repeat})")
    for side, sec in best.items():
        print(f"  {side:>13}: {60 * episodes / sec:7.1f} episodes/min ({sec:.1f} s)")
    print(f"  batched / one-at-a-time: {best['one-at-a-time'] / best['batched']:.2f}x; "
          f"batched / never narrowed: {best['never narrowed'] / best['batched']:.2f}x; "
          f"mean rows per forward pass {batcher.stats.mean_rows if batcher else 0:.1f}")
    for side in ("batched", "never narrowed"):
        stats = models[side].batcher.stats  # type: ignore[union-attr]
        print(f"  {side:>14}: {stats.padding / stats.cells if stats.cells else 0:.0%} of the "
              "cache cells the passes read were padding")


@contextlib.contextmanager
def _cache_never_narrowed() -> Any:
    """The batcher as it was before it cut padding columns when rows leave (the baseline
    of that change): its cache only widens while requests keep arriving."""
    from posttrain_arena.models import batching

    keep = batching._Rows.trim
    batching._Rows.trim = lambda self: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        batching._Rows.trim = keep  # type: ignore[method-assign]


def collector(out: list[dict[str, Any]]) -> Progress:
    """A progress callback keeping each trial's agent_info."""

    def record(_done: int, _total: int, result: TrialResult) -> None:
        out.append(result.agent_info)

    return record


def rate(report: EvalReport) -> str:
    return f"{100 * (report.overall.pass_rate or 0):.0f}%"


def loop_overhead_ms(infos: list[dict[str, Any]]) -> float:
    """Median over trials of (agent phase - model time - command time) / turns."""
    values = [1000 * (i["agent_sec"] - i["model_sec"] - i["env_sec"]) / i["turns"]
              for i in infos if i.get("turns")]
    return statistics.median(values) if values else float("nan")


if __name__ == "__main__":
    main()
