"""Organizer gates: what `gate_collection` costs against the bare trials it runs.

For each backend and collection (the starting kit's examples, and N generated trivial
packages sharing one environment) and each -j, with images built beforehand (both
sides then find them built), `--reps` interleaved repetitions (gate, bare, bare, gate,
...) of:

* the gate run from empty records: wall time, and trial seconds per package per gate
  (build, oracle reruns, empty, probes, base model samples);
* baseline: the same number of bare oracle trials (TrialRunner.run, seeds 0..n-1 over
  the same packages) at the same -j on a fresh runner.

"Its trials" counts every unit of work the gate starts: its trials (oracle reruns, the
empty trial, the base model's k samples: an agent phase and a verification each) plus
its verifications of kept states (each probe, and for shared isolation the replay: a
verification only, no agent phase), each counted as one whole bare oracle trial. The
target is `ratio` <= 1 (gate wall / wall of that many bare oracle trials). `vs trials`
prices the same gate against its trials alone (probes taken as free), scaled from the
measured bare trial: above 1 by what the probes and the run's own work cost.
The second gate run of the unchanged collection (records reused) starts no trial.

The base model is a scripted one (two turns, never solves), so the model's own time
is nil and the figures are the harness's. The load (`os.getloadavg`) is printed with
each figure.

    .venv/bin/python benchmarks/bench_gate.py [--backends local,docker] [--packages 100]
        [--jobs 1,2] [--reruns 2] [-k 2] [--docker-packages 20] [--no-kit] [--reps 2]
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.gates import GateName, GateReport, gate_collection
from posttrain_arena.models.scripted import ScriptedModel
from posttrain_arena.task_format.package import TaskPackage, load_task
from posttrain_arena.trial.replay import task_dirs
from posttrain_arena.trial.runner import TrialRunner

BASE = "posttrain-arena/python:bookworm"
KIT = Path(__file__).resolve().parents[1] / "starting-kit" / "examples"

TASK_MD = """---
version: "1.0"
metadata: {{author_name: bench, author_email: bench@example.org,
            category: software-engineering, difficulty: easy}}
