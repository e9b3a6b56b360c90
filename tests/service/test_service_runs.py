"""Preflight, idempotent launch, the budget under racing launches, cancel."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from posttrain_arena.service import runs as runs_svc
from posttrain_arena.service.auth import Principal, Role
from posttrain_arena.service.errors import Conflict
from posttrain_arena.service.models import Collection
from posttrain_arena.service.schemas import RunRequest

if TYPE_CHECKING:
    from tests.service.conftest import Arena


def _checks(resp: Any) -> dict[str, str]:
    return {c["name"]: c["status"] for c in resp.json()["checks"]}


def _budget(arena: Arena) -> dict[str, float]:
    return dict(arena.call("GET", "/api/budget").json())


def test_preflight_lists_every_check_and_reserves_nothing(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    body = {"challenge": "micro", "collection_id": collection["id"]}
    before = _budget(arena)
    ok = arena.call("POST", "/api/runs/preflight", "author", json=body)
    assert ok.status_code == 200 and ok.json()["ok"] is True
    assert _checks(ok) == {
        "challenge_open": "ok",
        "caller_allowed": "ok",
        "no_active_run": "ok",
        "near_duplicate": "skip",
        "cooldown": "skip",
        "run_count": "skip",
        "budget": "ok",
        "quota": "ok",
        "eligible_tasks": "ok",
    }
    assert ok.json()["reservation"] == challenge["allowance"]
    other = arena.call("POST", "/api/runs/preflight", "other", json=body)
    assert other.json()["ok"] is False and _checks(other)["caller_allowed"] == "FAIL"
    assert _budget(arena) == before
    assert arena.call("GET", "/api/runs").json()["total"] == 0


def test_launch_is_idempotent_by_request_id(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    body = {"challenge": "micro", "collection_id": collection["id"], "request_id": "abc-1"}
    first = arena.call("POST", "/api/runs", "author", json=body)
    assert first.status_code == 201, first.text
    run = first.json()
    assert run["state"] == "queued" and run["reserved"] == challenge["allowance"]
    again = arena.call("POST", "/api/runs", "author", json=body)
    assert again.status_code == 200 and again.json()["id"] == run["id"]
    assert arena.call("GET", "/api/runs").json()["total"] == 1
    assert _budget(arena)["reserved"] == challenge["allowance"]
    # A new request id for the same collection now fails a check: one active run at a time.
    body["request_id"] = "abc-2"
    clash = arena.call("POST", "/api/runs", "author", json=body)
    assert clash.status_code == 409
    assert {c["name"]: c["status"] for c in clash.json()["data"]}["no_active_run"] == "FAIL"


def test_failed_checks_block_launch(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    body = {"challenge": "micro", "collection_id": collection["id"]}
    paused = arena.call(
        "POST",
        "/api/challenges/micro/health",
        "admin",
        json={"health": "paused", "reason": "maintenance"},
    )
    assert paused.status_code == 200 and paused.json()["health"] == "paused"
    resp = arena.call("POST", "/api/runs", "author", json=body)
    assert resp.status_code == 409 and "maintenance" in resp.json()["detail"]
    arena.call("POST", "/api/challenges/micro/health", "admin", json={"health": "open"})
    arena.call("PUT", "/api/budget", "admin", json={"cap": 5.0})
    resp = arena.call("POST", "/api/runs", "author", json=body)
    assert resp.status_code == 409 and "budget" in resp.json()["detail"]
    assert _budget(arena)["reserved"] == 0


def test_cancel_releases_the_reservation(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    run = arena.call(
        "POST",
        "/api/runs",
        "author",
        json={"challenge": "micro", "collection_id": collection["id"]},
    ).json()
    assert arena.call("POST", f"/api/runs/{run['id']}/cancel", "other").status_code == 403
    resp = arena.call("POST", f"/api/runs/{run['id']}/cancel", "author")
    assert resp.status_code == 200 and resp.json()["state"] == "canceled"
    assert "author" in resp.json()["reason"]
    b = _budget(arena)
    assert b["reserved"] == 0 and b["spent"] == 0 and b["left"] == b["cap"]
    assert arena.call("POST", f"/api/runs/{run['id']}/cancel", "author").status_code == 409


def test_racing_launches_never_exceed_the_cap(arena: Arena, challenge: dict[str, Any]) -> None:
    """Many threads launch at once against a cap that fits only some of them."""
    allowance, cap, n = challenge["allowance"], 45.0, 16
    arena.call("PUT", "/api/budget", "admin", json={"cap": cap})
    author = Principal(user_id=arena.ids["author"], name="author", role=Role.PARTICIPANT)
    with arena.db.write() as s:
        cols = [
            Collection(
                name=f"c{i}",
                owner_id=author.user_id,
                source_kind="path",
                content_hash=f"sha256:{i}",
                storage_path="",
                eligible_count=1,
            )
            for i in range(n)
        ]
        s.add_all(cols)
        s.flush()
        ids = [c.id for c in cols]
    barrier = threading.Barrier(n)
    outcomes: list[str] = []
    lock = threading.Lock()

    def launch(col_id: int) -> None:
        barrier.wait()
        try:
            with arena.db.write() as s:
                runs_svc.launch(s, author, RunRequest(challenge="micro", collection_id=col_id),
                                arena.settings)
            result = "ok"
        except Conflict:
            result = "refused"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=launch, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fits = int(cap // allowance)
    assert outcomes.count("ok") == fits and outcomes.count("refused") == n - fits
    b = _budget(arena)
    assert b["reserved"] == fits * allowance <= cap
    listed = arena.call("GET", "/api/runs?state=queued&limit=100").json()
    assert listed["total"] == fits
    assert sum(r["reserved"] for r in listed["items"]) == b["reserved"]


def test_run_list_filters(
    arena: Arena, challenge: dict[str, Any], collection: dict[str, Any]
) -> None:
    run = arena.call(
        "POST",
        "/api/runs",
        "author",
        json={"challenge": "micro", "collection_id": collection["id"]},
    ).json()
    assert arena.call("GET", "/api/runs?challenge=micro").json()["items"][0]["id"] == run["id"]
    assert arena.call("GET", "/api/runs?state=scored").json()["total"] == 0
    assert arena.call("GET", f"/api/runs?collection_id={collection['id']}").json()["total"] == 1
    assert arena.call("GET", "/api/runs?state=bogus").status_code == 422
