"""Sandbox overhead: one session's start + exec + stop, per backend, against baselines.

Baseline for docker, measured in the same run: a bare `docker run --rm --network none
IMAGE true` through the CLI. Targets (issue 3): docker start+exec+stop well under 2x the
bare run; local start+exec+stop under 0.15 s.

    .venv/bin/python benchmarks/bench_sandbox.py [-n 10] [--backend docker|local|both]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from posttrain_arena.sandbox import ImageRef, Limits, get_backend
from posttrain_arena.sandbox.base import Backend

DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /root\nCOPY hello.txt /root/hello.txt\n"


def _context() -> Path:
    ctx = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    (ctx / "Dockerfile").write_text(DOCKERFILE)
    (ctx / "hello.txt").write_text("hello\n")
    return ctx


def _cycle(backend: Backend, image: ImageRef) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    session = backend.start(image, limits=Limits())
    t1 = time.perf_counter()
    result = session.exec(["cat", "/root/hello.txt"])
    t2 = time.perf_counter()
    session.stop()
    t3 = time.perf_counter()
    assert result.exit_code == 0 and result.stdout == "hello\n", result
    return t1 - t0, t2 - t1, t3 - t2


def _bare_docker_run(tag: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", "--network", "none", tag, "true"], check=True)
    return time.perf_counter() - t0


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _report(name: str, cycles: list[tuple[float, float, float]]) -> float:
    total = _median([sum(c) for c in cycles])
    start, run, stop = (_median([c[i] for c in cycles]) for i in range(3))
    print(
        f"{name:<28} total {total * 1000:7.1f} ms  (start {start * 1000:6.1f}, "
        f"exec {run * 1000:6.1f}, stop {stop * 1000:6.1f})"
    )
    return total


def bench(name: str, n: int, baseline: Callable[[ImageRef], float] | None) -> None:
    """Warm up, then time n sessions (interleaved with the baseline when there is one)."""
    backend = get_backend(name)
    ctx = _context()
    try:
        image = backend.build(ctx, timeout=300)
        _cycle(backend, image)  # warm caches
        if baseline is not None:
            baseline(image)
        cycles: list[tuple[float, float, float]] = []
        base: list[float] = []
        for _ in range(n):
            cycles.append(_cycle(backend, image))
            if baseline is not None:
                base.append(baseline(image))
        ours = _report(f"{name}: start+exec+stop", cycles)
        if baseline is not None:
            bare = _median(base)
            print(f"{'docker run --rm (CLI)':<28} total {bare * 1000:7.1f} ms")
            print(f"ratio docker/bare run: {ours / bare:.2f}x  (target < 2x)")
        if name == "local":
            print(f"local target < 150 ms: {'met' if ours < 0.150 else 'NOT met'}")
    finally:
        shutil.rmtree(ctx, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=10, help="sessions per backend")
    parser.add_argument("--backend", choices=["docker", "local", "both"], default="both")
    args = parser.parse_args()
    if args.backend in ("docker", "both"):
        bench("docker", args.n, lambda image: _bare_docker_run(image.tag))
    if args.backend in ("local", "both"):
        bench("local", args.n, None)


if __name__ == "__main__":
    main()
