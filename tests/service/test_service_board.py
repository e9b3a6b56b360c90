"""The board: threads, replies, ordering, and the per-user rate limit."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.service.conftest import Arena


def test_threads_and_messages(arena: Arena) -> None:
    t1 = arena.call("POST", "/api/board/threads", "author", json={"title": "one", "body": "a"})
    assert t1.status_code == 201 and t1.json()["messages"][0]["author"] == "author"
    t2 = arena.call("POST", "/api/board/threads", "other", json={"title": "two", "body": "b"})
    reply = arena.call(
        "POST", f"/api/board/threads/{t1.json()['id']}/messages", "editor", json={"body": "welcome"}
    )
    assert reply.status_code == 201
    titles = [t["title"] for t in arena.call("GET", "/api/board/threads").json()]
    assert titles == ["one", "two"]  # the reply made thread one the most recent
    detail = arena.call("GET", f"/api/board/threads/{t1.json()['id']}").json()
    assert [(m["author"], m["body"]) for m in detail["messages"]] == [
        ("author", "a"),
        ("editor", "welcome"),
    ]
    assert t2.status_code == 201
    empty = arena.call("POST", "/api/board/threads", "author", json={"title": "", "body": "x"})
    assert empty.status_code == 422


def test_posting_is_rate_limited_per_user(arena: Arena) -> None:
    limit = arena.settings.board_rate_limit
    tid = arena.call(
        "POST", "/api/board/threads", "author", json={"title": "busy", "body": "0"}
    ).json()["id"]
    codes = [
        arena.call(
            "POST", f"/api/board/threads/{tid}/messages", "author", json={"body": str(i)}
        ).status_code
        for i in range(limit)
    ]
    assert codes == [201] * (limit - 1) + [429]
    assert (
        arena.call(
            "POST", "/api/board/threads", "author", json={"title": "more", "body": "x"}
        ).status_code
        == 429
    )
    # Another user is not affected.
    assert (
        arena.call(
            "POST", f"/api/board/threads/{tid}/messages", "other", json={"body": "hi"}
        ).status_code
        == 201
    )
