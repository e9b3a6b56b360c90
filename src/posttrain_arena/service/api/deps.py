"""Dependencies shared by the routes: the database, settings and the calling principal."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request
from starlette.concurrency import run_in_threadpool

from posttrain_arena.service.auth import Principal, authenticate
from posttrain_arena.service.config import Settings
from posttrain_arena.service.db import Database

TOKEN_COOKIE = "arena_token"


# The dependencies are coroutines: FastAPI runs a plain function dependency in a worker
# thread, a hop that every request (anonymous reads included) would pay.


async def get_db(request: Request) -> Database:
    """The app's database."""
    db: Database = request.app.state.db
    return db


async def get_settings(request: Request) -> Settings:
    """The app's settings."""
    settings: Settings = request.app.state.settings
    return settings


def bearer_token(request: Request, authorization: str | None) -> str | None:
    """The token from `Authorization: Bearer ...`, else from the web sign-in cookie."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        return value.strip() if scheme.lower() == "bearer" else authorization.strip()
    return request.cookies.get(TOKEN_COOKIE)


async def get_principal(
    request: Request,
    db: Annotated[Database, Depends(get_db)],
    authorization: Annotated[str | None, Header(description="Bearer TOKEN")] = None,
) -> Principal:
    """Who is calling (anonymous without a token; 401 for a bad one). Only a token
    needs the database, and only then does the check go to a worker thread."""
    token = bearer_token(request, authorization)
    if not token:
        return Principal()
    external = request.app.state.external_checker

    def check() -> Principal:
        with db.write() if external is not None else db.read() as session:
            return authenticate(session, token, external)

    return await run_in_threadpool(check)


DbDep = Annotated[Database, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
