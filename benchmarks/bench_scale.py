"""Benchmark: an evaluation through the thread executor and through Ray, same run.

Part 1, overhead: N trials (default 200: `--tasks` tasks x `--k` seeds) of the oracle
agent on the local (bubblewrap) backend, at the same concurrency, through
  * the thread executor (the baseline: trials in this process), and
  * the Ray executor on a one-machine Ray with that many sandbox slots.
It prints trials per minute for both and the Ray executor's overhead per trial:
(Ray wall - thread wall) / N, and as a share of the thread pool's per-trial time.
Target: under 10%.

Part 2, scaling in simulation: trials that mostly wait (the agent sleeps `--wait`
seconds, as a model call would), on a `ray.cluster_utils.Cluster` with one worker node,
then with two, each offering `--slots` sandbox slots. Trials per minute should grow with
the nodes (on one machine the nodes share its CPUs, so only waiting trials can show it).

Part 3, with `--vllm` (or `--vllm-only`): the policy served by vLLM against the same
model in this process. The micro challenge's tiny model (random weights, built here,
nothing downloaded) and `--vllm-tasks` generated micro tasks (held-out pools, one family
after another); the model agent, greedy, with the micro recipe's turn limits, at
`--vllm-jobs` concurrent trials on the local backend, through
  * the in-process model (the baseline: an `hf:` agent spec, one TransformersChatModel
    whose turns of concurrent trials are generated together, models/batching.py; torch
    on one thread, as the pipeline sets it on CPU), and
  * one vLLM server on loopback (an `openai:` agent spec with its endpoint, as
    `[runtime] policy_endpoint` builds it), started once before anything is timed.
Both take turns (ABBA over `--vllm-reps` rounds) after one untimed warm-up each; it
prints episodes per minute of each, their ratio (per round, the two runs side by side,
and of the medians), the load after every run, the cores each computes on, and the
server's start time apart (not in the throughput). Greedy decoding gives both paths the
same tokens, so they do the same work: the completion tokens of each are printed and
checked equal. vLLM runs in its own environment (scripts/vllm-env.sh; it installs it
once per machine when it is missing, about 6 minutes). Measured on the 2-core CI machine
(load 15-19, shared), 32 episodes at concurrency 4: vLLM x1.43-1.50 the in-process
episodes per minute in each of 4 rounds (40.4 against 27.6), server start 258 s. vLLM
computes on one core and reserves the other (its default here); the in-process model has
one torch thread but shares the GIL with the trials' own threads.

Every image is built before anything is timed. Results are checked: every trial must
have scored (a benchmark of failures measures nothing).

    .venv/bin/python benchmarks/bench_scale.py [--tasks 20] [--k 10] [--jobs 4]
        [--reps 3] [--wait 2] [--slots 2] [--scale-trials 24]
        [--vllm | --vllm-only] [--vllm-tasks 8] [--vllm-k 1] [--vllm-jobs 4] [--vllm-reps 2]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from posttrain_arena.agents.spec import AgentSpec
from posttrain_arena.evaluate.report import EvalReport
from posttrain_arena.evaluate.runner import evaluate
from posttrain_arena.evaluate.suite import Suite, load_suite
from posttrain_arena.trial.executor import ThreadExecutor, TrialExecutor
from posttrain_arena.trial.runner import TrialRunner

STORE = 100 * 1024 * 1024

TASK_MD = """---
version: "1.0"
metadata:
  author_name: Bench
  author_email: bench@example.com
  category: software-engineering
  difficulty: easy
agent:
  timeout_sec: {timeout}
verifier:
  timeout_sec: 60
---

## prompt

Write the word {word} into the file out.txt in the current directory.
"""

VERIFIER = """\
import pathlib
out = pathlib.Path("/root/out.txt")
ok = out.is_file() and out.read_text().strip() == "{word}"
pathlib.Path("/logs/verifier").mkdir(parents=True, exist_ok=True)
pathlib.Path("/logs/verifier/reward.txt").write_text("1.0" if ok else "0.0")
"""


def write_suite(root: Path, n: int, *, word: str = "alpha") -> Suite:
    """n distinct tasks (their time limits differ, so do their checksums)."""
    for i in range(n):
        task = root / f"t{i:03d}"
        for sub in ("environment", "verifier", "oracle"):
            (task / sub).mkdir(parents=True)
        (task / "task.md").write_text(TASK_MD.format(timeout=300 + i, word=word))
        (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /root\n")
        (task / "verifier" / "verifier.py").write_text(VERIFIER.format(word=word))
        (task / "oracle" / "solve.sh").write_text(f"#!/bin/bash\necho {word} > out.txt\n")
    return load_suite(root)


def timed(suite: Suite, agent: AgentSpec, k: int, executor: TrialExecutor,
          jobs: int) -> tuple[float, EvalReport]:
    t0 = time.monotonic()
    report = evaluate(suite, lambda task: agent, k=k, jobs=jobs, executor=executor)
    wall = time.monotonic() - t0
    bad = [t for t in report.trials if not t.passed]
    if bad:
        sys.exit(f"benchmark invalid: {len(bad)} trial(s) did not score, e.g. "
                 f"{bad[0].outcome}: {bad[0].reason}")
    return wall, report


def cpu_seconds() -> float:
    """CPU time (user + system) of this process, its reaped children, and every live
    descendant with its own reaped children: the driver, and, for a Ray this process
    started, its GCS, raylet and worker processes and the sandboxes under them."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    for proc in psutil.Process().children(recursive=True):
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue  # gone meanwhile: its time is in its parent's reaped children
        total += t.user + t.system + t.children_user + t.children_system
    return total


