"""API tokens expire and can be revoked; a bad token is 401 on every route, cached or not."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import update

from posttrain_arena.service.models import ApiToken, utcnow

from .conftest import Arena

READS = ["/api/runs", "/api/challenges", "/api/budget", "/api/board/threads",
         "/api/challenges/micro/leaderboard", "/api/me", "/api/collections"]


def _all_refused(arena: Arena, token: str) -> None:
    for url in READS:
        for _ in range(2):  # the second read would come from a cache, if any answered it
            resp = arena.client.get(url, headers={"Authorization": f"Bearer {token}"})
            assert resp.status_code == 401, (url, resp.status_code)
    write = arena.client.post("/api/board/threads", json={"title": "t", "body": "b"},
                              headers={"Authorization": f"Bearer {token}"})
    assert write.status_code == 401


def test_a_token_made_with_an_expiry_stops_working_then(
    arena: Arena, challenge: dict[str, Any]
) -> None:
    made = arena.call("POST", "/api/tokens", "author", json={"expires_in_days": 1})
    assert made.status_code == 201, made.text
    token = made.json()["token"]
    assert made.json()["expires_at"] is not None
    for url in READS:  # warm every cache with it while it is good
        assert arena.client.get(url, headers={"Authorization": f"Bearer {token}"}
                                ).status_code == 200, url
    with arena.db.write() as s:
        s.execute(update(ApiToken).where(ApiToken.prefix == made.json()["prefix"])
                  .values(expires_at=utcnow() - timedelta(seconds=1)))
    _all_refused(arena, token)
    assert "expired" in arena.client.get(
        "/api/me", headers={"Authorization": f"Bearer {token}"}).json()["detail"]


def test_a_revoked_token_is_refused_everywhere_at_once(
    arena: Arena, challenge: dict[str, Any]
) -> None:
    token = arena.call("POST", "/api/tokens", "author", json={"expires_in_days": None}
                       ).json()
    assert token["expires_at"] is None
    listed = arena.call("GET", "/api/tokens", "author").json()
    assert token["prefix"] in [t["prefix"] for t in listed]
    assert all("token" not in t for t in listed)  # never the secrets again
    for url in READS:
        arena.client.get(url, headers={"Authorization": f"Bearer {token['token']}"})
    # Nobody else may revoke it; its owner (or an admin) may.
    assert arena.call("DELETE", f"/api/tokens/{token['prefix']}", "other").status_code == 403
    gone = arena.call("DELETE", f"/api/tokens/{token['prefix']}", "author")
    assert gone.status_code == 200 and gone.json()["revoked"] is True
    _all_refused(arena, token["token"])
    assert arena.call("GET", "/api/me", "author").status_code == 200  # the others still work


def test_random_and_malformed_tokens_are_401(arena: Arena, challenge: dict[str, Any]) -> None:
    for bad in ("arena_000000000000_nope", "arena_", "nonsense", "hf_" + "x" * 40,
                arena.tokens["author"] + "x"):
        _all_refused(arena, bad)
