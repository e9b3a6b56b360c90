"""The HTTP API: thin FastAPI routers over the service functions."""

from __future__ import annotations

from fastapi import APIRouter, Depends


def api_router() -> APIRouter:
    """Every API route, under /api (plus /AGENTS.md).

    Every route resolves the caller, so a bad token is a 401 even on public reads.
    """
    from posttrain_arena.service.api import board, challenges, collections, runs, system
    from posttrain_arena.service.api.deps import get_principal

    router = APIRouter(dependencies=[Depends(get_principal)])
    for module in (system, challenges, collections, runs, board):
        router.include_router(module.router)
    return router
