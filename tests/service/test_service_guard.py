"""Writes are checked before their bodies are read: the app is driven as an ASGI server
drives it, with a body source that records how much of the body was asked for."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.service.conftest import Arena


class Body:
    """An ASGI receive() handing out `chunks` one by one, as chunked transfer does."""

    def __init__(self, chunks: list[bytes]):
        self.chunks = chunks
        self.read = 0  # chunks handed to the app

    async def __call__(self) -> dict[str, Any]:
        if self.read >= len(self.chunks):
            return {"type": "http.disconnect"}
        self.read += 1
        more = self.read < len(self.chunks)
        return {"type": "http.request", "body": self.chunks[self.read - 1], "more_body": more}


def call(arena: Arena, method: str, path: str, body: Body, headers: dict[str, str],
         query: str = "") -> tuple[int, bytes]:
    """Run one request through the whole app; (status, response body)."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": query.encode(), "server": ("testserver", 80),
        "client": ("127.0.0.1", 5000),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    asyncio.run(arena.client.app(scope, body, send))  # type: ignore[arg-type]
    start = next(m for m in sent if m["type"] == "http.response.start")
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], data


def _chunks(total: int, size: int = 64 * 1024) -> list[bytes]:
    return [b"x" * size for _ in range(total // size + 1)]


def test_an_anonymous_api_write_is_refused_before_its_body_is_read(arena: Arena) -> None:
    body = Body(_chunks(1_000_000))
    status, data = call(arena, "POST", "/api/collections/upload", body,
                        {"content-type": "application/gzip"})
    assert status == 401 and b"Authorization" in data
    assert body.read == 0


def test_the_sign_in_cookie_does_not_authenticate_api_writes(arena: Arena) -> None:
    """A page on another site can make a browser post to /api/ with the cookie."""
    cookie, _csrf = _web_cookies(arena, "author")
    body = Body([b'{"title": "forged", "body": "by another site"}'])
    status, _ = call(arena, "POST", "/api/board/threads", body,
                     {"content-type": "application/json", "cookie": cookie})
    assert status == 401 and body.read == 0
    assert arena.call("GET", "/api/board/threads").json() == []
    me = arena.client.get("/api/me", headers={"cookie": cookie})
    assert me.status_code == 401  # reads ignore the cookie too: the API is header-only


def test_a_bad_token_is_refused_before_the_body(arena: Arena) -> None:
    body = Body(_chunks(500_000))
    status, _ = call(arena, "POST", "/api/collections/upload", body,
                     {"authorization": "Bearer arena_nope_nope"})
    assert status == 401 and body.read == 0


def test_a_declared_length_over_the_bound_is_refused_unread(arena: Arena) -> None:
    limit = arena.settings.upload_max_bytes
    body = Body(_chunks(limit * 2))
    status, data = call(arena, "POST", "/api/collections/upload", body,
                        {**arena.headers("author"), "content-length": str(limit * 2)})
    assert status == 413 and b"larger than" in data and body.read == 0


def test_a_chunked_upload_is_cut_off_at_the_bound(arena: Arena) -> None:
    limit = arena.settings.upload_max_bytes
    body = Body(_chunks(limit * 10))  # no Content-Length: chunked
    status, data = call(arena, "POST", "/api/collections/upload", body,
                        arena.headers("author"))
    assert status == 413 and b"larger than" in data
    received = body.read * 64 * 1024
    assert received <= limit + 2 * 64 * 1024, "read far past the bound"
    assert body.read < len(body.chunks)
    assert list(arena.settings.collections_dir.iterdir()) == []


def test_a_chunked_json_body_is_bounded_too(arena: Arena) -> None:
    limit = arena.settings.body_max_bytes
    body = Body([b'{"title": "t", "body": "', *_chunks(limit * 3), b'"}'])
    status, _ = call(arena, "POST", "/api/board/threads", body,
                     {**arena.headers("author"), "content-type": "application/json"})
    assert status == 413 and body.read < len(body.chunks)


def _web_cookies(arena: Arena, who: str) -> tuple[str, str]:
    """(cookie header, csrf token) of a browser signed in as `who`."""
    from posttrain_arena.service.auth import Principal

    csrf = "t0ken-of-this-browser"
    session, _ttl = arena.client.app.state.sessions.start(
        Principal(user_id=arena.ids[who], name=who))
    return f"arena_csrf={csrf}; arena_session={session}", csrf


def test_a_web_upload_checks_csrf_and_the_viewer_before_the_body(arena: Arena) -> None:
    cookie, csrf = _web_cookies(arena, "author")
    multipart = {"content-type": "multipart/form-data; boundary=XyZ", "accept": "text/html"}
    for query, headers in (
        ("", {**multipart, "cookie": cookie}),  # no token: another site's form
        ("csrf=forged", {**multipart, "cookie": cookie}),
        (f"csrf={csrf}", {**multipart, "cookie": f"arena_csrf={csrf}"}),  # not signed in
    ):
        body = Body(_chunks(1_000_000))
        status, _ = call(arena, "POST", "/arena/collections/upload", body, headers, query)
        assert status in (400, 401) and body.read == 0, (query, status)
    head = (b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.tar.gz"\r\n'
            b"Content-Type: application/gzip\r\n\r\n")
    body = Body([head, *_chunks(arena.settings.upload_max_bytes * 10)])
    status, data = call(arena, "POST", "/arena/collections/upload", body,
                        {**multipart, "cookie": cookie}, f"csrf={csrf}")
    assert status == 413 and b"larger than" in data and body.read < len(body.chunks)
