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
says which runs the changes since the page was computed touched. The log comes in the
same read as the counters (on PostgreSQL the same statement, so the same snapshot): the
changes since the last read, for every page of the process. A page keeps each run's JSON,
so one whose runs changed reads only those runs again (once for every page showing them)
and puts them in their places. So ten runs heartbeating every second cost one run's read
each, whatever pages show them; a hit neither waits for a lock nor leaves the event loop.

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
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool

from posttrain_arena.service.db import Database

T = TypeVar("T")

#: The change counters, in the order `versions()` returns them: one per table, and
#: `run_members`, raised only by run changes that can move runs between pages.
TABLES = ("challenges", "collections", "runs", "results", "reviews", "run_members")
#: Most run changes a cached page is checked against before it is simply recomputed.
_MAX_LOG_SPAN = 20_000
_RUNS = TABLES.index("runs")
_VERSION_SQL = f"SELECT {', '.join(TABLES)} FROM data_version WHERE id = 1"
#: The counters and, in the same snapshot, the runs that the changes after a given `runs`
#: value (NULL: none yet) touched, oldest first, at most _MAX_LOG_SPAN of them.
_PG_VERSION_SQL = (
    f"SELECT {', '.join('d.' + t for t in TABLES)}, COALESCE((SELECT array_agg(c.run_id "
    "ORDER BY c.version) FROM run_changes c WHERE c.version > GREATEST(COALESCE(%s::bigint, "
    f"d.runs), d.runs - {_MAX_LOG_SPAN}) AND c.version <= d.runs), '{{}}') "
    "FROM data_version d WHERE d.id = 1")
_SQLITE_LOG_SQL = ("SELECT run_id FROM run_changes WHERE version > ? AND version <= ? "
                   "ORDER BY version")


class _RunLog:
    """Which run each change to `runs` touched, for `runs` counter values (start, upto]:
    extended by every read of the counters, so it reaches the last counters read."""

    def __init__(self) -> None:
        self._runs: dict[int, int] = {}  # runs counter value -> the run that change touched
        self.start = self.upto = -1  # nothing known yet

    def after(self) -> int | None:
        """Where the next read continues from (None: no read yet)."""
        return self.upto if self.upto >= 0 else None

    def span(self, after: int | None, upto: int) -> int:
        """Where a read after `after` that found `runs` = `upto` starts (as the SQL does)."""
        return max(upto if after is None else after, upto - _MAX_LOG_SPAN)

    def extend(self, after: int | None, upto: int, runs: list[int]) -> None:
        """Add what a read after `after` found: `runs` touched by the changes up to `upto`.
        A gap (pruned, or a read from before a reset) starts the log afresh at `upto`."""
        start = self.span(after, upto)
        if len(runs) != upto - start or start > upto:
            self._runs, self.start, self.upto = {}, upto, upto
            return
        if after is None or start != self.upto:
            self._runs, self.start = {}, start
        self._runs.update(zip(range(start + 1, upto + 1), runs, strict=True))
        self.upto = upto
        if len(self._runs) > 2 * _MAX_LOG_SPAN:
            self.start = self.upto - _MAX_LOG_SPAN
            self._runs = {v: r for v, r in self._runs.items() if v > self.start}

    def changed(self, since: int, upto: int) -> frozenset[int] | None:
        """The runs changed by `runs` counter values (since, upto]; None when the log does
        not hold them all (then the caller recomputes)."""
        if upto <= since:
            return frozenset()
        if since < self.start or upto > self.upto:
            return None
        return frozenset(self._runs[v] for v in range(since + 1, upto + 1))


