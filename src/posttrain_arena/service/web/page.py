"""What every page shares: the viewer (from the sign-in cookie), CSRF tokens, flash
messages, rendering, and HTML error pages.

CSRF uses a per-browser random token kept in an HttpOnly cookie and echoed in a hidden
field of every form; a POST whose field does not match is refused. Cookies are SameSite
Lax, so other sites' forms do not carry them either.
"""

from __future__ import annotations

import base64
import hmac
import json
import secrets
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from posttrain_arena.service.api.gate import ENVELOPE_BYTES
from posttrain_arena.service.auth import ANONYMOUS, Principal, Role
from posttrain_arena.service.config import Settings
from posttrain_arena.service.db import Database
from posttrain_arena.service.errors import BadRequest, ServiceError, Unauthorized
from posttrain_arena.service.sessions import SESSION_COOKIE, Sessions
from posttrain_arena.task_format.domains import Domain

CSRF_COOKIE = "arena_csrf"
OLD_TOKEN_COOKIE = "arena_token"
FLASH_COOKIE = "arena_flash"
HERE = Path(__file__).parent

templates = Jinja2Templates(directory=str(HERE / "templates"))


def domain_name(slug: str | None) -> str:
    """The display name of a domain slug (the slug itself when unknown)."""
    if not slug:
        return "unknown domain"
    try:
        return Domain(slug).display_name
    except ValueError:
        return slug


def when(value: datetime | None) -> str:
    """A UTC time for tables: 2026-11-30 03:07 UTC."""
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else "—"


def pp(value: float | None, signed: bool = True) -> str:
    """Percentage points with one decimal: +12.5 pp."""
    if value is None:
        return "—"
    return f"{value:+.1f} pp" if signed else f"{value:.1f} pp"


def short(digest: str | None, keep: int = 16) -> str:
    """A long hash shortened for display ("sha256:0123456789ab…"); the title keeps it all."""
    if not digest:
        return "—"
    algo, sep, hexpart = digest.partition(":")
    body = hexpart if sep else algo
    cut = body if len(body) <= keep else body[:keep] + "…"
    return f"{algo}:{cut}" if sep else cut


templates.env.filters.update(domain=domain_name, when=when, pp=pp, short=short)


@dataclass(frozen=True)
class Viewer:
    """Who is looking at a page, and whether their sign-in cookie went bad."""

    principal: Principal
    bad_token: bool = False

    @property
    def signed_in(self) -> bool:
        return not self.principal.anonymous

    @property
    def is_editor(self) -> bool:
        return self.principal.at_least(Role.EDITOR)

    @property
    def is_admin(self) -> bool:
        return self.principal.at_least(Role.ADMIN)

    def may_manage(self, owner_id: int) -> bool:
        """Whether the viewer is the collection's author or an editor (launch, collect)."""
        return self.signed_in and (self.principal.user_id == owner_id or self.is_editor)


def db_of(request: Request) -> Database:
    """The app's database."""
    db: Database = request.app.state.db
    return db


def get_viewer(request: Request) -> Viewer:
    """The viewer from the session cookie (sessions.py); one that is not a live session
    (expired, signed out, forged) reads as anonymous, and is cleared. A form's viewer
    was found before its body was read (WebGate)."""
    known = getattr(request.state, "viewer", None)
    if isinstance(known, Viewer):
        return known
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        return Viewer(ANONYMOUS)
    sessions: Sessions = request.app.state.sessions
    principal = sessions.principal(cookie)
    return Viewer(principal) if principal is not None else Viewer(ANONYMOUS, bad_token=True)


def csrf_token(request: Request) -> str:
    """This browser's CSRF token (made on first use, stored by `render`)."""
    token = request.cookies.get(CSRF_COOKIE) or getattr(request.state, "new_csrf", None)
    if not token:
        token = secrets.token_urlsafe(24)
        request.state.new_csrf = token
    return str(token)


def check_csrf(request: Request) -> None:
    """Refuse a form whose CSRF token (in its action URL's `csrf` parameter, so that it is
    read before the body) does not match this browser's token."""
    expected = request.cookies.get(CSRF_COOKIE)
    submitted = request.query_params.get("csrf", "")
    if not expected or not submitted or not hmac.compare_digest(expected, submitted):
        raise BadRequest("this form has expired or came from another site; go back, reload "
                         "the page and submit it again")


#: Forms anyone may post (with the CSRF token): signing in, and out.
_OPEN_FORMS = ("/signin", "/signout")
_UPLOAD_FORM = "/arena/collections/upload"


