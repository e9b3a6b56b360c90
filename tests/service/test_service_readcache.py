"""The read cache: hot reads reused while the data is unchanged, and never stale after it.

Every test runs on SQLite and on PostgreSQL (see conftest.database_url)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from posttrain_arena.service.app import create_app
from posttrain_arena.service.readcache import TABLES, ReadCache, _RunLog

from .conftest import Arena
from .test_service_results import scored_run


def counters(arena: Arena) -> dict[str, int]:
    with arena.db.read() as s:
        row = s.execute(text(f"SELECT {', '.join(TABLES)} FROM data_version WHERE id = 1"))
        return dict(zip(TABLES, row.one(), strict=True))


def cache(arena: Arena) -> ReadCache:
    app: Any = arena.client.app
    read_cache: ReadCache = app.state.read_cache
    return read_cache


@pytest.mark.parametrize("table", ["challenges", "collections", "runs", "results", "reviews"])
def test_every_committed_change_to_a_tracked_table_raises_the_version(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any], table: str) -> None:
    run_id = scored_run(arena, collection["id"], 5.0)
    arena.call("POST", f"/api/runs/{run_id}/collect", "author")
    arena.call("POST", f"/api/runs/{run_id}/review", "editor",
               json={"decision": "accept", "note": ""})
    before = counters(arena)
    with arena.db.write() as s:  # outside the API, as a person at a psql prompt would
        s.execute(text(f"UPDATE {table} SET id = id"))
    after = counters(arena)
    assert after[table] > before[table]
    assert {t: v for t, v in after.items() if t != table} == {
        t: v for t, v in before.items() if t != table}
    with arena.db.write() as s:
        s.execute(text("UPDATE users SET name = name"))  # not tracked: hot reads ignore it
        s.execute(text("UPDATE budget SET cap = cap"))
        s.execute(text(f"UPDATE {table} SET id = id WHERE id < 0"))  # touches no row
    assert counters(arena) == after


def test_a_rolled_back_change_leaves_the_counters(arena: Arena,
                                                 challenge: dict[str, Any]) -> None:
    before = counters(arena)
    with pytest.raises(RuntimeError), arena.db.write() as s:
        s.execute(text("UPDATE challenges SET title = 'x'"))
        raise RuntimeError("abort")
    assert counters(arena) == before


def test_hot_reads_are_served_from_memory_until_the_data_changes(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    rc = cache(arena)
    first = arena.call("GET", "/api/challenges/micro/leaderboard").json()
    runs = arena.call("GET", "/api/runs").json()
    misses, hits = rc.misses, rc.hits
    for _ in range(3):
        assert arena.call("GET", "/api/challenges/micro/leaderboard").json() == first
        assert arena.call("GET", "/api/runs").json() == runs
    assert (rc.misses, rc.hits) == (misses, hits + 9)  # a run list: its page and its count

    run_id = scored_run(arena, collection["id"], 7.5)  # a write through the API
    assert arena.call("GET", "/api/runs").json()["total"] == runs["total"] + 1
    assert arena.call("POST", f"/api/runs/{run_id}/collect", "author").status_code == 200
    assert arena.call("POST", f"/api/runs/{run_id}/review", "editor",
                      json={"decision": "accept", "note": ""}).status_code == 200
    board = arena.call("GET", "/api/challenges/micro/leaderboard").json()
    assert [e["mean_change_pp"] for e in board["ranked"]] == [7.5]
    assert rc.misses > misses


def test_a_heartbeat_leaves_cached_leaderboards_in_place(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    rc = cache(arena)
    runs = arena.call("GET", "/api/runs").json()
    scored_run(arena, collection["id"], 1.0)  # stores its result: the board changes here
    board = arena.call("GET", "/api/challenges/micro/leaderboard").json()
    assert board["pending"] == 1
    with arena.db.write() as s:  # what a worker's heartbeat writes
        s.execute(text("UPDATE runs SET heartbeat_at = created_at"))
    misses = rc.misses
    assert arena.call("GET", "/api/challenges/micro/leaderboard").json() == board
    assert rc.misses == misses  # served from memory: no table it reads has changed
    assert arena.call("GET", "/api/runs").json()["total"] == runs["total"] + 1
    assert rc.misses == misses + 2  # a new run: its page and the count were recomputed


def test_a_write_through_another_process_is_seen_at_once(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    """Two server processes on one database: what one commits, the other's next read has."""
    other_app = create_app(arena.settings)
    with TestClient(other_app) as other:
        assert other.get("/api/runs").json()["total"] == 0
        assert other.get("/api/runs").json()["total"] == 0  # now from other's memory
        scored_run(arena, collection["id"], 3.0)  # written through the first app
        assert other.get("/api/runs").json()["total"] == 1
        with arena.db.write() as s:  # and a change from outside any server
            s.execute(text("UPDATE runs SET reason_class = 'timed_out'"))
        assert other.get("/api/runs").json()["items"][0]["reason_class"] == "timed_out"
    other_app.state.db.dispose()


