"""The API's checks before a write's body is read (guard.py): a valid bearer token.

API writes take the `Authorization` header only. The web sign-in cookie is never read
here, so a page on another site that makes a browser send the cookie (a form posting to
/api/...) is an anonymous write, refused with a 401 before its body is read.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from posttrain_arena.service.auth import Identity
from posttrain_arena.service.config import Settings
from posttrain_arena.service.errors import ServiceError, Unauthorized

UPLOAD_PATH = "/api/collections/upload"
#: room for a multipart envelope around an archive of the largest accepted size
ENVELOPE_BYTES = 64 * 1024


def bearer_token(authorization: str | None) -> str | None:
    """The token from an `Authorization: Bearer ...` header (a bare token also works)."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else authorization.strip()


def error_response(exc: ServiceError) -> JSONResponse:
    """A service error as the API answers it: {"detail", "code", "data"?}."""
    body: dict[str, object] = {"detail": exc.message, "code": exc.code}
    if exc.detail is not None:
        body["data"] = exc.detail
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


class ApiGate:
    """Writes under /api/ need a valid token, checked before the body is read."""

    def __init__(self, settings: Settings):
        self.settings = settings

    def applies(self, path: str) -> bool:
        return path.startswith("/api/")

    def limit(self, path: str) -> int:
        if path == UPLOAD_PATH:
            return self.settings.upload_max_bytes + ENVELOPE_BYTES
        return self.settings.body_max_bytes

    async def check(self, request: Request) -> None:
        token = bearer_token(request.headers.get("authorization"))
        if not token:
            raise Unauthorized("writes need a token: pass 'Authorization: Bearer TOKEN' (set "
                               "ARENA_TOKEN for the CLI); the web sign-in cookie is for the "
                               "web pages only")
        identity: Identity = request.app.state.identity
        request.state.principal = await run_in_threadpool(identity.identify, token)

    def refuse(self, request: Request, exc: ServiceError) -> JSONResponse:
        del request
        return error_response(exc)
