"""The HTTP API: thin FastAPI routers over the service functions."""

from __future__ import annotations

from fastapi import APIRouter


def api_router() -> APIRouter:
    """Every API route, under /api (plus /AGENTS.md)."""
    from posttrain_arena.service.api import board, challenges, collections, runs, system

    router = APIRouter()
    for module in (system, challenges, collections, runs, board):
        router.include_router(module.router)
    return router
