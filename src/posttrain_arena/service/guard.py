"""What every write passes before a byte of its body is read: a size bound, then the
checks of the part of the app it goes to (the API: a valid bearer token; the web pages:
the CSRF token and a signed-in viewer).

An ASGI middleware, because by the time a route runs FastAPI has already read and
parsed its body (JSON, a multipart upload). The bound holds for every body, chunked
uploads included: a declared Content-Length over it is refused before the app runs,
and the bytes actually received are counted, so a body without a length (or with a
false one) is cut off at the bound with a 413. Which checks apply to a path is the
business of the `WriteGate`s that the API and the web package register.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from posttrain_arena.service.errors import ServiceError, TooLarge

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class WriteGate(Protocol):
    """The checks that one part of the app makes before a write's body is read."""

    def applies(self, path: str) -> bool:
        """Whether requests to `path` are this gate's."""
        ...

    def limit(self, path: str) -> int:
        """The largest body accepted for `path`, in bytes."""
        ...

    async def check(self, request: Request) -> None:
        """Raise a ServiceError to refuse the write (may note who called on
        `request.state` for the route). Must not read the body."""
        ...

    def refuse(self, request: Request, exc: ServiceError) -> Response:
        """The response for a refused write."""
        ...


class _Cut(Exception):
    """The body went past its bound; the 413 has been sent."""


class WriteGuard:
    """ASGI middleware running the registered gates before any write's body is read."""

    def __init__(self, app: ASGIApp, gates: Callable[[], Sequence[WriteGate]]):
        self.app = app
        self.gates = gates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        gate = next((g for g in self.gates() if g.applies(path)), None)
        if gate is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        limit = gate.limit(path)
        declared = request.headers.get("content-length", "")
        try:
            if declared.isdigit() and int(declared) > limit:
                raise _too_large(limit)
            await gate.check(request)
        except ServiceError as exc:
            await gate.refuse(request, exc)(scope, _no_body, send)
            return
        await self._bounded(scope, receive, send, gate, request, limit)

    async def _bounded(self, scope: Scope, receive: Receive, send: Send, gate: WriteGate,
                       request: Request, limit: int) -> None:
        state: dict[str, Any] = {"received": 0, "started": False, "refused": False}

        async def counted_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > limit:
                    if not state["started"]:
                        state["refused"] = True
                        await gate.refuse(request, _too_large(limit))(scope, _no_body, send)
                    raise _Cut
            return message

        async def guarded_send(message: Message) -> None:
            if state["refused"]:
                return  # the app answering after the 413 was sent: drop it
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except Exception:
            if not state["refused"]:
                raise  # not ours


def _too_large(limit: int) -> TooLarge:
    return TooLarge(f"the request body is larger than {limit} bytes; an archive upload "
                    "should stay under the upload limit, or register the collection from git")


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}
