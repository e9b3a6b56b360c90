"""Fixtures for the service tests: a real database (SQLite always, PostgreSQL when
ARENA_TEST_POSTGRES_URL is set), the app, users of every role, collections on disk."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from posttrain_arena.service.app import create_app
from posttrain_arena.service.auth import create_user
from posttrain_arena.service.config import Settings
from posttrain_arena.service.db import Database
from posttrain_arena.task_format.scaffold import new_task

DOMAINS = ("software-engineering", "finance-economics", "cybersecurity", "natural-science")


def write_notes(package: Path, seed: str, words: int = 1500) -> None:
    """Give a scaffolded package content of its own (as real packages have): notes in
    its build context, the same for the same seed. Without them every scaffold is a
    near-copy of every other (service/similarity.py), whatever its name."""
    rng = random.Random(seed)
    text = " ".join(f"w{rng.randrange(100_000)}" for _ in range(words))
    (package / "environment" / "notes.md").write_text(text + "\n")


def make_collection(root: Path, n_tasks: int = 2, team: str = "team") -> Path:
    """A real collection: submission.yaml plus scaffolded task packages under envs/."""
    (root / "envs").mkdir(parents=True)
    (root / "submission.yaml").write_text(
        f"team_name: {team}\ncontact_email: team@example.org\ntrack: environments\n"
    )
    for i in range(n_tasks):
        new_task(f"task-{team}-{i}", DOMAINS[i % len(DOMAINS)], root / "envs")
        write_notes(root / "envs" / f"task-{team}-{i}", f"{team}-{i}")
    return root


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    """None (SQLite in the data dir) or a PostgreSQL URL with a schema of its own."""
    if request.param == "sqlite":
        yield None
        return
    yield from postgres_schema_url()


@pytest.fixture
def settings(tmp_path: Path, database_url: str | None) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        budget_cap=100.0,
        heartbeat_interval_sec=0.2,
        heartbeat_timeout_sec=30,
        max_attempts=2,
        upload_max_bytes=200_000,
        unpacked_max_bytes=2_000_000,
        max_files=500,
        board_rate_limit=5,
        hf_endpoint="http://127.0.0.1:9",  # never the real hub: tests give a stand-in
    )


@dataclass
class Arena:
    """The app under test, its database, and one token per role."""

    client: TestClient
    db: Database
    settings: Settings
    tokens: dict[str, str] = field(default_factory=dict)
    ids: dict[str, int] = field(default_factory=dict)

    def headers(self, who: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}

    def call(self, method: str, path: str, who: str | None = None, **kw: Any) -> Any:
        return self.client.request(method, path, headers=self.headers(who), **kw)

    def add_user(self, name: str, role: str) -> str:
        with self.db.write() as s:
            user, token = create_user(s, name, role)
            self.ids[name] = user.id
        self.tokens[name] = token
        return token

    def upload(self, path: Path, who: str = "author") -> Any:
        from posttrain_arena.service.client import pack_dir

        return self.call(
            "POST",
            "/api/collections/upload",
            who,
            content=pack_dir(path),
            params={"filename": f"{path.name}.tar.gz"},
        )


@pytest.fixture
def arena(settings: Settings) -> Iterator[Arena]:
    app = create_app(settings)
    with TestClient(app) as client:
        a = Arena(client=client, db=app.state.db, settings=settings)
        for name, role in (
            ("admin", "admin"),
            ("editor", "editor"),
            ("author", "participant"),
            ("other", "participant"),
        ):
            a.add_user(name, role)
        yield a
    app.state.db.dispose()


CHALLENGE = {
    "slug": "micro",
    "title": "Micro",
    "base_model": "tiny",
    "base_model_revision": "r1",
    "recipe": "micro.toml",
    "recipe_hash": "sha256:" + "0" * 64,
    "suite_hash": "sha256:" + "1" * 64,
    "suite_size": 8,
    "suite_domain_counts": {"software-engineering": 4, "finance-economics": 4},
    "price_per_hour": 10.0,
    "timeout_sec": 3600,
}


@pytest.fixture
def challenge(arena: Arena) -> dict[str, Any]:
    """A challenge with allowance 10 (budget cap 100)."""
    resp = arena.call("POST", "/api/challenges", "admin", json=CHALLENGE)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


@pytest.fixture
def collection(arena: Arena, tmp_path: Path) -> dict[str, Any]:
    """A two-task collection registered by `author`."""
    resp = arena.upload(make_collection(tmp_path / "col"))
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


@pytest.fixture
def new_collection(tmp_path: Path) -> Any:
    """make_collection with a fresh folder: new_collection(n_tasks=2, team='team')."""
    counter = iter(range(1000))

    def make(n_tasks: int = 2, team: str = "team") -> Path:
        return make_collection(tmp_path / f"collection-{next(counter)}", n_tasks, team)

    return make


@pytest.fixture
def challenge_body() -> dict[str, Any]:
    """The body that creates the test challenge (for variants)."""
    return dict(CHALLENGE)


def postgres_schema_url() -> Iterator[str]:
    """A PostgreSQL URL whose search path is a fresh schema, dropped afterwards (a fixture
    body: `yield from` it); skips when the suite has no server."""
    base = os.environ.get("ARENA_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("ARENA_TEST_POSTGRES_URL is not set")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in base else "?"
    yield f"{base}{sep}options=-csearch_path%3D{schema}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()