def with_ray(start: Callable[[], object], body: Callable[[], None]) -> None:
    import ray

    handle = start()
    try:
        body()
    finally:
        ray.shutdown()
        shutdown = getattr(handle, "shutdown", None)
        if shutdown is not None:
            shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=4, help="concurrency of both executors")
    ap.add_argument("--reps", type=int, default=3, help="part 1: interleaved repetitions")
    ap.add_argument("--wait", type=float, default=2.0, help="part 2: agent sleep, seconds")
    ap.add_argument("--slots", type=int, default=2, help="part 2: sandbox slots per node")
    ap.add_argument("--scale-trials", type=int, default=24, help="part 2: trials per run")
    ap.add_argument("--no-warm-pool", action="store_true", help="start every session cold "
                    "(both executors): the warm pool is per process, so Ray's worker "
                    "processes share it less than the thread pool's one runner does")
    ap.add_argument("--skip-scale", action="store_true", help="part 1 only")
    ap.add_argument("--vllm", action="store_true", help="also part 3: vLLM against the "
                    "in-process model (needs vLLM's environment, scripts/vllm-env.sh)")
    ap.add_argument("--vllm-only", action="store_true", help="part 3 alone")
    ap.add_argument("--vllm-tasks", type=int, default=8, help="part 3: generated micro tasks")
    ap.add_argument("--vllm-k", type=int, default=1, help="part 3: seeds per task")
    ap.add_argument("--vllm-jobs", type=int, default=4,
                    help="part 3: concurrent trials of both paths")
    ap.add_argument("--vllm-reps", type=int, default=2,
                    help="part 3: rounds (each runs both paths, ABBA order)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    os.environ.setdefault("ARENA_CACHE_DIR", str(tmp / "cache"))
    if not args.vllm_only:
        ray_parts(args, tmp)
    if args.vllm or args.vllm_only:
        vllm_part(args, tmp)


def ray_parts(args: argparse.Namespace, tmp: Path) -> None:
    """Parts 1 and 2: the Ray executor against the thread pool, and Ray's scaling."""
    import ray
    from ray.cluster_utils import Cluster

    from posttrain_arena.distributed.ray_executor import SLOT_RESOURCE, RayExecutor

    warm = not args.no_warm_pool
    suite = write_suite(tmp / "suite", args.tasks)
    oracle = AgentSpec(kind="oracle")
    n = args.tasks * args.k
    figures: dict[str, list[tuple[float, float]]] = {"thread": [], "ray": []}

    def ray_part1() -> None:
        # Both executors live side by side and take turns (thread, ray, thread, ...), so
        # the machine's load, which drifts, weighs on both alike.
        runner = TrialRunner("local", warm_pool=warm)
        thread = ThreadExecutor(runner, slots=args.jobs)
        ex = RayExecutor(backend="local", warm_pool=warm)  # as the thread pool's runner
        try:
            timed(suite, oracle, 1, thread, args.jobs)  # builds every image
            timed(suite, oracle, 1, ex, args.jobs)  # warm: workers started, packages sent
            for _ in range(args.reps):
                for name, executor in (("thread", thread), ("ray", ex)):
                    cpu0 = cpu_seconds()
                    wall, _ = timed(suite, oracle, args.k, executor, args.jobs)
                    figures[name].append((wall, cpu_seconds() - cpu0))
        finally:
            ex.close()
            runner.close()

    load = os.getloadavg()
    with_ray(lambda: ray.init(address="local", resources={SLOT_RESOURCE: args.jobs},
                              num_cpus=args.jobs,
                              object_store_memory=STORE, include_dashboard=False,
                              log_to_driver=False), ray_part1)
    load_after = os.getloadavg()
    print(f"part 1: {n} oracle trials x {args.reps} interleaved repetitions, local backend, "
          f"concurrency {args.jobs}, warm pool {'on' if warm else 'off'}; load average "
          f"{load[0]:.1f} before, {load_after[0]:.1f} after")
    for name, runs in figures.items():
        walls = ", ".join(f"{w:.1f}" for w, _ in runs)
        print(f"  {name:6} wall s per repetition: {walls}")
    paired = [r / t - 1 for (t, _), (r, _) in zip(figures["thread"], figures["ray"], strict=True)]
    print("  ray against the thread run just before it: "
          + ", ".join(f"{100 * p:+.1f}%" for p in paired)
          + f"  (median {100 * statistics.median(paired):+.1f}%)")
    t_wall = statistics.median(w for w, _ in figures["thread"])
    r_wall = statistics.median(w for w, _ in figures["ray"])
    t_cpu = statistics.median(c for _, c in figures["thread"])
    r_cpu = statistics.median(c for _, c in figures["ray"])
    per_thread = t_wall / n
    overhead = (r_wall - t_wall) / n
    print(f"  thread executor (baseline): {t_wall:7.1f} s  {60 * n / t_wall:7.1f} trials/min  "
          f"cpu {1000 * t_cpu / n:6.0f} ms/trial (median)")
    print(f"  ray executor, one machine : {r_wall:7.1f} s  {60 * n / r_wall:7.1f} trials/min  "
          f"cpu {1000 * r_cpu / n:6.0f} ms/trial (median)")
    print(f"  ray overhead per trial    : {1000 * overhead:+7.1f} ms wall "
          f"({100 * overhead / per_thread:+.1f}% of the thread pool's {1000 * per_thread:.0f} "
          f"ms per trial; target < 10%), {1000 * (r_cpu - t_cpu) / n:+.0f} ms cpu "
          f"({100 * (r_cpu - t_cpu) / t_cpu:+.1f}%)")

    if args.skip_scale:
        return
    script = tmp / "wait.sh"
    script.write_text(f"sleep {args.wait}\necho alpha > out.txt\n")
    waiting = AgentSpec(kind="script", script=str(script))
    wait_suite = write_suite(tmp / "wait-suite", args.scale_trials)
    rates: dict[int, float] = {}
    for nodes in (1, 2):
        def part2(nodes: int = nodes) -> None:
            ex = RayExecutor(backend="local", warm_pool=warm)
            timed(wait_suite, oracle, 1, ex, ex.slots)  # warm every node
            wall, _ = timed(wait_suite, waiting, 1, ex, ex.slots)
            rates[nodes] = 60 * args.scale_trials / wall

        def start(nodes: int = nodes) -> Cluster:
            cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False})
            for _ in range(nodes):
                cluster.add_node(num_cpus=args.slots, object_store_memory=STORE,
                                 resources={SLOT_RESOURCE: args.slots})
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False)
            return cluster

        with_ray(start, part2)
    print(f"part 2: {args.scale_trials} trials waiting {args.wait:g} s each, "
          f"{args.slots} slots per node, fake cluster on one machine")
    for nodes, rate in rates.items():
        print(f"  {nodes} worker node(s): {rate:7.1f} trials/min")
    print(f"  growth 1 -> 2 nodes: x{rates[2] / rates[1]:.2f}")


