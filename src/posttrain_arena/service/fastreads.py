"""Cached reads answered before the framework runs: the second time an anonymous GET asks
for exactly the same path and query.

A leaderboard or run-list read served from the read cache (readcache.py) costs tens of
microseconds; routing it, resolving its dependencies and validating its query costs the
framework several hundred, most of the server's work under load. So the routes that
answer from the read cache hand their answer, a coroutine function with the validated
parameters bound, to `KnownReads.serve`. It remembers it under the request's raw path
and query string, and the app (app.ArenaApp) answers a later GET with the same path and
query by calling it directly, before any of the framework's layers (so no middleware,
OpenTelemetry's included, sees these requests). The route, with FastAPI's validation and
errors, stays the only place where a query is understood: an address is only ever served
by the answer that the route itself built for it, and one the route has not seen (or
refused) goes through the framework as before.

What a remembered answer may depend on is the path and query alone: it is remembered
and used only for requests without an `Authorization` header. A request with one goes
through the framework, whose dependency checks the token (a bad one is a 401 on every
route), and the routes that call `serve` show the same to every caller (the API never
reads the web sign-in cookie). The answer itself reads the change counters as the route
does, so it is exactly as fresh: a write is seen by the next read through any process.
An answer that raises is forgotten and the request goes through the framework, which
answers with its usual error. The addresses remembered are bounded in number (least
recently used go first) and in length, so a client inventing query strings only makes
room for itself.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

#: What a cached read answers with: the JSON bytes of the response body.
Answer = Callable[[], Awaitable[bytes]]

_MEDIA_TYPE = "application/json"
#: Longest query string remembered: real reads are far shorter, and an invented long one
#: should not hold memory.
_MAX_QUERY = 1024


def _address(scope: Scope) -> tuple[str, bytes] | None:
    """What a remembered answer is looked up by: the path and raw query of an anonymous
    GET with a query of a sensible length; None for any other request."""
    if scope["type"] != "http" or scope["method"] != "GET":
        return None
    if len(scope["query_string"]) > _MAX_QUERY:
        return None
    if any(name == b"authorization" for name, _ in scope["headers"]):
        return None
    return scope["path"], scope["query_string"]


class KnownReads:
    """The answers routes built, by address; used on the event loop only."""

    def __init__(self, max_entries: int = 4096):
        self._max = max_entries
        self._answers: OrderedDict[tuple[str, bytes], Answer] = OrderedDict()
        self.hits = 0  # requests answered without the framework

    async def serve(self, request: Request, answer: Answer) -> Response:
        """The route's response: `answer()`'s bytes as JSON. Remembers `answer` for later
        anonymous GETs of this address; call it only with an answer that depends on
        nothing but the validated path and query (the same for every caller)."""
        response = _response(await answer())
        address = _address(request.scope)
        if address is not None:
            self._answers[address] = answer
            self._answers.move_to_end(address)
            while len(self._answers) > self._max:
                self._answers.popitem(last=False)
        return response

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Answer the request if its answer is remembered (True); False when the app must
        answer it. A remembered answer that raises is forgotten, and the app answers with
        its own error."""
        address = _address(scope)
        if address is None:
            return False
        answer = self._answers.get(address)
        if answer is None:
            return False
        self._answers.move_to_end(address)
        try:
            body = await answer()
        except Exception:
            self._answers.pop(address, None)
            return False
        self.hits += 1
        await _response(body)(scope, receive, send)
        return True

    def __len__(self) -> int:
        return len(self._answers)


def _response(body: bytes) -> Response:
    return Response(body, media_type=_MEDIA_TYPE)
