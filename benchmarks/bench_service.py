"""Service read latency: leaderboard and run-list under 50 concurrent clients.

Seeds a database (PostgreSQL from ARENA_BENCH_POSTGRES_URL or ARENA_TEST_POSTGRES_URL;
a schema of its own, dropped afterwards) with 1,000 collections and 10,000 runs (with
results and reviews for the scored ones), starts the app with uvicorn on 127.0.0.1 (as
`arena serve --no-access-log` does; half the cores' worth of processes by default, since
the load generator and PostgreSQL share the host), and drives it with `wrk` (Debian's
package; a C load generator, so the generator takes little of the CPU the server needs)
for a fixed time per endpoint with 50 connections open, cycling through a set of paths;
without wrk it falls back to an httpx async generator in this process, which is itself
the bottleneck on a small machine. Prints p50/p99 latency and requests/s for each
endpoint beside a baseline measured in the same run: `/api/health` (one read of the
change counters), the cost of the framework and a database round trip. The last two
rows read the leaderboards and the run list again while ten running runs each send a
heartbeat every second, as ten busy workers do (each beat is lifecycle.heartbeat in a
write transaction of its own, on a fixed schedule). Target: p99 < 50 ms.

Each case runs `--rounds` times, the cases interleaved (so a change in the machine's load
falls on every row alike), and the table shows the median of the rounds beside the load
average. `cpu ms/req` is the CPU time the server's processes (not PostgreSQL) spent per
request answered: on a machine that other jobs load, latency measures the queue for the
cores, while this measures the work a request costs the server.

The server as shipped: leaderboard and run-list reads come from each process's read
cache (service/readcache.py) after one data-version lookup, and an address read before is
answered without the framework (service/fastreads.py); the unreported warm-up run lets
each process compute each read once, as it would once per change in production.

    .venv/bin/python benchmarks/bench_service.py [--seconds 10] [--concurrency 50]

`--near-duplicates` measures instead what registering a collection adds to find the
earlier collection it near-duplicates (service/similarity.py, families.py): the MinHash
signatures of a 200-package collection (scaffolded packages with text of their own),
then registration's `collections.record` itself against 1,000 stored collections of 200
packages each (3.2 million band keys, indexed), all another account's: the lock that
makes registrations one at a time, `families.place` (the best match is another's, so
the registrant's own families are searched apart too: two lookups), the row, and the
new signatures and band keys stored; rolled back after each round. One stored
collection is a near-copy, so a candidate is verified, and the round checks that it is
found and the new collection held. Beside it: one lookup alone, and the structural
check registration already runs on the same tree. Each row shows wall time and this
process's CPU time (the database's own work is in PostgreSQL's processes). Target:
signatures + record() under 1 s.

    .venv/bin/python benchmarks/bench_service.py --near-duplicates

Measured on the shared 2-core CI machine against PostgreSQL, load 12-14 from other jobs
(2026-12-04). Near-duplicates, 5 rounds: signatures 511 ms wall (166 ms CPU), record()
255 ms wall (40 ms CPU; one lookup alone 97 ms), so 767 ms in all, under 1 s; the
structural check beside it 527 ms. Reads, 3 rounds, 50 clients, one server process:
p99 leaderboard 150 ms, run list 120 ms, with heartbeats 132 and 146 ms, beside
/api/health at 221 ms in the same run; server CPU 0.07-0.09 ms per leaderboard or
run-list request (0.28 ms per health request). At that load every row's p99 is the
queue for the cores, the bare health route's worst of all, so the 50 ms target was not
shown here; it needs a host whose cores the server and PostgreSQL have to themselves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
from sqlalchemy import create_engine, insert, select, text, update

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from posttrain_arena.service.app import open_database  # noqa: E402
from posttrain_arena.service.config import Settings  # noqa: E402
from posttrain_arena.service.db import Database  # noqa: E402
from posttrain_arena.service.lifecycle import heartbeat  # noqa: E402
from posttrain_arena.service.models import (  # noqa: E402
    Challenge,
    Collection,
    Result,
    Review,
    Run,
    User,
    utcnow,
)

STATES = ["scored"] * 70 + ["failed"] * 10 + ["canceled"] * 10 + ["queued"] * 5 + ["running"] * 5


def seed(url: str, n_collections: int, n_runs: int, rng: random.Random) -> None:
    """Bulk-insert users, two challenges, collections, runs, results and reviews."""
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="arena-bench-")), database_url=url)
    db = open_database(settings)
    now = utcnow()
    with db.engine.begin() as conn:
        conn.execute(insert(User), [{"id": i, "name": f"user{i}", "role": "participant",
                                     "created_at": now} for i in range(1, 101)])
        conn.execute(insert(Challenge), [{
            "id": i, "slug": f"ch{i}", "title": f"Challenge {i}", "description": "",
            "base_model": "tiny", "base_model_revision": "r", "recipe": "r.toml",
            "recipe_hash": "sha256:0", "suite_hash": "sha256:1", "suite_size": 50,
            "suite_domain_counts": {}, "public_sample": [], "price_per_hour": 1.0,
            "timeout_sec": 3600, "cooldown_sec": 0, "pipeline_version": "0.1.0",
            "health": "open", "created_at": now} for i in (1, 2)])
        conn.execute(insert(Collection), [{
            "id": i, "name": f"collection-{i}", "owner_id": rng.randint(1, 100),
            "source_kind": "git", "source_url": f"https://example.org/c{i}.git",
            "source_ref": "main", "commit": uuid.uuid4().hex + "00000000",
            "content_hash": f"sha256:{i}", "storage_path": "", "task_count": 100,
            "eligible_count": 100, "domain_counts": {}, "error_count": 0,
            "warning_count": 0, "findings": [], "created_at": now}
            for i in range(1, n_collections + 1)])
        runs, results, reviews = [], [], []
        for i in range(1, n_runs + 1):
            state = rng.choice(STATES)
            col, ch = rng.randint(1, n_collections), rng.randint(1, 2)
            change = rng.gauss(3, 8)
            created = now - timedelta(minutes=n_runs - i)
            runs.append({
                "id": i, "challenge_id": ch, "collection_id": col, "created_by": 1,
                "request_id": uuid.uuid4().hex, "state": state, "stage": "pipeline",
                "stages_done": ["snapshot", "check"], "reason": None, "reserved": 1.0,
                "cost": 0.5, "attempts": 1, "worker_id": None, "heartbeat_at": created,
                "run_seconds": 1800.0, "created_at": created, "started_at": created,
                "finished_at": created,
                "score": {"change_pp": change, "n_tasks": 50} if state == "scored" else None})
            if state == "scored":
                results.append({
                    "id": i, "run_id": i, "challenge_id": ch, "collection_id": col,
                    "base_pass_rate": 0.3, "final_pass_rate": 0.3 + change / 100,
                    "change_pp": change, "ci_low": change - 6, "ci_high": change + 6,
                    "per_domain": {}, "n_tasks": 50, "suite_size": 50, "created_by": 1,
                    "created_at": created})
                roll = rng.random()
                if roll < 0.9:
                    reviews.append({"id": i, "result_id": i, "editor_id": 1,
                                    "decision": "accept" if roll < 0.8 else "reject",
                                    "note": "", "created_at": created})
        for table, rows in ((Run, runs), (Result, results), (Review, reviews)):
            for start in range(0, len(rows), 2000):
                conn.execute(insert(table), rows[start:start + 2000])
        if conn.dialect.name == "postgresql":
            for table in ("users", "challenges", "collections", "runs", "results", "reviews"):
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                  f"(SELECT max(id) FROM {table}))"))
            conn.execute(text("ANALYZE"))
    db.dispose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def load(base: str, paths: list[str], n: int, concurrency: int
               ) -> tuple[list[float], float, int]:
    """Send n GETs (cycling through paths) with `concurrency` in flight.

    Returns the latencies (s) of successful requests, the wall time and the error count.
    """
    latencies: list[float] = []
    errors = 0
    counter = iter(range(n))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:

        async def one_client() -> None:
            nonlocal errors
            for i in counter:
                t0 = time.perf_counter()
                try:
                    resp = await client.get(paths[i % len(paths)])
                except httpx.HTTPError:
                    errors += 1
                    continue
                if resp.status_code != 200:
                    raise RuntimeError(f"{paths[i % len(paths)]}: HTTP {resp.status_code}")
                latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(one_client() for _ in range(min(concurrency, 8))))  # warm-up
        latencies.clear()
        errors = 0
        counter = iter(range(n))
        t0 = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return latencies, wall, errors


_WRK_SCRIPT = """
local paths = {%s}
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i %% #paths) + 1])
end
"""
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def _seconds(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(value) * _UNITS[unit]


def wrk_load(base: str, paths: list[str], seconds: int, concurrency: int
             ) -> tuple[float, float, float, int]:
    """Run wrk: (p50 s, p99 s, requests/s, non-2xx + socket errors); the latencies are
    infinite when no request was answered in the time (wrk then prints zeros)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(_WRK_SCRIPT % ", ".join(f'"{p}"' for p in paths))
    try:
        out = subprocess.run(
            ["wrk", "-t", "1", "-c", str(concurrency), "-d", f"{seconds}s", "--latency",
             "-s", fh.name, base], capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(fh.name)
    p50 = _seconds(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _seconds(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    if int(re.search(r"(\d+) requests in", out).group(1)) == 0:  # type: ignore[union-attr]
        p50 = p99 = float("inf")
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    socket_errors = re.search(r"Socket errors: (.*)", out)
    if socket_errors:
        errors += sum(int(n) for n in re.findall(r"\d+", socket_errors.group(1)))
    return p50, p99, rps, errors


class Heartbeats:
    """A thread standing in for workers: `runs` running runs, each held by a worker and
    sending a heartbeat every `interval` seconds, spread evenly; each beat is the one a
    worker sends (lifecycle.heartbeat in its own write transaction)."""

    WORKER = "bench-worker"

    def __init__(self, url: str, runs: int, interval: float):
        self.db = Database(url)
        with self.db.write() as s:  # the newest: the runs the first pages show
            self.ids = list(s.scalars(select(Run.id).where(Run.state == "running")
                                      .order_by(Run.id.desc()).limit(runs)))
            s.execute(update(Run).where(Run.id.in_(self.ids)).values(worker_id=self.WORKER))
        self.interval = interval
        self.count = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        step = self.interval / len(self.ids)
        start = time.monotonic()
        i = 0  # beats on a fixed schedule: a slow one does not lower the rate
        while not self.done.wait(max(0.0, start + (i + 1) * step - time.monotonic())):
            with self.db.write() as s:
                if not heartbeat(s, self.ids[i % len(self.ids)], self.WORKER):
                    raise RuntimeError(f"run {self.ids[i % len(self.ids)]} is not held")
            self.count += 1
            i += 1

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        self.db.dispose()
        return self.count


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by process `pid` and its descendants."""
    total, todo = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _RolledBack(Exception):
    """Ends a measured registration's transaction without keeping it."""


def near_duplicates(url: str, stored: int, packages: int, rounds: int) -> None:
    """Time what registering a `packages`-package collection costs to find the earlier
    collection it near-duplicates among `stored` collections, as registration runs it."""
    import numpy as np

    from posttrain_arena.service import collections as col_svc
    from posttrain_arena.service import similarity
    from posttrain_arena.service.auth import Principal, Role, create_user
    from posttrain_arena.service.checking import check_collection_dir
    from posttrain_arena.service.models import PackageBand, PackagePrint
    from posttrain_arena.service.schemas import SourceKind
    from posttrain_arena.task_format.scaffold import new_task

    root = Path(tempfile.mkdtemp(prefix="arena-bench-col-"))
    (root / "envs").mkdir()
    (root / "submission.yaml").write_text("team_name: bench\ncontact_email: b@example.org\n"
                                          "track: environments\n")
    rng = random.Random(11)
    for i in range(packages):
        new_task(f"task-{i}", "software-engineering", root / "envs")
        words = " ".join(f"w{rng.randrange(100_000)}" for _ in range(800))
        (root / "envs" / f"task-{i}" / "environment" / "notes.md").write_text(words)
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="arena-bench-data-")),
                        database_url=url)
    db = open_database(settings)
    own = similarity.collection_prints(root, [f"task-{i}" for i in range(packages)])
    nrng = np.random.default_rng(3)
    t0 = time.perf_counter()
    with db.write() as s:
        # The stored collections are another account's, so the new one's best match is
        # someone else's family: registration then searches the registrant's own families
        # apart as well (families.place), the costlier path.
        owner, _token = create_user(s, "bench-owner", "participant")
        registrant, _token = create_user(s, "bench-registrant", "participant")
        principal = Principal(user_id=registrant.id, name=registrant.name,
                              role=Role.PARTICIPANT)
        s.execute(insert(Collection), [
            {"name": f"c{i}", "owner_id": owner.id, "source_kind": "path",
             "content_hash": f"h{i}", "storage_path": ""} for i in range(stored)])
        ids = list(s.scalars(select(Collection.id).order_by(Collection.id)))
        s.execute(update(Collection).values(family_id=Collection.id))
        target = ids[len(ids) // 2]
        for cid in ids:
            if cid == target:  # a near-copy: every package's signature, a value changed
                sigs = [[*p.signature[:-1], 0] for p in own]
            else:
                sigs = nrng.integers(0, 2**32, (packages, similarity.PERMUTATIONS)).tolist()
            prints = [similarity.PackagePrintData(f"t{k}", tuple(sig))
                      for k, sig in enumerate(sigs)]
            s.execute(insert(PackagePrint), [{"collection_id": cid, "package": p.package,
                                              "signature": list(p.signature)} for p in prints])
            s.execute(insert(PackageBand), [{"collection_id": cid, "band": b}
                                            for p in prints for b in p.bands()])
    with db.engine.begin() as conn:  # as autovacuum would after such growth
        conn.execute(text("ANALYZE"))
    print(f"stored {stored} collections x {packages} packages "
          f"({stored * packages * similarity.BANDS} band keys) in {time.perf_counter() - t0:.0f}s")
    rows: dict[str, list[tuple[float, float]]] = {}

    @contextlib.contextmanager
    def timed(name: str) -> Iterator[None]:
        """Adds the (wall, this process's CPU) seconds of its block to rows[name]."""
        t, c = time.perf_counter(), time.process_time()
        yield
        rows.setdefault(name, []).append((time.perf_counter() - t, time.process_time() - c))

    for _ in range(rounds):
        staging = settings.collections_dir / f".staging-bench-{uuid.uuid4().hex}"
        shutil.copytree(root, staging / "tree")
        with timed("baseline: structural check"):
            summary = check_collection_dir(staging / "tree")
        with timed("signatures"):
            prints = similarity.collection_prints(staging / "tree", summary.eligible)
        staged = col_svc.Staged(staging=staging, root=staging / "tree", kind=SourceKind.PATH,
                                name="bench-copy", summary=summary, prints=prints)
        try:
            with db.write() as s:
                with timed("one lookup (find_match)"):
                    similarity.serialize(s)
                    match = similarity.find_match(s, prints)
                s.rollback()  # the lookup alone; then registration as it runs
                with timed("registration's record()"):
                    col = col_svc.record(s, settings, principal, staged)
                    s.flush()
                assert match is not None and match.collection_id == target, match
                # another account's: held, in a family of its own
                assert col.near_duplicate_of == target and col.family_id == col.id, col
                raise _RolledBack
        except _RolledBack:
            pass
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(settings.collections_dir, ignore_errors=True)
        settings.collections_dir.mkdir(parents=True)
    med = {name: (statistics.median(v[0] for v in values),
                  statistics.median(v[1] for v in values)) for name, values in rows.items()}
    for name, (wall, cpu) in med.items():
        print(f"  {name:<28} median {1000 * wall:8.1f} ms wall, {1000 * cpu:8.1f} ms CPU here "
              f"(of {rounds})")
    wall = med["signatures"][0] + med["registration's record()"][0]
    print(f"near-duplicate check on submission (signatures + record: lock, both lookups, "
          f"row, signatures and band keys stored): {1000 * wall:.0f} ms wall for {packages} "
          f"packages against {stored} collections (target: under 1 s); load average "
          f"{' '.join(f'{v:.1f}' for v in os.getloadavg())} on {os.cpu_count()} cores")
    db.dispose()
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=10, help="Load per endpoint (wrk)")
    ap.add_argument("--warmup", type=int, default=2, help="Unreported load first (wrk)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="Measurements of each case, interleaved; the table shows medians")
    ap.add_argument("--beating-runs", type=int, default=10,
                    help="Running runs that send heartbeats during the last case")
    ap.add_argument("--beat-sec", type=float, default=1.0,
                    help="Seconds between two heartbeats of one run")
    ap.add_argument("--requests", type=int, default=2000,
                    help="Requests per endpoint (httpx fallback, without wrk)")
    ap.add_argument("--concurrency", type=int, default=50, help="Clients in flight")
    ap.add_argument("--collections", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=max(1, min(4, (os.cpu_count() or 2) // 2)),
                    help="uvicorn worker processes (default: half the cores, at most 4: wrk "
                    "and PostgreSQL need the others)")
    ap.add_argument("--near-duplicates", action="store_true",
                    help="Measure the near-duplicate check on registration instead")
    ap.add_argument("--packages", type=int, default=200,
                    help="Packages per collection (--near-duplicates)")
    args = ap.parse_args()
    # a SIGTERM unwinds like Ctrl-C, so the schema made below is dropped either way
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    base_url = os.environ.get("ARENA_BENCH_POSTGRES_URL") or os.environ.get(
        "ARENA_TEST_POSTGRES_URL")
    schema = None
    if base_url:
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = f"{base_url}{'&' if '?' in base_url else '?'}options=-csearch_path%3D{schema}"
        backend = "postgresql"
    else:
        url = f"sqlite:///{tempfile.mkdtemp(prefix='arena-bench-')}/arena.db"
        backend = "sqlite (set ARENA_TEST_POSTGRES_URL for PostgreSQL)"
    if args.near_duplicates:
        print(f"backend: {backend}")
        try:
            near_duplicates(url, args.collections, args.packages, args.rounds)
        finally:
            if schema is not None:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
                admin.dispose()
        return
    rng = random.Random(7)
    t0 = time.perf_counter()
    seed(url, args.collections, args.runs, rng)
    print(f"backend: {backend}; seeded {args.collections} collections, {args.runs} runs "
          f"in {time.perf_counter() - t0:.1f}s")

    port = free_port()
    env = {**os.environ, "ARENA_DATABASE_URL": url,
           "PYTHONPATH": str(REPO / "src"),  # the server of this checkout
           "ARENA_DATA_DIR": tempfile.mkdtemp(prefix="arena-bench-data-"),
           "ARENA_WATCHDOG_INTERVAL_SEC": "0"}  # keep the seeded runs as they are
    cmd = [sys.executable, "-m", "uvicorn", "--factory",
           "posttrain_arena.service.app:create_app", "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "warning", "--no-access-log",
           "--workers", str(args.workers), "--timeout-keep-alive", "60"]
    server = subprocess.Popen(cmd, env=env, cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise SystemExit("the server did not start")
        cases = {
            "baseline /api/health": ["/api/health"],
            "leaderboard": ["/api/challenges/ch1/leaderboard", "/api/challenges/ch2/leaderboard"],
            "run list": [f"/api/runs?limit=50&offset={rng.randrange(0, 2000, 50)}"
                         for _ in range(20)]
            + [f"/api/runs?challenge=ch{1 + i % 2}&state=scored&limit=50" for i in range(5)]
            + [f"/api/runs?collection_id={rng.randint(1, args.collections)}" for _ in range(5)],
        }
        # the same reads again while running runs send heartbeats, as busy workers do
        beating = {f"{name}, {args.beating_runs} beating" for name in ("leaderboard",
                                                                     "run list")}
        for name in sorted(beating):
            cases[name] = cases[name.split(",")[0]]
        use_wrk = shutil.which("wrk") is not None
        how = (f"wrk, {args.seconds} s" if use_wrk else f"httpx, {args.requests} requests "
               "(no wrk: `apt-get install wrk` for a generator that is not the bottleneck)")
        print(f"{how} per endpoint, {args.concurrency} concurrent clients, "
              f"{args.workers} server process(es)")
        results: dict[str, list[tuple[float, float, float, int, float, float, int]]] = {}
        for r in range(args.rounds):
            for name, paths in cases.items():
                # The beating cases run beside workers' heartbeats: each changes one run,
                # so each process reads that run again for the cached pages that show it.
                writer = (Heartbeats(url, args.beating_runs, args.beat_sec)
                          if name in beating else None)
                try:
                    if use_wrk:  # an unreported run first: each process computes its reads
                        wrk_load(base, paths, args.warmup, args.concurrency)
                        cpu0 = server_cpu(server.pid)
                        p50, p99, rps, errors = wrk_load(base, paths, args.seconds,
                                                         args.concurrency)
                        answered = rps * args.seconds
                    else:
                        cpu0 = server_cpu(server.pid)
                        lat, wall, errors = asyncio.run(
                            load(base, paths, args.requests, args.concurrency))
                        p50, p99, rps = statistics.median(lat), pct(lat, 0.99), len(lat) / wall
                        answered = len(lat)
                    cpu = (server_cpu(server.pid) - cpu0) / max(answered, 1)
                finally:
                    writes = writer.stop() if writer else 0
                results.setdefault(name, []).append(
                    (p50, p99, rps, errors, cpu, os.getloadavg()[0], writes))
                print(f"  round {r + 1}/{args.rounds} {name:<24} p50 {1000 * p50:.1f} ms, "
                      f"p99 {1000 * p99:.1f} ms, load {os.getloadavg()[0]:.1f}", flush=True)
        print(f"{'endpoint':<24}{'p50 ms':>9}{'p99 ms':>9}{'req/s':>8}{'errors':>7}"
              f"{'cpu ms/req':>11}{'load':>6}")
        for name, rows in results.items():
            med = [statistics.median(row[i] for row in rows) for i in range(7)]
            print(f"{name:<24}{1000 * med[0]:>9.1f}{1000 * med[1]:>9.1f}{med[2]:>8.0f}"
                  f"{sum(row[3] for row in rows):>7}{1000 * med[4]:>11.2f}{med[5]:>6.1f}"
                  + (f"   ({med[6]:.0f} heartbeats a round, every {args.beat_sec:g} s per "
                     "run)" if name in beating else ""))
        over = [name for name, rows in results.items() if not name.startswith("baseline")
                and statistics.median(row[1] for row in rows) >= 0.050]
        print("p99 < 50 ms: " + ("every leaderboard and run-list row" if not over
                                 else f"NOT for {', '.join(over)}"))
        print(f"medians of {args.rounds} interleaved rounds; target: p99 < 50 ms for "
              f"leaderboard and run list (host: {os.cpu_count()} cores, load average "
              f"{' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end)")
    finally:
        server.terminate()
        server.wait(timeout=30)
        if schema is not None:
            with admin.connect() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()


if __name__ == "__main__":
    main()