agent: {{timeout_sec: 60}}
verifier: {{timeout_sec: 60}}
environment: {{cpus: 1, memory_mb: 512, storage_mb: 256, workdir: /root}}
---
## prompt
Task {name}: write the code into /root/answer.txt.
"""

VERIFIER = """import os, pathlib
p = pathlib.Path("/root/answer.txt")
ok = p.exists() and p.read_text().strip() == "{secret}"
pathlib.Path(os.environ["BENCHFLOW_REWARD_TEXT"]).write_text("1.0" if ok else "0.0")
"""


def generate(root: Path, n: int) -> Path:
    """n trivial packages (one shared environment): the oracle echoes a secret."""
    for i in range(n):
        pkg = root / "envs" / f"gen-{i:03d}"
        secret = f"{i}-{secrets.token_hex(6)}"
        (pkg / "environment").mkdir(parents=True)
        (pkg / "environment" / "Dockerfile").write_text(f"FROM {BASE}\nWORKDIR /root\n")
        (pkg / "verifier").mkdir()
        (pkg / "verifier" / "verifier.py").write_text(VERIFIER.format(secret=secret))
        (pkg / "oracle").mkdir()
        (pkg / "oracle" / "solve.sh").write_text(f"echo {secret} > /root/answer.txt\n")
        (pkg / "task.md").write_text(TASK_MD.format(name=pkg.name))
    return root


def bare_oracle(runner: TrialRunner, tasks: list[TaskPackage], n: int, jobs: int) -> float:
    """Wall seconds of n oracle trials spread over the tasks, `jobs` at a time."""
    work = [(tasks[i % len(tasks)], i // len(tasks)) for i in range(n)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda w: runner.run(w[0], OracleAgent(), seed=w[1]), work))
    wall = time.perf_counter() - t0
    bad = [r for r in results if not r.passed]
    if bad:
        print(f"  warning: {len(bad)} bare oracle trial(s) did not pass: {bad[0].reason}",
              file=sys.stderr)
    return wall


def gate_once(backend: str, root: Path, tasks: list[TaskPackage], jobs: int, reruns: int,
              k: int) -> tuple[float, float, GateReport, GateReport]:
    """(wall of a gate run from empty records, wall of a second run reusing them, both
    reports)."""
    model = ScriptedModel([{"bash": "true"}, {"submit": True}])
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        records = Path(tmp)
        with TrialRunner(backend, records_root=records / "trials") as runner:
            for t in tasks:  # both sides find the images built
                runner.image_for(t)
            t0 = time.perf_counter()
            report = gate_collection(root, runner, model, model_spec="scripted:never", k=k,
                                     reruns=reruns, jobs=jobs, records_root=records)
            gate_wall = time.perf_counter() - t0
            t0 = time.perf_counter()
            again = gate_collection(root, runner, model, model_spec="scripted:never", k=k,
                                    reruns=reruns, jobs=jobs, records_root=records)
            return gate_wall, time.perf_counter() - t0, report, again


def bare_once(backend: str, tasks: list[TaskPackage], n: int, jobs: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-bare-") as tmp, \
            TrialRunner(backend, records_root=Path(tmp)) as runner:
        for t in tasks:
            runner.image_for(t)
        return bare_oracle(runner, tasks, n, jobs)


def bench(backend: str, label: str, root: Path, jobs: int, reruns: int, k: int,
          reps: int) -> None:
    tasks = [load_task(d) for d in task_dirs(root)]
    gates: list[float] = []
    bares: list[float] = []
    loads: list[float] = []
    report = again = None
    reuse = 0.0
    for rep in range(reps):
        # gate first on even repetitions (the first must: it says how many trials)
        for side in (("gate", "bare") if rep % 2 == 0 else ("bare", "gate")):
            loads.append(os.getloadavg()[0])
            if side == "gate":
                wall, reuse, report, again = gate_once(backend, root, tasks, jobs, reruns, k)
                gates.append(wall)
            else:
                assert report is not None
                units = report.trials_run + report.verifications_run
                bares.append(bare_once(backend, tasks, units, jobs))
    assert report is not None and again is not None
    loads.append(os.getloadavg()[0])
    n = len(report.evidence)
    trials, verifs = report.trials_run, report.verifications_run
    gate_wall, base_wall = statistics.median(gates), statistics.median(bares)
    per_trial = base_wall / (trials + verifs)
    per_gate = {g.value: statistics.mean(e.timings.get(g.value, 0.0) for e in report.evidence)
                for g in GateName}
    probes_ok = sum(c.gate is GateName.PROBES and c.status.value == "pass"
                    for e in report.evidence for c in e.verdict.gates)
    shown = ", ".join(f"{g} {s:.2f}s" for g, s in per_gate.items())
    each = " ".join(f"{g / b:.2f}" for g, b in zip(gates, bares, strict=True))
    print(f"{backend:6} {label:14} -j {jobs}  {n:3} pkgs  {trials} trials + {verifs} "
          f"verifications  gate {gate_wall:7.1f}s  bare oracle x{trials + verifs} "
          f"{base_wall:7.1f}s  ratio {gate_wall / base_wall:4.2f} (per rep: {each})  "
          f"vs trials {gate_wall / (per_trial * trials):4.2f}  reuse {reuse:5.2f}s "
          f"({again.trials_run} trials)  probes pass {probes_ok}/{n}  "
          f"load {min(loads):.1f}-{max(loads):.1f}")
    print(f"{'':22} trial seconds per package per gate: {shown}")
    sys.stdout.flush()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="local,docker")
    p.add_argument("--packages", type=int, default=100)
    p.add_argument("--docker-packages", type=int, default=None,
                   help="generated packages on docker (default: --packages)")
    p.add_argument("--jobs", default="1,2")
    p.add_argument("--reruns", type=int, default=2)
    p.add_argument("-k", type=int, default=2)
    p.add_argument("--no-kit", action="store_true", help="skip the starting kit")
    p.add_argument("--no-generated", action="store_true", help="only the starting kit")
    p.add_argument("--reps", type=int, default=2, help="interleaved repetitions")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gate-coll-") as tmp:
        for backend in a.backends.split(","):
            n = a.docker_packages if backend == "docker" and a.docker_packages else a.packages
            gen = generate(Path(tmp) / f"gen-{backend}", n)
            for jobs in (int(j) for j in a.jobs.split(",")):
                if not a.no_kit:
                    bench(backend, "starting-kit", KIT, jobs, a.reruns, a.k, a.reps)
                if not a.no_generated:
                    bench(backend, f"generated-{n}", gen, jobs, a.reruns, a.k, a.reps)


if __name__ == "__main__":
    main()
