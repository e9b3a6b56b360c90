"""The FastAPI application: `create_app(settings)`.

Starting the app creates the data directory, migrates the database to the newest schema
and makes sure the budget row exists. Web pages, when the `service.web` package is
present, register themselves through its `register(app)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import importlib.util
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from posttrain_arena import __version__
from posttrain_arena.service.api import api_router
from posttrain_arena.service.api.gate import ApiGate, error_response
from posttrain_arena.service.auth import Identity
from posttrain_arena.service.budget import ensure_budget
from posttrain_arena.service.config import Settings
from posttrain_arena.service.db import Database
from posttrain_arena.service.errors import ServiceError
from posttrain_arena.service.fastreads import KnownReads
from posttrain_arena.service.guard import WriteGuard
from posttrain_arena.service.lifecycle import watchdog
from posttrain_arena.service.migrations import upgrade
from posttrain_arena.service.readcache import ReadCache
from posttrain_arena.service.sessions import Sessions, session_key
from posttrain_arena.service.whoami import external_checker


def open_database(settings: Settings) -> Database:
    """Create the data directory, connect, migrate, and ensure the budget row."""
    settings.ensure_dirs()
    db = Database(settings.resolved_database_url)
    upgrade(db.engine)
    with db.write() as session:
        ensure_budget(session, settings.budget_cap)
    return db


log = logging.getLogger(__name__)


async def _watchdog_loop(db: Database, settings: Settings) -> None:
    """Requeue or fail stuck runs even when no worker is polling."""
    def once() -> None:
        with db.write() as session:
            for action in watchdog(session, settings):
                log.warning("watchdog: run %s %s: %s", action.run_id, action.action,
                            action.reason)

    while True:
        await asyncio.sleep(settings.watchdog_interval_sec)
        try:
            await asyncio.to_thread(once)
        except Exception:  # the database may be briefly unavailable; try next time
            log.exception("watchdog pass failed")


class ArenaApp(FastAPI):
    """FastAPI with the cached reads that the routes remembered answered in front of it,
    before the framework's own layers (fastreads.py): most of the work of such a read is
    otherwise the framework's."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        known: KnownReads = self.state.known_reads
        if not await known.answer(scope, receive, send):
            await super().__call__(scope, receive, send)


def create_app(settings: Settings | None = None, db: Database | None = None) -> FastAPI:
    """The Arena app for `settings` (default: from the environment)."""
    settings = settings or Settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # What exists now (modules, the app, its routes and schemas) lives as long as the
        # process. Moving it out of the collector's generations keeps each full collection
        # from rescanning it mid-request: those pauses were the slowest 1% of reads
        # (benchmarks/bench_service.py: p99 about 100 ms before, under 35 ms after).
        gc.collect()
        gc.freeze()
        task = None
        if settings.watchdog_interval_sec > 0:
            task = asyncio.create_task(_watchdog_loop(app.state.db, settings))
        yield
        app.state.read_cache.close()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app = ArenaApp(
        lifespan=lifespan,
        title="PostTrain Arena",
        version=__version__,
        description="Challenges, collections, runs, budget, review, leaderboard and board. "
        "Headless use: see /AGENTS.md.",
    )
    app.state.settings = settings
    app.state.known_reads = KnownReads()  # cached reads the routes remembered
    app.state.db = db or open_database(settings)
    app.state.read_cache = ReadCache(app.state.db)
    app.state.identity = Identity(
        app.state.db,
        external_checker(settings.external_auth, settings.external_auth_url,
                         settings.external_auth_cache_sec, settings.external_auth_rate,
                         settings.external_auth_timeout_sec),
        tuple(settings.external_allowlist))
    app.state.sessions = Sessions(app.state.db, session_key(settings), settings.session_ttl_sec)

    @app.exception_handler(ServiceError)
    async def _service_error(_request: Request, exc: ServiceError) -> JSONResponse:
        return error_response(exc)

    # checked before any write's body is read (guard.py); the web package adds its gate
    app.state.write_gates = [ApiGate(settings)]
    app.add_middleware(WriteGuard, gates=lambda: app.state.write_gates)
    app.include_router(api_router())
    if importlib.util.find_spec("posttrain_arena.service.web") is not None:
        importlib.import_module("posttrain_arena.service.web").register(app)
    return app
