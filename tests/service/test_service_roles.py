"""Every endpoint against every role: the access rules as one data table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from posttrain_arena.service.stage_plan import FunctionStage, RunContext
from posttrain_arena.service.worker import Worker

if TYPE_CHECKING:
    from tests.service.conftest import Arena

ANON, OTHER, AUTHOR, EDITOR, ADMIN = None, "other", "author", "editor", "admin"
EVERYONE = {ANON, OTHER, AUTHOR, EDITOR, ADMIN}
SIGNED_IN = {OTHER, AUTHOR, EDITOR, ADMIN}
OWNER_OR_EDITOR = {AUTHOR, EDITOR, ADMIN}
EDITORS = {EDITOR, ADMIN}
ADMINS = {ADMIN}

# (method, path, body, roles allowed). Paths use {col}, {run}, {scored}, {thread}.
MATRIX: list[tuple[str, str, Any, set[str | None]]] = [
    ("GET", "/api/health", None, EVERYONE),
    ("GET", "/openapi.json", None, EVERYONE),
    ("GET", "/AGENTS.md", None, EVERYONE),
    ("GET", "/api/me", None, SIGNED_IN),
    ("POST", "/api/users", {"name": "new-user", "role": "participant"}, ADMINS),
    ("GET", "/api/challenges", None, EVERYONE),
    ("GET", "/api/challenges/micro", None, EVERYONE),
    ("POST", "/api/challenges", "CHALLENGE2", ADMINS),
    ("POST", "/api/challenges/micro/health", {"health": "open"}, ADMINS),
    ("GET", "/api/challenges/micro/leaderboard", None, EVERYONE),
    ("GET", "/api/challenges/micro/results", None, EVERYONE),
    ("GET", "/api/collections", None, EVERYONE),
    ("GET", "/api/collections/held", None, EDITORS),
    ("GET", "/api/collections/{col}", None, EVERYONE),
    ("GET", "/api/collections/{col}/evidence", None, EVERYONE),
    ("GET", "/api/collections/{col}/evidence/{task}", None, EVERYONE),
    ("POST", "/api/collections/upload", "ARCHIVE", SIGNED_IN),
    ("POST", "/api/collections/git", {"url": "file:///nonexistent/repo", "ref": "main"}, EDITORS),
    # a private address: participants may not point the server at its own network
    ("POST", "/api/collections/git", {"url": "https://127.0.0.1:9/x.git", "ref": "main"},
     EDITORS),
    ("POST", "/api/collections/git", {"url": "/nonexistent/repo", "ref": "main"}, EDITORS),
    ("POST", "/api/collections/hf", {"url": "hf://datasets/org/none@main"}, SIGNED_IN),
    ("POST", "/api/collections/path", "PATH", EDITORS),
    ("POST", "/api/runs/preflight", "RUN", SIGNED_IN),
    ("POST", "/api/runs", "RUN", OWNER_OR_EDITOR),
    ("GET", "/api/runs", None, EVERYONE),
    ("GET", "/api/runs/{run}", None, EVERYONE),
    ("POST", "/api/runs/{run}/cancel", None, OWNER_OR_EDITOR),
    ("POST", "/api/runs/{scored}/collect", None, OWNER_OR_EDITOR),
    ("GET", "/api/runs/{scored}/result", None, EVERYONE),
    ("POST", "/api/runs/{scored}/review", {"decision": "accept", "note": "ok"}, EDITORS),
    ("GET", "/api/budget", None, EVERYONE),
    ("PUT", "/api/budget", {"cap": 100.0}, ADMINS),
    ("GET", "/api/board/threads", None, EVERYONE),
    ("GET", "/api/board/threads/{thread}", None, EVERYONE),
    ("POST", "/api/board/threads", {"title": "t", "body": "b"}, SIGNED_IN),
    ("POST", "/api/board/threads/{thread}/messages", {"body": "reply"}, SIGNED_IN),
]


def _setup(arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]) -> dict[str, Any]:
    def score(ctx: RunContext) -> dict[str, Any]:
        return {
            "score": {
                "base_pass_rate": 0.1,
                "final_pass_rate": 0.2,
                "change_pp": 10.0,
                "n_tasks": ctx.challenge["suite_size"],
            }
        }

    body = {"challenge": "micro", "collection_id": collection["id"]}
    scored = arena.call("POST", "/api/runs", "author", json=body).json()["id"]
    Worker(arena.db, arena.settings, [FunctionStage("pipeline", score)]).poll_once()
    run = arena.call("POST", "/api/runs", "author", json=body).json()["id"]
    thread = arena.call(
        "POST", "/api/board/threads", "author", json={"title": "hello", "body": "first"}
    ).json()["id"]
    return {"col": collection["id"], "run": run, "scored": scored, "thread": thread,
            "task": "no-such-task"}


def test_every_endpoint_against_every_role(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any], new_collection: Any
) -> None:
    from posttrain_arena.service.client import pack_dir

    ids = _setup(arena, challenge, collection)
    archive = pack_dir(new_collection())
    server_dir: Path = new_collection()
    bodies = {
        "CHALLENGE2": {
            **{
                k: challenge[k]
                for k in (
                    "title",
                    "base_model",
                    "base_model_revision",
                    "recipe",
                    "recipe_hash",
                    "suite_hash",
                    "suite_size",
                    "suite_domain_counts",
                )
            },
            "slug": "second",
        },
        "RUN": {"challenge": "micro", "collection_id": collection["id"]},
        "PATH": {"path": str(server_dir)},
    }
    covered = {(m, p) for m, p, _, _ in MATRIX}
    routes = {
        (m, r.path)
        for r in arena.client.app.routes  # type: ignore[attr-defined]
        for m in getattr(r, "methods", ())
        if m != "HEAD"
    }
    api_routes = {(m, p) for m, p in routes if p.startswith("/api") or p == "/AGENTS.md"}
    normalized = {
        (
            m,
            p.replace("{col}", "{collection_id}")
            .replace("{scored}", "{run_id}")
            .replace("{run}", "{run_id}")
            .replace("{thread}", "{thread_id}")
            .replace("/micro", "/{ref}"),
        )
        for m, p in covered
    }
    assert api_routes <= normalized, f"endpoints missing from the matrix: {api_routes - normalized}"
    failures = []
    for method, path, body, allowed in MATRIX:
        url = path.format(**ids)
        for role in (ANON, OTHER, AUTHOR, EDITOR, ADMIN):
            kw: dict[str, Any] = {}
            if body == "ARCHIVE":
                kw = {"content": archive, "params": {"filename": "c.tar.gz"}}
            elif body is not None:
                kw = {"json": bodies.get(body, body) if isinstance(body, str) else body}
            status = arena.call(method, url, role, **kw).status_code
            denied = status in (401, 403)
            expected_denial = 401 if role is None else 403
            if role in allowed and denied:
                failures.append(f"{method} {url} as {role}: {status}, expected access")
            if role not in allowed and status != expected_denial:
                failures.append(f"{method} {url} as {role}: {status}, expected {expected_denial}")
            assert status < 500, f"{method} {url} as {role}: {status}"
    assert not failures, "\n".join(failures)


def test_the_sealed_suite_is_shown_to_no_one(
    arena: Arena, challenge_body: dict[str, Any], new_collection: Any
) -> None:
    suite = new_collection(n_tasks=3, team="sealed")
    body = {
        **challenge_body,
        "slug": "sealed",
        "suite_path": str(suite),
        "public_sample": ["task-sealed-0"],
    }
    for k in ("suite_hash", "suite_size", "suite_domain_counts"):
        body.pop(k)
    created = arena.call("POST", "/api/challenges", "admin", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["suite_size"] == 3
    for role in (ANON, OTHER, EDITOR, ADMIN):
        text = arena.call("GET", "/api/challenges/sealed", role).text
        assert str(suite) not in text and "suite_path" not in text
        assert "task-sealed-1" not in text and "task-sealed-2" not in text
        assert "task-sealed-0" in text


def test_no_write_is_carried_by_the_sign_in_cookie(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    """Every API write, sent as a page on another site would make a browser send it (the
    cookie, no Authorization header), is a 401, whatever the role behind the cookie."""
    ids = _setup(arena, challenge, collection)
    writes = [(m, p, b) for m, p, b, _ in MATRIX if m in ("POST", "PUT")]
    assert len(writes) >= 15
    for method, path, body in writes:
        for role in (OTHER, AUTHOR, ADMIN):
            kw: dict[str, Any] = {"content": b"x"} if isinstance(body, str) else {"json": body}
            resp = arena.client.request(method, path.format(**ids),
                                        headers={"cookie": f"arena_token={arena.tokens[role]}"},
                                        **kw)
            assert resp.status_code == 401, (method, path, role, resp.text)
