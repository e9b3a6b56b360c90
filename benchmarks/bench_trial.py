"""Trial overhead: per-trial wall time and replay throughput, beside Docker baselines.

Measured in one run, for a trivial task with a warm image (oracle + verify); the
runner keeps its warm pool (a pre-started pristine session per environment), as a
batch does:

* docker trial (TrialRunner, fresh verification) vs a bare
  `docker run --rm --network none IMAGE true` and vs a hand-made docker-CLI trial
  (run -d, cp solve, exec solve, cp verifier, exec verify, rm -f): target <= 2x bare;
* local trial (bubblewrap): target <= 0.15 s, beside one bare bwrap + python3 start;
* Docker Engine API calls per trial (every request docker-py sends, the trial's
  background ones included), listed by endpoint;
* throughput of a replay (oracle + empty trial per task) of N tasks at -j 1, 2, 4.

Repetitions are interleaved (a trial, then its baselines), each one started once the
engine is idle (the previous trial's background pool refill and removals done), so no
figure carries another's work; the trials are also timed back to back, as a batch runs
them. The load average is printed beside each figure.

    .venv/bin/python benchmarks/bench_trial.py [--tasks 50] [--reps 5] [--backends docker,local]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import secrets
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from posttrain_arena.agents.oracle import OracleAgent
from posttrain_arena.task_format.package import load_task
from posttrain_arena.trial.replay import replay_collection
from posttrain_arena.trial.runner import TrialRunner

BASE = "posttrain-arena/python:bookworm"

TASK_MD = """---
version: "1.0"
metadata: {{author_name: bench, author_email: bench@example.org,
            category: software-engineering, difficulty: easy}}
agent: {{timeout_sec: 60}}
verifier: {{timeout_sec: 60}}
environment: {{cpus: 1, memory_mb: 512, storage_mb: 256, workdir: /root}}
---
## prompt
Write {secret} into /root/answer.txt.
"""

VERIFIER = """import os, pathlib
ok = pathlib.Path("/root/answer.txt").read_text().strip() == "{secret}" \\
    if pathlib.Path("/root/answer.txt").exists() else False
pathlib.Path(os.environ.get("BENCHFLOW_REWARD_TEXT", "/logs/verifier/reward.txt")
             ).write_text("1.0" if ok else "0.0")
"""


def make_task(root: Path, secret: str | None = None) -> Path:
    """A trivial task: the oracle echoes a secret, the verifier compares it."""
    secret = secret or secrets.token_hex(8)
    (root / "environment").mkdir(parents=True)
    (root / "environment" / "Dockerfile").write_text(f"FROM {BASE}\nWORKDIR /root\n")
    (root / "verifier").mkdir()
    (root / "verifier" / "verifier.py").write_text(VERIFIER.format(secret=secret))
    (root / "oracle").mkdir()
    (root / "oracle" / "solve.sh").write_text(f"echo {secret} > /root/answer.txt\n")
    (root / "task.md").write_text(TASK_MD.format(secret=secret))
    return root


BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
         "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
         "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
         "/usr/bin/python3", "-I", "-S", "-c", "pass"]


def timed(fn, reps: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()


def handmade_cli_trial(image: str, task: Path) -> None:
    """The docker-CLI trial the issue measures: run, cp, exec solve, cp, exec verify, rm."""
    cid = sh("docker", "run", "-d", "--network", "none", image, "sleep", "infinity")
    try:
        sh("docker", "cp", str(task / "oracle"), f"{cid}:/oracle")
        sh("docker", "exec", cid, "bash", "/oracle/solve.sh")
        sh("docker", "cp", str(task / "verifier"), f"{cid}:/verifier")
        sh("docker", "exec", cid, "sh", "-c", "mkdir -p /logs/verifier && "
           "python3 /verifier/verifier.py && cat /logs/verifier/reward.txt")
    finally:
        sh("docker", "rm", "-f", cid)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def load() -> str:
    """The 1/5/15-minute load averages, printed beside every figure."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


