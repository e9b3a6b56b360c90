"""App start-up, migrations, restart durability, tokens, errors, documents."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from fastapi.testclient import TestClient
from sqlalchemy import inspect

from posttrain_arena.service.app import create_app
from posttrain_arena.service.auth import hash_token
from posttrain_arena.service.config import Settings
from posttrain_arena.service.models import ApiToken

if TYPE_CHECKING:
    from tests.service.conftest import Arena


def test_health_openapi_and_agents_page(arena: Arena) -> None:
    assert arena.call("GET", "/api/health").json()["status"] == "ok"
    spec = arena.call("GET", "/openapi.json").json()
    assert "/api/runs/preflight" in spec["paths"]
    page = arena.call("GET", "/AGENTS.md")
    assert page.status_code == 200
    assert "request_id" in page.text and "/api/runs" in page.text


def test_start_up_moves_long_lived_objects_out_of_the_collector(arena: Arena) -> None:
    """Full collections then skip the app's own objects (see app.lifespan)."""
    assert gc.get_freeze_count() > 10_000


def test_sqlite_runs_in_wal_mode(arena: Arena) -> None:
    if not arena.db.is_sqlite:
        return
    with arena.db.read() as s:
        assert s.connection().exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_tokens_are_hashed_at_rest(arena: Arena) -> None:
    with arena.db.read() as s:
        rows = s.query(ApiToken).all()
    stored = {r.token_hash for r in rows}
    for token in arena.tokens.values():
        assert token not in stored and hash_token(token) in stored
        assert all(token not in r.prefix for r in rows)


def test_me_and_bad_tokens(arena: Arena) -> None:
    assert arena.call("GET", "/api/me", "editor").json()["role"] == "editor"
    assert arena.call("GET", "/api/me").status_code == 401
    good = arena.tokens["author"]
    for bad in (good[:-1] + ("x" if good[-1] != "x" else "y"), "arena_nope", "garbage"):
        resp = arena.client.get("/api/me", headers={"Authorization": f"Bearer {bad}"})
        assert resp.status_code == 401
        assert "token" in resp.json()["detail"]


def test_unknown_ids_are_404_with_a_hint(arena: Arena) -> None:
    for path in (
        "/api/runs/999",
        "/api/collections/999",
        "/api/challenges/nope",
        "/api/challenges/nope/leaderboard",
        "/api/board/threads/999",
        "/api/runs/999/result",
    ):
        resp = arena.call("GET", path)
        assert resp.status_code == 404, path
        assert resp.json()["detail"]


def test_restart_loses_nothing_committed(settings: Settings) -> None:
    app = create_app(settings)
    with TestClient(app) as c:
        created = c.post("/api/users", json={"name": "x", "role": "admin"})
        assert created.status_code == 401  # no admin yet: users come from `arena admin`
    from posttrain_arena.service.auth import create_user

    with app.state.db.write() as s:
        _, token = create_user(s, "root", "admin")
    with TestClient(app) as c:
        hdr = {"Authorization": f"Bearer {token}"}
        assert c.put("/api/budget", json={"cap": 42.0}, headers=hdr).status_code == 200
        c.post("/api/board/threads", json={"title": "hello", "body": "first"}, headers=hdr)
    app.state.db.dispose()
    # A second process start on the same data directory: migrations are a no-op and
    # every committed row is there.
    again = create_app(settings)
    with TestClient(again) as c:
        assert (
            c.get("/api/me", headers={"Authorization": f"Bearer {token}"}).json()["name"] == "root"
        )
        assert c.get("/api/budget").json()["cap"] == 42.0
        assert [t["title"] for t in c.get("/api/board/threads").json()] == ["hello"]
    tables = set(inspect(again.state.db.engine).get_table_names())
    assert {"runs", "results", "reviews", "budget", "alembic_version"} <= tables
    again.state.db.dispose()


def test_migrations_match_the_models(arena: Arena) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from posttrain_arena.service.models import Base

    with arena.db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models changed without a migration: {diff}"