def test_distinct_queries_are_cached_apart(arena: Arena, challenge: dict[str, Any],
                                           collection: dict[str, Any]) -> None:
    for change in (1.0, 2.0, 3.0):
        scored_run(arena, collection["id"], change)
    page1 = arena.call("GET", "/api/runs", params={"limit": 2}).json()
    page2 = arena.call("GET", "/api/runs", params={"limit": 2, "offset": 2}).json()
    assert [r["id"] for r in page1["items"]] != [r["id"] for r in page2["items"]]
    assert len(page1["items"]) == 2 and len(page2["items"]) == 1
    assert arena.call("GET", "/api/runs", params={"state": "queued"}).json()["total"] == 0
    assert arena.call("GET", "/api/runs", params={"limit": -1}).status_code == 422
    assert arena.call("GET", "/api/runs", params={"offset": -5}).status_code == 422


def test_errors_are_not_cached(arena: Arena, challenge: dict[str, Any]) -> None:
    assert arena.call("GET", "/api/challenges/nope/leaderboard").status_code == 404
    body = dict(challenge, slug="nope")
    assert arena.call("POST", "/api/challenges", "admin", json=body).status_code == 201
    assert arena.call("GET", "/api/challenges/nope/leaderboard").status_code == 200


def test_a_dropped_connection_is_replaced(arena: Arena) -> None:
    """The server side of the cache's connection goes away, as when the database
    restarts: the next read reconnects and answers."""
    rc = cache(arena)
    assert arena.call("GET", "/api/health").status_code == 200
    if arena.db.is_sqlite:
        rc._conn.driver_connection.close()
    else:
        assert rc._pg is not None
        pid = rc._pg._conn.info.backend_pid
        with arena.db.write() as s:
            assert s.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()
    assert arena.call("GET", "/api/health").json()["status"] == "ok"
    assert arena.call("GET", "/api/runs").status_code == 200


def test_concurrent_misses_share_one_computation(arena: Arena) -> None:
    rc = ReadCache(arena.db)
    calls: list[int] = []

    def compute() -> bytes:
        calls.append(1)
        time.sleep(0.2)  # long enough for every request below to arrive meanwhile
        return b"board"

    def failing() -> bytes:
        calls.append(1)
        time.sleep(0.2)
        raise LookupError("no such challenge")

    async def burst() -> tuple[list[bytes], list[BaseException | bytes]]:
        ok = await asyncio.gather(*(rc.get("k", ("runs",), compute) for _ in range(10)))
        bad = await asyncio.gather(*(rc.get("bad", ("runs",), failing) for _ in range(5)),
                                   return_exceptions=True)
        return list(ok), list(bad)

    ok, bad = asyncio.run(burst())
    assert ok == [b"board"] * 10
    assert all(isinstance(e, LookupError) for e in bad)
    assert len(calls) == 2  # one per key, however many asked
    assert (rc.misses, rc.shared) == (1, 13)
    rc.close()


@pytest.mark.parametrize(  # SQLite's counters are read in-process, one request at a time
    "database_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_concurrent_counter_reads_share_round_trips_and_stay_fresh(
        arena: Arena, challenge: dict[str, Any]) -> None:
    rc = ReadCache(arena.db)
    assert rc._pg is not None
    slot = TABLES.index("challenges")

    async def burst() -> tuple[tuple[int, ...], list[tuple[int, ...]], int]:
        before = await rc.versions()
        reads = rc._pg.reads  # type: ignore[union-attr]
        with arena.db.write() as s:  # committed before any of the requests below
            s.execute(text("UPDATE challenges SET id = id"))
        got = await asyncio.gather(*(rc.versions() for _ in range(20)))
        return before, got, rc._pg.reads - reads  # type: ignore[union-attr]

    before, got, reads = asyncio.run(burst())
    assert all(v[slot] == before[slot] + 1 for v in got)  # none answered from before
    assert 1 <= reads <= 2  # twenty requests, one or two round trips
    rc.close()


