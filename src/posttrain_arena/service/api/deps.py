"""Dependencies shared by the routes: the database, settings and the calling principal."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request
from starlette.concurrency import run_in_threadpool

from posttrain_arena.service.api.gate import bearer_token
from posttrain_arena.service.auth import Identity, Principal
from posttrain_arena.service.config import Settings
from posttrain_arena.service.db import Database

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


async def get_principal(
    request: Request,
    authorization: Annotated[str | None, Header(description="Bearer TOKEN")] = None,
) -> Principal:
    """Who is calling: from the `Authorization` header only (anonymous without one; 401
    for a bad one). A write's caller was identified before its body was read (api/gate.py).
    Only a token needs the database, and only then does the check go to a worker thread."""
    known = getattr(request.state, "principal", None)
    if isinstance(known, Principal):
        return known
    token = bearer_token(authorization)
    if not token:
        return Principal()
    identity: Identity = request.app.state.identity
    return await run_in_threadpool(identity.identify, token)


DbDep = Annotated[Database, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