class WebGate:
    """Form posts to the pages: the CSRF token and a signed-in viewer, checked before the
    body is read (guard.py); a small bound on every form but the archive upload."""

    def __init__(self, settings: Settings):
        self.settings = settings

    def applies(self, path: str) -> bool:
        return not path.startswith(("/api/", "/static/"))

    def limit(self, path: str) -> int:
        if path == _UPLOAD_FORM:
            return self.settings.upload_max_bytes + ENVELOPE_BYTES
        return self.settings.body_max_bytes

    async def check(self, request: Request) -> None:
        check_csrf(request)
        viewer = await run_in_threadpool(get_viewer, request)
        if request.url.path not in _OPEN_FORMS and not viewer.signed_in:
            raise Unauthorized("this needs you to sign in with your API token; your form was "
                               "not sent")
        request.state.viewer = viewer

    def refuse(self, request: Request, exc: ServiceError) -> Response:
        return error_page(request, exc.status_code, exc.message)


def _set_cookies(request: Request, response: Response, viewer: Viewer | None) -> None:
    new = getattr(request.state, "new_csrf", None)
    if new:
        response.set_cookie(CSRF_COOKIE, new, httponly=True, samesite="lax")
    if viewer is not None and viewer.bad_token:
        response.delete_cookie(SESSION_COOKIE)
    if request.cookies.get(OLD_TOKEN_COOKIE):  # the raw token, as sign-in kept it before
        response.delete_cookie(OLD_TOKEN_COOKIE)
    if request.cookies.get(FLASH_COOKIE):
        response.delete_cookie(FLASH_COOKIE)


def _read_flash(request: Request) -> dict[str, str] | None:
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(raw.encode()).decode())
    except ValueError:
        return None
    if isinstance(data, dict) and isinstance(data.get("msg"), str):
        return {"kind": str(data.get("kind", "info")), "msg": data["msg"]}
    return None


def render(request: Request, template: str, viewer: Viewer, status_code: int = 200,
           error: str | None = None, **context: Any) -> HTMLResponse:
    """Render a page template with the viewer, CSRF token and any flash message
    (`error`, when given, is shown as one instead of a saved message)."""
    flash = {"kind": "error", "msg": error} if error else _read_flash(request)
    if viewer.bad_token and flash is None:
        flash = {"kind": "error", "msg": "Your sign-in has ended (it expired, or it was "
                 "signed out elsewhere). Sign in again with a current token."}
    response = templates.TemplateResponse(
        request, template,
        {"viewer": viewer, "csrf": csrf_token(request), "flash": flash, **context},
        status_code=status_code,
    )
    _set_cookies(request, response, viewer)
    return response


def redirect(url: str, flash: str | None = None, kind: str = "info") -> RedirectResponse:
    """A 303 redirect (POST -> GET), optionally carrying a flash message."""
    response = RedirectResponse(url, status_code=303)
    if flash:
        raw = json.dumps({"kind": kind, "msg": flash[:1500]}).encode()
        response.set_cookie(FLASH_COOKIE, base64.urlsafe_b64encode(raw).decode(),
                            httponly=True, samesite="lax", max_age=60)
    return response


_ADVICE = {
    400: "Check what you entered and try again.",
    401: "Sign in with your API token to do this.",
    403: "Your role does not allow this. Ask an editor or admin if you think it should.",
    404: "It may have been removed, or the link is wrong. Start again from the Arena page.",
    409: "The current state does not allow this; reload the page to see it.",
    413: "The upload is too large.",
    429: "Wait a little and try again.",
}


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    """A readable HTML error page: what went wrong and what to do next."""
    try:
        viewer = get_viewer(request)
    except Exception:  # the database itself may be what failed
        viewer = Viewer(ANONYMOUS)
    return render(request, "error.html", viewer, status_code=status, status=status,
                  message=message, advice=_ADVICE.get(status, "Try again later."))


class PageRoute(APIRoute):
    """A route whose service errors and bad form input become HTML error pages."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        original = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await original(request)
            except ServiceError as exc:
                return error_page(request, exc.status_code, exc.message)
            except RequestValidationError as exc:
                fields = ", ".join(".".join(str(p) for p in e.get("loc", ())[1:])
                                   for e in exc.errors())
                return error_page(request, 400, f"the form is missing or has a bad value "
                                  f"for: {fields or 'a field'}")

        return handler
