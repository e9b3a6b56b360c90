"""Hot reads served from memory while the data they were computed from is unchanged.

Leaderboards and run lists are read far more often than the tables behind them change.
Each server process keeps the JSON of recent reads, keyed by what was asked, together
with the change counters of the tables the read depends on (models.DataVersion: one per
table, raised by database triggers with every committed change to challenges,
collections, runs, results or reviews). A read first fetches the counters, one
primary-key row, on a connection this cache keeps for itself; when its tables' counters
match, the stored bytes are the answer. Otherwise the read is computed in a worker thread
from a fresh session and stored under the counters seen *before* computing, so data newer
than its label is only ever recomputed, never served stale. A run's heartbeat changes
`runs` only, so it leaves cached leaderboards in place.

Pages of the run list (`get_runs`) go finer: each remembers the ids of the runs it shows.
While `run_members` (new, deleted or re-stated runs) is unchanged, the set and order of
runs on every page is unchanged, and the page is stale only if one of its own runs
changed: the `run_changes` log (one row per change, numbered by the `runs` counter)
says which runs the changes since the page was computed touched, read once per change
for all pages. So ten runs heartbeating every second recompute only the pages that show
them, not every page.

This is exact across server processes and workers: a client that wrote and then reads,
through any process, sees its write. Nothing expires by time.

The counters are read on the event loop without a thread hop: on PostgreSQL through an
asyncio connection, so the loop serves other requests during the round trip and one read
answers every request that arrived before it was sent (_PgCounters); on SQLite with a
local read that costs microseconds. Threads are kept for the work that needs them
(computing on a miss, every other endpoint).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from starlette.concurrency import run_in_threadpool

from posttrain_arena.service.db import Database

#: The change counters, in the order `versions()` returns them: one per table, and
#: `run_members`, raised only by run changes that can move runs between pages.
TABLES = ("challenges", "collections", "runs", "results", "reviews", "run_members")
#: Most run changes a cached page is checked against before it is simply recomputed.
_MAX_LOG_SPAN = 20_000
_VERSION_SQL = f"SELECT {', '.join(TABLES)} FROM data_version WHERE id = 1"


class ReadCache:
    """A bounded, versioned store of serialized reads for one server process."""

    def __init__(self, db: Database, max_entries: int = 512):
        self._db = db
        self._max = max_entries
        self._entries: OrderedDict[Hashable, tuple[tuple[int, ...], bytes]] = OrderedDict()
        self._lock = threading.Lock()  # entries and the connection; held for microseconds
        # PostgreSQL: an asyncio connection (_PgCounters); SQLite: a pooled connection
        self._pg = _PgCounters(db) if db.engine.dialect.name == "postgresql" else None
        self._conn: Any = None
        # computations under way, by (key, version); touched only on the event loop
        self._inflight: dict[tuple[Hashable, tuple[int, ...]], asyncio.Future[bytes]] = {}
        self.hits = 0
        self.misses = 0
        self.shared = 0  # misses that waited for another request's computation
        # run pages: key -> [version of `tables`, `runs` counter seen, run ids, bytes]
        self._pages: OrderedDict[Hashable, list[Any]] = OrderedDict()
        self._log: dict[int, int] = {}  # runs counter value -> the run that change touched
        self._log_from = self._log_upto = 0  # the log holds (from, upto], contiguous
        self._log_lock: asyncio.Lock | None = None
        self._log_loop: asyncio.AbstractEventLoop | None = None
        self.log_reads = 0

    async def get(self, key: Hashable, tables: tuple[str, ...],
                  compute: Callable[[], bytes],
                  counters: tuple[int, ...] | None = None) -> bytes:
        """The bytes stored for `key` if none of `tables` (what `compute` reads) changed,
        else `compute()`'s (run in a worker thread) stored for next time. Errors are not
        stored.

        Requests that miss on the same key and version while it is being computed wait
        for that one computation instead of each starting their own. `counters`, when
        given, are `versions()` read by this request already (for several reads)."""
        counters = counters or await self.versions()
        version = tuple(counters[TABLES.index(t)] for t in tables)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] == version:
                self._entries.move_to_end(key)
                self.hits += 1
                return hit[1]

        def computed() -> bytes:
            data = compute()
            with self._lock:
                self.misses += 1
                self._entries[key] = (version, data)
                self._entries.move_to_end(key)
                while len(self._entries) > self._max:
                    self._entries.popitem(last=False)
            return data

        return await self._shared((key, version), computed)

    async def _shared(self, flight: tuple[Hashable, tuple[int, ...]],
                      compute: Callable[[], bytes]) -> bytes:
        """`compute()` in a worker thread, or the result of the same computation already
        under way for `flight` (key and version)."""
        pending = self._inflight.get(flight)
        if pending is not None:
            self.shared += 1
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this request was canceled, not the computation
                return await self._shared(flight, compute)  # its request went away
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._inflight[flight] = future
        try:
            data = await run_in_threadpool(compute)
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters, if any, raise it themselves
            raise
        except BaseException:
            future.cancel()
            raise
        finally:
            del self._inflight[flight]
        future.set_result(data)
        return data

    async def get_runs(self, key: Hashable, tables: tuple[str, ...],
                       compute: Callable[[], tuple[bytes, frozenset[int]]],
                       counters: tuple[int, ...] | None = None) -> bytes:
        """Like `get`, for a read that shows rows of `runs` (a page of the run list):
        `compute` returns the bytes and the ids of the runs they show, and `tables` holds
        `run_members` instead of `runs`. The stored bytes stay valid while those counters
        are unchanged and none of the runs they show changed since (run_changes, migration
        0003), so a heartbeat recomputes only the pages holding that run."""
        counters = counters or await self.versions()
        version = tuple(counters[TABLES.index(t)] for t in tables)
        runs_now = counters[TABLES.index("runs")]
        with self._lock:
            hit = self._pages.get(key)
        if hit is not None and hit[0] == version:
            changed = await self._changed_runs(hit[1], runs_now)
            if changed is not None and not (changed & hit[2]):
                with self._lock:
                    hit[1] = max(hit[1], runs_now)  # valid up to here: checked, not moved
                    self._pages.move_to_end(key)
                    self.hits += 1
                return bytes(hit[3])

        def computed() -> bytes:
            data, ids = compute()
            with self._lock:
                self.misses += 1
                self._pages[key] = [version, runs_now, ids, data]
                self._pages.move_to_end(key)
                while len(self._pages) > self._max:
                    self._pages.popitem(last=False)
            return data

        # stored under the counters read before computing, as `get` does; the miss is
        # shared by the requests that arrive while it is computed
        return await self._shared((("runs-page", key), (*version, runs_now)), computed)

    async def _changed_runs(self, since: int, upto: int) -> frozenset[int] | None:
        """The runs changed by `runs` counter values (since, upto]; None when the log no
        longer holds them all (then the caller recomputes)."""
        if upto <= since:
            return frozenset()
        if upto - since > _MAX_LOG_SPAN:
            return None
        loop = asyncio.get_running_loop()
        if self._log_lock is None or self._log_loop is not loop:  # a lock is loop-bound
            self._log_lock, self._log_loop = asyncio.Lock(), loop
        async with self._log_lock:  # one read of the log per change, for every page
            if since < self._log_from or self._log_upto < since:
                self._log, self._log_from, self._log_upto = {}, since, since
            if self._log_upto < upto:
                start = self._log_upto
                rows = await run_in_threadpool(self._read_log, start, upto)
                self.log_reads += 1
                if len(rows) != upto - start:  # pruned, or not yet visible: do not guess
                    return None
                self._log.update(rows)
                self._log_upto = upto
                if len(self._log) > 2 * _MAX_LOG_SPAN:
                    self._log_from = self._log_upto - _MAX_LOG_SPAN
                    self._log = {v: r for v, r in self._log.items() if v > self._log_from}
            if since < self._log_from:
                return None
            return frozenset(self._log[v] for v in range(since + 1, upto + 1))

    def _read_log(self, after: int, upto: int) -> dict[int, int]:
        from sqlalchemy import select

        from posttrain_arena.service.models import RunChange

        with self._db.read() as session:
            rows = session.execute(select(RunChange.version, RunChange.run_id).where(
                RunChange.version > after, RunChange.version <= upto))
            return {int(v): int(r) for v, r in rows}

    async def versions(self) -> tuple[int, ...]:
        """The tables' change counters, in TABLES order (also proves the database answers)."""
        if self._pg is not None:
            return await self._pg.read()
        if self._conn is None:
            await run_in_threadpool(self._connect)
        try:
            return self._read()
        except Exception:  # a dropped connection: reconnect once, then let it raise
            self._drop()
            await run_in_threadpool(self._connect)
            return self._read()

    def close(self) -> None:
        """Close the cache's connection (the app's shutdown)."""
        self._drop()
        if self._pg is not None:
            self._pg.close()

    def _connect(self) -> None:
        with self._lock:
            if self._conn is None:  # SQLite, in autocommit mode (db.py): sees each commit
                self._conn = self._db.engine.raw_connection()

    def _read(self) -> tuple[int, ...]:
        with self._lock:
            cur = self._conn.cursor()
            try:
                cur.execute(_VERSION_SQL)
                row = cur.fetchone()
            finally:
                cur.close()
        if row is None:
            raise RuntimeError("the data_version row is missing; run the migrations")
        return tuple(int(v) for v in row)

    def _drop(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # it is being thrown away anyway
                conn.invalidate()


class _PgCounters:
    """The counters read from PostgreSQL on an asyncio connection of the cache's own.

    While one read is on the wire the event loop serves other requests, and every request
    that arrived before a read was sent is answered by that read: it reflects every
    commit made before it started, hence before the request came. So reads never overlap,
    and under load one read answers a batch of requests.
    """

    def __init__(self, db: Database):
        self._db = db
        self._conn: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._asked = 0  # requests that asked so far (arrival order)
        self._answered = 0  # requests up to which the last finished read answers
        self._result: tuple[int, ...] = ()
        self._read_task: asyncio.Future[None] | None = None
        self.reads = 0

    async def read(self) -> tuple[int, ...]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # first use, or the app now runs on another loop
            self.close()
            self._loop, self._asked, self._answered, self._read_task = loop, 0, 0, None
        self._asked += 1
        me = self._asked
        while self._answered < me:
            if self._read_task is None:
                self._read_task = asyncio.ensure_future(self._fetch(self._asked))
            await asyncio.shield(self._read_task)
        return self._result

    async def _fetch(self, answers: int) -> None:
        try:
            try:
                row = await self._query()
            except Exception:  # a dropped connection: reconnect once, then let it raise
                self.close()
                row = await self._query()
            if row is None:
                raise RuntimeError("the data_version row is missing; run the migrations")
            self._result = tuple(int(v) for v in row)
            self._answered = answers
            self.reads += 1
        finally:
            self._read_task = None

    async def _query(self) -> Any:
        import psycopg

        if self._conn is None:
            cargs, cparams = self._db.engine.dialect.create_connect_args(self._db.engine.url)
            self._conn = await psycopg.AsyncConnection.connect(*cargs, **cparams,
                                                               autocommit=True)
            await self._conn.execute("SET statement_timeout = '5s'")
        cur = await self._conn.execute(_VERSION_SQL, prepare=True)
        return await cur.fetchone()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:  # closing the socket needs no event loop
            with contextlib.suppress(Exception):
                conn.pgconn.finish()
