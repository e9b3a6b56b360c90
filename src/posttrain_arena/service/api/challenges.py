"""Challenge and leaderboard routes."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request, Response

from posttrain_arena.service import challenges as svc
from posttrain_arena.service.api.deps import DbDep, PrincipalDep
from posttrain_arena.service.db import Database
from posttrain_arena.service.fastreads import KnownReads
from posttrain_arena.service.leaderboard import leaderboard
from posttrain_arena.service.results import list_results
from posttrain_arena.service.schemas import (
    ChallengeCreate,
    ChallengeOut,
    HealthUpdate,
    Leaderboard,
    ResultOut,
)

router = APIRouter(prefix="/api/challenges", tags=["challenges"])


@router.get("", response_model=list[ChallengeOut])
def list_challenges(db: DbDep) -> list[ChallengeOut]:
    """Every challenge (the sealed suite shows as hash and domain counts only)."""
    with db.read() as s:
        return [svc.to_out(c) for c in svc.list_challenges(s)]


@router.post("", response_model=ChallengeOut, status_code=201)
def create(body: ChallengeCreate, principal: PrincipalDep, db: DbDep) -> ChallengeOut:
    """Create a challenge (admins)."""
    with db.write() as s:
        return svc.to_out(svc.create_challenge(s, principal, body))


@router.get("/{ref}", response_model=ChallengeOut)
def get(ref: str, db: DbDep) -> ChallengeOut:
    """One challenge by slug or id."""
    with db.read() as s:
        return svc.to_out(svc.get_challenge(s, ref))


@router.post("/{ref}/health", response_model=ChallengeOut)
def set_health(ref: str, body: HealthUpdate, principal: PrincipalDep, db: DbDep
               ) -> ChallengeOut:
    """Open or pause a challenge (admins)."""
    with db.write() as s:
        return svc.to_out(svc.set_health(s, principal, ref, body))


@router.get("/{ref}/leaderboard", response_model=Leaderboard)
async def get_leaderboard(
    ref: str, request: Request,
    limit: int = Query(100, ge=1, le=1000, description="Ranked entries per page"),
    offset: int = Query(0, ge=0, description="Ranked entries to skip, best first"),
) -> Response:
    """Collections ranked by mean change over accepted runs; rejected ones unranked."""
    db: Database = request.app.state.db

    def compute() -> bytes:
        with db.read() as s:
            return leaderboard(s, ref, limit, offset).model_dump_json().encode()

    key = ("leaderboard", ref, limit, offset)
    tables = ("challenges", "collections", "results", "reviews")
    cache = request.app.state.read_cache

    async def answer() -> bytes:
        data: bytes = await cache.get(key, tables, compute)
        return data

    # the same for every caller: later anonymous reads of this address skip the framework
    known: KnownReads = request.app.state.known_reads
    return await known.serve(request, answer)


@router.get("/{ref}/results", response_model=list[ResultOut])
def results(ref: str, db: DbDep, limit: int = 100) -> list[ResultOut]:
    """Collected results of a challenge with their review status, newest first."""
    with db.read() as s:
        return list_results(s, svc.get_challenge(s, ref).id, min(limit, 500))
