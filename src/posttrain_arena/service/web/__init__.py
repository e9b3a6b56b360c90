"""The web app: server-rendered pages over the same service functions as the API.

`/` is the collaboration board, `/arena` the challenges, collections, runs, leaderboards
and budget; `/signin` keeps an API token in an HttpOnly cookie. Templates are Jinja2,
the CSS and the small script are served from `/static` (nothing from a CDN), and the
leaderboard plot is inline SVG drawn on the server. `create_app` calls `register(app)`.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from posttrain_arena.service.web.page import HERE, WebGate, error_page


def _wants_html(request: Request) -> bool:
    path = request.url.path
    if path.startswith(("/api/", "/static/")) or path in ("/openapi.json", "/AGENTS.md"):
        return False
    return "text/html" in request.headers.get("accept", "")


def register(app: FastAPI) -> None:
    """Mount the pages, the static files, and HTML error pages for browsers."""
    from posttrain_arena.service.web import arena, board, runs

    app.state.write_gates.append(WebGate(app.state.settings))
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    for module in (board, arena, runs):
        app.include_router(module.router)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if _wants_html(request):
            message = ("there is no page at this address" if exc.status_code == 404
                       else str(exc.detail))
            return error_page(request, exc.status_code, message)
        return await http_exception_handler(request, exc)