def _many_runs(arena: Arena, n: int) -> list[int]:
    """n runs straight into the table (the API's launch checks allow one active run)."""
    with arena.db.write() as s:
        ch = s.execute(text("SELECT id FROM challenges")).scalar_one()
        col = s.execute(text("SELECT id FROM collections")).scalar_one()
        for i in range(n):
            s.execute(text(
                "INSERT INTO runs (challenge_id, collection_id, created_by, request_id, state, "
                "stages_done, reserved, attempts, run_seconds, created_at) VALUES "
                "(:ch, :col, 1, :rid, 'running', '[]', 0, 1, 0, CURRENT_TIMESTAMP)"),
                {"ch": ch, "col": col, "rid": f"r{i}"})
        return [int(i) for i in s.scalars(text("SELECT id FROM runs ORDER BY id DESC"))]


def _page(arena: Arena, offset: int) -> Any:
    return arena.call("GET", "/api/runs", params={"limit": 5, "offset": offset}).json()


def test_a_heartbeat_recomputes_only_the_pages_holding_that_run(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    rc = cache(arena)
    ids = _many_runs(arena, 20)  # newest first: pages of 5 are ids[0:5], ids[5:10], ...
    first = [_page(arena, o) for o in (0, 5, 10, 15)]
    assert [[r["id"] for r in p["items"]] for p in first] == [ids[o:o + 5] for o in
                                                              (0, 5, 10, 15)]
    assert {p["total"] for p in first} == {20}
    misses = rc.misses
    assert misses == 5  # four pages and one count, shared by every page of the filter
    beating = ids[7]  # on the second page
    for beat in range(3):  # what a worker's heartbeat writes, as raw SQL would
        with arena.db.write() as s:
            s.execute(text("UPDATE runs SET attempts = :t, heartbeat_at = CURRENT_TIMESTAMP"
                           " WHERE id = :i"), {"t": 10 + beat, "i": beating})
        pages = [_page(arena, o) for o in (0, 5, 10, 15)]
        shown = {r["id"]: r for p in pages for r in p["items"]}
        assert shown[beating]["attempts"] == 10 + beat  # never stale
        assert [p["items"] for i, p in enumerate(pages) if i != 1] == \
            [p["items"] for i, p in enumerate(first) if i != 1]
    # the second page took its run's new row, once per heartbeat; nothing was recomputed
    assert (rc.misses, rc.refreshes, rc.row_reads) == (misses, 3, 3)


def test_a_run_on_several_pages_is_read_once_per_change(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    rc = cache(arena)
    ids = _many_runs(arena, 6)
    views = [{"limit": 5}, {"state": "running", "limit": 3},
             {"collection_id": collection["id"]}]
    before = [arena.call("GET", "/api/runs", params=v).json() for v in views]
    assert all(ids[0] in [r["id"] for r in b["items"]] for b in before)
    with arena.db.write() as s:
        s.execute(text("UPDATE runs SET attempts = 42 WHERE id = :i"), {"i": ids[0]})
    misses = rc.misses
    after = [arena.call("GET", "/api/runs", params=v).json() for v in views]
    for b, a in zip(before, after, strict=True):
        assert a["total"] == b["total"]
        assert [r["id"] for r in a["items"]] == [r["id"] for r in b["items"]]
        assert {r["id"]: r["attempts"] for r in a["items"]}[ids[0]] == 42
        assert [r for r in a["items"] if r["id"] != ids[0]] == \
            [r for r in b["items"] if r["id"] != ids[0]]
    assert (rc.misses, rc.refreshes, rc.row_reads) == (misses, 3, 1)


def test_a_changed_run_gone_when_read_again_means_recomputing(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    rc = ReadCache(arena.db)
    ids = _many_runs(arena, 3)
    computed: list[int] = []

    def compute() -> list[tuple[int, bytes]]:
        computed.append(1)
        return [(i, b'{"id":%d}' % i) for i in ids]

    def gone(which: frozenset[int]) -> dict[int, bytes]:
        assert which == {ids[1]}  # only the run that changed is asked for
        return {}  # deleted between reading the counters and reading the run

    async def twice() -> tuple[bytes, bytes]:
        first = await rc.get_runs("k", ("run_members",), compute, gone)
        with arena.db.write() as s:
            s.execute(text("UPDATE runs SET attempts = 5 WHERE id = :i"), {"i": ids[1]})
        return first, await rc.get_runs("k", ("run_members",), compute, gone)

    first, second = asyncio.run(twice())
    assert first == second == b"[" + b",".join(b'{"id":%d}' % i for i in ids) + b"]"
    assert (len(computed), rc.refreshes, rc.row_reads) == (2, 0, 1)
    rc.close()


def test_a_run_changing_state_moves_every_page(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    ids = _many_runs(arena, 8)
    before = arena.call("GET", "/api/runs", params={"state": "failed"}).json()
    assert before["total"] == 0
    [_page(arena, o) for o in (0, 5)]
    with arena.db.write() as s:
        s.execute(text("UPDATE runs SET state = 'failed' WHERE id = :i"), {"i": ids[-1]})
        s.execute(text("DELETE FROM runs WHERE id = :i"), {"i": ids[0]})
    after = arena.call("GET", "/api/runs", params={"state": "failed"}).json()
    assert after["total"] == 1 and after["items"][0]["id"] == ids[-1]
    assert [r["id"] for r in _page(arena, 0)["items"]] == ids[1:6]
    assert _page(arena, 5)["total"] == 7


def test_a_pruned_change_log_means_recomputing_not_guessing(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    rc = cache(arena)
    ids = _many_runs(arena, 10)
    _page(arena, 5)
    with arena.db.write() as s:
        s.execute(text("UPDATE runs SET attempts = 99 WHERE id = :i"), {"i": ids[6]})
    with arena.db.write() as s:  # after the commit: PostgreSQL logs the change at commit
        s.execute(text("DELETE FROM run_changes"))  # as the trigger prunes old changes
    misses = rc.misses
    assert {r["id"]: r["attempts"] for r in _page(arena, 5)["items"]}[ids[6]] == 99
    assert (rc.misses, rc.refreshes) == (misses + 1, 0)  # the whole page, read afresh


def test_reads_answer_while_a_write_transaction_is_open(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    """A heartbeat's transaction holds its run's row, and on PostgreSQL (once its deferred
    trigger has fired) the counter row, until it commits. Reads answer meanwhile, with
    the data from before it, and see it once it is committed."""
    ids = _many_runs(arena, 3)
    before = arena.call("GET", "/api/runs").json()
    board = arena.call("GET", "/api/challenges/micro/leaderboard").json()
    answered: dict[str, Any] = {}

    def read() -> None:
        answered["runs"] = arena.call("GET", "/api/runs").json()
        answered["run"] = arena.call("GET", f"/api/runs/{ids[0]}").json()
        answered["board"] = arena.call("GET", "/api/challenges/micro/leaderboard").json()

    with arena.db.write() as s:
        s.execute(text("UPDATE runs SET attempts = 7, heartbeat_at = CURRENT_TIMESTAMP "
                       "WHERE id = :i"), {"i": ids[0]})
        if not arena.db.is_sqlite:
            s.execute(text("SET CONSTRAINTS ALL IMMEDIATE"))  # counter row locked from here
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(60)  # a read that waited for this transaction would wait until it ends
        assert not reader.is_alive(), "a read waited for an open write transaction"
    assert answered == {"runs": before, "run": before["items"][0], "board": board}
    after = arena.call("GET", "/api/runs").json()
    assert after["items"][0]["id"] == ids[0] and after["items"][0]["attempts"] == 7


def test_the_change_log_answers_only_for_what_it_holds() -> None:
    log = _RunLog()
    assert log.after() is None
    log.extend(None, 10, [])  # the first read: nothing is known before counter 10
    assert log.changed(10, 10) == frozenset() and log.changed(9, 10) is None
    log.extend(10, 13, [4, 5, 4])
    assert log.after() == 13
    assert log.changed(10, 13) == {4, 5} and log.changed(12, 13) == {4}
    assert log.changed(10, 14) is None  # past the last read
    log.extend(13, 15, [6])  # two changes, one row: pruned, so start afresh at 15
    assert log.changed(13, 15) is None and log.changed(15, 15) == frozenset()
    log.extend(15, 16, [7])
    assert log.changed(15, 16) == {7}
    log.extend(16, 12, [])  # counters that went back (a restored database): start afresh
    assert log.changed(11, 12) is None and log.after() == 12
