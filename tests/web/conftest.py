"""Fixtures for the web pages: the app on a temp SQLite data dir, one browser-like client
per role (signed in through the sign-in form), a challenge, collections on disk, and a
worker whose pipeline stage is a fast scripted stand-in for training."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.service.conftest import write_notes

from posttrain_arena.service.app import create_app
from posttrain_arena.service.auth import SYSTEM, create_user
from posttrain_arena.service.challenges import create_challenge
from posttrain_arena.service.config import Settings
from posttrain_arena.service.db import Database
from posttrain_arena.service.schemas import ChallengeCreate
from posttrain_arena.service.stage_plan import (
    FunctionStage,
    RunContext,
    snapshot,
    structural_check,
)
from posttrain_arena.service.worker import Worker
from posttrain_arena.task_format.scaffold import new_task

DOMAINS = ("software-engineering", "finance-economics", "natural-science")
ROLES = {"admin": "admin", "editor": "editor", "author": "participant", "other": "participant"}


def make_collection(root: Path, n_tasks: int = 2, team: str = "team") -> Path:
    """A real collection: submission.yaml plus scaffolded task packages under envs/."""
    (root / "envs").mkdir(parents=True)
    (root / "submission.yaml").write_text(
        f"team_name: {team}\ncontact_email: team@example.org\ntrack: environments\n")
    for i in range(n_tasks):
        new_task(f"task-{team}-{i}", DOMAINS[i % len(DOMAINS)], root / "envs")
        write_notes(root / "envs" / f"task-{team}-{i}", f"{team}-{i}")
    return root


def pack(root: Path) -> bytes:
    """A tar.gz of `root`'s contents."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(root.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(root)), recursive=False)
    return buf.getvalue()


def scripted_training(change_pp: float = 7.5) -> FunctionStage:
    """Stands in for the training pipeline (too slow for page tests): a full-coverage score
    for the challenge's suite, written the way the pipeline's score.json is read."""

    def stage(ctx: RunContext) -> dict[str, Any]:
        base = 0.25
        return {"score": {
            "base_pass_rate": base, "final_pass_rate": base + change_pp / 100,
            "change_pp": change_pp, "interval": [change_pp - 4.0, change_pp + 4.0],
            "n_tasks": ctx.challenge["suite_size"], "suite_hash": ctx.challenge["suite_hash"],
            "per_domain": {"software-engineering": {"base": 0.25, "final": 0.5}},
            "cost": 1.5,
        }}

    return FunctionStage("pipeline", stage)


def fast_plan(change_pp: float = 7.5) -> list[FunctionStage]:
    """snapshot and check (the real stages), then the scripted training stand-in."""
    return [FunctionStage("snapshot", snapshot), FunctionStage("check", structural_check),
            scripted_training(change_pp)]


@dataclass
class Site:
    """The app, its database, tokens per role, and a signed-in client per role."""

    app: Any
    db: Database
    settings: Settings
    tmp: Path
    tokens: dict[str, str] = field(default_factory=dict)
    user_ids: dict[str, int] = field(default_factory=dict)
    clients: dict[str, TestClient] = field(default_factory=dict)

    def client(self, who: str | None = None) -> TestClient:
        """A client with its own cookie jar, signed in as `who` (None: anonymous)."""
        key = who or "anonymous"
        if key not in self.clients:
            c = TestClient(self.app)
            c.headers["accept"] = "text/html"
            if who is not None:
                signin(c, self.tokens[who])
            self.clients[key] = c
        return self.clients[key]

    def worker(self, change_pp: float = 7.5) -> Worker:
        return Worker(self.db, self.settings, fast_plan(change_pp))


def csrf_of(client: TestClient) -> str:
    """This client's CSRF token (visiting a page first sets it)."""
    if "arena_csrf" not in client.cookies:
        client.get("/signin")
    return str(client.cookies["arena_csrf"])


def with_csrf(client: TestClient, url: str) -> str:
    """`url` with the client's CSRF token in its query, as the pages' forms post it."""
    return f"{url}{'&' if '?' in url else '?'}csrf={csrf_of(client)}"


def signin(client: TestClient, token: str) -> Any:
    """Sign in through the form; returns the final response."""
    return client.post(with_csrf(client, "/signin"), data={"token": token, "next": "/arena"})


def post(client: TestClient, url: str, data: dict[str, Any] | None = None,
         **kw: Any) -> Any:
    """POST a form with the client's CSRF token, following the redirect."""
    return client.post(with_csrf(client, url), data=data or {}, **kw)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    settings = Settings(data_dir=tmp_path / "data", budget_cap=100.0, board_rate_limit=3,
                        heartbeat_interval_sec=0.2, upload_max_bytes=200_000,
                        unpacked_max_bytes=2_000_000, max_files=500,
                        hf_endpoint="http://127.0.0.1:9")  # never the real hub
    app = create_app(settings)
    s = Site(app=app, db=app.state.db, settings=settings, tmp=tmp_path)
    with s.db.write() as session:
        for name, role in ROLES.items():
            user, token = create_user(session, name, role)
            s.tokens[name], s.user_ids[name] = token, user.id
    yield s
    for c in s.clients.values():
        c.close()
    s.db.dispose()


CHALLENGE = ChallengeCreate(
    slug="micro", title="Micro challenge", base_model="tiny-qwen", base_model_revision="r1",
    recipe="micro.toml", recipe_hash="sha256:" + "0" * 64, suite_path=None,
    suite_hash="sha256:" + "1" * 64, suite_size=8,
    suite_domain_counts={"software-engineering": 4, "natural-science": 4},
    public_sample=["sample-task-one"], price_per_hour=10.0, timeout_sec=3600,
)


@pytest.fixture
def challenge(site: Site) -> str:
    """A challenge (allowance 10 of the cap 100); its slug."""
    with site.db.write() as s:
        create_challenge(s, SYSTEM, CHALLENGE)
    return CHALLENGE.slug


@pytest.fixture
def new_collection(tmp_path: Path) -> Callable[..., Path]:
    """make_collection in a fresh folder: new_collection(n_tasks=2, team='team')."""
    counter = iter(range(1000))

    def make(n_tasks: int = 2, team: str = "team") -> Path:
        return make_collection(tmp_path / f"collection-{next(counter)}", n_tasks, team)

    return make


@pytest.fixture
def uploaded(site: Site, new_collection: Callable[..., Path]) -> int:
    """A two-task collection uploaded by `author` through the form; its id."""
    c = site.client("author")
    resp = post(c, "/arena/collections/upload", {"name": "alpha"},
                files={"file": ("alpha.tar.gz", pack(new_collection(team="alpha")),
                                "application/gzip")})
    assert resp.status_code == 200, resp.text
    return int(str(resp.url).rsplit("/", 1)[-1])