def micro_tasks(root: Path, n: int) -> Suite:
    """n micro tasks from the held-out pools, one suite family after another."""
    import random

    from posttrain_arena.challenges.micro.build import write_package
    from posttrain_arena.challenges.micro.families import HELD_OUT, SUITE_FAMILIES
    from posttrain_arena.evaluate.suite import suite_from_tasks
    from posttrain_arena.task_format.package import load_task

    rng = random.Random(0)
    tasks = []
    for i in range(n):
        inst = SUITE_FAMILIES[i % len(SUITE_FAMILIES)].generate(rng, HELD_OUT)
        tasks.append(load_task(write_package(inst, root / f"{i:03d}-{inst.name}")))
    return suite_from_tasks(tasks, source=f"micro-generated-{n}")


def vllm_part(args: argparse.Namespace, tmp: Path) -> None:
    """Part 3: episodes per minute through a vLLM server and through the in-process model."""
    import torch

    from posttrain_arena.agents.model import AgentSettings
    from posttrain_arena.challenges.micro.basebuild import write_tiny_model
    from posttrain_arena.challenges.micro.tinymodel import TinyModelSpec
    from posttrain_arena.evaluate.runner import AgentFactory, model_agent_specs
    from posttrain_arena.models.vllm_server import VllmServer, vllm_python
    from posttrain_arena.trial.result import TrialResult

    torch.set_num_threads(1)  # what the pipeline sets on CPU (runtime.torch_threads = 0)
    model_dir = write_tiny_model(tmp / "tiny", TinyModelSpec(seed=0, pretrain_episodes=0))
    suite = micro_tasks(tmp / "micro", args.vllm_tasks)
    # The micro recipe's [agent] limits, greedy: both paths then write the same tokens.
    settings = AgentSettings(max_turns=3, max_new_tokens=48, max_tokens=3 * 48,
                             temperature=0.0)
    runner = TrialRunner("local")
    episodes = len(suite.tasks) * args.vllm_k

    def run(factory: AgentFactory, k: int) -> tuple[float, int, EvalReport]:
        infos: list[dict[str, object]] = []

        def keep(_done: int, _total: int, result: TrialResult) -> None:
            infos.append(result.agent_info)

        t0 = time.monotonic()
        report = evaluate(suite, factory, k=k, jobs=args.vllm_jobs, runner=runner,
                          progress=keep)
        wall = time.monotonic() - t0
        if report.infra_errors or any(not i.get("turns") for i in infos):
            lost = [t for t in report.trials if t.outcome == "infra_error"]
            sys.exit(f"benchmark invalid: {report.infra_errors} infrastructure error(s), "
                     f"{sum(not i.get('turns') for i in infos)} episode(s) without a model "
                     f"turn" + (f", e.g. {lost[0].reason}" if lost else ""))
        tokens = sum(int(str(i.get("completion_tokens", 0))) for i in infos)
        return wall, tokens, report

    load0 = os.getloadavg()
    t0 = time.monotonic()
    server = VllmServer(model_dir, python=vllm_python(), kv_cache_gb=1)
    start_sec = time.monotonic() - t0
    try:
        sides = {
            "in-process": model_agent_specs(f"hf:{model_dir}", settings, device="cpu"),
            "vllm": model_agent_specs(f"openai:{server.model_name}", settings,
                                      base_url=server.base_url),
        }
        t0 = time.monotonic()
        run(sides["in-process"], 1)  # untimed: loads the model, builds the images
        warm_local = time.monotonic() - t0
        t0 = time.monotonic()
        run(sides["vllm"], 1)  # untimed: the server's first requests
        warm_vllm = time.monotonic() - t0
        figures: dict[str, list[tuple[float, int, float]]] = {name: [] for name in sides}
        passes: dict[str, set[int]] = {name: set() for name in sides}
        for round_ in range(args.vllm_reps):
            order = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
            for name in order:
                wall, tokens, report = run(sides[name], args.vllm_k)
                load = os.getloadavg()[0]
                figures[name].append((wall, tokens, load))
                passes[name].add(report.overall.passes)
                print(f"  round {round_} {name:>10}: {wall:6.1f} s, {tokens} completion "
                      f"tokens (load {load:.1f})", flush=True)
    finally:
        server.close()
        runner.close()
    load1 = os.getloadavg()
    print(f"part 3: {episodes} micro episodes (tiny random-weight model, greedy, <= 3 turns "
          f"x 48 tokens) x {args.vllm_reps} rounds ABBA, local backend, concurrency "
          f"{args.vllm_jobs}; load average {load0[0]:.1f} before, {load1[0]:.1f} after, on "
          f"{os.cpu_count()} CPUs")
    cores = re.findall(r"core ids=(\[[^]]*\])", server.log_path.read_text(errors="replace"))
    print(f"  vLLM server start: {start_sec:.1f} s (not counted); untimed warm-ups: "
          f"in-process {warm_local:.1f} s, vLLM {warm_vllm:.1f} s; vLLM computes on cores "
          f"{cores[-1] if cores else '(not in its log)'}, torch in process on "
          f"{torch.get_num_threads()} thread(s)")
    for name, runs in figures.items():
        print(f"  {name:10} wall s per round: " + ", ".join(f"{w:.1f}" for w, _, _ in runs))
    paired = [local / served for (local, _, _), (served, _, _)
              in zip(figures["in-process"], figures["vllm"], strict=True)]
    print("  vLLM throughput against the in-process run beside it: "
          + ", ".join(f"x{p:.2f}" for p in paired) + f"  (median x{statistics.median(paired):.2f})")
    work = {name: {t for _, t, _ in runs} for name, runs in figures.items()}
    if len(work["vllm"] | work["in-process"]) != 1 or passes["vllm"] != passes["in-process"]:
        print(f"  NOTE: the paths did not do the same work: completion tokens {work}, "
              f"passes {passes}")
    med = {name: statistics.median(w for w, _, _ in runs) for name, runs in figures.items()}
    print(f"  in-process (baseline): {med['in-process']:7.1f} s  "
          f"{60 * episodes / med['in-process']:7.1f} episodes/min (median)")
    print(f"  vLLM server          : {med['vllm']:7.1f} s  "
          f"{60 * episodes / med['vllm']:7.1f} episodes/min (median)")
    print(f"  vLLM / in-process throughput: x{med['in-process'] / med['vllm']:.2f}")


if __name__ == "__main__":
    main()
