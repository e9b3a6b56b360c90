"""Pages: the collaboration board at `/` (threads, messages, posting) and sign-in/out."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode, urlsplit, urlunsplit

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from posttrain_arena.service import board as svc
from posttrain_arena.service.auth import Identity
from posttrain_arena.service.errors import ServiceError, Unauthorized
from posttrain_arena.service.schemas import MessageCreate, ThreadCreate
from posttrain_arena.service.sessions import SESSION_COOKIE, Sessions
from posttrain_arena.service.views import user_names
from posttrain_arena.service.web.page import (
    PageRoute,
    Viewer,
    db_of,
    get_viewer,
    redirect,
    render,
)

router = APIRouter(route_class=PageRoute, include_in_schema=False)
ViewerDep = Annotated[Viewer, Depends(get_viewer)]


def _form_problem(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors():
        field = ".".join(str(p) for p in e["loc"]) or "input"
        parts.append(f"{field}: {e['msg']}")
    return "; ".join(parts)


def _failure(exc: ValidationError | ServiceError) -> tuple[str, int]:
    """What went wrong with a post, and the status code the page comes back with."""
    if isinstance(exc, ValidationError):
        return _form_problem(exc), 400
    return exc.message, exc.status_code


@router.get("/", response_class=HTMLResponse)
def board_page(request: Request, viewer: ViewerDep) -> Response:
    """The board: threads, most recently active first, and a form to open one."""
    return _board(request, viewer)


@router.get("/board/{thread_id}", response_class=HTMLResponse)
def thread_page(thread_id: int, request: Request, viewer: ViewerDep) -> Response:
    """One thread with its messages and a reply form."""
    return _thread(thread_id, request, viewer)


def _board(request: Request, viewer: Viewer, status_code: int = 200, error: str | None = None,
           draft: dict[str, str] | None = None) -> Response:
    """The board page; a post that failed comes back here with its error and the text as
    typed (`draft`). Not a route of its own: error text never comes from the URL."""
    with db_of(request).read() as s:
        threads = svc.list_threads(s, limit=100)
        names = user_names(s, (t.author_id for t in threads))
    return render(request, "board.html", viewer, status_code, error, threads=threads,
                  names=names, settings=request.app.state.settings, draft=draft or {})


def _thread(thread_id: int, request: Request, viewer: Viewer, status_code: int = 200,
            error: str | None = None, draft: dict[str, str] | None = None) -> Response:
    """A thread's page; after a failed reply, with its error and the reply as typed."""
    with db_of(request).read() as s:
        thread = svc.thread_detail(s, thread_id)
        names = user_names(s, [thread.author_id])
    return render(request, "thread.html", viewer, status_code, error, thread=thread,
                  names=names, draft=draft or {})


@router.post("/board/threads")
def new_thread(request: Request, viewer: ViewerDep, title: Annotated[str, Form()] = "",
               body: Annotated[str, Form()] = ""
               ) -> Response:
    """Open a thread; rate-limit and input problems come back as a message on the board."""
    try:
        data = ThreadCreate(title=title.strip(), body=body.strip())
        with db_of(request).write() as s:
            thread = svc.create_thread(s, request.app.state.settings, viewer.principal, data)
            thread_id = thread.id
    except (ValidationError, ServiceError) as exc:
        why, status = _failure(exc)
        return _board(request, viewer, status, f"The thread was not posted: {why}. "
                      "Your text is still in the form below.", {"title": title, "body": body})
    return redirect(f"/board/{thread_id}", "Thread posted.")


@router.post("/board/{thread_id}/messages")
def reply(thread_id: int, request: Request, viewer: ViewerDep,
          body: Annotated[str, Form()] = "") -> Response:
    """Reply in a thread."""
    back = f"/board/{thread_id}"
    try:
        data = MessageCreate(body=body.strip())
        with db_of(request).write() as s:
            svc.post_message(s, request.app.state.settings, viewer.principal, thread_id, data)
    except (ValidationError, ServiceError) as exc:
        if isinstance(exc, ServiceError) and exc.status_code == 404:
            raise
        why, status = _failure(exc)
        return _thread(thread_id, request, viewer, status, f"The reply was not posted: "
                       f"{why}. Your text is still in the form below.", {"body": body})
    return redirect(back, "Reply posted.")


@router.get("/signin", response_class=HTMLResponse)
def signin_page(request: Request, viewer: ViewerDep, next: str = "/arena") -> Response:
    """The sign-in form (an API token)."""
    return render(request, "signin.html", viewer, next=_safe_next(next))


def _safe_next(url: str) -> str:
    """A redirect target that stays on this site: a path (with its query and fragment),
    never a scheme or host. Browsers read `/\\host` and `//host` as another site, and
    drop tabs and newlines, so a backslash or control character anywhere refuses it."""
    if (not url.startswith("/") or url.startswith("//") or "\\" in url
            or any(ord(c) < 0x21 or ord(c) == 0x7F for c in url)):
        return "/arena"
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not parts.path.startswith("/"):
        return "/arena"
    return urlunsplit(("", "", parts.path, parts.query, parts.fragment))


def _signin_again(target: str, message: str) -> Response:
    return redirect(f"/signin?{urlencode({'next': target})}", message, "error")


@router.post("/signin")
def signin(request: Request, token: Annotated[str, Form()] = "",
           next: Annotated[str, Form()] = "/arena") -> Response:
    """Check the token and keep it in an HttpOnly cookie."""
    token = token.strip()
    target = _safe_next(next)
    if not token:
        return _signin_again(target, "Paste your API token to sign in.")
    identity: Identity = request.app.state.identity
    sessions: Sessions = request.app.state.sessions
    try:
        principal = identity.identify(token)
        if principal.anonymous:
            raise Unauthorized("the token is not valid")
    except ServiceError as exc:
        return _signin_again(target, f"Sign-in failed: {exc.message}")
    cookie, ttl = sessions.start(principal)
    response: RedirectResponse = redirect(
        target, f"Signed in as {principal.name} ({principal.role}).")
    response.set_cookie(SESSION_COOKIE, cookie, httponly=True, samesite="lax",
                        secure=request.url.scheme == "https", max_age=ttl)
    return response


@router.post("/signout")
def signout(request: Request) -> Response:
    """End the session (revoked on the server, so a copy of the cookie ends too)."""
    sessions: Sessions = request.app.state.sessions
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        sessions.end(cookie)
    response = redirect("/", "Signed out.")
    response.delete_cookie(SESSION_COOKIE)
    return response