class ReadCache:
    """A bounded, versioned store of serialized reads for one server process."""

    def __init__(self, db: Database, max_entries: int = 512):
        self._db = db
        self._max = max_entries
        self._entries: OrderedDict[Hashable, tuple[tuple[int, ...], bytes]] = OrderedDict()
        self._lock = threading.Lock()  # entries and the connection; held for microseconds
        # PostgreSQL: an asyncio connection (_PgCounters); SQLite: a pooled connection
        self._log = _RunLog()  # filled by every read of the counters
        self._pg = (_PgCounters(db, self._log) if db.engine.dialect.name == "postgresql"
                    else None)
        self._conn: Any = None
        # computations under way, by (key, version); touched only on the event loop
        self._inflight: dict[tuple[Hashable, tuple[int, ...]], asyncio.Future[Any]] = {}
        self.hits = 0
        self.misses = 0
        self.shared = 0  # misses that waited for another request's computation
        # run pages: key -> [version of `tables`, `runs` counter seen, run ids in order,
        # the same as a set, each run's bytes, the page's bytes]
        self._pages: OrderedDict[Hashable, list[Any]] = OrderedDict()
        # runs read again after a change: id -> (`runs` counter seen before, bytes), for
        # every page that shows them
        self._rows: OrderedDict[int, tuple[int, bytes]] = OrderedDict()
        self.refreshes = 0  # pages brought up to date by reading only their changed runs
        self.row_reads = 0  # reads of changed runs, each for every page that needed them

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
                      compute: Callable[[], T]) -> T:
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
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
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
                       compute: Callable[[], list[tuple[int, bytes]]],
                       rows: Callable[[frozenset[int]], dict[int, bytes]],
                       counters: tuple[int, ...] | None = None) -> bytes:
        """Like `get`, for a JSON list of rows of `runs` (a page of the run list):
        `compute` returns the page's runs, in order, as (id, JSON object) pairs, `rows`
        the JSON of the given runs now (those it finds), and `tables` holds `run_members`
        instead of `runs`.

        While those counters are unchanged the page shows the same runs in the same order,
        so it is stale only where one of its own runs changed since (run_changes,
        migration 0003): then only those runs are read again (`rows`, once for every page
        that shows them) and put in their places. A heartbeat costs one run's read, however
        many pages show it; pages without it are served as they are."""
        counters = counters or await self.versions()
        version = tuple(counters[TABLES.index(t)] for t in tables)
        runs_now = counters[_RUNS]
        with self._lock:
            hit = self._pages.get(key)
        if hit is not None and hit[0] == version:
            changed = self._log.changed(hit[1], runs_now)
            if changed is not None:
                stale = changed.intersection(hit[3])
                if not stale:
                    with self._lock:
                        hit[1] = max(hit[1], runs_now)  # valid up to here: checked
                        self._pages.move_to_end(key)
                        self.hits += 1
                    return bytes(hit[5])
                fresh = await self._fresh_rows(stale, runs_now, rows)
                if fresh is not None:
                    return self._refreshed(key, hit, fresh, runs_now)

        def computed() -> bytes:
            items = compute()
            ids = tuple(rid for rid, _ in items)
            page = [row for _, row in items]
            data = _json_list(page)
            with self._lock:
                self.misses += 1
                self._pages[key] = [version, runs_now, ids, frozenset(ids), page, data]
                self._pages.move_to_end(key)
                while len(self._pages) > self._max:
                    self._pages.popitem(last=False)
            return data

        # stored under the counters read before computing, as `get` does; the miss is
        # shared by the requests that arrive while it is computed
        return await self._shared((("runs-page", key), (*version, runs_now)), computed)

    async def _fresh_rows(self, ids: frozenset[int], runs_now: int,
                          rows: Callable[[frozenset[int]], dict[int, bytes]]
                          ) -> dict[int, bytes] | None:
        """The JSON of runs `ids` as of `runs_now` or later: from runs read again since
        their last change, else read now (one read shared by the requests that need the
        same runs). None if one is gone (then the page is recomputed)."""
        fresh: dict[int, bytes] = {}
        with self._lock:
            for rid in ids:
                known = self._rows.get(rid)
                if known is not None:
                    since = self._log.changed(known[0], runs_now)
                    if since is not None and rid not in since:
                        fresh[rid] = known[1]
        need = ids.difference(fresh)
        if need:
            def read() -> dict[int, bytes]:
                got = rows(need)
                with self._lock:
                    self.row_reads += 1
                    for rid, data in got.items():
                        if self._rows.get(rid, (-1,))[0] < runs_now:
                            self._rows[rid] = (runs_now, data)
                            self._rows.move_to_end(rid)
                    while len(self._rows) > 4 * self._max:
                        self._rows.popitem(last=False)
                return got

            got = await self._shared((("runs-rows", need), (runs_now,)), read)
            if not need.issubset(got):
                return None
            fresh.update((rid, got[rid]) for rid in need)
        return fresh

    def _refreshed(self, key: Hashable, page: list[Any], fresh: dict[int, bytes],
                   runs_now: int) -> bytes:
        """`page` with the rows in `fresh` put in, stored as valid up to `runs_now`."""
        with self._lock:
            if page[1] < runs_now:  # else a request as new or newer refreshed it already
                rows = [fresh.get(rid, row) for rid, row in zip(page[2], page[4], strict=True)]
                page[1], page[4], page[5] = runs_now, rows, _json_list(rows)
                self.refreshes += 1
            if self._pages.get(key) is page:
                self._pages.move_to_end(key)
            return bytes(page[5])

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
        with self._lock:  # autocommit: the log, read second, holds every change counted
            cur = self._conn.cursor()
            try:
                cur.execute(_VERSION_SQL)
                row = cur.fetchone()
                if row is None:
                    raise RuntimeError("the data_version row is missing; run the migrations")
                counters = tuple(int(v) for v in row)
                after, upto = self._log.after(), counters[_RUNS]
                cur.execute(_SQLITE_LOG_SQL, (self._log.span(after, upto), upto))
                self._log.extend(after, upto, [int(r) for (r,) in cur.fetchall()])
            finally:
                cur.close()
        return counters

    def _drop(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # it is being thrown away anyway
                conn.invalidate()


def _json_list(rows: Iterable[bytes]) -> bytes:
    """A JSON array of JSON values."""
    return b"[" + b",".join(rows) + b"]"


class _PgCounters:
    """The counters read from PostgreSQL on an asyncio connection of the cache's own.

    While one read is on the wire the event loop serves other requests, and every request
    that arrived before a read was sent is answered by that read: it reflects every
    commit made before it started, hence before the request came. So reads never overlap,
    and under load one read answers a batch of requests.
    """

    def __init__(self, db: Database, log: _RunLog):
        self._db = db
        self._log = log
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
            after = self._log.after()
            try:
                row = await self._query(after)
            except Exception:  # a dropped connection: reconnect once, then let it raise
                self.close()
                row = await self._query(after)
            if row is None:
                raise RuntimeError("the data_version row is missing; run the migrations")
            counters = tuple(int(v) for v in row[:-1])
            self._log.extend(after, counters[_RUNS], [int(r) for r in row[-1]])
            self._result = counters
            self._answered = answers
            self.reads += 1
        finally:
            self._read_task = None

    async def _query(self, after: int | None) -> Any:
        import psycopg

        if self._conn is None:
            cargs, cparams = self._db.engine.dialect.create_connect_args(self._db.engine.url)
            self._conn = await psycopg.AsyncConnection.connect(*cargs, **cparams,
                                                               autocommit=True)
            await self._conn.execute("SET statement_timeout = '5s'")
        cur = await self._conn.execute(_PG_VERSION_SQL, (after,), prepare=True)
        return await cur.fetchone()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:  # closing the socket needs no event loop
            with contextlib.suppress(Exception):
                conn.pgconn.finish()