class ApiCalls:
    """Every Engine API request docker-py sends (method and endpoint, ids elided), from
    any thread: the trial's own and its background ones (pool refills, removals)."""

    def __init__(self, api: Any) -> None:
        self.calls: list[str] = []
        self.in_flight = 0
        self.last = time.monotonic()
        self._lock = threading.Lock()
        send = api.send

        def counted(request: Any, **kwargs: Any) -> Any:
            path = re.sub(r"/[0-9a-f]{64}|/arena-[0-9a-f]{12}", "/ID",
                          request.path_url.split("?")[0])
            with self._lock:
                self.calls.append(f"{request.method} {re.sub(r'^/v[0-9.]+', '', path)}")
                self.in_flight += 1
            try:
                return send(request, **kwargs)
            finally:
                with self._lock:
                    self.in_flight -= 1
                    self.last = time.monotonic()

        api.send = counted

    def quiesce(self, idle: float = 0.3, limit: float = 30.0) -> None:
        """Wait until no request has been in flight for `idle` seconds."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            with self._lock:
                quiet = self.in_flight == 0 and time.monotonic() - self.last >= idle
            if quiet:
                return
            time.sleep(0.05)

    def take(self) -> list[str]:
        with self._lock:
            calls, self.calls = self.calls, []
        return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50, help="tasks in the replay")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per timing")
    parser.add_argument("--backends", default="docker,local")
    parser.add_argument("--jobs", default="1,2,4")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    work = Path(tempfile.mkdtemp(prefix="bench-trial-"))
    task = load_task(make_task(work / "one"))
    print(f"trivial task, warm image; median of {args.reps} runs\n")
    per_trial: dict[str, float] = {}
    for name in backends:
        runner = TrialRunner(name, records_root=work / f"records-{name}")
        if runner.pool is not None:  # slow baselines between repetitions must not let
            runner.pool.idle_sec = 3600.0  # the warm sessions expire (a batch never waits)
        image = runner.image_for(task)
        first = runner.run(task, OracleAgent())
        assert first.reward == 1.0, first.reason
        api = ApiCalls(runner.backend.client.api) if name == "docker" else None
        tag = image.tag
        # interleaved: each repetition runs the trial, then its baselines
        times: list[float] = []
        bare_times: list[float] = []
        cli_times: list[float] = []
        per_call: list[list[str]] = []
        for _ in range(args.reps):
            if api is not None:
                api.quiesce()
                api.take()
            t0 = time.perf_counter()
            result = runner.run(task, OracleAgent(), seed=time.monotonic_ns())
            times.append(time.perf_counter() - t0)
            assert result.reward == 1.0, result.reason
            if api is not None:
                api.quiesce()  # the trial's background calls (pool refill, removal)
                per_call.append(api.take())
            if name == "docker":
                bare_times.append(timed(lambda t=tag: sh(
                    "docker", "run", "--rm", "--network", "none", t, "true"), 1)[0])
                cli_times.append(timed(lambda t=tag: handmade_cli_trial(t, task.root), 1)[0])
            if name == "local":
                bare_times.append(timed(lambda: sh(*BWRAP), 1)[0])
        per_trial[name] = med(times)
        back_to_back = timed(lambda r=runner: r.run(task, OracleAgent(),
                                                    seed=time.monotonic_ns()), args.reps)
        runner.close()
        print(f"{name:>6} trial (oracle + fresh verify): {med(times):.3f} s, back to back "
              f"{med(back_to_back):.3f} s  ({load()})")
        if per_call:
            calls = per_call[-1]
            print(f"  Engine API calls per trial: {[len(c) for c in per_call]} "
                  "(trial thread and its background ones), the last one's:")
            for call, n in collections.Counter(calls).most_common():
                print(f"    {n:2d} x {call}")
        bare = med(bare_times)
        if name == "docker":
            cli = med(cli_times)
            print(f"  bare `docker run --rm --network none IMAGE true`: {bare:.3f} s")
            print(f"  hand-made docker-CLI trial:                        {cli:.3f} s")
            print(f"  ratio trial / bare docker run: {per_trial[name] / bare:.2f}x "
                  f"(target <= 2x; per repetition "
                  f"{[round(t / b, 2) for t, b in zip(times, bare_times, strict=True)]})")
            print(f"  ratio trial / hand-made CLI trial: {per_trial[name] / cli:.2f}x "
                  "(target <= 1x)")
        if name == "local":
            print(f"  bare `bwrap ... python3 -I -S -c pass` (same machine, same run): "
                  f"{bare:.3f} s; ratio {per_trial[name] / bare:.1f}x")
            print(f"  target <= 0.150 s: {'met' if per_trial[name] <= 0.15 else 'NOT met'}")
        print(f"  ({load()})")
    coll = work / "collection" / "envs"
    for i in range(args.tasks):
        make_task(coll / f"t{i:03d}")
    print(f"\nreplay of {args.tasks} tasks (oracle + empty trial each = {2 * args.tasks} "
          "trials), warm image")
    for name in backends:
        runner = TrialRunner(name, records_root=work / f"replay-{name}")
        runner.image_for(task)
        base = None
        for jobs in [int(j) for j in args.jobs.split(",")]:
            t0 = time.perf_counter()
            report = replay_collection(coll.parent, runner, jobs=jobs)
            wall = time.perf_counter() - t0
            assert report.ok, [c.message for c in report.checks if not c.ok][:3]
            rate = len(report.checks) / wall
            base = base or rate
            print(f"{name:>6} -j {jobs}: {wall:7.2f} s, {rate:6.2f} trials/s "
                  f"({rate / base:.2f}x of -j 1)")
            runner.close()
            runner = TrialRunner(name, records_root=work / f"replay-{name}-{jobs}")
            runner.image_for(task)
        runner.close()


if __name__ == "__main__":
    main()
