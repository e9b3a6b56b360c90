"""Cached reads answered before the framework (service/fastreads.py): the same answer as
the route's, exactly as fresh, never for a caller with a token, never for an address the
route refused.

Every test runs on SQLite and on PostgreSQL (see conftest.database_url)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import text

from posttrain_arena.service.app import create_app
from posttrain_arena.service.fastreads import KnownReads

from .conftest import Arena
from .test_service_results import scored_run

READS = ["/api/runs", "/api/runs?limit=2&offset=1", "/api/runs?state=scored",
         "/api/challenges/micro/leaderboard", "/api/challenges/micro/leaderboard?limit=5"]


def known(arena: Arena) -> KnownReads:
    app: Any = arena.client.app
    reads: KnownReads = app.state.known_reads
    return reads


def test_a_remembered_read_answers_as_the_route_did(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    scored_run(arena, collection["id"], 2.0)
    kr = known(arena)
    for path in READS:
        first = arena.call("GET", path)  # through the framework: the route remembers it
        hits = kr.hits
        again = arena.call("GET", path)
        assert kr.hits == hits + 1, path  # answered without the framework
        assert (again.status_code, again.content) == (first.status_code, first.content)
        assert again.headers == first.headers


def test_a_write_is_seen_by_the_next_remembered_read(
        arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> None:
    """Through this process, through another one, and from outside any server."""
    other_app = create_app(arena.settings)
    other_known: KnownReads = other_app.state.known_reads
    with TestClient(other_app) as other:
        for client in (arena.client, other):
            assert client.get("/api/runs").json()["total"] == 0  # remembered
        run_id = scored_run(arena, collection["id"], 3.0)  # written through the first app
        for client, kr in ((arena.client, known(arena)), (other, other_known)):
            hits = kr.hits
            assert client.get("/api/runs").json()["total"] == 1
            assert kr.hits == hits + 1
        with arena.db.write() as s:
            s.execute(text("UPDATE runs SET reason_class = 'timed_out' WHERE id = :i"),
                      {"i": run_id})
        hits = other_known.hits
        assert other.get("/api/runs").json()["items"][0]["reason_class"] == "timed_out"
        assert other_known.hits == hits + 1
    other_app.state.db.dispose()


def test_a_caller_with_a_token_goes_through_the_framework(
        arena: Arena, challenge: dict[str, Any]) -> None:
    kr = known(arena)
    for path in READS:
        assert arena.call("GET", path).status_code == 200  # anonymous: remembered
    hits = kr.hits
    for path in READS:
        bad = arena.client.get(path, headers={"Authorization": "Bearer not-a-token"})
        assert bad.status_code == 401, path  # a bad token is refused on every route
        assert arena.call("GET", path, "author").status_code == 200
    assert kr.hits == hits
    remembered = len(kr)
    arena.call("GET", "/api/runs?offset=3", "author")  # a token's read is not remembered
    hits = kr.hits
    arena.call("GET", "/api/runs?offset=3")
    assert (kr.hits, len(kr)) == (hits, remembered + 1)


def test_only_what_the_route_answered_is_remembered(
        arena: Arena, challenge: dict[str, Any]) -> None:
    kr = known(arena)
    for path in ("/api/runs?limit=0", "/api/runs?offset=-1", "/api/runs?state=lost",
                 "/api/challenges/micro/leaderboard?limit=1001",
                 "/api/challenges/nope/leaderboard"):
        for _ in range(2):
            assert arena.call("GET", path).status_code in (404, 422), path
    assert len(kr) == 0 and kr.hits == 0
    long = "/api/runs?" + "&".join(f"x{i}=1" for i in range(300))  # fine, but not kept
    assert arena.call("GET", long).status_code == 200
    assert len(kr) == 0
    assert arena.client.head("/api/runs").status_code == 405  # only GETs are answered
    arena.call("GET", "/api/runs")
    assert arena.client.head("/api/runs").status_code == 405


def test_a_remembered_read_that_fails_is_answered_by_the_route(
        arena: Arena, challenge: dict[str, Any]) -> None:
    kr = known(arena)
    path = "/api/challenges/micro/leaderboard"
    assert arena.call("GET", path).status_code == 200
    assert len(kr) == 1
    with arena.db.write() as s:  # the challenge goes away behind the server's back
        s.execute(text("DELETE FROM challenges WHERE slug = 'micro'"))
    gone = arena.call("GET", path)
    assert gone.status_code == 404 and "micro" in gone.json()["detail"]
    assert len(kr) == 0 and kr.hits == 0


def test_the_addresses_remembered_are_bounded(arena: Arena, challenge: dict[str, Any]) -> None:
    app: Any = arena.client.app
    app.state.known_reads = kr = KnownReads(max_entries=2)
    for offset in (0, 1, 2):
        arena.call("GET", f"/api/runs?offset={offset}")
    assert len(kr) == 2
    arena.call("GET", "/api/runs?offset=0")  # the least recently used went first
    assert kr.hits == 0
    arena.call("GET", "/api/runs?offset=2")
    assert kr.hits == 1
